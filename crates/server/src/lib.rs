//! The HTTP edge of agentroom: the A2E HTTP transport that the A2E SDK's `HTTPTransport`
//! speaks, and `POST /v1/planning`. Build the app with [`router`], run it with [`serve`].
//! The authenticated REST API under `/v1/rooms/{room}/…` (bearer tokens, roles, SSE,
//! `/v1/openapi.json`) is [`api::router`]; merge it into the app.
//!
//! | endpoint | answer |
//! | --- | --- |
//! | `POST /session` (no body) | `200 {"session_id": "..."}`; `429 too_many_sessions` when the caller's principal holds [`ServerConfig::sessions_per_principal`] sessions of its Room (nobody else is refused for it); `503 too_many_sessions` when [`ServerConfig::max_sessions`] exist after expiring idle ones (for a session to be bound by its handshake, when such unbound sessions fill half of them); `503 unavailable` when there is no randomness for its id (no session made) |
//! | `POST /send` (`X-Session-Id`, body = one JSON message, any content type) | `202 {"ok":true}` at once, the reply (if any) on `/stream`; `400 missing_session_id`; `404 unknown_session` (ended, expired, never existed); `429 session_buffer_full` (with `Retry-After: 1`) when the session holds [`ServerConfig::session_buffer`] messages, nothing processed; `413 too_large` above `limits::MAX_MESSAGE_BYTES`, nothing processed, and the A2E `schema_violation` error queued on the stream as stdio answers an oversized line |
//! | `GET /stream` (`X-Session-Id`) | Server-Sent Events: one `data: <json>` line and a blank line per reply, `:` keep-alive comments; everything produced since the session began and not yet streamed, then each new reply; a newer stream of the session ends the older; ends after `shutdown` once the queue is empty |
//! | `GET /health` | `200 {"status":"ok"}` |
//! | `POST /v1/planning` (one A2E message) | `200` with its reply (planning reply, refusal or A2E `error`); `204` for a message without reply (`shutdown`, `pong`); `413` with the A2E `schema_violation` error above the size limit; `503 unavailable` when there is no randomness for its session's id (nothing read or stored) |
//! | anything else | `404 not_found`, or `405 method_not_allowed` for a known path |
//!
//! With a bearer header, `/send` and `/stream` find only a session acting for the header's
//! principal (another principal's session is `404 unknown_session`, and nothing changes), and
//! a stream opened with a header ends within a second once its token is revoked or expires or
//! its principal may no longer use the planning messages. A body that does not arrive whole
//! within the body-read timeout of [`serve_with`] is `408 body_timeout`; an oversized
//! message's A2E error carries the message's `id` as its `req_id` when the message's first
//! 64 KiB name it.
//!
//! Errors of the HTTP edge are JSON `{"error": code, "message": text}`. A session's messages
//! are processed one at a time in arrival order, so a client that waits for each POST sees
//! its messages applied in order, while concurrent sends are fine too (replies match by
//! `req_id`). A session with no send and no connected stream for
//! [`ServerConfig::session_idle_timeout`] is expired by a background sweep.
//!
//! Built with [`router`], every caller acts as the owner of [`ServerConfig::room`] whatever
//! the `Authorization` header says (the embedded default without tokens); built with
//! [`authenticated_router`], every endpoint but `/health` needs a bearer token whose
//! principal holds `planning.use`, and acts in the token's Room — except that a session may
//! instead bring its token in its handshake's `auth_token` (for clients that send no
//! headers): see [`authenticated_router`]. The REST API always checks bearer tokens,
//! including for its planning endpoint `POST /v1/rooms/{room}/planning`.

mod a2e;
pub mod api;
pub mod board;
mod body;
mod caller;
mod config;
mod error;
mod handshake;
mod listener;
mod sessions;
mod state;
mod v1;

use std::future::Future;
use std::sync::Arc;

use axum::routing::{get, post};

use agentroom_planning::PlanningService;

/// The router type the host's routes are built as (the composition root names it from
/// here, not from axum).
pub use axum::Router;
pub use config::{
    ConnectionLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_BUFFER,
    DEFAULT_SESSION_IDLE_TIMEOUT, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_STREAMS_PER_PRINCIPAL,
    ServerConfig,
};

use crate::error::ApiError;
use crate::sessions::Sessions;
use crate::state::{AppState, Stopping};

/// The app: every endpoint above over `service`, its sessions acting in `config.room`.
///
/// Session ids come from the service's [`agentroom_planning::Ambient`]: serve a service built
/// with `SystemAmbient` (128 random bits per id), since a session id is all a client shows
/// to use its session.
///
/// Call it inside a Tokio runtime: it starts the sweep that expires idle sessions, which
/// stops by itself once the router and every clone of it are dropped. (Outside a runtime
/// there is no sweep; idle sessions are then expired only when the session bound is reached.)
pub fn router(service: Arc<PlanningService>, config: ServerConfig) -> Router {
    build(service, config, None)
}

