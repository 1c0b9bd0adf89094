//! D5 on PostgreSQL: constructing a store never migrates and refuses a database that is not
//! at this binary's schema, with advice to run `agentroom migrate up`; migrate up, status and
//! down do what the CLI's `agentroom migrate` promises.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::ids::{RoomId, Timestamp};
use agentroom_planning::{Columns, NewPlan, PlanningRepository, RepoError};
use agentroom_ports::conformance::Driver;
use agentroom_ports::{ArtifactStore, Put, Revision, RoomStore, StoreError};
use agentroom_ports::{OperationFilter, WorkflowStore};
use agentroom_store_postgres::migrate::{
    Ledger, MigrateError, WORKFLOW_MIGRATOR, down, down_to, down_workflows, status, up,
};
use agentroom_store_postgres::{MigrationState, MigrationStatus, PgPlanning, PgPool, PgRooms};

/// The store refuses the pool; returns the refusal's text and checks its advice.
async fn not_migrated(pool: &PgPool) -> String {
    match PgPlanning::from_pool(pool.clone()).await {
        Err(error @ RepoError::NotMigrated { .. }) => {
            let message = error.to_string();
            assert!(message.contains("run `agentroom migrate up`"), "{message}");
            message
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }
}

async fn table_exists(pool: &PgPool, table: &str) -> bool {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The planner's ledger.
fn states(status: &[MigrationStatus]) -> Vec<(i64, &str, MigrationState)> {
    status
        .iter()
        .filter(|m| m.ledger == Ledger::Planner)
        .map(|m| (m.version, m.description.as_str(), m.state))
        .collect()
}

/// The workflow store's ledger.
fn workflow_states(status: &[MigrationStatus]) -> Vec<(i64, &str, MigrationState)> {
    status
        .iter()
        .filter(|m| m.ledger == Ledger::Workflows)
        .map(|m| (m.version, m.description.as_str(), m.state))
        .collect()
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

fn plan() -> NewPlan {
    NewPlan {
        plan_id: "p1".to_owned(),
        name: "release".to_owned(),
        description: String::new(),
        columns: Columns::new(vec![]).unwrap(),
        created: Timestamp::from_millis(1),
    }
}

#[tokio::test]
async fn d5_an_unmigrated_schema_is_refused_with_advice_and_left_untouched() {
    let (schema, pool) = common::fresh_schema().await;
    let detail = not_migrated(&pool).await;
    assert!(detail.contains("no migration table"), "{detail}");
    // Constructing did not migrate: no table was created, not even sqlx's own.
    assert!(!table_exists(&pool, "_sqlx_migrations").await);
    assert!(!table_exists(&pool, "_agentroom_workflow_migrations").await);
    assert!(!table_exists(&pool, "planning_plans").await);
    assert_eq!(
        workflow_states(&status(&pool).await.unwrap()),
        [(1, "adopt operations", MigrationState::Pending)]
    );
    assert_eq!(
        states(&status(&pool).await.unwrap()),
        [
            (1, "create planning", MigrationState::Pending),
            (2, "create rooms", MigrationState::Pending),
            (3, "lean room state", MigrationState::Pending),
            (4, "create access tokens", MigrationState::Pending),
            (5, "replace room commit", MigrationState::Pending),
            (6, "record inputs and deliveries", MigrationState::Pending),
            (7, "create contents", MigrationState::Pending),
            (8, "create budget pools", MigrationState::Pending),
            (9, "create objective records", MigrationState::Pending),
            (10, "notify room changes", MigrationState::Pending),
            (11, "quiet accepted events", MigrationState::Pending)
        ]
    );
    assert!(matches!(
        PgRooms::from_pool(pool.clone()).await,
        Err(StoreError::NotMigrated { .. })
    ));
    pool.close().await;
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn d5_migrate_up_then_status_then_down() {
    let (schema, pool) = common::fresh_schema().await;
    let migrated = up(&pool).await.unwrap();
    assert_eq!(migrated.planner, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert_eq!(migrated.workflows, [1]);
    let listed = status(&pool).await.unwrap();
    assert_eq!(
        workflow_states(&listed),
        [(1, "adopt operations", MigrationState::Applied)]
    );
    assert_eq!(
        states(&listed),
        [
            (1, "create planning", MigrationState::Applied),
            (2, "create rooms", MigrationState::Applied),
            (3, "lean room state", MigrationState::Applied),
            (4, "create access tokens", MigrationState::Applied),
            (5, "replace room commit", MigrationState::Applied),
            (6, "record inputs and deliveries", MigrationState::Applied),
            (7, "create contents", MigrationState::Applied),
            (8, "create budget pools", MigrationState::Applied),
            (9, "create objective records", MigrationState::Applied),
            (10, "notify room changes", MigrationState::Applied),
            (11, "quiet accepted events", MigrationState::Applied)
        ]
    );
    assert!(listed.iter().all(MigrationStatus::applied));
    let rooms = PgRooms::from_pool(pool.clone()).await.unwrap();
    // Migrating again is a no-op.
    assert!(up(&pool).await.unwrap().is_empty());
    let store = PgPlanning::from_pool(pool.clone()).await.unwrap();
    let room = RoomId::parse("local").unwrap();
    store.create_plan(&room, &plan()).await.unwrap();
    assert_eq!(store.plans(&room).await.unwrap().len(), 1);
    // A call of the workflow store: an owner message reserves the reasoner's.
    let mut calling = Driver::create(&rooms, "calling", 1_000_000).await;
    let decision = calling.owner_message("plan something");
    calling
        .commit(&rooms, &decision, "event_accepted")
        .await
        .unwrap();
    let open = rooms.operations(OperationFilter::Open).await.unwrap();
    assert_eq!(open.len(), 1);

    // Issue 19: reverting the planner's ledger removes planner state only; the workflow
    // store's calls stay, with their ledger.
    assert_eq!(
        down(&pool).await.unwrap(),
        [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    );
    assert!(table_exists(&pool, "operations").await);
    assert_eq!(count(&pool, "SELECT count(*) FROM operations").await, 1);
    assert!(!table_exists(&pool, "_agentroom_workflows_aside.operations").await);
    assert_eq!(
        workflow_states(&status(&pool).await.unwrap()),
        [(1, "adopt operations", MigrationState::Applied)]
    );
    for table in [
        "planning_plans",
        "planning_tasks",
        "rooms",
        "room_history",
        "room_snapshots",
        "room_events",
        "ledger_entries",
        "outbox",
        "access_tokens",
        "room_contents",
        "budget_pools",
        "pool_ledger",
    ] {
        assert!(!table_exists(&pool, table).await, "{table} survived down");
    }
    assert_eq!(
        states(&status(&pool).await.unwrap()),
        [
            (1, "create planning", MigrationState::Pending),
            (2, "create rooms", MigrationState::Pending),
            (3, "lean room state", MigrationState::Pending),
            (4, "create access tokens", MigrationState::Pending),
            (5, "replace room commit", MigrationState::Pending),
            (6, "record inputs and deliveries", MigrationState::Pending),
            (7, "create contents", MigrationState::Pending),
            (8, "create budget pools", MigrationState::Pending),
            (9, "create objective records", MigrationState::Pending),
            (10, "notify room changes", MigrationState::Pending),
            (11, "quiet accepted events", MigrationState::Pending)
        ]
    );
    let detail = not_migrated(&pool).await;
    assert!(
        detail.contains("migration 1 (create planning) is pending"),
        "{detail}"
    );
    // A store made before the schema was reverted says so instead of failing obscurely.
    match store.plans(&room).await {
        Err(error @ RepoError::NotMigrated { .. }) => {
            assert!(error.to_string().contains("planning_plans"), "{error}");
            // The driver's error is kept here too, as the Room store keeps it.
            let source = std::error::Error::source(&error).expect("a source");
            assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }
    match agentroom_ports::RoomStore::load(&rooms, &room).await {
        Err(error @ StoreError::NotMigrated { .. }) => {
            assert!(error.to_string().contains("rooms"), "{error}");
            // The schema was reverted under a running store: the driver's error is kept.
            let source = std::error::Error::source(&error).expect("a source");
            assert!(source.downcast_ref::<sqlx::Error>().is_some(), "{source:?}");
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }
    // Up again works on the reverted schema, over the kept calls: the planner's 0002 makes a
    // table of its own, which the kept one replaces.
    let migrated = up(&pool).await.unwrap();
    assert_eq!(migrated.planner, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert!(migrated.workflows.is_empty());
    let store = PgPlanning::from_pool(pool.clone()).await.unwrap();
    assert!(store.plans(&room).await.unwrap().is_empty());
    let rooms = PgRooms::from_pool(pool.clone()).await.unwrap();
    let kept = rooms.operation(open[0].op()).await.unwrap().unwrap();
    assert_eq!(kept.room, calling.room());
    assert_eq!(kept.generation, open[0].generation);
    assert_eq!(
        rooms.operations(OperationFilter::Open).await.unwrap().len(),
        1
    );
    // The kept table takes new calls after its old ones.
    let mut again = Driver::create(&rooms, "again", 1_000_000).await;
    let decision = again.owner_message("plan again");
    again
        .commit(&rooms, &decision, "event_accepted")
        .await
        .unwrap();
    assert_eq!(
        rooms.operations(OperationFilter::Open).await.unwrap().len(),
        2
    );
    drop(rooms);

    // The workflow store's ledger is reverted on its own, once the planner's is.
    match down_workflows(&pool).await {
        Err(MigrateError::PlannerApplied) => {}
        other => panic!("expected PlannerApplied, got {other:?}"),
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM operations").await, 2);
    assert_eq!(
        down(&pool).await.unwrap(),
        [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    );
    assert_eq!(down_workflows(&pool).await.unwrap(), [1]);
    assert!(!table_exists(&pool, "operations").await);
    assert!(
        status(&pool)
            .await
            .unwrap()
            .iter()
            .all(|m| m.state == MigrationState::Pending)
    );
    let migrated = up(&pool).await.unwrap();
    assert_eq!((migrated.planner.len(), migrated.workflows.len()), (11, 1));
    pool.close().await;
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn d5_a_failed_changed_or_newer_migration_is_refused() {
    let (schema, pool) = common::fresh_schema().await;
    up(&pool).await.unwrap();

    sqlx::query("UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea WHERE version = 1")
        .execute(&pool)
        .await
        .unwrap();
    let detail = not_migrated(&pool).await;
    assert!(detail.contains("different SQL"), "{detail}");
    assert_eq!(
        states(&status(&pool).await.unwrap()),
        [
            (1, "create planning", MigrationState::Changed),
            (2, "create rooms", MigrationState::Applied),
            (3, "lean room state", MigrationState::Applied),
            (4, "create access tokens", MigrationState::Applied),
            (5, "replace room commit", MigrationState::Applied),
            (6, "record inputs and deliveries", MigrationState::Applied),
            (7, "create contents", MigrationState::Applied),
            (8, "create budget pools", MigrationState::Applied),
            (9, "create objective records", MigrationState::Applied),
            (10, "notify room changes", MigrationState::Applied),
            (11, "quiet accepted events", MigrationState::Applied)
        ]
    );

    sqlx::query("UPDATE _sqlx_migrations SET success = false WHERE version = 1")
        .execute(&pool)
        .await
        .unwrap();
    let detail = not_migrated(&pool).await;
    assert!(detail.contains("failed"), "{detail}");
    // A dirty ledger is not migrated over: an operator looks first.
    match up(&pool).await {
        Err(
            error @ MigrateError::Dirty {
                ledger: Ledger::Planner,
                ..
            },
        ) => {
            assert!(
                error.to_string().contains("1 (create planning) failed"),
                "{error}"
            );
        }
        other => panic!("expected Dirty, got {other:?}"),
    }
    assert_eq!(
        states(&status(&pool).await.unwrap()),
        [
            (1, "create planning", MigrationState::Failed),
            (2, "create rooms", MigrationState::Applied),
            (3, "lean room state", MigrationState::Applied),
            (4, "create access tokens", MigrationState::Applied),
            (5, "replace room commit", MigrationState::Applied),
            (6, "record inputs and deliveries", MigrationState::Applied),
            (7, "create contents", MigrationState::Applied),
            (8, "create budget pools", MigrationState::Applied),
            (9, "create objective records", MigrationState::Applied),
            (10, "notify room changes", MigrationState::Applied),
            (11, "quiet accepted events", MigrationState::Applied)
        ]
    );

    // Repaired by hand (as an operator would), the store opens again.
    let real: Vec<u8> = agentroom_store_postgres::MIGRATOR
        .iter()
        .find(|m| m.version == 1 && !m.migration_type.is_down_migration())
        .map(|m| m.checksum.to_vec())
        .unwrap();
    sqlx::query("UPDATE _sqlx_migrations SET success = true, checksum = $1 WHERE version = 1")
        .bind(real.clone())
        .execute(&pool)
        .await
        .unwrap();
    PgPlanning::from_pool(pool.clone()).await.unwrap();

    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', true, $1, 0)",
    )
    .bind(real)
    .execute(&pool)
    .await
    .unwrap();
    let detail = not_migrated(&pool).await;
    assert!(
        detail.contains("migration 9999 (from the future) is applied but unknown"),
        "{detail}"
    );
    assert_eq!(
        states(&status(&pool).await.unwrap()),
        [
            (1, "create planning", MigrationState::Applied),
            (2, "create rooms", MigrationState::Applied),
            (3, "lean room state", MigrationState::Applied),
            (4, "create access tokens", MigrationState::Applied),
            (5, "replace room commit", MigrationState::Applied),
            (6, "record inputs and deliveries", MigrationState::Applied),
            (7, "create contents", MigrationState::Applied),
            (8, "create budget pools", MigrationState::Applied),
            (9, "create objective records", MigrationState::Applied),
            (10, "notify room changes", MigrationState::Applied),
            (11, "quiet accepted events", MigrationState::Applied),
            (9999, "from the future", MigrationState::Unknown)
        ]
    );
    // A migration this binary does not carry is one it cannot revert: down is refused and
    // reverts nothing.
    match down(&pool).await {
        Err(
            error @ MigrateError::Dirty {
                ledger: Ledger::Planner,
                ..
            },
        ) => {
            assert!(
                error.to_string().contains("9999 (from the future) unknown"),
                "{error}"
            );
        }
        other => panic!("expected Dirty, got {other:?}"),
    }
    assert!(table_exists(&pool, "planning_plans").await);
    assert_eq!(status(&pool).await.unwrap().len(), 13);
    pool.close().await;
    common::drop_schema(&schema).await;
}

/// D1 across 0007: a schema at 0006 holding a Room with history is migrated up to 0007, and
/// every revision still rebuilds from history to what was committed. The store refuses a
/// schema that is not exactly its own (D5), so the Room is written at 0007 and the schema
/// taken back to 0006 by reverting 0007 (which must leave history alone too) before it is
/// migrated up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d1_history_written_before_0007_rebuilds_every_revision_after_it() {
    let (schema, pool) = common::fresh_schema().await;
    up(&pool).await.unwrap();
    let store = PgRooms::from_pool(pool.clone()).await.unwrap();
    let mut room = Driver::create(&store, "history", 10_000_000).await;
    let mut committed = vec![(room.revision, room.state.clone())];
    for i in 0..40 {
        let decision = if i % 3 == 0 {
            room.owner_message(&format!("m{i}"))
        } else {
            room.raise(10 + i)
        };
        room.commit(&store, &decision, "x").await.unwrap();
        committed.push((room.revision, room.state.clone()));
    }
    // Not closed: closing the store would close the pool it shares.
    drop(store);

    // Below 0005 the planner's migrations shaped the workflow store's table: refused.
    match down_to(&pool, 3).await {
        Err(MigrateError::WouldReshapeWorkflows { target: 3 }) => {}
        other => panic!("expected WouldReshapeWorkflows, got {other:?}"),
    }
    assert!(
        states(&status(&pool).await.unwrap())
            .iter()
            .all(|m| m.2 == MigrationState::Applied)
    );
    assert_eq!(down_to(&pool, 6).await.unwrap(), [11, 10, 9, 8, 7]);
    assert!(!table_exists(&pool, "room_contents").await);
    match PgRooms::from_pool(pool.clone()).await {
        Err(error @ StoreError::NotMigrated { .. }) => {
            assert!(
                error
                    .to_string()
                    .contains("migration 7 (create contents) is pending"),
                "{error}"
            );
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }

    assert_eq!(up(&pool).await.unwrap().planner, [7, 8, 9, 10, 11]);
    // A store that committed nothing has nothing cached: it rebuilds every revision.
    let store = PgRooms::from_pool(pool.clone()).await.unwrap();
    for (revision, state) in &committed {
        let rebuilt = store.state_at(&room.room(), *revision).await.unwrap();
        assert_eq!(rebuilt.as_ref(), Some(state), "revision {revision}");
    }
    assert_eq!(
        store
            .state_at(&room.room(), room.revision.next())
            .await
            .unwrap(),
        None
    );
    let loaded = store.load(&room.room()).await.unwrap().unwrap();
    assert_eq!(
        (loaded.revision, &loaded.state),
        (room.revision, &room.state)
    );
    assert_eq!(committed.len(), 41);
    assert!(room.revision > Revision(40), "{:?}", room.revision);
    // And the Room's content has somewhere to go.
    let (_, put) = store
        .put_content(
            &room.room(),
            "text/plain",
            b"after 0007",
            Timestamp::from_millis(1),
        )
        .await
        .unwrap();
    assert_eq!(put, Put::Stored);
    store.close().await;
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn connect_refuses_an_unmigrated_database_too() {
    // `connect` is `from_pool` over a default pool: the same check, through the URL.
    let (schema, pool) = common::fresh_schema().await;
    pool.close().await;
    let url = common::database_url();
    let separator = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{separator}options=-c%20search_path%3D{schema}");
    match PgPlanning::connect(&url).await {
        Err(RepoError::NotMigrated { context, .. }) => {
            assert!(context.contains("no migration table"), "{context}");
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }
    common::drop_schema(&schema).await;
}

/// Issue 19: a database made by the release before the split (one ledger, `operations` made by
/// the planner's 0002 and reshaped by its 0005) is upgraded in place: the store refuses it until
/// `migrate up` applies the workflow store's 0001, which adopts the table with its calls, and
/// then every Room revision and every call is there as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue19_a_database_from_before_the_split_adopts_its_calls_into_the_workflow_ledger() {
    let (schema, pool) = common::fresh_schema().await;
    up(&pool).await.unwrap();
    let store = PgRooms::from_pool(pool.clone()).await.unwrap();
    let mut room = Driver::create(&store, "before", 10_000_000).await;
    let mut committed = vec![(room.revision, room.state.clone())];
    for text in ["first", "second"] {
        let decision = room.owner_message(text);
        room.commit(&store, &decision, "event_accepted")
            .await
            .unwrap();
        committed.push((room.revision, room.state.clone()));
    }
    let calls = store.operations(OperationFilter::Open).await.unwrap();
    assert!(!calls.is_empty());
    drop(store);
    // The previous release's database: the same tables, one ledger.
    sqlx::query("DROP TABLE _agentroom_workflow_migrations")
        .execute(&pool)
        .await
        .unwrap();
    match PgRooms::from_pool(pool.clone()).await {
        Err(error @ StoreError::NotMigrated { .. }) => {
            let text = error.to_string();
            assert!(
                text.contains("no migration table _agentroom_workflow_migrations"),
                "{text}"
            );
        }
        other => panic!("expected NotMigrated, got {other:?}"),
    }

    let migrated = up(&pool).await.unwrap();
    assert!(migrated.planner.is_empty());
    assert_eq!(migrated.workflows, [1]);
    let store = PgRooms::from_pool(pool.clone()).await.unwrap();
    let after = store.operations(OperationFilter::Open).await.unwrap();
    assert_eq!(
        after.iter().map(|o| o.op()).collect::<Vec<_>>(),
        calls.iter().map(|o| o.op()).collect::<Vec<_>>()
    );
    for (revision, state) in &committed {
        let rebuilt = store.state_at(&room.room(), *revision).await.unwrap();
        assert_eq!(rebuilt.as_ref(), Some(state), "revision {revision}");
    }
    // And the Room goes on committing calls into the adopted table.
    let decision = room.owner_message("third");
    room.commit(&store, &decision, "event_accepted")
        .await
        .unwrap();
    assert!(store.operations(OperationFilter::Open).await.unwrap().len() > calls.len());
    store.close().await;
    common::drop_schema(&schema).await;
}

/// Issue 19: the workflow store's 0001 on a database without the planner's migrations makes
/// the same `operations` (columns, defaults, identity, indexes) as the planner's 0002..0009
/// left, so the workflow store stands alone and an adopted table is no different.
#[tokio::test]
async fn issue19_the_workflow_migration_alone_makes_the_table_the_planner_left() {
    let (planner_schema, planner) = common::fresh_schema().await;
    up(&planner).await.unwrap();
    let (alone_schema, alone) = common::fresh_schema().await;
    WORKFLOW_MIGRATOR.run(&alone).await.unwrap();
    assert!(!table_exists(&alone, "rooms").await);
    assert_eq!(
        workflow_states(&status(&alone).await.unwrap()),
        [(1, "adopt operations", MigrationState::Applied)]
    );
    let shape = |pool: PgPool, schema: String| async move {
        let columns: Vec<(String, String, String, Option<String>, String)> = sqlx::query_as(
            "SELECT column_name::text, data_type::text, is_nullable::text, \
                    column_default::text, is_identity::text \
             FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = 'operations' ORDER BY ordinal_position",
        )
        .bind(&schema)
        .fetch_all(&pool)
        .await
        .unwrap();
        let indexes: Vec<(String, String)> = sqlx::query_as(
            "SELECT indexname::text, replace(indexdef, schemaname || '.', '') \
             FROM pg_indexes WHERE schemaname = $1 AND tablename = 'operations' \
             ORDER BY indexname",
        )
        .bind(&schema)
        .fetch_all(&pool)
        .await
        .unwrap();
        let constraints: Vec<(String, String)> = sqlx::query_as(
            "SELECT c.conname::text, pg_get_constraintdef(c.oid) \
             FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             WHERE n.nspname = $1 AND t.relname = 'operations' ORDER BY c.conname",
        )
        .bind(&schema)
        .fetch_all(&pool)
        .await
        .unwrap();
        (columns, indexes, constraints)
    };
    let left = shape(planner.clone(), planner_schema.clone()).await;
    let made = shape(alone.clone(), alone_schema.clone()).await;
    assert_eq!(left.0.len(), 15, "{:?}", left.0);
    assert_eq!(left, made);
    planner.close().await;
    alone.close().await;
    common::drop_schema(&planner_schema).await;
    common::drop_schema(&alone_schema).await;
}
