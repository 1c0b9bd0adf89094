//! `/mcp` on `agentroom serve`: rmcp's streamable HTTP server (sessions kept in this process)
//! behind a guard that answers before rmcp reads a byte of the body.
//!
//! The guard, per request:
//! - authenticates the `Authorization: Bearer` token with the coordinator (as REST's guard
//!   does): without a valid one, `401` with `WWW-Authenticate: Bearer` and REST's
//!   `{"error":"unauthenticated","message":…}`;
//! - takes one request from the token's bucket ([`HttpConfig::requests_per_second`], bursts of
//!   [`HttpConfig::burst`]): an empty bucket is `429 rate_limited` with `Retry-After`;
//! - finds the session a `Mcp-Session-Id` names only for the principal (and Room) whose token
//!   opened it: another principal's is `404 not_found`, as an unknown one, and nothing reaches
//!   the session;
//! - counts the sessions each token holds (made by an `initialize` answered with a session id,
//!   ended by `DELETE`, by rmcp's idle expiry or by the stop): one more than
//!   [`HttpConfig::sessions_per_token`] is `429 too_many_sessions`, one more than
//!   [`HttpConfig::max_sessions`] in all is `503 too_many_sessions`.
//!
//! Then rmcp serves it: a body above [`crate::MAX_MESSAGE_BYTES`] is its `413`, a `Host` that
//! is not allowed its `403`. Every tool call authenticates its request's header again and is
//! authorized by the caller's current role ([`crate::RoomTools::per_request`], T3).

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agentroom_coordinator::Coordinator;
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_planning::PlanningService;
use agentroom_ports::{AuthError, TokenId};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{MAX_MESSAGE_BYTES, Posting, RoomTools};

/// The header naming a streamable HTTP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions one token may hold at once.
pub const DEFAULT_SESSIONS_PER_TOKEN: usize = 16;
/// Sessions that may exist at once, all tokens together.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// Requests one token may make per second, sustained.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 20;
/// Requests one token may make at once after a quiet spell.
pub const DEFAULT_BURST: u32 = 40;
/// How long a session with no message lives (rmcp's own default).
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// The bounds and `Host` check of `/mcp`. Zero bounds are raised to one where they are used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The most sessions one token holds at once; one more `initialize` is `429
    /// too_many_sessions` (nobody else is refused for it).
    pub sessions_per_token: usize,
    /// The most sessions at once, all tokens together; one more is `503 too_many_sessions`.
    pub max_sessions: usize,
    /// Requests per second one token may make, sustained (a token bucket).
    pub requests_per_second: u32,
    /// Requests one token may make at once (the bucket's size).
    pub burst: u32,
    /// A session with no message for this long ends (rmcp's keep-alive of a session).
    pub session_idle_timeout: Duration,
    /// The `Host` names (or `host:port`) requests may carry; any other is `403` before
    /// anything is read (DNS rebinding). Empty allows every host: never do that.
    pub allowed_hosts: Vec<String>,
}

impl HttpConfig {
    /// The defaults, for requests that name one of `allowed_hosts`.
    pub fn new(allowed_hosts: Vec<String>) -> Self {
        HttpConfig {
            sessions_per_token: DEFAULT_SESSIONS_PER_TOKEN,
            max_sessions: DEFAULT_MAX_SESSIONS,
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND,
            burst: DEFAULT_BURST,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            allowed_hosts,
        }
    }
}

/// The response type of [`McpHttp`] (rmcp's).
pub type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

/// `/mcp`: a tower service to mount at one path (`Router::route_service("/mcp", …)`).
#[derive(Clone)]
pub struct McpHttp {
    rmcp: StreamableHttpService<RoomTools, LocalSessionManager>,
    guard: Arc<Guard>,
}

impl std::fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttp")
            .field("config", &self.guard.config)
            .finish_non_exhaustive()
    }
}

/// Ends every session of an [`McpHttp`] at once (their open streams close), for a graceful
/// stop; requests after it are refused by rmcp.
#[derive(Debug, Clone)]
pub struct McpShutdown(CancellationToken);

impl McpShutdown {
    /// Ends every session now.
    pub fn shut_down(&self) {
        self.0.cancel();
    }
}

