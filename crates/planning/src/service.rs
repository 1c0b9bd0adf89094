//! The planning service: `supported_messages()` and `handle(request)`. It applies the rules
//! that need no stored data (defaults, status aliasing, columns, nothing-to-update), shapes
//! boards, and leaves atomic checks to the repository.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};

use crate::coordinator::{AgentTaskUpdate, CoordinatorPlan, CoordinatorPlans};
use crate::error::BoxError;
use crate::model::{
    Columns, NewPlan, NewTask, PlanKind, PlanRecord, Refusal, RefusalCode, TaskChange, TaskRows,
};
use crate::repo::{PlanningRepository, RepoError};
use crate::rules;
use crate::wire::{
    Board, ListedPlan, MessageKind, PlanBoard, PlanCreate, PlanItem, PlanningReply,
    PlanningRequest, TaskAdd, TaskList, TaskListing, TaskUpdate,
};

/// The operating system gave no randomness; nothing that needed a fresh id was made. The
/// one failure policy of randomness (issue 14, as `agentroom_ports::NoRandomness`): an
/// error, never a zero, time-based or otherwise guessable id.
#[derive(Debug, thiserror::Error)]
#[error("no randomness from the operating system: {source}")]
pub struct NoRandomness {
    /// The generator's error.
    #[source]
    source: BoxError,
}

impl NoRandomness {
    /// A failure, keeping the generator's error as its `source()`.
    pub fn new(source: impl Into<BoxError>) -> Self {
        Self {
            source: source.into(),
        }
    }
}

/// Why the service gave no answer to a request: a failure below the rules (a rule's refusal
/// is a reply, not this). Either way nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    /// The repository, or the coordinator's plans, failed.
    #[error(transparent)]
    Store(#[from] RepoError),
    /// A fresh id (a plan's, a task's, a request's) could not be drawn; nothing was stored.
    #[error(transparent)]
    NoRandomness(#[from] NoRandomness),
}

/// Where the service gets fresh ids and the time: passed in, so tests are deterministic.
pub trait Ambient: Send + Sync {
    /// A fresh opaque id (plans, tasks, coordinator requests, sessions), or
    /// [`NoRandomness`] when there is none to draw.
    fn fresh_id(&self) -> Result<String, NoRandomness>;
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// Random 32-hex ids (128 bits from the operating system) and the system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemAmbient;

impl Ambient for SystemAmbient {
    fn fresh_id(&self) -> Result<String, NoRandomness> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(NoRandomness::new)?;
        Ok(hex::encode(bytes))
    }

    fn now(&self) -> Timestamp {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp::from_millis(millis)
    }
}

/// Counting ids (`{prefix}1`, `{prefix}2`, …) and a fixed clock, for tests.
#[derive(Debug)]
pub struct CountingAmbient {
    prefix: String,
    next: std::sync::atomic::AtomicU64,
    now: Timestamp,
}

impl CountingAmbient {
    /// Ids `{prefix}1…` at time `now`.
    pub fn new(prefix: &str, now: Timestamp) -> Self {
        Self {
            prefix: prefix.to_owned(),
            next: std::sync::atomic::AtomicU64::new(1),
            now,
        }
    }
}

impl Ambient for CountingAmbient {
    fn fresh_id(&self) -> Result<String, NoRandomness> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(format!("{}{n}", self.prefix))
    }

    fn now(&self) -> Timestamp {
        self.now
    }
}

/// Plans never change once created and are never deleted, so a plan read once stays true
/// in every process: the service keeps the ones it has seen, up to this many.
const PLAN_CACHE_CAPACITY: usize = 4096;

/// The planning service over one repository, and the coordinator's plans when it serves
/// them.
pub struct PlanningService {
    repo: Arc<dyn PlanningRepository>,
    ambient: Arc<dyn Ambient>,
    plans: Mutex<HashMap<(RoomId, String), Arc<PlanRecord>>>,
    coordinator: Option<Arc<dyn CoordinatorPlans>>,
}

/// A plan a request names: a standalone one from the repository or an objective's.
enum Found {
    Standalone(Arc<PlanRecord>),
    Coordinator(CoordinatorPlan),
}

impl std::fmt::Debug for PlanningService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanningService").finish_non_exhaustive()
    }
}

