//! Planning figures, the same ones `../shared/peers/a2e/plugin_bench.py` measures for the A2E
//! reference plugin: (i) plan/create + N task/add per plan, messages per second, through
//! `handle` (requests built before the clock starts) and through `agentroom planning --stdio`
//! (lines written by one pipelined client, every acknowledgement read back); (ii) plan/board
//! of one plan of N tasks among plans × N; (iii) task/list filtered by plan and status at that
//! size. Each line states the backend, its durability setting and the number of clients.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentroom_domain::ids::RoomId;
use agentroom_planning::wire::{
    self, Envelope, PlanBoard, PlanCreate, PlanningReply, PlanningRequest, Reply, TaskAdd, TaskList,
};
use agentroom_planning::{PlanningRepository, PlanningService, SystemAmbient};
use agentroom_store_sqlite::{Durability, SqlitePlanning};
use anyhow::{Context, bail};
use serde_json::{Value, json};

const COLUMNS: [&str; 4] = ["backlog", "todo", "in_progress", "done"];

/// Options of `agentroom-bench planning`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Plans to fill.
    #[arg(long, default_value_t = 10)]
    plans: usize,
    /// Tasks per plan.
    #[arg(long, default_value_t = 10_000)]
    tasks_per_plan: usize,
    /// Repetitions of each latency measurement.
    #[arg(long, default_value_t = 50)]
    reps: usize,
    /// Which backends: `sqlite` (process-crash durability), `sqlite-fsync` (every commit
    /// fsynced).
    #[arg(long, value_delimiter = ',', default_value = "sqlite,sqlite-fsync")]
    backends: Vec<String>,
    /// The `agentroom` binary for the stdio figures (default: next to this one).
    #[arg(long)]
    agentroom: Option<PathBuf>,
    /// Skip the stdio transport figures.
    #[arg(long)]
    no_stdio: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for backend in &args.backends {
        let durability = match backend.as_str() {
            "sqlite" => Durability::ProcessCrash,
            "sqlite-fsync" => Durability::PowerLoss,
            other => bail!("unknown backend {other} (sqlite, sqlite-fsync)"),
        };
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("planning.db");
        agentroom_store_sqlite::migrate::up(&path)?;
        let repo: Arc<dyn PlanningRepository> = Arc::new(SqlitePlanning::open(&path, durability)?);
        let meta = json!({"backend": "sqlite", "durability": durability.as_str(), "clients": 1});
        runtime.block_on(through_handle(args, repo, &meta))?;
        if !args.no_stdio {
            let stdio_dir = tempfile::tempdir()?;
            through_stdio(args, stdio_dir.path(), durability, &meta)?;
        }
    }
    Ok(())
}

