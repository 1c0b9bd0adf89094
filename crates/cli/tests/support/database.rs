//! A fresh PostgreSQL database on the shared server at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) for one test, created with `psql` and dropped
//! when the test ends, even on a panic; databases that earlier, killed runs left behind are
//! dropped when they are old enough.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// Every database this helper makes is named `agentroom_cli_<unix millis>_<pid>_<n>`.
const PREFIX: &str = "agentroom_cli_";
/// Databases of this helper older than this are left over from killed runs.
const STALE_AFTER: Duration = Duration::from_secs(30 * 60);

/// The shared server the tests use.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// `url` with its database replaced by `name`.
pub fn url_of(url: &str, name: &str) -> String {
    let (server, rest) = url
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("the database URL has no database part: {url}"));
    let query = rest.find('?').map_or("", |at| &rest[at..]);
    format!("{server}/{name}{query}")
}

fn psql(admin: &str, sql: &str) -> std::process::Output {
    Command::new("psql")
        .args([
            admin,
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ])
        .output()
        .unwrap_or_else(|e| panic!("psql is needed for the PostgreSQL CLI tests: {e}"))
}

fn millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// When a database of this helper was made, from its name.
fn made_at(name: &str) -> Option<u128> {
    let (made, _) = name.strip_prefix(PREFIX)?.split_once('_')?;
    made.parse().ok()
}

fn drop_stale(admin: &str) {
    let out = psql(
        admin,
        "SELECT datname FROM pg_database WHERE datname LIKE 'agentroom\\_cli\\_%'",
    );
    let cutoff = millis().saturating_sub(STALE_AFTER.as_millis());
    for name in String::from_utf8_lossy(&out.stdout).lines() {
        if made_at(name.trim()).is_some_and(|made| made < cutoff) {
            // Another test process may be dropping it too; that is fine.
            psql(
                admin,
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", name.trim()),
            );
        }
    }
}

/// A database of its own for one test, dropped (with its connections) when this is dropped.
pub struct Database {
    admin: String,
    name: String,
}

impl Database {
    /// Creates an empty database on the shared server.
    pub fn create() -> Database {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin = admin_url();
        drop_stale(&admin);
        let name = format!(
            "{PREFIX}{}_{}_{}",
            millis(),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let out = psql(&admin, &format!("CREATE DATABASE {name}"));
        assert!(
            out.status.success(),
            "cannot create a database through {admin}: {}. These tests need PostgreSQL: start \
             it (as .ci/run does) or point DATABASE_URL at a server where this user may create \
             databases",
            String::from_utf8_lossy(&out.stderr)
        );
        Database { admin, name }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        url_of(&self.admin, &self.name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Never panics: it may run while a failed test unwinds.
        let _ = Command::new("psql")
            .args([self.admin.as_str(), "-X", "-q", "-c"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .output();
    }
}
