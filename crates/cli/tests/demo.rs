//! `agentroom demo`: the README's main command, run as the real binary. On a fresh embedded
//! database it prints a completed, reviewed objective whose ledger adds up to the micro and
//! exits 0; a scenario that does not end approved exits non-zero; an existing database is
//! refused; the in-memory engine demos keep their names.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

fn agentroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn demo_runs_an_objective_to_an_approving_review_and_its_ledger_adds_up() {
    let out = agentroom(&["demo"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for expected in [
        "== timeline",
        "[O7] plan v1 admitted whole",
        "rita (model `scripted`) reviewed report v1: Unmet",
        "[R3] report version failed review (1 of 3): corrective planning",
        "[O7] plan v2 admitted whole: 3 tasks, 1 reused unchanged (O3)",
        "rita (model `scripted`) reviewed report v2: AllMet",
        "(completed, revision 2)",
        "review of report v2 by rita: cites-sources=Met covers-2026=Met",
        "== ledger",
        "reserved $0.000000",
        "= spent, reserved $0.000000",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in\n{stdout}"
        );
    }
    // Eight calls, each reserved and settled: two plans, four specialist tasks, two reviews.
    assert_eq!(stdout.matches("(settled)").count(), 8, "{stdout}");
}

#[test]
fn demo_keeps_its_database_under_root_and_refuses_to_reuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let root = root.to_str().unwrap();
    let first = agentroom(&["demo", "--root", root]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(Path::new(root).join("planning.db").exists());
    let again = agentroom(&["demo", "--root", root]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("fresh database"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn demo_fails_when_a_scenario_does_not_end_approved() {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/misbehaving/replans-forever.toml");
    let out = agentroom(&["demo", "--scenario", scenario.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("not every objective completed"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn demo_names_its_scenarios_when_one_is_unknown() {
    let out = agentroom(&["demo", "--scenario", "no-such-scenario"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no scenario no-such-scenario"));
}

#[test]
fn the_in_memory_engine_demos_keep_their_names() {
    let out = agentroom(&["demo", "--scenario", "budget"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("[B2] specialist call not admitted"));
}
