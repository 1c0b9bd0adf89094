//! Objectives: revisions, status, frozen criteria, plan history, counters, reports, reviews.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::{ContributionId, CriterionId, EventId, ObjectiveId, OperationId, PrincipalId};
use crate::plan::{PlanTrigger, PlanVersion};
use crate::review::{ReportRef, Review};

/// The revisions a proposal, call or review observed (O10, R6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ObservedRevisions {
    /// The objective revision: bumps on plan admission, owner correction, criteria change.
    pub objective: u64,
    /// The control revision: bumps on pause, resume, cancel.
    pub control: u64,
}

/// A criterion the report must meet. Frozen at the first plan's admission; only an owner
/// correction changes the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criterion {
    /// Its key.
    pub id: CriterionId,
    /// What must hold.
    pub text: String,
}

/// Why a set of criteria cannot be frozen: a first plan's (O7) or an owner correction's
/// (O14).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CriteriaError {
    /// No criterion at all: nothing a review could check.
    #[error("at least one criterion is required")]
    Empty,
    /// One key twice: a verdict could not say which it is for.
    #[error("criterion `{0}` is given twice")]
    Duplicate(CriterionId),
    /// A criterion that says nothing.
    #[error("criterion `{0}` has no text")]
    Blank(CriterionId),
}

impl Criterion {
    /// Checks a whole set: at least one criterion, keys unique, texts not blank.
    pub fn check_set(criteria: &[Criterion]) -> Result<(), CriteriaError> {
        if criteria.is_empty() {
            return Err(CriteriaError::Empty);
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in criteria {
            if !seen.insert(&c.id) {
                return Err(CriteriaError::Duplicate(c.id.clone()));
            }
            if c.text.trim().is_empty() {
                return Err(CriteriaError::Blank(c.id.clone()));
            }
        }
        Ok(())
    }
}

/// An objective's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveStatus {
    /// A new plan is being interpreted; nothing new is dispatched.
    Planning,
    /// Tasks are dispatched as they become ready.
    Running,
    /// The owner must answer (a challenge, an unknown verdict, exhausted interpretations).
    WaitingForOwner,
    /// Paused by the owner or an operator.
    Paused,
    /// A bound was reached; a person must look (O8, R4).
    StoppedForAttention,
    /// Reviewed: every criterion met.
    Completed,
    /// Canceled.
    Canceled,
}

impl ObjectiveStatus {
    /// Whether nothing more happens to the objective.
    pub const fn is_terminal(self) -> bool {
        matches!(self, ObjectiveStatus::Completed | ObjectiveStatus::Canceled)
    }

    /// The status's wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ObjectiveStatus::Planning => "planning",
            ObjectiveStatus::Running => "running",
            ObjectiveStatus::WaitingForOwner => "waiting_for_owner",
            ObjectiveStatus::Paused => "paused",
            ObjectiveStatus::StoppedForAttention => "stopped_for_attention",
            ObjectiveStatus::Completed => "completed",
            ObjectiveStatus::Canceled => "canceled",
        }
    }
}

impl fmt::Display for ObjectiveStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bounded counters of an objective (O8, R4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Replans since the last newly completed work (O8).
    pub replans_without_progress: u32,
    /// Report versions that a review found unmet since the last owner correction (R4).
    pub failed_report_versions: u32,
    /// Review attempts of the current report version that were refused (R2).
    pub failed_reviews: u32,
}

/// A reasoner interpretation in progress: of an owner message before it has an objective,
/// or of a trigger for an existing objective. Up to the bound of separately reserved
/// attempts interpret the same trigger (O11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interpretation {
    pub(crate) trigger: PlanTrigger,
    pub(crate) text: String,
    pub(crate) attempts: u32,
    pub(crate) op: Option<OperationId>,
    pub(crate) feedback: Vec<String>,
    /// Why it waits for a person: its call never reached the provider (or was refused before
    /// running) and nothing is issued until someone retries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<String>,
    /// The reasoner calls reserved for an owner message before it had an objective: booked to
    /// the objective it becomes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) calls: Vec<OperationId>,
}

impl Interpretation {
    /// A fresh interpretation of `trigger`, with its whole budget of attempts.
    pub(crate) fn new(trigger: PlanTrigger, text: String) -> Self {
        Self {
            trigger,
            text,
            attempts: 0,
            op: None,
            feedback: Vec::new(),
            held: None,
            calls: Vec::new(),
        }
    }

    /// What asked for it.
    pub fn trigger(&self) -> &PlanTrigger {
        &self.trigger
    }
    /// What the reasoner is asked to interpret.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// Calls reserved so far (O11).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
    /// The call in flight, if any.
    pub fn op(&self) -> Option<OperationId> {
        self.op
    }
    /// Repair feedback from refused attempts (O7).
    pub fn feedback(&self) -> &[String] {
        &self.feedback
    }
    /// Why it waits for a person, when its provider failed it (nothing is issued until it is
    /// retried).
    pub fn held(&self) -> Option<&str> {
        self.held.as_deref()
    }
}

/// The review the objective waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewRequest {
    pub(crate) report: ReportRef,
    pub(crate) op: Option<OperationId>,
}

impl ReviewRequest {
    /// The report to review.
    pub fn report(&self) -> &ReportRef {
        &self.report
    }
    /// The model review call in flight, if any.
    pub fn op(&self) -> Option<OperationId> {
        self.op
    }
}

