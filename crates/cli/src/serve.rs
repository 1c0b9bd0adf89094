//! `agentroom serve`: the HTTP host (the A2E HTTP transport and `POST /v1/planning`) and the
//! coordinator of the Rooms on its store, until SIGINT or SIGTERM.
//!
//! On start the coordinator recovers (D2: receipts applied, expired calls made uncertain and
//! reconciled, never replayed) and accepts every event persisted but never accepted (T1);
//! then it keeps accepting newly persisted events (polling the store: `agentroom event post`,
//! another process), delivers the outbox (T5) and recovers again now and then, so the calls
//! of a process that died are picked up once their leases expire. Several `serve` processes
//! may share one database: compare-and-swap and the once-per-event acceptance keep every task
//! dispatched once. The capability and binding files named by each Room's policy are loaded
//! when the coordinator starts. Without `--room` it coordinates every Room on the store, and a
//! Room created while it runs (`agentroom room create`) from the next pass on, once the files
//! its policy names are loaded (a bad file is logged and the Room waits; the others go on).
//!
//! With `--hosted PRINCIPAL`, that specialist's calls wait on this process for the results its
//! agent host submits over the REST API (`/v1/rooms/{room}/assignments`), synced to the hosted
//! journal before use; recovery confirms them from it (D2). A call waits in the process that
//! dispatched it, so with several processes on one database an agent host submits to that one
//! (another answers 409).
//!
//! SIGTERM (or SIGINT) stops gracefully: the listener takes no new connection (requests in
//! progress finish), the loops stop between two passes, and the coordinator decides nothing
//! new (no event accepted, no call reserved or dispatched; an API request that would decide
//! something gets 503). Calls already running get `--shutdown-grace` to finish and record
//! their receipts (applied to their Rooms by the next recovery, of any process); the calls
//! still running after it are aborted and their leases released (expired now by the database
//! clock, the generation moved on), so the next recovery classifies them at once instead of
//! waiting out the lease: uncertain with their reservations held, reconciled, never replayed
//! (D2, D3). Then the process exits 0.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::Served;
use agentroom_coordinator::{BackgroundConfig, Coordinated, Coordinator, CoordinatorConfig, Store};
use agentroom_domain::ids::RoomId;
use agentroom_planning::{PlanningRepository, PlanningService, SystemAmbient};
use agentroom_ports::SystemClock;
use agentroom_server::ServerConfig;
use agentroom_server::api::{Api, Feed};
use agentroom_workflows::RunnerConfig;
use anyhow::{Context, anyhow, bail};
use tokio::sync::watch;

use crate::host::{self, AgentsChoice};
use crate::policies::Policies;
use crate::store::StoreArgs;

/// The Room a host serves when none is named.
const DEFAULT_ROOM: &str = "local";

/// How the coordinator of `serve` runs.
#[derive(Debug, Clone)]
pub(crate) struct CoordinatorArgs {
    /// The Rooms to coordinate; empty: every Room on the store, including those created
    /// while it runs.
    pub(crate) rooms: Vec<RoomId>,
    /// The policy files (capability files are relative to their folder).
    pub(crate) policies_dir: crate::policies::PolicyFiles,
    /// Who executes calls.
    pub(crate) agents: AgentsChoice,
    /// Specialists whose work agent hosts execute over the REST API (`--hosted`).
    pub(crate) hosted: Vec<agentroom_domain::ids::PrincipalId>,
    /// Where their submissions are recorded before use (D2).
    pub(crate) hosted_journal: PathBuf,
    /// Lease of the calls this process runs.
    pub(crate) lease: Duration,
    /// Time between two passes over the store.
    pub(crate) poll: Duration,
    /// Recovery runs again every this many passes.
    pub(crate) recover_every: u32,
    /// With a Room change feed (PostgreSQL): time between two passes over every Room.
    pub(crate) fallback: Duration,
    /// How long calls still running at a graceful stop may take to finish.
    pub(crate) shutdown_grace: Duration,
    /// How long a call that reaches nothing is retried before its objective stops.
    pub(crate) provider_wait: Duration,
    /// How long an uncertain call stays uncertain before it is dead-lettered.
    pub(crate) uncertain_hold: Duration,
    /// Where the start-up facts for the operator go (which models serve which role).
    pub(crate) notes: StartupNotes,
}

/// Where `serve` says at start which endpoint and model serve each role: on stderr when no
/// log is asked for (the operator must see it), else in the log, so a collector of JSON log
/// lines reads only JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartupNotes {
    /// Plain lines on stderr.
    Stderr,
    /// Log events (target `agentroom::providers`).
    Log,
}

