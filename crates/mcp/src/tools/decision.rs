//! What an input a tool submits answers, and the input ids that make a retry decide once.

use agentroom_coordinator::{InputId, Outcome};
use agentroom_domain::engine::Verdict;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Decided, MAX_KEY_CHARS, decided};
use crate::{Caller, Posting, RoomTools, ToolError};

/// What a decided input answers (REST's `Decision`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Decision {
    /// Whether it was decided by this call: false when the same input (its idempotency key)
    /// was decided before, whose decision this is.
    pub decided: bool,
    /// The Room's revision after the decision.
    pub revision: Option<i64>,
    /// Whether every entry of the log was accepted.
    pub accepted: Option<bool>,
    /// The decision log: the input's own verdict first, then what it set off.
    pub log: Vec<Decided>,
}

/// What `outcome` answers, or the domain's refusal of the input itself (its log's first
/// entry, a rejection by a rule) as a tool error with that rule and message: REST's 409.
pub(crate) fn decision(outcome: &Outcome) -> Result<Decision, ToolError> {
    let (decided_now, revision) = match outcome {
        Outcome::Decided { revision, .. } => (true, Some(revision.0)),
        Outcome::AlreadyDecided { revision, .. } => (false, Some(revision.0)),
        Outcome::AlreadyDone => (false, None),
    };
    if let Some(first) = outcome.log().first()
        && first.verdict == Verdict::Rejected
        && let Some(rule) = first.rule
    {
        return Err(ToolError::RuleRefused {
            rule,
            message: first.message.clone(),
            revision,
        });
    }
    let log = outcome.log();
    Ok(Decision {
        decided: decided_now,
        revision,
        accepted: (!matches!(outcome, Outcome::AlreadyDone))
            .then(|| log.iter().all(|entry| entry.verdict == Verdict::Accepted)),
        log: log.iter().map(decided).collect(),
    })
}

/// An idempotency key as a tool takes it: 1 to [`MAX_KEY_CHARS`] characters, none a
/// control character.
pub(crate) fn check_key(key: Option<&str>) -> Result<(), ToolError> {
    if let Some(key) = key {
        let chars = key.chars().count();
        if chars == 0 || chars > MAX_KEY_CHARS || key.chars().any(char::is_control) {
            return Err(ToolError::InvalidInput(format!(
                "idempotency_key must have 1 to {MAX_KEY_CHARS} characters and no control \
                 characters"
            )));
        }
    }
    Ok(())
}

impl RoomTools {
    /// The input id of `what` sent by `caller`: named by its idempotency key (the same key
    /// and input decide once), fresh without one.
    pub(crate) fn input_id(
        &self,
        caller: &Caller,
        key: Option<&str>,
        what: &str,
    ) -> Result<InputId, ToolError> {
        match key {
            Some(key) => Ok(InputId::named(&format!(
                "mcp/{}/{}/{what}/{key}",
                caller.room, caller.principal
            ))),
            None => Ok(self.coordinator.fresh_input_id()?),
        }
    }

    /// Refuses an input that needs deciding where this process only records (`agentroom mcp
    /// --stdio` on a store): a decision here could reserve calls no agent of this process
    /// would run.
    pub(crate) fn deciding(&self, what: &str) -> Result<(), ToolError> {
        match self.posting {
            Posting::Decide => Ok(()),
            Posting::Record => Err(ToolError::WrongState(format!(
                "{what} is decided by the host that coordinates the Room: connect through it \
                 (`agentroom mcp --stdio --host URL`, or its /mcp endpoint); nothing was changed"
            ))),
        }
    }
}
