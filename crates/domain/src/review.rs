//! Contributions, source-bound report references and reviews (R1, R2).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::artifact::ContentDigest;
use crate::ids::{
    ContributionId, CriterionId, ObjectiveId, OperationId, PrincipalId, ReviewId, TaskIdentity,
    Timestamp,
};
use crate::objective::ObservedRevisions;
use crate::policy::ContentBounds;

/// A named piece of a contribution's output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Artifact {
    /// Its name, e.g. `summary`.
    pub name: String,
    /// Its content.
    pub content: String,
}

/// What a contribution cites, as the Room keeps it: content by digest, never the content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// Another contribution of the same objective.
    Contribution {
        /// The cited contribution.
        id: ContributionId,
    },
    /// An external document named only by its address and digest (contributions made before
    /// sources carried their excerpt; still accepted, with nothing for a reviewer to read).
    External {
        /// Where it is.
        url: String,
        /// The digest of its content as read, e.g. `sha256:…`.
        digest: String,
    },
    /// A document read by the author, with the excerpt it relies on.
    Document(Document),
}

impl Source {
    /// The id a verdict's evidence names this source by: the document's own id, or the
    /// cited contribution's id; `None` for a bare external reference.
    pub fn id(&self) -> Option<String> {
        match self {
            Source::Contribution { id } => Some(id.to_string()),
            Source::External { .. } => None,
            Source::Document(document) => Some(document.id.clone()),
        }
    }
}

/// A document a contribution cites (DESIGN.md "Artifact and source").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Document {
    /// Its id within the contribution (what claims and evidence cite), e.g. `s1`.
    pub id: String,
    /// Where it is.
    pub uri: String,
    /// Its title.
    pub title: String,
    /// The excerpt the author relies on, stored in the Room under this digest.
    pub excerpt: ContentDigest,
    /// When it was read.
    pub retrieved_at: Timestamp,
    /// The digest of the whole document as read.
    pub content_digest: ContentDigest,
}

/// A document as its author submits it, with its excerpt's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentDraft {
    /// Its id within the contribution, e.g. `s1`.
    pub id: String,
    /// Where it is.
    pub uri: String,
    /// Its title.
    pub title: String,
    /// The excerpt the author relies on.
    pub excerpt: String,
    /// When it was read.
    pub retrieved_at: Timestamp,
    /// The digest of the whole document as read.
    pub content_digest: ContentDigest,
}

/// What a contribution cites, as its author submits it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SourceDraft {
    /// Another contribution of the same objective.
    Contribution {
        /// The cited contribution.
        id: ContributionId,
    },
    /// An external document named only by its address and digest.
    External {
        /// Where it is.
        url: String,
        /// The digest of its content as read.
        digest: String,
    },
    /// A document with its excerpt.
    Document(DocumentDraft),
}

impl From<Source> for SourceDraft {
    /// A kept source as a draft cites it again; a document's excerpt is not at hand here,
    /// so only contributions and external references convert faithfully.
    fn from(source: Source) -> Self {
        match source {
            Source::Contribution { id } => SourceDraft::Contribution { id },
            Source::External { url, digest } => SourceDraft::External { url, digest },
            Source::Document(document) => SourceDraft::External {
                url: document.uri,
                digest: document.content_digest.to_string(),
            },
        }
    }
}

/// A body as its author submits it: text or Markdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    /// How to read it: `text/plain` or `text/markdown`.
    pub media_type: String,
    /// The text.
    pub text: String,
}

/// The media types a body may have.
pub const BODY_MEDIA_TYPES: [&str; 2] = ["text/plain", "text/markdown"];

/// Content the Room keeps by digest: a body, an excerpt, outputs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stored {
    /// Its address.
    pub digest: ContentDigest,
    /// How to read it.
    pub media_type: String,
    /// Its length in bytes.
    pub size: u64,
}

