//! `GET /v1/openapi.json`: the OpenAPI 3.1 document, generated from the route table (paths,
//! methods, parameters, the permission each route needs, bearer security), so it lists
//! exactly what the router serves. Every 2xx and 4xx answer of a route has a schema, derived
//! from the wire types of `agentroom-api-model` (utoipa's `ToSchema`): the success type
//! [`answers`] names for the route, and `ErrorBody` for its errors. So has every JSON body a
//! route reads: a reference to the schema of the request type its handler parses
//! ([`request_body`]), derived from that type, so the two cannot drift apart; the tests hold
//! sample bodies against both the type's serde reading and the schema.

use agentroom_api_model::ErrorBody;
use agentroom_api_model::requests::{
    self, AcknowledgeBody, AddMemberBody, AddMemoryBody, ControlBody, CorrectMemoryBody, EmptyBody,
    LateBody, PostEvent, RaiseBody, ReceiptBody, RedactBody, ResolveBody, RetractMemoryBody,
    ReviewBody, RolesBody, SubmissionBody, TaskUpdateBody, WaitBody,
};
use agentroom_api_model::responses::{
    AssignmentView, Budget, ContentView, ContributionView, Corrections, Decided, Decision,
    LateResult, Member, MemberAdded, MemoryEntryView, ObjectiveBrief, ObjectiveDetail,
    OperationView, PlanVersionView, Recorded, RedactionView, Resolved, Reviews, RoomView,
};
use axum::Json;
use axum::http::Method;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

use super::{Access, RouteSpec, routes};

/// What a route answers when it succeeds.
enum Success {
    /// JSON of one wire type.
    Json(Value),
    /// A page of a wire type: `{"items": [...], "next_cursor": ...}`.
    Page(Value),
    /// Another media type, with its schema.
    Other(&'static str, Value),
}

/// A `$ref` to the component schema of `T`.
fn schema_ref<T: ToSchema>() -> Value {
    component_ref(&T::name())
}

/// A `$ref` to the component schema named `name`.
fn component_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// What a POST route reads as its body.
enum RequestBody {
    /// The JSON of one request type.
    Typed(Typed),
    /// Any JSON object, described in words: the schema.
    FreeForm(Value),
}

/// A request type a handler parses its body into.
struct Typed {
    /// Its component name.
    name: String,
    /// Its schema and those it names, closed as serde reads them.
    schemas: Vec<(String, RefOr<Schema>)>,
    /// Whether the body may be empty (`StrictJsonOrEmpty` reads none as `{}`).
    optional: bool,
    /// Parses a body as the handler does, for the tests to hold the schema against.
    #[cfg(test)]
    parse: fn(Value) -> Result<(), serde_json::Error>,
}

impl Typed {
    /// `T`, read from a body that may be empty or not.
    fn of<T: ToSchema + DeserializeOwned>(optional: bool) -> Self {
        Typed {
            name: T::name().into_owned(),
            schemas: requests::schemas::<T>(),
            optional,
            #[cfg(test)]
            parse: |body| serde_json::from_value::<T>(body).map(drop),
        }
    }
}

/// The body of a handler that extracts `StrictJson<T>`.
fn typed<T: ToSchema + DeserializeOwned>() -> RequestBody {
    RequestBody::Typed(Typed::of::<T>(false))
}

/// The body of a handler that extracts `StrictJsonOrEmpty<T>`.
fn typed_or_empty<T: ToSchema + DeserializeOwned>() -> RequestBody {
    RequestBody::Typed(Typed::of::<T>(true))
}

/// The body each POST route reads: the type its handler extracts (`StrictJson<T>` in
/// `handlers.rs` and `assignments.rs`). Written per path because the route table holds
/// handlers, not their argument types; the tests hold every POST route to having one.
fn request_body(route: &RouteSpec) -> Option<RequestBody> {
    if route.method != Method::POST {
        return None;
    }
    Some(match route.path {
        "/v1/rooms/{room}/events" => typed::<PostEvent>(),
        "/v1/rooms/{room}/memory" => typed::<AddMemoryBody>(),
        "/v1/rooms/{room}/memory/{entry}/correct" => typed::<CorrectMemoryBody>(),
        "/v1/rooms/{room}/memory/{entry}/retract" => typed::<RetractMemoryBody>(),
        "/v1/rooms/{room}/redactions" => typed::<RedactBody>(),
        "/v1/rooms/{room}/members" => typed::<AddMemberBody>(),
        "/v1/rooms/{room}/members/{principal}/roles" => typed::<RolesBody>(),
        "/v1/rooms/{room}/members/{principal}/revoke" => typed_or_empty::<EmptyBody>(),
        "/v1/rooms/{room}/objectives/{objective}/control" => typed::<ControlBody>(),
        "/v1/rooms/{room}/objectives/{objective}/tasks" => typed::<TaskUpdateBody>(),
        "/v1/rooms/{room}/objectives/{objective}/reviews" => typed::<ReviewBody>(),
        "/v1/rooms/{room}/assignments/{operation}/result" => typed::<SubmissionBody>(),
        "/v1/rooms/{room}/assignments/{operation}/wait" => typed::<WaitBody>(),
        "/v1/rooms/{room}/assignments/{operation}/receipt" => typed::<ReceiptBody>(),
        "/v1/rooms/{room}/late-results/{operation}" => typed::<LateBody>(),
        "/v1/rooms/{room}/budget/raise" => typed::<RaiseBody>(),
        "/v1/rooms/{room}/budget/acknowledge" => typed_or_empty::<AcknowledgeBody>(),
        "/v1/rooms/{room}/quotes" | "/v1/rooms/{room}/messages/{event}/retry" => {
            typed_or_empty::<EmptyBody>()
        }
        "/v1/rooms/{room}/operations/{operation}/resolve" => typed::<ResolveBody>(),
        // Any A2E message: the planning service reads its `type` and tolerates unknown
        // fields (the SDK sends extras), so no request type describes it.
        "/v1/rooms/{room}/planning" => RequestBody::FreeForm(json!({
            "type": "object",
            "description": "one A2E planning message (seed 000); unknown fields are tolerated",
            "required": ["type"],
        })),
        _ => return None,
    })
}

/// Every wire type's schema, and the schemas they name, by name.
fn components() -> Map<String, Value> {
    let mut schemas: Vec<(String, RefOr<Schema>)> = Vec::new();
    fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
    add::<ErrorBody>(&mut schemas);
    add::<RoomView>(&mut schemas);
    add::<Member>(&mut schemas);
    add::<MemberAdded>(&mut schemas);
    add::<MemoryEntryView>(&mut schemas);
    add::<RedactionView>(&mut schemas);
    add::<ContentView>(&mut schemas);
    add::<ObjectiveBrief>(&mut schemas);
    add::<ObjectiveDetail>(&mut schemas);
    add::<PlanVersionView>(&mut schemas);
    add::<Decided>(&mut schemas);
    add::<Reviews>(&mut schemas);
    add::<Corrections>(&mut schemas);
    add::<ContributionView>(&mut schemas);
    add::<LateResult>(&mut schemas);
    add::<Budget>(&mut schemas);
    add::<Decision>(&mut schemas);
    add::<OperationView>(&mut schemas);
    add::<Resolved>(&mut schemas);
    add::<AssignmentView>(&mut schemas);
    add::<Recorded>(&mut schemas);
    for route in routes() {
        if let Some(RequestBody::Typed(typed)) = request_body(&route) {
            schemas.extend(typed.schemas);
        }
    }
    schemas
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or(Value::Null)))
        .collect()
}

