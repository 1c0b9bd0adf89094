//! Hand-made traces: one small builder per record, and an honest planner run that every test
//! starts from and then breaks in exactly one way.
#![allow(dead_code, reason = "each test file uses the builders it needs")]

use agentroom_eval::trace::{
    CallRole, Confirmation, ContributionRecord, DecisionRecord, EventKind, EventRecord, InputKind,
    LedgerEntry, ObjectiveRecord, ObjectiveStatus, OperationRecord, ReceiptRecord, ResultKind,
    StatusChange,
};
use agentroom_eval::{CriterionTruth, GroundTruth, Mode, ObjectiveTruth, Trace, Truth};

pub(crate) const SCENARIO: &str = "honest-agents";
pub(crate) const OBJECTIVE: &str = "obj-1";
pub(crate) const KEY: &str = "brief";

pub(crate) fn event(id: &str, kind: EventKind, objective: Option<&str>, at_ms: i64) -> EventRecord {
    EventRecord {
        id: id.to_owned(),
        kind,
        author: "owner".to_owned(),
        objective: objective.map(str::to_owned),
        at_ms,
    }
}

pub(crate) fn decision(revision: i64, input: InputKind, at_ms: i64) -> DecisionRecord {
    DecisionRecord {
        revision,
        input,
        event: None,
        at_ms,
        log: Vec::new(),
    }
}

pub(crate) fn status(objective: &str, status: ObjectiveStatus, at_ms: i64) -> StatusChange {
    StatusChange {
        objective: objective.to_owned(),
        status,
        at_ms,
    }
}

/// A call of `role` for the objective, dispatched at `dispatched_ms`, ended at `ended_ms`.
pub(crate) fn call(
    id: &str,
    role: CallRole,
    dispatched_ms: i64,
    ended_ms: Option<i64>,
) -> OperationRecord {
    OperationRecord {
        id: id.to_owned(),
        role,
        objective: Some(OBJECTIVE.to_owned()),
        principal: None,
        task: None,
        work: None,
        reservation_micros: 100_000,
        dispatched_ms,
        ended_ms,
        resolution: None,
    }
}

/// A specialist call doing `work`.
pub(crate) fn work(
    id: &str,
    work: &str,
    dispatched_ms: i64,
    ended_ms: Option<i64>,
) -> OperationRecord {
    OperationRecord {
        principal: Some("sam".to_owned()),
        task: Some(format!("plan-1/{work}")),
        work: Some(format!("{KEY}/{work}")),
        ..call(id, CallRole::Specialist, dispatched_ms, ended_ms)
    }
}

pub(crate) fn receipt(op: &str, result: ResultKind, at_ms: i64, effects: &[&str]) -> ReceiptRecord {
    ReceiptRecord {
        op: op.to_owned(),
        confirmed_by: Confirmation::Runner,
        result,
        effects: effects.iter().map(|e| (*e).to_owned()).collect(),
        at_ms,
    }
}

pub(crate) fn contribution(
    id: &str,
    op: &str,
    text: &str,
    completed_ms: Option<i64>,
) -> ContributionRecord {
    ContributionRecord {
        id: id.to_owned(),
        objective: OBJECTIVE.to_owned(),
        task: format!("plan-1/{op}"),
        op: op.to_owned(),
        author: "sam".to_owned(),
        text: text.to_owned(),
        completed_ms,
    }
}

pub(crate) fn reserved(op: &str, amount: i64) -> LedgerEntry {
    LedgerEntry::Reserved {
        op: op.to_owned(),
        amount,
    }
}

pub(crate) fn settled(op: &str, reserved: i64, charged: i64) -> LedgerEntry {
    LedgerEntry::Settled {
        op: op.to_owned(),
        reserved,
        charged,
    }
}

/// The scenario's truth: criterion `scope` is met by any honest work, `fact` only when the
/// completed work carries "fact-b".
pub(crate) fn truth() -> GroundTruth {
    GroundTruth {
        scenario: SCENARIO.to_owned(),
        objectives: vec![ObjectiveTruth {
            key: KEY.to_owned(),
            criteria: vec![
                CriterionTruth {
                    criterion: "scope".to_owned(),
                    truth: Truth::Met,
                },
                CriterionTruth {
                    criterion: "fact".to_owned(),
                    truth: Truth::Delivered {
                        marker: "fact-b".to_owned(),
                    },
                },
            ],
        }],
        same_effects: Vec::new(),
    }
}

/// An honest planner run: the owner's message at 1 000 ms; the reasoner's plan (200 ms); a
/// gather task (500 ms) and the report (600 ms), each completed by its contribution; a review
/// (300 ms); completed at 3 000 ms. Charges 10 000 + 20 000 + 30 000 + 5 000 micros.
pub(crate) fn honest() -> Trace {
    let mut t = Trace::new(SCENARIO, Mode::Planner);
    t.events = vec![event("ev-1", EventKind::OwnerMessage, None, 1_000)];
    t.objectives = vec![ObjectiveRecord {
        id: OBJECTIVE.to_owned(),
        key: KEY.to_owned(),
    }];
    t.decisions = vec![
        decision(2, InputKind::EventAccepted, 1_000),
        decision(3, InputKind::CallReturned, 1_200),
        decision(4, InputKind::CallReturned, 1_800),
        decision(5, InputKind::CallReturned, 2_500),
        decision(6, InputKind::CallReturned, 3_000),
    ];
    t.statuses = vec![
        status(OBJECTIVE, ObjectiveStatus::Planning, 1_000),
        status(OBJECTIVE, ObjectiveStatus::Running, 1_200),
        status(OBJECTIVE, ObjectiveStatus::Completed, 3_000),
    ];
    t.operations = vec![
        call("op-plan", CallRole::Reasoner, 1_000, Some(1_200)),
        work("op-gather", "gather", 1_200, Some(1_700)),
        work("op-report", "report", 1_800, Some(2_400)),
        OperationRecord {
            principal: Some("rita".to_owned()),
            ..call("op-review", CallRole::Reviewer, 2_500, Some(2_800))
        },
    ];
    t.receipts = vec![
        receipt("op-plan", ResultKind::Proposal, 1_200, &[]),
        receipt(
            "op-gather",
            ResultKind::Contribution,
            1_700,
            &["draft-gather"],
        ),
        receipt(
            "op-report",
            ResultKind::Contribution,
            2_400,
            &["draft-report"],
        ),
        receipt("op-review", ResultKind::Review, 2_800, &[]),
    ];
    t.contributions = vec![
        contribution("c-gather", "op-gather", "fact-a; fact-b", Some(1_800)),
        contribution(
            "c-report",
            "op-report",
            "Report: fact-a and fact-b.",
            Some(2_500),
        ),
    ];
    t.ledger = vec![
        LedgerEntry::Opened { limit: 5_000_000 },
        reserved("op-plan", 100_000),
        settled("op-plan", 100_000, 10_000),
        reserved("op-gather", 100_000),
        settled("op-gather", 100_000, 20_000),
        reserved("op-report", 100_000),
        settled("op-report", 100_000, 30_000),
        reserved("op-review", 100_000),
        settled("op-review", 100_000, 5_000),
    ];
    t
}
