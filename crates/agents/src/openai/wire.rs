//! The chat-completions wire JSON (OpenAI-compatible) and what an HTTP status means for a call
//! that reached the server: ran, may be sent again, refused, or unknown.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Message<'a> {
    pub(crate) role: &'static str,
    pub(crate) content: &'a str,
}

/// `response_format`: JSON object mode, so whatever format an owner asked for in the message,
/// the reply is one JSON object the envelope parser can read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResponseFormat {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
}

/// The request body of `POST {base_url}/chat/completions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: [Message<'a>; 2],
    /// The role's output bound (B6): the provider never returns more.
    pub(crate) max_tokens: u64,
    pub(crate) response_format: ResponseFormat,
}

/// The parts of a chat completion this adapter reads; everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChatResponse {
    #[serde(default)]
    pub(crate) choices: Vec<Choice>,
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Choice {
    pub(crate) message: AssistantMessage,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct AssistantMessage {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) refusal: Option<String>,
}

/// Token usage as reported; a field may be missing on some compatible servers.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct Usage {
    #[serde(default)]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u64>,
}

/// An error body: `{"error": {"message": .., "type": .., "code": ..}}`.
#[derive(Debug, Clone, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Clone, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

/// The provider's own words from an error body, short enough for a log line.
pub(crate) fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => {
            let mut parts = Vec::new();
            if let Some(kind) = error.kind {
                parts.push(kind);
            }
            if let Some(code) = error.code.filter(|c| !c.is_null()) {
                parts.push(match code {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                });
            }
            let message = error.message.unwrap_or_default();
            if parts.is_empty() {
                clip(&message)
            } else {
                clip(&format!("{message} ({})", parts.join(", ")))
            }
        }
        Err(_) => clip(String::from_utf8_lossy(body).trim()),
    }
}

/// At most 300 characters of `text`, marked when cut.
pub(crate) fn clip(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// What a non-success status says about the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StatusMeaning {
    /// The server did not take the request (rate limited): it may be sent again.
    NotTaken { retry_after: Option<Duration> },
    /// The server refused the request without running it: sending it again cannot help.
    Refused,
    /// The request may have run: never sent again blindly (D2).
    Unknown,
}

/// Classifies a status other than 2xx, money-safe (issue 16): only what proves the request
/// was not run may be sent again. The whole table, as the operator docs give it:
///
/// | status | meaning | why |
/// | --- | --- | --- |
/// | 429 | not taken (after `retry-after`) | rate limited before the work |
/// | 408, 502, 503, 504 | unknown: uncertain, never resent | a proxy answers these when *its* upstream timed out or failed, after the work may have run |
/// | 409 | unknown | another request with this idempotency key |
/// | other 5xx | unknown | a server error, after the work may have run |
/// | other 3xx, 4xx | refused | the request was not accepted (400, 401, 403, 404, 413, 422, ...) |
pub(crate) fn meaning(status: StatusCode, headers: &HeaderMap) -> StatusMeaning {
    match status.as_u16() {
        429 => StatusMeaning::NotTaken {
            retry_after: retry_after(headers),
        },
        408 | 409 | 500..=599 => StatusMeaning::Unknown,
        _ => StatusMeaning::Refused,
    }
}

/// The delay a response asks for: `retry-after-ms` (OpenAI's, milliseconds) or `Retry-After`
/// in seconds. An HTTP-date is not read (the runner then backs off on its own).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1_000.0).ok();
    }
    number("retry-after").and_then(|s| Duration::try_from_secs_f64(s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn b3_d2_statuses_say_whether_the_request_ran_and_only_a_429_is_resent() {
        let none = HeaderMap::new();
        let later = headers(&[("retry-after", "3")]);
        for (status, headers, expected) in [
            (429, &none, StatusMeaning::NotTaken { retry_after: None }),
            (
                429,
                &later,
                StatusMeaning::NotTaken {
                    retry_after: Some(Duration::from_secs(3)),
                },
            ),
            // A proxy's timeouts and gateway errors may follow work that ran upstream.
            (408, &none, StatusMeaning::Unknown),
            (408, &later, StatusMeaning::Unknown),
            (503, &later, StatusMeaning::Unknown),
            (503, &none, StatusMeaning::Unknown),
            (500, &none, StatusMeaning::Unknown),
            (502, &none, StatusMeaning::Unknown),
            (504, &none, StatusMeaning::Unknown),
            (409, &none, StatusMeaning::Unknown),
            (400, &none, StatusMeaning::Refused),
            (401, &none, StatusMeaning::Refused),
            (403, &none, StatusMeaning::Refused),
            (404, &none, StatusMeaning::Refused),
            (422, &none, StatusMeaning::Refused),
            (301, &none, StatusMeaning::Refused),
        ] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(meaning(status, headers), expected, "{status}");
        }
    }

    #[test]
    fn retry_after_in_milliseconds_wins_over_seconds() {
        let both = headers(&[("retry-after-ms", "250"), ("retry-after", "1")]);
        assert_eq!(retry_after(&both), Some(Duration::from_millis(250)));
        let date = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(retry_after(&date), None);
        let negative = headers(&[("retry-after", "-1")]);
        assert_eq!(retry_after(&negative), None);
    }

    #[test]
    fn error_bodies_are_read_in_the_providers_words() {
        let body = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(
            error_message(body),
            "Incorrect API key provided (invalid_request_error, invalid_api_key)"
        );
        assert_eq!(error_message(b"  Bad Gateway \n"), "Bad Gateway");
        assert_eq!(
            error_message("é".repeat(400).as_bytes()).chars().count(),
            301
        );
    }
}
