//! `agentroom-bench idle` (issue 21, items 4 and 6): what a host process writes while its
//! calls all wait. Owner messages are posted to Rooms of one [`Coordinator`] over PostgreSQL
//! whose provider never answers (it waits for its abort), until `--calls` reasoner calls are
//! in flight; then, for `--seconds`, nothing else happens and the bench counts the write
//! transactions the server assigned (`pg_snapshot_xmax(pg_current_snapshot())`, read without
//! assigning one) and checks that every lease is still alive. The target: at most one
//! heartbeat write per process per heartbeat interval, whatever the number of calls.

use std::time::{Duration, Instant};

use agentroom_coordinator::{CoordinatorConfig, Outcome, RunnerConfig};
use agentroom_domain::engine::CallRequest;
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::EventId;
use agentroom_workflows::{Abort, CallOutcome, Provider};
use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use crate::durable::{create_room, p, store_on};
use crate::floor;

/// The namespace of the bench's event ids.
const NAMESPACE: Uuid = Uuid::from_u128(0x6265_6e63_685f_6964_6c65_0000_0000_0000);

/// Options of `agentroom-bench idle`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// A PostgreSQL server (a role that may create databases); a fresh database is created
    /// and dropped.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// Calls in flight while measuring.
    #[arg(long, default_value_t = 4_000)]
    calls: usize,
    /// Rooms the calls are spread over.
    #[arg(long, default_value_t = 40)]
    rooms: usize,
    /// The runner's lease in milliseconds (heartbeats every third of it).
    #[arg(long, default_value_t = 3_000)]
    lease_ms: u64,
    /// How long nothing happens while the writes are counted.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

/// Never answers: waits until the call is aborted.
struct Waiting;

#[async_trait]
impl Provider for Waiting {
    async fn call(
        &self,
        _request: &CallRequest,
        _context: &agentroom_ports::CallContext,
        abort: Abort,
    ) -> CallOutcome {
        abort.aborted().await;
        CallOutcome::Aborted
    }
}

/// A coordinator over `store` whose provider never answers, with `calls` reasoner calls in
/// flight over `rooms` Rooms named `{prefix}-N` (one owner message each).
pub(crate) async fn in_flight(
    store: std::sync::Arc<agentroom_store_postgres::PgRooms>,
    runner: RunnerConfig,
    calls: usize,
    rooms: usize,
    prefix: &str,
) -> anyhow::Result<agentroom_coordinator::Coordinator> {
    let coordinator =
        agentroom_coordinator::Coordinator::builder(store, CoordinatorConfig::new(runner))
            .provider(std::sync::Arc::new(Waiting))
            .build();
    let owner = p("olive")?;
    for n in 0..calls {
        let room_name = format!("{prefix}-{}", n % rooms);
        if n < rooms {
            create_room(&coordinator, &room_name).await?;
        }
        let id = format!("{room_name}/{n}");
        let event = Event {
            id: EventId::from_uuid(Uuid::new_v5(&NAMESPACE, id.as_bytes())),
            room: agentroom_domain::ids::RoomId::parse(&room_name)?,
            author: owner.clone(),
            body: EventBody::OwnerMessage {
                text: format!("question {n}"),
            },
        };
        let outcome = coordinator
            .post(&event)
            .await
            .with_context(|| format!("posting message {id}"))?;
        if !matches!(outcome, Outcome::Decided { ref calls, .. } if calls.len() == 1) {
            bail!("owner message {id} reserved no reasoner call: {outcome:?}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while coordinator.calls_in_flight() < calls {
        if Instant::now() > deadline {
            bail!(
                "only {} of {calls} calls in flight after 120 s",
                coordinator.calls_in_flight(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(coordinator)
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    if args.calls == 0 || args.rooms == 0 || args.seconds == 0 || args.lease_ms < 3 {
        bail!("--calls, --rooms and --seconds must be at least 1, --lease-ms at least 3");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let args = args.clone();
    runtime.block_on(async move { tokio::spawn(async move { measure(&args).await }).await? })
}

async fn measure(args: &Args) -> anyhow::Result<()> {
    let (admin, name, url) = floor::create_db(&args.database_url, "agentroom_bench_idle").await?;
    let result = async {
        let pool = agentroom_store_postgres::migrate::connect(&url).await?;
        agentroom_store_postgres::migrate::up(&pool).await?;
        pool.close().await;
        let probe = PgPoolOptions::new().max_connections(1).connect(&url).await?;
        let store = store_on(&url, 8, "agentroom-bench-idle").await?;
        let lease = Duration::from_millis(args.lease_ms);
        let runner = RunnerConfig::new("bench-idle", lease);
        let heartbeat = runner.heartbeat();
        let started = Instant::now();
        let coordinator = in_flight(store, runner, args.calls, args.rooms, "idle").await?;
        let posted_s = started.elapsed().as_secs_f64();
        // Settle for two intervals, then count.
        tokio::time::sleep(heartbeat * 2).await;
        let xmax = || async {
            let (xmax,): (i64,) =
                sqlx::query_as("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
                    .fetch_one(&probe)
                    .await?;
            Ok::<i64, anyhow::Error>(xmax)
        };
        let before = xmax().await?;
        let window = Instant::now();
        tokio::time::sleep(Duration::from_secs(args.seconds)).await;
        let after = xmax().await?;
        let elapsed = window.elapsed().as_secs_f64();
        let (alive,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM operations \
             WHERE status = 'in_flight' AND lease_expires_at > clock_timestamp()",
        )
        .fetch_one(&probe)
        .await?;
        let writes = after - before;
        let per_s = writes as f64 / elapsed;
        let interval_s = heartbeat.as_secs_f64();
        let line = json!({
            "bench": "idle", "figure": "idle", "backend": "postgres",
            "calls_in_flight": coordinator.calls_in_flight(),
            "rooms": args.rooms,
            "lease_ms": args.lease_ms,
            "heartbeat_ms": heartbeat.as_millis(),
            "seconds": (elapsed * 10.0).round() / 10.0,
            "write_transactions": writes,
            "write_transactions_per_s": (per_s * 100.0).round() / 100.0,
            "write_transactions_per_heartbeat_interval": (per_s * interval_s * 100.0).round() / 100.0,
            "leases_alive": alive,
            "posting_s": (posted_s * 10.0).round() / 10.0,
            "target": "issue 21: at most one heartbeat write commit per process per heartbeat interval, whatever the calls in flight",
        });
        #[allow(clippy::print_stdout)]
        {
            println!("{line}");
        }
        if usize::try_from(alive)? != args.calls {
            bail!("{alive} of {} leases alive after {elapsed:.1}s", args.calls);
        }
        coordinator.shutdown(Duration::from_millis(100)).await;
        probe.close().await;
        Ok::<(), anyhow::Error>(())
    }
    .await;
    floor::drop_db(&admin, &name).await?;
    result
}
