//! `agentroom redact artifact|memory` and `agentroom redactions` (issue 18): the owner
//! (`content.redact`) removes an artifact's content or a memory entry that holds a secret or
//! personal data from a running host; a redaction record (who, when, why, the digest of what
//! was removed) takes its place and the Room's history still replays. Everyone who reads the
//! Room lists the records.

use agentroom_api_model::requests::RedactionTargetBody;
use agentroom_api_model::responses::{Decision, Page, RedactionView};
use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::MemoryEntryId;
use agentroom_domain::redaction::reason_problem;
use clap::Subcommand;
use serde_json::json;

use super::client::{Client, decided_or_refused, typed};
use super::print::{clean, json_text, log_lines, table, wire};
use super::{EXIT_CODES, OperatorError, PAGE, Target};

/// A reason the API would refuse (blank, over 500 characters) is a usage error, before any
/// request.
fn reason(text: &str) -> Result<String, String> {
    match reason_problem(text) {
        Some(problem) => Err(problem),
        None => Ok(text.to_owned()),
    }
}

/// `agentroom redact …`
#[derive(Subcommand, Debug)]
pub(crate) enum RedactCommand {
    /// Redact content of the Room by its digest (a contribution's body, a source's excerpt,
    /// its outputs; `sha256:` and 64 hex digits): it leaves the store, reading it answers
    /// 410 with the redaction record, and no model sees it again. Needs `content.redact`
    /// (the owner's).
    #[command(after_help = EXIT_CODES)]
    Artifact {
        #[command(flatten)]
        target: Target,
        /// The content's digest.
        digest: ContentDigest,
        /// Why it is redacted (not blank, at most 500 characters).
        #[arg(long, value_parser = reason)]
        reason: String,
    },
    /// Redact a memory entry: every version of its text leaves the Room's state and stored
    /// history (they read `[redacted]`), it keeps its id and provenance and never reaches a
    /// model again. Needs `content.redact` (the owner's).
    #[command(after_help = EXIT_CODES)]
    Memory {
        #[command(flatten)]
        target: Target,
        /// The entry.
        entry: MemoryEntryId,
        /// Why it is redacted (not blank, at most 500 characters).
        #[arg(long, value_parser = reason)]
        reason: String,
    },
}

fn target_text(target: &RedactionTargetBody) -> String {
    match target {
        RedactionTargetBody::Artifact { digest } => format!("content {digest}"),
        RedactionTargetBody::Memory { entry } => format!("memory entry {entry}"),
    }
}

/// Runs `agentroom redact …`; returns what to print.
pub(crate) async fn redact(command: RedactCommand) -> Result<String, OperatorError> {
    let (target, body, reason) = match command {
        RedactCommand::Artifact {
            target,
            digest,
            reason,
        } => (target, RedactionTargetBody::Artifact { digest }, reason),
        RedactCommand::Memory {
            target,
            entry,
            reason,
        } => (target, RedactionTargetBody::Memory { entry }, reason),
    };
    let client = Client::new(&target)?;
    let answer = client
        .post("redactions", &json!({"target": body, "reason": reason}))
        .await?;
    let decision: Decision = typed("POST redactions", &answer)?;
    decided_or_refused(&decision)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let mut out = format!("redacted {}\n", target_text(&body));
    out.push_str(&log_lines(&decision));
    Ok(out)
}

/// Runs `agentroom redactions`: the Room's redaction records, oldest first.
pub(crate) async fn redactions(target: Target) -> Result<String, OperatorError> {
    let client = Client::new(&target)?;
    let first = client
        .get("redactions", &[("limit", PAGE.to_string())])
        .await?;
    let list = client.rest_of_pages("redactions", first, "items").await?;
    let records: Page<RedactionView> = typed("GET redactions", &list)?;
    if target.json {
        return Ok(json_text(&list));
    }
    let rows: Vec<Vec<String>> = records
        .items
        .iter()
        .map(|r| {
            vec![
                target_text(&r.target),
                wire(&r.by),
                r.at.to_string(),
                r.old_digest.clone(),
                clean(&r.why),
            ]
        })
        .collect();
    Ok(table(
        &["REDACTED", "BY", "AT (MS)", "OLD DIGEST", "WHY"],
        &rows,
    ))
}
