//! The `agentroom` binary: the composition root. It runs the durable demo, the planning
//! messages over stdio, the HTTP host with the coordinator of the store's Rooms (`serve`),
//! Room creation and event posting on the store, operator commands on operations,
//! migrations, policy and capability checks, and checks of the model providers; and the
//! operator commands against a running
//! host (`budget`, `objective`, `review`, `late-result`: HTTP clients of its REST API).
// Printing the timeline, board and ledger is this binary's job, through `output`, which
// survives a closed pipe (`clippy::print_stdout` keeps the print macros out).

mod capabilities;
mod demo;
mod drill;
mod eval;
mod event;
mod host;
mod mcp;
mod migrate;
mod operations;
mod operator;
mod output;
mod policies;
mod pool;
mod providers;
mod room;
mod room_demo;
mod serve;
mod stdio;
mod store;
mod token;

use agentroom_domain::ids::RoomId;
use clap::{Parser, Subcommand};

/// A coordinator for supervised multi-agent Rooms with budgeted reasoning.
#[derive(Parser)]
#[command(name = "agentroom", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Log filter for stderr (e.g. `info`, `agentroom_planning=debug`); quiet by default.
    #[arg(long, global = true, value_name = "FILTER", env = "AGENTROOM_LOG")]
    log: Option<String>,
    /// How log lines are written to stderr: `text` for people, `json` for collectors (one
    /// JSON object a line, with the spans it happened in: an HTTP request's carries its
    /// request id). Given without --log, it logs at `info`.
    #[arg(
        long,
        global = true,
        value_name = "FORMAT",
        env = "AGENTROOM_LOG_FORMAT"
    )]
    log_format: Option<LogFormat>,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a supervised Room with scripted agents through the coordinator on a fresh embedded
    /// database and print its timeline, the final board and the ledger (no network, no
    /// credentials); exits 0 only when every objective completed with an approving review and
    /// the ledger adds up.
    Demo {
        /// `demo` (the built-in `scenarios/demo.toml`), a scenario file, or one of the
        /// in-memory engine demos `supervised`, `budget`, `replanning`, `shared`.
        #[arg(long, value_name = "NAME|FILE", default_value = room_demo::DEFAULT_SCENARIO)]
        scenario: String,
        /// Where the fresh database goes (a temporary directory by default); must not hold
        /// one already.
        #[arg(long, value_name = "DIR")]
        root: Option<std::path::PathBuf>,
    },
    /// Issue 19's qualification: run the scenario corpus in legacy sessions, selective
    /// routing and the planner with the same scripted agents, permissions and budget, evaluate
    /// each run from its durable trace against the scenario's ground truth, and write the
    /// dated report (Markdown, SVG, JSON).
    Eval(Box<eval::EvalArgs>),
    /// Serve the six A2E planning messages on stdin/stdout (NDJSON), one session.
    Planning {
        /// Speak A2E over stdin/stdout (the only transport of this command).
        #[arg(long, required = true)]
        stdio: bool,
        /// The Room the session acts in.
        #[arg(long, default_value = "local", value_parser = RoomId::parse)]
        room: RoomId,
        #[command(flatten)]
        store: store::StoreArgs,
    },
    /// Serve the Model Context Protocol on stdin/stdout for one Room, as the principal of a
    /// bearer token read from --token-file or AGENTROOM_TOKEN (never an argument): tools
    /// authorized by the principal's current role, as the REST API's routes are. This process
    /// runs no agents: an event a tool posts is stored for the host coordinating the Room
    /// (`serve`) to decide.
    Mcp {
        /// Speak MCP over stdin/stdout (the only transport of this command so far).
        #[arg(long, required = true)]
        stdio: bool,
        /// The Room: the token's own (another is refused as not found).
        #[arg(long, value_parser = RoomId::parse)]
        room: RoomId,
        /// A file holding the bearer token (`ar_…`); without it, the environment variable
        /// AGENTROOM_TOKEN. There is no --token argument: it would show in `ps`.
        #[arg(long, value_name = "FILE")]
        token_file: Option<std::path::PathBuf>,
        /// Bridge to a running `agentroom serve` at this base URL instead of the store: the
        /// session is forwarded to its `/mcp` with the token as the bearer header, so the
        /// tools act on the host that runs the agents (events decided at once; a specialist's
        /// assignments wait there). Without it, the tools work on the store (--root or
        /// --database-url) and only record events. Refused with --root or --fsync, which
        /// name a store it would not open.
        #[arg(long, value_name = "URL", conflicts_with_all = ["root", "fsync"])]
        host: Option<String>,
        #[command(flatten)]
        store: store::StoreArgs,
    },
    /// Serve the REST API under `/v1/rooms` (bearer tokens), the web board at `/`, the A2E
    /// HTTP transport (`/session`, `/send`, `/stream`, `/health`) and `POST /v1/planning`,
    /// `/metrics`, and run the coordinator of the store's Rooms (recovery, then every
    /// persisted event accepted, the outbox delivered), until SIGINT or SIGTERM.
    Serve {
        /// Address to listen on (port 0 picks a free one; the bound address is printed).
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// A Room to coordinate (repeat for several; each must exist). None: every Room on the
        /// store, and each Room created while it runs. A2E sessions made without a bearer
        /// header (bound by their handshake's auth_token, or anonymous with
        /// --anonymous-planning) act in the first, or in `local`.
        #[arg(long = "room", value_parser = RoomId::parse)]
        rooms: Vec<RoomId>,
        #[command(flatten)]
        store: store::StoreArgs,
        /// The folder of `room.toml`, `access.toml` and `prices.toml`, validated at start;
        /// the capability and binding files a Room policy names are read relative to it. Its
        /// files override the built-in shipped ones (default: `./policies` if it exists, else
        /// the built-in policies alone).
        #[arg(long, value_name = "DIR")]
        policies: Option<std::path::PathBuf>,
        /// Scripted agents playing this scenario file execute every call.
        #[arg(long, value_name = "SCENARIO", conflicts_with = "openai")]
        agents: Option<std::path::PathBuf>,
        /// The scripted agents' journal (what they executed, synced before each call
        /// returns; the reconciler reads it). Default: `scripted-journal.jsonl` under --root.
        #[arg(long, value_name = "FILE", requires = "agents")]
        journal: Option<std::path::PathBuf>,
        /// The scripted agents' journal records are written but not synced before each call
        /// returns: they survive a crash of this process, not of the machine (agents that
        /// stand in for instant providers, as `agentroom-bench room` runs them).
        #[arg(long, requires = "agents")]
        journal_unsynced: bool,
        /// OpenAI-compatible APIs execute every call, configured by this TOML file: named
        /// `[endpoints]` and a model per role under `[models]` (see
        /// `policies/providers.example.toml`), or one `base_url` and `model` for every role.
        /// Prints at start which endpoint and model serve each role, and their quotes.
        #[arg(long, value_name = "CONFIG", visible_alias = "providers")]
        openai: Option<std::path::PathBuf>,
        /// A specialist whose work an agent host executes over the REST API (repeat for
        /// several): its calls wait for the result submitted to
        /// `POST /v1/rooms/{room}/assignments/{operation}/result` with its own token.
        #[arg(long = "hosted", value_name = "PRINCIPAL", value_parser = agentroom_domain::ids::PrincipalId::parse)]
        hosted: Vec<agentroom_domain::ids::PrincipalId>,
        /// Where hosted specialists' submissions are recorded before use (recovery confirms
        /// their calls from it). Default: `hosted-journal.jsonl` under --root.
        #[arg(long, value_name = "FILE")]
        hosted_journal: Option<std::path::PathBuf>,
        /// The lease of calls this process runs, in milliseconds.
        #[arg(long, default_value_t = 30_000, hide = true)]
        lease_ms: u64,
        /// Time between two passes over the store, in milliseconds.
        #[arg(long, default_value_t = 200, hide = true)]
        poll_ms: u64,
        /// Recovery runs again every this many passes (classifying the calls of processes
        /// that died once their leases expire).
        #[arg(long, default_value_t = 10, hide = true)]
        recover_every: u32,
        /// On PostgreSQL, which notifies Room changes (LISTEN/NOTIFY): time between two
        /// passes over every Room anyway, in milliseconds.
        #[arg(long, default_value_t = 5_000, hide = true)]
        fallback_ms: u64,
        /// On SIGTERM or SIGINT, how long calls already running may take to finish and record
        /// their receipts (`10s`, `1500ms`, `2m`); the leases of those still running then are
        /// released, so the next recovery classifies them at once. At most an hour.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = serve::parse_grace)]
        shutdown_grace: std::time::Duration,
        /// How long a call that reaches no provider (connection refused, rate limited) is
        /// retried, with jittered backoff under the same operation id and reservation, before
        /// its objective (or the pending owner message) stops for attention naming the error.
        #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = serve::parse_duration)]
        provider_wait: std::time::Duration,
        /// How long an uncertain call (it may have run; no result) stays uncertain, its
        /// reservation held and the operator notified, before it is dead-lettered.
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = serve::parse_duration)]
        uncertain_hold: std::time::Duration,
        /// Serve the A2E transport and `POST /v1/planning` without tokens, every caller
        /// acting as the owner of the first --room: for one local user on loopback only.
        /// Without it they need `Authorization: Bearer` like the REST API.
        #[arg(long)]
        anonymous_planning: bool,
        #[command(flatten)]
        connections: serve::ConnectionArgs,
        #[command(flatten)]
        mcp: Box<serve::McpArgs>,
    },
    /// Create a Room on the store.
    Room {
        #[command(subcommand)]
        command: room::Command,
    },
    /// The host's budget pools, on the store: create, show, raise, acknowledge; make a
    /// Room draw on one (attach) or on none (detach). Only a pool crosses Rooms (B8).
    Pool {
        #[command(subcommand)]
        command: pool::Command,
    },
    /// Persist an event to a Room (a running `serve` accepts it).
    Event {
        #[command(subcommand)]
        command: event::Command,
    },
    /// See uncertain and dead-lettered provider calls and record their resolution.
    Operations {
        #[command(subcommand)]
        command: operations::Command,
    },
    /// The budget of a Room on a running host: show it, or raise the limit (operators).
    #[command(after_help = operator::EXIT_CODES)]
    Budget {
        #[command(subcommand)]
        command: operator::BudgetCommand,
    },
    /// The objectives of a Room on a running host: list, show, pause, resume, cancel; the
    /// owner corrects one and reads its corrections.
    #[command(after_help = operator::EXIT_CODES)]
    Objective {
        #[command(subcommand)]
        command: operator::ObjectiveCommand,
    },
    /// Pending owner messages on a running host: list, retry one its provider failed.
    #[command(after_help = operator::EXIT_CODES)]
    Message {
        #[command(subcommand)]
        command: operator::MessageCommand,
    },
    /// The reports and reviews of an objective on a running host: show them; a reviewer
    /// records a review.
    #[command(after_help = operator::EXIT_CODES)]
    Review {
        #[command(subcommand)]
        command: operator::ReviewCommand,
    },
    /// Results held after a control change on a running host: list, readmit, discard (D4).
    #[command(after_help = operator::EXIT_CODES)]
    LateResult {
        #[command(subcommand)]
        command: operator::LateResultCommand,
    },
    /// The members of a Room on a running host: list, add (with a first token), change a
    /// member's roles, revoke a member (owners; T6).
    #[command(after_help = operator::EXIT_CODES)]
    Member {
        #[command(subcommand)]
        command: operator::MemberCommand,
    },
    /// The Room's memory on a running host: list, add an entry with its provenance, correct
    /// one (its history kept), retract one (kept, never sent to a model again); owners and
    /// operators (M1).
    #[command(after_help = operator::EXIT_CODES)]
    Memory {
        #[command(subcommand)]
        command: operator::MemoryCommand,
    },
    /// Redact an artifact's content (by digest) or a memory entry that holds a secret or
    /// personal data, on a running host: it leaves the store and the Room's history, a
    /// redaction record takes its place, and the history still replays (the owner's,
    /// `content.redact`).
    #[command(after_help = operator::EXIT_CODES)]
    Redact {
        #[command(subcommand)]
        command: operator::RedactCommand,
    },
    /// The Room's redaction records on a running host: what was redacted, by whom, when, why,
    /// and the digest of what was removed.
    #[command(after_help = operator::EXIT_CODES)]
    Redactions {
        #[command(flatten)]
        target: operator::Target,
    },
    /// Issue, revoke and list the bearer tokens of the REST API.
    Token {
        #[command(subcommand)]
        command: token::Command,
    },
    /// Apply, show or revert the database schema (the only command that changes it).
    Migrate {
        #[command(subcommand)]
        command: migrate::Command,
    },
    /// Validate Capability and Binding files, or resolve a capability to its provider.
    Capabilities {
        #[command(subcommand)]
        command: capabilities::Command,
    },
    /// Check the policy files (`room.toml`, `access.toml`, `prices.toml`).
    Policies {
        #[command(subcommand)]
        command: policies::Command,
    },
    /// Check the model providers of a configuration (`serve --openai CONFIG`).
    Providers {
        #[command(subcommand)]
        command: providers::Command,
    },
    /// Drive owner messages through the coordinator for crash tests (not a product command).
    #[command(hide = true)]
    Drill {
        #[command(subcommand)]
        command: drill::Command,
    },
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The whole chain on one line, without a backtrace: this is for people.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("error: {error:#}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let logs = init_logs(cli.log.as_deref(), cli.log_format)?;
    match cli.command.unwrap_or(Command::Demo {
        scenario: room_demo::DEFAULT_SCENARIO.to_owned(),
        root: None,
    }) {
        Command::Eval(args) => {
            let text = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?
                .block_on(eval::run(*args))?;
            output::print(&text)?;
        }
        Command::Demo { scenario, root } => {
            let text = match <demo::Scenario as clap::ValueEnum>::from_str(&scenario, false) {
                Ok(in_memory) => demo::run(in_memory)?,
                Err(_) => tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()?
                    .block_on(room_demo::run(&scenario, root))?,
            };
            output::print(&text)?;
        }
        Command::Capabilities { command } => capabilities::run(command)?,
        Command::Planning {
            stdio: _,
            room,
            store,
        } => current_thread()?.block_on(stdio::run(&store, room))?,
        Command::Mcp {
            stdio: _,
            room,
            token_file,
            host: Some(host),
            store: _,
        } => current_thread()?.block_on(mcp::bridge(&host, room, token_file))?,
        Command::Mcp {
            stdio: _,
            room,
            token_file,
            host: None,
            store,
        } => current_thread()?.block_on(mcp::run(&store, room, token_file.as_deref()))?,
        Command::Serve {
            listen,
            rooms,
            store,
            policies,
            agents,
            journal,
            journal_unsynced,
            openai,
            hosted,
            hosted_journal,
            lease_ms,
            poll_ms,
            recover_every,
            fallback_ms,
            shutdown_grace,
            provider_wait,
            uncertain_hold,
            anonymous_planning,
            connections,
            mcp,
        } => {
            // A bad policy file stops the host before it listens, naming file, line, field.
            let policies = policies::PolicyFiles::new(policies)?;
            let loaded = policies::load(&policies)?;
            let agents = match (agents, openai) {
                (Some(scenario), _) => host::AgentsChoice::Scripted {
                    scenario,
                    journal: journal.unwrap_or_else(|| serve::default_journal(&store.root)),
                    synced: !journal_unsynced,
                },
                (None, Some(config)) => host::AgentsChoice::OpenAi { config },
                (None, None) => host::AgentsChoice::None,
            };
            let coordinator = serve::CoordinatorArgs {
                rooms,
                policies_dir: policies,
                agents,
                hosted,
                hosted_journal: hosted_journal
                    .unwrap_or_else(|| serve::default_hosted_journal(&store.root)),
                lease: std::time::Duration::from_millis(lease_ms.max(1)),
                poll: std::time::Duration::from_millis(poll_ms.max(1)),
                recover_every,
                fallback: std::time::Duration::from_millis(fallback_ms.max(1)),
                shutdown_grace,
                provider_wait,
                uncertain_hold,
                notes: match logs {
                    Logs::Off => serve::StartupNotes::Stderr,
                    Logs::On => serve::StartupNotes::Log,
                },
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(serve::run(
                    listen,
                    &store,
                    loaded,
                    coordinator,
                    anonymous_planning,
                    connections,
                    mcp,
                ))?
        }
        Command::Room { command } => {
            let text = current_thread()?.block_on(room::run(command))?;
            output::print(&text)?;
        }
        Command::Pool { command } => {
            let text = current_thread()?.block_on(pool::run(command))?;
            output::print(&text)?;
        }
        Command::Event { command } => {
            let text = current_thread()?.block_on(event::run(command))?;
            output::print(&text)?;
        }
        Command::Policies { command } => output::print(&policies::run(command)?)?,
        Command::Providers { command } => current_thread()?.block_on(providers::run(command))?,
        Command::Operations { command } => {
            let text = current_thread()?.block_on(operations::run(command))?;
            output::print(&text)?;
        }
        Command::Budget { command } => {
            output::print(&current_thread()?.block_on(operator::budget(command))?)?;
        }
        Command::Objective { command } => {
            output::print(&current_thread()?.block_on(operator::objective(command))?)?;
        }
        Command::Message { command } => {
            output::print(&current_thread()?.block_on(operator::message(command))?)?;
        }
        Command::Review { command } => {
            output::print(&current_thread()?.block_on(operator::review(command))?)?;
        }
        Command::LateResult { command } => {
            output::print(&current_thread()?.block_on(operator::late_result(command))?)?;
        }
        Command::Member { command } => {
            output::print(&current_thread()?.block_on(operator::member(command))?)?;
        }
        Command::Memory { command } => {
            output::print(&current_thread()?.block_on(operator::memory(command))?)?;
        }
        Command::Redact { command } => {
            output::print(&current_thread()?.block_on(operator::redact(command))?)?;
        }
        Command::Redactions { target } => {
            output::print(&current_thread()?.block_on(operator::redactions(target))?)?;
        }
        Command::Token { command } => {
            let text = current_thread()?.block_on(token::run(command))?;
            output::print(&text)?;
        }
        Command::Migrate { command } => {
            let text = current_thread()?.block_on(migrate::run(command))?;
            output::print(&text)?;
        }
        Command::Drill { command } => {
            let text = current_thread()?.block_on(drill::run(command))?;
            output::print(&text)?;
        }
    }
    Ok(())
}

fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Whether log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logs {
    /// Nothing is logged (the default).
    Off,
    /// Log lines go to stderr.
    On,
}

/// Logs go to stderr only, and only when asked for (`--log`, or `--log-format`, which logs at
/// `info` unless `--log` says otherwise): stdout belongs to the protocol, and a client that
/// never reads stderr must not fill its pipe.
fn init_logs(filter: Option<&str>, format: Option<LogFormat>) -> anyhow::Result<Logs> {
    let filter = match (filter, format) {
        (Some(filter), _) => filter,
        (None, Some(_)) => "info",
        (None, None) => return Ok(Logs::Off),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("--log {filter}: {e}"))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.unwrap_or(LogFormat::Text) {
        LogFormat::Text => logs.init(),
        // The current span and the whole span list on every line: a request's id, method and
        // path reach every line logged while it runs.
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
    Ok(Logs::On)
}
