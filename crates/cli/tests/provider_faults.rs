//! Money-safe calls to an OpenAI-compatible provider (issue 16), end to end: the real
//! `agentroom serve --openai` on the embedded SQLite store against `agentroom-testmodel
//! --fault … --journal …`, a separate process that injects one fault and journals every
//! request it receives (with its Idempotency-Key) before answering.
//!
//! - A 408, 502, 503 or 504, or a connection reset in mid-response, on the first specialist
//!   call: the call may have run, so the operation is uncertain, its whole reservation stays
//!   held in the Room budget, and it is never sent again — not by the runner's retries, not by
//!   the recoveries that follow; it stays uncertain (not dead-lettered) for an operator to
//!   act (D2, B3).
//! - A reply reporting zero usage (or none) is charged its whole reservation, never zero (B3).
//! - A 429 was not taken: the same call (the same Idempotency-Key, the same reservation) is
//!   sent again after `retry-after` and the objective completes.
//!
//! The steps are README's "Run with a model"; the Room is read over the REST API as an
//! operator and the owner read it, and with `agentroom operations list`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::model::{ModelSite, Started, get, wait_for, wait_until};

/// The owner's message (the test model's conventions): a gather task and a report task follow,
/// the gather task being the first specialist call.
const MESSAGE: &str = "Summarize how the Hamlin runtime recovers after a crash
Criteria:
- recovery-figure: states the 2026 recovery figure \"recovered 4,000 in-flight calls in 1.2 s\"
Corpus:
[s1] https://example.org/hamlin-2026 | Hamlin 2026 benchmark | In 2026 the Hamlin runtime recovered 4,000 in-flight calls in 1.2 s after a SIGKILL.
[s2] https://example.org/leases | Leases in practice | Hamlin fences stale writers with leases that carry a generation.";

/// The model started with `faults` and a journal, the Room and `serve --openai` as README
/// says.
fn start(site: &ModelSite, faults: &[&str]) -> Started {
    let journal = site.journal_path().display().to_string();
    let mut args = vec!["--journal", journal.as_str()];
    for fault in faults {
        args.extend(["--fault", *fault]);
    }
    site.start_with(MESSAGE, &args)
}

/// The budget with its whole ledger (one page).
fn budget(started: &Started) -> Value {
    get(
        &started.address,
        "/v1/rooms/lab/budget?limit=200",
        &started.owner,
    )
}

/// The ledger entries about `op`, in order.
fn entries_of(budget: &Value, op: &str) -> Vec<Value> {
    budget["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"] == op)
        .cloned()
        .collect()
}

/// The journal lines of `role`'s requests.
fn journaled(site: &ModelSite, role: &str) -> Vec<Value> {
    site.journal()
        .into_iter()
        .filter(|line| line["role"] == role)
        .collect()
}

/// The journal lines that carry `key`.
fn sent_with_key(site: &ModelSite, key: &str) -> Vec<Value> {
    site.journal()
        .into_iter()
        .filter(|line| line["idempotency_key"] == key)
        .collect()
}

