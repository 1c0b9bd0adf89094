//! The HTTP edge: `POST /v1/chat/completions` (recorded, counted, journaled, then answered or
//! given its injected fault), `POST /_faults` (faults armed at run time), `GET /health`, and
//! OpenAI-style error bodies for what is not a chat completion.

use std::fs::File;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::completion::{self, Invalid};
use crate::fault::{Fault, FaultSpec, Faults};
use crate::prompt::Role;

/// The largest request body read (a prompt is bounded by its role's input bound, far below).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// How long a `reset` waits, after the part of its body, before it drops the connection: long
/// enough for the headers and the part to be flushed to the client first.
const RESET_PAUSE: Duration = Duration::from_millis(100);

/// What the server shares between requests.
pub(crate) struct Model {
    /// How many completions were answered.
    answered: AtomicU64,
    /// Where request bodies are appended, when `--record` is given.
    record: Option<Mutex<File>>,
    /// Where one line per chat-completion request is appended, when `--journal` is given.
    journal: Option<Mutex<File>>,
    /// The request counters and the faults waiting for their request.
    faults: Mutex<Faults>,
}

impl Model {
    /// A model that records to `record` and journals to `journal`, when given, and injects
    /// `faults`.
    pub(crate) fn new(record: Option<File>, journal: Option<File>, faults: Faults) -> Self {
        Self {
            answered: AtomicU64::new(0),
            record: record.map(Mutex::new),
            journal: journal.map(Mutex::new),
            faults: Mutex::new(faults),
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
        append(file, &line)
    }

    /// Appends `entry` to the journal, when there is one.
    fn journal(&self, entry: &Value) -> std::io::Result<()> {
        match &self.journal {
            Some(file) => append(file, entry.to_string().as_bytes()),
            None => Ok(()),
        }
    }

    /// Counts a request of `role` and takes the fault it gets, if any.
    fn count(&self, role: Option<Role>) -> (u64, Option<Fault>) {
        // A poisoned lock means a panic while counting, which cannot leave the counters
        // half-changed in a way that matters to a test double: go on with them.
        let mut faults = self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        faults.next(role)
    }
}

/// Appends `line` and a line break to `file`, flushed.
fn append(file: &Mutex<File>, line: &[u8]) -> std::io::Result<()> {
    let mut file = file
        .lock()
        .map_err(|_| std::io::Error::other("the file's lock is poisoned"))?;
    file.write_all(line)?;
    file.write_all(b"\n")?;
    file.flush()
}

/// The routes.
pub(crate) fn router(model: Arc<Model>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/_faults", post(arm_faults))
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "this model serves POST /v1/chat/completions, POST /_faults and GET /health",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(model)
}

#[tracing::instrument(skip_all, fields(bytes = body.len()))]
async fn chat_completions(
    State(model): State<Arc<Model>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let role = parsed.as_ref().ok().and_then(completion::role_of);
    let (n, fault) = model.count(role);
    let (response, applied) = match &parsed {
        Err(err) => answer_refused(&Invalid(format!("the body is not JSON: {err}")), fault),
        Ok(request) => match model.record(&body, request) {
            Ok(()) => answer(&model, request, fault),
            Err(err) => {
                tracing::error!(error = %err, "cannot record the request");
                (
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        "the request could not be recorded",
                    ),
                    None,
                )
            }
        },
    };
    let entry = json!({
        "n": n,
        "role": role.map_or("unknown", Role::name),
        "idempotency_key": headers.get("idempotency-key").and_then(|v| v.to_str().ok()),
        "model": parsed.as_ref().ok().and_then(|r| r.get("model")).and_then(Value::as_str),
        "fault": applied.map(|f| f.to_string()),
        "status": response.status().as_u16(),
    });
    if let Err(err) = model.journal(&entry) {
        tracing::error!(error = %err, "cannot journal the request");
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the request could not be journaled",
        );
    }
    if let Some(fault) = applied {
        tracing::info!(n, role = role.map_or("unknown", Role::name), %fault, "fault injected");
    }
    response
}

