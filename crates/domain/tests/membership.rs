//! Memberships in operation (issue 18, T6): a member added, its roles changed or revoked while
//! the Room runs, each one decision; revoking or demoting a principal fences its open calls
//! (they abort as under D3; what they return is charged, B3, and held, D4, never applied), and
//! a held result is applied only while its author is a specialist again (T3 at the sink).
//! Every state is reached through `decide` from an empty Room.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use agentroom_domain::engine::Verdict as LogVerdict;
use agentroom_domain::engine::{
    CallRequest, Charge, ControlAction, Input, LateDecision, MemberChange,
};
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::{Column, TaskState};
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::OperationState;
use common::*;

fn roles(room: &Room, who: &str) -> BTreeSet<Role> {
    room.state().members().roles_of(&p(who)).collect()
}

fn add(roles: &[Role]) -> MemberChange {
    MemberChange::Add {
        roles: roles.to_vec(),
    }
}

fn set(roles: &[Role]) -> MemberChange {
    MemberChange::SetRoles {
        roles: roles.to_vec(),
    }
}

fn gather_state(room: &Room) -> TaskState {
    let plan = room.objective().current_plan().unwrap();
    plan.task_by_key(&key("gather")).unwrap().state().clone()
}

fn gather_column(room: &Room) -> Column {
    let plan = room.objective().current_plan().unwrap();
    plan.column_of(plan.task_by_key(&key("gather")).unwrap())
}

/// The entries of a decision log accepted by `rule`.
fn accepted(d: &agentroom_domain::engine::Decision, rule: Rule) -> usize {
    d.log
        .iter()
        .filter(|l| l.verdict == LogVerdict::Accepted && l.rule == Some(rule))
        .count()
}

/// A running objective whose `gather` call (sam's) is in flight.
fn gathering(room: &mut Room) -> CallRequest {
    let d = room.start_objective();
    specialist_call(&d)
}

#[test]
fn t6_a_member_is_added_in_one_decision_and_adding_a_member_again_is_refused() {
    let mut room = Room::new();
    let d = room.member("olive", "bea", add(&[Role::Reviewer, Role::Specialist]));
    assert_eq!(accepted(&d, Rule::T6), 1, "{:#?}", d.log);
    assert_eq!(d.log.len(), 1, "one decision, one entry: {:#?}", d.log);
    assert_eq!(
        roles(&room, "bea"),
        BTreeSet::from([Role::Reviewer, Role::Specialist])
    );
    let before = room.state().members().clone();
    let d = room.member("olive", "bea", add(&[Role::Operator]));
    assert_rejected(&d, Rule::T6);
    assert!(d.log[0].message.contains("member already"), "{:#?}", d.log);
    assert_eq!(room.state().members(), &before);
    // A member holds at least one role.
    let d = room.member("olive", "nina", add(&[]));
    assert_rejected(&d, Rule::T6);
    assert!(!room.state().members().is_member(&p("nina")));
}

#[test]
fn t6_changing_a_role_is_one_decision_never_a_revoke_then_a_grant() {
    let mut room = Room::new();
    let d = room.member("olive", "sam", set(&[Role::Reviewer]));
    assert_eq!(d.log.len(), 1, "{:#?}", d.log);
    assert_eq!(accepted(&d, Rule::T6), 1);
    assert!(
        d.log[0].message.contains("from specialist to reviewer"),
        "{}",
        d.log[0].message
    );
    assert_eq!(roles(&room, "sam"), BTreeSet::from([Role::Reviewer]));
    // The same roles again: nothing to change, refused.
    let d = room.member("olive", "sam", set(&[Role::Reviewer]));
    assert_rejected(&d, Rule::T6);
    // Roles are changed, not emptied: a member leaves by revocation.
    let d = room.member("olive", "sam", set(&[]));
    assert_rejected(&d, Rule::T6);
    assert_eq!(roles(&room, "sam"), BTreeSet::from([Role::Reviewer]));
}

#[test]
fn t6_an_unknown_principal_has_no_roles_to_change_or_revoke() {
    let mut room = Room::new();
    let before = room.state().members().clone();
    for change in [set(&[Role::Reviewer]), MemberChange::Revoke] {
        let d = room.member("olive", "mallory", change);
        assert_rejected(&d, Rule::T6);
        assert!(d.log[0].message.contains("not a member"), "{:#?}", d.log);
    }
    assert_eq!(room.state().members(), &before);
}

#[test]
fn t6_the_room_keeps_an_owner() {
    let mut room = Room::new();
    let before = room.state().members().clone();
    for change in [MemberChange::Revoke, set(&[Role::Operator])] {
        let d = room.member("olive", "olive", change);
        assert_rejected(&d, Rule::T6);
        assert!(d.log[0].message.contains("keep an owner"), "{:#?}", d.log);
    }
    assert_eq!(room.state().members(), &before);
    // With a second owner, the first may step down.
    room.member("olive", "otto", add(&[Role::Owner]));
    let d = room.member("olive", "olive", set(&[Role::Operator]));
    assert_eq!(accepted(&d, Rule::T6), 1, "{:#?}", d.log);
    assert_eq!(roles(&room, "olive"), BTreeSet::from([Role::Operator]));
}

