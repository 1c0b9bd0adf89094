//! Closed objectives leave the live Room state (issue 21): a completed or canceled objective
//! whose calls are all settled and that holds no late result (D4) becomes an
//! [`ObjectiveRecord`] — the objective as it closed and its contributions, which the store
//! keeps beside the Room's history — and the live state keeps only a [`ClosedObjective`]: what
//! the rules still consult about it (a control or a correction refused because it ended, D3
//! and O14; a receipt from one of its assignees consumed without a reasoner call, O13; an
//! explicit reference answered from its status, O6). So what every decision reads, clones,
//! compares and writes depends on the Room's open work, not on its past.
//!
//! Facts about closed objectives that a rare decision needs (a memory entry's provenance, the
//! content a redaction names) come in through [`Archive`], which the host answers from the
//! records it read for that decision.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::artifact::ContentDigest;
use crate::ids::{ContributionId, EventId, ObjectiveId, OperationId, PrincipalId, TaskIdentity};
use crate::objective::{Objective, ObjectiveStatus};
use crate::plan::TaskState;
use crate::review::Contribution;
use crate::state::HeldResult;

/// What the live state keeps of a closed objective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedObjective {
    pub(crate) status: ObjectiveStatus,
    pub(crate) revision: u64,
    pub(crate) control_revision: u64,
    /// The principals its tasks were assigned to, in any plan version: a receipt from one
    /// of them is consumed without a reasoner call (O13).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) assignees: BTreeSet<PrincipalId>,
    /// The operations whose late results it held when it closed (D4): they went to its record
    /// as evidence, and deciding one is refused by D4 as for any closed objective's.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) held: BTreeSet<OperationId>,
}

impl ClosedObjective {
    /// What the live state keeps of `objective`.
    pub(crate) fn of(objective: &Objective) -> Self {
        Self {
            status: objective.status,
            revision: objective.revision,
            control_revision: objective.control_revision,
            assignees: objective
                .plans
                .iter()
                .flat_map(|plan| plan.tasks())
                .map(|task| task.assignee().clone())
                .collect(),
            held: BTreeSet::new(),
        }
    }

    /// How it ended: completed or canceled.
    pub fn status(&self) -> ObjectiveStatus {
        self.status
    }
    /// Its objective revision when it closed (O10).
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// Its control revision when it closed (D3).
    pub fn control_revision(&self) -> u64 {
        self.control_revision
    }
    /// Whether `principal` was assigned a task of it.
    pub fn was_assigned(&self, principal: &PrincipalId) -> bool {
        self.assignees.contains(principal)
    }
    /// Whether it held the late result of `op` when it closed (D4).
    pub fn held(&self, op: OperationId) -> bool {
        self.held.contains(&op)
    }
}

/// A closed objective as its record keeps it: the objective when it left the live state and
/// every contribution made for it (superseded ones included, O5), in id order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectiveRecord {
    /// The objective.
    pub objective: Objective,
    /// Its contributions.
    pub contributions: Vec<Contribution>,
    /// Late results of it still held when it closed (D4): a closed objective readmits
    /// nothing, so they stay evidence, here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldResult>,
}

impl ObjectiveRecord {
    /// The objective's id.
    pub fn id(&self) -> ObjectiveId {
        self.objective.id
    }
    /// The contribution of this id, if it was made for this objective.
    pub fn contribution(&self, id: ContributionId) -> Option<&Contribution> {
        self.contributions.iter().find(|c| c.id == id)
    }
    /// Whether `event` is its owner message or one of its owner corrections.
    pub fn has_owner_message(&self, event: EventId) -> bool {
        self.objective.origin == event || self.objective.corrections.contains(&event)
    }
    /// Whether one of its contributions names `digest`.
    pub fn names(&self, digest: &ContentDigest) -> bool {
        self.contributions
            .iter()
            .any(|c| c.digests().contains(&digest))
    }
    /// T2: whether `task` of its current plan is `by`'s and was completed by `by`'s
    /// contribution `contribution` (what confirming it done proves).
    pub fn completed_by(
        &self,
        task: &TaskIdentity,
        contribution: ContributionId,
        by: &PrincipalId,
    ) -> bool {
        self.objective
            .current_plan()
            .and_then(|plan| plan.task(task))
            .is_some_and(|t| {
                t.assignee() == by && *t.state() == TaskState::Completed { contribution }
            })
            && self
                .contribution(contribution)
                .is_some_and(|c| c.author() == by)
    }
}

/// What a closed objective's record is found by, besides its objective id: what a rare
/// decision asks about objectives no longer in the live state (a memory entry's provenance, the
/// content a redaction names).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKey {
    /// A contribution made for it.
    Contribution(ContributionId),
    /// Its owner message or one of its owner corrections.
    OwnerMessage(EventId),
    /// Content one of its contributions names.
    Content(ContentDigest),
}

impl RecordKey {
    /// The key as the stores keep it.
    pub fn text(&self) -> String {
        match self {
            RecordKey::Contribution(id) => format!("contribution:{id}"),
            RecordKey::OwnerMessage(id) => format!("event:{id}"),
            RecordKey::Content(digest) => format!("content:{}", digest.as_str()),
        }
    }

    /// Every key of `record`, each once, in order.
    pub fn of(record: &ObjectiveRecord) -> Vec<RecordKey> {
        let objective = &record.objective;
        let mut keys = vec![RecordKey::OwnerMessage(objective.origin())];
        keys.extend(
            objective
                .corrections()
                .iter()
                .map(|e| RecordKey::OwnerMessage(*e)),
        );
        for contribution in &record.contributions {
            keys.push(RecordKey::Contribution(contribution.id()));
            keys.extend(
                contribution
                    .digests()
                    .into_iter()
                    .map(|d| RecordKey::Content(d.clone())),
            );
        }
        keys.sort();
        keys.dedup();
        keys
    }
}

/// What the host read about closed objectives for one decision: the records an input names
/// that are no longer in the live state.
pub trait Archive {
    /// Whether a closed objective of the Room has contribution `id`.
    fn has_contribution(&self, id: ContributionId) -> bool;
    /// Whether `event` was the owner message or a correction of a closed objective.
    fn has_owner_message(&self, event: EventId) -> bool;
    /// Whether a contribution of a closed objective names `digest`.
    fn names(&self, digest: &ContentDigest) -> bool;
    /// The record of closed objective `objective`, when it was read for this decision.
    fn record(&self, objective: ObjectiveId) -> Option<&ObjectiveRecord>;
}

/// No records read: the decision needs none (most inputs).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoArchive;

impl Archive for NoArchive {
    fn has_contribution(&self, _: ContributionId) -> bool {
        false
    }
    fn has_owner_message(&self, _: EventId) -> bool {
        false
    }
    fn names(&self, _: &ContentDigest) -> bool {
        false
    }
    fn record(&self, _: ObjectiveId) -> Option<&ObjectiveRecord> {
        None
    }
}

/// The records the host read for a decision.
impl Archive for Vec<ObjectiveRecord> {
    fn has_contribution(&self, id: ContributionId) -> bool {
        self.iter().any(|r| r.contribution(id).is_some())
    }
    fn has_owner_message(&self, event: EventId) -> bool {
        self.iter().any(|r| r.has_owner_message(event))
    }
    fn names(&self, digest: &ContentDigest) -> bool {
        self.iter().any(|r| r.names(digest))
    }
    fn record(&self, objective: ObjectiveId) -> Option<&ObjectiveRecord> {
        self.iter().find(|r| r.id() == objective)
    }
}
