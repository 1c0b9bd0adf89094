//! The REST API's errors and their one mapping to HTTP: a status and a JSON body
//! `{"error": code, "message": text}` (plus `"permission"` on a 403, and `"rule"` and
//! `"revision"` on a 409 `rule_refused`). A 5xx is logged with
//! its cause and tells the client nothing internal.

use agentroom_coordinator::CoordinatorError;
use agentroom_domain::engine::InputError;
use agentroom_domain::room::Permission;
use agentroom_domain::rules::Rule;
use agentroom_ports::{StoreError, SubmitError};
use axum::Json;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why a REST request was not served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RestError {
    /// No valid bearer token (missing, malformed, unknown, expired, revoked): all alike.
    #[error("a valid bearer token is required (Authorization: Bearer ar_...)")]
    Unauthenticated,
    /// The principal's roles in the Room do not grant the permission.
    #[error("this needs the permission `{0}`, which none of your roles in this room holds")]
    Forbidden(Permission),
    /// A rule refused it at the API before anything was decided (e.g. another's task).
    #[error("{0}")]
    Refused(String),
    /// No such Room for this token, objective, operation, review or route.
    #[error("{0}")]
    NotFound(String),
    /// The body is not JSON.
    #[error("the body is not valid JSON: {0}")]
    MalformedJson(String),
    /// JSON of the wrong shape: unknown or missing fields, wrong types, bad values.
    #[error("the body does not fit this endpoint: {0}")]
    InvalidBody(String),
    /// A query parameter or path segment that cannot be read.
    #[error("{0}")]
    BadRequest(String),
    /// The body is larger than the limit; nothing was processed.
    #[error("the body is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The target is not in a state this request applies to; nothing changed.
    #[error("{0}")]
    WrongState(String),
    /// The domain refused the input by a rule. The refusal is a decision too, committed at
    /// `revision` (it may count towards a bound); nothing else changed.
    #[error("{rule}: {message}")]
    RuleRefused {
        /// The rule that refused it.
        rule: Rule,
        /// Why, for people.
        message: String,
        /// The revision that committed the refusal.
        revision: i64,
    },
    /// The Room kept changing under the request.
    #[error("the room kept changing; try again")]
    Conflict,
    /// The coordinator cannot take requests now.
    #[error("the room is not available now; try again")]
    Unavailable,
    /// A bug or a failing store; logged, not told.
    #[error("the server failed to answer; the request may or may not have been applied")]
    Internal(String),
}

impl RestError {
    fn status(&self) -> StatusCode {
        match self {
            RestError::Unauthenticated => StatusCode::UNAUTHORIZED,
            RestError::Forbidden(_) | RestError::Refused(_) => StatusCode::FORBIDDEN,
            RestError::NotFound(_) => StatusCode::NOT_FOUND,
            RestError::MalformedJson(_) | RestError::BadRequest(_) => StatusCode::BAD_REQUEST,
            RestError::InvalidBody(_) => StatusCode::UNPROCESSABLE_ENTITY,
            RestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            RestError::Conflict | RestError::WrongState(_) | RestError::RuleRefused { .. } => {
                StatusCode::CONFLICT
            }
            RestError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            RestError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            RestError::Unauthenticated => "unauthenticated",
            RestError::Forbidden(_) => "forbidden",
            RestError::Refused(_) => "refused",
            RestError::NotFound(_) => "not_found",
            RestError::MalformedJson(_) => "malformed_json",
            RestError::InvalidBody(_) => "invalid_body",
            RestError::BadRequest(_) => "bad_request",
            RestError::TooLarge { .. } => "too_large",
            RestError::Conflict => "conflict",
            RestError::WrongState(_) => "wrong_state",
            RestError::RuleRefused { .. } => "rule_refused",
            RestError::Unavailable => "unavailable",
            RestError::Internal(_) => "internal_error",
        }
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let RestError::Internal(cause) = &self {
            tracing::error!(%cause, "request failed");
        } else {
            tracing::debug!(error = %self, "request refused");
        }
        let mut body = json!({"error": self.code(), "message": self.to_string()});
        if let RestError::Forbidden(permission) = &self {
            body["permission"] = json!(permission.as_str());
        }
        if let RestError::RuleRefused {
            rule,
            message,
            revision,
        } = &self
        {
            body["rule"] = json!(rule);
            body["message"] = json!(message);
            body["revision"] = json!(revision);
        }
        let mut response = (status, Json(body)).into_response();
        match self {
            RestError::Unauthenticated => {
                response
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            RestError::TooLarge { .. } => crate::error::close_connection(&mut response),
            _ => {}
        }
        response
    }
}

impl From<CoordinatorError> for RestError {
    fn from(error: CoordinatorError) -> Self {
        match error {
            CoordinatorError::UnknownRoom(room) => RestError::NotFound(format!("no room {room}")),
            CoordinatorError::UnknownEvent { event, .. } => {
                RestError::NotFound(format!("no event {event}"))
            }
            CoordinatorError::WrongRoom { event, .. } => {
                RestError::NotFound(format!("no event {event} in this room"))
            }
            CoordinatorError::Input(InputError::UnknownObjective(id)) => {
                RestError::NotFound(format!("no objective {id} in this room"))
            }
            CoordinatorError::Input(error @ InputError::NotOpen(_)) => {
                RestError::NotFound(error.to_string())
            }
            CoordinatorError::Input(error) => RestError::InvalidBody(error.to_string()),
            CoordinatorError::Conflicted { .. } => RestError::Conflict,
            CoordinatorError::ActorStopped(_) => RestError::Unavailable,
            CoordinatorError::NoAssignment(op) => {
                RestError::NotFound(format!("no assignment of operation {op}"))
            }
            CoordinatorError::Submit(SubmitError::NotYours { op, .. }) => {
                RestError::Refused(format!(
                    "operation {op} is assigned to another specialist; only its own specialist may submit its result"
                ))
            }
            CoordinatorError::Submit(
                error @ (SubmitError::AlreadySubmitted { .. } | SubmitError::NotWaiting { .. }),
            ) => RestError::WrongState(error.to_string()),
            other => RestError::Internal(other.to_string()),
        }
    }
}

impl From<StoreError> for RestError {
    fn from(error: StoreError) -> Self {
        RestError::Internal(error.to_string())
    }
}
