//! The operator commands against a running host (issue 7): `agentroom budget show|raise`,
//! `agentroom objective list|show|pause|resume|cancel`, `agentroom review show` and
//! `agentroom late-result list|readmit|discard`, each an HTTP client of the REST API that
//! `agentroom serve` hosts under `/v1/rooms/{room}/…`.
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
//! Every failure is an [`OperatorError`] that says what to do about it; `main` prints it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use agentroom_domain::ids::RoomId;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

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
}

/// `agentroom review …`
#[derive(Subcommand, Debug)]
pub(crate) enum ReviewCommand {
    /// An objective's reports and reviews: report version, source set, each criterion's
    /// verdict and evidence, the reviewer.
    #[command(after_help = EXIT_CODES)]
    Show {
        #[command(flatten)]
        target: Target,
        /// The objective's id.
        #[arg(value_parser = parse_id)]
        objective: String,
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
            if target.json {
                return Ok(json_text(&budget));
            }
            Ok(budget_table(&target.room, &budget))
        }
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
            decided_or_refused(&answer)?;
            if target.json {
                return Ok(json_text(&answer));
            }
            let mut out = format!(
                "raised the limit of {} by {}\n",
                target.room,
                dollars(amount)
            );
            out.push_str(&log_lines(&answer));
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
            if target.json {
                return Ok(json_text(&list));
            }
            return Ok(objectives_table(&list));
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
            let whole = json!({"objective": detail, "plans": plans, "decisions": decisions});
            if target.json {
                return Ok(json_text(&whole));
            }
            return Ok(objective_text(&whole));
        }
        ObjectiveCommand::Pause { target, objective } => (target, objective, "pause"),
        ObjectiveCommand::Resume { target, objective } => (target, objective, "resume"),
        ObjectiveCommand::Cancel { target, objective } => (target, objective, "cancel"),
    };
    let client = Client::new(&target)?;
    let answer = client
        .post(
            &format!("objectives/{objective}/control"),
            &json!({"action": action}),
        )
        .await?;
    decided_or_refused(&answer)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let done = match action {
        "pause" => "paused",
        "resume" => "resumed",
        _ => "canceled",
    };
    let mut out = format!("{done} objective {objective}\n");
    out.push_str(&log_lines(&answer));
    Ok(out)
}