/// An objective of the Room (O1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Objective {
    pub(crate) id: ObjectiveId,
    pub(crate) title: String,
    pub(crate) owner: PrincipalId,
    pub(crate) origin: EventId,
    pub(crate) revision: u64,
    pub(crate) control_revision: u64,
    pub(crate) status: ObjectiveStatus,
    pub(crate) resume_to: Option<ObjectiveStatus>,
    pub(crate) criteria: Vec<Criterion>,
    pub(crate) plans: Vec<PlanVersion>,
    pub(crate) counters: Counters,
    pub(crate) interpretation: Option<Interpretation>,
    pub(crate) corrections: Vec<EventId>,
    pub(crate) receipts: Vec<EventId>,
    pub(crate) contributions: Vec<ContributionId>,
    pub(crate) reports: Vec<ReportRef>,
    pub(crate) reviews: Vec<Review>,
    pub(crate) awaiting_review: Option<ReviewRequest>,
    /// The reasoner calls that interpreted its owner message before it existed (its first
    /// plan's among them): their cost is booked to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) intake_calls: Vec<OperationId>,
}

impl Objective {
    /// The change from `old` to `new` against `stored`, the stored document's value of `old`
    /// (issue 21): field by field, its plan versions item by item.
    pub(crate) fn delta(
        old: &Self,
        new: &Self,
        stored: Option<&serde_json::Value>,
    ) -> crate::delta::DiffResult {
        use crate::delta::{Fields, indexed, whole};
        let Some(serde_json::Value::Object(stored)) = stored else {
            return whole(old, new, stored);
        };
        // Destructured so that a new field cannot be forgotten here.
        let Objective {
            id,
            title,
            owner,
            origin,
            revision,
            control_revision,
            status,
            resume_to,
            criteria,
            plans,
            counters,
            interpretation,
            corrections,
            receipts,
            contributions,
            reports,
            reviews,
            awaiting_review,
            intake_calls,
        } = new;
        let mut f = Fields::of(stored);
        f.field("id", &old.id, id, false, whole)?;
        f.field("title", &old.title, title, false, whole)?;
        f.field("owner", &old.owner, owner, false, whole)?;
        f.field("origin", &old.origin, origin, false, whole)?;
        f.field("revision", &old.revision, revision, false, whole)?;
        let control = &old.control_revision;
        f.field("control_revision", control, control_revision, false, whole)?;
        f.field("status", &old.status, status, false, whole)?;
        f.field("resume_to", &old.resume_to, resume_to, false, whole)?;
        f.field("criteria", &old.criteria, criteria, false, whole)?;
        f.field("plans", &old.plans, plans, false, |o, n, s| {
            indexed(o, n, s, PlanVersion::delta)
        })?;
        f.field("counters", &old.counters, counters, false, whole)?;
        let interpreted = &old.interpretation;
        f.field("interpretation", interpreted, interpretation, false, whole)?;
        f.field("corrections", &old.corrections, corrections, false, whole)?;
        f.field("receipts", &old.receipts, receipts, false, whole)?;
        let made = &old.contributions;
        f.field("contributions", made, contributions, false, whole)?;
        f.field("reports", &old.reports, reports, false, whole)?;
        f.field("reviews", &old.reviews, reviews, false, whole)?;
        let awaiting = &old.awaiting_review;
        f.field("awaiting_review", awaiting, awaiting_review, false, whole)?;
        let intake = &old.intake_calls;
        f.field(
            "intake_calls",
            intake,
            intake_calls,
            intake_calls.is_empty(),
            whole,
        )?;
        Ok(f.delta())
    }

    /// Its id.
    pub fn id(&self) -> ObjectiveId {
        self.id
    }
    /// The owner message it was created from.
    pub fn title(&self) -> &str {
        &self.title
    }
    /// The owner who created it.
    pub fn owner(&self) -> &PrincipalId {
        &self.owner
    }
    /// The event it was created from.
    pub fn origin(&self) -> EventId {
        self.origin
    }
    /// The reasoner calls that interpreted its owner message before it existed: their cost is
    /// booked to it.
    pub fn intake_calls(&self) -> &[OperationId] {
        &self.intake_calls
    }
    /// The objective revision (O10).
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// The control revision (D3).
    pub fn control_revision(&self) -> u64 {
        self.control_revision
    }
    /// Both revisions, as a proposal must observe them.
    pub fn observed(&self) -> ObservedRevisions {
        ObservedRevisions {
            objective: self.revision,
            control: self.control_revision,
        }
    }
    /// Its status.
    pub fn status(&self) -> ObjectiveStatus {
        self.status
    }
    /// The frozen criteria.
    pub fn criteria(&self) -> &[Criterion] {
        &self.criteria
    }
    /// Every plan version, oldest first (O2).
    pub fn plans(&self) -> &[PlanVersion] {
        &self.plans
    }
    /// The current plan version (O2: exactly one).
    pub fn current_plan(&self) -> Option<&PlanVersion> {
        self.plans.last()
    }
    /// The bounded counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// The interpretation in progress.
    pub fn interpretation(&self) -> Option<&Interpretation> {
        self.interpretation.as_ref()
    }
    /// Owner corrections, in order (O14).
    pub fn corrections(&self) -> &[EventId] {
        &self.corrections
    }
    /// Internal receipts recorded against it (O13).
    pub fn receipts(&self) -> &[EventId] {
        &self.receipts
    }
    /// Every contribution of the objective, superseded ones included (O5: evidence).
    pub fn contributions(&self) -> &[ContributionId] {
        &self.contributions
    }
    /// Every report version, oldest first.
    pub fn reports(&self) -> &[ReportRef] {
        &self.reports
    }
    /// Every accepted review, oldest first.
    pub fn reviews(&self) -> &[Review] {
        &self.reviews
    }
    /// The review it waits for.
    pub fn awaiting_review(&self) -> Option<&ReviewRequest> {
        self.awaiting_review.as_ref()
    }
}
