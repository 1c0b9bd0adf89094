//! `Agents` as the workflow runner's `Provider`: routing by role and principal, refusing what
//! no adapter serves, and honouring the call's abort.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentroom_agents::Agents;
use agentroom_ports::CallContext;
use agentroom_ports::domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, ReasonerResult, SpecialistResult, TaskBrief,
};
use agentroom_ports::domain::ids::{OperationId, PrincipalId, TaskIdentity, TaskKey};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::plan::TaskKind;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{AgentOutcome, Reasoner, ReasonerCall, Receipt, Specialist, SpecialistCall};
use agentroom_workflows::{Abort, AbortReason, CallOutcome, Provider};
use async_trait::async_trait;

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn op(n: u128) -> OperationId {
    format!("00000000-0000-0000-0000-{n:012x}").parse().unwrap()
}

/// A reasoner that never answers: only an abort ends its call.
struct Silent;

#[async_trait]
impl Reasoner for Silent {
    async fn interpret(&self, _: &ReasonerCall) -> AgentOutcome<ReasonerResult> {
        std::future::pending().await
    }
}

/// A specialist that says who it is.
struct Named(&'static str);

#[async_trait]
impl Specialist for Named {
    async fn execute(&self, call: &SpecialistCall) -> AgentOutcome<SpecialistResult> {
        AgentOutcome::Returned {
            result: SpecialistResult::Failure {
                reason: format!("{} ran {}", self.0, call.task.key),
            },
            charge: Charge::Actual(UsdMicros::new(7)),
        }
    }
}

fn interpret() -> CallRequest {
    CallRequest {
        op: op(1),
        role: CallRole::Reasoner,
        principal: None,
        objective: None,
        observed: Default::default(),
        reservation: UsdMicros::new(1_000),
        brief: CallBrief::Interpret {
            text: "hello".into(),
            objective: None,
            criteria: vec![],
            progress: vec![],
            unmet: vec![],
            feedback: vec![],
            attempt: 1,
        },
    }
}

fn execute(principal: &str) -> CallRequest {
    CallRequest {
        op: op(2),
        role: CallRole::Specialist,
        principal: Some(p(principal)),
        objective: None,
        observed: Default::default(),
        reservation: UsdMicros::new(1_000),
        brief: CallBrief::Execute(TaskBrief {
            identity: TaskIdentity::from_wire("p/gather"),
            key: TaskKey::parse("gather").unwrap(),
            title: "gather".into(),
            capability: "research".into(),
            inputs: serde_json::Map::new(),
            kind: TaskKind::Production,
            dep_contributions: vec![],
        }),
    }
}

fn failure_reason(outcome: CallOutcome) -> String {
    match outcome {
        CallOutcome::Returned(Receipt {
            result: CallResult::Specialist(SpecialistResult::Failure { reason }),
            charge,
            ..
        }) => {
            assert_eq!(charge, Charge::Actual(UsdMicros::new(7)));
            reason
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn specialists_are_routed_by_principal_and_the_rest_go_to_the_default() {
    let agents = Agents::new()
        .with_specialist(p("sam"), Arc::new(Named("sam's adapter")))
        .with_any_specialist(Arc::new(Named("the default")));
    assert_eq!(
        failure_reason(
            agents
                .call(&execute("sam"), &CallContext::default(), Abort::never())
                .await
        ),
        "sam's adapter ran gather"
    );
    assert_eq!(
        failure_reason(
            agents
                .call(&execute("sue"), &CallContext::default(), Abort::never())
                .await
        ),
        "the default ran gather"
    );
}

#[tokio::test]
async fn a_call_no_adapter_serves_or_whose_brief_does_not_fit_is_refused() {
    let agents = Agents::new().with_specialist(p("sam"), Arc::new(Named("sam")));
    match agents
        .call(&execute("sue"), &CallContext::default(), Abort::never())
        .await
    {
        CallOutcome::Refused { reason } => {
            assert_eq!(reason, "no specialist adapter serves principal `sue`");
        }
        other => panic!("{other:?}"),
    }
    match agents
        .call(&interpret(), &CallContext::default(), Abort::never())
        .await
    {
        CallOutcome::Refused { reason } => assert_eq!(reason, "no reasoner is configured"),
        other => panic!("{other:?}"),
    }
    let mut mixed = execute("sam");
    mixed.role = CallRole::Reviewer;
    match agents
        .call(&mixed, &CallContext::default(), Abort::never())
        .await
    {
        CallOutcome::Refused { reason } => {
            assert!(
                reason.contains("reviewer call but carries a execute brief"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn d3_an_abort_before_the_call_sends_nothing() {
    let agents = Agents::new().with_reasoner(Arc::new(Silent));
    let (trigger, abort) = Abort::new();
    trigger.abort(AbortReason::Cancelled);
    match agents
        .call(&interpret(), &CallContext::default(), abort)
        .await
    {
        CallOutcome::NotSent { reason, .. } => {
            assert_eq!(reason, "aborted (cancelled) before it was sent");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn d3_an_abort_while_the_call_runs_drops_it_promptly() {
    let agents = Agents::new().with_reasoner(Arc::new(Silent));
    let (trigger, abort) = Abort::new();
    let started = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        trigger.abort(AbortReason::Fenced);
    });
    assert_eq!(
        agents
            .call(&interpret(), &CallContext::default(), abort)
            .await,
        CallOutcome::Aborted
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}
