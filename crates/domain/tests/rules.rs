//! One test (at least) per rule the domain decides, named after it; every state is reached
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! through `decide` from an empty Room.

mod common;

use agentroom_domain::engine::{
    CallBrief, CallResult, Charge, ControlAction, Input, InputError, LateDecision, ProposalKind,
    Reconciliation, ReviewerResult,
};
use agentroom_domain::event::{Event, EventBody, EventRefusal};
use agentroom_domain::ids::{CriterionId, EventId, RoomId, TaskIdentity};
use agentroom_domain::objective::{CriteriaError, Criterion, ObjectiveStatus, ObservedRevisions};
use agentroom_domain::plan::{Column, TaskState};
use agentroom_domain::policy::RoomPolicy;
use agentroom_domain::review::Verdict;
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use agentroom_domain::sim::SimError;
use agentroom_domain::state::{CallRole, OperationState};
use common::*;
use uuid::Uuid;

fn column(room: &Room, k: &str) -> Column {
    let plan = room.objective().current_plan().unwrap();
    plan.column_of(plan.task_by_key(&key(k)).unwrap())
}

fn identity(room: &Room, k: &str) -> TaskIdentity {
    room.objective()
        .current_plan()
        .unwrap()
        .task_by_key(&key(k))
        .unwrap()
        .identity()
        .clone()
}

/// Gather and write completed; the review call is returned.
fn up_to_review(room: &mut Room) -> agentroom_domain::engine::CallRequest {
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    review_call(&d)
}

fn correction(
    room: &mut Room,
    author: &str,
    criteria: Option<Vec<Criterion>>,
) -> agentroom_domain::engine::Decision {
    let objective = room.objective_id();
    room.post(
        author,
        EventBody::OwnerCorrection {
            objective,
            text: "focus on 2026 only".into(),
            criteria,
        },
    )
}

// ---------------------------------------------------------------- objectives and plans

#[test]
fn o1_independent_objectives_share_the_room_budget() {
    let mut room = Room::new();
    room.start_objective();
    room.start_objective();
    let objectives = room.state().objectives();
    assert_eq!(objectives.len(), 2);
    assert_ne!(objectives[0].id(), objectives[1].id());
    // Both objectives' calls hold reservations in the one Room ledger.
    let per_objective: Vec<usize> = objectives
        .iter()
        .map(|o| {
            room.state()
                .operations()
                .values()
                .filter(|op| op.objective() == Some(o.id()) && op.state().is_open())
                .count()
        })
        .collect();
    assert_eq!(per_objective, vec![1, 1]);
    assert_eq!(
        room.state().ledger().balances().reserved.micros(),
        2 * SPECIALIST
    );
}

#[test]
fn o1_a_second_objective_is_refused_what_the_first_used() {
    // Enough for one reasoner and one specialist call, twice the reasoner only.
    let mut room = Room::with_limit(2 * REASONER + SPECIALIST);
    let d = room.start_objective();
    specialist_call(&d);
    let d = room.say("a second, independent objective");
    let call = reasoner_call(&d);
    let d = room.plan(&call, two_step_plan());
    assert_rejected(&d, Rule::B2);
    assert!(calls(&d).is_empty());
    assert_eq!(column(&room, "gather"), Column::Todo);
}

#[test]
fn o2_one_current_plan_and_append_only_history() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let v1 = room.objective().plans()[0].clone();
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    room.plan(
        &replan,
        plan_of(vec![
            task("gather", "research", &[]),
            task("more", "research", &[]),
            report("write", &["gather", "more"]),
        ]),
    );
    let plans = room.objective().plans();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0], v1, "history is append-only");
    assert_eq!(plans[1].predecessor(), Some(v1.id()));
    assert_eq!(room.objective().current_plan().unwrap().number(), 2);
}

#[test]
fn o3_completed_unchanged_task_keeps_its_identity_and_result() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let gather_v1 = room.objective().plans()[0]
        .task_by_key(&key("gather"))
        .unwrap()
        .clone();
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let d = room.plan(
        &replan,
        plan_of(vec![
            task("gather", "research", &[]),
            task("more", "research", &[]),
            report("write", &["gather", "more"]),
        ]),
    );
    let gather_v2 = room
        .objective()
        .current_plan()
        .unwrap()
        .task_by_key(&key("gather"))
        .unwrap();
    assert_eq!(gather_v2.identity(), gather_v1.identity());
    assert_eq!(gather_v2.state(), gather_v1.state());
    assert!(gather_v2.is_reused());
    // Only the new work is dispatched.
    assert_eq!(specialist_call(&d).principal, Some(p("sam")));
}

#[test]
fn o2_o3_a_plan_version_says_what_it_added_removed_changed_and_reused() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let mut retitled = report("write", &["gather", "more"]);
    retitled.title = "write it again".into();
    room.plan(
        &replan,
        plan_of(vec![
            task("gather", "research", &[]),
            task("more", "research", &[]),
            retitled,
        ]),
    );
    let plans = room.objective().plans();
    let first = plans[0].changes_since(None);
    assert_eq!(
        first.added.len(),
        plans[0].tasks().len(),
        "the first adds every task"
    );
    assert!(first.removed.is_empty() && first.changed.is_empty() && first.unchanged.is_empty());
    let second = plans[1].changes_since(Some(&plans[0]));
    assert_eq!(second.added, vec![key("more")]);
    assert_eq!(
        second.unchanged,
        vec![key("gather")],
        "same key, same spec (O3)"
    );
    assert_eq!(second.changed, vec![key("write")], "same key, another spec");
    assert!(second.removed.is_empty());
    assert_eq!(
        second.reused,
        vec![key("gather")],
        "completed and unchanged: reused (O3)"
    );
    // Back the other way, the new task is removed.
    assert_eq!(
        plans[0].changes_since(Some(&plans[1])).removed,
        vec![key("more")]
    );
}

