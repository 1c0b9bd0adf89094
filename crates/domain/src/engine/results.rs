//! Specialist outcomes and late results: T2 (a result needs a persisted contribution and the
//! specialist's current membership), D4 (a result after a control change is charged and held
//! for readmission), O5 (results of superseded tasks stay evidence only), and the planning
//! updates agents may make to their own tasks.

use super::{Audience, Ctx, InputError, LateDecision, SpecialistResult};
use crate::ids::{ContributionId, ObjectiveId, OperationId, PrincipalId, TaskIdentity};
use crate::objective::ObjectiveStatus;
use crate::plan::{Column, PlanTrigger, TaskKind, TaskState};
use crate::review::{Contribution, ContributionDraft, Source};
use crate::room::{Permission, Role};
use crate::rules::Rule;
use crate::state::{HeldResult, Operation, Purpose};

impl Ctx<'_, '_> {
    /// A specialist returned.
    pub(super) fn specialist_returned(&mut self, operation: &Operation, result: SpecialistResult) {
        self.specialist_result(operation, result, false);
    }

    /// A specialist returned, and its settlement was refused (B3, B5): a contribution the
    /// Room can keep is recorded and held for readmission (D4), never used as it is.
    pub(super) fn specialist_returned_held(
        &mut self,
        operation: &Operation,
        result: SpecialistResult,
    ) {
        self.specialist_result(operation, result, true);
    }

    fn specialist_result(&mut self, operation: &Operation, result: SpecialistResult, hold: bool) {
        let (Some(objective), Purpose::Execute { task }) =
            (operation.objective, &operation.purpose)
        else {
            return;
        };
        let Ok(idx) = self.objective_index(objective) else {
            return;
        };
        // T6: its author lost the specialist role while it ran: charged, held, never applied.
        if operation.fenced {
            self.fenced_result(idx, task, operation, result);
            return;
        }
        let author = operation.principal.clone();
        // T2: only a current specialist's result is applied; its usage is charged regardless.
        let Some(author) = author.filter(|a| self.state.members.has(a, Role::Specialist)) else {
            self.reject(
                Some(objective),
                Rule::T2,
                format!(
                    "{}: the author is no longer a specialist of this room: charged, not applied",
                    operation.id
                ),
            );
            self.reopen_task(idx, task, operation.id);
            return;
        };
        let draft = match result {
            SpecialistResult::Failure { reason } => {
                self.task_call_failed(idx, task, operation, reason);
                return;
            }
            SpecialistResult::Contribution(draft) => draft,
        };
        // T2: content the Room can keep, and the outputs the task's capability declared.
        if let Err(why) = self.state.admits_contribution(objective, task, &draft) {
            self.reject(
                Some(objective),
                Rule::T2,
                format!("{}: {why}: charged, not applied", operation.id),
            );
            self.task_call_failed(idx, task, operation, why.to_string());
            return;
        }
        let contribution = self.record_contribution(objective, task, operation.id, author, draft);
        // D4: a result that completes after a control change is charged but held; so is one
        // whose settlement the ledger refused (B5).
        if hold {
            let why = "its settlement was refused (see the overrun)";
            self.hold_result(idx, task, operation.id, contribution, why);
            return;
        }
        if operation.observed.control != self.objective(idx).control_revision {
            let why = "landed after a control change";
            self.hold_result(idx, task, operation.id, contribution, why);
            return;
        }
        // A result for an objective that already ended (a baseline's other session, still
        // running or uncertain when the first declared done) stays evidence (D4).
        let status = self.objective(idx).status;
        if status.is_terminal() {
            self.reject(
                Some(objective),
                Rule::D4,
                format!(
                    "{contribution} landed after the objective was {status}: kept as evidence, completes nothing"
                ),
            );
            return;
        }
        self.complete_if_current(idx, task, operation.id, contribution);
    }

