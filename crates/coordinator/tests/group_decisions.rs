//! Issue 21, group decisions: inputs waiting for one Room while it commits are decided in
//! sequence, each on the state the one before leaves, and committed in one transaction, each
//! its own revision and history row; the calls they reserve are sent only after it (B1). A
//! group the store refuses is decided again input by input, so T1 holds for a group as for a
//! single commit. On the in-memory store behind [`Interposed`], which sees every commit.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use agentroom_coordinator::{CoordinatorConfig, Outcome};
use agentroom_ports::domain::event::{Event, EventBody};
use agentroom_ports::domain::ids::{EventId, PrincipalId};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{Revision, RoomStore, WorkflowStore};
use support::calls::{Behaviour, Room, TestProvider, ms, runner, within};
use tokio::task::JoinSet;

fn message(room: &Room, n: u128) -> Event {
    Event {
        id: EventId::from_uuid(uuid::Uuid::from_u128(0x6120_0000 + n)),
        room: room.id(),
        author: PrincipalId::parse("olive").unwrap(),
        body: EventBody::OwnerMessage {
            text: format!("message {n}"),
        },
    }
}

/// A Room whose first commit that reserves a reasoner call holds the Room (inside that
/// commit) long enough for every message posted with it to wait behind it.
async fn held_room(name: &str) -> (Room, Arc<TestProvider>) {
    let provider = TestProvider::new(Behaviour::Answer {
        micros: 400,
        delay: ms(1),
    });
    let room = Room::new(
        name,
        Arc::clone(&provider),
        CoordinatorConfig::new(runner("runner-g", 5_000)),
    )
    .await;
    room.store.after_reserving(CallRole::Reasoner, async {
        tokio::time::sleep(ms(300)).await;
    });
    (room, provider)
}

/// How many history rows after `after` accepted an event, and how many distinct events.
async fn accepted(room: &Room, after: Revision) -> (usize, usize) {
    let history = room.store.history(&room.id(), after, 1_000).await.unwrap();
    let events: Vec<_> = history.iter().filter_map(|h| h.event).collect();
    let distinct: BTreeSet<_> = events.iter().copied().collect();
    (events.len(), distinct.len())
}

/// Posts `events` at once, each from its own task (as clients of one host do).
async fn post_together(room: &Room, events: Vec<Event>) -> Vec<(EventId, Outcome)> {
    let mut posts = JoinSet::new();
    for event in events {
        let coordinator = room.coordinator.clone();
        posts.spawn(async move { (event.id, coordinator.post(&event).await.unwrap()) });
    }
    let mut outcomes = Vec::new();
    while let Some(posted) = posts.join_next().await {
        outcomes.push(posted.unwrap());
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue21_b1_inputs_waiting_for_a_room_are_decided_in_sequence_and_committed_together() {
    within(async {
        let (room, provider) = held_room("grouped").await;
        let before = room.load().await;
        let outcomes = post_together(&room, (0..8).map(|n| message(&room, n)).collect()).await;
        room.coordinator.wait_idle().await;

        // Each message decided, with its own revision and its one reasoner call.
        let mut revisions = BTreeSet::new();
        let mut ops = BTreeSet::new();
        for (id, outcome) in &outcomes {
            let Outcome::Decided {
                revision, calls, ..
            } = outcome
            else {
                panic!("{id} not decided: {outcome:?}");
            };
            assert_eq!(calls.len(), 1, "{id}");
            revisions.insert(*revision);
            ops.extend(calls.iter().copied());
        }
        assert_eq!((revisions.len(), ops.len()), (8, 8));

        // Those that waited were committed together: one transaction, consecutive revisions.
        let accepting: Vec<_> = room
            .store
            .commits()
            .into_iter()
            .filter(|c| c.input == "event_accepted")
            .collect();
        assert_eq!(accepting.len(), 8, "{accepting:#?}");
        assert!(accepting.iter().all(|c| c.result.is_ok()), "{accepting:#?}");
        let grouped: Vec<_> = accepting.iter().filter(|c| c.group > 1).collect();
        assert!(grouped.len() >= 2, "no group was committed: {accepting:#?}");
        for pair in grouped.windows(2) {
            assert_eq!(pair[1].expected, pair[0].result.clone().unwrap());
        }

        // One history row per message, each accepting its event once (T1), and every call
        // sent once after its reservation was durable (B1), answered and settled.
        assert_eq!(accepted(&room, before.revision).await, (8, 8));
        assert_eq!(provider.calls(), 8);
        for op in &ops {
            let record = room.store.operation(*op).await.unwrap().unwrap();
            assert!(record.receipt.is_some(), "{op}");
        }
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::new(8 * 400));
        assert_eq!(balances.reserved, UsdMicros::ZERO);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue21_t1_a_group_the_store_refuses_is_decided_again_input_by_input() {
    within(async {
        let (room, provider) = held_room("refused-group").await;
        let before = room.load().await;
        // The same message twice among others, all waiting together: the group that holds
        // both is refused (T1: an event is accepted once), nothing of it written, and each
        // input is then decided alone.
        let twice = message(&room, 7);
        let mut events: Vec<Event> = (0..4).map(|n| message(&room, n)).collect();
        events.push(twice.clone());
        events.push(twice.clone());
        let outcomes = post_together(&room, events).await;
        room.coordinator.wait_idle().await;

        let decided = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Decided { .. }))
            .count();
        assert_eq!(decided, 5, "{outcomes:#?}");
        let repeated: Vec<_> = outcomes.iter().filter(|(id, _)| *id == twice.id).collect();
        assert!(
            repeated
                .iter()
                .any(|(_, o)| matches!(o, Outcome::AlreadyDone)),
            "{repeated:#?}"
        );
        let commits = room.store.commits();
        assert!(
            commits.iter().any(|c| c.group > 1 && c.result.is_err()),
            "no group was refused: {commits:#?}"
        );
        assert_eq!(
            accepted(&room, before.revision).await,
            (5, 5),
            "accepted once each"
        );
        assert_eq!(provider.calls(), 5);
        let balances = room.assert_ledger_replays().await;
        assert_eq!(balances.spent, UsdMicros::new(5 * 400));
        assert_eq!(balances.reserved, UsdMicros::ZERO);
    })
    .await;
}
