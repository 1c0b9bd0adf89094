//! The agent ports: [`Reasoner`], [`Specialist`] and [`Reviewer`]. Each call sees only what
//! the domain decided it may see (its [`CallBrief`], cut to the role) and returns a typed
//! [`AgentOutcome`]: the role's result with its usage, or why nothing or something unknown ran.
//!
//! **Cancellation** is by dropping the call's future, which is how async Rust cancels: the
//! caller (the agents router, on the workflow runner's abort, D3) stops polling a call it no
//! longer wants. An adapter must therefore be cancel-safe: whatever it records durably (a
//! scripted specialist's execution record) is written without an await point between
//! "recorded" and "returned", so a dropped call either ran and is recorded or did not run.
//! This keeps the ports free of the workflow crate's `Abort` type (ports sit below workflows).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use agentroom_domain::engine::{
    CallBrief, CallRequest, Charge, ReasonerResult, ReviewerResult, SpecialistResult, TaskBrief,
    TaskProgress,
};
use agentroom_domain::ids::{CriterionId, ObjectiveId, OperationId, PrincipalId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::{Criterion, ObservedRevisions};
use agentroom_domain::review::ReportRef;
use agentroom_domain::state::CallRole;

use crate::context::CallContext;

/// What the reasoner may see for one interpretation (DESIGN "The engine": the objective,
/// authorized Room context, engine-owned task progress, the revisions it observed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonerCall {
    /// The operation: adapters send it as their idempotency key.
    pub op: OperationId,
    /// Its reservation: the most the call may cost (B6).
    pub reservation: UsdMicros,
    /// The objective, when the event concerns one.
    pub objective: Option<ObjectiveId>,
    /// The revisions it observed; a proposal binds them (O10).
    pub observed: ObservedRevisions,
    /// What to interpret.
    pub text: String,
    /// The objective's title, when there is one.
    pub objective_title: Option<String>,
    /// The frozen criteria (only an owner correction changes them).
    pub criteria: Vec<Criterion>,
    /// Engine-owned progress of the current plan.
    pub progress: Vec<TaskProgress>,
    /// Evidence of unmet criteria to correct (R3).
    pub unmet: Vec<(CriterionId, String)>,
    /// Feedback from refused attempts (O7, O11).
    pub feedback: Vec<String>,
    /// Which attempt of this event's interpretation this is (O11), from 1.
    pub attempt: u32,
    /// The Room content it sees (C1), assembled by the coordinator.
    #[serde(default)]
    pub context: CallContext,
}

/// What a specialist may see for one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecialistCall {
    /// The operation: adapters send it as their idempotency key and record it.
    pub op: OperationId,
    /// Its reservation: the most the call may cost (B6).
    pub reservation: UsdMicros,
    /// The specialist the task is assigned to (from the capability's binding).
    pub principal: PrincipalId,
    /// The objective the task serves.
    pub objective: Option<ObjectiveId>,
    /// The task.
    pub task: TaskBrief,
    /// The Room content it sees (C1), assembled by the coordinator.
    #[serde(default)]
    pub context: CallContext,
}

/// What a model reviewer may see for one review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerCall {
    /// The operation: adapters send it as their idempotency key.
    pub op: OperationId,
    /// Its reservation: the most the call may cost (B6).
    pub reservation: UsdMicros,
    /// The reviewer the domain chose (R1: no author of the objective's work).
    pub principal: PrincipalId,
    /// The objective.
    pub objective: Option<ObjectiveId>,
    /// The revisions it observed; the review binds them (R6).
    pub observed: ObservedRevisions,
    /// The exact report to review (R2).
    pub report: ReportRef,
    /// Every criterion, each to get exactly one verdict (R2).
    pub criteria: Vec<Criterion>,
    /// The Room content it sees (C1), assembled by the coordinator.
    #[serde(default)]
    pub context: CallContext,
}

/// A [`CallRequest`] cut to the view of the port it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCall {
    /// For the reasoner.
    Reasoner(ReasonerCall),
    /// For a specialist.
    Specialist(SpecialistCall),
    /// For a model reviewer.
    Reviewer(ReviewerCall),
}

/// A request whose role, brief and principal do not fit together: a bug upstream, never sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BriefError {
    /// The brief is not the one the role takes.
    #[error("operation {op} is a {role} call but carries a {brief} brief")]
    WrongBrief {
        /// The operation.
        op: OperationId,
        /// Its role.
        role: &'static str,
        /// The brief it carries.
        brief: &'static str,
    },
    /// A specialist or reviewer call names nobody to send it to.
    #[error("operation {op} is a {role} call without a principal")]
    NoPrincipal {
        /// The operation.
        op: OperationId,
        /// Its role.
        role: &'static str,
    },
}

