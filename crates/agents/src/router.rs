//! [`Agents`]: the workflow runner's [`Provider`], routing each reserved call by role (and by
//! principal, for specialists and reviewers) to the adapter configured for it, honouring the
//! call's [`Abort`].

use std::collections::BTreeMap;
use std::sync::Arc;

use agentroom_ports::domain::engine::{CallRequest, CallResult, ReviewerResult};
use agentroom_ports::domain::ids::PrincipalId;
use agentroom_ports::{
    AgentCall, AgentOutcome, CallContext, DoesNotFit, Reasoner, Receipt, Reviewer, Specialist,
};
use agentroom_workflows::{Abort, CallOutcome, Provider};
use async_trait::async_trait;

/// The configured agents: one reasoner, specialists and reviewers by principal, and optionally
/// one adapter that serves every specialist (or reviewer) without its own.
///
/// A call whose role, brief and principal do not fit, or that no adapter serves, is
/// [`CallOutcome::Refused`]: nothing was sent, and sending it again cannot help.
#[derive(Default, Clone)]
pub struct Agents {
    reasoner: Option<Arc<dyn Reasoner>>,
    specialists: BTreeMap<PrincipalId, Arc<dyn Specialist>>,
    any_specialist: Option<Arc<dyn Specialist>>,
    reviewers: BTreeMap<PrincipalId, Arc<dyn Reviewer>>,
    any_reviewer: Option<Arc<dyn Reviewer>>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("reasoner", &self.reasoner.is_some())
            .field("specialists", &self.specialists.keys().collect::<Vec<_>>())
            .field("any_specialist", &self.any_specialist.is_some())
            .field("reviewers", &self.reviewers.keys().collect::<Vec<_>>())
            .field("any_reviewer", &self.any_reviewer.is_some())
            .finish()
    }
}

impl Agents {
    /// No agents yet: every call is refused until one is configured.
    pub fn new() -> Self {
        Self::default()
    }

    /// The reasoner.
    pub fn with_reasoner(mut self, reasoner: Arc<dyn Reasoner>) -> Self {
        self.reasoner = Some(reasoner);
        self
    }

    /// The adapter that executes `principal`'s tasks.
    pub fn with_specialist(mut self, principal: PrincipalId, adapter: Arc<dyn Specialist>) -> Self {
        self.specialists.insert(principal, adapter);
        self
    }

    /// The adapter that executes the tasks of every specialist without an adapter of its own.
    pub fn with_any_specialist(mut self, adapter: Arc<dyn Specialist>) -> Self {
        self.any_specialist = Some(adapter);
        self
    }

    /// The adapter that reviews as `principal`.
    pub fn with_reviewer(mut self, principal: PrincipalId, adapter: Arc<dyn Reviewer>) -> Self {
        self.reviewers.insert(principal, adapter);
        self
    }

    /// The adapter that reviews as every reviewer without an adapter of its own.
    pub fn with_any_reviewer(mut self, adapter: Arc<dyn Reviewer>) -> Self {
        self.any_reviewer = Some(adapter);
        self
    }

    /// Runs `call` on its adapter, to the end (no abort).
    pub async fn dispatch(&self, call: &AgentCall) -> AgentOutcome<CallResult> {
        match call {
            AgentCall::Reasoner(call) => match &self.reasoner {
                Some(reasoner) => reasoner.interpret(call).await.map(CallResult::Reasoner),
                None => refused("no reasoner is configured"),
            },
            AgentCall::Specialist(call) => {
                match self
                    .specialists
                    .get(&call.principal)
                    .or(self.any_specialist.as_ref())
                {
                    Some(specialist) => specialist.execute(call).await.map(CallResult::Specialist),
                    None => refused(&format!(
                        "no specialist adapter serves principal `{}`",
                        call.principal
                    )),
                }
            }
            AgentCall::Reviewer(call) => {
                match self
                    .reviewers
                    .get(&call.principal)
                    .or(self.any_reviewer.as_ref())
                {
                    Some(reviewer) => reviewer.review(call).await.map(CallResult::Reviewer),
                    None => refused(&format!(
                        "no reviewer adapter serves principal `{}`",
                        call.principal
                    )),
                }
            }
        }
    }
}

