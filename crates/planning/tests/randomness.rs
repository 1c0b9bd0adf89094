//! The one randomness policy (issue 14) in the planning service: a failing source gives an
//! error, never an id, and stores nothing — for a plan's id, a task's id and the request id
//! of an agent's update of an objective's task; the client sees an A2E `runtime_error`; a
//! session cannot start without one; replies need no randomness of their own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agentroom_planning::conformance::MemoryRepository;
use agentroom_planning::wire::{PlanCreate, PlanningReply, PlanningRequest, TaskAdd};
use agentroom_planning::{
    AgentTaskUpdate, Ambient, Columns, CoordinatorPlan, CoordinatorPlans, CountingAmbient,
    DEFAULT_COLUMNS, NoRandomness, PlanningError, PlanningRepository, PlanningService, PrincipalId,
    Refusal, RepoError, RoomId, Session, Step, TaskRows, Timestamp,
};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Counting ids until broken, then no randomness at all (a test-only source).
struct Breakable {
    broken: AtomicBool,
    counting: CountingAmbient,
}

impl Breakable {
    fn working() -> Arc<Self> {
        Arc::new(Self {
            broken: AtomicBool::new(false),
            counting: CountingAmbient::new("id", Timestamp::from_millis(1_764_460_800_000)),
        })
    }

    fn broken() -> Arc<Self> {
        let ambient = Self::working();
        ambient.break_it();
        ambient
    }

    fn break_it(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }
}

impl Ambient for Breakable {
    fn fresh_id(&self) -> Result<String, NoRandomness> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(NoRandomness::new(std::io::Error::other(
                "the generator is broken",
            )));
        }
        self.counting.fresh_id()
    }

    fn now(&self) -> Timestamp {
        self.counting.now()
    }
}

fn room() -> RoomId {
    RoomId::parse("local").unwrap()
}

fn create(name: &str) -> PlanningRequest {
    PlanningRequest::PlanCreate(PlanCreate {
        name: name.to_owned(),
        columns: Vec::new(),
        description: String::new(),
    })
}

fn add(plan_id: &str, title: &str) -> PlanningRequest {
    PlanningRequest::TaskAdd(TaskAdd {
        plan_id: plan_id.to_owned(),
        title: title.to_owned(),
        status: "todo".to_owned(),
        description: String::new(),
        assignee: String::new(),
        deps: Vec::new(),
        metadata: "{}".to_owned(),
    })
}

/// The error is the typed one, and its `source()` is the generator's own error.
fn assert_no_randomness(result: Result<PlanningReply, PlanningError>) {
    match result {
        Err(PlanningError::NoRandomness(error)) => {
            assert!(error.to_string().contains("no randomness"), "{error}");
            let source = std::error::Error::source(&error).expect("the generator's error");
            assert_eq!(source.to_string(), "the generator is broken");
        }
        other => panic!("expected NoRandomness, got {other:?}"),
    }
}