fn brief_name(brief: &CallBrief) -> &'static str {
    match brief {
        CallBrief::Interpret { .. } => "interpret",
        CallBrief::Execute(_) => "execute",
        CallBrief::Review { .. } => "review",
    }
}

impl AgentCall {
    /// The same call seeing `context`.
    #[must_use]
    pub fn with_context(mut self, context: CallContext) -> Self {
        match &mut self {
            AgentCall::Reasoner(call) => call.context = context,
            AgentCall::Specialist(call) => call.context = context,
            AgentCall::Reviewer(call) => call.context = context,
        }
        self
    }

    /// Cuts `request` to its port's view; refuses a request whose parts do not fit.
    pub fn from_request(request: &CallRequest) -> Result<Self, BriefError> {
        let op = request.op;
        let role = request.role.as_str();
        let principal = || {
            request
                .principal
                .clone()
                .ok_or(BriefError::NoPrincipal { op, role })
        };
        match (request.role, &request.brief) {
            (
                CallRole::Reasoner,
                CallBrief::Interpret {
                    text,
                    objective,
                    criteria,
                    progress,
                    unmet,
                    feedback,
                    attempt,
                },
            ) => Ok(AgentCall::Reasoner(ReasonerCall {
                op,
                reservation: request.reservation,
                objective: request.objective,
                observed: request.observed,
                text: text.clone(),
                objective_title: objective.clone(),
                criteria: criteria.clone(),
                progress: progress.clone(),
                unmet: unmet.clone(),
                feedback: feedback.clone(),
                attempt: *attempt,
                context: CallContext::default(),
            })),
            (CallRole::Specialist, CallBrief::Execute(task)) => {
                Ok(AgentCall::Specialist(SpecialistCall {
                    op,
                    reservation: request.reservation,
                    principal: principal()?,
                    objective: request.objective,
                    task: task.clone(),
                    context: CallContext::default(),
                }))
            }
            (CallRole::Reviewer, CallBrief::Review { report, criteria }) => {
                Ok(AgentCall::Reviewer(ReviewerCall {
                    op,
                    reservation: request.reservation,
                    principal: principal()?,
                    objective: request.objective,
                    observed: request.observed,
                    report: report.clone(),
                    criteria: criteria.clone(),
                    context: CallContext::default(),
                }))
            }
            (_, brief) => Err(BriefError::WrongBrief {
                op,
                role,
                brief: brief_name(brief),
            }),
        }
    }
}

/// How one agent call ended, as the adapter knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentOutcome<T> {
    /// It ran and returned `result`, which cost `charge` (B3: [`Charge::NoUsage`] when the
    /// response reported none, so the whole reservation is charged).
    Returned {
        /// The role's typed result (a format error is a result too, O11).
        result: T,
        /// What it cost.
        charge: Charge,
    },
    /// Nothing reached the provider (connection refused, rate limited before it was read): it
    /// may be sent again, after `retry_after` if the provider asked for a delay.
    NotSent {
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
        /// Why.
        reason: String,
    },
    /// The provider refused the request without running it (rejected credentials, a request
    /// above the configured bounds, one it cannot accept): sending it again cannot help.
    Refused {
        /// What was refused and what to fix.
        reason: String,
    },
    /// It was sent and what became of it is unknown (a timeout after sending, a connection
    /// dropped mid-response, a server error): never sent again blindly (D2).
    Uncertain {
        /// Why.
        reason: String,
    },
}

impl<T> AgentOutcome<T> {
    /// The same outcome with its result mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> AgentOutcome<U> {
        match self {
            AgentOutcome::Returned { result, charge } => AgentOutcome::Returned {
                result: f(result),
                charge,
            },
            AgentOutcome::NotSent {
                retry_after,
                reason,
            } => AgentOutcome::NotSent {
                retry_after,
                reason,
            },
            AgentOutcome::Refused { reason } => AgentOutcome::Refused { reason },
            AgentOutcome::Uncertain { reason } => AgentOutcome::Uncertain { reason },
        }
    }
}

/// Interprets events: proposes an answer, a whole plan or a challenge (O6, O7). It proposes;
/// only the engine commits work.
#[async_trait]
pub trait Reasoner: Send + Sync {
    /// Interprets `call`. The proposal must bind `call.observed` (O10).
    async fn interpret(&self, call: &ReasonerCall) -> AgentOutcome<ReasonerResult>;

