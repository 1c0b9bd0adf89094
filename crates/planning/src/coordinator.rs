//! Coordinator plans as planning plans (DESIGN.md "Standalone planning plans"): each
//! objective's current plan version is a board whose `plan_id` is the objective id. The
//! coordinator owns them, so this crate only names the seam: the service consults a
//! [`CoordinatorPlans`] for them, and the coordinator implements it over its Room store. Such
//! a plan refuses `task/add` (plans are admitted whole, O7); a `task/update` on it is only a
//! status update an agent asks for on a task, which the coordinator hands to the domain to
//! decide (its own task, rule-respecting, T2, T3, O7); a refusal names its rule.

use agentroom_domain::ids::{PrincipalId, RoomId};
use async_trait::async_trait;

use crate::model::{Columns, Refusal, TaskRows};
use crate::repo::RepoError;

/// An objective's current plan version, as a board shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorPlan {
    /// The objective id.
    pub plan_id: String,
    /// Display name (the objective's title).
    pub name: String,
    /// The column vocabulary the engine's task states map to.
    pub columns: Columns,
    /// The current version's tasks, in plan order; `task_id` is the task identity.
    pub rows: TaskRows,
}

/// A status update an agent asks for on a task of a coordinator plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentTaskUpdate {
    /// A fresh id for this request: the coordinator derives its decision's ids from it.
    pub request: String,
    /// The agent asking (from the authenticated session, never from the message).
    pub by: PrincipalId,
    /// The plan (the objective id).
    pub plan_id: String,
    /// The task (its identity).
    pub task_id: String,
    /// The column asked for: a column of the plan.
    pub status: String,
}

/// The coordinator's plans of a Room, as planning plans. `viewer` is the principal the
/// session acts for: its boards hold only the tasks it may see (the domain decides which);
/// `None` shows every task, to a caller the host admitted without a principal (the host's own
/// owner-level loopback session).
#[async_trait]
pub trait CoordinatorPlans: Send + Sync {
    /// The current plans of the Room's objectives, oldest objective first.
    async fn plans(
        &self,
        room: &RoomId,
        viewer: Option<&PrincipalId>,
    ) -> Result<Vec<CoordinatorPlan>, RepoError>;

    /// The current plan of one objective of the Room, if `plan_id` names one.
    async fn plan(
        &self,
        room: &RoomId,
        plan_id: &str,
        viewer: Option<&PrincipalId>,
    ) -> Result<Option<CoordinatorPlan>, RepoError>;

    /// Decides an agent's status update; `Ok(Err(refusal))` when a rule refused it (nothing
    /// moved).
    async fn update_task(
        &self,
        room: &RoomId,
        update: AgentTaskUpdate,
    ) -> Result<Result<(), Refusal>, RepoError>;
}
