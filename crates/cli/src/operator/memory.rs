//! `agentroom memory list|add|correct|retract` (issue 18 part 3, M1): the Room's memory on a
//! running host. Entries are added, corrected and retracted only by an explicit act of the
//! owner or an operator (`memory.manage`), each with its provenance: an owner message or a
//! contribution of the Room, or an external source's url and content digest. A correction
//! keeps the earlier texts; a retracted entry stays listed and never reaches a model.

use agentroom_api_model::requests::MemoryProvenance;
use agentroom_api_model::responses::{Decision, MemoryEntryView, Page};
use agentroom_domain::artifact::ContentDigest;
use agentroom_domain::ids::{ContributionId, EventId, MemoryEntryId};
use clap::{ArgGroup, Subcommand};
use serde_json::json;

use super::client::{Client, decided_or_refused, typed};
use super::print::{clean, json_text, log_lines, table, wire};
use super::{EXIT_CODES, OperatorError, PAGE, Target};

/// `agentroom memory …`
#[derive(Subcommand, Debug)]
pub(crate) enum MemoryCommand {
    /// The Room's memory, in the order added: current and retracted entries, each with
    /// what it came from and who added it.
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Add an entry with its provenance (needs `memory.manage`, held by owners and
    /// operators): exactly one of --from-message, --from-contribution or --from-url (with
    /// --digest).
    #[command(after_help = EXIT_CODES)]
    #[command(group(ArgGroup::new("provenance").required(true).args(["from_message", "from_contribution", "from_url"])))]
    Add {
        #[command(flatten)]
        target: Target,
        /// What the Room should remember (not blank, at most 1,000 characters).
        text: String,
        /// The owner message it came from (its event id).
        #[arg(long, value_name = "EVENT")]
        from_message: Option<EventId>,
        /// The contribution it came from.
        #[arg(long, value_name = "CONTRIBUTION")]
        from_contribution: Option<ContributionId>,
        /// The external document it came from.
        #[arg(long, value_name = "URL", requires = "digest")]
        from_url: Option<String>,
        /// The digest of the external document's content as read: `sha256:` and 64 hex digits.
        #[arg(long, value_name = "DIGEST", requires = "from_url")]
        digest: Option<ContentDigest>,
    },
    /// Correct an entry's text: the earlier texts stay in its history.
    #[command(after_help = EXIT_CODES)]
    Correct {
        #[command(flatten)]
        target: Target,
        /// The entry.
        entry: MemoryEntryId,
        /// Its text from now on.
        text: String,
    },
    /// Retract an entry: it stays listed, with who retracted it, when and why, and never
    /// reaches a model again.
    #[command(after_help = EXIT_CODES)]
    Retract {
        #[command(flatten)]
        target: Target,
        /// The entry.
        entry: MemoryEntryId,
        /// Why it is retracted.
        #[arg(long)]
        why: String,
    },
}

fn provenance_text(provenance: &MemoryProvenance) -> String {
    match provenance {
        MemoryProvenance::OwnerMessage { event } => format!("owner message {event}"),
        MemoryProvenance::Contribution { id } => format!("contribution {id}"),
        MemoryProvenance::External { url, digest } => format!("{url} ({digest})"),
    }
}

/// Runs `agentroom memory …`; returns what to print.
pub(crate) async fn memory(command: MemoryCommand) -> Result<String, OperatorError> {
    match command {
        MemoryCommand::List { target } => {
            let client = Client::new(&target)?;
            let first = client.get("memory", &[("limit", PAGE.to_string())]).await?;
            let list = client.rest_of_pages("memory", first, "items").await?;
            let entries: Page<MemoryEntryView> = typed("GET memory", &list)?;
            if target.json {
                return Ok(json_text(&list));
            }
            let rows: Vec<Vec<String>> = entries
                .items
                .iter()
                .map(|e| {
                    let state = match (&e.redacted, &e.retracted) {
                        (Some(r), _) => format!("redacted by {}: {}", wire(&r.by), clean(&r.why)),
                        (None, Some(r)) => {
                            format!("retracted by {}: {}", wire(&r.by), clean(&r.why))
                        }
                        (None, None) if e.versions.len() > 1 => {
                            format!("current (version {})", e.versions.len())
                        }
                        (None, None) => "current".to_owned(),
                    };
                    vec![
                        e.id.to_string(),
                        state,
                        clean(&provenance_text(&e.provenance)),
                        wire(&e.added_by),
                        clean(&e.text),
                    ]
                })
                .collect();
            Ok(table(
                &["ENTRY", "STATE", "FROM", "ADDED BY", "TEXT"],
                &rows,
            ))
        }
        MemoryCommand::Add {
            target,
            text,
            from_message,
            from_contribution,
            from_url,
            digest,
        } => {
            let provenance = match (from_message, from_contribution, from_url, digest) {
                (Some(event), _, _, _) => MemoryProvenance::OwnerMessage { event },
                (_, Some(id), _, _) => MemoryProvenance::Contribution { id },
                (_, _, Some(url), Some(digest)) => MemoryProvenance::External { url, digest },
                _ => {
                    return Err(OperatorError::Arguments(
                        "say where the entry came from: --from-message, --from-contribution, or --from-url with --digest".to_owned(),
                    ));
                }
            };
            let client = Client::new(&target)?;
            let body = json!({"text": text, "provenance": provenance});
            let answer = client.post("memory", &body).await?;
            let decision: Decision = typed("POST memory", &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!(
                "added a memory entry from {}\n",
                clean(&provenance_text(&provenance))
            );
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
        MemoryCommand::Correct {
            target,
            entry,
            text,
        } => {
            let client = Client::new(&target)?;
            let path = format!("memory/{entry}/correct");
            let answer = client.post(&path, &json!({"text": text})).await?;
            let decision: Decision = typed(&format!("POST {path}"), &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("corrected memory entry {entry}\n");
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
        MemoryCommand::Retract { target, entry, why } => {
            let client = Client::new(&target)?;
            let path = format!("memory/{entry}/retract");
            let answer = client.post(&path, &json!({"why": why})).await?;
            let decision: Decision = typed(&format!("POST {path}"), &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("retracted memory entry {entry}\n");
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
    }
}
