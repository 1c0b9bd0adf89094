//! Each metric on hand-made traces: an honest run that measures zero of everything that can go
//! wrong, then the same run broken in one way at a time, which the evaluator must count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use agentroom_eval::trace::{
    CallRole, Confirmation, CriterionVerdict, EventKind, InputKind, LedgerEntry, Mode,
    ObjectiveRecord, ObjectiveStatus, ResolutionOutcome, ResolutionRecord, ResultKind,
    ReviewRecord, Verdict,
};
use agentroom_eval::{
    Correction, CriterionTruth, DuplicateEffect, FalseCompletion, Metrics, ObjectiveTruth, Repeat,
    RepeatedAttempt, Trace, Truth, evaluate, median, summarize,
};
use support::*;

fn metrics(trace: &Trace) -> Metrics {
    evaluate(trace, &truth()).unwrap()
}

#[test]
fn an_honest_run_completes_with_nothing_wrong_and_measures_latency_and_cost() {
    let m = metrics(&honest());
    assert_eq!((m.objectives_completed, m.objectives_total), (1, 1));
    assert_eq!(m.completion(), Some(1.0));
    assert_eq!(m.false_completions, 0);
    assert_eq!(m.owner_corrections, 0);
    assert_eq!(m.operator_interventions, 0);
    assert_eq!(m.human_corrections(), 0);
    assert_eq!(m.repeated_work_attempts, 0);
    assert_eq!(m.duplicate_confirmed_effects, 0);
    // From the owner's message at 1 000 ms to the completion at 3 000 ms.
    assert_eq!(m.wall_latency_ms, Some(2_000));
    // Dispatch to receipt: 200 + 500 + 600 + 300.
    assert_eq!(m.in_model_latency_ms, 1_600);
    // B3: the charges, not the reservations.
    assert_eq!(m.cost_micros, 65_000);
    assert_eq!(m.held_micros, 0);
    assert_eq!(m.evidence.completed, vec![KEY.to_owned()]);
    assert!(m.evidence.false_completions.is_empty());
    assert!(m.evidence.corrections.is_empty());
    assert!(m.evidence.repeated_attempts.is_empty());
    assert!(m.evidence.duplicate_effects.is_empty());
}

// --- completion and false completion ---------------------------------------------------------

#[test]
fn a_completion_with_a_criterion_truly_unmet_is_a_false_completion() {
    // A specialist claims success early: nothing it delivers meets `scope`.
    let mut truth = truth();
    truth.objectives[0].criteria[0].truth = Truth::Unmet;
    let m = evaluate(&honest(), &truth).unwrap();
    assert_eq!(m.objectives_completed, 1);
    assert_eq!(m.false_completions, 1);
    assert_eq!(
        m.evidence.false_completions,
        vec![FalseCompletion {
            key: KEY.to_owned(),
            objective: OBJECTIVE.to_owned(),
            unmet: vec!["scope".to_owned()],
        }]
    );
}

#[test]
fn r3_a_report_missing_a_fact_is_a_false_completion_whatever_the_review_said() {
    // Neither contribution carries "fact-b"; the reviewer said met anyway: the evaluator reads
    // the ground truth, never the verdict.
    let mut t = honest();
    for c in &mut t.contributions {
        c.text = "fact-a only".to_owned();
    }
    t.reviews = vec![ReviewRecord {
        id: "rev-1".to_owned(),
        objective: OBJECTIVE.to_owned(),
        reviewer: "rita".to_owned(),
        report_version: 1,
        verdicts: vec![
            CriterionVerdict {
                criterion: "scope".to_owned(),
                verdict: Verdict::Met,
            },
            CriterionVerdict {
                criterion: "fact".to_owned(),
                verdict: Verdict::Met,
            },
        ],
        at_ms: 2_800,
    }];
    let m = metrics(&t);
    assert_eq!(m.false_completions, 1);
    assert_eq!(
        m.evidence.false_completions[0].unmet,
        vec!["fact".to_owned()]
    );
}

