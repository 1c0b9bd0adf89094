//! Malformed traces and ground truths are refused with a typed error naming what is wrong and
//! the rule the stores keep: no metric is drawn from records that do not fit together.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use agentroom_eval::trace::{
    CallRole, EventKind, LedgerEntry, ObjectiveRecord, ObjectiveStatus, ResultKind,
};
use agentroom_eval::{GroundTruth, Trace, TraceError, Truth, TruthError, evaluate};
use support::*;

fn refused(trace: &Trace) -> TraceError {
    evaluate(trace, &truth()).unwrap_err()
}

#[test]
fn b1_a_receipt_for_an_unknown_operation_is_refused() {
    let mut t = honest();
    t.receipts
        .push(receipt("op-ghost", ResultKind::Contribution, 2_000, &[]));
    assert_eq!(
        refused(&t),
        TraceError::ReceiptForUnknownOperation {
            op: "op-ghost".to_owned()
        }
    );
}

#[test]
fn b1_a_charge_on_an_unknown_operation_is_refused() {
    let mut t = honest();
    t.ledger.push(settled("op-ghost", 10, 10));
    let err = refused(&t);
    assert_eq!(
        err,
        TraceError::LedgerEntryForUnknownOperation {
            entry: "settled",
            op: "op-ghost".to_owned()
        }
    );
    assert_eq!(
        err.to_string(),
        "a ledger entry (settled) names operation op-ghost, which the trace does not have (B1)"
    );
}

#[test]
fn b3_a_charge_without_a_reservation_is_refused() {
    // The operation exists, but nothing was reserved for it (or it was settled already).
    let mut t = honest();
    t.ledger.push(settled("op-gather", 100_000, 20_000));
    assert_eq!(
        refused(&t),
        TraceError::NoReservation {
            entry: "settled",
            op: "op-gather".to_owned()
        }
    );
}

#[test]
fn b1_a_second_reservation_for_one_operation_is_refused() {
    let mut t = honest();
    t.ledger.push(reserved("op-gather", 100_000));
    assert_eq!(
        refused(&t),
        TraceError::DuplicateReservation {
            op: "op-gather".to_owned()
        }
    );
}

#[test]
fn a_negative_charge_is_refused() {
    let mut t = honest();
    if let LedgerEntry::Settled { charged, .. } = &mut t.ledger[2] {
        *charged = -1;
    }
    assert_eq!(
        refused(&t),
        TraceError::NegativeAmount {
            entry: "settled",
            micros: -1
        }
    );
}

#[test]
fn d2_a_second_receipt_for_one_operation_is_refused() {
    let mut t = honest();
    t.receipts
        .push(receipt("op-gather", ResultKind::Contribution, 1_750, &[]));
    assert_eq!(
        refused(&t),
        TraceError::DuplicateReceipt {
            op: "op-gather".to_owned()
        }
    );
}

#[test]
fn b1_a_receipt_before_its_dispatch_is_refused() {
    let mut t = honest();
    t.receipts[1].at_ms = 1_100;
    assert_eq!(
        refused(&t),
        TraceError::ReceiptBeforeDispatch {
            op: "op-gather".to_owned(),
            dispatched_ms: 1_200,
            receipt_ms: 1_100
        }
    );
}

#[test]
fn an_operation_that_ends_before_its_dispatch_is_refused() {
    let mut t = honest();
    t.operations[1].ended_ms = Some(1_000);
    assert!(matches!(
        refused(&t),
        TraceError::EndedBeforeDispatch { op, .. } if op == "op-gather"
    ));
}

#[test]
fn t2_a_contribution_of_a_call_that_is_no_specialists_is_refused() {
    let mut t = honest();
    t.contributions
        .push(contribution("c-odd", "op-plan", "text", None));
    t.contributions
        .push(contribution("c-ghost", "op-ghost", "text", None));
    assert_eq!(
        refused(&t),
        TraceError::ContributionOfUnknownOperation {
            contribution: "c-odd".to_owned(),
            op: "op-plan".to_owned()
        }
    );
    t.contributions.remove(2);
    assert_eq!(
        refused(&t),
        TraceError::ContributionOfUnknownOperation {
            contribution: "c-ghost".to_owned(),
            op: "op-ghost".to_owned()
        }
    );
}

