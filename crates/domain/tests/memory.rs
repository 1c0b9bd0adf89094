//! The Room's memory (issue 18 part 3, M1): entries are added, corrected and retracted only by
//! an explicit act of the owner or an operator (`memory.manage`, T3), each one decision with
//! its provenance; corrections keep the history of the text; a retracted entry stays, with
//! who retracted it, when and why. Refusals name M1 and change nothing. Every state is
//! reached through `decide` from an empty Room.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::catalog::CapabilityCatalog;
use agentroom_domain::engine::{Decision, Env, Input, MemoryChange, Verdict as LogVerdict, decide};
use agentroom_domain::ids::{
    ContributionId, DerivedIds, EventId, IdSource, MemoryEntryId, PrincipalId, Timestamp,
};
use agentroom_domain::memory::{MEMORY_TEXT_MAX_CHARS, Provenance};
use agentroom_domain::policy::AccessPolicy;
use agentroom_domain::review::NoContents;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::RoomState;
use common::*;
use uuid::Uuid;

fn memory(room: &mut Room, by: &str, change: MemoryChange) -> Decision {
    room.apply(Input::Memory { by: p(by), change })
}

fn add(text: &str, provenance: Provenance) -> MemoryChange {
    MemoryChange::Add {
        text: text.to_owned(),
        provenance,
    }
}

fn accepted(d: &Decision) -> usize {
    d.log
        .iter()
        .filter(|l| l.verdict == LogVerdict::Accepted && l.rule == Some(Rule::M1))
        .count()
}

/// A Room whose objective has a contribution: (the owner message, the contribution).
fn with_a_contribution(room: &mut Room) -> (EventId, ContributionId) {
    let planned = room.start_objective();
    room.contribute(&specialist_call(&planned), "findings with sources");
    let event = room.objective().origin();
    let contribution = *room.state().contributions().keys().next().unwrap();
    (event, contribution)
}

fn external() -> Provenance {
    Provenance::External {
        url: "https://example.org/paper".to_owned(),
        digest: ContentDigest::of(b"the paper"),
    }
}

fn added_id(room: &Room) -> MemoryEntryId {
    room.state().memory().entries().last().unwrap().id()
}

#[test]
fn m1_an_entry_is_added_in_one_decision_with_its_provenance_who_and_when() {
    let mut room = Room::new();
    let (event, contribution) = with_a_contribution(&mut room);
    for (by, provenance) in [
        ("olive", Provenance::OwnerMessage { event }),
        ("oscar", Provenance::Contribution { id: contribution }),
        ("olive", external()),
    ] {
        let at = room.sim.now();
        let d = memory(
            &mut room,
            by,
            add("The corpus ends in 2023", provenance.clone()),
        );
        assert_eq!(d.log.len(), 1, "one decision, one entry: {:#?}", d.log);
        assert_eq!(accepted(&d), 1, "{:#?}", d.log);
        assert!(
            d.effects.is_empty(),
            "memory calls nothing: {:#?}",
            d.effects
        );
        let entry = room.state().memory().entries().last().unwrap();
        assert_eq!(entry.provenance(), &provenance);
        let added = entry.added().unwrap();
        assert_eq!(added.by, p(by));
        assert!(added.at >= at, "{:?} {:?}", added.at, at);
        assert_eq!(added.text, "The corpus ends in 2023");
        assert!(entry.is_current());
        assert!(d.log[0].message.contains(&entry.id().to_string()));
    }
    assert_eq!(room.state().memory().entries().len(), 3);
}

#[test]
fn m1_entry_ids_derive_from_the_input_so_deciding_it_again_gives_the_same_id() {
    let mut room = Room::new();
    let state = room.state().clone();
    let input = Input::Memory {
        by: p("olive"),
        change: add("Prefer primary sources", external()),
    };
    let decide_once = |state: &RoomState| {
        let catalog = catalog();
        let mut ids = DerivedIds::new(Uuid::from_u128(42));
        let mut env = env(&mut ids, &catalog);
        decide(state, input.clone(), &mut env).unwrap()
    };
    let first = decide_once(&state);
    let again = decide_once(&state);
    assert_eq!(first.state, again.state);
    let id = first.state.memory().entries()[0].id();
    assert_eq!(
        id,
        MemoryEntryId::from_uuid(DerivedIds::new(Uuid::from_u128(42)).next_uuid())
    );
    // And through the simulation, two adds are two entries.
    memory(&mut room, "olive", add("one", external()));
    memory(&mut room, "olive", add("two", external()));
    let ids: Vec<_> = room
        .state()
        .memory()
        .entries()
        .iter()
        .map(|e| e.id())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
}

fn env<'a>(ids: &'a mut DerivedIds, catalog: &'a dyn CapabilityCatalog) -> Env<'a> {
    Env {
        now: Timestamp::from_millis(1_700_000_000_000),
        ids,
        catalog,
        contents: &NoContents,
        served: None,
        pool: None,
        archive: &agentroom_domain::archive::NoArchive,
    }
}

