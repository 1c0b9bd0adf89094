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
