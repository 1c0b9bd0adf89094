//! The planning conformance suite on SQLite (a fresh, migrated file per test), the query
//! plans of boards and filtered lists, and D5: no store migrates on construction.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_planning::{PlanningRepository, RepoError, RoomId};
use agentroom_store_sqlite::{
    Durability, MigrationState, MigrationStatus, SqlitePlanning, migrate,
};

async fn fresh() -> Arc<dyn PlanningRepository> {
    // The directory lives as long as the test process; each test gets its own.
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("planning.db");
    migrate::up(&path).unwrap();
    Arc::new(SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_planning::planning_conformance!(fresh);

fn migrated() -> (tempfile::TempDir, SqlitePlanning) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    migrate::up(&path).unwrap();
    let store = SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap();
    (dir, store)
}

#[test]
fn a_board_reads_only_its_plan_range_of_the_plan_clustered_table() {
    let (_dir, store) = migrated();
    let plan = store
        .explain(agentroom_store_sqlite::planning::BOARD_SQL)
        .unwrap();
    let text = plan.join("\n");
    assert!(
        text.contains("SEARCH t USING PRIMARY KEY (plan_key=?)"),
        "{text}"
    );
    assert!(!text.contains("SCAN"), "{text}");
    assert!(!text.contains("TEMP B-TREE"), "{text}");
}

#[test]
fn a_filtered_list_reads_only_its_plan_and_column_range() {
    let (_dir, store) = migrated();
    let plan = store
        .explain(agentroom_store_sqlite::planning::COLUMN_SQL)
        .unwrap();
    let text = plan.join("\n");
    assert!(
        text.contains(
            "SEARCH t USING COVERING INDEX planning_tasks_column (plan_key=? AND column_ix=?)"
        ),
        "{text}"
    );
    assert!(!text.contains("SCAN"), "{text}");
    assert!(!text.contains("TEMP B-TREE"), "{text}");
}

/// Errors keep their cause across the crate seam: a statement SQLite refuses (its table was
/// dropped under a running store) is a `RepoError::Database` that says what was being done,
/// shows the driver's text, and whose `source()` is rusqlite's own error, not a copy of it.
#[tokio::test]
async fn a_database_error_keeps_the_driver_error_as_its_source() {
    let (dir, store) = migrated();
    rusqlite::Connection::open(dir.path().join("planning.db"))
        .unwrap()
        .execute_batch("DROP TABLE planning_tasks")
        .unwrap();
    let room = RoomId::parse("local").unwrap();
    let error = store.tasks(&room, 1, None).await.unwrap_err();
    assert!(matches!(error, RepoError::Database { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("reading tasks"), "{text}");
    assert!(text.contains("no such table"), "{text}");
    let source = std::error::Error::source(&error).expect("the driver's error");
    let driver = source
        .downcast_ref::<rusqlite::Error>()
        .unwrap_or_else(|| panic!("not rusqlite's error: {source:?}"));
    assert!(driver.to_string().contains("planning_tasks"), "{driver}");
}

#[test]
fn d5_opening_never_creates_or_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    let missing = SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap_err();
    assert!(
        matches!(missing, RepoError::NotMigrated { .. }),
        "{missing}"
    );
    assert!(
        missing.to_string().contains("agentroom migrate up"),
        "{missing}"
    );
    assert!(!path.exists(), "opening created the file");

    // An empty database (created by something else) is not migrated either.
    rusqlite::Connection::open(&path).unwrap();
    let empty = SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap_err();
    assert!(empty.to_string().contains("no migration table"), "{empty}");
    assert!(
        empty.to_string().contains("agentroom migrate up"),
        "{empty}"
    );

    assert_eq!(migrate::up(&path).unwrap(), vec![1, 2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(
        migrate::up(&path).unwrap(),
        Vec::<i64>::new(),
        "up twice applies nothing"
    );
    SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap();
    let status = migrate::status(&path).unwrap();
    assert_eq!(status.len(), 8);
    assert!(status.iter().all(MigrationStatus::applied));
    assert_eq!(status[0].description, "create planning");
    assert_eq!(status[1].description, "create rooms");
    assert_eq!(status[2].description, "lean room state");
    assert_eq!(status[3].description, "create access tokens");
    // 0005 is PostgreSQL's alone (its commit statement); 0006 is both stores'.
    assert_eq!(
        (status[4].version, status[4].description.as_str()),
        (6, "record inputs and deliveries")
    );
    assert_eq!(
        (status[5].version, status[5].description.as_str()),
        (7, "create contents")
    );
    assert_eq!(
        (status[6].version, status[6].description.as_str()),
        (8, "create budget pools")
    );
    assert_eq!(
        (status[7].version, status[7].description.as_str()),
        (9, "create objective records")
    );
}

#[test]
fn d5_down_reverts_everything_and_the_store_refuses_to_open() {
    let (dir, store) = migrated();
    drop(store);
    let path = dir.path().join("planning.db");
    assert_eq!(migrate::down(&path).unwrap(), vec![9, 8, 7, 6, 4, 3, 2, 1]);
    let status = migrate::status(&path).unwrap();
    assert!(status.iter().all(|s| s.state == MigrationState::Pending));
    let connection = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name <> '_sqlx_migrations'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
    let refused = SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap_err();
    assert!(
        refused.to_string().contains(
            "migration 1 (create planning) is pending; migration 2 (create rooms) is pending"
        ),
        "{refused}"
    );
}

#[test]
fn every_migration_file_is_embedded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/sqlite");
    let files = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .map(|e| e.path().extension().is_some_and(|x| x == "sql"))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(files, migrate::MIGRATOR.iter().count());
}
