//! Migrations on PostgreSQL, run only by explicit command (D5), in two ledgers: the planner's
//! ([`MIGRATOR`], `migrations/postgres`, recorded in `_sqlx_migrations`) and the workflow
//! store's ([`WORKFLOW_MIGRATOR`], `migrations/postgres-workflows`, recorded in
//! `_agentroom_workflow_migrations`), which holds the `operations` table: every call, its
//! lease and its receipt. What `agentroom migrate up|status|down` calls ([`connect`], [`up`],
//! [`status`], [`down`], [`down_workflows`]), and the check every store runs at construction,
//! which refuses a database whose ledgers are not exactly at this binary's schema.
//!
//! The planner's 0002 made `operations` and its 0005 reshaped it, before the split; the
//! workflow store's 0001 adopted it. So reverting the planner's migrations keeps the workflow
//! store's table: [`down`] moves it aside for the length of its transaction and lets the
//! planner's down migrations work on a stand-in of the same shape; and applying them again
//! over a kept table moves it aside while the planner's 0002 makes (and the transaction drops)
//! a table of its own. Every command runs in one transaction under sqlx's migration lock, so
//! it is all or nothing, and concurrent commands wait for each other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use agentroom_planning::RepoError;
use agentroom_ports::StoreError;
use agentroom_ports::migrations::{self, Carried, Recorded};
pub use agentroom_ports::migrations::{Ledger, MigrationState, MigrationStatus};
use sqlx::migrate::{Migrate, Migration, Migrator};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres};

use crate::sql;

/// The planner's schema: the reversible migrations `migrations/postgres/NNNN_*.{up,down}.sql`,
/// embedded at build time, recorded in `_sqlx_migrations`. Applied only by explicit command
/// (`agentroom migrate up`).
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// The workflow store's schema: `migrations/postgres-workflows/NNNN_*.{up,down}.sql`, embedded
/// at build time, recorded in its own ledger `_agentroom_workflow_migrations`.
pub static WORKFLOW_MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = sqlx::migrate!("../../migrations/postgres-workflows");
    migrator.dangerous_set_table_name(Ledger::Workflows.table());
    migrator
});

/// The migrations of a ledger.
fn migrator(ledger: Ledger) -> &'static Migrator {
    match ledger {
        Ledger::Planner => &MIGRATOR,
        Ledger::Workflows => &WORKFLOW_MIGRATOR,
    }
}

/// Both ledgers, in the order `up` applies them: the planner's first, whose 0002 makes the
/// table the workflow store's 0001 adopts.
const LEDGERS: [Ledger; 2] = [Ledger::Planner, Ledger::Workflows];

/// The last of the planner's migrations that changes `operations` (0002 made it, 0005
/// reshaped it). Later planner migrations never touch the workflow store's table.
const LAST_SHAPING_OPERATIONS: i64 = 5;

/// A migration command failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database could not be reached.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    /// Applying or reverting a migration failed; nothing was changed.
    #[error("migrating PostgreSQL failed, nothing was changed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A migration table could not be read.
    #[error("reading the PostgreSQL migration tables failed: {0}")]
    Read(#[source] sqlx::Error),
    /// A statement of the command itself failed; nothing was changed.
    #[error("{doing} failed, nothing was changed: {source}")]
    Database {
        /// What the command was doing.
        doing: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A ledger records a migration that failed, was changed or is unknown to this binary:
    /// an operator has to look before anything is applied or reverted.
    #[error("the {ledger} ledger ({table}) needs an operator, nothing was changed: {detail}", table = ledger.table())]
    Dirty {
        /// The ledger.
        ledger: Ledger,
        /// What is wrong, migration by migration.
        detail: String,
    },
    /// The workflow store's migrations cannot be reverted while the planner's are applied:
    /// the planner's commit writes the workflow store's `operations`.
    #[error(
        "the planner's migrations are applied and its commit writes the workflow store's \
         operations; revert them first with `agentroom migrate down`; nothing was changed"
    )]
    PlannerApplied,
    /// Reverting the planner's migrations to this target would leave the workflow store's
    /// table in a shape the planner's remaining migrations do not expect.
    #[error(
        "reverting the planner's migrations to {target} would reshape the workflow store's \
         operations (its migrations up to {LAST_SHAPING_OPERATIONS} made it); revert to 0 or \
         to {LAST_SHAPING_OPERATIONS} or later; nothing was changed"
    )]
    WouldReshapeWorkflows {
        /// The version asked for.
        target: i64,
    },
}

