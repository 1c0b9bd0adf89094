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
    /// Above the limit.
    TooLarge,
    /// The body did not arrive whole within the body-read timeout (`listener`).
    TimedOut {
        /// The timeout.
        after: std::time::Duration,
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
    if declared_above(headers, limit).is_some() {
        return Err(ReadError::TooLarge);
    }
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let over_limit =
            std::error::Error::source(&error).is_some_and(|source| source.is::<LengthLimitError>());
        if over_limit {
            ReadError::TooLarge
        } else if let Some(after) = crate::listener::timed_out(&error) {
            ReadError::TimedOut { after }
        } else {
            ReadError::Unreadable(error)
        }
    })
}

/// How much of an oversized A2E message is read to find its `req_id` (a message's envelope
/// comes first; its payload, which may be what is large, after).
const REQ_ID_PREFIX: usize = 64 * 1024;

/// One A2E message, whatever its content type (the SDK sends `text/plain`). A body above
/// [`MAX_MESSAGE_BYTES`] is `ApiError::MessageTooLarge`, carrying the message's `req_id` when
/// its first [`REQ_ID_PREFIX`] bytes name one, so the answer completes the client's call.
pub(crate) async fn read_message(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared = declared_above(headers, MAX_MESSAGE_BYTES);
    // Declared too large: only a prefix is read, for the req_id. Else up to one byte more
    // than the limit, so a message of exactly the limit is taken.
    let keep = if declared.is_some() {
        REQ_ID_PREFIX
    } else {
        MAX_MESSAGE_BYTES
    };
    let mut body = body;
    let mut kept: Vec<u8> = Vec::new();
    let mut seen: usize = 0;
    let too_large = |seen: usize, kept: &[u8]| ApiError::MessageTooLarge {
        bytes: declared.unwrap_or(0).max(seen),
        limit: MAX_MESSAGE_BYTES,
        req_id: req_id_in(kept),
    };
    loop {
        if seen > MAX_MESSAGE_BYTES || (declared.is_some() && kept.len() >= keep) {
            return Err(too_large(seen, &kept));
        }
        match http_body_util::BodyExt::frame(&mut body).await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    seen = seen.saturating_add(data.len());
                    let room = keep.saturating_sub(kept.len()).min(data.len());
                    kept.extend_from_slice(&data[..room]);
                }
            }
            Some(Err(error)) => {
                let error = axum::Error::new(error);
                if declared.is_some() {
                    // What could be read of an oversized message is enough for its answer.
                    return Err(too_large(seen, &kept));
                }
                return Err(match crate::listener::timed_out(&error) {
                    Some(after) => ApiError::BodyTimeout { after },
                    None => ApiError::UnreadableMessage(error),
                });
            }
        }
    }
    if declared.is_some() {
        return Err(too_large(seen, &kept));
    }
    Ok(Bytes::from(kept))
}

/// The request id an A2E message's text names (its top-level `id`, which the reply carries
/// as `req_id`), found by a bounded scan of `prefix`, the message's first bytes (it may be
/// cut short, so it is not parsed whole): a key `"id"` of the outermost object whose value
/// is a whole JSON string of at most `MAX_LABEL_BYTES`. Keys of nested objects are skipped.
pub(crate) fn req_id_in(prefix: &[u8]) -> Option<String> {
    let scan = &prefix[..prefix.len().min(REQ_ID_PREFIX)];
    let mut depth = 0usize;
    let mut at = 0;
    while at < scan.len() {
        match scan[at] {
            b'"' => {
                let end = at + string_end(&scan[at..])?;
                if depth == 1 && &scan[at..=end] == b"\"id\"" {
                    let rest = skip_space(&scan[end + 1..]);
                    if let Some(value) = rest.strip_prefix(b":") {
                        let value = skip_space(value);
                        if value.first() != Some(&b'"') {
                            return None;
                        }
                        let close = string_end(value)?;
                        return serde_json::from_slice::<String>(&value[..=close])
                            .ok()
                            .filter(|id| id.len() <= agentroom_planning::limits::MAX_LABEL_BYTES);
                    }
                }
                at = end + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// Where the JSON string opening at `text[0]` closes (its last quote), if it does in `text`.
fn string_end(text: &[u8]) -> Option<usize> {
    let mut escaped = false;
    for (i, &b) in text.iter().enumerate().skip(1) {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            return Some(i);
        }
    }
    None
}

fn skip_space(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// The A2E `schema_violation` line answering a message of at least `bytes` bytes, with the
/// message's `req_id` when it was recovered (else `""`, as the A2E contract allows).
pub(crate) fn too_large_line(
    session: &agentroom_planning::Session,
    bytes: usize,
    req_id: Option<&str>,
) -> String {
    let mut error = agentroom_planning::wire::ProtocolError::too_large(bytes);
    if let Some(req_id) = req_id {
        req_id.clone_into(&mut error.req_id);
    }
    match session.answer_error(error) {
        agentroom_planning::Step::Reply(line) => line,
        // `answer_error` always replies; should that change, the plain answer still holds.
        agentroom_planning::Step::Silent | agentroom_planning::Step::Close => {
            session.too_large(bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_id_of_a_message_prefix_is_found_by_a_bounded_scan() {
        assert_eq!(
            req_id_in(br#"{"type":"ping", "id" : "r-1","pad":"xx"#).as_deref(),
            Some("r-1")
        );
        // A nested `id`, and "id" as a value, are not the request's.
        assert_eq!(
            req_id_in(br#"{"task":{"id":"t1"},"note":"id","list":["id"],"id":"a\"b"}"#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(req_id_in(br#"{"task":{"id":"t1"},"pad":"xxxx"#), None);
        assert_eq!(req_id_in(br#"{"type":"ping","task_id":"t","pad":"x"#), None);
        assert_eq!(req_id_in(br#"{"id": 7}"#), None);
        // Cut inside the string: nothing, rather than a wrong id.
        assert_eq!(req_id_in(br#"{"id":"abc"#), None);
    }
}
