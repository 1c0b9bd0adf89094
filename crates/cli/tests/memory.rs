//! The Room's memory end to end (issue 18 part 3, M1 and C1): the real `agentroom serve
//! --openai` against `agentroom-testmodel` (a deterministic OpenAI-compatible server that
//! records every request), and the real `agentroom memory` commands talking HTTP to it.
//!
//! After an objective completes, the owner keeps a memory entry taken from its report
//! (`memory add --from-contribution`); the reasoner prompt of the next owner message holds
//! it with its provenance (the contribution, who added it). The owner retracts it (`memory
//! retract --why`); the reasoner prompt of the message after that does not hold it, and
//! `memory list` still shows it, retracted, with why. A reviewer's `memory add` is refused
//! (403, `memory.manage`). The test asserts on what the model was sent, not on its answers;
//! on SQLite and on PostgreSQL.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::process::{Command, Output};

use serde_json::{Value, json};
use support::model::bare;
use support::model::{ModelSite, README_MESSAGE, ask, get, post, reasoner_prompt_with, wait_for};
use support::ok;

const REMEMBERED: &str = "Hamlin's recovery figure is 4,000 in-flight calls in 1.2 s";

/// `agentroom memory ARGS` against the host at `address`, as the bearer of `token`.
fn memory(address: &str, token: &str, args: &[&str]) -> Output {
    let url = format!("http://{address}");
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .arg("memory")
        .args(args)
        .args(["--host", &url, "--room", "lab"])
        .env("AGENTROOM_TOKEN", token)
        .env_remove("AGENTROOM_HOST")
        .env_remove("AGENTROOM_ROOM")
        .env_remove("AGENTROOM_LOG")
        .output()
        .unwrap()
}

fn an_entry_reaches_the_next_reasoner_prompt_until_retracted(site: &ModelSite) {
    let started = site.start_with(README_MESSAGE, &[]);
    let (address, owner) = (started.address.clone(), started.owner.clone());
    let objective = wait_for(&address, &owner, |o| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    });
    let id = objective["id"].as_str().unwrap();
    let reviews = get(
        &address,
        &format!("/v1/rooms/lab/objectives/{id}/reviews"),
        &owner,
    );
    let contribution = reviews["reports"][0]["contribution"]
        .as_str()
        .unwrap_or_else(|| panic!("no report: {reviews}"))
        .to_owned();

    // A reviewer holds no `memory.manage`.
    let rita = post(
        &address,
        "/v1/rooms/lab/members",
        &owner,
        &json!({"principal": "rina", "roles": ["reviewer"], "issue_token": true}),
    );
    let rina = rita["token"]["token"].as_str().unwrap();
    let refused = memory(
        &address,
        rina,
        &["add", REMEMBERED, "--from-contribution", &contribution],
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("memory.manage"),
        "{stderr}"
    );

    let added = ok(&memory(
        &address,
        &owner,
        &["add", REMEMBERED, "--from-contribution", &contribution],
    ));
    assert!(added.contains(&contribution), "{added}");
    let listed: Value =
        serde_json::from_str(&ok(&memory(&address, &owner, &["list", "--json"]))).unwrap();
    let entry = listed["items"][0]["id"].as_str().unwrap().to_owned();

    // C1: the next reasoner prompt holds the entry with its provenance.
    ask(&address, &owner, "What should the next study compare?");
    let prompt = reasoner_prompt_with(site, "What should the next study compare?");
    let block = prompt
        .split("<data kind=\"memory\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no memory in the reasoner prompt: {prompt}"));
    let block = block.split("</data>").next().unwrap();
    assert!(block.contains(&format!("id=\"{entry}\"")), "{block}");
    assert!(block.contains("from=\"contribution\""), "{block}");
    assert!(
        block.contains(&format!("source=\"{contribution}\"")),
        "{block}"
    );
    assert!(block.contains("added_by=\"olive\""), "{block}");
    assert!(block.contains(REMEMBERED), "{block}");

    // M1: once retracted, it never reaches a model; it stays listed with why.
    let retracted = ok(&memory(
        &address,
        &owner,
        &["retract", &entry, "--why", "superseded by the 2027 run"],
    ));
    assert!(retracted.contains(&entry), "{retracted}");
    ask(&address, &owner, "And what about leases?");
    let prompt = reasoner_prompt_with(site, "And what about leases?");
    assert!(!prompt.contains("<data kind=\"memory\""), "{prompt}");
    assert!(!prompt.contains(REMEMBERED), "{prompt}");
    let table = ok(&memory(&address, &owner, &["list"]));
    assert!(
        table.contains("retracted by olive: superseded by the 2027 run"),
        "{table}"
    );
}

#[test]
fn m1_c1_a_memory_entry_from_a_contribution_reaches_the_next_reasoner_prompt_until_retracted() {
    an_entry_reaches_the_next_reasoner_prompt_until_retracted(&ModelSite::sqlite());
}

#[test]
fn m1_c1_the_same_on_postgres() {
    an_entry_reaches_the_next_reasoner_prompt_until_retracted(&ModelSite::postgres());
}

#[test]
fn memory_commands_document_their_exit_codes_and_refuse_bad_arguments_before_any_request() {
    for sub in [
        &["memory"][..],
        &["memory", "list"],
        &["memory", "add"],
        &["memory", "correct"],
        &["memory", "retract"],
    ] {
        let help = bare(&[sub, &["--help"]].concat());
        let stdout = String::from_utf8_lossy(&help.stdout);
        assert_eq!(help.status.code(), Some(0));
        assert!(
            stdout.contains("Exit codes: 0 done; 1 error"),
            "{sub:?}: {stdout}"
        );
    }
    // Usage errors exit 2 and send nothing (nothing listens on port 9).
    let entry = "00000000-0000-4000-8000-000000000001";
    let digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    for usage in [
        vec!["memory", "add", "no provenance"],
        vec![
            "memory",
            "add",
            "two",
            "--from-contribution",
            entry,
            "--from-message",
            entry,
        ],
        vec![
            "memory",
            "add",
            "url alone",
            "--from-url",
            "https://example.org",
        ],
        vec!["memory", "add", "digest alone", "--digest", digest],
        vec![
            "memory",
            "add",
            "bad digest",
            "--from-url",
            "https://example.org",
            "--digest",
            "md5:1",
        ],
        vec![
            "memory",
            "add",
            "bad id",
            "--from-contribution",
            "not-an-id",
        ],
        vec!["memory", "correct", "not-an-id", "text"],
        vec!["memory", "retract", entry],
    ] {
        let out = bare(
            &[
                &usage[..],
                &["--host", "http://127.0.0.1:9", "--room", "lab"],
            ]
            .concat(),
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{usage:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
