//! The Room's path end to end (issue 21, item 6): owner messages posted over the REST API of a
//! real `agentroom serve` on PostgreSQL, played to their end by instant scripted agents, and
//! measured from outside: the process's CPU and memory from `/proc`, the POST's latency from
//! this client, the Room's state size and the server's write transactions from the database.
//!
//! Each run makes a fresh database on `--database-url` (dropped at the end unless `--keep`), a
//! temporary folder with the shipped policies and the run's scenario, and one Room made with
//! `agentroom room create`, all with the chaos harness's helpers ([`crate::chaos`]). `serve`
//! runs with its own defaults (30 s leases, a pass over the store every 200 ms, recovery every
//! 10 passes), as a host would run it.
//!
//! While it waits for an objective, the bench polls the database with small indexed reads only
//! (the Room's history rows after the last it saw, its open operations, its undelivered
//! notifications): they cost the server a little CPU, never `serve`, and assign no transaction
//! id, so they neither show in `serve`'s CPU nor in the write commits counted ([`Host::xmax`]).
//!
//! - [`aging`]: one Room, objective after objective: `serve`'s CPU, the POST's latency, its
//!   memory and the Room's state size at the 1st, 10th, 100th, … objective.
//! - [`room`]: an objective of N sequential tasks plus review: write commits and µs per task
//!   next to the raw commit floor of the same run.
#![allow(
    clippy::print_stderr,
    reason = "the benches report their progress on stderr, as the binary does"
)]

pub mod aging;
pub mod room;

/// Where a Room's-path bench runs, the same for each of them.
#[derive(Debug, Clone, clap::Args)]
pub struct Where {
    /// A PostgreSQL server where this role may create databases (a fresh one per run).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub database_url: String,
    /// The `agentroom` binary to run (default: the one next to this binary).
    #[arg(long, value_name = "PATH")]
    pub agentroom: Option<PathBuf>,
    /// Keep the run's folder and database.
    #[arg(long)]
    pub keep: bool,
}

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::chaos::process::{self, Place, Serve, ServeSpec, http};
use crate::chaos::{Database, create_room, sibling_agentroom, write_policies};

/// The Room a run starts with.
const ROOM: &str = "bench";
/// The decision-log line of a review that completes its objective (`agentroom_domain`'s
/// reviews: "every criterion met: objective completed").
const COMPLETED: &str = "every criterion met: objective completed";
/// `serve`'s own default lease: no call here comes near it, so no heartbeat runs.
const LEASE_MS: u64 = 30_000;
/// `serve`'s own default time between passes over the store.
const POLL_MS: u64 = 200;
/// `serve`'s own default: recovery every this many passes.
const RECOVER_EVERY: u32 = 10;
/// Two of `serve`'s passes: long enough for it to find a Room created while it runs.
pub(crate) const SETTLE: Duration = Duration::from_millis(2 * POLL_MS);

/// The `agentroom` binary: `explicit`, or the one next to this binary.
pub fn agentroom_binary(explicit: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    let binary = match explicit {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|bench| sibling_agentroom(&bench))
            .ok_or_else(|| {
                anyhow!("no agentroom binary next to this one: pass --agentroom PATH")
            })?,
    };
    if !binary.is_file() {
        bail!(
            "no agentroom binary at {} (build it: cargo build --release -p agentroom-cli)",
            binary.display()
        );
    }
    Ok(binary)
}

/// A running `serve` on a fresh PostgreSQL database with one Room, and a connection that
/// watches the Room from the database.
pub(crate) struct Host {
    pub(crate) runtime: tokio::runtime::Runtime,
    dir: Option<tempfile::TempDir>,
    database: Option<Database>,
    pub(crate) url: String,
    spec: ServeSpec,
    serve: Option<Serve>,
    /// The Room messages are posted to, and its owner's token.
    room: String,
    owner: String,
    probe: PgConnection,
    /// The last history revision [`Host::completions`] read.
    seen_revision: i64,
    /// Objectives completed so far, by the decision log.
    completed: u64,
    /// Messages posted so far (each its own Idempotency-Key).
    posted: u64,
}

/// One POST of an owner message.
pub(crate) struct Posted {
    /// Its latency, from connecting to the whole answer read.
    pub(crate) latency: Duration,
    /// When it was sent.
    pub(crate) at: Instant,
}

