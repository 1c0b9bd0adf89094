//! Who is calling: the Room a request acts in. With [`crate::authenticated_router`] the
//! bearer token says (401 without a valid one, 403 when its principal may not use the
//! planning messages, `planning.use`); with [`crate::router`] every caller is the owner of the
//! configured Room.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use agentroom_domain::room::Permission;
use agentroom_planning::RoomId;

use crate::error::ApiError;
use crate::state::AppState;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    room: RoomId,
}

impl Caller {
    /// The Room the caller acts in.
    pub(crate) fn room(&self) -> &RoomId {
        &self.room
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(api) = &state.auth else {
            return Ok(Caller {
                room: state.config.room.clone(),
            });
        };
        let caller =
            crate::api::authorize(api, &parts.headers, None, Permission::PlanningUse).await?;
        Ok(Caller { room: caller.room })
    }
}