/// What `up` applied, by ledger, in the order applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Migrated {
    /// The planner's migrations applied.
    pub planner: Vec<i64>,
    /// The workflow store's migrations applied.
    pub workflows: Vec<i64>,
}

impl Migrated {
    /// Whether nothing was pending.
    pub fn is_empty(&self) -> bool {
        self.planner.is_empty() && self.workflows.is_empty()
    }
}

/// A pool for the migration commands (default pool options), without any schema check.
pub async fn connect(url: &str) -> Result<PgPool, MigrateError> {
    PgPoolOptions::new()
        .connect(url)
        .await
        .map_err(MigrateError::Connect)
}

/// `agentroom migrate up`: applies every pending migration of both ledgers, the planner's
/// first, in one transaction under sqlx's migration lock (concurrent runs wait for each
/// other); a ledger that records a failed, changed or unknown migration is refused with
/// nothing applied.
#[tracing::instrument(level = "info", skip_all)]
pub async fn up(pool: &PgPool) -> Result<Migrated, MigrateError> {
    let mut conn = lock(pool).await?;
    let result = up_locked(&mut conn).await;
    unlock(conn, result).await
}

async fn up_locked(conn: &mut PgConnection) -> Result<Migrated, MigrateError> {
    let mut tx = conn.begin().await.map_err(begin)?;
    for ledger in LEDGERS {
        tx.ensure_migrations_table(ledger.table()).await?;
    }
    let planner = pending(&mut tx, Ledger::Planner).await?;
    let workflows = pending(&mut tx, Ledger::Workflows).await?;
    // Over a kept workflow table, the planner's migrations that shape `operations` run with
    // it aside: its 0002 makes a table of its own, dropped once they have run.
    let shaping: Vec<i64> = planner
        .iter()
        .map(|m| m.version)
        .filter(|v| *v <= LAST_SHAPING_OPERATIONS)
        .collect();
    let aside = !shaping.is_empty() && kept_by_workflows(&mut tx).await?;
    if aside {
        if !shaping.contains(&2) {
            // Only a revert this module refuses leaves the planner between 2 and 5.
            return Err(MigrateError::WouldReshapeWorkflows {
                target: shaping[0] - 1,
            });
        }
        move_aside(&mut tx).await?;
    }
    for migration in &planner {
        tx.apply(Ledger::Planner.table(), migration).await?;
    }
    if aside {
        bring_back(&mut tx).await?;
    }
    for migration in &workflows {
        tx.apply(Ledger::Workflows.table(), migration).await?;
    }
    tx.commit().await.map_err(commit)?;
    Ok(Migrated {
        planner: planner.iter().map(|m| m.version).collect(),
        workflows: workflows.iter().map(|m| m.version).collect(),
    })
}

/// `agentroom migrate down`: reverts every applied migration of the planner's ledger, newest
/// first, destroying all planner state; the workflow store's `operations` (its calls, leases
/// and receipts) is kept when its ledger holds it. Returns the versions reverted. The caller
/// asks for the destructive confirmation first (D5).
pub async fn down(pool: &PgPool) -> Result<Vec<i64>, MigrateError> {
    down_to(pool, 0).await
}

