//! `agentroom-bench recovery` (issue 21, items 3 and 6): a host process with `--operations`
//! reasoner calls in flight over `--rooms` Rooms on PostgreSQL is SIGKILLed, and a real
//! `agentroom serve` starts on what it left. Measured from outside, from the moment `serve`
//! is spawned:
//! - `health_ms`: its first `/health` answer (the listener binds before anything else);
//! - `classified_ms`: no operation left in flight (every call the dead process held is
//!   claimed and marked uncertain, D2: never replayed), read by polling the database;
//! - `ready_ms`: `serve` prints the line it is found by, once every Room has decided what
//!   recovery found.
//!
//! The dead process is this binary run again (`recovery-fill`, hidden): a coordinator whose
//! provider never answers, so each owner message leaves one reasoner call in flight, killed
//! with SIGKILL once all are. Its leases (`--lease-ms`) are let expire before `serve` starts,
//! as they would be for a host restarted by its supervisor after a lease, and the operations
//! table is vacuumed (its heartbeats rewrote every row each lease/3), as autovacuum would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentroom_coordinator::RunnerConfig;
use anyhow::{Context, anyhow, bail};
use serde_json::json;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::durable::store_on;
use crate::floor;
use crate::idle::in_flight;

/// What the filler prints once every call is in flight.
const READY: &str = "in flight";

/// Options of `agentroom-bench recovery`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// A PostgreSQL server (a role that may create databases); a fresh database is created
    /// and dropped.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    database_url: String,
    /// Calls in flight when the host is killed.
    #[arg(long, default_value_t = 10_000)]
    operations: usize,
    /// Rooms the calls are spread over.
    #[arg(long, default_value_t = 100)]
    rooms: usize,
    /// The killed host's lease in milliseconds (waited out before `serve` starts).
    #[arg(long, default_value_t = 3_000)]
    lease_ms: u64,
    /// The `agentroom` binary to run (default: the one next to this binary).
    #[arg(long, value_name = "PATH")]
    agentroom: Option<PathBuf>,
    /// How long `serve` may take to be ready, in seconds.
    #[arg(long, default_value_t = 600)]
    patience_s: u64,
    /// Keep the database and `serve`'s log.
    #[arg(long)]
    keep: bool,
    /// `serve`'s log level (its `AGENTROOM_LOG`), to see where the time goes.
    #[arg(long, default_value = "warn")]
    log_level: String,
}

/// Options of the hidden `recovery-fill`: the host that is killed.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FillArgs {
    #[arg(long)]
    url: String,
    #[arg(long)]
    operations: usize,
    #[arg(long)]
    rooms: usize,
    #[arg(long)]
    lease_ms: u64,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The killed host: posts until every call is in flight, says so, and waits to be killed.
