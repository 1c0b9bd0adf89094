//! Coordinator plans as planning plans (DESIGN.md "Standalone planning plans"), on the wire:
//! an A2E session sends the exact lines of A2E-PROTOCOL.md / seed 000 to a planning service
//! that consults the coordinator, on SQLite (the Room store and the planning store share one
//! file) and on PostgreSQL (one fresh schema per test). While the demo objective's first task runs, its current plan is a plan with
//! `plan_id` = the objective id on `planning/plan/board`, in `planning/plan/list` and
//! `planning/task/list`; `task/add` on it is refused (O7); an agent's status update of its own
//! task is decided by the domain and a refusal names its rule (T2, T3, O7); a session that
//! acts for nobody cannot update one. Every refusal leaves the board as it was, and
//! standalone plans work as before.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

mod support;

#[path = "../../store-postgres/tests/common/mod.rs"]
mod pg;

use std::future::Future;
use std::sync::Arc;

use agentroom_coordinator::Store;
use agentroom_planning::{
    CountingAmbient, PlanningRepository, PlanningService, PrincipalId, Session, Step, Timestamp,
};
use agentroom_store_postgres::{PgPlanning, PgRooms};
use agentroom_store_sqlite::{Durability, SqlitePlanning, SqliteRooms};
use serde_json::{Value, json};
use support::room_id;
use support::slow::{OnAbort, World};

/// One exchange: the reply to `line`, as JSON, checked against what the SDK's client
/// accepts (`req_id` always, `success` on planning replies, `code` and an object `detail` on
/// errors).
async fn send(session: &Session, line: &str) -> Value {
    let Step::Reply(reply) = session.step(line.as_bytes()).await else {
        panic!("no reply to {line}");
    };
    let reply: Value = serde_json::from_str(&reply).unwrap();
    let request: Value = serde_json::from_str(line).unwrap();
    assert_eq!(reply["req_id"], request["id"], "{reply}");
    let kind = reply["type"].as_str().unwrap();
    if kind == "error" {
        assert!(
            reply["code"].is_string() && reply["detail"].is_object(),
            "{reply}"
        );
    } else if kind.starts_with("planning/") && kind != "planning/plan/list/resp" {
        assert!(reply["success"].is_boolean(), "{reply}");
    }
    reply
}

fn line(kind: &str, id: &str, fields: Value) -> String {
    let mut message = json!({"type": kind, "id": id, "version": "1.0", "ts": 1_764_460_800.0});
    for (k, v) in fields.as_object().unwrap() {
        message[k] = v.clone();
    }
    message.to_string()
}