pub(crate) async fn run(
    listen: SocketAddr,
    store: &StoreArgs,
    policies: Policies,
    coordinator: CoordinatorArgs,
    anonymous_planning: bool,
    connections: ConnectionArgs,
    mcp: Box<McpArgs>,
) -> anyhow::Result<()> {
    // Before anything is opened: owner-level planning without tokens is for one local user.
    refuse_anonymous_off_loopback(listen, anonymous_planning)?;
    let limits = connections.limits()?;
    let mcp = mcp.config(listen);
    tracing::info!(permissions = ?policies.access, "policies loaded");
    // Bound first (issue 21): while the store opens and the Rooms recover, `/health` answers
    // "starting" and every other request 503 with Retry-After, so a supervisor sees the
    // process alive from its first moments. The line below is printed once it serves all.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let bound = listener.local_addr()?;
    let (front, starting) = agentroom_server::starting();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mcp_stop: Arc<std::sync::Mutex<Option<agentroom_mcp::McpShutdown>>> = Arc::default();
    let stopping = {
        let mcp_stop = Arc::clone(&mcp_stop);
        async move {
            stop_signal().await;
            // Said first, so that a start finishing now sees it and ends the MCP sessions
            // itself if they are not in the slot yet.
            let _ = stop_tx.send(true);
            // MCP sessions end before the listener stops: their open streams would hold the
            // graceful stop open.
            let mcp = mcp_stop
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(mcp) = mcp {
                mcp.shut_down();
            }
        }
    };
    let server = tokio::spawn(agentroom_server::serve_with(
        listener, front, limits, stopping,
    ));
    let started = async {
        // A missing embedded file is created and migrated (D5), then opened once for both.
        let (rooms, repo) = store.open_host().await?;
        let session_room = coordinator
            .rooms
            .first()
            .cloned()
            .map_or_else(|| RoomId::parse(DEFAULT_ROOM), Ok)?;
        let http = Host {
            planning: repo,
            session_room,
            anonymous_planning,
            mcp,
        };
        start_coordinator(rooms, &policies, &coordinator, http, stop_rx.clone()).await
    };
    let (app, background, mcp) = match started.await {
        Ok(started) => started,
        Err(error) => {
            server.abort();
            return Err(error);
        }
    };
    *mcp_stop
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(mcp);
    if *stop_rx.borrow() {
        // Stopped while starting (the listener stops already): the MCP sessions end now if
        // the stop found none to end, and the host neither serves nor says where it listens.
        let mcp = mcp_stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mcp) = mcp {
            mcp.shut_down();
        }
        tracing::info!("stopped while starting");
    } else {
        starting.ready(app);
        // The one line a supervisor (or a test that asked for port 0) reads to find us.
        // A supervisor that stopped reading does not stop the host.
        if let Err(error) =
            crate::output::print_line(&format!("agentroom listening on http://{bound}"))
        {
            server.abort();
            return Err(error);
        }
    }
    server
        .await
        .map_err(|e| anyhow!("the HTTP server failed: {e}"))??;
    let report = background
        .await
        .map_err(|e| anyhow!("the coordinator loop failed: {e}"))?;
    tracing::info!(?report, "stopped");
    Ok(())
}

/// `--anonymous-planning` serves the planning messages as the Room's owner to anyone who
/// reaches the address: only on a loopback address (127.0.0.0/8, ::1), where that is the
/// local user. Anywhere else it is refused before anything starts.
fn refuse_anonymous_off_loopback(listen: SocketAddr, anonymous: bool) -> anyhow::Result<()> {
    if anonymous && !listen.ip().is_loopback() {
        bail!(
            "--anonymous-planning serves owner-level planning without a token, so it listens on a \
             loopback address only (e.g. --listen 127.0.0.1:8080), not {listen}; without it, A2E \
             clients bring a token (`agentroom token issue`)"
        );
    }
    Ok(())
}

/// How `serve` treats connections (issue 17): timeouts and how many are served at once.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ConnectionArgs {
    /// How long a new connection may take to send its first request's headers before it is
    /// closed (`10s`, `1500ms`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) header_read_timeout: Duration,
    /// How long a request body may take to arrive whole after its headers; a slower one is
    /// answered 408 and its connection closed.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub(crate) body_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub(crate) idle_timeout: Duration,
    /// The most connections served at once; one more closes the connection idle the longest
    /// (so idle connections never keep `/health` from answering). Default: 1024, or fewer
    /// when the open-file limit (`ulimit -n`) is lower, leaving 64 descriptors for the store
    /// and the providers.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,
}

