//! Reasoner outcomes and whole-plan admission: O2 (one current plan, append-only history),
//! O3 (reuse of completed unchanged tasks), O4 (identity scope), O6 (answers need no plan),
//! O7 (plans admitted whole or refused with bounded repair feedback), O8 (replans without
//! progress), O10 (stale proposals), O11 (bounded interpretations), T4 (no external writes).

use std::collections::{BTreeMap, BTreeSet};

use super::calls::Target;
use super::{
    Audience, CallBrief, Ctx, Effect, PlanProposal, ProposalKind, ReasonerResult, Refused, refused,
};
use crate::catalog::{CapabilityEffect, ResolveRequest};
use crate::ids::{ObjectiveId, PlanVersionId, TaskIdentity, TaskKey};
use crate::objective::{
    Counters, CriteriaError, Criterion, Interpretation, Objective, ObjectiveStatus,
    ObservedRevisions,
};
use crate::plan::{PlanTrigger, PlanVersion, Task, TaskKind, TaskSpec, TaskState};
use crate::review::Verdict;
use crate::room::Role;
use crate::rules::Rule;
use crate::state::{CallRole, Operation, OperationState, Purpose};

impl Ctx<'_, '_> {
    /// Starts interpreting a trigger with a fresh budget of attempts (O11); the call of an
    /// interpretation it supersedes is asked to abort.
    pub(super) fn start_interpretation(
        &mut self,
        target: Target,
        trigger: PlanTrigger,
        text: String,
    ) {
        let fresh = Interpretation::new(trigger, text);
        match target {
            Target::Intake(event) => {
                self.state.intake.insert(event, fresh);
            }
            Target::Objective(idx) => {
                let superseded = self.objective_mut(idx).interpretation.replace(fresh);
                if let Some(op) = superseded.and_then(|i| i.op) {
                    self.cancel_call(op);
                }
            }
        }
        self.issue_interpretation(target);
    }

    /// Asks for a new plan of objective `idx`: now, or once it resumes if it is paused (an
    /// owner's pause keeps its boundary).
    pub(super) fn replan(&mut self, idx: usize, trigger: PlanTrigger, text: String) {
        if self.objective(idx).status == ObjectiveStatus::Paused {
            self.objective_mut(idx).resume_to = Some(ObjectiveStatus::Planning);
        } else {
            self.set_status(idx, ObjectiveStatus::Planning);
        }
        self.start_interpretation(Target::Objective(idx), trigger, text);
    }

    pub(super) fn interpretation_mut(&mut self, target: Target) -> Option<&mut Interpretation> {
        match target {
            Target::Intake(event) => self.state.intake.get_mut(&event),
            Target::Objective(idx) => self.objective_mut(idx).interpretation.as_mut(),
        }
    }