fn refused(reply: &Value, code: &str) {
    assert_eq!(reply["success"], json!(false), "{reply}");
    assert_eq!(reply["code"], json!(code), "{reply}");
    assert!(
        reply["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{reply}"
    );
}

/// The tasks of a board reply's first board, as (column, task_id, title, assignee).
fn tasks(board: &Value) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    let board = &board["boards"][0];
    for column in board["columns"].as_array().unwrap() {
        let column = column.as_str().unwrap();
        for task in board["tasks"][column].as_array().unwrap() {
            assert_eq!(task["status"], json!(column));
            out.push((
                column.to_owned(),
                task["task_id"].as_str().unwrap().to_owned(),
                task["title"].as_str().unwrap().to_owned(),
                task["assignee"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

async fn on_sqlite<F, Fut>(test: F)
where
    F: FnOnce(World<SqliteRooms>, Arc<PlanningService>) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planning.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    let rooms = Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap());
    let repo = Arc::new(SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap());
    let world = World::new(rooms, OnAbort::Stop).await;
    let service = service(repo, &world);
    test(world, service).await;
}

async fn on_postgres<F, Fut>(test: F)
where
    F: FnOnce(World<PgRooms>, Arc<PlanningService>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (schema, pool) = pg::fresh_schema().await;
    let rooms = Arc::new(pg::migrate_rooms(&schema, pool.clone()).await);
    let repo = Arc::new(PgPlanning::from_pool(pool).await.unwrap());
    let world = World::new(rooms, OnAbort::Stop).await;
    let service = service(repo, &world);
    test(world, service).await;
    pg::drop_schema(&schema).await;
}

/// The planning service over `repo`, showing the coordinator's plans.
fn service<S: Store>(repo: Arc<dyn PlanningRepository>, world: &World<S>) -> Arc<PlanningService> {
    Arc::new(
        PlanningService::new(
            repo,
            Arc::new(CountingAmbient::new("r", Timestamp::from_millis(0))),
        )
        .with_coordinator_plans(Arc::new(world.coordinator.clone())),
    )
}

fn as_agent(service: &Arc<PlanningService>, principal: &str) -> Session {
    Session::new(Arc::clone(service), room_id())
        .unwrap()
        .acting_as(PrincipalId::parse(principal).unwrap())
}

async fn on_the_board_and_in_lists<S: Store>(world: World<S>, service: Arc<PlanningService>) {
    let service = &service;
    let (objective, _) = world.start().await;
    let plan_id = objective.to_string();
    let sam = as_agent(service, "sam");

    let hello = send(&sam, r#"{"type":"handshake/req","id":"a1","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":""}"#).await;
    assert_eq!(hello["ok"], json!(true));

    let list = send(&sam, &line("planning/plan/list", "a2", json!({}))).await;
    assert_eq!(
        list["plans"],
        json!([{
            "plan_id": plan_id,
            "name": "Summarize what changed in durable agent runtimes, with sources for every claim.",
            "columns": ["backlog", "todo", "in_progress", "done"],
        }]),
        "{list}"
    );

    let board = send(
        &sam,
        &line("planning/plan/board", "a3", json!({"plan_id": plan_id})),
    )
    .await;
    assert_eq!(board["type"], json!("planning/plan/board/resp"));
    assert_eq!(board["boards"][0]["plan_id"], json!(plan_id));
    let shown = tasks(&board);
    let columns: Vec<(&str, &str, &str)> = shown
        .iter()
        .map(|(c, _, title, who)| (c.as_str(), title.as_str(), who.as_str()))
        .collect();
    // Issue 17: a specialist's board holds only its own tasks (the domain's `sees_task`);
    // the owner's holds every task.
    assert_eq!(
        columns,
        vec![(
            "in_progress",
            "Gather papers and release notes on durable agent runtimes",
            "sam"
        )]
    );
    let olive = as_agent(service, "olive");
    let whole = send(
        &olive,
        &line("planning/plan/board", "o3", json!({"plan_id": plan_id})),
    )
    .await;
    let whole = tasks(&whole);
    let columns: Vec<(&str, &str, &str)> = whole
        .iter()
        .map(|(c, _, title, who)| (c.as_str(), title.as_str(), who.as_str()))
        .collect();
    assert_eq!(
        columns,
        vec![
            ("backlog", "Write the sourced summary", "sue"),
            (
                "in_progress",
                "Gather papers and release notes on durable agent runtimes",
                "sam"
            ),
        ]
    );
    let gather = &shown.iter().find(|t| t.3 == "sam").unwrap().1;
    assert!(gather.ends_with("/gather"), "{gather}");

    // "" = every plan: the objective's plan is there too.
    let all = send(
        &sam,
        &line("planning/plan/board", "a4", json!({"plan_id": ""})),
    )
    .await;
    assert_eq!(all["boards"], board["boards"]);

    let listed = send(
        &sam,
        &line(
            "planning/task/list",
            "a5",
            json!({"plan_id": plan_id, "status": "in_progress"}),
        ),
    )
    .await;
    assert_eq!(
        listed["tasks"],
        json!([{
            "task_id": gather,
            "title": "Gather papers and release notes on durable agent runtimes",
            "status": "in_progress",
            "assignee": "sam",
            "plan_id": plan_id,
        }]),
        "{listed}"
    );
}

async fn task_add_refused<S: Store>(world: World<S>, service: Arc<PlanningService>) {
    let service = &service;
    let (objective, _) = world.start().await;
    let plan_id = objective.to_string();
    let sam = as_agent(service, "sam");
    let board = |id: &'static str| line("planning/plan/board", id, json!({"plan_id": plan_id}));
    let before = send(&sam, &board("b1")).await;
    let revision = world.coordinator.room(&room_id()).await.unwrap().revision;

    let added = send(
        &sam,
        &line(
            "planning/task/add",
            "b2",
            json!({"plan_id": plan_id, "title": "write spec", "status": "todo", "description": "", "assignee": "", "deps": [], "metadata": {}}),
        ),
    )
    .await;
    assert_eq!(added["type"], json!("planning/task/add/resp"));
    refused(&added, "coordinator_plan");
    assert!(added["message"].as_str().unwrap().contains("O7"), "{added}");

    let after = send(&sam, &board("b3")).await;
    assert_eq!(after["boards"], before["boards"]);
    assert_eq!(
        world.coordinator.room(&room_id()).await.unwrap().revision,
        revision,
        "a refused task/add commits nothing"
    );

    // A standalone plan still takes task/add.
    let created = send(
        &sam,
        &line(
            "planning/plan/create",
            "b4",
            json!({"name": "notes", "columns": []}),
        ),
    )
    .await;
    assert_eq!(created["success"], json!(true), "{created}");
    let standalone = created["plan_id"].as_str().unwrap();
    let added = send(
        &sam,
        &line(
            "planning/task/add",
            "b5",
            json!({"plan_id": standalone, "title": "write spec", "status": "todo", "description": "", "assignee": "", "deps": [], "metadata": {}}),
        ),
    )
    .await;
    assert_eq!(added["success"], json!(true), "{added}");
    let plans = send(&sam, &line("planning/plan/list", "b6", json!({}))).await;
    let ids: Vec<&str> = plans["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["plan_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![standalone, plan_id.as_str()]);
}

async fn own_status_updates<S: Store>(world: World<S>, service: Arc<PlanningService>) {
    let service = &service;
    let (objective, _) = world.start().await;
    let plan_id = objective.to_string();
    let sam = as_agent(service, "sam");
    let board = |id: &'static str| line("planning/plan/board", id, json!({"plan_id": plan_id}));
    // The owner's board shows every task (sam's shows only its own).
    let before = send(&as_agent(service, "olive"), &board("c0")).await;
    let shown = tasks(&before);
    let gather = shown.iter().find(|t| t.3 == "sam").unwrap().1.clone();
    let write = shown.iter().find(|t| t.3 == "sue").unwrap().1.clone();
    let update = |id: &str, task: &str, status: &str, assignee: &str| {
        line(
            "planning/task/update",
            id,
            json!({"plan_id": plan_id, "task_id": task, "status": status, "assignee": assignee, "deps": []}),
        )
    };

    // Its own running task, acknowledged in progress: accepted by the engine.
    let ack = send(&sam, &update("c1", &gather, "in_progress", "")).await;
    assert_eq!(ack["type"], json!("planning/task/update/resp"));
    assert_eq!(ack["success"], json!(true), "{ack}");
    assert_eq!(ack["task_id"], json!(gather));

    // Someone else's task: T3.
    let other = send(&sam, &update("c2", &write, "in_progress", "")).await;
    refused(&other, "rule_refused");
    assert!(
        other["message"].as_str().unwrap().starts_with("T3:"),
        "{other}"
    );
    // Done without the contribution that completed it: T2.
    let done = send(&sam, &update("c3", &gather, "done", "")).await;
    refused(&done, "rule_refused");
    assert!(
        done["message"].as_str().unwrap().starts_with("T2:"),
        "{done}"
    );
    // Moving work back: only the engine moves work, O7.
    let back = send(&sam, &update("c4", &gather, "todo", "")).await;
    refused(&back, "rule_refused");
    assert!(
        back["message"].as_str().unwrap().starts_with("O7:"),
        "{back}"
    );
    // Not a column; an assignee change; an unknown task; nothing to update.
    refused(
        &send(&sam, &update("c5", &gather, "archived", "")).await,
        "unknown_status",
    );
    refused(
        &send(&sam, &update("c6", &gather, "", "sue")).await,
        "coordinator_plan",
    );
    refused(
        &send(&sam, &update("c7", "no-such-task", "in_progress", "")).await,
        "unknown_task",
    );
    refused(
        &send(&sam, &update("c8", &gather, "", "")).await,
        "nothing_to_update",
    );
    // A session that acts for nobody cannot update an objective's task.
    let anonymous = Session::new(Arc::clone(service), room_id()).unwrap();
    let nobody = send(&anonymous, &update("c9", &gather, "in_progress", "")).await;
    refused(&nobody, "rule_refused");
    assert!(
        nobody["message"].as_str().unwrap().starts_with("T3:"),
        "{nobody}"
    );

    let after = send(&as_agent(service, "olive"), &board("c10")).await;
    assert_eq!(after["boards"], before["boards"], "refusals moved nothing");

    // Once the engine completed the task with sam's persisted contribution (the objective
    // runs to its end: gather is reused unchanged by the corrective plan, O3), sam may
    // confirm it done (T2), and the board shows it done.
    world.slow.gate.notify_one();
    world.coordinator.wait_idle().await;
    let confirmed = send(&sam, &update("c11", &gather, "done", "")).await;
    assert_eq!(confirmed["success"], json!(true), "{confirmed}");
    let shown = tasks(&send(&sam, &board("c12")).await);
    assert!(
        shown.iter().any(|t| t.0 == "done" && t.1 == gather),
        "{shown:?}"
    );
    // sue's contribution is not sam's: sue cannot confirm sam's task done either.
    let sue = as_agent(service, "sue");
    let foreign = send(&sue, &update("c13", &gather, "done", "")).await;
    refused(&foreign, "rule_refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objectives_current_plan_is_a_planning_plan_on_the_board_and_in_lists_on_sqlite() {
    on_sqlite(on_the_board_and_in_lists).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objectives_current_plan_is_a_planning_plan_on_the_board_and_in_lists_on_postgres() {
    on_postgres(on_the_board_and_in_lists).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o7_task_add_on_a_coordinator_plan_is_refused_and_changes_nothing_on_sqlite() {
    on_sqlite(task_add_refused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o7_task_add_on_a_coordinator_plan_is_refused_and_changes_nothing_on_postgres() {
    on_postgres(task_add_refused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_t3_o7_an_agent_updates_only_the_status_of_its_own_task_by_the_rules_on_sqlite() {
    on_sqlite(own_status_updates).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_t3_o7_an_agent_updates_only_the_status_of_its_own_task_by_the_rules_on_postgres() {
    on_postgres(own_status_updates).await;
}
