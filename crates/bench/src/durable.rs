//! Durable call overhead on PostgreSQL (DESIGN.md "A durable call, step by step"), measured
//! through the product's one application service: every durable-call figure posts owner
//! messages to a [`Coordinator`] over the PostgreSQL store and waits until the Room is quiet
//! (`post` + `wait_idle`), the path `agentroom serve` runs. A message is two commits:
//! transaction 1, the event persisted and accepted (T1) with its reasoner call's reservation,
//! operation row and lease; and, once the no-op provider answered, transaction 2, the fenced
//! receipt with the settled state. Each figure is printed next to the raw commit floor this
//! binary measures against the same server in the same run, with the commits per call it
//! measured (the transactions that wrote the Room's history rows, and the events persisted in
//! a transaction of their own; a group commits several revisions in one). The one-connection
//! figure also prints the CPU one call costs this process and the store's server backends (from
//! `/proc`, when the server runs on this machine), the figures `../shared/anchors` reports
//! for DBOS and LangGraph steps.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use agentroom_coordinator::{
    CollectingNotifier, Coordinator, CoordinatorConfig, InputId, Outcome, RunnerConfig,
};
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, MembershipChange, Proposal, ProposalKind, ReasonerResult,
    Verdict,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, PoolId, PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_ports::{Receipt, StoredRoom};
use agentroom_store_postgres::PgRooms;
use agentroom_workflows::{Abort, CallOutcome, Provider};
use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::floor;

/// The namespace of the bench's event ids.
const NAMESPACE: Uuid = Uuid::from_u128(0x6265_6e63_685f_6475_7261_626c_6500_0000);
/// What the no-op provider charges each call.
const CHARGED_MICROS: i64 = 400;
/// The runners' lease: far longer than any call here, so no heartbeat runs while measuring.
const LEASE: Duration = Duration::from_secs(30);
/// Messages posted on a Room before it is measured.
const WARMUP: usize = 50;

/// Options of `agentroom-bench durable`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// A PostgreSQL server (a role that may create databases); a fresh database is created
    /// and dropped.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// Owner messages (one durable call each) measured on one connection.
    #[arg(long, default_value_t = 1_000)]
    calls: usize,
    /// Messages per caller in the concurrent figures.
    #[arg(long, default_value_t = 200)]
    per_caller: usize,
    /// Revisions a Room is brought to before the "aged Room" figure.
    #[arg(long, default_value_t = 1_000)]
    aged_revisions: usize,
    /// Rounds of the interleaved figure: each measures the floor and then calls, so both see
    /// the same state of the machine (its fsync time drifts by tens of percent within minutes).
    #[arg(long, default_value_t = 10)]
    rounds: usize,
}

pub(crate) fn p(id: &str) -> anyhow::Result<PrincipalId> {
    PrincipalId::parse(id).with_context(|| format!("principal {id}"))
}

/// Answers at once: an ordinary answer charged 400 micros.
struct NoOp;

#[async_trait]
impl Provider for NoOp {
    async fn call(
        &self,
        request: &CallRequest,
        _context: &agentroom_ports::CallContext,
        _abort: Abort,
    ) -> CallOutcome {
        CallOutcome::Returned(Receipt {
            model: None,
            omitted: Vec::new(),
            charge: Charge::Actual(UsdMicros::new(CHARGED_MICROS)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                observed: request.observed,
                kind: ProposalKind::Answer {
                    text: "forty-two".to_owned(),
                },
            })),
        })
    }
}

/// The PostgreSQL store over a pool of at most `connections`, its connections named `app` so
/// that their server backends can be found (`pg_stat_activity.application_name`).
pub(crate) async fn store_on(
    url: &str,
    connections: u32,
    app: &str,
) -> anyhow::Result<Arc<PgRooms>> {
    let options = PgConnectOptions::from_str(url)
        .context("parsing the database URL")?
        .application_name(app);
    let pool = PgPoolOptions::new()
        .max_connections(connections)
        .connect_with(options)
        .await
        .with_context(|| format!("connecting the {app} pool"))?;
    let store = PgRooms::from_pool(pool)
        .await
        .context("opening the room store")?;
    Ok(Arc::new(store))
}

