//! T3 at the effect sinks and task visibility: the pure predicates the IO crates ask
//! (`authority.rs`), over Room states reached only through `decide`.

mod common;

use agentroom_domain::engine::Audience;
use agentroom_domain::room::Role;
use agentroom_domain::state::CallRole;
use common::*;

#[test]
fn t3_a_call_is_sent_only_while_its_principal_holds_the_role_it_is_called_in() {
    let mut room = Room::new();
    let state = room.state().clone();
    assert!(state.may_be_called(Some(&p("sam")), CallRole::Specialist));
    assert!(state.may_be_called(Some(&p("rita")), CallRole::Reviewer));
    // The wrong role, a stranger, or a principal-less specialist call: not sent.
    assert!(!state.may_be_called(Some(&p("sam")), CallRole::Reviewer));
    assert!(!state.may_be_called(Some(&p("mallory")), CallRole::Specialist));
    assert!(!state.may_be_called(None, CallRole::Specialist));
    // The reasoner is the Room's own.
    assert!(state.may_be_called(None, CallRole::Reasoner));

    room.revoke("sam", Role::Specialist);
    assert!(
        !room
            .state()
            .may_be_called(Some(&p("sam")), CallRole::Specialist)
    );
}

#[test]
fn t3_a_notification_leaves_only_for_an_audience_that_may_still_receive_it() {
    let mut room = Room::new();
    assert!(room.state().may_be_notified(&Audience::Principal(p("sam"))));
    assert!(room.state().may_be_notified(&Audience::Owners));
    assert!(
        !room
            .state()
            .may_be_notified(&Audience::Principal(p("mallory")))
    );
    room.revoke("sam", Role::Specialist);
    assert!(!room.state().may_be_notified(&Audience::Principal(p("sam"))));
}

#[test]
fn t3_a_notification_is_addressed_to_its_principal_or_the_holders_of_its_role() {
    let mut room = Room::new();
    let state = room.state().clone();
    assert!(state.is_addressed_to(&p("olive"), &Audience::Owners));
    assert!(state.is_addressed_to(&p("oscar"), &Audience::Operators));
    assert!(state.is_addressed_to(&p("rita"), &Audience::Reviewers));
    assert!(!state.is_addressed_to(&p("sam"), &Audience::Owners));
    assert!(state.is_addressed_to(&p("sam"), &Audience::Principal(p("sam"))));
    assert!(!state.is_addressed_to(&p("sue"), &Audience::Principal(p("sam"))));
    room.revoke("oscar", Role::Operator);
    assert!(
        !room
            .state()
            .is_addressed_to(&p("oscar"), &Audience::Operators)
    );
}

#[test]
fn visibility_an_overseer_sees_every_task_a_specialist_only_its_own() {
    let mut room = Room::new();
    room.start_objective();
    let state = room.state().clone();
    let plan = room.objective().current_plan().unwrap();
    let gather = plan
        .tasks()
        .iter()
        .find(|t| t.assignee() == &p("sam"))
        .unwrap()
        .clone();
    let write = plan
        .tasks()
        .iter()
        .find(|t| t.assignee() == &p("sue"))
        .unwrap()
        .clone();
    let (gather, write) = (&gather, &write);
    for overseer in ["olive", "oscar", "rita"] {
        assert!(state.sees_task(&p(overseer), gather), "{overseer}");
        assert!(state.sees_task(&p(overseer), write), "{overseer}");
    }
    assert!(state.sees_task(&p("sam"), gather));
    assert!(!state.sees_task(&p("sam"), write));
    assert!(!state.sees_task(&p("hal"), gather));
    assert!(!state.sees_task(&p("mallory"), gather));
    // Granted a reviewer role, the specialist oversees the Room.
    room.grant("sam", Role::Reviewer);
    assert!(room.state().sees_task(&p("sam"), write));
}

#[test]
fn a_contribution_is_read_by_overseers_its_author_and_the_assignees_of_tasks_that_cite_it() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    room.contribute(&gather, "two surveys describe leases on tool calls");
    let state = room.state().clone();
    let contribution = state
        .contributions()
        .values()
        .find(|c| c.author() == &p("sam"))
        .expect("sam's contribution")
        .clone();
    let plan = room.objective().current_plan().unwrap().clone();
    let write = plan
        .tasks()
        .iter()
        .find(|t| t.key() == &key("write"))
        .unwrap();
    let writer = write.assignee().clone();
    assert_ne!(writer, p("sam"), "the report is another specialist's");
    // Its author, the overseers, and the report task's assignee, which depends on gather.
    for reader in [p("sam"), writer.clone(), p("olive"), p("oscar"), p("rita")] {
        assert!(state.sees_contribution(&reader, &contribution), "{reader}");
    }
    // An agent host with no task, and a specialist whose tasks do not cite it.
    let bystanders: Vec<_> = [p("hal"), p("sam"), p("sue")]
        .into_iter()
        .filter(|who| who != &writer && who != &p("sam"))
        .collect();
    assert!(!bystanders.is_empty());
    for bystander in bystanders {
        assert!(
            !state.sees_contribution(&bystander, &contribution),
            "{bystander}"
        );
    }
}

#[test]
fn visibility_a_plan_diff_lists_only_the_keys_of_tasks_the_principal_sees() {
    let mut room = Room::new();
    room.start_objective();
    let state = room.state().clone();
    let plan = room.objective().current_plan().unwrap();
    let keys = |who: &str| {
        let changes = state.visible_changes(&p(who), plan, None);
        assert!(changes.removed.is_empty() && changes.changed.is_empty());
        changes
            .added
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    for overseer in ["olive", "oscar", "rita"] {
        assert_eq!(keys(overseer), ["gather", "write"], "{overseer}");
    }
    assert_eq!(keys("sam"), ["gather"]);
    assert_eq!(keys("sue"), ["write"]);
    assert!(keys("hal").is_empty());
    assert!(keys("mallory").is_empty());
}

#[test]
fn visibility_money_in_the_decision_log_is_read_only_with_budget_read() {
    let mut room = Room::new();
    let d = room.start_objective();
    let state = room.state().clone();
    let money: Vec<_> = d
        .log
        .iter()
        .filter(|e| e.rule.is_some_and(|r| r.is_budget()))
        .collect();
    assert!(!money.is_empty(), "a reservation was logged: {:#?}", d.log);
    let plain: Vec<_> = d
        .log
        .iter()
        .filter(|e| !e.rule.is_some_and(|r| r.is_budget()))
        .collect();
    assert!(!plain.is_empty());
    for reader in ["olive", "oscar"] {
        assert!(state.sees_money(&p(reader)), "{reader}");
        assert!(money.iter().all(|e| state.sees_log_entry(&p(reader), e)));
    }
    for other in ["sam", "rita", "hal", "mallory"] {
        assert!(!state.sees_money(&p(other)), "{other}");
        assert!(money.iter().all(|e| !state.sees_log_entry(&p(other), e)));
        assert!(plain.iter().all(|e| state.sees_log_entry(&p(other), e)));
    }
}
