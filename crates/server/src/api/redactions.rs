//! The redaction routes (issue 18): list the Room's redaction records (`objective.read`, as
//! the memory), redact an artifact's content or a memory entry (`content.redact`, the
//! owner's), and read content of the Room by its digest (410 with the redaction record once
//! it was redacted). Each handler extracts, calls one service method and serializes: the
//! domain decides who may and what can be redacted; the edge refuses what cannot concern
//! the Room (an unknown target: 404; a blank or over-long reason: 422) before anything is
//! decided.

use agentroom_api_model::requests::{RedactBody, RedactionTargetBody};
use agentroom_api_model::responses::{ContentView, Decision, Page as ApiPage, RedactionView};
use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::PrincipalId;
use agentroom_domain::redaction::{RedactionTarget, reason_problem};
use agentroom_domain::state::RoomState;
use axum::Json;
use axum::extract::{Path, State};

use super::State as ApiState;
use super::auth::Caller;
use super::extract::{IdempotencyKey, StrictJson};
use super::handlers::Page;
use super::handlers::{decided, input_id};
use crate::error::ApiError;

/// `GET /v1/rooms/{room}/redactions`: every redaction record, oldest first.
pub(crate) async fn list(
    caller: Caller,
    page: Page,
) -> Result<Json<ApiPage<RedactionView>>, ApiError> {
    let records: Vec<RedactionView> = caller
        .stored
        .state
        .redactions()
        .records()
        .iter()
        .map(RedactionView::from)
        .collect();
    Ok(page.of(&records))
}

/// `POST /v1/rooms/{room}/redactions`.
pub(crate) async fn redact(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<RedactBody>,
) -> Result<Json<Decision>, ApiError> {
    if let Some(problem) = reason_problem(&body.reason) {
        return Err(ApiError::InvalidBody(format!("reason: {problem}")));
    }
    match &body.target {
        RedactionTargetBody::Artifact { digest } => {
            // Content a closed objective's contribution names is the Room's too.
            let stored = api.rooms.room_for_content(&caller.room, digest).await?;
            if !stored.state.names_content(digest) {
                return Err(ApiError::NotFound(format!(
                    "no contribution of this room names content {digest}"
                )));
            }
        }
        RedactionTargetBody::Memory { entry } => {
            if caller.stored.state.memory().get(*entry).is_none() {
                return Err(ApiError::NotFound(format!(
                    "no memory entry {entry} in this room"
                )));
            }
        }
    }
    // The same key with another body is another request (as for events).
    let what = format!("redact/{:?}/{:?}", body.target, body.reason);
    let id = input_id(&api, &caller, &key, &what)?;
    let target: RedactionTarget = body.target.into();
    let outcome = api
        .rooms
        .redact(
            &caller.room,
            id,
            caller.principal.clone(),
            target,
            body.reason,
        )
        .await?;
    decided(&outcome)
}

/// `GET /v1/rooms/{room}/contents/{digest}`: content a contribution the caller may read
/// names (404 otherwise, so another's work is not even confirmed to exist); 410 with the
/// redaction record once it was redacted.
pub(crate) async fn content(
    State(api): State<ApiState>,
    caller: Caller,
    Path((_, digest)): Path<(String, String)>,
) -> Result<Json<ContentView>, ApiError> {
    let unknown = || ApiError::NotFound(format!("no content {digest} in this room"));
    let digest: ContentDigest = digest.parse().map_err(|_| unknown())?;
    let stored = api.rooms.room_for_content(&caller.room, &digest).await?;
    let state = &stored.state;
    if !sees(state, &caller.principal, &digest) {
        return Err(unknown());
    }
    if let Some(record) = state.redactions().of_content(&digest) {
        return Err(ApiError::Redacted(Box::new(record.into())));
    }
    let stored = api
        .rooms
        .content(&caller.room, &digest)
        .await?
        .ok_or_else(unknown)?;
    Ok(Json(ContentView {
        digest: stored.digest.to_string(),
        media_type: stored.media_type,
        text: String::from_utf8_lossy(&stored.bytes).into_owned(),
    }))
}

/// Whether a contribution `principal` may read names `digest` (`RoomState::sees_contribution`).
fn sees(state: &RoomState, principal: &PrincipalId, digest: &ContentDigest) -> bool {
    state
        .contributions()
        .values()
        .filter(|c| c.digests().contains(&digest))
        .any(|c| state.sees_contribution(principal, c))
}
