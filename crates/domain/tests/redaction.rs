//! Redaction (issue 18): the owner (`content.redact`) redacts an artifact's content or a
//! memory entry that holds a secret or personal data. A redaction record (what, who, when,
//! why, the digest of what was removed) takes its place; a redacted memory entry keeps its
//! id and provenance, every text it had becomes the marker, and it never reaches a model
//! (M1, C1). Refusals name their rule (M1 for memory, T2 for content, T3 for a principal
//! without the permission) and change nothing. Every state is reached through `decide` from
//! an empty Room.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::engine::{Decision, Input, MemoryChange, Verdict};
use agentroom_domain::ids::{MemoryEntryId, PrincipalId};
use agentroom_domain::memory::Provenance;
use agentroom_domain::redaction::{
    REDACTED_TEXT, REDACTION_REASON_MAX_CHARS, RedactionTarget, Scrubs,
};
use agentroom_domain::room::Permission;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::RoomState;
use common::*;
use uuid::Uuid;

const SECRET: &str = "The door code is 4711";

fn redact(room: &mut Room, by: &str, target: RedactionTarget, reason: &str) -> Decision {
    room.apply(Input::Redact {
        by: p(by),
        target,
        reason: reason.to_owned(),
    })
}

fn external() -> Provenance {
    Provenance::External {
        url: "https://example.org/notes".to_owned(),
        digest: ContentDigest::of(b"the notes"),
    }
}

/// A Room with a contribution and a memory entry that was corrected once:
/// (the entry, the contribution's body digest).
fn with_secrets(room: &mut Room) -> (MemoryEntryId, ContentDigest) {
    let planned = room.start_objective();
    room.contribute(&specialist_call(&planned), "findings with sources");
    room.apply(Input::Memory {
        by: p("olive"),
        change: MemoryChange::Add {
            text: "The door code is 1234".to_owned(),
            provenance: external(),
        },
    });
    let entry = room.state().memory().entries().last().unwrap().id();
    room.apply(Input::Memory {
        by: p("oscar"),
        change: MemoryChange::Correct {
            entry,
            text: SECRET.to_owned(),
        },
    });
    let contribution = room.state().contributions().values().next().unwrap();
    let digest = contribution.digests()[0].clone();
    (entry, digest)
}

fn memory_target(entry: MemoryEntryId) -> RedactionTarget {
    RedactionTarget::Memory { entry }
}

fn artifact_target(digest: &ContentDigest) -> RedactionTarget {
    RedactionTarget::Artifact {
        digest: digest.clone(),
    }
}

#[test]
fn m1_a_redacted_entry_keeps_its_id_and_provenance_and_loses_every_text() {
    let mut room = Room::new();
    let (entry, _) = with_secrets(&mut room);
    let before = room.state().clone();
    let at = room.sim.now();
    let d = redact(
        &mut room,
        "olive",
        memory_target(entry),
        "holds a door code",
    );
    assert_eq!(d.log.len(), 1, "{:#?}", d.log);
    assert_eq!(d.log[0].verdict, Verdict::Accepted);
    assert_eq!(d.log[0].rule, Some(Rule::M1));
    assert!(d.effects.is_empty(), "{:#?}", d.effects);
    // The decision log names the entry, never its text.
    assert!(d.log[0].message.contains(&entry.to_string()));
    assert!(
        !d.log[0].message.contains("door code is"),
        "{}",
        d.log[0].message
    );
    let redacted = room.state().memory().get(entry).unwrap();
    assert_eq!(redacted.id(), entry);
    assert_eq!(redacted.provenance(), &external());
    assert!(redacted.is_redacted());
    assert_eq!(redacted.versions().len(), 2, "its history keeps its shape");
    for version in redacted.versions() {
        assert_eq!(version.text, REDACTED_TEXT);
    }
    let record = room.state().redactions().records().last().unwrap();
    assert_eq!(record.target, memory_target(entry));
    assert_eq!(record.by, p("olive"));
    assert!(record.at >= at);
    assert_eq!(record.why, "holds a door code");
    assert_eq!(record.old_digest, ContentDigest::of(SECRET.as_bytes()));
    // What the store scrubs in the same commit: every text the entry had.
    let scrubs = Scrubs::between(&before, room.state());
    assert!(scrubs.contents.is_empty());
    assert_eq!(
        scrubs.texts,
        vec!["The door code is 1234".to_owned(), SECRET.to_owned()]
    );
    // The state holds the texts nowhere.
    let json = serde_json::to_string(room.state()).unwrap();
    assert!(!json.contains("door code is"), "{json}");
}