impl McpHttp {
    /// `/mcp` over `coordinator`: each session's tools act for the bearer token of each
    /// request ([`RoomTools::per_request`], events decided at once: this process runs the
    /// agents), with the planning messages of `planning`.
    pub fn new(
        coordinator: Coordinator,
        planning: Arc<PlanningService>,
        config: HttpConfig,
    ) -> (McpHttp, McpShutdown) {
        let stop = CancellationToken::new();
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(config.session_idle_timeout);
        let sessions = Arc::new(sessions);
        let rmcp_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.allowed_hosts.clone())
            .with_max_request_body_bytes(MAX_MESSAGE_BYTES)
            .with_cancellation_token(stop.clone());
        let factory = {
            let coordinator = coordinator.clone();
            let listens = Arc::default();
            move || {
                Ok(RoomTools::per_request(coordinator.clone(), Posting::Decide)
                    .with_planning(Arc::clone(&planning))
                    .with_listens(Arc::clone(&listens)))
            }
        };
        let rmcp = StreamableHttpService::new(factory, Arc::clone(&sessions), rmcp_config);
        let guard = Arc::new(Guard {
            coordinator,
            sessions,
            config,
            state: Mutex::new(State::default()),
        });
        (McpHttp { rmcp, guard }, McpShutdown(stop))
    }

    /// Serves one request: the guard's checks, then rmcp.
    pub async fn handle<B>(&self, request: Request<B>) -> HttpResponse
    where
        B: Body + Send + 'static,
        B::Data: Send + 'static,
        B::Error: Display,
    {
        let token = bearer(request.headers()).map(str::to_owned);
        let session = session_of(request.headers());
        let method = request.method().clone();
        let owner = match self.guard.admit(token, session.as_deref()).await {
            Ok(owner) => owner,
            Err(refusal) => return refusal.response(),
        };
        let opens = session.is_none() && method == Method::POST;
        let reservation = if opens {
            match self.guard.reserve(&owner).await {
                Ok(()) => Some(Reservation {
                    guard: &self.guard,
                    owner: &owner,
                    settled: false,
                }),
                Err(refusal) => return refusal.response(),
            }
        } else {
            None
        };
        // A request whose client goes away is dropped in this await: the reservation's drop
        // gives its place back, so a cancelled call never holds a session place for good.
        let response = self.rmcp.handle(request).await;
        if let Some(mut reservation) = reservation {
            let made = session_of(response.headers()).filter(|_| response.status().is_success());
            reservation.settled = true;
            self.guard.opened(&owner, made);
        } else if let Some(session) = session
            && method == Method::DELETE
            && response.status().is_success()
        {
            self.guard.closed(&session);
        }
        response
    }
}

impl<B> tower_service::Service<Request<B>> for McpHttp
where
    B: Body + Send + 'static,
    B::Data: Send + 'static,
    B::Error: Display,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(request).await) })
    }
}

/// The session id a request or response names, if any.
fn session_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    token: TokenId,
    room: RoomId,
    principal: PrincipalId,
}

/// The guard's bookkeeping: sessions by id and by token, and each token's bucket.
#[derive(Default)]
struct State {
    sessions: HashMap<String, Owner>,
    tokens: HashMap<TokenId, TokenUse>,
}

/// One token's sessions (open ones plus those being opened) and its bucket.
struct TokenUse {
    sessions: usize,
    bucket: Bucket,
}

/// A token bucket: `level` requests available, refilled at `rate` per second up to `size`.
struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    fn full(size: f64, now: Instant) -> Self {
        Bucket {
            level: size,
            at: now,
        }
    }

    /// Takes one request, or says how long until one is available.
    fn take(&mut self, rate: f64, size: f64, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * rate).min(size);
        self.at = now;
        if self.level >= 1.0 {
            self.level -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.level) / rate))
        }
    }

    fn is_full(&self, rate: f64, size: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level + elapsed * rate >= size
    }
}

/// Tokens remembered before idle ones are forgotten (a full bucket and no session).
const REMEMBERED_TOKENS: usize = 4096;

/// A place [`Guard::reserve`] held for a session a request may open: given back when it is
/// dropped unsettled (the request's future was dropped before rmcp answered).
struct Reservation<'a> {
    guard: &'a Guard,
    owner: &'a Owner,
    settled: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.guard.opened(self.owner, None);
        }
    }
}

struct Guard {
    coordinator: Coordinator,
    sessions: Arc<LocalSessionManager>,
    config: HttpConfig,
    state: Mutex<State>,
}

impl Guard {
    fn rate(&self) -> f64 {
        f64::from(self.config.requests_per_second.max(1))
    }