#[test]
fn d4_a_marker_only_in_work_that_never_completed_its_task_does_not_prove_the_criterion() {
    // The fact is in a late result that was discarded (it never completed its task), and in
    // work completed only after the objective was declared complete.
    let mut t = honest();
    t.contributions[0].text = "fact-a".to_owned();
    t.contributions[1].text = "fact-a".to_owned();
    t.operations
        .push(work("op-late", "late", 1_300, Some(1_400)));
    t.contributions
        .push(contribution("c-late", "op-late", "fact-b", None));
    t.operations
        .push(work("op-after", "after", 2_900, Some(3_100)));
    t.contributions
        .push(contribution("c-after", "op-after", "fact-b", Some(3_100)));
    let m = metrics(&t);
    assert_eq!(m.false_completions, 1);
}

#[test]
fn r3_a_corrected_report_that_carries_the_fact_completes_truly() {
    // The first report missed the fact; the corrective plan's report carries it.
    let mut t = honest();
    t.contributions[0].text = "fact-a".to_owned();
    t.contributions[1].text = "Report: fact-a.".to_owned();
    t.operations
        .push(work("op-report-2", "report-v2", 2_600, Some(2_700)));
    t.contributions.push(contribution(
        "c-report-2",
        "op-report-2",
        "Report: fact-a and fact-b.",
        Some(2_700),
    ));
    let m = metrics(&t);
    assert_eq!(m.false_completions, 0);
    assert_eq!(m.objectives_completed, 1);
}

#[test]
fn an_objective_left_waiting_is_not_completed_and_not_a_false_completion() {
    // R5: an unknown verdict leaves the objective waiting for the owner.
    let mut truth = truth();
    truth.objectives[0].criteria[0].truth = Truth::Unmet;
    let mut t = honest();
    t.statuses[2].status = ObjectiveStatus::WaitingForOwner;
    let m = evaluate(&t, &truth).unwrap();
    assert_eq!((m.objectives_completed, m.objectives_total), (0, 1));
    assert_eq!(m.completion(), Some(0.0));
    assert_eq!(m.false_completions, 0);
}

#[test]
fn an_objective_the_run_never_created_counts_in_the_total_as_not_completed() {
    // O1: two objectives asked for; the run created only the first.
    let mut truth = truth();
    truth.objectives.push(ObjectiveTruth {
        key: "second".to_owned(),
        criteria: vec![CriterionTruth {
            criterion: "done".to_owned(),
            truth: Truth::Met,
        }],
    });
    let m = evaluate(&honest(), &truth).unwrap();
    assert_eq!((m.objectives_completed, m.objectives_total), (1, 2));
    assert_eq!(m.completion(), Some(0.5));
}

#[test]
fn several_objectives_of_one_key_count_once_and_one_false_one_makes_it_false() {
    // Legacy sessions: two agent sessions each open an objective for the same message; one
    // declares done with the fact, the other without.
    let mut t = honest();
    t.mode = Mode::Sessions;
    t.objectives.push(ObjectiveRecord {
        id: "obj-2".to_owned(),
        key: KEY.to_owned(),
    });
    t.statuses
        .push(status("obj-2", ObjectiveStatus::Completed, 2_000));
    let m = metrics(&t);
    assert_eq!((m.objectives_completed, m.objectives_total), (1, 1));
    assert_eq!(m.false_completions, 1);
    assert_eq!(m.evidence.false_completions[0].objective, "obj-2");
}

// --- human corrections ------------------------------------------------------------------------

#[test]
fn owner_corrections_and_operator_interventions_are_counted_and_named() {
    let mut t = honest();
    t.events.push(event(
        "ev-fix",
        EventKind::OwnerCorrection,
        Some(OBJECTIVE),
        1_500,
    ));
    t.decisions.push(decision(7, InputKind::Control, 1_600));
    t.decisions.push(decision(8, InputKind::RaiseLimit, 1_700));
    // The review gate doing its job, an automatic reconciliation and a membership change are
    // no corrections.
    t.decisions
        .push(decision(9, InputKind::RecordReview, 2_800));
    t.decisions.push(decision(10, InputKind::Reconciled, 2_850));
    t.decisions.push(decision(11, InputKind::AddMember, 2_900));
    // D2: an operator resolved an uncertain call.
    t.operations[1].resolution = Some(ResolutionRecord {
        outcome: ResolutionOutcome::Succeeded,
        operator: "olga".to_owned(),
        at_ms: 1_750,
    });
    let m = metrics(&t);
    assert_eq!(m.owner_corrections, 1);
    assert_eq!(m.operator_interventions, 3);
    assert_eq!(m.human_corrections(), 4);
    assert_eq!(
        m.evidence.corrections,
        vec![
            Correction::Owner {
                event: "ev-fix".to_owned()
            },
            Correction::Operator {
                revision: 7,
                input: InputKind::Control
            },
            Correction::Operator {
                revision: 8,
                input: InputKind::RaiseLimit
            },
            Correction::Resolution {
                op: "op-gather".to_owned()
            },
        ]
    );
}

