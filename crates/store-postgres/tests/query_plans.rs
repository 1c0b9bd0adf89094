//! The board and the filtered list read only their plan's rows: PostgreSQL's plan for the
//! exact statements the store runs (`agentroom_store_postgres::sql`) is an index scan of
//! `planning_tasks` restricted to the plan, in creation order, never a sequential scan;
//! both as planned for the given values and as the generic plan a prepared statement ends
//! up with. A Room commit reaches every row by key in the generic plan, which PostgreSQL
//! keeps.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentroom_domain::engine::{
    CallResult, Charge, Effect, Input, Proposal, ProposalKind, ReasonerResult,
};
use agentroom_domain::ids::Timestamp;
use agentroom_domain::money::UsdMicros;
use agentroom_ports::conformance::Driver;
use agentroom_ports::{Commit, Receipt, RoomStore};
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
    // A database of its own: see the VACUUM below.
    let (database, pool) = common::fresh_database().await;
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
    // VACUUM sets the visibility map only for rows no open snapshot of a backend in the same
    // database may still need, hence a database of its own: other tests (of this binary, or
    // run beside it) hold snapshots in the shared one. Without the visibility map an
    // index-only scan costs as much as a bitmap heap scan or a sequential scan plus a sort,
    // and the planner's choice would depend on their timing. What this test pins is that the
    // plan's index serves the board in order, restricted to the plan.
    sqlx::raw_sql("SET enable_bitmapscan = off")
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
    common::drop_database(&database, pool).await;
}

/// The parameter types of every commit statement, in order (see `sql::commit_room`).
const COMMIT_PARAMETERS: &str = "text, bigint, text, bigint, text, text, text, bigint, text, \
    bigint, text[], text[], text[], bigint[], boolean[], text[], bigint[], text[], boolean[], \
    boolean[], text[], text[], text[], text";

/// Every combination of a commit's parts, with 0, 1 and 2 operations created, 0, 1 and 2
/// ledger entries, and 0, 1, 2, 3 and 9 operations touched.
fn commit_shapes() -> Vec<sql::CommitParts> {
    let mut shapes = Vec::new();
    for bits in 0..4_u8 {
        for created in [0, 1, 2] {
            for entries in [0, 1, 2] {
                for touched in [0, 1, 2, 3, 9] {
                    let mut parts = sql::CommitParts::default()
                        .touching(touched)
                        .creating(created)
                        .appending(entries);
                    parts.snapshot = bits & 1 != 0;
                    parts.notifications = bits & 2 != 0;
                    shapes.push(parts);
                }
            }
        }
    }
    shapes
}

/// A commit's generic plan, the one a prepared statement keeps, is planned on tables that are
/// empty and were never analyzed (a fresh database) and then kept while they grow: it must
/// reach every row by key. A join against the commit's arrays, for one, is planned there as a
/// hash join over a sequential scan of `operations`, which a growing table then pays on every
/// commit.
#[tokio::test]
async fn commit_statements_reach_rows_by_key_on_fresh_tables() {
    let (schema, pool) = common::fresh_schema().await;
    agentroom_store_postgres::migrate::up(&pool).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    let nulls = vec!["NULL"; 24].join(", ");
    for (n, parts) in commit_shapes().into_iter().enumerate() {
        let statement = sql::commit_room(parts);
        sqlx::raw_sql(AssertSqlSafe(format!(
            "PREPARE commit_{n} ({COMMIT_PARAMETERS}) AS {statement}"
        )))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{parts:?}: {e}"));
        let plan = explained(
            sqlx::query(AssertSqlSafe(format!(
                "EXPLAIN (FORMAT JSON) EXECUTE commit_{n}({nulls})"
            )))
            .fetch_one(&mut *conn)
            .await
            .unwrap(),
        );
        let mut all = nodes(&plan[0]["Plan"]);
        // Sub-plans of CTEs and sub-selects are nested under "Plans" too.
        all.retain(|n| n["Relation Name"].is_string());
        for node in all {
            let kind = node["Node Type"].as_str().unwrap_or_default();
            assert!(
                kind == "ModifyTable" || kind.starts_with("Index"),
                "{parts:?}: {kind} on {}: {plan:#}",
                node["Relation Name"]
            );
        }
        assert!(
            !plan.to_string().contains("Hash Join"),
            "{parts:?}: a hash join: {plan:#}"
        );
    }
    drop(conn);
    pool.close().await;
    common::drop_schema(&schema).await;
}

/// PostgreSQL plans a prepared statement for its parameters' values five times, then keeps
/// the generic plan only if it is estimated no dearer than those were: a commit statement
/// whose plans for the values knew more (how long its arrays are) would be planned again on
/// every commit. The statements of a durable call's two commits run on their generic plans.
#[tokio::test]
async fn commit_statements_keep_their_generic_plan() {
    const CALLS: i64 = 12;
    let (schema, pool) = common::fresh_schema_with(1).await;
    let store = common::migrate_rooms(&schema, pool.clone()).await;
    let mut d = Driver::create(&store, "generic-plans", 1_000_000_000).await;
    for i in 0..CALLS {
        let decision = d.owner_message(&format!("question {i}"));
        let request = decision
            .effects
            .iter()
            .find_map(|e| match e {
                Effect::ReserveAndCall(request) => Some(request.clone()),
                _ => None,
            })
            .unwrap();
        d.commit(&store, &decision, "event_accepted").await.unwrap();
        let receipt = Receipt {
            model: None,
            omitted: Vec::new(),
            charge: Charge::Actual(UsdMicros::new(400)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                observed: request.observed,
                kind: ProposalKind::Answer {
                    text: "forty-two".to_owned(),
                },
            })),
        };
        let returned = d.decide(Input::CallReturned {
            op: request.op,
            charge: receipt.charge,
            result: receipt.result.clone(),
        });
        let at = Timestamp::from_millis(1);
        let mut commit = Commit::decided(&d.room(), &d.state, &returned, at, "call_returned", None);
        commit.receipts.push((request.op, 1, receipt));
        commit.applied.push(request.op);
        d.revision = store.commit(&d.room(), d.revision, commit).await.unwrap();
        d.state = returned.state;
    }
    // The two commits of each call (the Room's creation committed a third shape, once).
    // Read on the connection the commits ran on.
    let statements: Vec<(String, i64, i64)> = store
        .hot_path_plans()
        .await
        .unwrap()
        .into_iter()
        .filter(|(statement, generic, custom)| {
            statement.starts_with("WITH cas AS") && generic + custom == CALLS
        })
        .collect();
    assert_eq!(statements.len(), 2, "{statements:?}");
    for (statement, generic, custom) in statements {
        assert_eq!(
            (generic, custom),
            (CALLS - 5, 5),
            "planned for its values more than the first five times: {statement}"
        );
    }
    pool.close().await;
    common::drop_schema(&schema).await;
}
