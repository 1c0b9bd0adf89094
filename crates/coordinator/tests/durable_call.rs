//! The durable call end to end through the coordinator service, on the in-memory store: the
//! owner posts a message (`Coordinator::post`), the decision reserves a reasoner call in
//! transaction 1 (operation row, reservation and this process's lease, B1), the call runs
//! under heartbeats (D3), and the Room decides what became of it in transaction 2 — a
//! returned call's receipt committed with the decision that settles it, fenced on its
//! generation (B3, D2). Every way a call can end, and T3 at the call sink.
//!
//! Ported from `crates/workflows/tests/durable_call.rs`, which drove a second copy of the
//! call loop outside the service; the facts it asserted are asserted here on what the store
//! holds after
//! `wait_idle` (the operation rows, the Room, the ledger and the record of commits kept by
//! [`Interposed`]), since the call's end is no longer returned to the caller.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use agentroom_coordinator::{CoordinatorConfig, InputId};
use agentroom_ports::domain::engine::MembershipChange;
use agentroom_ports::domain::ids::{OperationId, PrincipalId};
use agentroom_ports::domain::ledger::{LedgerEntry, Overrun};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::room::Role;
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::domain::state::{CallRole, OperationState};
use agentroom_ports::{
    LeaseGrant, OperationStatus, ReceiptWrite, Revision, RoomStore, WorkflowStore,
};
use agentroom_workflows::{AbortReason, CallOutcome};
use support::calls::{
    Behaviour, Interposed, Room, SeenCommit, Step, TestProvider, answer, ms, rows_of, runner,
    within,
};

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

/// The coordinator's settings: runner `name` holding leases of `lease_ms`.
fn config(name: &str, lease_ms: u64) -> CoordinatorConfig {
    CoordinatorConfig::new(runner(name, lease_ms))
}

fn reserved(op: OperationId, micros: i64) -> LedgerEntry {
    LedgerEntry::Reserved {
        op,
        amount: UsdMicros::new(micros),
    }
}

/// A reservation of `micros` settled with nothing charged: the whole of it released (B3).
fn settled_at_zero(op: OperationId, micros: i64) -> LedgerEntry {
    LedgerEntry::Settled {
        op,
        reserved: UsdMicros::new(micros),
        charged: UsdMicros::ZERO,
    }
}

