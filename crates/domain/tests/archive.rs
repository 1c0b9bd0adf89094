//! Closed objectives leave the live state (issue 21, `engine::close_out`): what is left
//! behind answers every rule that still concerns them (D3, O6, O13, O14, M1, T2), and closing
//! out changes no decision: the same inputs decide the same way whether the closed objectives
//! are in the live state or in their records.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::archive::{ObjectiveRecord, RecordKey};
use agentroom_domain::engine::{
    CallRequest, ControlAction, Decision, Effect, Input, LateDecision, LogEntry, MemoryChange,
};
use agentroom_domain::event::{EventBody, EventRefusal};
use agentroom_domain::ids::{ContributionId, TaskIdentity};
use agentroom_domain::memory::Provenance;
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::{Column, TaskState};
use agentroom_domain::redaction::RedactionTarget;
use agentroom_domain::rules::Rule;

use common::{
    Room, accepted_by, all_met, assert_rejected, calls, notifications, p, review_call,
    specialist_call,
};

fn up_to_review(room: &mut Room) -> CallRequest {
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    review_call(&d)
}

fn closing_room() -> Room {
    let mut room = Room::new();
    room.sim.close_out();
    room
}

#[test]
fn a_completed_objective_leaves_the_live_state_with_its_contributions() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    let d = room.review(&call, &all_met());
    assert!(room.state().objectives().is_empty(), "open work only");
    assert!(room.state().contributions().is_empty());
    assert_eq!(d.archived.len(), 1, "kept by the decision that closed it");
    let record = &d.archived[0];
    assert_eq!(record.id(), objective);
    assert_eq!(record.objective.status(), ObjectiveStatus::Completed);
    assert_eq!(record.objective.reviews().len(), 1);
    assert_eq!(record.contributions.len(), 2, "gather and write");
    // Nothing of it stays live: its record answers what the rules ask about it.
    assert!(room.state().objective(objective).is_none());
    assert_eq!(record.status(), ObjectiveStatus::Completed);
    assert!(record.was_assigned(&p("sam")) && record.was_assigned(&p("sue")));
    assert!(!record.was_assigned(&p("rita")));
    assert!(RecordKey::of(record).contains(&RecordKey::Objective(objective)));
}

#[test]
fn d3_a_canceled_objective_stays_live_until_its_aborting_call_settles() {
    let mut room = closing_room();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let objective = room.objective_id();
    let d = room.control("olive", ControlAction::Cancel);
    assert!(
        d.archived.is_empty(),
        "its call still holds a reservation (B3)"
    );
    assert!(room.state().objective(objective).is_some());
    // The call returns after the cancel: charged, held (D4), and the objective leaves with it.
    let d = room.contribute(&gather, "papers");
    assert_eq!(d.archived.len(), 1);
    let record = &d.archived[0];
    assert_eq!(record.objective.status(), ObjectiveStatus::Canceled);
    assert_eq!(
        record.held.len(),
        1,
        "the late result stays evidence in the record"
    );
    assert_eq!(record.contributions.len(), 1);
    assert!(room.state().held_results().is_empty());
    assert!(room.state().operations().is_empty());
}

#[test]
fn d3_a_control_of_a_closed_objective_is_refused_and_logged() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    room.review(&call, &all_met());
    let d = room.apply(Input::Control {
        by: p("olive"),
        objective,
        action: ControlAction::Pause,
    });
    assert_rejected(&d, Rule::D3);
    assert!(calls(&d).is_empty());
}

#[test]
fn o14_a_correction_of_a_closed_objective_is_refused_as_terminal() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    room.review(&call, &all_met());
    let body = EventBody::OwnerCorrection {
        objective,
        text: "also 2025".into(),
        criteria: None,
    };
    let records = &room.sim.records().to_vec();
    assert!(matches!(
        room.state().admits_event_with(&p("olive"), &body, records),
        Err(EventRefusal::Terminal {
            status: ObjectiveStatus::Completed,
            ..
        })
    ));
    assert!(matches!(
        room.state().admits_event_with(&p("sam"), &body, records),
        Err(EventRefusal::NotOwner { .. })
    ));
    // Without its record, a closed objective is unknown to the live state.
    assert!(matches!(
        room.state().admits_event(&p("olive"), &body),
        Err(EventRefusal::UnknownObjective { .. })
    ));
}

