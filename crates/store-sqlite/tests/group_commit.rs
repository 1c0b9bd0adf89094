//! Issue 21, planning group commit on SQLite: the writes of a group are one transaction (one
//! sync at `Durability::PowerLoss`), the group's own reads see them, nobody else does until the
//! commit, and a repository that shares its writer with the Room store never groups.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_planning::{Columns, NewPlan, NewTask, PlanningRepository, RepoError};
use agentroom_ports::domain::ids::{RoomId, Timestamp};
use agentroom_store_sqlite::{Durability, SqlitePlanning, SqliteRooms, migrate};

fn plan(id: &str) -> NewPlan {
    NewPlan {
        plan_id: id.to_owned(),
        name: id.to_owned(),
        description: String::new(),
        columns: Columns::new(vec![]).unwrap(),
        created: Timestamp::from_millis(1),
    }
}

fn task(plan: i64, id: &str) -> NewTask {
    NewTask {
        plan,
        task_id: id.to_owned(),
        title: id.to_owned(),
        column: 0,
        description: String::new(),
        assignee: String::new(),
        deps: vec![],
        metadata: "{}".to_owned(),
        created: Timestamp::from_millis(2),
    }
}

#[tokio::test]
async fn a_group_is_one_transaction_its_reads_see_and_others_do_not_until_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    migrate::up(&path).unwrap();
    let grouping = SqlitePlanning::open(&path, Durability::PowerLoss).unwrap();
    let other = SqlitePlanning::open(&path, Durability::PowerLoss).unwrap();
    let room = RoomId::parse("local").unwrap();

    assert!(grouping.begin_group().await.unwrap());
    // A second group while one is open is a caller's mistake, refused, and changes nothing.
    assert!(matches!(
        grouping.begin_group().await,
        Err(RepoError::Corrupt { .. })
    ));
    let record = grouping.create_plan(&room, &plan("p1")).await.unwrap();
    grouping
        .add_task(&room, &task(record.key, "t1"))
        .await
        .unwrap()
        .unwrap();
    // The group's reads see its writes; another connection sees nothing yet.
    assert!(grouping.plan(&room, "p1").await.unwrap().is_some());
    assert_eq!(
        grouping.tasks(&room, record.key, None).await.unwrap().len(),
        1
    );
    assert!(other.plans(&room).await.unwrap().is_empty());

    grouping.end_group().await.unwrap();
    assert_eq!(other.plans(&room).await.unwrap().len(), 1);
    assert_eq!(other.tasks(&room, record.key, None).await.unwrap().len(), 1);
    // Ending with no group open is nothing, and a new group opens.
    grouping.end_group().await.unwrap();
    assert!(grouping.begin_group().await.unwrap());
    grouping.end_group().await.unwrap();
}

#[tokio::test]
async fn planning_that_shares_the_room_stores_writer_never_groups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    migrate::up(&path).unwrap();
    let rooms = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
    let planning = rooms.planning();
    assert!(!planning.begin_group().await.unwrap());
    let room = RoomId::parse("local").unwrap();
    planning.create_plan(&room, &plan("p1")).await.unwrap();
    // Committed by itself: a separate handle sees it before any end.
    let other = SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap();
    assert_eq!(other.plans(&room).await.unwrap().len(), 1);
    planning.end_group().await.unwrap();
}