async fn send(session: &Session, message: Value) -> Value {
    match session.step(message.to_string().as_bytes()).await {
        Step::Reply(line) => serde_json::from_str(&line).unwrap(),
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[tokio::test]
async fn a_failing_randomness_source_gives_an_error_never_an_id_and_stores_nothing() {
    let repo = Arc::new(MemoryRepository::default());
    let ambient = Breakable::working();
    let service = PlanningService::new(repo.clone(), ambient.clone());
    let plan_id = match service.handle(&room(), create("kept")).await.unwrap() {
        PlanningReply::PlanCreated { plan_id, .. } => plan_id,
        other => panic!("{other:?}"),
    };
    ambient.break_it();

    assert_no_randomness(service.handle(&room(), create("never")).await);
    assert_no_randomness(service.handle(&room(), add(&plan_id, "never")).await);

    // The repository holds what it held before the source failed, nothing more.
    let plans = repo.plans(&room()).await.unwrap();
    assert_eq!(
        plans.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["kept"]
    );
    assert!(
        repo.tasks(&room(), plans[0].key, None)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_request_without_randomness_is_answered_with_a_runtime_error_and_stores_nothing() {
    let repo = Arc::new(MemoryRepository::default());
    let ambient = Breakable::working();
    let service = Arc::new(PlanningService::new(repo.clone(), ambient.clone()));
    let session = Session::new(service, room()).unwrap();
    ambient.break_it();

    let reply = send(
        &session,
        json!({"type": "planning/plan/create", "id": "c1", "name": "never"}),
    )
    .await;
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["code"], "runtime_error", "{reply}");
    assert_eq!(reply["req_id"], "c1", "{reply}");
    assert!(reply.get("plan_id").is_none(), "{reply}");
    // The cause is logged, not told.
    let message = reply["message"].as_str().unwrap();
    assert!(!message.contains("randomness"), "{message}");
    assert!(repo.plans(&room()).await.unwrap().is_empty());
}

#[test]
fn a_session_cannot_start_without_randomness() {
    let service = Arc::new(PlanningService::new(
        Arc::new(MemoryRepository::default()),
        Breakable::broken(),
    ));
    let error = Session::new(service, room()).unwrap_err();
    assert!(error.to_string().contains("no randomness"), "{error}");
}

#[tokio::test]
async fn replies_need_no_randomness_of_their_own() {
    let ambient = Breakable::working();
    let service = Arc::new(PlanningService::new(
        Arc::new(MemoryRepository::default()),
        ambient.clone(),
    ));
    let session = Session::new(service, room()).unwrap();
    ambient.break_it();

    // Every reply still has an id, fresh within the session and prefixed by the session's
    // random id, so fresh across sessions too.
    let first = send(&session, json!({"type": "ping", "id": "p1"})).await;
    let second = send(&session, json!({"type": "ping", "id": "p2"})).await;
    assert_eq!(first["type"], "pong", "{first}");
    assert_eq!(first["id"], format!("{}-1", session.id()));
    assert_eq!(second["id"], format!("{}-2", session.id()));
    // A clone is the same session: it goes on counting, never repeats an id.
    let third = send(&session.clone(), json!({"type": "ping", "id": "p3"})).await;
    assert_eq!(third["id"], format!("{}-3", session.id()));
}

/// One objective's plan, whose updates only count how often the coordinator was asked.
#[derive(Default)]
struct OneObjective {
    asked: AtomicUsize,
}

const OBJECTIVE: &str = "obj-1";

#[async_trait]
impl CoordinatorPlans for OneObjective {
    async fn plans(
        &self,
        _: &RoomId,
        _: Option<&PrincipalId>,
    ) -> Result<Vec<CoordinatorPlan>, RepoError> {
        Ok(vec![objective_plan()])
    }

    async fn plan(
        &self,
        _: &RoomId,
        plan_id: &str,
        _: Option<&PrincipalId>,
    ) -> Result<Option<CoordinatorPlan>, RepoError> {
        Ok((plan_id == OBJECTIVE).then(objective_plan))
    }

    async fn update_task(
        &self,
        _: &RoomId,
        _: AgentTaskUpdate,
    ) -> Result<Result<(), Refusal>, RepoError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(Ok(()))
    }
}

fn objective_plan() -> CoordinatorPlan {
    let mut rows = TaskRows::default();
    rows.push("t1", "gather", 1, "ada");
    CoordinatorPlan {
        plan_id: OBJECTIVE.to_owned(),
        name: "objective".to_owned(),
        columns: Columns::from_stored(DEFAULT_COLUMNS.iter().map(|c| (*c).to_owned()).collect()),
        rows,
    }
}

#[tokio::test]
async fn an_agent_update_without_a_request_id_never_reaches_the_coordinator() {
    let coordinator = Arc::new(OneObjective::default());
    let ambient = Breakable::working();
    let service = Arc::new(
        PlanningService::new(Arc::new(MemoryRepository::default()), ambient.clone())
            .with_coordinator_plans(coordinator.clone()),
    );
    let session = Session::new(service, room())
        .unwrap()
        .acting_as(PrincipalId::parse("ada").unwrap());
    ambient.break_it();

    let reply = send(
        &session,
        json!({"type": "planning/task/update", "id": "u1", "plan_id": OBJECTIVE,
               "task_id": "t1", "status": "in_progress"}),
    )
    .await;
    assert_eq!(reply["code"], "runtime_error", "{reply}");
    assert_eq!(coordinator.asked.load(Ordering::SeqCst), 0);
}