/// The statuses a route answers (its success first) and what it answers on success.
///
/// Every guarded route may answer 401 (no valid token), 403 (a permission missing) and 404
/// (another Room); every list 400 (a bad `limit` or `cursor`); every JSON body 400 (not
/// JSON, or a key named twice), 408 (not whole within the body-read timeout), 413, 415 and
/// 422; every operator input 409 (refused by a rule, or a Room that
/// kept changing).
fn answers(route: &RouteSpec) -> (u16, Success, Vec<u16>) {
    let list = |t: Value| (200, Success::Page(t), vec![400]);
    let body = |status: u16, t: Value, more: &[u16]| {
        let mut errors = vec![400, 408, 413, 415, 422];
        errors.extend_from_slice(more);
        (status, Success::Json(t), errors)
    };
    let (status, success, mut errors) = match (route.method.clone(), route.path) {
        (Method::GET, "/v1/openapi.json") => (
            200,
            Success::Json(json!({"type": "object", "description": "this document"})),
            vec![],
        ),
        (Method::GET, "/metrics") => (
            200,
            Success::Other("text/plain", json!({"type": "string"})),
            vec![],
        ),
        (Method::GET, "/v1/rooms/{room}") => (200, Success::Json(schema_ref::<RoomView>()), vec![]),
        (Method::GET, "/v1/rooms/{room}/members") => list(schema_ref::<Member>()),
        (Method::GET, "/v1/rooms/{room}/memory") => list(schema_ref::<MemoryEntryView>()),
        (Method::GET, "/v1/rooms/{room}/redactions") => list(schema_ref::<RedactionView>()),
        (Method::GET, "/v1/rooms/{room}/contents/{digest}") => {
            (200, Success::Json(schema_ref::<ContentView>()), vec![410])
        }
        (Method::POST, "/v1/rooms/{room}/events") => body(202, schema_ref::<Decision>(), &[409]),
        (Method::POST, "/v1/rooms/{room}/members") => {
            body(200, schema_ref::<MemberAdded>(), &[409])
        }
        (Method::GET, "/v1/rooms/{room}/objectives") => list(schema_ref::<ObjectiveBrief>()),
        (Method::GET, "/v1/rooms/{room}/objectives/{objective}") => {
            (200, Success::Json(schema_ref::<ObjectiveDetail>()), vec![])
        }
        (Method::GET, "/v1/rooms/{room}/objectives/{objective}/plans") => {
            list(schema_ref::<PlanVersionView>())
        }
        (Method::GET, "/v1/rooms/{room}/objectives/{objective}/decisions") => {
            list(schema_ref::<Decided>())
        }
        (Method::GET, "/v1/rooms/{room}/objectives/{objective}/reviews") => {
            (200, Success::Json(schema_ref::<Reviews>()), vec![])
        }
        (Method::GET, "/v1/rooms/{room}/objectives/{objective}/corrections") => {
            (200, Success::Json(schema_ref::<Corrections>()), vec![])
        }
        (Method::GET, "/v1/rooms/{room}/contributions/{contribution}") => {
            (200, Success::Json(schema_ref::<ContributionView>()), vec![])
        }
        (Method::GET, "/v1/rooms/{room}/assignments") => list(schema_ref::<AssignmentView>()),
        (Method::POST, "/v1/rooms/{room}/assignments/{operation}/result") => {
            body(202, schema_ref::<Recorded>(), &[409])
        }
        // Posted as the caller's events: 409 when the task no longer runs.
        (
            Method::POST,
            "/v1/rooms/{room}/assignments/{operation}/wait"
            | "/v1/rooms/{room}/assignments/{operation}/receipt",
        ) => body(202, schema_ref::<Decision>(), &[409]),
        (Method::GET, "/v1/rooms/{room}/late-results") => list(schema_ref::<LateResult>()),
        (Method::GET, "/v1/rooms/{room}/budget") => {
            (200, Success::Json(schema_ref::<Budget>()), vec![400])
        }
        (Method::GET, "/v1/rooms/{room}/operations") => list(schema_ref::<OperationView>()),
        (Method::POST, "/v1/rooms/{room}/operations/{operation}/resolve") => {
            body(200, schema_ref::<Resolved>(), &[409])
        }
        (Method::POST, "/v1/rooms/{room}/planning") => (
            200,
            Success::Json(json!({
                "type": "object",
                "description": "the A2E reply: a planning reply, a refusal (`success: false`) or an A2E `error`; 204 for a message without reply",
            })),
            vec![400, 408, 413],
        ),
        (Method::GET, "/v1/rooms/{room}/notifications") => (
            200,
            Success::Other(
                "text/event-stream",
                // OpenAPI 3.2 (and schemathesis) read each event of a `text/event-stream` as
                // an object of its fields: the schema describes one event.
                json!({
                    "type": "object",
                    "description": "one Server-Sent Event of the stream; keep-alive comments carry no event",
                    "required": ["id", "event", "data"],
                    "properties": {
                        "id": {"type": "string", "description": "the notification's stable id: send it back as `Last-Event-ID` to resume after it"},
                        "event": {"type": "string", "enum": ["notification"]},
                        "data": {"type": "string", "contentMediaType": "application/json", "description": "`{\"id\", \"objective\", \"text\"}`: the notification"},
                    },
                }),
            ),
            vec![400, 429],
        ),
        (Method::POST, path) if operator_input(path) => body(200, schema_ref::<Decision>(), &[409]),
        _ => (200, Success::Json(json!({"type": "object"})), vec![]),
    };
    if matches!(route.access, Access::Needs(_)) {
        errors.extend([401, 403, 404]);
    }
    errors.sort_unstable();
    errors.dedup();
    (status, success, errors)
}

