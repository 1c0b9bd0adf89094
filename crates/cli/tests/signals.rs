//! Owner corrections and agent-host signals through the running loop (issue 18), end to end:
//! the real `agentroom` binary creates the Room, persists the owner's message, runs `serve`
//! with scripted agents, and the owner, the reviewer and the hosted specialist act over HTTP
//! (the operator CLI, or the REST API as an agent host calls it). Each test runs on the
//! embedded SQLite file and on a fresh PostgreSQL database.
//!
//! - R6, O14: the owner corrects an objective whose report v2 awaits a human review with a new
//!   criterion (`agentroom objective correct`): the repair cycle resets (one failed report
//!   version back to none), the review prepared before it cannot consume the correction (it
//!   is refused, before and after the next report, over REST and from the CLI: `agentroom
//!   review record` sends the report version and revisions `agentroom review show` printed
//!   before the correction, never the current ones), the correction history reads back
//!   (`agentroom objective corrections`), a review that leaves out the new criterion is
//!   refused, and the review of report v3 that covers both, recorded with what a fresh
//!   `review show` printed, completes the objective.
//! - O12, O13: sam's agent host acknowledges that one of its two tasks waits outside; the
//!   other's result, the report and the model review go ahead and complete the objective with
//!   that task still waiting; then sam's receipts for the completed objective are consumed
//!   without a model call (no reservation in the ledger), while a bystander's is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::model::{get, listening, request, wait_until};
use support::{Database, Running, migrate_up};
use tempfile::TempDir;

const ROOM: &str = "lab";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Where the Room lives: the embedded file under the site's folder, or a database of its own
/// on the shared PostgreSQL server.
struct Site {
    database: Option<Database>,
    dir: TempDir,
}