/// Descriptors kept for everything but client connections: the store's files, journals,
/// provider connections, the runtime's own.
const SPARE_DESCRIPTORS: u64 = 64;

impl ConnectionArgs {
    /// The server's limits: `--max-connections`, else the default within the open-file
    /// limit (a larger `--max-connections` than that allows is said, not refused: shedding
    /// still keeps the host answering).
    fn limits(&self) -> anyhow::Result<agentroom_server::ConnectionLimits> {
        let files = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map(|(soft, _)| soft)
            .ok();
        let fits = files.map(|soft| {
            usize::try_from(soft.saturating_sub(SPARE_DESCRIPTORS).max(soft / 2).max(1))
                .unwrap_or(usize::MAX)
        });
        let max_connections = match self.max_connections {
            Some(asked) => {
                let asked = usize::try_from(asked)?;
                if let Some(fits) = fits
                    && asked > fits
                {
                    tracing::warn!(
                        asked,
                        fits,
                        "--max-connections is above what the open-file limit leaves for \
                         connections; idle ones are closed when descriptors run out"
                    );
                }
                asked
            }
            None => fits.map_or(agentroom_server::DEFAULT_MAX_CONNECTIONS, |fits| {
                fits.min(agentroom_server::DEFAULT_MAX_CONNECTIONS)
            }),
        };
        Ok(agentroom_server::ConnectionLimits {
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections,
        })
    }
}

/// How `serve` bounds `/mcp` (issue 20): sessions and requests per token, idle sessions,
/// the `Host` names it answers.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct McpArgs {
    /// The most MCP sessions (`/mcp`) one bearer token may hold at once; one more
    /// `initialize` is answered `429 too_many_sessions` (end one with `DELETE /mcp`, or let it
    /// expire).
    #[arg(long, value_name = "N", default_value_t = agentroom_mcp::DEFAULT_SESSIONS_PER_TOKEN as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) mcp_sessions_per_token: u32,
    /// The most MCP sessions at once, all tokens together; one more is `503
    /// too_many_sessions`.
    #[arg(long, value_name = "N", default_value_t = agentroom_mcp::DEFAULT_MAX_SESSIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) mcp_max_sessions: u32,
    /// Requests per second one token may make to `/mcp`, sustained; beyond it (and the
    /// burst) a request is answered `429 rate_limited` with `Retry-After`.
    #[arg(long, value_name = "N", default_value_t = agentroom_mcp::DEFAULT_REQUESTS_PER_SECOND, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) mcp_requests_per_second: u32,
    /// Requests one token may make to `/mcp` at once after a quiet spell.
    #[arg(long, value_name = "N", default_value_t = agentroom_mcp::DEFAULT_BURST, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) mcp_burst: u32,
    /// An MCP session with no message for this long ends (its id then answers 404).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub(crate) mcp_session_idle_timeout: Duration,
    /// A `Host` name `/mcp` answers besides the loopback names and the --listen address
    /// (repeat for several): the names clients reach a public host by (`agents.example.com`).
    /// Any other `Host` is refused with 403 (DNS rebinding).
    #[arg(long = "mcp-allowed-host", value_name = "HOST")]
    pub(crate) mcp_allowed_hosts: Vec<String>,
}

impl McpArgs {
    /// The bounds of `/mcp`, for a host listening on `listen`.
    fn config(&self, listen: SocketAddr) -> agentroom_mcp::HttpConfig {
        // rmcp checks each request's `Host` against this list before anything else: a web
        // page whose name an attacker rebinds to 127.0.0.1 (DNS rebinding) sends its own name
        // as the Host, so a browser on this machine cannot be made to reach a local /mcp.
        // Tokens are required anyway (the browser has none to send); this closes the door
        // before the guard. Loopback names, the address listened on (unless it is a
        // wildcard, which names no host) and the names the operator gives.
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        if !listen.ip().is_unspecified() {
            hosts.push(listen.ip().to_string());
        }
        hosts.extend(self.mcp_allowed_hosts.iter().cloned());
        hosts.dedup();
        let mut config = agentroom_mcp::HttpConfig::new(hosts);
        config.sessions_per_token =
            usize::try_from(self.mcp_sessions_per_token).unwrap_or(usize::MAX);
        config.max_sessions = usize::try_from(self.mcp_max_sessions).unwrap_or(usize::MAX);
        config.requests_per_second = self.mcp_requests_per_second;
        config.burst = self.mcp_burst;
        config.session_idle_timeout = self.mcp_session_idle_timeout;
        config
    }
}

