//! Fuzzing the planning wire (issue 17, item 5): `wire::decode` over raw bytes, over
//! mutated valid messages and over structurally valid JSON objects with random fields and
//! values never panics; what it accepts re-encodes to a message that decodes to the same
//! request (a round trip), and what it refuses is an A2E error that encodes to a well-formed
//! `error` reply echoing the request's id when it had a readable one.
//!
//! Cases per target: `AGENTROOM_FUZZ_CASES` (default 10,000, what CI runs; the harness runs
//! 1,000,000 with `--release`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_planning::wire::{
    Body, Envelope, ErrorCode, PlanningRequest, ProtocolError, Reply, decode, encode,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

/// Cases per target.
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

/// Strings that reach the edges: empty, NUL, non-ASCII, commas, near and over the limits.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z ,\\-]{0,12}",
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => "[a\\x00\u{e9}\u{1F600}]{1,6}",
        1 => (250usize..260).prop_map(|n| "l".repeat(n)),
        1 => (1020usize..1030).prop_map(|n| "t".repeat(n)),
    ]
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const TYPES: [&str; 12] = [
    "planning/plan/create",
    "planning/plan/list",
    "planning/task/add",
    "planning/task/update",
    "planning/task/list",
    "planning/plan/board",
    "handshake/req",
    "ping",
    "shutdown",
    "pong",
    "planning/task/add/resp",
    "planning/plan/delete",
];

const FIELDS: [&str; 14] = [
    "name",
    "columns",
    "description",
    "plan_id",
    "title",
    "status",
    "assignee",
    "deps",
    "metadata",
    "task_id",
    "agent_id",
    "agent_caps",
    "auth_token",
    "extra",
];

/// A field's value: mostly of the type the field wants, sometimes anything.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => text().prop_map(Value::String),
        2 => prop::collection::vec(text(), 0..5)
            .prop_map(|v| Value::Array(v.into_iter().map(Value::String).collect())),
        1 => prop::collection::btree_map(text(), json_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        2 => json_value(),
    ]
}

/// A JSON object shaped like a message: a type (known or not, sometimes missing or not a
/// string), an id (string, over-long, null, a number or missing) and random fields.
fn message() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        8 => prop::sample::select(&TYPES[..]).prop_map(|t| Value::String(t.to_owned())),
        1 => text().prop_map(Value::String),
        1 => json_value(),
    ];
    let id = prop_oneof![
        4 => "[a-z0-9]{0,8}".prop_map(Value::String),
        1 => Just(Value::Null),
        1 => (250usize..260).prop_map(|n| Value::String("i".repeat(n))),
        1 => json_value(),
    ];
    let fields = prop::collection::vec((prop::sample::select(&FIELDS[..]), field_value()), 0..8);
    (
        prop::option::weighted(0.95, kind),
        prop::option::weighted(0.9, id),
        fields,
    )
        .prop_map(|(kind, id, fields)| {
            let mut object = Map::new();
            if let Some(kind) = kind {
                object.insert("type".to_owned(), kind);
            }
            if let Some(id) = id {
                object.insert("id".to_owned(), id);
            }
            for (name, value) in fields {
                object.insert(name.to_owned(), value);
            }
            Value::Object(object)
        })
}

/// The message that asks for `request` with id `id`, as a client would write it.
fn encode_request(id: &str, request: &PlanningRequest) -> Value {
    let mut out = json!({"type": request.kind().request_type(), "id": id});
    let fields = match request {
        PlanningRequest::PlanCreate(r) => json!({
            "name": r.name, "columns": r.columns, "description": r.description,
        }),
        PlanningRequest::PlanList => json!({}),
        PlanningRequest::TaskAdd(r) => json!({
            "plan_id": r.plan_id, "title": r.title, "status": r.status,
            "description": r.description, "assignee": r.assignee, "deps": r.deps,
            "metadata": serde_json::from_str::<Value>(&r.metadata).unwrap(),
        }),
        PlanningRequest::TaskUpdate(r) => json!({
            "plan_id": r.plan_id, "task_id": r.task_id, "status": r.status,
            "assignee": r.assignee, "deps": r.deps,
        }),
        PlanningRequest::TaskList(r) => json!({"plan_id": r.plan_id, "status": r.status}),
        PlanningRequest::PlanBoard(r) => json!({"plan_id": r.plan_id}),
    };
    if let (Value::Object(out), Value::Object(fields)) = (&mut out, fields) {
        out.extend(fields);
    }
    out
}

/// What every decode must hold: accepted planning requests round-trip; refusals encode to a
/// well-formed `error` reply.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    match decode(bytes) {
        Ok(inbound) => {
            if let Body::Planning(request) = &inbound.body {
                let again = encode_request(&inbound.req_id, request).to_string();
                let decoded = decode(again.as_bytes())
                    .map_err(|e| TestCaseError::fail(format!("{again}: {e:?}")))?;
                prop_assert_eq!(&decoded, &inbound, "{}", again);
            }
        }
        Err(error) => check_error(bytes, &error)?,
    }
    Ok(())
}

fn check_error(bytes: &[u8], error: &ProtocolError) -> Result<(), TestCaseError> {
    let line = encode(
        &Reply::Error(error.clone()),
        Envelope {
            id: "r",
            ts: 1.0,
            req_id: "ignored",
        },
    );
    let reply: Value =
        serde_json::from_str(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&reply["type"], "error");
    prop_assert!(reply["detail"].is_object(), "{}", line);
    prop_assert_eq!(
        reply["retryable"].as_bool(),
        Some(error.code == ErrorCode::RuntimeError)
    );
    // The id is echoed when the message was an object with a readable string id.
    if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(bytes)
        && let Some(Value::String(id)) = object.get("id")
        && id.len() <= 256
        && error.code != ErrorCode::ParseError
    {
        prop_assert_eq!(&error.req_id, id);
    }
    Ok(())
}

#[test]
fn raw_bytes_never_panic_and_what_decodes_round_trips() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..200), |bytes| {
            check(&bytes)
        })
        .unwrap();
}

#[test]
fn json_messages_with_random_fields_decode_to_a_request_or_a_named_error() {
    runner()
        .run(&message(), |message| check(message.to_string().as_bytes()))
        .unwrap();
}

#[test]
fn mutated_valid_messages_never_panic() {
    const VALID: [&str; 4] = [
        r#"{"type":"planning/task/add","id":"a","plan_id":"p","title":"t","status":"todo","deps":["x"],"metadata":{"k":[1,"v"]}}"#,
        r#"{"type":"planning/plan/create","id":"c","name":"n","columns":["todo","done"],"description":"d"}"#,
        r#"{"type":"planning/task/update","id":"u","plan_id":"p","task_id":"t","status":"done","deps":[]}"#,
        r#"{"type":"handshake/req","id":"h","agent_id":"x","agent_caps":["planning"],"auth_token":"ar_0"}"#,
    ];
    let mutation = (
        prop::sample::select(&VALID[..]),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    );
    runner()
        .run(&mutation, |(base, edits)| {
            let mut bytes = base.as_bytes().to_vec();
            for (at, byte, how) in edits {
                let i = at.index(bytes.len().max(1)).min(bytes.len());
                match how {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i),
                }
            }
            check(&bytes)
        })
        .unwrap();
}