/// The Room's operations an operator must look at (uncertain and dead-lettered), over REST.
fn operations(started: &Started) -> Vec<Value> {
    get(
        &started.address,
        "/v1/rooms/lab/operations",
        &started.operator,
    )["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// `fault` answers the first specialist call; `status` is what the model journals for it.
/// The call is uncertain, its reservation held, and it is sent exactly once, however long
/// the host runs on (its retries, several recoveries).
fn uncertain_and_never_sent_again(fault: &str, status: u16) {
    let site = ModelSite::sqlite();
    let spec = format!("specialist:1={fault}");
    let started = start(&site, &[spec.as_str()]);

    // The operation becomes uncertain: the REST API lists it for operators.
    let op = wait_until("the specialist call to be uncertain", || {
        let ops = operations(&started);
        ops.iter()
            .find(|o| o["role"] == "specialist")
            .cloned()
            .ok_or_else(|| format!("{ops:?}"))
    });
    assert_eq!(op["status"], "uncertain", "{op}");
    assert_eq!(op["principal"], "sam", "{op}");
    let id = op["op"].as_str().unwrap().to_owned();
    let reservation = op["reservation_micros"].as_i64().unwrap();
    assert!(reservation > 0, "{op}");

    // So does `agentroom operations list --state uncertain` (the documented command).
    let listed = site.run(&["operations", "list", "--state", "uncertain", "--json"]);
    let listed: Vec<Value> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["op"], id.as_str());
    assert_eq!(listed[0]["state"], "uncertain");
    assert_eq!(listed[0]["reservation_micros"], reservation);

    // B3: its whole reservation stays held, marked uncertain; nothing is settled or released.
    let held = wait_until("the Room to hold the uncertain reservation", || {
        let budget = budget(&started);
        (budget["balances"]["uncertain"] == reservation)
            .then_some(budget.clone())
            .ok_or_else(|| budget.to_string())
    });
    assert_eq!(
        held["balances"]["reserved"], reservation,
        "only the uncertain call holds money: {held}"
    );
    let entries = entries_of(&held, &id);
    assert_eq!(
        entries,
        [
            serde_json::json!({"entry": "reserved", "op": id, "amount": reservation}),
            serde_json::json!({"entry": "marked_uncertain", "op": id}),
        ],
        "{held}"
    );
    // The task shows it: in progress, uncertain, on its operation; the report waits on it.
    let objective = wait_for(&started.address, &started.owner, |o| o["board"].is_object());
    assert_eq!(objective["status"], "running", "{objective}");
    let tasks: Vec<&Value> = objective["board"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["tasks"].as_array().unwrap())
        .collect();
    let gather = tasks.iter().find(|t| t["key"] == "gather").unwrap();
    assert_eq!(gather["column"], "in_progress", "{objective}");
    assert_eq!(
        gather["state"],
        serde_json::json!({"state": "uncertain", "op": id}),
        "{objective}"
    );

    // D2: never sent again, and it stays uncertain (not dead-lettered) long enough for an
    // operator to act (`serve --uncertain-hold`, a day by default): wait past the runner's
    // retry backoff and several recovery passes (about one every 2 s).
    std::thread::sleep(Duration::from_secs(5));
    let still = operations(&started);
    let still = still.iter().find(|o| o["op"] == id.as_str()).unwrap();
    assert_eq!(still["status"], "uncertain", "{still}");
    assert!(still["dead_letter_reason"].is_null(), "{still}");
    assert_eq!(still["reservation_micros"], reservation, "{still}");

    let sent = sent_with_key(&site, &id);
    assert_eq!(
        sent,
        [serde_json::json!({
            "n": 2,
            "role": "specialist",
            "idempotency_key": id,
            "model": "testmodel",
            "fault": fault,
            "status": status,
        })],
        "sent once, after the reasoner's call: {:?}",
        site.journal()
    );
    assert_eq!(
        journaled(&site, "specialist").len(),
        1,
        "no other specialist call either: {:?}",
        site.journal()
    );
    let after = budget(&started);
    assert_eq!(after["balances"]["uncertain"], reservation, "{after}");
    assert_eq!(after["balances"]["reserved"], reservation, "{after}");
    assert_eq!(
        entries_of(&after, &id),
        entries,
        "nothing settled or released since: {after}"
    );
    assert_eq!(
        after["spent_micros_by_role"].get("specialist"),
        None,
        "nothing charged to specialists: {after}"
    );
}

#[test]
fn d2_a_408_from_the_endpoint_is_uncertain_and_never_sent_again() {
    uncertain_and_never_sent_again("408", 408);
}

#[test]
fn d2_a_502_from_the_endpoint_is_uncertain_and_never_sent_again() {
    uncertain_and_never_sent_again("502", 502);
}

#[test]
fn d2_a_503_from_the_endpoint_is_uncertain_and_never_sent_again() {
    uncertain_and_never_sent_again("503", 503);
}

#[test]
fn d2_a_504_from_the_endpoint_is_uncertain_and_never_sent_again() {
    uncertain_and_never_sent_again("504", 504);
}

#[test]
fn d2_a_connection_reset_mid_response_is_uncertain_and_never_sent_again() {
    uncertain_and_never_sent_again("reset", 200);
}

#[test]
fn b3_a_reply_with_zero_usage_or_none_is_charged_its_whole_reservation() {
    let site = ModelSite::sqlite();
    let started = start(&site, &["specialist:1=zero-usage", "specialist:2=no-usage"]);
    let objective = wait_for(&started.address, &started.owner, |o| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    });
    assert_eq!(objective["status"], "completed", "{objective}");

    let specialists = journaled(&site, "specialist");
    let faults: Vec<&Value> = specialists.iter().map(|l| &l["fault"]).collect();
    assert_eq!(faults, ["zero-usage", "no-usage"], "{specialists:?}");
    let budget = budget(&started);
    let mut charged_in_full = 0;
    for line in &specialists {
        let op = line["idempotency_key"].as_str().unwrap();
        let entries = entries_of(&budget, op);
        assert_eq!(entries.len(), 2, "reserved, then settled: {entries:?}");
        assert_eq!(entries[0]["entry"], "reserved", "{entries:?}");
        let reservation = entries[0]["amount"].as_i64().unwrap();
        assert!(reservation > 0);
        assert_eq!(
            entries[1],
            serde_json::json!({"entry": "settled", "op": op, "reserved": reservation, "charged": reservation}),
            "{} is charged its whole reservation",
            line["fault"]
        );
        charged_in_full += reservation;
    }
    assert_eq!(
        budget["spent_micros_by_role"]["specialist"], charged_in_full,
        "{budget}"
    );
    // The reviewer's reply reports its usage: charged that, below its reservation.
    let reviewer = journaled(&site, "reviewer");
    assert_eq!(reviewer.len(), 1, "{reviewer:?}");
    assert_eq!(reviewer[0]["fault"], Value::Null);
    let entries = entries_of(&budget, reviewer[0]["idempotency_key"].as_str().unwrap());
    let charged = entries[1]["charged"].as_i64().unwrap();
    assert!(
        charged > 0 && charged < entries[1]["reserved"].as_i64().unwrap(),
        "{entries:?}"
    );
    assert_eq!(budget["balances"]["reserved"], 0, "{budget}");
}

