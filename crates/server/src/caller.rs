//! Where an A2E request acts: a Room, and who acts in it. With [`crate::authenticated_router`]
//! the bearer token says, through the same guard as the REST API (401 without a valid token,
//! 403 when its principal may not use the planning messages, `planning.use`), and the
//! authenticated [`Caller`](crate::api::auth::Caller) is the REST handlers' own type; with
//! [`crate::router`] every request acts in the configured Room, with no principal.
//!
//! The session transport (`/session`, `/send`, `/stream`) also takes requests without an
//! `Authorization` header when tokens are required ([`SessionScope::Handshake`]): such a
//! session is made in the configured Room and bound by its handshake's `auth_token`
//! (`crate::handshake`). A request *with* the header is checked as above, so a bad header
//! is a 401 and never falls back to the handshake.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use std::sync::Arc;

use agentroom_domain::room::Permission;
use agentroom_planning::{NoRandomness, PlanningService, RoomId, Session};

use crate::api::Api;
use crate::api::auth::Caller;
use crate::error::ApiError;
use crate::handshake::Acting;
use crate::state::AppState;

/// The Room an A2E request acts in, and its authenticated caller when tokens are required.
#[derive(Clone)]
pub(crate) struct Scope {
    room: RoomId,
    /// The token's principal, its roles and the Room as loaded (`None` without tokens).
    caller: Option<Caller>,
}

impl Scope {
    /// The Room the request acts in.
    pub(crate) fn room(&self) -> &RoomId {
        &self.room
    }

    /// Who acts, when the request was authenticated (for the request's span: supervisors
    /// see which principal drives a session).
    pub(crate) fn principal(&self) -> Option<&str> {
        self.caller.as_ref().map(|caller| caller.principal.as_str())
    }

    /// The authenticated principal, when the request had a token.
    pub(crate) fn principal_id(&self) -> Option<&agentroom_domain::ids::PrincipalId> {
        self.caller.as_ref().map(|caller| &caller.principal)
    }
}

impl Scope {
    /// A new A2E session in this scope, acting as the token's principal when the request was
    /// authenticated (so an agent's updates of its own tasks on an objective board go to the
    /// coordinator as its own, T2/T3, and another's are refused by their rule); no session
    /// without randomness.
    pub(crate) fn session(&self, service: Arc<PlanningService>) -> Result<Session, NoRandomness> {
        let session = Session::new(service, self.room.clone())?;
        Ok(match &self.caller {
            Some(caller) => session.acting_as(caller.principal.clone()),
            None => session,
        })
    }
}

impl FromRequestParts<AppState> for Scope {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(api) = &state.auth else {
            return Ok(Scope {
                room: state.config.room.clone(),
                caller: None,
            });
        };
        let caller =
            crate::api::authorize(api, &parts.headers, None, Permission::PlanningUse).await?;
        Ok(Scope {
            room: caller.room.clone(),
            caller: Some(caller),
        })
    }
}

/// Where a request of the session transport (`POST /session`, `/send`, `/stream`) acts.
#[derive(Clone)]
pub(crate) enum SessionScope {
    /// No tokens ([`crate::router`]): the configured Room, as its owner.
    Open(Scope),
    /// Authenticated by the bearer header, as [`Scope`] is.
    Header {
        /// The token's Room and caller.
        scope: Scope,
        /// What checks a handshake's `auth_token` in its sessions.
        api: Arc<Api>,
    },
    /// Tokens are required and the request has no `Authorization` header: the configured
    /// Room, with nobody until a session's handshake brings a token of it. A session is keyed
    /// to its Room when made, before any token is seen, so a handshake with a token of
    /// another Room is refused rather than moving the session there.
    Handshake {
        /// The configured Room ([`crate::ServerConfig::room`]).
        room: RoomId,
        /// What checks the handshake's `auth_token`.
        api: Arc<Api>,
    },
}

impl SessionScope {
    /// The Room the request acts in.
    pub(crate) fn room(&self) -> &RoomId {
        match self {
            SessionScope::Open(scope) | SessionScope::Header { scope, .. } => scope.room(),
            SessionScope::Handshake { room, .. } => room,
        }
    }

    /// Who acts, when the request itself was authenticated.
    pub(crate) fn principal(&self) -> Option<&str> {
        match self {
            SessionScope::Open(scope) | SessionScope::Header { scope, .. } => scope.principal(),
            SessionScope::Handshake { .. } => None,
        }
    }

    /// A new A2E session in this scope and whom its messages act for: as [`Scope::session`]
    /// for a request with a header (a later handshake may not name anyone else), unbound for
    /// one without; no session without randomness.
    pub(crate) fn session(
        &self,
        service: Arc<PlanningService>,
    ) -> Result<(Session, Acting), NoRandomness> {
        Ok(match self {
            SessionScope::Open(scope) => (scope.session(service)?, Acting::Open),
            SessionScope::Header { scope, api } => {
                let session = scope.session(service)?;
                let acting = Acting::Bound {
                    session: Arc::new(session.clone()),
                    api: Arc::clone(api),
                };
                (session, acting)
            }
            SessionScope::Handshake { room, api } => (
                Session::new(service, room.clone())?,
                Acting::Unbound {
                    api: Arc::clone(api),
                },
            ),
        })
    }
}

impl FromRequestParts<AppState> for SessionScope {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(api) = &state.auth else {
            return Scope::from_request_parts(parts, state)
                .await
                .map(SessionScope::Open);
        };
        if !parts.headers.contains_key(AUTHORIZATION) {
            return Ok(SessionScope::Handshake {
                room: state.config.room.clone(),
                api: Arc::clone(api),
            });
        }
        let scope = Scope::from_request_parts(parts, state).await?;
        Ok(SessionScope::Header {
            scope,
            api: Arc::clone(api),
        })
    }
}
