//! Scripted agents: deterministic replies from a [`Scenario`] file, for the demo and for tests,
//! with a durable [`Journal`] of what they executed so that a [`JournalReconciler`] can confirm
//! an uncertain call (D2).
//!
//! [`Scripted`] is the reasoner, every specialist and every reviewer at once. A call takes the
//! first reply of its role that matches it (a specialist reply matches its task key and, when
//! it names one, the principal; a reviewer reply its report version and principal) and is not
//! used up; the same operation always gets the same reply. With a journal, each execution is
//! appended and synced before the call returns, with no await in between (cancel-safe), and a
//! restarted process resumes the script where the journal says it was.

mod journal;
mod scenario;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_ports::domain::engine::{
    CallResult, Charge, Proposal, ReasonerResult, ReviewerResult, SpecialistResult,
};
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::domain::objective::ObservedRevisions;
use agentroom_ports::domain::review::{
    ContributionDraft, CriterionVerdict, ReviewSubmission, SourceDraft, Verdict,
};
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentOutcome, Reasoner, ReasonerCall, Reviewer, ReviewerCall, Specialist, SpecialistCall,
};
use async_trait::async_trait;

use crate::contribution_id;
use crate::router::Agents;

pub use journal::{Execution, Journal, JournalError, JournalReconciler, Recorded};
pub use scenario::{OwnerMessage, RoomSpec, Scenario, ScenarioError};
use scenario::{ReasonerSays, ReviewerSays, SpecialistSays};

/// Which replies of one role are used up, and which reply each operation got.
#[derive(Debug, Default)]
struct Cursor {
    used: Vec<bool>,
    by_op: BTreeMap<OperationId, usize>,
}

impl Cursor {
    fn new(len: usize) -> Self {
        Self {
            used: vec![false; len],
            by_op: BTreeMap::new(),
        }
    }

    /// The reply for `op`: the one it got before, or the first matching one not used up.
    fn pick(&self, op: OperationId, matching: impl Fn(usize) -> bool) -> Option<usize> {
        if let Some(reply) = self.by_op.get(&op) {
            return Some(*reply);
        }
        (0..self.used.len()).find(|i| !self.used[*i] && matching(*i))
    }

    /// Records that `op` got `reply`; a reply that repeats is never used up.
    fn take(&mut self, op: OperationId, reply: usize, repeats: bool) {
        self.by_op.insert(op, reply);
        if !repeats && let Some(used) = self.used.get_mut(reply) {
            *used = true;
        }
    }
}

#[derive(Debug)]
struct Cursors {
    reasoner: Cursor,
    specialist: Cursor,
    reviewer: Cursor,
}

/// Deterministic agents playing a [`Scenario`].
#[derive(Debug)]
pub struct Scripted {
    scenario: Scenario,
    journal: Option<Arc<Journal>>,
    cursors: Mutex<Cursors>,
}

/// The model scripted calls are charged for and recorded under (`prices.toml` prices it).
pub const SCRIPTED_MODEL: &str = "scripted";

/// The roles a scripted journal covers: all of them, since [`Scripted`] plays every role.
pub const SCRIPTED_ROLES: [CallRole; 3] =
    [CallRole::Reasoner, CallRole::Specialist, CallRole::Reviewer];

impl Scripted {
    /// Agents playing `scenario`, with no durable record.
    pub fn new(scenario: Scenario) -> Self {
        let cursors = Cursors {
            reasoner: Cursor::new(scenario.reasoner.len()),
            specialist: Cursor::new(scenario.specialist.len()),
            reviewer: Cursor::new(scenario.reviewer.len()),
        };
        Self {
            scenario,
            journal: None,
            cursors: Mutex::new(cursors),
        }
    }

