//! `GET /v1/openapi.json`: the OpenAPI 3.1 document, generated from the route table (paths,
//! methods, parameters, the permission each route needs, bearer security), so it lists
//! exactly what the router serves. Every 2xx and 4xx answer of a route has a schema, derived
//! from the wire types of `agentroom-api-model` (utoipa's `ToSchema`): the success type
//! [`answers`] names for the route, and `ErrorBody` for its errors.

use agentroom_api_model::ErrorBody;
use agentroom_api_model::responses::{
    AssignmentView, Budget, Decided, Decision, LateResult, Member, ObjectiveBrief, ObjectiveDetail,
    OperationView, PlanVersionView, Recorded, Resolved, Reviews, RoomView,
};
use axum::Json;
use axum::http::Method;
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
    json!({"$ref": format!("#/components/schemas/{}", T::name())})
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
    add::<ObjectiveBrief>(&mut schemas);
    add::<ObjectiveDetail>(&mut schemas);
    add::<PlanVersionView>(&mut schemas);
    add::<Decided>(&mut schemas);
    add::<Reviews>(&mut schemas);
    add::<LateResult>(&mut schemas);
    add::<Budget>(&mut schemas);
    add::<Decision>(&mut schemas);
    add::<OperationView>(&mut schemas);
    add::<Resolved>(&mut schemas);
    add::<AssignmentView>(&mut schemas);
    add::<Recorded>(&mut schemas);
    schemas
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or(Value::Null)))
        .collect()
}