    /// T6: a call fenced by its author's membership change returned. It was charged; a
    /// contribution the Room can keep is recorded and held for an owner's or operator's
    /// decision (D4), anything else leaves its task open again (its assignee no longer being
    /// a specialist, the task waits at the dispatch sink, T3).
    fn fenced_result(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        operation: &Operation,
        result: SpecialistResult,
    ) {
        let objective = self.objective(idx).id;
        let op = operation.id;
        let (Some(author), SpecialistResult::Contribution(draft)) =
            (operation.principal.clone(), result)
        else {
            self.reject(
                Some(objective),
                Rule::T6,
                format!("{op} (fenced) returned no contribution: charged; its task is open again"),
            );
            self.reopen_task(idx, task, op);
            return;
        };
        if let Err(why) = self.state.admits_contribution(objective, task, &draft) {
            self.reject(
                Some(objective),
                Rule::T2,
                format!("{op} (fenced): {why}: charged, not applied"),
            );
            self.reopen_task(idx, task, op);
            return;
        }
        self.reject(
            Some(objective),
            Rule::T6,
            format!("{op}: {author} lost the specialist role while it ran (fenced): its result is not applied as it is"),
        );
        let contribution = self.record_contribution(objective, task, op, author, draft);
        self.hold_result(
            idx,
            task,
            op,
            contribution,
            "was fenced by a membership change (T6)",
        );
    }

    fn record_contribution(
        &mut self,
        objective: ObjectiveId,
        task: &TaskIdentity,
        op: OperationId,
        author: PrincipalId,
        draft: ContributionDraft,
    ) -> ContributionId {
        let id = draft.id;
        self.state.contributions.insert(
            id,
            Contribution::from_draft(draft, objective, task.clone(), op, author),
        );
        if let Ok(idx) = self.objective_index(objective) {
            self.objective_mut(idx).contributions.push(id);
        }
        id
    }

    fn hold_result(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        op: OperationId,
        contribution: ContributionId,
        why: &str,
    ) {
        let id = self.objective(idx).id;
        self.state.held.insert(
            op,
            HeldResult {
                op,
                objective: id,
                task: task.clone(),
                contribution,
            },
        );
        if let Some(t) = self.current_task_mut(idx, task)
            && t.running_op() == Some(op)
        {
            t.state = TaskState::HeldForReadmission { op };
        }
        let message = format!(
            "the result of {op} for {task} {why}: charged, held until an owner or operator readmits or discards it"
        );
        self.accept(Some(id), Some(Rule::D4), message.clone());
        self.notify(Audience::Owners, Some(id), message.clone());
        self.notify(Audience::Operators, Some(id), message);
    }

    /// O5: only a task of the current plan that this very call was running completes.
    fn complete_if_current(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        op: OperationId,
        contribution: ContributionId,
    ) {
        let running = self
            .current_task_mut(idx, task)
            .is_some_and(|t| t.running_op() == Some(op));
        if !running {
            let id = self.objective(idx).id;
            self.reject(
                Some(id),
                Rule::O5,
                format!(
                    "{contribution} is for {task}, which the current plan superseded: kept as evidence, completes nothing"
                ),
            );
            return;
        }
        self.complete_task(idx, task, contribution);
    }

    /// Completes a task of the current plan with a contribution (T2), counts the progress
    /// (O8), and moves on: a report goes to review, other work unblocks its dependents.
    fn complete_task(&mut self, idx: usize, task: &TaskIdentity, contribution: ContributionId) {
        let id = self.objective(idx).id;
        let kind = self.current_task_mut(idx, task).map(|t| t.kind);
        if kind == Some(TaskKind::Report)
            && let Some(unknown) = self.unknown_citation(idx, contribution)
        {
            self.reject(
                Some(id),
                Rule::R2,
                format!("the report cites {unknown}, which is no contribution of this objective"),
            );
            self.task_failed(
                idx,
                task.clone(),
                "the report cites unknown sources".to_owned(),
            );
            return;
        }
        let Some(t) = self.current_task_mut(idx, task) else {
            return;
        };
        t.state = TaskState::Completed { contribution };
        let objective = self.objective_mut(idx);
        objective.counters.replans_without_progress = 0;
        self.accept(
            Some(id),
            Some(Rule::T2),
            format!("{task} completed by contribution {contribution}"),
        );
        if kind == Some(TaskKind::Report) {
            self.report_completed(idx, task, contribution);
        } else {
            self.advance(idx);
        }
    }

