//! `PlanningRepository` on SQLite: plans and tasks of `migrations/sqlite/0001`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentroom_domain::ids::{ObjectiveId, RoomId, Timestamp};
use agentroom_planning::{
    Columns, NewPlan, NewTask, PlanKind, PlanRecord, PlanningRepository, Refusal, RefusalCode,
    RepoError, TaskChange, TaskDetail, TaskRow, TaskRows, rules,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::Durability;
use crate::connections::{Connections, OpenError};

/// The SQL a board runs: one plan's range of `planning_tasks` (clustered by plan), nothing
/// else.
pub const BOARD_SQL: &str = "SELECT t.task_id, t.title, t.column_ix, t.assignee \
     FROM planning_tasks t \
     WHERE t.plan_key = ?1 \
       AND EXISTS (SELECT 1 FROM planning_plans p WHERE p.plan_key = ?1 AND p.room_id = ?2) \
     ORDER BY t.plan_key, t.task_key";

/// The SQL a list filtered by plan and status runs: one (plan, column) range of
/// `planning_tasks_column`.
pub const COLUMN_SQL: &str = "SELECT t.task_id, t.title, t.assignee \
     FROM planning_tasks t \
     WHERE t.plan_key = ?1 AND t.column_ix = ?3 \
       AND EXISTS (SELECT 1 FROM planning_plans p WHERE p.plan_key = ?1 AND p.room_id = ?2) \
     ORDER BY t.task_key";

const PLANS_SQL: &str = "SELECT plan_key, plan_id, name, description, columns, objective_id, \
     created_ms FROM planning_plans WHERE room_id = ?1 ORDER BY plan_key";

const PLAN_SQL: &str = "SELECT plan_key, plan_id, name, description, columns, objective_id, \
     created_ms FROM planning_plans WHERE plan_id = ?1 AND room_id = ?2";

/// The planning repository on one SQLite file.
pub struct SqlitePlanning {
    pub(crate) connections: Arc<Connections>,
    /// Whether it owns its connections ([`SqlitePlanning::open`]): only then may it hold the
    /// writer's transaction open across calls for a group commit.
    exclusive: bool,
    /// A group commit is open on the writer: reads go to the writer, to see its writes.
    grouping: AtomicBool,
}

impl std::fmt::Debug for SqlitePlanning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlitePlanning")
            .field("durability", &self.connections.durability())
            .finish_non_exhaustive()
    }
}

fn db(context: &'static str) -> impl Fn(rusqlite::Error) -> RepoError {
    move |e| RepoError::database(context, e)
}

impl SqlitePlanning {
    /// Opens an existing, migrated database. Never creates or migrates (D5): a missing file
    /// or a schema behind this binary is [`RepoError::NotMigrated`].
    pub fn open(path: &Path, durability: Durability) -> Result<Self, RepoError> {
        let connections = Connections::open(path, durability).map_err(|e| match e {
            OpenError::NotMigrated(detail) => RepoError::not_migrated(detail),
            OpenError::Database(context, e) => RepoError::database(context, e),
        })?;
        Ok(Self {
            connections: Arc::new(connections),
            exclusive: true,
            grouping: AtomicBool::new(false),
        })
    }

    /// The planning repository over connections another store of the same file holds: one
    /// writer per file and process ([`crate::SqliteRooms::planning`]).
    pub(crate) fn sharing(connections: Arc<Connections>) -> Self {
        Self {
            connections,
            exclusive: false,
            grouping: AtomicBool::new(false),
        }
    }

    /// The writer, checked to still hold the open group's transaction if there is one: the
    /// database rolls a transaction back by itself on some errors (disk full, I/O), and a
    /// write after that must not commit alone while its group's earlier writes are gone.
    fn writer(&self) -> Result<std::sync::MutexGuard<'_, Connection>, RepoError> {
        let connection = self.connections.writer();
        if self.grouping.load(Ordering::Acquire) && connection.is_autocommit() {
            return Err(RepoError::inconsistent(
                "the database rolled the group commit back; its writes are not stored",
            ));
        }
        Ok(connection)
    }

    /// The durability its commits have.
    pub fn durability(&self) -> Durability {
        self.connections.durability()
    }

    /// A connection to read with: a reader, or the writer while a group is open (its writes
    /// are not committed yet, and the group's next messages must see them).
    fn reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        if self.grouping.load(Ordering::Acquire) {
            self.connections.writer()
        } else {
            self.connections.reader()
        }
    }

    /// The query plan SQLite chooses for `sql` (for the tests that check boards read only
    /// their plan's rows).
    pub fn explain(&self, sql: &str) -> Result<Vec<String>, RepoError> {
        let connection = self.reader();
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .map_err(db("explain"))?;
        let count = statement.parameter_count();
        let params: Vec<i64> = vec![1; count];
        let rows = statement
            .query_map(rusqlite::params_from_iter(params), |row| {
                row.get::<_, String>(3)
            })
            .map_err(db("explain"))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(db("explain"))
    }
}

