//! The answers of the REST API. Fields that hold domain values carry them as the domain
//! serializes them (their schema is the JSON kind they serialize to); ids the API has always
//! written as text are `String`. Unknown fields are tolerated when parsing (a field added to
//! an answer is not a breaking change); a missing one is an error naming it.

use std::collections::BTreeMap;

use agentroom_domain::engine::{LogEntry, TaskBrief};
use agentroom_domain::ids::{
    ContributionId, MemoryEntryId, ObjectiveId, OperationId, PrincipalId, RoomId, TaskIdentity,
    TaskKey, Timestamp,
};
use agentroom_domain::ledger::{Balances, LedgerEntry, Overrun};
use agentroom_domain::objective::{Counters, Criterion, ObjectiveStatus, ObservedRevisions};
use agentroom_domain::plan::{Column, PlanTrigger, TaskKind, TaskState};
use agentroom_domain::policy::ReviewSource;
use agentroom_domain::redaction::Redaction;
use agentroom_domain::review::{Artifact, CriterionVerdict, ReportRef, ReviewOutcome, SourceSet};
use agentroom_domain::room::Role;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::requests::{MemoryProvenance, RedactionTargetBody, ResolvedAs};

/// A page of a list: `{"items": [...], "next_cursor": "..." | null}`; pass `next_cursor` as
/// `?cursor=` for the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// This page's items.
    pub items: Vec<T>,
    /// The cursor of the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// Who is calling, as `GET /v1/rooms/{room}` tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct You {
    /// The token's principal.
    #[schema(value_type = String)]
    pub principal: PrincipalId,
    /// Its current roles in the Room.
    #[schema(value_type = Vec<String>)]
    pub roles: Vec<Role>,
}

/// An objective in brief.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectiveBrief {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its status.
    #[schema(value_type = String)]
    pub status: ObjectiveStatus,
    /// The owner who set it.
    #[schema(value_type = String)]
    pub owner: PrincipalId,
    /// Bumps on plan admission, owner correction, criteria change.
    pub revision: u64,
    /// Bumps on pause, resume, cancel.
    pub control_revision: u64,
    /// How many plan versions it has.
    pub plan_versions: usize,
}

/// `GET /v1/rooms/{room}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RoomView {
    /// The Room's id.
    #[schema(value_type = String)]
    pub room: RoomId,
    /// Its revision.
    pub revision: i64,
    /// The caller.
    pub you: You,
    /// How many members it has.
    pub members: usize,
    /// Its objectives in brief.
    pub objectives: Vec<ObjectiveBrief>,
    /// Its balances, for callers who may read the budget (null otherwise).
    #[schema(value_type = Option<Object>)]
    pub budget: Option<Balances>,
    /// Who reviews reports: the model or a human.
    #[schema(value_type = String)]
    pub review_source: ReviewSource,
    /// Owner messages not yet answered or made objectives: interpreting, waiting for the
    /// provider, or waiting for a person.
    #[serde(default)]
    pub pending_messages: Vec<PendingMessage>,
    /// The Room's per-role quotes, and each role whose quote is below the model this host
    /// serves it with (B6): no call of that role is admitted until an operator updates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes: Option<QuotesView>,
}

/// A Room's quotes against what the host serves (B6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QuotesView {
    /// What one reasoner call reserves, in micros.
    pub reasoner_micros: i64,
    /// What one specialist call reserves, in micros.
    pub specialist_micros: i64,
    /// What one review call reserves, in micros.
    pub reviewer_micros: i64,
    /// Each role whose quote does not cover its model, and the fix; empty when every call
    /// may be admitted.
    pub short: Vec<String>,
}

/// One version of a memory entry's text: the first as added, each later one a correction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryVersionView {
    /// The text.
    pub text: String,
    /// Who wrote it.
    #[schema(value_type = String)]
    pub by: PrincipalId,
    /// When, in milliseconds since the Unix epoch.
    pub at: i64,
}

/// Who retracted a memory entry, when and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RetractionView {
    /// Who retracted it.
    #[schema(value_type = String)]
    pub by: PrincipalId,
    /// When, in milliseconds since the Unix epoch.
    pub at: i64,
    /// Why.
    pub why: String,
}

