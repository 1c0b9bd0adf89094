//! The membership routes (issue 18, T6): add a member (with its first bearer token, shown once,
//! when asked), change a member's roles, revoke a member; `membership.manage` (the owner by
//! default). Each handler extracts, calls one service method and serializes: the domain
//! decides who may, keeps the Room an owner, and fences the open calls of a principal that
//! loses the role they run in. Listing is `GET …/members` (`handlers::members`).

use agentroom_api_model::requests::{AddMemberBody, EmptyBody, RolesBody};
use agentroom_api_model::responses::{Decision, IssuedTokenView, MemberAdded};
use agentroom_coordinator::TokenTerms;
use agentroom_domain::room::Role;
use axum::Json;
use axum::extract::State;

use super::State as ApiState;
use super::auth::Caller;
use super::extract::{IdempotencyKey, KnownMember, RevokedMember, StrictJson, StrictJsonOrEmpty};
use super::handlers::{decided, input_id, revoke_input};
use crate::error::ApiError;

/// Roles as the input names them: at least one, each once, in a fixed order (so a retry
/// with the roles in another order is the same request).
fn roles_of(roles: Vec<Role>) -> Result<Vec<Role>, ApiError> {
    let mut roles = roles;
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        return Err(ApiError::InvalidBody(
            "roles must name at least one role (owner, operator, reviewer, specialist, agent_host); to remove a member, revoke it".to_owned(),
        ));
    }
    Ok(roles)
}

/// `POST /v1/rooms/{room}/members`.
pub(crate) async fn add(
    State(api): State<ApiState>,
    caller: Caller,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<AddMemberBody>,
) -> Result<Json<MemberAdded>, ApiError> {
    let roles = roles_of(body.roles)?;
    let what = format!(
        "member/add/{}/{roles:?}/{}",
        body.principal, body.issue_token
    );
    let id = input_id(&api, &caller, &key, &what)?;
    let token = body.issue_token.then(TokenTerms::default);
    let added = api
        .rooms
        .add_member(
            &caller.room,
            id,
            caller.principal.clone(),
            body.principal,
            roles,
            token,
        )
        .await?;
    let Json(decision) = decided(&added.outcome)?;
    Ok(Json(MemberAdded {
        decision,
        token: added.token.map(|issued| IssuedTokenView {
            id: issued.record.id.to_string(),
            principal: issued.record.principal.clone(),
            token: issued.text().to_owned(),
            expires_at: issued.record.expires_at.map(|at| at.as_millis()),
        }),
    }))
}

/// `POST /v1/rooms/{room}/members/{principal}/roles`.
pub(crate) async fn change_roles(
    State(api): State<ApiState>,
    caller: Caller,
    KnownMember(principal): KnownMember,
    key: IdempotencyKey,
    StrictJson(body): StrictJson<RolesBody>,
) -> Result<Json<Decision>, ApiError> {
    let roles = roles_of(body.roles)?;
    let id = input_id(
        &api,
        &caller,
        &key,
        &format!("member/roles/{principal}/{roles:?}"),
    )?;
    let outcome = api
        .rooms
        .change_member_roles(&caller.room, id, caller.principal.clone(), principal, roles)
        .await?;
    decided(&outcome)
}

/// `POST /v1/rooms/{room}/members/{principal}/revoke`: the member's tokens in the Room are
/// revoked with it (T6). When revoking them fails after the revocation committed, a 503
/// `tokens_not_revoked` says so; the same request with the same Idempotency-Key (accepted
/// although the principal is no longer a member) revokes them.
pub(crate) async fn revoke(
    State(api): State<ApiState>,
    caller: Caller,
    RevokedMember(principal): RevokedMember,
    key: IdempotencyKey,
    StrictJsonOrEmpty(EmptyBody {}): StrictJsonOrEmpty<EmptyBody>,
) -> Result<Json<Decision>, ApiError> {
    let id = input_id(&api, &caller, &key, &revoke_input(&principal))?;
    let outcome = api
        .rooms
        .revoke_member(&caller.room, id, caller.principal.clone(), principal)
        .await?;
    decided(&outcome)
}