fn plan_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<PlanRecord, RepoError>> {
    let columns: String = row.get(4)?;
    let objective: Option<String> = row.get(5)?;
    let plan_id: String = row.get(1)?;
    let columns = match serde_json::from_str::<Vec<String>>(&columns) {
        Ok(columns) => Columns::from_stored(columns),
        Err(e) => {
            return Ok(Err(RepoError::corrupt(
                format!("columns of plan {plan_id}"),
                e,
            )));
        }
    };
    let kind = match objective.map(|o| o.parse::<ObjectiveId>()) {
        None => PlanKind::Standalone,
        Some(Ok(objective)) => PlanKind::Coordinator(objective),
        Some(Err(e)) => {
            return Ok(Err(RepoError::corrupt(
                format!("objective of plan {plan_id}"),
                e,
            )));
        }
    };
    Ok(Ok(PlanRecord {
        key: row.get(0)?,
        plan_id,
        name: row.get(2)?,
        description: row.get(3)?,
        columns,
        kind,
        created: Timestamp::from_millis(row.get(6)?),
    }))
}

fn task_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    let column: i64 = row.get(2)?;
    Ok(TaskRow {
        task_id: row.get(0)?,
        title: row.get(1)?,
        column: usize::try_from(column)
            .map_err(|_| rusqlite::Error::IntegralValueOutOfRange(2, column))?,
        assignee: row.get(3)?,
    })
}

/// Reads `(task_id, title, column_ix, assignee)` rows — or `(task_id, title, assignee)` when
/// the query fixed the column — into one [`TaskRows`], borrowing each text from SQLite
/// instead of allocating it.
fn collect_rows(
    mut statement: rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
    fixed_column: Option<usize>,
) -> rusqlite::Result<Result<TaskRows, RepoError>> {
    let mut rows = statement.query(params)?;
    // Modest: a Room's every plan gets one of these on an all-plans board; doubling covers
    // large plans in a handful of steps.
    let mut tasks = TaskRows::with_capacity(256, 256 * 64);
    while let Some(row) = rows.next()? {
        let (column, assignee) = match fixed_column {
            Some(column) => (column, 2),
            None => {
                let column: i64 = row.get(2)?;
                match usize::try_from(column) {
                    Ok(column) => (column, 3),
                    Err(e) => {
                        return Ok(Err(RepoError::corrupt(format!("column index {column}"), e)));
                    }
                }
            }
        };
        tasks.push(
            row.get_ref(0)?.as_str()?,
            row.get_ref(1)?.as_str()?,
            column,
            row.get_ref(assignee)?.as_str()?,
        );
    }
    Ok(Ok(tasks))
}

fn deps_json(deps: &[String]) -> String {
    serde_json::Value::from(deps.to_vec()).to_string()
}

fn parse_deps(task: &str, text: &str) -> Result<Vec<String>, RepoError> {
    serde_json::from_str(text)
        .map_err(|e| RepoError::corrupt(format!("dependencies of task {task}"), e))
}

fn unknown_task(task_id: &str) -> Refusal {
    Refusal::new(
        RefusalCode::UnknownTask,
        format!("no task `{task_id}` in this plan"),
    )
}

