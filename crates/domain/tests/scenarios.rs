//! Scenario tests: objectives walked end to end through `decide` only.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::engine::{ControlAction, LateDecision};
use agentroom_domain::event::EventBody;
use agentroom_domain::ids::CriterionId;
use agentroom_domain::ledger::Balances;
use agentroom_domain::objective::{Criterion, ObjectiveStatus};
use agentroom_domain::plan::{Column, PlanTrigger};
use agentroom_domain::review::{ReviewOutcome, Verdict};
use agentroom_domain::rules::Rule;
use common::*;
use expect_test::expect;

fn columns(room: &Room) -> Vec<(String, &'static str)> {
    let plan = room.objective().current_plan().unwrap();
    plan.tasks()
        .iter()
        .map(|t| (t.key().to_string(), plan.column_of(t).as_str()))
        .collect()
}

fn assert_ledger_adds_up(room: &Room) {
    let ledger = room.state().ledger();
    let b: Balances = ledger.balances();
    let open: i64 = room
        .state()
        .operations()
        .values()
        .map(|o| o.reservation().micros())
        .sum();
    let charged: i64 = room
        .sim
        .closed()
        .values()
        .filter_map(|o| o.charged())
        .map(|c| c.micros())
        .sum();
    assert_eq!(b.reserved.micros(), open, "reserved = open reservations");
    assert_eq!(b.spent.micros(), charged, "spent = sum of charges");
    assert_eq!(
        b.available.micros(),
        b.limit.micros() - b.spent.micros() - b.reserved.micros()
    );
    let replayed = agentroom_domain::ledger::BudgetLedger::replay(room.sim.ledger()).unwrap();
    assert_eq!(replayed, *ledger, "the log replays to the same ledger");
}

