//! `GET /v1/openapi.json`: the OpenAPI 3.1 document, generated from the route table (paths,
//! methods, parameters, the permission each route needs, bearer security), so it lists
//! exactly what the router serves.

use axum::Json;
use serde_json::{Map, Value, json};

use super::{Access, routes};

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
        let input = route.method == axum::http::Method::POST && operator_input(route.path);
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
            "responses": {
                "200": {"description": "success"},
                "400": {"description": "malformed request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                "401": {"description": "no valid bearer token"},
                "403": {"description": "a permission is missing; the body names it"},
                "404": {"description": "unknown room or id"},
                "413": {"description": "body above the size limit"},
                "422": {"description": "body of the wrong shape (unknown or missing fields)"},
            },
        });
        if input {
            operation["responses"]["200"] = json!({"description": "decided: `revision` and the decision `log` (its first entry is the verdict on the request; later entries are what it set off); `already_done: true` when this Idempotency-Key was decided before"});
            operation["responses"]["409"] = json!({
                "description": "refused by a rule of the domain (`error: rule_refused`, with `rule`, `message` and the `revision` that logged the refusal); nothing else changed. Also `conflict` when the Room kept changing.",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            });
        }
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
            "schemas": {"Error": {"type": "object", "required": ["error", "message"], "properties": {
                "error": {"type": "string"}, "message": {"type": "string"}, "permission": {"type": "string"},
                "rule": {"type": "string", "description": "on a 409 rule_refused: the rule id"},
                "revision": {"type": "integer", "description": "on a 409 rule_refused: the revision that logged the refusal"},
            }}},
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
