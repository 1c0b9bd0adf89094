//! The durable call end to end on the in-memory store: transaction 1 (operation, reservation
//! and lease), the call under heartbeats, transaction 2 (receipt fenced on the generation and
//! the settled state), and every way a call can end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::domain::ledger::BudgetLedger;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{OperationStatus, RoomStore, SystemClock, WorkflowStore};
use agentroom_workflows::{AbortReason, CallEnd, CallOutcome, DurableCall, DurableOutcome, Runner};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_b3_the_reservation_is_held_during_the_call_and_settled_after() {
    within(async {
        let mut room = Room::new("durable").await;
        let decision = room.driver.owner_message("what is six times seven?");
        let request = call_of(&decision);
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 400,
            delay: ms(5),
        });
        // During the call: the operation row and its reservation are committed (B1).
        let observed = Arc::new(Mutex::new(None));
        {
            let store = Arc::clone(&room.store);
            let room_id = room.id();
            let observed = Arc::clone(&observed);
            *provider.during.lock().unwrap() = Some(Box::new(move |request| {
                let store = Arc::clone(&store);
                let room_id = room_id.clone();
                let op = request.op;
                let observed = Arc::clone(&observed);
                // The in-memory store answers without awaiting anything real.
                let seen = futures_now(async move {
                    let record = store.operation(op).await.unwrap().unwrap();
                    let stored = store.load(&room_id).await.unwrap().unwrap();
                    (
                        record.status,
                        record.generation,
                        stored.state.ledger().balances(),
                    )
                });
                *observed.lock().unwrap() = Some(seen);
            }));
        }
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 300);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let before = room.stored();
        let outcome = durable
            .run(&before, &decision, "event_accepted")
            .await
            .unwrap();

        let (status, generation, during) = (*observed.lock().unwrap()).unwrap();
        assert_eq!(status, OperationStatus::InFlight);
        assert_eq!(generation, 1, "the creator's own lease");
        assert_eq!(
            during.reserved,
            UsdMicros::new(1_000),
            "reserved before the call"
        );
        assert_eq!(during.spent, UsdMicros::ZERO);

        assert_eq!(outcome.reserved.room.revision, before.revision.next());
        assert_eq!(outcome.calls.len(), 1);
        let call = &outcome.calls[0];
        assert_eq!(call.op, request.op);
        assert_eq!(call.end, CallEnd::Applied);
        let after = call.room.clone().unwrap();
        assert_eq!(
            after.revision,
            before.revision.next().next(),
            "two transactions"
        );
        let stored = room.load().await;
        assert_eq!(stored, after);
        let balances = stored.state.ledger().balances();
        assert_eq!(balances.spent, UsdMicros::new(400), "actual charged (B3)");
        assert_eq!(balances.reserved, UsdMicros::ZERO, "the rest released (B3)");
        let record = room.record(request.op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        assert_eq!(record.receipt, Some(answer(&request, 400)));
        let rows = room.store.ledger(&room.id()).await.unwrap();
        assert_eq!(BudgetLedger::replay(&rows).unwrap().balances(), balances);
        assert_eq!(provider.calls(), 1);
    })
    .await;
}