#[test]
fn o3_a_changed_spec_or_unresolved_work_gets_a_fresh_identity() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let first = identity(&room, "gather");
    let write_first = identity(&room, "write");
    // A failed task asks for repair; the repair plan changes the title of `gather`.
    let d = room.fail(&gather);
    let repair = reasoner_call(&d);
    let mut changed = task("gather", "research", &[]);
    changed.title = "gather from two sources".into();
    room.plan(
        &repair,
        plan_of(vec![changed, report("write", &["gather"])]),
    );
    assert_ne!(
        identity(&room, "gather"),
        first,
        "changed spec: fresh identity"
    );
    assert_ne!(
        identity(&room, "write"),
        write_first,
        "unresolved work: fresh identity"
    );
}

#[test]
fn o3_a_claim_to_reuse_an_identity_that_is_not_completed_is_a_repairable_conflict() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let claimed = identity(&room, "gather");
    let d = room.fail(&gather);
    let repair = reasoner_call(&d);
    let mut reuse = task("gather", "research", &[]);
    reuse.reuse = Some(claimed);
    let d = room.plan(&repair, plan_of(vec![reuse, report("write", &["gather"])]));
    assert_rejected(&d, Rule::O11);
    // The conflict consumed an interpretation and asked again with feedback.
    let again = reasoner_call(&d);
    let CallBrief::Interpret {
        feedback, attempt, ..
    } = &again.brief
    else {
        panic!()
    };
    assert_eq!(*attempt, 2);
    assert!(feedback[0].contains("claims identity"));
}

#[test]
fn o4_task_identities_are_plan_scoped_by_default() {
    let mut room = Room::new();
    room.start_objective();
    let plan = room.objective().current_plan().unwrap();
    assert_eq!(
        identity(&room, "gather").as_str(),
        format!("{}/gather", plan.id())
    );
}

#[test]
fn o4_a_prefix_makes_identities_objective_scoped_and_stable() {
    let policy = RoomPolicy::from_toml("task_identity_prefix = \"P\"\n").unwrap();
    let mut room = Room::with_policy(policy, 1_000_000);
    let d = room.start_objective();
    let objective = room.objective_id();
    assert_eq!(
        identity(&room, "gather").as_str(),
        format!("P{objective}/gather")
    );
    let gather = specialist_call(&d);
    let d = room.fail(&gather);
    let repair = reasoner_call(&d);
    room.plan(&repair, two_step_plan());
    // Unresolved work needs a fresh identity: the second identity of the key is `#2`.
    assert_eq!(
        identity(&room, "gather").as_str(),
        format!("P{objective}/gather#2")
    );
    assert_eq!(
        identity(&room, "write").as_str(),
        format!("P{objective}/write#2")
    );
}

#[test]
fn o5_a_superseded_tasks_result_stays_evidence_but_completes_nothing() {
    let mut room = Room::new();
    let d = room.start_objective();
    let old_gather = specialist_call(&d);
    // An owner correction replans while `gather` runs; the old call is asked to abort.
    let d = correction(&mut room, "olive", None);
    let replan = reasoner_call(&d);
    let d = room.plan(&replan, two_step_plan());
    assert!(cancels(&d).contains(&old_gather.op));
    let new_gather = identity(&room, "gather");
    assert_ne!(new_gather, old_gather_identity(&old_gather));
    let d = room.contribute(&old_gather, "old result");
    assert_rejected(&d, Rule::O5);
    assert_eq!(
        room.objective().contributions().len(),
        1,
        "kept as evidence"
    );
    assert_eq!(
        column(&room, "gather"),
        Column::InProgress,
        "the new task runs on"
    );
    assert!(
        !room
            .objective()
            .current_plan()
            .unwrap()
            .task_by_key(&key("gather"))
            .unwrap()
            .is_completed()
    );
}

fn old_gather_identity(call: &agentroom_domain::engine::CallRequest) -> TaskIdentity {
    match &call.brief {
        CallBrief::Execute(t) => t.identity.clone(),
        _ => panic!(),
    }
}

#[test]
fn o6_an_ordinary_answer_needs_no_plan_and_creates_no_objective() {
    let mut room = Room::new();
    let d = room.say("What time zone is the team in?");
    let call = reasoner_call(&d);
    let d = room.propose(&call, ProposalKind::Answer { text: "UTC".into() });
    assert!(accepted_by(&d, Rule::O6));
    assert!(room.state().objectives().is_empty());
    assert!(room.state().intake().is_empty());
    assert_eq!(notifications(&d), vec!["UTC".to_owned()]);
}

#[test]
fn o6_an_explicit_reference_is_handled_without_a_reasoner_call() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let task = identity(&room, "gather");
    let d = room.post(
        "sam",
        EventBody::ExplicitReference {
            objective,
            task: Some(task),
        },
    );
    assert!(accepted_by(&d, Rule::O6));
    assert!(calls(&d).is_empty());
    assert!(notifications(&d)[0].contains("in_progress"));
}

#[test]
fn o7_a_plan_is_admitted_whole_or_rejected_with_repair_feedback() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    // No report task: nothing of the plan is admitted, and no objective is created.
    let d = room.plan(&call, plan_of(vec![task("gather", "research", &[])]));
    assert_rejected(&d, Rule::O7);
    assert!(room.state().objectives().is_empty());
    let again = reasoner_call(&d);
    let CallBrief::Interpret { feedback, .. } = &again.brief else {
        panic!()
    };
    assert!(feedback[0].contains("exactly one report task"));
    room.plan(&again, two_step_plan());
    assert_eq!(room.state().objectives().len(), 1);
}

#[test]
fn o7_a_dependency_cycle_is_rejected() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    let d = room.plan(
        &call,
        plan_of(vec![
            task("a", "research", &["b"]),
            task("b", "research", &["a"]),
            report("write", &["a"]),
        ]),
    );
    assert_rejected(&d, Rule::O7);
    assert!(d.log.iter().any(|l| l.message.contains("dependency cycle")));
}

#[test]
fn o7_an_agent_cannot_move_work_only_the_engine_can() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let task = identity(&room, "write");
    let d = room.apply(Input::UpdateTask {
        by: p("sue"),
        objective,
        task,
        status: Column::Todo,
        contribution: None,
    });
    assert_rejected(&d, Rule::O7);
    assert_eq!(column(&room, "write"), Column::Backlog);
}

