//! The MCP server of one Room for one authenticated caller (issue 20): tools that call the
//! coordinator service and nothing else, each authorized on every call by the caller's
//! current role through the domain's own predicate (`RoomState::may`, as REST's guard), with
//! strict, bounded inputs and errors that carry the REST API's code, rule and message.
//!
//! A session holds the token it was opened with and authenticates it again on every call, so
//! a revoked or expired token, or a principal that lost its role, is refused at its next call
//! as at its next REST request (T3).

mod error;
mod tools;

use std::sync::Arc;

use agentroom_coordinator::Coordinator;
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::room::Permission;
use agentroom_ports::{AuthError, StoredRoom};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool_handler};

pub use error::ToolError;
pub use tools::*;

/// The largest JSON-RPC message (one line on stdio) a session reads; a longer one is dropped
/// unread and the session goes on.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// A bearer token's text, never printed.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl Token {
    /// Wraps a token's text (surrounding whitespace removed).
    pub fn new(text: &str) -> Self {
        Token(Arc::from(text.trim()))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// What becomes of an event a tool posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posting {
    /// Stored and decided now, as REST's `POST …/events` does: for a process that coordinates
    /// the Room (`serve`), whose agents run the calls the decision reserves.
    Decide,
    /// Checked as REST checks it and stored, for the host that coordinates the Room to accept
    /// by id (T1): for a process that runs no agents (`agentroom mcp --stdio`), where deciding
    /// would have no agent to call and would leave an owner's message waiting.
    Record,
}

/// The tools of one Room, for the principal a bearer token authenticates.
#[derive(Clone)]
pub struct RoomTools {
    coordinator: Coordinator,
    posting: Posting,
    token: Token,
    room: RoomId,
    principal: PrincipalId,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for RoomTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomTools")
            .field("room", &self.room)
            .field("principal", &self.principal)
            .field("posting", &self.posting)
            .finish_non_exhaustive()
    }
}

impl RoomTools {
    /// The tools of `room` for the principal `token` authenticates, checked by the token
    /// store as REST checks a bearer token: [`ToolError::Unauthenticated`] for a malformed,
    /// unknown, expired or revoked token; [`ToolError::NotFound`] when `room` is not the
    /// token's Room (it sees only its own).
    pub async fn open(
        coordinator: Coordinator,
        posting: Posting,
        token: Token,
        room: &RoomId,
    ) -> Result<Self, ToolError> {
        let (room, principal) = authenticate(&coordinator, &token, room).await?;
        Ok(RoomTools {
            coordinator,
            posting,
            token,
            room,
            principal,
            tool_router: Self::tool_router(),
        })
    }

    /// The Room these tools act in.
    pub fn room(&self) -> &RoomId {
        &self.room
    }

    /// The principal they act for.
    pub fn principal(&self) -> &PrincipalId {
        &self.principal
    }

    /// The Room as it is now, if the token is still valid and one of the principal's current
    /// roles holds `permission` (the domain's `RoomState::may`): REST's guard, per call.
    async fn authorized(&self, permission: Permission) -> Result<StoredRoom, ToolError> {
        authenticate(&self.coordinator, &self.token, &self.room).await?;
        let stored = self.coordinator.room(&self.room).await?;
        if !stored.state.may(&self.principal, permission) {
            tracing::info!(principal = %self.principal, %permission, "forbidden");
            return Err(ToolError::Forbidden(permission));
        }
        Ok(stored)
    }

    /// Serves these tools on `read`/`write` (stdin and stdout for `agentroom mcp --stdio`),
    /// one JSON-RPC message a line of at most [`MAX_MESSAGE_BYTES`], until the client closes
    /// its side.
    pub async fn serve<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let transport = AsyncRwTransport::<RoleServer, R, W>::new(read, write)
            .with_max_line_length(MAX_MESSAGE_BYTES);
        let running = ServiceExt::serve(self, transport)
            .await
            .map_err(|error| ServeError(error.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|error| ServeError(error.to_string()))?;
        Ok(())
    }
}

/// Why an MCP session could not start or ended abnormally.
#[derive(Debug, thiserror::Error)]
#[error("the MCP session failed: {0}")]
pub struct ServeError(String);

/// The Room and principal `token` authenticates, if `room` is its Room.
async fn authenticate(
    coordinator: &Coordinator,
    token: &Token,
    room: &RoomId,
) -> Result<(RoomId, PrincipalId), ToolError> {
    let authenticated = match coordinator.authenticate(&token.0).await {
        Ok(authenticated) => authenticated,
        Err(AuthError::Store(error)) => return Err(ToolError::Internal(Box::new(error))),
        Err(reason) => {
            tracing::info!(%reason, "bearer token refused");
            return Err(ToolError::Unauthenticated);
        }
    };
    // A token sees its own Room only: another Room is "not found", whether it exists or not.
    if &authenticated.room != room {
        return Err(ToolError::NotFound(format!(
            "no room {room} for this token"
        )));
    }
    Ok((authenticated.room, authenticated.principal))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RoomTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentroom", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "agentroom Room `{}`, acting as `{}`. Every tool is authorized by your current \
                 role in the Room; a refusal carries the REST API's error code, rule and message.",
                self.room, self.principal
            ))
    }
}