impl Stored {
    fn of(media_type: &str, bytes: &[u8]) -> Self {
        Self {
            digest: ContentDigest::of(bytes),
            media_type: media_type.to_owned(),
            size: bytes.len() as u64,
        }
    }
}

/// A piece of a draft's content, to be stored in the Room before the decision that names it
/// is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece<'a> {
    /// What it is, for errors: `body`, `outputs`, `excerpt of s1`, `artifact notes`.
    pub what: String,
    /// How to read it.
    pub media_type: &'static str,
    /// Its bytes.
    pub bytes: std::borrow::Cow<'a, [u8]>,
}

/// Why a draft's content cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// One piece is above the Room's bound.
    #[error(
        "the {what} has {size} bytes, above the room's bound of {bound} bytes per artifact (policy content.max_artifact_bytes)"
    )]
    PieceTooLarge {
        /// Which piece.
        what: String,
        /// Its size.
        size: u64,
        /// The bound.
        bound: u64,
    },
    /// All of it is above the Room's bound.
    #[error(
        "the contribution has {size} bytes of content, above the room's bound of {bound} bytes (policy content.max_contribution_bytes)"
    )]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        bound: u64,
    },
    /// Nothing to keep.
    #[error("a contribution needs a non-empty body")]
    Empty,
    /// A body of a media type the Room does not read.
    #[error("a body's media type must be text/plain or text/markdown, not `{0}`")]
    MediaType(String),
    /// Two documents under one id.
    #[error("two sources have the id `{0}`; each source needs its own")]
    DuplicateSource(String),
    /// A document without an id, address or title, or one whose id is not a short name.
    #[error("source `{id}`: {why}")]
    BadSource {
        /// The source's id as given.
        id: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// Why the Room does not take a contribution as a task's result (T2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContributionRefusal {
    /// Its content cannot be kept.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// A declared output is missing or typed otherwise.
    #[error(transparent)]
    Outputs(#[from] crate::catalog::OutputMismatch),
}

impl crate::state::RoomState {
    /// The outputs the capability of the task identity `task` of `objective` declared when
    /// it was admitted (none when the task is unknown or declared none).
    pub fn declared_outputs(
        &self,
        objective: ObjectiveId,
        task: &TaskIdentity,
    ) -> &[crate::catalog::DeclaredOutput] {
        self.objective(objective)
            .into_iter()
            .flat_map(|o| o.plans().iter().rev())
            .flat_map(|plan| plan.tasks().iter())
            .find(|t| t.identity() == task)
            .map_or(&[], |t| t.outputs())
    }

    /// Whether the Room takes `draft` as the result of `task` of `objective` (T2): its
    /// content within the policy's bounds and well formed, every declared output present and
    /// typed as declared. The engine decides a returned contribution by it; the host asks it
    /// before it records a submitted one, so a refused submission leaves nothing behind.
    pub fn admits_contribution(
        &self,
        objective: ObjectiveId,
        task: &TaskIdentity,
        draft: &ContributionDraft,
    ) -> Result<(), ContributionRefusal> {
        draft.check(self.policy().content())?;
        crate::catalog::check_outputs(self.declared_outputs(objective, task), &draft.outputs)?;
        Ok(())
    }
}

/// The longest a document id may be.
pub const SOURCE_ID_MAX: usize = 64;

/// A specialist's result as it returns it, persisted (as the call's receipt or the hosted
/// submission) before it is decided. Its content is carried here; the Room keeps it by digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContributionDraft {
    /// The persisted contribution's id.
    pub id: ContributionId,
    /// Named pieces of text (the form before bodies): kept as the body, one Markdown section
    /// per piece.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Its body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Body>,
    /// What it cites.
    pub sources: Vec<SourceDraft>,
    /// Its outputs, by name (checked against the capability's declared outputs, T2).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub outputs: Map<String, Value>,
}