#[test]
fn o8_third_replan_without_progress_stops_the_objective() {
    let mut room = Room::new();
    let d = room.start_objective();
    let mut gather = specialist_call(&d);
    for replan in 1..=3 {
        let d = room.fail(&gather);
        let call = reasoner_call(&d);
        let d = room.plan(&call, two_step_plan());
        if replan < 3 {
            assert_eq!(room.objective().counters().replans_without_progress, replan);
            gather = specialist_call(&d);
        } else {
            assert_eq!(stopped_by(&d), Some(Rule::O8));
            assert_rejected(&d, Rule::O8);
            assert!(calls(&d).is_empty());
        }
    }
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    assert_eq!(
        room.objective().plans().len(),
        3,
        "the third replan was not admitted"
    );
}

#[test]
fn o8_completed_work_resets_the_replan_count() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.fail(&gather);
    let call = reasoner_call(&d);
    let d = room.plan(&call, two_step_plan());
    assert_eq!(room.objective().counters().replans_without_progress, 1);
    let gather = specialist_call(&d);
    room.contribute(&gather, "papers");
    assert_eq!(room.objective().counters().replans_without_progress, 0);
}

#[test]
fn o9_only_the_owners_messages_create_objectives() {
    let mut room = Room::new();
    let d = room.post(
        "sam",
        EventBody::OwnerMessage {
            text: "make me an objective".into(),
        },
    );
    assert_rejected(&d, Rule::O9);
    assert!(calls(&d).is_empty());
    assert!(room.state().intake().is_empty());
}

#[test]
fn o9_an_internal_receipt_cannot_create_an_objective() {
    let mut room = Room::new();
    let d = room.post(
        "sam",
        EventBody::InternalReceipt {
            objective: None,
            note: "delivered".into(),
        },
    );
    assert_rejected(&d, Rule::O9);
    assert!(calls(&d).is_empty());
    assert!(room.state().objectives().is_empty());
}

#[test]
fn o10_a_proposal_bound_to_a_stale_revision_is_rejected() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    let stale = ObservedRevisions {
        objective: 7,
        control: 0,
    };
    let d = room.propose_observed(&call, stale, ProposalKind::Plan(two_step_plan()));
    assert_rejected(&d, Rule::O10);
    assert!(room.state().objectives().is_empty());
    // It consumed an interpretation: the next one is attempt 2.
    let CallBrief::Interpret { attempt, .. } = reasoner_call(&d).brief else {
        panic!()
    };
    assert_eq!(attempt, 2);
}

#[test]
fn o10_a_proposal_fenced_by_a_pause_is_rejected_and_asked_again_on_resume() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.fail(&gather);
    let repair = reasoner_call(&d);
    let d = room.control("olive", ControlAction::Pause);
    assert!(cancels(&d).contains(&repair.op));
    let d = room.plan(&repair, two_step_plan());
    assert_rejected(&d, Rule::O10);
    assert_eq!(room.objective().plans().len(), 1);
    assert!(calls(&d).is_empty(), "paused: nothing is dispatched");
    let d = room.control("olive", ControlAction::Resume);
    let again = reasoner_call(&d);
    let CallBrief::Interpret { attempt, .. } = again.brief else {
        panic!()
    };
    assert_eq!(attempt, 1, "a fenced attempt is given back");
}

#[test]
fn o11_third_failed_interpretation_waits_for_the_owner() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let mut call = reasoner_call(&d);
    let mut reservations = vec![call.op];
    for attempt in 1..=3 {
        let d = room.format_error(&call);
        assert_rejected(&d, Rule::O11);
        if attempt < 3 {
            call = reasoner_call(&d);
            reservations.push(call.op);
        } else {
            assert!(calls(&d).is_empty());
            assert!(notifications(&d)[0].contains("waiting for the owner"));
        }
    }
    reservations.dedup();
    assert_eq!(
        reservations.len(),
        3,
        "three separately reserved interpretations"
    );
    assert!(room.state().intake().is_empty());
}

#[test]
fn o11_duplicate_task_keys_are_a_repairable_identity_conflict() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    let d = room.plan(
        &call,
        plan_of(vec![
            task("gather", "research", &[]),
            task("gather", "research", &[]),
            report("w", &["gather"]),
        ]),
    );
    assert_rejected(&d, Rule::O11);
    reasoner_call(&d);
}

#[test]
fn o11_an_exhausted_replan_leaves_the_objective_waiting_for_the_owner() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.fail(&gather);
    let mut call = reasoner_call(&d);
    for attempt in 1..=3 {
        let d = room.format_error(&call);
        if attempt < 3 {
            call = reasoner_call(&d);
        }
    }
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
}

#[test]
fn o12_a_wait_ack_does_not_stall_other_ready_work_or_the_review() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    let d = room.plan(
        &call,
        plan_of(vec![
            task("a", "research", &[]),
            task("b", "research", &[]),
            report("write", &["b"]),
        ]),
    );
    let started = calls_of(&d, CallRole::Specialist);
    assert_eq!(started.len(), 2);
    let objective = room.objective_id();
    let a = identity(&room, "a");
    let d = room.post(
        "sam",
        EventBody::WaitAck {
            objective,
            task: a,
            reason: "awaiting a reply".into(),
        },
    );
    assert!(accepted_by(&d, Rule::O12));
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    assert_eq!(column(&room, "a"), Column::InProgress);
    let b_call = started
        .iter()
        .find(|c| matches!(&c.brief, CallBrief::Execute(t) if t.key == key("b")))
        .unwrap();
    let d = room.contribute(b_call, "b done");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    review_call(&d);
}

#[test]
fn o12_an_owner_pause_keeps_its_boundary() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let objective = room.objective_id();
    let task = identity(&room, "gather");
    room.post(
        "sam",
        EventBody::WaitAck {
            objective,
            task,
            reason: "outside".into(),
        },
    );
    room.control("olive", ControlAction::Pause);
    let d = room.contribute(&gather, "papers");
    assert!(calls(&d).is_empty(), "the pause is a real boundary");
    assert!(accepted_by(&d, Rule::D4));
}

