//! The repository conformance suite: every store runs these cases against a fresh database
//! each (`planning_conformance!(factory)`), through the real service and session, with the
//! exact wire JSON. Also an in-memory repository, so the suite checks itself.
//!
//! This is test code compiled only with the `conformance` feature: a failed check panics,
//! which is a failed test.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentroom_domain::ids::{RoomId, Timestamp};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::model::{
    Columns, NewPlan, NewTask, PlanKind, PlanRecord, Refusal, RefusalCode, TaskChange, TaskDetail,
    TaskRow, TaskRows,
};
use crate::repo::{PlanningRepository, RepoError};
use crate::rules;
use crate::service::{CountingAmbient, PlanningService};
use crate::session::{Session, Step};

/// Generates one `#[tokio::test]` per conformance case; `$factory` is an async fn returning
/// a fresh, migrated `Arc<dyn PlanningRepository>`.
#[macro_export]
macro_rules! planning_conformance {
    ($factory:path) => {
        $crate::planning_conformance!(@cases $factory;
            seed_wire_example_has_the_seed_shape,
            defaults_fill_what_the_request_leaves_out,
            backlog_lands_in_the_first_column,
            task_add_to_an_unknown_plan_is_refused,
            a_status_that_is_not_a_column_is_refused,
            deps_must_name_tasks_of_the_same_plan,
            a_dependency_cycle_is_refused,
            task_update_of_an_unknown_task_is_refused,
            task_update_with_nothing_to_change_is_refused,
            updates_change_status_assignee_and_deps,
            empty_or_duplicate_columns_are_refused,
            a_comma_inside_a_column_name_survives,
            oversized_fields_are_schema_violations,
            a_nul_in_a_planning_string_is_a_schema_violation_and_nothing_is_stored,
            what_cannot_be_understood_is_an_a2e_error,
            plans_and_tasks_come_in_creation_order,
            lists_filter_by_plan_and_status,
            rooms_do_not_see_each_other,
            transport_messages_are_answered,
            concurrent_writers_lose_nothing,
            concurrent_dependency_updates_never_form_a_cycle,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let repo = $factory().await;
                $crate::conformance::$case(repo).await;
            }
        )*
    };
}

/// A service and a session in the `local` Room, with counting ids.
pub struct Harness {
    /// The service.
    pub service: Arc<PlanningService>,
    /// A session in `local`.
    pub session: Session,
}

impl Harness {
    /// A harness over `repo`.
    pub fn new(repo: Arc<dyn PlanningRepository>) -> Self {
        let ambient = Arc::new(CountingAmbient::new(
            "id",
            Timestamp::from_millis(1_764_460_800_000),
        ));
        let service = Arc::new(PlanningService::new(repo, ambient));
        let session =
            Session::new(Arc::clone(&service), room("local")).expect("counting ids never run out");
        Self { service, session }
    }

    /// Sends one raw message and returns the reply line (panics on no reply).
    pub async fn line(&self, bytes: &[u8]) -> String {
        match self.session.step(bytes).await {
            Step::Reply(line) => line,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// Sends one raw message and returns the reply as JSON (panics on no reply).
    pub async fn raw(&self, bytes: &[u8]) -> Value {
        let line = self.line(bytes).await;
        match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(e) => panic!("reply is not JSON ({e}): {line}"),
        }
    }

    /// Sends one message; checks the envelope every client needs.
    pub async fn send(&self, message: Value) -> Value {
        let reply = self.raw(message.to_string().as_bytes()).await;
        check_envelope(&reply);
        reply
    }

    /// Creates a plan and returns its id.
    pub async fn plan(&self, name: &str, columns: &[&str]) -> String {
        let reply = self
            .send(json!({"type": "planning/plan/create", "id": "c", "name": name, "columns": columns}))
            .await;
        assert_eq!(reply["success"], true, "{reply}");
        text(&reply["plan_id"])
    }

    /// Adds a task and returns its id.
    pub async fn task(&self, plan: &str, title: &str, status: &str, deps: &[&str]) -> String {
        let reply = self
            .send(
                json!({"type": "planning/task/add", "id": "a", "plan_id": plan, "title": title,
                         "status": status, "deps": deps}),
            )
            .await;
        assert_eq!(reply["success"], true, "{reply}");
        text(&reply["task_id"])
    }

    /// The board of one plan.
    pub async fn board(&self, plan: &str) -> Value {
        let reply = self
            .send(json!({"type": "planning/plan/board", "id": "b", "plan_id": plan}))
            .await;
        reply["boards"][0].clone()
    }

    /// Every task of the Room (task/list without filters).
    pub async fn all_tasks(&self) -> Value {
        self.send(json!({"type": "planning/task/list", "id": "l"}))
            .await["tasks"]
            .clone()
    }

    /// What the store holds for a task.
    pub async fn detail(&self, plan: &str, task: &str) -> TaskDetail {
        let repo = self.service.repository();
        let record = repo
            .plan(&room("local"), plan)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(record) = record else {
            panic!("no plan {plan}")
        };
        match repo.task(&room("local"), record.key, task).await {
            Ok(Some(detail)) => detail,
            other => panic!("no task {task}: {other:?}"),
        }
    }
}

fn room(name: &str) -> RoomId {
    RoomId::parse(name).unwrap_or_else(|e| panic!("{e}"))
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
        .to_owned()
}

/// What the SDK client needs of every reply: `type`, `id`, `req_id`, and `success` on
/// planning replies; `code` and an object `detail` on errors.
pub fn check_envelope(reply: &Value) {
    let kind = reply["type"]
        .as_str()
        .unwrap_or_else(|| panic!("no type: {reply}"));
    assert!(reply["id"].is_string(), "no id: {reply}");
    assert_eq!(reply["version"], "1.0", "{reply}");
    assert!(reply["ts"].is_f64(), "ts is not a float: {reply}");
    assert!(reply["req_id"].is_string(), "no req_id: {reply}");
    if kind == "error" {
        assert!(reply["code"].is_string(), "error without code: {reply}");
        assert!(
            reply["detail"].is_object(),
            "detail is not an object: {reply}"
        );
        assert!(reply["message"].is_string(), "{reply}");
        assert!(reply["retryable"].is_boolean(), "{reply}");
    } else if kind.starts_with("planning/") {
        assert!(kind.ends_with("/resp"), "{reply}");
        assert!(reply["success"].is_boolean(), "no success: {reply}");
        if reply["success"] == false {
            assert!(reply["code"].is_string(), "refusal without code: {reply}");
            assert!(
                reply["message"].is_string(),
                "refusal without message: {reply}"
            );
        }
    }
}

fn refused(reply: &Value, code: &str) {
    assert_eq!(reply["success"], false, "{reply}");
    assert_eq!(reply["code"], code, "{reply}");
}

fn error(reply: &Value, code: &str, field: Option<&str>) {
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["code"], code, "{reply}");
    if let Some(field) = field {
        assert_eq!(reply["detail"]["field"], field, "{reply}");
    }
}

