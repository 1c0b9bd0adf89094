//! The repository traits on PostgreSQL with sqlx: today the planning store ([`PgPlanning`]),
//! the schema's migrator ([`MIGRATOR`] over `migrations/postgres`) and what the CLI calls for
//! `agentroom migrate up|status|down` ([`migrate::connect`], [`migrate::up`],
//! [`migrate::status`], [`migrate::down`]).
//!
//! Constructing a store never migrates (D5): [`PgPlanning::connect`] and
//! [`PgPlanning::from_pool`] check the migration table and refuse an unmigrated database
//! with [`RepoError::NotMigrated`](agentroom_planning::RepoError::NotMigrated), which advises
//! `agentroom migrate up`.

pub mod migrate;
pub mod sql;
mod store;

pub use migrate::{MIGRATOR, MigrateError, MigrationState, MigrationStatus};
/// The pool type the functions here take, re-exported so callers need not name sqlx.
pub use sqlx::postgres::PgPool;
pub use store::PgPlanning;