#[test]
fn scenario_owner_message_to_reviewed_completion_through_an_unmet_criterion() {
    let mut room = Room::new();
    let d = room.say("Summarize the state of the art");
    let call = reasoner_call(&d);
    let d = room.plan(&call, two_step_plan());
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    assert_eq!(
        columns(&room),
        vec![
            ("gather".into(), "in_progress"),
            ("write".into(), "backlog")
        ]
    );
    let gather = specialist_call(&d);
    assert_eq!(gather.principal, Some(p("sam")));

    let d = room.contribute(&gather, "three papers");
    let write = specialist_call(&d);
    assert_eq!(write.principal, Some(p("sue")));
    let d = room.contribute(&write, "report v1");
    let review = review_call(&d);
    assert_eq!(review.principal, Some(p("ray")));

    // Unmet: corrective planning with the criterion's evidence (R3).
    let d = room.review(&review, &one_unmet());
    assert_eq!(room.objective().status(), ObjectiveStatus::Planning);
    let replan = reasoner_call(&d);
    let agentroom_domain::engine::CallBrief::Interpret { unmet, .. } = &replan.brief else {
        panic!()
    };
    assert_eq!(unmet[0].0.as_str(), "covers-2026");

    let corrective = plan_of(vec![
        task("gather", "research", &[]),
        task("gather-2026", "research", &[]),
        report("write", &["gather", "gather-2026"]),
    ]);
    let d = room.plan(&replan, corrective);
    let plan = room.objective().current_plan().unwrap();
    assert_eq!(plan.number(), 2);
    assert!(plan.task_by_key(&key("gather")).unwrap().is_reused());
    assert!(matches!(plan.trigger(), PlanTrigger::UnmetReview { .. }));
    let more = specialist_call(&d);
    let d = room.contribute(&more, "2026 papers");
    let write2 = specialist_call(&d);
    let d = room.contribute(&write2, "report v2");
    let review2 = review_call(&d);
    let agentroom_domain::engine::CallBrief::Review { report, .. } = &review2.brief else {
        panic!()
    };
    assert_eq!(report.version, 2);
    assert_eq!(report.source_set.sources().len(), 2);

    room.review(&review2, &all_met());
    let objective = room.objective();
    assert_eq!(objective.status(), ObjectiveStatus::Completed);
    assert_eq!(objective.reviews().len(), 2);
    assert_eq!(objective.reviews()[1].outcome(), ReviewOutcome::AllMet);
    assert_eq!(
        columns(&room).iter().filter(|(_, c)| *c == "done").count(),
        3
    );
    assert_ledger_adds_up(&room);
    let b = room.state().ledger().balances();
    // 2 reasoner, 4 specialist, 2 review calls, each charged half its reservation.
    assert_eq!(
        b.spent.micros(),
        2 * REASONER / 2 + 4 * SPECIALIST / 2 + 2 * REVIEWER / 2
    );
    assert_eq!(b.reserved.micros(), 0);

    expect![[r#"
        ok olive granted operator to oscar
        ok olive granted specialist to sam
        ok olive granted specialist to sue
        ok olive granted reviewer to rita
        ok olive granted reviewer to ray
        ok olive granted agent_host to hal
        ok owner message accepted; asking the reasoner
        ok [B1] reserved $0.001000 for reasoner call
        ok [B3] charged $0.000500, released $0.000500
        ok [O1] objective created from it shares the room budget
        ok [O7] plan v1 admitted whole: 2 tasks, 0 reused unchanged (O3)
        ok [B1] reserved $0.002000 for specialist call
        ok [B3] charged $0.001000, released $0.001000
        ok [T2] completed by contribution
        ok [B1] reserved $0.002000 for specialist call
        ok [B3] charged $0.001000, released $0.001000
        ok [T2] completed by contribution
        ok [R2] report v1 awaits review, bound to source set
        ok [B1] reserved $0.000500 for reviewer call
        ok [B3] charged $0.000250, released $0.000250
        ok [R2] ray reviewed report v1: Unmet
        ok [R3] report version failed review (1 of 3): corrective planning
        ok [B1] reserved $0.001000 for reasoner call
        ok [B3] charged $0.000500, released $0.000500
        ok [O7] plan v2 admitted whole: 3 tasks, 1 reused unchanged (O3)
        ok [B1] reserved $0.002000 for specialist call
        ok [B3] charged $0.001000, released $0.001000
        ok [T2] completed by contribution
        ok [B1] reserved $0.002000 for specialist call
        ok [B3] charged $0.001000, released $0.001000
        ok [T2] completed by contribution
        ok [R2] report v2 awaits review, bound to source set
        ok [B1] reserved $0.000500 for reviewer call
        ok [B3] charged $0.000250, released $0.000250
        ok [R2] ray reviewed report v2: AllMet
        ok every criterion met: objective completed
    "#]]
    .assert_eq(&without_ids(&timeline(room.sim.log())));
}

#[test]
fn scenario_pause_and_a_late_result_that_needs_readmission() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    // The operator pauses: the running call is asked to abort, nothing new is dispatched.
    let d = room.control("oscar", ControlAction::Pause);
    assert_eq!(cancels(&d), vec![gather.op]);
    assert_eq!(room.objective().status(), ObjectiveStatus::Paused);
    // The specialist finished anyway: charged, held, not used.
    let d = room.contribute(&gather, "papers");
    assert!(calls(&d).is_empty());
    assert_eq!(
        columns(&room),
        vec![
            ("gather".into(), "in_progress"),
            ("write".into(), "backlog")
        ]
    );
    // Resuming does not use it either, nor run the task again.
    let d = room.control("olive", ControlAction::Resume);
    assert!(calls(&d).is_empty());
    assert_eq!(room.objective().status(), ObjectiveStatus::Running);
    // The owner readmits it: the task completes and the report is dispatched.
    let d = room.late("olive", &gather, LateDecision::Readmit);
    assert_eq!(columns(&room)[0], ("gather".into(), "done"));
    let write = specialist_call(&d);
    let d = room.contribute(&write, "report");
    room.review(&review_call(&d), &all_met());
    assert_eq!(room.objective().status(), ObjectiveStatus::Completed);
    assert_ledger_adds_up(&room);
}

#[test]
fn scenario_an_owner_correction_resets_the_repair_cycle() {
    let mut room = Room::new();
    let d = room.start_objective();
    let gather = specialist_call(&d);
    let d = room.contribute(&gather, "papers");
    let d = room.contribute(&specialist_call(&d), "report v1");
    // Two report versions fail review...
    let d = room.review(&review_call(&d), &one_unmet());
    let d = room.plan(
        &reasoner_call(&d),
        plan_of(vec![
            task("gather", "research", &[]),
            task("more", "research", &[]),
            report("write", &["gather", "more"]),
        ]),
    );
    let d = room.contribute(&specialist_call(&d), "more papers");
    let d = room.contribute(&specialist_call(&d), "report v2");
    let review = review_call(&d);
    let d = room.review(&review, &one_unmet());
    assert_eq!(room.objective().counters().failed_report_versions, 2);
    let pending = reasoner_call(&d);
    // ...then the owner corrects the objective, narrowing a criterion.
    let objective = room.objective_id();
    let narrowed = vec![
        Criterion {
            id: CriterionId::parse("cites-sources").unwrap(),
            text: "every claim cites a source".into(),
        },
        Criterion {
            id: CriterionId::parse("covers-2026").unwrap(),
            text: "covers Q1 2026 only".into(),
        },
    ];
    let d = room.post(
        "olive",
        EventBody::OwnerCorrection {
            objective,
            text: "only Q1 2026 matters".into(),
            criteria: Some(narrowed.clone()),
        },
    );
    assert!(
        cancels(&d).contains(&pending.op),
        "the superseded interpretation is aborted"
    );
    assert_eq!(room.objective().counters().failed_report_versions, 0);
    assert_eq!(room.objective().corrections().len(), 1);
    let replan = reasoner_call(&d);
    // The stale interpretation's answer is refused; the correction's is admitted.
    let stale = room.plan(
        &pending,
        plan_of(vec![task("x", "research", &[]), report("w", &["x"])]),
    );
    assert_rejected(&stale, Rule::O10);
    let mut corrected = plan_of(vec![
        task("gather", "research", &[]),
        task("q1", "research", &[]),
        report("write", &["gather", "q1"]),
    ]);
    corrected.criteria = narrowed;
    let d = room.plan(&replan, corrected);
    assert!(matches!(
        room.objective().current_plan().unwrap().trigger(),
        PlanTrigger::OwnerCorrection { .. }
    ));
    let d = room.contribute(&specialist_call(&d), "Q1 papers");
    let d = room.contribute(&specialist_call(&d), "report v3");
    // A third failed version would have stopped repair before the correction (R4); now it
    // is the first of a new cycle.
    let d = room.review(&review_call(&d), &one_unmet());
    assert_eq!(room.objective().counters().failed_report_versions, 1);
    assert_eq!(room.objective().status(), ObjectiveStatus::Planning);
    reasoner_call(&d);
}

#[test]
fn scenario_an_unknown_verdict_waits_for_the_owner() {
    let mut room = Room::new();
    let d = room.start_objective();
    let d = room.contribute(&specialist_call(&d), "papers");
    let d = room.contribute(&specialist_call(&d), "report");
    let d = room.review(
        &review_call(&d),
        &[
            ("cites-sources", Verdict::Met),
            ("covers-2026", Verdict::Unknown),
        ],
    );
    assert_eq!(room.objective().status(), ObjectiveStatus::WaitingForOwner);
    assert!(calls(&d).is_empty());
    assert!(
        notifications(&d)
            .iter()
            .any(|n| n.contains("please decide"))
    );
    // The owner answers with a correction; planning resumes.
    let objective = room.objective_id();
    let d = room.post(
        "olive",
        EventBody::OwnerCorrection {
            objective,
            text: "2025 work is fine too".into(),
            criteria: None,
        },
    );
    assert_eq!(room.objective().status(), ObjectiveStatus::Planning);
    reasoner_call(&d);
    let _ = Column::Done;
}

/// The timeline without UUIDs and identities, so it reads as a story.
fn without_ids(text: &str) -> String {
    text.lines()
        .map(|line| {
            line.split(' ')
                .filter(|w| !looks_like_id(w))
                .collect::<Vec<_>>()
                .join(" ")
                .replace(" :", ":")
                .replace("  ", " ")
                + "\n"
        })
        .collect()
}

fn looks_like_id(word: &str) -> bool {
    let w = word.trim_matches(|c: char| c == '(' || c == ')' || c == ':' || c == ',');
    w.len() >= 36 && w.chars().filter(|c| *c == '-').count() >= 4 || w.starts_with("sha256:")
}
