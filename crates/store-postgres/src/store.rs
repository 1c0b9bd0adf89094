//! [`PgPlanning`]: the planning repository on PostgreSQL. Each operation is one statement
//! (one round trip, its own implicit transaction) except a dependency update, which locks
//! its plan, reads the reachable dependency graph, runs the rules and writes in one
//! transaction, so that concurrent updates cannot close a cycle together.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use agentroom_domain::ids::{ObjectiveId, RoomId, Timestamp};
use agentroom_planning::{
    Columns, NewPlan, NewTask, PlanKind, PlanRecord, PlanningRepository, Refusal, RefusalCode,
    RepoError, TaskChange, TaskDetail, TaskRow, TaskRows, rules,
};
use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};

use crate::migrate::check_migrated;
use crate::sql;

/// The planning repository on PostgreSQL. Cheap to clone (it holds a pool).
#[derive(Debug, Clone)]
pub struct PgPlanning {
    pool: PgPool,
}

impl PgPlanning {
    /// Connects with default pool options and checks that the database is migrated to this
    /// binary's schema; never migrates (D5).
    pub async fn connect(url: &str) -> Result<Self, RepoError> {
        let pool = PgPoolOptions::new()
            .connect(url)
            .await
            .map_err(|e| RepoError::database("connecting to PostgreSQL", e))?;
        Self::from_pool(pool).await
    }

    /// Uses `pool` after checking that its database is migrated to this binary's schema;
    /// never migrates (D5).
    pub async fn from_pool(pool: PgPool) -> Result<Self, RepoError> {
        check_migrated(&pool).await.map_err(RepoError::from)?;
        Ok(Self { pool })
    }

    /// The pool (for the benchmark's floors and for closing it).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Maps a sqlx error to the repository's, with what was being done. A missing table means
/// the schema was reverted under us: that is `NotMigrated`, not a mere failure.
fn failed(context: &'static str) -> impl FnOnce(sqlx::Error) -> RepoError {
    move |error| {
        let undefined_table = error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| code == "42P01");
        if undefined_table {
            RepoError::NotMigrated {
                context: context.to_owned(),
                source: Some(error.into()),
            }
        } else {
            RepoError::database(context, error)
        }
    }
}

fn column_ix(column: usize) -> Result<i32, RepoError> {
    i32::try_from(column).map_err(|e| {
        RepoError::database(format!("column index {column} does not fit the schema"), e)
    })
}

fn column_of(stored: i32) -> Result<usize, RepoError> {
    usize::try_from(stored)
        .map_err(|e| RepoError::corrupt(format!("negative column index {stored}"), e))
}

fn unknown_plan() -> Refusal {
    Refusal::new(RefusalCode::UnknownPlan, "no such plan")
}

fn unknown_task(task_id: &str) -> Refusal {
    Refusal::new(
        RefusalCode::UnknownTask,
        format!("no task `{task_id}` in this plan"),
    )
}

fn plan_record(row: &PgRow) -> Result<PlanRecord, RepoError> {
    let read = |e: sqlx::Error| RepoError::corrupt("a planning_plans row", e);
    let columns: String = row.try_get(4).map_err(read)?;
    let columns: Vec<String> = serde_json::from_str(&columns)
        .map_err(|e| RepoError::corrupt(format!("plan columns `{columns}`"), e))?;
    let objective: Option<String> = row.try_get(5).map_err(read)?;
    let kind = match objective {
        None => PlanKind::Standalone,
        Some(text) => PlanKind::Coordinator(
            ObjectiveId::from_str(&text)
                .map_err(|e| RepoError::corrupt(format!("plan objective `{text}`"), e))?,
        ),
    };
    Ok(PlanRecord {
        key: row.try_get(0).map_err(read)?,
        plan_id: row.try_get(1).map_err(read)?,
        name: row.try_get(2).map_err(read)?,
        description: row.try_get(3).map_err(read)?,
        columns: Columns::from_stored(columns),
        kind,
        created: Timestamp::from_millis(row.try_get(6).map_err(read)?),
    })
}

fn task_row(row: &PgRow) -> Result<TaskRow, RepoError> {
    let read = |e: sqlx::Error| RepoError::corrupt("a planning_tasks row", e);
    Ok(TaskRow {
        task_id: row.try_get(0).map_err(read)?,
        title: row.try_get(1).map_err(read)?,
        column: column_of(row.try_get(2).map_err(read)?)?,
        assignee: row.try_get(3).map_err(read)?,
    })
}