/// The answer to a chat-completion request, or the fault that replaces it; and the fault
/// applied.
fn answer(model: &Model, request: &Value, fault: Option<Fault>) -> (Response, Option<Fault>) {
    if let Some(Fault::Status(status)) = fault {
        return (status_fault(status), fault);
    }
    // Numbered when answered, so refused and failed requests leave no gap.
    let number = || model.answered.fetch_add(1, Ordering::SeqCst) + 1;
    let (role, mut answer) = match completion::complete(request, number) {
        Ok(answered) => answered,
        Err(refused) => return answer_refused(&refused, fault),
    };
    tracing::info!(role = role.name(), id = %answer["id"], "answered");
    match fault {
        Some(Fault::Reset) => (reset(answer.to_string().into_bytes()), fault),
        Some(Fault::ZeroUsage) => {
            answer["usage"] =
                json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0});
            ((StatusCode::OK, axum::Json(answer)).into_response(), fault)
        }
        Some(Fault::NoUsage) => {
            if let Some(answer) = answer.as_object_mut() {
                answer.remove("usage");
            }
            ((StatusCode::OK, axum::Json(answer)).into_response(), fault)
        }
        Some(Fault::Status(_)) | None => {
            ((StatusCode::OK, axum::Json(answer)).into_response(), None)
        }
    }
}

/// A refused request's 400, unless its fault replaces it: a status or a reset applies to any
/// request; a usage fault has no answer to change, so the 400 stands.
fn answer_refused(why: &Invalid, fault: Option<Fault>) -> (Response, Option<Fault>) {
    match fault {
        Some(Fault::Status(status)) => (status_fault(status), fault),
        Some(Fault::Reset) => {
            let body = json!({"error": {"message": why.0, "type": "invalid_request_error"}});
            (reset(body.to_string().into_bytes()), fault)
        }
        Some(Fault::ZeroUsage | Fault::NoUsage) | None => (invalid(why), None),
    }
}

/// An injected error status with the body an OpenAI-compatible server sends; a 429 asks for a
/// retry after one second.
fn status_fault(status: u16) -> Response {
    let (code, message) = match status {
        408 => ("timeout", "Request timed out."),
        429 => (
            "rate_limit_exceeded",
            "Rate limit reached. Retry after 1 s.",
        ),
        502 => ("bad_gateway", "Bad gateway: the upstream failed."),
        503 => ("service_unavailable", "The server is overloaded or down."),
        504 => (
            "gateway_timeout",
            "Gateway timeout: the upstream did not answer in time.",
        ),
        _ => (
            "server_error",
            "The server had an error while processing your request.",
        ),
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind_of_error = if status == StatusCode::TOO_MANY_REQUESTS {
        "rate_limit_error"
    } else {
        "server_error"
    };
    let body = json!({"error": {
        "message": format!("{message} (injected by agentroom-testmodel --fault)"),
        "type": kind_of_error,
        "code": code,
    }});
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::TOO_MANY_REQUESTS {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    response
}

/// Status 200, its headers and the first half of `body`; then, after [`RESET_PAUSE`], the
/// body fails and the server drops the connection without finishing it (the chunked body's
/// last chunk is never sent): a real reset in mid-response.
fn reset(body: Vec<u8>) -> Response {
    let mut part = body;
    part.truncate((part.len() / 2).max(1));
    let part =
        futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(part)) });
    let broken = futures_util::stream::once(async {
        tokio::time::sleep(RESET_PAUSE).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "injected fault: reset mid-response",
        ))
    });
    let mut response = Response::new(Body::from_stream(part.chain(broken)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `POST /_faults` `{"faults": ["[ROLE:]N=FAULT", ...]}`: arms every fault, counted from now,
/// or none when one is bad (400). Answers the faults armed and every one still pending.
async fn arm_faults(State(model): State<Arc<Model>>, body: Bytes) -> Response {
    const SHAPE: &str = "the body must be {\"faults\": [\"[ROLE:]N=FAULT\", ...]}";
    let specs = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
        v.get("faults")?
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
    });
    let Some(specs) = specs else {
        return error(StatusCode::BAD_REQUEST, "invalid_request_error", SHAPE);
    };
    let specs = match specs
        .iter()
        .map(|s| s.parse::<FaultSpec>())
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(specs) => specs,
        Err(why) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", &why),
    };
    let pending = {
        let mut faults = model
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        faults.arm(&specs);
        faults.pending()
    };
    let names = |specs: &[FaultSpec]| specs.iter().map(ToString::to_string).collect::<Vec<_>>();
    tracing::info!(armed = ?names(&specs), "faults armed");
    (
        StatusCode::OK,
        axum::Json(json!({"armed": names(&specs), "pending": names(&pending)})),
    )
        .into_response()
}

fn invalid(why: &Invalid) -> Response {
    tracing::warn!(reason = %why.0, "refused");
    error(StatusCode::BAD_REQUEST, "invalid_request_error", &why.0)
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": kind}});
    (status, axum::Json(body)).into_response()
}