/// A task change on `tx` (a transaction or a savepoint the caller commits when it is done).
fn update(
    tx: &Connection,
    room: &RoomId,
    change: &TaskChange,
    column: Option<i64>,
    deps: Option<&str>,
) -> Result<Result<(), Refusal>, RepoError> {
    if let Some(new_deps) = &change.deps {
        let mut graph: HashMap<String, Vec<String>> = HashMap::new();
        {
            let mut statement = tx
                .prepare_cached("SELECT task_id, deps FROM planning_tasks WHERE plan_key = ?1")
                .map_err(db("reading dependencies"))?;
            let rows = statement
                .query_map([change.plan], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(db("reading dependencies"))?;
            for row in rows {
                let (task, deps) = row.map_err(db("reading dependencies"))?;
                let deps = parse_deps(&task, &deps)?;
                graph.insert(task, deps);
            }
        }
        if !graph.contains_key(&change.task_id) {
            return Ok(Err(unknown_task(&change.task_id)));
        }
        if let Err(refusal) = rules::check_known(new_deps, |d| graph.contains_key(d))
            .and_then(|()| rules::check_acyclic(&graph, &change.task_id, new_deps))
        {
            return Ok(Err(refusal));
        }
    }
    let updated = tx
        .prepare_cached(
            "UPDATE planning_tasks SET column_ix = coalesce(?1, column_ix), \
                 assignee = coalesce(?2, assignee), deps = coalesce(?3, deps), updated_ms = ?4 \
                 WHERE task_id = ?5 AND plan_key = ?6 \
                   AND EXISTS (SELECT 1 FROM planning_plans WHERE plan_key = ?6 AND room_id = ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                column,
                change.assignee,
                deps,
                change.updated.as_millis(),
                change.task_id,
                change.plan,
                room.as_str()
            ])
        })
        .map_err(db("updating a task"))?;
    if updated == 0 {
        return Ok(Err(unknown_task(&change.task_id)));
    }
    Ok(Ok(()))
}

