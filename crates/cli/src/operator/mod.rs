//! The operator commands against a running host (issue 7): `agentroom budget show|raise|acknowledge|quotes`,
//! `agentroom objective list|show|pause|resume|cancel|correct|corrections`, `agentroom review
//! show|record`, `agentroom late-result list|readmit|discard` and `agentroom member
//! list|add|role|revoke`, each an HTTP client of the REST API that `agentroom serve` hosts
//! under `/v1/rooms/{room}/…`.
//!
//! - The host is `--host URL` (env `AGENTROOM_HOST`, default `http://127.0.0.1:8080`), the
//!   Room `--room R` (env `AGENTROOM_ROOM`).
//! - The bearer token is read from `--token-file FILE` or, without it, from the environment
//!   variable `AGENTROOM_TOKEN`; there is no `--token` argument, which would show in `ps`.
//! - Output is readable tables by default; `--json` prints the API's JSON as is (lists with
//!   every page fetched and merged, `next_cursor` null; `objective show` as
//!   `{"objective", "plans", "decisions"}`, each the API's answer).
//! - Exit codes: 0 done; 1 an error (the host unreachable, the token refused, a permission
//!   missing, something not found, a request a rule refused: the first entry of its decision
//!   log rejected, nothing changed); 2 a usage error (clap). A request that stands is exit 0
//!   even when something that followed from it was refused (a resume whose next dispatch
//!   waits for budget, B2); every entry of the decision log is printed.
//!
//! Every answer is read as the API's wire type (`agentroom-api-model`) before anything is
//! printed, `--json` included, so a changed contract is an error naming the field, never a
//! table of blanks or `$0`.
//!
//! Every failure is an [`OperatorError`] that says what to do about it; `main` prints it.

mod client;
mod member;
mod memory;
mod print;
mod redact;

use std::path::PathBuf;
use std::time::Duration;

use agentroom_domain::ids::{CriterionId, RoomId};
use agentroom_domain::money::{ParseMoneyError, UsdMicros};
use clap::{Args, Subcommand};
use serde_json::json;

use agentroom_api_model::responses::{
    Budget, Corrections, Decided, Decision, LateResult, ObjectiveBrief, ObjectiveDetail, Page,
    PlanVersionView, Reviews, RoomView,
};
use client::{Client, decided_or_refused, typed};
pub(crate) use member::{MemberCommand, member};
pub(crate) use memory::{MemoryCommand, memory};
use print::{
    budget_table, corrections_text, dollars, json_text, log_lines, objective_text,
    objectives_table, reviews_text, table, wire,
};
pub(crate) use redact::{RedactCommand, redact, redactions};

/// The environment variable holding the bearer token when `--token-file` is not given.
pub(crate) const TOKEN_ENV: &str = "AGENTROOM_TOKEN";

/// The exit codes of the operator commands, shown in their help.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 done; 1 error (host unreachable, token refused, permission missing, \
not found, refused by a rule; nothing changed); 2 usage error.\n\
The token comes from --token-file FILE or the environment variable AGENTROOM_TOKEN.";

/// How long one request may take, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The page size used to fetch whole lists.
const PAGE: usize = 200;

/// Where the host is, which Room, which token, and how to print.
#[derive(Args, Debug, Clone)]
pub(crate) struct Target {
    /// The running `agentroom serve`'s base URL.
    #[arg(
        long,
        env = "AGENTROOM_HOST",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL"
    )]
    host: String,
    /// The Room.
    #[arg(long, env = "AGENTROOM_ROOM", value_parser = RoomId::parse)]
    room: RoomId,
    /// A file holding the bearer token (`ar_…`); without it, the environment variable
    /// AGENTROOM_TOKEN. There is no --token argument: it would show in `ps`.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the API's JSON as is (for scripts) instead of tables.
    #[arg(long)]
    json: bool,
}

