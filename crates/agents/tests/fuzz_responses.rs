//! Fuzzing the provider responses (issue 17, item 5): the OpenAI-compatible adapter reading
//! what a real HTTP server answers — any status with any body, chat completions with random
//! fields, usage and finish reasons, and contents shaped like each role's JSON envelope with
//! random fields and values — never panics. Every answer becomes one of the typed outcomes
//! (returned, not sent, refused, uncertain); a 2xx whose body is not a chat completion is
//! never a successful call; the price table (`prices.toml`) parses arbitrary and mutated text
//! to a table or a typed error.
//!
//! Cases per target: `AGENTROOM_FUZZ_CASES` (default 10,000, what CI runs; the harness runs
//! 1,000,000 with `--release`). Each case is one HTTP exchange on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use agentroom_agents::PriceTable;
use agentroom_agents::openai::{OpenAi, OpenAiConfig};
use agentroom_ports::domain::engine::{
    ReasonerResult, ReviewerResult, SpecialistResult, TaskBrief,
};
use agentroom_ports::domain::ids::{OperationId, PrincipalId, TaskIdentity, TaskKey};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::{Criterion, ObservedRevisions};
use agentroom_ports::domain::plan::TaskKind;
use agentroom_ports::domain::review::{ReportRef, Source, SourceSet};
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentOutcome, Reasoner, ReasonerCall, Reviewer, ReviewerCall, Specialist, SpecialistCall,
};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

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

const PRICES: &str = r#"
[models.test-model]
input_micros_per_mtok = 2_500_000
output_micros_per_mtok = 10_000_000
connector_micros = 3

[bounds.reasoner]
max_input_tokens = 20_000
max_output_tokens = 1_000
per_message_overhead = 8
[bounds.specialist]
max_input_tokens = 20_000
max_output_tokens = 1_000
per_message_overhead = 8
[bounds.reviewer]
max_input_tokens = 20_000
max_output_tokens = 1_000
per_message_overhead = 8
"#;

const RESERVATION: i64 = 60_003;

/// What the server answers next: a status, a `retry-after` header and a body.
#[derive(Default)]
struct Next(Mutex<(u16, Option<String>, Vec<u8>)>);

async fn chat(State(next): State<Arc<Next>>) -> Response {
    let (status, retry_after, body) = next.0.lock().unwrap().clone();
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json");
    if let Some(value) = retry_after {
        response = response.header("retry-after", value);
    }
    response.body(Body::from(body)).unwrap()
}

/// A server answering what the test sets, an adapter on it, and a runtime for both.
struct Provider {
    runtime: tokio::runtime::Runtime,
    next: Arc<Next>,
    adapter: OpenAi,
}

impl Provider {
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let next = Arc::new(Next::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&next));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        let mut config = OpenAiConfig::new(format!("http://{addr}/v1"), "test-model");
        config.api_key_env = Some("AGENTROOM_TEST_KEY".to_owned());
        config.connect_timeout_ms = 2_000;
        config.request_timeout_ms = 10_000;
        let adapter = OpenAi::new(&config, PriceTable::parse(PRICES).unwrap(), |var| {
            (var == "AGENTROOM_TEST_KEY").then(|| "sk-test".to_owned())
        })
        .unwrap();
        Self {
            runtime,
            next,
            adapter,
        }
    }

    fn answer(&self, status: u16, retry_after: Option<String>, body: Vec<u8>) {
        *self.next.0.lock().unwrap() = (status, retry_after, body);
    }
}

fn op() -> OperationId {
    "00000000-0000-0000-0000-0000000000a1".parse().unwrap()
}

const OBSERVED: ObservedRevisions = ObservedRevisions {
    objective: 3,
    control: 1,
};

fn reasoner_call() -> ReasonerCall {
    ReasonerCall {
        op: op(),
        reservation: UsdMicros::new(RESERVATION),
        objective: None,
        observed: OBSERVED,
        text: "What time zone is the team in?".into(),
        objective_title: None,
        criteria: vec![],
        progress: vec![],
        unmet: vec![],
        feedback: vec![],
        attempt: 1,
        context: Default::default(),
    }
}