/// A coordinator over `store` running calls with the no-op provider: one host process.
fn coordinator(store: Arc<PgRooms>, config: CoordinatorConfig) -> Coordinator {
    Coordinator::builder(store, config)
        .provider(Arc::new(NoOp))
        .notifier(Arc::new(CollectingNotifier::new()))
        .build()
}

fn runner(name: &str) -> RunnerConfig {
    RunnerConfig::new(name, LEASE)
}

/// Creates the Room `name` (owner `olive`) and grants `oscar` the operator role through the
/// service, as `agentroom room create` and the drill do.
pub(crate) async fn create_room(coordinator: &Coordinator, name: &str) -> anyhow::Result<RoomId> {
    let state = RoomState::new(RoomSetup {
        room: RoomId::parse(name)?,
        owner: p("olive")?,
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: UsdMicros::new(1_000),
            specialist: UsdMicros::new(2_000),
            reviewer: UsdMicros::new(500),
        },
        limit: UsdMicros::new(1_000_000_000_000),
    })?;
    let room = state.room().clone();
    coordinator
        .create_room(&state)
        .await
        .with_context(|| format!("creating room {room}"))?;
    coordinator
        .change_membership(
            &room,
            InputId::named("bench-grant-oscar"),
            p("olive")?,
            p("oscar")?,
            Role::Operator,
            MembershipChange::Grant,
        )
        .await
        .with_context(|| format!("granting oscar the operator role in room {room}"))?;
    Ok(room)
}

/// A pool that never runs out while measuring (B8).
async fn create_pool(coordinator: &Coordinator, name: &str) -> anyhow::Result<PoolId> {
    let pool = PoolId::parse(name)?;
    coordinator
        .create_pool(&pool, UsdMicros::new(1_000_000_000_000))
        .await
        .with_context(|| format!("creating pool {pool}"))?;
    Ok(pool)
}

/// Makes `room` draw on `pool` (B8).
async fn attach(coordinator: &Coordinator, room: &RoomId, pool: &PoolId) -> anyhow::Result<()> {
    let outcome = coordinator
        .attach_pool(
            room,
            InputId::named(&format!("bench-attach-{room}")),
            Some(pool.clone()),
        )
        .await
        .with_context(|| format!("attaching room {room} to pool {pool}"))?;
    if outcome.log().iter().any(|l| l.verdict == Verdict::Rejected) {
        bail!("room {room} did not draw on pool {pool}: {outcome:?}");
    }
    Ok(())
}

/// Owner messages through one coordinator to one Room, each waited for until the Room is
/// quiet: persisted (T1), accepted with its call reserved (transaction 1), the call run and
/// settled with its receipt (transaction 2).
struct Poster {
    coordinator: Coordinator,
    room: RoomId,
    owner: PrincipalId,
    /// Who posts, distinct per poster on a Room, so that event ids never collide.
    caller: String,
    posted: u64,
    /// Whether each message waits until the coordinator is quiet (its call settled). A poster
    /// sharing its coordinator with others does not: the others' calls would hold it.
    settles: bool,
}

impl Poster {
    fn new(coordinator: Coordinator, room: RoomId, caller: &str) -> anyhow::Result<Self> {
        Ok(Self {
            coordinator,
            room,
            owner: p("olive")?,
            caller: caller.to_owned(),
            posted: 0,
            settles: true,
        })
    }