/// A memory entry (M1): its current text, what it came from, who added it and when, every
/// version of its text, and its retraction when retracted (a retracted entry never reaches
/// a model, and stays listed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryEntryView {
    /// Its id.
    #[schema(value_type = String, format = "uuid")]
    pub id: MemoryEntryId,
    /// Its current text.
    pub text: String,
    /// What it came from.
    pub provenance: MemoryProvenance,
    /// Who added it.
    #[schema(value_type = String)]
    pub added_by: PrincipalId,
    /// When, in milliseconds since the Unix epoch.
    pub added_at: i64,
    /// Every version of its text, the first as added.
    pub versions: Vec<MemoryVersionView>,
    /// Who retracted it, when and why; absent while it is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retracted: Option<RetractionView>,
    /// Who redacted it, when and why, and the digest of the text removed; its texts then all
    /// read `[redacted]`. Absent unless redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<RedactionView>,
}

/// A redaction record: what was removed, by whom, when, why, and the digest of what was
/// removed (an artifact's own digest; for a memory entry, the digest of its current text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RedactionView {
    /// What was redacted.
    pub target: RedactionTargetBody,
    /// Who redacted it.
    #[schema(value_type = String)]
    pub by: PrincipalId,
    /// When, in milliseconds since the Unix epoch.
    pub at: i64,
    /// Why.
    pub why: String,
    /// `sha256:…` of what was removed.
    pub old_digest: String,
}

impl From<&Redaction> for RedactionView {
    fn from(record: &Redaction) -> Self {
        RedactionView {
            target: record.target.clone().into(),
            by: record.by.clone(),
            at: record.at.as_millis(),
            why: record.why.clone(),
            old_digest: record.old_digest.to_string(),
        }
    }
}

/// `GET …/contents/{digest}`: content of the Room as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ContentView {
    /// Its address.
    pub digest: String,
    /// How to read it, e.g. `text/markdown`.
    pub media_type: String,
    /// The content (UTF-8; bytes that are not are replaced).
    pub text: String,
}

/// One member: a principal and its roles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Member {
    /// The principal.
    #[schema(value_type = String)]
    pub principal: PrincipalId,
    /// Its roles.
    #[schema(value_type = Vec<String>)]
    pub roles: Vec<Role>,
}

/// A task on a board or in a plan version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    /// Its identity (O3, O4).
    #[schema(value_type = String)]
    pub identity: TaskIdentity,
    /// Its key in the plan.
    #[schema(value_type = String)]
    pub key: TaskKey,
    /// Its title.
    pub title: String,
    /// The capability it requires.
    pub capability: String,
    /// `production` or `report`.
    #[schema(value_type = String)]
    pub kind: TaskKind,
    /// The principal it is assigned to.
    #[schema(value_type = String)]
    pub assignee: PrincipalId,
    /// The keys it depends on.
    #[schema(value_type = Vec<String>)]
    pub deps: Vec<TaskKey>,
    /// Its planning column.
    #[schema(value_type = String)]
    pub column: Column,
    /// The engine's state of it.
    #[schema(value_type = Object)]
    pub state: TaskState,
    /// Whether it was carried over unchanged from the previous version (O3).
    pub reused: bool,
    /// Its call, while one runs: running, waiting for the provider or uncertain, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallStatus>,
}

/// A call the Room holds open, as people read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallStatus {
    /// The operation.
    pub op: String,
    /// `running`, `waiting_for_provider` (nothing reached the provider yet: retried with
    /// backoff, its reservation held), `stopping` (asked to abort) or `uncertain` (it may have
    /// run; an operator resolves it).
    pub status: String,
    /// Why it waits or is uncertain: the provider's status and message, or the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Since when (milliseconds since the Unix epoch), with the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}

/// An owner message the Room has not turned into an answer or an objective yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PendingMessage {
    /// The message's event id.
    pub event: String,
    /// Its text (the first 200 characters).
    pub text: String,
    /// Interpretations reserved so far (O11).
    pub attempts: u32,
    /// The interpretation's call, while one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallStatus>,
    /// Why it waits for a person (its provider failed it): retry it with
    /// `POST /v1/rooms/{room}/messages/{event}/retry` once the provider is back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// One column of a board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BoardColumn {
    /// The column.
    #[schema(value_type = String)]
    pub column: Column,
    /// The tasks in it the caller may see.
    pub tasks: Vec<TaskView>,
}