/// `agentroom budget …`
#[derive(Subcommand, Debug)]
pub(crate) enum BudgetCommand {
    /// The budget: limit, reserved, spent, uncertain, available; spend by objective, role and
    /// principal; the ledger entries.
    #[command(after_help = EXIT_CODES)]
    Show {
        #[command(flatten)]
        target: Target,
    },
    /// Raise the limit by an amount (B4; needs `budget.raise`, held by operators).
    #[command(after_help = EXIT_CODES)]
    Raise {
        #[command(flatten)]
        target: Target,
        /// By how much, in USD micros (1 USD = 1,000,000).
        #[arg(long, value_name = "MICROS", required_unless_present = "usd", conflicts_with = "usd", value_parser = positive_micros)]
        micros: Option<i64>,
        /// By how much, in dollars (e.g. `2.50`, at most six decimals).
        #[arg(long, value_name = "DOLLARS", value_parser = parse_usd)]
        usd: Option<i64>,
    },
    /// Acknowledge the Room's overrun (B5; needs `budget.acknowledge`, held by operators): new
    /// admissions resume without raising the limit; spent stays as charged. Refused (exit 1)
    /// when there is no overrun to acknowledge.
    #[command(after_help = EXIT_CODES)]
    Acknowledge {
        #[command(flatten)]
        target: Target,
    },
    /// Bring the Room's per-role quotes up to the models the host serves (B6; needs
    /// `budget.raise`): a Room whose quote is below its model's admits no call of that role
    /// until then. Recorded as a decision naming each role's model.
    #[command(after_help = EXIT_CODES)]
    Quotes {
        #[command(flatten)]
        target: Target,
    },
}

/// `agentroom budget quotes`: the Room's quotes brought up to the models the host serves.
async fn update_quotes(target: Target) -> Result<String, OperatorError> {
    let client = Client::new(&target)?;
    let answer = client.post("quotes", &json!({})).await?;
    let decision: Decision = typed("POST quotes", &answer)?;
    decided_or_refused(&decision)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let mut out = String::from("updated the Room's quotes\n");
    out.push_str(&log_lines(&decision));
    Ok(out)
}