/// Reverts every applied migration of the planner's ledger newer than `target` (0 reverts
/// all), newest first, in one transaction; returns the versions reverted. A target between 1
/// and 4 is refused while the workflow store keeps `operations`: the planner's migrations up
/// to 0005 shaped that table.
#[tracing::instrument(level = "info", skip(pool))]
pub async fn down_to(pool: &PgPool, target: i64) -> Result<Vec<i64>, MigrateError> {
    let mut conn = lock(pool).await?;
    let result = down_locked(&mut conn, target).await;
    unlock(conn, result).await
}

async fn down_locked(conn: &mut PgConnection, target: i64) -> Result<Vec<i64>, MigrateError> {
    let mut tx = conn.begin().await.map_err(begin)?;
    // A dirty ledger is an operator's to look at first; and a migration this binary does not
    // carry is one it cannot revert.
    pending(&mut tx, Ledger::Planner).await?;
    let reverting = applied_newer(&mut tx, Ledger::Planner, target).await?;
    let shaping = reverting.iter().any(|v| *v <= LAST_SHAPING_OPERATIONS);
    let aside = shaping && kept_by_workflows(&mut tx).await?;
    if aside {
        if target > 0 {
            return Err(MigrateError::WouldReshapeWorkflows { target });
        }
        move_aside(&mut tx).await?;
        // A stand-in of the same shape for the planner's down migrations to alter and drop.
        (&mut *tx)
            .execute(workflow_up(1).sql.clone())
            .await
            .map_err(|source| MigrateError::Database {
                doing: "making a stand-in for the workflow store's operations",
                source,
            })?;
    }
    for version in &reverting {
        let migration = reversal(Ledger::Planner, *version)?;
        tx.revert(Ledger::Planner.table(), migration).await?;
    }
    if aside {
        bring_back(&mut tx).await?;
    }
    tx.commit().await.map_err(commit)?;
    Ok(reverting)
}

/// `agentroom migrate down --workflows`: reverts every applied migration of the workflow
/// store's ledger, newest first, destroying every recorded call; refused while any of the
/// planner's migrations is applied. Returns the versions reverted.
#[tracing::instrument(level = "info", skip_all)]
pub async fn down_workflows(pool: &PgPool) -> Result<Vec<i64>, MigrateError> {
    let mut conn = lock(pool).await?;
    let result = down_workflows_locked(&mut conn).await;
    unlock(conn, result).await
}

async fn down_workflows_locked(conn: &mut PgConnection) -> Result<Vec<i64>, MigrateError> {
    let mut tx = conn.begin().await.map_err(begin)?;
    if !applied_newer(&mut tx, Ledger::Planner, 0).await?.is_empty() {
        return Err(MigrateError::PlannerApplied);
    }
    pending(&mut tx, Ledger::Workflows).await?;
    let reverting = applied_newer(&mut tx, Ledger::Workflows, 0).await?;
    for version in &reverting {
        let migration = reversal(Ledger::Workflows, *version)?;
        tx.revert(Ledger::Workflows.table(), migration).await?;
    }
    tx.commit().await.map_err(commit)?;
    Ok(reverting)
}

/// `agentroom migrate status`: every migration of both ledgers that this binary knows, and
/// any a ledger has that it does not, the planner's first, each in version order.
#[tracing::instrument(level = "info", skip_all)]
pub async fn status(pool: &PgPool) -> Result<Vec<MigrationStatus>, MigrateError> {
    let mut conn = pool.acquire().await.map_err(MigrateError::Read)?;
    let mut all = Vec::new();
    for ledger in LEDGERS {
        let applied = applied(&mut conn, ledger)
            .await
            .map_err(MigrateError::Read)?;
        all.extend(migrations::compare(
            ledger,
            carried(ledger),
            applied.as_ref(),
        ));
    }
    Ok(all)
}

/// One connection holding sqlx's migration lock (one per database), which every migration
/// command of every binary takes, so concurrent commands wait for each other.
async fn lock(pool: &PgPool) -> Result<PoolConnection<Postgres>, MigrateError> {
    let mut conn = pool.acquire().await.map_err(MigrateError::Connect)?;
    conn.lock().await?;
    Ok(conn)
}

