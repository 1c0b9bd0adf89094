//! `agentroom eval`: issue 19's qualification. Runs every scenario of the corpus in each
//! coordination mode (legacy sessions, selective routing, the planner) with the same scripted
//! agents, permissions and budget, on one store (the embedded default, or PostgreSQL); reads
//! each run's durable trace back through the stores' ports, evaluates it against the
//! scenario's ground truth (`agentroom-eval`) and writes the dated qualification report.

mod corpus;
mod host;
mod play;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentroom_coordinator::Store;
use agentroom_domain::ids::{EventId, PoolId, RoomId};
use agentroom_eval::Mode;
use anyhow::{Context, anyhow, bail};
use clap::Args;
use tokio::io::AsyncBufReadExt as _;

use corpus::{EvalScenario, read_corpus};
use host::Host;
use play::{Played, Run};

/// What the child process of a restarting scenario prints when it reached the restart.
const AT_RESTART: &str = "agentroom-eval: at restart";

/// `agentroom eval`'s arguments.
#[derive(Debug, Clone, Args)]
pub(crate) struct EvalArgs {
    /// The modes to run, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sessions,routing,planner",
        value_parser = parse_mode
    )]
    modes: Vec<Mode>,
    /// The corpus: a folder of scenario files (`*.toml`).
    /// The shipped corpus (`scenarios/eval`, compiled in) when not given.
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Run only these scenarios (file stems), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    only: Vec<String>,
    /// Where the embedded database and the agents' journals go (a fresh temporary directory
    /// by default).
    #[arg(long, value_name = "DIR", conflicts_with = "database_url")]
    root: Option<PathBuf>,
    /// Run on this PostgreSQL database (migrated) instead of the embedded default.
    #[arg(long, value_name = "URL", env = "AGENTROOM_DATABASE_URL")]
    database_url: Option<String>,
    /// Every run's Room draws on this budget pool, which may be shared with other `eval`
    /// processes on the same store: their spend together never passes its ceiling (B8).
    #[arg(long, value_name = "POOL", value_parser = PoolId::parse)]
    campaign: Option<PoolId>,
    /// The campaign pool's limit when this process creates it.
    #[arg(
        long,
        value_name = "MICROS",
        requires = "campaign",
        default_value_t = 50_000_000
    )]
    campaign_limit_micros: i64,
    /// Serve every role with the OpenAI-compatible models of this providers configuration
    /// (the file `serve --openai` reads) instead of the scenarios' scripted agents. The
    /// ground truth stays the scenarios': what a model delivers is judged by their markers.
    #[arg(long, value_name = "CONFIG")]
    openai: Option<PathBuf>,
    /// Record the SHA-256 of this binary, of every corpus file and of the policy files to
    /// FILE, before a holdout run, and exit without running.
    #[arg(long, value_name = "FILE", conflicts_with = "holdout")]
    freeze: Option<PathBuf>,
    /// Run as the holdout frozen in FILE: refused, with nothing written, when the binary, a
    /// corpus file or a policy file changed since it was frozen.
    #[arg(long, value_name = "FILE")]
    holdout: Option<PathBuf>,
    /// The policy files the holdout's hashes cover.
    #[arg(long, value_name = "DIR", default_value = "policies")]
    policies: PathBuf,
    /// The report's date (`YYYY-MM-DD`); today in UTC by default.
    #[arg(long, value_name = "DATE", value_parser = parse_date)]
    date: Option<String>,
    /// Where the report goes (report.md, report.svg, report.json).
    #[arg(long, value_name = "DIR", default_value = "eval-report")]
    out: PathBuf,
    /// A name for this evaluation, part of every Room id (fresh by default), so runs on a
    /// shared store never collide.
    #[arg(long, hide = true)]
    run_id: Option<String>,
    /// Internal: play a restarting scenario up to its restart, say so, and wait to be killed.
    #[arg(long, hide = true)]
    until_restart: bool,
}

fn parse_date(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format!("`{text}` is not a date: give YYYY-MM-DD"))
    }
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    [Mode::Sessions, Mode::Routing, Mode::Planner]
        .into_iter()
        .find(|m| m.as_str() == text)
        .ok_or_else(|| format!("unknown mode `{text}`: give sessions, routing or planner"))
}