/// `agentroom objective …`
#[derive(Subcommand, Debug)]
pub(crate) enum ObjectiveCommand {
    /// The Room's objectives and their status.
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        target: Target,
    },
    /// One objective: status, criteria, the board by column, plan versions and the decision
    /// log with the rule behind each decision.
    #[command(after_help = EXIT_CODES)]
    Show {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
    /// Pause the objective: nothing more is dispatched, running calls abort (D3).
    #[command(after_help = EXIT_CODES)]
    Pause {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
    /// Resume a paused objective (D3).
    #[command(after_help = EXIT_CODES)]
    Resume {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
    /// Cancel the objective for good (D3).
    #[command(after_help = EXIT_CODES)]
    Cancel {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
    /// Correct an active objective as its owner (O14, R6): what you now want, and, with
    /// --criterion, the criteria that replace the frozen ones. It resets the repair cycle,
    /// fences a review in flight and asks for a new plan. A completed or canceled objective is
    /// not reopened: post a new message instead.
    #[command(after_help = EXIT_CODES)]
    Correct {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
        /// The correction, in your words.
        #[arg(long, value_name = "TEXT")]
        text: String,
        /// A criterion of the new set, `ID=TEXT` (ID: a-z 0-9 - _); repeat for each. Without
        /// any, the criteria stay as they are.
        #[arg(long = "criterion", value_name = "ID=TEXT", value_parser = parse_criterion)]
        criteria: Vec<(String, String)>,
    },
    /// The owner's corrections of an objective, oldest first (O14): text, criteria, the plan
    /// version each led to.
    #[command(after_help = EXIT_CODES)]
    Corrections {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
}

/// `agentroom message …`
#[derive(Subcommand, Debug)]
pub(crate) enum MessageCommand {
    /// Owner messages not answered or made objectives yet: interpreting, waiting for the
    /// provider, or waiting for a person (and why).
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Retry a pending owner message its provider failed (unreachable for the whole window,
    /// or refused): its interpretation is issued again (owners and operators).
    #[command(after_help = EXIT_CODES)]
    Retry {
        #[command(flatten)]
        target: Target,
        /// The message's event id.
        #[arg(value_parser = parse_id)]
        event: String,
    },
}

/// The bearer token for `room` on the host at `host` (from `token_file` or
/// `AGENTROOM_TOKEN`), once the host has shown the Room to it (`GET /v1/rooms/{room}`): an
/// unreachable host, a refused token or another Room's name is an error before anything else
/// is done (`agentroom mcp --stdio --host`).
pub(crate) async fn token_for_room(
    host: &str,
    room: &RoomId,
    token_file: Option<PathBuf>,
) -> Result<String, OperatorError> {
    let target = Target {
        host: host.to_owned(),
        room: room.clone(),
        token_file,
        json: true,
    };
    let client = Client::new(&target)?;
    let answer = client.get(&format!("../{room}"), &[]).await?;
    let _: RoomView = typed("GET room", &answer)?;
    read_token(&target)
}

/// Runs `agentroom message …`.
pub(crate) async fn message(command: MessageCommand) -> Result<String, OperatorError> {
    match command {
        MessageCommand::List { target } => {
            let client = Client::new(&target)?;
            // The Room itself: `/v1/rooms/{room}`, without the trailing slash of the base.
            let answer = client.get(&format!("../{}", target.room), &[]).await?;
            let room: RoomView = typed("GET room", &answer)?;
            if target.json {
                return Ok(json_text(
                    &serde_json::to_value(&room.pending_messages).unwrap_or_default(),
                ));
            }
            if room.pending_messages.is_empty() {
                return Ok("no pending owner message\n".to_owned());
            }
            let rows: Vec<Vec<String>> = room
                .pending_messages
                .iter()
                .map(|m| {
                    let status = match (&m.held, &m.call) {
                        (Some(why), _) => format!("waits for attention: {why}"),
                        (None, Some(call)) => match &call.cause {
                            Some(cause) => format!("{}: {cause}", call.status),
                            None => call.status.clone(),
                        },
                        (None, None) => "waiting for budget or admission".to_owned(),
                    };
                    vec![
                        m.event.clone(),
                        m.attempts.to_string(),
                        status,
                        m.text.clone(),
                    ]
                })
                .collect();
            Ok(table(&["EVENT", "ATTEMPTS", "STATUS", "TEXT"], &rows))
        }
        MessageCommand::Retry { target, event } => {
            let client = Client::new(&target)?;
            let path = format!("messages/{event}/retry");
            let answer = client.post(&path, &json!({})).await?;
            let decision: Decision = typed(&format!("POST {path}"), &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("retried owner message {event}\n");
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
    }
}

/// `agentroom review …`
#[derive(Subcommand, Debug)]
pub(crate) enum ReviewCommand {
    /// An objective's reports and reviews: report version, source set, each criterion's
    /// verdict and evidence, the reviewer. For the report awaiting review it prints what
    /// `review record` needs: `--report-version N --observed OBJECTIVE:CONTROL`, the report
    /// version and the objective's revisions this answer shows (with --json: the API's
    /// `awaiting_review.version` and `observed.objective`, `observed.control`).
    #[command(after_help = EXIT_CODES)]
    Show {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
    },
    /// Record your review of the report awaiting review, as a human reviewer (R1, R2, R7):
    /// one --verdict per criterion, each with its --evidence; a `met` cites --source ids of
    /// the report and a --quote found in it or in a source's excerpt, or it is recorded as
    /// `unknown`. Name what you reviewed with the --report-version and --observed that
    /// `agentroom review show` printed: they are sent as given, never read from the host, so
    /// a correction or a control change since you looked fences the review (R6: refused;
    /// show the reviews again and review the report that awaits review now).
    #[command(after_help = EXIT_CODES)]
    Record {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
        /// The report version you reviewed, as `agentroom review show` printed it.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        report_version: u32,
        /// The objective's revisions you reviewed against, `OBJECTIVE:CONTROL` (its revision
        /// and its control revision), as `agentroom review show` printed them.
        #[arg(long, value_name = "OBJECTIVE:CONTROL", value_parser = parse_observed)]
        observed: Observed,
        /// A criterion's verdict, `CRITERION=met|unmet|unknown`; one per criterion.
        #[arg(long = "verdict", value_name = "CRITERION=VERDICT", value_parser = parse_verdict, required = true)]
        verdicts: Vec<(String, String)>,
        /// A verdict's evidence in your words, `CRITERION=TEXT`; one per verdict.
        #[arg(long = "evidence", value_name = "CRITERION=TEXT", value_parser = parse_pair)]
        evidence: Vec<(String, String)>,
        /// A source of the report a verdict rests on, `CRITERION=SOURCE_ID`; repeat for more.
        #[arg(long = "source", value_name = "CRITERION=SOURCE_ID", value_parser = parse_pair)]
        sources: Vec<(String, String)>,
        /// The words that prove a verdict, copied from the report or a source's excerpt,
        /// `CRITERION=QUOTE`.
        #[arg(long = "quote", value_name = "CRITERION=QUOTE", value_parser = parse_pair)]
        quotes: Vec<(String, String)>,
    },
}

/// `agentroom late-result …`
#[derive(Subcommand, Debug)]
pub(crate) enum LateResultCommand {
    /// Results held after a control change, awaiting readmission or discard (D4).
    #[command(after_help = EXIT_CODES)]
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Readmit a held result: its task completes with it (D4).
    #[command(after_help = EXIT_CODES)]
    Readmit {
        #[command(flatten)]
        target: Target,
        /// The operation that produced it.
        #[arg(value_parser = parse_id)]
        operation: String,
    },
    /// Discard a held result: its task stays open (D4).
    #[command(after_help = EXIT_CODES)]
    Discard {
        #[command(flatten)]
        target: Target,
        /// The operation that produced it.
        #[arg(value_parser = parse_id)]
        operation: String,
    },
}

/// Why an operator command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperatorError {
    /// Neither `--token-file` nor `AGENTROOM_TOKEN`.
    #[error("no token: give --token-file FILE or set {TOKEN_ENV}")]
    NoToken,
    /// The token file cannot be read or holds no token.
    #[error("token file {path}: {reason}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `--host` is not an http(s) URL.
    #[error("--host {host}: {reason}")]
    BadHost {
        /// As given.
        host: String,
        /// What is wrong.
        reason: String,
    },
    /// Nothing answered at the host.
    #[error(
        "cannot reach the agentroom host at {host}: {reason} (is `agentroom serve` running there? set --host or AGENTROOM_HOST)"
    )]
    Unreachable {
        /// The host.
        host: String,
        /// Connection refused, timed out, …
        reason: String,
    },
    /// 401.
    #[error(
        "the host refused the token (401 unauthorized): it is missing, invalid, expired or revoked; issue a new one with `agentroom token issue`"
    )]
    Unauthenticated,
    /// 403.
    #[error("forbidden (403): {message}{}", permission_note(permission, message))]
    Forbidden {
        /// The permission the API names, when it names one.
        permission: Option<String>,
        /// The API's message.
        message: String,
    },
    /// 404.
    #[error("not found (404): {0}")]
    NotFound(String),
    /// Another 4xx or a 5xx, with the API's message.
    #[error("the host answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The API's message (or the body).
        message: String,
    },
    /// The API decided the request and a rule refused it; nothing changed.
    #[error("refused{}: {message}", rule.as_deref().map(|r| format!(" by rule {r}")).unwrap_or_default())]
    Refused {
        /// The rule, when the decision names one.
        rule: Option<String>,
        /// The decision's message.
        message: String,
    },
    /// The arguments do not make a request (a verdict without evidence, evidence for no
    /// verdict, a verdict given twice); nothing was sent.
    #[error("{0}")]
    Arguments(String),
    /// The answer is not the JSON this command expects.
    #[error("the host's answer is not what this command expects: {0}")]
    BadAnswer(String),
}

/// The permission a 403 names, unless its message names it already.
fn permission_note(permission: &Option<String>, message: &str) -> String {
    match permission {
        Some(permission) if !message.contains(permission.as_str()) => {
            format!(" (missing permission `{permission}`)")
        }
        _ => String::new(),
    }
}

/// Runs one operator command; returns what to print.
pub(crate) async fn budget(command: BudgetCommand) -> Result<String, OperatorError> {
    match command {
        BudgetCommand::Show { target } => {
            let client = Client::new(&target)?;
            let first = client.get("budget", &[("limit", PAGE.to_string())]).await?;
            let budget = client.rest_of_pages("budget", first, "entries").await?;
            let typed_budget: Budget = typed("GET budget", &budget)?;
            if target.json {
                return Ok(json_text(&budget));
            }
            Ok(budget_table(&target.room, &typed_budget))
        }
        BudgetCommand::Quotes { target } => update_quotes(target).await,
        BudgetCommand::Raise {
            target,
            micros,
            usd,
        } => {
            let amount = micros.or(usd).ok_or(OperatorError::BadAnswer(
                "no amount (give --micros or --usd)".to_owned(),
            ))?;
            let client = Client::new(&target)?;
            let answer = client
                .post("budget/raise", &json!({"amount_micros": amount}))
                .await?;
            let decision: Decision = typed("POST budget/raise", &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!(
                "raised the limit of {} by {}\n",
                target.room,
                dollars(amount)
            );
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
        BudgetCommand::Acknowledge { target } => {
            let client = Client::new(&target)?;
            let answer = client.post("budget/acknowledge", &json!({})).await?;
            let decision: Decision = typed("POST budget/acknowledge", &answer)?;
            decided_or_refused(&decision)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!("acknowledged the overrun of {}\n", target.room);
            out.push_str(&log_lines(&decision));
            Ok(out)
        }
    }
}

/// `agentroom objective …`
pub(crate) async fn objective(command: ObjectiveCommand) -> Result<String, OperatorError> {
    let (target, objective, action) = match command {
        ObjectiveCommand::List { target } => {
            let client = Client::new(&target)?;
            let first = client
                .get("objectives", &[("limit", PAGE.to_string())])
                .await?;
            let list = client.rest_of_pages("objectives", first, "items").await?;
            let objectives: Page<ObjectiveBrief> = typed("GET objectives", &list)?;
            if target.json {
                return Ok(json_text(&list));
            }
            return Ok(objectives_table(&objectives));
        }
        ObjectiveCommand::Show { target, objective } => {
            let client = Client::new(&target)?;
            let path = format!("objectives/{objective}");
            let detail = client.get(&path, &[]).await?;
            let plans_path = format!("{path}/plans");
            let first = client
                .get(&plans_path, &[("limit", PAGE.to_string())])
                .await?;
            let plans = client.rest_of_pages(&plans_path, first, "items").await?;
            let decisions_path = format!("{path}/decisions");
            let first = client
                .get(&decisions_path, &[("limit", PAGE.to_string())])
                .await?;
            let decisions = client
                .rest_of_pages(&decisions_path, first, "items")
                .await?;
            let typed_detail: ObjectiveDetail = typed(&format!("GET {path}"), &detail)?;
            let typed_plans: Page<PlanVersionView> = typed(&format!("GET {plans_path}"), &plans)?;
            let typed_decisions: Page<Decided> =
                typed(&format!("GET {decisions_path}"), &decisions)?;
            if target.json {
                let whole = json!({"objective": detail, "plans": plans, "decisions": decisions});
                return Ok(json_text(&whole));
            }
            return Ok(objective_text(
                &typed_detail,
                &typed_plans,
                &typed_decisions,
            ));
        }
        ObjectiveCommand::Correct {
            target,
            objective,
            text,
            criteria,
        } => return correct(target, objective, text, criteria).await,
        ObjectiveCommand::Corrections { target, objective } => {
            let client = Client::new(&target)?;
            let path = format!("objectives/{objective}/corrections");
            let answer = client.get(&path, &[]).await?;
            let corrections: Corrections = typed(&format!("GET {path}"), &answer)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            return Ok(corrections_text(&corrections));
        }
        ObjectiveCommand::Pause { target, objective } => (target, objective, "pause"),
        ObjectiveCommand::Resume { target, objective } => (target, objective, "resume"),
        ObjectiveCommand::Cancel { target, objective } => (target, objective, "cancel"),
    };
    let client = Client::new(&target)?;
    let path = format!("objectives/{objective}/control");
    let answer = client.post(&path, &json!({"action": action})).await?;
    let decision: Decision = typed(&format!("POST {path}"), &answer)?;
    decided_or_refused(&decision)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let done = match action {
        "pause" => "paused",
        "resume" => "resumed",
        _ => "canceled",
    };
    let mut out = format!("{done} objective {objective}\n");
    out.push_str(&log_lines(&decision));
    Ok(out)
}

/// `agentroom objective correct`: the owner's correction, posted as an `owner_correction`
/// event (its author is the token's principal).
async fn correct(
    target: Target,
    objective: String,
    text: String,
    criteria: Vec<(String, String)>,
) -> Result<String, OperatorError> {
    let client = Client::new(&target)?;
    let mut body = json!({"kind": "owner_correction", "objective": objective, "text": text});
    if !criteria.is_empty() {
        body["criteria"] = criteria
            .iter()
            .map(|(id, text)| json!({"id": id, "text": text}))
            .collect();
    }
    let answer = client.post("events", &body).await?;
    let decision: Decision = typed("POST events", &answer)?;
    decided_or_refused(&decision)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let mut out = format!("corrected objective {objective}\n");
    out.push_str(&log_lines(&decision));
    Ok(out)
}

/// `agentroom review …`
pub(crate) async fn review(command: ReviewCommand) -> Result<String, OperatorError> {
    let (target, objective) = match command {
        ReviewCommand::Show { target, objective } => (target, objective),
        ReviewCommand::Record {
            target,
            objective,
            report_version,
            observed,
            verdicts,
            evidence,
            sources,
            quotes,
        } => {
            let said = Said {
                verdicts,
                evidence,
                sources,
                quotes,
            };
            return record_review(target, objective, report_version, observed, said).await;
        }
    };
    let client = Client::new(&target)?;
    let path = format!("objectives/{objective}/reviews");
    let reviews = client.get(&path, &[]).await?;
    let typed_reviews: Reviews = typed(&format!("GET {path}"), &reviews)?;
    if target.json {
        return Ok(json_text(&reviews));
    }
    Ok(reviews_text(&typed_reviews))
}

/// `agentroom late-result …`
pub(crate) async fn late_result(command: LateResultCommand) -> Result<String, OperatorError> {
    let (target, operation, decision) = match command {
        LateResultCommand::List { target } => {
            let client = Client::new(&target)?;
            let first = client
                .get("late-results", &[("limit", PAGE.to_string())])
                .await?;
            let list = client.rest_of_pages("late-results", first, "items").await?;
            let held: Page<LateResult> = typed("GET late-results", &list)?;
            if target.json {
                return Ok(json_text(&list));
            }
            let rows: Vec<Vec<String>> = held
                .items
                .iter()
                .map(|held| {
                    vec![
                        wire(&held.op),
                        wire(&held.objective),
                        wire(&held.task),
                        wire(&held.contribution),
                    ]
                })
                .collect();
            if rows.is_empty() {
                return Ok("no results held for readmission\n".to_owned());
            }
            return Ok(table(
                &["OPERATION", "OBJECTIVE", "TASK", "CONTRIBUTION"],
                &rows,
            ));
        }
        LateResultCommand::Readmit { target, operation } => (target, operation, "readmit"),
        LateResultCommand::Discard { target, operation } => (target, operation, "discard"),
    };
    let client = Client::new(&target)?;
    let path = format!("late-results/{operation}");
    let answer = client.post(&path, &json!({"decision": decision})).await?;
    let decided: Decision = typed(&format!("POST {path}"), &answer)?;
    decided_or_refused(&decided)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let done = if decision == "readmit" {
        "readmitted"
    } else {
        "discarded"
    };
    let mut out = format!("{done} the result of operation {operation}\n");
    out.push_str(&log_lines(&decided));
    Ok(out)
}

/// What a reviewer said on the command line, criterion by criterion.
struct Said {
    verdicts: Vec<(String, String)>,
    evidence: Vec<(String, String)>,
    sources: Vec<(String, String)>,
    quotes: Vec<(String, String)>,
}

impl Said {
    /// The review's verdicts: each criterion once, each with its evidence; evidence, sources
    /// and quotes only for criteria given a verdict.
    fn verdicts(&self) -> Result<Vec<serde_json::Value>, OperatorError> {
        let judged = |what: &str, pairs: &[(String, String)]| match pairs
            .iter()
            .find(|(c, _)| !self.verdicts.iter().any(|(v, _)| v == c))
        {
            Some((criterion, _)) => Err(OperatorError::Arguments(format!(
                "--{what} {criterion}=…: give `{criterion}` a --verdict first"
            ))),
            None => Ok(()),
        };
        judged("evidence", &self.evidence)?;
        judged("source", &self.sources)?;
        judged("quote", &self.quotes)?;
        let mut out = Vec::new();
        for (i, (criterion, verdict)) in self.verdicts.iter().enumerate() {
            if self.verdicts[..i].iter().any(|(c, _)| c == criterion) {
                return Err(OperatorError::Arguments(format!(
                    "--verdict {criterion}=… is given twice: one verdict per criterion"
                )));
            }
            let mut evidence = self.evidence.iter().filter(|(c, _)| c == criterion);
            let Some((_, said)) = evidence.next() else {
                return Err(OperatorError::Arguments(format!(
                    "--verdict {criterion}={verdict} needs --evidence {criterion}=TEXT"
                )));
            };
            if evidence.next().is_some() {
                return Err(OperatorError::Arguments(format!(
                    "--evidence {criterion}=… is given twice"
                )));
            }
            let sources: Vec<&String> = self
                .sources
                .iter()
                .filter(|(c, _)| c == criterion)
                .map(|(_, s)| s)
                .collect();
            let mut quotes = self.quotes.iter().filter(|(c, _)| c == criterion);
            let quote = quotes.next().map(|(_, q)| q);
            if quotes.next().is_some() {
                return Err(OperatorError::Arguments(format!(
                    "--quote {criterion}=… is given twice"
                )));
            }
            out.push(json!({
                "criterion": criterion,
                "verdict": verdict,
                "evidence": said,
                "sources": sources,
                "quote": quote,
            }));
        }
        Ok(out)
    }
}

/// `agentroom review record`: the review of report `version` as the reviewer saw it, bound
/// to the revisions they observed (R6): nothing of it is read from the host.
async fn record_review(
    target: Target,
    objective: String,
    version: u32,
    observed: Observed,
    said: Said,
) -> Result<String, OperatorError> {
    let verdicts = said.verdicts()?;
    let client = Client::new(&target)?;
    let path = format!("objectives/{objective}/reviews");
    let body = json!({
        "report_version": version,
        "observed": {
            "objective": observed.objective,
            "control": observed.control,
        },
        "verdicts": verdicts,
    });
    // R6 refuses over HTTP (409) or in the decision: either way, say what to do next.
    let fenced = |error: OperatorError| match error {
        OperatorError::Refused { rule, message } if rule.as_deref() == Some("R6") => {
            OperatorError::Refused {
                rule,
                message: format!(
                    "{message} (report v{version} at revisions {observed}; `agentroom review show {objective}` prints what awaits review now)"
                ),
            }
        }
        other => other,
    };
    let answer = client.post(&path, &body).await.map_err(fenced)?;
    let decision: Decision = typed(&format!("POST {path}"), &answer)?;
    decided_or_refused(&decision).map_err(fenced)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let mut out = format!(
        "recorded a review of report v{version} of objective {objective} (revisions {observed})\n"
    );
    out.push_str(&log_lines(&decision));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// `NAME=VALUE` with NAME a criterion id (a slug) and VALUE not blank.
fn parse_pair(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not CRITERION=VALUE"))?;
    let id = CriterionId::parse(name.trim()).map_err(|e| e.to_string())?;
    if value.trim().is_empty() {
        return Err(format!("`{text}`: the value after `=` is blank"));
    }
    Ok((id.to_string(), value.to_owned()))
}

/// The revisions a reviewer observed, as `--observed OBJECTIVE:CONTROL` reads and prints
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The objective's revision.
    objective: u64,
    /// Its control revision.
    control: u64,
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.objective, self.control)
    }
}

/// `OBJECTIVE:CONTROL`, two whole numbers: the revisions `agentroom review show` printed.
fn parse_observed(text: &str) -> Result<Observed, String> {
    let (objective, control) = text.split_once(':').ok_or_else(|| {
        format!("`{text}` is not OBJECTIVE:CONTROL (the revisions `agentroom review show` printed, such as 4:0)")
    })?;
    let whole = |part: &str, what: &str| {
        let part = part.trim();
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "`{text}`: the {what} revision `{part}` is not a whole number"
            ));
        }
        part.parse::<u64>()
            .map_err(|_| format!("`{text}`: the {what} revision `{part}` is too large"))
    };
    Ok(Observed {
        objective: whole(objective, "objective")?,
        control: whole(control, "control")?,
    })
}

