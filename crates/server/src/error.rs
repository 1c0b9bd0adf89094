//! The one error type of the HTTP edge and its one mapping to HTTP responses: a status and a
//! JSON body `{"error": code, "message": text}` (plus `"permission"` on a 403, and `"rule"`
//! and `"revision"` on a 409 `rule_refused`: `agentroom_api_model::ErrorBody`). Every REST handler, the A2E HTTP transport and
//! `POST /v1/planning` answer their HTTP errors with it. A2E replies (including A2E `error`
//! messages inside a 200) are not errors here: they are what a session answers, delivered as
//! data.
//!
//! A 5xx is logged with its cause (the whole `source()` chain) and tells the client nothing
//! internal; typed causes stay typed ([`ApiError::Internal`] keeps its `source()`).

use std::fmt::Write as _;

use agentroom_api_model::ErrorBody;
use agentroom_coordinator::{CoordinatorError, ErrorClass};
use agentroom_domain::event::{EventRefusal, RefusalKind};
use agentroom_domain::room::Permission;
use agentroom_domain::rules::Rule;
use agentroom_ports::StoreError;
use axum::Json;
use axum::http::header::{CONNECTION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The cause of an internal error, kept for the log.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a request to the HTTP edge was not served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    // --- The A2E HTTP transport -------------------------------------------------------------
    /// No `X-Session-Id` header, or one that is not visible ASCII.
    #[error("this request needs the X-Session-Id header that POST /session returned")]
    MissingSession,
    /// The session ended (`shutdown`), expired, or never existed.
    #[error("no such session: it ended, expired or never existed; create one with POST /session")]
    UnknownSession,
    /// The session holds as many messages as it may; nothing was processed.
    #[error(
        "the session holds {limit} messages that are unanswered or not yet read from \
         /stream; read the stream, then send again"
    )]
    SessionBufferFull {
        /// The configured bound.
        limit: usize,
    },
    /// As many sessions exist as may.
    #[error("{limit} sessions exist, the most this server keeps; try again later")]
    TooManySessions {
        /// The configured bound.
        limit: usize,
    },
    /// The caller's principal holds as many sessions as one principal may.
    #[error(
        "you hold {limit} sessions, the most one principal may (other principals are not \
         affected); end one with `shutdown`, or let an idle one expire"
    )]
    TooManySessionsForPrincipal {
        /// The per-principal bound.
        limit: usize,
    },
    /// An A2E message above the message size limit; nothing was processed.
    #[error("the message is {bytes} bytes or more; the limit is {limit} bytes")]
    MessageTooLarge {
        /// How many bytes it had at least.
        bytes: usize,
        /// The limit.
        limit: usize,
        /// The message's `req_id`, when the part of it that was read names one.
        req_id: Option<String>,
    },
    /// A request body did not arrive whole within the body-read timeout; nothing was
    /// processed, and the connection is closed.
    #[error("the request body did not arrive whole within {after:?}; nothing was processed")]
    BodyTimeout {
        /// The body-read timeout.
        after: std::time::Duration,
    },
    /// An A2E message body could not be read (the connection failed mid-body).
    #[error("the request body could not be read")]
    UnreadableMessage(#[source] axum::Error),
    /// No such route.
    #[error("no such endpoint")]
    NoRoute,
    /// The route exists, with another method.
    #[error("this endpoint does not take that method")]
    MethodNotAllowed,

    // --- The REST API -----------------------------------------------------------------------
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
    MalformedJson(#[source] serde_json::Error),
    /// JSON whose object names one key twice (which one the client meant is unknown).
    #[error("the body is ambiguous: {0}")]
    DuplicateKey(String),
    /// JSON of the wrong shape: unknown or missing fields, wrong types, bad values.
    #[error("the body does not fit this endpoint: {0}")]
    InvalidBody(String),
    /// A body of another media type than JSON.
    #[error("the body must be JSON (Content-Type: application/json), not {0}")]
    UnsupportedMediaType(String),
    /// A query parameter, header or path segment that cannot be read.
    #[error("{0}")]
    BadRequest(String),
    /// A REST body larger than the limit; nothing was processed.
    #[error("the body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The caller holds as many open notification streams as one principal may.
    #[error(
        "you hold {limit} open notification streams in this room, the most one principal may; \
         close one, then open another"
    )]
    TooManyStreams {
        /// The per-principal bound.
        limit: usize,
    },
    /// The target is not in a state this request applies to; nothing changed.
    #[error("{0}")]
    WrongState(String),
    /// The content was redacted: its redaction record took its place (410).
    #[error("content {digest} was redacted by {by}: {why}", digest = .0.old_digest, by = .0.by, why = .0.why)]
    Redacted(Box<agentroom_api_model::responses::RedactionView>),
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
    /// The Room refuses what an event says, by a rule of its kind, before anything was
    /// stored: an unknown objective or task (404), an author who may not say it (403), a
    /// state it does not apply to (409), criteria that cannot be frozen (422).
    #[error("{0}")]
    EventRefused(EventRefusal),
    /// The Room kept changing under the request.
    #[error("the room kept changing; try again")]
    Conflict(#[source] CoordinatorError),
    /// The server cannot take the request now: the Room's coordinator stopped, or there is
    /// no randomness for the ids the request needs (nothing was made under a guessable one).
    /// Its cause is logged, not told.
    #[error("the server cannot take this request now; try again")]
    Unavailable(#[source] Cause),
    /// The host is starting: its Rooms are being recovered, and only `/health` answers yet.
    #[error("the host is starting (recovering its Rooms); try again in a second")]
    Starting,

    /// T6: the member was revoked (committed at `revision`: its access is refused already),
    /// but revoking its tokens failed; the same request with the same Idempotency-Key revokes
    /// them. Its cause is logged, not told.
    #[error(
        "{principal} was revoked at revision {revision} (its access is refused already), but \
         revoking its tokens failed; send this request again with the same Idempotency-Key to \
         revoke them"
    )]
    TokensNotRevoked {
        /// The revoked member.
        principal: String,
        /// The revision that committed the revocation.
        revision: i64,
        /// Why revoking its tokens failed.
        #[source]
        cause: Cause,
    },

    // --- Both -------------------------------------------------------------------------------
    /// A bug or a failing store; its cause is logged, not told.
    #[error("the server failed to answer; the request may or may not have been applied")]
    Internal(#[source] Cause),
}

