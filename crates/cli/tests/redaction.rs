//! Redaction end to end (issue 18): the real `agentroom serve --openai` against
//! `agentroom-testmodel`, and the real `agentroom redact` and `agentroom redactions` commands
//! talking HTTP to it, on SQLite and on PostgreSQL.
//!
//! After an objective completes, the owner keeps a memory entry that holds a secret and then
//! redacts the report's body (`redact artifact DIGEST --reason`) and the entry (`redact
//! memory ENTRY --reason`). The report's content is gone from the store and the API (410
//! with the redaction record), the entry lists its record instead of its text, the next
//! reasoner prompt does not hold the text, the same report written again is not stored again,
//! and the Room's history still replays: every revision rebuilds, the last to the stored
//! state, and none holds the text. A reviewer's
//! redaction is refused (403, `content.redact`); bad arguments are usage errors before any
//! request.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use agentroom_ports::Revision;
use agentroom_ports::domain::artifact::ContentDigest;
use agentroom_ports::domain::ids::RoomId;
use serde_json::{Value, json};
use support::model::bare;
use support::model::{
    ModelSite, README_MESSAGE, ask, get, operator, post, reasoner_prompt_with, request, wait_for,
    wait_until,
};
use support::ok;

/// A memory text that holds a secret.
const SECRET: &str = "The Hamlin staging password is tulip-0451";

fn redacted_content_is_gone_and_history_still_replays(site: &ModelSite) {
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
    let report = get(
        &address,
        &format!("/v1/rooms/lab/contributions/{contribution}"),
        &owner,
    );
    let digest = report["body_digest"]
        .as_str()
        .unwrap_or_else(|| panic!("no body: {report}"))
        .to_owned();
    let body = report["body"].as_str().unwrap().to_owned();
    let content = get(
        &address,
        &format!("/v1/rooms/lab/contents/{digest}"),
        &owner,
    );
    assert_eq!(content["text"], body.as_str(), "{content}");

    // A memory entry that holds a secret, from the report.
    post(
        &address,
        "/v1/rooms/lab/memory",
        &owner,
        &json!({"text": SECRET, "provenance": {"from": "contribution", "id": contribution}}),
    );
    let entry = get(&address, "/v1/rooms/lab/memory", &owner)["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A reviewer holds no `content.redact`: refused, nothing changed.
    let rina = post(
        &address,
        "/v1/rooms/lab/members",
        &owner,
        &json!({"principal": "rina", "roles": ["reviewer"], "issue_token": true}),
    );
    let rina = rina["token"]["token"].as_str().unwrap().to_owned();
    let before = get(&address, "/v1/rooms/lab", &owner)["revision"].clone();
    let refused = operator(
        &address,
        &rina,
        &["redact", "artifact", &digest, "--reason", "mine"],
    );
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("content.redact"),
        "{stderr}"
    );
    // Content no contribution names: 404, exit 1, nothing changed.
    let unknown = ContentDigest::of(b"not in this room").to_string();
    let refused = operator(
        &address,
        &owner,
        &["redact", "artifact", &unknown, "--reason", "why"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("404"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert_eq!(get(&address, "/v1/rooms/lab", &owner)["revision"], before);

    // The owner redacts the report's body: gone from the store and the API.
    let redacted = ok(&operator(
        &address,
        &owner,
        &[
            "redact",
            "artifact",
            &digest,
            "--reason",
            "names a customer",
        ],
    ));
    assert!(redacted.contains(&digest), "{redacted}");
    let (status, gone) = request(
        &address,
        "GET",
        &format!("/v1/rooms/lab/contents/{digest}"),
        &owner,
        None,
    );
    assert_eq!(status, 410, "{gone}");
    let gone: Value = serde_json::from_str(&gone).unwrap();
    assert_eq!(gone["error"], "redacted", "{gone}");
    assert_eq!(gone["redaction"]["by"], "olive", "{gone}");
    assert_eq!(gone["redaction"]["why"], "names a customer", "{gone}");
    assert_eq!(gone["redaction"]["old_digest"], digest.as_str(), "{gone}");
    let report = get(
        &address,
        &format!("/v1/rooms/lab/contributions/{contribution}"),
        &owner,
    );
    assert!(report["body"].is_null(), "{report}");
    assert_eq!(
        report["redactions"][0]["old_digest"],
        digest.as_str(),
        "{report}"
    );

    // The owner redacts the memory entry: listed with its record, never sent to a model.
    let redacted = ok(&operator(
        &address,
        &owner,
        &["redact", "memory", &entry, "--reason", "a password"],
    ));
    assert!(redacted.contains(&entry), "{redacted}");
    let listed = get(&address, "/v1/rooms/lab/memory", &owner);
    assert_eq!(listed["items"][0]["text"], "[redacted]", "{listed}");
    assert_eq!(
        listed["items"][0]["redacted"]["why"], "a password",
        "{listed}"
    );
    assert!(!listed.to_string().contains("tulip"), "{listed}");
    let memory = ok(&operator(&address, &owner, &["memory", "list"]));
    assert!(memory.contains("redacted by olive: a password"), "{memory}");
    assert!(!memory.contains("tulip"), "{memory}");
    let table = ok(&operator(&address, &owner, &["redactions"]));
    assert!(table.contains(&format!("content {digest}")), "{table}");
    assert!(table.contains(&format!("memory entry {entry}")), "{table}");
    assert!(table.contains("a password"), "{table}");
    let records: Value =
        serde_json::from_str(&ok(&operator(&address, &owner, &["redactions", "--json"]))).unwrap();
    assert_eq!(records["items"].as_array().unwrap().len(), 2, "{records}");

    // C1: the next reasoner prompt holds neither the text nor the entry.
    ask(&address, &owner, "What should the next study compare?");
    let prompt = reasoner_prompt_with(site, "What should the next study compare?");
    assert!(!prompt.contains("tulip-0451"), "{prompt}");
    assert!(!prompt.contains(&format!("id=\"{entry}\"")), "{prompt}");

    // The same request again: the deterministic model writes the same report, whose content
    // the owner redacted. It is not stored again (its record answers for it), so no model
    // reviews the redacted words; the report shows the record instead of its body.
    ask(&address, &owner, README_MESSAGE);
    let again = wait_until("the report of the repeated request", || {
        let list = get(&address, "/v1/rooms/lab/objectives", &owner);
        let repeated = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] != id && o["title"] == objective["title"])
            .ok_or_else(|| list.to_string())?;
        let path = format!(
            "/v1/rooms/lab/objectives/{}/reviews",
            repeated["id"].as_str().unwrap()
        );
        let reviews = get(&address, &path, &owner);
        reviews["reports"][0]["contribution"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| reviews.to_string())
    });
    let report = get(
        &address,
        &format!("/v1/rooms/lab/contributions/{again}"),
        &owner,
    );
    assert_eq!(report["body_digest"], digest.as_str(), "{report}");
    assert!(report["body"].is_null(), "{report}");
    assert_eq!(
        report["redactions"][0]["why"], "names a customer",
        "{report}"
    );
    let (status, _) = request(
        &address,
        "GET",
        &format!("/v1/rooms/lab/contents/{digest}"),
        &owner,
        None,
    );
    assert_eq!(status, 410);

    // The store: the content row is gone; the history replays (every revision rebuilds,
    // the last to the stored state) and no revision holds the text.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = site.open().await;
        let room = RoomId::parse("lab").unwrap();
        let digest: ContentDigest = digest.parse().unwrap();
        assert!(store.content(&room, &digest).await.unwrap().is_none());
        let stored = store.load(&room).await.unwrap().unwrap();
        for revision in Revision::FIRST.0..=stored.revision.0 {
            let state = store
                .state_at(&room, Revision(revision))
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("revision {revision} cannot be rebuilt"));
            let json = serde_json::to_string(&state).unwrap();
            assert!(!json.contains("tulip-0451"), "revision {revision}: {json}");
            if revision == stored.revision.0 {
                assert_eq!(state, stored.state, "the last revision rebuilds otherwise");
            }
        }
        let history = store.history(&room, Revision(0), 10_000).await.unwrap();
        let logs = serde_json::to_string(&history).unwrap();
        assert!(!logs.contains("tulip-0451"), "{logs}");
    });
    drop(started);
}

