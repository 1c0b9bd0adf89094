//! `GET /metrics`: Prometheus text exposition of what an operator watches: REST responses by
//! status, decisions committed in this process by verdict and rule (a stale proposal's O10,
//! a refused completion's T2, …), the calls this process reserved by role and the call
//! outcomes it decided, the open operations of the Rooms it decides for by role and state
//! (uncertain ones need an operator), and the budget summed over those Rooms (limit,
//! reserved, uncertain, spent). It carries no Room names, principals or ids.
//!
//! It is not public: it needs a token whose principal may read operations
//! (`operation.resolve`). A scrape reads counters kept as decisions are committed and each
//! Room's live state (which holds open work only), never the store's operations.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_domain::state::OperationState;
use axum::Extension;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::State as ApiState;
use crate::error::ApiError;

/// Counters kept by the router itself.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    responses: Mutex<BTreeMap<u16, u64>>,
}

impl Metrics {
    fn count(&self, status: u16) {
        let mut responses = self
            .responses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *responses.entry(status).or_insert(0) += 1;
    }
}

/// Counts every response by status.
pub(crate) async fn count(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    metrics.count(response.status().as_u16());
    response
}

/// `GET /metrics`.
pub(crate) async fn metrics(
    State(api): State<ApiState>,
    Extension(metrics): Extension<Arc<Metrics>>,
) -> Result<Response, ApiError> {
    let mut out = String::new();
    let responses = metrics
        .responses
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    family(
        &mut out,
        "agentroom_http_responses_total",
        "counter",
        "REST responses by status code.",
    );
    for (status, n) in responses {
        line(
            &mut out,
            "agentroom_http_responses_total",
            &[("code", &status.to_string())],
            n,
        );
    }

    let mut decisions: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut budget: BTreeMap<&str, i64> = BTreeMap::new();
    let mut open: BTreeMap<(&'static str, &'static str), u64> = BTreeMap::new();
    for room in api.feed.rooms() {
        for (key, n) in api.feed.decisions(&room) {
            *decisions.entry(key).or_insert(0) += n;
        }
        if let Ok(stored) = api.rooms.room(&room).await {
            let balances = stored.state.ledger().balances();
            for (part, micros) in [
                ("limit", balances.limit),
                ("reserved", balances.reserved),
                ("uncertain", balances.uncertain),
                ("spent", balances.spent),
            ] {
                let sum = budget.entry(part).or_insert(0);
                *sum = sum.saturating_add(micros.micros());
            }
            for operation in stored.state.operations().values() {
                let state = match operation.state() {
                    OperationState::InFlight => "in_flight",
                    OperationState::CancelRequested => "cancel_requested",
                    OperationState::Uncertain => "uncertain",
                    OperationState::Settled | OperationState::Released => continue,
                };
                *open.entry((operation.role().as_str(), state)).or_insert(0) += 1;
            }
        }
    }
    family(
        &mut out,
        "agentroom_decisions_total",
        "counter",
        "Decision log entries committed by this process, by verdict and rule.",
    );
    for ((verdict, rule), n) in decisions {
        line(
            &mut out,
            "agentroom_decisions_total",
            &[("verdict", &verdict), ("rule", &rule)],
            n,
        );
    }

    let calls = api.feed.calls();
    family(
        &mut out,
        "agentroom_calls_total",
        "counter",
        "Provider calls this process reserved and dispatched, by role.",
    );
    for (role, n) in calls.reserved {
        line(&mut out, "agentroom_calls_total", &[("role", role)], n);
    }
    family(
        &mut out,
        "agentroom_call_outcomes_total",
        "counter",
        "Call outcomes this process decided, by input (call_returned, call_uncertain, call_failed, ...).",
    );
    for (outcome, n) in calls.outcomes {
        line(
            &mut out,
            "agentroom_call_outcomes_total",
            &[("input", outcome)],
            n,
        );
    }
    family(
        &mut out,
        "agentroom_open_operations",
        "gauge",
        "Operations holding a reservation in the Rooms this process decided for, by role and state (uncertain ones need an operator).",
    );
    for ((role, state), n) in open {
        line(
            &mut out,
            "agentroom_open_operations",
            &[("role", role), ("state", state)],
            n,
        );
    }

    family(
        &mut out,
        "agentroom_budget_micros",
        "gauge",
        "Budget in USD micros summed over the Rooms this process decided for, by part.",
    );
    for (part, micros) in budget {
        line(
            &mut out,
            "agentroom_budget_micros",
            &[("part", part)],
            micros,
        );
    }

    let mut response = out.into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn line(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    let labels: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    let _ = writeln!(out, "{name}{{{}}} {value}", labels.join(","));
}