    /// How many bytes of rendered context (C1) a call like `call` may carry within the role's
    /// input bound, or `None` when the adapter has no bound (scripted, hosted): the caller
    /// fits the context to it before the call is made.
    fn context_budget(&self, call: &ReasonerCall) -> Option<usize> {
        let _ = call;
        None
    }

    /// The model its calls are charged for, recorded on their receipts (cost by model).
    fn model_name(&self) -> Option<String> {
        None
    }
}

/// Executes one task for the specialist it is assigned to (T2: a result is a contribution).
#[async_trait]
pub trait Specialist: Send + Sync {
    /// Executes `call.task` as `call.principal`.
    async fn execute(&self, call: &SpecialistCall) -> AgentOutcome<SpecialistResult>;

    /// How many bytes of rendered context (C1) a call like `call` may carry within the role's
    /// input bound, or `None` when the adapter has no bound (scripted, hosted): the caller
    /// fits the context to it before the call is made.
    fn context_budget(&self, call: &SpecialistCall) -> Option<usize> {
        let _ = call;
        None
    }

    /// The model its calls are charged for, recorded on their receipts (cost by model).
    fn model_name(&self) -> Option<String> {
        None
    }
}

/// Reviews one report version against every criterion (R2).
#[async_trait]
pub trait Reviewer: Send + Sync {
    /// Reviews `call.report` as `call.principal`; the review binds `call.report` and
    /// `call.observed`.
    async fn review(&self, call: &ReviewerCall) -> AgentOutcome<ReviewerResult>;

    /// How many bytes of rendered context (C1) a call like `call` may carry within the role's
    /// input bound, or `None` when the adapter has no bound (scripted, hosted): the caller
    /// fits the context to it before the call is made.
    fn context_budget(&self, call: &ReviewerCall) -> Option<usize> {
        let _ = call;
        None
    }

    /// The model its calls are charged for, recorded on their receipts (cost by model).
    fn model_name(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentroom_domain::ids::{TaskIdentity, TaskKey};
    use agentroom_domain::plan::TaskKind;
    use serde_json::Map;

    fn request(role: CallRole, principal: Option<&str>, brief: CallBrief) -> CallRequest {
        CallRequest {
            op: op(),
            role,
            principal: principal.map(|p| PrincipalId::parse(p).unwrap()),
            objective: None,
            observed: ObservedRevisions {
                objective: 2,
                control: 1,
            },
            reservation: UsdMicros::new(1_000),
            brief,
        }
    }

    fn op() -> OperationId {
        "00000000-0000-0000-0000-000000000007".parse().unwrap()
    }

    fn execute() -> CallBrief {
        CallBrief::Execute(TaskBrief {
            identity: TaskIdentity::from_wire("p/gather"),
            key: TaskKey::parse("gather").unwrap(),
            title: "gather".into(),
            capability: "research".into(),
            inputs: Map::new(),
            kind: TaskKind::Production,
            dep_contributions: vec![],
        })
    }

    #[test]
    fn a_request_is_cut_to_its_ports_view() {
        let interpret = CallBrief::Interpret {
            text: "summarize".into(),
            objective: None,
            criteria: vec![],
            progress: vec![],
            unmet: vec![],
            feedback: vec!["no report task".into()],
            attempt: 2,
        };
        let AgentCall::Reasoner(call) =
            AgentCall::from_request(&request(CallRole::Reasoner, None, interpret)).unwrap()
        else {
            panic!("not a reasoner call");
        };
        assert_eq!(call.observed.objective, 2);
        assert_eq!(call.attempt, 2);
        assert_eq!(call.feedback, vec!["no report task".to_owned()]);

        let AgentCall::Specialist(call) =
            AgentCall::from_request(&request(CallRole::Specialist, Some("sam"), execute()))
                .unwrap()
        else {
            panic!("not a specialist call");
        };
        assert_eq!(call.principal.as_str(), "sam");
        assert_eq!(call.task.key.as_str(), "gather");
    }

    #[test]
    fn a_request_whose_parts_do_not_fit_is_refused() {
        assert_eq!(
            AgentCall::from_request(&request(CallRole::Reasoner, None, execute())),
            Err(BriefError::WrongBrief {
                op: op(),
                role: "reasoner",
                brief: "execute",
            })
        );
        assert_eq!(
            AgentCall::from_request(&request(CallRole::Specialist, None, execute())),
            Err(BriefError::NoPrincipal {
                op: op(),
                role: "specialist",
            })
        );
    }
}