/// `agentroom review …`
pub(crate) async fn review(command: ReviewCommand) -> Result<String, OperatorError> {
    let ReviewCommand::Show { target, objective } = command;
    let client = Client::new(&target)?;
    let reviews = client
        .get(&format!("objectives/{objective}/reviews"), &[])
        .await?;
    if target.json {
        return Ok(json_text(&reviews));
    }
    Ok(reviews_text(&reviews))
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
            if target.json {
                return Ok(json_text(&list));
            }
            let rows: Vec<Vec<String>> = items(&list, "items")
                .iter()
                .map(|held| {
                    ["op", "objective", "task", "contribution"]
                        .iter()
                        .map(|field| text(&held[*field]))
                        .collect()
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
    let answer = client
        .post(
            &format!("late-results/{operation}"),
            &json!({"decision": decision}),
        )
        .await?;
    decided_or_refused(&answer)?;
    if target.json {
        return Ok(json_text(&answer));
    }
    let done = if decision == "readmit" {
        "readmitted"
    } else {
        "discarded"
    };
    let mut out = format!("{done} the result of operation {operation}\n");
    out.push_str(&log_lines(&answer));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

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

/// Dollars with at most six decimals, exactly, as micros (no floating point).
fn parse_usd(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not an amount in dollars such as 2.50");
    let digits = text.strip_prefix('$').unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 6
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let fraction: i64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<6}").parse().map_err(|_| bad())?
    };
    let micros = whole
        .checked_mul(1_000_000)
        .and_then(|m| m.checked_add(fraction))
        .ok_or_else(bad)?;
    if micros <= 0 {
        return Err(format!("the amount must be positive, not {text}"));
    }
    Ok(micros)
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
// HTTP
// ---------------------------------------------------------------------------------------------

struct Client {
    http: reqwest::Client,
    host: String,
    base: reqwest::Url,
    token: String,
}

impl Client {
    fn new(target: &Target) -> Result<Client, OperatorError> {
        let host = target.host.trim_end_matches('/').to_owned();
        let bad = |reason: &str| OperatorError::BadHost {
            host: target.host.clone(),
            reason: reason.to_owned(),
        };
        let base = reqwest::Url::parse(&format!("{host}/v1/rooms/{}/", target.room))
            .map_err(|error| bad(&error.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("give an http:// or https:// URL"));
        }
        let token = read_token(target)?;
        // reqwest's rustls has no built-in crypto provider here: ring, as the OpenAI adapter.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            // The API never redirects; a redirect is not followed, so the token goes nowhere
            // but --host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| bad(&error.to_string()))?;
        Ok(Client {
            http,
            host,
            base,
            token,
        })
    }

    fn url(&self, path: &str, query: &[(&str, String)]) -> Result<reqwest::Url, OperatorError> {
        let mut url = self
            .base
            .join(path)
            .map_err(|error| OperatorError::BadHost {
                host: self.host.clone(),
                reason: error.to_string(),
            })?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in query {
                pairs.append_pair(name, value);
            }
        }
        Ok(url)
    }

    async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, OperatorError> {
        let request = self.http.get(self.url(path, query)?);
        self.send(request).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, OperatorError> {
        let request = self
            .http
            .post(self.url(path, &[])?)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.send(request).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, OperatorError> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|error| self.unreachable(&error))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|error| self.unreachable(&error))?;
        let parsed: Option<Value> = serde_json::from_str(&body).ok();
        if (200..300).contains(&status) {
            return parsed.ok_or_else(|| {
                OperatorError::BadAnswer(format!("status {status} with a body that is not JSON"))
            });
        }
        let message = parsed
            .as_ref()
            .and_then(|v| v["message"].as_str())
            .map_or_else(|| body.trim().to_owned(), str::to_owned);
        Err(match status {
            401 => OperatorError::Unauthenticated,
            403 => OperatorError::Forbidden {
                permission: parsed
                    .as_ref()
                    .and_then(|v| v["permission"].as_str())
                    .map(str::to_owned),
                message,
            },
            404 => OperatorError::NotFound(message),
            _ => OperatorError::Status { status, message },
        })
    }

    fn unreachable(&self, error: &reqwest::Error) -> OperatorError {
        let reason = if error.is_timeout() {
            "no answer in time".to_owned()
        } else if error.is_connect() {
            // The innermost cause says it best ("Connection refused (os error 111)").
            let mut cause: &dyn std::error::Error = error;
            while let Some(next) = cause.source() {
                cause = next;
            }
            format!("cannot connect ({cause})")
        } else {
            error.to_string()
        };
        OperatorError::Unreachable {
            host: self.host.clone(),
            reason,
        }
    }

    /// `first` with the `field` lists of every later page appended, `next_cursor` null.
    async fn rest_of_pages(
        &self,
        path: &str,
        mut first: Value,
        field: &str,
    ) -> Result<Value, OperatorError> {
        let mut cursor = first["next_cursor"].as_str().map(str::to_owned);
        while let Some(next) = cursor {
            let page = self
                .get(path, &[("limit", PAGE.to_string()), ("cursor", next)])
                .await?;
            let more = page[field].as_array().cloned().unwrap_or_default();
            match first[field].as_array_mut() {
                Some(list) => list.extend(more),
                None => {
                    return Err(OperatorError::BadAnswer(format!("no `{field}` list")));
                }
            }
            cursor = page["next_cursor"].as_str().map(str::to_owned);
        }
        if let Some(object) = first.as_object_mut() {
            object.insert("next_cursor".to_owned(), Value::Null);
        }
        Ok(first)
    }
}

