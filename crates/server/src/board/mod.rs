//! The web board at `/` (issue 7): one HTML page, its script and its style sheet, embedded in
//! the binary (no build step, nothing from a CDN). The page reads the REST API under
//! `/v1/rooms/{room}` with a bearer token that the user pastes (kept in the tab's
//! `sessionStorage`, sent as `Authorization: Bearer`; no cookies) and follows the
//! notification stream with `fetch` and a stream reader, resuming with `Last-Event-ID`.
//!
//! Every asset is sent with a strict Content-Security-Policy (scripts, styles and fetches
//! from this origin only, no inline script, no frames, no forms posting anywhere),
//! `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and
//! `Cache-Control: no-store`. The script inserts every server-supplied string as text
//! (`textContent` and text nodes), never as HTML.
//!
//! | endpoint | answer |
//! | --- | --- |
//! | `GET /` | the page (`text/html`) |
//! | `GET /board.js` | its script (`text/javascript`) |
//! | `GET /board.css` | its style sheet (`text/css`) |

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The page.
pub const INDEX_HTML: &str = include_str!("../../assets/index.html");
/// Its script.
pub const BOARD_JS: &str = include_str!("../../assets/board.js");
/// Its style sheet.
pub const BOARD_CSS: &str = include_str!("../../assets/board.css");

/// The Content-Security-Policy of every board response: nothing but this origin's script,
/// style sheet and API; no inline script or style element, no plugins, frames or base URI.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The board's routes, to merge into the host's router (any state: the board reads only the
/// REST API, from the browser).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/board.js",
            get(|| async { asset("text/javascript; charset=utf-8", BOARD_JS) }),
        )
        .route(
            "/board.css",
            get(|| async { asset("text/css; charset=utf-8", BOARD_CSS) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, HeaderValue); 6] = [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
        ),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page loads its script from this origin and carries no inline script or handler,
    /// which the policy would block anyway.
    #[test]
    fn the_page_has_no_inline_script_and_loads_the_board_script() {
        assert!(INDEX_HTML.contains(r#"<script src="/board.js" defer></script>"#));
        assert_eq!(INDEX_HTML.matches("<script").count(), 1);
        assert!(!INDEX_HTML.to_ascii_lowercase().contains(" onclick="));
        assert!(!INDEX_HTML.to_ascii_lowercase().contains(" onload="));
    }

    /// The board writes exactly two things (issue 18): the owner's correction of an
    /// objective, as an `owner_correction` event (O14, R6), and a reviewer's human review of
    /// the report awaiting review (R1, R2). Both go through the one `send`, with the
    /// session's token and an Idempotency-Key; forms never navigate (`form-action 'none'`,
    /// and each submit is prevented and sent by the script). Corrections are read from
    /// their route.
    #[test]
    fn the_board_writes_only_corrections_and_reviews() {
        assert!(BOARD_JS.contains("/corrections"));
        assert!(BOARD_JS.contains("renderCorrections(corrections)"));
        assert_eq!(BOARD_JS.matches("method:").count(), 1, "one writer: send");
        assert!(BOARD_JS.contains("method: \"POST\""));
        assert!(BOARD_JS.contains("\"Idempotency-Key\": key"));
        assert!(
            BOARD_JS.contains("key = key || freshKey()"),
            "one key until answered"
        );
        let sends: Vec<&str> = BOARD_JS
            .match_indices("await send(")
            .map(|(at, _)| BOARD_JS[at..].split(';').next().unwrap_or_default())
            .collect();
        assert_eq!(sends.len(), 2, "{sends:?}");
        assert!(sends[0].contains("\"/events\""), "{sends:?}");
        assert!(BOARD_JS.contains("kind: \"owner_correction\""));
        assert!(sends[1].contains("/reviews`"), "{sends:?}");
        assert!(BOARD_JS.contains("event.preventDefault()"));
        assert!(CONTENT_SECURITY_POLICY_VALUE.contains("form-action 'none'"));
    }

    /// The script never hands data to an HTML parser.
    #[test]
    fn the_script_never_parses_html() {
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!BOARD_JS.contains(sink), "board.js uses {sink}");
        }
        assert!(!BOARD_JS.contains("document.cookie"), "no cookie auth");
    }
}
