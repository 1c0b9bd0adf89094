//! The REST API under `/v1/rooms/{room}/…` with bearer tokens and roles (issue 7), its
//! OpenAPI document at `/v1/openapi.json`, and the notification stream.
//!
//! Every route is one row of [`table`]: method, path, the permission it needs, what it does,
//! and its handler. The router is built from that table and nothing else, so [`routes`]
//! (the table without handlers) is exactly what the router serves; the role × endpoint matrix
//! test compares it with its literal matrix, and the OpenAPI document is generated from it.
//!
//! Authentication and authorization are one layer on every route ([`auth::guard`]): a
//! missing, malformed, unknown, expired or revoked bearer token is a 401 with
//! `WWW-Authenticate: Bearer`; a token for another Room is a 404 (its Room is the only one it
//! can see); a principal none of whose current roles in the Room (its membership in the Room
//! state) holds the route's permission in the Room's access policy is a 403 naming the
//! permission. The coordinator and the domain check again at every effect sink (T3). There
//! is no cookie authentication.
//!
//! Every response carries `x-request-id`: the client's when it sent a sane one (1 to 64 of
//! `A-Z a-z 0-9 . _ -`), a fresh one otherwise; it is in the request's tracing span too.

mod assignments;
pub(crate) mod auth;
mod extract;
mod feed;
mod handlers;
mod members;
mod memory;
mod metrics;
mod openapi;
mod redactions;

use std::sync::Arc;

use agentroom_coordinator::Coordinator;
use agentroom_domain::room::Permission;
use agentroom_planning::PlanningService;
use axum::Router;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};

pub(crate) use auth::{authorize, authorize_token, bearer};
pub use feed::Feed;

/// The largest JSON body the REST API reads; above it a request is a 413 and nothing changes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What the REST API runs on.
#[derive(Clone)]
pub struct Api {
    /// The application service: every use case and Room-scoped query (its clock and
    /// tokens too).
    pub rooms: Coordinator,
    /// The planning messages' service (`POST /v1/rooms/{room}/planning`).
    pub planning: Arc<PlanningService>,
    /// The notification stream and decision timeline: also give it to the coordinator as
    /// its [`agentroom_ports::Notifier`], so delivered notifications reach the streams.
    pub feed: Arc<Feed>,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token (the OpenAPI document).
    Public,
    /// A member of the Room one of whose roles holds this permission.
    Needs(Permission),
}

/// One route of the API, without its handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// The method.
    pub method: Method,
    /// The path, with `{room}`-style parameters.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// What it does, for people and the OpenAPI document.
    pub summary: &'static str,
}

/// Every route the router serves, in table order.
pub fn routes() -> Vec<RouteSpec> {
    table().into_iter().map(|(spec, _)| spec).collect()
}

type State = Arc<Api>;

fn row(
    method: Method,
    path: &'static str,
    access: Access,
    summary: &'static str,
    handler: MethodRouter<State>,
) -> (RouteSpec, MethodRouter<State>) {
    (
        RouteSpec {
            method,
            path,
            access,
            summary,
        },
        handler,
    )
}

