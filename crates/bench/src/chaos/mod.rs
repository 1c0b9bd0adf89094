//! `agentroom-bench chaos` (issue 17, item 5): SIGKILLs of real `agentroom serve` processes at
//! random moments of a multi-objective workload, on SQLite (an embedded file under a fresh
//! `--root`) and on PostgreSQL (a fresh database per run), plus, on PostgreSQL, backend
//! terminations (`pg_terminate_backend`) at random moments and, with `cluster`, restarts and
//! crashes of a private cluster made with `initdb`/`pg_ctl`. After the last kill a final
//! `serve` recovers until the Room is quiet; then only invariants are checked, from the durable
//! store and the scripted agents' journal ([`invariants`]).
//!
//! Every random choice (each gap before a kill, whether and when a backend is terminated or
//! the cluster restarted) comes from one seeded generator per store; the seed is printed, so a
//! failing run can be replayed (timing still differs from run to run: the processes are real).
//!
//! The agents are scripted (`scenario.toml`): every objective is the same plan of two tasks and
//! one review, every reply repeats, and the scripted agents journal each execution before it
//! returns, which is what "no task executed twice" is checked against.
//!
//! The CI sample (`crates/cli/tests/chaos_sample.rs`) calls [`run`] itself, with a few kills.
#![allow(
    clippy::print_stderr,
    reason = "the harness reports its progress on stderr, as the bench does"
)]

mod cluster;
mod invariants;
pub(crate) mod process;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentroom_domain::ids::{EventId, RoomId};
use agentroom_domain::objective::ObjectiveStatus;
use agentroom_ports::OperationFilter;
use agentroom_store_postgres::PgRooms;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

pub use invariants::Findings;

use cluster::Cluster;
use invariants::Stores;
use process::{Place, Serve, ServeSpec, http};

/// The Room every run uses.
const ROOM: &str = "chaos";
/// The scripted agents every `serve` runs.
const SCENARIO: &str = include_str!("scenario.toml");
/// The shipped policies, written into each run's folder (so the binary works from anywhere).
pub(crate) const POLICIES: &[(&str, &str)] = &[
    ("room.toml", include_str!("../../../../policies/room.toml")),
    (
        "access.toml",
        include_str!("../../../../policies/access.toml"),
    ),
    (
        "prices.toml",
        include_str!("../../../../policies/prices.toml"),
    ),
    (
        "bindings.yaml",
        include_str!("../../../../policies/bindings.yaml"),
    ),
    (
        "capabilities/research.yaml",
        include_str!("../../../../policies/capabilities/research.yaml"),
    ),
    (
        "capabilities/writing.yaml",
        include_str!("../../../../policies/capabilities/writing.yaml"),
    ),
];
/// Far above what the run spends: no objective waits for money.
const LIMIT_MICROS: i64 = 1_000_000_000;
/// The lease of `serve`'s calls: short, so a restart waits little for a dead process's leases.
const LEASE_MS: u64 = 300;
/// How many times a `serve` that fails to start (e.g. while the cluster restarts) is tried.
const START_ATTEMPTS: u32 = 30;
/// How long an owner message is retried (connection refused, 5xx) before the step moves on.
const POST_ATTEMPTS: u32 = 100;

/// The store a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// An embedded SQLite file under a fresh `--root`.
    Sqlite,
    /// A fresh database on a PostgreSQL server.
    Postgres,
}

impl StoreKind {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

/// What a chaos run does.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `agentroom` binary (release or debug).
    pub agentroom: PathBuf,
    /// SIGKILLs of `serve` per store.
    pub kills: u32,
    /// The stores, run one after the other.
    pub stores: Vec<StoreKind>,
    /// The seed of every random choice.
    pub seed: u64,
    /// A PostgreSQL server on which this role may create databases (unused with `cluster`).
    pub database_url: String,
    /// Run PostgreSQL on a private cluster and restart or crash it at random moments.
    pub cluster: bool,
    /// Owner messages (objectives) posted over the run; `None`: 2 + kills / 3.
    pub objectives: Option<u32>,
    /// The longest gap before a kill, in milliseconds (each gap is uniform in 0..=this).
    pub max_gap_ms: u64,
    /// How long the final `serve` may take to make the Room quiet.
    pub patience: Duration,
    /// Keep the run's folder (and database) when an invariant failed.
    pub keep: bool,
    /// For the harness's own test only: before the checks, append a copy of the journal's
    /// first execution, as a process that ran a call again would have, so the test sees the
    /// checks catch a duplicate execution end to end.
    #[doc(hidden)]
    pub replay_one_execution: bool,
}

