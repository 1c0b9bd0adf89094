//! Scripted agents: the demo scenario played through the domain, determinism, the durable
//! journal and the reconciler that confirms an uncertain call from it (D2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::sync::Arc;

use agentroom_agents::scripted::{Journal, JournalError, JournalReconciler, Scenario, Scripted};
use agentroom_ports::domain::engine::{CallResult, Charge, Reconciliation, SpecialistResult};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::domain::review::ReviewOutcome;
use agentroom_ports::domain::state::{CallRole, OperationState};
use agentroom_ports::{AgentOutcome, Reasoner, ReasonerCall, Reconciler};
use support::{Drive, Ended, p, scenario};

#[tokio::test]
async fn the_demo_scenario_completes_after_one_corrective_plan() {
    let scripted = Arc::new(Scripted::new(scenario("demo.toml")));
    let drive = Drive::play(scripted.scenario(), &scripted.agents()).await;
    let objective = drive.objective();
    assert_eq!(
        objective.status(),
        ObjectiveStatus::Completed,
        "{}",
        drive.timeline()
    );
    assert_eq!(
        objective.plans().len(),
        2,
        "the first plan and the corrective one"
    );
    let outcomes: Vec<ReviewOutcome> = objective.reviews().iter().map(|r| r.outcome()).collect();
    assert_eq!(outcomes, vec![ReviewOutcome::Unmet, ReviewOutcome::AllMet]);
    assert_eq!(objective.reviews()[1].report().version, 2);
    let authors: Vec<String> = objective
        .contributions()
        .iter()
        .map(|id| drive.state().contributions()[id].author().to_string())
        .collect();
    assert_eq!(
        authors,
        ["sam", "sue", "sam", "sue"],
        "gather (reused), report v1, benchmarks, report v2"
    );
    assert!(drive.ended.iter().all(|(_, end)| *end == Ended::Returned));
    // Every call was charged what the scenario says: 2,100 + 3,400 + 2,800 + 1,200 + 2,300 +
    // 3,100 + 3,000 + 1,300.
    let balances = drive.state().ledger().balances();
    assert_eq!(balances.spent, UsdMicros::new(19_200));
    assert_eq!(balances.reserved, UsdMicros::ZERO);
}

#[tokio::test]
async fn scripted_agents_are_deterministic() {
    let play = || async {
        let scripted = Arc::new(Scripted::new(scenario("demo.toml")));
        let drive = Drive::play(scripted.scenario(), &scripted.agents()).await;
        (drive.timeline(), drive.state().clone())
    };
    let (first_log, first_state) = play().await;
    let (second_log, second_state) = play().await;
    assert_eq!(first_log, second_log);
    assert_eq!(first_state, second_state);
}

fn reasoner_call(n: u128) -> ReasonerCall {
    ReasonerCall {
        op: support::op(n),
        reservation: UsdMicros::new(10_000),
        objective: None,
        observed: Default::default(),
        text: "hello".into(),
        objective_title: None,
        criteria: vec![],
        progress: vec![],
        unmet: vec![],
        feedback: vec![],
        attempt: 1,
        context: Default::default(),
    }
}

const TWO_ANSWERS: &str = r#"
[[reasoner]]
charge_micros = 10
reply = { kind = "answer", text = "first" }
[[reasoner]]
reply = { kind = "answer", text = "second" }
"#;