#[test]
fn o13_a_receipt_for_a_terminal_objective_is_consumed_without_a_reasoner_call() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    room.review(&call, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    let objective = room.objective_id();
    // sam gathered for it: an assignee of its tasks sends its receipts.
    let d = room.post(
        "sam",
        EventBody::InternalReceipt {
            objective: Some(objective),
            note: "delivered".into(),
        },
    );
    assert!(accepted_by(&d, Rule::O13));
    assert!(calls(&d).is_empty());
    assert_eq!(room.objective().receipts().len(), 1);
}

#[test]
fn o14_only_the_owners_corrections_enter_the_history() {
    let mut room = Room::new();
    room.start_objective();
    let d = correction(&mut room, "oscar", None);
    assert_rejected(&d, Rule::O14);
    assert!(room.objective().corrections().is_empty());
    assert!(calls_of(&d, CallRole::Reasoner).is_empty());
    let d = correction(&mut room, "olive", None);
    assert_eq!(room.objective().corrections().len(), 1);
    reasoner_call(&d);
}

/// O12: only the task's assignee says that its running task waits; an agent host, another
/// specialist, a task of no current plan or a task no call runs for are refused, and the
/// task is unchanged.
#[test]
fn o12_only_the_assignee_of_a_running_task_acknowledges_a_wait() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let gather = identity(&room, "gather");
    let write = identity(&room, "write");
    let ack = |task: &TaskIdentity| EventBody::WaitAck {
        objective,
        task: task.clone(),
        reason: "awaiting a licence".into(),
    };
    for (who, task, rule) in [
        ("hal", &gather, Rule::T3),
        ("sue", &gather, Rule::T3),
        ("sue", &write, Rule::O12),
    ] {
        let before = room.objective().clone();
        let d = room.post(who, ack(task));
        assert_rejected(&d, rule);
        assert_eq!(room.objective(), &before, "{who} on {task}");
    }
    let unknown = TaskIdentity::from_wire("nope/gather");
    let refused = room.state().admits_event(&p("sam"), &ack(&unknown));
    assert!(
        matches!(refused, Err(EventRefusal::UnknownTask { .. })),
        "{refused:?}"
    );
    let d = room.post("sam", ack(&gather));
    assert!(accepted_by(&d, Rule::O12));
    assert!(matches!(
        room.objective()
            .current_plan()
            .unwrap()
            .task(&gather)
            .unwrap()
            .state(),
        TaskState::WaitingOutside { .. }
    ));
}

/// O13 and T3: an internal receipt comes from an assignee of one of the objective's tasks
/// (who did the work it is about); anyone else is refused before a reasoner call is paid.
#[test]
fn o13_only_an_assignee_of_the_objective_sends_its_receipts() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let receipt = EventBody::InternalReceipt {
        objective: Some(objective),
        note: "the licence arrived".into(),
    };
    for who in ["hal", "rita", "olive"] {
        let d = room.post(who, receipt.clone());
        assert_rejected(&d, Rule::T3);
        assert!(calls(&d).is_empty(), "{who}: no reasoner call");
        assert!(room.objective().receipts().is_empty());
    }
    let d = room.post("sue", receipt);
    assert!(!d.rejected_by(Rule::T3), "sue writes the report: {d:?}");
    assert_eq!(room.objective().receipts().len(), 1);
}

/// O14: a completed objective is not reopened by a correction; the refusal says to post a
/// new message, and nothing of the objective changes.
#[test]
fn o14_a_correction_of_a_terminal_objective_is_refused_saying_to_post_a_new_message() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    room.review(&call, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    let before = room.objective().clone();
    let d = correction(&mut room, "olive", Some(criteria()));
    assert_rejected(&d, Rule::O14);
    let message = &d.log[0].message;
    assert!(message.contains("post a new owner message"), "{message}");
    assert!(calls(&d).is_empty());
    assert_eq!(room.objective(), &before);
}

/// O14: corrected criteria must be freezable: none, a key twice or a blank text is refused
/// and the frozen criteria, revision and counters stay as they were.
#[test]
fn o14_a_correction_with_empty_duplicate_or_blank_criteria_changes_nothing() {
    let mut room = Room::new();
    room.start_objective();
    let one = |id: &str, text: &str| Criterion {
        id: CriterionId::parse(id).unwrap(),
        text: text.into(),
    };
    for (bad, error) in [
        (vec![], CriteriaError::Empty),
        (
            vec![one("a", "x"), one("a", "y")],
            CriteriaError::Duplicate(CriterionId::parse("a").unwrap()),
        ),
        (
            vec![one("a", " ")],
            CriteriaError::Blank(CriterionId::parse("a").unwrap()),
        ),
    ] {
        let before = room.objective().clone();
        let body = EventBody::OwnerCorrection {
            objective: room.objective_id(),
            text: "tighter".into(),
            criteria: Some(bad),
        };
        assert_eq!(
            room.state().admits_event(&p("olive"), &body),
            Err(EventRefusal::Criteria(error))
        );
        let d = room.post("olive", body);
        assert_rejected(&d, Rule::O14);
        assert_eq!(room.objective(), &before);
    }
}

// ---------------------------------------------------------------- budget

#[test]
fn b2_a_call_beyond_the_available_balance_is_not_admitted() {
    let mut room = Room::with_limit(REASONER - 1);
    let d = room.say("Summarize");
    assert_rejected(&d, Rule::B2);
    assert!(calls(&d).is_empty());
    assert_eq!(room.state().ledger().balances().reserved.micros(), 0);
    // No automatic renewal; an operator's raise lets the waiting interpretation go.
    let d = room.apply(Input::RaiseLimit {
        by: p("oscar"),
        amount: micros(1),
    });
    reasoner_call(&d);
}

#[test]
fn b3_actual_usage_is_charged_and_the_rest_released() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    room.propose(&call, ProposalKind::Answer { text: "ok".into() });
    let b = room.state().ledger().balances();
    assert_eq!((b.spent.micros(), b.reserved.micros()), (REASONER / 2, 0));
}

