//! `POST /v1/planning`: one A2E message in, its reply out, in a session that lives for the
//! request. For clients that want request/response rather than the SDK's stream.

use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use agentroom_planning::Step;

use crate::body::read_message;
use crate::caller::Scope;
use crate::error::{ApiError, close_connection};
use crate::state::AppState;

/// What the endpoint answers.
enum Answer {
    /// 200 with the reply: a planning reply, a refusal (`success: false`) or an A2E `error`.
    Reply(String),
    /// 204: the message has no reply (`shutdown`, or a reply type such as `pong`).
    Nothing,
    /// 413 with the A2E `schema_violation` error for a message above the size limit.
    TooLarge(String),
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let (status, line) = match self {
            Answer::Reply(line) => (StatusCode::OK, line),
            Answer::TooLarge(line) => (StatusCode::PAYLOAD_TOO_LARGE, line),
            Answer::Nothing => return StatusCode::NO_CONTENT.into_response(),
        };
        let mut response = (status, line).into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            close_connection(&mut response);
        }
        response
    }
}

/// `POST /v1/planning`.
#[tracing::instrument(level = "debug", skip_all, fields(room = %scope.room(), principal = scope.principal()))]
pub(crate) async fn planning(
    State(state): State<AppState>,
    scope: Scope,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // No randomness, no session: 503 before the message is read, nothing stored.
    let session = scope.session(state.service.clone())?;
    let answer = match read_message(&headers, body).await {
        // Run to the end even if the client hangs up meanwhile: a store write is never cut
        // off half way by a dropped request.
        Ok(message) => match tokio::spawn(async move { session.step(&message).await }).await {
            Ok(Step::Reply(line)) => Answer::Reply(line),
            Ok(Step::Silent | Step::Close) => Answer::Nothing,
            Err(error) => return Err(ApiError::internal(error)),
        },
        Err(ApiError::MessageTooLarge { bytes, req_id, .. }) => Answer::TooLarge(
            crate::body::too_large_line(&session, bytes, req_id.as_deref()),
        ),
        Err(error) => return Err(error),
    };
    Ok(answer.into_response())
}
