//! Fuzzing the capability YAML (issue 17, item 5): `Catalog::parse` over arbitrary text,
//! over the shipped and seed resources mutated (bytes replaced, YAML tokens inserted, lines
//! duplicated or cut) and over deeply nested flow collections never panics and never
//! overflows the stack; every problem it reports names the file and a line inside the text,
//! and a catalog it accepts resolves each of its capabilities and checks random inputs
//! against each without panicking.
//!
//! Cases per target: `AGENTROOM_FUZZ_CASES` (default 10,000, what CI runs; the harness runs
//! 1,000,000 with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_capabilities::Catalog;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value};

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

const BASES: [&str; 5] = [
    include_str!("fixtures/seed_examples.yaml"),
    include_str!("fixtures/bindings.yaml"),
    include_str!("fixtures/described.yaml"),
    include_str!("../../../policies/capabilities/research.yaml"),
    include_str!("../../../policies/bindings.yaml"),
];

/// Pieces of YAML and of the resources' vocabulary.
const TOKENS: [&str; 40] = [
    "\n",
    "\n---\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"",
    "'",
    "#",
    "&a ",
    "*a",
    "!!str ",
    "<<: *a\n",
    "|\n  ",
    ">\n  ",
    "? ",
    "\t",
    "  ",
    "null",
    "~",
    "true",
    "-1",
    "1e999",
    "0x1F",
    "kind: Binding\n",
    "kind: Capability\n",
    "apiVersion: planspec.io/v1alpha1\n",
    "spec:\n",
    "type: object\n",
    "itemType: ",
    "enum: []\n",
    "requires:\n",
    "deprecatedBy: ",
    "phase: ",
    "format: uri\n",
    "\u{0}",
    "\u{e9}\u{1F600}",
];

/// What every parse must hold.
fn check(text: &str) -> Result<(), TestCaseError> {
    // YAML breaks lines at LF and at CR (a lone CR too): at most this many lines.
    let lines = text.split(['\n', '\r']).count();
    match Catalog::parse([("fuzz.yaml", text)]) {
        Err(errors) => {
            prop_assert!(!errors.errors().is_empty());
            for error in errors.errors() {
                let at = error.location();
                prop_assert_eq!(at.file(), "fuzz.yaml");
                prop_assert!(
                    at.line() <= lines + 1,
                    "line {} of {}: {}",
                    at.line(),
                    lines,
                    error
                );
            }
        }
        Ok(catalog) => {
            let names: Vec<String> = catalog
                .registry()
                .iter()
                .map(|c| c.reference().to_string())
                .collect();
            for name in &names {
                // A resolution or its refusal, never a panic.
                let _ = catalog.resolution(name, None);
            }
            for capability in catalog.registry().iter() {
                let mut inputs = Map::new();
                for (n, name) in ["language", "query", "files", "x"].iter().enumerate() {
                    let value = match n {
                        0 => Value::from("rust"),
                        1 => Value::from(7),
                        2 => Value::Array(vec![Value::from("a"), Value::Null]),
                        _ => Value::Null,
                    };
                    inputs.insert((*name).to_owned(), value);
                }
                let _ = Catalog::check_inputs(capability, &inputs);
                let _ = Catalog::check_inputs(capability, &Map::new());
            }
        }
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
            2 if i < bytes.len() => bytes[i] = token.index(256) as u8,
            3 => {
                // Duplicate the line holding `i`.
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

#[test]
fn arbitrary_text_never_panics() {
    runner().run(&any::<String>(), |text| check(&text)).unwrap();
}

#[test]
fn mutated_resources_report_located_problems_or_resolve() {
    let strategy = (
        prop::sample::select(&BASES[..]),
        prop::collection::vec((any::<Index>(), any::<Index>(), any::<u8>()), 1..6),
    );
    // Each case parses a whole resource file: half the cases (the YAML decoder gets
    // `cases()` from the arbitrary-text target, and more here).
    let mut runner = TestRunner::new(Config {
        cases: (cases() / 2).max(1),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(base, edits)| check(&mutate(base, &edits)))
        .unwrap();
}

#[test]
fn deep_nesting_and_aliases_never_overflow() {
    // Past 64 levels every text is refused; the old code overflowed at a few thousand.
    let strategy = (0usize..3, 1usize..6_000, any::<Index>());
    let mut runner = TestRunner::new(Config {
        // Each case is up to 12 KB of text: a twentieth of the cases.
        cases: (cases() / 20).max(1),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(shape, depth, base)| {
            let nested = match shape {
                0 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                1 => format!("{}{}", "{a: ".repeat(depth), "}".repeat(depth)),
                _ => "- ".repeat(depth),
            };
            let base = base.get(&BASES[..]);
            check(&format!("{base}\n---\nspec:\n  inputs: {nested}\n"))?;
            check(&nested)
        })
        .unwrap();
}