fn specialist_call() -> SpecialistCall {
    SpecialistCall {
        op: op(),
        reservation: UsdMicros::new(RESERVATION),
        principal: PrincipalId::parse("sam").unwrap(),
        objective: None,
        task: TaskBrief {
            identity: TaskIdentity::from_wire("p1/gather"),
            key: TaskKey::parse("gather").unwrap(),
            title: "Gather sources".into(),
            capability: "research".into(),
            inputs: Map::new(),
            kind: TaskKind::Production,
            dep_contributions: vec![],
        },
        context: Default::default(),
    }
}

fn reviewer_call() -> ReviewerCall {
    ReviewerCall {
        op: op(),
        reservation: UsdMicros::new(RESERVATION),
        principal: PrincipalId::parse("rita").unwrap(),
        objective: None,
        observed: OBSERVED,
        report: ReportRef {
            task: TaskIdentity::from_wire("p1/write"),
            version: 2,
            contribution: agentroom_agents::contribution_id(op()),
            source_set: SourceSet::new(vec![Source::External {
                url: "https://example.org/a".into(),
                digest: "sha256:aa".into(),
            }]),
        },
        criteria: vec![Criterion {
            id: agentroom_ports::domain::ids::CriterionId::parse("cites-sources").unwrap(),
            text: "every claim cites a source".into(),
        }],
        context: Default::default(),
    }
}

/// The words of the three roles' envelopes.
const WORDS: [&str; 40] = [
    "answer",
    "body",
    "capability",
    "challenge",
    "contribution",
    "criteria",
    "criterion",
    "deps",
    "document",
    "evidence",
    "excerpt",
    "explanation",
    "failure",
    "gather",
    "inputs",
    "key",
    "kind",
    "met",
    "outputs",
    "plan",
    "production",
    "question",
    "quote",
    "reason",
    "report",
    "research",
    "result",
    "source_set",
    "sources",
    "task",
    "tasks",
    "text",
    "title",
    "topic",
    "unmet",
    "uri",
    "verdict",
    "verdicts",
    "version",
    "cites-sources",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&WORDS[..]).prop_map(str::to_owned),
        2 => "[a-z0-9 \\-/]{0,12}",
        1 => any::<String>(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-2i64..4).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A chat completion around `content`, with random usage, finish reason and refusal.
fn completion() -> impl Strategy<Value = Value> {
    let usage = prop_oneof![
        Just(Value::Null),
        (any::<u64>(), any::<u64>())
            .prop_map(|(p, c)| json!({"prompt_tokens": p, "completion_tokens": c})),
        (0u64..30_000, 0u64..2_000)
            .prop_map(|(p, c)| json!({"prompt_tokens": p, "completion_tokens": c})),
        json_value(),
    ];
    let content = prop_oneof![
        3 => json_value().prop_map(|v| Value::String(v.to_string())),
        1 => json_value(),
        1 => text().prop_map(Value::String),
    ];
    let finish = prop_oneof![Just(json!("stop")), Just(json!("length")), json_value()];
    (
        content,
        usage,
        finish,
        prop::option::weighted(0.1, json_value()),
        0usize..3,
    )
        .prop_map(|(content, usage, finish, refusal, choices)| {
            let mut message = json!({"role": "assistant", "content": content});
            if let Some(refusal) = refusal {
                message["refusal"] = refusal;
            }
            let choice = json!({"index": 0, "message": message, "finish_reason": finish});
            json!({"id": "c", "choices": vec![choice; choices], "usage": usage})
        })
}

