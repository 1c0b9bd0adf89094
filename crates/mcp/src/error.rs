//! The one mapping from what the service answers to an MCP tool error: the same code, rule,
//! permission and message as the REST API's `ErrorBody` for the same refusal, as a tool
//! result with `isError: true` and structured content, so an agent can read and correct it.

use agentroom_coordinator::{CoordinatorError, ErrorClass};
use agentroom_domain::event::RefusalKind;
use agentroom_domain::room::Permission;
use agentroom_domain::rules::Rule;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult};
use serde::Serialize;

/// Why a tool call was not served. Codes are the REST API's (`crates/server/src/error.rs`).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The token is no longer valid (revoked, expired) or names another Room.
    #[error("a valid bearer token is required (Authorization: Bearer ar_...)")]
    Unauthenticated,
    /// None of the caller's current roles in the Room holds the permission (T3).
    #[error("this needs the permission `{0}`, which none of your roles in this room holds")]
    Forbidden(Permission),
    /// Something the tool names is not in this Room.
    #[error("{0}")]
    NotFound(String),
    /// The input does not fit the tool: too long, blank, out of range.
    #[error("the input does not fit this tool: {0}")]
    InvalidInput(String),
    /// A rule refused it at the service before anything was decided.
    #[error("{0}")]
    Refused(String),
    /// The target is not in a state this call applies to; nothing changed.
    #[error("{0}")]
    WrongState(String),
    /// The domain refused the input by a rule (a decision committed at `revision`).
    #[error("{rule}: {message}")]
    RuleRefused {
        /// The rule that refused it.
        rule: Rule,
        /// Why, for people.
        message: String,
        /// The revision that committed the refusal, when one did.
        revision: Option<i64>,
    },
    /// The planning service refused a planning message by one of its rules (the A2E reply's
    /// `code` and `message`).
    #[error("{code}: {message}")]
    PlanningRefused {
        /// The A2E refusal code (`unknown_plan`, `rule_refused`, …).
        code: &'static str,
        /// Why, naming the offending value.
        message: String,
    },
    /// The Room refuses what an event says, by a rule of its kind, before storing it.
    #[error("{0}")]
    EventRefused(agentroom_domain::event::EventRefusal),
    /// The Room kept changing, the coordinator stopped, or there is no randomness.
    #[error("the server cannot take this request now; try again")]
    Unavailable(#[source] CoordinatorError),
    /// A bug or a failing store; its cause is logged, not told.
    #[error("the server failed to answer; the request may or may not have been applied")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A tool error as the caller reads it (`structuredContent` of an `isError` result): the
/// fields of the REST API's `ErrorBody` that apply.
#[derive(Debug, Serialize)]
struct ErrorContent {
    error: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    permission: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<i64>,
}

impl ToolError {
    /// The REST API's machine-readable code for the same refusal.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::Unauthenticated => "unauthenticated",
            ToolError::Forbidden(_) => "forbidden",
            ToolError::NotFound(_) => "not_found",
            ToolError::InvalidInput(_) => "invalid_body",
            ToolError::Refused(_) => "refused",
            ToolError::WrongState(_) => "wrong_state",
            ToolError::RuleRefused { .. } => "rule_refused",
            ToolError::PlanningRefused { code, .. } => code,
            ToolError::EventRefused(refusal) => match refusal.kind() {
                RefusalKind::Unknown => "not_found",
                RefusalKind::NotAllowed => "refused",
                RefusalKind::WrongState => "rule_refused",
                RefusalKind::Invalid => "invalid_body",
            },
            ToolError::Unavailable(_) => "unavailable",
            ToolError::Internal(_) => "internal_error",
        }
    }

    /// The rule that refused it, when one did.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            ToolError::RuleRefused { rule, .. } => Some(*rule),
            ToolError::EventRefused(refusal) => Some(refusal.rule()),
            _ => None,
        }
    }

    /// The permission the caller lacks, for a [`ToolError::Forbidden`].
    pub fn permission(&self) -> Option<Permission> {
        match self {
            ToolError::Forbidden(permission) => Some(*permission),
            _ => None,
        }
    }

    fn content(&self) -> ErrorContent {
        let (message, revision) = match self {
            // As REST: a rule refusal's message is the rule's own words.
            ToolError::RuleRefused {
                message, revision, ..
            } => (message.clone(), *revision),
            ToolError::PlanningRefused { message, .. } => (message.clone(), None),
            other => (other.to_string(), None),
        };
        ErrorContent {
            error: self.code(),
            message,
            permission: self.permission().map(Permission::as_str),
            rule: self.rule(),
            revision,
        }
    }
}

impl ToolError {
    /// The error as a JSON-RPC error (for requests other than tool calls: resources), its
    /// data the same content a tool error carries.
    pub fn into_error_data(self) -> rmcp::ErrorData {
        let data = serde_json::to_value(self.content()).ok();
        let message = self.to_string();
        match self {
            ToolError::NotFound(_) => rmcp::ErrorData::resource_not_found(message, data),
            ToolError::Internal(_) | ToolError::Unavailable(_) => {
                tracing::error!(error = %self, cause = ?std::error::Error::source(&self), "request failed");
                rmcp::ErrorData::internal_error(message, data)
            }
            _ => rmcp::ErrorData::invalid_params(message, data),
        }
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        if matches!(self, ToolError::Internal(_) | ToolError::Unavailable(_)) {
            tracing::error!(error = %self, cause = ?std::error::Error::source(&self), "tool call failed");
        } else {
            tracing::debug!(error = %self, "tool call refused");
        }
        let content = serde_json::to_value(self.content())
            .map_err(|error| rmcp::ErrorData::internal_error(error.to_string(), None))?;
        Ok(CallToolResult::structured_error(content).into())
    }
}

impl From<CoordinatorError> for ToolError {
    fn from(error: CoordinatorError) -> Self {
        match error.classify() {
            ErrorClass::NotFound(message) => ToolError::NotFound(message),
            ErrorClass::WrongState(message) => ToolError::WrongState(message),
            ErrorClass::Invalid(message) => ToolError::InvalidInput(message),
            ErrorClass::Refused(message) => ToolError::Refused(message),
            ErrorClass::EventRefused(refusal) => ToolError::EventRefused(refusal),
            ErrorClass::Conflicted(error) | ErrorClass::Unavailable(error) => {
                ToolError::Unavailable(error)
            }
            // No MCP tool revokes members; should one, its tokens' failure is the server's.
            ErrorClass::TokensNotRevoked { source, .. } => ToolError::Internal(Box::new(source)),
            ErrorClass::Internal(error) => ToolError::Internal(Box::new(error)),
        }
    }
}
