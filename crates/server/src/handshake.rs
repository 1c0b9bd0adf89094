//! Who an A2E HTTP session acts as when tokens are required (T3): the principal of its
//! token, given either as the bearer header of `POST /session` or, for a session made without
//! that header (clients that send no headers), as its handshake's `auth_token`.
//!
//! A session made without a header is *unbound*: it answers every message with the A2E
//! `error` `unauthorized` and changes nothing, except a `handshake/req` whose `auth_token` is a
//! valid token of the session's Room whose principal holds `planning.use` there; that
//! handshake binds the session to the token's principal for good and is answered as usual.
//! (`shutdown` still ends it: it changes nothing but the session itself.) A bound session —
//! by header or by handshake — never changes identity: a later handshake's `auth_token` must
//! be empty or authenticate the same principal in the same Room, else `unauthorized`.
//!
//! The token is checked by [`crate::api::authorize_token`], the REST guard's own check, so a
//! handshake accepts exactly the tokens the bearer header does.

use std::fmt;
use std::sync::Arc;

use agentroom_domain::ids::PrincipalId;
use agentroom_domain::room::Permission;
use agentroom_planning::wire::{self, Body, Handshake, Inbound, ProtocolError};
use agentroom_planning::{RoomId, Session, Step};

use crate::api::{Api, authorize_token};
use crate::error::ApiError;

/// Whom a session's messages act for.
#[derive(Clone)]
pub(crate) enum Acting {
    /// No tokens ([`crate::router`]): every message is answered as the session was made, and a
    /// handshake's `auth_token` is not looked at.
    Open,
    /// Tokens are required and the session acts as `session`'s principal (bound by the
    /// header of `POST /session` or by its handshake).
    Bound {
        /// The session, acting as its principal.
        session: Arc<Session>,
        /// What checks a later handshake's `auth_token`.
        api: Arc<Api>,
    },
    /// Tokens are required and nobody is bound yet: only a handshake whose `auth_token`
    /// authenticates is answered.
    Unbound {
        /// What checks the handshake's `auth_token`.
        api: Arc<Api>,
    },
}

impl fmt::Debug for Acting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Acting::Open => f.write_str("Open"),
            Acting::Bound { session, .. } => f
                .debug_struct("Bound")
                .field("principal", &session.principal())
                .finish_non_exhaustive(),
            Acting::Unbound { .. } => f.write_str("Unbound"),
        }
    }
}

impl Acting {
    /// Whether the session waits for the handshake that binds it.
    pub(crate) fn is_unbound(&self) -> bool {
        matches!(self, Acting::Unbound { .. })
    }

    /// The principal the session acts for, once bound (none without tokens or before the
    /// handshake).
    pub(crate) fn principal(&self) -> Option<&PrincipalId> {
        match self {
            Acting::Bound { session, .. } => session.principal(),
            Acting::Open | Acting::Unbound { .. } => None,
        }
    }

    /// Answers one message of the session `made` (the session as `POST /session` made it:
    /// its id, Room and reply numbering) as this binding allows. Returns the binding after
    /// it, when the message changed it (only a handshake that binds an unbound session does).
    pub(crate) async fn answer(&self, made: &Session, message: &[u8]) -> (Step, Option<Acting>) {
        match self {
            Acting::Open => (made.step(message).await, None),
            Acting::Bound { session, api } => {
                let decoded = wire::decode(message);
                if let Ok(Inbound {
                    req_id,
                    body: Body::Handshake(handshake),
                }) = &decoded
                    && let Err(error) = same_principal(api, session, req_id, handshake).await
                {
                    return (session.answer_error(error), None);
                }
                (session.step_decoded(decoded).await, None)
            }
            Acting::Unbound { api } => match wire::decode(message) {
                Ok(Inbound {
                    body: Body::Shutdown,
                    ..
                }) => (Step::Close, None),
                Ok(Inbound {
                    req_id,
                    body: Body::Handshake(handshake),
                }) => match principal_of(api, made.room(), &req_id, &handshake.auth_token).await {
                    Ok(principal) => {
                        tracing::info!(room = %made.room(), %principal, "a session was bound by its handshake");
                        let session = Arc::new(made.clone().acting_as(principal));
                        let step = session
                            .step_decoded(Ok(Inbound {
                                req_id,
                                body: Body::Handshake(handshake),
                            }))
                            .await;
                        let bound = Acting::Bound {
                            session,
                            api: Arc::clone(api),
                        };
                        (step, Some(bound))
                    }
                    Err(error) => (made.answer_error(error), None),
                },
                Ok(Inbound { req_id, .. }) => (made.answer_error(not_bound(&req_id)), None),
                Err(error) => (made.answer_error(not_bound(&error.req_id)), None),
            },
        }
    }
}

/// A message other than the handshake on an unbound session.
fn not_bound(req_id: &str) -> ProtocolError {
    ProtocolError::unauthorized(
        req_id,
        "this session has no principal yet: send a handshake/req whose auth_token is a token \
         of this Room first (or create the session with Authorization: Bearer)",
    )
}

/// A later handshake on a bound session: its `auth_token` is empty, or authenticates the
/// session's own principal.
async fn same_principal(
    api: &Api,
    session: &Session,
    req_id: &str,
    handshake: &Handshake,
) -> Result<(), ProtocolError> {
    if handshake.auth_token.trim().is_empty() {
        return Ok(());
    }
    let principal = principal_of(api, session.room(), req_id, &handshake.auth_token).await?;
    if session.principal() == Some(&principal) {
        Ok(())
    } else {
        // No session id at info: it is all a client shows to use its session.
        tracing::info!(
            bound = ?session.principal(),
            handshake = %principal,
            "a handshake named another principal than the session's"
        );
        Err(ProtocolError::unauthorized(
            req_id,
            "auth_token names another principal than the one this session acts as; a \
             session never changes identity: create a new session for it",
        )
        .with_detail("field", "auth_token"))
    }
}

/// The principal `token` authenticates in `room`, by the REST guard's check: `unauthorized`
/// for an empty, malformed, unknown, expired or revoked token, one of another Room, or one
/// whose principal may not use the planning messages; `runtime_error` when the store fails.
async fn principal_of(
    api: &Api,
    room: &RoomId,
    req_id: &str,
    token: &str,
) -> Result<PrincipalId, ProtocolError> {
    let token = token.trim();
    let refused = |message: &str| {
        ProtocolError::unauthorized(req_id, message).with_detail("field", "auth_token")
    };
    if token.is_empty() {
        return Err(refused(
            "auth_token is empty: this session was created without Authorization: Bearer, so \
             its handshake must carry a token of this Room",
        ));
    }
    match authorize_token(api, token, Some(room.as_str()), Permission::PlanningUse).await {
        Ok(caller) => Ok(caller.principal),
        Err(ApiError::Unauthenticated) => Err(refused(
            "auth_token is not a valid token (malformed, unknown, expired or revoked)",
        )),
        Err(ApiError::NotFound(_)) => {
            Err(refused("auth_token is not a token of this session's Room"))
        }
        Err(ApiError::Forbidden(permission)) => Err(refused(
            "auth_token's principal holds no role in this Room that may use the planning \
             messages",
        )
        .with_detail("permission", permission.as_str())),
        Err(error) => {
            tracing::error!(
                %error,
                cause = %crate::error::causes(&error),
                req_id,
                "a handshake's token could not be checked"
            );
            Err(ProtocolError::runtime(req_id))
        }
    }
}