impl Config {
    /// A configuration with the harness's defaults.
    pub fn new(agentroom: PathBuf, kills: u32, stores: Vec<StoreKind>, seed: u64) -> Self {
        Self {
            agentroom,
            kills,
            stores,
            seed,
            database_url: "postgres://postgres@127.0.0.1:5432/postgres".to_owned(),
            cluster: false,
            objectives: None,
            max_gap_ms: 1_200,
            patience: Duration::from_secs(120),
            keep: false,
            replay_one_execution: false,
        }
    }
}

/// A seed from the clock and the process id, for runs that give none.
pub fn fresh_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Only the low bits vary between runs; keeping them is the point.
    #[allow(clippy::cast_possible_truncation)]
    let nanos = nanos as u64;
    nanos ^ (u64::from(std::process::id()) << 32)
}

/// SplitMix64: small, seedable, good enough to pick moments.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn upto(&mut self, max: u64) -> u64 {
        self.next() % max.saturating_add(1)
    }

    /// True with probability `1 / n`.
    fn one_in(&mut self, n: u64) -> bool {
        n > 0 && self.next().is_multiple_of(n)
    }
}

/// What one store's run did and found.
#[derive(Debug, Clone)]
pub struct StoreReport {
    /// The store.
    pub store: StoreKind,
    /// Its generator's seed.
    pub seed: u64,
    /// SIGKILLs of `serve`.
    pub kills: u32,
    /// Kills that landed while the Room held an open call (a reservation not yet settled:
    /// running, waiting or uncertain), as read from the store just before the signal; kills
    /// for which the store could not be read are not counted either way.
    pub kills_mid_call: u32,
    /// Kills for which the store could not be read just before the signal.
    pub kills_unprobed: u32,
    /// PostgreSQL backends terminated (`pg_terminate_backend`), and how many times.
    pub backends_terminated: i64,
    /// Rounds of terminations.
    pub terminations: u32,
    /// Restarts (fast) and crashes (immediate stop, start) of the private cluster.
    pub cluster_restarts: u32,
    /// Owner messages posted, and answered 2xx.
    pub messages_posted: usize,
    /// Owner messages answered 2xx.
    pub messages_accepted: usize,
    /// 5xx answers to the harness's requests (retried with the same Idempotency-Key).
    pub server_errors: u32,
    /// `serve` processes that failed to start (retried).
    pub start_failures: u32,
    /// `serve` processes that exited before the harness killed them.
    pub unexpected_exits: u32,
    /// Whether the final `serve` made the Room quiet in time, and how long it took.
    pub quiet_after: Option<Duration>,
    /// The invariants.
    pub findings: Findings,
    /// Wall time.
    pub duration: Duration,
    /// Where the run's files were kept (an invariant failed and `keep` was asked).
    pub kept: Option<String>,
}

impl StoreReport {
    /// Its JSON line.
    pub fn json(&self) -> Value {
        let f = &self.findings;
        json!({
            "store": self.store.name(),
            "seed": self.seed,
            "kills": self.kills,
            "kills_mid_call": self.kills_mid_call,
            "kills_unprobed": self.kills_unprobed,
            "backend_terminations": self.terminations,
            "backends_terminated": self.backends_terminated,
            "cluster_restarts": self.cluster_restarts,
            "messages_posted": self.messages_posted,
            "messages_accepted": self.messages_accepted,
            "server_errors_5xx": self.server_errors,
            "start_failures": self.start_failures,
            "unexpected_exits": self.unexpected_exits,
            "quiet_after_ms": self.quiet_after.map(|d| d.as_millis()),
            "objectives": f.objectives,
            "operations": f.operations,
            "operation_statuses": f.operation_statuses,
            "executions": f.executions,
            "revisions": f.revisions,
            "duplicate_executions": f.duplicate_executions,
            "lost_revisions": f.lost_revisions,
            "ledger_mismatches": f.ledger_mismatches,
            "unsettled_calls": f.unsettled_calls,
            "stuck_objectives": f.stuck_objectives,
            "violations": f.violations,
            "duration_ms": self.duration.as_millis(),
            "kept": self.kept,
        })
    }
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// One report per store.
    pub stores: Vec<StoreReport>,
    /// Wall time.
    pub duration: Duration,
}

impl Report {
    /// How many invariants failed, over every store.
    pub fn violations(&self) -> usize {
        self.stores
            .iter()
            .map(|s| s.findings.violations.len())
            .sum()
    }

