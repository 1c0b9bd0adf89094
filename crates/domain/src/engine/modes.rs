//! The two baselines issue 19's qualification compares the planner with, as configurations of
//! the one engine ([`Coordination`]): they switch planning and the review gate off and keep
//! everything else — the budget reservation before every call (B2), the ledger, fencing (O5,
//! D3), pauses, late results (D4), owner authority (O9) — so cost and repeated work are
//! measured the same way in every mode.
//!
//! - **Routing**: the reasoner is asked as in the planner (it learns the capabilities, C1), but
//!   only the report task of its proposal is kept, without dependencies: the owner's message
//!   goes to the one specialist bound to the capability the answer needs. A report completes
//!   the objective unreviewed; a failed task stops it for attention (no repair plan).
//! - **Sessions**: no reasoner. Every specialist of the Room gets one session task carrying
//!   the owner's message, on the first available read-or-draft capability bound to it; the
//!   first session that declares its work done completes the objective unreviewed and the
//!   others are asked to abort. A failed session leaves the others working; when none is left
//!   the objective stops for attention.

use super::calls::Target;
use super::{Ctx, PlanProposal, ProposedTask, Refused, refused};
use crate::catalog::CapabilityEffect;
use crate::ids::{ContributionId, CriterionId, TaskIdentity, TaskKey};
use crate::objective::{Criterion, ObjectiveStatus};
use crate::plan::{TaskKind, TaskState};
use crate::policy::Coordination;
use crate::review::{ReportRef, SourceSet};
use crate::room::Role;
use crate::rules::Rule;

/// The one criterion of a sessions objective: nothing checks it but the session itself.
pub(crate) const SESSIONS_CRITERION: &str = "declared-done";

impl Ctx<'_, '_> {
    fn coordination(&self) -> Coordination {
        self.state.policy.coordination()
    }

    /// Routing keeps only the proposal's report task, without dependencies (one specialist
    /// answers). The planner's and the sessions' proposals are kept whole.
    pub(super) fn routed(&self, mut plan: PlanProposal) -> PlanProposal {
        if self.coordination() == Coordination::Routing {
            plan.tasks.retain(|t| t.kind == TaskKind::Report);
            for t in &mut plan.tasks {
                t.deps.clear();
                t.reuse = None;
            }
        }
        plan
    }

    /// Sessions: instead of a reasoner call, admit one session task per specialist. Returns
    /// whether it handled the interpretation of `target` (always, in sessions mode).
    pub(super) fn open_sessions(&mut self, target: Target) -> bool {
        if self.coordination() != Coordination::Sessions {
            return false;
        }
        let (text, observed, first) = match target {
            Target::Intake(event) => match self.state.intake.get(&event) {
                Some(i) => (i.text.clone(), Default::default(), true),
                None => return true,
            },
            Target::Objective(idx) => {
                let o = self.objective(idx);
                if o.status == ObjectiveStatus::Paused {
                    return true;
                }
                match o.interpretation.as_ref() {
                    Some(i) => (i.text.clone(), o.observed(), false),
                    None => return true,
                }
            }
        };
        let plan = self.session_plan(&text, first);
        let result = plan.and_then(|plan| self.admit(target, plan, observed));
        if let Err(r) = result {
            self.sessions_refused(target, r);
        }
        true
    }

    /// One session task per specialist with an available read-or-draft capability bound to
    /// it; the criteria only with the first plan (later ones keep the frozen criteria).
    fn session_plan(&self, text: &str, first: bool) -> Result<PlanProposal, Refused> {
        let capabilities = self.env.catalog.describe();
        let mut tasks = Vec::new();
        for specialist in self.state.members.holders(Role::Specialist) {
            let capability = capabilities.iter().find(|c| {
                c.provider.as_ref() == Some(specialist)
                    && c.phase == "Available"
                    && c.replacement.is_none()
                    && c.effect == CapabilityEffect::ReadOrDraft
            });
            let Some(capability) = capability else {
                continue;
            };
            let key = TaskKey::parse(&format!("session-{specialist}"))
                .map_err(|e| refused(Rule::O7, format!("session of {specialist}: {e}")))?;
            tasks.push(ProposedTask {
                key,
                title: text.to_owned(),
                capability: capability.name.clone(),
                inputs: Default::default(),
                deps: Vec::new(),
                kind: TaskKind::Report,
                reuse: None,
            });
        }
        if tasks.is_empty() {
            return Err(refused(
                Rule::O7,
                "no specialist of this room has an available capability to open a session on",
            ));
        }
        let criteria = if first {
            let id = CriterionId::parse(SESSIONS_CRITERION)
                .map_err(|e| refused(Rule::O7, e.to_string()))?;
            vec![Criterion {
                id,
                text: "a session declared its work done".to_owned(),
            }]
        } else {
            Vec::new()
        };
        Ok(PlanProposal {
            criteria,
            tasks,
            explanation: "legacy sessions: every specialist works alone on the owner's message"
                .to_owned(),
        })
    }