    async fn message(&mut self) -> anyhow::Result<()> {
        self.posted += 1;
        let n = self.posted;
        let id = format!("{}/{}/{n}", self.room, self.caller);
        let event = Event {
            id: EventId::from_uuid(Uuid::new_v5(&NAMESPACE, id.as_bytes())),
            room: self.room.clone(),
            author: self.owner.clone(),
            body: EventBody::OwnerMessage {
                text: format!("question {n}"),
            },
        };
        let outcome = self
            .coordinator
            .post(&event)
            .await
            .with_context(|| format!("posting message {id}"))?;
        if !matches!(outcome, Outcome::Decided { ref calls, .. } if calls.len() == 1) {
            bail!("owner message {id} reserved no reasoner call: {outcome:?}");
        }
        if self.settles {
            self.coordinator.wait_idle().await;
        }
        Ok(())
    }

    async fn room(&self) -> anyhow::Result<StoredRoom> {
        self.coordinator
            .room(&self.room)
            .await
            .with_context(|| format!("loading room {}", self.room))
    }
}

/// Where a Room stands: what the checks after a figure compare.
#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Commits so far: its revisions (each commit moves it by one) and the events persisted
    /// in a commit of their own (T1), not by the commit that accepted them.
    commits: i64,
    spent: i64,
    revision: i64,
}

async fn mark(store: &PgRooms, poster: &Poster) -> anyhow::Result<Mark> {
    let room = poster.room().await?;
    // Events persisted in a transaction of their own: not those the commit that accepted
    // them persisted (issue 21; the same transaction id on both rows).
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM room_events e WHERE e.room_id = $1 AND NOT EXISTS ( \
             SELECT 1 FROM room_history h \
             WHERE h.room_id = e.room_id AND h.event_id = e.event_id AND h.xmin = e.xmin)",
    )
    .bind(poster.room.as_str())
    .fetch_one(store.pool())
    .await
    .with_context(|| format!("counting the events of room {}", poster.room))?;
    // Issue 21 (group decisions): the transactions that wrote the Room's history rows, not
    // its revisions (a group commits several in one).
    let (transactions,): (i64,) =
        sqlx::query_as("SELECT count(DISTINCT xmin::text) FROM room_history WHERE room_id = $1")
            .bind(poster.room.as_str())
            .fetch_one(store.pool())
            .await
            .with_context(|| format!("counting the commits of room {}", poster.room))?;
    Ok(Mark {
        commits: transactions + events,
        spent: room.state.ledger().balances().spent.micros(),
        revision: room.revision.0,
    })
}

/// Checks that the `messages` posted between `before` and now each had their call answered
/// and settled with its receipt (charged, nothing left open), and returns the commits they
/// took.
async fn settled(
    store: &PgRooms,
    poster: &Poster,
    before: Mark,
    messages: usize,
) -> anyhow::Result<i64> {
    let after = mark(store, poster).await?;
    let open = poster.room().await?.state.operations().len();
    let expected = CHARGED_MICROS * i64::try_from(messages)?;
    if open > 0 || after.spent - before.spent != expected {
        bail!(
            "room {}: {open} calls open, {} micros charged for {messages} answers, not {expected}",
            poster.room,
            after.spent - before.spent
        );
    }
    Ok(after.commits - before.commits)
}

/// The server backends of the connections named `app`.
async fn backends(probe: &PgPool, app: &str) -> anyhow::Result<Vec<String>> {
    let pids: Vec<(i32,)> = sqlx::query_as(
        "SELECT pid FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1",
    )
    .bind(app)
    .fetch_all(probe)
    .await
    .with_context(|| format!("finding the backends of {app}"))?;
    if pids.is_empty() {
        bail!("no backend of {app} is connected");
    }
    Ok(pids.into_iter().map(|(pid,)| pid.to_string()).collect())
}

/// The CPU ticks `backends` spent so far, together.
fn backend_ticks(backends: &[String]) -> Option<u64> {
    backends.iter().map(|pid| crate::cpu_ticks(pid)).sum()
}