// --- repeated work attempts -------------------------------------------------------------------

#[test]
fn o8_work_dispatched_again_after_it_completed_is_a_repeated_attempt() {
    // A specialist loops: the same gather work, unchanged, is dispatched again after its
    // contribution completed it.
    let mut t = honest();
    t.operations
        .push(work("op-gather-2", "gather", 1_900, Some(2_000)));
    t.operations
        .push(work("op-gather-3", "gather", 2_100, Some(2_200)));
    let m = metrics(&t);
    assert_eq!(m.repeated_work_attempts, 2);
    assert_eq!(
        m.evidence.repeated_attempts,
        vec![
            RepeatedAttempt {
                op: "op-gather-2".to_owned(),
                work: format!("{KEY}/gather"),
                earlier: "op-gather".to_owned(),
                why: Repeat::AfterCompletion,
            },
            RepeatedAttempt {
                op: "op-gather-3".to_owned(),
                work: format!("{KEY}/gather"),
                earlier: "op-gather".to_owned(),
                why: Repeat::AfterCompletion,
            },
        ]
    );
}

#[test]
fn the_same_work_dispatched_while_it_still_runs_is_a_repeated_attempt() {
    // Legacy sessions: two sessions start the same work in one commit.
    let mut t = honest();
    t.operations
        .push(work("op-gather-twin", "gather", 1_200, Some(1_650)));
    let m = metrics(&t);
    assert_eq!(m.repeated_work_attempts, 1);
    assert_eq!(m.evidence.repeated_attempts[0].op, "op-gather-twin");
    assert_eq!(m.evidence.repeated_attempts[0].why, Repeat::WhileRunning);
}

#[test]
fn d2_retries_after_a_failed_or_uncertain_call_are_not_repeated_attempts() {
    let mut t = honest();
    // The first gather attempt failed (ended at 1 100 ms, no contribution); the second ended
    // uncertain (marked at 1 150 ms); the honest one at 1 200 ms is a retry of both.
    t.operations
        .push(work("op-gather-failed", "gather", 1_050, Some(1_100)));
    t.receipts
        .push(receipt("op-gather-failed", ResultKind::Failure, 1_100, &[]));
    t.operations
        .push(work("op-gather-lost", "gather", 1_120, Some(1_150)));
    let m = metrics(&t);
    assert_eq!(m.repeated_work_attempts, 0);
}

#[test]
fn r6_work_redone_after_an_owner_correction_is_not_a_repeated_attempt() {
    let mut t = honest();
    t.events.push(event(
        "ev-fix",
        EventKind::OwnerCorrection,
        Some(OBJECTIVE),
        1_850,
    ));
    t.operations
        .push(work("op-gather-2", "gather", 1_900, Some(2_000)));
    let m = metrics(&t);
    assert_eq!(m.repeated_work_attempts, 0);
    assert_eq!(m.owner_corrections, 1);
}

#[test]
fn o3_changed_work_under_the_same_task_key_is_new_work() {
    // The successor plan changed the gather task's spec: its work key differs.
    let mut t = honest();
    t.operations
        .push(work("op-gather-v2", "gather#2", 1_900, Some(2_000)));
    let m = metrics(&t);
    assert_eq!(m.repeated_work_attempts, 0);
}

// --- duplicate confirmed effects --------------------------------------------------------------

#[test]
fn the_same_effect_confirmed_by_two_receipts_is_a_duplicate_confirmed_effect() {
    // A baseline retried a call that had in fact run (D2): a reconciler later confirmed the
    // first, and the retry's receipt confirms the same effect again.
    let mut t = honest();
    t.operations
        .push(work("op-send", "send", 2_000, Some(2_100)));
    let mut first = receipt("op-send", ResultKind::Contribution, 2_600, &["mail-1"]);
    first.confirmed_by = Confirmation::Reconciler;
    t.receipts.push(first);
    t.operations
        .push(work("op-send-retry", "send-retry", 2_200, Some(2_300)));
    t.receipts.push(receipt(
        "op-send-retry",
        ResultKind::Contribution,
        2_300,
        &["mail-1"],
    ));
    let m = metrics(&t);
    assert_eq!(m.duplicate_confirmed_effects, 1);
    assert_eq!(
        m.evidence.duplicate_effects,
        vec![DuplicateEffect {
            effect: "mail-1".to_owned(),
            ops: vec!["op-send".to_owned(), "op-send-retry".to_owned()],
        }]
    );
}

