//! The embedded default store: every repository on SQLite, one file under the data root.
//!
//! Statements run on the calling thread through rusqlite. On the machines we measure, one
//! statement costs a few microseconds, less than handing it to a worker thread and back
//! (sqlx's SQLite driver does that handoff on every statement: about 180 µs per insert here,
//! against about 35 µs inline), so the embedded store does not pay for it. The writer is one
//! connection behind a mutex; readers are a small pool (WAL lets them read while a write
//! commits). Schemas come from `migrations/sqlite`, applied only by [`migrate`] (D5).

mod connections;
mod contents;
pub mod migrate;
pub mod planning;
mod pools;
mod records;
pub mod rooms;
mod tokens;

pub use migrate::{MIGRATOR, MigrateError, MigrationState, MigrationStatus};
pub use planning::SqlitePlanning;
pub use rooms::SqliteRooms;

/// How hard a commit holds on to what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: a commit is in the operating system when it returns,
    /// so it survives the process being killed (SIGKILL) but not a power loss.
    #[default]
    ProcessCrash,
    /// WAL with `synchronous=FULL`: every commit is fsynced, so it survives a power loss too.
    PowerLoss,
}

impl Durability {
    /// The name benchmarks and logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::ProcessCrash => "wal-synchronous-normal",
            Durability::PowerLoss => "wal-synchronous-full",
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Durability::ProcessCrash => "NORMAL",
            Durability::PowerLoss => "FULL",
        }
    }
}

/// Opens a connection with the pragmas every connection uses.
fn connect(
    path: &std::path::Path,
    durability: Durability,
    create: bool,
) -> Result<rusqlite::Connection, rusqlite::Error> {
    use rusqlite::OpenFlags;
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let connection = rusqlite::Connection::open_with_flags(path, flags)?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", durability.pragma())?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    connection.set_prepared_statement_cache_capacity(64);
    Ok(connection)
}
