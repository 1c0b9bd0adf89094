//! `agentroom-bench callers` (issue 21, item 6): concurrent callers posting owner messages
//! (one durable call each, the no-op provider answering at once) on one Room and on as many
//! Rooms as callers, on PostgreSQL, beside the raw commit throughput of the same number of
//! connections measured by this binary in the same run, alternating, `--rounds` times.
//! Two ways to reach the store: every caller its own coordinator (separate host processes,
//! which meet at the store's compare-and-swap) and every caller through one coordinator (the
//! clients of one `serve`, whose Room actor serializes their decisions). The target: 8 callers
//! on one Room at ≥ 0.35× the raw commit throughput of the same connections.

use serde_json::json;

use crate::durable::{Hosts, concurrent};
use crate::floor;

/// Options of `agentroom-bench callers`.
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
    /// Messages each caller posts per figure.
    #[arg(long, default_value_t = 100)]
    per_caller: usize,
    /// The numbers of callers, each measured on 1 Room and on as many Rooms.
    #[arg(long, value_delimiter = ',', default_value = "8,32")]
    callers: Vec<usize>,
    /// Rounds: each measures the floor, then every figure.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    if args.per_caller == 0 || args.rounds == 0 || args.callers.contains(&0) {
        anyhow::bail!("--per-caller, --rounds and every --callers must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let args = args.clone();
    runtime.block_on(async move { tokio::spawn(async move { measure(&args).await }).await? })
}

async fn measure(args: &Args) -> anyhow::Result<()> {
    let (admin, name, url) =
        floor::create_db(&args.database_url, "agentroom_bench_callers").await?;
    let result = async {
        let pool = agentroom_store_postgres::migrate::connect(&url).await?;
        agentroom_store_postgres::migrate::up(&pool).await?;
        pool.close().await;
        for round in 1..=args.rounds {
            for &callers in &args.callers {
                let floor_tps = floor::throughput(&url, callers, args.per_caller).await?;
                for hosts in [Hosts::One, Hosts::OnePerCaller] {
                    for rooms in [1, callers] {
                        let (tps, commits) =
                            concurrent(&url, callers, rooms, args.per_caller, false, hosts)
                                .await?;
                        let line = json!({
                            "bench": "callers", "figure": "callers", "backend": "postgres",
                            "round": round,
                            "callers": callers,
                            "rooms": rooms,
                            "hosts": match hosts {
                                Hosts::One => "one coordinator (one serve)",
                                Hosts::OnePerCaller => "one coordinator per caller (separate hosts)",
                            },
                            "calls_per_s": (tps * 10.0).round() / 10.0,
                            "commits_per_call": (commits * 100.0).round() / 100.0,
                            "raw_commits_per_s_same_connections": floor_tps.round(),
                            "of_raw_commit_throughput": (tps / floor_tps * 1000.0).round() / 1000.0,
                            "target": "issue 21: 8 callers on one Room >= 0.35x the raw commit throughput of the same connections",
                        });
                        #[allow(clippy::print_stdout)]
                        {
                            println!("{line}");
                        }
                    }
                }
            }
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    floor::drop_db(&admin, &name).await?;
    result
}
