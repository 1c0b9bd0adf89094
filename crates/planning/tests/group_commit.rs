//! Issue 21, planning group commit, as the session sees it: one group per call of
//! `Session::steps`, opened before the first message and committed before any reply is
//! encoded; a failed commit turns every planning reply of the group into the A2E
//! `runtime_error` (nothing of it is stored, so nothing may be acknowledged), while replies that
//! did not depend on the store stand. The stores' side (SQLite's one transaction, reads that see
//! the group, SIGKILL mid-stream) is tested where they live.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agentroom_domain::ids::RoomId;
use agentroom_planning::conformance::MemoryRepository;
use agentroom_planning::{
    NewPlan, NewTask, PlanRecord, PlanningRepository, PlanningService, Refusal, RepoError, Session,
    Step, SystemAmbient, TaskChange, TaskDetail, TaskRows,
};
use async_trait::async_trait;
use serde_json::Value;

/// The in-memory repository with a group commit that counts its calls and fails on demand.
#[derive(Default)]
struct Grouping {
    inner: MemoryRepository,
    begun: AtomicUsize,
    ended: AtomicUsize,
    fail_commit: AtomicBool,
}

#[async_trait]
impl PlanningRepository for Grouping {
    async fn create_plan(&self, room: &RoomId, plan: &NewPlan) -> Result<PlanRecord, RepoError> {
        self.inner.create_plan(room, plan).await
    }
    async fn plans(&self, room: &RoomId) -> Result<Vec<PlanRecord>, RepoError> {
        self.inner.plans(room).await
    }
    async fn plan(&self, room: &RoomId, plan_id: &str) -> Result<Option<PlanRecord>, RepoError> {
        self.inner.plan(room, plan_id).await
    }
    async fn add_task(
        &self,
        room: &RoomId,
        task: &NewTask,
    ) -> Result<Result<(), Refusal>, RepoError> {
        self.inner.add_task(room, task).await
    }
    async fn update_task(
        &self,
        room: &RoomId,
        change: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError> {
        self.inner.update_task(room, change).await
    }
    async fn tasks(
        &self,
        room: &RoomId,
        plan: i64,
        column: Option<usize>,
    ) -> Result<TaskRows, RepoError> {
        self.inner.tasks(room, plan, column).await
    }
    async fn task(
        &self,
        room: &RoomId,
        plan: i64,
        task_id: &str,
    ) -> Result<Option<TaskDetail>, RepoError> {
        self.inner.task(room, plan, task_id).await
    }
    async fn begin_group(&self) -> Result<bool, RepoError> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }
    async fn end_group(&self) -> Result<(), RepoError> {
        self.ended.fetch_add(1, Ordering::SeqCst);
        if self.fail_commit.load(Ordering::SeqCst) {
            return Err(RepoError::database(
                "committing a group",
                std::io::Error::other("disk full"),
            ));
        }
        Ok(())
    }
}

fn session(repo: Arc<Grouping>) -> Session {
    let service = Arc::new(PlanningService::new(repo, Arc::new(SystemAmbient)));
    Session::new(service, RoomId::parse("local").unwrap()).unwrap()
}

fn replies(steps: &[Step]) -> Vec<Value> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Reply(line) => Some(serde_json::from_str(line).unwrap()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn one_group_per_call_answers_in_order_and_ends_at_shutdown() {
    let repo = Arc::new(Grouping::default());
    let session = session(repo.clone());
    let create = br#"{"type":"planning/plan/create","id":"c","name":"p"}"#;
    let steps = session.steps(&[create.as_slice()]).await;
    let plan = replies(&steps)[0]["plan_id"].as_str().unwrap().to_owned();
    let add = format!(r#"{{"type":"planning/task/add","id":"a","plan_id":"{plan}","title":"t"}}"#);
    let list = format!(r#"{{"type":"planning/task/list","id":"l","plan_id":"{plan}"}}"#);
    let after =
        format!(r#"{{"type":"planning/task/add","id":"z","plan_id":"{plan}","title":"u"}}"#);
    let steps = session
        .steps(&[
            add.as_bytes(),
            br#"{"type":"ping","id":"p"}"#,
            list.as_bytes(),
            br#"{"type":"shutdown","id":"s"}"#,
            after.as_bytes(),
        ])
        .await;
    assert_eq!(
        steps.len(),
        4,
        "nothing after shutdown is answered: {steps:?}"
    );
    assert_eq!(steps[3], Step::Close);
    let answered = replies(&steps);
    let ids: Vec<&str> = answered
        .iter()
        .map(|r| r["req_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "p", "l"]);
    assert_eq!(answered[0]["success"], true);
    // The list in the same group sees the add before it.
    assert_eq!(
        answered[2]["tasks"].as_array().unwrap().len(),
        1,
        "{}",
        answered[2]
    );
    assert_eq!(repo.begun.load(Ordering::SeqCst), 2);
    assert_eq!(repo.ended.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_failed_group_commit_acknowledges_no_planning_message_of_the_group() {
    let repo = Arc::new(Grouping::default());
    let session = session(repo.clone());
    let create = br#"{"type":"planning/plan/create","id":"c","name":"p"}"#;
    let plan = replies(&session.steps(&[create.as_slice()]).await)[0]["plan_id"]
        .as_str()
        .unwrap()
        .to_owned();
    repo.fail_commit.store(true, Ordering::SeqCst);
    let add = format!(r#"{{"type":"planning/task/add","id":"a","plan_id":"{plan}","title":"t"}}"#);
    let board = format!(r#"{{"type":"planning/plan/board","id":"b","plan_id":"{plan}"}}"#);
    let steps = session
        .steps(&[
            add.as_bytes(),
            br#"{"type":"ping","id":"p"}"#,
            board.as_bytes(),
            b"{nope",
        ])
        .await;
    let answered = replies(&steps);
    assert_eq!(answered.len(), 4);
    for (reply, id) in [(&answered[0], "a"), (&answered[2], "b")] {
        assert_eq!(reply["type"], "error", "{reply}");
        assert_eq!(reply["code"], "runtime_error", "{reply}");
        assert_eq!(reply["req_id"], id, "{reply}");
    }
    // What did not depend on the store stands: the ping's pong, the parse error.
    assert_eq!(answered[1]["type"], "pong", "{}", answered[1]);
    assert_eq!(answered[3]["code"], "parse_error", "{}", answered[3]);
    // Envelope ids stay unique across the rewritten replies.
    let mut ids: Vec<&str> = answered.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}
