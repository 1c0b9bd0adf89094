//! Closed objectives leave the live Room state (issue 21): a completed or canceled objective
//! whose calls are all settled and that holds no interpretation in flight becomes an
//! [`ObjectiveRecord`] — the objective as it closed, its contributions and the late results
//! it still held (D4) — which the store keeps beside the Room's history, found by its id and
//! by [`RecordKey`]s. Nothing of it stays in the live state, so what every decision reads,
//! clones, compares and writes depends on the Room's open work, not on its past.
//!
//! What a decision needs to know about a closed objective (a control or a correction refused
//! because it ended, D3 and O14; a receipt from one of its assignees consumed without a
//! reasoner call, O13; an explicit reference answered from its status, O6; a late result it
//! kept, D4; a memory entry's provenance, M1; the content a redaction names, T2) comes in
//! through [`Archive`]: the records the input names ([`crate::engine::Input::archive_needed`]),
//! which the host reads for that decision.

use serde::{Deserialize, Serialize};

use crate::artifact::ContentDigest;
use crate::ids::{ContributionId, EventId, ObjectiveId, OperationId, PrincipalId, TaskIdentity};
use crate::objective::{Objective, ObjectiveStatus};
use crate::plan::TaskState;
use crate::review::Contribution;
use crate::state::HeldResult;

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
    /// How it ended: completed or canceled.
    pub fn status(&self) -> ObjectiveStatus {
        self.objective.status
    }
    /// Whether `principal` was assigned a task of it, in any plan version (O13).
    pub fn was_assigned(&self, principal: &PrincipalId) -> bool {
        self.objective
            .plans
            .iter()
            .flat_map(|plan| plan.tasks())
            .any(|task| task.assignee() == principal)
    }
    /// Whether it kept the late result of `op` (D4).
    pub fn holds(&self, op: OperationId) -> bool {
        self.held.iter().any(|h| h.op == op)
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
    /// Its objective id.
    Objective(ObjectiveId),
    /// A late result it kept (D4), by its operation.
    Held(OperationId),
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
            RecordKey::Objective(id) => format!("objective:{id}"),
            RecordKey::Held(op) => format!("held:{op}"),
            RecordKey::Contribution(id) => format!("contribution:{id}"),
            RecordKey::OwnerMessage(id) => format!("event:{id}"),
            RecordKey::Content(digest) => format!("content:{}", digest.as_str()),
        }
    }

    /// Every key of `record`, each once, in order.
    pub fn of(record: &ObjectiveRecord) -> Vec<RecordKey> {
        let objective = &record.objective;
        let mut keys = vec![
            RecordKey::Objective(objective.id()),
            RecordKey::OwnerMessage(objective.origin()),
        ];
        keys.extend(record.held.iter().map(|h| RecordKey::Held(h.op)));
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
    /// The record of the closed objective that kept the late result of `op` (D4).
    fn holding(&self, op: OperationId) -> Option<&ObjectiveRecord>;
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
    fn holding(&self, _: OperationId) -> Option<&ObjectiveRecord> {
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
    fn holding(&self, op: OperationId) -> Option<&ObjectiveRecord> {
        self.iter().find(|r| r.holds(op))
    }
}
