//! The redaction conformance suite (feature `conformance`, issue 18): every store that keeps
//! both Rooms and content runs these cases on a fresh store each
//! (`redaction_conformance!(factory)`), and so does the in-memory store. A commit that redacts
//! removes the content rows it names and scrubs the redacted memory texts from every stored
//! revision, in the same transaction, and the Room's history still replays, revision by
//! revision, to states that differ from the ones committed only by the marker where the texts
//! were (D1). The store crates also query their tables after [`memory_redaction`] to show the
//! text is nowhere in them.
//!
//! This is test code: a failed check panics, which is a failed test.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::engine::{Input, MemoryChange};
use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_domain::memory::Provenance;
use agentroom_domain::redaction::{REDACTED_TEXT, RedactionTarget};
use agentroom_domain::state::RoomState;

use crate::artifacts::ArtifactStore;
use crate::conformance::{Driver, Store};
use crate::rooms::{Commit, Revision};
use crate::scrub::scrub_memory_texts;

/// Generates one `#[tokio::test]` per case; `$factory` is an async fn returning a fresh,
/// migrated `Arc<S>` where `S` implements [`Store`] and [`ArtifactStore`].
#[macro_export]
macro_rules! redaction_conformance {
    ($factory:path) => {
        $crate::redaction_conformance!(@cases $factory;
            m1_a_redacted_memory_text_leaves_history_which_still_replays,
            a_redaction_commit_deletes_the_content_it_names_and_a_refused_one_nothing,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let store = $factory().await;
                $crate::redaction_conformance::$case(store).await;
            }
        )*
    };
}

/// The secret the memory cases redact (and a version of it it was corrected from).
pub const SECRET: &str = "The vault PIN is 4711";
/// The text the entry had before its correction.
pub const EARLIER: &str = "The vault PIN is 1234";
/// Words the Room holds elsewhere that a memory text also says: never scrubbed there.
pub const COMMON: &str = "olive";

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn external() -> Provenance {
    Provenance::External {
        url: "https://example.org/vault".to_owned(),
        digest: ContentDigest::of(b"the vault notes"),
    }
}

fn remember(text: &str) -> Input {
    Input::Memory {
        by: p("olive"),
        change: MemoryChange::Add {
            text: text.to_owned(),
            provenance: external(),
        },
    }
}

/// `state` with every memory text in `texts` replaced by the marker: what each revision
/// replays to after the redaction.
fn scrubbed(state: &RoomState, texts: &[String]) -> RoomState {
    let mut document = serde_json::to_value(state).unwrap();
    scrub_memory_texts(&mut document, texts);
    serde_json::from_value(document).unwrap()
}

/// What [`memory_redaction`] left: the Room, and the texts that must be nowhere in its
/// stored history.
pub struct Redacted {
    /// The Room.
    pub room: RoomId,
    /// Every text the redacted entry had.
    pub texts: Vec<String>,
}