    /// The first cited contribution that is not a contribution of objective `idx`.
    fn unknown_citation(&self, idx: usize, report: ContributionId) -> Option<ContributionId> {
        let objective = self.objective(idx);
        let sources = self.state.contributions.get(&report)?.sources.clone();
        sources.into_iter().find_map(|s| match s {
            Source::Contribution { id }
                if !objective.contributions.contains(&id) || id == report =>
            {
                Some(id)
            }
            _ => None,
        })
    }

    /// A task's call failed: when it is still current, mark it failed and ask for repair.
    fn task_call_failed(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        operation: &Operation,
        reason: String,
    ) {
        let running = self
            .current_task_mut(idx, task)
            .is_some_and(|t| t.running_op() == Some(operation.id));
        if !running {
            let id = self.objective(idx).id;
            self.accept(
                Some(id),
                Some(Rule::O5),
                format!("{task} (superseded) failed: {reason}"),
            );
            return;
        }
        if operation.observed.control != self.objective(idx).control_revision {
            // Aborted by a control change: the task is simply open again.
            self.reopen_task(idx, task, operation.id);
            return;
        }
        self.task_failed(idx, task.clone(), reason);
    }

    /// Marks a current task failed and asks the reasoner for a repair plan.
    pub(super) fn task_failed(&mut self, idx: usize, task: TaskIdentity, reason: String) {
        let id = self.objective(idx).id;
        if let Some(t) = self.current_task_mut(idx, &task) {
            t.state = TaskState::Failed {
                reason: reason.clone(),
            };
        }
        if self.baseline_task_failed(idx, &task, &reason) {
            return;
        }
        self.reject(
            Some(id),
            Rule::O7,
            format!("{task} failed: {reason}; asking for a repair plan"),
        );
        if matches!(
            self.objective(idx).status,
            ObjectiveStatus::Running | ObjectiveStatus::Planning | ObjectiveStatus::Paused
        ) {
            let text = format!("task {task} failed: {reason}");
            self.replan(idx, PlanTrigger::Repair { task }, text);
        }
    }

    /// Puts a current task that `op` was running back to pending.
    fn reopen_task(&mut self, idx: usize, task: &TaskIdentity, op: OperationId) {
        if let Some(t) = self.current_task_mut(idx, task)
            && t.running_op() == Some(op)
        {
            t.state = TaskState::Pending;
        }
        self.advance(idx);
    }

    /// D4: an owner or operator readmits or discards a held result.
    pub(super) fn decide_late(
        &mut self,
        by: &PrincipalId,
        op: OperationId,
        decision: LateDecision,
    ) -> Result<(), InputError> {
        let Some(held) = self.state.held.get(&op).cloned() else {
            // A late result of a closed objective whose record left the live state stays
            // evidence there (D4), as it would in the live state.
            let closed = self.env.archive.holding(op);
            let Some((objective, status)) = closed.map(|r| (r.id(), r.status())) else {
                return Err(InputError::NothingHeld(op));
            };
            if self.authorized(by, Permission::LateResultDecide, Some(objective)) {
                self.reject(Some(objective), Rule::D4, stays_evidence(status));
            }
            return Ok(());
        };
        let idx = self.objective_index(held.objective)?;
        if !self.authorized(by, Permission::LateResultDecide, Some(held.objective)) {
            return Ok(());
        }
        if self.objective(idx).status.is_terminal() {
            let status = self.objective(idx).status;
            self.reject(Some(held.objective), Rule::D4, stays_evidence(status));
            return Ok(());
        }
        let is_held_here = self
            .current_task_mut(idx, &held.task)
            .is_some_and(|t| t.state == TaskState::HeldForReadmission { op });
        // T3 at the sink: a held result is applied only while its author is a specialist of
        // the Room (one fenced by its author's revocation stays held until then, T6).
        let author = self
            .state
            .contributions
            .get(&held.contribution)
            .map(|c| c.author.clone());
        if decision == LateDecision::Readmit
            && is_held_here
            && let Some(author) = author.filter(|a| !self.state.members.has(a, Role::Specialist))
        {
            self.reject(
                Some(held.objective),
                Rule::T3,
                format!(
                    "the result of {op} is by {author}, who is no longer a specialist of this room: it stays held (discard it, or readmit it once {author} is a specialist again)"
                ),
            );
            return Ok(());
        }
        self.state.held.remove(&op);
        match decision {
            LateDecision::Readmit if is_held_here => {
                self.accept(
                    Some(held.objective),
                    Some(Rule::D4),
                    format!("{by} readmitted the result of {op}"),
                );
                self.complete_task(idx, &held.task, held.contribution);
            }
            LateDecision::Readmit => {
                self.reject(
                    Some(held.objective),
                    Rule::O5,
                    format!(
                        "{} belongs to a superseded plan: kept as evidence, not readmitted",
                        held.task
                    ),
                );
            }
            LateDecision::Discard => {
                self.accept(
                    Some(held.objective),
                    Some(Rule::D4),
                    format!("{by} discarded the result of {op}; the task stays open"),
                );
                if is_held_here && let Some(t) = self.current_task_mut(idx, &held.task) {
                    t.state = TaskState::Pending;
                }
                self.advance(idx);
            }
        }
        Ok(())
    }