#[test]
fn b3_a_response_without_usage_is_charged_its_whole_reservation() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    room.apply(Input::CallReturned {
        op: call.op,
        charge: Charge::NoUsage,
        result: CallResult::Reasoner(agentroom_domain::engine::ReasonerResult::Proposal(
            agentroom_domain::engine::Proposal {
                observed: call.observed,
                kind: ProposalKind::Answer { text: "ok".into() },
            },
        )),
    });
    assert_eq!(room.state().ledger().balances().spent.micros(), REASONER);
}

#[test]
fn b3_an_uncertain_call_keeps_its_reservation() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.apply(Input::CallUncertain {
        op: gather.op,
        cause: None,
    });
    assert!(accepted_by(&d, Rule::D2));
    let b = room.state().ledger().balances();
    assert_eq!(b.reserved.micros(), SPECIALIST);
    assert_eq!(b.uncertain.micros(), SPECIALIST);
    assert_eq!(column(&room, "gather"), Column::InProgress);
    assert!(calls(&d).is_empty(), "never replayed");
}

#[test]
fn b4_raising_the_limit_keeps_historical_spend() {
    let mut room = Room::new();
    room.start_objective();
    let before = room.state().ledger().balances();
    let d = room.apply(Input::RaiseLimit {
        by: p("oscar"),
        amount: micros(5_000),
    });
    assert!(accepted_by(&d, Rule::B4));
    let after = room.state().ledger().balances();
    assert_eq!(after.spent, before.spent);
    assert_eq!(after.limit.micros(), before.limit.micros() + 5_000);
}

#[test]
fn b4_only_an_operator_raises_the_limit() {
    let mut room = Room::new();
    let before = room.state().ledger().clone();
    let d = room.apply(Input::RaiseLimit {
        by: p("olive"),
        amount: micros(5_000),
    });
    assert_rejected(&d, Rule::T3);
    assert_eq!(room.state().ledger(), &before);
}

#[test]
fn b5_an_overrun_stops_all_new_admissions_until_acknowledged() {
    let mut room = Room::new();
    let d = room.say("first");
    let call = reasoner_call(&d);
    let d = room.apply(Input::CallReturned {
        op: call.op,
        charge: Charge::Actual(micros(REASONER + 1)),
        result: CallResult::Reasoner(agentroom_domain::engine::ReasonerResult::Proposal(
            agentroom_domain::engine::Proposal {
                observed: call.observed,
                kind: ProposalKind::Answer { text: "ok".into() },
            },
        )),
    });
    assert_rejected(&d, Rule::B5);
    let d = room.say("second");
    assert_rejected(&d, Rule::B5);
    assert!(calls(&d).is_empty());
    let d = room.apply(Input::AcknowledgeOverrun { by: p("oscar") });
    assert!(accepted_by(&d, Rule::B5));
    reasoner_call(&d);
}

#[test]
fn b6_quotes_must_be_positive_so_every_call_has_a_reservation() {
    use agentroom_domain::policy::AccessPolicy;
    use agentroom_domain::state::{Quotes, RoomSetup, RoomState, SetupError};
    let setup = RoomSetup {
        room: RoomId::parse("local").unwrap(),
        owner: p("olive"),
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: micros(0),
            specialist: micros(1),
            reviewer: micros(1),
        },
        limit: micros(10),
    };
    assert!(matches!(
        RoomState::new(setup),
        Err(SetupError::QuoteNotPositive {
            role: "reasoner",
            ..
        })
    ));
}

// ---------------------------------------------------------------- durability and control

#[test]
fn d2_a_reconciler_confirms_an_uncertain_call_before_it_is_charged_or_released() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.apply(Input::CallUncertain {
        op: gather.op,
        cause: None,
    });
    let d = room.apply(Input::Reconciled {
        op: gather.op,
        outcome: Reconciliation::NotExecuted,
    });
    assert!(accepted_by(&d, Rule::D2));
    assert_eq!(
        room.sim.operation(gather.op).unwrap().state(),
        OperationState::Released
    );
    assert_eq!(room.state().ledger().balances().uncertain.micros(), 0);
    // Known never to have run, the task is dispatched anew under a new operation.
    let again = specialist_call(&d);
    assert_ne!(again.op, gather.op);
}

#[test]
fn d2_a_confirmed_execution_applies_its_result() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.apply(Input::CallUncertain {
        op: gather.op,
        cause: None,
    });
    let id = room.next_contribution_id();
    let d = room.apply(Input::Reconciled {
        op: gather.op,
        outcome: Reconciliation::Executed {
            charge: Charge::Actual(micros(700)),
            result: CallResult::Specialist(
                agentroom_domain::engine::SpecialistResult::Contribution(
                    agentroom_domain::review::ContributionDraft {
                        id,
                        artifacts: vec![agentroom_domain::review::Artifact {
                            name: "b".into(),
                            content: "c".into(),
                        }],
                        sources: vec![],
                        body: None,
                        outputs: serde_json::Map::new(),
                    },
                ),
            ),
        },
    });
    assert_eq!(column(&room, "gather"), Column::Done);
    specialist_call(&d);
}

#[test]
fn d3_pause_bumps_the_control_revision_and_aborts_running_calls() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let before = room.objective().control_revision();
    let d = room.control("oscar", ControlAction::Pause);
    assert!(accepted_by(&d, Rule::D3));
    assert_eq!(room.objective().control_revision(), before + 1);
    assert_eq!(cancels(&d), vec![gather.op]);
    assert_eq!(room.objective().status(), ObjectiveStatus::Paused);
    let d = room.control("olive", ControlAction::Pause);
    assert_rejected(&d, Rule::D3);
}

#[test]
fn d3_cancel_ends_the_objective_and_aborts_running_calls() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.control("olive", ControlAction::Cancel);
    assert_eq!(cancels(&d), vec![gather.op]);
    assert_eq!(room.objective().status(), ObjectiveStatus::Canceled);
    let d = room.control("olive", ControlAction::Resume);
    assert_rejected(&d, Rule::D3);
    // The aborted call settles with its usage and nothing more happens.
    let d = room.apply(Input::CallSettled {
        op: gather.op,
        charge: Charge::Actual(micros(10)),
    });
    assert!(calls(&d).is_empty());
    assert_eq!(room.state().ledger().balances().reserved.micros(), 0);
}

