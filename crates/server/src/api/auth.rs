//! The bearer-token guard in front of every REST route and the request-id layer around all.

use std::sync::Arc;

use agentroom_coordinator::CoordinatorError;
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::room::{Permission, Role};
use agentroom_ports::{AuthError, NoRandomness, Random, StoredRoom, SystemRandom};
use axum::RequestExt;
use axum::extract::{RawPathParams, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::Api;
use crate::error::ApiError;

/// The header that carries the request id.
pub(crate) const REQUEST_ID: &str = "x-request-id";

/// The guard's state for one route: the API and the permission the route needs.
#[derive(Clone)]
pub(crate) struct Guard {
    pub(crate) api: Arc<Api>,
    pub(crate) permission: Permission,
}

/// The authenticated, authorized caller of a request, as handlers see it.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) room: RoomId,
    pub(crate) principal: PrincipalId,
    pub(crate) roles: Vec<Role>,
    /// The Room as loaded when the request was authorized.
    pub(crate) stored: Arc<StoredRoom>,
}

impl Caller {
    /// Whether one of the caller's roles holds `permission`.
    pub(crate) fn may(&self, permission: Permission) -> bool {
        let access = self.stored.state.access();
        self.roles
            .iter()
            .any(|&role| access.allows(role, permission))
    }
}

/// 401 without a valid token; 404 for another Room than the token's; 403 naming the
/// permission when no current role of the principal in the Room holds it.
pub(crate) async fn guard(
    State(guard): State<Guard>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    // The route's `{room}` parameter (not the URI text, so a router nested under a prefix
    // still finds it).
    let params = request
        .extract_parts::<RawPathParams>()
        .await
        .map_err(|_| ApiError::BadRequest("the path cannot be read".to_owned()))?;
    // A route without `{room}` (`/metrics`) acts in the token's own Room.
    let room = params
        .iter()
        .find_map(|(name, value)| (name == "room").then(|| value.to_owned()));
    let caller = authorize(
        &guard.api,
        request.headers(),
        room.as_deref(),
        guard.permission,
    )
    .await?;
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}

/// Who the bearer token in `headers` authenticates, if its principal may use `permission`
/// in `room` (the token's own Room when `None`): 401 without a valid token, 404 for another
/// Room, 403 naming the permission.
pub(crate) async fn authorize(
    api: &Api,
    headers: &HeaderMap,
    room: Option<&str>,
    permission: Permission,
) -> Result<Caller, ApiError> {
    let token = bearer(headers).ok_or(ApiError::Unauthenticated)?;
    authorize_token(api, token, room, permission).await
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is matched without
/// regard to case (RFC 9110, 11.1: `bearer`, `BEARER` are `Bearer`).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim_start();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// Who the token text `token` authenticates, if its principal may use `permission` in `room`
/// (the token's own Room when `None`): the check behind [`authorize`], and behind an A2E
/// session's handshake `auth_token` (`crate::handshake`), so both accept exactly the same
/// tokens. 401 for a malformed, unknown, expired or revoked token; 404 for another Room; 403
/// naming the permission.
pub(crate) async fn authorize_token(
    api: &Api,
    token: &str,
    room: Option<&str>,
    permission: Permission,
) -> Result<Caller, ApiError> {
    let authenticated = match api.rooms.authenticate(token).await {
        Ok(authenticated) => authenticated,
        Err(AuthError::Store(error)) => return Err(ApiError::internal(error)),
        Err(reason) => {
            tracing::info!(%reason, "bearer token refused");
            return Err(ApiError::Unauthenticated);
        }
    };
    // A token sees its own Room only: another Room is "not found", whether it exists or not.
    if let Some(room) = room
        && room != authenticated.room.as_str()
    {
        return Err(ApiError::NotFound(format!("no room {room} for this token")));
    }
    let stored = api.rooms.room(&authenticated.room).await?;
    let roles: Vec<Role> = stored
        .state
        .members()
        .roles_of(&authenticated.principal)
        .collect();
    let caller = Caller {
        room: authenticated.room,
        principal: authenticated.principal,
        roles,
        stored: Arc::new(stored),
    };
    if !caller.may(permission) {
        tracing::info!(principal = %caller.principal, %permission, "forbidden");
        return Err(ApiError::Forbidden(permission));
    }
    tracing::Span::current().record("principal", tracing::field::display(&caller.principal));
    Ok(caller)
}

/// Whether a client's request id is sane enough to echo: 1 to 64 of `A-Z a-z 0-9 . _ -`.
fn sane(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A fresh request id: 16 random bytes in hex.
fn fresh() -> Result<String, NoRandomness> {
    SystemRandom.hex_id()
}

/// Gives every request an id (the client's when sane, a fresh one otherwise), runs it in a
/// span carrying the id, and returns the id on the response.
pub(crate) async fn request_id(request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|id| sane(id))
        .map(str::to_owned);
    let id = match given.map_or_else(fresh, Ok) {
        Ok(id) => id,
        // The one failure policy of randomness: an error, never a zero id; nothing ran.
        Err(error) => {
            return ApiError::from(CoordinatorError::NoRandomness(error)).into_response();
        }
    };
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
        principal = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    // Every request leaves one line in the log, inside its span (id, method, path, status).
    let status = response.status().as_u16();
    span.record("status", status);
    tracing::info!(
        parent: &span,
        status,
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request finished"
    );
    match HeaderValue::from_str(&id) {
        Ok(value) => {
            response.headers_mut().insert(REQUEST_ID, value);
        }
        Err(_) => return ApiError::internal("request id").into_response(),
    }
    response
}
