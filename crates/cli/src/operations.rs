//! `agentroom operations list|resolve`: operators see uncertain and dead-lettered calls and
//! record what they confirmed, with who and why (D2).

use agentroom_coordinator::{Coordinator, CoordinatorConfig, ResolveOutcome};
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::{
    OperationFilter, OperationRecord, OperationStatus, Resolution, ResolutionOutcome,
};
use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use crate::store::{Missing, StoreArgs};

/// The host's service over an existing, migrated database: operator commands never create
/// one.
async fn service(store: &StoreArgs) -> anyhow::Result<Coordinator> {
    let store = store.open_rooms(Missing::Refuse).await?;
    Ok(Coordinator::builder(
        store,
        CoordinatorConfig::for_command("agentroom-operations"),
    )
    .build())
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List open operations (or only those in one state), oldest first.
    List {
        /// Only this state.
        #[arg(long, value_enum)]
        state: Option<StateFilter>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Record an operator's resolution of an uncertain or dead-lettered operation.
    Resolve(ResolveArgs),
}

/// `--state`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum StateFilter {
    /// No receipt and no live lease: the call may or may not have run.
    Uncertain,
    /// Recovery gave up.
    DeadLetter,
    /// A runner holds it now.
    InFlight,
    /// Resolved by an operator.
    Resolved,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["confirm_succeeded", "confirm_failed"])))]
pub(crate) struct ResolveArgs {
    /// The operation id.
    op: OperationId,
    /// The call ran (you checked the provider's own record): without its usage, the Room
    /// charges its whole reservation (B3); its result is lost, so the work is tried again.
    #[arg(long)]
    confirm_succeeded: bool,
    /// The call did not take effect and cost nothing: the Room releases its reservation and
    /// the work is open again.
    #[arg(long)]
    confirm_failed: bool,
    /// Who resolves it.
    #[arg(long)]
    operator: String,
    /// Why: what was checked.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<String> {
    match command {
        Command::List { state, json, store } => {
            let service = service(&store).await?;
            let filter = match state {
                None => OperationFilter::Open,
                Some(StateFilter::Uncertain) => OperationFilter::Status(OperationStatus::Uncertain),
                Some(StateFilter::DeadLetter) => {
                    OperationFilter::Status(OperationStatus::DeadLetter)
                }
                Some(StateFilter::InFlight) => OperationFilter::Status(OperationStatus::InFlight),
                Some(StateFilter::Resolved) => OperationFilter::Status(OperationStatus::Resolved),
            };
            let records = service.operations(filter).await?;
            Ok(if json {
                as_json(&records)
            } else {
                as_table(&records)
            })
        }
        Command::Resolve(args) => resolve(args).await,
    }
}

async fn resolve(args: ResolveArgs) -> anyhow::Result<String> {
    if args.operator.trim().is_empty() || args.reason.trim().is_empty() {
        bail!("--operator and --reason must say who resolves it and why");
    }
    let service = service(&args.store).await?;
    let outcome = if args.confirm_succeeded {
        ResolutionOutcome::Succeeded
    } else {
        ResolutionOutcome::Failed
    };
    let resolution = Resolution {
        outcome,
        operator: args.operator,
        reason: args.reason,
        at: service.now(),
    };
    let resolved = service
        .resolve_on_host(args.op, &resolution)
        .await
        .with_context(|| format!("resolving {}", args.op))?;
    match resolved {
        None => bail!("no operation {}", args.op),
        Some((record, ResolveOutcome::NotResolvable(_))) => bail!(
            "operation {} is {}, not uncertain or dead-lettered; nothing was changed",
            args.op,
            record.status.as_str()
        ),
        Some((_, ResolveOutcome::Recorded)) => {}
    }
    Ok(format!(
        "operation {} resolved as {} by {}; its Room applies the resolution at the next \
         recovery of its coordinator\n",
        args.op,
        outcome.as_str(),
        resolution.operator
    ))
}

fn as_json(records: &[OperationRecord]) -> String {
    let mut out = String::new();
    for r in records {
        let line = json!({
            "op": r.op().to_string(),
            "room": r.room.as_str(),
            "state": r.status.as_str(),
            "role": r.request.role.as_str(),
            "reservation_micros": r.request.reservation.micros(),
            "generation": r.generation,
            "recovery_attempts": r.recovery_attempts,
            "dead_letter_reason": r.dead_letter_reason,
            "resolution": r.resolution,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

fn as_table(records: &[OperationRecord]) -> String {
    if records.is_empty() {
        return "no operations\n".to_owned();
    }
    let mut out = format!(
        "{:<36}  {:<12}  {:<11}  {:<10}  {:>12}  {:>8}  {}\n",
        "OPERATION", "ROOM", "STATE", "ROLE", "RESERVED", "ATTEMPTS", "NOTE"
    );
    for r in records {
        let note = match (&r.resolution, &r.dead_letter_reason) {
            (Some(res), _) => format!(
                "{} ({}): {}",
                res.operator,
                res.outcome.as_str(),
                res.reason
            ),
            (None, Some(reason)) => reason.clone(),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "{:<36}  {:<12}  {:<11}  {:<10}  {:>12}  {:>8}  {}\n",
            r.op(),
            r.room.as_str(),
            r.status.as_str(),
            r.request.role.as_str(),
            r.request.reservation.to_string(),
            r.recovery_attempts,
            note
        ));
    }
    out
}
