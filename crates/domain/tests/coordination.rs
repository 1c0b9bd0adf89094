//! Issue 19's coordination modes: the planner (the default, unchanged), and the two baselines
//! the qualification compares it with — selective routing and legacy sessions — as
//! configurations of the one engine, each still reserving before every call (B2) and fencing
//! by revision (O5, D3).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::engine::ControlAction;
use agentroom_domain::event::EventBody;
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_domain::plan::TaskKind;
use agentroom_domain::policy::{Coordination, RoomPolicy};
use agentroom_domain::rules::Rule;
use agentroom_domain::state::CallRole;
use common::*;

fn room(mode: Coordination) -> Room {
    Room::with_policy(RoomPolicy::default().with_coordination(mode), 1_000_000)
}

#[test]
fn coordination_defaults_to_the_planner_and_parses_each_mode() {
    assert_eq!(RoomPolicy::default().coordination(), Coordination::Planner);
    for mode in Coordination::ALL {
        let text = format!("[coordination]\nmode = \"{mode}\"\n");
        assert_eq!(
            RoomPolicy::from_toml(&text).unwrap().coordination(),
            mode,
            "{text}"
        );
    }
    let shipped = include_str!("../../../policies/room.toml");
    assert_eq!(
        RoomPolicy::from_toml(shipped).unwrap().coordination(),
        Coordination::Planner,
        "the shipped room.toml keeps the planner"
    );
}

#[test]
fn coordination_unknown_mode_is_refused_naming_its_field() {
    let error = RoomPolicy::from_toml("[coordination]\nmode = \"swarm\"\n").unwrap_err();
    assert_eq!(error.field(), "coordination.mode");
    assert_eq!((error.line(), error.column()), (2, 8));
    assert!(error.message().contains("`swarm`"), "{error}");
    let error = RoomPolicy::from_toml("[coordination]\nmodes = \"routing\"\n").unwrap_err();
    assert!(error.message().contains("unknown field"), "{error}");
}

#[test]
fn coordination_planner_state_serializes_as_before_the_modes() {
    let planner = serde_json::to_value(RoomPolicy::default()).unwrap();
    assert!(planner.get("coordination").is_none(), "{planner}");
    let routing = RoomPolicy::default().with_coordination(Coordination::Routing);
    let json = serde_json::to_value(&routing).unwrap();
    assert_eq!(json["coordination"], "routing");
    let back: RoomPolicy = serde_json::from_value(json).unwrap();
    assert_eq!(back, routing);
    let old: RoomPolicy = serde_json::from_value(planner).unwrap();
    assert_eq!(old.coordination(), Coordination::Planner);
}