    /// Reserves the next interpretation attempt and calls the reasoner with what it may see.
    pub(super) fn issue_interpretation(&mut self, target: Target) {
        if self.open_sessions(target) {
            return;
        }
        let (objective_id, observed, title, criteria, progress, unmet) = match target {
            Target::Intake(_) => (
                None,
                ObservedRevisions::default(),
                None,
                Vec::new(),
                Vec::new(),
                Vec::new(),
            ),
            Target::Objective(idx) => {
                let o = self.objective(idx);
                let unmet = match o.interpretation.as_ref().map(|i| &i.trigger) {
                    Some(PlanTrigger::UnmetReview { review }) => o
                        .reviews
                        .iter()
                        .find(|r| r.id == *review)
                        .map(|r| {
                            r.verdicts
                                .iter()
                                .filter(|v| v.verdict == Verdict::Unmet)
                                .map(|v| (v.criterion.clone(), v.evidence.clone()))
                                .collect()
                        })
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                (
                    Some(o.id),
                    o.observed(),
                    Some(o.title.clone()),
                    o.criteria.clone(),
                    self.progress(idx),
                    unmet,
                )
            }
        };
        if let Target::Objective(idx) = target
            && self.objective(idx).status == ObjectiveStatus::Paused
        {
            return;
        }
        let Some(interpretation) = self.interpretation_mut(target) else {
            return;
        };
        if interpretation.op.is_some() {
            return;
        }
        let brief = CallBrief::Interpret {
            text: interpretation.text.clone(),
            objective: title,
            criteria,
            progress,
            unmet,
            feedback: interpretation.feedback.clone(),
            attempt: interpretation.attempts + 1,
        };
        let intake = match target {
            Target::Intake(event) => Some(event),
            Target::Objective(_) => None,
        };
        let op = self.reserve_call(
            CallRole::Reasoner,
            None,
            objective_id,
            observed,
            Purpose::Interpret { intake },
            brief,
        );
        if let (Some(op), Some(interpretation)) = (op, self.interpretation_mut(target)) {
            interpretation.op = Some(op);
            interpretation.attempts += 1;
            if intake.is_some() {
                interpretation.calls.push(op);
            }
        }
    }

    /// Where the interpretation that `operation` serves lives, if it is still current.
    pub(super) fn interpretation_target(&self, operation: &Operation) -> Option<Target> {
        let target = match (&operation.purpose, operation.objective) {
            (
                Purpose::Interpret {
                    intake: Some(event),
                },
                _,
            ) => Target::Intake(*event),
            (Purpose::Interpret { intake: None }, Some(id)) => {
                Target::Objective(self.objective_index(id).ok()?)
            }
            _ => return None,
        };
        let current = match target {
            Target::Intake(event) => self.state.intake.get(&event),
            Target::Objective(idx) => self.objective(idx).interpretation.as_ref(),
        };
        (current?.op == Some(operation.id)).then_some(target)
    }

    /// The reasoner returned (O6, O7, O10, O11).
    pub(super) fn reasoner_returned(&mut self, operation: &Operation, result: ReasonerResult) {
        let Some(target) = self.interpretation_target(operation) else {
            self.reject(
                operation.objective,
                Rule::O10,
                format!(
                    "{} answered an interpretation that was superseded: charged, not used",
                    operation.id
                ),
            );
            return;
        };
        let proposal = match result {
            ReasonerResult::FormatError { detail } => {
                self.interpretation_failed(target, Rule::O11, format!("format error: {detail}"));
                return;
            }
            ReasonerResult::Proposal(proposal) => proposal,
        };
        // O10: the proposal binds the revisions it observed; a stale one is refused.
        let current = match target {
            Target::Intake(_) => ObservedRevisions::default(),
            Target::Objective(idx) => self.objective(idx).observed(),
        };
        if operation.observed != current {
            // Fenced by a change the reasoner did not cause: the attempt is given back.
            self.reject(
                operation.objective,
                Rule::O10,
                format!(
                    "proposal observed revision {}/{} but the objective is at {}/{}: stale",
                    operation.observed.objective,
                    operation.observed.control,
                    current.objective,
                    current.control
                ),
            );
            self.interpretation_aborted(operation);
            return;
        }
        if proposal.observed != current {
            self.interpretation_failed(
                target,
                Rule::O10,
                format!(
                    "proposal claims revision {}/{} but was shown {}/{}",
                    proposal.observed.objective,
                    proposal.observed.control,
                    current.objective,
                    current.control
                ),
            );
            return;
        }
        match (proposal.kind, target) {
            (ProposalKind::Answer { text }, Target::Intake(event)) => {
                self.state.intake.remove(&event);
                self.accept(
                    None,
                    Some(Rule::O6),
                    format!("answered {event} without a plan"),
                );
                self.notify(Audience::Owners, None, text);
            }
            (ProposalKind::Answer { text }, Target::Objective(idx)) => {
                let receipt = matches!(
                    self.objective(idx)
                        .interpretation
                        .as_ref()
                        .map(|i| &i.trigger),
                    Some(PlanTrigger::InternalReceipt { .. })
                );
                if receipt {
                    let id = self.objective(idx).id;
                    self.objective_mut(idx).interpretation = None;
                    self.accept(
                        Some(id),
                        Some(Rule::O6),
                        "the reasoner answered; the plan stands".to_owned(),
                    );
                    self.notify(Audience::Owners, Some(id), text);
                } else {
                    self.interpretation_failed(
                        target,
                        Rule::O7,
                        "a new plan is required, not an answer".to_owned(),
                    );
                }
            }
            (ProposalKind::Challenge { question }, Target::Intake(event)) => {
                self.state.intake.remove(&event);
                self.accept(
                    None,
                    Some(Rule::O7),
                    format!("the reasoner challenged {event}"),
                );
                self.notify(Audience::Owners, None, question);
            }
            (ProposalKind::Challenge { question }, Target::Objective(idx)) => {
                let id = self.objective(idx).id;
                self.objective_mut(idx).interpretation = None;
                self.set_status(idx, ObjectiveStatus::WaitingForOwner);
                self.accept(
                    Some(id),
                    Some(Rule::O7),
                    "the reasoner challenged; waiting for the owner".to_owned(),
                );
                self.notify(Audience::Owners, Some(id), question);
            }
            (ProposalKind::Plan(plan), target) => {
                if let Err(r) = self.admit(target, plan, current) {
                    self.interpretation_failed(target, r.rule, r.message);
                }
            }
        }
    }

    /// The interpretation's call was fenced or aborted, not answered: the attempt is given
    /// back and the objective moves on when its status allows.
    pub(super) fn interpretation_aborted(&mut self, operation: &Operation) {
        let Some(target) = self.interpretation_target(operation) else {
            return;
        };
        if let Some(i) = self.interpretation_mut(target) {
            i.op = None;
            i.attempts = i.attempts.saturating_sub(1);
        }
        match target {
            Target::Objective(idx) => self.advance(idx),
            Target::Intake(_) => self.issue_interpretation(target),
        }
    }

    /// The interpretation that `operation` serves failed.
    pub(super) fn interpretation_failed_for(
        &mut self,
        operation: &Operation,
        rule: Rule,
        message: String,
    ) {
        if let Some(target) = self.interpretation_target(operation) {
            self.interpretation_failed(target, rule, message);
        }
    }

    /// O11: a refused interpretation consumes one attempt; another is reserved with the
    /// feedback while the bound allows, and the third failure waits for the owner.
    fn interpretation_failed(&mut self, target: Target, rule: Rule, message: String) {
        let objective = match target {
            Target::Objective(idx) => Some(self.objective(idx).id),
            Target::Intake(_) => None,
        };
        self.reject(objective, rule, message.clone());
        let bound = self.state.policy.bounds().interpretations_per_event();
        let Some(i) = self.interpretation_mut(target) else {
            return;
        };
        i.op = None;
        i.feedback.push(message);
        let attempts = i.attempts;
        if attempts < bound {
            self.issue_interpretation(target);
            return;
        }
        let text = format!("{attempts} interpretations failed; waiting for the owner");
        self.reject(objective, Rule::O11, text.clone());
        match target {
            Target::Intake(event) => {
                self.state.intake.remove(&event);
            }
            Target::Objective(idx) => {
                self.objective_mut(idx).interpretation = None;
                self.set_status(idx, ObjectiveStatus::WaitingForOwner);
            }
        }
        self.notify(Audience::Owners, objective, text);
    }

    /// O7: admits a whole plan or refuses it. Creates the objective for a first plan.
    pub(super) fn admit(
        &mut self,
        target: Target,
        plan: PlanProposal,
        observed: ObservedRevisions,
    ) -> Result<(), Refused> {
        let plan = self.routed(plan);
        let (idx, trigger) = match target {
            Target::Intake(event) => {
                let criteria = check_first_criteria(&plan.criteria)?;
                let id = ObjectiveId::from_uuid(self.env.ids.next_uuid());
                let text = self
                    .state
                    .intake
                    .get(&event)
                    .map(|i| i.text.clone())
                    .unwrap_or_default();
                let owner = self.state.members.holders(Role::Owner).next().cloned();
                let Some(owner) = owner else {
                    return Err(refused(Rule::O9, "the room has no owner"));
                };
                let draft = Objective {
                    id,
                    title: text,
                    owner,
                    origin: event,
                    revision: 0,
                    control_revision: 0,
                    status: ObjectiveStatus::Running,
                    resume_to: None,
                    criteria,
                    plans: Vec::new(),
                    counters: Counters::default(),
                    interpretation: None,
                    corrections: Vec::new(),
                    receipts: Vec::new(),
                    contributions: Vec::new(),
                    reports: Vec::new(),
                    reviews: Vec::new(),
                    awaiting_review: None,
                    intake_calls: Vec::new(),
                };
                // Map against the draft; only an admitted plan creates the objective.
                let (plan_id, tasks) = self.map_tasks(&draft, None, &plan)?;
                let mut draft = draft;
                draft.intake_calls = self
                    .state
                    .intake
                    .remove(&event)
                    .map(|i| i.calls)
                    .unwrap_or_default();
                self.state.objectives.push(draft);
                let idx = self.state.objectives.len() - 1;
                self.accept(
                    Some(id),
                    Some(Rule::O1),
                    format!("objective created from {event}; it shares the room budget"),
                );
                let trigger = PlanTrigger::OwnerMessage { event };
                self.install_plan(idx, trigger, observed, plan.explanation, plan_id, tasks);
                return Ok(());
            }
            Target::Objective(idx) => {
                let trigger = self
                    .objective(idx)
                    .interpretation
                    .as_ref()
                    .map(|i| i.trigger.clone())
                    .ok_or_else(|| refused(Rule::O10, "no interpretation is current"))?;
                (idx, trigger)
            }
        };
        let objective = self.objective(idx).clone();
        self.check_frozen_criteria(&objective, &plan, &trigger)?;
        let (plan_id, tasks) = self.map_tasks(&objective, objective.current_plan(), &plan)?;
        if let PlanTrigger::UnmetReview { .. } = trigger {
            // R3: a corrective plan must add production work.
            if !tasks
                .iter()
                .any(|t| t.kind == TaskKind::Production && !t.reused)
            {
                return Err(refused(
                    Rule::R3,
                    "a corrective plan after an unmet review must add production work",
                ));
            }
        }
        // O8: a replan without new completed work since the last admission counts; the bound
        // stops the objective instead of admitting it.
        let counters = &mut self.objective_mut(idx).counters;
        counters.replans_without_progress += 1;
        let replans = counters.replans_without_progress;
        let bound = self.state.policy.bounds().replans_without_progress();
        if replans >= bound {
            self.objective_mut(idx).interpretation = None;
            self.stop_for_attention(
                idx,
                Rule::O8,
                format!("replan {replans} without new completed work: stopped for attention"),
            );
            return Ok(());
        }
        self.install_plan(idx, trigger, observed, plan.explanation, plan_id, tasks);
        Ok(())
    }

    /// Stops objective `idx` for attention under `rule`: a bound was reached, and only a
    /// person's new act (a correction, a new message) moves it on.
    pub(super) fn stop_for_attention(&mut self, idx: usize, rule: Rule, message: String) {
        let id = self.objective(idx).id;
        self.cancel_calls(idx);
        self.objective_mut(idx).resume_to = None;
        self.set_status(idx, ObjectiveStatus::StoppedForAttention);
        self.reject(Some(id), rule, message.clone());
        self.effects.push(Effect::StopForAttention {
            objective: id,
            rule,
        });
        self.notify(Audience::Owners, Some(id), message.clone());
        self.notify(Audience::Operators, Some(id), message);
    }

    /// Stops objective `idx` for attention because its provider failed a call (unreachable
    /// for the whole waiting window, or refusing it): like a pause by the Room (D3: the
    /// control revision moves, running calls abort), so an owner or an operator resumes it
    /// once the provider is back or the fix is made. Nothing was counted against a bound.
    /// An objective already paused or stopped only keeps its work open.
    pub(super) fn stop_for_provider(&mut self, idx: usize, why: String) {
        let status = self.objective(idx).status;
        let id = self.objective(idx).id;
        if !matches!(status, ObjectiveStatus::Planning | ObjectiveStatus::Running) {
            self.reject(Some(id), Rule::D3, why);
            return;
        }
        let o = self.objective_mut(idx);
        o.control_revision += 1;
        o.resume_to = Some(status);
        // Like a pause, the interpretation in progress is kept (its call, if any, aborts
        // below and gives its attempt back), so a resumed objective takes it up again.
        o.status = ObjectiveStatus::StoppedForAttention;
        self.cancel_calls(idx);
        let message = format!(
            "stopped for attention: {why}; resume the objective once the provider is back or the fix is made"
        );
        self.reject(Some(id), Rule::D3, message.clone());
        self.effects.push(Effect::StopForAttention {
            objective: id,
            rule: Rule::D3,
        });
        self.notify(Audience::Owners, Some(id), message.clone());
        self.notify(Audience::Operators, Some(id), message);
    }

    /// Appends the admitted version (O2), supersedes the previous one (O5: its running calls
    /// are asked to abort), bumps the objective revision, and dispatches ready work.
    fn install_plan(
        &mut self,
        idx: usize,
        trigger: PlanTrigger,
        observed: ObservedRevisions,
        explanation: String,
        plan_id: PlanVersionId,
        tasks: Vec<Task>,
    ) {
        let superseded: Vec<_> = self
            .objective(idx)
            .current_plan()
            .map(|p| p.tasks.iter().filter_map(Task::running_op).collect())
            .unwrap_or_default();
        for op in superseded {
            if self.state.operations.get(&op).map(|o| o.state) == Some(OperationState::InFlight) {
                self.cancel_call(op);
            }
        }
        let objective = self.objective_mut(idx);
        let number = u32::try_from(objective.plans.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let reused = tasks.iter().filter(|t| t.reused).count();
        let total = tasks.len();
        objective.plans.push(PlanVersion {
            id: plan_id,
            number,
            predecessor: objective.plans.last().map(|p| p.id),
            trigger,
            observed,
            explanation,
            tasks,
        });
        objective.revision += 1;
        objective.status = ObjectiveStatus::Running;
        objective.interpretation = None;
        objective.awaiting_review = None;
        let id = objective.id;
        self.accept(
            Some(id),
            Some(Rule::O7),
            format!("plan v{number} admitted whole: {total} tasks, {reused} reused unchanged (O3)"),
        );
        self.advance(idx);
    }

    /// Criteria of a replan must equal the frozen ones: only an owner correction changes them.
    fn check_frozen_criteria(
        &self,
        objective: &Objective,
        plan: &PlanProposal,
        trigger: &PlanTrigger,
    ) -> Result<(), Refused> {
        if plan.criteria.is_empty() || plan.criteria == objective.criteria {
            return Ok(());
        }
        let rule = match trigger {
            PlanTrigger::UnmetReview { .. } => Rule::R3,
            _ => Rule::O7,
        };
        Err(refused(
            rule,
            "criteria are frozen: a reasoner cannot change or weaken them; only an owner correction can",
        ))
    }

    /// Validates a proposal and maps its tasks to identities (O3, O4, O7, O11, T4).
    fn map_tasks(
        &mut self,
        objective: &Objective,
        previous: Option<&PlanVersion>,
        plan: &PlanProposal,
    ) -> Result<(PlanVersionId, Vec<Task>), Refused> {
        if plan.tasks.is_empty() {
            return Err(refused(Rule::O7, "a plan needs at least one task"));
        }
        // O11: repairable task-identity conflicts.
        let mut keys = BTreeSet::new();
        for t in &plan.tasks {
            if !keys.insert(&t.key) {
                return Err(refused(
                    Rule::O11,
                    format!("two tasks have the key `{}`", t.key),
                ));
            }
        }
        for t in &plan.tasks {
            if let Some(dep) = t.deps.iter().find(|d| !keys.contains(d)) {
                return Err(refused(
                    Rule::O11,
                    format!("task `{}` depends on unknown key `{dep}`", t.key),
                ));
            }
        }
        let reports = plan
            .tasks
            .iter()
            .filter(|t| t.kind == TaskKind::Report)
            .count();
        if reports != 1 && !(reports > 1 && self.many_reports()) {
            return Err(refused(
                Rule::O7,
                format!("a plan needs exactly one report task, this one has {reports}"),
            ));
        }
        if let Some(cycle) = find_cycle(plan) {
            return Err(refused(
                Rule::O7,
                format!("dependency cycle through `{cycle}`"),
            ));
        }
        let plan_id = PlanVersionId::from_uuid(self.env.ids.next_uuid());
        let mut tasks = Vec::with_capacity(plan.tasks.len());
        for proposed in &plan.tasks {
            let mut deps = proposed.deps.clone();
            deps.sort();
            deps.dedup();
            let spec = TaskSpec {
                title: proposed.title.clone(),
                capability: proposed.capability.clone(),
                inputs: proposed.inputs.clone(),
                deps,
            };
            if proposed.title.trim().is_empty() {
                return Err(refused(
                    Rule::O7,
                    format!("task `{}` has no title", proposed.key),
                ));
            }
            let resolved = self
                .env
                .catalog
                .resolve(ResolveRequest {
                    plan: objective.id,
                    task: &proposed.key,
                    capability: &proposed.capability,
                    inputs: &proposed.inputs,
                })
                .map_err(|why| {
                    refused(
                        Rule::O7,
                        format!(
                            "task `{}` needs `{}`: {why}",
                            proposed.key, proposed.capability
                        ),
                    )
                })?;
            // T4: work is read or draft only.
            if resolved.effect == CapabilityEffect::ExternalWrite {
                return Err(refused(
                    Rule::T4,
                    format!(
                        "task `{}` needs `{}`, which writes outside the room: refused",
                        proposed.key, resolved.capability
                    ),
                ));
            }
            if !self.state.members.has(&resolved.provider, Role::Specialist) {
                return Err(refused(
                    Rule::O7,
                    format!(
                        "task `{}`: provider {} is not a specialist of this room",
                        proposed.key, resolved.provider
                    ),
                ));
            }
            for (from, to) in &resolved.replacements {
                self.accept(
                    Some(objective.id),
                    None,
                    format!(
                        "task `{}`: deprecated capability `{from}` replaced by `{to}`",
                        proposed.key
                    ),
                );
            }
            // O3: a completed task whose key and spec are unchanged keeps its identity and
            // result; every report is produced anew, so each plan version has its own.
            let reusable = previous
                .and_then(|p| p.task_by_key(&proposed.key))
                .filter(|t| {
                    t.is_completed()
                        && t.spec == spec
                        && t.kind == TaskKind::Production
                        && proposed.kind == TaskKind::Production
                });
            if let Some(claim) = &proposed.reuse
                && reusable.map(|t| &t.identity) != Some(claim)
            {
                return Err(refused(
                    Rule::O11,
                    format!(
                        "task `{}` claims identity {claim}, which is not a completed, unchanged task of the current plan",
                        proposed.key
                    ),
                ));
            }
            let (identity, state, reused) = match reusable {
                Some(t) => (t.identity.clone(), t.state.clone(), true),
                None => (
                    self.fresh_identity(objective, plan_id, &proposed.key),
                    TaskState::Pending,
                    false,
                ),
            };
            tasks.push(Task {
                key: proposed.key.clone(),
                identity,
                spec,
                kind: proposed.kind,
                capability: resolved.capability,
                inputs: resolved.inputs,
                assignee: resolved.provider,
                state,
                reused,
                outputs: resolved.outputs,
            });
        }
        Ok((plan_id, tasks))
    }

    /// O4: plan-scoped `{plan}/{key}` by default; with a prefix, objective-scoped and stable,
    /// suffixed `#n` for the n-th fresh identity of the key.
    fn fresh_identity(
        &self,
        objective: &Objective,
        plan: PlanVersionId,
        key: &TaskKey,
    ) -> TaskIdentity {
        match self.state.policy.task_identity_prefix() {
            None => TaskIdentity::plan_scoped(plan, key),
            Some(prefix) => {
                let earlier: BTreeSet<&TaskIdentity> = objective
                    .plans
                    .iter()
                    .flat_map(|p| p.tasks.iter())
                    .filter(|t| &t.key == key)
                    .map(|t| &t.identity)
                    .collect();
                let n = u32::try_from(earlier.len())
                    .unwrap_or(u32::MAX)
                    .saturating_add(1);
                TaskIdentity::objective_scoped(prefix, objective.id, key, n)
            }
        }
    }
}

/// The first plan's criteria: at least one, keys unique, texts not empty.
pub(super) fn check_first_criteria(criteria: &[Criterion]) -> Result<Vec<Criterion>, Refused> {
    match Criterion::check_set(criteria) {
        Ok(()) => Ok(criteria.to_vec()),
        Err(CriteriaError::Empty) => Err(refused(
            Rule::O7,
            "the first plan must propose at least one criterion",
        )),
        Err(CriteriaError::Duplicate(id)) => Err(refused(
            Rule::O7,
            format!("criterion `{id}` is proposed twice"),
        )),
        Err(CriteriaError::Blank(id)) => {
            Err(refused(Rule::O7, format!("criterion `{id}` has no text")))
        }
    }
}

/// A key on a dependency cycle, if there is one.
fn find_cycle(plan: &PlanProposal) -> Option<TaskKey> {
    let deps: BTreeMap<&TaskKey, &Vec<TaskKey>> =
        plan.tasks.iter().map(|t| (&t.key, &t.deps)).collect();
    // Kahn's algorithm: whatever cannot be ordered is on or behind a cycle.
    let mut remaining: BTreeMap<&TaskKey, usize> =
        deps.iter().map(|(k, d)| (*k, d.len())).collect();
    let mut ready: Vec<&TaskKey> = remaining
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    while let Some(done) = ready.pop() {
        remaining.remove(done);
        for (k, d) in &deps {
            if d.contains(done)
                && let Some(n) = remaining.get_mut(k)
            {
                *n = n.saturating_sub(d.iter().filter(|x| *x == done).count());
                if *n == 0 {
                    ready.push(k);
                }
            }
        }
    }
    remaining.keys().next().map(|k| (*k).clone())
}