#[test]
fn m1_a_redacted_artifact_and_memory_entry_are_gone_and_history_still_replays() {
    redacted_content_is_gone_and_history_still_replays(&ModelSite::sqlite());
}

#[test]
fn m1_the_same_on_postgres() {
    redacted_content_is_gone_and_history_still_replays(&ModelSite::postgres());
}

#[test]
fn redact_commands_document_their_exit_codes_and_refuse_bad_arguments_before_any_request() {
    for sub in [
        &["redact"][..],
        &["redact", "artifact"],
        &["redact", "memory"],
        &["redactions"],
    ] {
        let help = bare(&[sub, &["--help"]].concat());
        let stdout = String::from_utf8_lossy(&help.stdout);
        assert_eq!(help.status.code(), Some(0));
        assert!(
            stdout.contains("Exit codes: 0 done; 1 error"),
            "{sub:?}: {stdout}"
        );
    }
    let top = bare(&["--help"]);
    let stdout = String::from_utf8_lossy(&top.stdout);
    assert!(
        stdout.contains("redact") && stdout.contains("redactions"),
        "{stdout}"
    );
    // Usage errors exit 2 and send nothing (nothing listens on port 9).
    let entry = "00000000-0000-4000-8000-000000000001";
    let digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    let long = "x".repeat(501);
    for usage in [
        vec!["redact", "artifact", digest],
        vec!["redact", "artifact", "md5:1", "--reason", "x"],
        vec!["redact", "artifact", digest, "--reason", "  "],
        vec!["redact", "memory", "not-an-id", "--reason", "x"],
        vec!["redact", "memory", entry, "--reason", &long],
        vec!["redact", "file", entry, "--reason", "x"],
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