/// A criterion of a correction, `ID=TEXT`.
fn parse_criterion(text: &str) -> Result<(String, String), String> {
    parse_pair(text)
}

/// A verdict, `CRITERION=met|unmet|unknown`.
fn parse_verdict(text: &str) -> Result<(String, String), String> {
    let (criterion, verdict) = parse_pair(text)?;
    let verdict = verdict.trim().to_ascii_lowercase();
    if !matches!(verdict.as_str(), "met" | "unmet" | "unknown") {
        return Err(format!(
            "`{text}`: a verdict is met, unmet or unknown, not `{verdict}`"
        ));
    }
    Ok((criterion, verdict))
}

/// An id in a path: a UUID (so nothing else reaches the URL).
fn parse_id(text: &str) -> Result<String, String> {
    uuid::Uuid::parse_str(text)
        .map(|id| id.hyphenated().to_string())
        .map_err(|_| format!("`{text}` is not an id (a UUID such as 0190c1d2-…)"))
}

fn positive_micros(text: &str) -> Result<i64, String> {
    let micros: i64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number of micros"))?;
    if micros <= 0 {
        return Err(format!("the amount must be positive, not {micros}"));
    }
    Ok(micros)
}

/// Dollars with at most six decimals, exactly (the domain's one money parse), as micros;
/// only a positive amount raises a limit.
fn parse_usd(text: &str) -> Result<i64, String> {
    let amount: UsdMicros = text
        .parse()
        .map_err(|err: ParseMoneyError| err.to_string())?;
    if !amount.is_positive() {
        return Err(format!("the amount must be positive, not {text}"));
    }
    Ok(amount.micros())
}

