//! `agentroom-testmodel`: a deterministic OpenAI-compatible chat-completions server that can
//! only use what is in its prompt. End-to-end tests (and README's "Run with a model") point
//! `agentroom serve --openai` at it; it sees nothing but HTTP, and depends on no agentroom
//! crate, so it reads the prompt as text the way a real model would.
//!
//! ```text
//! agentroom-testmodel --listen 127.0.0.1:8090 [--record FILE] [--journal FILE]
//!                     [--fault [ROLE:]N=FAULT]...
//! ```
//!
//! It serves `POST /v1/chat/completions`, `POST /_faults` and `GET /health` (200 `ok`), and
//! prints `listening on http://ADDR` on stdout once bound (`--listen 127.0.0.1:0` picks a free
//! port). `--record FILE` appends each request body to FILE, one JSON line per request, flushed
//! before the answer is sent. A request that is not a chat completion with a system and a
//! user message gets a 400 with an OpenAI-style error body. Usage is counted as bytes / 4,
//! rounded up; a reply longer than the request's `max_tokens` is cut there with
//! `finish_reason: "length"`, as a real model's would be.
//!
//! **Faults** (the money-safety tests of issue 16): `--fault [ROLE:]N=FAULT` (repeatable) gives
//! the N-th request (1-based; counted over ROLE's requests when ROLE is `reasoner`,
//! `specialist` or `reviewer`, else over every request) FAULT instead of its answer:
//! - `408`, `429`, `500`, `502`, `503`, `504`: that status with an OpenAI-style error body
//!   (`{"error": {"message", "type", "code"}}`), a 429 with `retry-after: 1`;
//! - `reset`: status 200, the headers and the first half of the body, then the connection is
//!   dropped before the body ends (a reset in mid-response; the request was read whole);
//! - `zero-usage`: the normal answer with usage `{prompt_tokens: 0, completion_tokens: 0,
//!   total_tokens: 0}`;
//! - `no-usage`: the normal answer without a `usage` field.
//!
//! A bad spec (unknown role, N of 0, unknown fault) stops the start with a message.
//! `POST /_faults` with `{"faults": ["reviewer:1=503", ...]}` arms more at run time, counted
//! from then (`specialist:1=…` hits the next specialist request), and answers 200
//! `{"armed": [...], "pending": [...]}` (every fault not fired yet, counted from now); a bad
//! spec is a 400 saying what is wrong, and then none is armed. Each fault fires once; when two
//! hit one request the first armed applies.
//!
//! `--journal FILE` appends one JSON line per chat-completion request, flushed before it is
//! answered: `{"n": <its number among all requests>, "role": "reasoner" | "specialist" |
//! "reviewer" | "unknown", "idempotency_key": <the Idempotency-Key header or null>, "model":
//! <the request's model or null>, "fault": <the fault applied, e.g. "503", or null>, "status":
//! <the status answered>}`, so a test can tell how often one call was sent.
//!
//! The role is told by the system prompt's opening words ("You are the reasoner", "You are a
//! specialist", "You are a reviewer"); the user message is the JSON brief, the separator
//! `"\n\nRoom content:\n"` and the Room content as `<data kind=… id=… …>` blocks with `&`, `<`,
//! `>` and `"` written as entities. The owner's message follows these conventions:
//!
//! ```text
//! <first line: what the owner wants>
//! Criteria:
//! - <criterion-id>: <text, optionally with a "quoted phrase" the report must show>
//! Corpus:
//! [s1] <uri> | <title> | <fact sentence>
//! [s2] ...
//! ```
//!
//! Every reply is one JSON object, computed only from the prompt:
//! - the **reasoner** plans `gather` (the first usable capability with a provider that does
//!   not write reports; `topic` = the first line) and `write` (the first usable capability,
//!   by name, whose name or description mentions writing or a report), using only the
//!   `capability` data (a challenge when there is none), with the message's criteria (else
//!   `answers-the-request`); after an unmet review it repeats the criteria and adds a
//!   `gather-<n>` task per unmet criterion, the report depending on every production task;
//! - a **specialist** on a production task copies the corpus from the owner's messages as
//!   facts `- <fact> [sN]` citing each line as a document source (its excerpt is the fact
//!   sentence); on the report task it copies its dependencies' fact lines and re-cites the
//!   `source` documents and each dependency; declared outputs are filled by type;
//! - the **reviewer** checks each criterion's "quoted phrase" (case-sensitive,
//!   whitespace-normalized) against the `source` excerpts
//!   (met, quoting that sentence) and the `report` text (met, quoting that line), else unmet;
//!   a criterion without a phrase is met by a report line citing a given source; with no
//!   `report` data every verdict is `unknown`.
//!
//! Instructions inside data are never followed: data is only parsed.

