//! `agentroom token issue|revoke|list` through the real binary on the embedded database: a
//! token issued by the command authenticates against the same store, a revoked one does not,
//! an expiring one carries its expiry, lists never show secrets, and bad input (a Room that
//! does not exist, a principal who is not its member) is refused with a clear message and
//! nothing stored; a reader that closes the pipe early ends the output without a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use agentroom_ports::domain::ids::{RoomId, Timestamp};
use agentroom_ports::{AuthError, TokenStore};
use agentroom_store_sqlite::{Durability, SqliteRooms};
use serde_json::Value;

fn agentroom(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

/// Room `local` with owner olive and members oscar (operator) and rita (reviewer); its two
/// first tokens (olive's and oscar's) are issued with it.
fn create_room(root: &Path) {
    let policies = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");
    let output = agentroom(
        root,
        &[
            "room",
            "create",
            "--room",
            "local",
            "--owner",
            "olive",
            "--member",
            "oscar=operator",
            "--member",
            "rita=reviewer",
            "--limit-micros",
            "1000000",
            "--policies",
            policies,
        ],
    );
    assert!(output.status.success(), "{output:?}");
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn store(root: &Path) -> SqliteRooms {
    SqliteRooms::open(&root.join("planning.db"), Durability::ProcessCrash).unwrap()
}

fn now() -> Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Timestamp::from_millis(i64::try_from(millis).unwrap())
}

#[tokio::test]
async fn issued_tokens_authenticate_until_revoked_and_lists_show_no_secret() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    assert!(agentroom(root, &["migrate", "up"]).status.success());
    create_room(root);

    let issued = stdout(&agentroom(
        root,
        &[
            "token",
            "issue",
            "--room",
            "local",
            "--principal",
            "oscar",
            "--label",
            "ci",
        ],
    ));
    let text = issued
        .lines()
        .find(|l| l.starts_with("ar_"))
        .unwrap_or_else(|| panic!("no token printed: {issued}"))
        .to_owned();
    assert!(issued.contains("never expires"), "{issued}");
    let who = store(root).authenticate(&text, now()).await.unwrap();
    assert_eq!(who.principal.as_str(), "oscar");
    assert_eq!(who.room.as_str(), "local");

    let expiring: Value = serde_json::from_str(&stdout(&agentroom(
        root,
        &[
            "token",
            "issue",
            "--room",
            "local",
            "--principal",
            "rita",
            "--expires-in",
            "1h",
            "--json",
        ],
    )))
    .unwrap();
    let expires_at = expiring["expires_at"].as_i64().unwrap();
    let created_at = expiring["created_at"].as_i64().unwrap();
    assert_eq!(expires_at - created_at, 3_600_000);
    let rita = expiring["token"].as_str().unwrap();
    assert!(store(root).authenticate(rita, now()).await.is_ok());
    assert!(matches!(
        store(root)
            .authenticate(rita, Timestamp::from_millis(expires_at))
            .await,
        Err(AuthError::Expired(_))
    ));

    // Lists show ids and principals, never a secret.
    let listed = stdout(&agentroom(root, &["token", "list", "--room", "local"]));
    assert!(
        listed.contains("oscar") && listed.contains("rita"),
        "{listed}"
    );
    assert!(listed.contains("ci"), "{listed}");
    assert!(!listed.contains(&text[20..]), "a secret leaked: {listed}");
    let listed: Value = serde_json::from_str(&stdout(&agentroom(
        root,
        &["token", "list", "--room", "local", "--json"],
    )))
    .unwrap();
    // olive's and oscar's first tokens, and the two issued here.
    assert_eq!(listed.as_array().unwrap().len(), 4);

    // Revoked, it no longer authenticates.
    let id = &text[3..19];
    let revoked = stdout(&agentroom(root, &["token", "revoke", id]));
    assert!(
        revoked.contains(&format!("revoked token {id}")),
        "{revoked}"
    );
    assert!(matches!(
        store(root).authenticate(&text, now()).await,
        Err(AuthError::Revoked(_))
    ));
    let other = RoomId::parse("other").unwrap();
    assert!(store(root).list_tokens(&other).await.unwrap().is_empty());
}

#[test]
fn bad_input_is_refused_with_a_clear_message_and_nothing_stored() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    // No database: the command does not create one.
    let output = agentroom(
        root,
        &["token", "issue", "--room", "local", "--principal", "olive"],
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("agentroom migrate up"));
    assert!(!root.join("planning.db").exists());

    assert!(agentroom(root, &["migrate", "up"]).status.success());
    for (args, says) in [
        (
            vec![
                "token",
                "issue",
                "--room",
                "local",
                "--principal",
                "olive",
                "--expires-in",
                "soon",
            ],
            "not a duration",
        ),
        (
            vec![
                "token",
                "issue",
                "--room",
                "local",
                "--principal",
                "olive",
                "--expires-in",
                "0d",
            ],
            "valid for some time",
        ),
        (
            vec![
                "token",
                "issue",
                "--room",
                "Not A Room",
                "--principal",
                "olive",
            ],
            "room",
        ),
        (
            vec!["token", "revoke", "not-an-id"],
            "not an agentroom token",
        ),
        (
            vec!["token", "revoke", "0123456789abcdef"],
            "no token has the id 0123456789abcdef",
        ),
    ] {
        let output = agentroom(root, &args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let listed = stdout(&agentroom(
        root,
        &["token", "list", "--room", "local", "--json"],
    ));
    assert_eq!(listed.trim(), "[]");
}

/// Issue 17: a token for a Room that does not exist, or for a principal who is not a member of
/// the Room, is refused with a clear message, a non-zero exit and nothing stored.
#[tokio::test]
async fn a_token_only_for_a_member_of_a_room_that_exists() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    assert!(agentroom(root, &["migrate", "up"]).status.success());
    let output = agentroom(
        root,
        &["token", "issue", "--room", "local", "--principal", "olive"],
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no room local"), "{stderr}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let local = RoomId::parse("local").unwrap();
    assert!(store(root).list_tokens(&local).await.unwrap().is_empty());

    create_room(root);
    let before = store(root).list_tokens(&local).await.unwrap();
    assert_eq!(before.len(), 2);
    let output = agentroom(
        root,
        &[
            "token",
            "issue",
            "--room",
            "local",
            "--principal",
            "mallory",
        ],
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("mallory is not a member of room local"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "{output:?}");
    assert_eq!(store(root).list_tokens(&local).await.unwrap(), before);
    // A member gets one.
    stdout(&agentroom(
        root,
        &["token", "issue", "--room", "local", "--principal", "rita"],
    ));
    assert_eq!(store(root).list_tokens(&local).await.unwrap().len(), 3);
}

/// Issue 17: `agentroom token issue … | head -c1` — the reader closes the pipe before the
/// command writes — ends quietly: no panic, a clean exit. The same for a list and for the
/// other commands that print through the same writer (`policies check` here).
#[test]
fn a_closed_stdout_pipe_ends_the_output_without_a_panic() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    assert!(agentroom(root, &["migrate", "up"]).status.success());
    create_room(root);
    let policies = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");
    for args in [
        vec![
            "token",
            "issue",
            "--room",
            "local",
            "--principal",
            "oscar",
            "--root",
            root.to_str().unwrap(),
        ],
        vec![
            "token",
            "list",
            "--room",
            "local",
            "--root",
            root.to_str().unwrap(),
        ],
        vec!["policies", "check", "--dir", policies],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The only reader goes away before the command writes a byte.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(output.status.success(), "{args:?}: {output:?}");
    }
}
