//! Migrations of the embedded database: `migrations/sqlite`, embedded and checksummed at
//! compile time, applied only by an explicit command (D5), each in its own transaction,
//! recorded in `_sqlx_migrations` as sqlx records them.

use std::path::Path;

use std::collections::BTreeMap;

use agentroom_ports::migrations::{self, Carried, Recorded};
pub use agentroom_ports::migrations::{MigrationState, MigrationStatus};
use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::{Durability, connect};

/// Every migration of `migrations/sqlite`, in version order.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// A migration failure.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The database failed.
    #[error("{path}: {source}")]
    Database {
        /// The file.
        path: String,
        /// What failed.
        #[source]
        source: rusqlite::Error,
    },
    /// A migration applied earlier is not the one this binary carries.
    #[error(
        "{path}: migration {version} was applied with another checksum; migrations are never \
         edited once applied"
    )]
    ChecksumMismatch {
        /// The file.
        path: String,
        /// Which migration.
        version: i64,
    },
    /// The database has migrations this binary does not know (a newer binary migrated it).
    #[error(
        "{path}: migration {version} is applied but unknown to this binary; use a newer agentroom"
    )]
    Unknown {
        /// The file.
        path: String,
        /// Which migration.
        version: i64,
    },
    /// There is no database file to migrate down or report on.
    #[error("{path}: no database here")]
    Missing {
        /// The file.
        path: String,
    },
}

fn ups() -> impl Iterator<Item = &'static Migration> {
    MIGRATOR
        .iter()
        .filter(|m| !matches!(m.migration_type, MigrationType::ReversibleDown))
}

fn down_of(version: i64) -> Option<&'static Migration> {
    MIGRATOR
        .iter()
        .find(|m| m.version == version && m.migration_type == MigrationType::ReversibleDown)
}

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    success BOOLEAN NOT NULL,
    checksum BLOB NOT NULL,
    execution_time BIGINT NOT NULL
)";

/// The rows of the migrations table of an open database by version, or `None` without a
/// migrations table.
pub(crate) fn recorded(
    connection: &rusqlite::Connection,
) -> Result<Option<BTreeMap<i64, Recorded>>, rusqlite::Error> {
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
         AND name = '_sqlx_migrations')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(None);
    }
    let mut statement = connection.prepare(
        "SELECT version, description, success, checksum FROM _sqlx_migrations ORDER BY version",
    )?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get(0)?,
            Recorded {
                description: row.get(1)?,
                success: row.get(2)?,
                checksum: row.get(3)?,
            },
        ))
    })?;
    rows.collect::<Result<BTreeMap<_, _>, _>>().map(Some)
}

/// The migrations applied successfully to an open database: version and checksum.
fn applied(connection: &rusqlite::Connection) -> Result<Vec<(i64, Vec<u8>)>, rusqlite::Error> {
    Ok(recorded(connection)?
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, r)| r.success)
        .map(|(version, r)| (version, r.checksum))
        .collect())
}

/// The up migrations this binary carries.
fn carried() -> impl Iterator<Item = Carried<'static>> {
    ups().map(|m| Carried {
        version: m.version,
        description: &m.description,
        checksum: &m.checksum,
    })
}

/// What is wrong with a database's migration state for this binary, if anything (D5).
pub(crate) fn pending(
    connection: &rusqlite::Connection,
) -> Result<Option<String>, rusqlite::Error> {
    Ok(migrations::refusal(
        migrations::Ledger::Planner,
        carried(),
        recorded(connection)?.as_ref(),
    ))
}

fn database(path: &Path) -> impl Fn(rusqlite::Error) -> MigrateError + '_ {
    move |source| MigrateError::Database {
        path: path.display().to_string(),
        source,
    }
}

/// Applies every pending migration, creating the file if need be; returns the versions
/// applied now.
pub fn up(path: &Path) -> Result<Vec<i64>, MigrateError> {
    let err = database(path);
    let mut connection = connect(path, Durability::PowerLoss, true).map_err(&err)?;
    connection.execute(CREATE_TABLE, []).map_err(&err)?;
    let applied = applied(&connection).map_err(&err)?;
    for (version, checksum) in &applied {
        match ups().find(|m| m.version == *version) {
            None => {
                return Err(MigrateError::Unknown {
                    path: path.display().to_string(),
                    version: *version,
                });
            }
            Some(m) if m.checksum.as_ref() != checksum.as_slice() => {
                return Err(MigrateError::ChecksumMismatch {
                    path: path.display().to_string(),
                    version: *version,
                });
            }
            Some(_) => {}
        }
    }
    let mut done = Vec::new();
    for migration in ups() {
        if applied.iter().any(|(v, _)| *v == migration.version) {
            continue;
        }
        let started = std::time::Instant::now();
        let tx = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        tx.execute_batch(migration.sql.as_str()).map_err(&err)?;
        let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (?1, ?2, TRUE, ?3, ?4)",
            rusqlite::params![
                migration.version,
                migration.description.as_ref(),
                migration.checksum.as_ref(),
                nanos
            ],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        tracing::info!(version = migration.version, "applied migration");
        done.push(migration.version);
    }
    Ok(done)
}

/// Every migration this binary carries, and any the database has that it does not, in
/// version order, with where each stands.
pub fn status(path: &Path) -> Result<Vec<MigrationStatus>, MigrateError> {
    if !path.exists() {
        return Err(MigrateError::Missing {
            path: path.display().to_string(),
        });
    }
    let err = database(path);
    let connection = connect(path, Durability::ProcessCrash, false).map_err(&err)?;
    let recorded = recorded(&connection).map_err(&err)?;
    Ok(migrations::compare(
        migrations::Ledger::Planner,
        carried(),
        recorded.as_ref(),
    ))
}

/// Reverts every applied migration, newest first, destroying what they hold; returns the
/// versions reverted. The CLI asks for an explicit confirmation first (D5).
pub fn down(path: &Path) -> Result<Vec<i64>, MigrateError> {
    if !path.exists() {
        return Err(MigrateError::Missing {
            path: path.display().to_string(),
        });
    }
    let err = database(path);
    let mut connection = connect(path, Durability::PowerLoss, false).map_err(&err)?;
    let applied = applied(&connection).map_err(&err)?;
    let mut done = Vec::new();
    for (version, _) in applied.iter().rev() {
        let Some(migration) = down_of(*version) else {
            return Err(MigrateError::Unknown {
                path: path.display().to_string(),
                version: *version,
            });
        };
        let tx = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        tx.execute_batch(migration.sql.as_str()).map_err(&err)?;
        tx.execute("DELETE FROM _sqlx_migrations WHERE version = ?1", [version])
            .map_err(&err)?;
        tx.commit().map_err(&err)?;
        done.push(*version);
    }
    Ok(done)
}