    /// Sessions could not open: the message waits for the owner (there is no reasoner to
    /// repair anything).
    fn sessions_refused(&mut self, target: Target, r: Refused) {
        match target {
            Target::Intake(event) => {
                self.state.intake.remove(&event);
                self.reject(None, r.rule, format!("{event}: {}", r.message));
            }
            Target::Objective(idx) => {
                let id = self.objective(idx).id;
                self.objective_mut(idx).interpretation = None;
                self.set_status(idx, ObjectiveStatus::WaitingForOwner);
                self.reject(Some(id), r.rule, r.message);
            }
        }
    }

    /// The baselines have no review gate: a completed report completes the objective as it
    /// is, and every other call of the objective is asked to abort. Returns whether it
    /// handled the report (in the baselines only).
    pub(super) fn complete_unreviewed(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        contribution: ContributionId,
    ) -> bool {
        let mode = self.coordination();
        if mode == Coordination::Planner {
            return false;
        }
        let id = self.objective(idx).id;
        let Some(report) = self.state.contributions.get(&contribution).cloned() else {
            return true;
        };
        let version = u32::try_from(self.objective(idx).reports.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        self.objective_mut(idx).reports.push(ReportRef {
            task: task.clone(),
            version,
            contribution,
            source_set: SourceSet::new(report.sources.clone()),
        });
        self.cancel_calls(idx);
        self.set_status(idx, ObjectiveStatus::Completed);
        let message =
            format!("{task} declared the work done: objective completed unreviewed ({mode})");
        self.accept(Some(id), None, message.clone());
        self.notify(super::Audience::Owners, Some(id), message);
        true
    }

    /// A task failed in a baseline: routing has no repair plan, so the objective stops for
    /// attention (O7); a failed session leaves the other sessions working and stops the
    /// objective only when none is left. Returns whether it handled the failure.
    pub(super) fn baseline_task_failed(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        reason: &str,
    ) -> bool {
        let mode = self.coordination();
        if mode != Coordination::Planner && self.objective(idx).status.is_terminal() {
            // The objective ended (another session declared done): nothing to repair.
            return true;
        }
        match mode {
            Coordination::Planner => false,
            Coordination::Routing => {
                self.stop_for_attention(
                    idx,
                    Rule::O7,
                    format!(
                        "{task} failed: {reason}; routing makes no repair plan: stopped for attention"
                    ),
                );
                true
            }
            Coordination::Sessions => {
                let open = self.objective(idx).current_plan().is_some_and(|p| {
                    p.tasks.iter().any(|t| {
                        matches!(
                            t.state,
                            TaskState::Pending
                                | TaskState::Dispatched { .. }
                                | TaskState::WaitingOutside { .. }
                                | TaskState::Uncertain { .. }
                                | TaskState::HeldForReadmission { .. }
                        )
                    })
                });
                let id = self.objective(idx).id;
                self.reject(Some(id), Rule::O7, format!("{task} failed: {reason}"));
                if !open {
                    self.stop_for_attention(
                        idx,
                        Rule::O7,
                        "every session failed: stopped for attention".to_owned(),
                    );
                }
                true
            }
        }
    }

    /// Sessions have no reasoner to tell of a receipt: it is recorded and changes nothing.
    pub(super) fn ignores_receipts(&self) -> bool {
        self.coordination() == Coordination::Sessions
    }

    /// Whether more than one report task may be in a plan (sessions: one per specialist).
    pub(super) fn many_reports(&self) -> bool {
        self.coordination() == Coordination::Sessions
    }
}