#[test]
fn t6_only_a_role_with_membership_manage_changes_members() {
    let mut room = Room::new();
    let before = room.state().members().clone();
    for (by, change) in [
        ("oscar", add(&[Role::Reviewer])),
        ("sam", set(&[Role::Owner])),
        ("rita", MemberChange::Revoke),
    ] {
        let d = room.member(by, "sam", change);
        assert_rejected(&d, Rule::T3);
        assert!(
            d.log[0].message.contains("membership.manage"),
            "{:#?}",
            d.log
        );
    }
    assert_eq!(room.state().members(), &before);
}

#[test]
fn t6_revoking_a_specialist_mid_call_fences_it_and_its_result_is_charged_and_held_not_applied() {
    let mut room = Room::new();
    let gather = gathering(&mut room);
    let d = room.member("olive", "sam", MemberChange::Revoke);
    // The call aborts cooperatively, as under D3.
    assert_eq!(cancels(&d), vec![gather.op]);
    assert!(accepted(&d, Rule::T6) >= 2, "{:#?}", d.log);
    let operation = room.state().operation(gather.op).unwrap();
    assert_eq!(operation.state(), OperationState::CancelRequested);
    assert!(operation.fenced());
    assert!(!room.state().members().is_member(&p("sam")));

    // What it still returns is charged (B3) and held (D4), never applied.
    let d = room.contribute(&gather, "papers");
    assert_rejected(&d, Rule::T6);
    assert!(accepted_by(&d, Rule::D4), "{:#?}", d.log);
    assert!(calls(&d).is_empty(), "nothing is dispatched on it");
    assert_eq!(
        room.state().ledger().balances().spent.micros(),
        REASONER / 2 + SPECIALIST / 2
    );
    assert_eq!(room.state().ledger().balances().reserved.micros(), 0);
    assert_eq!(room.state().held_results().len(), 1);
    assert_eq!(
        gather_state(&room),
        TaskState::HeldForReadmission { op: gather.op }
    );
    assert_ne!(gather_column(&room), Column::Done);

    // T3 at the sink: readmission is refused while its author is not a specialist; it stays
    // held.
    let d = room.late("oscar", &gather, LateDecision::Readmit);
    assert_rejected(&d, Rule::T3);
    assert_eq!(room.state().held_results().len(), 1);
    assert_ne!(gather_column(&room), Column::Done);

    // Once sam is a specialist again, the owner may readmit it.
    room.member("olive", "sam", add(&[Role::Specialist]));
    let d = room.late("olive", &gather, LateDecision::Readmit);
    assert!(accepted_by(&d, Rule::D4), "{:#?}", d.log);
    assert_eq!(gather_column(&room), Column::Done);
    specialist_call(&d);
}

#[test]
fn t6_demoting_a_specialist_fences_its_running_call() {
    let mut room = Room::new();
    let gather = gathering(&mut room);
    let d = room.member("olive", "sam", set(&[Role::Reviewer]));
    assert_eq!(cancels(&d), vec![gather.op]);
    assert!(room.state().operation(gather.op).unwrap().fenced());
    let d = room.contribute(&gather, "papers");
    assert!(accepted_by(&d, Rule::D4), "{:#?}", d.log);
    assert_eq!(room.state().held_results().len(), 1);
    // A change that keeps the role fences nothing.
    let mut room = Room::new();
    let gather = gathering(&mut room);
    let d = room.member("olive", "sam", set(&[Role::Specialist, Role::Reviewer]));
    assert!(cancels(&d).is_empty());
    assert!(!room.state().operation(gather.op).unwrap().fenced());
}

#[test]
fn t6_a_fenced_call_that_ends_without_result_leaves_its_task_open_until_the_specialist_is_back() {
    let mut room = Room::new();
    let gather = gathering(&mut room);
    room.member("olive", "sam", MemberChange::Revoke);
    let d = room.apply(Input::CallSettled {
        op: gather.op,
        charge: Charge::Actual(micros(10)),
    });
    // Open again, and T3 at the dispatch sink keeps it from a principal who lost the role.
    assert_eq!(gather_state(&room), TaskState::Pending);
    assert_rejected(&d, Rule::T3);
    assert!(calls(&d).is_empty());
    // Adding sam back lets the waiting work go ahead, under a fresh operation.
    let d = room.member("olive", "sam", add(&[Role::Specialist]));
    let again = specialist_call(&d);
    assert_ne!(again.op, gather.op);
}