/// One run's result, before evaluation.
#[allow(dead_code)]
struct Finished {
    scenario: String,
    mode: Mode,
    room: RoomId,
    keys: BTreeMap<EventId, String>,
    played: Played,
    wall: Duration,
}

/// Runs `agentroom eval`.
pub(crate) async fn run(args: EvalArgs) -> anyhow::Result<String> {
    let corpus = match &args.scenarios {
        Some(dir) => read_corpus(dir, &args.only)?,
        None => corpus::built_in(&args.only)?,
    };
    if let Some(path) = &args.freeze {
        let manifest = hashes(&args)?;
        manifest.freeze(path)?;
        return Ok(format!(
            "froze {} files ({}) in {}\n",
            manifest.files.len(),
            manifest.digest(),
            path.display()
        ));
    }
    let frozen = match &args.holdout {
        Some(path) => {
            let frozen = agentroom_eval::Manifest::read(path)?;
            frozen.check(&hashes(&args)?)?;
            Some(frozen)
        }
        None => None,
    };
    let temporary;
    let root = match &args.root {
        Some(root) => root.clone(),
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let store = open_store(&root, args.database_url.as_deref()).await?;
    let run_id = match &args.run_id {
        Some(id) => id.clone(),
        None => fresh_run_id(),
    };
    if args.until_restart {
        let [scenario] = corpus.as_slice() else {
            bail!("--until-restart plays exactly one scenario (--only)");
        };
        let [mode] = args.modes.as_slice() else {
            bail!("--until-restart plays exactly one mode (--modes)");
        };
        return until_restart(&args, scenario, *mode, &run_id, &root, store).await;
    }
    if let Some(pool) = &args.campaign {
        let admin = crate::store::admin_coordinator(Arc::clone(&store), "agentroom-eval");
        if admin.pool(pool).await.is_err() {
            // Another process of the campaign may create it first: then its pool is used.
            let limit = agentroom_domain::money::UsdMicros::new(args.campaign_limit_micros);
            let created = admin.create_pool(pool, limit).await;
            if let (Err(e), Err(_)) = (created, admin.pool(pool).await) {
                return Err(e).context("creating the campaign pool");
            }
        }
    }
    let models = match &args.openai {
        Some(config) => Some(host::Models::open(config, &args.policies)?),
        None => None,
    };
    let host = Host::new(
        Arc::clone(&store),
        "agentroom-eval",
        &corpus,
        models.as_ref(),
    )?;
    host.coordinator.recover().await?;
    let total = corpus.len() * args.modes.len();
    let progress = Progress::new(total);
    let started = Instant::now();
    let mut finished = Vec::new();
    for scenario in &corpus {
        for mode in &args.modes {
            progress.show(finished.len(), &scenario.name, *mode);
            let quotes = models.as_ref().map(|m| m.quotes);
            finished.push(run_one(&args, &host, scenario, *mode, &run_id, &root, quotes).await?);
        }
    }
    progress.done();
    host.coordinator.deliver_notifications().await?;
    let mut metrics = Vec::new();
    for f in &finished {
        let scenario = corpus
            .iter()
            .find(|s| s.name == f.scenario)
            .ok_or_else(|| anyhow!("{}: not in the corpus", f.scenario))?;
        let trace =
            agentroom_eval::load_trace(&*store, &f.room, &f.scenario, f.mode, &f.keys).await?;
        let m = agentroom_eval::evaluate(&trace, &scenario.truth)
            .with_context(|| format!("evaluating {} ({})", f.scenario, f.mode))?;
        metrics.push((m, trace));
    }
    let date = match &args.date {
        Some(date) => date.clone(),
        None => today_utc(),
    };
    let store_fact = match &args.database_url {
        Some(url) => format!("PostgreSQL {}", crate::store::redact(url)),
        None => format!(
            "embedded SQLite {}",
            root.join(crate::store::PLANNING_DB).display()
        ),
    };
    let facts = vec![
        (
            "binary".to_owned(),
            format!("agentroom {}", env!("CARGO_PKG_VERSION")),
        ),
        ("store".to_owned(), store_fact),
        (
            "corpus".to_owned(),
            match &args.scenarios {
                Some(dir) => dir.display().to_string(),
                None => "the shipped scenarios/eval (compiled in)".to_owned(),
            },
        ),
        (
            "agents".to_owned(),
            match &args.openai {
                Some(config) => format!(
                    "OpenAI-compatible models of {} (judged by the scenarios' markers)",
                    config.display()
                ),
                None => "scripted (the scenarios' replies, the same in every mode)".to_owned(),
            },
        ),
        (
            "runs".to_owned(),
            format!(
                "{} scenarios × {} modes in {:.1} s",
                corpus.len(),
                args.modes.len(),
                started.elapsed().as_secs_f64()
            ),
        ),
    ];
    let mut facts = facts;
    if let Some(frozen) = &frozen {
        // Checked again now: nothing may change while the holdout runs.
        frozen.check(&hashes(&args)?)?;
        facts.push((
            "holdout".to_owned(),
            format!("{} files frozen as {}", frozen.files.len(), frozen.digest()),
        ));
    }
    let runs = metrics
        .into_iter()
        .map(|(m, trace)| agentroom_eval::RunFigures::of(m, &trace))
        .collect();
    let report = agentroom_eval::Report::new(&date, runs, facts)?;
    let rendered = report.render()?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (name, text) in [
        ("report.md", &rendered.markdown),
        ("report.svg", &rendered.svg),
        ("report.json", &rendered.json),
    ] {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = summary_table(&rendered.markdown);
    out.push_str(&format!(
        "\nreport: {} (.md, .svg, .json)\n",
        args.out.join("report").display()
    ));
    Ok(out)
}

/// The holdout's hashes now: this binary, the corpus, the policies.
fn hashes(args: &EvalArgs) -> anyhow::Result<agentroom_eval::Manifest> {
    let binary = std::env::current_exe().context("finding the agentroom binary")?;
    Ok(agentroom_eval::Manifest::compute(
        &binary,
        args.scenarios.as_deref(),
        &args.policies,
    )?)
}

/// The Markdown report's summary section, for the terminal.
fn summary_table(markdown: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in markdown.lines() {
        if line.starts_with("## ") {
            inside = line == "## Summary";
            continue;
        }
        if inside && line.starts_with('|') {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Today's date in UTC (`YYYY-MM-DD`), from the system clock: the report's date unless
/// `--date` gives one.
fn today_utc() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    let stamp = crate::token::utc(agentroom_domain::ids::Timestamp::from_millis(millis));
    stamp.get(..10).unwrap_or(&stamp).to_owned()
}

/// Plays one scenario in one mode to quiet, across a SIGKILL when it restarts.
async fn run_one(
    args: &EvalArgs,
    host: &Host,
    scenario: &EvalScenario,
    mode: Mode,
    run_id: &str,
    root: &Path,
    quotes: Option<agentroom_domain::state::Quotes>,
) -> anyhow::Result<Finished> {
    let mut run = new_run(args, scenario, mode, run_id, root)?;
    run.quotes = quotes;
    let coordinator = &host.coordinator;
    let started = Instant::now();
    let mut played = Played::default();
    let steps = scenario.steps.len();
    match scenario.restart_at() {
        None => {
            host.agents.register(&run.room, scenario, &run.journal)?;
            run.create_room(coordinator).await?;
            run.play(coordinator, 0..steps, &mut played).await?;
        }
        Some(at) => {
            crash_child(args, scenario, mode, run_id, root).await?;
            host.agents.register(&run.room, scenario, &run.journal)?;
            // The killed process's leases expire; then this host recovers its calls.
            tokio::time::sleep(play::LEASE * 2 + Duration::from_millis(200)).await;
            coordinator.recover().await?;
            coordinator.accept_pending(&run.room).await?;
            run.quiet(coordinator).await?;
            run.play(coordinator, at + 1..steps, &mut played).await?;
        }
    }
    run.settle(coordinator).await?;
    Ok(Finished {
        scenario: scenario.name.clone(),
        mode,
        room: run.room.clone(),
        keys: run.keys(),
        played,
        wall: started.elapsed(),
    })
}

fn new_run<'a>(
    args: &EvalArgs,
    scenario: &'a EvalScenario,
    mode: Mode,
    run_id: &str,
    root: &Path,
) -> anyhow::Result<Run<'a>> {
    let room = RoomId::parse(&format!("{run_id}-{}-{mode}", scenario.name))
        .with_context(|| format!("scenario name {}", scenario.name))?;
    Ok(Run {
        scenario,
        mode,
        journal: play::journal_path(root, &room),
        room,
        pool: args.campaign.clone(),
        quotes: None,
    })
}

/// The child's side of a restart: the steps before it, then wait for SIGKILL.
async fn until_restart(
    args: &EvalArgs,
    scenario: &EvalScenario,
    mode: Mode,
    run_id: &str,
    root: &Path,
    store: Arc<dyn Store>,
) -> anyhow::Result<String> {
    let at = scenario
        .restart_at()
        .ok_or_else(|| anyhow!("{} does not restart", scenario.name))?;
    let models = match &args.openai {
        Some(config) => Some(host::Models::open(config, &args.policies)?),
        None => None,
    };
    let mut run = new_run(args, scenario, mode, run_id, root)?;
    run.quotes = models.as_ref().map(|m| m.quotes);
    let host = Host::new(
        store,
        "agentroom-eval-before-restart",
        std::slice::from_ref(scenario),
        models.as_ref(),
    )?;
    host.agents.register(&run.room, scenario, &run.journal)?;
    host.coordinator.recover().await?;
    run.create_room(&host.coordinator).await?;
    let mut played = Played::default();
    run.play(&host.coordinator, 0..at, &mut played).await?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{AT_RESTART}")?;
    stdout.flush()?;
    // Calls keep running until the parent kills this process.
    tokio::time::sleep(Duration::from_secs(600)).await;
    bail!("{}: not killed at its restart", scenario.name)
}

/// Runs the steps before the restart in a child process and kills it with SIGKILL there.
async fn crash_child(
    args: &EvalArgs,
    scenario: &EvalScenario,
    mode: Mode,
    run_id: &str,
    root: &Path,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding the agentroom binary")?;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("eval")
        .arg("--until-restart")
        .arg("--only")
        .arg(&scenario.name)
        .arg("--modes")
        .arg(mode.as_str())
        .arg("--run-id")
        .arg(run_id)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    match &args.database_url {
        Some(url) => command.arg("--database-url").arg(url),
        None => command
            .env_remove("AGENTROOM_DATABASE_URL")
            .arg("--root")
            .arg(root),
    };
    if let Some(pool) = &args.campaign {
        command.arg("--campaign").arg(pool.as_str());
    }
    if let Some(dir) = &args.scenarios {
        command.arg("--scenarios").arg(dir);
    }
    if let Some(config) = &args.openai {
        command
            .arg("--openai")
            .arg(config)
            .arg("--policies")
            .arg(&args.policies);
    }
    let mut child = command.spawn().context("starting the process to kill")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("the child's stdout is not piped"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let reached = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = lines.next_line().await? {
            if line == AT_RESTART {
                return Ok::<bool, std::io::Error>(true);
            }
        }
        Ok(false)
    })
    .await;
    // SIGKILL: no destructor, no graceful stop; whatever runs is cut where it stands.
    child.start_kill().context("killing the child")?;
    let status = child.wait().await?;
    match reached {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => bail!(
            "{}: the child ended before its restart ({status})",
            scenario.name
        ),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => bail!(
            "{}: the child did not reach its restart in 120 s",
            scenario.name
        ),
    }
}

async fn open_store(root: &Path, url: Option<&str>) -> anyhow::Result<Arc<dyn Store>> {
    let args = crate::store::StoreArgs {
        root: root.to_path_buf(),
        database_url: url.map(str::to_owned),
        fsync: false,
    };
    args.open_rooms(crate::store::Missing::Create).await
}

fn fresh_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "e{:x}",
        (nanos as u64 ^ u64::from(std::process::id())) & 0xff_ffff
    )
}

/// A progress bar on a terminal (stderr); nothing when stderr is not one.
struct Progress {
    total: usize,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Self {
        Self {
            total,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, done: usize, scenario: &str, mode: Mode) {
        if !self.tty || self.total == 0 {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * done / self.total;
        let bar = format!("{}{}", "#".repeat(filled), ".".repeat(WIDTH - filled));
        let mut stderr = std::io::stderr();
        // A progress line that cannot be drawn changes nothing about the evaluation.
        let _ = write!(
            stderr,
            "\r\x1b[2K[{bar}] {done}/{} {scenario} ({mode})",
            self.total
        );
        let _ = stderr.flush();
    }

    fn done(&self) {
        if self.tty {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        }
    }
}