/// Seed 000's wire example, message for message.
pub async fn seed_wire_example_has_the_seed_shape(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let create = json!({"type": "planning/plan/create", "id": "m1", "name": "release",
                        "columns": ["backlog", "todo", "in_progress", "done"], "description": "ship it"});
    assert_eq!(
        wire_keys(&h, &create, &[]).await,
        [
            "type", "id", "version", "ts", "req_id", "success", "plan_id", "columns"
        ]
    );
    let created = h.send(create).await;
    let plan = text(&created["plan_id"]);
    assert_eq!(created["type"], "planning/plan/create/resp");
    assert_eq!(created["req_id"], "m1");
    assert_eq!(created["success"], true);
    assert_eq!(
        created["columns"],
        json!(["backlog", "todo", "in_progress", "done"])
    );

    let add = json!({"type": "planning/task/add", "id": "m2", "plan_id": plan,
                     "title": "write spec", "status": "todo"});
    let line = h.line(add.to_string().as_bytes()).await;
    let added: Value = serde_json::from_str(&line).unwrap_or_default();
    check_envelope(&added);
    let task = text(&added["task_id"]);
    assert_eq!(
        Ordered::parse(&line).keys(),
        [
            "type", "id", "version", "ts", "req_id", "success", "task_id", "status"
        ]
    );
    assert_eq!(added["type"], "planning/task/add/resp");
    assert_eq!(added["req_id"], "m2");
    assert_eq!(added["status"], "todo");

    let board = h
        .send(json!({"type": "planning/plan/board", "id": "m3", "plan_id": plan}))
        .await;
    assert_eq!(board["type"], "planning/plan/board/resp");
    assert_eq!(board["req_id"], "m3");
    assert_eq!(
        board["boards"],
        json!([{"plan_id": plan, "name": "release",
                "columns": ["backlog", "todo", "in_progress", "done"],
                "tasks": {"backlog": [],
                          "todo": [{"task_id": task, "title": "write spec", "status": "todo", "assignee": ""}],
                          "in_progress": [], "done": []}}])
    );
    let board_request = json!({"type": "planning/plan/board", "id": "m4", "plan_id": plan});
    assert_eq!(
        wire_keys(&h, &board_request, &["boards", "0", "tasks"]).await,
        ["backlog", "todo", "in_progress", "done"]
    );
    assert_eq!(
        wire_keys(&h, &board_request, &["boards", "0", "tasks", "todo", "0"]).await,
        ["task_id", "title", "status", "assignee"]
    );
}

/// A JSON value that keeps the order of object keys as they were on the wire.
#[derive(Debug)]
pub enum Ordered {
    /// An object, keys in wire order.
    Object(Vec<(String, Ordered)>),
    /// Anything else.
    Other,
}

impl Ordered {
    /// Parses a reply line.
    pub fn parse(line: &str) -> Ordered {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// The value at a path of object keys and array indexes (`"3"`).
    pub fn at(&self, path: &[&str]) -> &Ordered {
        path.iter().fold(self, |node, key| match node {
            Ordered::Object(entries) => entries
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("no key {key}")),
            Ordered::Other => panic!("{key}: not an object"),
        })
    }

