//! Durable call overhead on PostgreSQL (DESIGN.md "A durable call, step by step"):
//! transaction 1 (state + reservation + operation row + lease), a no-op provider, transaction
//! 2 (fenced receipt + settled state), each figure printed next to the raw commit floor this
//! binary measures against the same server in the same run. The one-connection figure also
//! prints the CPU one call costs this process and its server backend (from `/proc`, when the
//! server runs on this machine), the figures `../shared/anchors` reports for DBOS and
//! LangGraph steps.

use std::sync::{Arc, Mutex};

use sqlx::Connection;
use sqlx::postgres::PgPoolOptions;
use std::time::{Duration, Instant};

use agentroom_coordinator::{CollectingNotifier, Coordinator, CoordinatorConfig, Outcome};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallRequest, CallResult, Charge, Decision, Env, Input, InputError, MembershipChange, Proposal,
    ProposalKind, ReasonerResult, decide,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{DerivedIds, EventId, PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_ports::{Clock, Commit, Receipt, RoomStore, StoredRoom, SystemClock};
use agentroom_store_postgres::PgRooms;
use agentroom_workflows::{
    Abort, CallEnd, CallOutcome, Decider, DurableCall, Provider, RunnerConfig,
};
use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::floor;

/// Options of `agentroom-bench durable`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// A PostgreSQL server (a role that may create databases); a fresh database is created
    /// and dropped.
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
    /// Durable calls measured on one connection.
    #[arg(long, default_value_t = 1_000)]
    calls: usize,
    /// Calls per caller in the concurrent figures.
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

fn p(id: &str) -> anyhow::Result<PrincipalId> {
    Ok(PrincipalId::parse(id)?)
}

/// Decides with ids derived from the input's position in this decider's namespace.
struct BenchDecider {
    namespace: u128,
    inputs: Mutex<u128>,
    catalog: MemoryCatalog,
    clock: SystemClock,
}

impl BenchDecider {
    fn new(namespace: u128) -> Self {
        Self {
            namespace,
            inputs: Mutex::new(0),
            catalog: MemoryCatalog::new(),
            clock: SystemClock,
        }
    }

    fn next(&self) -> u128 {
        let mut inputs = self
            .inputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *inputs += 1;
        *inputs
    }

    fn message(&self, room: &RoomId) -> anyhow::Result<Input> {
        let n = self.next();
        Ok(Input::EventAccepted(Event {
            id: EventId::from_uuid(Uuid::from_u128(self.namespace ^ (n << 32) ^ 0xe7e7)),
            room: room.clone(),
            author: p("olive")?,
            body: EventBody::OwnerMessage {
                text: format!("question {n}"),
            },
        }))
    }
}

impl Decider for BenchDecider {
    fn decide(&self, state: &RoomState, input: Input) -> Result<Decision, InputError> {
        let n = self.next();
        let mut ids = DerivedIds::new(Uuid::from_u128(self.namespace ^ (n << 64)));
        let mut env = Env {
            now: self.clock.now(),
            ids: &mut ids,
            catalog: &self.catalog,
        };
        decide(state, input, &mut env)
    }
}

/// Answers at once: an ordinary answer charged 400 micros.
struct NoOp;

#[async_trait]
impl Provider for NoOp {
    async fn call(&self, request: &CallRequest, _abort: Abort) -> CallOutcome {
        CallOutcome::Returned(Receipt {
            model: None,
            charge: Charge::Actual(UsdMicros::new(400)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                observed: request.observed,
                kind: ProposalKind::Answer {
                    text: "forty-two".to_owned(),
                },
            })),
        })
    }
}

async fn create_room(
    store: &PgRooms,
    name: &str,
    decider: &BenchDecider,
) -> anyhow::Result<StoredRoom> {
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
    let revision = store.create(&state, SystemClock.now()).await?;
    let decision = decider.decide(
        &state,
        Input::ChangeMembership {
            by: p("olive")?,
            principal: p("oscar")?,
            role: Role::Operator,
            change: MembershipChange::Grant,
        },
    )?;
    let commit = Commit::decided(
        state.room(),
        &state,
        &decision,
        SystemClock.now(),
        "change_membership",
        None,
    );
    let revision = store.commit(state.room(), revision, commit).await?;
    Ok(StoredRoom {
        state: decision.state,
        revision,
    })
}

