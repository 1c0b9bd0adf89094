//! Hosted specialists: principals whose work an agent host executes over the REST API.
//!
//! When the coordinator dispatches a hosted specialist's call (its reservation committed
//! first, B1), [`HostedSpecialists`] (a [`Specialist`] adapter) parks the call as an
//! *assignment* and waits: the workflow runner heartbeats its lease meanwhile and drops the
//! wait when a pause or cancel fires its abort (D3). The agent host lists the assignments of
//! its principal and submits the result; the submission is appended to a [`Journal`] and
//! synced to disk *before* it is handed to the waiting call, so a process that dies after the
//! submission leaves durable evidence: the call is uncertain on restart and
//! [`HostedReconciler`] confirms it from the journal instead of asking again (D2). No
//! submission recorded means no result was ever accepted: the reconciler confirms the call
//! did not execute, its reservation is released and the task is open again under a fresh
//! operation (never a silent replay of the old one).
//!
//! An operation takes one submission: a second one, another principal's, or one for a call
//! that is not waiting is refused and changes nothing. Whether the result may be applied
//! (T2, T3), what it costs the Room (B3, B5) and what it completes is the domain's to decide.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_ports::domain::engine::{CallResult, Reconciliation, SpecialistResult};
use agentroom_ports::domain::ids::{OperationId, PrincipalId};
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentOutcome, HostedDesk, OperationRecord, ReconcileError, Reconciler, Specialist,
    SpecialistCall,
};
pub use agentroom_ports::{Submission, SubmitError};
use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::Agents;
use crate::scripted::{Execution, Journal};

/// The crash point (`AGENTROOM_CRASH_AT`) right after a submission is synced to the journal
/// and before it is handed to the waiting call: the process dies with the result durable and
/// the call without a receipt, which recovery must confirm from the journal (D2).
pub const AFTER_SUBMISSION_RECORDED: &str = "after_hosted_submission";

struct Waiting {
    call: SpecialistCall,
    reply: oneshot::Sender<Submission>,
}

/// The hosted specialists of one host: which principals, the calls waiting for them, and
/// the journal of what their agent hosts submitted.
pub struct HostedSpecialists {
    principals: BTreeSet<PrincipalId>,
    journal: Arc<Journal>,
    waiting: Mutex<BTreeMap<OperationId, Waiting>>,
}

impl std::fmt::Debug for HostedSpecialists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedSpecialists")
            .field("principals", &self.principals)
            .field("journal", &self.journal.path())
            .finish_non_exhaustive()
    }
}