impl PgPlanning {
    /// A dependency change, in one transaction: lock the plan (serializing dependency
    /// updates per plan), check the task, read the reachable graph, run the rules, write.
    async fn update_with_deps(
        &self,
        room: &RoomId,
        change: &TaskChange,
        deps: &[String],
        column: Option<i32>,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let mut tx: Transaction<'static, Postgres> = self
            .pool
            .begin()
            .await
            .map_err(failed("task/update: beginning a transaction"))?;
        let task_in_plan: Option<bool> = sqlx::query_scalar(sql::LOCK_PLAN_FOR_DEPS)
            .bind(change.plan)
            .bind(room.as_str())
            .bind(&change.task_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed("task/update: locking the plan"))?;
        if task_in_plan != Some(true) {
            // Dropping the transaction rolls it back.
            return Ok(Err(unknown_task(&change.task_id)));
        }
        let rows: Vec<(String, Vec<String>)> = sqlx::query_as(sql::SELECT_REACHABLE_DEPS)
            .bind(change.plan)
            .bind(deps)
            .bind(&change.task_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(failed("task/update: reading the dependency graph"))?;
        let graph: HashMap<String, Vec<String>> = rows.into_iter().collect();
        // The walk starts at the new dependencies that exist, so the graph holds each of
        // them that is a task of this plan.
        let known: HashSet<&str> = deps
            .iter()
            .map(String::as_str)
            .filter(|d| graph.contains_key(*d))
            .collect();
        if let Err(refusal) = rules::check_known(deps, |d| known.contains(d)) {
            return Ok(Err(refusal));
        }
        if let Err(refusal) = rules::check_acyclic(&graph, &change.task_id, deps) {
            return Ok(Err(refusal));
        }
        sqlx::query(sql::UPDATE_TASK_WITH_DEPS)
            .bind(change.plan)
            .bind(&change.task_id)
            .bind(deps)
            .bind(column)
            .bind(change.assignee.as_deref())
            .bind(change.updated.as_millis())
            .execute(&mut *tx)
            .await
            .map_err(failed("task/update: writing the task"))?;
        tx.commit()
            .await
            .map_err(failed("task/update: committing"))?;
        Ok(Ok(()))
    }
}

#[async_trait]
impl PlanningRepository for PgPlanning {
    #[tracing::instrument(level = "debug", skip_all, fields(room = %room))]
    async fn create_plan(&self, room: &RoomId, plan: &NewPlan) -> Result<PlanRecord, RepoError> {
        let key: i64 = sqlx::query_scalar(sql::INSERT_PLAN)
            .bind(&plan.plan_id)
            .bind(room.as_str())
            .bind(&plan.name)
            .bind(&plan.description)
            .bind(plan.columns.to_json())
            .bind(plan.created.as_millis())
            .fetch_one(&self.pool)
            .await
            .map_err(failed("plan/create: inserting the plan"))?;
        Ok(PlanRecord {
            key,
            plan_id: plan.plan_id.clone(),
            name: plan.name.clone(),
            description: plan.description.clone(),
            columns: plan.columns.clone(),
            kind: PlanKind::Standalone,
            created: plan.created,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room))]
    async fn plans(&self, room: &RoomId) -> Result<Vec<PlanRecord>, RepoError> {
        let rows = sqlx::query(sql::SELECT_PLANS)
            .bind(room.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading the Room's plans"))?;
        rows.iter().map(plan_record).collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room))]
    async fn plan(&self, room: &RoomId, plan_id: &str) -> Result<Option<PlanRecord>, RepoError> {
        let row = sqlx::query(sql::SELECT_PLAN)
            .bind(room.as_str())
            .bind(plan_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a plan"))?;
        row.as_ref().map(plan_record).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room))]
    async fn add_task(
        &self,
        room: &RoomId,
        task: &NewTask,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let column = column_ix(task.column)?;
        if task.deps.is_empty() {
            let done = sqlx::query(sql::INSERT_TASK)
                .bind(task.plan)
                .bind(room.as_str())
                .bind(&task.task_id)
                .bind(&task.title)
                .bind(column)
                .bind(&task.description)
                .bind(&task.assignee)
                .bind(&task.metadata)
                .bind(task.created.as_millis())
                .execute(&self.pool)
                .await
                .map_err(failed("task/add: inserting the task"))?;
            return Ok(if done.rows_affected() == 1 {
                Ok(())
            } else {
                Err(unknown_plan())
            });
        }
        let (plan_found, known, inserted): (bool, Vec<String>, bool) =
            sqlx::query_as(sql::INSERT_TASK_WITH_DEPS)
                .bind(task.plan)
                .bind(room.as_str())
                .bind(&task.task_id)
                .bind(&task.title)
                .bind(column)
                .bind(&task.description)
                .bind(&task.assignee)
                .bind(&task.metadata)
                .bind(task.created.as_millis())
                .bind(&task.deps)
                .fetch_one(&self.pool)
                .await
                .map_err(failed(
                    "task/add: checking dependencies and inserting the task",
                ))?;
        if !plan_found {
            return Ok(Err(unknown_plan()));
        }
        // The statement inserted exactly when every dependency was among `known`, read in
        // the snapshot that inserted; the rule says the same and words the refusal.
        let known: HashSet<&str> = known.iter().map(String::as_str).collect();
        match (
            rules::check_known(&task.deps, |d| known.contains(d)),
            inserted,
        ) {
            (Ok(()), true) => Ok(Ok(())),
            (Err(refusal), false) => Ok(Err(refusal)),
            // No driver failed: the statement broke its own contract. The text is the cause.
            (verdict, inserted) => Err(RepoError::database(
                "task/add",
                format!(
                    "the dependency check ({verdict:?}) and the insert (inserted: {inserted}) \
                     disagree"
                ),
            )),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room))]
    async fn update_task(
        &self,
        room: &RoomId,
        change: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let column = change.column.map(column_ix).transpose()?;
        if let Some(deps) = &change.deps {
            return self.update_with_deps(room, change, deps, column).await;
        }
        let done = sqlx::query(sql::UPDATE_TASK_FIELDS)
            .bind(change.plan)
            .bind(room.as_str())
            .bind(&change.task_id)
            .bind(column)
            .bind(change.assignee.as_deref())
            .bind(change.updated.as_millis())
            .execute(&self.pool)
            .await
            .map_err(failed("task/update: writing the task"))?;
        Ok(if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(unknown_task(&change.task_id))
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room, plan = plan))]
    async fn tasks(
        &self,
        room: &RoomId,
        plan: i64,
        column: Option<usize>,
    ) -> Result<TaskRows, RepoError> {
        let rows = match column {
            None => sqlx::query(sql::SELECT_BOARD_TASKS)
                .bind(plan)
                .bind(room.as_str())
                .fetch_all(&self.pool)
                .await
                .map_err(failed("reading a plan's tasks"))?,
            Some(column) => sqlx::query(sql::SELECT_COLUMN_TASKS)
                .bind(plan)
                .bind(room.as_str())
                .bind(column_ix(column)?)
                .fetch_all(&self.pool)
                .await
                .map_err(failed("reading a plan's tasks of one column"))?,
        };
        let read = |e: sqlx::Error| RepoError::corrupt("a planning_tasks row", e);
        let bytes = rows.len() * 64;
        let mut tasks = TaskRows::with_capacity(rows.len(), bytes);
        for row in &rows {
            tasks.push(
                row.try_get::<&str, _>(0).map_err(read)?,
                row.try_get::<&str, _>(1).map_err(read)?,
                column_of(row.try_get(2).map_err(read)?)?,
                row.try_get::<&str, _>(3).map_err(read)?,
            );
        }
        Ok(tasks)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(room = %room, plan = plan))]
    async fn task(
        &self,
        room: &RoomId,
        plan: i64,
        task_id: &str,
    ) -> Result<Option<TaskDetail>, RepoError> {
        let row = sqlx::query(sql::SELECT_TASK_DETAIL)
            .bind(plan)
            .bind(room.as_str())
            .bind(task_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a task"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let read = |e: sqlx::Error| RepoError::corrupt("a planning_tasks row", e);
        let metadata: String = row.try_get(6).map_err(read)?;
        let metadata = serde_json::from_str(&metadata)
            .map_err(|e| RepoError::corrupt(format!("task metadata `{metadata}`"), e))?;
        Ok(Some(TaskDetail {
            row: task_row(&row)?,
            description: row.try_get(4).map_err(read)?,
            deps: row.try_get(5).map_err(read)?,
            metadata,
        }))
    }
}
