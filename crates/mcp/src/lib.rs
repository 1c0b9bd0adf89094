//! The MCP server of one Room for one authenticated caller (issue 20): tools that call the
//! coordinator service and nothing else, each authorized on every call by the caller's
//! current role through the domain's own predicate (`RoomState::may`, as REST's guard), with
//! strict, bounded inputs and errors that carry the REST API's code, rule and message.
//!
//! A session holds the token it was opened with and authenticates it again on every call, so
//! a revoked or expired token, or a principal that lost its role, is refused at its next call
//! as at its next REST request (T3).

mod error;
mod resources;
mod streamable;
mod tools;

use std::sync::{Arc, OnceLock};

use agentroom_coordinator::Coordinator;
use agentroom_domain::ids::{ObjectiveId, PrincipalId, RoomId};
use agentroom_domain::room::Permission;
use agentroom_planning::PlanningService;
use agentroom_ports::{AuthError, StoredRoom};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    ErrorData, Extensions, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool_handler};

pub use error::ToolError;
pub use resources::{MAX_LISTENS_PER_PRINCIPAL, MAX_SUBSCRIPTIONS};
pub use streamable::{
    DEFAULT_BURST, DEFAULT_MAX_SESSIONS, DEFAULT_REQUESTS_PER_SECOND, DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SESSIONS_PER_TOKEN, HttpConfig, HttpResponse, McpHttp, McpShutdown,
};
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

/// Who a session's calls act for.
#[derive(Clone)]
enum Identity {
    /// The token the session was opened with (stdio: one process, one token), checked again
    /// on every call.
    Fixed {
        token: Token,
        room: RoomId,
        principal: PrincipalId,
    },
    /// Each request's own `Authorization: Bearer` header (streamable HTTP). The session
    /// belongs to the Room and principal of its first authenticated call: another token's
    /// call on it is refused as if the session did not exist.
    Bearer {
        bound: Arc<OnceLock<(RoomId, PrincipalId)>>,
    },
}

/// The Room and principal a call acts for, authenticated for this call.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) room: RoomId,
    pub(crate) principal: PrincipalId,
}

/// The tools of one Room, for the principal a bearer token authenticates.
#[derive(Clone)]
pub struct RoomTools {
    coordinator: Coordinator,
    posting: Posting,
    identity: Identity,
    /// The planning messages' service, when this process serves them.
    planning: Option<Arc<PlanningService>>,
    /// The resources this session subscribed to.
    subscriptions: Arc<resources::Subscriptions>,
    /// The listen streams open in this process (shared by every session's tools).
    listens: Arc<resources::Listens>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for RoomTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("RoomTools");
        if let Identity::Fixed {
            room, principal, ..
        } = &self.identity
        {
            debug.field("room", room).field("principal", principal);
        }
        debug
            .field("posting", &self.posting)
            .finish_non_exhaustive()
    }
}

impl RoomTools {
    /// The tools of `room` for the principal `token` authenticates, checked by the token
    /// store as REST checks a bearer token: [`ToolError::Unauthenticated`] for a malformed,
    /// unknown, expired or revoked token; [`ToolError::NotFound`] when `room` is not the
    /// token's Room (it sees only its own). Every call authenticates the token again.
    pub async fn open(
        coordinator: Coordinator,
        posting: Posting,
        token: Token,
        room: &RoomId,
    ) -> Result<Self, ToolError> {
        let (room, principal) = authenticate_in(&coordinator, &token, room).await?;
        Ok(RoomTools {
            coordinator,
            posting,
            identity: Identity::Fixed {
                token,
                room,
                principal,
            },
            planning: None,
            subscriptions: Arc::default(),
            listens: Arc::default(),
            tool_router: Self::routers(),
        })
    }

    /// The tools of one streamable HTTP session: every call acts for the bearer token of the
    /// HTTP request that carries it, in that token's Room, and the session belongs to the
    /// principal of its first authenticated call.
    pub fn per_request(coordinator: Coordinator, posting: Posting) -> Self {
        RoomTools {
            coordinator,
            posting,
            identity: Identity::Bearer {
                bound: Arc::new(OnceLock::new()),
            },
            planning: None,
            subscriptions: Arc::default(),
            listens: Arc::default(),
            tool_router: Self::routers(),
        }
    }

    /// Serves the six A2E planning messages as tools through `planning` (without it they
    /// answer that this process does not serve them).
    pub fn with_planning(mut self, planning: Arc<PlanningService>) -> Self {
        self.planning = Some(planning);
        self
    }

    /// Shares `listens` (the listen streams open in this process) with these tools: every
    /// session of one HTTP endpoint counts against the same bound.
    pub(crate) fn with_listens(mut self, listens: Arc<resources::Listens>) -> Self {
        self.listens = listens;
        self
    }

    /// Every tool: each group's router.
    fn routers() -> ToolRouter<Self> {
        Self::room_router()
            + Self::specialist_router()
            + Self::review_router()
            + Self::operator_router()
            + Self::planning_router()
    }

    /// The Room these tools act in, for a session opened with its token.
    pub fn room(&self) -> Option<&RoomId> {
        match &self.identity {
            Identity::Fixed { room, .. } => Some(room),
            Identity::Bearer { .. } => None,
        }
    }

    /// The principal they act for, for a session opened with its token.
    pub fn principal(&self) -> Option<&PrincipalId> {
        match &self.identity {
            Identity::Fixed { principal, .. } => Some(principal),
            Identity::Bearer { .. } => None,
        }
    }