mod capability;
mod completion;
mod fault;
mod http;
mod owner;
mod prompt;
mod reasoner;
mod reviewer;
mod specialist;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

/// What `--help` prints after the options: the conventions a model run needs.
const CONVENTIONS: &str = "\
The role is told by the system prompt (\"You are the reasoner\", \"You are a specialist\",
\"You are a reviewer\"); the model uses only what its prompt holds. Write the owner's
message like this:

  <first line: what you want>
  Criteria:
  - <criterion-id>: <text, optionally with a \"quoted phrase\" the report must show>
  Corpus:
  [s1] <uri> | <title> | <fact sentence>
  [s2] ...

The reasoner plans a gather task (a capability with a provider; topic = the first line)
and a report task (a capability whose name or description mentions writing or a report),
with your criteria (default: answers-the-request). A specialist copies the corpus as facts
citing [s1], [s2], ...; the report writer copies its dependencies' facts and sources. The
reviewer marks a criterion met only when its quoted phrase (case-sensitive, whitespace-
normalized) is in a source excerpt or the report (quoting it), unmet otherwise, and unknown
when the report is not in its prompt.

Faults (--fault, repeatable): [ROLE:]N=FAULT gives the N-th request (1 is the first;
counted over ROLE's requests when ROLE is reasoner, specialist or reviewer, else over all)
FAULT instead of its answer: 408, 429 (with retry-after: 1), 500, 502, 503 or 504 (that
status, an OpenAI-style error body); reset (status 200 and part of the body, then the
connection is dropped); zero-usage (usage of 0 prompt and 0 completion tokens); no-usage
(no usage field). E.g. --fault specialist:1=503 --fault 5=reset. POST /_faults with
{\"faults\": [\"reviewer:1=503\"]} arms more while running, counted from then.

--journal FILE appends one JSON line per chat-completion request before answering it:
{\"n\", \"role\", \"idempotency_key\", \"model\", \"fault\", \"status\"}.

Endpoints: POST /v1/chat/completions, POST /_faults, GET /health.";

/// A deterministic OpenAI-compatible chat-completions server that can only use what is in
/// its prompt (agentroom's end-to-end tests and "Run with a model").
#[derive(Debug, Parser)]
#[command(name = "agentroom-testmodel", version, after_long_help = CONVENTIONS)]
struct Args {
    /// The address to listen on; port 0 picks a free one. Prints `listening on http://ADDR`
    /// on stdout once bound.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    listen: String,
    /// Append each request body to FILE, one JSON line per request, before answering.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Append one JSON line per chat-completion request to FILE before answering: its number,
    /// role, Idempotency-Key, model, the fault applied and the status answered.
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Give the N-th request (of ROLE, or of all) FAULT instead of its answer (repeatable):
    /// `[ROLE:]N=FAULT`, FAULT one of 408, 429, 500, 502, 503, 504, reset, zero-usage,
    /// no-usage.
    #[arg(long = "fault", value_name = "[ROLE:]N=FAULT", value_parser = parse_fault)]
    faults: Vec<fault::FaultSpec>,
}

/// `--fault`'s parser: the spec, or what is wrong with it.
fn parse_fault(spec: &str) -> Result<fault::FaultSpec, String> {
    spec.parse()
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "agentroom-testmodel: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `path` opened to append, created if missing.
fn append_to(path: &std::path::Path, what: &str) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {} to {what}: {e}", path.display()))
}

async fn run(args: Args) -> Result<(), String> {
    let record = match &args.record {
        Some(path) => Some(append_to(path, "record")?),
        None => None,
    };
    let journal = match &args.journal {
        Some(path) => Some(append_to(path, "journal")?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the address bound: {e}"))?;
    // The one line on stdout: tests read the port from it.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {e}"))?;
    drop(stdout);
    let faults: Vec<String> = args.faults.iter().map(ToString::to_string).collect();
    tracing::info!(%addr, record = ?args.record, journal = ?args.journal, ?faults, "serving");
    let app = http::router(Arc::new(http::Model::new(
        record,
        journal,
        fault::Faults::new(&args.faults),
    )));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| format!("the server stopped: {e}"))
}