    fn size(&self) -> f64 {
        f64::from(self.config.burst.max(1))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves bookkeeping that is still consistent
        // enough to go on with (counts only): recover it rather than fail every request.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Authenticates the request, charges its token's bucket and checks that the session it
    /// names is its principal's.
    async fn admit(&self, token: Option<String>, session: Option<&str>) -> Result<Owner, Refusal> {
        let token = token.ok_or(Refusal::Unauthenticated)?;
        let authenticated = match self.coordinator.authenticate(&token).await {
            Ok(authenticated) => authenticated,
            Err(AuthError::Store(error)) => {
                tracing::error!(%error, "MCP: the token store failed");
                return Err(Refusal::Internal);
            }
            Err(reason) => {
                tracing::info!(%reason, "MCP: bearer token refused");
                return Err(Refusal::Unauthenticated);
            }
        };
        let owner = Owner {
            token: authenticated.token_id,
            room: authenticated.room,
            principal: authenticated.principal,
        };
        let (rate, size, now) = (self.rate(), self.size(), Instant::now());
        let mut state = self.state();
        if state.tokens.len() >= REMEMBERED_TOKENS {
            state
                .tokens
                .retain(|_, using| using.sessions > 0 || !using.bucket.is_full(rate, size, now));
        }
        let using = state
            .tokens
            .entry(owner.token.clone())
            .or_insert_with(|| TokenUse {
                sessions: 0,
                bucket: Bucket::full(size, now),
            });
        if let Err(wait) = using.bucket.take(rate, size, now) {
            tracing::info!(principal = %owner.principal, "MCP: rate limited");
            return Err(Refusal::RateLimited {
                retry_after: wait.as_secs().saturating_add(1),
                per_second: self.config.requests_per_second.max(1),
            });
        }
        if let Some(session) = session {
            match state.sessions.get(session) {
                Some(opened_by)
                    if opened_by.room == owner.room && opened_by.principal == owner.principal => {}
                Some(_) => {
                    tracing::info!(principal = %owner.principal, "MCP: a session used with another principal's token");
                    return Err(Refusal::NoSession);
                }
                None => return Err(Refusal::NoSession),
            }
        }
        Ok(owner)
    }

    /// Holds a place for the session `owner` may be opening, within both bounds (sessions
    /// rmcp expired are forgotten first).
    async fn reserve(&self, owner: &Owner) -> Result<(), Refusal> {
        let per_token = self.config.sessions_per_token.max(1);
        let most = self.config.max_sessions.max(1);
        let (full_for_token, full) = {
            let state = self.state();
            let held = state
                .tokens
                .get(&owner.token)
                .map_or(0, |using| using.sessions);
            (held >= per_token, state.sessions.len() >= most)
        };
        if full_for_token || full {
            self.forget_expired(if full { None } else { Some(&owner.token) })
                .await;
        }
        let mut state = self.state();
        let total: usize = state.tokens.values().map(|using| using.sessions).sum();
        let size = self.size();
        let using = state
            .tokens
            .entry(owner.token.clone())
            .or_insert_with(|| TokenUse {
                sessions: 0,
                bucket: Bucket::full(size, Instant::now()),
            });
        if using.sessions >= per_token {
            tracing::info!(principal = %owner.principal, per_token, "MCP: too many sessions");
            return Err(Refusal::TooManyForToken { limit: per_token });
        }
        if total >= most {
            tracing::warn!(most, "MCP: the session bound is reached");
            return Err(Refusal::TooMany { limit: most });
        }
        using.sessions += 1;
        Ok(())
    }

    /// Forgets the sessions rmcp no longer has (expired, or ended by their worker): those of
    /// `token`, or all.
    async fn forget_expired(&self, token: Option<&TokenId>) {
        let candidates: Vec<String> = {
            let state = self.state();
            state
                .sessions
                .iter()
                .filter(|(_, owner)| token.is_none_or(|token| &owner.token == token))
                .map(|(id, _)| id.clone())
                .collect()
        };
        let mut gone = Vec::new();
        for id in candidates {
            let session: SessionId = Arc::from(id.as_str());
            if !self.sessions.has_session(&session).await.unwrap_or(true) {
                gone.push(id);
            }
        }
        for id in gone {
            self.closed(&id);
        }
    }

    /// The end of an `initialize`'s request: the session it made, or the place given back.
    fn opened(&self, owner: &Owner, session: Option<String>) {
        let mut state = self.state();
        match session {
            Some(id) => {
                tracing::debug!(principal = %owner.principal, "MCP: session opened");
                state.sessions.insert(id, owner.clone());
            }
            None => {
                if let Some(using) = state.tokens.get_mut(&owner.token) {
                    using.sessions = using.sessions.saturating_sub(1);
                }
            }
        }
    }

    /// A session that ended.
    fn closed(&self, session: &str) {
        let mut state = self.state();
        if let Some(owner) = state.sessions.remove(session)
            && let Some(using) = state.tokens.get_mut(&owner.token)
        {
            using.sessions = using.sessions.saturating_sub(1);
        }
    }
}

/// The bearer token of a request, if it has one.
fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Why the guard answered a request itself.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("a valid bearer token is required (Authorization: Bearer ar_...)")]
    Unauthenticated,
    #[error("too many requests for this token (at most {per_second} a second); retry later")]
    RateLimited { retry_after: u64, per_second: u32 },
    #[error("this token holds {limit} MCP sessions, the most it may; end one (DELETE /mcp) first")]
    TooManyForToken { limit: usize },
    #[error("the server holds {limit} MCP sessions, the most it may; retry later")]
    TooMany { limit: usize },
    #[error("no such MCP session for this token; initialize a session of your own")]
    NoSession,
    #[error("the server failed to answer")]
    Internal,
}

