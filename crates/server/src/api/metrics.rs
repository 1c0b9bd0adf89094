//! `GET /metrics`: Prometheus text exposition of what an operator watches: REST responses by
//! status, decisions committed in this process by verdict and rule (a stale proposal's O10,
//! a refused completion's T2, …), provider calls in the store by role and status (uncertain
//! and dead-lettered ones included), and the budget summed over the Rooms this process has
//! decided for (limit, reserved, uncertain, spent). It carries no Room names, principals or
//! ids; scrape it from inside the operator's network.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use agentroom_ports::{OperationFilter, OperationStatus};
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

const STATUSES: [OperationStatus; 6] = [
    OperationStatus::InFlight,
    OperationStatus::Receipted,
    OperationStatus::Applied,
    OperationStatus::Uncertain,
    OperationStatus::DeadLetter,
    OperationStatus::Resolved,
];

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

    family(
        &mut out,
        "agentroom_operations",
        "gauge",
        "Provider calls in the store by role and status (uncertain and dead_letter need an operator).",
    );
    for status in STATUSES {
        let mut by_role: BTreeMap<&'static str, u64> = BTreeMap::new();
        for record in api
            .rooms
            .operations(OperationFilter::Status(status))
            .await?
        {
            *by_role.entry(record.request.role.as_str()).or_insert(0) += 1;
        }
        for (role, n) in by_role {
            line(
                &mut out,
                "agentroom_operations",
                &[("role", role), ("status", status.as_str())],
                n,
            );
        }
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