#[test]
fn o13_a_receipt_for_a_closed_objective_is_consumed_and_only_from_its_assignees() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    room.review(&call, &all_met());
    let body = EventBody::InternalReceipt {
        objective: Some(objective),
        note: "delivered".into(),
    };
    assert!(matches!(
        room.state()
            .admits_event_with(&p("hal"), &body, &room.sim.records().to_vec()),
        Err(EventRefusal::NotAnAssignee { .. })
    ));
    let d = room.post("sam", body);
    assert!(accepted_by(&d, Rule::O13));
    assert!(calls(&d).is_empty(), "no reasoner call");
}

#[test]
fn o6_an_explicit_reference_to_a_closed_objective_is_answered_from_what_it_keeps() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    room.review(&call, &all_met());
    let d = room.post(
        "olive",
        EventBody::ExplicitReference {
            objective,
            task: None,
        },
    );
    assert!(accepted_by(&d, Rule::O6));
    assert!(calls(&d).is_empty());
    assert!(
        notifications(&d).iter().any(|n| n.contains("completed")),
        "{:?}",
        notifications(&d)
    );
}

#[test]
fn m1_a_memory_entry_may_come_from_a_closed_objectives_contribution_and_message() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    room.review(&call, &all_met());
    let record = room.sim.records()[0].clone();
    let contribution = record.contributions[0].id();
    for provenance in [
        Provenance::Contribution { id: contribution },
        Provenance::OwnerMessage {
            event: record.objective.origin(),
        },
    ] {
        let input = Input::Memory {
            by: p("olive"),
            change: MemoryChange::Add {
                text: "the survey covers 2026".into(),
                provenance: provenance.clone(),
            },
        };
        assert!(
            !input.archive_needed(room.state()).is_empty(),
            "the host reads the record it names"
        );
        let d = room.apply(input);
        assert!(accepted_by(&d, Rule::M1), "{provenance:?}: {:?}", d.log);
    }
}

#[test]
fn t2_content_of_a_closed_objective_may_be_redacted() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    room.review(&call, &all_met());
    let digest = room.sim.records()[0].contributions[0].digests()[0].clone();
    let d = room.apply(Input::Redact {
        by: p("olive"),
        target: RedactionTarget::Artifact { digest },
        reason: "holds a phone number".into(),
    });
    assert!(accepted_by(&d, Rule::T2), "{:?}", d.log);
}

#[test]
fn d4_a_late_result_kept_by_a_closed_objectives_record_stays_evidence() {
    let mut room = closing_room();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let objective = room.objective_id();
    room.control("olive", ControlAction::Cancel);
    room.contribute(&gather, "papers");
    assert!(room.state().objective(objective).is_none(), "it left");
    assert!(room.sim.records()[0].holds(gather.op));
    let decide = Input::DecideLateResult {
        by: p("olive"),
        op: gather.op,
        decision: LateDecision::Discard,
    };
    assert_eq!(
        decide.archive_needed(room.state()),
        vec![RecordKey::Held(gather.op)]
    );
    let before = room.state().clone();
    for decision in [LateDecision::Readmit, LateDecision::Discard] {
        let d = room.apply(Input::DecideLateResult {
            by: p("olive"),
            op: gather.op,
            decision,
        });
        assert_rejected(&d, Rule::D4);
        assert!(calls(&d).is_empty() && d.ledger.is_empty());
        assert_eq!(room.state(), &before, "nothing changed");
    }
    // T3 first: one who may not decide late results is refused by T3, as for a live one.
    let d = room.apply(Input::DecideLateResult {
        by: p("sam"),
        op: gather.op,
        decision: LateDecision::Discard,
    });
    assert_rejected(&d, Rule::T3);
}

/// The identity of the task `principal` completed in closed objective `record`, with the
/// contribution that completed it.
fn completed_task(record: &ObjectiveRecord, principal: &str) -> (TaskIdentity, ContributionId) {
    record
        .objective
        .current_plan()
        .unwrap()
        .tasks()
        .iter()
        .find_map(|t| match t.state() {
            TaskState::Completed { contribution } if t.assignee() == &p(principal) => {
                Some((t.identity().clone(), *contribution))
            }
            _ => None,
        })
        .unwrap()
}

