//! Contributions, source-bound report references and reviews (R1, R2).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{
    ContributionId, CriterionId, ObjectiveId, OperationId, PrincipalId, ReviewId, TaskIdentity,
};
use crate::objective::ObservedRevisions;

/// A named piece of a contribution's output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Artifact {
    /// Its name, e.g. `summary`.
    pub name: String,
    /// Its content.
    pub content: String,
}

/// What a contribution cites.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// Another contribution of the same objective.
    Contribution {
        /// The cited contribution.
        id: ContributionId,
    },
    /// An external document, bound by the digest of the content that was read.
    External {
        /// Where it is.
        url: String,
        /// The digest of its content as read, e.g. `sha256:…`.
        digest: String,
    },
}

/// A result a specialist returns for a task, persisted by the host before it is decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContributionDraft {
    /// The persisted contribution's id.
    pub id: ContributionId,
    /// What it produced.
    pub artifacts: Vec<Artifact>,
    /// What it cites.
    pub sources: Vec<Source>,
}

/// A specialist's persisted result for a task identity (T2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contribution {
    pub(crate) id: ContributionId,
    pub(crate) objective: ObjectiveId,
    pub(crate) task: TaskIdentity,
    pub(crate) op: OperationId,
    pub(crate) author: PrincipalId,
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) sources: Vec<Source>,
}

impl Contribution {
    /// Its id.
    pub fn id(&self) -> ContributionId {
        self.id
    }
    /// The objective it belongs to.
    pub fn objective(&self) -> ObjectiveId {
        self.objective
    }
    /// The task identity it was produced for.
    pub fn task(&self) -> &TaskIdentity {
        &self.task
    }
    /// The operation that produced it.
    pub fn op(&self) -> OperationId {
        self.op
    }
    /// The specialist who authored it.
    pub fn author(&self) -> &PrincipalId {
        &self.author
    }
    /// What it produced.
    pub fn artifacts(&self) -> &[Artifact] {
        &self.artifacts
    }
    /// What it cites.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
    /// A digest of its content (artifacts and sources, sorted), to tell an unchanged report.
    pub fn content_digest(&self) -> String {
        let mut artifacts = self.artifacts.clone();
        artifacts.sort();
        let mut sources = self.sources.clone();
        sources.sort();
        digest_of(&(artifacts, sources))
    }
}

fn digest_of<T: Serialize>(value: &T) -> String {
    // Serializing these plain structs to JSON cannot fail; an empty string would only make
    // two digests compare unequal, never equal by mistake.
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
}

/// The sources a report cites, sorted and deduplicated, with a digest over their canonical
/// form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSet {
    sources: Vec<Source>,
    digest: String,
}

impl SourceSet {
    /// The set of `sources`, in canonical (sorted, deduplicated) order, with its digest.
    pub fn new(mut sources: Vec<Source>) -> Self {
        sources.sort();
        sources.dedup();
        let digest = digest_of(&sources);
        Self { sources, digest }
    }
    /// The sources, canonical order.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
    /// `sha256:` and the hex digest of the canonical JSON of the sources.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// The exact report a review binds (R2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRef {
    /// The report task's identity.
    pub task: TaskIdentity,
    /// The report version: 1 for the objective's first report.
    pub version: u32,
    /// The report's contribution.
    pub contribution: ContributionId,
    /// What it cites.
    pub source_set: SourceSet,
}

/// A criterion's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The report meets it.
    Met,
    /// The report does not meet it (R3).
    Unmet,
    /// The reviewer cannot tell (R5).
    Unknown,
}

/// One criterion's verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionVerdict {
    /// The criterion.
    pub criterion: CriterionId,
    /// The verdict.
    pub verdict: Verdict,
    /// What it rests on.
    pub evidence: String,
}

/// A review as a reviewer submits it; its author comes from the call or the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewSubmission {
    /// The report it binds.
    pub report: ReportRef,
    /// The revisions the reviewer observed (R6: a correction or control change fences it).
    pub observed: ObservedRevisions,
    /// One verdict per criterion.
    pub verdicts: Vec<CriterionVerdict>,
}

/// The outcome of a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewOutcome {
    /// Every criterion met: the objective completes.
    AllMet,
    /// Some criterion unmet and none unknown: corrective planning (R3).
    Unmet,
    /// Some criterion unknown: the owner decides (R5).
    Unknown,
}

/// An accepted review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub(crate) id: ReviewId,
    pub(crate) reviewer: PrincipalId,
    pub(crate) report: ReportRef,
    pub(crate) verdicts: Vec<CriterionVerdict>,
    pub(crate) outcome: ReviewOutcome,
}

impl Review {
    /// Its id.
    pub fn id(&self) -> ReviewId {
        self.id
    }
    /// Who reviewed.
    pub fn reviewer(&self) -> &PrincipalId {
        &self.reviewer
    }
    /// The report it binds.
    pub fn report(&self) -> &ReportRef {
        &self.report
    }
    /// One verdict per criterion.
    pub fn verdicts(&self) -> &[CriterionVerdict] {
        &self.verdicts
    }
    /// The outcome.
    pub fn outcome(&self) -> ReviewOutcome {
        self.outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_sets_are_canonical() {
        let a = Source::External {
            url: "https://a.example".into(),
            digest: "sha256:aa".into(),
        };
        let b = Source::External {
            url: "https://b.example".into(),
            digest: "sha256:bb".into(),
        };
        let one = SourceSet::new(vec![a.clone(), b.clone(), a.clone()]);
        let two = SourceSet::new(vec![b, a]);
        assert_eq!(one, two);
        assert!(one.digest().starts_with("sha256:"));
        assert_eq!(one.sources().len(), 2);
    }
}
