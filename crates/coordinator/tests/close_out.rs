//! Issue 21 through the service: a closed objective leaves the live state for its record in
//! the commit of the decision that closed it, and every view reads it back whole; a database
//! the previous release wrote, whose completed objective sits in the live state, closes it
//! out at its next decision and still replays its whole history (D1).
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, InputId};
use agentroom_ports::domain::ids::{PrincipalId, RoomId};
use agentroom_ports::domain::ledger::BudgetLedger;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::ObjectiveStatus;
use agentroom_ports::{Revision, RoomStore};
use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

/// The database release 4e8e77a's `agentroom demo` wrote (store-sqlite's fixtures): Room
/// `local` with one objective run to an approving review, in the live state.
fn previous_release() -> (tempfile::TempDir, Arc<SqliteRooms>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../store-sqlite/tests/fixtures/demo-4e8e77a.db"),
        &path,
    )
    .unwrap();
    migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    (dir, Arc::new(store))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_a_previous_releases_completed_objective_leaves_the_live_state_at_the_next_decision() {
    let (_dir, store) = previous_release();
    let room = RoomId::parse("local").unwrap();
    let before = store.load(&room).await.unwrap().unwrap();
    let objective = before.state.objectives()[0].clone();
    assert_eq!(objective.status(), ObjectiveStatus::Completed);
    let contributions = before.state.contributions().clone();
    assert!(!contributions.is_empty());

    let coordinator = Coordinator::builder(
        Arc::clone(&store) as Arc<_>,
        CoordinatorConfig::for_command("upgrade test"),
    )
    .build();
    // Any decision: the operator raises the limit by one micro.
    coordinator
        .raise_limit(
            &room,
            InputId::named("raise after the upgrade"),
            PrincipalId::parse("oscar").unwrap(),
            UsdMicros::new(1),
        )
        .await
        .unwrap();

    // Nothing of it stays in the live state; the record holds it whole.
    let live = store.load(&room).await.unwrap().unwrap();
    assert_eq!(live.revision, Revision(before.revision.0 + 1));
    assert!(live.state.objectives().is_empty(), "open work only");
    assert!(live.state.contributions().is_empty());
    let record = store
        .objective_record(&room, objective.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.objective, objective);
    assert_eq!(record.status(), ObjectiveStatus::Completed);
    assert_eq!(record.contributions.len(), contributions.len());

    // Every view reads it as before the upgrade.
    let view = coordinator
        .room_for_objective(&room, objective.id())
        .await
        .unwrap();
    assert_eq!(view.state.objective(objective.id()), Some(&objective));
    assert_eq!(view.state.contributions(), &contributions);
    let (id, contribution) = contributions.iter().next().unwrap();
    let view = coordinator.room_for_contribution(&room, *id).await.unwrap();
    assert_eq!(view.state.contributions().get(id), Some(contribution));
    let digest = contribution.digests()[0].clone();
    let view = coordinator.room_for_content(&room, &digest).await.unwrap();
    assert!(view.state.names_content(&digest));
    let whole = coordinator.room_with_history(&room).await.unwrap();
    assert_eq!(whole.state.objectives(), std::slice::from_ref(&objective));
    let budget = coordinator.budget(&room).await.unwrap();
    assert!(
        budget
            .by_objective
            .contains_key(&objective.id().to_string()),
        "its charges are still booked to it: {:?}",
        budget.by_objective
    );

    // D1: the whole history replays, the last revision to the live state, and the ledger
    // rows to its balances.
    let mut last = None;
    for revision in 1..=live.revision.0 {
        let rebuilt = store.state_at(&room, Revision(revision)).await.unwrap();
        assert!(rebuilt.is_some(), "revision {revision} does not rebuild");
        last = rebuilt;
    }
    assert_eq!(last.as_ref(), Some(&live.state));
    assert_eq!(
        BudgetLedger::replay(&store.ledger(&room).await.unwrap()).as_ref(),
        Ok(live.state.ledger())
    );
}
