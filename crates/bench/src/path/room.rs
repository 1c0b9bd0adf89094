//! `agentroom-bench room` (issue 21, item 6): one objective of N sequential tasks plus review
//! through a real `agentroom serve` on PostgreSQL, with instant scripted agents: write commits
//! and µs per task, next to the raw commit floor ([`crate::floor`]) measured on the same
//! database in the same run.
//!
//! The scenario is written for the run ([`scenario`]): the reasoner plans `t01 → t02 → … →
//! report`, each task depending on the one before (N - 1 research tasks for sam and the report
//! for sue: a plan has exactly one report task), and rita approves the report. Each round
//! measures the floor (one-connection autocommit inserts, [`crate::floor::commits`]) and then
//! one objective, so both see the same state of the machine; every figure is the median of
//! rounds, after one objective of warm-up.
//!
//! Each round runs on a fresh Room (created while `serve` runs, which then coordinates every
//! Room on the store), so the figure is an objective's own; `--one-room` runs them all on
//! the warm-up's Room, which shows what the objectives a Room held add to the next.
//!
//! - µs per task: the objective's wall time, from sending the owner message to its completion
//!   in the decision log (polled every millisecond), over N.
//! - write commits per task: the transaction ids the server assigned from just before the
//!   POST to the moment the Room is quiet again (no open operation, every notification
//!   delivered), over N — see [`super::Host::xmax`] for why that counts write transactions
//!   and nothing of the bench's. Room commits (revisions) per task are printed beside it.
//! - the ratio µs per task / floor µs per commit, per round, and its median.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use super::{Host, agentroom_binary, median, ratio, round};
use crate::floor;
use crate::procfs::{TICK_US, cpu_ns, cpu_ticks};

/// How often the bench looks for the objective's completion.
const POLL: Duration = Duration::from_millis(1);
/// Floor commits before the measured ones, each round.
const FLOOR_WARMUP: usize = 20;

/// Options of `agentroom-bench room`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Tasks in the objective's plan, each depending on the one before; the last is the
    /// report.
    #[arg(long, default_value_t = 50)]
    pub tasks: usize,
    /// Measured rounds (each: the floor, then one objective); figures are their medians.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Run every round on the one Room of the warm-up instead of a fresh Room per round:
    /// shows what each objective the Room has held adds to the next. (A contribution's
    /// content is kept by the commit that settles its task, so its write commits are those of
    /// a fresh Room.)
    #[arg(long)]
    pub one_room: bool,
    /// Floor commits measured per round.
    #[arg(long, default_value_t = 200)]
    pub floor_commits: usize,
    /// How long one objective may take to complete, in seconds.
    #[arg(long, default_value_t = 300)]
    pub patience_s: u64,
    /// Where and with what it runs.
    #[command(flatten)]
    pub place: super::Where,
}

