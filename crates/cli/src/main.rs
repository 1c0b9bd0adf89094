//! The `agentroom` binary: the composition root. Today it runs the engine's scripted demo;
//! the store, server and coordinator commands join as their crates land.
// Printing the timeline, board and ledger is this binary's job.
#![allow(clippy::print_stdout)]

mod capabilities;
mod demo;

use clap::{Parser, Subcommand};

/// A coordinator for supervised multi-agent Rooms with budgeted reasoning.
#[derive(Parser)]
#[command(name = "agentroom", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scripted supervised Room through the rules engine and print its timeline, the
    /// final board and the ledger (in memory: no database, no network, no credentials).
    Demo {
        /// Which built-in scenario to run.
        #[arg(long, value_enum, default_value_t = demo::Scenario::Supervised)]
        scenario: demo::Scenario,
    },
    /// Validate Capability and Binding files, or resolve a capability to its provider.
    Capabilities {
        #[command(subcommand)]
        command: capabilities::Command,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Demo {
        scenario: demo::Scenario::Supervised,
    }) {
        Command::Demo { scenario } => {
            let text = demo::run(scenario)?;
            print!("{text}");
        }
        Command::Capabilities { command } => capabilities::run(command)?,
    }
    Ok(())
}
