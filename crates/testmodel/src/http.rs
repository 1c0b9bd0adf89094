//! The HTTP edge: `POST /v1/chat/completions` (recorded, then answered), `GET /health`, and
//! OpenAI-style error bodies for what is not a chat completion.

use std::fs::File;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::completion::{self, Invalid};

/// The largest request body read (a prompt is bounded by its role's input bound, far below).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// What the server shares between requests.
pub(crate) struct Model {
    /// How many completions were answered.
    answered: AtomicU64,
    /// Where request bodies are appended, when `--record` is given.
    record: Option<Mutex<File>>,
}

impl Model {
    /// A model that records to `record`, when given.
    pub(crate) fn new(record: Option<File>) -> Self {
        Self {
            answered: AtomicU64::new(0),
            record: record.map(Mutex::new),
        }
    }

    /// Appends `body` as one line: as received, or re-serialized on one line when it spans
    /// several.
    fn record(&self, body: &[u8], parsed: &Value) -> std::io::Result<()> {
        let Some(file) = &self.record else {
            return Ok(());
        };
        let line = if body.contains(&b'\n') || body.contains(&b'\r') {
            parsed.to_string().into_bytes()
        } else {
            body.to_vec()
        };
        let mut file = file
            .lock()
            .map_err(|_| std::io::Error::other("the record file's lock is poisoned"))?;
        file.write_all(&line)?;
        file.write_all(b"\n")?;
        file.flush()
    }
}

/// The routes.
pub(crate) fn router(model: Arc<Model>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "this model serves POST /v1/chat/completions and GET /health",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(model)
}

#[tracing::instrument(skip_all, fields(bytes = body.len()))]
async fn chat_completions(State(model): State<Arc<Model>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => {
            return invalid(&Invalid(format!("the body is not JSON: {err}")));
        }
    };
    if let Err(err) = model.record(&body, &request) {
        tracing::error!(error = %err, "cannot record the request");
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the request could not be recorded",
        );
    }
    // Numbered when answered, so refused requests leave no gap.
    let number = || model.answered.fetch_add(1, Ordering::SeqCst) + 1;
    match completion::complete(&request, number) {
        Ok((role, answer)) => {
            tracing::info!(role = role.name(), id = %answer["id"], "answered");
            (StatusCode::OK, axum::Json(answer)).into_response()
        }
        Err(refused) => invalid(&refused),
    }
}

fn invalid(why: &Invalid) -> Response {
    tracing::warn!(reason = %why.0, "refused");
    error(StatusCode::BAD_REQUEST, "invalid_request_error", &why.0)
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind}});
    (status, axum::Json(body)).into_response()
}