#[async_trait]
impl PlanningRepository for SqlitePlanning {
    async fn create_plan(&self, room: &RoomId, plan: &NewPlan) -> Result<PlanRecord, RepoError> {
        let connection = self.writer()?;
        let key: i64 = connection
            .prepare_cached(
                "INSERT INTO planning_plans (plan_id, room_id, name, description, columns, \
                 created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING plan_key",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        plan.plan_id,
                        room.as_str(),
                        plan.name,
                        plan.description,
                        plan.columns.to_json(),
                        plan.created.as_millis()
                    ],
                    |row| row.get(0),
                )
            })
            .map_err(db("creating a plan"))?;
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

    async fn plans(&self, room: &RoomId) -> Result<Vec<PlanRecord>, RepoError> {
        let connection = self.reader();
        let mut statement = connection
            .prepare_cached(PLANS_SQL)
            .map_err(db("listing plans"))?;
        let rows = statement
            .query_map([room.as_str()], plan_from_row)
            .map_err(db("listing plans"))?;
        let mut plans = Vec::new();
        for row in rows {
            plans.push(row.map_err(db("listing plans"))??);
        }
        Ok(plans)
    }

    async fn plan(&self, room: &RoomId, plan_id: &str) -> Result<Option<PlanRecord>, RepoError> {
        let connection = self.reader();
        let found = connection
            .prepare_cached(PLAN_SQL)
            .and_then(|mut s| {
                s.query_row(params![plan_id, room.as_str()], plan_from_row)
                    .optional()
            })
            .map_err(db("reading a plan"))?;
        found.transpose()
    }

    async fn add_task(
        &self,
        room: &RoomId,
        task: &NewTask,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let column = i64::try_from(task.column).unwrap_or(i64::MAX);
        let connection = self.writer()?;
        if !task.deps.is_empty() {
            // Tasks are never deleted, so a dependency known now stays known: the check
            // needs no transaction around the insert.
            let mut known = connection
                .prepare_cached("SELECT 1 FROM planning_tasks WHERE task_id = ?1 AND plan_key = ?2")
                .map_err(db("checking dependencies"))?;
            let mut missing = Vec::new();
            for dep in &task.deps {
                if !known
                    .exists(params![dep, task.plan])
                    .map_err(db("checking dependencies"))?
                {
                    missing.push(dep.as_str());
                }
            }
            if let Err(refusal) = rules::check_known(&task.deps, |d| !missing.contains(&d)) {
                return Ok(Err(refusal));
            }
        }
        let inserted = connection
            .prepare_cached(
                "INSERT INTO planning_tasks (plan_key, task_key, task_id, title, column_ix, \
                 description, assignee, deps, metadata, created_ms, updated_ms) \
                 SELECT ?1, coalesce((SELECT max(task_key) FROM planning_tasks \
                                      WHERE plan_key = ?1), 0) + 1, \
                        ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9 \
                 WHERE EXISTS (SELECT 1 FROM planning_plans WHERE plan_key = ?1 AND room_id = ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    task.plan,
                    task.task_id,
                    task.title,
                    column,
                    task.description,
                    task.assignee,
                    deps_json(&task.deps),
                    task.metadata,
                    task.created.as_millis(),
                    room.as_str()
                ])
            })
            .map_err(db("adding a task"))?;
        if inserted == 0 {
            return Ok(Err(Refusal::new(
                RefusalCode::UnknownPlan,
                "no such plan in this room",
            )));
        }
        Ok(Ok(()))
    }

    async fn update_task(
        &self,
        room: &RoomId,
        change: &TaskChange,
    ) -> Result<Result<(), Refusal>, RepoError> {
        let column = change.column.map(|c| i64::try_from(c).unwrap_or(i64::MAX));
        let deps = change.deps.as_deref().map(deps_json);
        let mut connection = self.writer()?;
        // Dependency changes read the plan's graph and write in one IMMEDIATE transaction,
        // which excludes every other writer, also in other processes; inside a group (whose
        // BEGIN IMMEDIATE already excludes them) in a savepoint, so a refusal or a failure
        // undoes this change only.
        if connection.is_autocommit() {
            let tx = connection
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(db("starting an update"))?;
            let outcome = update(&tx, room, change, column, deps.as_deref())?;
            if outcome.is_ok() {
                tx.commit().map_err(db("committing an update"))?;
            }
            Ok(outcome)
        } else {
            let savepoint = connection.savepoint().map_err(db("starting an update"))?;
            let outcome = update(&savepoint, room, change, column, deps.as_deref())?;
            if outcome.is_ok() {
                savepoint.commit().map_err(db("releasing an update"))?;
            }
            Ok(outcome)
        }
    }

    async fn tasks(
        &self,
        room: &RoomId,
        plan: i64,
        column: Option<usize>,
    ) -> Result<TaskRows, RepoError> {
        let connection = self.reader();
        let err = db("reading tasks");
        match column {
            None => {
                let statement = connection.prepare_cached(BOARD_SQL).map_err(&err)?;
                collect_rows(statement, params![plan, room.as_str()], None).map_err(&err)?
            }
            Some(c) => {
                let column = i64::try_from(c).unwrap_or(i64::MAX);
                let statement = connection.prepare_cached(COLUMN_SQL).map_err(&err)?;
                collect_rows(statement, params![plan, room.as_str(), column], Some(c))
                    .map_err(&err)?
            }
        }
    }

    async fn task(
        &self,
        room: &RoomId,
        plan: i64,
        task_id: &str,
    ) -> Result<Option<TaskDetail>, RepoError> {
        let connection = self.reader();
        let found = connection
            .prepare_cached(
                "SELECT t.task_id, t.title, t.column_ix, t.assignee, t.description, t.deps, \
                 t.metadata FROM planning_tasks t JOIN planning_plans p USING (plan_key) \
                 WHERE t.task_id = ?1 AND t.plan_key = ?2 AND p.room_id = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![task_id, plan, room.as_str()], |row| {
                    Ok((
                        task_row(row)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, String>(6)?,
                    ))
                })
                .optional()
            })
            .map_err(db("reading a task"))?;
        let Some((row, description, deps, metadata)) = found else {
            return Ok(None);
        };
        let deps = parse_deps(task_id, &deps)?;
        let metadata = serde_json::from_str(&metadata)
            .map_err(|e| RepoError::corrupt(format!("metadata of task {task_id}"), e))?;
        Ok(Some(TaskDetail {
            row,
            description,
            deps,
            metadata,
        }))
    }

    async fn begin_group(&self) -> Result<bool, RepoError> {
        if !self.exclusive {
            return Ok(false);
        }
        let connection = self.connections.writer();
        if !connection.is_autocommit() {
            return Err(RepoError::inconsistent(
                "a group commit was opened while another is open",
            ));
        }
        connection
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(db("opening a group commit"))?;
        self.grouping.store(true, Ordering::Release);
        Ok(true)
    }

    async fn end_group(&self) -> Result<(), RepoError> {
        if !self.grouping.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let connection = self.connections.writer();
        if connection.is_autocommit() {
            return Err(RepoError::inconsistent(
                "the database rolled the group commit back; its writes are not stored",
            ));
        }
        if let Err(error) = connection.execute_batch("COMMIT") {
            // Nothing of the group may stay, nor the transaction stay open.
            if !connection.is_autocommit() {
                let _ = connection.execute_batch("ROLLBACK");
            }
            return Err(RepoError::database("committing a group", error));
        }
        Ok(())
    }
}