fn emit(meta: &Value, figure: Value) {
    let mut line = meta.clone();
    if let (Value::Object(line), Value::Object(figure)) = (&mut line, figure) {
        line.extend(figure);
    }
    println!("{line}");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

async fn through_handle(
    args: &Args,
    repo: Arc<dyn PlanningRepository>,
    meta: &Value,
) -> anyhow::Result<()> {
    let service = PlanningService::new(repo, Arc::new(SystemAmbient));
    let room = RoomId::parse("local")?;
    let mut rates = Vec::new();
    let mut plan_ids = Vec::new();
    let populate = Instant::now();
    for p in 0..args.plans {
        // Requests are built before the clock starts, as the peer's script does.
        let mut adds: Vec<TaskAdd> = (0..args.tasks_per_plan)
            .map(|i| TaskAdd {
                plan_id: String::new(),
                title: format!("task {p}-{i}"),
                status: COLUMNS[i % COLUMNS.len()].to_owned(),
                description: String::new(),
                assignee: format!("agent-{}", i % 7),
                deps: Vec::new(),
                metadata: "{}".to_owned(),
            })
            .collect();
        let started = Instant::now();
        let created = service
            .handle(
                &room,
                PlanningRequest::PlanCreate(PlanCreate {
                    name: format!("bench-{p}"),
                    columns: Vec::new(),
                    description: String::new(),
                }),
            )
            .await?;
        let PlanningReply::PlanCreated { plan_id, .. } = created else {
            bail!("plan/create refused: {created:?}");
        };
        for add in &mut adds {
            add.plan_id.clone_from(&plan_id);
        }
        for add in adds {
            let reply = service.handle(&room, PlanningRequest::TaskAdd(add)).await?;
            if !reply.success() {
                bail!("task/add refused: {reply:?}");
            }
        }
        let secs = started.elapsed().as_secs_f64();
        rates.push((1 + args.tasks_per_plan) as f64 / secs);
        eprintln!("plan {p}: {:.0} msgs/s", rates[rates.len() - 1]);
        plan_ids.push(plan_id);
    }
    let populate_s = populate.elapsed().as_secs_f64();
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    emit(
        meta,
        json!({"figure": "task_add_through_handle", "transport": "handle",
               "msgs_per_s_first_plan": round(rates[0], 1),
               "msgs_per_s_median_of_plans": round(percentile(&sorted, 0.5), 1),
               "plans": args.plans, "tasks_per_plan": args.tasks_per_plan,
               "populate_all_s": round(populate_s, 2)}),
    );

    let target = plan_ids[plan_ids.len() / 2].clone();
    let total = args.plans * args.tasks_per_plan;
    let (board_ms, board) = latencies(args.reps, || {
        service.handle(
            &room,
            PlanningRequest::PlanBoard(PlanBoard {
                plan_id: Some(target.clone()),
            }),
        )
    })
    .await?;
    let board_tasks = match &board {
        PlanningReply::Boards(boards) => boards
            .iter()
            .flat_map(|b| b.tasks.0.iter().map(|(_, t)| t.len()))
            .sum::<usize>(),
        other => bail!("plan/board failed: {other:?}"),
    };
    let encode_started = Instant::now();
    let encoded = wire::encode(
        &Reply::Planning(board.clone()),
        Envelope {
            id: "x",
            ts: 0.0,
            req_id: "x",
        },
    );
    let encode_ms = encode_started.elapsed().as_secs_f64() * 1000.0;
    emit(
        meta,
        json!({"figure": "plan_board_one_plan", "transport": "handle",
               "tasks_total": total, "board_tasks": board_tasks,
               "ms_median": round(percentile(&board_ms, 0.5), 3),
               "ms_p99": round(percentile(&board_ms, 0.99), 3), "reps": args.reps,
               "json_encode_ms": round(encode_ms, 3), "json_bytes": encoded.len()}),
    );

    let (list_ms, listed) = latencies(args.reps, || {
        service.handle(
            &room,
            PlanningRequest::TaskList(TaskList {
                plan_id: Some(target.clone()),
                status: Some("todo".to_owned()),
            }),
        )
    })
    .await?;
    let count = match &listed {
        PlanningReply::Tasks(tasks) => tasks.len(),
        other => bail!("task/list failed: {other:?}"),
    };
    emit(
        meta,
        json!({"figure": "task_list_plan_and_status", "transport": "handle",
               "tasks_total": total, "count": count,
               "ms_median": round(percentile(&list_ms, 0.5), 3),
               "ms_p99": round(percentile(&list_ms, 0.99), 3), "reps": args.reps}),
    );
    Ok(())
}

/// Runs `call` `reps` times (after one warm-up) and returns the sorted latencies in ms and
/// the last reply.
async fn latencies<F, Fut>(reps: usize, mut call: F) -> anyhow::Result<(Vec<f64>, PlanningReply)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<PlanningReply, agentroom_planning::RepoError>>,
{
    let mut last = call().await?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let started = Instant::now();
        last = call().await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((times, last))
}

fn agentroom_binary(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(path) = &args.agentroom {
        return Ok(path.clone());
    }
    let me = std::env::current_exe()?;
    let sibling = me.with_file_name("agentroom");
    if sibling.exists() {
        Ok(sibling)
    } else {
        bail!(
            "no agentroom binary next to {} (build it with `cargo build --release`, or pass \
             --agentroom PATH)",
            me.display()
        )
    }
}

/// One pipelined client on `agentroom planning --stdio`: plan/create, then N task/add lines
/// written by a writer thread while this thread reads every acknowledgement.
fn through_stdio(
    args: &Args,
    root: &Path,
    durability: Durability,
    meta: &Value,
) -> anyhow::Result<()> {
    let binary = agentroom_binary(args)?;
    let mut command = Command::new(&binary);
    command.args(["planning", "--stdio", "--root"]).arg(root);
    if durability == Durability::PowerLoss {
        command.arg("--fsync");
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
    let mut line = String::new();

    stdin.write_all(b"{\"type\":\"planning/plan/create\",\"id\":\"c\",\"name\":\"stdio\"}\n")?;
    stdin.flush()?;
    stdout.read_line(&mut line)?;
    let created: Value = serde_json::from_str(&line)?;
    let Some(plan) = created["plan_id"].as_str().map(str::to_owned) else {
        bail!("plan/create failed over stdio: {line}");
    };
    let n = args.tasks_per_plan;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            json!({"type": "planning/task/add", "id": format!("t{i}"), "version": "1.0",
                   "ts": 0.0, "plan_id": plan, "title": format!("task {i}"),
                   "status": COLUMNS[i % COLUMNS.len()], "description": "",
                   "assignee": format!("agent-{}", i % 7), "deps": [], "metadata": {}})
            .to_string()
                + "\n"
        })
        .collect();
    let started = Instant::now();
    let writer = std::thread::spawn(move || -> std::io::Result<std::process::ChildStdin> {
        for line in &lines {
            stdin.write_all(line.as_bytes())?;
        }
        stdin.flush()?;
        Ok(stdin)
    });
    let mut acknowledged = 0usize;
    while acknowledged < n {
        line.clear();
        if stdout.read_line(&mut line)? == 0 {
            bail!("the stdio host closed after {acknowledged} acknowledgements");
        }
        if !line.contains("\"success\":true") {
            bail!("task/add failed over stdio: {line}");
        }
        acknowledged += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    let stdin = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the writer thread panicked"))??;
    drop(stdin);
    let _ = child.wait_timeout_or_kill(Duration::from_secs(5));
    emit(
        meta,
        json!({"figure": "task_add_through_stdio", "transport": "stdio", "pipelined": true,
               "msgs_per_s": round(n as f64 / secs, 1), "messages": n}),
    );
    Ok(())
}

trait WaitOrKill {
    fn wait_timeout_or_kill(&mut self, limit: Duration) -> std::io::Result<()>;
}

impl WaitOrKill for std::process::Child {
    fn wait_timeout_or_kill(&mut self, limit: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()?;
        self.wait().map(|_| ())
    }
}
