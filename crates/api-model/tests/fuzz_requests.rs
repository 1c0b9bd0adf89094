//! Fuzzing the REST request bodies (issue 17, item 5): every request type of the API, read
//! with `serde_json` as the server reads a body, from raw bytes and from JSON objects with the
//! API's field names, tags and random values, never panics; what it accepts serializes to a
//! body that reads back to the same thing (a round trip), and what it refuses is a typed
//! `serde_json::Error`.
//!
//! Cases per target: `AGENTROOM_FUZZ_CASES` (default 10,000, what CI runs; the harness runs
//! 1,000,000 with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_api_model::requests::{
    AcknowledgeBody, AddMemberBody, AddMemoryBody, ArtifactBody, ControlBody, CorrectMemoryBody,
    CriterionBody, EmptyBody, LateBody, MemoryProvenance, ObservedBody, PostEvent, RaiseBody,
    ReceiptBody, RedactBody, RedactionTargetBody, ResolveBody, RetractMemoryBody, ReviewBody,
    RolesBody, SourceBody, SubmissionBody, TaskUpdateBody, VerdictBody, WaitBody,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;
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

/// Every name a request body uses, as a field or a tag value.
const NAMES: [&str; 70] = [
    "action",
    "amount_micros",
    "artifacts",
    "body",
    "content",
    "content_digest",
    "contribution",
    "control",
    "criterion",
    "decision",
    "digest",
    "evidence",
    "excerpt",
    "id",
    "media_type",
    "name",
    "objective",
    "observed",
    "outcome",
    "outputs",
    "quote",
    "reason",
    "report_version",
    "retrieved_at",
    "sources",
    "status",
    "task",
    "text",
    "title",
    "uri",
    "url",
    "usage_micros",
    "verdict",
    "verdicts",
    "kind",
    "owner_message",
    "owner_correction",
    "explicit_reference",
    "wait_ack",
    "internal_receipt",
    "criteria",
    "note",
    "pause",
    "resume",
    "cancel",
    "succeeded",
    "failed",
    "failure",
    "external",
    "document",
    "readmit",
    "discard",
    "principal",
    "roles",
    "issue_token",
    "owner",
    "operator",
    "reviewer",
    "specialist",
    "agent_host",
    "sam",
    "provenance",
    "from",
    "event",
    "why",
    "target",
    "artifact",
    "memory",
    "entry",
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&NAMES[..]).prop_map(str::to_owned),
        2 => "[a-z0-9 \\-:]{0,12}",
        1 => Just("00000000-0000-4000-8000-000000000001".to_owned()),
        1 => Just(format!("sha256:{}", "a".repeat(64))),
        1 => any::<String>(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            object(inner),
        ]
    })
}

fn object(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop::collection::vec((text(), values), 0..6)
        .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>()))
}

/// Reads `bytes` as `T`; an accepted body round-trips through its serialization.
fn check<T: Serialize + DeserializeOwned>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(read) = serde_json::from_slice::<T>(bytes) else {
        return Ok(());
    };
    let written = serde_json::to_value(&read).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let again: T = serde_json::from_value(written.clone())
        .map_err(|e| TestCaseError::fail(format!("{written}: {e}")))?;
    prop_assert_eq!(serde_json::to_value(&again).unwrap(), written);
    Ok(())
}

fn check_all(bytes: &[u8]) -> Result<(), TestCaseError> {
    check::<PostEvent>(bytes)?;
    check::<ControlBody>(bytes)?;
    check::<TaskUpdateBody>(bytes)?;
    check::<VerdictBody>(bytes)?;
    check::<ObservedBody>(bytes)?;
    check::<ReviewBody>(bytes)?;
    check::<LateBody>(bytes)?;
    check::<RaiseBody>(bytes)?;
    check::<AcknowledgeBody>(bytes)?;
    check::<EmptyBody>(bytes)?;
    check::<ResolveBody>(bytes)?;
    check::<ArtifactBody>(bytes)?;
    check::<SourceBody>(bytes)?;
    check::<AddMemberBody>(bytes)?;
    check::<RolesBody>(bytes)?;
    check::<CriterionBody>(bytes)?;
    check::<WaitBody>(bytes)?;
    check::<ReceiptBody>(bytes)?;
    check::<AddMemoryBody>(bytes)?;
    check::<MemoryProvenance>(bytes)?;
    check::<CorrectMemoryBody>(bytes)?;
    check::<RetractMemoryBody>(bytes)?;
    check::<RedactBody>(bytes)?;
    check::<RedactionTargetBody>(bytes)?;
    check::<SubmissionBody>(bytes)
}

#[test]
fn raw_bytes_never_panic_any_request_body() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..160), |bytes| {
            check_all(&bytes)
        })
        .unwrap();
}

#[test]
fn json_objects_with_the_apis_names_read_as_a_body_or_a_typed_error() {
    runner()
        .run(&object(json_value()), |body| {
            check_all(body.to_string().as_bytes())
        })
        .unwrap();
}
