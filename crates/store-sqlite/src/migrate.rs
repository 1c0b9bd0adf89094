//! Migrations of the embedded database: `migrations/sqlite`, embedded and checksummed at
//! compile time, applied only by an explicit command (D5), each in its own transaction,
//! recorded in `_sqlx_migrations` as sqlx records them.

use std::path::Path;

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

/// Where one migration stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationState {
    /// Version.
    pub version: i64,
    /// Description.
    pub description: String,
    /// Whether it is applied.
    pub applied: bool,
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

/// A migration recorded as applied: version and checksum.
type Applied = (i64, Vec<u8>);

/// The migrations applied to an open database, or `None` without a migrations table.
pub(crate) fn applied(
    connection: &rusqlite::Connection,
) -> Result<Option<Vec<Applied>>, rusqlite::Error> {
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' \
         AND name = '_sqlx_migrations')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(None);
    }
    let mut statement = connection
        .prepare("SELECT version, checksum FROM _sqlx_migrations WHERE success ORDER BY version")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect::<Result<Vec<_>, _>>().map(Some)
}

/// What is wrong with a database's migration state for this binary, if anything.
pub(crate) fn pending(
    connection: &rusqlite::Connection,
) -> Result<Option<String>, rusqlite::Error> {
    let Some(applied) = applied(connection)? else {
        return Ok(Some("it has no migrations table".to_owned()));
    };
    for (version, checksum) in &applied {
        match ups().find(|m| m.version == *version) {
            None => {
                return Ok(Some(format!(
                    "migration {version} is applied but unknown to this binary"
                )));
            }
            Some(m) if m.checksum.as_ref() != checksum.as_slice() => {
                return Ok(Some(format!(
                    "migration {version} was applied with another checksum"
                )));
            }
            Some(_) => {}
        }
    }
    let missing: Vec<String> = ups()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .map(|m| format!("{} {}", m.version, m.description))
        .collect();
    Ok((!missing.is_empty()).then(|| format!("pending: {}", missing.join(", "))))
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
    let applied = applied(&connection).map_err(&err)?.unwrap_or_default();
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

/// Every migration this binary carries and whether it is applied.
pub fn status(path: &Path) -> Result<Vec<MigrationState>, MigrateError> {
    if !path.exists() {
        return Err(MigrateError::Missing {
            path: path.display().to_string(),
        });
    }
    let err = database(path);
    let connection = connect(path, Durability::ProcessCrash, false).map_err(&err)?;
    let applied = applied(&connection).map_err(&err)?.unwrap_or_default();
    Ok(ups()
        .map(|m| MigrationState {
            version: m.version,
            description: m.description.to_string(),
            applied: applied.iter().any(|(v, _)| *v == m.version),
        })
        .collect())
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
    let applied = applied(&connection).map_err(&err)?.unwrap_or_default();
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
