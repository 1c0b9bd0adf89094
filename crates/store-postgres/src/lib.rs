//! The repository traits on PostgreSQL with sqlx: the planning store ([`PgPlanning`]), Room
//! state, workflows, the outbox, tokens and artifact content ([`PgRooms`]: `RoomStore`,
//! `WorkflowStore`, `Outbox`, `TokenStore`, `ArtifactStore`), the schema's two migrators, each
//! with its own ledger ([`MIGRATOR`], the planner's, over `migrations/postgres`;
//! [`WORKFLOW_MIGRATOR`], the workflow store's `operations`, over
//! `migrations/postgres-workflows`), and what the CLI calls for `agentroom migrate
//! up|status|down` ([`migrate::connect`], [`migrate::up`], [`migrate::status`],
//! [`migrate::down`], [`migrate::down_workflows`]).
//!
//! Constructing a store never migrates (D5): `connect` and `from_pool` of either store check
//! both migration tables and refuse an unmigrated database with
//! [`RepoError::NotMigrated`](agentroom_planning::RepoError::NotMigrated) or
//! [`StoreError::NotMigrated`](agentroom_ports::StoreError::NotMigrated), which advise
//! `agentroom migrate up`.

mod contents;
mod feed;
mod held;
mod listen;
pub mod migrate;
mod pools;
mod rooms;
pub mod sql;
mod store;
mod tokens;
mod workflows;

pub use migrate::{
    Ledger, MIGRATOR, MigrateError, Migrated, MigrationState, MigrationStatus, WORKFLOW_MIGRATOR,
};
pub use rooms::PgRooms;
/// The pool type the functions here take, re-exported so callers need not name sqlx.
pub use sqlx::postgres::PgPool;
pub use store::PgPlanning;
