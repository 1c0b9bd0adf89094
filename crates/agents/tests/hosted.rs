//! Hosted specialists without HTTP: a call waits for its submission, which only its own
//! specialist makes, once, recorded in the journal file before the call returns it (T2, D2);
//! a dropped call (an abort) leaves the assignments; the reconciler answers from the journal.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::hosted::{HostedSpecialists, Submission, SubmitError};
use agentroom_agents::scripted::Journal;
use agentroom_ports::domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, Reconciliation, SpecialistResult, TaskBrief,
};
use agentroom_ports::domain::ids::{OperationId, PrincipalId, RoomId, TaskIdentity, TaskKey};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObservedRevisions;
use agentroom_ports::domain::plan::TaskKind;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentOutcome, OperationRecord, OperationStatus, Reconciler, Specialist, SpecialistCall,
};

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn op(n: u128) -> OperationId {
    format!("00000000-0000-0000-0000-{n:012x}").parse().unwrap()
}

fn brief() -> TaskBrief {
    TaskBrief {
        identity: TaskIdentity::from_wire("p1/gather"),
        key: TaskKey::parse("gather").unwrap(),
        title: "Gather sources".into(),
        capability: "research".into(),
        inputs: serde_json::Map::new(),
        kind: TaskKind::Production,
        dep_contributions: vec![],
    }
}

fn call(n: u128, who: &str) -> SpecialistCall {
    SpecialistCall {
        op: op(n),
        reservation: UsdMicros::new(5_000),
        principal: p(who),
        objective: None,
        task: brief(),
        context: Default::default(),
    }
}

fn record(n: u128, who: &str) -> OperationRecord {
    OperationRecord {
        room: RoomId::parse("local").unwrap(),
        request: CallRequest {
            op: op(n),
            role: CallRole::Specialist,
            principal: Some(p(who)),
            objective: None,
            observed: ObservedRevisions {
                objective: 1,
                control: 0,
            },
            reservation: UsdMicros::new(5_000),
            brief: CallBrief::Execute(brief()),
        },
        status: OperationStatus::Uncertain,
        generation: 2,
        lease_owner: None,
        lease_expired: true,
        cancel_requested: false,
        receipt: None,
        recovery_attempts: 1,
        dead_letter_reason: None,
        resolution: None,
    }
}

fn failure(usage: i64) -> Submission {
    Submission {
        charge: Charge::Actual(UsdMicros::new(usage)),
        result: SpecialistResult::Failure {
            reason: "sources unreachable".into(),
        },
    }
}

struct Setup {
    hosted: Arc<HostedSpecialists>,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hosted.jsonl");
    let journal = Arc::new(Journal::open(&path).unwrap());
    Setup {
        hosted: Arc::new(HostedSpecialists::new([p("sam"), p("sue")], journal)),
        path,
        _dir: dir,
    }
}

/// Waits (yielding, bounded) until `who` has `n` assignments.
async fn assigned(hosted: &HostedSpecialists, who: &str, n: usize) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while hosted.assignments(&p(who)).len() != n {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn t2_only_its_specialist_submits_once_and_the_call_returns_what_was_recorded() {
    let Setup { hosted, path, _dir } = setup();
    let waiting = {
        let hosted = Arc::clone(&hosted);
        tokio::spawn(async move { hosted.execute(&call(1, "sam")).await })
    };
    assigned(&hosted, "sam", 1).await;
    assert!(hosted.assignments(&p("sue")).is_empty());

    let refused = hosted.submit(&p("sue"), op(1), failure(1));
    assert!(
        matches!(refused, Err(SubmitError::NotYours { .. })),
        "{refused:?}"
    );
    let unknown = hosted.submit(&p("sam"), op(9), failure(1));
    assert!(
        matches!(unknown, Err(SubmitError::NotWaiting { .. })),
        "{unknown:?}"
    );
    assert_eq!(lines(&path), 0, "a refused submission records nothing");

    hosted.submit(&p("sam"), op(1), failure(7_000)).unwrap();
    assert_eq!(lines(&path), 1);
    let outcome = waiting.await.unwrap();
    assert_eq!(
        outcome,
        AgentOutcome::Returned {
            result: failure(7_000).result,
            charge: Charge::Actual(UsdMicros::new(7_000)),
        },
        "an actual above the reservation is returned as is (B3, B5 are the domain's)"
    );
    let again = hosted.submit(&p("sam"), op(1), failure(1));
    assert!(
        matches!(again, Err(SubmitError::AlreadySubmitted { .. })),
        "{again:?}"
    );
    assert_eq!(lines(&path), 1, "the second submission changed nothing");
    assert!(hosted.assignments(&p("sam")).is_empty());

    // The same operation called again gets the recorded result, not a new assignment.
    assert_eq!(hosted.execute(&call(1, "sam")).await, outcome);
}

#[tokio::test]
async fn d3_a_dropped_call_leaves_the_assignments_and_takes_no_late_result() {
    let Setup { hosted, path, _dir } = setup();
    let waiting = {
        let hosted = Arc::clone(&hosted);
        tokio::spawn(async move { hosted.execute(&call(2, "sam")).await })
    };
    assigned(&hosted, "sam", 1).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert!(hosted.assignments(&p("sam")).is_empty());
    let late = hosted.submit(&p("sam"), op(2), failure(1));
    assert!(
        matches!(late, Err(SubmitError::NotWaiting { .. })),
        "{late:?}"
    );
    assert_eq!(lines(&path), 0);
}

#[tokio::test]
async fn d2_the_reconciler_confirms_hosted_calls_from_the_journal_only() {
    let Setup { hosted, path, _dir } = setup();
    let waiting = {
        let hosted = Arc::clone(&hosted);
        tokio::spawn(async move { hosted.execute(&call(3, "sam")).await })
    };
    assigned(&hosted, "sam", 1).await;
    hosted.submit(&p("sam"), op(3), failure(1_200)).unwrap();
    waiting.await.unwrap();

    // A new process: the journal reopened from the file.
    let reopened = Arc::new(HostedSpecialists::new(
        [p("sam"), p("sue")],
        Arc::new(Journal::open(&path).unwrap()),
    ));
    let reconciler = reopened.reconciler();
    assert_eq!(
        reconciler.reconcile(&record(3, "sam")).await.unwrap(),
        Some(Reconciliation::Executed {
            charge: Charge::Actual(UsdMicros::new(1_200)),
            result: CallResult::Specialist(failure(1_200).result),
        })
    );
    assert_eq!(
        reconciler.reconcile(&record(4, "sue")).await.unwrap(),
        Some(Reconciliation::NotExecuted),
        "no submission recorded: no result was accepted"
    );
    // Not a hosted principal: not its to answer.
    let other = record(5, "bea");
    assert!(!reconciler.covers(&other));
    assert_eq!(reconciler.reconcile(&other).await.unwrap(), None);
}
