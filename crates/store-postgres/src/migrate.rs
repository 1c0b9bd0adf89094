//! Migrations on PostgreSQL, run only by explicit command (D5): [`MIGRATOR`], what
//! `agentroom migrate up|status|down` calls ([`connect`], [`up`], [`status`], [`down`]), and
//! the check every store runs at construction, which refuses a database that is not exactly
//! at this binary's schema.

use std::collections::{BTreeMap, BTreeSet};

use agentroom_planning::RepoError;
use agentroom_ports::StoreError;
use agentroom_ports::migrations::{self, Carried, Recorded};
pub use agentroom_ports::migrations::{MigrationState, MigrationStatus};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::sql;

/// The PostgreSQL schema: the reversible migrations `migrations/postgres/NNNN_*.{up,down}.sql`,
/// embedded at build time. Applied only by explicit command (`agentroom migrate up`).
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// A migration command failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database could not be reached.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[source] sqlx::Error),
    /// Applying or reverting a migration failed, or the recorded ones do not match this
    /// binary's (a failed, changed or unknown migration).
    #[error("migrating PostgreSQL failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The migration table could not be read.
    #[error("reading the PostgreSQL migration table _sqlx_migrations failed: {0}")]
    Read(#[source] sqlx::Error),
}

/// A pool for the migration commands (default pool options), without any schema check.
pub async fn connect(url: &str) -> Result<PgPool, MigrateError> {
    PgPoolOptions::new()
        .connect(url)
        .await
        .map_err(MigrateError::Connect)
}

/// `agentroom migrate up`: applies every pending migration, each in its own transaction,
/// under sqlx's advisory lock (concurrent runs wait for each other); returns the versions
/// that were pending before and are applied now.
#[tracing::instrument(level = "info", skip_all)]
pub async fn up(pool: &PgPool) -> Result<Vec<i64>, MigrateError> {
    let before = applied_versions(pool).await?;
    MIGRATOR.run(pool).await?;
    let after = applied_versions(pool).await?;
    Ok(after.difference(&before).copied().collect())
}

/// `agentroom migrate down`: reverts every applied migration, newest first, destroying all
/// planning state; returns the versions reverted. The caller asks for the destructive
/// confirmation first (D5).
pub async fn down(pool: &PgPool) -> Result<Vec<i64>, MigrateError> {
    down_to(pool, 0).await
}

/// Reverts every applied migration newer than `target` (0 reverts all), newest first;
/// returns the versions reverted.
#[tracing::instrument(level = "info", skip(pool))]
pub async fn down_to(pool: &PgPool, target: i64) -> Result<Vec<i64>, MigrateError> {
    let before = applied_versions(pool).await?;
    MIGRATOR.undo(pool, target).await?;
    let after = applied_versions(pool).await?;
    let mut reverted: Vec<i64> = before.difference(&after).copied().collect();
    reverted.reverse();
    Ok(reverted)
}

/// `agentroom migrate status`: every migration this binary knows, and any the database has
/// that it does not, in version order.
#[tracing::instrument(level = "info", skip_all)]
pub async fn status(pool: &PgPool) -> Result<Vec<MigrationStatus>, MigrateError> {
    let applied = applied(pool).await.map_err(MigrateError::Read)?;
    Ok(migrations::compare(carried(), applied.as_ref()))
}

/// The versions recorded as applied successfully.
async fn applied_versions(pool: &PgPool) -> Result<BTreeSet<i64>, MigrateError> {
    let applied = applied(pool).await.map_err(MigrateError::Read)?;
    Ok(applied
        .into_iter()
        .flatten()
        .filter(|(_, a)| a.success)
        .map(|(version, _)| version)
        .collect())
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
const READING_MIGRATIONS: &str = "reading the migration table _sqlx_migrations";

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

/// The construction check (D5): `Ok` only when every migration this binary knows is applied
/// successfully with its checksum and none is applied that it does not know.
pub(crate) async fn check_migrated(pool: &PgPool) -> Result<(), SchemaCheck> {
    let applied = applied(pool).await.map_err(SchemaCheck::Unreadable)?;
    match migrations::refusal(carried(), applied.as_ref()) {
        None => Ok(()),
        Some(detail) => Err(SchemaCheck::NotMigrated(detail)),
    }
}

/// The recorded migrations by version, or `None` when there is no migration table.
async fn applied(pool: &PgPool) -> Result<Option<BTreeMap<i64, Recorded>>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar(sql::MIGRATION_TABLE_EXISTS)
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(None);
    }
    let rows: Vec<(i64, String, bool, Vec<u8>)> = sqlx::query_as(sql::SELECT_APPLIED_MIGRATIONS)
        .fetch_all(pool)
        .await?;
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

/// The up migrations this binary carries.
fn carried() -> impl Iterator<Item = Carried<'static>> {
    MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| Carried {
            version: m.version,
            description: &m.description,
            checksum: &m.checksum,
        })
}