/// Calls `role` once against the answer set; the outcome is typed, and a 2xx body that is
/// not a JSON object is never a successful call.
fn call(provider: &Provider, role: u8, body: &[u8], status: u16) -> Result<(), TestCaseError> {
    let is_object = matches!(serde_json::from_slice::<Value>(body), Ok(Value::Object(_)));
    let (returned, usable) = provider.runtime.block_on(async {
        match role % 4 {
            0 => match provider.adapter.interpret(&reasoner_call()).await {
                AgentOutcome::Returned { result, .. } => {
                    (true, !matches!(result, ReasonerResult::FormatError { .. }))
                }
                _ => (false, false),
            },
            1 => match provider.adapter.execute(&specialist_call()).await {
                AgentOutcome::Returned { result, .. } => (
                    true,
                    matches!(result, SpecialistResult::Contribution { .. }),
                ),
                _ => (false, false),
            },
            2 => match provider.adapter.review(&reviewer_call()).await {
                AgentOutcome::Returned { result, .. } => {
                    (true, !matches!(result, ReviewerResult::FormatError { .. }))
                }
                _ => (false, false),
            },
            _ => match provider.adapter.check(CallRole::Reasoner, op()).await {
                AgentOutcome::Returned { result, .. } => (true, result.reply.is_ok()),
                _ => (false, false),
            },
        }
    });
    if !(200..300).contains(&status) || !is_object {
        prop_assert!(
            !usable,
            "status {status}, body {}",
            String::from_utf8_lossy(body)
        );
    }
    let _ = returned;
    Ok(())
}

#[test]
fn any_status_and_body_is_a_typed_outcome() {
    let provider = Provider::start();
    let status = prop_oneof![
        4 => Just(200u16),
        1 => 200u16..600,
    ];
    let retry_after = prop::option::of(prop_oneof![
        "[0-9]{1,4}",
        // Any header value (visible ASCII and spaces), drawn directly: a filter over any
        // string rejected so many that a million cases ran out of proptest's local rejects.
        "[ -~]{0,40}",
        Just("Wed, 21 Oct 2015 07:28:00 GMT".to_owned()),
    ]);
    let body = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..120),
        json_value().prop_map(|v| v.to_string().into_bytes()),
    ];
    runner()
        .run(
            &(status, retry_after, body, any::<u8>()),
            |(status, retry, body, role)| {
                provider.answer(status, retry, body.clone());
                call(&provider, role, &body, status)
            },
        )
        .unwrap();
}

#[test]
fn completions_with_random_envelopes_are_a_typed_outcome() {
    let provider = Provider::start();
    runner()
        .run(&(completion(), any::<u8>()), |(body, role)| {
            let bytes = body.to_string().into_bytes();
            provider.answer(200, None, bytes.clone());
            call(&provider, role, &bytes, 200)
        })
        .unwrap();
}

#[test]
fn price_tables_parse_to_a_table_or_a_typed_error() {
    const TOKENS: [&str; 14] = [
        "\n",
        "=",
        "[",
        "]",
        "\"",
        "_",
        "-1",
        "9223372036854775807",
        "1e9",
        "[models.m]\n",
        "[bounds.reviewer]\n",
        "max_output_tokens = ",
        "input_micros_per_mtok = ",
        "\u{0}",
    ];
    let strategy = (
        prop::collection::vec((any::<Index>(), any::<Index>(), any::<bool>()), 0..6),
        any::<String>(),
        any::<bool>(),
    );
    runner()
        .run(&strategy, |(edits, random, use_random)| {
            let text = if use_random {
                random
            } else {
                let mut bytes = PRICES.as_bytes().to_vec();
                for (at, token, insert) in edits {
                    let i = at.index(bytes.len() + 1);
                    if insert {
                        bytes
                            .splice(i..i, token.get(&TOKENS[..]).bytes())
                            .for_each(drop);
                    } else if i < bytes.len() {
                        let end = (i + 1 + token.index(8)).min(bytes.len());
                        bytes.drain(i..end).for_each(drop);
                    }
                }
                String::from_utf8_lossy(&bytes).into_owned()
            };
            if let Ok(table) = PriceTable::parse(&text) {
                for role in [CallRole::Reasoner, CallRole::Specialist, CallRole::Reviewer] {
                    let _ = table.bounds(role);
                }
            }
            Ok(())
        })
        .unwrap();
}