/// What the HTTP host is built from besides the coordinator.
struct Host {
    /// The planning messages' repository (standalone plans).
    planning: Arc<dyn PlanningRepository>,
    /// The Room anonymous A2E sessions act in.
    session_room: RoomId,
    /// Serve the A2E transport and `/v1/planning` without tokens (every caller acts as the
    /// owner of `session_room`).
    anonymous_planning: bool,
    /// The bounds of `/mcp`.
    mcp: agentroom_mcp::HttpConfig,
}

/// The HTTP routes, in one place: the A2E transport and `/v1/planning` (behind bearer tokens
/// unless `--anonymous-planning`), the REST API under `/v1/rooms`, the web board at `/`,
/// `/metrics` (a request id on each of their responses), and MCP's streamable HTTP at `/mcp`
/// (always behind bearer tokens); with the handle that ends the MCP sessions.
fn router(api: Api, host: &Host) -> (agentroom_server::Router, agentroom_mcp::McpShutdown) {
    let config = ServerConfig::new(host.session_room.clone());
    let a2e = if host.anonymous_planning {
        agentroom_server::router(Arc::clone(&api.planning), config)
    } else {
        agentroom_server::authenticated_router(config, &api)
    };
    let (mcp, mcp_stop) = agentroom_mcp::McpHttp::new(
        api.rooms.clone(),
        Arc::clone(&api.planning),
        host.mcp.clone(),
    );
    let app = agentroom_server::api::with_request_ids(a2e)
        .merge(agentroom_server::api::router(api))
        .route_service("/mcp", mcp);
    (app, mcp_stop)
}

type Background = tokio::task::JoinHandle<agentroom_coordinator::ShutdownReport>;

/// What [`start_coordinator`] hands back: the routes, the coordinator's loops, and the
/// handle that ends the MCP sessions at the stop.
type Started = (
    agentroom_server::Router,
    Background,
    agentroom_mcp::McpShutdown,
);