#[test]
fn effect_ids_the_ground_truth_groups_are_one_effect() {
    // Three receipts name the same mail by different ids: two duplicates. One receipt naming
    // it twice confirms it once.
    let mut truth = truth();
    truth.same_effects = vec![vec![
        "mail-1".to_owned(),
        "msg-abc".to_owned(),
        "outbox-7".to_owned(),
    ]];
    let mut t = honest();
    for (i, id) in ["msg-abc", "outbox-7", "mail-1"].iter().enumerate() {
        let op = format!("op-send-{i}");
        let at = 2_000 + 10 * i64::try_from(i).unwrap();
        t.operations
            .push(work(&op, &format!("send-{i}"), at, Some(at)));
        t.receipts
            .push(receipt(&op, ResultKind::Contribution, at, &[*id, *id]));
    }
    let m = evaluate(&t, &truth).unwrap();
    assert_eq!(m.duplicate_confirmed_effects, 2);
    assert_eq!(m.evidence.duplicate_effects[0].effect, "mail-1");
    assert_eq!(m.evidence.duplicate_effects[0].ops.len(), 3);
}

// --- latency and cost -------------------------------------------------------------------------

#[test]
fn d2_in_model_latency_leaves_out_a_reconcilers_confirmation() {
    // The reviewer's call crashed; recovery confirmed its review much later: that wait is the
    // recovery's, not the model's.
    let mut t = honest();
    t.receipts[3].confirmed_by = Confirmation::Reconciler;
    t.receipts[3].at_ms = 60_000;
    t.operations[3].ended_ms = Some(60_000);
    let m = metrics(&t);
    assert_eq!(m.in_model_latency_ms, 1_300);
}

#[test]
fn wall_latency_runs_to_the_last_status_of_any_objective_and_is_none_without_a_message() {
    let mut t = honest();
    t.statuses
        .push(status(OBJECTIVE, ObjectiveStatus::Completed, 4_500));
    assert_eq!(metrics(&t).wall_latency_ms, Some(3_500));
    t.events.clear();
    assert_eq!(metrics(&t).wall_latency_ms, None);
}

#[test]
fn b3_cost_sums_charges_a_refused_settlement_charges_its_whole_reservation_and_uncertain_is_held() {
    let mut t = honest();
    // B3, B5: a settlement the ledger refused charges the whole reservation.
    t.operations
        .push(call("op-over", CallRole::Reasoner, 2_000, Some(2_100)));
    t.ledger.push(reserved("op-over", 40_000));
    t.ledger.push(LedgerEntry::SettlementRefused {
        op: "op-over".to_owned(),
        reserved: 40_000,
        reported: 90_000_000,
    });
    // A call that never ran is released: no charge.
    t.operations
        .push(call("op-never", CallRole::Reasoner, 2_000, Some(2_050)));
    t.ledger.push(reserved("op-never", 70_000));
    t.ledger.push(LedgerEntry::Released {
        op: "op-never".to_owned(),
        amount: 70_000,
    });
    // B3: an uncertain call keeps its whole reservation: held, not spent.
    t.operations
        .push(call("op-lost", CallRole::Specialist, 2_000, Some(2_300)));
    t.ledger.push(reserved("op-lost", 80_000));
    t.ledger.push(LedgerEntry::MarkedUncertain {
        op: "op-lost".to_owned(),
    });
    t.ledger.push(LedgerEntry::LimitRaised { by: 1_000_000 });
    t.ledger.push(LedgerEntry::OverrunAcknowledged);
    let m = metrics(&t);
    assert_eq!(m.cost_micros, 65_000 + 40_000);
    assert_eq!(m.held_micros, 80_000);
}

// --- the trace as JSON ------------------------------------------------------------------------