#[test]
fn m1_redacted_entry_never_reaches_a_model() {
    let mut room = Room::new();
    let (entry, _) = with_secrets(&mut room);
    assert!(room.state().memory().current().any(|e| e.id() == entry));
    redact(&mut room, "olive", memory_target(entry), "personal data");
    assert!(
        room.state().memory().current().all(|e| e.id() != entry),
        "the entries C1 sends a model leave it out"
    );
    assert!(!room.state().memory().get(entry).unwrap().is_current());
    // And it is not corrected back into use.
    let d = room.apply(Input::Memory {
        by: p("olive"),
        change: MemoryChange::Correct {
            entry,
            text: "something else".to_owned(),
        },
    });
    assert_rejected(&d, Rule::M1);
    assert!(
        d.log[0].message.contains("redacted"),
        "{}",
        d.log[0].message
    );
}

#[test]
fn t2_content_a_contribution_names_is_redacted_with_its_record() {
    let mut room = Room::new();
    let (_, digest) = with_secrets(&mut room);
    let before = room.state().clone();
    let d = redact(
        &mut room,
        "olive",
        artifact_target(&digest),
        "a customer's address",
    );
    assert_eq!(d.log.len(), 1, "{:#?}", d.log);
    assert_eq!(d.log[0].verdict, Verdict::Accepted);
    assert_eq!(d.log[0].rule, Some(Rule::T2));
    let record = room.state().redactions().of_content(&digest).unwrap();
    assert_eq!(record.old_digest, digest);
    assert_eq!(record.by, p("olive"));
    assert_eq!(record.why, "a customer's address");
    // The contribution still names it (history and reviews keep their shape); the store
    // removes the content in the same commit.
    assert_eq!(room.state().contributions(), before.contributions());
    let scrubs = Scrubs::between(&before, room.state());
    assert_eq!(scrubs.contents, vec![digest]);
    assert!(scrubs.texts.is_empty());
    // Nothing else changed: the memory, the objectives, the ledger.
    assert_eq!(room.state().memory(), before.memory());
    assert_eq!(room.state().objectives(), before.objectives());
}

#[test]
fn m1_t2_bad_redactions_are_refused_by_their_rule_and_change_nothing() {
    let mut room = Room::new();
    let (entry, digest) = with_secrets(&mut room);
    let unknown_entry = MemoryEntryId::from_uuid(Uuid::from_u128(7));
    let unknown_digest = ContentDigest::of(b"not in this room");
    let long = "x".repeat(REDACTION_REASON_MAX_CHARS + 1);
    let cases: Vec<(RedactionTarget, &str, Rule, &str)> = vec![
        (
            memory_target(unknown_entry),
            "why",
            Rule::M1,
            "no such memory entry",
        ),
        (
            artifact_target(&unknown_digest),
            "why",
            Rule::T2,
            "no contribution",
        ),
        (memory_target(entry), " \n", Rule::M1, "blank"),
        (artifact_target(&digest), "", Rule::T2, "blank"),
        (memory_target(entry), &long, Rule::M1, "at most"),
    ];
    let before = room.state().clone();
    for (target, reason, rule, says) in &cases {
        let d = redact(&mut room, "olive", target.clone(), reason);
        assert_rejected(&d, *rule);
        assert_eq!(d.log.len(), 1, "{target:?}: {:#?}", d.log);
        assert!(
            d.log[0].message.contains(says),
            "{target:?}: {}",
            d.log[0].message
        );
        assert_eq!(room.state(), &before, "{target:?} changed nothing");
    }
    // Redacted already: refused, the first record stays.
    redact(&mut room, "olive", memory_target(entry), "secret");
    redact(&mut room, "olive", artifact_target(&digest), "secret");
    let redacted = room.state().clone();
    for target in [memory_target(entry), artifact_target(&digest)] {
        let d = redact(&mut room, "olive", target.clone(), "again");
        assert!(d.log[0].verdict == Verdict::Rejected, "{:#?}", d.log);
        assert!(
            d.log[0].message.contains("redacted already"),
            "{}",
            d.log[0].message
        );
        assert_eq!(room.state(), &redacted, "{target:?} changed nothing");
    }
}