#[test]
fn t2_an_assignee_confirms_its_task_done_from_the_closed_objectives_record() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let objective = room.objective_id();
    room.review(&call, &all_met());
    let record = room.sim.records()[0].clone();
    let (task, contribution) = completed_task(&record, "sam");
    let confirm = |by: &str| Input::UpdateTask {
        by: p(by),
        objective,
        task: task.clone(),
        status: Column::Done,
        contribution: Some(contribution),
    };
    // The host reads the objective's record.
    let needed = confirm("sam").archive_needed(room.state());
    assert_eq!(needed, vec![RecordKey::Objective(objective)]);
    assert!(RecordKey::of(&record).contains(&needed[0]));
    let before = room.state().clone();
    let d = room.apply(confirm("sam"));
    assert!(accepted_by(&d, Rule::T2), "{:?}", d.log);
    assert_eq!(room.state(), &before, "a confirmation changes nothing");
    // Another's task, or any other move, is refused: the objective's tasks no longer change.
    assert_rejected(&room.apply(confirm("sue")), Rule::D3);
    let moved = Input::UpdateTask {
        by: p("sam"),
        objective,
        task: task.clone(),
        status: Column::InProgress,
        contribution: None,
    };
    assert_rejected(&room.apply(moved), Rule::D3);
}

#[test]
fn a_read_view_puts_records_back_and_leaves_live_objectives_alone() {
    let mut room = closing_room();
    let call = up_to_review(&mut room);
    let closed = room.objective_id();
    room.review(&call, &all_met());
    let record = room.sim.records()[0].clone();
    let live_before = room.state().clone();
    let view = room.state().clone().with_records([record.clone()]);
    assert_eq!(view.objective(closed), Some(&record.objective));
    for contribution in &record.contributions {
        assert_eq!(
            view.contributions().get(&contribution.id()),
            Some(contribution)
        );
    }
    // A record of an objective the state does not hold as closed is not put back twice.
    let twice = view.clone().with_records([record]);
    assert_eq!(twice, view);
    assert_eq!(room.state(), &live_before, "the live state is untouched");
}

/// What a decision shows outside: its log and effects.
fn seen(d: &Decision) -> (Vec<LogEntry>, Vec<Effect>) {
    (d.log.clone(), d.effects.clone())
}

/// Two objectives one after the other, then inputs about the first once it closed.
fn walk(room: &mut Room) -> Vec<(Vec<LogEntry>, Vec<Effect>)> {
    let mut out = Vec::new();
    let call = up_to_review(room);
    let first = room.objective_id();
    out.push(seen(&room.review(&call, &all_met())));
    let call = up_to_review(room);
    out.push(seen(&room.review(&call, &all_met())));
    for input in [
        Input::Control {
            by: p("oscar"),
            objective: first,
            action: ControlAction::Cancel,
        },
        Input::Control {
            by: p("hal"),
            objective: first,
            action: ControlAction::Pause,
        },
    ] {
        out.push(seen(&room.apply(input)));
    }
    for (author, body) in [
        (
            "sue",
            EventBody::InternalReceipt {
                objective: Some(first),
                note: "filed".into(),
            },
        ),
        (
            "olive",
            EventBody::ExplicitReference {
                objective: first,
                task: None,
            },
        ),
    ] {
        out.push(seen(&room.post(author, body)));
    }
    out
}

#[test]
fn closing_out_changes_no_decision() {
    let mut live = Room::new();
    let mut closing = closing_room();
    let a = walk(&mut live);
    let b = walk(&mut closing);
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        // An explicit reference to an objective in its record does not name its plan.
        if i == a.len() - 1 {
            assert_eq!(x.0, y.0, "step {i}: the log");
            continue;
        }
        assert_eq!(x, y, "step {i}");
    }
    assert_eq!(
        live.sim.ledger(),
        closing.sim.ledger(),
        "the same ledger (B3)"
    );
    assert_eq!(closing.state().objectives().len(), 0);
    assert_eq!(live.state().objectives().len(), 2);
    assert_eq!(closing.sim.records().len(), 2);
}
