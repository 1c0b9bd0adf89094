//! The REST API's wire types under `/v1/rooms/{room}/…`: the request bodies the server reads
//! ([`requests`]), the answers it writes ([`responses`]) and its error body ([`ErrorBody`]).
//! The server serializes exactly these types and the operator CLI parses them, so a changed
//! contract fails to compile or fails loudly at the client (a missing field is an error
//! naming it). Every type derives its OpenAPI schema (`utoipa::ToSchema`), from which
//! `/v1/openapi.json` is made.
//!
//! Serde and the schema derive only: no HTTP, no IO. Domain values appear as the domain
//! serializes them; their schema here is the JSON kind they serialize to, or, for the domain
//! enums a request body carries, a mirror in [`values`] that lists the allowed values.

pub mod requests;
pub mod responses;
pub mod values;
mod whole;

use agentroom_domain::rules::Rule;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of every error answer: `{"error": code, "message": text}`, plus `permission` on
/// a 403, `rule` on a refusal by a rule, and `revision` on one a decision logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The stable machine-readable code (`not_found`, `forbidden`, `rule_refused`, …).
    pub error: String,
    /// What went wrong, for people.
    pub message: String,
    /// On a 403: the permission none of the caller's roles holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// On a 409 `rule_refused`, and on an event the Room refused (403, 404, 409, 422): the
    /// rule id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub rule: Option<Rule>,
    /// On a 409 `rule_refused` that a decision logged: the revision that logged it (absent
    /// when the refusal stored nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// On a 410 `redacted`: the redaction record that took the content's place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redaction: Option<responses::RedactionView>,
}