#[test]
fn t3_m1_only_the_owner_redacts() {
    let mut room = Room::new();
    let (entry, digest) = with_secrets(&mut room);
    let before = room.state().clone();
    // Who holds content.redact, written out: the owner only.
    let expected = [
        ("olive", true),
        ("oscar", false),
        ("sam", false),
        ("rita", false),
        ("hal", false),
        ("stranger", false),
    ];
    for (who, may) in expected {
        assert_eq!(
            room.state().may(&p(who), Permission::ContentRedact),
            may,
            "{who}"
        );
        if may {
            continue;
        }
        for (target, rule) in [
            (memory_target(entry), Rule::M1),
            (artifact_target(&digest), Rule::T3),
        ] {
            let d = redact(&mut room, who, target.clone(), "mine to redact");
            assert_rejected(&d, rule);
            assert!(
                d.log[0].message.contains("content.redact"),
                "{}",
                d.log[0].message
            );
            assert_eq!(room.state(), &before, "{who} {target:?} changed nothing");
        }
    }
}

#[test]
fn r7_content_a_review_may_quote_can_still_be_redacted() {
    // R7 checks quotes when a review is recorded; a redaction of the report's content is
    // the owner's to make at any time.
    let mut room = Room::new();
    let planned = room.start_objective();
    room.contribute(&specialist_call(&planned), "the report's findings");
    let digests: Vec<ContentDigest> = room
        .state()
        .contributions()
        .values()
        .flat_map(|c| c.digests().into_iter().cloned())
        .collect();
    assert!(!digests.is_empty());
    for digest in &digests {
        let d = redact(&mut room, "olive", artifact_target(digest), "leaked a name");
        assert_eq!(d.log[0].verdict, Verdict::Accepted, "{:#?}", d.log);
    }
    assert_eq!(room.state().redactions().records().len(), digests.len());
}

#[test]
fn d1_a_state_without_redactions_serializes_as_before_and_one_with_them_round_trips() {
    let mut room = Room::new();
    let (entry, _) = with_secrets(&mut room);
    let json = serde_json::to_value(room.state()).unwrap();
    assert!(
        json.get("redactions").is_none(),
        "no member while there is none"
    );
    assert!(
        !serde_json::to_string(room.state())
            .unwrap()
            .contains("redacted"),
        "an unredacted entry serializes as before"
    );
    redact(&mut room, "olive", memory_target(entry), "secret");
    let back: RoomState =
        serde_json::from_str(&serde_json::to_string(room.state()).unwrap()).unwrap();
    assert_eq!(&back, room.state());
    let _: PrincipalId = p("olive");
}

#[test]
fn m1_the_same_words_in_another_entry_are_redacted_with_it_and_other_words_stay() {
    // The stores scrub a redacted text wherever a memory entry's text holds it, so the
    // domain replaces it in every entry too: the history then replays to this state.
    let mut room = Room::new();
    let (entry, _) = with_secrets(&mut room);
    for text in [SECRET, "The door code is", "an unrelated note"] {
        room.apply(Input::Memory {
            by: p("olive"),
            change: MemoryChange::Add {
                text: text.to_owned(),
                provenance: external(),
            },
        });
    }
    let twin = room.state().memory().entries()[1].id();
    redact(&mut room, "olive", memory_target(entry), "a door code");
    let memory = room.state().memory();
    let texts: Vec<&str> = memory
        .entries()
        .iter()
        .map(|e| e.current().unwrap().text.as_str())
        .collect();
    assert_eq!(
        texts,
        [
            REDACTED_TEXT,
            REDACTED_TEXT,
            "The door code is",
            "an unrelated note"
        ]
    );
    // Only the entry redacted is marked so and has a record; its twin lost its words.
    assert!(memory.get(entry).unwrap().is_redacted());
    assert!(!memory.get(twin).unwrap().is_redacted());
    assert_eq!(room.state().redactions().records().len(), 1);
}
