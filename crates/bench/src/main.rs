//! `agentroom-bench`: measures agentroom's performance figures and prints one JSON line per
//! figure on stdout (progress on stderr). Figures are compared as ratios against baselines
//! measured on the same machine in the same sitting (../shared/peers, ../shared/anchors),
//! never asserted in tests.
// Printing figures is this binary's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod durable;
mod floor;
mod planning;

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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Planning(args) => planning::run(&args),
        Command::Durable(args) => durable::run(&args),
    }
}
/// Microseconds per clock tick of `/proc/*/stat`: Linux reports CPU time in USER_HZ, which is
/// 100 on every architecture it exports to user space as a fixed value.
pub(crate) const TICK_US: f64 = 10_000.0;

/// The user + system CPU ticks of process `pid` (`self` for this one) so far, from
/// `/proc/<pid>/stat` (fields 14 and 15); `None` where there is no such file (not Linux, or
/// a server on another machine).
pub(crate) fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}