    /// The keys of an object, in wire order.
    pub fn keys(&self) -> Vec<String> {
        match self {
            Ordered::Object(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
            Ordered::Other => panic!("not an object"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
                    entries.push((k, v));
                }
                Ok(Ordered::Object(entries))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Ordered>()? {
                    items.push((items.len().to_string(), item));
                }
                Ok(Ordered::Object(items))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Other)
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

/// Sends `message` and returns the reply's keys at `path`, in wire order.
async fn wire_keys(h: &Harness, message: &Value, path: &[&str]) -> Vec<String> {
    let line = h.line(message.to_string().as_bytes()).await;
    Ordered::parse(&line).at(path).keys()
}

/// Defaults: name `default`, the four columns, status `backlog`, empty strings.
pub async fn defaults_fill_what_the_request_leaves_out(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let created = h.send(json!({"type": "planning/plan/create"})).await;
    assert_eq!(created["req_id"], "");
    assert_eq!(
        created["columns"],
        json!(["backlog", "todo", "in_progress", "done"])
    );
    let plan = text(&created["plan_id"]);
    let plans = h
        .send(json!({"type": "planning/plan/list", "id": "p"}))
        .await;
    assert_eq!(
        plans["plans"],
        json!([{"plan_id": plan, "name": "default", "columns": ["backlog", "todo", "in_progress", "done"]}])
    );
    let added = h
        .send(json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x"}))
        .await;
    assert_eq!(added["status"], "backlog");
    let task = text(&added["task_id"]);
    let detail = h.detail(&plan, &task).await;
    assert_eq!(detail.description, "");
    assert!(detail.deps.is_empty());
    assert!(detail.metadata.is_empty());
    assert_eq!(detail.row.assignee, "");
}

/// The default status lands in the first column of a plan without `backlog`.
pub async fn backlog_lands_in_the_first_column(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("custom", &["todo", "doing", "done"]).await;
    let added = h
        .send(
            json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x",
                     "status": "backlog"}),
        )
        .await;
    assert_eq!(added["status"], "todo");
    let board = h.board(&plan).await;
    assert_eq!(board["tasks"]["todo"][0]["status"], "todo");
    let request = json!({"type": "planning/plan/board", "id": "b", "plan_id": plan});
    assert_eq!(
        wire_keys(&h, &request, &["boards", "0", "tasks"]).await,
        ["todo", "doing", "done"]
    );
}

/// task/add to an unknown plan: refused, nothing stored (the peer stores an orphan).
pub async fn task_add_to_an_unknown_plan_is_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let reply = h
        .send(json!({"type": "planning/task/add", "id": "t", "plan_id": "nope", "title": "x"}))
        .await;
    assert_eq!(reply["type"], "planning/task/add/resp");
    refused(&reply, "unknown_plan");
    assert_eq!(reply["task_id"], "");
    assert_eq!(h.all_tasks().await, json!([]));
}

/// A status that is not a column: refused on add and update; nothing changes.
pub async fn a_status_that_is_not_a_column_is_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &["todo", "done"]).await;
    let reply = h
        .send(
            json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x",
                     "status": "archived"}),
        )
        .await;
    refused(&reply, "unknown_status");
    assert_eq!(h.all_tasks().await, json!([]));
    let task = h.task(&plan, "y", "todo", &[]).await;
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                     "task_id": task, "status": "archived"}),
        )
        .await;
    refused(&reply, "unknown_status");
    assert_eq!(reply["task_id"], task);
    let board = h.board(&plan).await;
    assert_eq!(board["tasks"]["todo"][0]["task_id"], task);
    let request = json!({"type": "planning/plan/board", "id": "b", "plan_id": plan});
    assert_eq!(
        wire_keys(&h, &request, &["boards", "0", "tasks"]).await,
        ["todo", "done"]
    );
}

/// Dependencies must name tasks of the same plan.
pub async fn deps_must_name_tasks_of_the_same_plan(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let other = h.plan("q", &[]).await;
    let foreign = h.task(&other, "elsewhere", "todo", &[]).await;
    let reply = h
        .send(
            json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x",
                     "deps": ["ghost"]}),
        )
        .await;
    refused(&reply, "unknown_dependency");
    let reply = h
        .send(
            json!({"type": "planning/task/add", "id": "t", "plan_id": plan, "title": "x",
                     "deps": [foreign]}),
        )
        .await;
    refused(&reply, "unknown_dependency");
    assert_eq!(h.all_tasks().await.as_array().map(Vec::len), Some(1));
    let first = h.task(&plan, "first", "todo", &[]).await;
    let second = h.task(&plan, "second", "todo", &[&first, &first]).await;
    assert_eq!(h.detail(&plan, &second).await.deps, vec![first.clone()]);
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                     "task_id": second, "deps": [foreign]}),
        )
        .await;
    refused(&reply, "unknown_dependency");
    assert_eq!(h.detail(&plan, &second).await.deps, vec![first]);
}

/// A dependency cycle is refused and the dependencies stay as they were.
pub async fn a_dependency_cycle_is_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let t1 = h.task(&plan, "t1", "todo", &[]).await;
    let t3 = h.task(&plan, "t3", "todo", &[]).await;
    let t2 = h.task(&plan, "t2", "todo", &[&t3]).await;
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                     "task_id": t3, "deps": [t1, t2]}),
        )
        .await;
    refused(&reply, "dependency_cycle");
    let message = text(&reply["message"]);
    assert!(
        message.contains(&format!("{t3} -> {t2} -> {t3}")),
        "{message}"
    );
    assert!(h.detail(&plan, &t3).await.deps.is_empty());
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                     "task_id": t1, "deps": [t1]}),
        )
        .await;
    refused(&reply, "dependency_cycle");
    assert!(h.detail(&plan, &t1).await.deps.is_empty());
}

/// task/update of an unknown task, or of a task of another plan.
pub async fn task_update_of_an_unknown_task_is_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let other = h.plan("q", &[]).await;
    let foreign = h.task(&other, "elsewhere", "todo", &[]).await;
    for task in ["ghost", foreign.as_str()] {
        let reply = h
            .send(
                json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                         "task_id": task, "status": "done"}),
            )
            .await;
        refused(&reply, "unknown_task");
    }
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u", "plan_id": "nope",
                     "task_id": foreign, "status": "done"}),
        )
        .await;
    refused(&reply, "unknown_plan");
    assert_eq!(h.detail(&other, &foreign).await.row.column, 1);
}

