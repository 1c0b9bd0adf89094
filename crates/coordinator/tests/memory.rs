//! The Room's memory reaching the reasoner (issue 18 part 3, M1 and C1), through the
//! coordinator service on the in-memory store: entries added, corrected and retracted with
//! `add_memory`, `correct_memory` and `retract_memory`, each one decided input; the next
//! reasoner call's context holds every current entry with its provenance (what it came from,
//! who added it, when, its latest correction) and never a retracted one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::sync::Arc;

use agentroom_coordinator::{CoordinatorConfig, InputId, Outcome};
use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::engine::Verdict;
use agentroom_ports::domain::ids::PrincipalId;
use agentroom_ports::domain::memory::Provenance;
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::{CallContext, ContextItem};
use support::calls::{Behaviour, Room, TestProvider, ms, runner, within};

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn accepted_by_m1(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Decided { .. })
        && outcome
            .log()
            .iter()
            .any(|e| e.verdict == Verdict::Accepted && e.rule == Some(Rule::M1))
}

fn memory_items(context: &CallContext) -> Vec<&ContextItem> {
    context
        .items
        .iter()
        .filter(|i| i.kind == "memory")
        .collect()
}

fn attr<'a>(item: &'a ContextItem, name: &str) -> Option<&'a str> {
    item.attrs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn paper() -> Provenance {
    Provenance::External {
        url: "https://example.org/hamlin-2026".to_owned(),
        digest: ContentDigest::of(b"Hamlin 2026 benchmark"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_c1_current_entries_reach_the_reasoner_with_their_provenance_and_retracted_ones_never() {
    within(async {
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 400,
            delay: ms(1),
        });
        let config = CoordinatorConfig::new(runner("runner-a", 300));
        let mut room = Room::new("memory", Arc::clone(&provider), config).await;
        let id = room.id();
        let added = room
            .coordinator
            .add_memory(
                &id,
                InputId::named("remember the figure"),
                p("olive"),
                "Hamlin recovered 4,000 in-flight calls in 1.2 s".to_owned(),
                paper(),
            )
            .await
            .unwrap();
        assert!(accepted_by_m1(&added), "{added:?}");
        let secret = room
            .coordinator
            .add_memory(
                &id,
                InputId::named("remember the email"),
                p("oscar"),
                "Sam's address is sam@example.org".to_owned(),
                paper(),
            )
            .await
            .unwrap();
        assert!(accepted_by_m1(&secret), "{secret:?}");
        let memory = room.coordinator.memory(&id).await.unwrap();
        let [figure, email] = [memory.entries()[0].id(), memory.entries()[1].id()];

        room.post("How fast does Hamlin recover?").await;
        room.coordinator.wait_idle().await;
        let first = provider.contexts.lock().unwrap()[0].clone();
        let items = memory_items(&first);
        assert_eq!(items.len(), 2, "{first:#?}");
        let item = items[0];
        assert_eq!(item.id, figure.to_string());
        assert_eq!(item.text, "Hamlin recovered 4,000 in-flight calls in 1.2 s");
        assert_eq!(attr(item, "from"), Some("external"));
        assert_eq!(
            attr(item, "source"),
            Some("https://example.org/hamlin-2026")
        );
        assert_eq!(
            attr(item, "content_digest"),
            Some(ContentDigest::of(b"Hamlin 2026 benchmark").as_str())
        );
        assert_eq!(attr(item, "added_by"), Some("olive"));
        assert!(attr(item, "added_at").is_some(), "{item:?}");
        assert_eq!(attr(items[1], "added_by"), Some("oscar"));
        assert!(
            item.render().contains("<data kind=\"memory\""),
            "{}",
            item.render()
        );

        // The email is retracted, the figure corrected: the next call sees the correction
        // with who made it, and nothing of the email.
        let retracted = room
            .coordinator
            .retract_memory(
                &id,
                InputId::named("forget the email"),
                p("olive"),
                email,
                "personal data".to_owned(),
            )
            .await
            .unwrap();
        assert!(accepted_by_m1(&retracted), "{retracted:?}");
        let corrected = room
            .coordinator
            .correct_memory(
                &id,
                InputId::named("correct the figure"),
                p("oscar"),
                figure,
                "Hamlin recovered 4,000 in-flight calls in 1.1 s".to_owned(),
            )
            .await
            .unwrap();
        assert!(accepted_by_m1(&corrected), "{corrected:?}");
        room.post("And after the correction?").await;
        room.coordinator.wait_idle().await;
        let second = provider.contexts.lock().unwrap()[1].clone();
        let items = memory_items(&second);
        assert_eq!(items.len(), 1, "{second:#?}");
        assert_eq!(
            items[0].text,
            "Hamlin recovered 4,000 in-flight calls in 1.1 s"
        );
        assert_eq!(attr(items[0], "version"), Some("2"));
        assert_eq!(attr(items[0], "corrected_by"), Some("oscar"));
        assert_eq!(attr(items[0], "added_by"), Some("olive"));
        let everything = format!("{second:?}");
        assert!(!everything.contains("sam@example.org"), "{everything}");
        // The retracted entry stays in the Room's memory, with its retraction.
        let memory = room.coordinator.memory(&id).await.unwrap();
        let kept = memory.get(email).unwrap();
        assert_eq!(kept.retraction().unwrap().why, "personal data");
        assert_eq!(memory.entries().len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m1_t3_a_specialist_changes_no_memory_and_a_retry_of_the_same_input_adds_nothing() {
    within(async {
        let provider = TestProvider::new(Behaviour::Answer {
            micros: 400,
            delay: ms(1),
        });
        let config = CoordinatorConfig::new(runner("runner-a", 300));
        let room = Room::new("memory-refusals", Arc::clone(&provider), config).await;
        let id = room.id();
        let refused = room
            .coordinator
            .add_memory(
                &id,
                InputId::named("learned"),
                p("sam"),
                "learned by itself".to_owned(),
                paper(),
            )
            .await
            .unwrap();
        assert!(
            refused
                .log()
                .iter()
                .any(|e| e.verdict == Verdict::Rejected && e.rule == Some(Rule::M1)),
            "{refused:?}"
        );
        assert!(room.coordinator.memory(&id).await.unwrap().is_empty());
        // One input id, one entry, however often it is sent.
        for _ in 0..2 {
            room.coordinator
                .add_memory(
                    &id,
                    InputId::named("once"),
                    p("olive"),
                    "kept once".to_owned(),
                    paper(),
                )
                .await
                .unwrap();
        }
        assert_eq!(
            room.coordinator.memory(&id).await.unwrap().entries().len(),
            1
        );
    })
    .await;
}