#[test]
fn planner_keeps_the_review_gate() {
    let mut room = room(Coordination::Planner);
    let d = room.start_objective();
    let d = room.contribute(&specialist_call(&d), "three papers");
    let d = room.contribute(&specialist_call(&d), "report v1");
    let review = review_call(&d);
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    room.review(&review, &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn routing_keeps_only_the_report_task_and_completes_unreviewed() {
    let mut room = room(Coordination::Routing);
    let d = room.say("Summarize the state of the art");
    let reasoner = reasoner_call(&d);
    assert_eq!(
        reasoner.role,
        CallRole::Reasoner,
        "routing asks the reasoner"
    );
    let d = room.plan(&reasoner, two_step_plan());
    let plan = room.objective().current_plan().unwrap();
    assert_eq!(plan.tasks().len(), 1, "only the report task is routed");
    assert_eq!(plan.tasks()[0].kind(), TaskKind::Report);
    let write = specialist_call(&d);
    assert_eq!(write.principal, Some(p("sue")), "the writer answers alone");
    let d = room.contribute(&write, "report v1");
    assert!(
        calls_of(&d, CallRole::Reviewer).is_empty(),
        "no review gate"
    );
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    assert_eq!(room.objective().reports().len(), 1);
    assert!(room.objective().reviews().is_empty());
}

#[test]
fn routing_failed_task_stops_for_attention_without_a_repair_plan() {
    let mut room = room(Coordination::Routing);
    let d = room.say("Summarize the state of the art");
    let d = room.plan(&reasoner_call(&d), two_step_plan());
    let d = room.fail(&specialist_call(&d));
    assert!(
        calls_of(&d, CallRole::Reasoner).is_empty(),
        "no repair plan"
    );
    assert_eq!(stopped_by(&d), Some(Rule::O7));
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
}

#[test]
fn routing_still_reserves_before_every_call_b2() {
    // A budget for the reasoner only: the routed task cannot be reserved and waits.
    let mut room = Room::with_policy(
        RoomPolicy::default().with_coordination(Coordination::Routing),
        REASONER,
    );
    let d = room.say("Summarize the state of the art");
    let d = room.plan(&reasoner_call(&d), two_step_plan());
    assert!(calls(&d).is_empty(), "nothing dispatched beyond the budget");
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
}

#[test]
fn sessions_open_one_session_per_specialist_without_a_reasoner() {
    let mut room = room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    assert!(
        calls_of(&d, CallRole::Reasoner).is_empty(),
        "sessions ask no reasoner"
    );
    let sessions = calls_of(&d, CallRole::Specialist);
    let mut who: Vec<_> = sessions
        .iter()
        .map(|c| c.principal.clone().unwrap())
        .collect();
    who.sort();
    assert_eq!(who, vec![p("sam"), p("sue")]);
    let plan = room.objective().current_plan().unwrap();
    assert!(
        plan.tasks()
            .iter()
            .all(|t| t.kind() == TaskKind::Report
                && t.spec().title == "Summarize the state of the art"),
        "every session sees the owner's message"
    );
    assert_eq!(room.objective().criteria().len(), 1);
}

#[test]
fn sessions_first_declared_done_completes_and_aborts_the_others() {
    let mut room = room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    let sessions = calls_of(&d, CallRole::Specialist);
    let d = room.contribute(&sessions[0], "done: my summary");
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    assert_eq!(
        cancels(&d),
        vec![sessions[1].op],
        "the other session aborts"
    );
    assert!(
        calls_of(&d, CallRole::Reviewer).is_empty(),
        "no review gate"
    );
    assert!(room.objective().reviews().is_empty());
}

#[test]
fn sessions_a_session_finishing_after_completion_stays_evidence_d4() {
    let mut room = room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    let sessions = calls_of(&d, CallRole::Specialist);
    room.contribute(&sessions[0], "done: my summary");
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    // The other session's result arrives anyway (it was uncertain, then reconciled).
    let d = room.contribute(&sessions[1], "done: mine too");
    assert_rejected(&d, Rule::D4);
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    assert_eq!(room.objective().reports().len(), 1, "no second completion");
    // A failure of it after completion stops nothing either.
    let mut room = self::room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    let sessions = calls_of(&d, CallRole::Specialist);
    room.contribute(&sessions[0], "done: my summary");
    let d = room.fail(&sessions[1]);
    assert_eq!(stopped_by(&d), None);
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
}

#[test]
fn sessions_a_failed_session_leaves_the_others_working() {
    let mut room = room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    let sessions = calls_of(&d, CallRole::Specialist);
    let d = room.fail(&sessions[0]);
    assert!(calls_of(&d, CallRole::Reasoner).is_empty());
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    let d = room.fail(&sessions[1]);
    assert_eq!(stopped_by(&d), Some(Rule::O7), "none left: stopped");
    assert_eq!(
        room.objective().status(),
        ObjectiveStatus::StoppedForAttention
    );
}

#[test]
fn sessions_pause_keeps_the_boundary_and_resume_reopens_d3() {
    let mut room = room(Coordination::Sessions);
    let d = room.say("Summarize the state of the art");
    let sessions = calls_of(&d, CallRole::Specialist);
    let d = room.control("olive", ControlAction::Pause);
    assert_eq!(
        cancels(&d).len(),
        sessions.len(),
        "paused: every session aborts"
    );
    assert_eq!(room.objective().status(), ObjectiveStatus::Paused);
    for s in &sessions {
        room.fail(s);
    }
    let d = room.control("olive", ControlAction::Resume);
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    assert_eq!(
        calls_of(&d, CallRole::Specialist).len(),
        2,
        "sessions reopen"
    );
}

#[test]
fn sessions_owner_correction_opens_new_sessions_with_its_text_o14() {
    let mut room = room(Coordination::Sessions);
    room.say("Summarize the state of the art");
    let objective = room.objective_id();
    let d = room.post(
        "olive",
        EventBody::OwnerCorrection {
            objective,
            text: "Only 2026 papers".into(),
            criteria: None,
        },
    );
    assert!(calls_of(&d, CallRole::Reasoner).is_empty());
    let plan = room.objective().current_plan().unwrap();
    assert!(
        plan.tasks()
            .iter()
            .all(|t| t.spec().title == "Only 2026 papers")
    );
    assert_eq!(room.objective().plans().len(), 2);
}

#[test]
fn sessions_ignore_internal_receipts_o13() {
    let mut room = room(Coordination::Sessions);
    room.say("Summarize the state of the art");
    let objective = room.objective_id();
    let d = room.post(
        "hal",
        EventBody::InternalReceipt {
            objective: Some(objective),
            note: "a file arrived".into(),
        },
    );
    assert!(calls_of(&d, CallRole::Reasoner).is_empty());
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
}

#[test]
fn sessions_without_a_capable_specialist_refuse_the_message_o7() {
    let catalog = agentroom_domain::catalog::MemoryCatalog::new();
    let mut room = Room::with_catalog(
        RoomPolicy::default().with_coordination(Coordination::Sessions),
        1_000_000,
        catalog,
    );
    let d = room.say("Summarize the state of the art");
    assert_rejected(&d, Rule::O7);
    assert!(calls(&d).is_empty());
    assert!(room.state().objectives().is_empty());
}