impl Site {
    fn sqlite() -> Site {
        Site {
            database: None,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn postgres() -> Site {
        let database = Database::create();
        migrate_up(&database.url());
        Site {
            database: Some(database),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store_args(&self) -> Vec<String> {
        match &self.database {
            Some(db) => vec!["--database-url".to_owned(), db.url()],
            None => vec![
                "--root".to_owned(),
                self.dir.path().join("data").display().to_string(),
            ],
        }
    }

    /// A policy folder: the shipped access, prices, capabilities and bindings, and a
    /// `room.toml` naming them whose reviews are `review` (`model` or `human`).
    fn policies(&self, review: &str) -> PathBuf {
        let policies = self.dir.path().join("policies");
        std::fs::create_dir_all(policies.join("capabilities")).unwrap();
        for file in ["access.toml", "prices.toml", "bindings.yaml"] {
            std::fs::copy(repo(&format!("policies/{file}")), policies.join(file)).unwrap();
        }
        for file in ["research.yaml", "writing.yaml"] {
            std::fs::copy(
                repo(&format!("policies/capabilities/{file}")),
                policies.join("capabilities").join(file),
            )
            .unwrap();
        }
        std::fs::write(
            policies.join("room.toml"),
            format!(
                "[review]\nsource = \"{review}\"\n\n[capabilities]\nfiles = [\"capabilities/research.yaml\", \"capabilities/writing.yaml\"]\nbindings = [\"bindings.yaml\"]\n"
            ),
        )
        .unwrap();
        policies
    }

    /// `agentroom ARGS` on this site's store, with none of the environment a developer may
    /// set.
    fn agentroom(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(args)
            .args(self.store_args())
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_HOST")
            .env_remove("AGENTROOM_ROOM")
            .env_remove("AGENTROOM_LOG")
            .env_remove("AGENTROOM_TOKEN");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.agentroom(args).output().unwrap();
        assert!(out.status.success(), "agentroom {args:?}: {out:?}");
        out
    }

    fn token_file(&self, who: &str) -> PathBuf {
        self.dir.path().join(format!("{who}.token"))
    }

    fn token(&self, who: &str) -> String {
        std::fs::read_to_string(self.token_file(who))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// `room create` with README's members under `policies`; the owner's token and a token
    /// for each of `others` (`token issue`) are kept in files.
    fn create_room(&self, policies: &Path, others: &[&str]) {
        let policies = policies.to_str().unwrap();
        let created = self.run(&[
            "room",
            "create",
            "--room",
            ROOM,
            "--owner",
            "olive",
            "--member",
            "oscar=operator",
            "--member",
            "sam=specialist",
            "--member",
            "sue=specialist",
            "--member",
            "rita=reviewer",
            "--model",
            "scripted",
            "--limit-micros",
            "1000000",
            "--policies",
            policies,
        ]);
        let printed = String::from_utf8(created.stdout).unwrap();
        let owner = printed
            .lines()
            .find_map(|l| l.strip_prefix("owner token (olive): "))
            .unwrap_or_else(|| panic!("no owner token: {printed}"));
        std::fs::write(self.token_file("olive"), owner.trim()).unwrap();
        for who in others {
            let out = self.run(&[
                "token",
                "issue",
                "--room",
                ROOM,
                "--principal",
                who,
                "--json",
            ]);
            let issued: Value = serde_json::from_slice(&out.stdout).unwrap();
            std::fs::write(self.token_file(who), issued["token"].as_str().unwrap()).unwrap();
        }
    }

    /// The owner's message, persisted with `event post`.
    fn post(&self, text: &str) {
        self.run(&["event", "post", "--room", ROOM, "--as", "olive", text]);
    }

    /// `agentroom serve` playing `scenario` under `policies`, with more arguments; the
    /// process and its address.
    fn serve(&self, policies: &Path, scenario: &str, extra: &[&str]) -> (Running, String) {
        let mut serve = self.agentroom(&["serve", "--listen", "127.0.0.1:0", "--room", ROOM]);
        serve
            .arg("--policies")
            .arg(policies)
            .arg("--agents")
            .arg(repo(scenario))
            .arg("--journal")
            .arg(self.dir.path().join("journal.jsonl"))
            .args(["--poll-ms", "50"])
            .args(extra)
            .stderr(Stdio::inherit());
        listening(serve, "agentroom listening on http://")
    }

    /// An operator command as `who` against the host at `address`.
    fn cli(&self, address: &str, who: &str, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(args)
            .args(["--host", &format!("http://{address}"), "--room", ROOM])
            .arg("--token-file")
            .arg(self.token_file(who))
            .env_remove("AGENTROOM_HOST")
            .env_remove("AGENTROOM_ROOM")
            .env_remove("AGENTROOM_TOKEN");
        command.output().unwrap()
    }

    /// [`Site::cli`] with `--json`, which must succeed; its answer.
    fn cli_json(&self, address: &str, who: &str, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.cli(address, who, &args);
        assert!(
            out.status.success(),
            "{args:?} as {who}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// `POST path` with `body` as `token`: the status and the answer.
fn post(address: &str, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let (status, answer) = request(address, "POST", path, token, Some(body));
    let answer = serde_json::from_str(&answer).unwrap_or(Value::String(answer));
    (status, answer)
}

/// The one objective's id, once it exists.
fn objective_id(address: &str, token: &str) -> String {
    wait_until("an objective", || {
        let list = get(address, "/v1/rooms/lab/objectives", token);
        list["items"][0]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| list.to_string())
    })
}

/// The objective's reviews once report `version` awaits review.
fn awaiting(address: &str, token: &str, id: &str, version: u64) -> Value {
    wait_until(&format!("report v{version} to await review"), || {
        let reviews = get(
            address,
            &format!("/v1/rooms/lab/objectives/{id}/reviews"),
            token,
        );
        if reviews["awaiting_review"]["version"] == version {
            Ok(reviews)
        } else {
            Err(reviews.to_string())
        }
    })
}

/// R7 evidence for report `version`: its first source's id and the first line of its body.
fn evidence(reviews: &Value, version: u64) -> (String, String) {
    let report = reviews["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["version"] == version)
        .unwrap_or_else(|| panic!("no report v{version}: {reviews}"));
    let source = report["content"]["sources"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} cites nothing: {report}"))
        .to_owned();
    let quote = report["content"]["body"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} has no body: {report}"))
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap()
        .to_owned();
    (source, quote)
}

/// `agentroom review show` as `who`, once a report awaits review: the report version and the
/// revisions it printed for `review record` (`--report-version N --observed OBJ:CTRL`), the
/// same as its `--json` answer's `awaiting_review.version` and `observed`.
fn shown(site: &Site, address: &str, who: &str, id: &str) -> (String, String) {
    let out = site.cli(address, who, &["review", "show", id]);
    assert!(out.status.success(), "review show: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("  record your review of it with: "))
        .unwrap_or_else(|| panic!("no `record your review` line in\n{text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |option: &str| {
        let at = words
            .iter()
            .position(|w| *w == option)
            .unwrap_or_else(|| panic!("no {option} in `{line}`"));
        words[at + 1].to_owned()
    };
    let (version, observed) = (after("--report-version"), after("--observed"));
    assert_eq!(words[..4], ["agentroom", "review", "record", id], "{line}");
    assert!(
        text.lines()
            .any(|l| l == format!("awaiting review: report v{version} at revisions {observed}")),
        "{text}"
    );
    let json = site.cli_json(address, who, &["review", "show", id]);
    assert_eq!(
        json["awaiting_review"]["version"].to_string(),
        version,
        "{json}"
    );
    assert_eq!(
        format!(
            "{}:{}",
            json["observed"]["objective"], json["observed"]["control"]
        ),
        observed,
        "{json}"
    );
    (version, observed)
}

/// The rule of an error answer.
fn rule(answer: &Value) -> &str {
    answer["rule"].as_str().unwrap_or_default()
}

fn r6_a_correction_resets_the_repair_cycle_and_the_next_review_covers_its_criteria(site: &Site) {
    let policies = site.policies("human");
    site.create_room(&policies, &["rita", "sam"]);
    site.post("Summarize how durable agent runtimes recover from crashes, with sources.");
    let (_serve, address) = site.serve(&policies, "scenarios/correction.toml", &[]);
    let owner = site.token("olive");
    let rita = site.token("rita");
    let id = objective_id(&address, &owner);
    let reviews_path = format!("/v1/rooms/lab/objectives/{id}/reviews");
    let objective_path = format!("/v1/rooms/lab/objectives/{id}");

    // Report v1: rita finds the criterion unmet from the CLI (R3: corrective planning).
    awaiting(&address, &rita, &id, 1);
    let (version, observed) = shown(site, &address, "rita", &id);
    assert_eq!(version, "1");
    let unmet = site.cli_json(
        &address,
        "rita",
        &[
            "review",
            "record",
            &id,
            "--report-version",
            &version,
            "--observed",
            &observed,
            "--verdict",
            "cites-sources=unmet",
            "--evidence",
            "cites-sources=the claim names no source",
        ],
    );
    assert_eq!(unmet["accepted"], true, "{unmet}");
    let before = awaiting(&address, &rita, &id, 2);
    let detail = get(&address, &objective_path, &owner);
    assert_eq!(detail["counters"]["failed_report_versions"], 1, "{detail}");

    // The review rita prepares for report v2, before the owner's correction arrives: what
    // `review show` printed, and the same over REST.
    let (seen_version, seen) = shown(site, &address, "rita", &id);
    assert_eq!(seen_version, "2");
    assert_eq!(
        seen,
        format!(
            "{}:{}",
            before["observed"]["objective"], before["observed"]["control"]
        )
    );
    let (source, quote) = evidence(&before, 2);
    let (seen_source, seen_quote) = (source.clone(), quote.clone());
    let prepared = json!({
        "report_version": 2,
        "observed": before["observed"],
        "verdicts": [{
            "criterion": "cites-sources", "verdict": "met", "evidence": "both claims cite a contribution",
            "sources": [source], "quote": quote,
        }],
    });

    // The owner corrects it from the CLI with a second criterion (O14, R6).
    let corrected = site.cli_json(
        &address,
        "olive",
        &[
            "objective",
            "correct",
            &id,
            "--text",
            "Name each runtime you compare.",
            "--criterion",
            "cites-sources=every claim cites a source",
            "--criterion",
            "names-runtimes=names each runtime it compares",
        ],
    );
    assert_eq!(corrected["accepted"], true, "{corrected}");
    let log = corrected["log"].as_array().unwrap();
    assert!(
        log.iter().any(|e| e["rule"] == "R6"
            && e["message"]
                .as_str()
                .unwrap()
                .contains("repair cycle reset")),
        "{corrected}"
    );
    let detail = get(&address, &objective_path, &owner);
    assert_eq!(detail["counters"]["failed_report_versions"], 0, "{detail}");
    let ids: Vec<&str> = detail["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cites-sources", "names-runtimes"], "{detail}");

    // The prepared review cannot consume the correction: refused now …
    let (status, answer) = post(&address, &reviews_path, &rita, &prepared);
    assert_eq!(status, 409, "{answer}");
    assert!(["R2", "R6"].contains(&rule(&answer)), "{answer}");
    // … and once report v3 awaits review, fenced by the revisions it observed (R6).
    let third = awaiting(&address, &rita, &id, 3);
    let (status, answer) = post(&address, &reviews_path, &rita, &prepared);
    assert_eq!(status, 409, "{answer}");
    assert_eq!(rule(&answer), "R6", "{answer}");
    // From the CLI too: `review record` with what `review show` printed before the correction
    // sends exactly that, so even verdicts on every criterion now are fenced (R6), nothing
    // recorded; it never binds them to the revisions or the report that are current now.
    let stale = site.cli(
        &address,
        "rita",
        &[
            "review",
            "record",
            &id,
            "--report-version",
            &seen_version,
            "--observed",
            &seen,
            "--verdict",
            "cites-sources=met",
            "--evidence",
            "cites-sources=both claims cite a contribution",
            "--source",
            &format!("cites-sources={seen_source}"),
            "--quote",
            &format!("cites-sources={seen_quote}"),
            "--verdict",
            "names-runtimes=met",
            "--evidence",
            "names-runtimes=the runtimes are named",
            "--source",
            &format!("names-runtimes={seen_source}"),
            "--quote",
            &format!("names-runtimes={seen_quote}"),
        ],
    );
    assert_eq!(stale.status.code(), Some(1), "{stale:?}");
    let said = String::from_utf8_lossy(&stale.stderr);
    assert!(
        said.contains("refused by rule R6") && said.contains(&format!("at revisions {seen}")),
        "{said}"
    );
    assert!(said.contains("agentroom review show"), "{said}");
    let reviews = get(&address, &reviews_path, &rita);
    assert_eq!(reviews["reviews"].as_array().unwrap().len(), 1, "{reviews}");
    assert_eq!(reviews["awaiting_review"]["version"], 3, "{reviews}");

    // The correction history reads back (O14), in JSON and as text.
    let history = site.cli_json(&address, "olive", &["objective", "corrections", &id]);
    let items = history["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{history}");
    assert_eq!(items[0]["author"], "olive");
    assert_eq!(items[0]["text"], "Name each runtime you compare.");
    assert_eq!(items[0]["criteria"][1]["id"], "names-runtimes", "{history}");
    assert_eq!(items[0]["plan_version"], 3, "{history}");
    let text = site.cli(&address, "rita", &["objective", "corrections", &id]);
    assert!(text.status.success(), "{text:?}");
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("names-runtimes") && text.contains("by olive"),
        "{text}"
    );

    // A fresh `review show` prints report v3 and the revisions after the correction.
    let (version, observed) = shown(site, &address, "rita", &id);
    assert_eq!(version, "3");
    assert_ne!(
        observed, seen,
        "the correction bumped the objective's revision"
    );
    // A review of v3 that leaves out the new criterion is refused (R2), nothing recorded.
    let (source, quote) = evidence(&third, 3);
    let source_arg = |c: &str| format!("{c}={source}");
    let quote_arg = |c: &str| format!("{c}={quote}");
    let partial = site.cli(
        &address,
        "rita",
        &[
            "review",
            "record",
            &id,
            "--report-version",
            &version,
            "--observed",
            &observed,
            "--verdict",
            "cites-sources=met",
            "--evidence",
            "cites-sources=every claim cites a contribution",
            "--source",
            &source_arg("cites-sources"),
            "--quote",
            &quote_arg("cites-sources"),
        ],
    );
    assert_eq!(partial.status.code(), Some(1), "{partial:?}");
    let said = String::from_utf8_lossy(&partial.stderr);
    assert!(said.contains("refused by rule R2"), "{said}");
    let reviews = get(&address, &reviews_path, &rita);
    assert_eq!(reviews["reviews"].as_array().unwrap().len(), 1, "{reviews}");

    // The review that covers both criteria completes the objective.
    let approved = site.cli_json(
        &address,
        "rita",
        &[
            "review",
            "record",
            &id,
            "--report-version",
            &version,
            "--observed",
            &observed,
            "--verdict",
            "cites-sources=met",
            "--evidence",
            "cites-sources=every claim cites a contribution",
            "--source",
            &source_arg("cites-sources"),
            "--quote",
            &quote_arg("cites-sources"),
            "--verdict",
            "names-runtimes=met",
            "--evidence",
            "names-runtimes=Temporal, Restate and DBOS are named",
            "--source",
            &source_arg("names-runtimes"),
            "--quote",
            &quote_arg("names-runtimes"),
        ],
    );
    assert_eq!(approved["accepted"], true, "{approved}");
    let detail = get(&address, &objective_path, &owner);
    assert_eq!(detail["status"], "completed", "{detail}");
    let reviews = get(&address, &reviews_path, &rita);
    let last = reviews["reviews"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["report_version"], 3, "{reviews}");
    assert_eq!(last["outcome"], "all_met", "{reviews}");
    let covered: BTreeSet<&str> = last["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["criterion"].as_str().unwrap())
        .collect();
    assert_eq!(
        covered,
        BTreeSet::from(["cites-sources", "names-runtimes"]),
        "{reviews}"
    );
    // A completed objective is not reopened: the refusal says to post a new message.
    let refused = site.cli(
        &address,
        "olive",
        &["objective", "correct", &id, "--text", "one more thing"],
    );
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("post a new owner message"), "{said}");
    let history = site.cli_json(&address, "olive", &["objective", "corrections", &id]);
    assert_eq!(history["items"].as_array().unwrap().len(), 1, "{history}");
}

#[test]
fn r6_a_correction_resets_the_repair_cycle_and_the_next_review_covers_its_criteria_sqlite() {
    r6_a_correction_resets_the_repair_cycle_and_the_next_review_covers_its_criteria(&Site::sqlite());
}

#[test]
fn r6_a_correction_resets_the_repair_cycle_and_the_next_review_covers_its_criteria_postgres() {
    r6_a_correction_resets_the_repair_cycle_and_the_next_review_covers_its_criteria(
        &Site::postgres(),
    );
}

/// The calls the Room reserved so far (each model call reserves first, B1).
fn reservations(address: &str, owner: &str) -> usize {
    let budget = get(address, "/v1/rooms/lab/budget?limit=200", owner);
    budget["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["entry"] == "reserved")
        .count()
}

/// The task `key` of the objective's board.
fn task<'a>(objective: &'a Value, key: &str) -> &'a Value {
    objective["board"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["tasks"].as_array().unwrap())
        .find(|t| t["key"] == key)
        .unwrap_or_else(|| panic!("no task {key} on {objective}"))
}

fn o12_o13_a_waiting_task_stalls_nothing_and_a_late_receipt_costs_no_call(site: &Site) {
    let policies = site.policies("model");
    site.create_room(&policies, &["sam", "rita"]);
    site.post(
        "Summarize how durable agent runtimes recover from crashes, and license the figures.",
    );
    let journal = site.dir.path().join("hosted-journal.jsonl");
    let (_serve, address) = site.serve(
        &policies,
        "scenarios/waiting.toml",
        &[
            "--hosted",
            "sam",
            "--hosted-journal",
            journal.to_str().unwrap(),
        ],
    );
    let owner = site.token("olive");
    let sam = site.token("sam");
    let id = objective_id(&address, &owner);
    let objective_path = format!("/v1/rooms/lab/objectives/{id}");
    // sam's agent host gets both research tasks.
    let assignments = wait_until("sam's two assignments", || {
        let list = get(&address, "/v1/rooms/lab/assignments", &sam);
        let items = list["items"].as_array().unwrap().clone();
        if items.len() == 2 {
            Ok(items)
        } else {
            Err(list.to_string())
        }
    });
    let of = |key: &str| {
        assignments
            .iter()
            .find(|a| a["task"]["key"] == key)
            .unwrap_or_else(|| panic!("no {key} assignment: {assignments:?}"))
            .clone()
    };
    let (licence, gather) = (of("licence"), of("gather"));
    let licence_op = licence["operation"].as_str().unwrap();

    // O12: the licence waits outside, said on its assignment.
    let (status, waited) = post(
        &address,
        &format!("/v1/rooms/lab/assignments/{licence_op}/wait"),
        &sam,
        &json!({"reason": "the publisher has not licensed the 2026 figures yet"}),
    );
    assert_eq!(status, 202, "{waited}");
    assert_eq!(waited["accepted"], true, "{waited}");
    assert_eq!(waited["log"][0]["rule"], "O12", "{waited}");
    let detail = get(&address, &objective_path, &owner);
    assert_eq!(
        task(&detail, "licence")["state"]["state"],
        "waiting_outside"
    );

    // The other task's result; the report and the model review go ahead and complete it.
    let gather_op = gather["operation"].as_str().unwrap();
    let result = json!({
        "outcome": "contribution",
        "artifacts": [{"name": "notes", "content": "Runtimes journal each step and replay only what has no receipt."}],
        "sources": [{
            "kind": "external",
            "url": "https://example.org/durable-recovery",
            "digest": "sha256:f848b5c5faa537795590541cef27232e6cdfcca35ee858f4fa3e539c9fca4f65",
        }],
        "outputs": {"findings": ["Runtimes journal each step and replay only what has no receipt."]},
        "usage_micros": 900,
    });
    let (status, answer) = post(
        &address,
        &format!("/v1/rooms/lab/assignments/{gather_op}/result"),
        &sam,
        &result,
    );
    assert_eq!(status, 202, "{answer}");
    let done = wait_until("the objective to complete", || {
        let detail = get(&address, &objective_path, &owner);
        if detail["status"] == "completed" {
            Ok(detail)
        } else {
            Err(detail.to_string())
        }
    });
    // Completed by the review while the licence still waited outside (O12).
    assert_eq!(done["status"], "completed");
    let reviews = get(&address, &format!("{objective_path}/reviews"), &owner);
    assert_eq!(reviews["reviews"][0]["outcome"], "all_met", "{reviews}");
    // A completed objective keeps no call open (B3): the waiting call is asked to abort, its
    // assignment is withdrawn and its reservation comes back.
    wait_until("the waiting call's reservation to come back", || {
        let budget = get(&address, "/v1/rooms/lab/budget", &owner);
        if budget["balances"]["reserved"] == 0 {
            Ok(())
        } else {
            Err(budget.to_string())
        }
    });
    let assignments = get(&address, "/v1/rooms/lab/assignments", &sam);
    assert_eq!(assignments["items"], json!([]), "{assignments}");

    // O13: receipts for the completed objective are consumed without a model call.
    let calls = reservations(&address, &owner);
    let (status, receipt) = post(
        &address,
        "/v1/rooms/lab/events",
        &sam,
        &json!({"kind": "internal_receipt", "objective": id, "note": "the publisher licensed the figures"}),
    );
    assert_eq!(status, 202, "{receipt}");
    assert_eq!(receipt["accepted"], true, "{receipt}");
    assert_eq!(receipt["log"][0]["rule"], "O13", "{receipt}");
    // Its assignment is gone: the assignment route has nothing to take it on.
    let (status, receipt) = post(
        &address,
        &format!("/v1/rooms/lab/assignments/{licence_op}/receipt"),
        &sam,
        &json!({"note": "the licence arrived by post"}),
    );
    assert_eq!(status, 409, "{receipt}");
    assert_eq!(receipt["error"], "wrong_state", "{receipt}");
    // A reviewer is assigned nothing of it: refused, stored nowhere.
    let rita = site.token("rita");
    let (status, refused) = post(
        &address,
        "/v1/rooms/lab/events",
        &rita,
        &json!({"kind": "internal_receipt", "objective": id, "note": "me too"}),
    );
    assert_eq!(status, 403, "{refused}");
    assert_eq!(rule(&refused), "T3", "{refused}");
    // Give a call that was started a moment to show in the ledger: none is.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        reservations(&address, &owner),
        calls,
        "a receipt cost a call"
    );
    assert_eq!(
        get(&address, &objective_path, &owner)["status"],
        "completed"
    );
}

#[test]
fn o12_o13_a_waiting_task_stalls_nothing_and_a_late_receipt_costs_no_call_sqlite() {
    o12_o13_a_waiting_task_stalls_nothing_and_a_late_receipt_costs_no_call(&Site::sqlite());
}

#[test]
fn o12_o13_a_waiting_task_stalls_nothing_and_a_late_receipt_costs_no_call_postgres() {
    o12_o13_a_waiting_task_stalls_nothing_and_a_late_receipt_costs_no_call(&Site::postgres());
}

/// Bad arguments of `objective correct` and `review record` are refused before anything is
/// sent (the host here answers nothing): a usage error (2) for what clap reads — among them a
/// review without the report version and revisions its reviewer observed, or with malformed
/// ones (R6: they are never filled in from the host) — and an error (1) naming the fix for
/// verdicts, evidence, sources and quotes that do not fit together.
#[test]
fn bad_correction_and_review_arguments_are_refused_before_anything_is_sent() {
    let id = "00000000-0000-4000-8000-000000000001";
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(args)
            .args(["--host", "http://127.0.0.1:9", "--room", ROOM])
            .env("AGENTROOM_TOKEN", "ar_test")
            .env_remove("AGENTROOM_HOST")
            .env_remove("AGENTROOM_ROOM")
            .output()
            .unwrap()
    };
    for (args, code, says) in [
        (vec!["objective", "correct", id], 2, "--text"),
        (
            vec![
                "objective",
                "correct",
                id,
                "--text",
                "x",
                "--criterion",
                "no-equals",
            ],
            2,
            "is not CRITERION=VALUE",
        ),
        (
            vec![
                "objective",
                "correct",
                id,
                "--text",
                "x",
                "--criterion",
                "Bad Id=x",
            ],
            2,
            "Bad Id",
        ),
        (
            vec![
                "objective",
                "correct",
                id,
                "--text",
                "x",
                "--criterion",
                "a= ",
            ],
            2,
            "blank",
        ),
        (
            vec!["objective", "correct", "not-an-id", "--text", "x"],
            2,
            "is not an id",
        ),
        (vec!["review", "record", id], 2, "--verdict"),
        (
            vec!["review", "record", id, "--verdict", "a=maybe"],
            2,
            "met, unmet or unknown",
        ),
        // R6: what the reviewer observed is required and well formed, never looked up.
        (
            vec![
                "review",
                "record",
                id,
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "--report-version <N>",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "--report-version <N>",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "--observed <OBJECTIVE:CONTROL>",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "0",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "--report-version",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "v2",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "--report-version",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "is not OBJECTIVE:CONTROL",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4:x",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
            ],
            2,
            "is not a whole number",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
            ],
            1,
            "needs --evidence a=TEXT",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--evidence",
                "b=x",
            ],
            1,
            "give `b` a --verdict first",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--verdict",
                "a=unmet",
                "--evidence",
                "a=x",
            ],
            1,
            "given twice",
        ),
        (
            vec![
                "review",
                "record",
                id,
                "--report-version",
                "2",
                "--observed",
                "4:0",
                "--verdict",
                "a=met",
                "--evidence",
                "a=x",
                "--quote",
                "a=y",
                "--quote",
                "a=z",
            ],
            1,
            "given twice",
        ),
    ] {
        let out = run(&args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {said}");
        assert!(said.contains(says), "{args:?}: {said}");
        assert!(!said.contains("cannot reach"), "{args:?} was sent: {said}");
    }
}