/// task/update with nothing to change (the peer crashes and stays silent).
pub async fn task_update_with_nothing_to_change_is_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let task = h.task(&plan, "x", "todo", &[]).await;
    for message in [
        json!({"type": "planning/task/update", "id": "u", "plan_id": plan, "task_id": task}),
        json!({"type": "planning/task/update", "id": "u", "plan_id": plan, "task_id": task,
               "status": "", "assignee": "", "deps": []}),
    ] {
        let reply = h.send(message).await;
        refused(&reply, "nothing_to_update");
    }
}

/// Status, assignee and deps change one at a time and together.
pub async fn updates_change_status_assignee_and_deps(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let a = h.task(&plan, "a", "todo", &[]).await;
    let b = h.task(&plan, "b", "todo", &[]).await;
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u1", "plan_id": plan,
                     "task_id": b, "status": "in_progress"}),
        )
        .await;
    assert_eq!(reply["success"], true, "{reply}");
    assert_eq!(reply["task_id"], b);
    h.send(
        json!({"type": "planning/task/update", "id": "u2", "plan_id": plan,
                  "task_id": b, "assignee": "sam"}),
    )
    .await;
    h.send(
        json!({"type": "planning/task/update", "id": "u3", "plan_id": plan,
                  "task_id": b, "deps": [a]}),
    )
    .await;
    let detail = h.detail(&plan, &b).await;
    assert_eq!(detail.row.column, 2);
    assert_eq!(detail.row.assignee, "sam");
    assert_eq!(detail.deps, vec![a.clone()]);
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "u4", "plan_id": plan,
                     "task_id": b, "status": "done", "assignee": "sue", "deps": [a]}),
        )
        .await;
    assert_eq!(reply["success"], true, "{reply}");
    let board = h.board(&plan).await;
    assert_eq!(
        board["tasks"]["done"],
        json!([{"task_id": b, "title": "b", "status": "done", "assignee": "sue"}])
    );
}

/// Empty or duplicate column names are refused and no plan is created.
pub async fn empty_or_duplicate_columns_are_refused(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    for columns in [json!(["todo", ""]), json!(["todo", "done", "todo"])] {
        let reply = h
            .send(json!({"type": "planning/plan/create", "id": "c", "columns": columns}))
            .await;
        refused(&reply, "invalid_columns");
        assert_eq!(reply["plan_id"], "");
    }
    let plans = h
        .send(json!({"type": "planning/plan/list", "id": "p"}))
        .await;
    assert_eq!(plans["plans"], json!([]));
}

/// A comma inside a column name survives create, list and board (the peer splits it).
pub async fn a_comma_inside_a_column_name_survives(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &["to,do", "done"]).await;
    let plans = h
        .send(json!({"type": "planning/plan/list", "id": "p"}))
        .await;
    assert_eq!(plans["plans"][0]["columns"], json!(["to,do", "done"]));
    h.task(&plan, "x", "to,do", &[]).await;
    let board = h.board(&plan).await;
    assert_eq!(board["columns"], json!(["to,do", "done"]));
    assert_eq!(board["tasks"]["to,do"][0]["title"], "x");
}

/// Over-size title, description and metadata, and metadata that is not an object.
pub async fn oversized_fields_are_schema_violations(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &[]).await;
    let long_title = "t".repeat(1025);
    let long_description = "d".repeat(64 * 1024 + 1);
    let big_metadata = json!({"blob": "m".repeat(64 * 1024)});
    let cases = [
        (json!({"title": long_title}), "title"),
        (
            json!({"title": "x", "description": long_description}),
            "description",
        ),
        (json!({"title": "x", "metadata": big_metadata}), "metadata"),
        (json!({"title": "x", "metadata": [1, 2]}), "metadata"),
        (json!({"title": "x", "metadata": "{}"}), "metadata"),
    ];
    for (fields, field) in cases {
        let mut message = json!({"type": "planning/task/add", "id": "big", "plan_id": plan});
        if let (Value::Object(m), Value::Object(f)) = (&mut message, fields) {
            m.extend(f);
        }
        let reply = h.send(message).await;
        error(&reply, "schema_violation", Some(field));
        assert_eq!(reply["req_id"], "big");
    }
    // At the limits exactly, it is accepted.
    let title = "t".repeat(1024);
    let task = h.task(&plan, &title, "todo", &[]).await;
    assert_eq!(h.all_tasks().await.as_array().map(Vec::len), Some(1));
    assert_eq!(h.detail(&plan, &task).await.row.title.len(), 1024);
}

