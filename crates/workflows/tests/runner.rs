//! The runner on a leased operation: what became of the call (returned, fenced, not sent,
//! uncertain), receipts recorded alone fenced on the generation, fencing, cancellation and a
//! provider that ignores its abort. The Room's side is the support's `TestOwner`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentroom_ports::conformance::lease;
use agentroom_ports::domain::engine::{CallEvent, CallRequest, FailureKind, Reconciliation};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{OperationStatus, WorkflowStore};
use agentroom_workflows::{AbortReason, CallOutcome, Executed, Leased, Runner};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receipt_is_recorded_on_the_generation_and_the_owner_applies_it() {
    within(async {
        let mut room = Room::new("runner").await;
        let decision = room.driver.owner_message("hello");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 300).await;
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 700,
            delay: ms(5),
        });
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = runner(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            config("runner-a", 300),
        );
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        owner.take(&runner, &leased, &outcome).await;
        assert_eq!(outcome, Executed::Returned(answer(&request, 700)));
        assert_eq!(
            outcome.events(),
            vec![answer(&request, 700).event()],
            "one call event: returned"
        );
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        let record = room.record(request.op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        assert_eq!(record.receipt, Some(answer(&request, 700)));
        assert_eq!(record.generation, 1, "recorded on the creator's generation");
        let balances = room.balances().await;
        assert_eq!(
            (balances.spent, balances.reserved),
            (UsdMicros::new(700), UsdMicros::ZERO)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_fenced_runner_aborts_and_its_result_is_dropped() {
    within(async {
        let mut room = Room::new("fenced").await;
        let decision = room.driver.owner_message("contested");
        let request = call_of(&decision);
        // Runner A's lease expired at once; runner B claims the operation (generation 2).
        room.commit_leased(&decision, "runner-a", 0).await;
        let provider = TestProvider::new(Behaviour::UntilAborted);
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = runner(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            config("runner-a", 60),
        );
        let claimed = room
            .store
            .claim_expired(lease("runner-b", 60_000), 10)
            .await
            .unwrap();
        assert_eq!(claimed[0].generation, 2);
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        owner.take(&runner, &leased, &outcome).await;
        assert_eq!(outcome, Executed::Fenced);
        assert_eq!(provider.aborts(), vec![AbortReason::Fenced]);
        let record = room.record(request.op).await;
        assert_eq!(
            (record.status, record.generation, record.receipt),
            (OperationStatus::InFlight, 2, None),
            "runner B's lease is untouched"
        );
        assert!(owner.took().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_result_that_arrives_after_the_fence_is_dropped() {
    within(async {
        let mut room = Room::new("late").await;
        let decision = room.driver.owner_message("slow and stubborn");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 0).await;
        // It ignores its abort and returns a result anyway.
        let provider = TestProvider::new(Behaviour::Stubborn {
            micros: 100,
            delay: ms(80),
        });
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = runner(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            config("runner-a", 60),
        );
        room.store
            .claim_expired(lease("runner-b", 60_000), 10)
            .await
            .unwrap();
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        owner.take(&runner, &leased, &outcome).await;
        assert_eq!(outcome, Executed::Fenced);
        assert_eq!(provider.aborts(), vec![AbortReason::Fenced]);
        assert_eq!(room.record(request.op).await.receipt, None, "dropped");
        assert_eq!(room.balances().await.spent, UsdMicros::ZERO);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_cancelled_call_that_ignores_its_abort_is_dropped_and_uncertain() {
    within(async {
        let mut room = Room::new("hang").await;
        let decision = room.driver.owner_message("never answers");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 60).await;
        let provider = TestProvider::new(Behaviour::Hang);
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = runner(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            config("runner-a", 60).with_abort_grace(ms(50)),
        );
        Room::cancel_elsewhere(&room.store, &room.id(), request.op).await;
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        owner.take(&runner, &leased, &outcome).await;
        match outcome {
            Executed::Uncertain { reason, confirmed } => {
                assert!(reason.contains("did not stop"), "{reason}");
                assert_eq!(confirmed, None, "nobody to confirm it");
            }
            other => panic!("expected uncertain, got {other:?}"),
        }
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Uncertain
        );
        assert_eq!(owner.took(), vec![(request.op, "uncertain")]);
        let stored = room.load().await;
        assert_eq!(
            stored.state.operation(request.op).unwrap().state(),
            OperationState::Uncertain
        );
        assert_eq!(
            stored.state.ledger().balances().uncertain,
            UsdMicros::new(1_000)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_sent_retries_are_bounded_and_the_owner_releases_the_call() {
    within(async {
        let mut room = Room::new("runner-not-sent").await;
        let decision = room.driver.owner_message("unreachable");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 60).await;
        let refused = CallOutcome::NotSent {
            retry_after: None,
            reason: "connection refused".to_owned(),
        };
        let provider = TestProvider::script(vec![refused; 5]);
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        let runner = runner(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            config("runner-a", 60).with_not_sent_retries(1, ms(5), ms(5)),
        );
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        owner.take(&runner, &leased, &outcome).await;
        assert!(matches!(outcome, Executed::NotSent(_)), "{outcome:?}");
        assert!(
            matches!(&outcome.events()[..], [CallEvent::NotSent(failure)] if failure.kind == FailureKind::Unreachable),
            "{outcome:?}"
        );
        assert_eq!(provider.calls(), 2);
        assert_eq!(owner.took(), vec![(request.op, "not_sent")]);
        let stored = room.load().await;
        assert_eq!(stored.state.ledger().held_by(request.op), None);
        assert_eq!(stored.state.ledger().balances().spent, UsdMicros::ZERO);
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Applied
        );
    })
    .await;
}

/// Runs one leased call of `behaviour` with heartbeats answered as `fault`, on a 300 ms lease
/// (heartbeats every 100 ms).
async fn run_with_heartbeats(
    name: &str,
    fault: HeartbeatFault,
    behaviour: Behaviour,
) -> (Room, CallRequest, Arc<Heartbeats>, Arc<TestOwner>, Executed) {
    let mut room = Room::new(name).await;
    let decision = room.driver.owner_message("heartbeats under fault");
    let request = call_of(&decision);
    room.commit_leased(&decision, "runner-a", 300).await;
    let store = Heartbeats::new(Arc::clone(&room.store), fault);
    let owner = TestOwner::new(Arc::clone(&room.store)).await;
    let runner = runner(
        Arc::clone(&store),
        TestProvider::new(behaviour),
        config("runner-a", 300).with_abort_grace(ms(50)),
    );
    let leased = Leased::created(room.id(), request.clone());
    let outcome = runner
        .execute(&leased, &agentroom_ports::CallContext::default())
        .await
        .unwrap();
    owner.take(&runner, &leased, &outcome).await;
    (room, request, store, owner, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_heartbeat_slower_than_its_interval_still_keeps_the_lease() {
    within(async {
        // Each heartbeat takes 1.2 intervals (a loaded server): sent back to back, each still
        // ends within the lease the one before it extended (2 x 120 ms < 300 ms).
        let (room, request, store, owner, outcome) = run_with_heartbeats(
            "slow-heartbeats",
            HeartbeatFault::Slow(ms(120)),
            Behaviour::Answer {
                micros: 400,
                delay: ms(900),
            },
        )
        .await;
        assert!(matches!(outcome, Executed::Returned(_)), "{outcome:?}");
        assert!(store.sent.load(Ordering::SeqCst) >= 3, "it heartbeated");
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Applied
        );
    })
    .await;
}

/// Issue 21 (item 4): a runner sends one heartbeat per interval for every call it has in
/// flight (one write, however many calls), and each call's lease is kept by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_one_heartbeat_per_interval_keeps_every_call_in_flight() {
    within(async {
        const CALLS: usize = 8;
        let mut room = Room::new("one-heartbeat").await;
        let mut requests = Vec::new();
        for n in 0..CALLS {
            let decision = room.driver.owner_message(&format!("message {n}"));
            requests.push(call_of(&decision));
            room.commit_leased(&decision, "runner-a", 300).await;
        }
        let store = Heartbeats::new(Arc::clone(&room.store), HeartbeatFault::Slow(ms(0)));
        let runner = Arc::new(runner(
            Arc::clone(&store),
            TestProvider::new(Behaviour::Answer {
                micros: 400,
                delay: ms(900),
            }),
            config("runner-a", 300),
        ));
        let mut running = tokio::task::JoinSet::new();
        for request in &requests {
            let (runner, leased) = (
                Arc::clone(&runner),
                Leased::created(room.id(), request.clone()),
            );
            running.spawn(async move {
                runner
                    .execute(&leased, &agentroom_ports::CallContext::default())
                    .await
                    .unwrap()
            });
        }
        while let Some(outcome) = running.join_next().await {
            let outcome = outcome.unwrap();
            assert!(matches!(outcome, Executed::Returned(_)), "{outcome:?}");
        }
        // 900 ms of calls at one heartbeat per 100 ms: about 9 heartbeats for all 8 calls
        // (one per call would be about 72), each naming every call still running.
        let sent = store.sent.load(Ordering::SeqCst);
        let named = store.leases.load(Ordering::SeqCst);
        assert!((3..=12).contains(&sent), "{sent} heartbeats");
        assert!(
            named >= 3 * CALLS as u32,
            "{named} leases named in {sent} heartbeats"
        );
        for request in &requests {
            let record = room.record(request.op).await;
            assert_eq!(record.generation, 1, "never fenced or claimed again");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_no_heartbeat_through_for_a_whole_lease_aborts_the_call_and_leaves_it_uncertain() {
    for (name, fault) in [
        ("failing-heartbeats", HeartbeatFault::Failing),
        ("hanging-heartbeats", HeartbeatFault::Hanging),
    ] {
        within(async {
            let (room, request, _store, owner, outcome) =
                run_with_heartbeats(name, fault, Behaviour::UntilAborted).await;
            match outcome {
                Executed::Uncertain {
                    reason,
                    confirmed: None,
                } => {
                    assert!(reason.contains("lease lost"), "{name}: {reason}");
                }
                other => panic!("{name}: expected uncertain, got {other:?}"),
            }
            assert_eq!(owner.took(), vec![(request.op, "uncertain")], "{name}");
            let record = room.record(request.op).await;
            assert_eq!(record.status, OperationStatus::Uncertain, "{name}");
            assert_eq!(record.receipt, None, "{name}");
            // The reservation stays held: an uncertain call is never released unseen (D2).
            let stored = room.load().await;
            assert_eq!(
                stored.state.ledger().balances().uncertain,
                UsdMicros::new(1_000),
                "{name}"
            );
        })
        .await;
    }
}

/// Runs one answered call, whose receipt the Room's commit did not take: the runner records
/// it alone.
/// `lease_ms` is the lease its creator's commit took (0: expired at once; the call returns
/// before its first heartbeat).
async fn returned_call(name: &str, lease_ms: u64) -> (Room, CallRequest, Runner, Leased, Executed) {
    let mut room = Room::new(name).await;
    let decision = room.driver.owner_message("answered");
    let request = call_of(&decision);
    room.commit_leased(&decision, "runner-a", lease_ms).await;
    let runner = runner(
        Arc::clone(&room.store),
        TestProvider::new(Behaviour::Answer {
            micros: 700,
            delay: ms(5),
        }),
        config("runner-a", 300),
    );
    let leased = Leased::created(room.id(), request.clone());
    let outcome = runner
        .execute(&leased, &agentroom_ports::CallContext::default())
        .await
        .unwrap();
    assert_eq!(outcome, Executed::Returned(answer(&request, 700)));
    (room, request, runner, leased, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_receipt_another_runner_holds_the_operation_for_is_dropped_and_never_written() {
    within(async {
        let (room, request, runner, leased, _) = returned_call("receipt-fenced", 0).await;
        // Its lease expired and runner B claimed the operation (generation 2).
        let claimed = room
            .store
            .claim_expired(lease("runner-b", 60_000), 10)
            .await
            .unwrap();
        assert_eq!(claimed[0].generation, 2);
        let receipt = answer(&request, 700);
        assert!(
            !runner.record_alone(&leased, &receipt).await.unwrap(),
            "fenced"
        );
        let record = room.record(request.op).await;
        assert_eq!(record.receipt, None, "dropped");
        assert_eq!(record.status, OperationStatus::InFlight);
        assert_eq!(record.generation, 2, "runner B's lease is untouched");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_receipt_the_room_could_not_commit_is_recorded_alone_and_then_delivered() {
    within(async {
        let (room, request, runner, leased, outcome) = returned_call("receipt-alone", 300).await;
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        assert!(owner.take(&runner, &leased, &outcome).await);
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        let record = room.record(request.op).await;
        assert_eq!(record.receipt, Some(answer(&request, 700)));
        assert_eq!(record.generation, 1);
        assert_eq!(record.status, OperationStatus::Applied);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_committed_by_a_commit_whose_answer_was_lost_is_found_and_delivered() {
    within(async {
        let (room, request, runner, leased, outcome) = returned_call("answer-lost", 300).await;
        // The Room's commit went through (the receipt is written) but its answer was lost.
        let receipt = answer(&request, 700);
        let written = room
            .store
            .record_receipt(request.op, 1, &receipt)
            .await
            .unwrap();
        assert_eq!(written, agentroom_ports::ReceiptWrite::Recorded);
        // Not "fenced, dropped": the receipt found is this one, at this generation.
        assert!(runner.record_alone(&leased, &receipt).await.unwrap());
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        assert!(owner.take(&runner, &leased, &outcome).await);
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        let record = room.record(request.op).await;
        assert_eq!(record.receipt, Some(receipt));
        assert_eq!(record.status, OperationStatus::Applied);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_an_aborted_call_comes_back_uncertain_with_what_the_reconciler_confirmed() {
    within(async {
        let mut room = Room::new("aborted-confirmed").await;
        let decision = room.driver.owner_message("stop me");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 60).await;
        let confirmed = Reconciliation::NotExecuted;
        let reconciler = Arc::new(TestReconciler::new(Some(confirmed.clone())));
        let runner = Runner::new(
            Arc::clone(&room.store) as _,
            TestProvider::new(Behaviour::UntilAborted),
            Arc::clone(&reconciler) as _,
            config("runner-a", 60),
        );
        Room::cancel_elsewhere(&room.store, &room.id(), request.op).await;
        let leased = Leased::created(room.id(), request.clone());
        let outcome = runner
            .execute(&leased, &agentroom_ports::CallContext::default())
            .await
            .unwrap();
        assert!(
            matches!(&outcome, Executed::Uncertain { confirmed: Some(c), .. } if *c == confirmed),
            "{outcome:?}"
        );
        assert_eq!(
            outcome.events(),
            vec![
                CallEvent::Uncertain {
                    cause: Some("the call was aborted (cancelled)".to_owned())
                },
                CallEvent::Reconciled(confirmed)
            ]
        );
        assert_eq!(reconciler.asked(), 1, "asked at once (D3)");
        let owner = TestOwner::new(Arc::clone(&room.store)).await;
        assert!(owner.take(&runner, &leased, &outcome).await);
        assert_eq!(
            owner.took(),
            vec![(request.op, "uncertain"), (request.op, "reconciled")]
        );
        let stored = room.load().await;
        assert_eq!(stored.state.ledger().held_by(request.op), None, "released");
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Applied
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_a_call_that_times_out_unasked_is_left_to_recovery_not_reconciled_at_once() {
    within(async {
        let mut room = Room::new("uncertain-unasked").await;
        let decision = room.driver.owner_message("reset");
        let request = call_of(&decision);
        room.commit_leased(&decision, "runner-a", 300).await;
        let reconciler = Arc::new(TestReconciler::new(Some(Reconciliation::NotExecuted)));
        let runner = Runner::new(
            Arc::clone(&room.store) as _,
            TestProvider::script(vec![CallOutcome::Uncertain {
                reason: "connection reset after sending".to_owned(),
            }]),
            Arc::clone(&reconciler) as _,
            config("runner-a", 300),
        );
        let outcome = runner
            .execute(
                &Leased::created(room.id(), request.clone()),
                &agentroom_ports::CallContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            outcome.events(),
            vec![CallEvent::Uncertain {
                cause: Some("connection reset after sending".to_owned())
            }]
        );
        assert_eq!(reconciler.asked(), 0, "recovery asks on its own schedule");
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Uncertain
        );
    })
    .await;
}
