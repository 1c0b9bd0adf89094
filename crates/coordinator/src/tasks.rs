//! An agent's own task on an objective's board, moved by the rules (T2, T3): acknowledged in
//! progress, or confirmed done with its contribution. Every edge (REST's `POST
//! …/objectives/{objective}/tasks`, the MCP tool `update_my_task`) calls this one use case;
//! the domain decides again whether the move applies.

use agentroom_ports::domain::engine::InputError;
use agentroom_ports::domain::ids::{
    ContributionId, ObjectiveId, PrincipalId, RoomId, TaskIdentity,
};
use agentroom_ports::domain::plan::Column;

use crate::{Coordinator, CoordinatorError, InputId, OperatorInput, Outcome};

/// A move of one's own task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskUpdate {
    /// The task's identity in the objective's current plan.
    pub task: TaskIdentity,
    /// The column it moves to.
    pub status: Column,
    /// The contribution that completes it (T2).
    pub contribution: Option<ContributionId>,
}

impl Coordinator {
    /// Decides `by`'s `update` of its own task of `objective` in `room`, persisted as `id`:
    /// [`CoordinatorError::NoTask`] when the current plan has no such task,
    /// [`CoordinatorError::NotYourTask`] when it is another's (T2); nothing is decided then.
    pub async fn update_own_task(
        &self,
        room: &RoomId,
        id: InputId,
        by: PrincipalId,
        objective: ObjectiveId,
        update: TaskUpdate,
    ) -> Result<Outcome, CoordinatorError> {
        let stored = self.room_for_objective(room, objective).await?;
        let found = stored
            .state
            .objective(objective)
            .ok_or(InputError::UnknownObjective(objective))?;
        let task = found
            .current_plan()
            .and_then(|plan| plan.task(&update.task))
            .ok_or_else(|| CoordinatorError::NoTask {
                objective,
                task: update.task.clone(),
            })?;
        if task.assignee() != &by {
            return Err(CoordinatorError::NotYourTask {
                principal: by,
                task: update.task,
                assignee: task.assignee().clone(),
            });
        }
        self.submit(
            room,
            id,
            OperatorInput::UpdateTask {
                by,
                objective,
                task: update.task,
                status: update.status,
                contribution: update.contribution,
            },
        )
        .await
    }
}
