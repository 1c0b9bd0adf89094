//! `agentroom serve`: the HTTP host (today the A2E HTTP transport and `POST /v1/planning`)
//! until SIGINT or SIGTERM, then a graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use agentroom_domain::ids::RoomId;
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_server::ServerConfig;
use anyhow::Context;

use crate::policies::Policies;
use crate::store::StoreArgs;

pub(crate) async fn run(
    listen: SocketAddr,
    room: RoomId,
    store: &StoreArgs,
    policies: Policies,
) -> anyhow::Result<()> {
    tracing::info!(permissions = ?policies.access, "policies loaded");
    let repo = store.open_planning().await?;
    let service = Arc::new(PlanningService::new(repo, Arc::new(SystemAmbient)));
    let router = agentroom_server::router(service, ServerConfig::new(room));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let bound = listener.local_addr()?;
    // The one line a supervisor (or a test that asked for port 0) reads to find us.
    println!("agentroom listening on http://{bound}");
    agentroom_server::serve(listener, router, stop_signal()).await?;
    Ok(())
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