impl ApiError {
    /// An internal error caused by `cause` (a typed error, or a text for a bug).
    pub(crate) fn internal(cause: impl Into<Cause>) -> Self {
        ApiError::Internal(cause.into())
    }

    /// A request the server cannot take now because of `cause` (a stopped coordinator, no
    /// randomness).
    pub(crate) fn unavailable(cause: impl Into<Cause>) -> Self {
        ApiError::Unavailable(cause.into())
    }

    /// The HTTP status this error is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::MissingSession
            | ApiError::UnreadableMessage(_)
            | ApiError::MalformedJson(_)
            | ApiError::DuplicateKey(_)
            | ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::EventRefused(refusal) => match refusal.kind() {
                RefusalKind::Unknown => StatusCode::NOT_FOUND,
                RefusalKind::NotAllowed => StatusCode::FORBIDDEN,
                RefusalKind::WrongState => StatusCode::CONFLICT,
                RefusalKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            },
            ApiError::Forbidden(_) | ApiError::Refused(_) => StatusCode::FORBIDDEN,
            ApiError::UnknownSession | ApiError::NoRoute | ApiError::NotFound(_) => {
                StatusCode::NOT_FOUND
            }
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) | ApiError::WrongState(_) | ApiError::RuleRefused { .. } => {
                StatusCode::CONFLICT
            }
            ApiError::MessageTooLarge { .. } | ApiError::BodyTooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Redacted(_) => StatusCode::GONE,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::InvalidBody(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::SessionBufferFull { .. }
            | ApiError::TooManyStreams { .. }
            | ApiError::TooManySessionsForPrincipal { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::TooManySessions { .. }
            | ApiError::Unavailable(_)
            | ApiError::Starting
            | ApiError::TokensNotRevoked { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The stable machine-readable code in the JSON body.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ApiError::MissingSession => "missing_session_id",
            ApiError::UnknownSession => "unknown_session",
            ApiError::SessionBufferFull { .. } => "session_buffer_full",
            ApiError::TooManySessions { .. } | ApiError::TooManySessionsForPrincipal { .. } => {
                "too_many_sessions"
            }
            ApiError::TooManyStreams { .. } => "too_many_streams",
            ApiError::MessageTooLarge { .. } | ApiError::BodyTooLarge { .. } => "too_large",
            ApiError::UnreadableMessage(_) => "unreadable_body",
            ApiError::BodyTimeout { .. } => "body_timeout",
            ApiError::NoRoute | ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Unauthenticated => "unauthenticated",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Refused(_) => "refused",
            ApiError::MalformedJson(_) => "malformed_json",
            ApiError::DuplicateKey(_) => "duplicate_key",
            ApiError::InvalidBody(_) => "invalid_body",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Conflict(_) => "conflict",
            ApiError::WrongState(_) => "wrong_state",
            ApiError::Redacted(_) => "redacted",
            ApiError::RuleRefused { .. } => "rule_refused",
            ApiError::EventRefused(refusal) => match refusal.kind() {
                RefusalKind::Unknown => "not_found",
                RefusalKind::NotAllowed => "refused",
                RefusalKind::WrongState => "rule_refused",
                RefusalKind::Invalid => "invalid_body",
            },
            ApiError::Unavailable(_) | ApiError::Starting => "unavailable",
            ApiError::TokensNotRevoked { .. } => "tokens_not_revoked",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

/// `error`'s sources, innermost last, for the log.
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut text = String::new();
    let mut next = error.source();
    while let Some(cause) = next {
        if !text.is_empty() {
            text.push_str(": ");
        }
        let _ = write!(text, "{cause}");
        next = cause.source();
    }
    text
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, cause = %causes(&self), code = self.code(), "request failed");
        } else {
            tracing::debug!(error = %self, "request refused");
        }
        let mut body = ErrorBody {
            error: self.code().to_owned(),
            message: self.to_string(),
            permission: None,
            rule: None,
            revision: None,
            redaction: None,
        };
        match &self {
            ApiError::Forbidden(permission) => {
                body.permission = Some(permission.as_str().to_owned())
            }
            ApiError::RuleRefused {
                rule,
                message,
                revision,
            } => {
                body.rule = Some(*rule);
                body.message.clone_from(message);
                body.revision = Some(*revision);
            }
            ApiError::EventRefused(refusal) => body.rule = Some(refusal.rule()),
            ApiError::TokensNotRevoked { revision, .. } => body.revision = Some(*revision),
            ApiError::Redacted(record) => body.redaction = Some((**record).clone()),
            _ => {}
        }
        let mut response = (status, Json(body)).into_response();
        match self {
            ApiError::Unauthenticated => {
                response
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::SessionBufferFull { .. }
            | ApiError::TooManySessions { .. }
            | ApiError::TooManySessionsForPrincipal { .. }
            | ApiError::TooManyStreams { .. }
            | ApiError::Starting => {
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::MessageTooLarge { .. }
            | ApiError::BodyTooLarge { .. }
            | ApiError::BodyTimeout { .. } => {
                close_connection(&mut response);
            }
            _ => {}
        }
        response
    }
}

impl From<CoordinatorError> for ApiError {
    fn from(error: CoordinatorError) -> Self {
        match error.classify() {
            ErrorClass::NotFound(message) => ApiError::NotFound(message),
            ErrorClass::WrongState(message) => ApiError::WrongState(message),
            ErrorClass::Invalid(message) => ApiError::InvalidBody(message),
            ErrorClass::Refused(message) => ApiError::Refused(message),
            ErrorClass::EventRefused(refusal) => ApiError::EventRefused(refusal),
            ErrorClass::Conflicted(error) => ApiError::Conflict(error),
            ErrorClass::Unavailable(error) => ApiError::unavailable(error),
            ErrorClass::TokensNotRevoked {
                principal,
                revision,
                source,
            } => ApiError::TokensNotRevoked {
                principal: principal.to_string(),
                revision: revision.0,
                cause: source.into(),
            },
            ErrorClass::Internal(error) => ApiError::internal(error),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        ApiError::internal(error)
    }
}

/// No randomness for a planning session's id: the one failure policy of randomness, 503 as
/// the coordinator's `NoRandomness` is; no session was made.
impl From<agentroom_planning::NoRandomness> for ApiError {
    fn from(error: agentroom_planning::NoRandomness) -> Self {
        ApiError::unavailable(error)
    }
}

/// Marks a response to a body that was not read to its end: the rest of that body is still
/// on the connection, so it cannot carry another request. Saying so keeps a client from
/// reusing it.
pub(crate) fn close_connection(response: &mut Response) {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_keeps_its_cause_and_tells_nothing_of_it() {
        let cause = std::io::Error::other("disk on fire at /var/secret");
        let error = ApiError::internal(cause);
        assert_eq!(error.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!error.to_string().contains("secret"));
        let source = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk on fire at /var/secret"));
        assert_eq!(causes(&error), "disk on fire at /var/secret");
    }

    /// D4: a readmit or discard that lost its race to another decision on the same held
    /// result is a 409 with a message, not a 422 `invalid_body` (issue 17).
    #[test]
    fn d4_a_lost_late_result_race_is_a_conflict_not_a_bad_body() {
        let op = agentroom_domain::ids::OperationId::from_uuid(uuid::Uuid::from_u128(7));
        let error = ApiError::from(CoordinatorError::Input(
            agentroom_domain::engine::InputError::NothingHeld(op),
        ));
        assert_eq!(
            (error.status(), error.code()),
            (StatusCode::CONFLICT, "wrong_state")
        );
        assert!(
            error.to_string().contains("another decision took it first"),
            "{error}"
        );
    }
}