/// A NUL character in any string a planning message carries (every field of every request,
/// list items, metadata keys and values at any depth) is a `schema_violation` naming the
/// field, on every store alike, and nothing is stored or changed (issue 17: PostgreSQL
/// answered a retryable `runtime_error`, SQLite stored it).
pub async fn a_nul_in_a_planning_string_is_a_schema_violation_and_nothing_is_stored(
    repo: Arc<dyn PlanningRepository>,
) {
    let h = Harness::new(repo);
    let plan = h.plan("p", &["todo", "done"]).await;
    let task = h.task(&plan, "kept", "todo", &[]).await;
    let board_before = h.board(&plan).await;
    let detail_before = h.detail(&plan, &task).await;
    let nul = "a\u{0}b";
    let cases = [
        (json!({"type": "planning/plan/create", "name": nul}), "name"),
        (
            json!({"type": "planning/plan/create", "name": "n", "description": nul}),
            "description",
        ),
        (
            json!({"type": "planning/plan/create", "columns": ["todo", nul]}),
            "columns[1]",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": nul}),
            "title",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t", "description": nul}),
            "description",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t", "assignee": nul}),
            "assignee",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t", "status": nul}),
            "status",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t", "deps": [nul]}),
            "deps[0]",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t",
                   "metadata": {"k": {"deep": [1, nul]}}}),
            "metadata",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": plan, "title": "t",
                   "metadata": {nul: 1}}),
            "metadata",
        ),
        (
            json!({"type": "planning/task/add", "plan_id": nul, "title": "t"}),
            "plan_id",
        ),
        (
            json!({"type": "planning/task/update", "plan_id": plan, "task_id": task,
                   "assignee": nul}),
            "assignee",
        ),
        (
            json!({"type": "planning/task/update", "plan_id": plan, "task_id": task,
                   "status": nul}),
            "status",
        ),
        (
            json!({"type": "planning/task/update", "plan_id": plan, "task_id": task,
                   "deps": [nul]}),
            "deps[0]",
        ),
        (
            json!({"type": "planning/task/update", "plan_id": plan, "task_id": nul,
                   "status": "done"}),
            "task_id",
        ),
        (
            json!({"type": "planning/task/list", "plan_id": plan, "status": nul}),
            "status",
        ),
        (
            json!({"type": "planning/task/list", "plan_id": nul}),
            "plan_id",
        ),
        (
            json!({"type": "planning/plan/board", "plan_id": nul}),
            "plan_id",
        ),
    ];
    for (mut message, field) in cases {
        message["id"] = json!("nul");
        let reply = h.send(message.clone()).await;
        error(&reply, "schema_violation", Some(field));
        assert_eq!(reply["req_id"], "nul", "{message}: {reply}");
        assert_eq!(reply["retryable"], false, "{message}: {reply}");
    }
    // Nothing was stored or changed: one plan, its one task as it was.
    let plans = h
        .send(json!({"type": "planning/plan/list", "id": "pl"}))
        .await;
    assert_eq!(plans["plans"].as_array().map(Vec::len), Some(1), "{plans}");
    assert_eq!(h.all_tasks().await.as_array().map(Vec::len), Some(1));
    assert_eq!(h.board(&plan).await, board_before);
    assert_eq!(h.detail(&plan, &task).await, detail_before);
    // The same texts without the NUL are accepted.
    let reply = h
        .send(
            json!({"type": "planning/task/add", "id": "ok", "plan_id": plan, "title": "ab",
                     "metadata": {"k": {"deep": [1, "ab"]}}}),
        )
        .await;
    assert_eq!(reply["success"], true, "{reply}");
}

/// Malformed JSON, non-objects, unknown types, missing fields, wrong types.
pub async fn what_cannot_be_understood_is_an_a2e_error(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let reply = h.raw(b"{\"type\": \"planning/plan/list\", ").await;
    check_envelope(&reply);
    error(&reply, "parse_error", None);
    assert_eq!(reply["req_id"], "");
    let reply = h.raw(b"[\"planning/plan/list\"]").await;
    check_envelope(&reply);
    error(&reply, "parse_error", None);
    let reply = h
        .send(json!({"type": "planning/plan/delete", "id": "a3", "version": "1.0", "ts": 1.0}))
        .await;
    error(&reply, "invalid_message", None);
    assert_eq!(reply["req_id"], "a3");
    assert_eq!(reply["message"], "unknown type planning/plan/delete");
    assert_eq!(reply["capability_name"], "planning");
    let reply = h
        .send(json!({"type": "planning/task/add", "id": "m", "plan_id": "p"}))
        .await;
    error(&reply, "schema_violation", Some("title"));
    let reply = h
        .send(json!({"type": "planning/plan/create", "id": "w", "columns": "todo,done"}))
        .await;
    error(&reply, "schema_violation", Some("columns"));
    let reply = h
        .send(json!({"type": "planning/task/add", "id": "w", "plan_id": 7, "title": "x"}))
        .await;
    error(&reply, "schema_violation", Some("plan_id"));
    let reply = h
        .send(
            json!({"type": "planning/task/update", "id": "w", "plan_id": "p",
                     "task_id": "t", "deps": ["a", 1]}),
        )
        .await;
    error(&reply, "schema_violation", Some("deps[1]"));
    let reply = h.send(json!({"id": "nt"})).await;
    error(&reply, "schema_violation", Some("type"));
    // Extra fields are tolerated (the SDK sends some).
    let reply = h
        .send(json!({"type": "planning/plan/list", "id": "x", "a2e": "1.0", "extra": {"k": 1}}))
        .await;
    assert_eq!(reply["success"], true);
    assert_eq!(reply["plans"], json!([]));
}