#[test]
fn d3_a_specialist_cannot_pause_an_objective() {
    let mut room = Room::new();
    room.start_objective();
    let d = room.control("sam", ControlAction::Pause);
    assert_rejected(&d, Rule::T3);
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
}

#[test]
fn d4_a_late_result_is_charged_and_waits_for_readmission() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.control("olive", ControlAction::Pause);
    room.control("olive", ControlAction::Resume);
    let d = room.contribute(&gather, "papers");
    assert!(accepted_by(&d, Rule::D4));
    assert!(calls(&d).is_empty(), "not used before readmission");
    assert_eq!(
        room.state().ledger().balances().spent.micros(),
        REASONER / 2 + SPECIALIST / 2
    );
    assert_eq!(room.state().held_results().len(), 1);
    let d = room.late("sam", &gather, LateDecision::Readmit);
    assert_rejected(&d, Rule::T3);
    let d = room.late("oscar", &gather, LateDecision::Readmit);
    assert_eq!(column(&room, "gather"), Column::Done);
    specialist_call(&d);
}

#[test]
fn d4_discarding_a_late_result_leaves_the_task_open() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.control("olive", ControlAction::Pause);
    room.contribute(&gather, "papers");
    room.control("olive", ControlAction::Resume);
    let d = room.late("olive", &gather, LateDecision::Discard);
    assert!(accepted_by(&d, Rule::D4));
    let again = specialist_call(&d);
    assert_ne!(again.op, gather.op);
    let e = room.sim.apply(Input::DecideLateResult {
        by: p("olive"),
        op: gather.op,
        decision: LateDecision::Readmit,
    });
    assert_eq!(
        e.unwrap_err(),
        SimError::Input(InputError::NothingHeld(gather.op))
    );
}

// ---------------------------------------------------------------- trust and authority

#[test]
fn t1_an_event_of_another_room_changes_nothing() {
    let mut room = Room::new();
    let before = room.state().clone();
    let err = room
        .sim
        .apply(Input::EventAccepted(Event {
            id: EventId::from_uuid(Uuid::from_u128(1)),
            room: RoomId::parse("elsewhere").unwrap(),
            author: p("olive"),
            body: EventBody::OwnerMessage { text: "hi".into() },
        }))
        .unwrap_err();
    assert!(matches!(err, SimError::Input(InputError::WrongRoom { .. })));
    assert_eq!(room.state(), &before);
}

#[test]
fn t1_an_event_is_accepted_once_by_its_persisted_id() {
    let mut room = Room::new();
    let event = Event {
        id: EventId::from_uuid(Uuid::from_u128(42)),
        room: RoomId::parse("local").unwrap(),
        author: p("olive"),
        body: EventBody::OwnerMessage { text: "hi".into() },
    };
    room.apply(Input::EventAccepted(event.clone()));
    let before = room.state().clone();
    let err = room.sim.apply(Input::EventAccepted(event)).unwrap_err();
    assert_eq!(
        err,
        SimError::AlreadyAccepted(EventId::from_uuid(Uuid::from_u128(42)))
    );
    assert_eq!(room.state(), &before);
}

#[test]
fn t1_an_author_who_is_not_a_member_is_rejected() {
    let mut room = Room::new();
    let d = room.post("mallory", EventBody::OwnerMessage { text: "hi".into() });
    assert_rejected(&d, Rule::T1);
    assert!(calls(&d).is_empty());
}

#[test]
fn t2_a_result_from_a_revoked_specialist_is_charged_not_applied() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.revoke("sam", Role::Specialist);
    let d = room.contribute(&gather, "papers");
    // The revocation fenced the call (T6): charged, held for a decision (D4), not applied.
    assert_rejected(&d, Rule::T6);
    assert_eq!(
        room.state().ledger().balances().spent.micros(),
        REASONER / 2 + SPECIALIST / 2
    );
    assert_eq!(room.state().held_results().len(), 1);
    assert!(calls(&d).is_empty());
    assert_eq!(column(&room, "gather"), Column::InProgress);
    // Discarded, the task is open, and T3 at the dispatch sink keeps it from a principal who
    // lost the role.
    let d = room.late("olive", &gather, LateDecision::Discard);
    assert_rejected(&d, Rule::T3);
    assert!(calls(&d).is_empty());
    assert_eq!(column(&room, "gather"), Column::Todo);
}

#[test]
fn t2_a_specialist_cannot_claim_done_without_a_contribution() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let task = identity(&room, "gather");
    let d = room.apply(Input::UpdateTask {
        by: p("sam"),
        objective,
        task,
        status: Column::Done,
        contribution: None,
    });
    assert_rejected(&d, Rule::T2);
    assert_eq!(column(&room, "gather"), Column::InProgress);
}

#[test]
fn t3_an_agent_may_update_only_its_own_tasks() {
    let mut room = Room::new();
    room.start_objective();
    let objective = room.objective_id();
    let task = identity(&room, "gather");
    let d = room.apply(Input::UpdateTask {
        by: p("sue"),
        objective,
        task,
        status: Column::InProgress,
        contribution: None,
    });
    assert_rejected(&d, Rule::T3);
}

#[test]
fn t4_an_external_write_capability_is_refused_at_admission() {
    let mut room = Room::new();
    let d = room.say("Publish the summary");
    let call = reasoner_call(&d);
    let d = room.plan(
        &call,
        plan_of(vec![
            task("post", "publish", &[]),
            report("write", &["post"]),
        ]),
    );
    assert_rejected(&d, Rule::T4);
    assert!(room.state().objectives().is_empty());
}