impl Host {
    /// Creates the database (`PREFIX_<millis>_<pid>`) on the server of `admin_url`, migrates
    /// it, writes the policies and `scenario` into a temporary folder, creates the Room
    /// `bench` and starts `serve` with the scripted agents playing `scenario`, coordinating
    /// that Room alone or, with `every_room`, every Room on the store (so that
    /// [`Host::new_room`] may add more).
    pub(crate) fn start(
        agentroom: PathBuf,
        admin_url: &str,
        prefix: &str,
        scenario: &str,
        every_room: bool,
    ) -> anyhow::Result<Host> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("a tokio runtime")?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir()
            .context("a folder for the run")?;
        let policies = write_policies(dir.path())?;
        let scenario_path = dir.path().join("scenario.toml");
        std::fs::write(&scenario_path, scenario)?;
        let database = runtime.block_on(Database::create(admin_url, prefix))?;
        let url = database.url()?;
        let probe = match runtime.block_on(PgConnection::connect(&url)) {
            Ok(probe) => probe,
            Err(err) => {
                runtime.block_on(database.drop_it())?;
                return Err(err).with_context(|| format!("connecting to {url}"));
            }
        };
        // From here on the database is the host's: its Drop drops it on any failure.
        let mut host = Host {
            url,
            probe,
            runtime,
            database: Some(database),
            spec: ServeSpec {
                binary: agentroom,
                place: Place::Postgres(String::new()),
                room: (!every_room).then(|| ROOM.to_owned()),
                policies,
                scenario: scenario_path,
                journal: dir.path().join("scripted-journal.jsonl"),
                // Instant agents: their journal survives SIGKILL, not power loss, so the
                // figures are the Room's path, not the agents' own fsync.
                journal_synced: false,
                log: dir.path().join("serve.log"),
                lease_ms: LEASE_MS,
                poll_ms: POLL_MS,
                recover_every: RECOVER_EVERY,
            },
            dir: Some(dir),
            serve: None,
            room: ROOM.to_owned(),
            owner: String::new(),
            seen_revision: 0,
            completed: 0,
            posted: 0,
        };
        host.spec.place = Place::Postgres(host.url.clone());
        let url = host.url.clone();
        process::run(
            &host.spec.binary,
            None,
            &["migrate", "up", "--database-url", &url],
        )?;
        host.owner = create_room(
            &host.spec.binary,
            &host.spec.place,
            ROOM,
            &host.spec.policies,
        )?;
        host.serve = Some(host.spec.start()?);
        Ok(host)
    }

    /// Creates Room `room` (as `bench` was) while `serve` runs, and posts to it from now on;
    /// only for a host started with `every_room`.
    pub(crate) fn new_room(&mut self, room: &str) -> anyhow::Result<()> {
        if self.spec.room.is_some() {
            bail!("serve coordinates one Room only: start it with every_room");
        }
        self.owner = create_room(
            &self.spec.binary,
            &self.spec.place,
            room,
            &self.spec.policies,
        )?;
        self.room = room.to_owned();
        self.seen_revision = 0;
        self.completed = 0;
        Ok(())
    }

    /// Where the run's files are (the serve log, the journal).
    pub(crate) fn folder(&self) -> String {
        self.dir
            .as_ref()
            .map_or_else(String::new, |d| d.path().display().to_string())
    }

    /// `serve`'s process id, as `/proc` names it.
    pub(crate) fn pid(&self) -> anyhow::Result<String> {
        self.serve
            .as_ref()
            .map(|s| s.pid().to_string())
            .ok_or_else(|| anyhow!("serve is not running"))
    }

    /// Posts the next owner message (Idempotency-Key `bench-message-N`); an error unless it
    /// is answered 2xx.
    pub(crate) fn post(&mut self, text: &str) -> anyhow::Result<Posted> {
        let serve = self
            .serve
            .as_mut()
            .ok_or_else(|| anyhow!("serve is not running"))?;
        if serve.exited() {
            bail!("serve exited on its own (see {})", self.spec.log.display());
        }
        self.posted += 1;
        let body = json!({"kind": "owner_message", "text": text}).to_string();
        let key = format!("bench-message-{}", self.posted);
        let bearer = format!("Bearer {}", self.owner);
        let at = Instant::now();
        let (status, answer) = http(
            serve.address,
            "POST",
            &format!("/v1/rooms/{}/events", self.room),
            &[("Authorization", &bearer), ("Idempotency-Key", &key)],
            &body,
        )
        .with_context(|| format!("posting owner message {}", self.posted))?;
        let latency = at.elapsed();
        if !(200..300).contains(&status) {
            bail!(
                "owner message {} was answered {status}: {answer}",
                self.posted
            );
        }
        Ok(Posted { latency, at })
    }

    /// Objectives completed so far: the decision log's completions, read from the history
    /// rows committed since the last call (one indexed range read).
    pub(crate) fn completions(&mut self) -> anyhow::Result<u64> {
        let (last, completed): (Option<i64>, i64) = self.runtime.block_on(
            sqlx::query_as(
                "SELECT max(revision), count(*) FILTER (WHERE log::text LIKE $3) \
                 FROM room_history WHERE room_id = $1 AND revision > $2",
            )
            .bind(&self.room)
            .bind(self.seen_revision)
            .bind(format!("%{COMPLETED}%"))
            .fetch_one(&mut self.probe),
        )?;
        if let Some(last) = last {
            self.seen_revision = last;
        }
        self.completed += u64::try_from(completed)?;
        Ok(self.completed)
    }

    /// Waits until `objectives` objectives have completed, polling every `every`; when, or an
    /// error after `patience` (naming the last decisions, so a stuck objective shows why).
    pub(crate) fn wait_completed(
        &mut self,
        objectives: u64,
        every: Duration,
        patience: Duration,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + patience;
        loop {
            if self.completions()? >= objectives {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                let last = self.last_decisions(5).unwrap_or_default();
                bail!(
                    "objective {objectives} did not complete within {patience:?} \
                     (serve's log: {}); the last decisions: {last}",
                    self.spec.log.display()
                );
            }
            if self.serve.as_mut().is_some_and(Serve::exited) {
                bail!("serve exited on its own (see {})", self.spec.log.display());
            }
            std::thread::sleep(every);
        }
    }

    /// Waits until the Room holds no open operation and every notification is delivered
    /// (the trailing write commits of an objective are done); an error after `patience`.
    pub(crate) fn wait_quiet(&mut self, patience: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + patience;
        loop {
            let (open, undelivered): (i64, i64) = self.runtime.block_on(
                sqlx::query_as(
                    "SELECT (SELECT count(*) FROM operations WHERE room_id = $1 \
                             AND status NOT IN ('applied', 'resolved')), \
                            (SELECT count(*) FROM outbox WHERE room_id = $1 \
                             AND delivered_at IS NULL)",
                )
                .bind(&self.room)
                .fetch_one(&mut self.probe),
            )?;
            if open == 0 && undelivered == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the Room was not quiet within {patience:?}: {open} open operations, \
                     {undelivered} undelivered notifications"
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The last `n` decision-log lines of the Room, for an error message.
    fn last_decisions(&mut self, n: i64) -> anyhow::Result<String> {
        let rows: Vec<(i64, String)> = self.runtime.block_on(
            sqlx::query_as(
                "SELECT revision, log::text FROM room_history WHERE room_id = $1 \
                 ORDER BY revision DESC LIMIT $2",
            )
            .bind(&self.room)
            .bind(n)
            .fetch_all(&mut self.probe),
        )?;
        Ok(rows
            .into_iter()
            .rev()
            .map(|(revision, log)| format!("r{revision}: {log}"))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// The next transaction id the server will assign: `pg_snapshot_xmax` of a fresh
    /// snapshot, read in a transaction that assigns none.
    ///
    /// PostgreSQL assigns a transaction id only to a transaction that writes (a read-only
    /// transaction, however many statements, keeps a virtual id), so between two reads of
    /// this value, taken while no transaction is in progress, its advance is the number of
    /// write transactions the server began, committed or not. The bench's own probes (this
    /// read, the polls) only read, so there is nothing of the bench's to subtract. The count
    /// is the whole server's: another database's writes in the window (or an autovacuum's
    /// ANALYZE) add to it, never take away, so a figure is the median of rounds and its
    /// minimum is printed too.
    pub(crate) fn xmax(&mut self) -> anyhow::Result<i64> {
        let (xmax,): (i64,) = self.runtime.block_on(
            sqlx::query_as("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
                .fetch_one(&mut self.probe),
        )?;
        Ok(xmax)
    }

    /// The CPU time every backend of the bench's database but the probe's spent so far, in
    /// nanoseconds (`/proc/<pid>/task/*/schedstat`: the server runs on this machine): what
    /// PostgreSQL itself spends on serve's statements. A backend that exited takes its time
    /// with it (serve keeps its connections); `None` where `/proc` does not show them.
    pub(crate) fn backends_ns(&mut self) -> anyhow::Result<Option<u64>> {
        let pids: Vec<(i32,)> = self.runtime.block_on(
            sqlx::query_as(
                "SELECT pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_all(&mut self.probe),
        )?;
        Ok(pids
            .iter()
            .map(|(pid,)| crate::procfs::cpu_ns(&pid.to_string()))
            .sum())
    }

    /// The server's WAL position in bytes (the whole server's, as [`Host::xmax`]).
    pub(crate) fn wal_lsn(&mut self) -> anyhow::Result<i64> {
        let (lsn,): (i64,) = self.runtime.block_on(
            sqlx::query_as("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint")
                .fetch_one(&mut self.probe),
        )?;
        Ok(lsn)
    }

    /// Transactions other databases of the server committed or rolled back so far
    /// (`pg_stat_database`, which backends report up to a second late): a check that the
    /// server-wide counts of a run are this run's.
    pub(crate) fn other_databases_xacts(&mut self) -> anyhow::Result<i64> {
        let (n,): (Option<i64>,) = self.runtime.block_on(
            sqlx::query_as(
                "SELECT sum(xact_commit + xact_rollback)::bigint FROM pg_stat_database \
                 WHERE datname IS DISTINCT FROM current_database()",
            )
            .fetch_one(&mut self.probe),
        )?;
        Ok(n.unwrap_or(0))
    }

    /// The Room's state as stored: its revision, the size of its latest snapshot (the whole
    /// state at that revision, as the committer measured it and as PostgreSQL stores it)
    /// and the delta bytes committed since.
    pub(crate) fn state_size(&mut self) -> anyhow::Result<StateSize> {
        let (revision, snapshot_bytes, since, stored): (i64, i64, i64, Option<i32>) =
            self.runtime.block_on(
                sqlx::query_as(
                    "SELECT r.revision, r.snapshot_bytes, r.bytes_since_snapshot, \
                            (SELECT octet_length(s.state::text) FROM room_snapshots s \
                             WHERE s.room_id = r.room_id AND s.revision = r.snapshot_revision) \
                     FROM rooms r WHERE r.room_id = $1",
                )
                .bind(&self.room)
                .fetch_one(&mut self.probe),
            )?;
        Ok(StateSize {
            revision,
            snapshot_bytes,
            bytes_since_snapshot: since,
            snapshot_octets: stored.map(i64::from),
        })
    }

    /// The server backends of this database's connections but the probe's.
    pub(crate) fn backends(&mut self) -> anyhow::Result<Vec<String>> {
        let pids: Vec<(i32,)> = self.runtime.block_on(
            sqlx::query_as(
                "SELECT pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_all(&mut self.probe),
        )?;
        Ok(pids.into_iter().map(|(pid,)| pid.to_string()).collect())
    }

    /// Stops `serve` (SIGTERM), drops the database and the folder, unless `keep`: then says
    /// where they are.
    pub(crate) fn finish(mut self, keep: bool) -> anyhow::Result<()> {
        if let Some(serve) = self.serve.take() {
            serve.stop(Duration::from_secs(15))?;
        }
        let database = self.database.take();
        let dir = self.dir.take();
        if keep {
            if let Some(dir) = dir {
                eprintln!("kept: {}", dir.keep().display());
            }
            if let Some(database) = database {
                eprintln!("kept: database {}", database.url()?);
            }
            return Ok(());
        }
        if let Some(database) = database {
            // WITH (FORCE) ends the probe's session too.
            self.runtime.block_on(database.drop_it())?;
        }
        Ok(())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // A failed run: serve is killed (Serve's own Drop); the database goes too.
        drop(self.serve.take());
        if let Some(database) = self.database.take()
            && let Err(err) = self.runtime.block_on(database.drop_it())
        {
            eprintln!("dropping database {} failed: {err:#}", database.name);
        }
    }
}

/// The Room's state size as stored ([`Host::state_size`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateSize {
    pub(crate) revision: i64,
    pub(crate) snapshot_bytes: i64,
    pub(crate) bytes_since_snapshot: i64,
    pub(crate) snapshot_octets: Option<i64>,
}

impl StateSize {
    fn json(&self) -> Value {
        json!({
            "revision": self.revision,
            "snapshot_bytes": self.snapshot_bytes,
            "bytes_since_snapshot": self.bytes_since_snapshot,
            "snapshot_octet_length": self.snapshot_octets,
        })
    }
}

/// The median of `values` (NaN for none).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// `x` to `places` decimals, for printing.
pub(crate) fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// `a / b` to two decimals, or null when `b` is not positive.
pub(crate) fn ratio(a: f64, b: f64) -> Value {
    if b > 0.0 && a.is_finite() {
        json!(round(a / b, 2))
    } else {
        Value::Null
    }
}