/// Plans and tasks in creation order; board columns in the plan's order.
pub async fn plans_and_tasks_come_in_creation_order(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let mut plans = Vec::new();
    for name in ["zeta", "alpha", "mid"] {
        plans.push(h.plan(name, &["z", "a", "m"]).await);
    }
    let mut tasks = Vec::new();
    for (i, title) in ["c", "a", "b", "e", "d"].iter().enumerate() {
        let column = ["m", "z", "a"][i % 3];
        tasks.push(h.task(&plans[1], title, column, &[]).await);
    }
    let listed = h
        .send(json!({"type": "planning/plan/list", "id": "p"}))
        .await;
    let ids: Vec<String> = listed["plans"]
        .as_array()
        .map(|a| a.iter().map(|p| text(&p["plan_id"])).collect())
        .unwrap_or_default();
    assert_eq!(ids, plans);
    let all: Vec<String> = h
        .all_tasks()
        .await
        .as_array()
        .map(|a| a.iter().map(|t| text(&t["task_id"])).collect())
        .unwrap_or_default();
    assert_eq!(all, tasks);
    let board = h.board(&plans[1]).await;
    let request = json!({"type": "planning/plan/board", "id": "b", "plan_id": plans[1]});
    assert_eq!(
        wire_keys(&h, &request, &["boards", "0", "tasks"]).await,
        ["z", "a", "m"]
    );
    let in_m: Vec<String> = board["tasks"]["m"]
        .as_array()
        .map(|a| a.iter().map(|t| text(&t["title"])).collect())
        .unwrap_or_default();
    assert_eq!(in_m, ["c", "e"]);
    let boards = h
        .send(json!({"type": "planning/plan/board", "id": "all"}))
        .await;
    let names: Vec<String> = boards["boards"]
        .as_array()
        .map(|a| a.iter().map(|b| text(&b["name"])).collect())
        .unwrap_or_default();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
}

/// task/list by plan, by plan and status, by status across plans, and unknown filters.
pub async fn lists_filter_by_plan_and_status(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let p1 = h.plan("p1", &[]).await;
    let p2 = h.plan("p2", &["todo", "done"]).await;
    let p3 = h.plan("p3", &["x"]).await;
    h.task(&p1, "a", "todo", &[]).await;
    h.task(&p1, "b", "done", &[]).await;
    h.task(&p2, "c", "todo", &[]).await;
    h.task(&p2, "d", "done", &[]).await;
    h.task(&p3, "e", "x", &[]).await;
    let titles = |reply: &Value| -> Vec<String> {
        reply["tasks"]
            .as_array()
            .map(|a| a.iter().map(|t| text(&t["title"])).collect())
            .unwrap_or_default()
    };
    let reply = h
        .send(json!({"type": "planning/task/list", "id": "1", "plan_id": p1}))
        .await;
    assert_eq!(titles(&reply), ["a", "b"]);
    assert_eq!(
        reply["tasks"][0],
        json!({"task_id": reply["tasks"][0]["task_id"], "title": "a", "status": "todo",
               "assignee": "", "plan_id": p1})
    );
    let reply = h
        .send(json!({"type": "planning/task/list", "id": "2", "plan_id": p2, "status": "done"}))
        .await;
    assert_eq!(titles(&reply), ["d"]);
    // Status alone filters across plans (the peer ignores it).
    let reply = h
        .send(json!({"type": "planning/task/list", "id": "3", "status": "todo"}))
        .await;
    assert_eq!(titles(&reply), ["a", "c"]);
    let reply = h
        .send(json!({"type": "planning/task/list", "id": "4", "plan_id": p2, "status": "doing"}))
        .await;
    refused(&reply, "unknown_status");
    assert_eq!(reply["tasks"], json!([]));
    let reply = h
        .send(json!({"type": "planning/task/list", "id": "5", "plan_id": "nope"}))
        .await;
    refused(&reply, "unknown_plan");
    let reply = h
        .send(json!({"type": "planning/plan/board", "id": "6", "plan_id": "nope"}))
        .await;
    refused(&reply, "unknown_plan");
    assert_eq!(reply["boards"], json!([]));
}

/// A session sees only its Room.
pub async fn rooms_do_not_see_each_other(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let plan = h.plan("mine", &[]).await;
    let task = h.task(&plan, "x", "todo", &[]).await;
    let other = Session::new(Arc::clone(&h.service), room("elsewhere"))
        .expect("counting ids never run out");
    let ask = |message: Value| {
        let other = other.clone();
        async move {
            match other.step(message.to_string().as_bytes()).await {
                Step::Reply(line) => serde_json::from_str::<Value>(&line).unwrap_or(Value::Null),
                step => panic!("{step:?}"),
            }
        }
    };
    let plans = ask(json!({"type": "planning/plan/list", "id": "1"})).await;
    assert_eq!(plans["plans"], json!([]));
    let tasks = ask(json!({"type": "planning/task/list", "id": "2"})).await;
    assert_eq!(tasks["tasks"], json!([]));
    let reply =
        ask(json!({"type": "planning/task/add", "id": "3", "plan_id": plan, "title": "y"})).await;
    refused(&reply, "unknown_plan");
    let reply = ask(
        json!({"type": "planning/task/update", "id": "4", "plan_id": plan,
                           "task_id": task, "status": "done"}),
    )
    .await;
    refused(&reply, "unknown_plan");
    let reply = ask(json!({"type": "planning/plan/board", "id": "5", "plan_id": plan})).await;
    refused(&reply, "unknown_plan");
    assert_eq!(h.detail(&plan, &task).await.row.column, 1);
}