/// Builds the coordinator over `store`, recovers, spawns its loops (which, without `--room`,
/// pick up the Rooms created later: a fresh store serves the planning messages and the API
/// until one is) and returns the host's routes over it.
async fn start_coordinator(
    store: Arc<dyn Store>,
    policies: &Policies,
    args: &CoordinatorArgs,
    http: Host,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Started> {
    // The agents' configuration is checked even when there is no Room to coordinate yet.
    let (agents, reconciler, served) = host::agents(&args.agents, &policies.prices)?;
    say_what_is_served(&served, &args.hosted, args.notes);
    let (agents, reconciler, hosted) =
        host::hosted(&args.hosted, &args.hosted_journal, agents, reconciler)?;
    let rooms = rooms_to_coordinate(&*store, &args.rooms).await?;
    if rooms.is_empty() {
        tracing::info!("no room to coordinate yet: create one with `agentroom room create`");
    }
    let mut stored = Vec::new();
    for room in &rooms {
        let loaded = agentroom_ports::RoomStore::load(&*store, room)
            .await?
            .ok_or_else(|| anyhow!("no room {room}"))?;
        stored.push(loaded.state);
    }
    let room_policies: Vec<_> = stored.iter().map(|s| s.policy()).collect();
    let catalog = Arc::new(
        host::HostCatalog::load(&room_policies, &args.policies_dir)
            .map_err(|e| anyhow!("the capability files named by the Room policy: {e}"))?,
    );
    if matches!(args.agents, AgentsChoice::None) {
        tracing::warn!("no agents configured (--agents or --openai): every call is refused");
    }
    let room_served = served_to_rooms(&served, &args.hosted);
    if let Some(room_served) = &room_served {
        for state in &stored {
            say_short_quotes(state, room_served, args.notes);
        }
    }
    let feed = Arc::new(Feed::new());
    let coordinator = Coordinator::builder(store, CoordinatorConfig::new(runner_config(args)))
        .provider(Arc::new(agents))
        .reconciler(Arc::new(reconciler))
        .clock(Arc::new(SystemClock))
        .catalog(catalog.clone())
        .notifier(Arc::new(host::LogNotifier::new(Arc::clone(&feed) as _)));
    let coordinator = match room_served {
        Some(room_served) => coordinator.served(room_served),
        None => coordinator,
    };
    let coordinator = match hosted {
        Some(desk) => coordinator.desk(desk),
        None => coordinator,
    }
    .build();
    // Coordinator plans are planning plans (one per objective, `plan_id` = its id).
    let planning = Arc::new(
        PlanningService::new(Arc::clone(&http.planning), Arc::new(SystemAmbient))
            .with_coordinator_plans(Arc::new(coordinator.clone())),
    );
    let api = Api {
        rooms: coordinator.clone(),
        planning,
        feed,
    };
    // The API watches the coordinator's commits from here on, before recovery decides.
    let (app, mcp_stop) = router(api, &http);
    let report = coordinator.recover().await?;
    tracing::info!(?report, "recovered");
    for room in &rooms {
        let accepted = coordinator.accept_pending(room).await?;
        tracing::info!(%room, accepted, "pending events accepted");
    }
    let rooms = if args.rooms.is_empty() {
        Coordinated::every(rooms, Box::new(host::CatalogAdmission(catalog)))
    } else {
        Coordinated::named(rooms)
    };
    let config = BackgroundConfig::new(args.poll, args.recover_every).with_fallback(args.fallback);
    let grace = args.shutdown_grace;
    let background = tokio::spawn(async move {
        // At the stop the coordinator closes at once (nothing new is decided, the calls
        // running get their grace) while the loops finish their pass.
        let (_, report) = tokio::join!(
            coordinator.run_background(rooms, &config, stopped(stop.clone())),
            async {
                stopped(stop).await;
                coordinator.shutdown(grace).await
            }
        );
        report
    });
    Ok((app, background, mcp_stop))
}

/// One line per role (and per specialist with a model of its own): endpoint name, URL, model
/// and the quote one call reserves; never a key. A specialist that is `--hosted` is executed
/// by its agent host whatever the models say. Then the least quotes a Room needs here.
#[allow(
    clippy::print_stderr,
    reason = "start-up facts for the operator when nothing is logged"
)]
fn say_what_is_served(
    served: &[Served],
    hosted: &[agentroom_domain::ids::PrincipalId],
    notes: StartupNotes,
) {
    if served.is_empty() {
        return;
    }
    let mut lines = Vec::new();
    for entry in served {
        if entry.principal.as_ref().is_some_and(|p| hosted.contains(p)) {
            continue;
        }
        match notes {
            StartupNotes::Stderr => lines.push(format!("agentroom serves {entry}")),
            StartupNotes::Log => tracing::info!(
                target: "agentroom::providers",
                role = entry.role.as_str(),
                principal = entry.principal.as_ref().map(ToString::to_string),
                endpoint = %entry.endpoint,
                url = %entry.url,
                model = %entry.model,
                quote_micros = entry.quote.micros(),
                "serving"
            ),
        }
    }
    for principal in hosted {
        lines.push(format!(
            "agentroom serves specialist {principal}: hosted (its agent host executes its tasks)"
        ));
    }
    let needed = agentroom_agents::providers::quotes_needed(served);
    lines.push(format!(
        "a Room's quotes must be at least: reasoner {}, specialist {}, reviewer {} \
         (`room create --model M` with M priced at least as high as each role's model)",
        needed.reasoner, needed.specialist, needed.reviewer
    ));
    match notes {
        StartupNotes::Stderr => {
            for line in &lines {
                eprintln!("{line}");
            }
        }
        StartupNotes::Log => {
            for line in &lines {
                tracing::info!(target: "agentroom::providers", "{line}");
            }
        }
    }
}

/// What the Rooms' quotes must cover (B6): per role, the priciest model serving it (hosted
/// specialists are executed by their agent hosts, not a model). `None` without models.
pub(crate) fn served_to_rooms(
    served: &[Served],
    hosted: &[agentroom_domain::ids::PrincipalId],
) -> Option<agentroom_domain::state::Served> {
    use agentroom_domain::state::{CallRole, ServedModel};
    let priciest = |role: CallRole| {
        served
            .iter()
            .filter(|s| s.role == role && !s.principal.as_ref().is_some_and(|p| hosted.contains(p)))
            .max_by_key(|s| s.quote)
            .map(|s| ServedModel {
                model: s.model.clone(),
                quote: s.quote,
            })
    };
    let room_served = agentroom_domain::state::Served {
        reasoner: priciest(CallRole::Reasoner),
        specialist: priciest(CallRole::Specialist),
        reviewer: priciest(CallRole::Reviewer),
    };
    (room_served != agentroom_domain::state::Served::default()).then_some(room_served)
}