/// One durable call on `room`; returns the Room after it. Reloads and decides again when
/// another caller moved the Room first.
async fn one_call(
    store: &PgRooms,
    decider: &BenchDecider,
    config: &RunnerConfig,
    mut room: StoredRoom,
) -> anyhow::Result<(StoredRoom, u32)> {
    let clock = SystemClock;
    let durable = DurableCall::new(store, &NoOp, decider, &clock, config);
    let mut conflicts = 0;
    loop {
        let input = decider.message(room.state.room())?;
        let decision = decider.decide(&room.state, input)?;
        match durable.run(&room, &decision, "event_accepted").await {
            Ok(outcome) => {
                let Some(done) = outcome.calls.into_iter().next() else {
                    bail!("the decision reserved no call");
                };
                if done.end != CallEnd::Applied {
                    bail!("a durable call ended {:?}", done.end);
                }
                let Some(after) = done.room else {
                    bail!("transaction 2 left no Room");
                };
                return Ok((after, conflicts));
            }
            Err(agentroom_workflows::WorkflowError::Conflict { .. }) => {
                conflicts += 1;
                let Some(stored) = store.load(room.state.room()).await? else {
                    bail!("the Room vanished");
                };
                room = stored;
            }
            Err(other) => return Err(other.into()),
        }
    }
}

/// Owner messages through the product's own path, the coordinator on `store`: each is
/// persisted (T1), accepted with its reasoner call reserved and leased (transaction 1), the
/// no-op provider answers, and the receipt is committed with the settling decision
/// (transaction 2). Per-message latencies (µs, sorted) and the Room revisions each took.
async fn through_coordinator(store: PgRooms, messages: usize) -> anyhow::Result<(Vec<f64>, f64)> {
    let store = Arc::new(store);
    let coordinator = Coordinator::builder(
        store.clone(),
        CoordinatorConfig::new(RunnerConfig::new(
            "bench-coordinator",
            Duration::from_secs(30),
        )),
    )
    .provider(Arc::new(NoOp))
    .notifier(Arc::new(CollectingNotifier::new()))
    .build();
    let decider = BenchDecider::new(0xc00d_1a7e);
    let room = create_room(&store, "bench-coordinator", &decider).await?;
    let id = room.state.room().clone();
    let started_at = room.revision.0;
    let mut times = Vec::with_capacity(messages);
    for n in 0..messages + 20 {
        let Input::EventAccepted(event) = decider.message(&id)? else {
            bail!("the bench's message is an event");
        };
        let started = Instant::now();
        let outcome = coordinator.post(&event).await?;
        coordinator.wait_idle().await;
        let elapsed = started.elapsed().as_secs_f64() * 1e6;
        if !matches!(outcome, Outcome::Decided { ref calls, .. } if calls.len() == 1) {
            bail!("an owner message reserved no reasoner call: {outcome:?}");
        }
        if n >= 20 {
            times.push(elapsed);
        }
    }
    let Some(after) = store.load(&id).await? else {
        bail!("the Room vanished");
    };
    times.sort_by(f64::total_cmp);
    let revisions = (after.revision.0 - started_at) as f64 / (messages + 20) as f64;
    Ok((times, revisions))
}

/// The server's WAL position, in bytes.
async fn lsn(pool: &sqlx::PgPool) -> anyhow::Result<i64> {
    let (lsn,): (i64,) = sqlx::query_as("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint")
        .fetch_one(pool)
        .await?;
    Ok(lsn)
}