/// The one table of routes.
fn table() -> Vec<(RouteSpec, MethodRouter<State>)> {
    use Access::{Needs, Public};
    use Permission as P;
    use handlers as h;
    vec![
        row(
            Method::GET,
            "/v1/openapi.json",
            Public,
            "This OpenAPI document.",
            on(MethodFilter::GET, openapi::document),
        ),
        row(
            Method::GET,
            "/metrics",
            Needs(P::OperationResolve),
            "Prometheus metrics of this process (for a token that may read operations): \
             responses, decisions by rule, calls by role and outcome, open operations, budget.",
            on(MethodFilter::GET, metrics::metrics),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}",
            Needs(P::ObjectiveRead),
            "The Room: its budget balances and objectives in brief.",
            on(MethodFilter::GET, h::room),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/members",
            Needs(P::ObjectiveRead),
            "The Room's members and their roles (paginated).",
            on(MethodFilter::GET, h::members),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/members",
            Needs(P::MembershipManage),
            "Add a member with its roles (T6), and its first bearer token when `issue_token` \
             is true: the token's text is in the answer, once.",
            on(MethodFilter::POST, members::add),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/members/{principal}/roles",
            Needs(P::MembershipManage),
            "Change a member's roles in one decision (T6): its open calls in a role it loses \
             abort, and what they return is charged and held, never applied.",
            on(MethodFilter::POST, members::change_roles),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/members/{principal}/revoke",
            Needs(P::MembershipManage),
            "Revoke a member (T6): every role at once; its open calls abort (charged and held, \
             never applied), its assignments are withdrawn, and its tokens in the Room are \
             revoked (its next request is a 401, also after it is added again). Should revoking \
             the tokens fail after the revocation committed, a 503 `tokens_not_revoked` says so \
             and the same request with the same Idempotency-Key finishes it.",
            on(MethodFilter::POST, members::revoke),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/memory",
            Needs(P::ObjectiveRead),
            "The Room's memory (M1), in the order added (paginated): each entry's current text, \
             what it came from, who added it and when, every version of its text, and its \
             retraction (a retracted entry stays listed and never reaches a model).",
            on(MethodFilter::GET, memory::list),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/memory",
            Needs(P::MemoryManage),
            "Add a memory entry with its provenance (M1): an owner message or contribution of \
             the Room, or an external source's url and content digest. Current entries reach \
             the reasoner with their provenance (C1).",
            on(MethodFilter::POST, memory::add),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/memory/{entry}/correct",
            Needs(P::MemoryManage),
            "Correct a memory entry's text (M1): the earlier texts stay in its history.",
            on(MethodFilter::POST, memory::correct),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/memory/{entry}/retract",
            Needs(P::MemoryManage),
            "Retract a memory entry (M1): it stays, with who retracted it, when and why, and \
             never reaches a model again.",
            on(MethodFilter::POST, memory::retract),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/redactions",
            Needs(P::ObjectiveRead),
            "The Room's redaction records, oldest first (paginated): what was redacted (an \
             artifact's content by digest, or a memory entry), by whom, when, why, and the \
             digest of what was removed.",
            on(MethodFilter::GET, redactions::list),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/redactions",
            Needs(P::ContentRedact),
            "Redact an artifact's content (by its digest) or a memory entry that holds a secret \
             or personal data: its content leaves the store and the Room's stored history, a \
             redaction record takes its place, and the history still replays. A redacted \
             memory entry never reaches a model again.",
            on(MethodFilter::POST, redactions::redact),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/contents/{digest}",
            Needs(P::ObjectiveRead),
            "Content of the Room by its digest (a contribution's body, a source's excerpt, its \
             outputs) that a contribution the caller may read names; 410 with the redaction \
             record once it was redacted.",
            on(MethodFilter::GET, redactions::content),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/events",
            Needs(P::EventPost),
            "Post an event; its author is the token's principal. Persisted, then accepted by id.",
            on(MethodFilter::POST, h::post_event),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/quotes",
            Needs(P::BudgetRaise),
            "Bring the Room's per-role quotes up to the models this host serves (B6): calls \
             that waited for it are admitted. Recorded as a decision with each role's model.",
            on(MethodFilter::POST, h::update_quotes),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/messages/{event}/retry",
            Needs(P::ObjectiveControl),
            "Retry a pending owner message whose provider failed it (it waits for a person, \
             naming the error); its interpretation is issued again.",
            on(MethodFilter::POST, h::retry_message),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives",
            Needs(P::ObjectiveRead),
            "The objectives (paginated).",
            on(MethodFilter::GET, h::objectives),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives/{objective}",
            Needs(P::ObjectiveRead),
            "An objective with its criteria and its current plan's board.",
            on(MethodFilter::GET, h::objective),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives/{objective}/plans",
            Needs(P::ObjectiveRead),
            "The objective's plan versions, each with its diff from its predecessor (paginated).",
            on(MethodFilter::GET, h::plans),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives/{objective}/decisions",
            Needs(P::ObjectiveRead),
            "The objective's decision log, the rule behind each rejection (paginated).",
            on(MethodFilter::GET, h::decisions),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/objectives/{objective}/control",
            Needs(P::ObjectiveControl),
            "Pause, resume or cancel the objective (D3).",
            on(MethodFilter::POST, h::control),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/objectives/{objective}/tasks",
            Needs(P::TaskUpdateOwn),
            "Update one's own task: acknowledge it in progress, or confirm it done with its contribution (T2).",
            on(MethodFilter::POST, h::update_task),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives/{objective}/corrections",
            Needs(P::ObjectiveRead),
            "The owner's corrections of the objective, oldest first (O14): text, the criteria \
             each froze, the plan version each led to.",
            on(MethodFilter::GET, h::corrections),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            Needs(P::ReportRead),
            "The objective's reports and reviews: version, source set, verdicts, evidence, reviewer.",
            on(MethodFilter::GET, h::reviews),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            Needs(P::ReviewRecord),
            "Record a human review of the report awaiting review (R1, R2).",
            on(MethodFilter::POST, h::record_review),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/contributions/{contribution}",
            Needs(P::ObjectiveRead),
            "A contribution: its artifacts, sources, author, task and digest; overseers read every one, a specialist its own and those its tasks cite.",
            on(MethodFilter::GET, h::contribution),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/assignments",
            Needs(P::TaskUpdateOwn),
            "The hosted specialist work waiting for the caller: each call's task, inputs, citable contributions and reservation (paginated).",
            on(MethodFilter::GET, assignments::list),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/assignments/{operation}/result",
            Needs(P::TaskUpdateOwn),
            "Submit the result of one's own assignment once: a contribution or a failure, with its usage in micros; recorded before the call uses it (T2, D2).",
            on(MethodFilter::POST, assignments::submit),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/assignments/{operation}/wait",
            Needs(P::TaskUpdateOwn),
            "Say that one's own assignment's task waits on something outside the Room (O12): \
             it shows waiting; other ready work and a ready review go ahead.",
            on(MethodFilter::POST, assignments::wait),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/assignments/{operation}/receipt",
            Needs(P::TaskUpdateOwn),
            "Record a receipt about one's own assignment's objective (O13): the reasoner may \
             take it into account; for a completed or canceled objective it is consumed \
             without a model call.",
            on(MethodFilter::POST, assignments::receipt),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/late-results",
            Needs(P::LateResultDecide),
            "Results held after a control change, awaiting readmission or discard (D4).",
            on(MethodFilter::GET, h::late_results),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/late-results/{operation}",
            Needs(P::LateResultDecide),
            "Readmit or discard a held result (D4).",
            on(MethodFilter::POST, h::decide_late_result),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/budget",
            Needs(P::BudgetRead),
            "The budget: balances, overrun, cost by objective, role, principal and model, ledger (paginated).",
            on(MethodFilter::GET, h::budget),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/budget/raise",
            Needs(P::BudgetRaise),
            "Raise the limit (B4).",
            on(MethodFilter::POST, h::raise_limit),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/budget/acknowledge",
            Needs(P::BudgetAcknowledge),
            "Acknowledge an overrun (B5).",
            on(MethodFilter::POST, h::acknowledge_overrun),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/operations",
            Needs(P::OperationResolve),
            "Uncertain and dead-lettered operations of the Room (paginated).",
            on(MethodFilter::GET, h::operations),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/operations/{operation}/resolve",
            Needs(P::OperationResolve),
            "Record what an operator confirmed about an uncertain or dead-lettered operation (D2).",
            on(MethodFilter::POST, h::resolve_operation),
        ),
        row(
            Method::POST,
            "/v1/rooms/{room}/planning",
            Needs(P::PlanningUse),
            "One planning message (A2E) in, its reply out; unknown fields are tolerated.",
            on(MethodFilter::POST, h::planning),
        ),
        row(
            Method::GET,
            "/v1/rooms/{room}/notifications",
            Needs(P::ObjectiveRead),
            "Notifications for the caller as Server-Sent Events; resumes after Last-Event-ID.",
            on(MethodFilter::GET, feed::stream),
        ),
    ]
}

