//! Issue 21, item 4: Room changes reach other processes by notification. Migration 0010's
//! triggers notify `agentroom_rooms` with the Room's id when a Room is created or an event is
//! persisted for it, at commit; `RoomStore::listen` hears them on a connection of its own.
//! Other tests share the database (their schemas, one channel), so a feed may hear their
//! Rooms too: each check waits for its own Room among what it hears.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use agentroom_domain::engine::Input;
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, PrincipalId, RoomId, Timestamp};
use agentroom_ports::conformance::Driver;
use agentroom_ports::{EventAppend, RoomFeed, RoomSignal, RoomStore};
use agentroom_store_postgres::PgRooms;

/// Long enough for a loaded CI machine; a notice that never comes fails the test.
const PATIENCE: Duration = Duration::from_secs(30);

async fn hears(feed: &mut Box<dyn RoomFeed>, room: &RoomId) {
    let waited = tokio::time::timeout(PATIENCE, async {
        loop {
            match feed.next().await {
                RoomSignal::Changed(rooms) if rooms.contains(room) => return,
                RoomSignal::Changed(_) => {}
                RoomSignal::Missed => panic!("the feed lost its connection"),
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "no notice for {room} within {PATIENCE:?}");
}

/// Whether `feed` names `room` in none of its notices for 300 ms.
async fn stays_quiet(feed: &mut Box<dyn RoomFeed>, room: &RoomId) -> bool {
    tokio::time::timeout(Duration::from_millis(300), async {
        loop {
            if let RoomSignal::Changed(rooms) = feed.next().await
                && rooms.contains(room)
            {
                return;
            }
        }
    })
    .await
    .is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_room_and_a_persisted_event_are_heard_by_a_listening_store() {
    let (schema, pool) = common::fresh_schema().await;
    let store = common::migrate_rooms(&schema, pool.clone()).await;
    let mut feed = store
        .listen()
        .await
        .unwrap()
        .expect("PostgreSQL has a feed");

    // Another store (another process, as far as the database knows) creates a Room.
    let other = PgRooms::from_pool(pool.clone()).await.unwrap();
    let driver = Driver::create(&other, "heard", 1_000_000).await;
    hears(&mut feed, &driver.room()).await;

    let event = Event {
        id: EventId::from_uuid(uuid::Uuid::from_u128(7)),
        room: driver.room(),
        author: PrincipalId::parse("olive").unwrap(),
        body: EventBody::OwnerMessage {
            text: "hello".to_owned(),
        },
    };
    assert_eq!(
        other
            .append_event(&event, Timestamp::from_millis(1))
            .await
            .unwrap(),
        EventAppend::Inserted
    );
    hears(&mut feed, &driver.room()).await;

    // A decision's commit does not notify: nothing another process does waits on it.
    let mut driver = driver;
    let decision = driver.owner_message("plan something");
    driver
        .commit(&other, &decision, "event_accepted")
        .await
        .unwrap();
    let quiet = stays_quiet(&mut feed, &driver.room()).await;
    assert!(quiet, "a decision's commit notified");

    // Nor does a decision's commit that persists the event it accepts (issue 21, migration
    // 0011): the event needs no other process's attention.
    let persisted = Event {
        id: EventId::from_uuid(uuid::Uuid::from_u128(8)),
        room: driver.room(),
        author: PrincipalId::parse("olive").unwrap(),
        body: EventBody::OwnerMessage {
            text: "persisted by its decision".to_owned(),
        },
    };
    let decision = driver.decide(Input::EventAccepted(persisted.clone()));
    driver
        .commit_persisting(&other, &decision, &persisted)
        .await
        .unwrap();
    assert_eq!(
        other.event(&driver.room(), persisted.id).await.unwrap(),
        Some(persisted)
    );
    let quiet = stays_quiet(&mut feed, &driver.room()).await;
    assert!(quiet, "a commit persisting its accepted event notified");
    drop(feed);
    store.close().await;
    common::drop_schema(&schema).await;
}
