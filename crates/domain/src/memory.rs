//! The Room's memory (M1): short entries kept with their provenance (the owner message,
//! contribution or external source each came from, who added it, when), the history of their
//! corrections and their retraction. Nothing is deleted: a retracted entry stays, with who
//! retracted it, when and why, and never reaches a model (C1).

use serde::{Deserialize, Serialize};

use crate::artifact::ContentDigest;
use crate::ids::{ContributionId, EventId, MemoryEntryId, PrincipalId, Timestamp};

/// The longest text an entry keeps, in characters: memory holds short statements, and every
/// current one is sent with each reasoner call.
pub const MEMORY_TEXT_MAX_CHARS: usize = 1000;

/// Why `text` cannot be an entry's text, if it cannot: blank, or longer than
/// [`MEMORY_TEXT_MAX_CHARS`]. The engine refuses such a change by M1; an edge may refuse it
/// before anything is decided.
pub fn text_problem(text: &str) -> Option<String> {
    if text.trim().is_empty() {
        return Some("the text is blank: say what the Room should remember".to_owned());
    }
    let chars = text.chars().count();
    (chars > MEMORY_TEXT_MAX_CHARS).then(|| {
        format!(
            "the text has {chars} characters; a memory entry keeps at most {MEMORY_TEXT_MAX_CHARS}"
        )
    })
}

/// What a memory entry came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum Provenance {
    /// An owner message (or correction) the Room accepted.
    OwnerMessage {
        /// The persisted event.
        event: EventId,
    },
    /// A contribution the Room keeps.
    Contribution {
        /// The contribution.
        id: ContributionId,
    },
    /// An external document, named by its address and the digest of its content as read.
    External {
        /// Where it is.
        url: String,
        /// The digest of its content as read.
        digest: ContentDigest,
    },
}

impl Provenance {
    /// What kind of thing it names: `owner_message`, `contribution` or `external`.
    pub const fn kind(&self) -> &'static str {
        match self {
            Provenance::OwnerMessage { .. } => "owner_message",
            Provenance::Contribution { .. } => "contribution",
            Provenance::External { .. } => "external",
        }
    }

    /// The id or address it names: the event id, the contribution id or the url.
    pub fn reference(&self) -> String {
        match self {
            Provenance::OwnerMessage { event } => event.to_string(),
            Provenance::Contribution { id } => id.to_string(),
            Provenance::External { url, .. } => url.clone(),
        }
    }
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provenance::OwnerMessage { event } => write!(f, "owner message {event}"),
            Provenance::Contribution { id } => write!(f, "contribution {id}"),
            Provenance::External { url, digest } => write!(f, "external source {url} ({digest})"),
        }
    }
}

/// One version of an entry's text: the first as added, each later one a correction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryText {
    /// The text.
    pub text: String,
    /// Who wrote this version.
    pub by: PrincipalId,
    /// When.
    pub at: Timestamp,
}

/// Who retracted an entry, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retraction {
    /// Who retracted it.
    pub by: PrincipalId,
    /// When.
    pub at: Timestamp,
    /// Why.
    pub why: String,
}

/// A memory entry: its provenance, its text versions (never empty) and its retraction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub(crate) id: MemoryEntryId,
    pub(crate) provenance: Provenance,
    /// The first is the text as added; corrections follow in order.
    pub(crate) versions: Vec<MemoryText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retraction: Option<Retraction>,
    /// Whether it was redacted: every version's text is then
    /// [`REDACTED_TEXT`](crate::redaction::REDACTED_TEXT) and the Room's redaction record says
    /// who, when and why. Absent (false) in states written before redactions existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) redacted: bool,
}

impl MemoryEntry {
    /// Its id.
    pub fn id(&self) -> MemoryEntryId {
        self.id
    }
    /// What it came from.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }
    /// Every version of its text, the first as added.
    pub fn versions(&self) -> &[MemoryText] {
        &self.versions
    }
    /// Its text as added (by whom, when).
    pub fn added(&self) -> Option<&MemoryText> {
        self.versions.first()
    }
    /// Its current text (the latest correction, else the text as added).
    pub fn current(&self) -> Option<&MemoryText> {
        self.versions.last()
    }
    /// Its retraction, when retracted.
    pub fn retraction(&self) -> Option<&Retraction> {
        self.retraction.as_ref()
    }
    /// Whether it was redacted (its texts are gone; the Room's redaction record says why).
    pub fn is_redacted(&self) -> bool {
        self.redacted
    }
    /// Whether it is current: neither retracted nor redacted, so it may reach a model (C1).
    pub fn is_current(&self) -> bool {
        self.retraction.is_none() && !self.redacted
    }
}

/// The Room's memory, in the order entries were added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Memory {
    entries: Vec<MemoryEntry>,
}

impl Memory {
    /// Every entry, retracted ones included, in the order they were added.
    pub fn entries(&self) -> &[MemoryEntry] {
        &self.entries
    }
    /// The entries that may reach a model: those neither retracted nor redacted (M1, C1).
    pub fn current(&self) -> impl Iterator<Item = &MemoryEntry> + '_ {
        self.entries.iter().filter(|e| e.is_current())
    }
    /// The entry of this id.
    pub fn get(&self, id: MemoryEntryId) -> Option<&MemoryEntry> {
        self.entries.iter().find(|e| e.id == id)
    }
    /// Whether it holds no entry at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub(crate) fn push(&mut self, entry: MemoryEntry) {
        self.entries.push(entry);
    }
    pub(crate) fn get_mut(&mut self, id: MemoryEntryId) -> Option<&mut MemoryEntry> {
        self.entries.iter_mut().find(|e| e.id == id)
    }
    /// Redacts entry `id`: every version of its text, and every version of any entry that
    /// says one of those texts (the same words are the same secret, and the stores scrub
    /// them from history wherever a memory text holds them), becomes `marker`.
    pub(crate) fn redact(&mut self, id: MemoryEntryId, marker: &str) {
        let Some(texts) = self.get(id).map(|e| {
            e.versions
                .iter()
                .map(|v| v.text.clone())
                .collect::<Vec<_>>()
        }) else {
            return;
        };
        for entry in &mut self.entries {
            if entry.id == id {
                entry.redacted = true;
            }
            for version in &mut entry.versions {
                if texts.contains(&version.text) {
                    marker.clone_into(&mut version.text);
                }
            }
        }
    }
}