#[test]
fn a_trace_and_its_truth_round_trip_through_json_and_measure_the_same() {
    let t = honest();
    let json = serde_json::to_string(&t).unwrap();
    let back: Trace = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
    let truth_json = serde_json::to_string(&truth()).unwrap();
    let truth_back = serde_json::from_str(&truth_json).unwrap();
    assert_eq!(evaluate(&back, &truth_back).unwrap(), metrics(&t));
}

#[test]
fn a_hand_written_json_trace_of_routing_shows_a_false_completion_and_a_duplicate_effect() {
    let trace: Trace =
        serde_json::from_str(include_str!("traces/routing-early-claim.json")).unwrap();
    let truth =
        serde_json::from_str(include_str!("traces/routing-early-claim.truth.json")).unwrap();
    let m = evaluate(&trace, &truth).unwrap();
    assert_eq!(m.mode, Mode::Routing);
    assert_eq!((m.objectives_completed, m.objectives_total), (1, 1));
    assert_eq!(m.false_completions, 1);
    assert_eq!(m.repeated_work_attempts, 1);
    assert_eq!(m.duplicate_confirmed_effects, 1);
    assert_eq!(m.wall_latency_ms, Some(900));
    assert_eq!(m.in_model_latency_ms, 700);
    assert_eq!(m.cost_micros, 27_000);
}

#[test]
fn unknown_fields_in_a_json_trace_are_refused_not_ignored() {
    let err = serde_json::from_str::<Trace>(r#"{"scenario": "s", "mode": "planner", "extra": 1}"#)
        .unwrap_err();
    assert!(err.to_string().contains("unknown field `extra`"), "{err}");
}

// --- per mode ---------------------------------------------------------------------------------

#[test]
fn a_summary_sums_counts_and_money_per_mode_and_takes_medians_of_latency_and_cost() {
    let planner = metrics(&honest());
    let mut second = honest();
    second.scenario = "second".to_owned();
    let mut truth2 = truth();
    truth2.scenario = "second".to_owned();
    truth2.objectives[0].criteria[0].truth = Truth::Unmet;
    second.ledger.push(reserved("op-plan-2", 1));
    second
        .operations
        .push(call("op-plan-2", CallRole::Reasoner, 3_000, None));
    second.statuses[2].at_ms = 5_000;
    let second = evaluate(&second, &truth2).unwrap();
    let mut routing_trace = honest();
    routing_trace.mode = Mode::Routing;
    routing_trace.events.clear();
    let routing = metrics(&routing_trace);

    let summaries = summarize(&[routing.clone(), planner.clone(), second.clone()]).unwrap();
    assert_eq!(
        summaries.iter().map(|s| s.mode).collect::<Vec<_>>(),
        vec![Mode::Routing, Mode::Planner]
    );
    let p = &summaries[1];
    assert_eq!(p.scenarios, 2);
    assert_eq!((p.objectives_completed, p.objectives_total), (2, 2));
    assert_eq!(p.false_completions, 1);
    assert_eq!(p.cost_micros, 130_000);
    assert_eq!(p.held_micros, 1);
    assert_eq!(p.median_cost_micros, Some(65_000));
    // Wall latencies 2 000 and 4 000: the mean of the two middle ones.
    assert_eq!(p.median_wall_latency_ms, Some(3_000));
    assert_eq!(p.median_in_model_latency_ms, Some(1_600));
    assert_eq!(p.human_corrections(), 0);
    assert_eq!(p.completion(), Some(1.0));
    let r = &summaries[0];
    assert_eq!(r.median_wall_latency_ms, None);
    assert_eq!(r.without_wall_latency, 1);
}

#[test]
fn a_summary_refuses_one_scenario_twice_in_a_mode() {
    let m = metrics(&honest());
    let err = summarize(&[m.clone(), m]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "scenario `honest-agents` appears twice in mode planner"
    );
}

#[test]
fn the_median_of_an_even_count_is_the_mean_of_the_middle_two_rounded_down() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[7]), Some(7));
    assert_eq!(median(&[9, 1, 5]), Some(5));
    assert_eq!(median(&[4, 1, 2, 9]), Some(3));
    assert_eq!(median(&[-3, 0]), Some(-2));
    assert_eq!(median(&[i64::MAX, i64::MAX]), Some(i64::MAX));
    assert_eq!(median(&[i64::MIN, i64::MAX]), Some(-1));
}
