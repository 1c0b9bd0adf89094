//! `agentroom mcp --stdio`: the MCP server of one Room (`agentroom-mcp`) on stdin/stdout, for
//! agent hosts that spawn a process. The bearer token comes from `--token-file` or
//! `AGENTROOM_TOKEN`, never an argument; it is checked before a line is read (a refused token
//! is an `error: …` on stderr and a failing exit) and again on every tool call. Nothing but
//! MCP messages is written to stdout.

use std::path::Path;

use agentroom_coordinator::{Coordinator, CoordinatorConfig};
use agentroom_domain::ids::RoomId;
use agentroom_mcp::{Posting, RoomTools, Token, ToolError};
use anyhow::{Context as _, bail};

use crate::operator::TOKEN_ENV;
use crate::store::{Missing, StoreArgs};

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
