//! `agentroom providers check CONFIG`: one tiny chat completion for each distinct role,
//! endpoint and model of a providers configuration (the file `serve --openai` reads), through
//! the adapter's own request, response and charge code (`OpenAi::check`), so what it reports
//! is what a call would meet: reachable or not, the key taken or not, the model known or not,
//! the usage reported and what that usage is charged (B3 at `prices.toml`'s prices, rounded
//! up per component, B6).
//!
//! One line per check, as it finishes: who is served, the endpoint, the model, then `ok` with
//! the latency, the usage and the charge, or the failure's class — `not sent` (nothing reached
//! the server, or it did not take the request: a 429), `refused` (it answered that it will not
//! run it: another 3xx or 4xx) or `uncertain` (it may have run: a timeout after sending, a
//! broken connection, 408, 409, a 5xx) — and why. Exits non-zero when any check failed.
//! Each check is sent once, under a fresh `Idempotency-Key`; outside any Room, it reserves
//! nothing.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentroom_agents::Served;
use agentroom_agents::openai::{CheckReply, OpenAi};
use agentroom_domain::engine::Charge;
use agentroom_domain::ids::OperationId;
use agentroom_ports::AgentOutcome;
use anyhow::bail;
use clap::Subcommand;
use uuid::Uuid;

use crate::host;
use crate::policies::{self, PolicyFiles};

/// The namespace of the checks' operation ids (`Idempotency-Key`).
const NAMESPACE: Uuid = Uuid::from_u128(0x7072_6f76_6964_6572_732d_6368_6563_6b00);

/// `agentroom providers …`
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Send one tiny chat completion (asking for `{}` as JSON) for each distinct role,
    /// endpoint and model of CONFIG and print, per line, who it serves, the endpoint, the
    /// model, the latency, the usage and what that usage is charged; or the failure and its
    /// class (not sent, refused, uncertain). Exits non-zero when any check failed. Keys come
    /// from the variables the configuration names, as for `serve`.
    Check {
        /// The providers configuration, as `serve --openai CONFIG` reads it.
        config: PathBuf,
        /// The folder of `prices.toml` (and the other policy files, validated too); its files
        /// override the built-in shipped ones (default: `./policies` if it exists, else the
        /// built-in policies alone).
        #[arg(long, value_name = "DIR")]
        policies: Option<PathBuf>,
    },
}

/// Runs `command`, printing each check as it finishes.
pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    let Command::Check { config, policies } = command;
    let prices = policies::load(&PolicyFiles::new(policies)?)?.prices;
    let providers = host::providers_config(&config)?
        .build_from_env(&prices)
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
    let checks = distinct(providers.adapters());
    let mut failed = 0;
    for (n, check) in checks.iter().enumerate() {
        let op = fresh_op(n);
        let started = Instant::now();
        let outcome = check.adapter.check(check.served.role, op).await;
        let line = describe(check, started.elapsed(), &outcome);
        if !matches!(outcome, AgentOutcome::Returned { .. }) {
            failed += 1;
        }
        crate::output::print_line(&line)?;
    }
    if failed > 0 {
        bail!("{failed} of {} provider checks failed", checks.len());
    }
    crate::output::print_line(&format!("{} provider checks: all ok", checks.len()))?;
    Ok(())
}

/// One check: a role, endpoint and model, and everyone it serves there.
struct Check<'a> {
    served: &'a Served,
    who: Vec<String>,
    adapter: &'a OpenAi,
}

/// The distinct (role, endpoint, model) of `adapters`, in the order served, each with every
/// one it serves (several specialists may share one).
fn distinct<'a>(adapters: impl Iterator<Item = (&'a Served, &'a OpenAi)>) -> Vec<Check<'a>> {
    let mut checks: Vec<Check<'a>> = Vec::new();
    for (served, adapter) in adapters {
        match checks.iter_mut().find(|c| {
            c.served.role == served.role
                && c.served.endpoint == served.endpoint
                && c.served.model == served.model
        }) {
            Some(check) => check.who.push(served.who()),
            None => checks.push(Check {
                served,
                who: vec![served.who()],
                adapter,
            }),
        }
    }
    checks
}

/// A fresh operation id for check `n` of this process: its `Idempotency-Key`, so a proxy or
/// provider that honours the key never answers one check with another's reply.
fn fresh_op(n: usize) -> OperationId {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{now}/{}/{n}", std::process::id());
    OperationId::from_uuid(Uuid::new_v5(&NAMESPACE, name.as_bytes()))
}

/// The line of one check: `WHO: endpoint E (URL), model M: ok in N ms, …` or the failure.
fn describe(check: &Check<'_>, took: Duration, outcome: &AgentOutcome<CheckReply>) -> String {
    let served = check.served;
    let head = format!(
        "{}: endpoint {} ({}), model {}",
        check.who.join(", "),
        served.endpoint,
        served.url,
        served.model
    );
    let ms = took.as_millis();
    match outcome {
        AgentOutcome::Returned { result, .. } => {
            let usage = match result.usage {
                Some(usage) => format!(
                    "{} prompt + {} completion tokens",
                    usage.input_tokens, usage.output_tokens
                ),
                None => "no usage reported".to_owned(),
            };
            let charge = match result.charge {
                Charge::Actual(cost) => format!("charged {cost} ({} micros)", cost.micros()),
                Charge::NoUsage => format!(
                    "a call is charged its whole reservation (B3), {} ({} micros) for this role",
                    served.quote,
                    served.quote.micros()
                ),
            };
            format!("{head}: ok in {ms} ms, {usage}, {charge}")
        }
        AgentOutcome::NotSent { reason, .. } => format!("{head}: not sent in {ms} ms: {reason}"),
        AgentOutcome::Refused { reason } => format!("{head}: refused in {ms} ms: {reason}"),
        AgentOutcome::Uncertain { reason } => format!("{head}: uncertain in {ms} ms: {reason}"),
    }
}