    /// The summary line.
    pub fn json(&self) -> Value {
        json!({
            "figure": "chaos",
            "seed": self.seed,
            "kills": self.stores.iter().map(|s| s.kills).sum::<u32>(),
            "violations": self.violations(),
            "duration_ms": self.duration.as_millis(),
            "stores": self.stores.iter().map(StoreReport::json).collect::<Vec<_>>(),
        })
    }
}

/// Runs the harness on every store of `config`, one after the other.
pub fn run(config: &Config) -> anyhow::Result<Report> {
    let started = Instant::now();
    if !config.agentroom.is_file() {
        bail!(
            "no agentroom binary at {} (build it: cargo build --release -p agentroom-cli)",
            config.agentroom.display()
        );
    }
    eprintln!("chaos: seed {}", config.seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a tokio runtime")?;
    let mut stores = Vec::new();
    for store in &config.stores {
        let seed = match store {
            StoreKind::Sqlite => config.seed,
            StoreKind::Postgres => config.seed ^ 0x5047_5047_5047_5047,
        };
        let report = StoreRun::new(config, *store, seed, &runtime)?.run()?;
        eprintln!(
            "chaos: {}: {} kills, {} violations in {:.1?}",
            store.name(),
            report.kills,
            report.findings.violations.len(),
            report.duration
        );
        stores.push(report);
    }
    Ok(Report {
        seed: config.seed,
        stores,
        duration: started.elapsed(),
    })
}

/// A fresh database of a run (chaos, or the Room's path benches), dropped when the run is done
/// (unless kept).
pub(crate) struct Database {
    admin: String,
    pub(crate) name: String,
}

impl Database {
    /// Creates `PREFIX_<millis>_<pid>` through the server of `admin`.
    pub(crate) async fn create(admin: &str, prefix: &str) -> anyhow::Result<Database> {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = format!("{prefix}_{millis}_{}", std::process::id());
        let mut connection = PgConnection::connect(admin)
            .await
            .with_context(|| format!("connecting to {admin}"))?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .with_context(|| format!("CREATE DATABASE {name} through {admin}"))?;
        Ok(Database {
            admin: admin.to_owned(),
            name,
        })
    }

    /// Its URL: the admin URL with this database's name.
    pub(crate) fn url(&self) -> anyhow::Result<String> {
        let (server, rest) = self
            .admin
            .rsplit_once('/')
            .ok_or_else(|| anyhow!("the database URL has no database part: {}", self.admin))?;
        let query = rest.find('?').map_or("", |at| &rest[at..]);
        Ok(format!("{server}/{}{query}", self.name))
    }

    /// Terminates every backend on this database but the harness's own; how many.
    async fn terminate_backends(&self) -> anyhow::Result<i64> {
        let mut connection = PgConnection::connect(&self.admin).await?;
        let (terminated,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()) AS t",
        )
        .bind(&self.name)
        .fetch_one(&mut connection)
        .await?;
        Ok(terminated)
    }

    /// `DROP DATABASE … WITH (FORCE)`.
    pub(crate) async fn drop_it(&self) -> anyhow::Result<()> {
        let mut connection = PgConnection::connect(&self.admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut connection)
        .await?;
        Ok(())
    }
}

/// One store's run.
struct StoreRun<'a> {
    config: &'a Config,
    runtime: &'a tokio::runtime::Runtime,
    rng: Rng,
    dir: tempfile::TempDir,
    spec: ServeSpec,
    owner: String,
    database: Option<Database>,
    /// Declared after `database`, so a kept database is dropped before its cluster stops.
    cluster: Option<Cluster>,
    report: StoreReport,
    accepted: Vec<EventId>,
    /// The store as the harness reads it between kills (opened again after a failure).
    probe: Option<Box<dyn Stores>>,
}