#[test]
fn t6_the_old_per_role_revocation_fences_too() {
    let mut room = Room::new();
    let gather = gathering(&mut room);
    let d = room.revoke("sam", Role::Specialist);
    assert_eq!(cancels(&d), vec![gather.op]);
    let d = room.contribute(&gather, "papers");
    assert!(accepted_by(&d, Rule::D4), "{:#?}", d.log);
    assert!(room.objective().contributions().len() == 1);
    assert_eq!(room.state().held_results().len(), 1);
}

#[test]
fn t6_a_review_whose_reviewer_is_revoked_is_not_used_and_another_reviewer_is_asked() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    let review = review_call(&d);
    let first = review.principal.clone().unwrap();
    let d = room.member("olive", first.as_str(), MemberChange::Revoke);
    assert_eq!(cancels(&d), vec![review.op]);
    let d = room.review(&review, &all_met());
    assert_rejected(&d, Rule::T6);
    assert!(room.objective().reviews().is_empty(), "not used");
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    // Charged all the same (B3).
    assert_eq!(room.state().ledger().balances().reserved.micros(), REVIEWER);
    let again = review_call(&d);
    assert_ne!(again.principal.as_ref(), Some(&first));
    room.review(&again, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn r1_an_r1_stop_resumes_once_a_distinct_reviewer_is_added() {
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
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
    // Resumed without a distinct reviewer, it stops again for R1.
    let d = room.control("olive", ControlAction::Resume);
    assert_eq!(stopped_by(&d), Some(Rule::R1));
    // A second reviewer is added; the resume asks it for the review, and it completes.
    room.member("olive", "rita", add(&[Role::Reviewer]));
    let d = room.control("oscar", ControlAction::Resume);
    assert!(accepted_by(&d, Rule::D3), "{:#?}", d.log);
    let review = review_call(&d);
    assert_eq!(review.principal, Some(p("rita")));
    room.review(&review, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

/// D1 across the upgrade: a state written before T6 has no `fenced` key on its operations; it
/// reads as not fenced, and an operation that is not fenced is written without the key, so
/// stored histories replay to the same documents. A fenced one round-trips.
#[test]
fn d1_operations_written_before_t6_read_as_not_fenced_and_are_written_back_alike() {
    use agentroom_domain::state::RoomState;
    let mut room = Room::new();
    let gather = gathering(&mut room);
    let op = gather.op.to_string();
    let written = serde_json::to_value(room.state()).unwrap();
    let operation = &written["operations"][&op];
    assert!(operation.is_object(), "{written}");
    assert!(operation.get("fenced").is_none(), "{operation}");
    let read: RoomState = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(&read, room.state());
    assert!(!read.operation(gather.op).unwrap().fenced());

    room.member("olive", "sam", MemberChange::Revoke);
    let written = serde_json::to_value(room.state()).unwrap();
    assert_eq!(written["operations"][&op]["fenced"], true, "{written}");
    let read: RoomState = serde_json::from_value(written).unwrap();
    assert_eq!(&read, room.state());
}

/// T6 with O12 and O13: a specialist demoted while its call runs speaks for no task any
/// more. Its wait acknowledgement is refused (its call is fenced and aborting), and so is a
/// receipt for the running objective, which would start a paid reasoner call; nothing moves.
/// Its receipt for a completed objective would cost nothing (O13) and stays admitted.
#[test]
fn t6_a_demoted_specialist_neither_acknowledges_a_wait_nor_starts_a_receipt_call() {
    use agentroom_domain::event::{EventBody, EventRefusal};
    let mut room = Room::new();
    let _call = gathering(&mut room);
    let objective = room.objective_id();
    let gather = room
        .objective()
        .current_plan()
        .unwrap()
        .task_by_key(&key("gather"))
        .unwrap()
        .identity()
        .clone();
    let wait = EventBody::WaitAck {
        objective,
        task: gather.clone(),
        reason: "awaiting a licence".into(),
    };
    let receipt = EventBody::InternalReceipt {
        objective: Some(objective),
        note: "delivered".into(),
    };
    // While sam is a specialist both are admitted.
    assert_eq!(room.state().admits_event(&p("sam"), &wait), Ok(()));
    assert_eq!(room.state().admits_event(&p("sam"), &receipt), Ok(()));
    room.member("olive", "sam", set(&[Role::Reviewer]));
    for body in [wait, receipt] {
        let refused = room.state().admits_event(&p("sam"), &body);
        assert!(
            matches!(refused, Err(EventRefusal::NotASpecialist { .. })),
            "{refused:?}"
        );
        assert_eq!(refused.unwrap_err().rule(), Rule::T6);
        let before = room.objective().clone();
        let d = room.post("sam", body);
        assert_rejected(&d, Rule::T6);
        assert!(calls_of(&d, agentroom_domain::state::CallRole::Reasoner).is_empty());
        assert_eq!(room.objective(), &before);
    }
}