impl ContributionDraft {
    /// The body as kept: the body given, or the named pieces as Markdown sections.
    pub fn body_text(&self) -> Option<(&'static str, String)> {
        match &self.body {
            Some(body) => Some((media_type_of(&body.media_type), body.text.clone())),
            None if self.artifacts.is_empty() => None,
            None => Some((
                "text/markdown",
                self.artifacts
                    .iter()
                    .map(|a| format!("## {}\n\n{}\n", a.name, a.content))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
        }
    }

    /// Every piece of content to keep: the body, each document's excerpt, the outputs.
    pub fn pieces(&self) -> Vec<Piece<'_>> {
        let mut pieces = Vec::new();
        if let Some((media_type, text)) = self.body_text() {
            pieces.push(Piece {
                what: "body".to_owned(),
                media_type,
                bytes: std::borrow::Cow::Owned(text.into_bytes()),
            });
        }
        for source in &self.sources {
            if let SourceDraft::Document(document) = source {
                pieces.push(Piece {
                    what: format!("excerpt of source `{}`", document.id),
                    media_type: "text/plain",
                    bytes: std::borrow::Cow::Borrowed(document.excerpt.as_bytes()),
                });
            }
        }
        if !self.outputs.is_empty() {
            pieces.push(Piece {
                what: "outputs".to_owned(),
                media_type: "application/json",
                bytes: std::borrow::Cow::Owned(outputs_bytes(&self.outputs)),
            });
        }
        pieces
    }

    /// Whether the Room can keep this draft's content under `bounds`: a non-empty body of a
    /// readable media type, well-formed sources with distinct ids, every piece and the whole
    /// within the bounds. Checked before anything is stored.
    pub fn check(&self, bounds: ContentBounds) -> Result<(), ContentError> {
        if let Some(body) = &self.body
            && !BODY_MEDIA_TYPES.contains(&body.media_type.as_str())
        {
            return Err(ContentError::MediaType(body.media_type.clone()));
        }
        match self.body_text() {
            Some((_, text)) if !text.trim().is_empty() => {}
            _ => return Err(ContentError::Empty),
        }
        let mut ids = std::collections::BTreeSet::new();
        for source in &self.sources {
            if let SourceDraft::Document(document) = source {
                let bad = |why| ContentError::BadSource {
                    id: document.id.clone(),
                    why,
                };
                if document.id.is_empty()
                    || document.id.len() > SOURCE_ID_MAX
                    || document
                        .id
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(bad("an id is 1 to 64 characters without spaces"));
                }
                if document.uri.trim().is_empty() {
                    return Err(bad("a source needs its uri"));
                }
                if document.title.trim().is_empty() {
                    return Err(bad("a source needs its title"));
                }
                if document.excerpt.trim().is_empty() {
                    return Err(bad("a source needs the excerpt the contribution relies on"));
                }
                if !ids.insert(document.id.as_str()) {
                    return Err(ContentError::DuplicateSource(document.id.clone()));
                }
            }
        }
        let mut total = 0_u64;
        for piece in self.pieces() {
            let size = piece.bytes.len() as u64;
            if size > bounds.max_artifact_bytes() {
                return Err(ContentError::PieceTooLarge {
                    what: piece.what,
                    size,
                    bound: bounds.max_artifact_bytes(),
                });
            }
            total = total.saturating_add(size);
        }
        if total > bounds.max_contribution_bytes() {
            return Err(ContentError::TooLarge {
                size: total,
                bound: bounds.max_contribution_bytes(),
            });
        }
        Ok(())
    }
}

/// The media type a body is kept under (a known one; anything else was refused by `check`).
fn media_type_of(given: &str) -> &'static str {
    if given == "text/plain" {
        "text/plain"
    } else {
        "text/markdown"
    }
}

/// The bytes outputs are kept as: their JSON.
pub fn outputs_bytes(outputs: &Map<String, Value>) -> Vec<u8> {
    // A map of JSON values always serializes.
    serde_json::to_vec(outputs).unwrap_or_default()
}

