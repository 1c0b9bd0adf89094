//! The tools of reviewers: a report version with its sources, and a review with evidence per
//! criterion.

use agentroom_coordinator::{HumanReview, OperatorInput};
use agentroom_domain::ids::CriterionId;
use agentroom_domain::objective::ObservedRevisions;
use agentroom_domain::review::{CriterionVerdict, Verdict};
use agentroom_domain::room::Permission;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use agentroom_domain::ids::ObjectiveId;
use agentroom_domain::state::RoomState;

use super::specialist::objective_id;
use super::{Applied, Checked, MAX_TEXT_CHARS, applied, check_key, check_length, criteria, json};
use crate::{RoomTools, ToolError};

/// `read_report`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadReport {
    /// The objective.
    pub objective: String,
    /// The report version, from 1; absent: the latest.
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
}

/// A source a report cites, with what the Room holds of it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReportSource {
    /// `document`, `contribution` or `external`.
    pub kind: String,
    /// The id a verdict names it by (a document's id, a contribution's id); none for an
    /// external reference.
    pub id: Option<String>,
    /// Where it is.
    pub uri: Option<String>,
    /// Its title (a cited contribution's task and author).
    pub title: Option<String>,
    /// The words relied on: a document's excerpt, a cited contribution's body (what a `met`
    /// may quote, R7).
    pub excerpt: Option<String>,
    /// When it was read, in Unix milliseconds.
    pub retrieved_at: Option<i64>,
    /// The digest of the whole document as read.
    pub content_digest: Option<String>,
    /// The digest its excerpt is stored under.
    pub excerpt_digest: Option<String>,
}

/// A criterion of the objective.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CriterionView {
    /// Its id (what a verdict names).
    pub id: String,
    /// What must hold.
    pub text: String,
}

/// The revisions a review is made against.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    /// The objective's revision.
    pub objective: u64,
    /// Its control revision.
    pub control: u64,
}

/// A review of the report version, in brief.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReviewBrief {
    /// Who reviewed.
    pub reviewer: String,
    /// `completed`, `waiting_for_owner`, `corrective` and so on: the review's outcome.
    pub outcome: serde_json::Value,
    /// One verdict per criterion, with its evidence.
    pub verdicts: serde_json::Value,
}

/// `read_report`'s answer: what `GET …/objectives/{objective}/reviews` shows of one report
/// version.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReportVersion {
    /// The objective.
    pub objective: String,
    /// Its status.
    pub status: String,
    /// Its criteria: a review gives each exactly one verdict (R2).
    pub criteria: Vec<CriterionView>,
    /// The objective's revisions now (a review binds them, R6).
    pub observed: Observed,
    /// The report version, from 1.
    pub version: u32,
    /// How many report versions the objective has.
    pub versions: u32,
    /// Whether this version awaits a review now.
    pub awaiting_review: bool,
    /// The report task.
    pub task: String,
    /// The report's contribution.
    pub contribution: String,
    /// The digest over its sources (R2: a review binds it).
    pub source_set_digest: String,
    /// Its author (R1: who may not review it).
    pub author: Option<String>,
    /// Its body, when the Room holds it.
    pub body: Option<String>,
    /// How to read the body.
    pub media_type: Option<String>,
    /// The digest the body is stored under.
    pub body_digest: Option<String>,
    /// What it cites, with excerpts, addresses and digests.
    pub sources: Vec<ReportSource>,
    /// The reviews of this version so far.
    pub reviews: Vec<ReviewBrief>,
}

/// A criterion's verdict as a reviewer gives it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictInput {
    /// The report meets it.
    Met,
    /// It does not (R3: corrective planning).
    Unmet,
    /// Cannot tell (R5: the owner is asked).
    Unknown,
}

/// One criterion's verdict with its evidence (REST's `VerdictBody`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerdictEntry {
    /// The criterion's id.
    #[schemars(length(min = 1, max = 64))]
    pub criterion: String,
    /// The verdict.
    pub verdict: VerdictInput,
    /// The evidence, in your words.
    #[schemars(length(max = 16000))]
    pub evidence: String,
    /// The ids of the report version's sources it rests on (R7: a `met` names at least one;
    /// each must be a source of that version).
    #[serde(default)]
    pub sources: Vec<String>,
    /// The words that prove a `met`, copied from the report or the excerpt of a source it
    /// names (R7: otherwise the `met` is recorded as `unknown`).
    #[serde(default)]
    pub quote: Option<String>,
}

/// `record_review`'s input (REST's `ReviewBody`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordReview {
    /// The objective.
    pub objective: String,
    /// The report version reviewed (the one awaiting review, R2).
    #[schemars(range(min = 1))]
    pub report_version: u32,
    /// The objective's revisions you observed (`read_report`'s `observed`, R6).
    pub observed: Observed,
    /// One verdict per criterion.
    pub verdicts: Vec<VerdictEntry>,
    /// A key of your choosing: the same key and review are decided once.
    #[schemars(length(min = 1, max = 128))]
    pub idempotency_key: Option<String>,
}