#[test]
fn records_naming_an_objective_the_trace_does_not_have_are_refused() {
    let mut t = honest();
    t.statuses
        .push(status("obj-ghost", ObjectiveStatus::Completed, 3_000));
    assert!(matches!(
        refused(&t),
        TraceError::UnknownObjective { objective, .. } if objective == "obj-ghost"
    ));

    let mut t = honest();
    t.events.push(event(
        "ev-fix",
        EventKind::OwnerCorrection,
        Some("obj-ghost"),
        1_500,
    ));
    assert!(matches!(
        refused(&t),
        TraceError::UnknownObjective { what, .. } if what == "event ev-fix"
    ));

    let mut t = honest();
    t.operations[0].objective = Some("obj-ghost".to_owned());
    assert!(matches!(
        refused(&t),
        TraceError::UnknownObjective { what, .. } if what == "operation op-plan"
    ));
}

#[test]
fn an_objective_the_ground_truth_does_not_list_cannot_be_judged() {
    let mut t = honest();
    t.objectives.push(ObjectiveRecord {
        id: "obj-2".to_owned(),
        key: "unplanned".to_owned(),
    });
    assert_eq!(
        refused(&t),
        TraceError::UnknownObjectiveKey {
            objective: "obj-2".to_owned(),
            key: "unplanned".to_owned()
        }
    );
}

#[test]
fn two_records_with_one_id_are_refused() {
    let mut t = honest();
    t.operations
        .push(call("op-plan", CallRole::Reasoner, 1_000, None));
    assert_eq!(
        refused(&t),
        TraceError::DuplicateId {
            kind: "operation",
            id: "op-plan".to_owned()
        }
    );
}

#[test]
fn statuses_that_go_back_in_time_are_refused() {
    let mut t = honest();
    t.statuses
        .push(status(OBJECTIVE, ObjectiveStatus::Running, 2_000));
    assert!(matches!(
        refused(&t),
        TraceError::StatusOutOfOrder {
            at_ms: 2_000,
            previous_ms: 3_000,
            ..
        }
    ));
}

#[test]
fn a_last_status_before_the_first_owner_message_is_refused() {
    let mut t = honest();
    t.events[0].at_ms = 9_000;
    assert_eq!(
        refused(&t),
        TraceError::StatusBeforeMessage {
            first_message_ms: 9_000,
            last_status_ms: 3_000
        }
    );
}

#[test]
fn a_trace_of_another_scenario_is_refused() {
    let mut t = honest();
    t.scenario = "other".to_owned();
    assert_eq!(
        refused(&t),
        TraceError::ScenarioMismatch {
            trace: "other".to_owned(),
            truth: SCENARIO.to_owned()
        }
    );
}

fn truth_refused(truth: &GroundTruth) -> TruthError {
    match evaluate(&honest(), truth).unwrap_err() {
        TraceError::Truth { source, .. } => source,
        other => panic!("expected a ground-truth error, got {other:?}"),
    }
}

#[test]
fn a_ground_truth_that_cannot_judge_is_refused() {
    let mut t = truth();
    let scope = t.objectives[0].criteria[0].clone();
    t.objectives[0].criteria.push(scope);
    assert_eq!(
        truth_refused(&t),
        TruthError::DuplicateCriterion {
            objective: KEY.to_owned(),
            criterion: "scope".to_owned()
        }
    );

    let mut t = truth();
    t.objectives[0].criteria[1].truth = Truth::Delivered {
        marker: "  ".to_owned(),
    };
    assert!(matches!(truth_refused(&t), TruthError::BlankMarker { .. }));

    let mut t = truth();
    t.objectives[0].criteria.clear();
    assert_eq!(truth_refused(&t), TruthError::NoCriteria(KEY.to_owned()));

    let mut t = truth();
    t.objectives.push(t.objectives[0].clone());
    assert_eq!(
        truth_refused(&t),
        TruthError::DuplicateObjective(KEY.to_owned())
    );

    let mut t = truth();
    t.same_effects = vec![
        vec!["a".to_owned(), "b".to_owned()],
        vec!["c".to_owned(), "b".to_owned()],
    ];
    assert_eq!(
        truth_refused(&t),
        TruthError::EffectInTwoGroups("b".to_owned())
    );

    let mut t = truth();
    t.same_effects = vec![Vec::new()];
    assert_eq!(truth_refused(&t), TruthError::EmptyEffectGroup);
}