/// Handshake and ping are answered; shutdown closes; replies are not answered.
pub async fn transport_messages_are_answered(repo: Arc<dyn PlanningRepository>) {
    let h = Harness::new(repo);
    let line = br#"{"type":"handshake/req","id":"a1","version":"1.0","ts":1764460800.0,"agent_id":"ag","agent_caps":["planning"],"auth_token":""}"#;
    let reply = h.raw(line).await;
    check_envelope(&reply);
    assert_eq!(reply["type"], "handshake/resp");
    assert_eq!(reply["req_id"], "a1");
    assert_eq!(reply["ok"], true);
    assert_eq!(reply["session_id"], h.session.id());
    assert_eq!(
        reply["accepted_caps"],
        json!([{"capability": "planning", "enabled": true, "metadata": {}}])
    );
    assert_eq!(reply["max_parallel"], 4);
    // The SDK's default capabilities are not ours: accepted as an empty list, still ok.
    let reply = h
        .send(
            json!({"type": "handshake/req", "id": "a2", "agent_caps": ["streaming", "artifacts"]}),
        )
        .await;
    assert_eq!(reply["accepted_caps"], json!([]));
    let reply = h.send(json!({"type": "ping", "id": "p1"})).await;
    assert_eq!(reply["type"], "pong");
    assert_eq!(reply["req_id"], "p1");
    assert!(reply["uptime_seconds"].is_number());
    for silent in [
        json!({"type": "pong", "id": "x"}),
        json!({"type": "error", "id": "x", "code": "parse_error"}),
        json!({"type": "planning/task/add/resp", "id": "x"}),
    ] {
        assert_eq!(
            h.session.step(silent.to_string().as_bytes()).await,
            Step::Silent
        );
    }
    let shutdown = json!({"type": "shutdown", "id": "s", "timeout": 10});
    assert_eq!(
        h.session.step(shutdown.to_string().as_bytes()).await,
        Step::Close
    );
}

/// Many writers at once: every acknowledged task is stored and every board is whole.
pub async fn concurrent_writers_lose_nothing(repo: Arc<dyn PlanningRepository>) {
    let h = Arc::new(Harness::new(repo));
    let plan = h.plan("busy", &[]).await;
    let writers = 8;
    let per_writer = 25;
    let mut joins = Vec::new();
    for w in 0..writers {
        let h = Arc::clone(&h);
        let plan = plan.clone();
        joins.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..per_writer {
                let task = h.task(&plan, &format!("w{w}-{i}"), "todo", &[]).await;
                let reply = h
                    .send(
                        json!({"type": "planning/task/update", "id": "u", "plan_id": plan,
                                 "task_id": task, "status": "done", "assignee": format!("w{w}")}),
                    )
                    .await;
                assert_eq!(reply["success"], true, "{reply}");
                // A board read in the middle of the writes is whole: every task in exactly
                // one column, each column's tasks carrying that column's status.
                if i % 10 == 0 {
                    let board = h.board(&plan).await;
                    for (column, tasks) in board["tasks"].as_object().into_iter().flatten() {
                        for t in tasks.as_array().into_iter().flatten() {
                            assert_eq!(&t["status"], column, "{board}");
                        }
                    }
                }
                mine.push(task);
            }
            mine
        }));
    }
    let mut expected = Vec::new();
    for join in joins {
        expected.extend(join.await.unwrap_or_else(|e| panic!("{e}")));
    }
    let board = h.board(&plan).await;
    let done = board["tasks"]["done"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(done.len(), writers * per_writer, "{board}");
    assert_eq!(board["tasks"]["todo"], json!([]));
    let mut ids: Vec<String> = done.iter().map(|t| text(&t["task_id"])).collect();
    ids.sort();
    expected.sort();
    assert_eq!(ids, expected);
    for t in &done {
        let title = text(&t["title"]);
        let writer = title.split('-').next().unwrap_or_default();
        assert_eq!(t["assignee"], writer, "{t}");
    }
}

/// Two writers each closing half of a cycle at the same moment: at most one wins.
pub async fn concurrent_dependency_updates_never_form_a_cycle(repo: Arc<dyn PlanningRepository>) {
    let h = Arc::new(Harness::new(repo));
    let plan = h.plan("race", &[]).await;
    for round in 0..10 {
        let a = h.task(&plan, &format!("a{round}"), "todo", &[]).await;
        let b = h.task(&plan, &format!("b{round}"), "todo", &[]).await;
        let (h1, h2) = (Arc::clone(&h), Arc::clone(&h));
        let (p1, p2) = (plan.clone(), plan.clone());
        let (a1, b1, a2, b2) = (a.clone(), b.clone(), a.clone(), b.clone());
        let first = tokio::spawn(async move {
            h1.send(
                json!({"type": "planning/task/update", "id": "x", "plan_id": p1,
                           "task_id": a1, "deps": [b1]}),
            )
            .await
        });
        let second = tokio::spawn(async move {
            h2.send(
                json!({"type": "planning/task/update", "id": "y", "plan_id": p2,
                           "task_id": b2, "deps": [a2]}),
            )
            .await
        });
        let r1 = first.await.unwrap_or_else(|e| panic!("{e}"));
        let r2 = second.await.unwrap_or_else(|e| panic!("{e}"));
        let wins = [&r1, &r2].iter().filter(|r| r["success"] == true).count();
        assert_eq!(wins, 1, "{r1} {r2}");
        let a_deps = h.detail(&plan, &a).await.deps;
        let b_deps = h.detail(&plan, &b).await.deps;
        assert!(
            a_deps.is_empty() || b_deps.is_empty(),
            "cycle stored: {a_deps:?} {b_deps:?}"
        );
    }
}