#[test]
fn t4_unavailable_unbound_and_unknown_capabilities_are_refused_with_their_reason() {
    for (capability, reason) in [
        ("offline", "unavailable"),
        ("orphan", "no binding"),
        ("telepathy", "no such capability"),
    ] {
        let mut room = Room::new();
        let d = room.say("Summarize");
        let call = reasoner_call(&d);
        let d = room.plan(
            &call,
            plan_of(vec![task("a", capability, &[]), report("write", &["a"])]),
        );
        assert_rejected(&d, Rule::O7);
        assert!(
            d.log.iter().any(|l| l.message.contains(reason)),
            "{capability}: {:#?}",
            d.log
        );
    }
}

#[test]
fn t4_a_deprecated_capability_is_followed_to_its_replacement_and_logged() {
    let mut room = Room::new();
    let d = room.say("Summarize");
    let call = reasoner_call(&d);
    let d = room.plan(
        &call,
        plan_of(vec![
            task("a", "old-research", &[]),
            report("write", &["a"]),
        ]),
    );
    assert!(
        d.log
            .iter()
            .any(|l| l.message.contains("replaced by `research`"))
    );
    let task = room
        .objective()
        .current_plan()
        .unwrap()
        .task_by_key(&key("a"))
        .unwrap()
        .clone();
    assert_eq!(task.capability(), "research");
    assert_eq!(task.assignee(), &p("sam"));
}

// ---------------------------------------------------------------- review

fn human_review_room() -> Room {
    let policy = RoomPolicy::from_toml("[review]\nsource = \"human\"\n").unwrap();
    Room::with_policy(policy, 1_000_000)
}

#[test]
fn r1_an_author_cannot_review_their_own_work() {
    let mut room = human_review_room();
    room.grant("sam", Role::Reviewer);
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let write = specialist_call(&d);
    room.contribute(&write, "report");
    let report = room.objective().awaiting_review().unwrap().report().clone();
    let objective = room.objective_id();
    let submission = agentroom_domain::review::ReviewSubmission {
        model: None,
        verdicts: room.verdicts(&report, &all_met()),
        report,
        observed: room.objective().observed(),
    };
    let d = room.apply(Input::RecordReview {
        by: p("sam"),
        objective,
        review: submission.clone(),
    });
    assert_rejected(&d, Rule::R1);
    assert!(room.objective().reviews().is_empty());
    room.apply(Input::RecordReview {
        by: p("rita"),
        objective,
        review: submission,
    });
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn r1_no_distinct_reviewer_stops_for_attention() {
    let mut room = Room::new();
    room.revoke("rita", Role::Reviewer);
    room.revoke("ray", Role::Reviewer);
    room.grant("sue", Role::Reviewer);
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    assert_eq!(stopped_by(&d), Some(Rule::R1));
    assert!(calls(&d).is_empty());
}

#[test]
fn r2_a_review_that_omits_a_criterion_is_refused() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &[("cites-sources", Verdict::Met)]);
    assert_rejected(&d, Rule::R2);
    assert!(room.objective().reviews().is_empty());
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    // The review is asked for again, within the bound.
    review_call(&d);
}

#[test]
fn r2_a_review_must_bind_the_exact_report() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let mut submission = room.submission(&call, &all_met());
    submission.report.version = 9;
    let d = room.apply(Input::CallReturned {
        op: call.op,
        charge: Charge::Actual(micros(1)),
        result: CallResult::Reviewer(ReviewerResult::Review(submission)),
    });
    assert_rejected(&d, Rule::R2);
    assert_ne!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn r2_repeatedly_refused_reviews_stop_for_attention() {
    let mut room = Room::new();
    let mut call = up_to_review(&mut room);
    for attempt in 1..=3 {
        let d = room.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(1)),
            result: CallResult::Reviewer(ReviewerResult::FormatError {
                detail: "prose".into(),
            }),
        });
        if attempt < 3 {
            call = review_call(&d);
        } else {
            assert_eq!(stopped_by(&d), Some(Rule::R2));
        }
    }
}

#[test]
fn r3_an_unmet_criterion_asks_for_a_corrective_plan_with_its_evidence() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let CallBrief::Interpret { unmet, .. } = &replan.brief else {
        panic!()
    };
    assert_eq!(
        unmet,
        &vec![(
            CriterionId::parse("covers-2026").unwrap(),
            "covers-2026 checked".to_owned()
        )]
    );
}

#[test]
fn r3_a_corrective_plan_must_add_production_work() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let d = room.plan(&replan, two_step_plan());
    assert_rejected(&d, Rule::R3);
    assert_eq!(room.objective().plans().len(), 1);
}

#[test]
fn r3_a_reasoner_cannot_weaken_a_criterion_after_an_unmet() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let mut weaker = plan_of(vec![
        task("gather", "research", &[]),
        task("more", "research", &[]),
        report("write", &["gather", "more"]),
    ]);
    weaker.criteria[1].text = "covers some recent work".into();
    let d = room.plan(&replan, weaker);
    assert_rejected(&d, Rule::R3);
    assert_eq!(room.objective().criteria(), criteria().as_slice());
}

#[test]
fn r3_an_unchanged_report_is_never_sent_for_review_again() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    let replan = reasoner_call(&d);
    let d = room.plan(
        &replan,
        plan_of(vec![
            task("gather", "research", &[]),
            task("more", "research", &[]),
            report("write", &["gather", "more"]),
        ]),
    );
    let more = specialist_call(&d);
    let d = room.contribute(&more, "more papers");
    let write = specialist_call(&d);
    // The writer returns the very same report as version 1 (same content, same sources).
    let first = room
        .state()
        .contributions()
        .values()
        .find(|c| {
            c.body()
                .and_then(|b| room.sim.content(&b.digest))
                .is_some_and(|text| text.contains("report"))
        })
        .unwrap()
        .clone();
    let d = room.contribute_with(&write, "report", first.sources().to_vec());
    assert_rejected(&d, Rule::R3);
    assert!(calls_of(&d, CallRole::Reviewer).is_empty());
    assert_eq!(room.objective().counters().failed_report_versions, 2);
}