/// A decided input that a rule refused is an error (nothing changed). The first entry of the
/// decision log is the verdict on the request itself; later entries are what followed from it
/// (a resumed objective's next dispatch may be refused for want of budget, B2, while the
/// resume stands), so the API's `accepted` (every entry accepted) is not the test.
fn decided_or_refused(answer: &Value) -> Result<(), OperatorError> {
    if answer["already_done"] == json!(true) {
        return Ok(());
    }
    let first = answer["log"].as_array().and_then(|log| log.first());
    let refused = match first {
        Some(entry) => entry["verdict"] == json!("rejected"),
        None => answer["accepted"] == json!(false),
    };
    if !refused {
        return Ok(());
    }
    Err(OperatorError::Refused {
        rule: first.and_then(|e| e["rule"].as_str()).map(str::to_owned),
        message: first
            .and_then(|e| e["message"].as_str())
            .unwrap_or("the request was decided and refused")
            .to_owned(),
    })
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

fn json_text(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    text.push('\n');
    text
}

/// `$1.234567` for micros, exactly.
pub(crate) fn dollars(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}${}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

fn micros_of(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// A value as one line of text, with control characters shown escaped (a title cannot
/// move the cursor or recolor the terminal).
fn text(value: &Value) -> String {
    let raw = match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    clean(&raw)
}

fn clean(raw: &str) -> String {
    raw.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn items<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value[field].as_array().map_or(&[], Vec::as_slice)
}

/// Left-aligned columns, two spaces apart.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let width = widths.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count());
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn log_lines(answer: &Value) -> String {
    let mut out = String::new();
    for entry in items(answer, "log") {
        let _ = writeln!(
            out,
            "  {} {}: {}",
            text(&entry["verdict"]),
            text(&entry["rule"]),
            text(&entry["message"])
        );
    }
    out
}

fn budget_table(room: &RoomId, budget: &Value) -> String {
    let balances = &budget["balances"];
    let mut out = format!("budget of room {room}\n");
    let rows: Vec<Vec<String>> = ["limit", "reserved", "spent", "uncertain", "available"]
        .iter()
        .map(|name| {
            let micros = micros_of(&balances[*name]);
            vec![(*name).to_owned(), dollars(micros), micros.to_string()]
        })
        .collect();
    out.push_str(&table(&["", "USD", "MICROS"], &rows));
    if !budget["overrun"].is_null() {
        let _ = writeln!(out, "overrun: {}", text(&budget["overrun"]));
    }
    for (title, field) in [
        ("objective", "spent_micros_by_objective"),
        ("role", "spent_micros_by_role"),
        ("principal", "spent_micros_by_principal"),
    ] {
        let _ = writeln!(out, "\nspent by {title}");
        let rows: Vec<Vec<String>> = budget[field]
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(key, micros)| {
                        let micros = micros_of(micros);
                        vec![clean(key), dollars(micros), micros.to_string()]
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&table(&[&title.to_uppercase(), "USD", "MICROS"], &rows));
    }
    let _ = writeln!(out, "\nledger");
    let rows: Vec<Vec<String>> = items(budget, "entries")
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let kind = text(&entry["entry"]);
            let (amount, detail) = match kind.as_str() {
                "opened" => (micros_of(&entry["limit"]), String::new()),
                "reserved" | "released" => (micros_of(&entry["amount"]), String::new()),
                "settled" => (
                    micros_of(&entry["charged"]),
                    format!("of {} reserved", dollars(micros_of(&entry["reserved"]))),
                ),
                "limit_raised" => (micros_of(&entry["by"]), String::new()),
                _ => (0, String::new()),
            };
            let amount = if kind == "marked_uncertain" || kind == "overrun_acknowledged" {
                "-".to_owned()
            } else {
                dollars(amount)
            };
            vec![
                (i + 1).to_string(),
                kind,
                text(&entry["op"]),
                amount,
                detail,
            ]
        })
        .collect();
    out.push_str(&table(&["#", "ENTRY", "OPERATION", "AMOUNT", ""], &rows));
    out
}

