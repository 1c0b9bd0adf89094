//! The artifact store conformance suite (feature `conformance`): every [`ArtifactStore`] runs
//! these cases on a fresh store each (`artifact_conformance!(factory)`), and so does the
//! in-memory store, which checks the suite itself.
//!
//! This is test code: a failed check panics, which is a failed test.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::{RoomId, Timestamp};

use crate::artifacts::{ArtifactStore, Put};

/// Generates one `#[tokio::test]` per case; `$factory` is an async fn returning a fresh,
/// migrated `Arc<S>` where `S` implements [`ArtifactStore`].
#[macro_export]
macro_rules! artifact_conformance {
    ($factory:path) => {
        $crate::artifact_conformance!(@cases $factory;
            content_is_stored_under_its_digest_and_read_back_whole,
            content_stored_again_is_present_once,
            content_of_one_room_is_not_found_in_another,
            content_never_stored_is_not_found,
            content_of_any_bytes_and_size_round_trips,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store = $factory().await;
                $crate::artifact_conformance::$case(store).await;
            }
        )*
    };
}

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);

fn room(name: &str) -> RoomId {
    RoomId::parse(name).unwrap()
}

/// What is stored is read back whole, under the digest of its bytes.
pub async fn content_is_stored_under_its_digest_and_read_back_whole<S: ArtifactStore + ?Sized>(
    store: Arc<S>,
) {
    let body = "# Findings\n\nLeases fence stale writers.".as_bytes();
    let (digest, put) = store
        .put_content(&room("lab"), "text/markdown", body, AT)
        .await
        .unwrap();
    assert_eq!(put, Put::Stored);
    assert_eq!(digest, ContentDigest::of(body));
    let stored = store.content(&room("lab"), &digest).await.unwrap().unwrap();
    assert_eq!(stored.digest, digest);
    assert_eq!(stored.media_type, "text/markdown");
    assert_eq!(stored.bytes, body);
}

/// The same bytes are one piece of content: stored once, the second put writes nothing, and
/// the first media type stays.
pub async fn content_stored_again_is_present_once<S: ArtifactStore + ?Sized>(store: Arc<S>) {
    let body = b"the same bytes";
    let (first, put) = store
        .put_content(&room("lab"), "text/plain", body, AT)
        .await
        .unwrap();
    assert_eq!(put, Put::Stored);
    let (again, put) = store
        .put_content(&room("lab"), "text/markdown", body, AT)
        .await
        .unwrap();
    assert_eq!((again.clone(), put), (first.clone(), Put::Present));
    let stored = store.content(&room("lab"), &first).await.unwrap().unwrap();
    assert_eq!(
        stored.media_type, "text/plain",
        "immutable: the first stays"
    );
}

/// Content is kept per Room: another Room does not find it, and stores its own copy.
pub async fn content_of_one_room_is_not_found_in_another<S: ArtifactStore + ?Sized>(store: Arc<S>) {
    let body = b"room-scoped";
    let (digest, _) = store
        .put_content(&room("lab"), "text/plain", body, AT)
        .await
        .unwrap();
    assert_eq!(store.content(&room("other"), &digest).await.unwrap(), None);
    let (theirs, put) = store
        .put_content(&room("other"), "text/plain", body, AT)
        .await
        .unwrap();
    assert_eq!((theirs, put), (digest.clone(), Put::Stored));
    assert!(
        store
            .content(&room("other"), &digest)
            .await
            .unwrap()
            .is_some()
    );
}

/// A digest nothing was stored under is not found (not an error).
pub async fn content_never_stored_is_not_found<S: ArtifactStore + ?Sized>(store: Arc<S>) {
    let digest = ContentDigest::of(b"never stored");
    assert_eq!(store.content(&room("lab"), &digest).await.unwrap(), None);
}

/// Empty content, bytes that are not UTF-8 and a megabyte all round-trip exactly.
pub async fn content_of_any_bytes_and_size_round_trips<S: ArtifactStore + ?Sized>(store: Arc<S>) {
    let large: Vec<u8> = (0..1_048_576_u32)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    for body in [Vec::new(), vec![0, 159, 146, 150, 255, 0], large] {
        let (digest, _) = store
            .put_content(&room("lab"), "application/octet-stream", &body, AT)
            .await
            .unwrap();
        assert_eq!(digest, ContentDigest::of(&body));
        let stored = store.content(&room("lab"), &digest).await.unwrap().unwrap();
        assert_eq!(stored.bytes.len(), body.len());
        assert!(stored.bytes == body, "{} bytes changed", body.len());
    }
}

/// A fresh in-memory store, the suite's own check.
pub async fn memory() -> Arc<crate::memory::MemoryStore> {
    Arc::new(crate::memory::MemoryStore::new())
}