/// The server's WAL position, in bytes.
async fn lsn(pool: &sqlx::PgPool) -> anyhow::Result<i64> {
    let (lsn,): (i64,) = sqlx::query_as("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint")
        .fetch_one(pool)
        .await?;
    Ok(lsn)
}

/// How concurrent callers reach the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hosts {
    /// Each caller is its own coordinator, as separate host processes are: callers on one
    /// Room conflict by compare-and-swap and reload. Each message waits for its call to
    /// settle.
    OnePerCaller,
    /// Every caller posts through one coordinator, as the clients of one `serve` do: a Room's
    /// decisions are serialized by its actor. Each message waits for its decision (the POST's
    /// answer); the calls settle meanwhile and all have settled when the figure ends.
    One,
}

/// Calls per second with `callers` concurrent callers spread over `rooms` fresh Rooms, each
/// caller posting `per_caller` messages, and the commits each took.
pub(crate) async fn concurrent(
    url: &str,
    callers: usize,
    rooms: usize,
    per_caller: usize,
    pooled: bool,
    hosts: Hosts,
) -> anyhow::Result<(f64, f64)> {
    let store = store_on(
        url,
        u32::try_from(callers).unwrap_or(u32::MAX),
        "agentroom-bench-concurrent",
    )
    .await?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let setup = coordinator(
        Arc::clone(&store),
        CoordinatorConfig::new(runner("bench-setup")),
    );
    // B8: every Room draws on one pool, whose row each of their reservations and settlements
    // takes after the Room's.
    let pool = if pooled {
        Some(create_pool(&setup, &format!("pool-c{callers}-{stamp}")).await?)
    } else {
        None
    };
    let mut made = Vec::new();
    for r in 0..rooms {
        let room = create_room(&setup, &format!("c{callers}-r{r}-{stamp}")).await?;
        if let Some(pool) = &pool {
            attach(&setup, &room, pool).await?;
        }
        let poster = Poster::new(setup.clone(), room, "setup")?;
        let before = mark(&store, &poster).await?;
        made.push((poster, before));
    }
    // Callers on one Room conflict by design (compare-and-swap): let them reload.
    let config = |name: &str| {
        CoordinatorConfig::new(runner(name)).with_conflict_retries(1_000, Duration::from_millis(1))
    };
    let host = coordinator(Arc::clone(&store), config("bench-host"));
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..callers {
        let room = made[c % rooms].0.room.clone();
        let mut poster = match hosts {
            Hosts::OnePerCaller => Poster::new(
                coordinator(Arc::clone(&store), config(&format!("bench-{c}"))),
                room,
                &format!("caller-{c}"),
            )?,
            Hosts::One => {
                let mut poster = Poster::new(host.clone(), room, &format!("caller-{c}"))?;
                poster.settles = false;
                poster
            }
        };
        joins.push(tokio::spawn(async move {
            for _ in 0..per_caller {
                poster.message().await?;
            }
            anyhow::Ok(())
        }));
    }
    for join in joins {
        join.await??;
    }
    host.wait_idle().await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut commits = 0;
    for (r, (poster, before)) in made.iter().enumerate() {
        let on_room = (0..callers).filter(|c| c % rooms == r).count();
        commits += settled(&store, poster, *before, on_room * per_caller).await?;
    }
    // The coordinators' Room actors outlive this figure; their connections need not.
    store.close().await;
    let calls = (callers * per_caller) as f64;
    Ok((calls / elapsed, commits as f64 / calls))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // On a worker of the runtime, as the coordinator's Room actors run: the task that awaits
    // a statement is then woken by the worker that polled its socket, not across threads to
    // `block_on`'s.
    let args = args.clone();
    runtime.block_on(async move { tokio::spawn(async move { measure(&args).await }).await? })
}

