//! Reports and reviews: R1 (a reviewer distinct from every author), R2 (a review binds the
//! exact report and gives every criterion one verdict), R3 (an unmet triggers corrective
//! planning; an unchanged report is never reviewed again), R4 (bounded failed report
//! versions), R5 (an unknown waits for the owner), R6 (corrections and control changes fence
//! a review in flight).

use std::collections::BTreeSet;

use super::{Audience, CallBrief, Ctx, InputError, Refused, ReviewerResult, refused};
use crate::ids::{ContributionId, EventId, ObjectiveId, PrincipalId, ReviewId, TaskIdentity};
use crate::objective::{ObjectiveStatus, ReviewRequest};
use crate::plan::PlanTrigger;
use crate::policy::ReviewSource;
use crate::review::{
    ReportRef, Review, ReviewOutcome, ReviewSubmission, SourceSet, Verdict, unproven,
};
use crate::room::{Permission, Role};
use crate::rules::Rule;
use crate::state::{CallRole, Operation, Purpose};

impl Ctx<'_, '_> {
    /// The report task completed: version the report, refuse an unchanged one (R3), and ask
    /// for its review.
    pub(super) fn report_completed(
        &mut self,
        idx: usize,
        task: &TaskIdentity,
        contribution: ContributionId,
    ) {
        if self.complete_unreviewed(idx, task, contribution) {
            return;
        }
        let id = self.objective(idx).id;
        let Some(report) = self.state.contributions.get(&contribution).cloned() else {
            return;
        };
        let digest = report.content_digest();
        let unchanged = self.objective(idx).reports.iter().any(|r| {
            self.state
                .contributions
                .get(&r.contribution)
                .is_some_and(|c| c.content_digest() == digest)
        });
        if unchanged {
            self.reject(
                Some(id),
                Rule::R3,
                format!("{task} produced a report identical to one already reviewed: never sent for review again"),
            );
            let last_review = self.objective(idx).reviews.last().map(|r| r.id);
            self.report_failed(idx, last_review);
            return;
        }
        let version = u32::try_from(self.objective(idx).reports.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let report = ReportRef {
            task: task.clone(),
            version,
            contribution,
            source_set: SourceSet::new(report.sources.clone()),
        };
        let objective = self.objective_mut(idx);
        objective.reports.push(report.clone());
        objective.awaiting_review = Some(ReviewRequest {
            report: report.clone(),
            op: None,
        });
        self.accept(
            Some(id),
            Some(Rule::R2),
            format!(
                "report v{version} ({}) awaits review, bound to source set {}",
                report.contribution,
                report.source_set.digest()
            ),
        );
        match self.state.policy.review_source() {
            // Dispatched when the objective runs: a pause keeps its boundary.
            ReviewSource::Model => self.advance(idx),
            ReviewSource::Human => self.ask_human_review(idx),
        }
    }

    /// Tells the reviewers a report awaits them, when the objective runs (a human review is
    /// recorded only then).
    pub(super) fn ask_human_review(&mut self, idx: usize) {
        let objective = self.objective(idx);
        let Some(version) = objective.awaiting_review.as_ref().map(|r| r.report.version) else {
            return;
        };
        if objective.status != ObjectiveStatus::Running {
            return;
        }
        let id = objective.id;
        self.notify(
            Audience::Reviewers,
            Some(id),
            format!("report v{version} of objective {id} awaits your review"),
        );
    }

    /// Every author of the objective's production and report contributions (R1).
    fn authors(&self, idx: usize) -> BTreeSet<PrincipalId> {
        self.objective(idx)
            .contributions
            .iter()
            .filter_map(|c| self.state.contributions.get(c))
            .map(|c| c.author.clone())
            .collect()
    }

    /// R1: a model review goes to a reviewer who authored none of the objective's work.
    pub(super) fn request_model_review(&mut self, idx: usize) {
        let objective = self.objective(idx);
        let (id, observed, criteria) = (
            objective.id,
            objective.observed(),
            objective.criteria.clone(),
        );
        let Some(report) = objective.awaiting_review.as_ref().map(|r| r.report.clone()) else {
            return;
        };
        let authors = self.authors(idx);
        let reviewer = self
            .state
            .members
            .holders(Role::Reviewer)
            .find(|p| !authors.contains(*p))
            .cloned();
        let Some(reviewer) = reviewer else {
            self.stop_for_attention(
                idx,
                Rule::R1,
                "no reviewer of this room is distinct from the objective's authors: add a \
                 reviewer who authored none of its work, then resume the objective"
                    .to_owned(),
            );
            // Resumable (D3): once a member may review, a resume asks for the review again.
            self.objective_mut(idx).resume_to = Some(ObjectiveStatus::Running);
            return;
        };
        let op = self.reserve_call(
            CallRole::Reviewer,
            Some(reviewer),
            Some(id),
            observed,
            Purpose::Review {
                report: report.clone(),
            },
            CallBrief::Review { report, criteria },
        );
        if let Some(request) = self.objective_mut(idx).awaiting_review.as_mut() {
            request.op = op;
        }
    }

    /// The review call `operation` serves, if the objective still waits for it.
    pub(super) fn awaited_review(&self, operation: &Operation) -> Option<usize> {
        let idx = self.objective_index(operation.objective?).ok()?;
        let awaited = self.objective(idx).awaiting_review.as_ref()?.op == Some(operation.id);
        awaited.then_some(idx)
    }

    /// A model reviewer returned.
    pub(super) fn reviewer_returned(&mut self, operation: &Operation, result: ReviewerResult) {
        let Some(idx) = self.awaited_review(operation) else {
            self.reject(
                operation.objective,
                Rule::R6,
                format!(
                    "{}: the review is no longer awaited (fenced): charged, not used",
                    operation.id
                ),
            );
            return;
        };
        // T6: its reviewer lost the role while it ran: not used; another reviewer is asked.
        if operation.fenced {
            self.reject(
                operation.objective,
                Rule::T6,
                format!(
                    "{}: its reviewer lost the reviewer role while it ran (fenced): charged, not used",
                    operation.id
                ),
            );
            self.review_aborted(operation);
            return;
        }
        // R6: a correction or a control change since dispatch fences the review.
        if operation.observed != self.objective(idx).observed() {
            self.reject(
                operation.objective,
                Rule::R6,
                format!(
                    "{}: the objective changed while it was reviewed (fenced): charged, not used",
                    operation.id
                ),
            );
            self.review_aborted(operation);
            return;
        }
        let Some(reviewer) = operation.principal.clone() else {
            return;
        };
        match result {
            ReviewerResult::FormatError { detail } => {
                self.review_failed(
                    idx,
                    refused(Rule::R2, format!("the review could not be read: {detail}")),
                );
            }
            ReviewerResult::Review(submission) => {
                if let Err(refusal) = self.accept_review(idx, &reviewer, submission) {
                    self.review_failed(idx, refusal);
                }
            }
        }
    }

    /// The review call was fenced or aborted: ask again when the objective runs.
    pub(super) fn review_aborted(&mut self, operation: &Operation) {
        let Some(idx) = self.awaited_review(operation) else {
            return;
        };
        if let Some(request) = self.objective_mut(idx).awaiting_review.as_mut() {
            request.op = None;
        }
        self.advance(idx);
    }

    /// The review call `operation` serves failed.
    pub(super) fn review_failed_for(&mut self, operation: &Operation, why: &str) {
        if let Some(idx) = self.awaited_review(operation) {
            self.review_failed(idx, refused(Rule::R2, why));
        }
    }

    /// A model review was refused (R1, R2) or unreadable: ask again within the bound.
    fn review_failed(&mut self, idx: usize, refusal: Refused) {
        let objective = self.objective_mut(idx);
        objective.counters.failed_reviews += 1;
        let failed = objective.counters.failed_reviews;
        if let Some(request) = objective.awaiting_review.as_mut() {
            request.op = None;
        }
        let bound = self.state.policy.bounds().interpretations_per_event();
        if failed >= bound {
            self.stop_for_attention(
                idx,
                refusal.rule,
                format!(
                    "{failed} reviews of this report were refused; the last: {}",
                    refusal.message
                ),
            );
            return;
        }
        let id = self.objective(idx).id;
        self.reject(Some(id), refusal.rule, refusal.message);
        self.advance(idx);
    }

    /// A human reviewer records a review through the API.
    pub(super) fn record_human_review(
        &mut self,
        by: &PrincipalId,
        objective: ObjectiveId,
        submission: ReviewSubmission,
    ) -> Result<(), InputError> {
        let Some(idx) =
            self.live_objective(by, Permission::ReviewRecord, objective, Rule::R2, |_| {
                "no report of this objective awaits review".to_owned()
            })?
        else {
            return Ok(());
        };
        if !self.authorized(by, Permission::ReviewRecord, Some(objective)) {
            return Ok(());
        }
        if self.state.policy.review_source() != ReviewSource::Human {
            self.reject(
                Some(objective),
                Rule::R2,
                "this room's policy requires a model review".to_owned(),
            );
            return Ok(());
        }
        if self.objective(idx).awaiting_review.is_none() {
            self.reject(
                Some(objective),
                Rule::R2,
                "no report of this objective awaits review".to_owned(),
            );
            return Ok(());
        }
        let status = self.objective(idx).status;
        if status != ObjectiveStatus::Running {
            // A correction being planned or a pause fences reviews (R6).
            self.reject(
                Some(objective),
                Rule::R6,
                format!("the objective is {status}: reviews wait until it runs again"),
            );
            return Ok(());
        }
        if submission.observed != self.objective(idx).observed() {
            self.reject(
                Some(objective),
                Rule::R6,
                "the objective changed since the reviewer looked (fenced): review again".to_owned(),
            );
            return Ok(());
        }
        if let Err(refusal) = self.accept_review(idx, by, submission) {
            self.reject(Some(objective), refusal.rule, refusal.message);
        }
        Ok(())
    }

    /// R1 and R2, then the outcome: all met completes, any unknown waits for the owner (R5,
    /// wins over unmet), else an unmet asks for a corrective plan (R3).
    fn accept_review(
        &mut self,
        idx: usize,
        reviewer: &PrincipalId,
        submission: ReviewSubmission,
    ) -> Result<(), Refused> {
        if !self.state.members.has(reviewer, Role::Reviewer) {
            return Err(refused(
                Rule::R1,
                format!("{reviewer} is not a reviewer of this room"),
            ));
        }
        if self.authors(idx).contains(reviewer) {
            return Err(refused(
                Rule::R1,
                format!("{reviewer} authored work of this objective and cannot review it"),
            ));
        }
        let objective = self.objective(idx);
        let Some(awaited) = objective.awaiting_review.as_ref().map(|r| r.report.clone()) else {
            return Err(refused(Rule::R2, "no report awaits review"));
        };
        if submission.report != awaited {
            return Err(refused(
                Rule::R2,
                format!(
                    "the review binds report v{} with source set {}, but v{} with {} awaits review",
                    submission.report.version,
                    submission.report.source_set.digest(),
                    awaited.version,
                    awaited.source_set.digest()
                ),
            ));
        }
        let criteria: Vec<_> = objective.criteria.iter().map(|c| &c.id).collect();
        for c in &criteria {
            let n = submission
                .verdicts
                .iter()
                .filter(|v| &v.criterion == *c)
                .count();
            if n != 1 {
                return Err(refused(
                    Rule::R2,
                    format!("criterion `{c}` has {n} verdicts; every criterion needs exactly one"),
                ));
            }
        }
        if let Some(v) = submission
            .verdicts
            .iter()
            .find(|v| !criteria.contains(&&v.criterion))
        {
            return Err(refused(
                Rule::R2,
                format!("`{}` is not a criterion of this objective", v.criterion),
            ));
        }
        let id = objective.id;
        let submission_model = submission.model;
        let mut verdicts = submission.verdicts;
        // R7: a `met` stands only on evidence the review input carries.
        let mut downgraded = Vec::new();
        if let Some(report) = self.state.contributions.get(&awaited.contribution) {
            for verdict in &mut verdicts {
                if let Some(reason) = unproven(
                    verdict,
                    report,
                    &self.state.contributions,
                    self.env.contents,
                ) {
                    verdict.evidence = format!(
                        "R7: recorded as unknown: {reason} (the reviewer said met: {})",
                        verdict.evidence
                    );
                    verdict.verdict = Verdict::Unknown;
                    downgraded.push((verdict.criterion.clone(), reason));
                }
            }
        }
        // The review is taken; what R7 changed in it is logged under its rule.
        for (criterion, reason) in downgraded {
            self.accept(
                Some(id),
                Some(Rule::R7),
                format!("criterion `{criterion}`: the `met` is recorded as unknown: {reason}"),
            );
        }
        let outcome = if verdicts.iter().any(|v| v.verdict == Verdict::Unknown) {
            ReviewOutcome::Unknown
        } else if verdicts.iter().any(|v| v.verdict == Verdict::Unmet) {
            ReviewOutcome::Unmet
        } else {
            ReviewOutcome::AllMet
        };
        let review = ReviewId::from_uuid(self.env.ids.next_uuid());
        let by = match &submission_model {
            Some(model) => format!("{reviewer} (model `{model}`)"),
            None => reviewer.to_string(),
        };
        let objective = self.objective_mut(idx);
        objective.reviews.push(Review {
            id: review,
            reviewer: reviewer.clone(),
            report: awaited.clone(),
            verdicts,
            outcome,
            model: submission_model,
        });
        objective.awaiting_review = None;
        objective.counters.failed_reviews = 0;
        self.accept(
            Some(id),
            Some(Rule::R2),
            format!("{by} reviewed report v{}: {outcome:?}", awaited.version),
        );
        match outcome {
            ReviewOutcome::AllMet => {
                self.set_status(idx, ObjectiveStatus::Completed);
                self.accept(
                    Some(id),
                    None,
                    "every criterion met: objective completed".to_owned(),
                );
                self.notify(
                    Audience::Owners,
                    Some(id),
                    format!("objective {id} completed: every criterion met"),
                );
            }
            ReviewOutcome::Unknown => {
                self.set_status(idx, ObjectiveStatus::WaitingForOwner);
                self.accept(
                    Some(id),
                    Some(Rule::R5),
                    "a criterion is unknown: waiting for the owner".to_owned(),
                );
                self.notify(
                    Audience::Owners,
                    Some(id),
                    format!("objective {id}: the reviewer could not tell whether a criterion is met; please decide"),
                );
            }
            ReviewOutcome::Unmet => self.report_failed(idx, Some(review)),
        }
        Ok(())
    }

    /// R6: an owner correction resets the repair cycle (the replan and failed-report bounds
    /// count afresh) and fences the review in flight: its result cannot consume the
    /// correction.
    pub(super) fn reset_repair_cycle(&mut self, idx: usize, correction: EventId) {
        let id = self.objective(idx).id;
        if let Some(op) = self
            .objective(idx)
            .awaiting_review
            .as_ref()
            .and_then(|r| r.op)
        {
            self.cancel_call(op);
            self.accept(
                Some(id),
                Some(Rule::R6),
                format!("review {op} fenced by the correction"),
            );
        }
        let o = self.objective_mut(idx);
        o.counters.replans_without_progress = 0;
        o.counters.failed_report_versions = 0;
        o.counters.failed_reviews = 0;
        o.awaiting_review = None;
        self.accept(
            Some(id),
            Some(Rule::R6),
            format!("{correction}: owner correction recorded; repair cycle reset"),
        );
    }

    /// A report version failed (R3, R4): corrective planning within the bound.
    fn report_failed(&mut self, idx: usize, review: Option<ReviewId>) {
        let objective = self.objective_mut(idx);
        objective.counters.failed_report_versions += 1;
        let failed = objective.counters.failed_report_versions;
        let bound = self.state.policy.bounds().failed_report_versions();
        if failed >= bound {
            self.stop_for_attention(
                idx,
                Rule::R4,
                format!("{failed} report versions failed review: automatic repair stopped"),
            );
            return;
        }
        let id = self.objective(idx).id;
        let Some(review) = review else {
            self.stop_for_attention(
                idx,
                Rule::R3,
                "an unchanged report has no review to correct".to_owned(),
            );
            return;
        };
        self.accept(
            Some(id),
            Some(Rule::R3),
            format!("report version failed review ({failed} of {bound}): corrective planning"),
        );
        self.replan(
            idx,
            PlanTrigger::UnmetReview { review },
            "a review found criteria unmet; propose a corrective plan that adds production work and a new report".to_owned(),
        );
    }
}