    /// An agent updates its own task through the planning messages. Only the engine moves
    /// work (O7); an agent may acknowledge a running task, and may mark it done only with
    /// the contribution that completed it (T2).
    pub(super) fn update_task(
        &mut self,
        by: &PrincipalId,
        objective: ObjectiveId,
        task: &TaskIdentity,
        status: Column,
        contribution: Option<ContributionId>,
    ) -> Result<(), InputError> {
        // T2 after the objective closed and left the live state: confirming one's own task
        // done, proven by the objective's record, is accepted as it was while it was live;
        // any other move is refused by D3 below.
        if let (Column::Done, Some(c)) = (status, contribution)
            && let Some(record) = self.env.archive.record(objective)
            && self.state.objective(objective).is_none()
            && record.completed_by(task, c, by)
        {
            if self.authorized(by, Permission::TaskUpdateOwn, Some(objective)) {
                self.accept(Some(objective), Some(Rule::T2), confirmed_done(by, task));
            }
            return Ok(());
        }
        let Some(idx) =
            self.live_objective(by, Permission::TaskUpdateOwn, objective, Rule::D3, |s| {
                format!("the objective is {s}: its tasks no longer change")
            })?
        else {
            return Ok(());
        };
        if !self.authorized(by, Permission::TaskUpdateOwn, Some(objective)) {
            return Ok(());
        }
        let Some(current) = self.current_task_mut(idx, task).map(|t| t.clone()) else {
            self.reject(
                Some(objective),
                Rule::O5,
                format!("{task} is not a task of the current plan"),
            );
            return Ok(());
        };
        if &current.assignee != by {
            self.reject(
                Some(objective),
                Rule::T3,
                format!(
                    "{by} may update only its own tasks; {task} is assigned to {}",
                    current.assignee
                ),
            );
            return Ok(());
        }
        match status {
            Column::Done => {
                let proven = contribution.is_some_and(|c| {
                    current.state == TaskState::Completed { contribution: c }
                        && self
                            .state
                            .contributions
                            .get(&c)
                            .is_some_and(|k| &k.author == by)
                });
                if proven {
                    self.accept(Some(objective), Some(Rule::T2), confirmed_done(by, task));
                } else {
                    self.reject(
                        Some(objective),
                        Rule::T2,
                        format!("{task} cannot be marked done without the persisted contribution that completed it"),
                    );
                }
            }
            Column::InProgress if current.running_op().is_some() => {
                self.accept(
                    Some(objective),
                    None,
                    format!("{by} acknowledged {task} in progress"),
                );
            }
            other => {
                self.reject(
                    Some(objective),
                    Rule::O7,
                    format!(
                        "{task} cannot be moved to {} by an agent: only the engine moves work",
                        other.as_str()
                    ),
                );
            }
        }
        Ok(())
    }
}

/// D4: why a late result of a closed objective is neither readmitted nor discarded.
fn stays_evidence(status: ObjectiveStatus) -> String {
    format!("the objective is {status}: the held result stays evidence")
}

/// T2: what confirming a task done logs.
fn confirmed_done(by: &PrincipalId, task: &TaskIdentity) -> String {
    format!("{by} confirmed {task} done")
}