fn read_token(target: &Target) -> Result<String, OperatorError> {
    let token = match &target.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| OperatorError::TokenFile {
                path: path.clone(),
                reason: error.to_string(),
            })?
            .trim()
            .to_owned(),
        None => std::env::var(TOKEN_ENV)
            .map_err(|_| OperatorError::NoToken)?
            .trim()
            .to_owned(),
    };
    if token.is_empty() {
        return match &target.token_file {
            Some(path) => Err(OperatorError::TokenFile {
                path: path.clone(),
                reason: "it holds no token".to_owned(),
            }),
            None => Err(OperatorError::NoToken),
        };
    }
    if token.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(OperatorError::TokenFile {
            path: target
                .token_file
                .clone()
                .unwrap_or_else(|| PathBuf::from(format!("${TOKEN_ENV}"))),
            reason: "the token has spaces or characters a token never has".to_owned(),
        });
    }
    Ok(token)
}

// ---------------------------------------------------------------------------------------------
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_amounts_parse_to_micros_exactly_and_bad_ones_are_refused() {
        assert_eq!(parse_usd("2.50"), Ok(2_500_000));
        assert_eq!(parse_usd("$0.000001"), Ok(1));
        assert_eq!(parse_usd("3"), Ok(3_000_000));
        assert_eq!(parse_usd(".5"), Ok(500_000));
        for bad in [
            "",
            ".",
            "1.0000001",
            "-1",
            "1e3",
            "abc",
            "0",
            "0.000000",
            "99999999999999",
        ] {
            assert!(parse_usd(bad).is_err(), "{bad} was accepted");
        }
        assert!(positive_micros("0").is_err());
        assert!(positive_micros("-5").is_err());
        assert_eq!(positive_micros("5"), Ok(5));
    }

    #[test]
    fn r6_observed_revisions_parse_as_objective_colon_control_and_print_back() {
        let observed = parse_observed("4:0").unwrap();
        assert_eq!(
            observed,
            Observed {
                objective: 4,
                control: 0
            }
        );
        assert_eq!(observed.to_string(), "4:0");
        assert_eq!(parse_observed(" 12 : 3 ").unwrap().to_string(), "12:3");
        for bad in [
            "",
            "4",
            "4:",
            ":0",
            "4:0:1",
            "a:0",
            "4:-1",
            "-4:0",
            "4.0:0",
            "+4:0",
            "4;0",
            "99999999999999999999:0",
        ] {
            assert!(parse_observed(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_403_names_the_permission_once() {
        let named = OperatorError::Forbidden {
            permission: Some("budget.raise".to_owned()),
            message: "this needs the permission `budget.raise`".to_owned(),
        };
        assert_eq!(
            named.to_string(),
            "forbidden (403): this needs the permission `budget.raise`"
        );
        let unnamed = OperatorError::Forbidden {
            permission: Some("budget.raise".to_owned()),
            message: "no".to_owned(),
        };
        assert_eq!(
            unnamed.to_string(),
            "forbidden (403): no (missing permission `budget.raise`)"
        );
    }
}
