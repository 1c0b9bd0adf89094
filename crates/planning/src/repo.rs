//! The storage port of the planning service. Each store (SQLite, PostgreSQL) implements it
//! and guarantees what is about atomicity: a write applies whole or not at all, and the rules
//! that need stored data ([`crate::rules`]) run inside the transaction that writes.

use agentroom_domain::ids::RoomId;
use async_trait::async_trait;

use crate::error::{BoxError, Cause};
use crate::model::{NewPlan, NewTask, PlanRecord, Refusal, TaskChange, TaskDetail, TaskRows};

/// A storage failure (not a rule's refusal). The variants that stand for a failure below the
/// store keep the error they came from as their `source()` (and show it after their
/// context), as `agentroom_ports::StoreError` does.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The database is not migrated to what this binary expects (D5).
    #[error(
        "the planning database is not migrated ({context}{}); run `agentroom migrate up` first",
        Cause(.source)
    )]
    NotMigrated {
        /// What is missing or differs.
        context: String,
        /// The database's error that showed it, if one did (a missing table under a running
        /// store).
        #[source]
        source: Option<BoxError>,
    },
    /// The database failed (connection lost, timeout, …).
    #[error("planning store: {context}: {source}")]
    Database {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// A stored value could not be read back.
    #[error("planning store holds a value it cannot read: {context}{}", Cause(.source))]
    Corrupt {
        /// What could not be read.
        context: String,
        /// The parser's error, if one failed (none when the data breaks an invariant).
        #[source]
        source: Option<BoxError>,
    },
}

impl RepoError {
    /// The database failed while doing `context`.
    pub fn database(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Database {
            context: context.into(),
            source: source.into(),
        }
    }

    /// `context` cannot be read back: `source` failed to parse it.
    pub fn corrupt(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// Stored data breaks an invariant (`context` says which); no parser failed.
    pub fn inconsistent(context: impl Into<String>) -> Self {
        Self::Corrupt {
            context: context.into(),
            source: None,
        }
    }

    /// The schema is not this binary's: `context` says what differs.
    pub fn not_migrated(context: impl Into<String>) -> Self {
        Self::NotMigrated {
            context: context.into(),
            source: None,
        }
    }
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

    /// Opens a group commit for one client's pipelined messages (issue 21): the writes until
    /// [`end_group`](Self::end_group) commit together, in one transaction and one sync, and
    /// the reads in between see them. Each write stays whole on its own (a refused or failed
    /// one writes nothing), so a group commits exactly the writes that were answered as done.
    /// Returns whether a group is open: a store that cannot group (the default, or one that
    /// shares its writer with other users) answers `false` and commits each write by itself.
    async fn begin_group(&self) -> Result<bool, RepoError> {
        Ok(false)
    }

    /// Commits the open group. An error means none of its writes is stored: the caller must
    /// not acknowledge any of them.
    async fn end_group(&self) -> Result<(), RepoError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_repository_error_keeps_its_cause_as_its_source_and_in_its_text() {
        let error = RepoError::database("reading tasks", std::io::Error::other("disk on fire"));
        assert_eq!(
            error.to_string(),
            "planning store: reading tasks: disk on fire"
        );
        let source = error.source().expect("the cause");
        assert_eq!(
            source
                .downcast_ref::<std::io::Error>()
                .map(ToString::to_string),
            Some("disk on fire".to_owned())
        );

        let parse = serde_json::from_str::<Vec<String>>("[1").unwrap_err();
        let corrupt = RepoError::corrupt("columns of plan p", parse);
        assert!(
            corrupt
                .to_string()
                .starts_with("planning store holds a value it cannot read: columns of plan p: "),
            "{corrupt}"
        );
        let source = corrupt.source().expect("the parser's error");
        assert!(
            source.downcast_ref::<serde_json::Error>().is_some(),
            "{source:?}"
        );

        // Broken data that no parser failed on has no cause to keep.
        let inconsistent = RepoError::inconsistent("a task of plan p is in no column");
        assert_eq!(
            inconsistent.to_string(),
            "planning store holds a value it cannot read: a task of plan p is in no column"
        );
        assert!(inconsistent.source().is_none());
    }
}
