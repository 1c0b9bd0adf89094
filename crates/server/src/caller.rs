//! Where an A2E request acts: a Room, and who acts in it. With [`crate::authenticated_router`]
//! the bearer token says, through the same guard as the REST API (401 without a valid token,
//! 403 when its principal may not use the planning messages, `planning.use`), and the
//! authenticated [`Caller`](crate::api::auth::Caller) is the REST handlers' own type; with
//! [`crate::router`] every request acts in the configured Room, with no principal.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use std::sync::Arc;

use agentroom_domain::room::Permission;
use agentroom_planning::{NoRandomness, PlanningService, RoomId, Session};

use crate::api::auth::Caller;
use crate::error::ApiError;
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