#[test]
fn m1_a_correction_keeps_the_history_of_the_text() {
    let mut room = Room::new();
    memory(&mut room, "olive", add("The deadline is May", external()));
    let id = added_id(&room);
    let d = memory(
        &mut room,
        "oscar",
        MemoryChange::Correct {
            entry: id,
            text: "The deadline is June".to_owned(),
        },
    );
    assert_eq!(accepted(&d), 1, "{:#?}", d.log);
    assert!(
        d.log[0].message.contains("version 2"),
        "{}",
        d.log[0].message
    );
    let entry = room.state().memory().get(id).unwrap();
    let texts: Vec<(&str, PrincipalId)> = entry
        .versions()
        .iter()
        .map(|v| (v.text.as_str(), v.by.clone()))
        .collect();
    assert_eq!(
        texts,
        [
            ("The deadline is May", p("olive")),
            ("The deadline is June", p("oscar"))
        ]
    );
    assert_eq!(entry.current().unwrap().text, "The deadline is June");
    assert_eq!(entry.added().unwrap().text, "The deadline is May");
    // The same text again corrects nothing.
    let before = room.state().memory().clone();
    let d = memory(
        &mut room,
        "olive",
        MemoryChange::Correct {
            entry: id,
            text: "The deadline is June".to_owned(),
        },
    );
    assert_rejected(&d, Rule::M1);
    assert_eq!(room.state().memory(), &before);
}

#[test]
fn m1_a_retraction_keeps_the_entry_with_who_when_and_why() {
    let mut room = Room::new();
    memory(
        &mut room,
        "olive",
        add("Sam's email is sam@example.org", external()),
    );
    let id = added_id(&room);
    let d = memory(
        &mut room,
        "olive",
        MemoryChange::Retract {
            entry: id,
            why: "personal data".to_owned(),
        },
    );
    assert_eq!(accepted(&d), 1, "{:#?}", d.log);
    let entry = room.state().memory().get(id).unwrap();
    assert!(!entry.is_current());
    let retraction = entry.retraction().unwrap();
    assert_eq!(retraction.by, p("olive"));
    assert_eq!(retraction.why, "personal data");
    assert_eq!(
        entry.versions().len(),
        1,
        "the text stays: never deleted silently"
    );
    assert_eq!(room.state().memory().entries().len(), 1);
    assert_eq!(room.state().memory().current().count(), 0);
    // A retracted entry is neither corrected nor retracted again.
    let before = room.state().memory().clone();
    for change in [
        MemoryChange::Correct {
            entry: id,
            text: "something else".to_owned(),
        },
        MemoryChange::Retract {
            entry: id,
            why: "again".to_owned(),
        },
    ] {
        let d = memory(&mut room, "olive", change);
        assert_rejected(&d, Rule::M1);
        assert!(d.log[0].message.contains("retracted"), "{:#?}", d.log);
    }
    assert_eq!(room.state().memory(), &before);
}

#[test]
fn m1_bad_changes_are_refused_by_m1_and_change_nothing() {
    let mut room = Room::new();
    let (_, contribution) = with_a_contribution(&mut room);
    memory(
        &mut room,
        "olive",
        add("kept", Provenance::Contribution { id: contribution }),
    );
    let id = added_id(&room);
    let unknown = MemoryEntryId::from_uuid(Uuid::from_u128(7));
    let cases = [
        (add("  \n", external()), "blank"),
        (
            add(&"x".repeat(MEMORY_TEXT_MAX_CHARS + 1), external()),
            "at most",
        ),
        (
            add(
                "from nowhere",
                Provenance::OwnerMessage {
                    event: EventId::from_uuid(Uuid::from_u128(9)),
                },
            ),
            "no owner message",
        ),
        (
            add(
                "from nobody",
                Provenance::Contribution {
                    id: ContributionId::from_uuid(Uuid::from_u128(9)),
                },
            ),
            "no contribution",
        ),
        (
            add(
                "somewhere",
                Provenance::External {
                    url: " ".to_owned(),
                    digest: ContentDigest::of(b"x"),
                },
            ),
            "address",
        ),
        (
            MemoryChange::Correct {
                entry: unknown,
                text: "new".to_owned(),
            },
            "no memory entry",
        ),
        (
            MemoryChange::Correct {
                entry: id,
                text: "\t".to_owned(),
            },
            "blank",
        ),
        (
            MemoryChange::Retract {
                entry: unknown,
                why: "wrong".to_owned(),
            },
            "no memory entry",
        ),
        (
            MemoryChange::Retract {
                entry: id,
                why: " ".to_owned(),
            },
            "say why",
        ),
    ];
    let before = room.state().clone();
    for (change, says) in cases {
        let d = memory(&mut room, "olive", change.clone());
        assert_rejected(&d, Rule::M1);
        assert_eq!(d.log.len(), 1, "{change:?}: {:#?}", d.log);
        assert!(
            d.log[0].message.contains(says),
            "{change:?}: {}",
            d.log[0].message
        );
        assert_eq!(room.state(), &before, "{change:?} changed nothing");
    }
}