/// An in-memory repository: the suite's own check, and a reference for stores.
#[derive(Debug, Default)]
pub struct MemoryRepository {
    inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    plans: Vec<(RoomId, PlanRecord)>,
    tasks: Vec<(i64, TaskDetail)>,
}

impl MemoryRepository {
    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Memory {
    fn owns(&self, room: &RoomId, plan: i64) -> bool {
        self.plans.iter().any(|(r, p)| r == room && p.key == plan)
    }
}

#[async_trait]
impl PlanningRepository for MemoryRepository {
    async fn create_plan(&self, room: &RoomId, plan: &NewPlan) -> Result<PlanRecord, RepoError> {
        let mut memory = self.lock();
        let key = i64::try_from(memory.plans.len()).unwrap_or(i64::MAX) + 1;
        let record = PlanRecord {
            key,
            plan_id: plan.plan_id.clone(),
            name: plan.name.clone(),
            description: plan.description.clone(),
            columns: Columns::from_stored(plan.columns.names().to_vec()),
            kind: PlanKind::Standalone,
            created: plan.created,
        };
        memory.plans.push((room.clone(), record.clone()));
        Ok(record)
    }

    async fn plans(&self, room: &RoomId) -> Result<Vec<PlanRecord>, RepoError> {
        Ok(self
            .lock()
            .plans
            .iter()
            .filter(|(r, _)| r == room)
            .map(|(_, p)| p.clone())
            .collect())
    }

    async fn plan(&self, room: &RoomId, plan_id: &str) -> Result<Option<PlanRecord>, RepoError> {
        Ok(self
            .lock()
            .plans
            .iter()
            .find(|(r, p)| r == room && p.plan_id == plan_id)
            .map(|(_, p)| p.clone()))
    }

    async fn add_task(
        &self,
        room: &RoomId,
        task: &NewTask,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let mut memory = self.lock();
        if !memory.owns(room, task.plan) {
            return Ok(Err(Refusal::new(RefusalCode::UnknownPlan, "no such plan")));
        }
        let known = |id: &str| {
            memory
                .tasks
                .iter()
                .any(|(p, t)| *p == task.plan && t.row.task_id == id)
        };
        if let Err(refusal) = rules::check_known(&task.deps, known) {
            return Ok(Err(refusal));
        }
        let metadata = serde_json::from_str(&task.metadata)
            .map_err(|e| RepoError::corrupt("task metadata", e))?;
        memory.tasks.push((
            task.plan,
            TaskDetail {
                row: TaskRow {
                    task_id: task.task_id.clone(),
                    title: task.title.clone(),
                    column: task.column,
                    assignee: task.assignee.clone(),
                },
                description: task.description.clone(),
                deps: task.deps.clone(),
                metadata,
            },
        ));
        Ok(Ok(()))
    }

    async fn update_task(
        &self,
        room: &RoomId,
        change: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let mut memory = self.lock();
        let unknown = || {
            Ok(Err(Refusal::new(
                RefusalCode::UnknownTask,
                format!("no task `{}` in this plan", change.task_id),
            )))
        };
        if !memory.owns(room, change.plan) {
            return unknown();
        }
        let in_plan = |t: &(i64, TaskDetail)| t.0 == change.plan;
        if !memory
            .tasks
            .iter()
            .any(|t| in_plan(t) && t.1.row.task_id == change.task_id)
        {
            return unknown();
        }
        if let Some(deps) = &change.deps {
            let known = |id: &str| {
                memory
                    .tasks
                    .iter()
                    .any(|t| in_plan(t) && t.1.row.task_id == id)
            };
            if let Err(refusal) = rules::check_known(deps, known) {
                return Ok(Err(refusal));
            }
            let graph: HashMap<String, Vec<String>> = memory
                .tasks
                .iter()
                .filter(|t| in_plan(t))
                .map(|(_, t)| (t.row.task_id.clone(), t.deps.clone()))
                .collect();
            if let Err(refusal) = rules::check_acyclic(&graph, &change.task_id, deps) {
                return Ok(Err(refusal));
            }
        }
        if let Some((_, task)) = memory
            .tasks
            .iter_mut()
            .find(|(p, t)| *p == change.plan && t.row.task_id == change.task_id)
        {
            if let Some(column) = change.column {
                task.row.column = column;
            }
            if let Some(assignee) = &change.assignee {
                task.row.assignee.clone_from(assignee);
            }
            if let Some(deps) = &change.deps {
                task.deps.clone_from(deps);
            }
        }
        Ok(Ok(()))
    }

    async fn tasks(
        &self,
        room: &RoomId,
        plan: i64,
        column: Option<usize>,
    ) -> Result<TaskRows, RepoError> {
        let memory = self.lock();
        let mut rows = TaskRows::default();
        if !memory.owns(room, plan) {
            return Ok(rows);
        }
        for (_, t) in memory
            .tasks
            .iter()
            .filter(|(p, t)| *p == plan && column.is_none_or(|c| t.row.column == c))
        {
            rows.push(&t.row.task_id, &t.row.title, t.row.column, &t.row.assignee);
        }
        Ok(rows)
    }

    async fn task(
        &self,
        room: &RoomId,
        plan: i64,
        task_id: &str,
    ) -> Result<Option<TaskDetail>, RepoError> {
        let memory = self.lock();
        if !memory.owns(room, plan) {
            return Ok(None);
        }
        Ok(memory
            .tasks
            .iter()
            .find(|(p, t)| *p == plan && t.row.task_id == task_id)
            .map(|(_, t)| t.clone()))
    }
}