impl<'a> StoreRun<'a> {
    fn new(
        config: &'a Config,
        store: StoreKind,
        seed: u64,
        runtime: &'a tokio::runtime::Runtime,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("agentroom-chaos-{}-", store.name()))
            .tempdir()
            .context("a folder for the run")?;
        let policies = write_policies(dir.path())?;
        let scenario = dir.path().join("scenario.toml");
        std::fs::write(&scenario, SCENARIO)?;
        let (place, database, cluster) = match store {
            StoreKind::Sqlite => (Place::Sqlite(dir.path().join("root")), None, None),
            StoreKind::Postgres => {
                let cluster = if config.cluster {
                    Some(Cluster::start()?)
                } else {
                    None
                };
                let admin = cluster
                    .as_ref()
                    .map_or_else(|| config.database_url.clone(), Cluster::url);
                let database = runtime.block_on(Database::create(&admin, "agentroom_chaos"))?;
                let url = database.url()?;
                process::run(
                    &config.agentroom,
                    None,
                    &["migrate", "up", "--database-url", &url],
                )?;
                (Place::Postgres(url), Some(database), cluster)
            }
        };
        let owner = create_room(&config.agentroom, &place, ROOM, &policies)?;
        let spec = ServeSpec {
            binary: config.agentroom.clone(),
            place,
            room: Some(ROOM.to_owned()),
            policies,
            scenario,
            journal: dir.path().join("scripted-journal.jsonl"),
            journal_synced: true,
            log: dir.path().join("serve.log"),
            lease_ms: LEASE_MS,
            poll_ms: 50,
            recover_every: 4,
        };
        Ok(Self {
            config,
            runtime,
            rng: Rng(seed),
            dir,
            spec,
            owner,
            database,
            cluster,
            report: StoreReport {
                store,
                seed,
                kills: 0,
                kills_mid_call: 0,
                kills_unprobed: 0,
                backends_terminated: 0,
                terminations: 0,
                cluster_restarts: 0,
                messages_posted: 0,
                messages_accepted: 0,
                server_errors: 0,
                start_failures: 0,
                unexpected_exits: 0,
                quiet_after: None,
                findings: Findings::default(),
                duration: Duration::ZERO,
                kept: None,
            },
            accepted: Vec::new(),
            probe: None,
        })
    }

