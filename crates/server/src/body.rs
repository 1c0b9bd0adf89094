//! Reading one A2E message from a request body, never more than the message size limit.

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_LENGTH;
use http_body_util::LengthLimitError;

use agentroom_planning::limits::MAX_MESSAGE_BYTES;

use crate::error::ApiError;

/// The body as bytes, whatever its content type (the SDK sends `text/plain`). A body above
/// [`MAX_MESSAGE_BYTES`] is `ApiError::MessageTooLarge`, found from `Content-Length` before
/// anything is read, or when reading passes the limit.
pub(crate) async fn read_message(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if let Some(bytes) = declared.filter(|&bytes| bytes > MAX_MESSAGE_BYTES) {
        return Err(too_large(bytes));
    }
    axum::body::to_bytes(body, MAX_MESSAGE_BYTES)
        .await
        .map_err(|error| {
            let over_limit = std::error::Error::source(&error)
                .is_some_and(|source| source.is::<LengthLimitError>());
            if over_limit {
                too_large(MAX_MESSAGE_BYTES + 1)
            } else {
                ApiError::UnreadableMessage(error)
            }
        })
}

fn too_large(bytes: usize) -> ApiError {
    ApiError::MessageTooLarge {
        bytes,
        limit: MAX_MESSAGE_BYTES,
    }
}
