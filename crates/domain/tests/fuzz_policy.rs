//! Fuzzing the policy TOML (issue 17, item 5): `RoomPolicy::from_toml` and
//! `AccessPolicy::from_toml` over arbitrary text, over the shipped policies mutated (bytes
//! replaced, TOML tokens inserted, lines duplicated or cut) and over documents built from the
//! policies' own keys with random values never panic; a refusal names a line and a column
//! inside the text, and an accepted policy round-trips through the JSON the Room state keeps
//! it in (D1).
//!
//! Cases per target: `AGENTROOM_FUZZ_CASES` (default 10,000, what CI runs; the harness runs
//! 1,000,000 with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_domain::policy::{AccessPolicy, PolicyError, RoomPolicy};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn cases() -> u32 {
    std::env::var("AGENTROOM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

const BASES: [&str; 2] = [
    include_str!("../../../policies/room.toml"),
    include_str!("../../../policies/access.toml"),
];

const TOKENS: [&str; 36] = [
    "\n",
    "=",
    " = ",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "#",
    ".",
    "\t",
    "\\",
    "\\u0000",
    "1e999",
    "-0",
    "9223372036854775808",
    "0x7f",
    "1979-05-27",
    "inf",
    "nan",
    "true",
    "[bounds]\n",
    "[roles.owner]\n",
    "permissions = ",
    "source = ",
    "task_identity_prefix = ",
    "files = [\"\"]\n",
    "max_artifact_bytes = ",
    "\u{0}",
    "\u{e9}\u{1F600}",
];

fn check_error(text: &str, error: &PolicyError) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    prop_assert!(
        (1..=lines + 1).contains(&error.line()),
        "line {} of {}: {}",
        error.line(),
        lines,
        error
    );
    prop_assert!(error.column() >= 1, "{}", error);
    prop_assert!(!error.message().is_empty(), "{}", error);
    Ok(())
}

fn round_trips<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    policy: &T,
) -> Result<(), TestCaseError> {
    let json = serde_json::to_string(policy).unwrap();
    let again: T = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&again, policy);
    Ok(())
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match RoomPolicy::from_toml(text) {
        Ok(policy) => round_trips(&policy)?,
        Err(error) => check_error(text, &error)?,
    }
    match AccessPolicy::from_toml(text) {
        Ok(policy) => round_trips(&policy)?,
        Err(error) => check_error(text, &error)?,
    }
    Ok(())
}

fn mutate(base: &str, edits: &[(Index, Index, u8)]) -> String {
    let mut bytes = base.as_bytes().to_vec();
    for (at, token, how) in edits {
        let i = at.index(bytes.len() + 1);
        match how % 5 {
            0 => bytes
                .splice(i..i, token.get(&TOKENS[..]).bytes())
                .for_each(drop),
            1 if i < bytes.len() => {
                let end = (i + 1 + token.index(16)).min(bytes.len());
                bytes.drain(i..end).for_each(drop);
            }
            2 if i < bytes.len() => bytes[i] = u8::try_from(token.index(256)).unwrap(),
            3 => {
                let start = bytes[..i]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |p| p + 1);
                let end = bytes[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(bytes.len(), |p| i + p + 1);
                let line = bytes[start..end].to_vec();
                bytes.splice(start..start, line).for_each(drop);
            }
            _ => bytes.truncate(i),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A document of the policies' tables and keys with values of every TOML type.
fn document() -> impl Strategy<Value = String> {
    let table = prop::sample::select(
        &[
            "",
            "bounds",
            "review",
            "capabilities",
            "content",
            "roles.owner",
            "roles.operator",
            "roles.nobody",
            "roles",
            "bounds.x",
        ][..],
    );
    let key = prop::sample::select(
        &[
            "task_identity_prefix",
            "replans_without_progress",
            "interpretations_per_event",
            "failed_report_versions",
            "source",
            "files",
            "bindings",
            "max_artifact_bytes",
            "max_contribution_bytes",
            "permissions",
            "unknown",
        ][..],
    );
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0i64..200).prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        "[A-Za-z\\.]{0,10}".prop_map(|s| format!("{s:?}")),
        prop::collection::vec(
            prop::sample::select(
                &[
                    "event.post",
                    "budget.read",
                    "objective.read",
                    "nope",
                    "",
                    "planning.use"
                ][..]
            ),
            0..5
        )
        .prop_map(|v| format!("{v:?}")),
        Just("true".to_owned()),
        Just("{ a = 1 }".to_owned()),
    ];
    prop::collection::vec((table, prop::collection::vec((key, value), 0..4)), 0..5).prop_map(
        |tables| {
            let mut text = String::new();
            for (table, pairs) in tables {
                if !table.is_empty() {
                    text.push_str(&format!("[{table}]\n"));
                }
                for (key, value) in pairs {
                    text.push_str(&format!("{key} = {value}\n"));
                }
            }
            text
        },
    )
}

#[test]
fn arbitrary_text_never_panics() {
    runner().run(&any::<String>(), |text| check(&text)).unwrap();
}

#[test]
fn mutated_shipped_policies_are_located_refusals_or_round_trip() {
    let strategy = (
        prop::sample::select(&BASES[..]),
        prop::collection::vec((any::<Index>(), any::<Index>(), any::<u8>()), 1..6),
    );
    runner()
        .run(&strategy, |(base, edits)| check(&mutate(base, &edits)))
        .unwrap();
}

#[test]
fn documents_of_the_policies_keys_are_located_refusals_or_round_trip() {
    runner().run(&document(), |text| check(&text)).unwrap();
}