async fn measure(args: &Args) -> anyhow::Result<()> {
    let (admin, name, url) =
        floor::create_db(&args.database_url, "agentroom_bench_durable").await?;
    let result = async {
        let pool = agentroom_store_postgres::migrate::connect(&url).await?;
        agentroom_store_postgres::migrate::up(&pool).await?;
        pool.close().await;
        let floor = floor::measure(&url, 200, 2_000).await?;
        let floor_us = percentile(&floor.one_connection_us, 0.5);
        let floor_cpu = |ticks: Option<u64>| {
            ticks.map(|t| round(t as f64 * crate::TICK_US / floor.one_connection_us.len() as f64))
        };
        let meta = json!({"bench": "durable_call", "backend": "postgres",
                          "raw_commit_floor_us_median": round(floor_us),
                          "raw_commit_floor_us_p99": round(percentile(&floor.one_connection_us, 0.99))});
        emit(&meta, json!({"figure": "raw_commit_floor",
            "client_cpu_us_per_commit": floor_cpu(floor.client_ticks),
            "server_backend_cpu_us_per_commit": floor_cpu(floor.backend_ticks)}));
        let pooled = floor::measure_pooled(&url, 200, 2_000).await?;
        emit(&meta, json!({"figure": "raw_commit_through_default_sqlx_pool",
            "us_median": round(percentile(&pooled.one_connection_us, 0.5)),
            "note": "sqlx's default pool pings a connection when it is acquired and again when it is released"}));
        // Reads the server's own views (backends, WAL position) beside the measured store.
        let probe = PgPoolOptions::new().max_connections(1).connect(&url).await?;

        // One connection, one Room, one coordinator.
        let app = "agentroom-bench-one";
        let store = store_on(&url, 1, app).await?;
        let service = coordinator(Arc::clone(&store), CoordinatorConfig::new(runner("bench-one")));
        let room = create_room(&service, "bench-one").await?;
        let mut one = Poster::new(service, room, "one")?;
        for _ in 0..WARMUP {
            one.message().await?;
        }
        let before = mark(&store, &one).await?;
        let store_backends = backends(&probe, app).await?;
        let cpu_before = (crate::cpu_ticks("self"), backend_ticks(&store_backends));
        let mut times = Vec::with_capacity(args.calls);
        for _ in 0..args.calls {
            let started = Instant::now();
            one.message().await?;
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let cpu_after = (crate::cpu_ticks("self"), backend_ticks(&store_backends));
        let commits = settled(&store, &one, before, args.calls).await?;
        let per_call = |before: Option<u64>, after: Option<u64>| {
            before
                .zip(after)
                .map(|(b, a)| round(a.saturating_sub(b) as f64 * crate::TICK_US / args.calls as f64))
        };
        let client_cpu = per_call(cpu_before.0, cpu_after.0);
        let backend_cpu = per_call(cpu_before.1, cpu_after.1);
        times.sort_by(f64::total_cmp);
        let median = percentile(&times, 0.5);
        emit(&meta, json!({"figure": "durable_call_one_connection", "calls": args.calls,
            "us_median": round(median), "us_p99": round(percentile(&times, 0.99)),
            "x_floor": round(median / floor_us * 100.0) / 100.0,
            "commits_per_call": round(commits as f64 / args.calls.max(1) as f64),
            "client_cpu_us_per_call": client_cpu, "server_backend_cpu_us_per_call": backend_cpu,
            "server_backends": store_backends.len(),
            "room_revision_at_end": one.room().await?.revision.0,
            "note": "owner messages through the Coordinator on a one-connection store (post + wait_idle): \
                     the event persisted (T1), transaction 1, the no-op call, transaction 2; \
                     this figure replaces owner_message_through_the_coordinator"}));

        // Interleaved: the floor and the messages, round after round, on the same Room.
        let mut floor_conn = sqlx::PgConnection::connect(&url).await?;
        let rounds = args.rounds.max(1);
        let mut ratios = Vec::with_capacity(rounds);
        let (mut floors, mut calls) = (Vec::new(), Vec::new());
        let before = mark(&store, &one).await?;
        for _ in 0..rounds {
            let round_floor = floor::commits(&mut floor_conn, 20, 200).await?;
            let mut round_calls = Vec::with_capacity(100);
            for _ in 0..100 {
                let started = Instant::now();
                one.message().await?;
                round_calls.push(started.elapsed().as_secs_f64() * 1e6);
            }
            round_calls.sort_by(f64::total_cmp);
            let (f, c) = (
                percentile(&round_floor.one_connection_us, 0.5),
                percentile(&round_calls, 0.5),
            );
            ratios.push(c / f);
            floors.push(f);
            calls.push(c);
        }
        floor_conn.close().await?;
        let commits = settled(&store, &one, before, rounds * 100).await?;
        for figures in [&mut ratios, &mut floors, &mut calls] {
            figures.sort_by(f64::total_cmp);
        }
        emit(&meta, json!({"figure": "durable_call_interleaved_with_floor",
            "rounds": rounds, "floor_commits_per_round": 200, "calls_per_round": 100,
            "commits_per_call": round(commits as f64 / (rounds * 100) as f64),
            "x_floor_median_of_rounds": round(percentile(&ratios, 0.5) * 100.0) / 100.0,
            "x_floor_min": ratios.first().map(|r| round(r * 100.0) / 100.0),
            "x_floor_max": ratios.last().map(|r| round(r * 100.0) / 100.0),
            "floor_us_median_of_rounds": round(percentile(&floors, 0.5)),
            "call_us_median_of_rounds": round(percentile(&calls, 0.5))}));

        // B8: rounds of 100 messages on a Room drawing on a pool and 100 on one that does
        // not, alternated on the same connection, so both see the same state of the machine.
        let (pool_service, plain_service) = (
            coordinator(Arc::clone(&store), CoordinatorConfig::new(runner("bench-pooled"))),
            coordinator(Arc::clone(&store), CoordinatorConfig::new(runner("bench-plain"))),
        );
        let pool = create_pool(&pool_service, "bench-one").await?;
        let pooled_room = create_room(&pool_service, "bench-pooled").await?;
        attach(&pool_service, &pooled_room, &pool).await?;
        let plain_room = create_room(&plain_service, "bench-plain").await?;
        let mut pooled = Poster::new(pool_service.clone(), pooled_room, "pooled")?;
        let mut plain = Poster::new(plain_service, plain_room, "plain")?;
        for _ in 0..WARMUP {
            pooled.message().await?;
            plain.message().await?;
        }
        let (pooled_before, plain_before) = (mark(&store, &pooled).await?, mark(&store, &plain).await?);
        let (mut with_pool, mut without) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            for (poster, times) in [(&mut pooled, &mut with_pool), (&mut plain, &mut without)] {
                for _ in 0..100 {
                    let started = Instant::now();
                    poster.message().await?;
                    times.push(started.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
        let pooled_commits = settled(&store, &pooled, pooled_before, rounds * 100).await?;
        settled(&store, &plain, plain_before, rounds * 100).await?;
        // The pool holds and charges what its Room does, and its log replays (B7, B8).
        let audit = pool_service.audit_pool(&pool).await?;
        let pool_spent = pool_service.pool(&pool).await?.ledger.balances().spent.micros();
        let room_spent = pooled.room().await?.state.ledger().balances().spent.micros();
        if !audit.replays || pool_spent != room_spent {
            bail!("pool {pool}: replays {}, spent {pool_spent}, its Room spent {room_spent}", audit.replays);
        }
        with_pool.sort_by(f64::total_cmp);
        without.sort_by(f64::total_cmp);
        let (m_pool, m_plain) = (percentile(&with_pool, 0.5), percentile(&without, 0.5));
        emit(&meta, json!({"figure": "durable_call_with_budget_pool",
            "rounds": rounds, "calls_each": rounds * 100,
            "us_median_with_pool": round(m_pool), "us_median_without": round(m_plain),
            "us_p99_with_pool": round(percentile(&with_pool, 0.99)),
            "us_p99_without": round(percentile(&without, 0.99)),
            "x_without": round(m_pool / m_plain * 100.0) / 100.0,
            "x_floor_with_pool": round(m_pool / floor_us * 100.0) / 100.0,
            "commits_per_call_with_pool": round(pooled_commits as f64 / (rounds * 100) as f64),
            "note": "one connection; alternating rounds of 100 messages on a Room drawing on a \
                     pool and on one that does not (B8: the pool's row moves in the Room's commit)"}));

        // The same Room, now aged: bring it to at least `aged_revisions`, then measure the
        // messages again and the WAL bytes each commit writes.
        let aged_revisions = i64::try_from(args.aged_revisions).unwrap_or(i64::MAX);
        while one.room().await?.revision.0 < aged_revisions {
            one.message().await?;
        }
        let aged_calls = 200.min(args.calls.max(1));
        let before = mark(&store, &one).await?;
        let start_lsn = lsn(&probe).await?;
        let mut aged = Vec::with_capacity(aged_calls);
        for _ in 0..aged_calls {
            let started = Instant::now();
            one.message().await?;
            aged.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let wal = lsn(&probe).await? - start_lsn;
        let commits = settled(&store, &one, before, aged_calls).await?;
        aged.sort_by(f64::total_cmp);
        let room = one.room().await?;
        let state_bytes = serde_json::to_vec(&room.state).map(|v| v.len()).unwrap_or(0);
        emit(&meta, json!({"figure": "durable_call_aged_room", "calls": aged_calls,
            "room_revision_at_start": before.revision, "state_json_bytes": state_bytes,
            "us_median": round(percentile(&aged, 0.5)),
            "x_floor": round(percentile(&aged, 0.5) / floor_us * 100.0) / 100.0,
            "commits_per_call": round(commits as f64 / aged_calls as f64),
            "wal_bytes_per_commit": if commits > 0 { wal / commits } else { 0 }}));
        store.close().await;
        probe.close().await;

        for callers in [8usize, 32] {
            let floor_tps = floor::throughput(&url, callers, args.per_caller).await?;
            for rooms in [1usize, callers] {
                let (tps, commits) =
                    concurrent(&url, callers, rooms, args.per_caller, false, Hosts::OnePerCaller).await?;
                emit(&meta, json!({"figure": "durable_calls_concurrent", "callers": callers,
                    "rooms": rooms, "calls_per_s": round(tps),
                    "commits_per_call": round(commits),
                    "raw_commits_per_s_same_connections": round(floor_tps),
                    "x_floor_throughput": round(floor_tps / tps * 100.0) / 100.0,
                    "note": "each caller its own Coordinator (a host process) over one shared pool"}));
            }
            // B8: the same callers, each on its own Room, every Room drawing on one pool.
            let (tps, commits) =
                concurrent(&url, callers, callers, args.per_caller, true, Hosts::OnePerCaller).await?;
            emit(&meta, json!({"figure": "durable_calls_concurrent_one_budget_pool",
                "callers": callers, "rooms": callers, "calls_per_s": round(tps),
                "commits_per_call": round(commits),
                "raw_commits_per_s_same_connections": round(floor_tps),
                "x_floor_throughput": round(floor_tps / tps * 100.0) / 100.0,
                "note": "every Room draws on one budget pool: each reservation and settlement \
                         also takes the pool's row, after the Room's (B8)"}));
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    floor::drop_db(&admin, &name).await?;
    result
}

fn emit(meta: &Value, figure: Value) {
    let mut line = meta.clone();
    if let (Value::Object(line), Value::Object(figure)) = (&mut line, figure) {
        line.extend(figure);
    }
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
    }
}