    /// Who this call acts for: the session's token, or the bearer header of the HTTP request
    /// that carries it, authenticated now (T3: a revoked or expired token is refused at its
    /// next call).
    pub(crate) async fn caller(&self, context: &Extensions) -> Result<Caller, ToolError> {
        match &self.identity {
            Identity::Fixed { token, room, .. } => {
                let (room, principal) = authenticate_in(&self.coordinator, token, room).await?;
                Ok(Caller { room, principal })
            }
            Identity::Bearer { bound } => {
                let token = bearer(context).ok_or(ToolError::Unauthenticated)?;
                let (room, principal) = authenticate(&self.coordinator, &token).await?;
                let (bound_room, bound_principal) =
                    bound.get_or_init(|| (room.clone(), principal.clone()));
                if bound_room != &room || bound_principal != &principal {
                    tracing::info!(%principal, "a session used with another principal's token");
                    return Err(ToolError::NotFound(
                        "no such session for this token; open your own".to_owned(),
                    ));
                }
                Ok(Caller { room, principal })
            }
        }
    }

    /// The token this call authenticates with: the session's, or the HTTP request's.
    pub(crate) fn token_of(&self, context: &Extensions) -> Option<Token> {
        match &self.identity {
            Identity::Fixed { token, .. } => Some(token.clone()),
            Identity::Bearer { .. } => bearer(context),
        }
    }

    /// The caller and the Room as it is now, if one of the caller's current roles holds
    /// `permission` (the domain's `RoomState::may`): REST's guard, per call.
    pub(crate) async fn authorized(
        &self,
        context: &Extensions,
        permission: Permission,
    ) -> Result<(Caller, StoredRoom), ToolError> {
        let caller = self.caller(context).await?;
        let stored = self.coordinator.room(&caller.room).await?;
        if !stored.state.may(&caller.principal, permission) {
            tracing::info!(principal = %caller.principal, %permission, "forbidden");
            return Err(ToolError::Forbidden(permission));
        }
        Ok((caller, stored))
    }

    /// `stored` with objective `objective` in it whatever its age: its record put back when
    /// it closed and left the live state (issue 21), `stored` itself otherwise. A read view.
    pub(crate) async fn showing(
        &self,
        caller: &Caller,
        stored: StoredRoom,
        objective: ObjectiveId,
    ) -> Result<StoredRoom, ToolError> {
        if stored.state.objective(objective).is_some() {
            return Ok(stored);
        }
        Ok(self
            .coordinator
            .room_for_objective(&caller.room, objective)
            .await?)
    }

    /// The Room as stored now with every closed objective's record put back: what a list of
    /// every objective the Room has held reads.
    pub(crate) async fn with_history(&self, caller: &Caller) -> Result<StoredRoom, ToolError> {
        Ok(self.coordinator.room_with_history(&caller.room).await?)
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

/// The bearer token of the HTTP request a call arrived on, if it has one.
fn bearer(context: &Extensions) -> Option<Token> {
    let parts = context.get::<http::request::Parts>()?;
    let value = parts
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| Token::new(token))
}

/// Why an MCP session could not start or ended abnormally.
#[derive(Debug, thiserror::Error)]
#[error("the MCP session failed: {0}")]
pub struct ServeError(String);

/// The Room and principal `token` authenticates.
pub(crate) async fn authenticate(
    coordinator: &Coordinator,
    token: &Token,
) -> Result<(RoomId, PrincipalId), ToolError> {
    match coordinator.authenticate(&token.0).await {
        Ok(authenticated) => Ok((authenticated.room, authenticated.principal)),
        Err(AuthError::Store(error)) => Err(ToolError::Internal(Box::new(error))),
        Err(reason) => {
            tracing::info!(%reason, "bearer token refused");
            Err(ToolError::Unauthenticated)
        }
    }
}

/// The Room and principal `token` authenticates, if `room` is its Room.
async fn authenticate_in(
    coordinator: &Coordinator,
    token: &Token,
    room: &RoomId,
) -> Result<(RoomId, PrincipalId), ToolError> {
    let (own, principal) = authenticate(coordinator, token).await?;
    // A token sees its own Room only: another Room is "not found", whether it exists or not.
    if &own != room {
        return Err(ToolError::NotFound(format!(
            "no room {room} for this token"
        )));
    }
    Ok((own, principal))
}

const AUTHORIZED: &str = "Every tool is authorized by your current role in the Room; a refusal \
                          carries the REST API's error code, rule and message.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RoomTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("agentroom", env!("CARGO_PKG_VERSION")))
        .with_instructions(match &self.identity {
            Identity::Fixed {
                room, principal, ..
            } => format!("agentroom Room `{room}`, acting as `{principal}`. {AUTHORIZED}"),
            Identity::Bearer { .. } => {
                format!("agentroom: the Room of your bearer token, as its principal. {AUTHORIZED}")
            }
        })
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .resources(&context.extensions)
            .await
            .map_err(ToolError::into_error_data)?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            Self::resource_templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.read(&context.extensions, &request.uri)
            .await
            .map(Into::into)
            .map_err(ToolError::into_error_data)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(resources::acceptable(requested))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.listen_to(context)
            .await
            .map_err(ToolError::into_error_data)
    }

    #[allow(
        deprecated,
        reason = "resources/subscribe is what clients of protocol versions before 2026-07-28 send"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        RoomTools::subscribe(
            self,
            &context.extensions,
            &request.uri,
            context.peer.clone(),
        )
        .await
        .map_err(ToolError::into_error_data)
    }

    #[allow(
        deprecated,
        reason = "resources/unsubscribe is what clients of protocol versions before 2026-07-28 send"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        RoomTools::unsubscribe(self, &request.uri);
        Ok(())
    }
}
