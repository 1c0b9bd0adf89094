//! The raw commit floor of a PostgreSQL server (DESIGN.md): one autocommit single-row
//! `INSERT` of a 64-byte row on one connection — one round trip, one WAL flush — measured by
//! this binary, so every durable-call figure can be printed next to it from the same run.

use std::time::Instant;

use anyhow::Context;
use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};

/// Per-commit latencies (µs, sorted) on one connection.
pub struct Floor {
    /// Each commit's latency in µs, sorted.
    pub one_connection_us: Vec<f64>,
    /// The measured commits' server backend CPU, in `/proc` ticks (when the server runs on
    /// this machine).
    pub backend_ticks: Option<u64>,
    /// This process's CPU over the measured commits, in `/proc` ticks.
    pub client_ticks: Option<u64>,
}

/// A fresh database for one bench run on the server of `admin_url`, dropped by [`drop_db`].
pub async fn create_db(admin_url: &str, prefix: &str) -> anyhow::Result<(PgPool, String, String)> {
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(admin_url)
        .await
        .with_context(|| format!("connecting to {admin_url}"))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let name = format!("{prefix}_{nanos}");
    // The name is ours (a fixed prefix and digits); CREATE DATABASE takes no parameters.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await?;
    let url = match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => anyhow::bail!("the database URL names no database: {admin_url}"),
    };
    Ok((admin, name, url))
}

/// Drops a database made by [`create_db`].
pub async fn drop_db(admin: &PgPool, name: &str) -> anyhow::Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(admin)
    .await?;
    Ok(())
}

/// Measures the floor on the database at `url`: `warmup` then `n` commits on one connection
/// held for the whole run, so each commit is exactly one round trip and one WAL flush.
///
/// A pool would add a round trip: sqlx pings an idle connection before handing it out
/// (`test_before_acquire`, on by default), which the stores turn off. [`measure_pooled`]
/// shows that difference.
pub async fn measure(url: &str, warmup: usize, n: usize) -> anyhow::Result<Floor> {
    let mut conn = PgConnection::connect(url).await?;
    let floor = commits(&mut conn, warmup, n).await;
    conn.close().await?;
    floor
}

/// The same commits through a one-connection pool with sqlx's default options (a ping
/// before each acquire): what the floor would be if measured the way a default pool runs.
pub async fn measure_pooled(url: &str, warmup: usize, n: usize) -> anyhow::Result<Floor> {
    let pool = PgPoolOptions::new().max_connections(1).connect(url).await?;
    let mut times = Vec::with_capacity(n);
    let payload = vec![7u8; 64];
    for i in 0..warmup + n {
        let started = Instant::now();
        sqlx::query("INSERT INTO bench_floor (payload) VALUES ($1)")
            .bind(&payload)
            .execute(&pool)
            .await?;
        if i >= warmup {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    pool.close().await;
    Ok(Floor {
        one_connection_us: times,
        backend_ticks: None,
        client_ticks: None,
    })
}

/// `warmup` then `n` floor commits on `conn`, with the CPU this process and its backend spent.
pub async fn commits(conn: &mut PgConnection, warmup: usize, n: usize) -> anyhow::Result<Floor> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, payload bytea NOT NULL)",
    )
    .execute(&mut *conn)
    .await?;
    let payload = vec![7u8; 64];
    let (backend,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    let backend = backend.to_string();
    let mut ticks = (None, None);
    let mut times = Vec::with_capacity(n);
    for i in 0..warmup + n {
        if i == warmup {
            ticks = (
                crate::procfs::cpu_ticks("self"),
                crate::procfs::cpu_ticks(&backend),
            );
        }
        let started = Instant::now();
        sqlx::query("INSERT INTO bench_floor (payload) VALUES ($1)")
            .bind(&payload)
            .execute(&mut *conn)
            .await?;
        if i >= warmup {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    let spent = |before: Option<u64>, after: Option<u64>| {
        before.zip(after).map(|(b, a)| a.saturating_sub(b))
    };
    let client_ticks = spent(ticks.0, crate::procfs::cpu_ticks("self"));
    let backend_ticks = spent(ticks.1, crate::procfs::cpu_ticks(&backend));
    times.sort_by(f64::total_cmp);
    Ok(Floor {
        one_connection_us: times,
        backend_ticks,
        client_ticks,
    })
}

/// Commits per second with `conns` connections, each held by one task doing `per_conn`
/// floor commits.
pub async fn throughput(url: &str, conns: usize, per_conn: usize) -> anyhow::Result<f64> {
    let mut connections = Vec::with_capacity(conns);
    for _ in 0..conns {
        connections.push(PgConnection::connect(url).await?);
    }
    if let Some(first) = connections.first_mut() {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, payload bytea NOT NULL)",
        )
        .execute(&mut *first)
        .await?;
    }
    let started = Instant::now();
    let mut joins = Vec::new();
    for mut conn in connections {
        joins.push(tokio::spawn(async move {
            let payload = vec![7u8; 64];
            for _ in 0..per_conn {
                sqlx::query("INSERT INTO bench_floor (payload) VALUES ($1)")
                    .bind(&payload)
                    .execute(&mut conn)
                    .await?;
            }
            conn.close().await?;
            anyhow::Ok(())
        }));
    }
    for join in joins {
        join.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok((conns * per_conn) as f64 / secs)
}
