//! `agentroom-bench aging` (issue 21, item 6): what the Room's past costs each new objective.
//! One Room on a real `agentroom serve` (PostgreSQL), N owner messages posted one after the
//! other over the REST API, each waited for until its objective completes (a reasoner call,
//! two tasks and an approving review by instant scripted agents, `scenarios/aging.toml`).
//!
//! At the 1st, 10th, 100th, 500th and N-th objective (`--at`) it reports, over a window of
//! objectives around the point (`--window`, since `/proc` counts CPU in 10 ms ticks and an
//! objective costs a few milliseconds):
//! - `serve`'s CPU per objective: user + system ticks of `/proc/<pid>/stat`, and the same
//!   from the nanosecond counters of `/proc/<pid>/task/*/schedstat` (exact, but blind to
//!   threads that exited: compare the two);
//! - the CPU per objective of the server backends of the database's connections;
//! - the POST's latency (median over the window, from connecting to the answer read) and the
//!   objective's wall time (from the POST to its completion in the decision log);
//! - `serve`'s resident memory (`VmRSS`) after the point's objective;
//! - the Room's state as stored after it: the latest snapshot's size and the delta bytes since;
//! - the transaction ids the server assigned per objective (write transactions, see
//!   [`super::Host::xmax`]).
//!
//! The line ends with each figure at the last point over the first (issue 21's target: CPU
//! per objective and POST latency at the 1,000th within 1.2× of the 1st; RSS bounded by open
//! work).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};

use super::{Host, agentroom_binary, median, ratio, round};
use crate::procfs::{TICK_US, cpu_ns, cpu_ticks, rss_kb, threads};

/// The scripted agents: the chaos harness's objective, answering at once.
const SCENARIO: &str = include_str!("../../scenarios/aging.toml");
/// How often the bench looks for the objective's completion.
const POLL: Duration = Duration::from_millis(5);

/// Options of `agentroom-bench aging`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Owner messages (objectives) posted on the one Room, one after the other.
    #[arg(long, default_value_t = 1_000)]
    pub objectives: u64,
    /// The objectives reported (those above --objectives are left out; the last is always
    /// reported).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,500,1000")]
    pub at: Vec<u64>,
    /// Objectives per reported point (around it, inside 1..=N): `/proc/<pid>/stat` counts
    /// CPU in 10 ms ticks and an objective costs a few milliseconds (the schedstat figure is
    /// exact to the nanosecond).
    #[arg(long, default_value_t = 10)]
    pub window: u64,
    /// How long one objective may take to complete, in seconds.
    #[arg(long, default_value_t = 120)]
    pub patience_s: u64,
    /// Where and with what it runs.
    #[command(flatten)]
    pub place: super::Where,
}

/// Counters read at an objective's boundary (before it is posted; after the last one).
struct Mark {
    ticks: Option<u64>,
    ns: Option<u64>,
    threads: Option<usize>,
    xmax: i64,
    backends: HashMap<String, u64>,
}

/// What one objective took.
struct Objective {
    post_ms: f64,
    wall_ms: f64,
}