/// A Room with a memory entry saying [`EARLIER`], corrected to [`SECRET`], a second entry
/// saying [`COMMON`] (which is also a principal's id all over the state), and enough commits
/// around them for the store to take snapshots holding the secret; then the owner redacts the
/// first entry. Checks what every store must show and returns what the store's own test then
/// looks for in its tables.
pub async fn memory_redaction<S: Store + ArtifactStore>(store: &S) -> Redacted {
    let mut d = Driver::create(store, "vault", 1_000_000_000).await;
    let mut states = vec![(d.revision, d.state.clone())];
    let decision = d.decide(remember(EARLIER));
    d.commit(store, &decision, "add_memory").await.unwrap();
    states.push((d.revision, d.state.clone()));
    let entry = d.state.memory().entries()[0].id();
    let decision = d.decide(Input::Memory {
        by: p("oscar"),
        change: MemoryChange::Correct {
            entry,
            text: SECRET.to_owned(),
        },
    });
    d.commit(store, &decision, "correct_memory").await.unwrap();
    states.push((d.revision, d.state.clone()));
    let decision = d.decide(remember(COMMON));
    d.commit(store, &decision, "add_memory").await.unwrap();
    states.push((d.revision, d.state.clone()));
    // Enough history for snapshots that hold the secret.
    for i in 0..40 {
        let decision = if i % 2 == 0 {
            d.owner_message(&format!("Summarize source {i} of the survey"))
        } else {
            d.raise(1_000 + i)
        };
        d.commit(store, &decision, "x").await.unwrap();
        states.push((d.revision, d.state.clone()));
    }
    let decision = d.decide(Input::Redact {
        by: p("olive"),
        target: RedactionTarget::Memory { entry },
        reason: "a secret".to_owned(),
    });
    let previous = d.state.clone();
    let commit = Commit::decided(&d.room(), &previous, &decision, AT, "redact_memory", None);
    let texts = vec![EARLIER.to_owned(), SECRET.to_owned()];
    assert_eq!(
        commit.scrubs.texts, texts,
        "the decision names both versions"
    );
    let revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = decision.state.clone();
    d.revision = revision;
    // The current state: loaded again (the store forgot its document), the entry redacted.
    let loaded = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!((loaded.revision, &loaded.state), (d.revision, &d.state));
    let redacted = loaded.state.memory().get(entry).unwrap();
    assert!(redacted.is_redacted());
    assert!(redacted.versions().iter().all(|v| v.text == REDACTED_TEXT));
    let kept = &loaded.state.memory().entries()[1];
    assert_eq!(
        kept.current().unwrap().text,
        COMMON,
        "another entry keeps its text"
    );
    // History still replays: every earlier revision is the state committed then, with the
    // marker where the redacted texts were and nothing else changed.
    for (at, state) in &states {
        let rebuilt = store.state_at(&d.room(), *at).await.unwrap().unwrap();
        assert_eq!(rebuilt, scrubbed(state, &texts), "revision {at}");
        let json = serde_json::to_string(&rebuilt).unwrap();
        assert!(!json.contains("vault PIN"), "revision {at}: {json}");
    }
    let last = store
        .state_at(&d.room(), d.revision)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(last, d.state);
    // The decision log of every revision names no text.
    let history = store.history(&d.room(), Revision(0), 1_000).await.unwrap();
    assert!(history.len() >= states.len());
    for row in &history {
        let log = serde_json::to_string(&row.log).unwrap();
        assert!(
            !log.contains("vault PIN"),
            "revision {}: {log}",
            row.revision
        );
    }
    // The Room goes on: a commit after the redaction replays too.
    let decision = d.raise(5);
    d.commit(store, &decision, "raise_limit").await.unwrap();
    let loaded = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(loaded.state, d.state);
    // An entry whose words are also a principal's id all over the state: only its texts
    // change; every revision still rebuilds with the owner where it was.
    let common = d.state.memory().entries()[1].id();
    let decision = d.decide(Input::Redact {
        by: p("olive"),
        target: RedactionTarget::Memory { entry: common },
        reason: "a name".to_owned(),
    });
    d.commit(store, &decision, "redact_memory").await.unwrap();
    let loaded = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(loaded.state, d.state);
    assert!(loaded.state.members().is_member(&p("olive")));
    for (at, state) in &states {
        let rebuilt = store.state_at(&d.room(), *at).await.unwrap().unwrap();
        let common = vec![COMMON.to_owned()];
        assert_eq!(
            rebuilt,
            scrubbed(&scrubbed(state, &texts), &common),
            "revision {at}"
        );
        assert_eq!(rebuilt.members(), state.members(), "revision {at}");
    }
    Redacted {
        room: d.room(),
        texts,
    }
}

/// M1: a redacted memory text leaves every stored revision, and history still replays.
pub async fn m1_a_redacted_memory_text_leaves_history_which_still_replays<
    S: Store + ArtifactStore,
>(
    store: Arc<S>,
) {
    memory_redaction(&*store).await;
}

/// The content a redaction commit names leaves the Room's store with the commit, and only
/// that Room's; a commit refused by compare-and-swap deletes nothing. (The domain's own tests
/// pin that an artifact's redaction names its content in [`Commit::scrubs`]; here the commit
/// names content the store holds, whichever decision it carries.)
pub async fn a_redaction_commit_deletes_the_content_it_names_and_a_refused_one_nothing<
    S: Store + ArtifactStore,
>(
    store: Arc<S>,
) {
    let mut d = Driver::create(&*store, "leaky", 1_000_000).await;
    let other = RoomId::parse("other").unwrap();
    let secret = b"Customer: Jane Roe, 12 Elm Street";
    let (digest, _) = store
        .put_content(&d.room(), "text/plain", secret, AT)
        .await
        .unwrap();
    store
        .put_content(&other, "text/plain", secret, AT)
        .await
        .unwrap();
    let (kept, _) = store
        .put_content(&d.room(), "text/plain", b"nothing personal", AT)
        .await
        .unwrap();
    // A stale commit naming it: refused, nothing deleted.
    let decision = d.raise(10);
    let mut stale = Commit::decided(&d.room(), &d.state, &decision, AT, "x", None);
    stale.scrubs.contents.push(digest.clone());
    assert!(
        store
            .commit(&d.room(), Revision(d.revision.0 - 1), stale)
            .await
            .is_err()
    );
    assert!(store.content(&d.room(), &digest).await.unwrap().is_some());
    // The commit naming it: the row is gone with it.
    let mut commit = Commit::decided(&d.room(), &d.state, &decision, AT, "x", None);
    commit.scrubs.contents.push(digest.clone());
    let revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
    d.state = decision.state.clone();
    d.revision = revision;
    assert!(store.content(&d.room(), &digest).await.unwrap().is_none());
    assert!(store.content(&d.room(), &kept).await.unwrap().is_some());
    assert!(
        store.content(&other, &digest).await.unwrap().is_some(),
        "another Room's content is its own"
    );
    let loaded = store.load(&d.room()).await.unwrap().unwrap();
    assert_eq!(loaded.state, d.state);
}
