//! `agentroom-bench`: measures agentroom's performance figures and prints one JSON line per
//! figure on stdout (progress on stderr). Figures are compared as ratios against baselines
//! measured on the same machine in the same sitting (../shared/peers, ../shared/anchors),
//! never asserted in tests.
// Printing figures is this binary's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod callers;
mod durable;
mod idle;
mod planning;
mod recovery;

use agentroom_bench::floor;
use agentroom_bench::procfs::{TICK_US, cpu_ticks};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "agentroom-bench", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The planning messages: task/add rate through `handle` and through the stdio
    /// transport; board and filtered-list latency at 100,000 tasks.
    Planning(planning::Args),
    /// Durable call overhead on PostgreSQL next to the raw commit floor of the same run.
    Durable(durable::Args),
    /// Random SIGKILLs of real `agentroom serve` processes (and, on PostgreSQL, backend
    /// terminations and cluster restarts) under a multi-objective workload, then the
    /// invariants checked from the durable store; exits 1 on any violation.
    Chaos(ChaosArgs),
    /// One Room through a real `agentroom serve` on PostgreSQL, objective after objective:
    /// serve's CPU per objective, the owner message's POST latency, serve's RSS and the
    /// Room's state size at the 1st, 10th, 100th, … objective, and the last over the first.
    Aging(agentroom_bench::path::aging::Args),
    /// An objective of N sequential tasks plus review through a real `agentroom serve` on
    /// PostgreSQL: write commits and µs per task next to the raw commit floor of the same run.
    Room(agentroom_bench::path::room::Args),
    /// Write transactions per second of a host process whose calls all wait (PostgreSQL):
    /// one heartbeat per process per interval, whatever the calls in flight.
    Idle(idle::Args),
    /// 8 and 32 concurrent callers on one Room and on as many Rooms (PostgreSQL), through one
    /// coordinator and through one per caller, beside the raw commit throughput of as many
    /// connections.
    Callers(callers::Args),
    /// A host with N calls in flight over M Rooms is SIGKILLed and `agentroom serve` starts
    /// on what it left (PostgreSQL): its first `/health` answer, every call classified, ready.
    Recovery(recovery::Args),
    /// The host `recovery` kills (run by it).
    #[command(hide = true)]
    RecoveryFill(recovery::FillArgs),
}

/// Which stores `chaos` runs on.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StoreChoice {
    Sqlite,
    Postgres,
    Both,
}

/// Options of `agentroom-bench chaos`.
#[derive(Debug, Clone, clap::Args)]
struct ChaosArgs {
    /// SIGKILLs of `serve` per store.
    #[arg(long, default_value_t = 100)]
    kills: u32,
    /// The stores to run on, one after the other.
    #[arg(long, value_enum, default_value = "both")]
    store: StoreChoice,
    /// The seed of every random choice (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// A PostgreSQL server where this role may create databases (a fresh one per run).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    database_url: String,
    /// Run PostgreSQL on a private cluster (initdb, pg_ctl) and restart or crash it at random
    /// moments too.
    #[arg(long)]
    cluster: bool,
    /// The `agentroom` binary to run (default: the one next to this binary).
    #[arg(long, value_name = "PATH")]
    agentroom: Option<std::path::PathBuf>,
    /// Owner messages (objectives) per store (default: 2 + kills / 3).
    #[arg(long)]
    objectives: Option<u32>,
    /// The longest gap before a kill, in milliseconds.
    #[arg(long, default_value_t = 1_200)]
    max_gap_ms: u64,
    /// How long the last `serve` may take to make the Room quiet, in seconds.
    #[arg(long, default_value_t = 120)]
    patience_s: u64,
    /// Keep a failed run's folder and database to look at.
    #[arg(long)]
    keep: bool,
}

fn chaos(args: &ChaosArgs) -> anyhow::Result<()> {
    use agentroom_bench::chaos::{self, Config, StoreKind};
    let agentroom = match &args.agentroom {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|bench| chaos::sibling_agentroom(&bench))
            .ok_or_else(|| {
                anyhow::anyhow!("no agentroom binary next to this one: pass --agentroom PATH")
            })?,
    };
    let stores = match args.store {
        StoreChoice::Sqlite => vec![StoreKind::Sqlite],
        StoreChoice::Postgres => vec![StoreKind::Postgres],
        StoreChoice::Both => vec![StoreKind::Sqlite, StoreKind::Postgres],
    };
    let seed = args.seed.unwrap_or_else(chaos::fresh_seed);
    let mut config = Config::new(agentroom, args.kills, stores, seed);
    config.database_url.clone_from(&args.database_url);
    config.cluster = args.cluster;
    config.objectives = args.objectives;
    config.max_gap_ms = args.max_gap_ms;
    config.patience = std::time::Duration::from_secs(args.patience_s);
    config.keep = args.keep;
    let report = chaos::run(&config)?;
    for store in &report.stores {
        eprintln!("{}", human(store));
    }
    println!("{}", report.json());
    if report.violations() > 0 {
        eprintln!(
            "chaos: {} violations (seed {}): see `violations` above",
            report.violations(),
            report.seed
        );
        std::process::exit(1);
    }
    Ok(())
}

/// One store's report for people.
fn human(store: &agentroom_bench::chaos::StoreReport) -> String {
    let f = &store.findings;
    let mut text = format!(
        "{}: {} SIGKILLs, {} backend terminations ({} backends), {} cluster restarts; \
         objectives {:?}; {} executions, {} operations, {} revisions; \
         duplicate executions {}, lost revisions {}, ledger mismatches {}, unsettled calls {}, \
         stuck objectives {}; 5xx answers {}, start failures {}, unexpected exits {}; \
         quiet after {:?}; {:.1?}",
        store.store.name(),
        store.kills,
        store.terminations,
        store.backends_terminated,
        store.cluster_restarts,
        f.objectives,
        f.executions,
        f.operations,
        f.revisions,
        f.duplicate_executions,
        f.lost_revisions,
        f.ledger_mismatches,
        f.unsettled_calls,
        f.stuck_objectives,
        store.server_errors,
        store.start_failures,
        store.unexpected_exits,
        store.quiet_after,
        store.duration,
    );
    for violation in &f.violations {
        text.push_str(&format!("\n  VIOLATION: {violation}"));
    }
    text
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Planning(args) => planning::run(&args),
        Command::Durable(args) => durable::run(&args),
        Command::Chaos(args) => chaos(&args),
        Command::Aging(args) => agentroom_bench::path::aging::run(&args),
        Command::Room(args) => agentroom_bench::path::room::run(&args),
        Command::Idle(args) => idle::run(&args),
        Command::Callers(args) => callers::run(&args),
        Command::Recovery(args) => recovery::run(&args),
        Command::RecoveryFill(args) => recovery::fill(&args),
    }
}