/// Runs the figure and prints its JSON line.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.objectives == 0 {
        bail!("--objectives must be at least 1");
    }
    let started = Instant::now();
    let n = args.objectives;
    let window = args.window.clamp(1, n);
    let mut points: Vec<u64> = args
        .at
        .iter()
        .copied()
        .filter(|p| (1..=n).contains(p))
        .collect();
    points.push(n);
    points.sort_unstable();
    points.dedup();
    let windows: Vec<(u64, u64, u64)> = points
        .iter()
        .map(|&p| {
            let first = p.saturating_sub(window / 2).clamp(1, n - window + 1);
            (p, first, first + window - 1)
        })
        .collect();
    let agentroom = agentroom_binary(args.place.agentroom.as_ref())?;
    let mut host = Host::start(
        agentroom,
        &args.place.database_url,
        "agentroom_bench_aging",
        SCENARIO,
        false,
    )?;
    eprintln!(
        "aging: {n} objectives on one Room, points {points:?}, window {window}; run folder {}",
        host.folder()
    );
    let pid = host.pid()?;
    let others_before = host.other_databases_xacts()?;
    // Marks before objectives 1..=n and after the last (index n).
    let mut marks: Vec<Option<Mark>> = (0..=n).map(|_| None).collect();
    let wanted = |k: u64| windows.iter().any(|&(_, a, b)| k == a - 1 || k == b);
    let mut objectives: Vec<Objective> = Vec::with_capacity(usize::try_from(n)?);
    let mut at_point: HashMap<u64, (Option<u64>, super::StateSize)> = HashMap::new();
    let patience = Duration::from_secs(args.patience_s);
    let mut progress = (Instant::now(), cpu_ticks(&pid));
    for k in 1..=n {
        // Mark index k - 1: before objective k.
        if wanted(k - 1) {
            marks[usize::try_from(k - 1)?] = Some(mark(&mut host, &pid)?);
        }
        let posted = host.post(&format!(
            "Objective {k}: summarize how durable agent runtimes recover from crashes, with sources."
        ))?;
        let done = host.wait_completed(k, POLL, patience)?;
        objectives.push(Objective {
            post_ms: posted.latency.as_secs_f64() * 1e3,
            wall_ms: done.duration_since(posted.at).as_secs_f64() * 1e3,
        });
        if points.contains(&k) {
            at_point.insert(k, (rss_kb(&pid), host.state_size()?));
        }
        if k == n {
            marks[usize::try_from(n)?] = Some(mark(&mut host, &pid)?);
        }
        if k % 10 == 0 || k == n {
            let ticks = cpu_ticks(&pid);
            let cpu = ticks
                .zip(progress.1)
                .map(|(t, s)| (t - s) as f64 * TICK_US / 1e3 / 10.0);
            let last: Vec<f64> = objectives
                .iter()
                .rev()
                .take(10)
                .map(|o| o.post_ms)
                .collect();
            eprintln!(
                "aging: {k}/{n}: last 10: serve cpu {:.1} ms/objective, POST {:.1} ms median, \
                 {:.0} ms each; rss {} kB; {:.0?} in all",
                cpu.unwrap_or(f64::NAN),
                median(&last),
                progress.0.elapsed().as_secs_f64() * 1e3 / 10.0,
                rss_kb(&pid).unwrap_or(0),
                started.elapsed()
            );
            progress = (Instant::now(), ticks);
        }
    }
    let others = host.other_databases_xacts()? - others_before;
    let mut series = Vec::new();
    for &(p, a, b) in &windows {
        let (Some(Some(start)), Some(Some(end))) = (
            marks.get(usize::try_from(a - 1)?),
            marks.get(usize::try_from(b)?),
        ) else {
            bail!("no marks around objectives {a}..={b}");
        };
        let count = (b - a + 1) as f64;
        let per = |x: Option<(u64, u64)>, unit_ms: f64| {
            x.map(|(s, e)| round(e.saturating_sub(s) as f64 * unit_ms / count, 2))
        };
        let backend_ticks: u64 = end
            .backends
            .iter()
            .map(|(pid, t)| t.saturating_sub(*start.backends.get(pid).unwrap_or(&0)))
            .sum();
        let range = usize::try_from(a - 1)?..usize::try_from(b)?;
        let window_objectives = objectives.get(range).unwrap_or_default();
        let post: Vec<f64> = window_objectives.iter().map(|o| o.post_ms).collect();
        let wall: Vec<f64> = window_objectives.iter().map(|o| o.wall_ms).collect();
        let (rss, state) = match at_point.get(&p) {
            Some((rss, state)) => (*rss, Some(state.json())),
            None => (None, None),
        };
        series.push(json!({
            "objective": p,
            "window": [a, b],
            "serve_cpu_ms_per_objective": per(start.ticks.zip(end.ticks), TICK_US / 1e3),
            "serve_cpu_ms_per_objective_schedstat": per(start.ns.zip(end.ns), 1e-6),
            "serve_threads": [start.threads, end.threads],
            "backend_cpu_ms_per_objective": round(backend_ticks as f64 * TICK_US / 1e3 / count, 2),
            "post_ms_median": round(median(&post), 2),
            "post_ms_max": round(post.iter().copied().fold(0.0, f64::max), 2),
            "objective_ms_median": round(median(&wall), 2),
            "xids_per_objective": round((end.xmax - start.xmax) as f64 / count, 2),
            "serve_rss_kb": rss,
            "room_state": state,
        }));
    }
    let figure = |point: &Value, key: &str| point[key].as_f64().unwrap_or(f64::NAN);
    let state_bytes = |point: &Value| {
        let s = &point["room_state"];
        s["snapshot_bytes"].as_f64().unwrap_or(f64::NAN)
    };
    let (first, last) = match (series.first(), series.last()) {
        (Some(f), Some(l)) => (f.clone(), l.clone()),
        _ => bail!("no point to report"),
    };
    let line = json!({
        "bench": "room_path",
        "figure": "aging",
        "backend": "postgres",
        "objectives": n,
        "window": window,
        "agents": "scripted, instant: a reasoner call, two tasks, one approving review per objective (crates/bench/scenarios/aging.toml); their journal written, not synced (--journal-unsynced)",
        "points": series,
        "last_over_first": {
            "objective": [first["objective"].clone(), last["objective"].clone()],
            "serve_cpu_per_objective": ratio(figure(&last, "serve_cpu_ms_per_objective"), figure(&first, "serve_cpu_ms_per_objective")),
            "serve_cpu_per_objective_schedstat": ratio(figure(&last, "serve_cpu_ms_per_objective_schedstat"), figure(&first, "serve_cpu_ms_per_objective_schedstat")),
            "backend_cpu_per_objective": ratio(figure(&last, "backend_cpu_ms_per_objective"), figure(&first, "backend_cpu_ms_per_objective")),
            "post_latency": ratio(figure(&last, "post_ms_median"), figure(&first, "post_ms_median")),
            "objective_wall_time": ratio(figure(&last, "objective_ms_median"), figure(&first, "objective_ms_median")),
            "serve_rss": ratio(figure(&last, "serve_rss_kb"), figure(&first, "serve_rss_kb")),
            "room_state_snapshot_bytes": ratio(state_bytes(&last), state_bytes(&first)),
        },
        "target": "issue 21: serve CPU per objective and POST latency at the 1,000th within 1.2x of the 1st; serve RSS bounded by open work",
        "other_databases_xacts_during_run": others,
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

/// The counters at an objective boundary.
fn mark(host: &mut Host, pid: &str) -> anyhow::Result<Mark> {
    let backends = host
        .backends()?
        .into_iter()
        .filter_map(|b| cpu_ticks(&b).map(|t| (b, t)))
        .collect();
    Ok(Mark {
        ticks: cpu_ticks(pid),
        ns: cpu_ns(pid),
        threads: threads(pid),
        xmax: host.xmax()?,
        backends,
    })
}
