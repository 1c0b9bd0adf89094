//! Reading a request body whole, never more than a limit: the one body reader of the HTTP
//! edge. A2E messages ([`read_message`], any content type) and the REST API's strict JSON
//! bodies (`api::extract`) both read through [`read_limited`], each mapping its failures to
//! its own answer.

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use http_body_util::LengthLimitError;

use agentroom_planning::limits::MAX_MESSAGE_BYTES;

use crate::error::ApiError;

/// Why a body was not read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Above the limit: `bytes` is how many it had at least.
    TooLarge {
        /// How many bytes it had at least.
        bytes: usize,
    },
    /// The connection failed mid-body.
    Unreadable(axum::Error),
}

/// The `Content-Length` of a request that declares more than `limit` bytes.
pub(crate) fn declared_above(headers: &HeaderMap, limit: usize) -> Option<usize> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok())
        .filter(|&bytes| bytes > limit)
}

/// The body as bytes, at most `limit` of them: above it [`ReadError::TooLarge`], found from
/// `Content-Length` before anything is read, or when reading passes the limit.
pub(crate) async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ReadError> {
    if let Some(bytes) = declared_above(headers, limit) {
        return Err(ReadError::TooLarge { bytes });
    }
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let over_limit =
            std::error::Error::source(&error).is_some_and(|source| source.is::<LengthLimitError>());
        if over_limit {
            ReadError::TooLarge {
                bytes: limit.saturating_add(1),
            }
        } else {
            ReadError::Unreadable(error)
        }
    })
}

/// One A2E message, whatever its content type (the SDK sends `text/plain`). A body above
/// [`MAX_MESSAGE_BYTES`] is `ApiError::MessageTooLarge`.
pub(crate) async fn read_message(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    read_limited(headers, body, MAX_MESSAGE_BYTES)
        .await
        .map_err(|error| match error {
            ReadError::TooLarge { bytes } => ApiError::MessageTooLarge {
                bytes,
                limit: MAX_MESSAGE_BYTES,
            },
            ReadError::Unreadable(error) => ApiError::UnreadableMessage(error),
        })
}