    /// `serve`, tried again while it fails to start.
    fn start(&mut self) -> anyhow::Result<Serve> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            match self.spec.start() {
                Ok(serve) => return Ok(serve),
                Err(err) => {
                    self.report.start_failures += 1;
                    last = Some(err);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        Err(last
            .unwrap_or_else(|| anyhow!("serve never started"))
            .context(format!(
                "serve did not start {START_ATTEMPTS} times; its log: {}",
                self.spec.log.display()
            )))
    }

    /// A `serve` that still runs: the same one, or a new one if it exited on its own.
    fn alive(&mut self, mut serve: Serve) -> anyhow::Result<Serve> {
        if serve.exited() {
            self.report.unexpected_exits += 1;
            eprintln!(
                "chaos: {}: serve exited on its own (see {})",
                self.report.store.name(),
                self.spec.log.display()
            );
            drop(serve);
            return self.start();
        }
        Ok(serve)
    }

    /// Posts owner message `n` (`Idempotency-Key: chaos-message-n`) until it is answered 2xx;
    /// a refusal (4xx) is a violation.
    fn post(&mut self, mut serve: Serve, n: u32) -> anyhow::Result<Serve> {
        self.report.messages_posted += 1;
        let body = json!({
            "kind": "owner_message",
            "text": format!("Objective {n}: summarize how durable agent runtimes recover from crashes, with sources."),
        })
        .to_string();
        let key = format!("chaos-message-{n}");
        let bearer = format!("Bearer {}", self.owner);
        for _ in 0..POST_ATTEMPTS {
            serve = self.alive(serve)?;
            let answer = http(
                serve.address,
                "POST",
                &format!("/v1/rooms/{ROOM}/events"),
                &[("Authorization", &bearer), ("Idempotency-Key", &key)],
                &body,
            );
            match answer {
                Ok((status, body)) if (200..300).contains(&status) => {
                    let value: Value = serde_json::from_str(&body)
                        .with_context(|| format!("the answer to a message: {body}"))?;
                    let id = value["event"]
                        .as_str()
                        .and_then(|id| id.parse().ok())
                        .ok_or_else(|| anyhow!("no event id in {body}"))?;
                    self.accepted.push(id);
                    self.report.messages_accepted += 1;
                    return Ok(serve);
                }
                Ok((status, _)) if status >= 500 => self.report.server_errors += 1,
                Ok((status, body)) => {
                    self.report.findings.violations.push(format!(
                        "owner message {n} was refused with {status}: {body}"
                    ));
                    return Ok(serve);
                }
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.report.findings.violations.push(format!(
            "owner message {n} was never answered 2xx in {POST_ATTEMPTS} attempts"
        ));
        Ok(serve)
    }

    /// Waits `gap`, doing on the way the PostgreSQL faults the generator picks.
    fn gap(&mut self, gap: Duration) -> anyhow::Result<()> {
        let at = Duration::from_millis(self.rng.upto(u64::try_from(gap.as_millis())?));
        let terminate = self.database.is_some() && self.rng.one_in(3);
        let restart = self.cluster.is_some() && self.rng.one_in(10);
        let crash = self.rng.one_in(2);
        std::thread::sleep(at);
        if terminate && let Some(database) = &self.database {
            match self.runtime.block_on(database.terminate_backends()) {
                Ok(n) => {
                    self.report.terminations += 1;
                    self.report.backends_terminated += n;
                }
                Err(err) => eprintln!("chaos: terminating backends failed: {err:#}"),
            }
        }
        if restart && let Some(cluster) = &self.cluster {
            if crash {
                cluster.crash_and_start()?;
            } else {
                cluster.restart_fast()?;
            }
            self.report.cluster_restarts += 1;
        }
        std::thread::sleep(gap.saturating_sub(at));
        Ok(())
    }

    fn run(mut self) -> anyhow::Result<StoreReport> {
        let started = Instant::now();
        let name = self.report.store.name();
        let kills = self.config.kills;
        let objectives = self.config.objectives.unwrap_or(2 + kills / 3);
        eprintln!(
            "chaos: {name}: {kills} kills, {objectives} objectives, seed {}, in {}",
            self.report.seed,
            self.dir.path().display()
        );
        let mut serve = self.start()?;
        let mut next = 0;
        for kill in 0..kills {
            // Message n is posted before kill n·kills/objectives: spread over the run.
            while next < objectives
                && u64::from(next) * u64::from(kills) / u64::from(objectives) <= u64::from(kill)
            {
                serve = self.post(serve, next)?;
                next += 1;
            }
            let gap = Duration::from_millis(self.rng.upto(self.config.max_gap_ms));
            self.gap(gap)?;
            serve = self.alive(serve)?;
            match self.runtime.block_on(self.open_calls()) {
                Some(0) => {}
                Some(_) => self.report.kills_mid_call += 1,
                None => self.report.kills_unprobed += 1,
            }
            serve.kill()?;
            self.report.kills += 1;
            if (kill + 1) % 10 == 0 {
                eprintln!(
                    "chaos: {name}: {} kills, {} messages accepted, {:.0?}",
                    kill + 1,
                    self.report.messages_accepted,
                    started.elapsed()
                );
            }
            serve = self.start()?;
        }
        while next < objectives {
            serve = self.post(serve, next)?;
            next += 1;
        }
        // Recovery: the last serve runs until the Room is quiet.
        let recovering = Instant::now();
        let quiet = self.runtime.block_on(self.wait_quiet(&mut serve))?;
        self.report.quiet_after = quiet.then(|| recovering.elapsed());
        serve.stop(Duration::from_secs(15))?;
        if self.config.replay_one_execution {
            replay_first_execution(&self.spec.journal)?;
        }
        let store = self.runtime.block_on(open(&self.spec.place))?;
        let room = RoomId::parse(ROOM)?;
        let findings = self.runtime.block_on(invariants::check(
            &*store,
            &room,
            &self.spec.journal,
            &self.accepted,
        ))?;
        drop(store);
        let mut run_level = std::mem::take(&mut self.report.findings.violations);
        self.report.findings = findings;
        if !quiet {
            run_level.push(format!(
                "the Room was not quiet {:?} after the last kill",
                self.config.patience
            ));
        }
        self.report.findings.violations.extend(run_level);
        self.report.duration = started.elapsed();
        let violated = self.report.findings.violated();
        if violated && self.config.keep {
            let kept = self.dir.keep();
            let database = self.database.take();
            self.report.kept = Some(match (&database, &self.spec.place) {
                (Some(db), _) => format!("{} (database {})", kept.display(), db.url()?),
                _ => kept.display().to_string(),
            });
            if let Some(cluster) = self.cluster.take() {
                // A private cluster cannot outlive the run; its database goes with it.
                drop(cluster);
            }
        } else if let Some(database) = self.database.take()
            && let Err(err) = self.runtime.block_on(database.drop_it())
        {
            eprintln!("chaos: dropping {} failed: {err:#}", database.name);
        }
        Ok(self.report)
    }

    /// Polls the store until the Room is quiet: every accepted message taken up, nothing open,
    /// no objective planning or running. False after `patience`.
    /// How many calls the Room holds open now (`None`: the store could not be read; it is
    /// opened again next time).
    async fn open_calls(&mut self) -> Option<usize> {
        if self.probe.is_none() {
            self.probe = open(&self.spec.place).await.ok();
        }
        let room = RoomId::parse(ROOM).ok()?;
        let loaded = self.probe.as_ref()?.load(&room).await;
        match loaded {
            Ok(stored) => Some(stored.map_or(0, |s| s.state.operations().len())),
            Err(_) => {
                self.probe = None;
                None
            }
        }
    }

    async fn wait_quiet(&mut self, serve: &mut Serve) -> anyhow::Result<bool> {
        let deadline = Instant::now() + self.config.patience;
        let room = RoomId::parse(ROOM)?;
        let mut store: Option<Box<dyn Stores>> = None;
        while Instant::now() < deadline {
            if serve.exited() {
                self.report.unexpected_exits += 1;
                *serve = self.start()?;
            }
            if store.is_none() {
                store = open(&self.spec.place).await.ok();
            }
            if let Some(opened) = &store {
                match quiet(&**opened, &room, self.accepted.len()).await {
                    Ok(true) => return Ok(true),
                    Ok(false) => {}
                    // A terminated backend or a restarted cluster: open it again.
                    Err(_) => store = None,
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(false)
    }
}

/// Appends a copy of the journal's first line ([`Config::replay_one_execution`]).
fn replay_first_execution(journal: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let text = std::fs::read_to_string(journal)?;
    let first = text
        .lines()
        .next()
        .ok_or_else(|| anyhow!("the journal is empty: nothing ran"))?;
    let mut file = std::fs::OpenOptions::new().append(true).open(journal)?;
    writeln!(file, "{first}")?;
    Ok(())
}

/// The run's store, opened as another process would.
async fn open(place: &Place) -> anyhow::Result<Box<dyn Stores>> {
    Ok(match place {
        Place::Postgres(url) => Box::new(PgRooms::connect(url).await?),
        Place::Sqlite(root) => Box::new(SqliteRooms::open(
            &root.join("planning.db"),
            Durability::ProcessCrash,
        )?),
    })
}

async fn quiet(store: &dyn Stores, room: &RoomId, accepted: usize) -> anyhow::Result<bool> {
    let Some(stored) = store.load(room).await? else {
        return Ok(false);
    };
    let state = &stored.state;
    let closed = store.all_objective_records(room).await?.len();
    Ok(state.operations().is_empty()
        && store.operations(OperationFilter::Open).await?.is_empty()
        && store.unaccepted_events(room, 1).await?.is_empty()
        && state.intake().values().all(|i| i.held().is_some())
        // Closed objectives that left the live state count: they were accepted.
        && state.objectives().len() + closed + state.intake().len() >= accepted
        && state.objectives().iter().all(|o| {
            !matches!(
                o.status(),
                ObjectiveStatus::Planning | ObjectiveStatus::Running
            )
        }))
}

/// Writes the shipped policies into `DIR/policies` (so the binary works from anywhere); that
/// folder.
pub(crate) fn write_policies(dir: &Path) -> anyhow::Result<PathBuf> {
    let policies = dir.join("policies");
    std::fs::create_dir_all(policies.join("capabilities"))?;
    for (file, text) in POLICIES {
        std::fs::write(policies.join(file), text)?;
    }
    Ok(policies)
}

/// `agentroom room create` of `room` on `place`: owner olive, operator oscar, specialists sam
/// (research) and sue (writing), reviewer rita, a budget far above what a run spends; the
/// owner's bearer token.
pub(crate) fn create_room(
    agentroom: &Path,
    place: &Place,
    room: &str,
    policies: &Path,
) -> anyhow::Result<String> {
    let limit = LIMIT_MICROS.to_string();
    let policies = policies.display().to_string();
    let create = [
        "room",
        "create",
        "--room",
        room,
        "--owner",
        "olive",
        "--model",
        "scripted",
        "--member",
        "oscar=operator",
        "--member",
        "sam=specialist",
        "--member",
        "sue=specialist",
        "--member",
        "rita=reviewer",
        "--limit-micros",
        &limit,
        "--policies",
        &policies,
    ];
    let created = process::run(agentroom, Some(place), &create)?;
    Ok(created
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .ok_or_else(|| anyhow!("room create printed no owner token: {created}"))?
        .trim()
        .to_owned())
}

/// The `agentroom` binary next to `bench` (the same target folder), if there is one.
pub fn sibling_agentroom(bench: &Path) -> Option<PathBuf> {
    let candidate = bench.parent()?.join("agentroom");
    candidate.is_file().then_some(candidate)
}