impl RoomTools {
    /// Report `version` (the latest without one) of `id` in `state`, as a reader with
    /// `report.read` sees it: `read_report`'s answer and the report resource's content.
    pub(crate) async fn report_version(
        &self,
        state: &RoomState,
        id: ObjectiveId,
        version: Option<u32>,
    ) -> Result<ReportVersion, ToolError> {
        let objective = state
            .objective(id)
            .ok_or_else(|| ToolError::NotFound(format!("no objective {id} in this room")))?;
        let reports = objective.reports();
        let report = match version {
            Some(version) => reports.iter().find(|r| r.version == version),
            None => reports.iter().max_by_key(|r| r.version),
        }
        .ok_or_else(|| match version {
            Some(version) => {
                ToolError::NotFound(format!("objective {id} has no report version {version}"))
            }
            None => ToolError::NotFound(format!("objective {id} has no report yet")),
        })?;
        let content = match state.contributions().get(&report.contribution) {
            Some(contribution) => Some(self.coordinator.report_content(state, contribution).await?),
            None => None,
        };
        let observed = objective.observed();
        let mut reviews = Vec::new();
        for review in objective
            .reviews()
            .iter()
            .filter(|r| r.report().version == report.version)
        {
            reviews.push(ReviewBrief {
                reviewer: review.reviewer().to_string(),
                outcome: json(&review.outcome())?,
                verdicts: json(&review.verdicts())?,
            });
        }
        let (author, body, media_type, body_digest, sources) = match content {
            Some(content) => (
                Some(content.author.to_string()),
                content.body,
                content.media_type,
                content.body_digest,
                content
                    .sources
                    .into_iter()
                    .map(|s| ReportSource {
                        kind: s.kind.as_str().to_owned(),
                        id: s.id,
                        uri: s.uri,
                        title: s.title,
                        excerpt: s.excerpt,
                        retrieved_at: s.retrieved_at,
                        content_digest: s.content_digest,
                        excerpt_digest: s.excerpt_digest,
                    })
                    .collect(),
            ),
            None => (None, None, None, None, Vec::new()),
        };
        Ok(ReportVersion {
            objective: id.to_string(),
            status: objective.status().as_str().to_owned(),
            criteria: criteria(objective),
            observed: Observed {
                objective: observed.objective,
                control: observed.control,
            },
            version: report.version,
            versions: reports.iter().map(|r| r.version).max().unwrap_or_default(),
            awaiting_review: objective
                .awaiting_review()
                .is_some_and(|awaited| awaited.report() == report),
            task: report.task.to_string(),
            contribution: report.contribution.to_string(),
            source_set_digest: report.source_set.digest().to_owned(),
            author,
            body,
            media_type,
            body_digest,
            sources,
            reviews,
        })
    }
}

#[tool_router(router = review_router, vis = "pub(crate)")]
impl RoomTools {
    /// A report version with its body, sources, criteria and reviews.
    #[tool(
        name = "read_report",
        description = "Read a report version of an objective (GET \
                       /v1/rooms/{room}/objectives/{objective}/reviews): its body, its sources \
                       with their excerpts, addresses and digests, its source-set digest, its \
                       author, the objective's criteria, status and revisions, whether it awaits \
                       review, and its reviews. Absent a version, the latest. Needs report.read."
    )]
    pub async fn read_report(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<ReadReport>>,
    ) -> Result<Json<ReportVersion>, ToolError> {
        let input = input.input()?;
        let (caller, stored) = self.authorized(&context, Permission::ReportRead).await?;
        let id = objective_id(&input.objective)?;
        let stored = self.showing(&caller, stored, id).await?;
        Ok(Json(
            self.report_version(&stored.state, id, input.version)
                .await?,
        ))
    }

    /// Records the caller's review of the report version awaiting review.
    #[tool(
        name = "record_review",
        description = "Record your review of the report version awaiting review (POST \
                       /v1/rooms/{room}/objectives/{objective}/reviews): the version and the \
                       revisions you observed (read_report), one verdict per criterion (met, \
                       unmet, unknown) with evidence, the ids of that version's sources it rests \
                       on and a quote (R7: a met without a supplied source and a quote found in \
                       the report or a source's excerpt counts as unknown). A reviewer who \
                       authored work of the objective is refused (R1); a review of another \
                       version, or missing a criterion, is refused (R2). Needs review.record."
    )]
    pub async fn record_review(
        &self,
        context: Extensions,
        Parameters(input): Parameters<Checked<RecordReview>>,
    ) -> Result<Json<Applied>, ToolError> {
        let input = input.input()?;
        check_key(input.idempotency_key.as_deref())?;
        let mut verdicts = Vec::with_capacity(input.verdicts.len());
        for v in input.verdicts {
            check_length("a verdict's evidence", &v.evidence, MAX_TEXT_CHARS)?;
            if let Some(quote) = &v.quote {
                check_length("a verdict's quote", quote, MAX_TEXT_CHARS)?;
            }
            verdicts.push(CriterionVerdict {
                criterion: CriterionId::parse(&v.criterion)
                    .map_err(|error| ToolError::InvalidInput(format!("criterion: {error}")))?,
                verdict: match v.verdict {
                    VerdictInput::Met => Verdict::Met,
                    VerdictInput::Unmet => Verdict::Unmet,
                    VerdictInput::Unknown => Verdict::Unknown,
                },
                evidence: v.evidence,
                sources: v.sources,
                quote: v.quote,
            });
        }
        let (caller, stored) = self.authorized(&context, Permission::ReviewRecord).await?;
        self.deciding("a review")?;
        let objective = objective_id(&input.objective)?;
        let stored = self.showing(&caller, stored, objective).await?;
        let submission = HumanReview {
            report_version: input.report_version,
            observed: ObservedRevisions {
                objective: input.observed.objective,
                control: input.observed.control,
            },
            verdicts,
        }
        .bind(&stored.state, objective)?;
        let id = self.input_id(
            &caller,
            input.idempotency_key.as_deref(),
            &format!("review/{objective}/{submission:?}"),
        )?;
        let outcome = self
            .coordinator
            .submit(
                &caller.room,
                id,
                OperatorInput::RecordReview {
                    by: caller.principal.clone(),
                    objective,
                    review: submission,
                },
            )
            .await?;
        Ok(Json(applied(&outcome)?))
    }
}