/// Releases the lock whatever the command returned; the command's error comes first.
async fn unlock<T>(
    mut conn: PoolConnection<Postgres>,
    result: Result<T, MigrateError>,
) -> Result<T, MigrateError> {
    let unlocked = conn.unlock().await;
    let value = result?;
    unlocked?;
    Ok(value)
}

/// The migrations of `ledger` this binary carries that are not applied yet, in version order;
/// refused when the ledger records one that failed, was changed or is unknown.
async fn pending(
    conn: &mut PgConnection,
    ledger: Ledger,
) -> Result<Vec<&'static Migration>, MigrateError> {
    let recorded = applied(&mut *conn, ledger)
        .await
        .map_err(MigrateError::Read)?;
    let states = migrations::compare(ledger, carried(ledger), recorded.as_ref());
    let dirty: Vec<String> = states
        .iter()
        .filter(|m| !matches!(m.state, MigrationState::Applied | MigrationState::Pending))
        .map(|m| format!("{} ({}) {}", m.version, m.description, m.state))
        .collect();
    if !dirty.is_empty() {
        return Err(MigrateError::Dirty {
            ledger,
            detail: dirty.join("; "),
        });
    }
    let waiting: BTreeSet<i64> = states
        .iter()
        .filter(|m| m.state == MigrationState::Pending)
        .map(|m| m.version)
        .collect();
    Ok(migrator(ledger)
        .iter()
        .filter(|m| !m.migration_type.is_down_migration() && waiting.contains(&m.version))
        .collect())
}

/// The versions of `ledger` applied successfully and newer than `target`, newest first.
async fn applied_newer(
    conn: &mut PgConnection,
    ledger: Ledger,
    target: i64,
) -> Result<Vec<i64>, MigrateError> {
    let applied = applied(&mut *conn, ledger)
        .await
        .map_err(MigrateError::Read)?;
    Ok(applied
        .into_iter()
        .flatten()
        .filter(|(version, a)| a.success && *version > target)
        .map(|(version, _)| version)
        .rev()
        .collect())
}

/// Whether the workflow store's ledger holds `operations` (its 0001 is applied) and the table
/// is there to keep.
async fn kept_by_workflows(conn: &mut PgConnection) -> Result<bool, MigrateError> {
    let adopted = applied(&mut *conn, Ledger::Workflows)
        .await
        .map_err(MigrateError::Read)?
        .is_some_and(|rows| rows.get(&1).is_some_and(|r| r.success));
    if !adopted {
        return Ok(false);
    }
    sqlx::query_scalar(sql::OPERATIONS_EXISTS)
        .fetch_one(&mut *conn)
        .await
        .map_err(MigrateError::Read)
}

/// Moves the workflow store's `operations` (with its indexes, constraints and identity
/// sequence) into the aside schema.
async fn move_aside(conn: &mut PgConnection) -> Result<(), MigrateError> {
    (&mut *conn)
        .execute(sql::MOVE_OPERATIONS_ASIDE)
        .await
        .map_err(|source| MigrateError::Database {
            doing: "moving the workflow store's operations aside",
            source,
        })?;
    Ok(())
}

/// Drops whatever table the planner's migrations left under the name `operations` and moves
/// the workflow store's back into the current schema.
async fn bring_back(conn: &mut PgConnection) -> Result<(), MigrateError> {
    (&mut *conn)
        .execute(sql::BRING_OPERATIONS_BACK)
        .await
        .map_err(|source| MigrateError::Database {
            doing: "bringing the workflow store's operations back",
            source,
        })?;
    Ok(())
}

/// The down migration `version` of `ledger`; a version this binary does not carry cannot be
/// reverted by it.
fn reversal(ledger: Ledger, version: i64) -> Result<&'static Migration, MigrateError> {
    migrator(ledger)
        .iter()
        .find(|m| m.version == version && m.migration_type.is_down_migration())
        .ok_or(MigrateError::Migrate(
            sqlx::migrate::MigrateError::VersionMissing(version),
        ))
}