#[test]
fn d2_a_429_was_not_taken_so_the_same_call_is_sent_again_and_the_objective_completes() {
    let site = ModelSite::sqlite();
    let started = start(&site, &["reasoner:1=429"]);
    let objective = wait_for(&started.address, &started.owner, |o| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    });
    assert_eq!(objective["status"], "completed", "{objective}");

    // The one reasoner call, sent twice with its Idempotency-Key: rate limited, then answered.
    let reasoner = journaled(&site, "reasoner");
    assert_eq!(reasoner.len(), 2, "{reasoner:?}");
    let key = reasoner[0]["idempotency_key"].as_str().unwrap();
    assert!(!key.is_empty());
    let seen: Vec<(u64, &Value, &Value, &Value)> = reasoner
        .iter()
        .map(|l| {
            (
                l["n"].as_u64().unwrap(),
                &l["idempotency_key"],
                &l["fault"],
                &l["status"],
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, &Value::from(key), &Value::from("429"), &Value::from(429)),
            (2, &Value::from(key), &Value::Null, &Value::from(200)),
        ]
    );
    // One reservation for it, settled once from the usage of the answer that ran.
    let budget = budget(&started);
    let entries = entries_of(&budget, key);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0]["entry"], "reserved");
    assert_eq!(entries[1]["entry"], "settled");
    let charged = entries[1]["charged"].as_i64().unwrap();
    assert!(
        charged > 0 && charged < entries[0]["amount"].as_i64().unwrap(),
        "{entries:?}"
    );
    assert_eq!(budget["balances"]["reserved"], 0, "{budget}");
    assert_eq!(budget["balances"]["uncertain"], 0, "{budget}");
}

