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
//! when the coordinator starts.
//!
//! SIGTERM stops the listener and the loops; calls still running are not waited for and their
//! leases are left to expire (nothing renews them once the process exits), so the next
//! recovery finds them uncertain with their reservations held and asks the reconciler.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentroom_coordinator::{BackgroundConfig, Coordinator, CoordinatorConfig, Ports};
use agentroom_domain::ids::RoomId;
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_ports::SystemClock;
use agentroom_server::ServerConfig;
use agentroom_workflows::RunnerConfig;
use anyhow::{Context, anyhow, bail};
use tokio::sync::watch;

use crate::host::{self, AgentsChoice};
use crate::policies::Policies;
use crate::store::{Missing, StoreArgs};

/// The Room a host serves when none is named.
const DEFAULT_ROOM: &str = "local";

/// How the coordinator of `serve` runs.
#[derive(Debug, Clone)]
pub(crate) struct CoordinatorArgs {
    /// The Rooms to coordinate; empty: `local`, if it exists.
    pub(crate) rooms: Vec<RoomId>,
    /// The policy folder (capability files are relative to it).
    pub(crate) policies_dir: PathBuf,
    /// Who executes calls.
    pub(crate) agents: AgentsChoice,
    /// Lease of the calls this process runs.
    pub(crate) lease: Duration,
    /// Time between two passes over the store.
    pub(crate) poll: Duration,
    /// Recovery runs again every this many passes.
    pub(crate) recover_every: u32,
}

pub(crate) async fn run(
    listen: SocketAddr,
    store: &StoreArgs,
    policies: Policies,
    coordinator: CoordinatorArgs,
) -> anyhow::Result<()> {
    tracing::info!(permissions = ?policies.access, "policies loaded");
    // The planning repository creates (and migrates) a missing embedded file (D5).
    let repo = store.open_planning().await?;
    let rooms = store.open_rooms(Missing::Refuse).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let session_room = coordinator
        .rooms
        .first()
        .cloned()
        .map_or_else(|| RoomId::parse(DEFAULT_ROOM), Ok)?;
    let background = crate::with_rooms!(rooms, |s| {
        start_coordinator(s, &policies, &coordinator, stop_rx.clone()).await?
    });

    let service = Arc::new(PlanningService::new(repo, Arc::new(SystemAmbient)));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let bound = listener.local_addr()?;
    // The one line a supervisor (or a test that asked for port 0) reads to find us.
    println!("agentroom listening on http://{bound}");
    let stopping = async move {
        stop_signal().await;
        let _ = stop_tx.send(true);
    };
    agentroom_server::serve(listener, router(service, session_room), stopping).await?;
    if let Some(background) = background {
        background
            .await
            .map_err(|e| anyhow!("the coordinator loop failed: {e}"))?;
    }
    Ok(())
}

/// The HTTP routes, in one place: the REST API under `/v1` is mounted here.
fn router(service: Arc<PlanningService>, room: RoomId) -> axum::Router {
    agentroom_server::router(service, ServerConfig::new(room))
}

/// Builds the coordinator over `store`, recovers, and spawns its loops; `None` when there is
/// no Room to coordinate (a fresh store: the host serves the planning messages only).
async fn start_coordinator<S>(
    store: Arc<S>,
    policies: &Policies,
    args: &CoordinatorArgs,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>>
where
    S: agentroom_coordinator::Store,
{
    // The agents' configuration is checked even when there is no Room to coordinate yet.
    let (agents, reconciler) = host::agents(&args.agents, &policies.prices)?;
    let rooms = rooms_to_coordinate(&*store, &args.rooms).await?;
    if rooms.is_empty() {
        tracing::info!("no room to coordinate yet: create one with `agentroom room create`");
        return Ok(None);
    }
    let mut stored = Vec::new();
    for room in &rooms {
        let loaded = agentroom_ports::RoomStore::load(&*store, room)
            .await?
            .ok_or_else(|| anyhow!("no room {room}"))?;
        stored.push(loaded.state);
    }
    let room_policies: Vec<_> = stored.iter().map(|s| s.policy()).collect();
    let catalog = host::catalog(&room_policies, &args.policies_dir)
        .map_err(|e| anyhow!("the capability files named by the Room policy: {e}"))?;
    if matches!(args.agents, AgentsChoice::None) {
        tracing::warn!("no agents configured (--agents or --openai): every call is refused");
    }
    let coordinator = Coordinator::new(
        Ports {
            store,
            provider: Arc::new(agents),
            reconciler: Arc::new(reconciler),
            clock: Arc::new(SystemClock),
            catalog: Arc::new(catalog),
            notifier: Arc::new(host::LogNotifier),
        },
        CoordinatorConfig::new(RunnerConfig::new(runner_name(), args.lease)),
    );
    let report = coordinator.recover().await?;
    tracing::info!(?report, "recovered");
    for room in &rooms {
        let accepted = coordinator.accept_pending(room).await?;
        tracing::info!(%room, accepted, "pending events accepted");
    }
    let config = BackgroundConfig::new(args.poll, args.recover_every);
    Ok(Some(tokio::spawn(async move {
        let mut stop = stop;
        coordinator
            .run_background(&rooms, &config, async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
    })))
}

/// The Rooms named, each of which must exist; or `local` when none is named and it exists.
async fn rooms_to_coordinate<S: agentroom_ports::RoomStore + ?Sized>(
    store: &S,
    named: &[RoomId],
) -> anyhow::Result<Vec<RoomId>> {
    if named.is_empty() {
        let local = RoomId::parse(DEFAULT_ROOM)?;
        return Ok(match store.load(&local).await? {
            Some(_) => vec![local],
            None => Vec::new(),
        });
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