/// The workflow store's up migration `version`.
fn workflow_up(version: i64) -> &'static Migration {
    WORKFLOW_MIGRATOR
        .iter()
        .find(|m| m.version == version && !m.migration_type.is_down_migration())
        .unwrap_or_else(|| unreachable!("migrations/postgres-workflows carries {version}"))
}

fn begin(source: sqlx::Error) -> MigrateError {
    MigrateError::Database {
        doing: "beginning the migration transaction",
        source,
    }
}

fn commit(source: sqlx::Error) -> MigrateError {
    MigrateError::Database {
        doing: "committing the migration transaction",
        source,
    }
}

/// Why the construction check refused a database.
#[derive(Debug)]
pub(crate) enum SchemaCheck {
    /// The migration table could not be read (the database failed).
    Unreadable(sqlx::Error),
    /// The schema is not exactly this binary's; the text says what differs.
    NotMigrated(String),
}

/// What the construction check was doing when the database failed.
const READING_MIGRATIONS: &str =
    "reading the migration tables _sqlx_migrations and _agentroom_workflow_migrations";

impl From<SchemaCheck> for RepoError {
    fn from(check: SchemaCheck) -> Self {
        match check {
            SchemaCheck::Unreadable(error) => RepoError::database(READING_MIGRATIONS, error),
            SchemaCheck::NotMigrated(detail) => RepoError::not_migrated(detail),
        }
    }
}

impl From<SchemaCheck> for StoreError {
    fn from(check: SchemaCheck) -> Self {
        match check {
            SchemaCheck::Unreadable(error) => StoreError::database(READING_MIGRATIONS, error),
            SchemaCheck::NotMigrated(detail) => StoreError::not_migrated(detail),
        }
    }
}

/// The construction check (D5): `Ok` only when, in both ledgers, every migration this binary
/// knows is applied successfully with its checksum and none is applied that it does not know.
pub(crate) async fn check_migrated(pool: &PgPool) -> Result<(), SchemaCheck> {
    let mut conn = pool.acquire().await.map_err(SchemaCheck::Unreadable)?;
    let mut problems = Vec::new();
    for ledger in LEDGERS {
        let applied = applied(&mut conn, ledger)
            .await
            .map_err(SchemaCheck::Unreadable)?;
        problems.extend(migrations::refusal(
            ledger,
            carried(ledger),
            applied.as_ref(),
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SchemaCheck::NotMigrated(problems.join("; ")))
    }
}

/// The recorded migrations of `ledger` by version, or `None` when it has no table.
async fn applied(
    conn: &mut PgConnection,
    ledger: Ledger,
) -> Result<Option<BTreeMap<i64, Recorded>>, sqlx::Error> {
    let (exists, select) = match ledger {
        Ledger::Planner => (sql::MIGRATION_TABLE_EXISTS, sql::SELECT_APPLIED_MIGRATIONS),
        Ledger::Workflows => (
            sql::WORKFLOW_MIGRATION_TABLE_EXISTS,
            sql::SELECT_APPLIED_WORKFLOW_MIGRATIONS,
        ),
    };
    let exists: bool = sqlx::query_scalar(exists).fetch_one(&mut *conn).await?;
    if !exists {
        return Ok(None);
    }
    let rows: Vec<(i64, String, bool, Vec<u8>)> =
        sqlx::query_as(select).fetch_all(&mut *conn).await?;
    Ok(Some(
        rows.into_iter()
            .map(|(version, description, success, checksum)| {
                (
                    version,
                    Recorded {
                        description,
                        success,
                        checksum,
                    },
                )
            })
            .collect(),
    ))
}

/// The up migrations of `ledger` this binary carries.
fn carried(ledger: Ledger) -> impl Iterator<Item = Carried<'static>> {
    migrator(ledger)
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| Carried {
            version: m.version,
            description: &m.description,
            checksum: &m.checksum,
        })
}