/// Polls a future that never waits on anything (the in-memory store) to completion.
fn futures_now<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_heartbeats_keep_the_lease_alive_through_a_call_longer_than_the_lease() {
    within(async {
        let mut room = Room::new("heartbeats").await;
        let decision = room.driver.owner_message("a long one");
        let op = call_of(&decision).op;
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 300,
            delay: ms(400),
        });
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 60);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let claimer = {
            let store = Arc::clone(&room.store);
            tokio::spawn(async move {
                let mut stolen = Vec::new();
                let started = Instant::now();
                while started.elapsed() < ms(350) {
                    stolen.extend(
                        store
                            .claim_expired(agentroom_ports::conformance::lease("thief", 60_000), 10)
                            .await
                            .unwrap(),
                    );
                    tokio::time::sleep(ms(5)).await;
                }
                stolen
            })
        };
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        assert!(claimer.await.unwrap().is_empty(), "the lease never expired");
        assert_eq!(outcome.calls[0].end, CallEnd::Applied);
        let record = room.record(op).await;
        assert_eq!(
            (record.status, record.generation),
            (OperationStatus::Applied, 1)
        );
        room.driver.state = room.load().await.state;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_cancellation_aborts_the_call_cooperatively_and_the_reservation_is_held() {
    within(async {
        let mut room = Room::new("cancel").await;
        let decision = room.driver.owner_message("stop me");
        let op = call_of(&decision).op;
        let provider = TestProvider::new(Behaviour::UntilAborted);
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 60);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let canceller = {
            let store = Arc::clone(&room.store);
            let room_id = room.id();
            tokio::spawn(async move {
                tokio::time::sleep(ms(30)).await;
                Room::cancel_elsewhere(&store, &room_id, op).await;
            })
        };
        let started = Instant::now();
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        canceller.await.unwrap();
        assert!(
            started.elapsed() < ms(1_000),
            "aborted at the next heartbeat"
        );
        assert_eq!(provider.aborts(), vec![AbortReason::Cancelled]);
        assert!(
            matches!(&outcome.calls[0].end, CallEnd::Uncertain { .. }),
            "{:?}",
            outcome.calls[0].end
        );
        // Transaction 2 met the cancellation's commit, reloaded and decided again.
        let stored = room.load().await;
        assert_eq!(outcome.calls[0].room.as_ref(), Some(&stored));
        assert_eq!(
            stored.state.operation(op).unwrap().state(),
            OperationState::Uncertain
        );
        let balances = stored.state.ledger().balances();
        assert_eq!(balances.reserved, UsdMicros::new(1_000), "held (B3)");
        assert_eq!(balances.uncertain, UsdMicros::new(1_000));
        assert_eq!(room.record(op).await.status, OperationStatus::Uncertain);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_an_uncertain_call_is_marked_uncertain_and_never_replayed() {
    within(async {
        let mut room = Room::new("uncertain").await;
        let decision = room.driver.owner_message("maybe");
        let op = call_of(&decision).op;
        let provider = TestProvider::script(vec![CallOutcome::Uncertain {
            reason: "connection reset after sending".to_owned(),
        }]);
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 60);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        assert_eq!(
            outcome.calls[0].end,
            CallEnd::Uncertain {
                reason: "connection reset after sending".to_owned()
            }
        );
        assert_eq!(room.record(op).await.status, OperationStatus::Uncertain);
        let balances = room.balances().await;
        assert_eq!(
            balances.uncertain,
            UsdMicros::new(1_000),
            "reservation held"
        );

        // Nothing ever calls it again: not a claim, not recovery.
        tokio::time::sleep(ms(80)).await;
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            owner,
            config,
        );
        let reconciler = TestReconciler::new(None);
        runner.recover(&reconciler).await.unwrap();
        runner.recover(&reconciler).await.unwrap();
        assert_eq!(provider.calls(), 1, "never replayed");
        assert_eq!(reconciler.asked(), 2, "the reconciler is asked instead");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_sent_is_retried_with_backoff_inside_the_lease_then_answered() {
    within(async {
        let mut room = Room::new("retry").await;
        let decision = room.driver.owner_message("flaky");
        let request = call_of(&decision);
        let not_sent = |retry_after| CallOutcome::NotSent {
            retry_after,
            reason: "connection refused".to_owned(),
        };
        let provider = TestProvider::script(vec![not_sent(None), not_sent(Some(ms(30)))]);
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 60);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let started = Instant::now();
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        assert!(
            started.elapsed() >= ms(35),
            "backed off 5 ms, then the asked-for 30 ms"
        );
        assert_eq!(provider.calls(), 3);
        assert_eq!(outcome.calls[0].end, CallEnd::Applied);
        assert_eq!(
            room.record(request.op).await.generation,
            1,
            "inside its own lease"
        );
        assert_eq!(room.balances().await.spent, UsdMicros::new(400));
    })
    .await;
}

/// One owner message whose call the provider answers `outcome` every time it is asked, run
/// as a durable call by `runner-a` with a 60 ms lease: its operation, the provider, the end.
async fn run_scripted(
    room: &mut Room,
    text: &str,
    outcome: CallOutcome,
) -> (OperationId, Arc<TestProvider>, DurableOutcome) {
    let decision = room.driver.owner_message(text);
    let op = call_of(&decision).op;
    let provider = TestProvider::script(vec![outcome; 10]);
    let decider = TestDecider::new("durable-decider").await;
    let config = config("runner-a", 60);
    let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
    let outcome = durable
        .run(&room.stored(), &decision, "event_accepted")
        .await
        .unwrap();
    (op, provider, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_sent_is_given_up_after_bounded_retries_and_released() {
    within(async {
        let mut room = Room::new("give-up").await;
        let refused = CallOutcome::NotSent {
            retry_after: None,
            reason: "connection refused".to_owned(),
        };
        let (op, provider, outcome) = run_scripted(&mut room, "unreachable", refused).await;
        assert_eq!(provider.calls(), 4, "one call and three retries");
        match &outcome.calls[0].end {
            CallEnd::NotSent { reason } => assert!(reason.contains("4 attempts"), "{reason}"),
            other => panic!("expected not sent, got {other:?}"),
        }
        let stored = room.load().await;
        assert_eq!(
            stored.state.ledger().held_by(op),
            None,
            "nothing sent: released"
        );
        assert_eq!(
            stored.state.ledger().balances().spent,
            UsdMicros::ZERO,
            "nothing charged"
        );
        assert_eq!(room.record(op).await.status, OperationStatus::Applied);
        // The domain counts the failed interpretation and reserves the next one (O11),
        // leased to this runner for the caller to run.
        let next = &outcome.calls[0].next;
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].generation, 1);
        assert_eq!(
            stored.state.ledger().balances().reserved,
            next[0].request.reservation
        );
        assert_eq!(
            room.record(next[0].op()).await.lease_owner.as_deref(),
            Some("runner-a")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_is_not_retried_and_is_released() {
    within(async {
        let mut room = Room::new("refused").await;
        let refused = CallOutcome::Refused {
            reason: "HTTP 401 Unauthorized: invalid api key".to_owned(),
        };
        let (op, provider, outcome) = run_scripted(&mut room, "bad credentials", refused).await;
        assert_eq!(provider.calls(), 1, "sending it again cannot help");
        match &outcome.calls[0].end {
            CallEnd::NotSent { reason } => {
                assert!(
                    reason.contains("401") && reason.contains("refused"),
                    "{reason}"
                );
            }
            other => panic!("expected not sent, got {other:?}"),
        }
        let stored = room.load().await;
        assert_eq!(stored.state.ledger().held_by(op), None, "released");
        assert_eq!(stored.state.ledger().balances().spent, UsdMicros::ZERO);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_transaction_2_reloads_and_decides_again_after_a_conflict() {
    within(async {
        let mut room = Room::new("conflict").await;
        let decision = room.driver.owner_message("race me");
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 250,
            delay: ms(40),
        });
        let raiser = {
            let store = Arc::clone(&room.store);
            let room_id = room.id();
            tokio::spawn(async move {
                tokio::time::sleep(ms(10)).await;
                Room::raise_elsewhere(&store, &room_id, 5_000).await;
            })
        };
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 300);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        raiser.await.unwrap();
        assert_eq!(outcome.calls[0].end, CallEnd::Applied);
        let balances = room.balances().await;
        assert_eq!(
            balances.limit,
            UsdMicros::new(1_005_000),
            "the other commit is kept"
        );
        assert_eq!(balances.spent, UsdMicros::new(250));
        assert_eq!(
            room.load().await.revision.0,
            outcome.reserved.room.revision.0 + 2
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_when_transaction_2_gives_up_the_receipt_is_recorded_alone_and_recovery_applies_it() {
    within(async {
        let mut room = Room::new("give-up-tx2").await;
        let decision = room.driver.owner_message("contended");
        let op = call_of(&decision).op;
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 250,
            delay: ms(40),
        });
        let raiser = {
            let store = Arc::clone(&room.store);
            let room_id = room.id();
            tokio::spawn(async move {
                tokio::time::sleep(ms(10)).await;
                Room::raise_elsewhere(&store, &room_id, 5_000).await;
            })
        };
        let decider = TestDecider::new("durable-decider").await;
        let config = config("runner-a", 300).with_conflict_retries(0);
        let durable = DurableCall::new(&*room.store, &*provider, &decider, &SystemClock, &config);
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        raiser.await.unwrap();
        assert!(
            matches!(&outcome.calls[0].end, CallEnd::ReceiptedOnly { .. }),
            "{:?}",
            outcome.calls[0].end
        );
        assert_eq!(room.record(op).await.status, OperationStatus::Receipted);
        assert_eq!(room.balances().await.reserved, UsdMicros::new(1_000));

        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = Runner::new(
            Arc::clone(&room.store),
            provider,
            Arc::clone(&owner),
            config,
        );
        let report = runner.recover(&TestReconciler::new(None)).await.unwrap();
        assert_eq!(report.delivered, vec![op]);
        assert_eq!(owner.took(), vec![(op, "deliver")]);
        assert_eq!(room.record(op).await.status, OperationStatus::Applied);
        let balances = room.balances().await;
        assert_eq!(
            (balances.spent, balances.reserved),
            (UsdMicros::new(250), UsdMicros::ZERO)
        );
    })
    .await;
}

/// B3/D2: when the domain refuses to settle a returned call (here a charge the ledger cannot
/// add), the receipt is kept but the operation is not marked applied, so its reservation is
/// never silently abandoned: recovery hands the receipt to the owner again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b3_a_settlement_the_domain_refuses_is_not_marked_applied() {
    within(async {
        let mut room = Room::new("refused-settle").await;
        let decider = TestDecider::new("refused-decider").await;
        let config = config("runner-r", 300);
        // A first call spends something, so that the next charge cannot be added.
        let first = room.driver.owner_message("a fair bill");
        let fair = TestProvider::new(Behaviour::Answer {
            micros: 400,
            delay: ms(1),
        });
        let durable = DurableCall::new(&*room.store, &*fair, &decider, &SystemClock, &config);
        let done = durable
            .run(&room.stored(), &first, "event_accepted")
            .await
            .unwrap();
        let after = done.calls[0].room.clone().unwrap();
        room.driver.state = after.state.clone();
        room.driver.revision = after.revision;

        let decision = room.driver.owner_message("an absurd bill");
        let request = call_of(&decision);
        let absurd = TestProvider::new(Behaviour::Answer {
            micros: i64::MAX,
            delay: ms(1),
        });
        let durable = DurableCall::new(&*room.store, &*absurd, &decider, &SystemClock, &config);
        let outcome = durable
            .run(&room.stored(), &decision, "event_accepted")
            .await
            .unwrap();
        assert_eq!(outcome.calls.len(), 1);
        let record = room.record(request.op).await;
        assert_ne!(record.status, OperationStatus::Applied, "{record:?}");
        assert!(record.receipt.is_some(), "the receipt is kept for recovery");
        let stored = room.load().await;
        let operation = stored.state.operation(request.op).unwrap();
        assert!(operation.state().is_open(), "the Room still holds it");
        assert!(stored.state.ledger().balances().reserved.is_positive());
    })
    .await;
}
