//! The storage port of the planning service. Each store (SQLite, PostgreSQL) implements it
//! and guarantees what is about atomicity: a write applies whole or not at all, and the rules
//! that need stored data ([`crate::rules`]) run inside the transaction that writes.

use agentroom_domain::ids::RoomId;
use async_trait::async_trait;

use crate::model::{NewPlan, NewTask, PlanRecord, Refusal, TaskChange, TaskDetail, TaskRows};

/// A storage failure (not a rule's refusal).
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The database is not migrated to what this binary expects.
    #[error("the planning database is not migrated ({detail}); run `agentroom migrate up` first")]
    NotMigrated {
        /// What is missing or unexpected.
        detail: String,
    },
    /// The database failed.
    #[error("planning store: {0}")]
    Database(String),
    /// A stored value could not be read back.
    #[error("planning store holds a value it cannot read: {0}")]
    Corrupt(String),
}

/// Where planning plans and tasks live. Everything is scoped to a Room: a plan of another
/// Room is, to the caller, no plan at all.
#[async_trait]
pub trait PlanningRepository: Send + Sync {
    /// Stores a new standalone plan.
    async fn create_plan(&self, room: &RoomId, plan: &NewPlan) -> Result<PlanRecord, RepoError>;

    /// The Room's plans in creation order.
    async fn plans(&self, room: &RoomId) -> Result<Vec<PlanRecord>, RepoError>;

    /// One plan of the Room.
    async fn plan(&self, room: &RoomId, plan_id: &str) -> Result<Option<PlanRecord>, RepoError>;

    /// Adds a task to a plan of the Room. Inside the write: every dependency must be a task
    /// of the same plan ([`crate::rules::check_known`]).
    async fn add_task(
        &self,
        room: &RoomId,
        task: &NewTask,
    ) -> Result<Result<(), Refusal>, RepoError>;

    /// Changes a task. Inside the write: the task must be in the plan, and new dependencies
    /// must be known ([`crate::rules::check_known`]) and acyclic
    /// ([`crate::rules::check_acyclic`]).
    async fn update_task(
        &self,
        room: &RoomId,
        change: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError>;

    /// A plan's tasks in creation order, all or those of one column, read in one snapshot.
    async fn tasks(
        &self,
        room: &RoomId,
        plan: i64,
        column: Option<usize>,
    ) -> Result<TaskRows, RepoError>;

    /// Everything stored about one task of a plan.
    async fn task(
        &self,
        room: &RoomId,
        plan: i64,
        task_id: &str,
    ) -> Result<Option<TaskDetail>, RepoError>;
}
