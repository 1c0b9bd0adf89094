//! Redactions (issue 18): the owner removes an artifact's content or a memory entry's text
//! that holds a secret or personal data. A redaction record (what, who, when, why and the
//! digest of what was removed) takes its place in the Room's state; the stores delete the
//! content and scrub the text from the Room's history in the commit of the decision, so the
//! history still replays to the current state (D1) and nothing of the text is left.

use serde::{Deserialize, Serialize};

use crate::artifact::ContentDigest;
use crate::ids::{MemoryEntryId, PrincipalId, Timestamp};
use crate::state::RoomState;

/// What a redacted memory text reads from then on, in the state and everywhere in the Room's
/// stored history: the stores write exactly this string where the text was.
pub const REDACTED_TEXT: &str = "[redacted]";

/// The longest reason a redaction keeps, in characters.
pub const REDACTION_REASON_MAX_CHARS: usize = 500;

/// Why `reason` cannot be a redaction's reason, if it cannot: blank, or longer than
/// [`REDACTION_REASON_MAX_CHARS`]. The engine refuses such a redaction; an edge may refuse it
/// before anything is decided.
pub fn reason_problem(reason: &str) -> Option<String> {
    if reason.trim().is_empty() {
        return Some("the reason is blank: say why the content is redacted".to_owned());
    }
    let chars = reason.chars().count();
    (chars > REDACTION_REASON_MAX_CHARS).then(|| {
        format!(
            "the reason has {chars} characters; a redaction keeps at most \
             {REDACTION_REASON_MAX_CHARS}"
        )
    })
}

/// What is redacted: an artifact's (or a source excerpt's) content by its digest, or a memory
/// entry (every version of its text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RedactionTarget {
    /// Content a contribution of the Room names (its body, a source's excerpt, its outputs).
    Artifact {
        /// Its address.
        digest: ContentDigest,
    },
    /// A memory entry of the Room.
    Memory {
        /// The entry.
        entry: MemoryEntryId,
    },
}

impl std::fmt::Display for RedactionTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedactionTarget::Artifact { digest } => write!(f, "content {digest}"),
            RedactionTarget::Memory { entry } => write!(f, "memory entry {entry}"),
        }
    }
}

/// A redaction record: what was redacted, by whom, when, why, and the digest of what was
/// removed (an artifact's own digest; for a memory entry, the digest of its current text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// What was redacted.
    pub target: RedactionTarget,
    /// Who redacted it.
    pub by: PrincipalId,
    /// When.
    pub at: Timestamp,
    /// Why.
    pub why: String,
    /// The digest of what was removed.
    pub old_digest: ContentDigest,
}

/// The Room's redaction records, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Redactions {
    records: Vec<Redaction>,
}

impl Redactions {
    /// Every record, oldest first.
    pub fn records(&self) -> &[Redaction] {
        &self.records
    }
    /// Whether there is none (a state without any serializes as before redactions existed).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// The record of `target`, if it was redacted.
    pub fn of(&self, target: &RedactionTarget) -> Option<&Redaction> {
        self.records.iter().find(|r| r.target == *target)
    }
    /// The record of the content `digest` addresses, if it was redacted.
    pub fn of_content(&self, digest: &ContentDigest) -> Option<&Redaction> {
        self.of(&RedactionTarget::Artifact {
            digest: digest.clone(),
        })
    }
    pub(crate) fn push(&mut self, record: Redaction) {
        self.records.push(record);
    }
}

/// What a store removes in the commit of a decision that redacted something: the content
/// rows and the memory texts (each replaced by [`REDACTED_TEXT`] in the Room's stored
/// history), read from the state before and after the decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scrubs {
    /// Content to delete from the Room's store.
    pub contents: Vec<ContentDigest>,
    /// Memory texts to replace by [`REDACTED_TEXT`] wherever the Room's history holds them as
    /// a memory entry's text.
    pub texts: Vec<String>,
}

impl Scrubs {
    /// What the redactions `next` holds and `previous` does not remove: the content they
    /// name, and every text the redacted memory entries held in `previous`.
    pub fn between(previous: &RoomState, next: &RoomState) -> Self {
        let mut scrubs = Scrubs::default();
        let before = previous.redactions().records().len();
        for record in next.redactions().records().iter().skip(before) {
            match &record.target {
                RedactionTarget::Artifact { digest } => scrubs.contents.push(digest.clone()),
                RedactionTarget::Memory { entry } => {
                    if let Some(entry) = previous.memory().get(*entry) {
                        for version in entry.versions() {
                            if version.text != REDACTED_TEXT
                                && !scrubs.texts.contains(&version.text)
                            {
                                scrubs.texts.push(version.text.clone());
                            }
                        }
                    }
                }
            }
        }
        scrubs
    }

    /// Whether there is nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.contents.is_empty() && self.texts.is_empty()
    }
}