impl HostedSpecialists {
    /// `principals` are hosted; their submissions are recorded in `journal`.
    pub fn new(principals: impl IntoIterator<Item = PrincipalId>, journal: Arc<Journal>) -> Self {
        Self {
            principals: principals.into_iter().collect(),
            journal,
            waiting: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether `principal`'s work is executed by an agent host.
    pub fn serves(&self, principal: &PrincipalId) -> bool {
        self.principals.contains(principal)
    }

    /// The hosted principals.
    pub fn principals(&self) -> impl Iterator<Item = &PrincipalId> {
        self.principals.iter()
    }

    /// `agents` with this adapter executing every hosted principal's tasks (it takes
    /// precedence over an adapter serving any specialist).
    pub fn install(self: &Arc<Self>, agents: Agents) -> Agents {
        self.principals.iter().fold(agents, |agents, principal| {
            agents.with_specialist(principal.clone(), Arc::clone(self) as Arc<dyn Specialist>)
        })
    }

    /// The calls waiting for `principal`'s result, by operation id: each with the task, its
    /// inputs and the contributions it may cite (what the domain decided it may see).
    pub fn assignments(&self, principal: &PrincipalId) -> Vec<SpecialistCall> {
        self.lock()
            .values()
            .filter(|waiting| waiting.call.principal == *principal)
            .map(|waiting| waiting.call.clone())
            .collect()
    }

    /// The waiting call `op`, if any.
    pub fn assignment(&self, op: OperationId) -> Option<SpecialistCall> {
        self.lock().get(&op).map(|waiting| waiting.call.clone())
    }

    /// Records `principal`'s `submission` for `op` durably, then hands it to the waiting call.
    /// Refused, with nothing recorded, when the call is another's, has a result already, or
    /// is not waiting here.
    #[tracing::instrument(skip(self, submission), fields(%op, %principal))]
    pub fn submit(
        &self,
        principal: &PrincipalId,
        op: OperationId,
        submission: Submission,
    ) -> Result<(), SubmitError> {
        let mut waiting = self.lock();
        let recorded = self
            .journal
            .get(op)
            .map_err(|e| SubmitError::Unrecorded(Box::new(e)))?;
        if let Some(recorded) = recorded {
            if recorded.principal.as_ref() != Some(principal) {
                return Err(SubmitError::NotYours {
                    op,
                    principal: principal.clone(),
                });
            }
            return Err(SubmitError::AlreadySubmitted { op });
        }
        let Some(call) = waiting.get(&op).map(|w| &w.call) else {
            return Err(SubmitError::NotWaiting { op });
        };
        if call.principal != *principal {
            return Err(SubmitError::NotYours {
                op,
                principal: principal.clone(),
            });
        }
        // Durable before it is used (D2): the lock is held, so the call cannot stop waiting
        // between the record and the hand-over without the journal knowing.
        self.journal
            .record(Execution {
                op,
                role: CallRole::Specialist,
                principal: Some(principal.clone()),
                task: Some(call.task.identity.clone()),
                // Hosted results answer no scenario reply; the field is the scripted agents'.
                reply: 0,
                charge: submission.charge,
                result: CallResult::Specialist(submission.result.clone()),
            })
            .map_err(|e| SubmitError::Unrecorded(Box::new(e)))?;
        agentroom_workflows::crash::crash_point(AFTER_SUBMISSION_RECORDED);
        if let Some(waiting) = waiting.remove(&op)
            && waiting.reply.send(submission).is_err()
        {
            // The call stopped waiting (its abort fired) after the check: the journal has
            // the result and recovery confirms the call from it.
            tracing::info!("the call stopped waiting; recovery confirms it from the journal");
        }
        tracing::info!("submission recorded and handed to the call");
        Ok(())
    }

    /// The reconciler that confirms hosted calls from the journal (D2).
    pub fn reconciler(self: &Arc<Self>) -> HostedReconciler {
        HostedReconciler {
            hosted: Arc::clone(self),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<OperationId, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Takes the call off the assignments when its wait ends, however it ends (a dropped
/// future is how an abort cancels it).
struct Parked<'a> {
    hosted: &'a HostedSpecialists,
    op: OperationId,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.hosted.lock().remove(&self.op);
    }
}

#[async_trait]
impl Specialist for HostedSpecialists {
    /// Waits for the agent host's submission. A call whose submission is recorded already
    /// (the same operation called again by its runner) gets the recorded result, not a new
    /// assignment.
    #[tracing::instrument(skip_all, fields(op = %call.op, principal = %call.principal, task = %call.task.key))]
    async fn execute(&self, call: &SpecialistCall) -> AgentOutcome<SpecialistResult> {
        if !self.serves(&call.principal) {
            return AgentOutcome::Refused {
                reason: format!("`{}` is not a hosted specialist", call.principal),
            };
        }
        let (reply, submitted) = oneshot::channel();
        {
            let mut waiting = self.lock();
            match self.journal.get(call.op) {
                Ok(Some(recorded)) => return recorded_outcome(recorded),
                Ok(None) => {}
                // Whether a result was recorded is unknown: never ask for it again (D2).
                Err(err) => {
                    return AgentOutcome::Uncertain {
                        reason: format!("the hosted journal cannot be read: {err}"),
                    };
                }
            }
            waiting.insert(
                call.op,
                Waiting {
                    call: call.clone(),
                    reply,
                },
            );
        }
        let _parked = Parked {
            hosted: self,
            op: call.op,
        };
        tracing::info!("waiting for the agent host's submission");
        match submitted.await {
            Ok(submission) => AgentOutcome::Returned {
                result: submission.result,
                charge: submission.charge,
            },
            // The sender is dropped only with the entry, which only this call removes while it
            // waits; if it ever happens, the journal decides at recovery.
            Err(_) => AgentOutcome::Uncertain {
                reason: "the assignment was dropped without a submission".to_owned(),
            },
        }
    }
}

fn recorded_outcome(recorded: Execution) -> AgentOutcome<SpecialistResult> {
    match recorded.result {
        CallResult::Specialist(result) => AgentOutcome::Returned {
            result,
            charge: recorded.charge,
        },
        _ => AgentOutcome::Refused {
            reason: "the hosted journal holds a result of another role for this operation"
                .to_owned(),
        },
    }
}

/// Confirms uncertain calls of hosted specialists from the journal (D2): a recorded
/// submission → executed, with its charge and result; none → never executed (no result was
/// accepted), its reservation released. Other calls it does not cover.
#[derive(Debug, Clone)]
pub struct HostedReconciler {
    hosted: Arc<HostedSpecialists>,
}

impl HostedReconciler {
    /// Whether it answers for `operation`: a specialist call of a hosted principal.
    pub fn covers(&self, operation: &OperationRecord) -> bool {
        operation.request.role == CallRole::Specialist
            && operation
                .request
                .principal
                .as_ref()
                .is_some_and(|p| self.hosted.serves(p))
    }
}

#[async_trait]
impl Reconciler for HostedReconciler {
    #[tracing::instrument(skip_all, fields(op = %operation.op()))]
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        if !self.covers(operation) {
            return Ok(None);
        }
        let op = operation.op();
        // A call still waiting in this process is not settled by recovery.
        if self.hosted.lock().contains_key(&op) {
            return Ok(None);
        }
        let recorded = self
            .hosted
            .journal
            .get(op)
            .map_err(|e| ReconcileError(e.to_string()))?;
        Ok(Some(match recorded {
            Some(execution) => Reconciliation::Executed {
                charge: execution.charge,
                result: execution.result,
            },
            None => Reconciliation::NotExecuted,
        }))
    }
}

impl HostedDesk for HostedSpecialists {
    fn serves(&self, principal: &PrincipalId) -> bool {
        HostedSpecialists::serves(self, principal)
    }

    fn assignments(&self, principal: &PrincipalId) -> Vec<SpecialistCall> {
        HostedSpecialists::assignments(self, principal)
    }

    fn submit(
        &self,
        principal: &PrincipalId,
        op: OperationId,
        submission: Submission,
    ) -> Result<(), SubmitError> {
        HostedSpecialists::submit(self, principal, op, submission)
    }
}
