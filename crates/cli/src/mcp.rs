//! `agentroom mcp --stdio`: the MCP server of one Room (`agentroom-mcp`) on stdin/stdout, for
//! agent hosts that spawn a process. The bearer token comes from `--token-file` or
//! `AGENTROOM_TOKEN`, never an argument; it is checked before a line is read (a refused token
//! is an `error: …` on stderr and a failing exit) and again on every tool call. Nothing but
//! MCP messages is written to stdout.
//!
//! Two modes:
//! - on the store (`--root` / `--database-url`): this process serves the tools itself and only
//!   records the events they post, for the host coordinating the Room to decide;
//! - with `--host URL`: a bridge to that host's `/mcp` (streamable HTTP, the token as the
//!   bearer header), so the tools act on the host that runs the agents, where events are
//!   decided at once and a specialist's assignments wait. Every message is forwarded as it
//!   is, both ways; the session ends (`DELETE /mcp`) when the client closes stdin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentroom_coordinator::{Coordinator, CoordinatorConfig};
use agentroom_domain::ids::RoomId;
use agentroom_mcp::{MAX_MESSAGE_BYTES, Posting, RoomTools, Token, ToolError};
use anyhow::{Context as _, bail};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};

use crate::operator::TOKEN_ENV;
use crate::store::{Missing, StoreArgs};

/// How long connecting to the host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages forwarded but not yet written, each way.
const IN_FLIGHT: usize = 64;

/// `agentroom mcp --stdio --host URL`: forwards the MCP session on stdin/stdout to `URL/mcp`
/// with the token as its bearer header, once the host has shown `room` to the token (another
/// Room, a refused token or an unreachable host is an error before a line is read).
pub(crate) async fn bridge(
    host: &str,
    room: RoomId,
    token_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    let token = crate::operator::token_for_room(host, &room, token_file)
        .await
        .with_context(|| format!("room {room} on {host}"))?;
    let url = format!("{}/mcp", host.trim_end_matches('/'));
    // reqwest's rustls has no built-in crypto provider here: ring, as the operator commands.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // No overall timeout: a session's event stream stays open. No redirect: the token
        // goes nowhere but --host.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the HTTP client")?;
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token);
    let remote = StreamableHttpClientTransport::with_client(client, config);
    let local = AsyncRwTransport::<RoleServer, _, _>::new(tokio::io::stdin(), tokio::io::stdout())
        .with_max_line_length(MAX_MESSAGE_BYTES);
    tracing::info!(%room, %url, "bridging MCP on stdio to the host");
    forward(local, remote).await
}

/// Forwards messages between the client on `local` and the server behind `remote` until the
/// client closes its side (then the remote session is closed) or the remote one ends. Each
/// direction writes its messages one at a time in arrival order (the handshake needs it);
/// neither waits for the other.
async fn forward<L, H>(mut local: L, mut remote: H) -> anyhow::Result<()>
where
    L: Transport<RoleServer>,
    H: Transport<RoleClient>,
{
    type Sending<E> = std::pin::Pin<Box<dyn Future<Output = Result<(), E>> + Send>>;
    let (to_remote, mut remote_queue) = tokio::sync::mpsc::channel::<Sending<H::Error>>(IN_FLIGHT);
    let (to_local, mut local_queue) = tokio::sync::mpsc::channel::<Sending<L::Error>>(IN_FLIGHT);
    // Each queue is drained in order by its own task; an error is said and the next goes on
    // (the client sees its request unanswered, as with a dropped connection).
    let remote_writer = tokio::spawn(async move {
        while let Some(sending) = remote_queue.recv().await {
            if let Err(error) = sending.await {
                tracing::warn!(%error, "a message to the host was not delivered");
            }
        }
    });
    let local_writer = tokio::spawn(async move {
        while let Some(sending) = local_queue.recv().await {
            if let Err(error) = sending.await {
                tracing::warn!(%error, "a message to the client was not written");
            }
        }
    });
    let ended = loop {
        tokio::select! {
            message = local.receive() => match message {
                Some(message) => {
                    if to_remote.send(Box::pin(remote.send(message))).await.is_err() {
                        break Err(anyhow::anyhow!("the forwarding to the host stopped"));
                    }
                }
                None => break Ok(()),
            },
            message = remote.receive() => match message {
                Some(message) => {
                    if to_local.send(Box::pin(local.send(message))).await.is_err() {
                        break Err(anyhow::anyhow!("the forwarding to the client stopped"));
                    }
                }
                None => break Err(anyhow::anyhow!("the host ended the MCP session")),
            },
        }
    };
    // What was forwarded is delivered before the session closes.
    drop(to_remote);
    drop(to_local);
    let _ = remote_writer.await;
    let _ = local_writer.await;
    if let Err(error) = remote.close().await {
        tracing::warn!(%error, "closing the MCP session on the host");
    }
    ended
}

/// Serves one session until the client closes stdin.
pub(crate) async fn run(
    store: &StoreArgs,
    room: RoomId,
    token_file: Option<&Path>,
) -> anyhow::Result<()> {
    let token = read_token(token_file)?;
    let rooms = store.open_rooms(Missing::Refuse).await?;
    let coordinator =
        Coordinator::builder(rooms, CoordinatorConfig::for_command("agentroom-mcp")).build();
    let tools = match RoomTools::open(coordinator, Posting::Record, token, &room).await {
        Ok(tools) => tools,
        Err(error @ (ToolError::Unauthenticated | ToolError::NotFound(_))) => {
            bail!("the token was refused for room {room}: {error}")
        }
        Err(error) => return Err(error).context("cannot authenticate the token"),
    };
    tracing::info!(%room, principal = ?tools.principal(), "serving MCP on stdio");
    tools
        .serve(tokio::io::stdin(), tokio::io::stdout())
        .await
        .context("serving MCP on stdin/stdout")
}

/// The token from `file` or, without it, from `AGENTROOM_TOKEN`: one line of visible ASCII.
fn read_token(file: Option<&Path>) -> anyhow::Result<Token> {
    let text = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("token file {}", path.display()))?,
        None => match std::env::var(TOKEN_ENV) {
            Ok(text) => text,
            Err(_) => bail!("no token: give --token-file FILE or set {TOKEN_ENV}"),
        },
    };
    let text = text.trim();
    if text.is_empty() {
        bail!("no token: the token file or {TOKEN_ENV} is empty");
    }
    if text.bytes().any(|b| !b.is_ascii_graphic()) {
        bail!("the token holds characters a token never has (one line of visible ASCII)");
    }
    Ok(Token::new(text))
}
