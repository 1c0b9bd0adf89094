//! The board and the filtered list read only their plan's rows: PostgreSQL's plan for the
//! exact statements the store runs (`agentroom_store_postgres::sql`) is an index scan of
//! `planning_tasks` restricted to the plan, in creation order, never a sequential scan;
//! both as planned for the given values and as the generic plan a prepared statement ends
//! up with.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_store_postgres::sql;
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row};

const PLANS: i64 = 10;
const TASKS_PER_PLAN: i64 = 2_000;

/// The JSON of an EXPLAIN (FORMAT JSON) row. Its column has type `json`, whose wire form is
/// the text itself (sqlx's `json` feature is not needed for that).
fn explained(row: PgRow) -> Value {
    let text: String = row.try_get_unchecked(0).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every plan node of an EXPLAIN (FORMAT JSON) tree, depth first.
fn nodes(plan: &Value) -> Vec<&Value> {
    let mut out = vec![plan];
    for child in plan["Plans"].as_array().into_iter().flatten() {
        out.extend(nodes(child));
    }
    out
}

/// Checks one EXPLAIN output: the only access to `planning_tasks` is an index (only) scan
/// of `index` whose condition names `plan_key`, and nothing sorts (the index gives the
/// creation order).
fn check(explained: &Value, index: &str, what: &str) {
    let root = &explained[0]["Plan"];
    let all = nodes(root);
    let on_tasks: Vec<&&Value> = all
        .iter()
        .filter(|n| n["Relation Name"] == "planning_tasks")
        .collect();
    assert_eq!(on_tasks.len(), 1, "{what}: {explained:#}");
    let scan = on_tasks[0];
    let kind = scan["Node Type"].as_str().unwrap_or_default();
    assert!(
        kind == "Index Only Scan" || kind == "Index Scan",
        "{what}: planning_tasks is read by a {kind}, not an index scan: {explained:#}"
    );
    assert_eq!(scan["Index Name"], index, "{what}: {explained:#}");
    let condition = scan["Index Cond"].as_str().unwrap_or_default();
    assert!(
        condition.contains("plan_key ="),
        "{what}: the index scan is not restricted to the plan: {explained:#}"
    );
    assert!(
        all.iter()
            .all(|n| n["Node Type"] != "Sort" && n["Node Type"] != "Seq Scan"
                || n["Relation Name"] == "planning_plans"),
        "{what}: {explained:#}"
    );
}

#[tokio::test]
async fn board_and_filtered_list_read_only_their_plans_index_entries() {
    let (schema, pool) = common::fresh_schema().await;
    agentroom_store_postgres::migrate::up(&pool).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query(
        "INSERT INTO planning_plans (plan_id, room_id, name, description, columns, created_ms) \
         SELECT 'p' || i, 'local', 'plan ' || i, '', \
                '[\"backlog\", \"todo\", \"in_progress\", \"done\"]'::jsonb, i \
         FROM generate_series(1, $1::bigint) AS i",
    )
    .bind(PLANS)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO planning_tasks (plan_key, task_id, title, column_ix, description, assignee, \
                                     deps, metadata, created_ms, updated_ms) \
         SELECT p.plan_key, 'p' || p.plan_key || '-t' || i, 'task ' || i, i % 4, '', 'sam', \
                '{}', '{}'::jsonb, i, i \
         FROM planning_plans p, generate_series(1, $1::bigint) AS i \
         ORDER BY i, p.plan_key",
    )
    .bind(TASKS_PER_PLAN)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::raw_sql("VACUUM ANALYZE planning_plans, planning_tasks")
        .execute(&mut *conn)
        .await
        .unwrap();
    let plan_key: i64 =
        sqlx::query_scalar("SELECT plan_key FROM planning_plans WHERE plan_id = 'p5'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();

    // As planned for the values (the first executions of a prepared statement).
    let explain = |statement: &str| AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {statement}"));
    let board = explained(
        sqlx::query(explain(sql::SELECT_BOARD_TASKS))
            .bind(plan_key)
            .bind("local")
            .fetch_one(&mut *conn)
            .await
            .unwrap(),
    );
    check(&board, "planning_tasks_board", "board");
    let column = explained(
        sqlx::query(explain(sql::SELECT_COLUMN_TASKS))
            .bind(plan_key)
            .bind("local")
            .bind(1_i32)
            .fetch_one(&mut *conn)
            .await
            .unwrap(),
    );
    check(&column, "planning_tasks_column", "filtered list");

    // As the generic plan PostgreSQL may switch a prepared statement to.
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    for (name, statement) in [
        ("board_q", sql::SELECT_BOARD_TASKS),
        ("column_q", sql::SELECT_COLUMN_TASKS),
    ] {
        sqlx::raw_sql(AssertSqlSafe(format!("PREPARE {name} AS {statement}")))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let generic = |execute: &str| AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {execute}"));
    let board = explained(
        sqlx::query(generic(&format!("EXECUTE board_q({plan_key}, 'local')")))
            .fetch_one(&mut *conn)
            .await
            .unwrap(),
    );
    check(&board, "planning_tasks_board", "board, generic plan");
    let column = explained(
        sqlx::query(generic(&format!(
            "EXECUTE column_q({plan_key}, 'local', 1)"
        )))
        .fetch_one(&mut *conn)
        .await
        .unwrap(),
    );
    check(
        &column,
        "planning_tasks_column",
        "filtered list, generic plan",
    );

    // The statements return that plan's rows, in creation order.
    let rows: Vec<(String, i32)> = sqlx::query_as(sql::SELECT_COLUMN_TASKS)
        .bind(plan_key)
        .bind("local")
        .bind(1_i32)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, _title, column, _assignee): (String, String, i32, String)| (id, column))
        .collect();
    assert_eq!(rows.len(), usize::try_from(TASKS_PER_PLAN / 4).unwrap());
    assert_eq!(rows[0], (format!("p{plan_key}-t1"), 1));
    assert_eq!(rows[1], (format!("p{plan_key}-t5"), 1));
    // Another Room's view of the same plan is empty.
    let foreign: Vec<(String, String, i32, String)> = sqlx::query_as(sql::SELECT_BOARD_TASKS)
        .bind(plan_key)
        .bind("elsewhere")
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    assert!(foreign.is_empty());

    drop(conn);
    pool.close().await;
    common::drop_schema(&schema).await;
}