    /// Records every execution in `journal` before returning it, and resumes the script where
    /// the journal says it was: replies it records are used up (unless they repeat), and an
    /// operation it records gets its recorded outcome again.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        {
            let mut cursors = self.lock();
            for execution in journal.opened() {
                let (cursor, repeats) = match execution.role {
                    CallRole::Reasoner => (
                        &mut cursors.reasoner,
                        self.scenario
                            .reasoner
                            .get(execution.reply)
                            .map(|r| r.repeat),
                    ),
                    CallRole::Specialist => (
                        &mut cursors.specialist,
                        self.scenario
                            .specialist
                            .get(execution.reply)
                            .map(|r| r.repeat),
                    ),
                    CallRole::Reviewer => (
                        &mut cursors.reviewer,
                        self.scenario
                            .reviewer
                            .get(execution.reply)
                            .map(|r| r.repeat),
                    ),
                };
                cursor.take(execution.op, execution.reply, repeats.unwrap_or(false));
            }
        }
        self.journal = Some(journal);
        self
    }

    /// The scenario it plays.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The reconciler for its journal, if it has one.
    pub fn reconciler(&self) -> Option<JournalReconciler> {
        self.journal.as_ref().map(|j| j.reconciler(&SCRIPTED_ROLES))
    }

    /// [`Agents`] in which it is the reasoner, every specialist and every reviewer.
    pub fn agents(self: &Arc<Self>) -> Agents {
        Agents::new()
            .with_reasoner(Arc::clone(self) as Arc<dyn Reasoner>)
            .with_any_specialist(Arc::clone(self) as Arc<dyn Specialist>)
            .with_any_reviewer(Arc::clone(self) as Arc<dyn Reviewer>)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cursors> {
        self.cursors.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `execution` (when journaled) and takes its reply for its operation. An
    /// operation the journal already holds keeps its first record, which is returned.
    fn commit(
        &self,
        cursor: &mut Cursor,
        execution: Execution,
        repeats: bool,
    ) -> Result<Execution, JournalError> {
        let recorded = match &self.journal {
            Some(journal) => journal.record(execution)?,
            None => execution,
        };
        cursor.take(recorded.op, recorded.reply, repeats);
        Ok(recorded)
    }

    /// The recorded outcome of `op`, when the journal holds one; an error when the journal
    /// cannot be read (then whether it ran is unknown: never run again blindly, D2).
    fn replay(&self, op: OperationId) -> Result<Option<(Charge, CallResult)>, JournalError> {
        let Some(journal) = self.journal.as_ref() else {
            return Ok(None);
        };
        Ok(journal.get(op)?.map(|e| (e.charge, e.result)))
    }
}

/// A journal that cannot be read: whether the call ran is unknown (D2), so it is not run.
fn unreadable<T>(err: &JournalError) -> AgentOutcome<T> {
    tracing::error!(%err, "the scripted journal cannot be read");
    AgentOutcome::Uncertain {
        reason: format!("the scripted agents' journal cannot be read: {err}"),
    }
}

fn exhausted<T>(what: String) -> AgentOutcome<T> {
    AgentOutcome::Refused {
        reason: format!("the scenario has no reply left for {what}"),
    }
}

fn not_recorded<T>(err: &JournalError) -> AgentOutcome<T> {
    // Nothing was recorded, so by this agent's own record nothing ran.
    AgentOutcome::NotSent {
        retry_after: None,
        reason: format!("the execution cannot be recorded: {err}"),
    }
}

/// `observed` with the objective revision `by` older (O10's stale proposal).
fn stale(observed: ObservedRevisions, by: u64) -> ObservedRevisions {
    ObservedRevisions {
        objective: observed.objective.saturating_sub(by),
        control: observed.control,
    }
}

/// The outcome `result` ends in: returned, or typed as `T`.
fn returned<T>(
    charge: Charge,
    result: CallResult,
    unwrap: impl FnOnce(CallResult) -> Option<T>,
) -> AgentOutcome<T> {
    match unwrap(result) {
        Some(result) => AgentOutcome::Returned { result, charge },
        None => AgentOutcome::Refused {
            reason: "the journal holds a result of another role for this operation".to_owned(),
        },
    }
}

fn as_reasoner(result: CallResult) -> Option<ReasonerResult> {
    match result {
        CallResult::Reasoner(r) => Some(r),
        _ => None,
    }
}

fn as_specialist(result: CallResult) -> Option<SpecialistResult> {
    match result {
        CallResult::Specialist(r) => Some(r),
        _ => None,
    }
}

fn as_reviewer(result: CallResult) -> Option<ReviewerResult> {
    match result {
        CallResult::Reviewer(r) => Some(r),
        _ => None,
    }
}

#[async_trait]
impl Reasoner for Scripted {
    fn model_name(&self) -> Option<String> {
        Some(SCRIPTED_MODEL.to_owned())
    }

    #[tracing::instrument(skip_all, fields(op = %call.op))]
    async fn interpret(&self, call: &ReasonerCall) -> AgentOutcome<ReasonerResult> {
        match self.replay(call.op) {
            Ok(None) => {}
            Err(err) => return unreadable(&err),
            Ok(Some((charge, result))) => return returned(charge, result, as_reasoner),
        }
        // One lock from picking the reply to taking it: concurrent calls never share a reply.
        let mut cursors = self.lock();
        let Some(reply) = cursors.reasoner.pick(call.op, |_| true) else {
            return exhausted(format!(
                "reasoner call {} (attempt {})",
                call.op, call.attempt
            ));
        };
        let Some(entry) = self.scenario.reasoner.get(reply) else {
            return exhausted(format!("reasoner call {}", call.op));
        };
        let result = match &entry.says {
            ReasonerSays::Proposal(kind) => ReasonerResult::Proposal(Proposal {
                observed: stale(call.observed, entry.stale_by),
                kind: kind.clone(),
            }),
            ReasonerSays::FormatError(detail) => ReasonerResult::FormatError {
                detail: detail.clone(),
            },
        };
        let execution = Execution {
            op: call.op,
            role: CallRole::Reasoner,
            principal: None,
            task: None,
            reply,
            charge: entry.charge,
            result: CallResult::Reasoner(result),
        };
        match self.commit(&mut cursors.reasoner, execution, entry.repeat) {
            Ok(recorded) => returned(recorded.charge, recorded.result, as_reasoner),
            Err(err) => not_recorded(&err),
        }
    }
}

#[async_trait]
impl Specialist for Scripted {
    fn model_name(&self) -> Option<String> {
        Some(SCRIPTED_MODEL.to_owned())
    }

    #[tracing::instrument(skip_all, fields(op = %call.op, principal = %call.principal, task = %call.task.key))]
    async fn execute(&self, call: &SpecialistCall) -> AgentOutcome<SpecialistResult> {
        let (outcome, slow) = self.execute_now(call);
        if !slow.is_zero() {
            // Ran and recorded; the reply is on its way (dropped here, it is lost: D2).
            tokio::time::sleep(slow).await;
        }
        outcome
    }
}

impl Scripted {
    /// Runs a specialist call at once: its outcome, and how long its reply takes to come back.
    fn execute_now(
        &self,
        call: &SpecialistCall,
    ) -> (AgentOutcome<SpecialistResult>, std::time::Duration) {
        let now = std::time::Duration::ZERO;
        match self.replay(call.op) {
            Ok(None) => {}
            Err(err) => return (unreadable(&err), now),
            Ok(Some((charge, result))) => return (returned(charge, result, as_specialist), now),
        }
        let entries = &self.scenario.specialist;
        let mut cursors = self.lock();
        let Some(reply) = cursors.specialist.pick(call.op, |i| {
            entries.get(i).is_some_and(|e| {
                e.task == call.task.key && e.principal.as_ref().is_none_or(|p| *p == call.principal)
            })
        }) else {
            let what = format!("task `{}` executed by `{}`", call.task.key, call.principal);
            return (exhausted(what), now);
        };
        let Some(entry) = entries.get(reply) else {
            return (exhausted(format!("task `{}`", call.task.key)), now);
        };
        let result = match &entry.says {
            SpecialistSays::Failure(reason) => SpecialistResult::Failure {
                reason: reason.clone(),
            },
            SpecialistSays::Contribution {
                artifacts,
                sources,
                cite_deps,
            } => {
                let mut sources: Vec<SourceDraft> =
                    sources.iter().cloned().map(SourceDraft::from).collect();
                if *cite_deps {
                    sources.extend(
                        call.task
                            .dep_contributions
                            .iter()
                            .map(|id| SourceDraft::Contribution { id: *id }),
                    );
                }
                let draft = ContributionDraft {
                    id: contribution_id(call.op),
                    artifacts: artifacts.clone(),
                    body: None,
                    sources,
                    outputs: serde_json::Map::new(),
                };
                SpecialistResult::Contribution(ContributionDraft {
                    outputs: declared_outputs(call, &draft),
                    ..draft
                })
            }
        };
        let execution = Execution {
            op: call.op,
            role: CallRole::Specialist,
            principal: Some(call.principal.clone()),
            task: Some(call.task.identity.clone()),
            reply,
            charge: entry.charge,
            result: CallResult::Specialist(result),
        };
        let outcome = match self.commit(&mut cursors.specialist, execution, entry.repeat) {
            Ok(_) if entry.lose_reply => AgentOutcome::Uncertain {
                reason: format!(
                    "task `{}` ran and was recorded, but its reply was lost",
                    call.task.key
                ),
            },
            Ok(recorded) => returned(recorded.charge, recorded.result, as_specialist),
            Err(err) => not_recorded(&err),
        };
        (outcome, entry.reply_after)
    }
}

/// The outputs the task's capability declares (as its context shows it, C1), filled from the
/// scripted contribution: a string is its body, an array its lines, a number their count, a
/// boolean `true`, an object empty. A capability the context does not show declares nothing
/// the scripted specialist knows of, so it gives none (and T2 refuses it if some were due).
fn declared_outputs(
    call: &SpecialistCall,
    draft: &ContributionDraft,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let body = draft.body_text().map(|(_, text)| text).unwrap_or_default();
    let lines: Vec<Value> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| Value::String(l.to_owned()))
        .collect();
    let mut outputs = serde_json::Map::new();
    let capability = call
        .context
        .of_kind("capability")
        .find(|c| c.id == call.task.capability);
    let declared = capability
        .and_then(|c| serde_json::from_str::<Value>(&c.text).ok())
        .and_then(|info| info.get("outputs").cloned());
    for output in declared
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(kind)) = (
            output.get("name").and_then(Value::as_str),
            output.get("kind").and_then(Value::as_str),
        ) else {
            continue;
        };
        let value = match kind {
            "string" => Value::String(body.clone()),
            "array" => Value::Array(lines.clone()),
            "number" | "integer" => Value::from(lines.len()),
            "boolean" => Value::Bool(true),
            _ => Value::Object(serde_json::Map::new()),
        };
        outputs.insert(name.to_owned(), value);
    }
    outputs
}