fn objectives_table(list: &Value) -> String {
    let rows: Vec<Vec<String>> = items(list, "items")
        .iter()
        .map(|o| {
            vec![
                text(&o["id"]),
                text(&o["status"]),
                text(&o["plan_versions"]),
                text(&o["owner"]),
                text(&o["title"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no objectives\n".to_owned();
    }
    table(&["OBJECTIVE", "STATUS", "PLANS", "OWNER", "TITLE"], &rows)
}

fn objective_text(whole: &Value) -> String {
    let o = &whole["objective"];
    let mut out = String::new();
    let _ = writeln!(out, "objective {}", text(&o["id"]));
    let _ = writeln!(out, "title:   {}", text(&o["title"]));
    let _ = writeln!(out, "status:  {}", text(&o["status"]));
    let _ = writeln!(out, "owner:   {}", text(&o["owner"]));
    let _ = writeln!(
        out,
        "revision {} (control {})",
        text(&o["revision"]),
        text(&o["control_revision"])
    );
    if !o["awaiting_review"].is_null() {
        let _ = writeln!(
            out,
            "awaiting review: report v{}",
            text(&o["awaiting_review"]["version"])
        );
    }
    let _ = writeln!(out, "\ncriteria");
    let rows: Vec<Vec<String>> = items(o, "criteria")
        .iter()
        .map(|c| vec![text(&c["id"]), text(&c["text"])])
        .collect();
    out.push_str(&table(&["CRITERION", "TEXT"], &rows));
    match o["board"].as_object() {
        None => {
            let _ = writeln!(out, "\nboard: no plan yet");
        }
        Some(board) => {
            let _ = writeln!(
                out,
                "\nboard (plan v{})",
                text(board.get("plan_version").unwrap_or(&Value::Null))
            );
            for column in board
                .get("columns")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice)
            {
                let tasks = items(column, "tasks");
                let _ = writeln!(out, "{} ({})", text(&column["column"]), tasks.len());
                for task in tasks {
                    let _ = writeln!(
                        out,
                        "  {}  {}  [{} by {}, {}]",
                        text(&task["key"]),
                        text(&task["title"]),
                        text(&task["capability"]),
                        text(&task["assignee"]),
                        task_state(&task["state"]),
                    );
                }
            }
        }
    }
    let _ = writeln!(out, "\nplan versions");
    let rows: Vec<Vec<String>> = items(&whole["plans"], "items")
        .iter()
        .map(|plan| {
            let diff = &plan["diff"];
            let keys = |field: &str| {
                items(diff, field)
                    .iter()
                    .map(text)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mut change = Vec::new();
            for field in ["added", "removed", "changed", "reused"] {
                let list = keys(field);
                if !list.is_empty() {
                    change.push(format!("{field} {list}"));
                }
            }
            vec![
                format!(
                    "v{}{}",
                    text(&plan["number"]),
                    if plan["current"] == json!(true) {
                        "*"
                    } else {
                        ""
                    }
                ),
                text(&plan["trigger"]["trigger"]),
                change.join("; "),
                text(&plan["explanation"]),
            ]
        })
        .collect();
    out.push_str(&table(&["PLAN", "TRIGGER", "DIFF", "EXPLANATION"], &rows));
    let _ = writeln!(out, "\ndecision log");
    let rows: Vec<Vec<String>> = items(&whole["decisions"], "items")
        .iter()
        .map(|d| {
            vec![
                text(&d["revision"]),
                text(&d["input"]),
                text(&d["verdict"]),
                text(&d["rule"]),
                text(&d["message"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "(no decisions recorded by this host process since it started)"
        );
    } else {
        out.push_str(&table(
            &["REVISION", "INPUT", "VERDICT", "RULE", "MESSAGE"],
            &rows,
        ));
    }
    out
}

fn task_state(state: &Value) -> String {
    let name = text(&state["state"]);
    match state["reason"].as_str() {
        Some(reason) => format!("{name}: {}", clean(reason)),
        None => name,
    }
}

fn reviews_text(reviews: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "reviews of objective {}", text(&reviews["objective"]));
    let criteria = items(reviews, "criteria");
    let _ = writeln!(out, "\ncriteria");
    let rows: Vec<Vec<String>> = criteria
        .iter()
        .map(|c| vec![text(&c["id"]), text(&c["text"])])
        .collect();
    out.push_str(&table(&["CRITERION", "TEXT"], &rows));
    if !reviews["awaiting_review"].is_null() {
        let _ = writeln!(
            out,
            "\nawaiting review: report v{}",
            text(&reviews["awaiting_review"]["version"])
        );
    }
    let all_reviews = items(reviews, "reviews");
    for report in items(reviews, "reports") {
        let version = &report["version"];
        let _ = writeln!(out, "\nreport v{}", text(version));
        let _ = writeln!(out, "  task:         {}", text(&report["task"]));
        let _ = writeln!(out, "  contribution: {}", text(&report["contribution"]));
        let _ = writeln!(
            out,
            "  author:       {}",
            text(&report["content"]["author"])
        );
        let _ = writeln!(
            out,
            "  source set:   {}",
            text(&report["source_set"]["digest"])
        );
        for source in items(&report["source_set"], "sources") {
            let what = source
                .as_object()
                .map(|fields| {
                    fields
                        .iter()
                        .filter(|(name, _)| name.as_str() != "kind")
                        .map(|(_, value)| text(value))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let _ = writeln!(out, "    - {} {what}", text(&source["kind"]));
        }
        let of_version: Vec<&Value> = all_reviews
            .iter()
            .filter(|r| &r["report_version"] == version)
            .collect();
        if of_version.is_empty() {
            let _ = writeln!(out, "  no review yet");
        }
        for review in of_version {
            let _ = writeln!(
                out,
                "  review {} by {}: {}",
                text(&review["id"]),
                text(&review["reviewer"]),
                text(&review["outcome"])
            );
            let rows: Vec<Vec<String>> = items(review, "verdicts")
                .iter()
                .map(|v| {
                    vec![
                        format!("    {}", text(&v["criterion"])),
                        text(&v["verdict"]),
                        text(&v["evidence"]),
                    ]
                })
                .collect();
            out.push_str(&table(&["    CRITERION", "VERDICT", "EVIDENCE"], &rows));
        }
    }
    if items(reviews, "reports").is_empty() {
        let _ = writeln!(out, "\nno report yet");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dollars_are_exact_for_micros_of_either_sign() {
        assert_eq!(dollars(0), "$0.000000");
        assert_eq!(dollars(9_500), "$0.009500");
        assert_eq!(dollars(1_000_000), "$1.000000");
        assert_eq!(dollars(-2_500_001), "-$2.500001");
        assert_eq!(dollars(i64::MIN), "-$9223372036854.775808");
    }

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
    fn control_characters_in_titles_are_shown_escaped() {
        assert_eq!(clean("a\u{1b}[31mred\nb"), "a\\u{1b}[31mred\\nb");
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

    #[test]
    fn a_rejected_decision_is_an_error_naming_its_rule() {
        let answer = json!({"decided": true, "accepted": false, "log": [
            {"verdict": "rejected", "rule": "D3", "message": "the objective is already paused"}
        ]});
        let error = decided_or_refused(&answer).unwrap_err();
        assert_eq!(
            error.to_string(),
            "refused by rule D3: the objective is already paused"
        );
        assert!(decided_or_refused(&json!({"decided": true, "accepted": true})).is_ok());
        // The resume stands though its consequence, the next dispatch, was refused (B2).
        let resumed = json!({"decided": true, "accepted": false, "log": [
            {"verdict": "accepted", "rule": "D3", "message": "resumed"},
            {"verdict": "rejected", "rule": "B2", "message": "not admitted"}
        ]});
        assert!(decided_or_refused(&resumed).is_ok());
        assert!(decided_or_refused(&json!({"decided": false, "already_done": true})).is_ok());
    }
}