/// Why a route answers `status`, for the document.
fn error_description(status: u16) -> &'static str {
    match status {
        400 => {
            "malformed request: a body that is not JSON or names a key twice (`duplicate_key`), a bad query parameter or header"
        }
        401 => "no valid bearer token",
        403 => {
            "a permission is missing (the body names it), or a rule refused it at the API (`refused`, with the `rule` when a rule of the domain did)"
        }
        404 => "unknown room or id (an event naming an unknown objective or task: with its `rule`)",
        409 => {
            "refused by a rule of the domain (`error: rule_refused`, with `rule`, `message` and the `revision` that logged the refusal, or no `revision` when nothing was stored, e.g. a correction of a completed objective; nothing else changed), `conflict` when the Room kept changing, or `wrong_state`"
        }
        408 => {
            "the body did not arrive whole within the server's body-read timeout (`body_timeout`); nothing was processed and the connection is closed"
        }
        413 => "body above the size limit",
        415 => "a body whose Content-Type is not JSON",
        422 => {
            "body of the wrong shape (unknown or missing fields, bad values, a blank text, criteria empty or named twice)"
        }
        410 => {
            "the content was redacted (`redacted`): the body's `redaction` is the record that took its place (who, when, why, the digest removed)"
        }
        429 => {
            "the caller holds as many open streams as one principal may (`too_many_streams`, naming the limit); close one first"
        }
        _ => "error",
    }
}

fn responses(route: &RouteSpec) -> Value {
    let (status, success, errors) = answers(route);
    let input = route.method == Method::POST && operator_input(route.path);
    let description = if input {
        "decided: `revision` and the decision `log` (its first entry is the verdict on the request; later entries are what it set off); `already_done: true` when this Idempotency-Key was decided before"
    } else {
        "success"
    };
    let content = match success {
        Success::Json(schema) => json!({"application/json": {"schema": schema}}),
        Success::Page(item) => json!({"application/json": {"schema": {
            "type": "object",
            "required": ["items", "next_cursor"],
            "properties": {
                "items": {"type": "array", "items": item},
                "next_cursor": {"type": ["string", "null"], "description": "pass as `?cursor=` for the next page; null on the last"},
            },
        }}}),
        Success::Other(media, schema) => json!({media: {"schema": schema}}),
    };
    let mut responses = Map::new();
    responses.insert(
        status.to_string(),
        json!({"description": description, "content": content}),
    );
    for error in errors {
        responses.insert(
            error.to_string(),
            json!({
                "description": error_description(error),
                "content": {"application/json": {"schema": schema_ref::<ErrorBody>()}},
            }),
        );
    }
    Value::Object(responses)
}

/// The document.
pub(crate) async fn document() -> Json<Value> {
    Json(build())
}

/// Builds the document from [`routes`].
pub(crate) fn build() -> Value {
    let mut paths = Map::new();
    for route in routes() {
        let parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        let input = route.method == Method::POST && operator_input(route.path);
        let mut parameters = parameters;
        // Events (and the wait acknowledgements and receipts an assignee posts as events)
        // take a key too.
        let event = matches!(
            route.path,
            "/v1/rooms/{room}/events"
                | "/v1/rooms/{room}/assignments/{operation}/wait"
                | "/v1/rooms/{room}/assignments/{operation}/receipt"
        );
        if input || event {
            parameters.push(json!({
                "name": "Idempotency-Key",
                "in": "header",
                "required": false,
                "schema": {"type": "string"},
                "description": "Names the request: the Room decides one key (per caller and request content) once, durably; a retry is answered with the original decision (`already_done: true`, its `revision` and `log`) and changes nothing. The same key on a different request is a different request.",
            }));
        }
        let mut operation = json!({
            "summary": route.summary,
            "operationId": format!("{} {}", route.method, route.path),
            "parameters": parameters,
            "responses": responses(&route),
        });
        let body = match request_body(&route) {
            Some(RequestBody::Typed(typed)) => Some((component_ref(&typed.name), !typed.optional)),
            Some(RequestBody::FreeForm(schema)) => Some((schema, true)),
            None => None,
        };
        if let Some((schema, required)) = body {
            operation["requestBody"] = json!({
                "required": required,
                "content": {"application/json": {"schema": schema}},
            });
        }
        match route.access {
            Access::Public => {
                operation["security"] = json!([]);
            }
            Access::Needs(permission) => {
                operation["x-permission"] = json!(permission.as_str());
                operation["security"] = json!([{"bearer": []}]);
            }
        }
        let item = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| json!({}));
        item[route.method.as_str().to_ascii_lowercase()] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "agentroom REST API", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": components(),
        },
    })
}

