//! `agentroom policies check` and `agentroom serve` refuse a bad policy file naming the file,
//! line, column and field, through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies")
}

/// A copy of the shipped policies with `file` replaced by `text`.
fn policies_with(file: &str, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["room.toml", "access.toml", "prices.toml"] {
        std::fs::copy(shipped().join(name), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join(file), text).unwrap();
    dir
}

fn check(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["policies", "check", "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

fn refused(file: &str, text: &str, line: usize, field: &str, message: &str) {
    let dir = policies_with(file, text);
    let out = check(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{file} accepted: {out:?}");
    assert!(stderr.contains(file), "{stderr}");
    assert!(
        stderr.contains(&format!("line {line}, column ")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("field `{field}`")), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn the_shipped_policies_are_ok() {
    let out = check(&shipped());
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("ok"),
        "{out:?}"
    );
}

#[test]
fn a_bad_role_name_names_file_line_and_field() {
    refused(
        "access.toml",
        "[roles.owner]\npermissions = [\"event.post\"]\n\n[roles.janitor]\npermissions = []\n",
        4,
        "roles.janitor",
        "janitor",
    );
}

#[test]
fn an_unknown_permission_names_file_line_and_field() {
    refused(
        "access.toml",
        "[roles.owner]\npermissions = [\n    \"event.post\",\n    \"budget.steal\",\n]\n",
        4,
        "roles.owner.permissions",
        "budget.steal",
    );
}

#[test]
fn a_duplicate_permission_names_file_line_and_field() {
    refused(
        "access.toml",
        "[roles.operator]\npermissions = [\"budget.raise\", \"budget.raise\"]\n",
        2,
        "roles.operator.permissions",
        "budget.raise",
    );
}

#[test]
fn a_negative_price_names_file_line_and_field() {
    let text = std::fs::read_to_string(shipped().join("prices.toml"))
        .unwrap()
        .replace(
            "[models.\"gpt-4o\"]\ninput_micros_per_mtok = 2_500_000",
            "[models.\"gpt-4o\"]\ninput_micros_per_mtok = -1",
        );
    let line = text
        .lines()
        .position(|l| l == "input_micros_per_mtok = -1")
        .unwrap()
        + 1;
    refused(
        "prices.toml",
        &text,
        line,
        "models.\"gpt-4o\".input_micros_per_mtok",
        "negative",
    );
}

#[test]
fn a_syntax_error_names_file_line_and_field() {
    refused(
        "room.toml",
        "task_identity_prefix = \"P\"\n\n[bounds]\nreplans_without_progress = = 3\n",
        4,
        "bounds.replans_without_progress",
        "",
    );
    refused(
        "prices.toml",
        "[models.x]\ninput_micros_per_mtok = 1\noutput_micros_per_mtok = [\n",
        3,
        "models.x.output_micros_per_mtok",
        "",
    );
}

#[test]
fn an_unknown_field_is_refused() {
    refused(
        "room.toml",
        "\n[review]\nsauce = \"model\"\n",
        3,
        "review.sauce",
        "sauce",
    );
}

#[test]
fn serve_refuses_to_start_on_a_bad_policy() {
    let dir = policies_with("access.toml", "[roles.janitor]\npermissions = []\n");
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(["serve", "--listen", "127.0.0.1:0", "--policies"])
        .arg(dir.path())
        .arg("--root")
        .arg(data.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("access.toml: line 1, column "), "{stderr}");
    assert!(stderr.contains("field `roles.janitor`"), "{stderr}");
    assert!(out.stdout.is_empty(), "it never listened: {out:?}");
}