/// A specialist's persisted result for a task identity (T2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contribution {
    pub(crate) id: ContributionId,
    pub(crate) objective: ObjectiveId,
    pub(crate) task: TaskIdentity,
    pub(crate) op: OperationId,
    pub(crate) author: PrincipalId,
    /// Inline pieces of contributions made before bodies were kept by digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) artifacts: Vec<Artifact>,
    /// Its body, kept by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<Stored>,
    pub(crate) sources: Vec<Source>,
    /// Its outputs (JSON), kept by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outputs: Option<Stored>,
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
    /// What it produced inline (contributions made before bodies were kept by digest).
    pub fn artifacts(&self) -> &[Artifact] {
        &self.artifacts
    }
    /// Its body, by digest.
    pub fn body(&self) -> Option<&Stored> {
        self.body.as_ref()
    }
    /// Its outputs, by digest.
    pub fn outputs(&self) -> Option<&Stored> {
        self.outputs.as_ref()
    }
    /// What it cites.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
    /// The document it cites under `id`.
    pub fn document(&self, id: &str) -> Option<&Document> {
        self.sources.iter().find_map(|s| match s {
            Source::Document(d) if d.id == id => Some(d),
            _ => None,
        })
    }
    /// Every digest its content is kept under: body, excerpts, outputs.
    pub fn digests(&self) -> Vec<&ContentDigest> {
        let mut digests: Vec<&ContentDigest> = self.body.iter().map(|b| &b.digest).collect();
        digests.extend(self.sources.iter().filter_map(|s| match s {
            Source::Document(d) => Some(&d.excerpt),
            _ => None,
        }));
        digests.extend(self.outputs.iter().map(|o| &o.digest));
        digests
    }
    /// A digest of its content (artifacts, body, sources and outputs), to tell an unchanged
    /// report. A contribution without a body or outputs digests as it did before they existed.
    pub fn content_digest(&self) -> String {
        let mut artifacts = self.artifacts.clone();
        artifacts.sort();
        let mut sources = self.sources.clone();
        sources.sort();
        if self.body.is_none() && self.outputs.is_none() {
            digest_of(&(artifacts, sources))
        } else {
            digest_of(&(artifacts, sources, &self.body, &self.outputs))
        }
    }

    /// The contribution `draft` becomes: its content by digest.
    pub(crate) fn from_draft(
        draft: ContributionDraft,
        objective: ObjectiveId,
        task: TaskIdentity,
        op: OperationId,
        author: PrincipalId,
    ) -> Self {
        let body = draft
            .body_text()
            .map(|(media_type, text)| Stored::of(media_type, text.as_bytes()));
        let outputs = (!draft.outputs.is_empty())
            .then(|| Stored::of("application/json", &outputs_bytes(&draft.outputs)));
        let sources = draft
            .sources
            .into_iter()
            .map(|source| match source {
                SourceDraft::Contribution { id } => Source::Contribution { id },
                SourceDraft::External { url, digest } => Source::External { url, digest },
                SourceDraft::Document(d) => Source::Document(Document {
                    excerpt: ContentDigest::of(d.excerpt.as_bytes()),
                    id: d.id,
                    uri: d.uri,
                    title: d.title,
                    retrieved_at: d.retrieved_at,
                    content_digest: d.content_digest,
                }),
            })
            .collect();
        Self {
            id: draft.id,
            objective,
            task,
            op,
            author,
            artifacts: Vec::new(),
            body,
            sources,
            outputs,
        }
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
    /// What it rests on, in the reviewer's words.
    pub evidence: String,
    /// The ids of the report's sources it rests on (R7: a `met` names at least one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// The text that proves it, as found in the report or a cited source's excerpt (R7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
}

impl CriterionVerdict {
    /// A verdict with its evidence and nothing cited.
    pub fn new(criterion: CriterionId, verdict: Verdict, evidence: impl Into<String>) -> Self {
        Self {
            criterion,
            verdict,
            evidence: evidence.into(),
            sources: Vec::new(),
            quote: None,
        }
    }

