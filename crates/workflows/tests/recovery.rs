//! Recovery on start classifies every open operation from durable evidence only (D2) and
//! never repeats a call (D6).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentroom_ports::domain::engine::{CallResult, Charge, Reconciliation};
use agentroom_ports::domain::ids::Timestamp;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::OperationState;
use agentroom_ports::{
    OperationStatus, ReceiptWrite, Resolution, ResolutionOutcome, RoomStore, WorkflowStore,
};
use agentroom_workflows::{RecoveryReport, Runner};
use support::*;

struct Setup {
    room: Room,
    provider: Arc<TestProvider>,
    owner: Arc<TestOwner>,
}

async fn setup(name: &str) -> Setup {
    let room = Room::new(name).await;
    let provider = TestProvider::new(Behaviour::Hang);
    let owner = TestOwner::new(Arc::clone(&room.store)).await;
    Setup {
        room,
        provider,
        owner,
    }
}

impl Setup {
    /// One recovery pass asking `reconciler`, its due events decided by the owner.
    async fn recover(&self, reconciler: &Arc<TestReconciler>) -> RecoveryReport {
        let runner = Runner::new(
            Arc::clone(&self.room.store) as _,
            Arc::clone(&self.provider) as _,
            Arc::clone(reconciler) as _,
            config("recovery", 60_000),
        );
        let recovery = runner.recover().await.unwrap();
        self.owner.settle(recovery).await
    }
}

#[tokio::test]
async fn d2_a_receipted_operation_is_handed_to_its_owner() {
    within(async {
        let mut s = setup("receipted").await;
        let decision = s.room.driver.owner_message("answered, then crashed");
        let request = call_of(&decision);
        s.room.commit_leased(&decision, "gone", 60_000).await;
        let receipt = answer(&request, 300);
        let written = s
            .room
            .store
            .record_receipt(request.op, 1, &receipt)
            .await
            .unwrap();
        assert_eq!(written, ReceiptWrite::Recorded);

        s.owner.failing.store(true, Ordering::SeqCst);
        let report = s.recover(&Arc::new(TestReconciler::new(None))).await;
        assert_eq!(report.undelivered, vec![request.op], "the owner was down");
        assert_eq!(
            s.room.record(request.op).await.status,
            OperationStatus::Receipted
        );

        s.owner.failing.store(false, Ordering::SeqCst);
        let report = s.recover(&Arc::new(TestReconciler::new(None))).await;
        assert_eq!(
            report,
            RecoveryReport {
                delivered: vec![request.op],
                ..RecoveryReport::default()
            }
        );
        assert_eq!(
            s.room.record(request.op).await.status,
            OperationStatus::Applied
        );
        assert_eq!(s.room.balances().await.spent, UsdMicros::new(300));
        assert_eq!(s.provider.calls(), 0);
        let report = s.recover(&Arc::new(TestReconciler::new(None))).await;
        assert_eq!(report, RecoveryReport::default(), "applied once");
    })
    .await;
}

#[tokio::test]
async fn d2_an_expired_operation_without_receipt_becomes_uncertain_and_is_never_called() {
    within(async {
        let mut s = setup("expired").await;
        let decision = s.room.driver.owner_message("crashed mid-call");
        let op = call_of(&decision).op;
        s.room.commit_leased(&decision, "gone", 0).await;
        let reconciler = Arc::new(TestReconciler::new(None));
        let report = s.recover(&reconciler).await;
        assert_eq!(report.claimed, vec![op]);
        assert_eq!(report.uncertain, vec![op]);
        assert_eq!(reconciler.asked(), 1);
        let record = s.room.record(op).await;
        assert_eq!(record.status, OperationStatus::Uncertain);
        assert_eq!(record.generation, 2, "the claim bumped the generation");
        assert_eq!(record.recovery_attempts, 1);
        assert_eq!(record.lease_owner.as_deref(), Some("recovery"));
        assert_eq!(s.owner.took(), vec![(op, "uncertain")]);
        let stored = s.room.load().await;
        assert_eq!(
            stored.state.operation(op).unwrap().state(),
            OperationState::Uncertain
        );
        assert_eq!(
            stored.state.ledger().balances().uncertain,
            UsdMicros::new(1_000)
        );
        assert_eq!(s.provider.calls(), 0, "never called again");
    })
    .await;
}

#[tokio::test]
async fn d2_a_confirmed_reconciliation_goes_to_the_owner() {
    within(async {
        let mut s = setup("reconciled").await;
        let decision = s.room.driver.owner_message("ran, result lost");
        let request = call_of(&decision);
        s.room.commit_leased(&decision, "gone", 0).await;
        let executed = Reconciliation::Executed {
            charge: Charge::Actual(UsdMicros::new(600)),
            result: answer(&request, 600).result,
        };
        assert!(matches!(
            &executed,
            Reconciliation::Executed {
                result: CallResult::Reasoner(_),
                ..
            }
        ));
        let report = s
            .recover(&Arc::new(TestReconciler::new(Some(executed))))
            .await;
        assert_eq!(report.claimed, vec![request.op]);
        assert_eq!(report.reconciled, vec![request.op]);
        assert_eq!(
            s.owner.took(),
            vec![(request.op, "uncertain"), (request.op, "reconciled")]
        );
        assert_eq!(
            s.room.record(request.op).await.status,
            OperationStatus::Applied
        );
        let balances = s.room.balances().await;
        assert_eq!(
            balances.spent,
            UsdMicros::new(600),
            "charged only once confirmed"
        );
        assert_eq!(balances.uncertain, UsdMicros::ZERO);
        assert_eq!(s.provider.calls(), 0);
    })
    .await;
}

