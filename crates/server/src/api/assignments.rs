//! Assignments: the specialist work an agent host executes over the API. A hosted
//! specialist's call waits on this host (the service's agent-host desk); its agent host lists the
//! calls waiting for the token's principal and submits each one's result once, recorded
//! durably before the call uses it (D2). Only the specialist the call is for may submit (T2,
//! T3); the domain decides again whether the result applies and what it costs (B3, B5).
//! While it works, the assignee may say that the assignment's task waits on something
//! outside the Room (O12) or record a receipt about its objective (O13): events it authors,
//! which the domain admits or refuses like any other.

use agentroom_api_model::requests::{ReceiptBody, SourceBody, SubmissionBody, WaitBody};
use agentroom_api_model::responses::{AssignmentView, ContextItemView, Decision, Page, Recorded};
use agentroom_coordinator::{AssignmentSignal, ReportedResult, ReportedSource};
use agentroom_domain::ids::EventId;
use agentroom_domain::ids::OperationId;
use agentroom_domain::review::Artifact;
use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::State as ApiState;
use super::auth::Caller;
use super::extract::{IdempotencyKey, StrictJson};
use super::handlers::{Page as PageQuery, answer, input_id};
use crate::error::ApiError;

/// `GET /v1/rooms/{room}/assignments`: the calls of this Room waiting for the caller's
/// result, each with its task, inputs, the contributions it may cite and its reservation.
pub(crate) async fn list(
    State(api): State<ApiState>,
    caller: Caller,
    page: PageQuery,
) -> Result<Json<Page<AssignmentView>>, ApiError> {
    let items: Vec<AssignmentView> = api
        .rooms
        .assignments(&caller.room, &caller.principal)
        .await?
        .into_iter()
        .map(|call| AssignmentView {
            operation: call.op,
            objective: call.objective,
            reservation_micros: call.reservation.micros(),
            task: call.task,
            context: call
                .context
                .items
                .into_iter()
                .map(|item| ContextItemView {
                    kind: item.kind,
                    id: item.id,
                    attrs: item.attrs.into_iter().collect(),
                    text: item.text,
                    digest: item.digest.to_string(),
                })
                .collect(),
        })
        .collect();
    Ok(page.of(&items))
}

/// The result `body` reports, as the service reads every edge's (it checks it).
fn reported(body: SubmissionBody) -> ReportedResult {
    match body {
        SubmissionBody::Contribution {
            body,
            media_type,
            artifacts,
            sources,
            outputs,
            usage_micros,
        } => ReportedResult::Contribution {
            body,
            media_type,
            artifacts: artifacts
                .into_iter()
                .map(|a| Artifact {
                    name: a.name,
                    content: a.content,
                })
                .collect(),
            sources: sources.into_iter().map(reported_source).collect(),
            outputs,
            usage_micros,
        },
        SubmissionBody::Failure {
            reason,
            usage_micros,
        } => ReportedResult::Failure {
            reason,
            usage_micros,
        },
    }
}

fn reported_source(source: SourceBody) -> ReportedSource {
    match source {
        SourceBody::Contribution { id } => ReportedSource::Contribution { id },
        SourceBody::External { url, digest } => ReportedSource::External { url, digest },
        SourceBody::Document {
            id,
            uri,
            title,
            excerpt,
            retrieved_at,
            content_digest,
        } => ReportedSource::Document {
            id,
            uri,
            title,
            excerpt,
            retrieved_at,
            content_digest,
        },
    }
}

/// `{operation}` in an assignment's path: a specialist call of the caller's Room that a
/// hosted specialist of this host serves (404 otherwise), and the caller's own (403
/// otherwise); found before the body is read.
pub(crate) struct Assignment {
    op: OperationId,
}

impl FromRequestParts<ApiState> for Assignment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &ApiState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, api).await?;
        let Path((_, operation)) = Path::<(String, String)>::from_request_parts(parts, api)
            .await
            .map_err(|rejection| ApiError::BadRequest(rejection.body_text()))?;
        let op: OperationId = operation
            .parse()
            .map_err(|_| ApiError::NotFound(format!("no assignment of operation {operation}")))?;
        api.rooms
            .assignment_of(&caller.room, &caller.principal, op)
            .await?;
        Ok(Assignment { op })
    }
}

/// `POST /v1/rooms/{room}/assignments/{operation}/result`: the caller's result for a call
/// waiting for it. 404 for an operation of no assignment in this Room, 403 for another
/// specialist's, 409 when it has a result already or is not waiting; 202 once it is recorded
/// and handed to the call (which settles it: the domain decides).
pub(crate) async fn submit(
    State(api): State<ApiState>,
    caller: Caller,
    Assignment { op }: Assignment,
    StrictJson(body): StrictJson<SubmissionBody>,
) -> Result<(StatusCode, Json<Recorded>), ApiError> {
    let submission = reported(body).into_submission(op)?;
    api.rooms
        .submit_result(&caller.room, &caller.principal, op, submission)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Recorded {
            operation: op,
            recorded: true,
        }),
    ))
}

/// `POST /v1/rooms/{room}/assignments/{operation}/wait`: the caller's assignment's task waits
/// on something outside the Room (O12). Posted as the caller's `wait_ack` event: 202 with the
/// decision; 404 for no assignment here, 403 for another's, 409 when its task no longer runs,
/// 422 for a blank reason.
pub(crate) async fn wait(
    State(api): State<ApiState>,
    caller: Caller,
    Assignment { op }: Assignment,
    key: IdempotencyKey,
    StrictJson(WaitBody { reason }): StrictJson<WaitBody>,
) -> Result<(StatusCode, Json<Decision>), ApiError> {
    let what = format!("assignment/{op}/wait/{reason}");
    signal(
        &api,
        &caller,
        op,
        &key,
        &what,
        AssignmentSignal::Waiting { reason },
    )
    .await
}

/// `POST /v1/rooms/{room}/assignments/{operation}/receipt`: the caller records something
/// internal about its assignment's objective (O13). Posted as the caller's
/// `internal_receipt` event: 202 with the decision; 404, 403 and 422 as for a wait.
pub(crate) async fn receipt(
    State(api): State<ApiState>,
    caller: Caller,
    Assignment { op }: Assignment,
    key: IdempotencyKey,
    StrictJson(ReceiptBody { note }): StrictJson<ReceiptBody>,
) -> Result<(StatusCode, Json<Decision>), ApiError> {
    let what = format!("assignment/{op}/receipt/{note}");
    signal(
        &api,
        &caller,
        op,
        &key,
        &what,
        AssignmentSignal::Receipt { note },
    )
    .await
}

async fn signal(
    api: &ApiState,
    caller: &Caller,
    op: OperationId,
    key: &IdempotencyKey,
    what: &str,
    signal: AssignmentSignal,
) -> Result<(StatusCode, Json<Decision>), ApiError> {
    let id = EventId::from_uuid(*input_id(api, caller, key, what)?.as_uuid());
    let outcome = api
        .rooms
        .signal_assignment(&caller.room, &caller.principal, op, id, signal)
        .await?;
    let Json(mut answer) = answer(&outcome);
    answer.event = Some(id.to_string());
    Ok((StatusCode::ACCEPTED, Json(answer)))
}