fn answer_text(outcome: &AgentOutcome<agentroom_ports::domain::engine::ReasonerResult>) -> String {
    match outcome {
        AgentOutcome::Returned {
            result: agentroom_ports::domain::engine::ReasonerResult::Proposal(p),
            ..
        } => match &p.kind {
            agentroom_ports::domain::engine::ProposalKind::Answer { text } => text.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_same_operation_gets_the_same_reply_and_an_exhausted_script_is_refused() {
    let scripted = Scripted::new(Scenario::parse(TWO_ANSWERS).unwrap());
    let first = scripted.interpret(&reasoner_call(1)).await;
    assert_eq!(answer_text(&first), "first");
    assert!(matches!(
        first,
        AgentOutcome::Returned {
            charge: Charge::Actual(m),
            ..
        } if m == UsdMicros::new(10)
    ));
    assert_eq!(
        answer_text(&scripted.interpret(&reasoner_call(1)).await),
        "first"
    );
    let second = scripted.interpret(&reasoner_call(2)).await;
    assert_eq!(answer_text(&second), "second");
    assert!(
        matches!(
            second,
            AgentOutcome::Returned {
                charge: Charge::NoUsage,
                ..
            }
        ),
        "no charge in the scenario: no usage (B3)"
    );
    match scripted.interpret(&reasoner_call(3)).await {
        AgentOutcome::Refused { reason } => {
            assert!(reason.contains("no reply left"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_restarted_script_resumes_where_its_journal_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("executions.jsonl");
    {
        let journal = Arc::new(Journal::open(&path).unwrap());
        let scripted = Scripted::new(Scenario::parse(TWO_ANSWERS).unwrap()).with_journal(journal);
        assert_eq!(
            answer_text(&scripted.interpret(&reasoner_call(1)).await),
            "first"
        );
    }
    let journal = Arc::new(Journal::open(&path).unwrap());
    let scripted = Scripted::new(Scenario::parse(TWO_ANSWERS).unwrap()).with_journal(journal);
    assert_eq!(
        answer_text(&scripted.interpret(&reasoner_call(2)).await),
        "second",
        "the first reply was used before the restart"
    );
    assert_eq!(
        answer_text(&scripted.interpret(&reasoner_call(1)).await),
        "first",
        "a recorded operation gets its recorded outcome"
    );
}

const LOST_REPLY: &str = r#"
description = "the specialist runs, records it, and its reply is lost"

[room]
owner = "olive"
members = { sam = ["specialist"], sue = ["specialist"], rita = ["reviewer"] }
bindings = { research = "sam", writing = "sue" }

[[owner]]
text = "Summarize"

[[reasoner]]
charge_micros = 2_000
[reasoner.reply]
kind = "plan"
criteria = [{ id = "cites-sources", text = "every claim cites a source" }]
tasks = [
    { key = "gather", title = "Gather", capability = "research", kind = "production" },
    { key = "write", title = "Write", capability = "writing", kind = "report", deps = ["gather"] },
]

[[specialist]]
task = "gather"
charge_micros = 1_500
artifacts = [{ name = "notes", content = "found" }]
lose_reply = true
"#;

#[tokio::test]
async fn d2_the_journal_confirms_what_a_specialist_executed_and_denies_what_it_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path().join("executions.jsonl")).unwrap());
    let scripted = Arc::new(
        Scripted::new(Scenario::parse(LOST_REPLY).unwrap()).with_journal(Arc::clone(&journal)),
    );
    let mut drive = Drive::play(scripted.scenario(), &scripted.agents()).await;
    let (gather, ended) = drive
        .ended
        .iter()
        .find(|(call, _)| call.role == CallRole::Specialist)
        .cloned()
        .unwrap();
    assert_eq!(ended, Ended::Uncertain);
    assert_eq!(
        drive.state().operation(gather.op).unwrap().state(),
        OperationState::Uncertain,
        "its whole reservation is held (B3)"
    );

    // A reconciler built from the file alone, as a restarted process would build it.
    let reconciler =
        JournalReconciler::new(journal.path(), &agentroom_agents::scripted::SCRIPTED_ROLES);
    let confirmed = drive.reconcile(&reconciler, &gather).await.unwrap();
    let Reconciliation::Executed { charge, result } = confirmed else {
        panic!("{confirmed:?}");
    };
    assert_eq!(charge, Charge::Actual(UsdMicros::new(1_500)));
    let CallResult::Specialist(SpecialistResult::Contribution(draft)) = result else {
        panic!("{result:?}");
    };
    assert_eq!(draft.id, agentroom_agents::contribution_id(gather.op));
    assert_eq!(drive.objective().contributions(), [draft.id]);

    // An operation the journal never recorded never ran; a role it does not cover is unknown.
    let mut never = gather.clone();
    never.op = support::op(0xdead);
    assert_eq!(
        reconciler
            .reconcile(&support::record(&never))
            .await
            .unwrap(),
        Some(Reconciliation::NotExecuted)
    );
    let specialists_only = journal.reconciler(&[CallRole::Specialist]);
    let reasoner = drive
        .ended
        .iter()
        .find(|(call, _)| call.role == CallRole::Reasoner)
        .map(|(call, _)| call.clone())
        .unwrap();
    assert_eq!(
        specialists_only
            .reconcile(&support::record(&reasoner))
            .await
            .unwrap(),
        None
    );
}

#[test]
fn a_torn_journal_tail_is_cut_off_and_a_corrupt_line_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("executions.jsonl");
    let line = serde_json::json!({
        "op": support::op(1),
        "role": "specialist",
        "principal": "sam",
        "task": "p/gather",
        "reply": 0,
        "charge": {"charge": "actual", "micros": 5},
        "result": {"role": "specialist", "value": {"result": "failure", "reason": "offline"}},
    })
    .to_string();
    std::fs::write(&path, format!("{line}\n{{\"op\": \"00000000-00")).unwrap();
    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.executions().unwrap().len(), 1);
    assert_eq!(journal.executions().unwrap()[0].principal, Some(p("sam")));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{line}\n"),
        "the torn tail is gone"
    );
    drop(journal);

    std::fs::write(&path, format!("not json\n{line}\n")).unwrap();
    match Journal::open(&path) {
        Err(JournalError::Corrupt { line: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
}