impl PlanningService {
    /// A service over `repo`.
    pub fn new(repo: Arc<dyn PlanningRepository>, ambient: Arc<dyn Ambient>) -> Self {
        Self {
            repo,
            ambient,
            plans: Mutex::new(HashMap::new()),
            coordinator: None,
        }
    }

    /// Serves the coordinator's plans too: each objective's current plan version is a plan
    /// whose `plan_id` is the objective id, on boards, in plan and task lists; `task/add` on
    /// it is refused and `task/update` goes to `plans` to decide.
    pub fn with_coordinator_plans(mut self, plans: Arc<dyn CoordinatorPlans>) -> Self {
        self.coordinator = Some(plans);
        self
    }

    /// The six message types this service answers.
    pub fn supported_messages() -> &'static [MessageKind] {
        &MessageKind::ALL
    }

    /// The ids and clock it uses.
    pub fn ambient(&self) -> &Arc<dyn Ambient> {
        &self.ambient
    }

    /// The repository it uses.
    pub fn repository(&self) -> &Arc<dyn PlanningRepository> {
        &self.repo
    }

    /// Answers one request in `room` for a caller the session has not identified: a
    /// `task/update` on a coordinator plan is refused (T3: the coordinator must know which
    /// agent asks). A rule's refusal is a reply; only a storage failure or a missing
    /// randomness source is an error.
    pub async fn handle(
        &self,
        room: &RoomId,
        request: PlanningRequest,
    ) -> Result<PlanningReply, PlanningError> {
        self.handle_as(room, None, request).await
    }

    /// Answers one request in `room` from `caller`, the principal the session authenticated
    /// (never one named in the message). A rule's refusal is a reply; only a storage failure
    /// or a missing randomness source is an error, and then nothing was stored.
    #[tracing::instrument(level = "debug", skip_all, fields(room = %room, kind = ?request.kind()))]
    pub async fn handle_as(
        &self,
        room: &RoomId,
        caller: Option<&PrincipalId>,
        request: PlanningRequest,
    ) -> Result<PlanningReply, PlanningError> {
        let kind = request.kind();
        let mut task_id = String::new();
        let outcome = match request {
            PlanningRequest::PlanCreate(create) => self.create_plan(room, create).await?,
            PlanningRequest::PlanList => self.list_plans(room, caller).await?,
            PlanningRequest::TaskAdd(add) => self.add_task(room, caller, add).await?,
            PlanningRequest::TaskUpdate(update) => {
                task_id.clone_from(&update.task_id);
                self.update_task(room, caller, update).await?
            }
            PlanningRequest::TaskList(list) => self.list_tasks(room, caller, list).await?,
            PlanningRequest::PlanBoard(board) => self.board(room, caller, board).await?,
        };
        Ok(outcome.unwrap_or_else(|refusal| PlanningReply::Refused {
            kind,
            task_id,
            refusal,
        }))
    }

    async fn plan(
        &self,
        room: &RoomId,
        plan_id: &str,
        viewer: Option<&PrincipalId>,
    ) -> Result<Found, Outcome> {
        let key = (room.clone(), plan_id.to_owned());
        if let Some(plan) = self.lock_plans().get(&key) {
            return Ok(Found::Standalone(Arc::clone(plan)));
        }
        match self.repo.plan(room, plan_id).await {
            Ok(Some(plan)) => {
                let plan = Arc::new(plan);
                let mut cache = self.lock_plans();
                if cache.len() >= PLAN_CACHE_CAPACITY {
                    cache.clear();
                }
                cache.insert(key, Arc::clone(&plan));
                Ok(Found::Standalone(plan))
            }
            Ok(None) => match &self.coordinator {
                // An objective's plan moves with its objective: never cached.
                Some(coordinator) => match coordinator.plan(room, plan_id, viewer).await {
                    Ok(Some(plan)) => Ok(Found::Coordinator(plan)),
                    Ok(None) => Err(Outcome::Refused(unknown_plan(plan_id))),
                    Err(error) => Err(Outcome::Failed(error)),
                },
                None => Err(Outcome::Refused(unknown_plan(plan_id))),
            },
            Err(error) => Err(Outcome::Failed(error)),
        }
    }

    /// The one plan named, or every plan of the Room: standalone plans in creation order,
    /// then the objectives' plans.
    async fn plans_for(
        &self,
        room: &RoomId,
        plan_id: Option<&str>,
        viewer: Option<&PrincipalId>,
    ) -> Result<Vec<Found>, Outcome> {
        match plan_id {
            Some(plan_id) => Ok(vec![self.plan(room, plan_id, viewer).await?]),
            None => {
                let mut found: Vec<Found> = match self.repo.plans(room).await {
                    Ok(plans) => plans
                        .into_iter()
                        .map(|p| Found::Standalone(Arc::new(p)))
                        .collect(),
                    Err(error) => return Err(Outcome::Failed(error)),
                };
                found.extend(
                    self.coordinator_plans(room, viewer)
                        .await
                        .map_err(Outcome::Failed)?
                        .into_iter()
                        .map(Found::Coordinator),
                );
                Ok(found)
            }
        }
    }

    async fn coordinator_plans(
        &self,
        room: &RoomId,
        viewer: Option<&PrincipalId>,
    ) -> Result<Vec<CoordinatorPlan>, RepoError> {
        match &self.coordinator {
            Some(coordinator) => coordinator.plans(room, viewer).await,
            None => Ok(Vec::new()),
        }
    }

    fn lock_plans(&self) -> std::sync::MutexGuard<'_, HashMap<(RoomId, String), Arc<PlanRecord>>> {
        // A poisoned cache holds only immutable records; keep using it.
        self.plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn create_plan(&self, room: &RoomId, create: PlanCreate) -> Answer {
        let columns = match Columns::new(create.columns) {
            Ok(columns) => columns,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let plan = NewPlan {
            plan_id: self.ambient.fresh_id()?,
            name: create.name,
            description: create.description,
            columns,
            created: self.ambient.now(),
        };
        let record = self.repo.create_plan(room, &plan).await?;
        Ok(Ok(PlanningReply::PlanCreated {
            plan_id: record.plan_id,
            columns: record.columns.names().to_vec(),
        }))
    }

    async fn list_plans(&self, room: &RoomId, viewer: Option<&PrincipalId>) -> Answer {
        let plans = self.repo.plans(room).await?;
        let objectives = self.coordinator_plans(room, viewer).await?;
        Ok(Ok(PlanningReply::Plans(
            plans
                .into_iter()
                .map(|p| PlanItem {
                    plan_id: p.plan_id,
                    name: p.name,
                    columns: p.columns.names().to_vec(),
                })
                .chain(objectives.into_iter().map(|p| PlanItem {
                    plan_id: p.plan_id,
                    name: p.name,
                    columns: p.columns.names().to_vec(),
                }))
                .collect(),
        )))
    }

    async fn add_task(&self, room: &RoomId, viewer: Option<&PrincipalId>, add: TaskAdd) -> Answer {
        let plan = match self.plan(room, &add.plan_id, viewer).await {
            Ok(Found::Standalone(plan)) => plan,
            Ok(Found::Coordinator(plan)) => return Ok(Err(admitted_whole(&plan.plan_id))),
            Err(outcome) => return outcome.into_answer(),
        };
        if let PlanKind::Coordinator(objective) = plan.kind {
            return Ok(Err(admitted_whole(&objective.to_string())));
        }
        if add.title.trim().is_empty() {
            return Ok(Err(Refusal::new(
                RefusalCode::InvalidTitle,
                "a task needs a title that is not blank",
            )));
        }
        let column = match plan.columns.resolve(&add.status) {
            Ok(column) => column,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let task = NewTask {
            plan: plan.key,
            task_id: self.ambient.fresh_id()?,
            title: add.title,
            column,
            description: add.description,
            assignee: add.assignee,
            deps: rules::distinct(add.deps),
            metadata: add.metadata,
            created: self.ambient.now(),
        };
        if let Err(refusal) = self.repo.add_task(room, &task).await? {
            return Ok(Err(refusal));
        }
        Ok(Ok(PlanningReply::TaskAdded {
            task_id: task.task_id,
            status: column_name(&plan, column),
        }))
    }

    async fn update_task(
        &self,
        room: &RoomId,
        caller: Option<&PrincipalId>,
        update: TaskUpdate,
    ) -> Answer {
        let plan = match self.plan(room, &update.plan_id, caller).await {
            Ok(plan) => plan,
            Err(outcome) => return outcome.into_answer(),
        };
        if update.status.is_none() && update.assignee.is_none() && update.deps.is_none() {
            return Ok(Err(Refusal::new(
                RefusalCode::NothingToUpdate,
                "task/update needs a status, an assignee or deps to change",
            )));
        }
        let plan = match plan {
            Found::Standalone(plan) => plan,
            Found::Coordinator(plan) => {
                return self
                    .update_coordinator_task(room, caller, &plan, update)
                    .await;
            }
        };
        if let PlanKind::Coordinator(objective) = plan.kind {
            return Ok(Err(Refusal::new(
                RefusalCode::CoordinatorPlan,
                format!(
                    "plan {} is the board of objective {objective}; the coordinator moves its \
                     tasks",
                    plan.plan_id
                ),
            )));
        }
        let column = match update.status.as_deref().map(|s| plan.columns.resolve(s)) {
            Some(Err(refusal)) => return Ok(Err(refusal)),
            Some(Ok(column)) => Some(column),
            None => None,
        };
        let change = TaskChange {
            plan: plan.key,
            task_id: update.task_id.clone(),
            column,
            assignee: update.assignee,
            deps: update.deps.map(rules::distinct),
            updated: self.ambient.now(),
        };
        if let Err(refusal) = self.repo.update_task(room, &change).await? {
            return Ok(Err(refusal));
        }
        Ok(Ok(PlanningReply::TaskUpdated {
            task_id: update.task_id,
        }))
    }

    /// An agent's status update of a task of an objective's plan: only the status, only a
    /// column, only from an identified agent; the coordinator decides the rest.
    async fn update_coordinator_task(
        &self,
        room: &RoomId,
        caller: Option<&PrincipalId>,
        plan: &CoordinatorPlan,
        update: TaskUpdate,
    ) -> Answer {
        if update.assignee.is_some() || update.deps.is_some() {
            return Ok(Err(Refusal::new(
                RefusalCode::CoordinatorPlan,
                format!(
                    "plan {} is the board of objective {}; the engine assigns its tasks and \
                     orders them (O7): an agent may only update the status of its own task",
                    plan.plan_id, plan.plan_id
                ),
            )));
        }
        let Some(status) = update.status else {
            return Ok(Err(Refusal::new(
                RefusalCode::NothingToUpdate,
                "task/update needs a status to change",
            )));
        };
        if let Err(refusal) = plan.columns.resolve(&status) {
            return Ok(Err(refusal));
        }
        let Some(by) = caller else {
            return Ok(Err(Refusal::new(
                RefusalCode::RuleRefused,
                "T3: this session acts for no identified agent; only an agent may update its \
                 own task of an objective's plan",
            )));
        };
        let decided = match &self.coordinator {
            Some(coordinator) => {
                coordinator
                    .update_task(
                        room,
                        AgentTaskUpdate {
                            request: self.ambient.fresh_id()?,
                            by: by.clone(),
                            plan_id: plan.plan_id.clone(),
                            task_id: update.task_id.clone(),
                            status,
                        },
                    )
                    .await?
            }
            None => return Ok(Err(unknown_plan(&plan.plan_id))),
        };
        Ok(decided.map(|()| PlanningReply::TaskUpdated {
            task_id: update.task_id,
        }))
    }

    async fn list_tasks(
        &self,
        room: &RoomId,
        viewer: Option<&PrincipalId>,
        list: TaskList,
    ) -> Answer {
        let plans = match self.plans_for(room, list.plan_id.as_deref(), viewer).await {
            Ok(plans) => plans,
            Err(outcome) => return outcome.into_answer(),
        };
        let mut listing = Vec::with_capacity(plans.len());
        for found in plans {
            let plan = match found {
                Found::Standalone(plan) => plan,
                Found::Coordinator(plan) => {
                    let rows = match &list.status {
                        None => plan.rows,
                        Some(status) => match plan.columns.position(status) {
                            Some(column) => only_column(&plan.rows, column),
                            None if list.plan_id.is_none() => continue,
                            None => return Ok(Err(plan.columns.not_a_column(status))),
                        },
                    };
                    listing.push(ListedPlan {
                        plan_id: plan.plan_id,
                        columns: plan.columns.names().to_vec(),
                        rows,
                    });
                    continue;
                }
            };
            let column = match &list.status {
                None => None,
                Some(status) => match plan.columns.position(status) {
                    Some(column) => Some(column),
                    // Across plans, a plan without that column simply has no such tasks;
                    // for one named plan it is a mistake worth saying.
                    None if list.plan_id.is_none() => continue,
                    None => return Ok(Err(plan.columns.not_a_column(status))),
                },
            };
            let rows = self.repo.tasks(room, plan.key, column).await?;
            if rows
                .max_column()
                .is_some_and(|c| c >= plan.columns.names().len())
            {
                return Err(corrupt_column(&plan).into());
            }
            listing.push(ListedPlan {
                plan_id: plan.plan_id.clone(),
                columns: plan.columns.names().to_vec(),
                rows,
            });
        }
        Ok(Ok(PlanningReply::Tasks(TaskListing(listing))))
    }

    async fn board(&self, room: &RoomId, viewer: Option<&PrincipalId>, board: PlanBoard) -> Answer {
        let plans = match self.plans_for(room, board.plan_id.as_deref(), viewer).await {
            Ok(plans) => plans,
            Err(outcome) => return outcome.into_answer(),
        };
        let mut boards = Vec::with_capacity(plans.len());
        for found in plans {
            match found {
                Found::Standalone(plan) => {
                    let rows = self.repo.tasks(room, plan.key, None).await?;
                    boards.push(shape_board(&plan, rows)?);
                }
                Found::Coordinator(plan) => {
                    let board = Board::new(
                        plan.plan_id.clone(),
                        plan.name,
                        plan.columns.names().to_vec(),
                        plan.rows,
                    )
                    .ok_or_else(|| {
                        RepoError::inconsistent(format!(
                            "a task of objective plan {} is in a column the plan does not have",
                            plan.plan_id
                        ))
                    })?;
                    boards.push(board);
                }
            }
        }
        Ok(Ok(PlanningReply::Boards(boards)))
    }
}

type Answer = Result<Result<PlanningReply, Refusal>, PlanningError>;

enum Outcome {
    Refused(Refusal),
    Failed(RepoError),
}

impl Outcome {
    fn into_answer(self) -> Answer {
        match self {
            Outcome::Refused(refusal) => Ok(Err(refusal)),
            Outcome::Failed(error) => Err(error.into()),
        }
    }
}

/// The refusal of `task/add` on an objective's plan: plans are admitted whole (O7).
fn admitted_whole(plan_id: &str) -> Refusal {
    Refusal::new(
        RefusalCode::CoordinatorPlan,
        format!(
            "plan {plan_id} is the board of objective {plan_id}; its tasks are admitted whole \
             with the plan (O7)"
        ),
    )
}

/// The rows of one column, in order.
fn only_column(rows: &TaskRows, column: usize) -> TaskRows {
    let mut only = TaskRows::default();
    for row in rows.iter().filter(|r| r.column == column) {
        only.push(row.task_id, row.title, row.column, row.assignee);
    }
    only
}

fn unknown_plan(plan_id: &str) -> Refusal {
    Refusal::new(
        RefusalCode::UnknownPlan,
        format!("no plan `{plan_id}` in this room"),
    )
}

fn corrupt_column(plan: &PlanRecord) -> RepoError {
    RepoError::inconsistent(format!(
        "a task of plan {} is in a column the plan does not have",
        plan.plan_id
    ))
}

fn column_name(plan: &PlanRecord, column: usize) -> String {
    plan.columns.name(column).unwrap_or_default().to_owned()
}

/// A plan's board: its tasks (in creation order) grouped by column, in the plan's order.
fn shape_board(plan: &PlanRecord, rows: TaskRows) -> Result<Board, RepoError> {
    Board::new(
        plan.plan_id.clone(),
        plan.name.clone(),
        plan.columns.names().to_vec(),
        rows,
    )
    .ok_or_else(|| corrupt_column(plan))
}
