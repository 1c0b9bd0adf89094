//! Human reviews and what reviewers read, as the service offers them to every edge (REST's
//! `…/reviews` and contribution endpoints, the MCP tools `read_report` and `record_review`):
//! a review bound to the exact report version it names (R2), its evidence naming sources of
//! that version (R7); a contribution's content read from the Room's store, redacted content
//! never shown, and a report's cited contributions read as its sources' excerpts (what a
//! verdict may quote). Whether a reviewer may review (R1) and what a verdict proves (R7) is
//! the domain's to decide when the review is submitted.

use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::engine::InputError;
use agentroom_ports::domain::ids::{ObjectiveId, PrincipalId};
use agentroom_ports::domain::objective::ObservedRevisions;
use agentroom_ports::domain::review::{
    Artifact, Contribution, CriterionVerdict, ReviewSubmission, Source,
};
use agentroom_ports::domain::state::RoomState;

use crate::{Coordinator, CoordinatorError};

/// A person's review as an edge reads it, before it is bound to its report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanReview {
    /// The report version reviewed, from 1.
    pub report_version: u32,
    /// The objective's revisions the reviewer observed (R6).
    pub observed: ObservedRevisions,
    /// One verdict per criterion, with its evidence.
    pub verdicts: Vec<CriterionVerdict>,
}

impl HumanReview {
    /// The submission this review makes for `objective` of `state`: bound to the exact report
    /// version it names (R2; [`CoordinatorError::NoReportVersion`] when there is none), each
    /// verdict's sources among that version's ([`CoordinatorError::UnknownEvidenceSource`],
    /// R7: refused as written; a quote that is not found is the domain's to decide).
    pub fn bind(
        self,
        state: &RoomState,
        objective: ObjectiveId,
    ) -> Result<ReviewSubmission, CoordinatorError> {
        let found = state
            .objective(objective)
            .ok_or(InputError::UnknownObjective(objective))?;
        let report = found
            .reports()
            .iter()
            .find(|r| r.version == self.report_version)
            .cloned()
            .ok_or(CoordinatorError::NoReportVersion {
                objective,
                version: self.report_version,
            })?;
        if let Some(contribution) = state.contributions().get(&report.contribution) {
            let known: Vec<String> = contribution
                .sources()
                .iter()
                .filter_map(Source::id)
                .collect();
            for verdict in &self.verdicts {
                if let Some(unknown) = verdict.sources.iter().find(|s| !known.contains(s)) {
                    return Err(CoordinatorError::UnknownEvidenceSource {
                        criterion: verdict.criterion.to_string(),
                        source_id: unknown.clone(),
                        version: report.version,
                        known,
                    });
                }
            }
        }
        Ok(ReviewSubmission {
            model: None,
            report,
            observed: self.observed,
            verdicts: self.verdicts,
        })
    }
}

/// What kind of source a contribution cites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A document with its excerpt.
    Document,
    /// Another contribution of the Room.
    Contribution,
    /// An external reference by address and digest.
    External,
}

impl SourceKind {
    /// Its name on the wire: `document`, `contribution` or `external`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Document => "document",
            SourceKind::Contribution => "contribution",
            SourceKind::External => "external",
        }
    }
}

/// A source a contribution cites, with what the Room holds of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceContent {
    /// Its kind.
    pub kind: SourceKind,
    /// The id verdicts name it by (a document's id, a contribution's id).
    pub id: Option<String>,
    /// Where it is.
    pub uri: Option<String>,
    /// Its title (for a report's cited contribution: its task and author).
    pub title: Option<String>,
    /// The words relied on: a document's excerpt; for a report's cited contribution, its
    /// body.
    pub excerpt: Option<String>,
    /// When it was read, in Unix milliseconds.
    pub retrieved_at: Option<i64>,
    /// The digest of the whole document as read.
    pub content_digest: Option<String>,
    /// The digest its excerpt is stored under.
    pub excerpt_digest: Option<String>,
}