pub(crate) fn fill(args: &FillArgs) -> anyhow::Result<()> {
    let args = args.clone();
    runtime()?.block_on(async move {
        let store = store_on(&args.url, 8, "agentroom-bench-recovery-fill").await?;
        let runner = RunnerConfig::new(
            "bench-recovery-killed",
            Duration::from_millis(args.lease_ms),
        );
        let _coordinator =
            in_flight(store, runner, args.operations, args.rooms, "recovery").await?;
        #[allow(clippy::print_stdout)]
        {
            println!("{READY}");
        }
        std::io::stdout().flush()?;
        // Killed here.
        std::future::pending::<()>().await;
        Ok(())
    })
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    if args.operations == 0 || args.rooms == 0 || args.lease_ms < 3 {
        bail!("--operations and --rooms must be at least 1, --lease-ms at least 3");
    }
    let agentroom = agentroom_bench::path::agentroom_binary(args.agentroom.as_ref())?;
    let runtime = runtime()?;
    let (admin, name, url) = runtime.block_on(floor::create_db(
        &args.database_url,
        "agentroom_bench_recovery",
    ))?;
    let result = measure(&runtime, args, &agentroom, &url);
    if args.keep {
        eprintln!("recovery: kept database {name}");
    } else {
        runtime.block_on(floor::drop_db(&admin, &name))?;
    }
    result
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    agentroom: &std::path::Path,
    url: &str,
) -> anyhow::Result<()> {
    let probe = runtime.block_on(async {
        let pool = agentroom_store_postgres::migrate::connect(url).await?;
        agentroom_store_postgres::migrate::up(&pool).await?;
        pool.close().await;
        Ok::<PgPool, anyhow::Error>(PgPoolOptions::new().max_connections(1).connect(url).await?)
    })?;
    let count = |sql: &'static str| -> anyhow::Result<i64> {
        let (n,): (i64,) = runtime.block_on(sqlx::query_as(sql).fetch_one(&probe))?;
        Ok(n)
    };

    // The host that dies.
    let filling = Instant::now();
    let mut filler = Command::new(std::env::current_exe()?)
        .args(["recovery-fill", "--url", url])
        .args(["--operations", &args.operations.to_string()])
        .args(["--rooms", &args.rooms.to_string()])
        .args(["--lease-ms", &args.lease_ms.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawning the host to kill")?;
    let mut said = String::new();
    BufReader::new(filler.stdout.take().ok_or_else(|| anyhow!("no stdout"))?)
        .read_line(&mut said)?;
    if said.trim() != READY {
        let _ = filler.kill();
        bail!("the host to kill did not fill: it said {said:?}");
    }
    filler.kill().context("SIGKILL")?;
    filler.wait()?;
    let in_flight = count("SELECT count(*) FROM operations WHERE status = 'in_flight'")?;
    eprintln!(
        "recovery: {in_flight} calls in flight over {} Rooms left by a SIGKILLed host ({:.1} s to fill)",
        args.rooms,
        filling.elapsed().as_secs_f64()
    );
    if usize::try_from(in_flight)? != args.operations {
        bail!("{in_flight} calls in flight, {} expected", args.operations);
    }
    // Its leases run out.
    let deadline = Instant::now() + Duration::from_millis(args.lease_ms) + Duration::from_secs(30);
    while count(
        "SELECT count(*) FROM operations \
         WHERE status = 'in_flight' AND lease_expires_at > clock_timestamp()",
    )? > 0
    {
        if Instant::now() > deadline {
            bail!("the dead host's leases did not expire");
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // The dead host's heartbeats (every lease/3, each rewriting every row it leased) left
    // dead row versions behind; `serve` meets the table as autovacuum leaves it.
    runtime.block_on(sqlx::query("VACUUM (ANALYZE) operations").execute(&probe))?;

    // The host that recovers.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let address = format!("127.0.0.1:{port}");
    let log = tempfile::NamedTempFile::new()?;
    let spawned = Instant::now();
    let mut serve = Command::new(agentroom)
        .args(["serve", "--listen", &address, "--database-url", url])
        .args(["--lease-ms", &args.lease_ms.max(3_000).to_string()])
        .env("AGENTROOM_LOG", &args.log_level)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen()?)
        .spawn()
        .context("spawning agentroom serve")?;
    let stdout = serve
        .stdout
        .take()
        .ok_or_else(|| anyhow!("serve has no stdout"))?;
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let read = reader.read_line(&mut line).map(|_| (Instant::now(), line));
        let _ = ready_tx.send(read);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let patience = Duration::from_secs(args.patience_s);
    let result = (|| {
        let mut health = None;
        let mut classified = None;
        let mut ready = None;
        while ready.is_none() || classified.is_none() {
            if spawned.elapsed() > patience {
                bail!(
                    "serve was not ready after {patience:?} (log: {})",
                    log.path().display()
                );
            }
            if health.is_none() && health_answers(&address) {
                health = Some(spawned.elapsed());
            }
            if classified.is_none()
                && health.is_some()
                && count("SELECT count(*) FROM operations WHERE status = 'in_flight'")? == 0
            {
                classified = Some(spawned.elapsed());
            }
            match ready_rx.try_recv() {
                Ok(Ok((at, line))) => {
                    if !line.starts_with("agentroom listening on") {
                        bail!("serve said {line:?} (log: {})", log.path().display());
                    }
                    ready = Some(at.duration_since(spawned));
                }
                Ok(Err(err)) => bail!("reading serve's stdout: {err}"),
                Err(mpsc::TryRecvError::Disconnected) if ready.is_none() => {
                    bail!("serve exited (log: {})", log.path().display());
                }
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(if health.is_none() { 1 } else { 5 }));
        }
        Ok((health, classified, ready))
    })();
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let _ = serve.wait();
    if args.keep {
        let (_, kept) = log.keep()?;
        eprintln!("recovery: kept serve's log {}", kept.display());
    }
    let (health, classified, ready) = result?;
    let ms = |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 10_000.0).round() / 10.0);
    let uncertain = count("SELECT count(*) FROM operations WHERE status = 'uncertain'")?;
    let line = json!({
        "bench": "recovery", "figure": "recovery", "backend": "postgres",
        "operations": args.operations,
        "rooms": args.rooms,
        "health_ms": ms(health),
        "classified_ms": ms(classified),
        "ready_ms": ms(ready),
        "uncertain_after": uncertain,
        "target": "issue 21: 10,000 in-flight operations classified in <= 1 s; /health answers within 100 ms of start",
    });
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
    }
    runtime.block_on(probe.close());
    Ok(())
}

/// Whether `/health` at `address` answers 200 now.
fn health_answers(address: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(
        stream,
        "GET /health HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    stream.read_to_string(&mut answer).is_ok() && answer.starts_with("HTTP/1.1 200")
}
