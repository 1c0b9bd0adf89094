//! Planning figures, the same ones `../shared/peers/a2e/plugin_bench.py` measures for the A2E
//! reference plugin: (i) plan/create + N task/add per plan, messages per second, through
//! `handle` (requests built before the clock starts) and through `agentroom planning --stdio`
//! (lines written by one pipelined client, every acknowledgement read back); (ii) plan/board
//! of one plan of N tasks among plans × N; (iii) task/list filtered by plan and status at that
//! size. Each line states the backend, its durability setting and the number of clients.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
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
    /// Which backends: `sqlite` (a commit survives SIGKILL), `sqlite-fsync` (every commit
    /// fsynced), `postgres` (synchronous_commit as the server has it; needs --database-url).
    #[arg(long, value_delimiter = ',', default_value = "sqlite,sqlite-fsync")]
    backends: Vec<String>,
    /// A PostgreSQL server (a role that may create databases); the bench creates a fresh
    /// database there and drops it afterwards.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Concurrent clients adding tasks through `handle` (each adds its share of every plan).
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// The `agentroom` binary for the stdio figures (default: next to this one).
    #[arg(long)]
    agentroom: Option<PathBuf>,
    /// Skip the stdio transport figures.
    #[arg(long)]
    no_stdio: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    if args.plans == 0 || args.tasks_per_plan == 0 || args.reps == 0 {
        bail!("--plans, --tasks-per-plan and --reps must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for backend in &args.backends {
        match backend.as_str() {
            "sqlite" => sqlite(args, &runtime, Durability::ProcessCrash)?,
            "sqlite-fsync" => sqlite(args, &runtime, Durability::PowerLoss)?,
            "postgres" => {
                let Some(url) = &args.database_url else {
                    bail!("the postgres backend needs --database-url (or DATABASE_URL)");
                };
                runtime.block_on(postgres(args, url))?;
            }
            other => bail!("unknown backend {other} (sqlite, sqlite-fsync, postgres)"),
        }
    }
    Ok(())
}

fn sqlite(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    durability: Durability,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("planning.db");
    agentroom_store_sqlite::migrate::up(&path)?;
    let repo: Arc<dyn PlanningRepository> = Arc::new(SqlitePlanning::open(&path, durability)?);
    let meta = json!({"backend": "sqlite", "durability": durability.as_str(),
                      "clients": args.clients});
    runtime.block_on(through_handle(args, repo, &meta))?;
    if !args.no_stdio {
        let stdio_dir = tempfile::tempdir()?;
        let root = stdio_dir.path().to_string_lossy().into_owned();
        let mut flags = vec!["--root".to_owned(), root];
        if durability == Durability::PowerLoss {
            flags.push("--fsync".to_owned());
        }
        through_stdio(args, &flags, &meta)?;
    }
    Ok(())
}

/// A fresh database on the server of `admin_url`, dropped when the run ends.
async fn postgres(args: &Args, admin_url: &str) -> anyhow::Result<()> {
    use agentroom_store_postgres::{PgPlanning, migrate};
    let (admin, name, url) = crate::floor::create_db(admin_url, "agentroom_bench").await?;
    let result = async {
        let pool = migrate::connect(&url).await?;
        migrate::up(&pool).await?;
        let settings: (String, String) = sqlx::query_as(
            "SELECT current_setting('synchronous_commit'), current_setting('fsync')",
        )
        .fetch_one(&pool)
        .await?;
        pool.close().await;
        let repo: Arc<dyn PlanningRepository> = Arc::new(PgPlanning::connect(&url).await?);
        let durability = format!("synchronous_commit={},fsync={}", settings.0, settings.1);
        let meta = json!({"backend": "postgres", "durability": durability,
                          "clients": args.clients});
        through_handle(args, repo, &meta).await?;
        if !args.no_stdio {
            let flags = vec!["--database-url".to_owned(), url.clone()];
            let args = &*args;
            let meta = meta.clone();
            tokio::task::block_in_place(|| through_stdio(args, &flags, &meta))?;
        }
        anyhow::Ok(())
    }
    .await;
    crate::floor::drop_db(&admin, &name).await?;
    result
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
    let service = Arc::new(PlanningService::new(repo, Arc::new(SystemAmbient)));
    let room = RoomId::parse("local")?;
    let clients = args.clients.max(1);
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
        let mut shares: Vec<Vec<TaskAdd>> = (0..clients).map(|_| Vec::new()).collect();
        for (i, add) in adds.into_iter().enumerate() {
            shares[i % clients].push(add);
        }
        let mut joins = Vec::new();
        for share in shares {
            let service = Arc::clone(&service);
            let room = room.clone();
            joins.push(tokio::spawn(async move {
                for add in share {
                    let reply = service.handle(&room, PlanningRequest::TaskAdd(add)).await?;
                    if !reply.success() {
                        bail!("task/add refused: {reply:?}");
                    }
                }
                anyhow::Ok(())
            }));
        }
        for join in joins {
            join.await??;
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
        PlanningReply::Boards(boards) => boards.iter().map(|b| b.len()).sum::<usize>(),
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
    // The store's share of that latency: the same read straight from the repository.
    let plan_key = match service.repository().plan(&room, &target).await? {
        Some(plan) => plan.key,
        None => bail!("plan {target} vanished"),
    };
    let mut store_ms = Vec::with_capacity(args.reps);
    for _ in 0..args.reps {
        let started = Instant::now();
        let rows = service.repository().tasks(&room, plan_key, Some(1)).await?;
        store_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        if rows.len() != count {
            bail!("the store read {} rows, handle {count}", rows.len());
        }
    }
    store_ms.sort_by(f64::total_cmp);
    emit(
        meta,
        json!({"figure": "task_list_plan_and_status", "transport": "handle",
               "store_read_ms_median": round(percentile(&store_ms, 0.5), 3),
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
    Fut: std::future::Future<Output = Result<PlanningReply, agentroom_planning::PlanningError>>,
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
fn through_stdio(args: &Args, store_flags: &[String], meta: &Value) -> anyhow::Result<()> {
    let binary = agentroom_binary(args)?;
    let mut command = Command::new(&binary);
    command.args(["planning", "--stdio"]).args(store_flags);
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
               "stdio_clients": 1,
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
