//! The room loop end to end on the in-memory store and on SQLite: the demo scenario's
//! objective through scripted agents to a completed, reviewed objective whose ledger adds up;
//! T1 (an event posted twice is accepted once), two coordinators on one Room (no task
//! dispatched twice), and a coordinator rebuilt from the store repeating nothing (D6).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

use std::sync::Arc;

use agentroom_coordinator::{CoordinatorError, Outcome, Store};
use agentroom_ports::domain::event::EventBody;
use agentroom_ports::memory::MemoryStore;
use agentroom_ports::{Revision, StoreError};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use support::*;

fn sqlite() -> (tempfile::TempDir, Arc<SqliteRooms>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    (dir, Arc::new(store))
}

async fn whole_objective<S: Store>(store: Arc<S>) {
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (coordinator, notifier) =
        coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "one");
    coordinator.recover().await.unwrap();
    set_up(&coordinator, &scenario).await;
    let outcome = coordinator.post(&owner_event(&scenario, 0)).await.unwrap();
    assert!(decided(&outcome), "{outcome:?}");
    coordinator.wait_idle().await;
    assert_completed_and_balanced(&*store).await;
    // two plans: gather + write, then benchmarks + write again (gather reused, O3)
    assert_eq!(provider.tasks().len(), 4, "{:?}", provider.tasks());
    coordinator.deliver_notifications().await.unwrap();
    assert!(!notifier.received().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_objective_completes_reviewed_and_balanced_in_memory() {
    whole_objective(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_objective_completes_reviewed_and_balanced_on_sqlite() {
    let (_dir, store) = sqlite();
    whole_objective(store).await;
}

async fn posted_twice<S: Store>(store: Arc<S>) {
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (coordinator, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "one");
    set_up(&coordinator, &scenario).await;
    let event = owner_event(&scenario, 0);
    let first = coordinator.post(&event).await.unwrap();
    // Issue 21: persisted by the commit that accepted it.
    let Outcome::Decided { revision, .. } = &first else {
        panic!("{first:?}")
    };
    let accepted = store
        .history(&room_id(), Revision(revision.0 - 1), 1)
        .await
        .unwrap();
    assert_eq!(accepted[0].event, Some(event.id));
    assert_eq!(
        store.event(&room_id(), event.id).await.unwrap(),
        Some(event.clone())
    );
    let second = coordinator.post(&event).await.unwrap();
    assert!(decided(&first));
    assert_eq!(second, Outcome::AlreadyDone);
    coordinator.wait_idle().await;
    let again = coordinator.accept(&room_id(), event.id).await.unwrap();
    assert_eq!(again, Outcome::AlreadyDone);
    let room = coordinator.room_with_history(&room_id()).await.unwrap();
    assert_eq!(room.state.objectives().len(), 1);
    assert_completed_and_balanced(&*store).await;
}

async fn another_event_under_a_used_id<S: Store>(store: Arc<S>) {
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (coordinator, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "one");
    set_up(&coordinator, &scenario).await;
    let event = owner_event(&scenario, 0);
    assert!(decided(&coordinator.post(&event).await.unwrap()));
    coordinator.wait_idle().await;
    let before = coordinator.room(&room_id()).await.unwrap();
    let mut forged = event.clone();
    forged.body = EventBody::OwnerMessage {
        text: "something else entirely".to_owned(),
    };
    let refused = coordinator.post(&forged).await.unwrap_err();
    assert!(
        matches!(refused, CoordinatorError::Store(StoreError::EventMismatch(id)) if id == event.id),
        "{refused:?}"
    );
    // Nothing changed: the Room, and the event as stored.
    let after = coordinator.room(&room_id()).await.unwrap();
    assert_eq!(after.revision, before.revision);
    assert_eq!(
        store.event(&room_id(), event.id).await.unwrap(),
        Some(event)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_another_event_posted_under_a_used_id_is_refused_and_changes_nothing_in_memory() {
    another_event_under_a_used_id(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_another_event_posted_under_a_used_id_is_refused_and_changes_nothing_on_sqlite() {
    let (_dir, store) = sqlite();
    another_event_under_a_used_id(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_an_event_posted_twice_is_accepted_once_in_memory() {
    posted_twice(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_an_event_posted_twice_is_accepted_once_on_sqlite() {
    let (_dir, store) = sqlite();
    posted_twice(store).await;
}

async fn two_coordinators<S: Store>(store: Arc<S>) {
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (a, _) = coordinator(
        Arc::clone(&store),
        Arc::clone(&provider),
        catalog.clone(),
        "a",
    );
    let (b, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "b");
    set_up(&a, &scenario).await;
    set_up(&b, &scenario).await;
    let event = owner_event(&scenario, 0);
    let (first, second) = tokio::join!(a.post(&event), b.post(&event));
    let (first, second) = (first.unwrap(), second.unwrap());
    // While the winner's calls run, the other process recovers again and again: live leases
    // of another runner are left alone, and accepting the event once more does nothing.
    for _ in 0..5 {
        let (ra, rb) = tokio::join!(a.recover(), b.recover());
        for report in [ra.unwrap(), rb.unwrap()] {
            assert!(report.claimed.is_empty(), "{report:?}");
        }
        assert_eq!(
            b.accept(&room_id(), event.id).await.unwrap(),
            Outcome::AlreadyDone
        );
        assert_eq!(
            a.accept(&room_id(), event.id).await.unwrap(),
            Outcome::AlreadyDone
        );
    }
    assert_eq!(
        [decided(&first), decided(&second)]
            .iter()
            .filter(|d| **d)
            .count(),
        1,
        "{first:?} {second:?}"
    );
    a.wait_idle().await;
    b.wait_idle().await;
    let tasks = provider.tasks();
    let mut unique = tasks.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        tasks.len(),
        "a task was dispatched twice: {tasks:?}"
    );
    assert_completed_and_balanced(&*store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_two_coordinators_on_one_room_never_dispatch_the_same_task_twice_in_memory() {
    two_coordinators(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_two_coordinators_on_one_room_never_dispatch_the_same_task_twice_on_sqlite() {
    let (_dir, store) = sqlite();
    two_coordinators(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_a_coordinator_rebuilt_from_the_store_repeats_no_work() {
    let (_dir, store) = sqlite();
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (first, _) = coordinator(
        Arc::clone(&store),
        Arc::clone(&provider),
        catalog.clone(),
        "first",
    );
    set_up(&first, &scenario).await;
    first.post(&owner_event(&scenario, 0)).await.unwrap();
    first.wait_idle().await;
    let calls = provider.calls.lock().unwrap().len();
    drop(first);
    let (second, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "second");
    let report = second.recover().await.unwrap();
    assert_eq!(report, Default::default());
    let again = second.post(&owner_event(&scenario, 0)).await.unwrap();
    assert_eq!(again, Outcome::AlreadyDone);
    second.wait_idle().await;
    assert_eq!(provider.calls.lock().unwrap().len(), calls);
    assert_completed_and_balanced(&*store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_an_event_persisted_but_never_accepted_is_accepted_on_start() {
    use agentroom_ports::RoomStore;
    use agentroom_ports::domain::ids::Timestamp;

    let (_dir, store) = sqlite();
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (first, _) = coordinator(
        Arc::clone(&store),
        Arc::clone(&provider),
        catalog.clone(),
        "first",
    );
    set_up(&first, &scenario).await;
    // The first process persisted the owner's message and died before accepting it.
    store
        .append_event(&owner_event(&scenario, 0), Timestamp::from_millis(1))
        .await
        .unwrap();
    drop(first);
    let (second, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "second");
    second.recover().await.unwrap();
    assert_eq!(second.accept_pending(&room_id()).await.unwrap(), 1);
    second.wait_idle().await;
    assert_eq!(second.accept_pending(&room_id()).await.unwrap(), 0);
    assert_completed_and_balanced(&*store).await;
}

/// A graceful stop with nothing running: drained at once, nothing to release; from then on
/// every input is refused (`ActorStopped`, a 503 at the HTTP edge) and nothing is written,
/// neither the event nor a decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_input_and_writes_nothing() {
    let (_dir, store) = sqlite();
    let scenario = scenario("demo.toml");
    let (_, catalog) = room_of(&scenario);
    let provider = agents(&scenario);
    let (coordinator, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "one");
    coordinator.recover().await.unwrap();
    set_up(&coordinator, &scenario).await;
    let before = agentroom_ports::RoomStore::load(&*store, &room_id())
        .await
        .unwrap()
        .unwrap();
    assert!(!coordinator.stopping());

    let report = coordinator
        .shutdown(std::time::Duration::from_secs(5))
        .await;
    assert!(report.drained, "{report:?}");
    assert!(report.released.is_empty(), "{report:?}");
    assert!(coordinator.stopping());

    let event = owner_event(&scenario, 0);
    let refused = coordinator.post(&event).await;
    assert!(
        matches!(
            refused,
            Err(agentroom_coordinator::CoordinatorError::ActorStopped(ref room)) if *room == room_id()
        ),
        "{refused:?}"
    );
    let after = agentroom_ports::RoomStore::load(&*store, &room_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, before, "nothing decided");
    assert_eq!(
        agentroom_ports::RoomStore::event(&*store, &room_id(), event.id)
            .await
            .unwrap(),
        None,
        "nothing persisted"
    );
    assert!(provider.tasks().is_empty());
    assert_eq!(coordinator.calls_in_flight(), 0);
}

/// A coordinator dropped by every handle lets go of its Room actors and its store: the actors
/// hold it only while they decide (a process that builds several, as tests, the bench and
/// one-shot commands do, would otherwise keep every one alive until it exits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_coordinator_lets_go_of_its_room_actors_and_its_store() {
    let scenario = scenario("demo.toml");
    let store = Arc::new(MemoryStore::new());
    let (coordinator, notifier) = coordinator(
        Arc::clone(&store),
        agents(&scenario),
        room_of(&scenario).1,
        "dropped",
    );
    set_up(&coordinator, &scenario).await;
    assert!(decided(
        &coordinator.post(&owner_event(&scenario, 0)).await.unwrap()
    ));
    coordinator.wait_idle().await;
    assert!(Arc::strong_count(&store) > 1, "held while in use");
    drop(coordinator);
    drop(notifier);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while Arc::strong_count(&store) > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the store is still held {} times after the coordinator was dropped",
            Arc::strong_count(&store) - 1
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// T2 and the content bounds: a model specialist's contribution above the Room's
/// `content.max_artifact_bytes` is refused by its rule (charged, not applied), and nothing of
/// it is stored in the Room's artifact store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_an_oversized_contribution_is_refused_and_nothing_of_it_is_stored() {
    let demo = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/demo.toml"),
    )
    .unwrap();
    let bounded = demo.replacen(
        "[room]\n",
        "[room]\npolicy = \"[content]\\nmax_artifact_bytes = 40\\n\"\n",
        1,
    );
    let scenario = agentroom_agents::scripted::Scenario::parse(&bounded).unwrap();
    let (_, catalog) = room_of(&scenario);
    let store = Arc::new(MemoryStore::new());
    let provider = agents(&scenario);
    let (coordinator, _) = coordinator(Arc::clone(&store), Arc::clone(&provider), catalog, "one");
    set_up(&coordinator, &scenario).await;
    coordinator.post(&owner_event(&scenario, 0)).await.unwrap();
    coordinator.wait_idle().await;

    let room = agentroom_ports::RoomStore::load(&*store, &room_id())
        .await
        .unwrap()
        .unwrap();
    assert!(room.state.contributions().is_empty(), "nothing applied");
    // The research notes as the scripted specialist returned them: the body it would be kept
    // under, which the store never received.
    let notes =
        "## notes\n\nTwo surveys describe checkpointed agent loops and leases on tool calls.\n";
    let digest = agentroom_ports::domain::artifact::ContentDigest::of(notes.as_bytes());
    assert_eq!(
        agentroom_ports::ArtifactStore::content(&*store, &room_id(), &digest)
            .await
            .unwrap(),
        None,
        "the refused body was stored"
    );
    let balances = room.state.ledger().balances();
    assert!(balances.spent.micros() > 0, "the refused work is charged");
    // The task failed with the refusal's reason, which names the bound.
    let objective = &room.state.objectives()[0];
    let failed = format!("{:?}", objective.plans()[0].tasks());
    assert!(
        failed.contains("content.max_artifact_bytes"),
        "the refusal names the bound: {failed}"
    );
}