/// The scripted agents of a run of `tasks` tasks: one plan `t01 → … → t(N-1) → report`
/// (research for sam, the report for sue), every reply repeating and answering at once, and
/// rita approving.
pub fn scenario(tasks: usize) -> anyhow::Result<String> {
    if tasks < 2 {
        bail!("--tasks must be at least 2 (one research task and the report)");
    }
    let key = |i: usize| format!("t{i:02}");
    let mut s = String::from(
        "# Written by agentroom-bench room: one plan of sequential tasks, instant agents.\n\
         description = \"room: one plan of sequential tasks, one approving review\"\n\n\
         [room]\nowner = \"olive\"\nlimit_micros = 1_000_000_000\n\
         members = { oscar = [\"operator\"], sam = [\"specialist\"], sue = [\"specialist\"], \
         rita = [\"reviewer\"] }\nbindings = { research = \"sam\", writing = \"sue\" }\n\n\
         [[reasoner]]\nrepeat = true\ncharge_micros = 2_100\n[reasoner.reply]\nkind = \"plan\"\n\
         explanation = \"Each step builds on the one before; the report closes the chain.\"\n\
         criteria = [{ id = \"cites-sources\", text = \"every claim cites a source\" }]\n",
    );
    for i in 1..tasks {
        writeln!(
            s,
            "[[reasoner.reply.tasks]]\nkey = \"{}\"\ntitle = \"Step {i} of the chain\"\n\
             capability = \"research\"\nkind = \"production\"\n\
             inputs = {{ topic = \"step {i} of crash recovery in durable agent runtimes\" }}",
            key(i)
        )?;
        if i > 1 {
            writeln!(s, "deps = [\"{}\"]", key(i - 1))?;
        }
    }
    writeln!(
        s,
        "[[reasoner.reply.tasks]]\nkey = \"report\"\ntitle = \"Write the sourced summary\"\n\
         capability = \"writing\"\nkind = \"report\"\ndeps = [\"{}\"]\n",
        key(tasks - 1)
    )?;
    for i in 1..tasks {
        writeln!(
            s,
            "[[specialist]]\ntask = \"{}\"\nprincipal = \"sam\"\nrepeat = true\n\
             charge_micros = 3_400\n\
             artifacts = [{{ name = \"notes\", content = \"Step {i}: runtimes journal each step \
             and replay only what has no receipt.\" }}]\n\
             sources = [{{ kind = \"external\", url = \"https://example.org/durable-recovery\", \
             digest = \"sha256:f848b5c5faa537795590541cef27232e6cdfcca35ee858f4fa3e539c9fca4f65\" }}]\n",
            key(i)
        )?;
    }
    s.push_str(
        "[[specialist]]\ntask = \"report\"\nprincipal = \"sue\"\nrepeat = true\n\
         charge_micros = 2_800\ncite_deps = true\n\
         artifacts = [{ name = \"report\", content = \"Durable runtimes journal each step and \
         never replay a step with a receipt.\" }]\n\n\
         [[reviewer]]\nreport_version = 1\nprincipal = \"rita\"\nrepeat = true\n\
         charge_micros = 1_200\n\
         verdicts = [{ criterion = \"cites-sources\", verdict = \"met\", \
         evidence = \"every step cites the one before and an external source\" }]\n",
    );
    Ok(s)
}

/// What one round measured.
struct Round {
    floor_us: f64,
    us_per_task: f64,
    xids_per_task: f64,
    revisions_per_task: f64,
    wal_bytes_per_task: f64,
    serve_cpu_us_per_task: Option<f64>,
    serve_cpu_us_per_task_schedstat: Option<f64>,
    /// PostgreSQL's own CPU per task: every backend of the database (serve's connections).
    postgres_cpu_us_per_task: Option<f64>,
    /// PostgreSQL's own CPU per floor commit (the floor connection's backend).
    floor_postgres_cpu_us: Option<f64>,
}

