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
                "error": {"type": "string"}, "message": {"type": "string"}, "permission": {"type": "string"}
            }}},
        },
    })
}
