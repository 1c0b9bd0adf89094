//! `agentroom operations list|resolve` on the embedded database, through the real binary:
//! operators see uncertain and dead-lettered calls and record a resolution with who and why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use agentroom_ports::conformance::Driver;
use agentroom_ports::domain::engine::Effect;
use agentroom_ports::{OperationStatus, WorkflowStore};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use serde_json::Value;

fn agentroom(root: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn operators_list_uncertain_and_dead_lettered_calls_and_resolve_them_with_who_and_why() {
    let root = tempfile::tempdir().unwrap();
    assert!(agentroom(root.path(), &["migrate", "up"]).status.success());
    let store =
        SqliteRooms::open(&root.path().join("planning.db"), Durability::ProcessCrash).unwrap();
    let mut room = Driver::create(&store, "local", 1_000_000).await;
    let mut ops = Vec::new();
    for text in ["first", "second", "third"] {
        let decision = room.owner_message(text);
        let op = decision
            .effects
            .iter()
            .find_map(|e| match e {
                Effect::ReserveAndCall(request) => Some(request.op),
                _ => None,
            })
            .unwrap();
        room.commit(&store, &decision, "event_accepted")
            .await
            .unwrap();
        ops.push(op);
    }
    assert!(store.mark_uncertain(ops[0], 1).await.unwrap());
    assert!(
        store
            .dead_letter(ops[1], "recovery gave up after 3 attempts")
            .await
            .unwrap()
    );

    let listed = agentroom(root.path(), &["operations", "list", "--state", "uncertain"]);
    assert!(listed.status.success(), "{listed:?}");
    let table = text(&listed.stdout);
    assert!(table.contains(&ops[0].to_string()), "{table}");
    assert!(!table.contains(&ops[1].to_string()), "{table}");
    let dead = agentroom(
        root.path(),
        &["operations", "list", "--state", "dead-letter", "--json"],
    );
    let lines: Vec<Value> = text(&dead.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["op"], ops[1].to_string());
    assert_eq!(lines[0]["state"], "dead_letter");
    assert_eq!(
        lines[0]["dead_letter_reason"],
        "recovery gave up after 3 attempts"
    );
    assert_eq!(lines[0]["reservation_micros"], 1_000);
    let open = agentroom(root.path(), &["operations", "list", "--json"]);
    assert_eq!(
        text(&open.stdout).lines().count(),
        3,
        "every open operation"
    );

    // Bad inputs change nothing.
    let op = ops[0].to_string();
    let missing = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            &op,
            "--confirm-failed",
            "--reason",
            "x",
        ],
    );
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("--operator"),
        "{}",
        text(&missing.stderr)
    );
    let both = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            &op,
            "--confirm-failed",
            "--confirm-succeeded",
            "--operator",
            "oscar",
            "--reason",
            "x",
        ],
    );
    assert!(!both.status.success());
    let in_flight = ops[2].to_string();
    let refused = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            &in_flight,
            "--confirm-failed",
            "--operator",
            "oscar",
            "--reason",
            "x",
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("in_flight"),
        "{}",
        text(&refused.stderr)
    );
    let unknown = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            "00000000-0000-0000-0000-000000000001",
            "--confirm-failed",
            "--operator",
            "oscar",
            "--reason",
            "x",
        ],
    );
    assert!(!unknown.status.success());
    assert_eq!(
        store.operation(ops[0]).await.unwrap().unwrap().status,
        OperationStatus::Uncertain
    );

    let resolved = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            &op,
            "--confirm-failed",
            "--operator",
            "oscar",
            "--reason",
            "the provider's log has no such request",
        ],
    );
    assert!(resolved.status.success(), "{resolved:?}");
    let record = store.operation(ops[0]).await.unwrap().unwrap();
    assert_eq!(record.status, OperationStatus::Resolved);
    let resolution = record.resolution.unwrap();
    assert_eq!(resolution.operator, "oscar");
    assert_eq!(resolution.reason, "the provider's log has no such request");
    let listed = agentroom(root.path(), &["operations", "list", "--state", "resolved"]);
    assert!(
        text(&listed.stdout).contains("oscar (failed): the provider's log has no such request")
    );
    let again = agentroom(
        root.path(),
        &[
            "operations",
            "resolve",
            &op,
            "--confirm-succeeded",
            "--operator",
            "oscar",
            "--reason",
            "x",
        ],
    );
    assert!(!again.status.success(), "resolved once");
}