/// [`router`] with bearer tokens: every endpoint but `/health` needs `Authorization: Bearer`
/// with a valid token (401 otherwise) whose principal holds `planning.use` in its Room (403
/// naming it otherwise); a session acts in the token's Room as its principal (T3), and a
/// session id is only found by callers of that Room. The planning service is `api`'s.
///
/// A session may also authenticate with its handshake instead (A2E clients that send no
/// headers): `POST /session` without an `Authorization` header makes an *unbound* session of
/// `config.room` (the only Room a request without a token can name), which `/send` and
/// `/stream` then reach without the header too. Until a `handshake/req` whose `auth_token` is
/// a valid token of `config.room` whose principal holds `planning.use` binds it to that
/// principal, the session answers every message with the A2E `error` `unauthorized` (a bad
/// token, one of another Room, included) and changes nothing; `shutdown` ends it, and an
/// unbound session expires like any idle one. Unbound sessions may fill at most half of
/// `config.max_sessions`. A session never changes identity: on any bound session (by header
/// or handshake) a handshake's `auth_token` must be empty or authenticate the same principal,
/// else `unauthorized`. A session made with the header needs the header on `/send` and
/// `/stream` (401 without).
pub fn authenticated_router(config: ServerConfig, api: &api::Api) -> Router {
    build(
        Arc::clone(&api.planning),
        config,
        Some(Arc::new(api.clone())),
    )
}

fn build(
    service: Arc<PlanningService>,
    config: ServerConfig,
    auth: Option<Arc<api::Api>>,
) -> Router {
    let sessions = Arc::new(Sessions::new(
        config.buffer(),
        config.sessions(),
        config.per_principal(),
        config.idle_timeout(),
    ));
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(sessions::sweep_forever(
                Arc::downgrade(&sessions),
                sessions.sweep_interval(),
            ));
        }
        Err(_) => tracing::warn!("no Tokio runtime: idle sessions are not swept in the background"),
    }
    let state = AppState {
        service,
        config: Arc::new(config),
        sessions,
        auth,
    };
    Router::new()
        .route("/session", post(a2e::create_session))
        .route("/send", post(a2e::send))
        .route("/stream", get(a2e::stream))
        .route("/health", get(a2e::health))
        .route("/v1/planning", post(v1::planning))
        .merge(board::router())
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state)
}

/// The host while it starts: a router that answers `/health` with `200 {"status":
/// "starting"}` and every other request with `503 unavailable` (`Retry-After: 1`, nothing
/// read or changed) until [`Starting::ready`] hands it the app, which then answers everything.
/// Serve it on a listener bound first, so that a supervisor sees the process alive from its
/// first moments while its Rooms are recovered (issue 21).
pub fn starting() -> (Router, Starting) {
    let slot: Arc<std::sync::OnceLock<Router>> = Arc::default();
    let app = Arc::clone(&slot);
    let front = Router::new().fallback_service(tower::service_fn(
        move |request: axum::extract::Request| {
            let current = app.get().cloned();
            async move {
                use axum::response::IntoResponse as _;
                use tower::ServiceExt as _;
                Ok::<_, std::convert::Infallible>(match current {
                    Some(app) => app.oneshot(request).await.into_response(),
                    None if request.uri().path() == "/health" => {
                        axum::Json(serde_json::json!({"status": "starting"})).into_response()
                    }
                    None => ApiError::Starting.into_response(),
                })
            }
        },
    ));
    (front, Starting(slot))
}

/// Hands the app to the router [`starting`] made, once.
#[derive(Clone)]
pub struct Starting(Arc<std::sync::OnceLock<Router>>);

impl std::fmt::Debug for Starting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Starting").finish_non_exhaustive()
    }
}

impl Starting {
    /// From now on every request goes to `app` (a second app is ignored: the host starts
    /// once).
    pub fn ready(&self, app: Router) {
        if self.0.set(app).is_err() {
            tracing::warn!("the host was made ready twice; the first app serves");
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then stops gracefully: open
/// streams end at once, requests in progress finish, and it returns. With the default
/// [`ConnectionLimits`]; see [`serve_with`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, ConnectionLimits::default(), shutdown).await
}

/// [`serve`] within `limits`: header-read, body-read and idle timeouts, and at most
/// `limits.max_connections` connections at once, the one idle the longest closed to make
/// room for a new one (so idle connections never keep `/health` from answering). A body that
/// does not arrive in time is answered `408 body_timeout`.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let router = router.layer(axum::Extension(Stopping(stopping.clone())));
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, ?limits, "serving");
    }
    let signal = tokio::spawn(async move {
        shutdown.await;
        tracing::info!("stopping: ending streams, finishing requests in progress");
        stop.send_replace(true);
        // Kept until every receiver is gone, so the stop is never mistaken for a drop.
        stop.closed().await;
    });
    let served = listener::serve(listener, router, limits, stopping).await;
    signal.abort();
    served
}
