//! Coordinator plans as planning plans: the [`CoordinatorPlans`] seam of `crates/planning`,
//! implemented over the Room as stored and the Room's actor. Each objective's current plan
//! version is a board whose `plan_id` is the objective id, whose columns are the engine's
//! (`backlog, todo, in_progress, done`), and whose tasks are the version's tasks by identity,
//! in the column their engine state shows in. An agent's status update becomes
//! `OperatorInput::UpdateTask`, which the domain decides (its own task, T3; done only with the
//! persisted contribution that completed it, T2; only the engine moves work, O7); a rejection
//! comes back as a refusal naming its rule.

use agentroom_planning::{
    AgentTaskUpdate, BoxError, Columns, CoordinatorPlan, CoordinatorPlans, Refusal, RefusalCode,
    RepoError, TaskRows,
};
use agentroom_ports::domain::engine::{InputError, Verdict};
use agentroom_ports::domain::ids::{ObjectiveId, PrincipalId, RoomId};
use agentroom_ports::domain::objective::Objective;
use agentroom_ports::domain::plan::{Column, DEFAULT_COLUMNS, TaskState};
use agentroom_ports::domain::state::RoomState;
use async_trait::async_trait;

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

fn columns() -> Columns {
    Columns::from_stored(DEFAULT_COLUMNS.iter().map(|c| (*c).to_owned()).collect())
}

/// The board of `objective`'s current plan version, if it has one, with the tasks `viewer`
/// may see (the domain's `sees_task`; every task without a viewer): what
/// `planning/plan/board` shows, for an edge that holds the Room's state already.
pub fn board(
    state: &RoomState,
    objective: &Objective,
    viewer: Option<&PrincipalId>,
) -> Option<CoordinatorPlan> {
    let plan = objective.current_plan()?;
    let columns = columns();
    let mut rows = TaskRows::with_capacity(plan.tasks().len(), 0);
    let visible = plan
        .tasks()
        .iter()
        .filter(|task| viewer.is_none_or(|viewer| state.sees_task(viewer, task)));
    for task in visible {
        let column = columns
            .position(plan.column_of(task).as_str())
            .unwrap_or_default();
        rows.push(
            &task.identity().to_string(),
            &task.spec().title,
            column,
            task.assignee().as_str(),
        );
    }
    Some(CoordinatorPlan {
        plan_id: objective.id().to_string(),
        name: objective.title().to_owned(),
        columns,
        rows,
    })
}

fn find<'a>(state: &'a RoomState, plan_id: &str) -> Option<&'a Objective> {
    let id: ObjectiveId = plan_id.parse().ok()?;
    state.objectives().iter().find(|o| o.id() == id)
}

/// A failure of the Room store or the coordinator, kept as the repository error's source so
/// the planning edge logs the whole typed chain.
fn storage(err: impl Into<BoxError>) -> RepoError {
    RepoError::database("the coordinator's plans", err)
}

/// Which closed objectives a planning read needs back from their records.
enum Reading<'a> {
    /// Every one: the list of the Room's plans.
    All,
    /// The one `plan_id` names, if it names one.
    Plan(&'a str),
}

impl Coordinator {
    /// The Room as stored, with the closed objectives `reading` needs put back (issue 21); no
    /// state for a Room that does not exist.
    async fn stored_state(
        &self,
        room: &RoomId,
        reading: Reading<'_>,
    ) -> Result<Option<RoomState>, RepoError> {
        let found = match reading {
            Reading::All => self.room_with_history(room).await,
            Reading::Plan(plan_id) => match plan_id.parse::<ObjectiveId>() {
                Ok(objective) => self.room_for_objective(room, objective).await,
                Err(_) => self.room(room).await,
            },
        };
        match found {
            Ok(stored) => Ok(Some(stored.state)),
            Err(CoordinatorError::UnknownRoom(_)) => Ok(None),
            Err(err) => Err(storage(err)),
        }
    }
}

#[async_trait]
impl CoordinatorPlans for Coordinator {
    async fn plans(
        &self,
        room: &RoomId,
        viewer: Option<&PrincipalId>,
    ) -> Result<Vec<CoordinatorPlan>, RepoError> {
        let Some(state) = self.stored_state(room, Reading::All).await? else {
            return Ok(Vec::new());
        };
        Ok(state
            .objectives()
            .iter()
            .filter_map(|objective| board(&state, objective, viewer))
            .collect())
    }

    async fn plan(
        &self,
        room: &RoomId,
        plan_id: &str,
        viewer: Option<&PrincipalId>,
    ) -> Result<Option<CoordinatorPlan>, RepoError> {
        let Some(state) = self.stored_state(room, Reading::Plan(plan_id)).await? else {
            return Ok(None);
        };
        Ok(find(&state, plan_id).and_then(|objective| board(&state, objective, viewer)))
    }

    #[tracing::instrument(skip_all, fields(room = %room, plan = %update.plan_id, task = %update.task_id))]
    async fn update_task(
        &self,
        room: &RoomId,
        update: AgentTaskUpdate,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let Some(state) = self
            .stored_state(room, Reading::Plan(&update.plan_id))
            .await?
        else {
            return Ok(Err(no_plan(&update.plan_id)));
        };
        let Some(objective) = find(&state, &update.plan_id) else {
            return Ok(Err(no_plan(&update.plan_id)));
        };
        let Some(task) = objective.current_plan().and_then(|plan| {
            plan.tasks()
                .iter()
                .find(|t| t.identity().to_string() == update.task_id)
        }) else {
            return Ok(Err(Refusal::new(
                RefusalCode::UnknownTask,
                format!(
                    "no task `{}` in the current plan of objective {}",
                    update.task_id, update.plan_id
                ),
            )));
        };
        let Some(status) = Column::from_name(&update.status) else {
            return Ok(Err(columns().not_a_column(&update.status)));
        };
        // T2: done is proven only by the persisted contribution that completed the task; the
        // domain checks that it is this agent's.
        let contribution = match task.state() {
            TaskState::Completed { contribution } => Some(*contribution),
            _ => None,
        };
        let input = OperatorInput::UpdateTask {
            by: update.by,
            objective: objective.id(),
            task: task.identity().clone(),
            status,
            contribution,
        };
        let id = InputId::named(&format!("planning task/update {}", update.request));
        match self.submit(room, id, input).await {
            Ok(Outcome::Decided { log, .. }) => {
                Ok(match log.iter().find(|e| e.verdict == Verdict::Rejected) {
                    Some(entry) => Err(Refusal::new(
                        RefusalCode::RuleRefused,
                        match entry.rule {
                            Some(rule) => format!("{rule}: {}", entry.message),
                            None => entry.message.clone(),
                        },
                    )),
                    None => Ok(()),
                })
            }
            Ok(Outcome::AlreadyDone | Outcome::AlreadyDecided { .. }) => Ok(Ok(())),
            Err(CoordinatorError::Input(InputError::UnknownObjective(_))) => {
                Ok(Err(no_plan(&update.plan_id)))
            }
            Err(err) => Err(storage(err)),
        }
    }
}

fn no_plan(plan_id: &str) -> Refusal {
    Refusal::new(
        RefusalCode::UnknownPlan,
        format!("no plan `{plan_id}` in this room"),
    )
}