#[test]
fn r4_third_failed_report_version_stops_automatic_repair() {
    let mut room = Room::new();
    let mut review = up_to_review(&mut room);
    for version in 1..=3 {
        let d = room.review(&review, &one_unmet());
        if version == 3 {
            assert_eq!(stopped_by(&d), Some(Rule::R4));
            assert!(calls(&d).is_empty());
            break;
        }
        let replan = reasoner_call(&d);
        let extra = format!("more-{version}");
        let d = room.plan(
            &replan,
            plan_of(vec![
                task("gather", "research", &[]),
                task(&extra, "research", &[]),
                report("write", &["gather", &extra]),
            ]),
        );
        let more = specialist_call(&d);
        let d = room.contribute(&more, &format!("papers {version}"));
        let write = specialist_call(&d);
        let d = room.contribute(&write, &format!("report {}", version + 1));
        review = review_call(&d);
    }
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
}

#[test]
fn r5_an_unknown_verdict_waits_for_the_owner_and_wins_over_unmet() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(
        &call,
        &[
            ("cites-sources", Verdict::Unmet),
            ("covers-2026", Verdict::Unknown),
        ],
    );
    assert!(accepted_by(&d, Rule::R5));
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
    assert!(calls(&d).is_empty());
}

#[test]
fn r6_an_owner_correction_resets_the_repair_cycle() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = room.review(&call, &one_unmet());
    assert_eq!(room.objective().counters().failed_report_versions, 1);
    reasoner_call(&d);
    let new_criteria = vec![Criterion {
        id: CriterionId::parse("covers-2026").unwrap(),
        text: "covers 2026 only".into(),
    }];
    let d = correction(&mut room, "olive", Some(new_criteria.clone()));
    assert!(accepted_by(&d, Rule::R6));
    assert_eq!(room.objective().counters().failed_report_versions, 0);
    assert_eq!(room.objective().counters().replans_without_progress, 0);
    assert_eq!(room.objective().criteria(), new_criteria.as_slice());
    reasoner_call(&d);
}

#[test]
fn r6_a_review_in_flight_is_fenced_by_a_correction() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    let d = correction(&mut room, "olive", None);
    assert!(cancels(&d).contains(&call.op));
    let d = room.review(&call, &all_met());
    assert_rejected(&d, Rule::R6);
    assert_ne!(room.objective().status(), ObjectiveStatus::Completed);
    assert!(room.objective().reviews().is_empty());
}

#[test]
fn r6_a_control_change_fences_a_review_too() {
    let mut room = Room::new();
    let call = up_to_review(&mut room);
    room.control("olive", ControlAction::Pause);
    let d = room.review(&call, &all_met());
    assert_rejected(&d, Rule::R6);
    let d = room.control("olive", ControlAction::Resume);
    let again = review_call(&d);
    room.review(&again, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn unknown_operations_and_wrong_ports_change_nothing() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let before = room.state().clone();
    let bogus = agentroom_domain::ids::OperationId::from_uuid(Uuid::from_u128(9));
    let err = room
        .sim
        .apply(Input::CallUncertain {
            op: bogus,
            cause: None,
        })
        .unwrap_err();
    assert_eq!(err, SimError::Input(InputError::NotOpen(bogus)));
    let err = room
        .sim
        .apply(Input::CallReturned {
            op: gather.op,
            charge: Charge::NoUsage,
            result: CallResult::Reviewer(ReviewerResult::FormatError { detail: "x".into() }),
        })
        .unwrap_err();
    assert!(matches!(err, SimError::Input(InputError::WrongPort { .. })));
    assert_eq!(room.state(), &before);
    room.contribute(&gather, "papers");
    let err = room
        .sim
        .apply(Input::CallSettled {
            op: gather.op,
            charge: Charge::NoUsage,
        })
        .unwrap_err();
    assert_eq!(err, SimError::Input(InputError::NotOpen(gather.op)));
    let _ = TaskState::Pending;
}

#[test]
fn d4_a_readmitted_report_is_reviewed_only_once_the_objective_resumes() {
    let mut room = Room::new();
    let d = room.start_objective();
    let d = room.contribute(&specialist_call(&d), "papers");
    let write = specialist_call(&d);
    room.control("olive", ControlAction::Pause);
    room.contribute(&write, "report");
    let d = room.late("olive", &write, LateDecision::Readmit);
    assert_eq!(column(&room, "write"), Column::Done);
    assert!(calls(&d).is_empty(), "paused: no review is dispatched");
    assert_eq!(room.objective().status(), ObjectiveStatus::Paused);
    let d = room.control("olive", ControlAction::Resume);
    room.review(&review_call(&d), &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn d4_a_failure_while_paused_waits_for_resume_before_repair() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.control("olive", ControlAction::Pause);
    // The call was fenced by the pause: its failure only reopens the task.
    let d = room.fail(&gather);
    assert!(calls(&d).is_empty());
    let d = room.control("olive", ControlAction::Resume);
    let again = specialist_call(&d);
    assert_ne!(again.op, gather.op);
}

#[test]
fn d4_an_aborted_call_confirmed_run_without_result_is_charged_and_leaves_the_task_open() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.control("olive", ControlAction::Pause);
    // The call stopped when its heartbeat read the pause: no receipt, so uncertain (D2) …
    room.apply(Input::CallUncertain {
        op: gather.op,
        cause: None,
    });
    let spent = room.state().ledger().balances().spent.micros();
    // … until its provider's record shows it ran and left no result: charged, and like a
    // discarded late result the task is open again, not failed (no repair plan is asked).
    let d = room.apply(Input::Reconciled {
        op: gather.op,
        outcome: Reconciliation::ExecutedWithoutResult {
            charge: Charge::Actual(micros(40)),
        },
    });
    assert!(calls(&d).is_empty(), "{:#?}", d.log);
    assert_eq!(room.state().ledger().balances().reserved.micros(), 0);
    assert_eq!(room.state().ledger().balances().spent.micros(), spent + 40);
    let task = room
        .objective()
        .current_plan()
        .unwrap()
        .task(&old_gather_identity(&gather))
        .unwrap()
        .state()
        .clone();
    assert_eq!(task, TaskState::Pending);
    assert_eq!(room.objective().status(), ObjectiveStatus::Paused);
    let d = room.control("olive", ControlAction::Resume);
    let again = specialist_call(&d);
    assert_ne!(again.op, gather.op);
}