/// The REST API's router: every route of [`routes`], each behind the bearer-token guard
/// (except [`Access::Public`] ones), all with request ids. Merge it into the host's router
/// (it sets no fallback). Call it inside a Tokio runtime: it starts the task that feeds the
/// decision timeline from the coordinator.
pub fn router(api: Api) -> Router {
    let api = Arc::new(api);
    feed::follow(&api);
    let mut router = Router::new();
    for (spec, handler) in table() {
        let handler = match spec.access {
            Access::Public => handler,
            Access::Needs(permission) => handler.route_layer(axum::middleware::from_fn_with_state(
                auth::Guard {
                    api: Arc::clone(&api),
                    permission,
                },
                auth::guard,
            )),
        };
        router = router.route(spec.path, handler);
    }
    let counters = Arc::new(metrics::Metrics::default());
    router
        .with_state(api)
        .layer(axum::Extension(Arc::clone(&counters)))
        .layer(axum::middleware::from_fn_with_state(
            counters,
            metrics::count,
        ))
        .layer(axum::middleware::from_fn(auth::request_id))
}

/// Gives every response of `router` an `x-request-id` (the client's when sane, a fresh one
/// otherwise) and runs each request in a span carrying it: for the host's other routes (the
/// A2E transport), which [`router`] does not cover.
pub fn with_request_ids<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router.layer(axum::middleware::from_fn(auth::request_id))
}