/// Whether a POST to `path` submits an operator input: decided by the domain (a rule may
/// refuse it, 409) and once per Idempotency-Key.
fn operator_input(path: &str) -> bool {
    matches!(
        path,
        "/v1/rooms/{room}/objectives/{objective}/control"
            | "/v1/rooms/{room}/members"
            | "/v1/rooms/{room}/members/{principal}/roles"
            | "/v1/rooms/{room}/members/{principal}/revoke"
            | "/v1/rooms/{room}/memory"
            | "/v1/rooms/{room}/memory/{entry}/correct"
            | "/v1/rooms/{room}/memory/{entry}/retract"
            | "/v1/rooms/{room}/redactions"
            | "/v1/rooms/{room}/messages/{event}/retry"
            | "/v1/rooms/{room}/quotes"
            | "/v1/rooms/{room}/objectives/{objective}/tasks"
            | "/v1/rooms/{room}/objectives/{objective}/reviews"
            | "/v1/rooms/{room}/late-results/{operation}"
            | "/v1/rooms/{room}/budget/raise"
            | "/v1/rooms/{room}/budget/acknowledge"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route with the statuses it answers, written out: its success, then the 4xx it
    /// uses (401/403/404 on every guarded route; 400 on lists and bodies; 413/415/422 on
    /// JSON bodies; 409 on inputs the domain decides or that find a wrong state).
    const ANSWERS: &[(&str, &str, &[u16])] = &[
        ("GET", "/v1/openapi.json", &[200]),
        ("GET", "/metrics", &[200, 401, 403, 404]),
        ("GET", "/v1/rooms/{room}", &[200, 401, 403, 404]),
        (
            "GET",
            "/v1/rooms/{room}/members",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/members",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/members/{principal}/roles",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/members/{principal}/revoke",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        ("GET", "/v1/rooms/{room}/memory", &[200, 400, 401, 403, 404]),
        (
            "POST",
            "/v1/rooms/{room}/memory",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/memory/{entry}/correct",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/memory/{entry}/retract",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/redactions",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/redactions",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/contents/{digest}",
            &[200, 401, 403, 404, 410],
        ),
        (
            "POST",
            "/v1/rooms/{room}/events",
            &[202, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/quotes",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/messages/{event}/retry",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives",
            &[200, 400, 401, 403, 404],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}",
            &[200, 401, 403, 404],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}/plans",
            &[200, 400, 401, 403, 404],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}/decisions",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/objectives/{objective}/control",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/objectives/{objective}/tasks",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}/corrections",
            &[200, 401, 403, 404],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            &[200, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/contributions/{contribution}",
            &[200, 401, 403, 404],
        ),
        (
            "GET",
            "/v1/rooms/{room}/assignments",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/assignments/{operation}/result",
            &[202, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/assignments/{operation}/wait",
            &[202, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/assignments/{operation}/receipt",
            &[202, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/late-results",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/late-results/{operation}",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        ("GET", "/v1/rooms/{room}/budget", &[200, 400, 401, 403, 404]),
        (
            "POST",
            "/v1/rooms/{room}/budget/raise",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/budget/acknowledge",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/operations",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/operations/{operation}/resolve",
            &[200, 400, 401, 403, 404, 408, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/planning",
            &[200, 400, 401, 403, 404, 408, 413],
        ),
        (
            "GET",
            "/v1/rooms/{room}/notifications",
            &[200, 400, 401, 403, 404, 429],
        ),
    ];

    /// Follows a `$ref` into the document's components.
    fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference.trim_start_matches("#/components/schemas/");
                &doc["components"]["schemas"][name]
            }
            None => schema,
        }
    }

    #[test]
    fn every_route_has_a_schema_for_each_status_it_answers() {
        let doc = build();
        let listed: Vec<(String, &str)> = ANSWERS
            .iter()
            .map(|(method, path, _)| ((*method).to_owned(), *path))
            .collect();
        let served: Vec<(String, &str)> = routes()
            .iter()
            .map(|route| (route.method.to_string(), route.path))
            .collect();
        assert_eq!(listed, served, "ANSWERS and the route table differ");
        for route in routes() {
            let method = route.method.as_str();
            let Some((_, _, statuses)) = ANSWERS
                .iter()
                .find(|(m, p, _)| *m == method && *p == route.path)
            else {
                continue;
            };
            let responses = &doc["paths"][route.path][method.to_ascii_lowercase()]["responses"];
            let documented: Vec<u16> = responses
                .as_object()
                .map(|map| map.keys().filter_map(|k| k.parse().ok()).collect())
                .unwrap_or_default();
            let mut expected = statuses.to_vec();
            expected.sort_unstable();
            let mut documented = documented;
            documented.sort_unstable();
            assert_eq!(documented, expected, "{method} {}", route.path);
            for status in *statuses {
                let content = responses[status.to_string()]["content"]
                    .as_object()
                    .and_then(|content| content.values().next())
                    .map(|media| &media["schema"]);
                let schema = content.map(|schema| resolve(&doc, schema));
                assert!(
                    schema.is_some_and(|schema| schema.is_object()
                        && schema.as_object().is_some_and(|o| !o.is_empty())),
                    "{method} {} answers {status} without a schema",
                    route.path
                );
            }
        }
    }

    /// Every `$ref` under `value`.
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    match (key.as_str(), item.as_str()) {
                        ("$ref", Some(reference)) => out.push(reference),
                        _ => refs(item, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, out)),
            _ => {}
        }
    }

    #[test]
    fn every_schema_reference_resolves() {
        let doc = build();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for reference in found {
            let name = reference.trim_start_matches("#/components/schemas/");
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "{reference} does not resolve"
            );
        }
    }

    #[test]
    fn error_answers_share_the_error_body_schema_with_its_fields() {
        let doc = build();
        let error = &doc["components"]["schemas"]["ErrorBody"];
        let required: Vec<&str> = error["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(required, ["error", "message"]);
        for field in ["permission", "rule", "revision"] {
            assert!(error["properties"][field].is_object(), "{field}");
        }
        // A response type's own fields are derived from the type.
        let budget = &doc["components"]["schemas"]["Budget"]["properties"];
        for field in [
            "balances",
            "overrun",
            "spent_micros_by_role",
            "entries",
            "next_cursor",
            "pool",
        ] {
            assert!(budget[field].is_object(), "Budget.{field}");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Request bodies: the document against what the handlers' types read
    // -----------------------------------------------------------------------------------------

    const OBJECTIVE: &str = "00000000-0000-4000-8000-000000000001";
    const CONTRIBUTION: &str = "00000000-0000-4000-8000-000000000002";

    /// Valid bodies for each POST route that reads a request type, at least one per `oneOf`
    /// alternative; each with every optional field in one sample or another, so the
    /// unknown-field check below reaches every nested object.
    fn valid_bodies() -> Vec<(&'static str, Vec<Value>)> {
        vec![
            (
                "/v1/rooms/{room}/members",
                vec![
                    json!({"principal": "bea", "roles": ["reviewer"]}),
                    json!({"principal": "hal-2", "roles": ["agent_host", "specialist"], "issue_token": true}),
                ],
            ),
            (
                "/v1/rooms/{room}/members/{principal}/roles",
                vec![json!({"roles": ["operator", "reviewer"]})],
            ),
            (
                "/v1/rooms/{room}/members/{principal}/revoke",
                vec![json!({})],
            ),
            (
                "/v1/rooms/{room}/memory",
                vec![
                    json!({"text": "the corpus ends in 2026", "provenance": {"from": "owner_message", "event": OBJECTIVE}}),
                    json!({"text": "4,000 calls in 1.2 s", "provenance": {"from": "contribution", "id": CONTRIBUTION}}),
                    json!({"text": "leases carry a generation", "provenance": {
                        "from": "external", "url": "https://example.org/leases",
                        "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                    }}),
                ],
            ),
            (
                "/v1/rooms/{room}/memory/{entry}/correct",
                vec![json!({"text": "4,000 calls in 1.1 s"})],
            ),
            (
                "/v1/rooms/{room}/memory/{entry}/retract",
                vec![json!({"why": "personal data"})],
            ),
            (
                "/v1/rooms/{room}/redactions",
                vec![
                    json!({"target": {"kind": "memory", "entry": OBJECTIVE}, "reason": "a secret"}),
                    json!({"target": {"kind": "artifact",
                        "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"},
                        "reason": "personal data"}),
                ],
            ),
            (
                "/v1/rooms/{room}/events",
                vec![
                    json!({"kind": "owner_message", "text": "compare the three vendors"}),
                    json!({"kind": "owner_correction", "objective": OBJECTIVE, "text": "EU only"}),
                    json!({
                        "kind": "owner_correction", "objective": OBJECTIVE, "text": "EU only",
                        "criteria": [{"id": "eu-only", "text": "every vendor is in the EU"}],
                    }),
                    json!({"kind": "wait_ack", "objective": OBJECTIVE, "task": "t-1", "reason": "a licence"}),
                    json!({"kind": "internal_receipt", "objective": OBJECTIVE, "note": "delivered"}),
                    json!({"kind": "explicit_reference", "objective": OBJECTIVE, "task": "t-1"}),
                    json!({"kind": "explicit_reference", "objective": OBJECTIVE}),
                ],
            ),
            ("/v1/rooms/{room}/quotes", vec![json!({})]),
            ("/v1/rooms/{room}/messages/{event}/retry", vec![json!({})]),
            (
                "/v1/rooms/{room}/objectives/{objective}/control",
                vec![
                    json!({"action": "pause"}),
                    json!({"action": "resume"}),
                    json!({"action": "cancel"}),
                ],
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/tasks",
                vec![
                    json!({"task": "t-1", "status": "in_progress"}),
                    json!({"task": "t-1", "status": "done", "contribution": CONTRIBUTION}),
                ],
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/reviews",
                vec![json!({
                    "report_version": 1,
                    "observed": {"objective": 3, "control": 0},
                    "verdicts": [{"criterion": "coverage", "verdict": "met", "evidence": "§2"}],
                })],
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/result",
                vec![
                    json!({
                        "outcome": "contribution",
                        "artifacts": [{"name": "report.md", "content": "# Report"}],
                        "sources": [
                            {"kind": "contribution", "id": CONTRIBUTION},
                            {"kind": "external", "url": "https://example.org/a", "digest": "sha256:ab"},
                        ],
                        "usage_micros": 1200,
                    }),
                    json!({
                        "outcome": "contribution",
                        "body": "## Findings\n\nLeases fence stale writers [s1].",
                        "media_type": "text/markdown",
                        "sources": [{
                            "kind": "document", "id": "s1", "uri": "https://example.org/a",
                            "title": "Leases", "excerpt": "Leases fence stale writers.",
                            "retrieved_at": 1_764_460_800_000_i64,
                            "content_digest": "sha256:9689f6287a68c8c6a28acb9452b06fa6dec179938470ef1e02c7a6a50fd6e003",
                        }],
                        "outputs": {"findings": ["Leases fence stale writers."]},
                        "usage_micros": 900,
                    }),
                    json!({"outcome": "failure", "reason": "timed out", "usage_micros": 0}),
                    json!({"outcome": "failure", "reason": "timed out"}),
                ],
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/wait",
                vec![json!({"reason": "awaiting the vendor's reply"})],
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/receipt",
                vec![json!({"note": "the vendor replied"})],
            ),
            (
                "/v1/rooms/{room}/late-results/{operation}",
                vec![
                    json!({"decision": "readmit"}),
                    json!({"decision": "discard"}),
                ],
            ),
            (
                "/v1/rooms/{room}/budget/raise",
                // JSON Schema's integer: a whole number written as a float is one.
                vec![
                    json!({"amount_micros": 5_000_000}),
                    json!({"amount_micros": 4755.0}),
                ],
            ),
            ("/v1/rooms/{room}/budget/acknowledge", vec![json!({})]),
            (
                "/v1/rooms/{room}/operations/{operation}/resolve",
                vec![
                    json!({"outcome": "succeeded", "reason": "the provider's dashboard shows it"}),
                    json!({"outcome": "failed", "reason": "no trace of it"}),
                ],
            ),
        ]
    }

    /// Bodies the schema refuses, and whether serde reads them anyway (a bound the handler or
    /// the domain checks, not the type).
    fn invalid_bodies() -> Vec<(&'static str, Value, bool)> {
        vec![
            // A receipt names its objective (O9).
            (
                "/v1/rooms/{room}/events",
                json!({"kind": "internal_receipt", "note": "x"}),
                false,
            ),
            (
                "/v1/rooms/{room}/events",
                json!({"kind": "wait_ack", "objective": OBJECTIVE, "reason": "x"}),
                false,
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/wait",
                json!({}),
                false,
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/receipt",
                json!({"note": 7}),
                false,
            ),
            (
                "/v1/rooms/{room}/events",
                json!({"kind": "owner_message"}),
                false,
            ),
            ("/v1/rooms/{room}/events", json!({"text": "no kind"}), false),
            (
                "/v1/rooms/{room}/members",
                json!({"principal": "bea", "roles": ["boss"]}),
                false,
            ),
            (
                "/v1/rooms/{room}/members",
                json!({"roles": ["reviewer"]}),
                false,
            ),
            (
                "/v1/rooms/{room}/members",
                json!({"principal": "bea", "roles": []}),
                true,
            ),
            (
                "/v1/rooms/{room}/members/{principal}/roles",
                json!({"roles": "reviewer"}),
                false,
            ),
            (
                "/v1/rooms/{room}/memory",
                json!({"text": "no provenance"}),
                false,
            ),
            (
                "/v1/rooms/{room}/memory",
                json!({"text": "x", "provenance": {"from": "external", "url": "u", "digest": "md5:1"}}),
                false,
            ),
            (
                "/v1/rooms/{room}/memory",
                json!({"text": " ", "provenance": {"from": "contribution", "id": CONTRIBUTION}}),
                true,
            ),
            ("/v1/rooms/{room}/memory/{entry}/retract", json!({}), false),
            (
                "/v1/rooms/{room}/redactions",
                json!({"target": {"kind": "memory"}, "reason": "x"}),
                false,
            ),
            (
                "/v1/rooms/{room}/redactions",
                json!({"target": {"kind": "file", "digest": "sha256:0"}, "reason": "x"}),
                false,
            ),
            (
                "/v1/rooms/{room}/redactions",
                json!({"target": {"kind": "artifact", "digest": "md5:1"}, "reason": "x"}),
                false,
            ),
            (
                "/v1/rooms/{room}/redactions",
                json!({"target": {"kind": "memory", "entry": OBJECTIVE}, "reason": " "}),
                true,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/control",
                json!({"action": "stop"}),
                false,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/control",
                json!({}),
                false,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/tasks",
                json!({"task": "t-1", "status": "blocked"}),
                false,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/reviews",
                json!({
                    "report_version": 1,
                    "observed": {"objective": 3, "control": 0},
                    "verdicts": [{"criterion": "coverage", "verdict": "maybe", "evidence": "e"}],
                }),
                false,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/reviews",
                json!({"report_version": 0, "observed": {"objective": 3, "control": 0}, "verdicts": []}),
                true,
            ),
            (
                "/v1/rooms/{room}/late-results/{operation}",
                json!({"decision": "keep"}),
                false,
            ),
            (
                "/v1/rooms/{room}/budget/raise",
                json!({"amount_micros": "lots"}),
                false,
            ),
            (
                "/v1/rooms/{room}/budget/raise",
                json!({"amount_micros": 1.5}),
                false,
            ),
            (
                "/v1/rooms/{room}/objectives/{objective}/reviews",
                json!({
                    "report_version": 1,
                    "observed": {"objective": 3, "control": 0},
                    "verdicts": [{"criterion": "Coverage", "verdict": "met", "evidence": "e"}],
                }),
                false,
            ),
            // Blank texts: serde reads them, the document and the domain refuse them.
            (
                "/v1/rooms/{room}/events",
                json!({"kind": "owner_message", "text": " \n\t"}),
                true,
            ),
            (
                "/v1/rooms/{room}/operations/{operation}/resolve",
                json!({"outcome": "failed", "reason": ""}),
                true,
            ),
            (
                "/v1/rooms/{room}/budget/raise",
                json!({"amount_micros": 0}),
                true,
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/result",
                json!({"outcome": "contribution", "body": 3}),
                false,
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/result",
                json!({"outcome": "contribution", "body": "b", "usage_micros": -1}),
                true,
            ),
            (
                "/v1/rooms/{room}/assignments/{operation}/result",
                json!({"outcome": "failure", "reason": "x", "usage_micros": -1}),
                true,
            ),
            (
                "/v1/rooms/{room}/operations/{operation}/resolve",
                json!({"outcome": "unsure", "reason": "x"}),
                false,
            ),
        ]
    }

    /// Whether `value` is valid against `schema`, for the JSON Schema keywords the document
    /// uses (no validator crate is in the dependency tree). A keyword it does not know fails
    /// the check rather than passing unchecked.
    fn validate(doc: &Value, schema: &Value, value: &Value) -> Result<(), String> {
        let schema = resolve(doc, schema);
        let rules = schema
            .as_object()
            .ok_or_else(|| format!("not a schema: {schema}"))?;
        let object = value.as_object();
        for (keyword, rule) in rules {
            match keyword.as_str() {
                "description" | "title" | "format" => {}
                "type" => {
                    let kinds: Vec<&str> = match rule {
                        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
                        kind => kind.as_str().into_iter().collect(),
                    };
                    let fits = kinds.iter().any(|kind| match *kind {
                        "object" => value.is_object(),
                        "array" => value.is_array(),
                        "string" => value.is_string(),
                        "integer" => {
                            value.is_i64()
                                || value.is_u64()
                                || value.as_f64().is_some_and(|n| n.fract() == 0.0)
                        }
                        "number" => value.is_number(),
                        "boolean" => value.is_boolean(),
                        "null" => value.is_null(),
                        _ => false,
                    });
                    if !fits {
                        return Err(format!("{value} is not of type {rule}"));
                    }
                }
                "enum" => {
                    if !rule.as_array().is_some_and(|values| values.contains(value)) {
                        return Err(format!("{value} is not one of {rule}"));
                    }
                }
                "required" => {
                    for field in rule.as_array().into_iter().flatten() {
                        let field = field.as_str().unwrap_or_default();
                        if object.is_some_and(|object| !object.contains_key(field)) {
                            return Err(format!("{value} lacks `{field}`"));
                        }
                    }
                }
                "properties" => {
                    for (field, item) in object.into_iter().flatten() {
                        if let Some(property) = rule.get(field) {
                            validate(doc, property, item).map_err(|e| format!("{field}: {e}"))?;
                        }
                    }
                }
                "additionalProperties" => {
                    for (field, item) in object.into_iter().flatten() {
                        if schema["properties"].get(field).is_some() {
                            continue;
                        }
                        if rule.is_object() {
                            // A map: every value fits its schema.
                            validate(doc, rule, item).map_err(|e| format!("{field}: {e}"))?;
                        } else {
                            assert_eq!(*rule, json!(false), "objects are closed or maps");
                            return Err(format!("unknown field `{field}`"));
                        }
                    }
                }
                "items" => {
                    for item in value.as_array().into_iter().flatten() {
                        validate(doc, rule, item)?;
                    }
                }
                "minItems" => {
                    if let (Some(items), Some(min)) = (value.as_array(), rule.as_u64())
                        && (items.len() as u64) < min
                    {
                        return Err(format!("{value} has fewer than {min} items"));
                    }
                }
                // The one pattern the document uses: not blank.
                "pattern" if rule == r"\S" => {
                    if value.as_str().is_some_and(|text| text.trim().is_empty()) {
                        return Err(format!("{value} is blank"));
                    }
                }
                // A content digest (`ContentDigest`'s form).
                "pattern" if rule == "^sha256:[0-9a-f]{64}$" => {
                    if let Some(text) = value.as_str()
                        && text
                            .parse::<agentroom_domain::artifact::ContentDigest>()
                            .is_err()
                    {
                        return Err(format!("{value} is not a content digest"));
                    }
                }
                // JSON Schema counts characters (code points), as `MEMORY_TEXT_MAX_CHARS` does.
                "maxLength" => {
                    if let (Some(text), Some(max)) = (value.as_str(), rule.as_u64())
                        && text.chars().count() as u64 > max
                    {
                        return Err(format!("{value} is longer than {max} characters"));
                    }
                }
                // And the slug of an id (`CriterionId::parse`, `PrincipalId::parse`: the same).
                "pattern" if rule == "^[a-z0-9_-]{1,64}$" => {
                    if let Some(text) = value.as_str()
                        && agentroom_domain::ids::CriterionId::parse(text).is_err()
                    {
                        return Err(format!("{value} is not a slug"));
                    }
                }
                "minimum" => {
                    if let (Some(number), Some(min)) = (value.as_f64(), rule.as_f64())
                        && number < min
                    {
                        return Err(format!("{value} is below {min}"));
                    }
                }
                "oneOf" => {
                    let alternatives = rule.as_array().map(Vec::as_slice).unwrap_or_default();
                    let results: Vec<Result<(), String>> = alternatives
                        .iter()
                        .map(|alternative| validate(doc, alternative, value))
                        .collect();
                    let fitting = results.iter().filter(|r| r.is_ok()).count();
                    if fitting != 1 {
                        let why: Vec<String> =
                            results.into_iter().filter_map(Result::err).collect();
                        return Err(format!(
                            "{value} fits {fitting} alternatives of oneOf ({})",
                            why.join("; ")
                        ));
                    }
                }
                "propertyNames" => {
                    for field in object.into_iter().flat_map(|object| object.keys()) {
                        validate(doc, rule, &json!(field)).map_err(|e| format!("{field}: {e}"))?;
                    }
                }
                other => return Err(format!("the test's validator does not know `{other}`")),
            }
        }
        Ok(())
    }

    /// The JSON pointers of every object in `value`, itself included.
    fn objects_in(value: &Value, at: String, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    objects_in(item, format!("{at}/{key}"), out);
                }
                out.push(at);
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    objects_in(item, format!("{at}/{index}"), out);
                }
            }
            _ => {}
        }
    }

    /// Every object schema reachable from `schema` (through references, properties, items
    /// and alternatives) is closed: `additionalProperties: false`.
    fn assert_closed(doc: &Value, schema: &Value, at: &str) {
        let schema = resolve(doc, schema);
        // A map (a schema for its values, no named properties) is open by design.
        let map = schema["additionalProperties"].is_object() && schema.get("properties").is_none();
        if !map && (schema["type"] == "object" || schema.get("properties").is_some()) {
            assert_eq!(
                schema["additionalProperties"],
                json!(false),
                "{at} is not closed: {schema}"
            );
        }
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            assert_closed(doc, property, &format!("{at}.{field}"));
        }
        if let Some(items) = schema.get("items") {
            assert_closed(doc, items, &format!("{at}[]"));
        }
        for (index, alternative) in schema["oneOf"].as_array().into_iter().flatten().enumerate() {
            assert_closed(doc, alternative, &format!("{at}|{index}"));
        }
    }

    /// The schema of the body `path` reads, from the document.
    fn body_schema<'a>(doc: &'a Value, path: &str) -> &'a Value {
        &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    }

    #[test]
    fn every_post_route_but_planning_reads_a_request_type_the_document_references() {
        let doc = build();
        for route in routes() {
            let operation = &doc["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
            if route.method != Method::POST {
                assert!(operation.get("requestBody").is_none(), "{}", route.path);
                continue;
            }
            let schema = body_schema(&doc, route.path);
            match request_body(&route) {
                Some(RequestBody::Typed(typed)) => {
                    assert_eq!(*schema, component_ref(&typed.name), "{}", route.path);
                    assert!(
                        resolve(&doc, schema)
                            .as_object()
                            .is_some_and(|object| !object.is_empty()),
                        "{}: {schema} does not resolve",
                        route.path
                    );
                    assert_eq!(
                        operation["requestBody"]["required"],
                        json!(!typed.optional),
                        "{}",
                        route.path
                    );
                }
                Some(RequestBody::FreeForm(_)) => {
                    assert_eq!(route.path, "/v1/rooms/{room}/planning");
                    assert!(schema["description"].is_string(), "{schema}");
                }
                None => panic!("POST {} reads no documented body", route.path),
            }
        }
        // Only the acknowledgement may come without a body.
        let acknowledge = &doc["paths"]["/v1/rooms/{room}/budget/acknowledge"]["post"];
        assert_eq!(acknowledge["requestBody"]["required"], json!(false));
    }

    #[test]
    fn sample_bodies_read_by_each_type_fit_its_schema_and_unknown_fields_fail_both() {
        let doc = build();
        let samples = valid_bodies();
        let typed: Vec<(RouteSpec, Typed)> = routes()
            .into_iter()
            .filter_map(|route| match request_body(&route) {
                Some(RequestBody::Typed(typed)) => Some((route, typed)),
                _ => None,
            })
            .collect();
        let sampled: Vec<&str> = samples.iter().map(|(path, _)| *path).collect();
        let reading: Vec<&str> = typed.iter().map(|(route, _)| route.path).collect();
        assert_eq!(sampled, reading, "the samples and the typed routes differ");
        for ((route, typed), (_, bodies)) in typed.iter().zip(&samples) {
            let schema = body_schema(&doc, route.path);
            assert_closed(&doc, schema, &typed.name);
            assert!(!bodies.is_empty(), "{}", route.path);
            for body in bodies {
                (typed.parse)(body.clone())
                    .unwrap_or_else(|e| panic!("{} refused {body}: {e}", typed.name));
                validate(&doc, schema, body)
                    .unwrap_or_else(|e| panic!("the {} schema refused {body}: {e}", typed.name));
                let mut objects = Vec::new();
                objects_in(body, String::new(), &mut objects);
                for pointer in objects {
                    // A contribution's outputs are a map: any name is welcome there.
                    if pointer.ends_with("/outputs") {
                        continue;
                    }
                    let mut extended = body.clone();
                    let Some(Value::Object(object)) = extended.pointer_mut(&pointer) else {
                        unreachable!("{pointer} names an object")
                    };
                    object.insert("unexpected_field".to_owned(), json!(true));
                    assert!(
                        (typed.parse)(extended.clone()).is_err(),
                        "{} read {extended}",
                        typed.name
                    );
                    assert!(
                        validate(&doc, schema, &extended).is_err(),
                        "the {} schema admits {extended}",
                        typed.name
                    );
                }
            }
        }
        for (path, body, serde_reads) in invalid_bodies() {
            let Some((_, typed)) = typed.iter().find(|(route, _)| route.path == path) else {
                panic!("{path} reads no request type");
            };
            assert_eq!(
                (typed.parse)(body.clone()).is_ok(),
                serde_reads,
                "{}: {body}",
                typed.name
            );
            assert!(
                validate(&doc, body_schema(&doc, path), &body).is_err(),
                "the {} schema admits {body}",
                typed.name
            );
        }
    }

    #[test]
    fn domain_enums_in_request_bodies_list_their_values() {
        let doc = build();
        let schemas = &doc["components"]["schemas"];
        let property = |name: &str, field: &str| resolve(&doc, &schemas[name]["properties"][field]);
        assert_eq!(
            property("ControlBody", "action")["enum"],
            json!(["pause", "resume", "cancel"])
        );
        assert_eq!(
            property("TaskUpdateBody", "status")["enum"],
            json!(["backlog", "todo", "in_progress", "done"])
        );
        assert_eq!(
            property("VerdictBody", "verdict")["enum"],
            json!(["met", "unmet", "unknown"])
        );
        assert_eq!(
            property("LateBody", "decision")["enum"],
            json!(["readmit", "discard"])
        );
        let roles = json!(["owner", "operator", "reviewer", "specialist", "agent_host"]);
        for body in ["AddMemberBody", "RolesBody"] {
            let field = property(body, "roles");
            assert_eq!(field["minItems"], json!(1), "{body}");
            assert_eq!(resolve(&doc, &field["items"])["enum"], roles, "{body}");
        }
        assert_eq!(
            property("ResolveBody", "outcome")["enum"],
            json!(["succeeded", "failed"])
        );
        assert_eq!(property("RaiseBody", "amount_micros")["minimum"], json!(1));
        assert_eq!(
            property("ReviewBody", "report_version")["minimum"],
            json!(1)
        );
    }
}
