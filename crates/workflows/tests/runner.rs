//! The runner on a leased operation: receipts fenced on the generation and handed to the
//! owner; fencing, cancellation and a provider that ignores its abort.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentroom_ports::conformance::lease;
use agentroom_ports::domain::engine::CallRequest;
use agentroom_ports::domain::engine::Reconciliation;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{OperationRecord, Receipt};
use agentroom_ports::{OperationStatus, WorkflowStore};
use agentroom_workflows::{
    AbortReason, CallOutcome, Delivery, Leased, OwnerError, ReceiptOwner, RunOutcome, Runner,
};
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
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            Arc::clone(&owner),
            config("runner-a", 300),
        );
        let outcome = runner
            .run(Leased::created(room.id(), request.clone()))
            .await
            .unwrap();
        assert_eq!(outcome, RunOutcome::Receipted { delivered: true });
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        let record = room.record(request.op).await;
        assert_eq!(record.status, OperationStatus::Applied);
        assert_eq!(record.receipt, Some(answer(&request, 700)));
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
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            Arc::clone(&owner),
            config("runner-a", 60),
        );
        let claimed = room
            .store
            .claim_expired(lease("runner-b", 60_000), 10)
            .await
            .unwrap();
        assert_eq!(claimed[0].generation, 2);
        let outcome = runner
            .run(Leased::created(room.id(), request.clone()))
            .await
            .unwrap();
        assert_eq!(outcome, RunOutcome::Fenced);
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
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            Arc::clone(&owner),
            config("runner-a", 60),
        );
        room.store
            .claim_expired(lease("runner-b", 60_000), 10)
            .await
            .unwrap();
        let outcome = runner
            .run(Leased::created(room.id(), request.clone()))
            .await
            .unwrap();
        assert_eq!(outcome, RunOutcome::Fenced);
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
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            Arc::clone(&owner),
            config("runner-a", 60).with_abort_grace(ms(50)),
        );
        Room::cancel_elsewhere(&room.store, &room.id(), request.op).await;
        let outcome = runner
            .run(Leased::created(room.id(), request.clone()))
            .await
            .unwrap();
        match outcome {
            RunOutcome::Uncertain { reason } => {
                assert!(reason.contains("did not stop"), "{reason}");
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
        let runner = Runner::new(
            Arc::clone(&room.store),
            Arc::clone(&provider),
            Arc::clone(&owner),
            config("runner-a", 60).with_not_sent_retries(1, ms(5), ms(5)),
        );
        let outcome = runner
            .run(Leased::created(room.id(), request.clone()))
            .await
            .unwrap();
        assert!(matches!(outcome, RunOutcome::NotSent { .. }), "{outcome:?}");
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
) -> (
    Room,
    CallRequest,
    Arc<Heartbeats>,
    Arc<TestOwner>,
    RunOutcome,
) {
    let mut room = Room::new(name).await;
    let decision = room.driver.owner_message("heartbeats under fault");
    let request = call_of(&decision);
    room.commit_leased(&decision, "runner-a", 300).await;
    let store = Heartbeats::new(Arc::clone(&room.store), fault);
    let owner = TestOwner::new(Arc::clone(&room.store)).await;
    let runner = Runner::new(
        Arc::clone(&store),
        TestProvider::new(behaviour),
        Arc::clone(&owner),
        config("runner-a", 300).with_abort_grace(ms(50)),
    );
    let outcome = runner
        .run(Leased::created(room.id(), request.clone()))
        .await
        .unwrap();
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
        assert_eq!(outcome, RunOutcome::Receipted { delivered: true });
        assert!(store.sent.load(Ordering::SeqCst) >= 3, "it heartbeated");
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        assert_eq!(
            room.record(request.op).await.status,
            OperationStatus::Applied
        );
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
                RunOutcome::Uncertain { reason } => {
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

/// How [`Scripted`] answers `record_and_deliver`.
enum Script {
    /// With this, having written nothing.
    Answer(fn() -> Result<Delivery, OwnerError>),
    /// Its commit goes through (the receipt is written) but the answer is lost on the way.
    AnswerLost(Arc<agentroom_ports::memory::MemoryStore>),
}

/// An owner that answers `record_and_deliver` as scripted and passes everything else on.
struct Scripted {
    owner: Arc<TestOwner>,
    script: Script,
}

#[async_trait::async_trait]
impl ReceiptOwner for Scripted {
    async fn record_and_deliver(
        &self,
        leased: &Leased,
        receipt: &Receipt,
    ) -> Result<Delivery, OwnerError> {
        match &self.script {
            Script::Answer(answer) => answer(),
            Script::AnswerLost(store) => {
                let written = store
                    .record_receipt(leased.op(), leased.generation, receipt)
                    .await
                    .unwrap();
                assert_eq!(written, agentroom_ports::ReceiptWrite::Recorded);
                Err(OwnerError(
                    "the connection dropped before the answer".to_owned(),
                ))
            }
        }
    }

    async fn deliver(
        &self,
        record: &OperationRecord,
        receipt: &Receipt,
        generation: i64,
    ) -> Result<(), OwnerError> {
        self.owner.deliver(record, receipt, generation).await
    }

    async fn uncertain(&self, record: &OperationRecord) -> Result<(), OwnerError> {
        self.owner.uncertain(record).await
    }

    async fn reconciled(
        &self,
        record: &OperationRecord,
        outcome: &Reconciliation,
    ) -> Result<(), OwnerError> {
        self.owner.reconciled(record, outcome).await
    }

    async fn not_sent(&self, record: &OperationRecord, reason: &str) -> Result<(), OwnerError> {
        self.owner.not_sent(record, reason).await
    }
}

/// Runs one answered call whose owner answers `record_and_deliver` as `script` says.
async fn run_with_owner_answering(
    name: &str,
    script: impl FnOnce(&Room) -> Script,
) -> (Room, CallRequest, Arc<TestOwner>, RunOutcome) {
    let mut room = Room::new(name).await;
    let decision = room.driver.owner_message("answered");
    let request = call_of(&decision);
    room.commit_leased(&decision, "runner-a", 300).await;
    let owner = TestOwner::new(Arc::clone(&room.store)).await;
    let runner = Runner::new(
        Arc::clone(&room.store),
        TestProvider::new(Behaviour::Answer {
            micros: 700,
            delay: ms(5),
        }),
        Arc::new(Scripted {
            owner: Arc::clone(&owner),
            script: script(&room),
        }),
        config("runner-a", 300),
    );
    let outcome = runner
        .run(Leased::created(room.id(), request.clone()))
        .await
        .unwrap();
    (room, request, owner, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_receipt_the_owner_found_fenced_is_dropped_and_never_written_alone() {
    within(async {
        let (room, request, owner, outcome) =
            run_with_owner_answering("owner-fenced", |_| Script::Answer(|| Ok(Delivery::Fenced)))
                .await;
        assert_eq!(outcome, RunOutcome::Fenced);
        assert!(owner.took().is_empty());
        let record = room.record(request.op).await;
        assert_eq!(record.receipt, None, "dropped");
        assert_eq!(record.status, OperationStatus::InFlight);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_the_owner_could_not_commit_is_recorded_alone_and_delivered() {
    for (name, script) in [
        (
            "owner-failed",
            (|| Err(OwnerError("the store is down".to_owned())))
                as fn() -> Result<Delivery, OwnerError>,
        ),
        ("owner-not-taken", || Ok(Delivery::NotTaken)),
    ] {
        within(async {
            let (room, request, owner, outcome) =
                run_with_owner_answering(name, |_| Script::Answer(script)).await;
            assert_eq!(outcome, RunOutcome::Receipted { delivered: true }, "{name}");
            assert_eq!(owner.took(), vec![(request.op, "deliver")], "{name}");
            let record = room.record(request.op).await;
            assert_eq!(record.receipt, Some(answer(&request, 700)), "{name}");
            assert_eq!(record.status, OperationStatus::Applied, "{name}");
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_committed_by_an_owner_whose_answer_was_lost_is_found_and_delivered() {
    within(async {
        let (room, request, owner, outcome) = run_with_owner_answering("answer-lost", |room| {
            Script::AnswerLost(Arc::clone(&room.store))
        })
        .await;
        // Not "fenced, dropped": the receipt found is this one, at this generation.
        assert_eq!(outcome, RunOutcome::Receipted { delivered: true });
        assert_eq!(owner.took(), vec![(request.op, "deliver")]);
        let record = room.record(request.op).await;
        assert_eq!(record.receipt, Some(answer(&request, 700)));
        assert_eq!(record.status, OperationStatus::Applied);
    })
    .await;
}