/// Runs the figure and prints its JSON line.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let tasks = args.tasks;
    let text = scenario(tasks)?;
    let agentroom = agentroom_binary(args.place.agentroom.as_ref())?;
    let mut host = Host::start(
        agentroom,
        &args.place.database_url,
        "agentroom_bench_room",
        &text,
        !args.one_room,
    )?;
    eprintln!(
        "room: {tasks} sequential tasks + review, {} rounds on {}; run folder {}",
        args.rounds,
        if args.one_room {
            "one Room"
        } else {
            "a fresh Room each"
        },
        host.folder()
    );
    let pid = host.pid()?;
    let patience = Duration::from_secs(args.patience_s);
    let mut floor_conn = host
        .runtime
        .block_on(PgConnection::connect(&host.url))
        .context("the floor's connection")?;
    let (floor_backend,): (i32,) = host
        .runtime
        .block_on(sqlx::query_as("SELECT pg_backend_pid()").fetch_one(&mut floor_conn))?;
    let floor_backend = floor_backend.to_string();

    // Warm-up: one objective, unmeasured; then what an idle serve writes.
    objective(&mut host, 1, patience)?;
    host.wait_quiet(patience)?;
    let mut objectives = 1;
    let idle = Duration::from_secs(1);
    let xmax = host.xmax()?;
    std::thread::sleep(idle);
    let idle_xids = host.xmax()? - xmax;
    let others_before = host.other_databases_xacts()?;

    let mut rounds = Vec::with_capacity(args.rounds);
    for r in 0..args.rounds.max(1) {
        let floor_ns0 = cpu_ns(&floor_backend);
        let floor = host.runtime.block_on(floor::commits(
            &mut floor_conn,
            FLOOR_WARMUP,
            args.floor_commits.max(1),
        ))?;
        let floor_postgres_cpu_us = floor_ns0.zip(cpu_ns(&floor_backend)).map(|(a, b)| {
            b.saturating_sub(a) as f64 / 1e3 / (FLOOR_WARMUP + args.floor_commits.max(1)) as f64
        });
        let floor_us = median(&floor.one_connection_us);
        if args.one_room {
            objectives += 1;
        } else {
            host.new_room(&format!("bench-r{}", r + 1))?;
            objectives = 1;
            // Let serve's next pass find the new Room before anything is measured.
            std::thread::sleep(super::SETTLE);
        }
        host.wait_quiet(patience)?;
        let (xmax0, lsn0, revision0, ticks0, ns0) = (
            host.xmax()?,
            host.wal_lsn()?,
            host.state_size()?.revision,
            cpu_ticks(&pid),
            cpu_ns(&pid),
        );
        let pg_ns0 = host.backends_ns()?;
        let wall = objective(&mut host, objectives, patience)?;
        let (ticks1, ns1) = (cpu_ticks(&pid), cpu_ns(&pid));
        host.wait_quiet(patience)?;
        let pg_ns1 = host.backends_ns()?;
        let (xmax1, lsn1, revision1) = (host.xmax()?, host.wal_lsn()?, host.state_size()?.revision);
        let per_task = |x: f64| x / tasks as f64;
        let round = Round {
            floor_us,
            us_per_task: per_task(wall.as_secs_f64() * 1e6),
            xids_per_task: per_task((xmax1 - xmax0) as f64),
            revisions_per_task: per_task((revision1 - revision0) as f64),
            wal_bytes_per_task: per_task((lsn1 - lsn0) as f64),
            serve_cpu_us_per_task: ticks0
                .zip(ticks1)
                .map(|(a, b)| per_task(b.saturating_sub(a) as f64 * TICK_US)),
            serve_cpu_us_per_task_schedstat: ns0
                .zip(ns1)
                .map(|(a, b)| per_task(b.saturating_sub(a) as f64 / 1e3)),
            postgres_cpu_us_per_task: pg_ns0
                .zip(pg_ns1)
                .map(|(a, b)| per_task(b.saturating_sub(a) as f64 / 1e3)),
            floor_postgres_cpu_us,
        };
        eprintln!(
            "room: round {}: {:.0} µs per task ({:.1}x the floor's {:.0} µs), {:.2} write \
             commits per task ({:.2} Room revisions), serve cpu {:.0} µs per task \
             ({:.0} by schedstat), postgres cpu {:.0} µs per task ({:.0} per floor commit)",
            r + 1,
            round.us_per_task,
            round.us_per_task / round.floor_us,
            round.floor_us,
            round.xids_per_task,
            round.revisions_per_task,
            round.serve_cpu_us_per_task.unwrap_or(f64::NAN),
            round.serve_cpu_us_per_task_schedstat.unwrap_or(f64::NAN),
            round.postgres_cpu_us_per_task.unwrap_or(f64::NAN),
            round.floor_postgres_cpu_us.unwrap_or(f64::NAN),
        );
        rounds.push(round);
    }
    let others = host.other_databases_xacts()? - others_before;
    host.runtime.block_on(floor_conn.close())?;
    let of = |f: fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let ratios: Vec<f64> = rounds.iter().map(|r| r.us_per_task / r.floor_us).collect();
    let xids: Vec<f64> = rounds.iter().map(|r| r.xids_per_task).collect();
    let medians = |f: fn(&Round) -> Option<f64>| {
        let values: Vec<f64> = rounds.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| round(median(&values), 0))
    };
    // What PostgreSQL alone spends per task, against the floor's whole commit.
    let postgres_x_floor: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.postgres_cpu_us_per_task.map(|pg| pg / r.floor_us))
        .collect();
    let postgres_x_floor =
        (!postgres_x_floor.is_empty()).then(|| round(median(&postgres_x_floor), 2));
    let line = json!({
        "bench": "room_path",
        "figure": "room",
        "backend": "postgres",
        "tasks": tasks,
        "rounds": rounds.len(),
        "room_per_round": if args.one_room { "one Room for the warm-up and every round" } else { "a fresh Room per round" },
        "agents": "scripted, instant: one plan of sequential tasks (the last the report), one approving review; their journal written, not synced (--journal-unsynced: survives SIGKILL, not power loss)",
        "us_per_task_median": round(of(|r| r.us_per_task), 1),
        "floor_us_per_commit_median": round(of(|r| r.floor_us), 1),
        "x_floor_median_of_rounds": round(median(&ratios), 2),
        "x_floor_min": ratios.iter().copied().reduce(f64::min).map(|x| round(x, 2)),
        "x_floor_max": ratios.iter().copied().reduce(f64::max).map(|x| round(x, 2)),
        "write_commits_per_task_median": round(median(&xids), 2),
        "write_commits_per_task_min": xids.iter().copied().reduce(f64::min).map(|x| round(x, 2)),
        "room_revisions_per_task_median": round(of(|r| r.revisions_per_task), 2),
        "wal_bytes_per_task_median": round(of(|r| r.wal_bytes_per_task), 0),
        "serve_cpu_us_per_task_median": medians(|r| r.serve_cpu_us_per_task),
        "serve_cpu_us_per_task_schedstat_median": medians(|r| r.serve_cpu_us_per_task_schedstat),
        "postgres_cpu_us_per_task_median": medians(|r| r.postgres_cpu_us_per_task),
        "floor_postgres_cpu_us_per_commit_median": medians(|r| r.floor_postgres_cpu_us),
        "postgres_cpu_per_task_x_floor_median": postgres_x_floor,
        "write_commits_x_target": ratio(median(&xids), 1.3),
        "idle_write_commits_per_s": idle_xids,
        "other_databases_xacts_during_rounds": others,
        "target": "issue 21: <= 1.3 write commits per task and <= 2x the floor per task",
        "note": "write commits: transaction ids the server assigned from before the POST until the Room was quiet (every notification delivered); the server's, so another database's writes would add to them",
        "duration_s": round(started.elapsed().as_secs_f64(), 1),
    });
    #[allow(
        clippy::print_stdout,
        reason = "the figure's JSON line is the bench's output"
    )]
    {
        println!("{line}");
    }
    host.finish(args.place.keep)
}

/// Posts owner message `n` and waits for its objective (the `n`-th) to complete; its wall
/// time from the POST to the completion.
fn objective(host: &mut Host, n: u64, patience: Duration) -> anyhow::Result<Duration> {
    let posted = host.post(&format!(
        "Objective {n}: trace crash recovery in durable agent runtimes step by step."
    ))?;
    let done = host.wait_completed(n, POLL, patience)?;
    Ok(done.duration_since(posted.at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_chains_every_task_to_the_one_before_and_parses() {
        let text = scenario(4).unwrap();
        agentroom_agents::scripted::Scenario::parse(&text).unwrap();
        for (task, deps) in [("t02", "t01"), ("t03", "t02"), ("report", "t03")] {
            let at = text.find(&format!("key = \"{task}\"")).unwrap();
            let next = text[at..].find("[[").map_or(text.len(), |n| at + n);
            assert!(
                text[at..next].contains(&format!("deps = [\"{deps}\"]")),
                "{task}"
            );
        }
        assert!(scenario(1).is_err());
    }

    #[test]
    fn the_aging_scenario_parses() {
        agentroom_agents::scripted::Scenario::parse(include_str!("../../scenarios/aging.toml"))
            .unwrap();
    }
}