/// The REST API's error body (`crates/api-model`'s `ErrorBody`, its fields that apply).
#[derive(Serialize)]
struct ErrorBody {
    error: &'static str,
    message: String,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::RateLimited { .. } | Refusal::TooManyForToken { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Refusal::TooMany { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::NoSession => StatusCode::NOT_FOUND,
            Refusal::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::RateLimited { .. } => "rate_limited",
            Refusal::TooManyForToken { .. } | Refusal::TooMany { .. } => "too_many_sessions",
            Refusal::NoSession => "not_found",
            Refusal::Internal => "internal_error",
        }
    }

    fn response(self) -> HttpResponse {
        let body = ErrorBody {
            error: self.code(),
            message: self.to_string(),
        };
        let text = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        match self {
            Refusal::Unauthenticated => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Refusal::RateLimited { retry_after, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            Refusal::TooMany { .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T3 bounds (issue 20): a request dropped while rmcp serves it (its client went away)
    /// gives back the session place it held; without that, a token would be refused for good
    /// after a few cancelled calls.
    #[tokio::test]
    async fn t3_a_place_held_for_a_dropped_request_is_given_back() {
        use agentroom_coordinator::CoordinatorConfig;
        let coordinator = Coordinator::builder(
            Arc::new(agentroom_ports::memory::MemoryStore::new()),
            CoordinatorConfig::for_command("mcp-guard-test"),
        )
        .build();
        let config = HttpConfig::new(Vec::new());
        let per_token = config.sessions_per_token;
        let guard = Guard {
            coordinator,
            sessions: Arc::new(LocalSessionManager::default()),
            config,
            state: Mutex::default(),
        };
        let owner = Owner {
            token: TokenId::parse("0123456789abcdef").unwrap(),
            room: RoomId::parse("lab").unwrap(),
            principal: PrincipalId::parse("sam").unwrap(),
        };
        for _ in 0..=per_token {
            guard.reserve(&owner).await.unwrap();
            drop(Reservation {
                guard: &guard,
                owner: &owner,
                settled: false,
            });
        }
        assert_eq!(guard.state().tokens[&owner.token].sessions, 0);
        // A settled one is the session's: it holds its place until the session ends.
        guard.reserve(&owner).await.unwrap();
        let mut kept = Reservation {
            guard: &guard,
            owner: &owner,
            settled: false,
        };
        kept.settled = true;
        drop(kept);
        guard.opened(&owner, Some("s-1".to_owned()));
        assert_eq!(guard.state().tokens[&owner.token].sessions, 1);
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_size() {
        let start = Instant::now();
        let mut bucket = Bucket::full(2.0, start);
        assert!(bucket.take(1.0, 2.0, start).is_ok());
        assert!(bucket.take(1.0, 2.0, start).is_ok());
        let wait = bucket.take(1.0, 2.0, start).unwrap_err();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::from_millis(900));
        let later = start + Duration::from_secs(10);
        assert!(bucket.is_full(1.0, 2.0, later));
        assert!(bucket.take(1.0, 2.0, later).is_ok());
        assert!(bucket.take(1.0, 2.0, later).is_ok());
        assert!(bucket.take(1.0, 2.0, later).is_err());
    }
}