/// The board of an objective's current plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Board {
    /// The plan version shown.
    pub plan_version: u32,
    /// Its columns, in order.
    pub columns: Vec<BoardColumn>,
}

/// `GET …/objectives/{objective}`: the objective, its criteria and its current board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ObjectiveDetail {
    /// The objective in brief.
    #[serde(flatten)]
    pub brief: ObjectiveBrief,
    /// Its criteria.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Criterion>,
    /// Its bounded counters (O8, O11, R4).
    #[schema(value_type = Object)]
    pub counters: Counters,
    /// Its current revisions.
    #[schema(value_type = Object)]
    pub observed: ObservedRevisions,
    /// Its current plan's board; null before the first plan.
    pub board: Option<Board>,
    /// The report awaiting review, if one.
    #[schema(value_type = Option<Object>)]
    pub awaiting_review: Option<ReportRef>,
}

/// How a plan version differs from its predecessor, by task key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanDiff {
    /// Keys new in this version.
    pub added: Vec<String>,
    /// Keys gone from it.
    pub removed: Vec<String>,
    /// Keys whose spec changed.
    pub changed: Vec<String>,
    /// Keys whose spec did not change.
    pub unchanged: Vec<String>,
    /// Keys carried over with their result (O3).
    pub reused: Vec<String>,
}

/// One plan version of an objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanVersionView {
    /// Its id.
    pub id: String,
    /// Its number, from 1.
    pub number: u32,
    /// The version it succeeds.
    pub predecessor: Option<String>,
    /// What triggered it.
    #[schema(value_type = Object)]
    pub trigger: PlanTrigger,
    /// The revisions it was proposed against.
    #[schema(value_type = Object)]
    pub observed: ObservedRevisions,
    /// The reasoner's explanation.
    pub explanation: String,
    /// Whether it is the current one (O2).
    pub current: bool,
    /// Its tasks the caller may see.
    pub tasks: Vec<TaskView>,
    /// Its difference from its predecessor.
    pub diff: PlanDiff,
}

/// One entry of an objective's decision log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Decided {
    /// The Room revision after the commit.
    pub revision: i64,
    /// The kind of input decided.
    pub input: String,
    /// The entry: objective, verdict, rule, message, time.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub entry: LogEntry,
}

/// A source as a reader sees it: a document with its excerpt, a cited contribution, or a
/// bare external reference.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SourceView {
    /// `document`, `contribution` or `external`.
    pub kind: String,
    /// The id verdicts name it by (a document's id, a contribution's id).
    pub id: Option<String>,
    /// Where it is.
    pub uri: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// The words the contribution relies on (a document's excerpt).
    pub excerpt: Option<String>,
    /// When it was read, in Unix milliseconds.
    pub retrieved_at: Option<i64>,
    /// The digest of the whole document as read.
    pub content_digest: Option<String>,
    /// The digest its excerpt is stored under.
    pub excerpt_digest: Option<String>,
}

/// What a contribution holds, with its content read from the Room's store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReportContent {
    /// Its author.
    #[schema(value_type = String)]
    pub author: PrincipalId,
    /// Its body (text or Markdown), when it has one and the Room holds it.
    pub body: Option<String>,
    /// How to read the body.
    pub media_type: Option<String>,
    /// The digest the body is stored under.
    pub body_digest: Option<String>,
    /// Named pieces, for contributions made before bodies.
    #[schema(value_type = Vec<Object>)]
    pub artifacts: Vec<Artifact>,
    /// What it cites.
    pub sources: Vec<SourceView>,
    /// Its outputs by name, when it has any.
    #[schema(value_type = Option<Object>)]
    pub outputs: Option<serde_json::Value>,
}

/// One report version of an objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReportView {
    /// Its version, from 1.
    pub version: u32,
    /// The report task.
    #[schema(value_type = String)]
    pub task: TaskIdentity,
    /// Its contribution.
    pub contribution: String,
    /// What it cites, with its digest.
    #[schema(value_type = Object)]
    pub source_set: SourceSet,
    /// Its content, when the Room holds it.
    pub content: Option<ReportContent>,
}