/// A scripted `met` that names no evidence cites what the reviewer was given (R7): the first
/// source in its context and the report's first line, as a reviewer reading it would quote
/// it. Without a report in its context there is nothing to quote, and the `met` stays
/// unproven (so a scripted Room only completes when its reviewer sees the report).
fn cite_from(call: &ReviewerCall, verdict: &CriterionVerdict) -> CriterionVerdict {
    let mut verdict = verdict.clone();
    if verdict.verdict != Verdict::Met || !verdict.sources.is_empty() || verdict.quote.is_some() {
        return verdict;
    }
    let line = call.context.of_kind("report").next().and_then(|report| {
        report
            .text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with('#'))
            .map(str::to_owned)
    });
    let source = call.context.of_kind("source").next().map(|s| s.id.clone());
    if let (Some(line), Some(source)) = (line, source) {
        verdict.sources = vec![source];
        verdict.quote = Some(line);
    }
    verdict
}

#[async_trait]
impl Reviewer for Scripted {
    fn model_name(&self) -> Option<String> {
        Some(SCRIPTED_MODEL.to_owned())
    }

    #[tracing::instrument(skip_all, fields(op = %call.op, principal = %call.principal))]
    async fn review(&self, call: &ReviewerCall) -> AgentOutcome<ReviewerResult> {
        match self.replay(call.op) {
            Ok(None) => {}
            Err(err) => return unreadable(&err),
            Ok(Some((charge, result))) => return returned(charge, result, as_reviewer),
        }
        let entries = &self.scenario.reviewer;
        let mut cursors = self.lock();
        let Some(reply) = cursors.reviewer.pick(call.op, |i| {
            entries.get(i).is_some_and(|e| {
                e.report_version.is_none_or(|v| v == call.report.version)
                    && e.principal.as_ref().is_none_or(|p| *p == call.principal)
            })
        }) else {
            return exhausted(format!(
                "the review of report version {} by `{}`",
                call.report.version, call.principal
            ));
        };
        let Some(entry) = entries.get(reply) else {
            return exhausted(format!("review call {}", call.op));
        };
        let result = match &entry.says {
            ReviewerSays::Verdicts(verdicts) => ReviewerResult::Review(ReviewSubmission {
                model: None,
                report: call.report.clone(),
                observed: call.observed,
                verdicts: verdicts.iter().map(|v| cite_from(call, v)).collect(),
            }),
            ReviewerSays::FormatError(detail) => ReviewerResult::FormatError {
                detail: detail.clone(),
            },
        };
        let execution = Execution {
            op: call.op,
            role: CallRole::Reviewer,
            principal: Some(call.principal.clone()),
            task: Some(call.report.task.clone()),
            reply,
            charge: entry.charge,
            result: CallResult::Reviewer(result),
        };
        match self.commit(&mut cursors.reviewer, execution, entry.repeat) {
            Ok(recorded) => returned(recorded.charge, recorded.result, as_reviewer),
            Err(err) => not_recorded(&err),
        }
    }
}