/// The successful commit that made `revision`.
fn commit_at(commits: &[SeenCommit], revision: Revision) -> SeenCommit {
    commits
        .iter()
        .find(|c| c.result == Ok(revision))
        .cloned()
        .unwrap_or_else(|| panic!("no commit made {revision}: {commits:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_b3_the_reservation_is_held_during_the_call_and_settled_after() {
    within(async {
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 400,
            delay: ms(5),
        });
        let mut room = Room::new("durable", Arc::clone(&provider), config("runner-a", 300)).await;
        *provider.observe.lock().unwrap() = Some(Arc::clone(&room.store));
        let before = room.load().await;
        let (op, reserving) = room.post("what is six times seven?").await;
        room.coordinator.wait_idle().await;
        assert_eq!(reserving, before.revision.next(), "transaction 1");

        // During the call: the operation row and its reservation are committed (B1), leased
        // to this process at the creator's generation.
        let observed = provider.observed.lock().unwrap().clone();
        assert_eq!(observed.len(), 1);
        let (record, during) = &observed[0];
        assert_eq!(record.status, OperationStatus::InFlight);
        assert_eq!(record.generation, 1, "the creator's own lease");
        assert_eq!(record.lease_owner.as_deref(), Some("runner-a"));
        assert_eq!(during.revision, reserving);
        let held = during.state.ledger().balances();
        assert_eq!(
            held.reserved,
            UsdMicros::new(1_000),
            "reserved before the call"
        );
        assert_eq!(held.spent, UsdMicros::ZERO);
        assert_eq!(
            during.state.ledger().held_by(op),
            Some(UsdMicros::new(1_000))
        );

        let stored = room.load().await;
        assert_eq!(stored.revision, reserving.next(), "two transactions");
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::new(400), "actual charged (B3)");
        assert_eq!(balances.reserved, UsdMicros::ZERO, "the rest released (B3)");
        let request = provider.requests.lock().unwrap()[0].clone();
        assert_eq!(request.op, op);
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        assert_eq!(record.receipt, Some(answer(&request, 400)));
        assert_eq!(
            rows_of(&room.ledger().await, op),
            vec![
                reserved(op, 1_000),
                LedgerEntry::Settled {
                    op,
                    reserved: UsdMicros::new(1_000),
                    charged: UsdMicros::new(400),
                },
            ]
        );
        // Transaction 2: the receipt went into the commit of the decision it settles, which
        // marked the operation applied; it was never recorded on its own.
        let settling = commit_at(&room.store.commits(), stored.revision);
        assert_eq!(settling.input, "call_returned");
        assert_eq!((settling.receipts, settling.applied), (vec![op], vec![op]));
        assert!(room.store.receipts_alone().is_empty());
        assert_eq!(provider.calls(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_heartbeats_keep_the_lease_alive_through_a_call_longer_than_the_lease() {
    within(async {
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 300,
            delay: ms(400),
        });
        let mut room = Room::new("heartbeats", Arc::clone(&provider), config("runner-a", 60)).await;
        // Another runner tries to claim every expired lease while the call runs.
        let claimer = {
            let store = Arc::clone(&room.store);
            tokio::spawn(async move {
                let mut stolen = Vec::new();
                let started = Instant::now();
                while started.elapsed() < ms(350) {
                    let thief = LeaseGrant {
                        owner: "thief".to_owned(),
                        duration: ms(60_000),
                    };
                    stolen.extend(store.claim_expired(thief, 10).await.unwrap());
                    tokio::time::sleep(ms(5)).await;
                }
                stolen
            })
        };
        let (op, _) = room.post("a long one").await;
        room.coordinator.wait_idle().await;
        let stolen = claimer.await.unwrap();
        assert!(stolen.is_empty(), "the lease never expired: {stolen:?}");
        let record = room.record(op).await;
        assert_eq!(
            (record.status, record.generation),
            (OperationStatus::Applied, 1)
        );
        assert_eq!(room.balances().await.spent, UsdMicros::new(300));
        assert_eq!(provider.calls(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_cancellation_aborts_the_call_cooperatively_and_the_reservation_is_held() {
    within(async {
        let provider = TestProvider::new(Behaviour::UntilAborted);
        let mut room = Room::new("cancel", Arc::clone(&provider), config("runner-a", 60)).await;
        let started = Instant::now();
        let (op, reserving) = room.post("stop me").await;
        // Another writer sets the operation's cancel flag while it runs, as the old test did
        // (an owner message's interpretation serves no objective a control input could name).
        let canceller = {
            let store = Arc::clone(&room.store);
            let room_id = room.id();
            tokio::spawn(async move {
                tokio::time::sleep(ms(30)).await;
                Room::cancel_elsewhere(&store, &room_id, op).await;
            })
        };
        room.coordinator.wait_idle().await;
        canceller.await.unwrap();
        assert!(
            started.elapsed() < ms(1_000),
            "aborted at the next heartbeat"
        );
        assert_eq!(provider.aborts(), vec![AbortReason::Cancelled]);
        // Asked at once what the aborted call did (D3); nobody knows: it stays uncertain.
        assert_eq!(room.reconciler.asked(), 1);

        // Transaction 2 met the cancellation's commit, reloaded and decided again.
        let commits = room.store.commits();
        let uncertain: Vec<&SeenCommit> = commits
            .iter()
            .filter(|c| c.input == "call_uncertain")
            .collect();
        assert_eq!(uncertain.len(), 2, "{commits:#?}");
        assert!(uncertain[0].conflicted(), "{:?}", uncertain[0]);
        assert_eq!(uncertain[1].expected, reserving.next(), "the cancel commit");
        let stored = room.load().await;
        assert_eq!(stored.revision, reserving.next().next());
        assert_eq!(
            stored.state.operation(op).unwrap().state(),
            OperationState::Uncertain
        );
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.reserved, UsdMicros::new(1_000), "held (B3)");
        assert_eq!(balances.uncertain, UsdMicros::new(1_000));
        assert_eq!(
            rows_of(&room.ledger().await, op),
            vec![reserved(op, 1_000), LedgerEntry::MarkedUncertain { op }]
        );
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Uncertain);
        assert!(record.cancel_requested);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_an_uncertain_call_is_marked_uncertain_and_never_replayed() {
    within(async {
        let provider = TestProvider::script(vec![Step::Outcome(CallOutcome::Uncertain {
            reason: "connection reset after sending".to_owned(),
        })]);
        let mut room = Room::new("uncertain", Arc::clone(&provider), config("runner-a", 60)).await;
        let (op, _) = room.post("maybe").await;
        room.coordinator.wait_idle().await;
        // The old test also checked the reason the runner gave ("connection reset after
        // sending"); it is only traced now, nothing durable holds it. What is durable: the
        // row is uncertain and the Room holds the whole reservation.
        assert_eq!(room.record(op).await.status, OperationStatus::Uncertain);
        let stored = room.load().await;
        assert_eq!(
            stored.state.operation(op).unwrap().state(),
            OperationState::Uncertain
        );
        let balances = room.assert_ledger_replays().await;
        assert_eq!(
            balances.uncertain,
            UsdMicros::new(1_000),
            "reservation held"
        );
        assert_eq!(balances.reserved, UsdMicros::new(1_000));
        assert_eq!(room.reconciler.asked(), 0, "not cancelled: recovery asks");

        // Nothing ever calls it again: not a claim once its lease is over, not recovery —
        // in this process, or in the next one after a restart.
        tokio::time::sleep(ms(80)).await;
        let report = room.coordinator.recover().await.unwrap();
        assert_eq!(report.uncertain, vec![op], "{report:?}");
        assert!(report.claimed.is_empty(), "{report:?}");
        let restarted = room.another(config("runner-b", 60));
        let report = restarted.recover().await.unwrap();
        assert_eq!(report.uncertain, vec![op], "{report:?}");
        restarted.wait_idle().await;
        room.coordinator.wait_idle().await;
        assert_eq!(provider.calls(), 1, "never replayed");
        assert_eq!(
            room.reconciler.asked(),
            2,
            "the reconciler is asked instead"
        );
        let record = room.record(op).await;
        assert_eq!(
            (record.status, record.recovery_attempts),
            (OperationStatus::Uncertain, 2)
        );
        assert_eq!(room.balances().await.uncertain, UsdMicros::new(1_000));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_not_sent_is_retried_with_backoff_inside_its_lease_then_answered() {
    within(async {
        let not_sent = |retry_after| {
            Step::Outcome(CallOutcome::NotSent {
                retry_after,
                reason: "connection refused".to_owned(),
            })
        };
        let provider = TestProvider::script(vec![not_sent(None), not_sent(Some(ms(30)))]);
        let mut room = Room::new("retry", Arc::clone(&provider), config("runner-a", 60)).await;
        let started = Instant::now();
        let (op, _) = room.post("flaky").await;
        room.coordinator.wait_idle().await;
        assert!(
            started.elapsed() >= ms(35),
            "backed off 5 ms, then the asked-for 30 ms"
        );
        assert_eq!(
            provider.ops(),
            vec![op, op, op],
            "one operation, three tries"
        );
        let record = room.record(op).await;
        assert_eq!(record.generation, 1, "inside its own lease");
        assert_eq!(record.status, OperationStatus::Applied);
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::new(400));
        assert_eq!(balances.reserved, UsdMicros::ZERO);
    })
    .await;
}

/// The commit that settled `op` (marked it applied).
fn settled_by(commits: &[SeenCommit], op: OperationId) -> SeenCommit {
    commits
        .iter()
        .find(|c| c.result.is_ok() && c.applied.contains(&op))
        .cloned()
        .unwrap_or_else(|| panic!("nothing settled {op}: {commits:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o11_an_unreachable_provider_waits_within_the_window_then_holds_the_message_without_consuming_an_interpretation()
 {
    within(async {
        let refused = Step::Outcome(CallOutcome::NotSent {
            retry_after: None,
            reason: "connection refused".to_owned(),
        });
        // Four times nothing reached the provider (the retries bound of the test's runner is
        // three), then it answers.
        let provider = TestProvider::script(vec![refused; 4]);
        let mut room = Room::new("give-up", Arc::clone(&provider), config("runner-a", 60)).await;
        let (op, _) = room.post("unreachable").await;
        room.coordinator.wait_idle().await;
        let ops = provider.ops();
        assert_eq!(
            ops, [op; 4],
            "one call and three retries, under the same id"
        );
        // B3: never charged, released, the row applied.
        let stored = room.load().await;
        assert_eq!(
            stored.state.ledger().held_by(op),
            None,
            "nothing sent: released"
        );
        let rows = room.ledger().await;
        assert_eq!(
            rows_of(&rows, op),
            vec![reserved(op, 1_000), settled_at_zero(op, 1_000)],
            "nothing charged"
        );
        assert_eq!(room.record(op).await.status, OperationStatus::Applied);
        let commits = room.store.commits();
        assert!(
            commits
                .iter()
                .any(|c| c.result.is_ok() && c.input == "call_waiting"),
            "the Room recorded that the call waited: {commits:#?}"
        );
        // O11: no interpretation consumed and none issued; the message waits, naming why.
        let settling = settled_by(&commits, op);
        assert_eq!(settling.input, "call_failed");
        assert!(settling.created.is_empty(), "{settling:?}");
        let (event, pending) = stored.state.intake().iter().next().expect("still pending");
        assert_eq!(pending.attempts(), 0);
        assert!(pending.held().unwrap().contains("connection refused"));
        let history = room
            .store
            .history(&room.id(), Revision::FIRST, 100)
            .await
            .unwrap();
        let entry = history
            .iter()
            .find(|e| Ok(e.revision) == settling.result)
            .unwrap();
        assert!(
            entry.log.iter().any(|l| l
                .message
                .contains("never reached its provider: connection refused")),
            "{entry:#?}"
        );
        assert!(
            !entry.log.iter().any(|l| l.rule == Some(Rule::O11)),
            "{entry:#?}"
        );
        // Retried by the owner once the provider is back: answered.
        room.coordinator
            .retry_message(&room.id(), InputId::named("retry"), p("olive"), *event)
            .await
            .unwrap();
        room.coordinator.wait_idle().await;
        let ops = provider.ops();
        assert_eq!(ops.len(), 5, "{ops:?}");
        assert_ne!(ops[4], op);
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::new(400), "only the answer");
        assert_eq!(balances.reserved, UsdMicros::ZERO);
        assert!(room.load().await.state.intake().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_a_refused_call_is_not_retried_and_is_released_at_zero() {
    within(async {
        let provider = TestProvider::script(vec![Step::Outcome(CallOutcome::Refused {
            reason: "HTTP 401 Unauthorized: invalid api key".to_owned(),
        })]);
        let mut room = Room::new("refused", Arc::clone(&provider), config("runner-a", 60)).await;
        let (op, _) = room.post("bad credentials").await;
        room.coordinator.wait_idle().await;
        // Sent once (sending it again cannot help) and no interpretation consumed (O11): the
        // message waits for a person, naming the refusal.
        let ops = provider.ops();
        assert_eq!(ops, [op]);
        let stored = room.load().await;
        assert_eq!(stored.state.ledger().held_by(op), None, "released");
        assert_eq!(
            rows_of(&room.ledger().await, op),
            vec![reserved(op, 1_000), settled_at_zero(op, 1_000)]
        );
        assert_eq!(room.record(op).await.status, OperationStatus::Applied);
        let (_, pending) = stored.state.intake().iter().next().expect("still pending");
        assert!(
            pending.held().unwrap().contains("401 Unauthorized"),
            "{pending:?}"
        );
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::ZERO);
    })
    .await;
}

/// Posts a message whose call waits on the provider's gate; while it waits, another process
/// raises the limit by 5,000 (moving the Room); then the call returns charged 250.
async fn returns_after_another_writer(room: &mut Room) -> (OperationId, Revision) {
    let (op, reserving) = room.post("race me").await;
    room.provider.started.notified().await;
    let other = room.another(config("other", 300));
    other
        .raise_limit(
            &room.id(),
            InputId::named("raise"),
            p("oscar"),
            UsdMicros::new(5_000),
        )
        .await
        .unwrap();
    room.provider.gate.notify_one();
    (op, reserving)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_transaction_2_reloads_and_decides_again_after_a_conflict() {
    within(async {
        let provider = TestProvider::new(Behaviour::Gated { micros: 250 });
        let mut room = Room::new("conflict", provider, config("runner-a", 300)).await;
        let (op, reserving) = returns_after_another_writer(&mut room).await;
        room.coordinator.wait_idle().await;
        let balances = room.assert_ledger_replays().await;
        assert_eq!(
            balances.limit,
            UsdMicros::new(1_005_000),
            "the other commit is kept"
        );
        assert_eq!(balances.spent, UsdMicros::new(250));
        assert_eq!(balances.reserved, UsdMicros::ZERO);
        assert_eq!(room.load().await.revision, reserving.next().next());
        // The receipt's commit lost the compare-and-swap, reloaded and went in with the
        // decision made again, in one commit.
        let commits = room.store.commits();
        let returned: Vec<&SeenCommit> = commits
            .iter()
            .filter(|c| c.input == "call_returned")
            .collect();
        assert_eq!(returned.len(), 2, "{commits:#?}");
        assert!(returned[0].conflicted(), "{:?}", returned[0]);
        assert_eq!(returned[1].expected, reserving.next(), "the raise");
        assert_eq!(
            (&returned[1].receipts, &returned[1].applied),
            (&vec![op], &vec![op])
        );
        assert!(room.store.receipts_alone().is_empty());
        assert_eq!(room.record(op).await.status, OperationStatus::Applied);
    })
    .await;
}

/// D2, where the commit of the receipt with its decision gives up (no retry after a
/// conflict): the receipt is recorded alone, fenced on the generation, and then handed to the
/// Room, which decides it. The old test asserted `CallEnd::ReceiptedOnly` and a separate
/// recovery; the coordinator hands the recorded receipt over at once, so this asserts the
/// store's record of it (a receipt recorded alone, then a commit that applies it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_when_the_combined_commit_gives_up_the_receipt_is_recorded_alone_then_applied() {
    within(async {
        let provider = TestProvider::new(Behaviour::Gated { micros: 250 });
        let config = config("runner-a", 300).with_conflict_retries(0, ms(1));
        let mut room = Room::new("give-up-tx2", provider, config).await;
        let (op, reserving) = returns_after_another_writer(&mut room).await;
        room.coordinator.wait_idle().await;
        let commits = room.store.commits();
        let returned: Vec<&SeenCommit> = commits
            .iter()
            .filter(|c| c.input == "call_returned")
            .collect();
        assert_eq!(returned.len(), 2, "{commits:#?}");
        assert!(returned[0].conflicted(), "{:?}", returned[0]);
        assert_eq!(returned[0].receipts, vec![op]);
        assert_eq!(
            room.store.receipts_alone(),
            vec![(op, 1, ReceiptWrite::Recorded)]
        );
        assert!(returned[1].receipts.is_empty(), "recorded before");
        assert_eq!(returned[1].applied, vec![op]);
        assert_eq!(room.load().await.revision, reserving.next().next());
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        assert_eq!(record.generation, 1);
        let balances = room.assert_ledger_replays().await;
        assert_eq!(
            (balances.spent, balances.reserved, balances.limit),
            (
                UsdMicros::new(250),
                UsdMicros::ZERO,
                UsdMicros::new(1_005_000)
            )
        );
    })
    .await;
}

/// D2, D6: a call returns while the host is stopping; no decision is made after the stop
/// began, so the receipt is recorded alone (fenced on its generation) and the Room keeps the
/// reservation; the next process's recovery hands the receipt to the Room, which applies it
/// — the call is never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_receipt_returned_while_the_host_stops_is_recorded_alone_and_recovery_applies_it() {
    within(async {
        let provider = TestProvider::new(Behaviour::Gated { micros: 250 });
        let mut room = Room::new("stopping", Arc::clone(&provider), config("runner-a", 300)).await;
        let (op, reserving) = room.post("contended").await;
        provider.started.notified().await;
        let stopping = {
            let coordinator = room.coordinator.clone();
            tokio::spawn(async move { coordinator.shutdown(ms(5_000)).await })
        };
        while !room.coordinator.stopping() {
            tokio::task::yield_now().await;
        }
        provider.gate.notify_one();
        let report = stopping.await.unwrap();
        assert!(report.drained, "{report:?}");
        assert!(report.released.is_empty(), "{report:?}");

        let request = provider.requests.lock().unwrap()[0].clone();
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Receipted);
        assert_eq!(record.receipt, Some(answer(&request, 250)));
        assert_eq!(
            room.store.receipts_alone(),
            vec![(op, 1, ReceiptWrite::Recorded)]
        );
        let stored = room.load().await;
        assert_eq!(stored.revision, reserving, "nothing decided after the stop");
        assert_eq!(
            stored.state.operation(op).unwrap().state(),
            OperationState::InFlight
        );
        assert_eq!(room.balances().await.reserved, UsdMicros::new(1_000));

        let next = room.another(config("runner-b", 300));
        let report = next.recover().await.unwrap();
        assert_eq!(report.delivered, vec![op], "{report:?}");
        next.wait_idle().await;
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        let settling = commit_at(&room.store.commits(), room.load().await.revision);
        assert_eq!(settling.input, "call_returned");
        assert_eq!(settling.applied, vec![op]);
        let balances = room.assert_ledger_replays().await;
        assert_eq!(
            (balances.spent, balances.reserved),
            (UsdMicros::new(250), UsdMicros::ZERO)
        );
        assert_eq!(provider.calls(), 1, "never sent again");
    })
    .await;
}

/// B3/B5 (issue 17): a settlement the ledger cannot take (here a usage of `i64::MAX`) is
/// decided once, through the service `serve` runs: the operation is applied and closed with
/// its whole reservation charged, an overrun stops admissions, the result is not used, and
/// recovery delivers nothing again, so the Room's history does not grow without an input.
/// Before, the refusal left the operation open and every recovery pass redelivered the
/// receipt, growing the history forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_b5_a_settlement_the_ledger_refuses_is_decided_once_and_never_redelivered() {
    within(async {
        // A first call spends something, so that the next charge cannot be added.
        let provider = TestProvider::script(vec![Step::Answer(400), Step::Answer(i64::MAX)]);
        let mut room = Room::new(
            "refused-settle",
            Arc::clone(&provider),
            config("runner-r", 300),
        )
        .await;
        let (first, _) = room.post("a fair bill").await;
        room.coordinator.wait_idle().await;
        assert_eq!(room.record(first).await.status, OperationStatus::Applied);
        assert_eq!(room.balances().await.spent, UsdMicros::new(400));

        let (op, _) = room.post("an absurd bill").await;
        room.coordinator.wait_idle().await;
        let record = room.record(op).await;
        assert_eq!(record.status, OperationStatus::Applied, "{record:?}");
        // It went in with the decision that charged the whole reservation and marked it.
        let deciding = commit_at(&room.store.commits(), room.load().await.revision);
        assert_eq!(deciding.input, "call_returned");
        assert_eq!(deciding.receipts, vec![op]);
        assert_eq!(deciding.applied, vec![op], "{deciding:?}");
        let stored = room.load().await;
        assert!(stored.state.operation(op).is_none(), "closed");
        assert!(matches!(
            stored.state.ledger().overrun(),
            Some(Overrun::ChargeRefused { op: o, .. }) if o == op
        ));
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.reserved, UsdMicros::ZERO);
        assert_eq!(
            balances.spent,
            UsdMicros::new(1_400),
            "400 + the whole 1,000 reserved"
        );

        // Recovery passes deliver nothing again: the history stays where it is.
        let before = room.load().await.revision;
        for _ in 0..3 {
            room.coordinator.recover().await.unwrap();
            room.coordinator.wait_idle().await;
        }
        assert_eq!(
            room.load().await.revision,
            before,
            "no history without an input"
        );
        assert_eq!(provider.calls(), 2, "never sent again");
    })
    .await;
}

// --- T3 at the call sink ------------------------------------------------------------------

/// The demo scenario through scripted agents on an [`Interposed`] store: right after the
/// commit that reserves the first call of `role`, another process revokes `principal`'s
/// `member` role (`Coordinator::change_membership`), before the call is sent. Calls of
/// `sent_before` roles were sent before it (their principals held their roles).
async fn revoked_between_reserve_and_send(
    role: CallRole,
    principal: &str,
    member: Role,
    sent_before: &[CallRole],
) {
    use support::{agents, coordinator, owner_event, room_id, room_of, scenario, set_up};

    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let store = Interposed::new();
    let (one, _) = coordinator(
        Arc::clone(&store),
        Arc::clone(&provider),
        catalog.clone(),
        "one",
    );
    set_up(&one, &scenario).await;
    let (other, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "other");
    let owner = scenario.room().unwrap().owner.clone();
    let revoked = p(principal);
    store.after_reserving(role, {
        let revoked = revoked.clone();
        async move {
            other
                .change_membership(
                    &room_id(),
                    InputId::named("revoke"),
                    owner,
                    revoked,
                    member,
                    MembershipChange::Revoke,
                )
                .await
                .unwrap();
        }
    });
    one.post(&owner_event(&scenario, 0)).await.unwrap();
    one.wait_idle().await;

    let request = store.hooked().expect("a call of the role was reserved");
    assert_eq!(request.role, role);
    assert_eq!(request.principal.as_ref(), Some(&revoked));
    let op = request.op;
    // Never sent: the provider never saw it.
    let sent = provider.calls.lock().unwrap().clone();
    assert!(sent.iter().all(|c| c.op != op), "sent: {sent:#?}");
    let stored = store.load(&room_id()).await.unwrap().unwrap();
    assert!(!stored.state.may_be_called(Some(&revoked), role));
    // Settled at zero: its whole reservation released, nothing charged, the row applied.
    let rows = store.ledger(&room_id()).await.unwrap();
    assert_eq!(
        rows_of(&rows, op),
        vec![
            reserved(op, request.reservation.micros()),
            settled_at_zero(op, request.reservation.micros()),
        ]
    );
    let record = store.operation(op).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Applied);
    assert_eq!(record.receipt, None);
    assert!(
        stored
            .state
            .operation(op)
            .is_none_or(|o| !o.state().is_open())
    );
    // A reasoner call names no principal and is sent: the plan came from one.
    assert!(
        sent.iter()
            .any(|c| c.role == CallRole::Reasoner && c.principal.is_none()),
        "sent: {sent:#?}"
    );
    for role in sent_before {
        assert!(
            sent.iter()
                .any(|c| c.role == *role && c.principal.is_some()),
            "no {role:?} call sent: {sent:#?}"
        );
    }
    let balances = stored.state.ledger().balances();
    assert_eq!(
        agentroom_ports::domain::ledger::BudgetLedger::replay(&rows)
            .unwrap()
            .balances(),
        balances
    );
    assert_eq!(balances.reserved, UsdMicros::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_specialist_call_whose_principal_lost_the_role_is_never_sent_and_settled_at_zero() {
    within(revoked_between_reserve_and_send(
        CallRole::Specialist,
        "sam",
        Role::Specialist,
        &[],
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_reviewer_call_whose_principal_lost_the_role_is_never_sent_and_settled_at_zero() {
    within(revoked_between_reserve_and_send(
        CallRole::Reviewer,
        "rita",
        Role::Reviewer,
        &[CallRole::Specialist],
    ))
    .await;
}
