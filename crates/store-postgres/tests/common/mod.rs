//! Test databases: a fresh PostgreSQL schema per test, found through `DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`), with old test schemas dropped.
//! An unreachable server fails the test with a clear message; nothing is skipped.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test binary uses a different part of this helper"
)]

use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentroom_store_postgres::{PgPlanning, PgPool, PgRooms, migrate};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Test schemas older than this are left over from earlier runs and dropped.
const STALE_AFTER: Duration = Duration::from_secs(30 * 60);

/// The server the tests use.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

fn options() -> PgConnectOptions {
    let url = database_url();
    PgConnectOptions::from_str(&url)
        .unwrap_or_else(|e| panic!("DATABASE_URL `{url}` is not a PostgreSQL URL: {e}"))
}

async fn admin() -> PgConnection {
    let url = database_url();
    PgConnection::connect_with(&options())
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {url}: {e}. These tests need it: start it (as \
             .ci/run does) or point DATABASE_URL at a server where this user may create schemas"
            )
        })
}

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// A test schema's name: `t_<unix millis>_<random hex>`; only such names are ever dropped.
fn parse_schema(name: &str) -> Option<u128> {
    let rest = name.strip_prefix("t_")?;
    let (millis, random) = rest.split_once('_')?;
    let ok = random.len() == 12 && random.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| millis.parse().ok()).flatten()
}

/// Runs DDL on a schema name this helper made (`t_<digits>_<hex>`, checked), which cannot be
/// a bind parameter.
async fn ddl(conn: &mut PgConnection, statement: &str, schema: &str) {
    assert!(
        parse_schema(schema).is_some(),
        "not a test schema: {schema}"
    );
    let sql = statement.replace("{schema}", schema);
    sqlx::raw_sql(AssertSqlSafe(sql.clone()))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Test schemas and databases: the query listing their names, and the statement dropping one.
const SCHEMAS: (&str, &str) = (
    "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 't\\_%'",
    "DROP SCHEMA IF EXISTS {name} CASCADE",
);
const DATABASES: (&str, &str) = (
    "SELECT datname::text FROM pg_database WHERE datname LIKE 't\\_%'",
    "DROP DATABASE IF EXISTS {name} WITH (FORCE)",
);

/// Drops the test schemas or databases (one of the pairs above) left over from earlier runs.
async fn drop_stale(conn: &mut PgConnection, (list, drop): (&str, &str)) {
    let names: Vec<String> = sqlx::query_scalar(AssertSqlSafe(list))
        .fetch_all(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{list}: {e}"));
    let cutoff = now().saturating_sub(STALE_AFTER).as_millis();
    for name in names {
        if parse_schema(&name).is_some_and(|made| made < cutoff) {
            // Another test process may be dropping it too; that is fine.
            let sql = drop.replace("{name}", &name);
            let _ = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *conn).await;
        }
    }
}

/// A fresh, empty schema: its name and a pool whose connections see only it. Its connections
/// (and those a store opens like them) carry the schema's name as their `application_name`,
/// so a test can find its own backends in `pg_stat_activity`.
pub async fn fresh_schema() -> (String, PgPool) {
    fresh_schema_with(10).await
}

/// [`fresh_schema`] with a pool of up to `connections`.
pub async fn fresh_schema_with(connections: u32) -> (String, PgPool) {
    let mut conn = admin().await;
    drop_stale(&mut conn, SCHEMAS).await;
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).unwrap();
    let schema = format!("t_{}_{}", now().as_millis(), hex::encode(random));
    ddl(&mut conn, "CREATE SCHEMA {schema}", &schema).await;
    conn.close().await.ok();
    let pool = PgPoolOptions::new()
        .max_connections(connections)
        .connect_with(
            options()
                .options([("search_path", schema.as_str())])
                .application_name(&schema),
        )
        .await
        .unwrap_or_else(|e| panic!("connecting to schema {schema}: {e}"));
    (schema, pool)
}

/// A fresh, empty database of its own: its name and a pool on it. For a test whose plans
/// depend on what VACUUM may do, which only backends connected to the same database hold
/// back (other tests' open snapshots in a shared database would).
pub async fn fresh_database() -> (String, PgPool) {
    let mut conn = admin().await;
    drop_stale(&mut conn, DATABASES).await;
    let mut random = [0u8; 6];
    getrandom::fill(&mut random).unwrap();
    let name = format!("t_{}_{}", now().as_millis(), hex::encode(random));
    ddl(&mut conn, "CREATE DATABASE {schema}", &name).await;
    conn.close().await.ok();
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options().database(&name))
        .await
        .unwrap_or_else(|e| panic!("connecting to database {name}: {e}"));
    (name, pool)
}

/// Drops a database made by [`fresh_database`], after closing `pool`.
pub async fn drop_database(name: &str, pool: PgPool) {
    pool.close().await;
    let mut conn = admin().await;
    ddl(
        &mut conn,
        "DROP DATABASE IF EXISTS {schema} WITH (FORCE)",
        name,
    )
    .await;
    conn.close().await.ok();
}

/// Drops a schema made by [`fresh_schema`].
pub async fn drop_schema(schema: &str) {
    let mut conn = admin().await;
    ddl(&mut conn, "DROP SCHEMA IF EXISTS {schema} CASCADE", schema).await;
    conn.close().await.ok();
}

/// A fresh schema, migrated, and the store over it.
pub async fn migrated_store() -> (String, PgPlanning) {
    let (schema, pool) = fresh_schema().await;
    migrate::up(&pool)
        .await
        .unwrap_or_else(|e| panic!("migrating {schema}: {e}"));
    let store = PgPlanning::from_pool(pool)
        .await
        .unwrap_or_else(|e| panic!("opening the store on {schema}: {e}"));
    (schema, store)
}

/// A fresh schema, migrated, and the Room store over it.
pub async fn migrated_rooms() -> (String, PgRooms) {
    let (schema, pool) = fresh_schema().await;
    let store = migrate_rooms(&schema, pool).await;
    (schema, store)
}

/// Migrates the schema `pool` sees and opens the Room store over it.
pub async fn migrate_rooms(schema: &str, pool: PgPool) -> PgRooms {
    migrate::up(&pool)
        .await
        .unwrap_or_else(|e| panic!("migrating {schema}: {e}"));
    PgRooms::from_pool(pool)
        .await
        .unwrap_or_else(|e| panic!("opening the Room store on {schema}: {e}"))
}