/// What a contribution holds, its content read from the Room's store (redacted content
/// left out).
#[derive(Debug, Clone, PartialEq)]
pub struct ContributionContent {
    /// Its author.
    pub author: PrincipalId,
    /// Its body, when it has one and the Room holds it.
    pub body: Option<String>,
    /// How to read the body.
    pub media_type: Option<String>,
    /// The digest the body is stored under.
    pub body_digest: Option<String>,
    /// Named pieces, for contributions made before bodies.
    pub artifacts: Vec<Artifact>,
    /// What it cites.
    pub sources: Vec<SourceContent>,
    /// Its outputs by name, when it has any.
    pub outputs: Option<serde_json::Value>,
}

impl Coordinator {
    /// What `contribution` of the Room `state` holds, its content read from the store.
    /// Redacted content is never shown, even should its bytes be in the store again.
    pub async fn contribution_content(
        &self,
        state: &RoomState,
        contribution: &Contribution,
    ) -> Result<ContributionContent, CoordinatorError> {
        let redactions = state.redactions();
        let shown: Vec<&ContentDigest> = contribution
            .digests()
            .into_iter()
            .filter(|digest| redactions.of_content(digest).is_none())
            .collect();
        let texts = self.texts(state.room(), shown).await?;
        let text = |digest: &ContentDigest| texts.get(digest).cloned();
        let sources = contribution
            .sources()
            .iter()
            .map(|source| match source {
                Source::Document(d) => SourceContent {
                    kind: SourceKind::Document,
                    id: Some(d.id.clone()),
                    uri: Some(d.uri.clone()),
                    title: Some(d.title.clone()),
                    excerpt: text(&d.excerpt),
                    retrieved_at: Some(d.retrieved_at.as_millis()),
                    content_digest: Some(d.content_digest.to_string()),
                    excerpt_digest: Some(d.excerpt.to_string()),
                },
                Source::Contribution { id } => SourceContent {
                    id: Some(id.to_string()),
                    ..SourceContent::empty(SourceKind::Contribution)
                },
                Source::External { url, digest } => SourceContent {
                    uri: Some(url.clone()),
                    content_digest: Some(digest.clone()),
                    ..SourceContent::empty(SourceKind::External)
                },
            })
            .collect();
        Ok(ContributionContent {
            author: contribution.author().clone(),
            body: contribution.body().and_then(|b| text(&b.digest)),
            media_type: contribution.body().map(|b| b.media_type.clone()),
            body_digest: contribution.body().map(|b| b.digest.to_string()),
            artifacts: contribution.artifacts().to_vec(),
            sources,
            outputs: contribution
                .outputs()
                .and_then(|o| text(&o.digest))
                .and_then(|json| serde_json::from_str(&json).ok()),
        })
    }

    /// A report's content for its reviewers: as [`Coordinator::contribution_content`], with
    /// every cited contribution's body as that source's excerpt and its task and author as
    /// its title (what a verdict may quote, R7).
    pub async fn report_content(
        &self,
        state: &RoomState,
        report: &Contribution,
    ) -> Result<ContributionContent, CoordinatorError> {
        let mut content = self.contribution_content(state, report).await?;
        let contributions = state.contributions();
        for source in &mut content.sources {
            let cited = source
                .id
                .as_deref()
                .filter(|_| source.kind == SourceKind::Contribution)
                .and_then(|id| id.parse().ok())
                .and_then(|id| contributions.get(&id));
            if let Some(cited) = cited {
                let body = self.contribution_content(state, cited).await?;
                source.title = Some(format!("{} by {}", cited.task(), cited.author()));
                source.excerpt = body.body;
            }
        }
        Ok(content)
    }
}

impl SourceContent {
    /// A source of `kind` with nothing known of it yet.
    fn empty(kind: SourceKind) -> Self {
        SourceContent {
            kind,
            id: None,
            uri: None,
            title: None,
            excerpt: None,
            retrieved_at: None,
            content_digest: None,
            excerpt_digest: None,
        }
    }
}