    /// The same verdict citing `sources` with `quote` (R7).
    #[must_use]
    pub fn citing(mut self, sources: &[&str], quote: &str) -> Self {
        self.sources = sources.iter().map(|s| (*s).to_owned()).collect();
        self.quote = Some(quote.to_owned());
        self
    }
}

/// The content the Room holds, as read for one decision (by the host, from its artifact
/// store): what a review's evidence is checked against (R7).
pub trait Contents {
    /// The text stored under `digest`, if it was read (and is text).
    fn text(&self, digest: &ContentDigest) -> Option<&str>;
}

/// No content read: every quote is unproven.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoContents;

impl Contents for NoContents {
    fn text(&self, _: &ContentDigest) -> Option<&str> {
        None
    }
}

impl Contents for std::collections::BTreeMap<ContentDigest, String> {
    fn text(&self, digest: &ContentDigest) -> Option<&str> {
        // Only text that is what the digest addresses counts as read.
        self.get(digest)
            .map(String::as_str)
            .filter(|text| digest.addresses(text.as_bytes()))
    }
}

/// Text with every run of whitespace made one space, trimmed (R7 compares quotes this way).
pub fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// R7: why a `met` verdict's evidence does not hold against the report `report` (with the
/// objective's `contributions`, which the report may cite) and the content read, or `None`
/// when it holds or the verdict is not `met`.
pub fn unproven(
    verdict: &CriterionVerdict,
    report: &Contribution,
    contributions: &std::collections::BTreeMap<ContributionId, Contribution>,
    contents: &dyn Contents,
) -> Option<String> {
    if verdict.verdict != Verdict::Met {
        return None;
    }
    if verdict.sources.is_empty() {
        return Some("a `met` must name the sources it rests on; this one names none".to_owned());
    }
    let quote = verdict.quote.as_deref().map(normalize_whitespace);
    let Some(quote) = quote.filter(|q| !q.is_empty()) else {
        return Some(
            "a `met` must quote the text that proves it; this one quotes nothing".to_owned(),
        );
    };
    let mut texts = Vec::new();
    if let Some(body) = &report.body {
        texts.push(contents.text(&body.digest).map(normalize_whitespace));
    }
    texts.extend(
        report
            .artifacts
            .iter()
            .map(|a| Some(normalize_whitespace(&a.content))),
    );
    for id in &verdict.sources {
        let cited = report
            .sources
            .iter()
            .find(|s| s.id().as_deref() == Some(id.as_str()));
        match cited {
            None => {
                return Some(format!(
                    "it names `{id}`, which is not a source supplied with the report"
                ));
            }
            Some(Source::Document(document)) => {
                texts.push(contents.text(&document.excerpt).map(normalize_whitespace));
            }
            Some(Source::Contribution { id }) => {
                if let Some(cited) = contributions.get(id) {
                    if let Some(body) = &cited.body {
                        texts.push(contents.text(&body.digest).map(normalize_whitespace));
                    }
                    texts.extend(
                        cited
                            .artifacts
                            .iter()
                            .map(|a| Some(normalize_whitespace(&a.content))),
                    );
                }
            }
            Some(Source::External { .. }) => {}
        }
    }
    if texts.iter().flatten().any(|text| text.contains(&quote)) {
        None
    } else {
        Some(format!(
            "its quote \"{}\" is found neither in the report nor in the excerpt of a source it names",
            ellipsis(&quote, 120)
        ))
    }
}

/// `text` cut to `max` characters, with `…` when cut.
fn ellipsis(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
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
    /// The model that produced it, for a model reviewer's review (set by the host's agents,
    /// never by a client): the review is attributed to the reviewer principal and the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
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
    /// The model that produced it, for a model reviewer's review.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
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
    /// The model that produced it, for a model reviewer's review.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
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
