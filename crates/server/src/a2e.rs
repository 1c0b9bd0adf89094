//! The A2E HTTP transport as the SDK's `HTTPTransport` speaks it: `POST /session`,
//! `POST /send`, `GET /stream` (Server-Sent Events) and `GET /health`.

use std::convert::Infallible;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::json;

use crate::body::read_message;
use crate::caller::SessionScope;
use crate::error::ApiError;
use crate::sessions::Slot;
use crate::state::{AppState, Stopping};

/// The header naming the session on every request after `POST /session`.
pub(crate) const SESSION_HEADER: &str = "x-session-id";

#[derive(Serialize)]
struct Created<'a> {
    session_id: &'a str,
}

/// `POST /session`: a new session acting in the caller's Room. Its output is buffered from
/// now on, so a handshake sent before `/stream` connects is not lost. Where tokens are
/// required, a request without an `Authorization` header makes an unbound session of the
/// configured Room, which its handshake's `auth_token` binds (`crate::handshake`).
#[tracing::instrument(level = "debug", skip_all, fields(room = %scope.room(), principal = scope.principal()))]
pub(crate) async fn create_session(
    State(state): State<AppState>,
    scope: SessionScope,
) -> Result<Response, ApiError> {
    // No randomness, no session: 503, nothing made under a guessable id.
    let (session, acting) = scope.session(state.service.clone())?;
    let slot = state.sessions.create(session, acting)?;
    Ok(Json(Created {
        session_id: slot.id(),
    })
    .into_response())
}

/// `POST /send`: admits one message and answers `202 {"ok":true}` at once; the reply, if
/// any, comes on `/stream`.
#[tracing::instrument(level = "debug", skip_all, fields(room = %scope.room(), principal = scope.principal()))]
pub(crate) async fn send(
    State(state): State<AppState>,
    scope: SessionScope,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let slot = session(&state, &scope, &headers)?;
    let message = match read_message(&headers, body).await {
        Ok(message) => message,
        Err(ApiError::MessageTooLarge {
            bytes,
            limit,
            req_id,
        }) => {
            // Answered like an oversized stdio line: the A2E error on the stream (with the
            // message's req_id when it could be read, so the client's call completes), so a
            // client that only reads the stream sees why; and 413, so the POST fails.
            slot.answer_directly(slot.too_large(bytes, req_id.as_deref()));
            return Err(ApiError::MessageTooLarge {
                bytes,
                limit,
                req_id,
            });
        }
        Err(error) => return Err(error),
    };
    slot.admit(message, &state.sessions)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"ok": true}))).into_response())
}

/// `GET /stream`: the session's replies as Server-Sent Events, one `data: <json>` line and
/// a blank line each, with `:` keep-alive comments.
#[tracing::instrument(level = "debug", skip_all, fields(room = %scope.room(), principal = scope.principal()))]
pub(crate) async fn stream(
    State(state): State<AppState>,
    scope: SessionScope,
    headers: HeaderMap,
    stopping: Option<axum::Extension<Stopping>>,
) -> Result<Response, ApiError> {
    let slot = session(&state, &scope, &headers)?;
    tracing::debug!(session = %slot.id(), "stream connected");
    let lines = slot.stream(stopping.map(|axum::Extension(Stopping(rx))| rx));
    let events = lines.map(|line| Ok::<_, Infallible>(Event::default().data(line)));
    // A stream opened with a token lives only as long as the token does (and its principal
    // may still use the planning messages in the Room): checked again every half second.
    let revoked = match (&scope, crate::api::bearer(&headers)) {
        (SessionScope::Header { api, .. }, Some(token)) => {
            futures_util::future::Either::Left(revoked(
                std::sync::Arc::clone(api),
                token.to_owned(),
                scope.room().clone(),
            ))
        }
        _ => futures_util::future::Either::Right(std::future::pending::<()>()),
    };
    Ok(Sse::new(events.take_until(revoked))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Resolves once `token` no longer authenticates a principal that may use the planning
/// messages in `room` (revoked, expired, its membership changed); a store that cannot answer
/// is asked again at the next check.
async fn revoked(
    api: std::sync::Arc<crate::api::Api>,
    token: String,
    room: agentroom_planning::RoomId,
) {
    let mut checks = tokio::time::interval(std::time::Duration::from_millis(500));
    checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    checks.tick().await;
    loop {
        checks.tick().await;
        match crate::api::authorize_token(
            &api,
            &token,
            Some(room.as_str()),
            agentroom_domain::room::Permission::PlanningUse,
        )
        .await
        {
            Ok(_) => {}
            Err(ApiError::Unauthenticated | ApiError::Forbidden(_) | ApiError::NotFound(_)) => {
                tracing::info!(%room, "an A2E stream's token may no longer use it; the stream ends");
                return;
            }
            Err(error) => tracing::warn!(%error, "re-checking an A2E stream's token failed"),
        }
    }
}

/// `GET /health`.
pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// The session `X-Session-Id` names: missing → 400, unknown or expired → 404; without an
/// `Authorization` header where tokens are required, only a session made without one (a
/// session made with the header needs it: 401).
fn session(
    state: &AppState,
    scope: &SessionScope,
    headers: &HeaderMap,
) -> Result<std::sync::Arc<Slot>, ApiError> {
    let id = headers
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .ok_or(ApiError::MissingSession)?;
    match scope {
        SessionScope::Handshake { room, .. } => state.sessions.get_without_header(id, room),
        SessionScope::Open(_) => state.sessions.get(id, scope.room()),
        // With a token, only the principal the session acts for may use it.
        SessionScope::Header { scope: inner, .. } => match inner.principal_id() {
            Some(principal) => state.sessions.get_as(id, scope.room(), principal),
            None => Err(ApiError::UnknownSession),
        },
    }
}