/// One review of a report version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReviewView {
    /// Its id.
    pub id: String,
    /// Who reviewed.
    #[schema(value_type = String)]
    pub reviewer: PrincipalId,
    /// The report version reviewed.
    pub report_version: u32,
    /// The exact report reviewed (R2).
    #[schema(value_type = Object)]
    pub report: ReportRef,
    /// One verdict per criterion.
    #[schema(value_type = Vec<Object>)]
    pub verdicts: Vec<CriterionVerdict>,
    /// The outcome.
    #[schema(value_type = String)]
    pub outcome: ReviewOutcome,
    /// The model that produced it, for a model reviewer's review (null for a person's).
    #[serde(default)]
    pub model: Option<String>,
}

/// `GET …/contributions/{contribution}`: a specialist's persisted result, with what it cites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContributionView {
    /// Its id.
    pub id: String,
    /// The objective it belongs to.
    pub objective: String,
    /// The task identity it was produced for.
    #[schema(value_type = String)]
    pub task: TaskIdentity,
    /// The call that produced it.
    pub operation: String,
    /// Its content: body, sources with their excerpts, outputs.
    #[serde(flatten)]
    pub content: ReportContent,
    /// `sha256:` over its content's digests, to tell an unchanged report.
    pub content_digest: String,
    /// The redaction records of content it names (that content reads as absent); absent
    /// when none of it was redacted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<RedactionView>,
}

/// `GET …/objectives/{objective}/reviews`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reviews {
    /// The objective.
    pub objective: String,
    /// Its criteria.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Criterion>,
    /// Its current revisions.
    #[schema(value_type = Object)]
    pub observed: ObservedRevisions,
    /// The report awaiting review, if one.
    #[schema(value_type = Option<Object>)]
    pub awaiting_review: Option<ReportRef>,
    /// Its report versions.
    pub reports: Vec<ReportView>,
    /// Their reviews.
    pub reviews: Vec<ReviewView>,
}

/// One owner correction of an objective (O14): only the owner's corrections enter the
/// history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CorrectionView {
    /// The persisted event.
    pub event: String,
    /// Who posted it: the owner.
    #[schema(value_type = String)]
    pub author: PrincipalId,
    /// What the owner said.
    pub text: String,
    /// The criteria it froze instead of the earlier ones; null when it kept them.
    #[schema(value_type = Option<Vec<Object>>)]
    pub criteria: Option<Vec<Criterion>>,
    /// The plan version it led to; null until one was admitted.
    pub plan_version: Option<u32>,
}

/// `GET …/objectives/{objective}/corrections`: the correction history, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Corrections {
    /// The objective.
    pub objective: String,
    /// Its criteria now.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Criterion>,
    /// The corrections, oldest first.
    pub items: Vec<CorrectionView>,
}

/// A result held after a control change (D4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LateResult {
    /// The operation that produced it.
    #[schema(value_type = String)]
    pub op: OperationId,
    /// The objective.
    #[schema(value_type = String)]
    pub objective: ObjectiveId,
    /// The task.
    #[schema(value_type = String)]
    pub task: TaskIdentity,
    /// The contribution held.
    #[schema(value_type = String)]
    pub contribution: ContributionId,
}

/// `GET …/budget`: balances, overrun, spend by objective, role, principal and model, and a
/// page of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Budget {
    /// The ledger's balances, in micros.
    #[schema(value_type = Object)]
    pub balances: Balances,
    /// The overrun, if admissions stopped (B5).
    #[schema(value_type = Option<Object>)]
    pub overrun: Option<Overrun>,
    /// Micros charged per objective.
    pub spent_micros_by_objective: BTreeMap<String, i64>,
    /// Micros charged per call role.
    pub spent_micros_by_role: BTreeMap<String, i64>,
    /// Micros charged per principal.
    pub spent_micros_by_principal: BTreeMap<String, i64>,
    /// Micros charged per model.
    pub spent_micros_by_model: BTreeMap<String, i64>,
    /// This page of the ledger entries.
    #[schema(value_type = Vec<Object>)]
    pub entries: Vec<LedgerEntry>,
    /// The cursor of the next page of entries; null on the last.
    pub next_cursor: Option<String>,
    /// The budget pool the Room draws on (B8): a call is admitted only when both the Room
    /// and the pool can hold it. Null when the Room draws on none.
    #[serde(default)]
    pub pool: Option<PoolGauge>,
}