/// The statuses a route answers (its success first) and what it answers on success.
///
/// Every guarded route may answer 401 (no valid token), 403 (a permission missing) and 404
/// (another Room); every list 400 (a bad `limit` or `cursor`); every JSON body 400 (not
/// JSON), 413, 415 and 422; every operator input 409 (refused by a rule, or a Room that
/// kept changing).
fn answers(route: &RouteSpec) -> (u16, Success, Vec<u16>) {
    let list = |t: Value| (200, Success::Page(t), vec![400]);
    let body = |status: u16, t: Value, more: &[u16]| {
        let mut errors = vec![400, 413, 415, 422];
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
        (Method::POST, "/v1/rooms/{room}/events") => body(202, schema_ref::<Decision>(), &[409]),
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
        (Method::GET, "/v1/rooms/{room}/assignments") => list(schema_ref::<AssignmentView>()),
        (Method::POST, "/v1/rooms/{room}/assignments/{operation}/result") => {
            body(202, schema_ref::<Recorded>(), &[409])
        }
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
            vec![400, 413],
        ),
        (Method::GET, "/v1/rooms/{room}/notifications") => (
            200,
            Success::Other(
                "text/event-stream",
                json!({"type": "string", "description": "Server-Sent Events: `id:` the notification's stable id, `event: notification`, `data:` `{\"id\", \"objective\", \"text\"}`"}),
            ),
            vec![400],
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
        400 => "malformed request: a body that is not JSON, a bad query parameter or header",
        401 => "no valid bearer token",
        403 => "a permission is missing (the body names it), or a rule refused it at the API",
        404 => "unknown room or id",
        409 => {
            "refused by a rule of the domain (`error: rule_refused`, with `rule`, `message` and the `revision` that logged the refusal; nothing else changed), `conflict` when the Room kept changing, or `wrong_state`"
        }
        413 => "body above the size limit",
        415 => "a body whose Content-Type is not JSON",
        422 => "body of the wrong shape (unknown or missing fields, bad values)",
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
        if input || route.path == "/v1/rooms/{room}/events" {
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
        if let Some(schema) = request_body(route.path) {
            operation["requestBody"] = json!({
                "required": true,
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
            | "/v1/rooms/{room}/objectives/{objective}/tasks"
            | "/v1/rooms/{room}/objectives/{objective}/reviews"
            | "/v1/rooms/{room}/late-results/{operation}"
            | "/v1/rooms/{room}/budget/raise"
            | "/v1/rooms/{room}/budget/acknowledge"
    )
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": properties,
    })
}

/// The JSON body each POST route reads (the handlers' request types refuse unknown fields,
/// as `additionalProperties: false` says; the planning endpoint takes any A2E message).
pub(crate) fn request_body(path: &str) -> Option<Value> {
    let text = json!({"type": "string"});
    let id = json!({"type": "string", "format": "uuid"});
    Some(match path {
        "/v1/rooms/{room}/events" => json!({"oneOf": [
            object(&["kind", "text"], json!({"kind": {"const": "owner_message"}, "text": text})),
            object(&["kind", "objective", "text"], json!({"kind": {"const": "owner_correction"}, "objective": id, "text": text})),
            object(&["kind", "objective"], json!({"kind": {"const": "explicit_reference"}, "objective": id, "task": text})),
        ]}),
        "/v1/rooms/{room}/objectives/{objective}/control" => object(
            &["action"],
            json!({"action": {"enum": ["pause", "resume", "cancel"]}}),
        ),
        "/v1/rooms/{room}/objectives/{objective}/tasks" => object(
            &["task", "status"],
            json!({"task": text, "status": {"enum": ["backlog", "todo", "in_progress", "done"]}, "contribution": id}),
        ),
        "/v1/rooms/{room}/objectives/{objective}/reviews" => object(
            &["report_version", "observed", "verdicts"],
            json!({
                "report_version": {"type": "integer", "minimum": 1},
                "observed": object(&["objective", "control"], json!({"objective": {"type": "integer"}, "control": {"type": "integer"}})),
                "verdicts": {"type": "array", "items": object(
                    &["criterion", "verdict", "evidence"],
                    json!({"criterion": text, "verdict": {"enum": ["met", "unmet", "unknown"]}, "evidence": text}),
                )},
            }),
        ),
        "/v1/rooms/{room}/late-results/{operation}" => object(
            &["decision"],
            json!({"decision": {"enum": ["readmit", "discard"]}}),
        ),
        "/v1/rooms/{room}/budget/raise" => object(
            &["amount_micros"],
            json!({"amount_micros": {"type": "integer", "minimum": 1}}),
        ),
        "/v1/rooms/{room}/budget/acknowledge" => object(&[], json!({})),
        "/v1/rooms/{room}/assignments/{operation}/result" => {
            let usage = json!({"type": "integer", "minimum": 0, "description": "the work's cost; absent: the whole reservation is charged (B3)"});
            json!({"oneOf": [
                object(&["outcome", "artifacts"], json!({
                    "outcome": {"const": "contribution"},
                    "artifacts": {"type": "array", "minItems": 1, "items": object(&["name", "content"], json!({"name": text, "content": text}))},
                    "sources": {"type": "array", "items": {"oneOf": [
                        object(&["kind", "id"], json!({"kind": {"const": "contribution"}, "id": id})),
                        object(&["kind", "url", "digest"], json!({"kind": {"const": "external"}, "url": text, "digest": text})),
                    ]}},
                    "usage_micros": usage,
                })),
                object(&["outcome", "reason"], json!({"outcome": {"const": "failure"}, "reason": text, "usage_micros": usage})),
            ]})
        }
        "/v1/rooms/{room}/operations/{operation}/resolve" => object(
            &["outcome", "reason"],
            json!({"outcome": {"enum": ["succeeded", "failed"]}, "reason": text}),
        ),
        "/v1/rooms/{room}/planning" => json!({
            "type": "object",
            "description": "one A2E planning message (seed 000); unknown fields are tolerated",
            "required": ["type"],
        }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route with the statuses it answers, written out: its success, then the 4xx it
    /// uses (401/403/404 on every guarded route; 400 on lists and bodies; 413/415/422 on
    /// JSON bodies; 409 on inputs the domain decides or that find a wrong state).
    const ANSWERS: &[(&str, &str, &[u16])] = &[
        ("GET", "/v1/openapi.json", &[200]),
        ("GET", "/metrics", &[200]),
        ("GET", "/v1/rooms/{room}", &[200, 401, 403, 404]),
        (
            "GET",
            "/v1/rooms/{room}/members",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/events",
            &[202, 400, 401, 403, 404, 409, 413, 415, 422],
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
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/objectives/{objective}/tasks",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            &[200, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/objectives/{objective}/reviews",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/assignments",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/assignments/{operation}/result",
            &[202, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/late-results",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/late-results/{operation}",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        ("GET", "/v1/rooms/{room}/budget", &[200, 400, 401, 403, 404]),
        (
            "POST",
            "/v1/rooms/{room}/budget/raise",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/budget/acknowledge",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "GET",
            "/v1/rooms/{room}/operations",
            &[200, 400, 401, 403, 404],
        ),
        (
            "POST",
            "/v1/rooms/{room}/operations/{operation}/resolve",
            &[200, 400, 401, 403, 404, 409, 413, 415, 422],
        ),
        (
            "POST",
            "/v1/rooms/{room}/planning",
            &[200, 400, 401, 403, 404, 413],
        ),
        (
            "GET",
            "/v1/rooms/{room}/notifications",
            &[200, 400, 401, 403, 404],
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
        ] {
            assert!(budget[field].is_object(), "Budget.{field}");
        }
    }
}
