//! The errors of the HTTP edge and their one mapping to HTTP responses: a status and a JSON
//! body `{"error": code, "message": text}`. A2E replies (including A2E `error` messages) are
//! not errors here: they are what a session answers, delivered as data.

use axum::Json;
use axum::http::header::{CONNECTION, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Why a request to the HTTP edge was not served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
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
    /// The body is above the message size limit; nothing was processed.
    #[error("the message is {bytes} bytes or more; the limit is {limit} bytes")]
    TooLarge {
        /// How many bytes it had at least.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The request body could not be read (the connection failed mid-body).
    #[error("the request body could not be read")]
    Body(#[source] axum::Error),
    /// A bug: a task answering the request failed. The cause is logged, not sent.
    #[error("the server failed to answer; the request may or may not have been applied")]
    Internal(String),
    /// No such route.
    #[error("no such endpoint")]
    NotFound,
    /// The route exists, with another method.
    #[error("this endpoint does not take that method")]
    MethodNotAllowed,
}

impl ApiError {
    /// The HTTP status this error is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::MissingSession | ApiError::Body(_) => StatusCode::BAD_REQUEST,
            ApiError::UnknownSession | ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::SessionBufferFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::TooManySessions { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code in the JSON body.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ApiError::MissingSession => "missing_session_id",
            ApiError::UnknownSession => "unknown_session",
            ApiError::SessionBufferFull { .. } => "session_buffer_full",
            ApiError::TooManySessions { .. } => "too_many_sessions",
            ApiError::TooLarge { .. } => "too_large",
            ApiError::Body(_) => "unreadable_body",
            ApiError::NotFound => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ApiError::Internal(cause) = &self {
            tracing::error!(%cause, "request failed");
        } else if status.is_server_error() {
            tracing::warn!(error = %self, "request refused");
        } else {
            tracing::debug!(error = %self, "request refused");
        }
        let mut response = (
            status,
            Json(ErrorBody {
                error: self.code(),
                message: self.to_string(),
            }),
        )
            .into_response();
        match self {
            ApiError::SessionBufferFull { .. } | ApiError::TooManySessions { .. } => {
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::TooLarge { .. } => close_connection(&mut response),
            _ => {}
        }
        response
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