/// The gauge of a budget pool a Room draws on (B8): its balances and overrun. The pool is
/// the host's, shared by every Room attached to it; its administrator raises or
/// acknowledges it (`agentroom pool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolGauge {
    /// The pool's id.
    pub id: String,
    /// Its balances, in micros (B2).
    #[schema(value_type = Object)]
    pub balances: Balances,
    /// Its overrun, if it stopped admissions in every Room drawing on it (B5).
    #[schema(value_type = Option<Object>)]
    pub overrun: Option<Overrun>,
}

/// What a decided input answers: the revision and the decision log (its first entry is the
/// verdict on the request; later ones are what it set off). A retry of an input decided
/// before answers `decided: false, already_done: true` with the original revision and log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Decision {
    /// Whether this request was decided now.
    pub decided: bool,
    /// Whether it was decided before (an Idempotency-Key retry).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_done: bool,
    /// The revision that committed the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Whether every log entry is an acceptance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// The decision log.
    #[schema(value_type = Vec<Object>)]
    pub log: Vec<LogEntry>,
    /// On `POST …/events`: the event's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
}

/// A bearer token just issued: its text is shown here once and never again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IssuedTokenView {
    /// Its id (the 16 hex digits after `ar_`), for `agentroom token revoke`.
    pub id: String,
    /// The principal it authenticates.
    #[schema(value_type = String)]
    pub principal: PrincipalId,
    /// The token (`ar_…`): hand it to its holder; it cannot be shown again.
    pub token: String,
    /// When it expires, in Unix milliseconds; null: never.
    pub expires_at: Option<i64>,
}

/// `POST …/members`: the decision, and the new member's first token when one was asked for
/// and the member was added by this request (a retry of the same Idempotency-Key issues none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberAdded {
    /// The decision.
    pub decision: Decision,
    /// The first token, shown once; null when none was asked for or issued.
    pub token: Option<IssuedTokenView>,
}

/// An uncertain or dead-lettered operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OperationView {
    /// Its id.
    pub op: String,
    /// `uncertain` or `dead_letter`.
    pub status: String,
    /// The call's role.
    pub role: String,
    /// The principal called.
    #[schema(value_type = Option<String>)]
    pub principal: Option<PrincipalId>,
    /// The objective.
    pub objective: Option<String>,
    /// Its reservation.
    pub reservation_micros: i64,
    /// How often recovery tried it.
    pub recovery_attempts: u32,
    /// Why it was dead-lettered.
    pub dead_letter_reason: Option<String>,
    /// Why it is uncertain, as the Room recorded it (a status, a broken connection, an expired
    /// lease).
    #[serde(default)]
    pub cause: Option<String>,
}

/// What an operator recorded about an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ResolutionView {
    /// What was confirmed.
    pub outcome: ResolvedAs,
    /// The operator on record.
    pub operator: String,
    /// Why.
    pub reason: String,
    /// When.
    #[schema(value_type = i64)]
    pub at: Timestamp,
}

/// `POST …/operations/{operation}/resolve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Resolved {
    /// The operation.
    pub op: String,
    /// What was recorded.
    pub resolution: ResolutionView,
    /// When it applies.
    pub applied: String,
}

/// Hosted specialist work waiting for the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AssignmentView {
    /// The call's operation.
    #[schema(value_type = String)]
    pub operation: OperationId,
    /// The objective.
    #[schema(value_type = Option<String>)]
    pub objective: Option<ObjectiveId>,
    /// Its reservation.
    pub reservation_micros: i64,
    /// The task: its identity, inputs and the contributions it may cite.
    #[schema(value_type = Object)]
    pub task: TaskBrief,
    /// What the work may use of the Room (C1): the objective, the owner's request, the
    /// criteria, the capability with its declared outputs, and its dependencies' content with
    /// their sources and excerpts.
    pub context: Vec<ContextItemView>,
}

/// One piece of Room content a call sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ContextItemView {
    /// What it is: `objective`, `owner_message`, `criteria`, `capability`, `dependency`,
    /// `source`, ….
    pub kind: String,
    /// Its id, where it has one (a source id, a contribution id, a capability name).
    pub id: String,
    /// Facts about it: `uri`, `title`, `task`, `author`, `cited_by`, ….
    pub attrs: std::collections::BTreeMap<String, String>,
    /// Its text.
    pub text: String,
    /// The digest of its text.
    pub digest: String,
}

/// `POST …/assignments/{operation}/result`: recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Recorded {
    /// The operation.
    #[schema(value_type = String)]
    pub operation: OperationId,
    /// Always true.
    pub recorded: bool,
}