/// Says, for a Room whose quotes do not cover the models served, which role, which model and
/// the command that fixes it: until then no call of that role is admitted there (B6); the
/// other Rooms run.
#[allow(
    clippy::print_stderr,
    reason = "start-up facts for the operator when nothing is logged"
)]
fn say_short_quotes(
    state: &agentroom_domain::state::RoomState,
    served: &agentroom_domain::state::Served,
    notes: StartupNotes,
) {
    for (role, model, quote) in served.shortfalls(&state.quotes()) {
        let line = format!(
            "room {}: its {} quote {quote} is below what model `{}` may cost ({}); no {} call \
             is admitted there until an operator runs `agentroom budget quotes --room {}`",
            state.room(),
            role.as_str(),
            model.model,
            model.quote,
            role.as_str(),
            state.room()
        );
        match notes {
            StartupNotes::Stderr => eprintln!("agentroom: {line}"),
            StartupNotes::Log => tracing::warn!(target: "agentroom::providers", "{line}"),
        }
    }
}

/// Resolves once the stop signal fired.
async fn stopped(mut stop: watch::Receiver<bool>) {
    // The sender lives until `run` returns, after the loops: an error means it is gone,
    // which is a stop too.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Parses `--shutdown-grace`: whole seconds (`10`, `10s`), milliseconds (`1500ms`) or
/// minutes (`2m`).
pub(crate) fn parse_grace(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration > Duration::from_secs(3_600) {
        return Err(format!("`{}` is longer than an hour", text.trim()));
    }
    Ok(duration)
}

/// A duration as people write it: `1500ms`, `10s`, `15m`, `24h`, `7d` (a bare number is
/// seconds). Zero is refused: every window here must let something happen.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let bad = || format!("`{text}` is not a duration: write e.g. `10s`, `1500ms`, `15m` or `24h`");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let seconds = |factor: u64| {
        n.checked_mul(factor)
            .map(Duration::from_secs)
            .ok_or_else(bad)
    };
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => seconds(60)?,
        "h" => seconds(3_600)?,
        "d" => seconds(86_400)?,
        _ => return Err(bad()),
    };
    if duration.is_zero() {
        return Err(format!("`{text}` is zero: give a positive duration"));
    }
    Ok(duration)
}

/// The runner of `serve`: calls that reach nothing are retried for `provider_wait`; an
/// uncertain call is asked about at every recovery (every `poll` × `recover_every`) and
/// dead-lettered only after `uncertain_hold`, long enough for an operator to act.
pub(crate) fn runner_config(args: &CoordinatorArgs) -> RunnerConfig {
    let every = args
        .poll
        .saturating_mul(args.recover_every.max(1))
        .max(Duration::from_millis(1));
    let passes = args.uncertain_hold.as_millis().div_ceil(every.as_millis());
    RunnerConfig::new(runner_name(), args.lease)
        .with_not_sent_window(args.provider_wait)
        .with_max_recovery_attempts(u32::try_from(passes).unwrap_or(u32::MAX).max(1))
}

/// The Rooms named, each of which must exist; or, when none is named, every Room on the
/// store now.
async fn rooms_to_coordinate<S: agentroom_ports::RoomStore + ?Sized>(
    store: &S,
    named: &[RoomId],
) -> anyhow::Result<Vec<RoomId>> {
    if named.is_empty() {
        const PAGE: usize = 256;
        let mut rooms: Vec<RoomId> = Vec::new();
        loop {
            let page = store.rooms(rooms.last(), PAGE).await?;
            let last = page.len() < PAGE;
            rooms.extend(page);
            if last {
                return Ok(rooms);
            }
        }
    }
    for room in named {
        if store.load(room).await?.is_none() {
            bail!("no room {room}: create it with `agentroom room create`");
        }
    }
    Ok(named.to_vec())
}

/// This process's lease owner name: host and process id.
fn runner_name() -> String {
    format!("agentroom-serve-{}", std::process::id())
}

/// Where the scripted agents' journal goes by default: next to the embedded database.
pub(crate) fn default_journal(root: &Path) -> PathBuf {
    root.join("scripted-journal.jsonl")
}

/// Where hosted specialists' submissions go by default: next to the embedded database.
pub(crate) fn default_hosted_journal(root: &Path) -> PathBuf {
    root.join("hosted-journal.jsonl")
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("stopping");
}