impl Agents {
    /// The context budget of the adapter that runs `call` (as [`Agents::dispatch`] picks it).
    fn context_budget(&self, call: &AgentCall) -> Option<usize> {
        match call {
            AgentCall::Reasoner(call) => self.reasoner.as_ref()?.context_budget(call),
            AgentCall::Specialist(call) => self
                .specialists
                .get(&call.principal)
                .or(self.any_specialist.as_ref())?
                .context_budget(call),
            AgentCall::Reviewer(call) => self
                .reviewers
                .get(&call.principal)
                .or(self.any_reviewer.as_ref())?
                .context_budget(call),
        }
    }

    /// `call` seeing `context`, fitted to its adapter's budget (C1): the items left out, by
    /// digest; or why its required content cannot fit (nothing is sent).
    pub fn fitted(
        &self,
        call: AgentCall,
        context: &CallContext,
    ) -> Result<(AgentCall, Vec<String>), DoesNotFit> {
        let fitted = match self.context_budget(&call) {
            Some(budget) => context.clone().fit(budget)?,
            None => context.clone(),
        };
        let omitted = fitted.omitted.iter().map(ToString::to_string).collect();
        Ok((call.with_context(fitted), omitted))
    }

    /// The model of the adapter that runs `call` (as [`Agents::dispatch`] picks it), if it
    /// names one.
    pub fn model_of(&self, call: &AgentCall) -> Option<String> {
        match call {
            AgentCall::Reasoner(_) => self.reasoner.as_ref()?.model_name(),
            AgentCall::Specialist(call) => self
                .specialists
                .get(&call.principal)
                .or(self.any_specialist.as_ref())?
                .model_name(),
            AgentCall::Reviewer(call) => self
                .reviewers
                .get(&call.principal)
                .or(self.any_reviewer.as_ref())?
                .model_name(),
        }
    }
}

fn refused<T>(reason: &str) -> AgentOutcome<T> {
    AgentOutcome::Refused {
        reason: reason.to_owned(),
    }
}

/// The runner's view of an agent outcome.
pub fn call_outcome(outcome: AgentOutcome<CallResult>) -> CallOutcome {
    match outcome {
        AgentOutcome::Returned { result, charge } => CallOutcome::Returned(Receipt {
            charge,
            result,
            model: None,
            omitted: Vec::new(),
        }),
        AgentOutcome::NotSent {
            retry_after,
            reason,
        } => CallOutcome::NotSent {
            retry_after,
            reason,
        },
        AgentOutcome::Refused { reason } => CallOutcome::Refused { reason },
        AgentOutcome::Uncertain { reason } => CallOutcome::Uncertain { reason },
    }
}

#[async_trait]
impl Provider for Agents {
    /// Cuts the request to its port's view, runs it on its adapter and maps the outcome. An
    /// abort that fired before the call started sends nothing; one that fires while it runs
    /// drops the adapter's future (cancellation) and reports [`CallOutcome::Aborted`], which
    /// the runner treats as uncertain: the request may have been sent.
    #[tracing::instrument(skip_all, fields(op = %request.op, role = request.role.as_str()))]
    async fn call(
        &self,
        request: &CallRequest,
        context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
        if let Some(reason) = abort.reason() {
            return CallOutcome::NotSent {
                retry_after: None,
                reason: format!("aborted ({}) before it was sent", reason.as_str()),
            };
        }
        let call = match AgentCall::from_request(request) {
            Ok(call) => call,
            Err(err) => {
                tracing::error!(%err, "a call the agents cannot take");
                return CallOutcome::Refused {
                    reason: err.to_string(),
                };
            }
        };
        let (call, omitted) = match self.fitted(call, context) {
            Ok(fitted) => fitted,
            Err(err) => {
                tracing::warn!(%err, "the call's content does not fit its bound: not sent");
                return CallOutcome::Refused {
                    reason: format!("C1: {err}"),
                };
            }
        };
        if !omitted.is_empty() {
            tracing::info!(?omitted, "C1: content left out to fit the input bound");
        }
        tokio::select! {
            biased;
            reason = abort.aborted() => {
                tracing::info!(reason = reason.as_str(), "aborted while running");
                CallOutcome::Aborted
            }
            outcome = self.dispatch(&call) => {
                let mut outcome = call_outcome(outcome);
                if let CallOutcome::Returned(receipt) = &mut outcome {
                    receipt.model = self.model_of(&call);
                    receipt.omitted = omitted;
                    // A model review is attributed to its reviewer and to the model.
                    if let CallResult::Reviewer(ReviewerResult::Review(review)) =
                        &mut receipt.result
                    {
                        review.model.clone_from(&receipt.model);
                    }
                }
                outcome
            }
        }
    }
}