/// The tasks of an objective's board, across its columns.
fn tasks_of(objective: &Value) -> Vec<Value> {
    objective["board"]["columns"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .flat_map(|c| c["tasks"].as_array().cloned().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn o8_o11_a_provider_outage_mid_objective_delays_it_and_loses_nothing() {
    let site = ModelSite::sqlite();
    // The first specialist request is rate limited (retry-after 1 s): while the runner waits
    // to send it again, the model process dies and stays down 5 s.
    let mut started = start(&site, &["specialist:1=429"]);
    wait_until("the specialist's 429", || {
        journaled(&site, "specialist")
            .first()
            .cloned()
            .ok_or_else(|| format!("{:?}", site.journal()))
    });
    let _ = started.model.0.kill();
    let _ = started.model.0.wait();
    let down = std::time::Instant::now();

    // The Room shows the call waiting for the provider, and why; the objective runs on.
    let waiting = wait_for(&started.address, &started.owner, |o| {
        tasks_of(o)
            .iter()
            .any(|t| t["call"]["status"] == "waiting_for_provider")
    });
    assert_eq!(waiting["status"], "running", "{waiting}");
    let gather = tasks_of(&waiting)
        .into_iter()
        .find(|t| t["key"] == "gather")
        .unwrap();
    let cause = gather["call"]["cause"].as_str().unwrap_or_default();
    assert!(cause.contains("429"), "{gather}");
    let key = gather["call"]["op"].as_str().unwrap().to_owned();

    // Back after 5 s, on the same address.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(down.elapsed()));
    let journal = site.journal_path().display().to_string();
    let record = site.record().display().to_string();
    let mut model = std::process::Command::new(support::model::testmodel());
    model.args([
        "--listen",
        started.model_address.as_str(),
        "--record",
        record.as_str(),
        "--journal",
        journal.as_str(),
    ]);
    let (model, _) = support::model::listening(model, "listening on http://");
    started.model = model;

    // The objective completes: one plan, no replan, no interpretation consumed.
    let done = wait_for(&started.address, &started.owner, |o| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    });
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["plan_versions"], 1, "{done}");
    assert_eq!(done["counters"]["replans_without_progress"], 0, "{done}");
    let id = done["id"].as_str().unwrap();
    let decisions = get(
        &started.address,
        &format!("/v1/rooms/lab/objectives/{id}/decisions?limit=200"),
        &started.owner,
    );
    let log = decisions["items"].as_array().unwrap();
    assert!(
        log.iter().any(|d| d["message"]
            .as_str()
            .is_some_and(|m| m.contains("waiting for the provider") && m.contains("429"))),
        "the decision log says the call waited, and why: {decisions}"
    );
    assert!(
        !log.iter().any(|d| d["rule"] == "O11" || d["rule"] == "O8"),
        "{decisions}"
    );
    // One reasoner request; the specialist's call sent under one key: rate limited, then
    // answered after the outage (the attempts in between reached nothing).
    assert_eq!(
        journaled(&site, "reasoner").len(),
        1,
        "{:?}",
        site.journal()
    );
    let sent: Vec<Value> = sent_with_key(&site, &key)
        .iter()
        .map(|l| l["status"].clone())
        .collect();
    assert_eq!(
        sent,
        [Value::from(429), Value::from(200)],
        "{:?}",
        site.journal()
    );
    let budget = budget(&started);
    assert_eq!(budget["balances"]["reserved"], 0, "{budget}");
    assert_eq!(
        entries_of(&budget, &key).len(),
        2,
        "one reservation, settled once: {budget}"
    );
}

/// Waits until Room `room`'s only objective satisfies `done`; returns it.
fn objective_in(address: &str, room: &str, owner: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until(&format!("the objective of room {room}"), || {
        let list = get(address, &format!("/v1/rooms/{room}/objectives"), owner);
        let Some(id) = list["items"][0]["id"].as_str() else {
            return Err(list.to_string());
        };
        let objective = get(address, &format!("/v1/rooms/{room}/objectives/{id}"), owner);
        if done(&objective) {
            Ok(objective)
        } else {
            Err(objective.to_string())
        }
    })
}

#[test]
fn b6_a_room_whose_quotes_do_not_cover_its_model_admits_no_such_call_and_names_the_fix_while_another_room_runs()
 {
    let site = ModelSite::sqlite();
    let mut model = std::process::Command::new(support::model::testmodel());
    model.args(["--listen", "127.0.0.1:0"]);
    let (_model, model_address) = support::model::listening(model, "listening on http://");
    // The reviewer is served a pricier model than the rest (`scripted` adds a connector cost
    // to `testmodel`'s prices).
    let config = site.dir().join("providers.toml");
    std::fs::write(
        &config,
        format!(
            "[endpoints.local]\nbase_url = \"http://{model_address}/v1\"\n\n[models]\n\
             default = {{ endpoint = \"local\", model = \"testmodel\" }}\n\
             reviewer = {{ endpoint = \"local\", model = \"scripted\" }}\n"
        ),
    )
    .unwrap();
    // `lab` is quoted for the pricier model; `cheap` for `testmodel`, short for the reviewer.
    let (lab_owner, _) = site.create_room("lab", "scripted");
    let (cheap_owner, cheap_operator) = site.create_room("cheap", "testmodel");
    for room in ["lab", "cheap"] {
        site.run(&["event", "post", "--room", room, "--as", "olive", MESSAGE]);
    }
    let mut serve = site.agentroom(&[
        "serve",
        "--room",
        "lab",
        "--room",
        "cheap",
        "--listen",
        "127.0.0.1:0",
    ]);
    serve
        .arg("--openai")
        .arg(&config)
        .stderr(std::process::Stdio::inherit());
    let (_serve, address) = support::model::listening(serve, "agentroom listening on http://");

    let finished = |o: &Value| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    };
    let lab = objective_in(&address, "lab", &lab_owner, finished);
    assert_eq!(lab["status"], "completed", "the other Room runs: {lab}");

    // `cheap` planned and produced its report, but its review call is not admitted: the
    // Room says which role, which model and the fix, and nothing was reserved for it.
    let waiting = objective_in(&address, "cheap", &cheap_owner, |o| {
        o["awaiting_review"].is_object()
    });
    let room = get(&address, "/v1/rooms/cheap", &cheap_owner);
    let short = room["quotes"]["short"].as_array().unwrap();
    assert_eq!(short.len(), 1, "{room}");
    let said = short[0].as_str().unwrap();
    assert!(
        said.starts_with("reviewer:") && said.contains("`scripted`"),
        "{said}"
    );
    assert!(said.contains("agentroom budget quotes"), "{said}");
    std::thread::sleep(Duration::from_secs(1));
    let still = get(
        &address,
        &format!(
            "/v1/rooms/cheap/objectives/{}",
            waiting["id"].as_str().unwrap()
        ),
        &cheap_owner,
    );
    assert_eq!(still["status"], "running", "{still}");
    let decisions = get(
        &address,
        &format!(
            "/v1/rooms/cheap/objectives/{}/decisions?limit=200",
            waiting["id"].as_str().unwrap()
        ),
        &cheap_owner,
    );
    assert!(
        decisions["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["rule"] == "B6"
                && d["message"].as_str().is_some_and(
                    |m| m.contains("reviewer call not admitted") && m.contains("`scripted`")
                )),
        "{decisions}"
    );
    let budget = get(
        &address,
        "/v1/rooms/cheap/budget?limit=200",
        &cheap_operator,
    );
    assert_eq!(budget["balances"]["reserved"], 0, "{budget}");

    // The operator's explicit act: recorded as a decision, and the review goes ahead.
    let host = format!("http://{address}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["budget", "quotes", "--host", &host, "--room", "cheap"])
        .env("AGENTROOM_TOKEN", &cheap_operator)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("updated the Room's quotes"), "{printed}");
    assert!(printed.contains("`scripted`"), "{printed}");
    let cheap = objective_in(&address, "cheap", &cheap_owner, finished);
    assert_eq!(cheap["status"], "completed", "{cheap}");
    let room = get(&address, "/v1/rooms/cheap", &cheap_owner);
    assert_eq!(room["quotes"]["short"], serde_json::json!([]), "{room}");
}
