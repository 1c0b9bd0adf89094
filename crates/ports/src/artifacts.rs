//! Where artifact and source content is kept (DESIGN.md "Artifact and source"): once per
//! Room, addressed by the SHA-256 of its bytes, immutable. The Room's state names content by
//! its [`ContentDigest`] and never holds it; the coordinator stores content before it decides
//! the input that names it, so what a decision names is always there to read.
//!
//! Bounds (per artifact, per contribution) are the Room policy's, checked before anything is
//! stored; a store keeps what it is given.

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::{RoomId, Timestamp};
use async_trait::async_trait;

use crate::rooms::StoreError;

/// Content as stored: its bytes and how to read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredContent {
    /// Its address.
    pub digest: ContentDigest,
    /// How to read it, e.g. `text/markdown`.
    pub media_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Whether [`ArtifactStore::put_content`] stored new content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Stored now.
    Stored,
    /// The Room held it already (the same bytes: the same address); nothing was written.
    Present,
}

/// Content-addressed, immutable content per Room.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores `bytes` in `room` under their digest; storing the same bytes again writes
    /// nothing. The digest is computed here, never taken from a caller.
    async fn put_content(
        &self,
        room: &RoomId,
        media_type: &str,
        bytes: &[u8],
        at: Timestamp,
    ) -> Result<(ContentDigest, Put), StoreError>;

    /// The content `digest` addresses in `room` (another Room's is not found). Content whose
    /// bytes no longer hash to their address is an error ([`StoreError::Corrupt`]), never
    /// returned.
    async fn content(
        &self,
        room: &RoomId,
        digest: &ContentDigest,
    ) -> Result<Option<StoredContent>, StoreError>;
}

/// Checks that `stored`, read back for `digest`, is what `digest` addresses.
pub fn verified(
    digest: &ContentDigest,
    stored: StoredContent,
) -> Result<StoredContent, StoreError> {
    if stored.digest == *digest && digest.addresses(&stored.bytes) {
        Ok(stored)
    } else {
        Err(StoreError::inconsistent(format!(
            "content {digest}: its bytes no longer hash to their address"
        )))
    }
}