#[test]
fn m1_t3_only_the_owner_and_operators_change_memory() {
    let mut room = Room::new();
    let before = room.state().memory().clone();
    // Reviewers, specialists, agent hosts and strangers hold no `memory.manage`.
    for by in ["rita", "sam", "hal", "mallory"] {
        let d = memory(&mut room, by, add("learned by myself", external()));
        assert_rejected(&d, Rule::M1);
        assert!(d.log[0].message.contains("memory.manage"), "{:#?}", d.log);
    }
    assert_eq!(room.state().memory(), &before);
    memory(&mut room, "olive", add("kept", external()));
    let id = added_id(&room);
    for change in [
        MemoryChange::Correct {
            entry: id,
            text: "changed".to_owned(),
        },
        MemoryChange::Retract {
            entry: id,
            why: "wrong".to_owned(),
        },
    ] {
        let d = memory(&mut room, "sam", change);
        assert_rejected(&d, Rule::M1);
    }
    assert!(room.state().memory().get(id).unwrap().is_current());
    // A Room whose access policy grants no `memory.manage` (written before it existed)
    // refuses its owner too.
    let access = AccessPolicy::from_toml(
        "[roles.owner]\npermissions = [\"event.post\", \"objective.read\"]\n",
    )
    .unwrap();
    let mut old = Room::with_access(access);
    let d = memory(&mut old, "olive", add("kept", external()));
    assert_rejected(&d, Rule::M1);
    assert!(old.state().memory().is_empty());
    // T3: the host's administrator replaces its stored policy with the host's; the owner
    // gains memory.manage (logged), and may keep an entry from then on.
    let d = old.apply(Input::ReplaceAccess {
        access: AccessPolicy::default(),
    });
    assert!(accepted_by(&d, Rule::T3), "{}", timeline(&d.log));
    assert!(
        d.log
            .iter()
            .any(|l| l.message.contains("owner +") && l.message.contains("+memory.manage")),
        "{}",
        timeline(&d.log)
    );
    assert_eq!(old.state().access(), &AccessPolicy::default());
    let d = memory(&mut old, "olive", add("kept", external()));
    assert_eq!(accepted(&d), 1, "{}", timeline(&d.log));
    // The same policy again changes nothing, and says so.
    let d = old.apply(Input::ReplaceAccess {
        access: AccessPolicy::default(),
    });
    assert_rejected(&d, Rule::T3);
    // A policy that grants membership.manage to no role is refused: nobody could change the
    // Room's members again.
    let locked =
        AccessPolicy::from_toml("[roles.owner]\npermissions = [\"objective.read\"]\n").unwrap();
    let d = old.apply(Input::ReplaceAccess { access: locked });
    assert_rejected(&d, Rule::T3);
    assert_eq!(old.state().access(), &AccessPolicy::default(), "unchanged");
}

#[test]
fn m1_nothing_is_learned_automatically() {
    let mut room = Room::new();
    let planned = room.start_objective();
    let d = room.contribute(&specialist_call(&planned), "findings with sources");
    let write = specialist_call(&d);
    let d = room.contribute(&write, "the report");
    room.review(&review_call(&d), &all_met());
    assert!(room.state().memory().is_empty());
}

#[test]
fn m1_a_state_written_before_the_room_kept_a_memory_loads_and_replays() {
    let mut room = Room::new();
    let (event, _) = with_a_contribution(&mut room);
    let state = room.state().clone();
    let mut document = serde_json::to_value(&state).unwrap();
    let removed = document.as_object_mut().unwrap().remove("memory");
    assert_eq!(removed, Some(serde_json::json!([])));
    let old: RoomState = serde_json::from_value(document).unwrap();
    assert_eq!(old, state, "an older state loads with an empty memory");
    // Deciding on the older state is deciding on the current one.
    let catalog = catalog();
    let input = Input::Memory {
        by: p("olive"),
        change: add("from the owner", Provenance::OwnerMessage { event }),
    };
    let mut ids = DerivedIds::new(Uuid::from_u128(1));
    let from_old = decide(&old, input.clone(), &mut env(&mut ids, &catalog)).unwrap();
    let mut ids = DerivedIds::new(Uuid::from_u128(1));
    let from_new = decide(&state, input, &mut env(&mut ids, &catalog)).unwrap();
    assert_eq!(from_old.state, from_new.state);
    assert_eq!(from_old.log, from_new.log);
    assert_eq!(from_old.state.memory().entries().len(), 1);
    // The state with its memory round-trips.
    let back: RoomState =
        serde_json::from_str(&serde_json::to_string(&from_old.state).unwrap()).unwrap();
    assert_eq!(back, from_old.state);
}