/// Calls per second with `callers` concurrent callers spread over `rooms` fresh Rooms, each
/// caller doing `per_caller` durable calls (reloading and deciding again on conflicts).
async fn concurrent(
    url: &str,
    callers: usize,
    rooms: usize,
    per_caller: usize,
) -> anyhow::Result<f64> {
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(callers).unwrap_or(u32::MAX))
        .connect(url)
        .await?;
    let store = Arc::new(PgRooms::from_pool(pool).await?);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let mut made = Vec::new();
    for r in 0..rooms {
        let decider = BenchDecider::new(
            0xc0ff_0000 ^ (u128::from(u32::try_from(r).unwrap_or(0)) << 16) ^ stamp,
        );
        made.push(create_room(&store, &format!("c{callers}-r{r}-{stamp}"), &decider).await?);
    }
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..callers {
        let store = Arc::clone(&store);
        let room = made[c % rooms].clone();
        joins.push(tokio::spawn(async move {
            let decider = BenchDecider::new(
                0xca11_0000_0000 ^ (u128::from(u32::try_from(c).unwrap_or(0)) << 20) ^ stamp,
            );
            // Callers on one Room conflict by design (compare-and-swap); let them reload.
            let config = RunnerConfig::new(format!("bench-{c}"), Duration::from_secs(30))
                .with_conflict_retries(1_000);
            let mut room = room;
            for _ in 0..per_caller {
                // A conflict reloads inside one_call; nothing else moves a caller's own Room.
                room = one_call(&store, &decider, &config, room).await?.0;
            }
            anyhow::Ok(())
        }));
    }
    for join in joins {
        join.await??;
    }
    Ok((callers * per_caller) as f64 / started.elapsed().as_secs_f64())
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

        // One connection, one Room.
        let one = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&url).await?;
        let store = PgRooms::from_pool(one).await.context("opening the room store")?;
        let decider = BenchDecider::new(0xbe7c_0001);
        let config = RunnerConfig::new("bench", Duration::from_secs(30));
        let mut room = create_room(&store, "bench-one", &decider).await?;
        for _ in 0..50 {
            room = one_call(&store, &decider, &config, room).await?.0;
        }
        // The backend of the connection the store's commits run on (not the pool's).
        let (backend,): (i32,) = sqlx::query_as(
            "SELECT pid FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
               AND query LIKE 'WITH cas AS%' LIMIT 1",
        )
        .fetch_one(store.pool())
        .await
        .context("finding the backend of the store's commits")?;
        let cpu_before = (crate::cpu_ticks("self"), crate::cpu_ticks(&backend.to_string()));
        let mut times = Vec::with_capacity(args.calls);
        for _ in 0..args.calls {
            let started = Instant::now();
            room = one_call(&store, &decider, &config, room).await?.0;
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let cpu_after = (crate::cpu_ticks("self"), crate::cpu_ticks(&backend.to_string()));
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
            "client_cpu_us_per_call": client_cpu, "server_backend_cpu_us_per_call": backend_cpu,
            "room_revision_at_end": room.revision.0}));

        // The product's own path: owner messages through the coordinator.
        let through = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&url).await?;
        let through = PgRooms::from_pool(through).await.context("opening the room store")?;
        let messages = args.calls.min(1_000);
        let (times, revisions) = through_coordinator(through, messages).await?;
        let median = percentile(&times, 0.5);
        emit(&meta, json!({"figure": "owner_message_through_the_coordinator", "messages": messages,
            "us_median": round(median), "us_p99": round(percentile(&times, 0.99)),
            "x_floor": round(median / floor_us * 100.0) / 100.0,
            "room_revisions_per_message": round(revisions),
            "note": "persist the event (T1), then transaction 1, the no-op call and transaction 2: three commits"}));

        // Interleaved: the floor and the call, round after round, on the same Room.
        let mut floor_conn = sqlx::PgConnection::connect(&url).await?;
        let rounds = args.rounds.max(1);
        let mut ratios = Vec::with_capacity(rounds);
        let (mut floors, mut calls) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let round_floor = floor::commits(&mut floor_conn, 20, 200).await?;
            let mut round_calls = Vec::with_capacity(100);
            for _ in 0..100 {
                let started = Instant::now();
                room = one_call(&store, &decider, &config, room).await?.0;
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
        for figures in [&mut ratios, &mut floors, &mut calls] {
            figures.sort_by(f64::total_cmp);
        }
        emit(&meta, json!({"figure": "durable_call_interleaved_with_floor",
            "rounds": rounds, "floor_commits_per_round": 200, "calls_per_round": 100,
            "x_floor_median_of_rounds": round(percentile(&ratios, 0.5) * 100.0) / 100.0,
            "x_floor_min": ratios.first().map(|r| round(r * 100.0) / 100.0),
            "x_floor_max": ratios.last().map(|r| round(r * 100.0) / 100.0),
            "floor_us_median_of_rounds": round(percentile(&floors, 0.5)),
            "call_us_median_of_rounds": round(percentile(&calls, 0.5))}));

        // The same Room, now aged: bring it to at least `aged_revisions`, then measure the
        // call again and the WAL bytes each commit writes.
        while room.revision.0 < i64::try_from(args.aged_revisions).unwrap_or(i64::MAX) {
            room = one_call(&store, &decider, &config, room).await?.0;
        }
        let probe = PgPoolOptions::new().max_connections(1).connect(&url).await?;
        let aged_calls = 200.min(args.calls.max(1));
        let start_lsn = lsn(&probe).await?;
        let start_revision = room.revision.0;
        let mut aged = Vec::with_capacity(aged_calls);
        for _ in 0..aged_calls {
            let started = Instant::now();
            room = one_call(&store, &decider, &config, room).await?.0;
            aged.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let wal = lsn(&probe).await? - start_lsn;
        let commits = room.revision.0 - start_revision;
        aged.sort_by(f64::total_cmp);
        let state_bytes = serde_json::to_vec(&room.state).map(|v| v.len()).unwrap_or(0);
        emit(&meta, json!({"figure": "durable_call_aged_room", "calls": aged_calls,
            "room_revision_at_start": start_revision, "state_json_bytes": state_bytes,
            "us_median": round(percentile(&aged, 0.5)),
            "x_floor": round(percentile(&aged, 0.5) / floor_us * 100.0) / 100.0,
            "wal_bytes_per_commit": if commits > 0 { wal / commits } else { 0 }}));

        for callers in [8usize, 32] {
            let floor_tps = floor::throughput(&url, callers, args.per_caller).await?;
            for rooms in [1usize, callers] {
                let tps = concurrent(&url, callers, rooms, args.per_caller).await?;
                emit(&meta, json!({"figure": "durable_calls_concurrent", "callers": callers,
                    "rooms": rooms, "calls_per_s": round(tps),
                    "raw_commits_per_s_same_connections": round(floor_tps),
                    "x_floor_throughput": round(floor_tps / tps * 100.0) / 100.0}));
            }
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