#[tokio::test]
async fn d2_uncertain_operations_are_asked_again_then_dead_lettered_after_three_attempts() {
    within(async {
        let mut s = setup("dead-letter").await;
        let decision = s.room.driver.owner_message("nobody knows");
        let op = call_of(&decision).op;
        s.room.commit_leased(&decision, "gone", 0).await;
        let reconciler = Arc::new(TestReconciler::new(None));
        let first = s.recover(&reconciler).await;
        assert_eq!(
            (first.claimed.clone(), first.uncertain.clone()),
            (vec![op], vec![op])
        );
        reconciler.failing.store(true, Ordering::SeqCst);
        let second = s.recover(&reconciler).await;
        assert_eq!(
            second.uncertain,
            vec![op],
            "a failing reconciler leaves it uncertain"
        );
        assert_eq!(s.room.record(op).await.recovery_attempts, 2);
        reconciler.failing.store(false, Ordering::SeqCst);
        let third = s.recover(&reconciler).await;
        assert_eq!(third.dead_lettered, vec![op]);
        assert_eq!(reconciler.asked(), 3);
        let record = s.room.record(op).await;
        assert_eq!(record.status, OperationStatus::DeadLetter);
        assert!(
            record
                .dead_letter_reason
                .as_deref()
                .unwrap()
                .contains("after 3 recovery attempts"),
            "{:?}",
            record.dead_letter_reason
        );
        let fourth = s.recover(&reconciler).await;
        assert_eq!(
            fourth,
            RecoveryReport::default(),
            "an operator resolves it now"
        );
        assert_eq!(reconciler.asked(), 3);
        assert_eq!(
            s.room.balances().await.uncertain,
            UsdMicros::new(1_000),
            "still held"
        );
        assert_eq!(s.provider.calls(), 0);
    })
    .await;
}

/// D2: a dead-lettered call waits for an operator; their resolution reaches the Room on the
/// next recovery (released when it did not take effect, the whole reservation charged when
/// it ran, B3), once, and the call is never made.
#[tokio::test]
async fn d2_an_operators_resolution_reaches_the_room_once() {
    for (outcome, spent) in [
        (ResolutionOutcome::Failed, 0),
        (ResolutionOutcome::Succeeded, 1_000),
    ] {
        within(async {
            let mut s = setup(&format!("resolve-{}", outcome.as_str())).await;
            let decision = s.room.driver.owner_message("nobody knows");
            let op = call_of(&decision).op;
            s.room.commit_leased(&decision, "gone", 0).await;
            let reconciler = Arc::new(TestReconciler::new(None));
            for _ in 0..3 {
                s.recover(&reconciler).await;
            }
            assert_eq!(s.room.record(op).await.status, OperationStatus::DeadLetter);
            let resolution = Resolution {
                outcome,
                operator: "oscar".to_owned(),
                reason: "checked the provider's console".to_owned(),
                at: Timestamp::from_millis(5),
            };
            assert!(s.room.store.resolve(op, &resolution).await.unwrap());
            let report = s.recover(&reconciler).await;
            assert_eq!(report.resolved, vec![op]);
            let balances = s.room.balances().await;
            assert_eq!(
                balances.uncertain,
                UsdMicros::ZERO,
                "nothing uncertain any more"
            );
            assert_eq!(balances.spent, UsdMicros::new(spent));
            let state = s
                .room
                .store
                .load(&s.room.driver.room())
                .await
                .unwrap()
                .unwrap()
                .state;
            assert!(
                state.operation(op).is_none(),
                "the call is closed in the Room"
            );
            // Either way the owner's message has no interpretation yet: the Room reserved one
            // new call for it (its result was never seen), and holds only that.
            assert_eq!(balances.reserved, UsdMicros::new(1_000));
            let record = s.room.record(op).await;
            assert_eq!(record.status, OperationStatus::Applied);
            assert_eq!(
                record.resolution.as_ref(),
                Some(&resolution),
                "the record stays"
            );
            let again = s.recover(&reconciler).await;
            assert!(again.resolved.is_empty(), "applied once");
            assert_eq!(s.provider.calls(), 0, "never called");
        })
        .await;
    }
}

#[tokio::test]
async fn d6_live_leases_of_other_runners_are_left_alone() {
    within(async {
        let mut s = setup("live").await;
        let decision = s.room.driver.owner_message("running elsewhere");
        let op = call_of(&decision).op;
        s.room
            .commit_leased(&decision, "other-runner", 60_000)
            .await;
        let reconciler = Arc::new(TestReconciler::new(None));
        let report = s.recover(&reconciler).await;
        assert_eq!(
            report,
            RecoveryReport {
                live: vec![op],
                ..RecoveryReport::default()
            }
        );
        let record = s.room.record(op).await;
        assert_eq!(
            (
                record.status,
                record.generation,
                record.lease_owner.as_deref()
            ),
            (OperationStatus::InFlight, 1, Some("other-runner"))
        );
        assert_eq!(reconciler.asked(), 0);
        assert!(s.owner.took().is_empty());
    })
    .await;
}
