//! The connections every store of one database file keeps: one writer behind a mutex and a
//! few readers (WAL lets them read while the writer commits), opened only on a migrated file.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;

use crate::{Durability, connect, migrate};

/// Read connections kept open.
const READERS: usize = 4;

/// Why a database cannot be opened; each store maps it onto its own error once.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The file is missing or its schema is not what this binary expects (D5).
    NotMigrated(String),
    /// The database failed.
    Database(&'static str, rusqlite::Error),
}

/// One writer and a small pool of readers on one file.
pub(crate) struct Connections {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    durability: Durability,
}

fn lock(mutex: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding a connection leaves no transaction open (rusqlite rolls back on
    // drop), so the connection is still good.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connections {
    /// Opens an existing, migrated database. Never creates or migrates it (D5).
    pub(crate) fn open(path: &Path, durability: Durability) -> Result<Self, OpenError> {
        if !path.exists() {
            return Err(OpenError::NotMigrated(format!(
                "there is no database at {}",
                path.display()
            )));
        }
        let writer = connect(path, durability, false)
            .map_err(|e| OpenError::Database("opening the database", e))?;
        if let Some(detail) = migrate::pending(&writer)
            .map_err(|e| OpenError::Database("reading the migrations table", e))?
        {
            return Err(OpenError::NotMigrated(format!(
                "{}: {detail}",
                path.display()
            )));
        }
        let readers = (0..READERS)
            .map(|_| connect(path, durability, false).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| OpenError::Database("opening a reader", e))?;
        Ok(Self {
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
            durability,
        })
    }

    /// The durability its commits have.
    pub(crate) fn durability(&self) -> Durability {
        self.durability
    }

    /// The writer; holding it excludes every other writer of this process (and `BEGIN
    /// IMMEDIATE` excludes those of other processes).
    pub(crate) fn writer(&self) -> MutexGuard<'_, Connection> {
        lock(&self.writer)
    }

    /// A reader: a free one if there is one, else the next one in turn.
    pub(crate) fn reader(&self) -> MutexGuard<'_, Connection> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.readers.len() {
            if let Some(mutex) = self.readers.get((start + i) % self.readers.len())
                && let Ok(guard) = mutex.try_lock()
            {
                return guard;
            }
        }
        match self.readers.get(start % self.readers.len().max(1)) {
            Some(mutex) => lock(mutex),
            None => lock(&self.writer),
        }
    }
}
