//! The chat-completions adapter against a real HTTP server (axum on port 0) that serves
//! scripted responses and records every request it gets. No mock of the client.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "clippy.toml allows these in #[test] functions only; the helpers here are test code \
              too, and a failed unwrap or panic in them is a failed test"
)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentroom_agents::Agents;
use agentroom_agents::PriceTable;
use agentroom_agents::ProvidersConfig;
use agentroom_agents::openai::{CHECK_MAX_TOKENS, CheckReply, OpenAi, OpenAiConfig};
use agentroom_ports::domain::engine::{
    Charge, ProposalKind, ReasonerResult, ReviewerResult, SpecialistResult, TaskBrief,
};
use agentroom_ports::domain::ids::{CriterionId, OperationId, PrincipalId, TaskIdentity, TaskKey};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::{Criterion, ObservedRevisions};
use agentroom_ports::domain::plan::TaskKind;
use agentroom_ports::domain::price::TokenUsage;
use agentroom_ports::domain::review::{ReportRef, Source, SourceSet, Verdict};
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentCall, AgentOutcome, CallContext, ContextItem, Reasoner, ReasonerCall, Reviewer,
    ReviewerCall, Specialist, SpecialistCall,
};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn op(n: u128) -> OperationId {
    format!("00000000-0000-0000-0000-{n:012x}").parse().unwrap()
}

/// 2.5 and 10 micros per token, 3 micros per call; each role: 20,000 tokens in, 1,000 out.
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

/// 20,000 × 2.5 + 1,000 × 10 + 3.
const RESERVATION: i64 = 60_003;

/// What the server answers, in order.
#[derive(Clone)]
enum Reply {
    /// A status and a JSON body.
    Json(u16, Value),
    /// A status, headers and a body.
    Raw(u16, Vec<(&'static str, &'static str)>, &'static str),
    /// Accepts the request and never answers.
    Hang,
    /// Starts a 200 response and drops the connection in the middle of its body.
    BreakOff,
}

struct Recorded {
    headers: HeaderMap,
    body: Value,
}

#[derive(Default)]
struct Script {
    replies: Mutex<Vec<Reply>>,
    recorded: Mutex<Vec<Recorded>>,
}

struct Server {
    addr: SocketAddr,
    script: Arc<Script>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into_iter().rev().collect()),
            recorded: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, script }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.script
            .recorded
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.headers.clone(), r.body.clone()))
            .collect()
    }
}

async fn chat(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> Response {
    script.recorded.lock().unwrap().push(Recorded {
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let reply = script.replies.lock().unwrap().pop();
    let respond = |status: u16, headers: Vec<(&str, &str)>, body: Body| {
        let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap());
        for (name, value) in headers {
            response = response.header(name, value);
        }
        response.body(body).unwrap()
    };
    match reply.expect("the server has no reply left") {
        Reply::Json(status, body) => respond(
            status,
            vec![("content-type", "application/json")],
            Body::from(body.to_string()),
        ),
        Reply::Raw(status, headers, body) => respond(status, headers, Body::from(body)),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            respond(500, vec![], Body::empty())
        }
        Reply::BreakOff => {
            // The headers and the first bytes go out; then the connection drops.
            let chunks = futures_util::stream::unfold(0_u8, |step| async move {
                match step {
                    0 => Some((
                        Ok(Bytes::from_static(
                            b"{\"choices\": [{\"message\": {\"content\": \"",
                        )),
                        1,
                    )),
                    1 => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Some((Err(std::io::Error::other("the connection dropped")), 2))
                    }
                    _ => None,
                }
            });
            respond(
                200,
                vec![
                    ("content-type", "application/json"),
                    ("content-length", "4096"),
                ],
                Body::from_stream(chunks),
            )
        }
    }
}

fn completion(content: &str, usage: Option<(u64, u64)>) -> Value {
    let mut body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }]
    });
    if let Some((prompt, completion)) = usage {
        body["usage"] = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion
        });
    }
    body
}

fn adapter_with(base_url: &str, prices: &str, request_timeout_ms: u64) -> OpenAi {
    let mut config = OpenAiConfig::new(base_url, "test-model");
    config.api_key_env = Some("AGENTROOM_TEST_KEY".to_owned());
    config.connect_timeout_ms = 1_000;
    config.request_timeout_ms = request_timeout_ms;
    OpenAi::new(&config, PriceTable::parse(prices).unwrap(), |var| {
        (var == "AGENTROOM_TEST_KEY").then(|| "sk-test-123".to_owned())
    })
    .unwrap()
}

fn adapter(server: &Server) -> OpenAi {
    adapter_with(&server.base_url(), PRICES, 5_000)
}

const OBSERVED: ObservedRevisions = ObservedRevisions {
    objective: 3,
    control: 1,
};

fn reasoner_call() -> ReasonerCall {
    ReasonerCall {
        op: op(0xa1),
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
        op: op(0xb2),
        reservation: UsdMicros::new(RESERVATION),
        principal: p("sam"),
        objective: None,
        task: TaskBrief {
            identity: TaskIdentity::from_wire("p1/gather"),
            key: TaskKey::parse("gather").unwrap(),
            title: "Gather sources".into(),
            capability: "research".into(),
            inputs: serde_json::Map::new(),
            kind: TaskKind::Production,
            dep_contributions: vec![],
        },
        context: Default::default(),
    }
}

fn criteria() -> Vec<Criterion> {
    vec![
        Criterion {
            id: CriterionId::parse("cites-sources").unwrap(),
            text: "every claim cites a source".into(),
        },
        Criterion {
            id: CriterionId::parse("covers-2026").unwrap(),
            text: "covers work from 2026".into(),
        },
    ]
}

fn reviewer_call() -> ReviewerCall {
    ReviewerCall {
        op: op(0xc3),
        reservation: UsdMicros::new(RESERVATION),
        principal: p("rita"),
        objective: None,
        observed: OBSERVED,
        report: ReportRef {
            task: TaskIdentity::from_wire("p1/write"),
            version: 2,
            contribution: agentroom_agents::contribution_id(op(0xb2)),
            source_set: SourceSet::new(vec![Source::External {
                url: "https://example.org/a".into(),
                digest: "sha256:aa".into(),
            }]),
        },
        criteria: criteria(),
        context: Default::default(),
    }
}

const ANSWER: &str = r#"{"kind": "answer", "text": "UTC"}"#;

#[tokio::test]
async fn a_request_is_json_object_mode_with_the_model_the_key_and_the_idempotency_key() {
    let server = Server::start(vec![Reply::Json(200, completion(ANSWER, Some((10, 2))))]).await;
    let outcome = adapter(&server).interpret(&reasoner_call()).await;
    let AgentOutcome::Returned {
        result: ReasonerResult::Proposal(proposal),
        ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(proposal.kind, ProposalKind::Answer { text: "UTC".into() });
    assert_eq!(
        proposal.observed, OBSERVED,
        "bound to what it was shown (O10)"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(
        headers["idempotency-key"],
        "00000000-0000-0000-0000-0000000000a1"
    );
    assert_eq!(headers["authorization"], "Bearer sk-test-123");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["max_tokens"], 1_000, "the role's output bound (B6)");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains(r#""kind":"plan""#),
        "the system prompt shows the envelope"
    );
    assert_eq!(body["messages"][1]["role"], "user");
    let brief: Value = brief_of(body);
    assert_eq!(brief["message"], "What time zone is the team in?");
    assert_eq!(brief["attempt"], 1);
}

#[tokio::test]
async fn b3_the_charge_is_the_usage_at_the_models_price_rounded_up_per_component() {
    let server = Server::start(vec![Reply::Json(
        200,
        completion(ANSWER, Some((1_001, 333))),
    )])
    .await;
    let outcome = adapter(&server).interpret(&reasoner_call()).await;
    // ⌈1,001 × 2.5⌉ + 333 × 10 + 3 = 2,503 + 3,330 + 3.
    assert!(
        matches!(
            outcome,
            AgentOutcome::Returned {
                charge: Charge::Actual(m),
                ..
            } if m == UsdMicros::new(5_836)
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn b3_a_response_without_usage_charges_the_whole_reservation() {
    let server = Server::start(vec![Reply::Json(200, completion(ANSWER, None))]).await;
    let outcome = adapter(&server).interpret(&reasoner_call()).await;
    assert!(
        matches!(
            outcome,
            AgentOutcome::Returned {
                charge: Charge::NoUsage,
                result: ReasonerResult::Proposal(_)
            }
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn b3_a_usage_of_zero_prompt_tokens_charges_the_whole_reservation() {
    // What a proxy reports when its upstream gave it no usage: the call ran, it is not free.
    let server = Server::start(vec![Reply::Json(200, completion(ANSWER, Some((0, 0))))]).await;
    let outcome = adapter(&server).interpret(&reasoner_call()).await;
    assert!(
        matches!(
            outcome,
            AgentOutcome::Returned {
                charge: Charge::NoUsage,
                result: ReasonerResult::Proposal(_)
            }
        ),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn d2_a_proxys_timeout_or_gateway_error_is_uncertain_and_never_sent_again() {
    for status in [408_u16, 502, 503, 504] {
        // One reply only: a second request would find none and fail the test.
        let server = Server::start(vec![Reply::Raw(
            status,
            vec![("retry-after", "1"), ("content-type", "application/json")],
            r#"{"error":{"message":"upstream timed out","type":"timeout"}}"#,
        )])
        .await;
        let outcome = adapter(&server).interpret(&reasoner_call()).await;
        assert!(
            matches!(&outcome, AgentOutcome::Uncertain { reason } if reason.contains(&status.to_string())),
            "{status}: {outcome:?}"
        );
        assert_eq!(server.requests().len(), 1, "{status} was sent again");
    }
}

#[tokio::test]
async fn o11_malformed_content_is_a_format_error_that_feeds_repair_and_is_charged() {
    let server = Server::start(vec![
        Reply::Json(
            200,
            completion("Sure! Here is the plan: ...", Some((10, 5))),
        ),
        Reply::Json(200, completion(r#"{"kind": "plan"}"#, Some((10, 5)))),
    ])
    .await;
    let adapter = adapter(&server);
    for expected in ["expected value", "missing field `tasks`"] {
        match adapter.interpret(&reasoner_call()).await {
            AgentOutcome::Returned {
                result: ReasonerResult::FormatError { detail },
                charge: Charge::Actual(m),
            } => {
                assert!(detail.contains(expected), "{detail}");
                assert!(detail.contains("it began:"), "{detail}");
                assert_eq!(m, UsdMicros::new(25 + 50 + 3));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_specialists_unreadable_reply_is_the_tasks_failure_and_a_contribution_is_named_by_its_operation()
 {
    let contribution = json!({
        "result": "contribution",
        "artifacts": [{"name": "notes", "content": "found two papers"}],
        "sources": [{"kind": "external", "url": "https://example.org/p", "digest": "sha256:bb"}]
    });
    let server = Server::start(vec![
        Reply::Json(200, completion("no json here", Some((10, 5)))),
        Reply::Json(200, completion(&contribution.to_string(), Some((10, 5)))),
    ])
    .await;
    let adapter = adapter(&server);
    match adapter.execute(&specialist_call()).await {
        AgentOutcome::Returned {
            result: SpecialistResult::Failure { reason },
            ..
        } => assert!(
            reason.contains("not a contribution or a failure"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    match adapter.execute(&specialist_call()).await {
        AgentOutcome::Returned {
            result: SpecialistResult::Contribution(draft),
            ..
        } => {
            assert_eq!(draft.id, agentroom_agents::contribution_id(op(0xb2)));
            assert_eq!(draft.artifacts[0].content, "found two papers");
            assert_eq!(draft.sources.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    let (_, body) = &server.requests()[1];
    let brief: Value = brief_of(body);
    assert_eq!(brief["you_are"], "sam");
    assert_eq!(brief["task"]["key"], "gather");
}

#[tokio::test]
async fn r2_a_review_binds_the_report_and_revisions_it_was_shown() {
    let review = json!({"verdicts": [
        {"criterion": "cites-sources", "verdict": "met", "evidence": "all cited"},
        {"criterion": "covers-2026", "verdict": "unknown", "evidence": "cannot tell"}
    ]});
    let server = Server::start(vec![
        Reply::Json(200, completion(&review.to_string(), Some((10, 5)))),
        Reply::Json(200, completion(r#"{"verdict": "met"}"#, Some((10, 5)))),
    ])
    .await;
    let adapter = adapter(&server);
    match adapter.review(&reviewer_call()).await {
        AgentOutcome::Returned {
            result: ReviewerResult::Review(submission),
            ..
        } => {
            assert_eq!(submission.report, reviewer_call().report);
            assert_eq!(submission.observed, OBSERVED);
            assert_eq!(submission.verdicts[1].verdict, Verdict::Unknown);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        adapter.review(&reviewer_call()).await,
        AgentOutcome::Returned {
            result: ReviewerResult::FormatError { .. },
            ..
        }
    ));
}

#[tokio::test]
async fn a_429_with_retry_after_is_not_sent_with_the_delay() {
    let server = Server::start(vec![Reply::Raw(
        429,
        vec![("retry-after", "2"), ("content-type", "application/json")],
        r#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#,
    )])
    .await;
    match adapter(&server).interpret(&reasoner_call()).await {
        AgentOutcome::NotSent {
            retry_after,
            reason,
        } => {
            assert_eq!(retry_after, Some(Duration::from_secs(2)));
            assert!(
                reason.contains("429") && reason.contains("Rate limit reached"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_401_is_refused_with_the_providers_message_and_sent_once() {
    let server = Server::start(vec![Reply::Json(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )])
    .await;
    match adapter(&server).interpret(&reasoner_call()).await {
        AgentOutcome::Refused { reason } => {
            assert!(reason.contains("401 Unauthorized"), "{reason}");
            assert!(reason.contains("Incorrect API key provided"), "{reason}");
            assert!(reason.contains("check the key in api_key_env"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn d2_a_server_error_after_sending_is_uncertain() {
    let server = Server::start(vec![Reply::Raw(502, vec![], "Bad Gateway")]).await;
    match adapter(&server).interpret(&reasoner_call()).await {
        AgentOutcome::Uncertain { reason } => {
            assert!(
                reason.contains("502") && reason.contains("Bad Gateway"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn d2_a_server_that_hangs_past_the_timeout_leaves_the_call_uncertain() {
    let server = Server::start(vec![Reply::Hang]).await;
    let adapter = adapter_with(&server.base_url(), PRICES, 300);
    let started = Instant::now();
    match adapter.interpret(&reasoner_call()).await {
        AgentOutcome::Uncertain { reason } => {
            assert!(reason.contains("timed out"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(server.requests().len(), 1, "it was sent, once");
}

#[tokio::test]
async fn d2_a_connection_dropped_mid_response_leaves_the_call_uncertain() {
    let server = Server::start(vec![Reply::BreakOff]).await;
    match adapter(&server).interpret(&reasoner_call()).await {
        AgentOutcome::Uncertain { reason } => {
            assert!(reason.contains("broke off"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_refused_connection_is_not_sent() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let adapter = adapter_with(&format!("http://{addr}/v1"), PRICES, 5_000);
    match adapter.interpret(&reasoner_call()).await {
        AgentOutcome::NotSent {
            retry_after: None,
            reason,
        } => assert!(reason.contains("nothing was sent"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn b6_a_request_above_its_bounds_is_refused_before_anything_is_sent() {
    let server = Server::start(vec![]).await;
    let tight = PRICES.replacen(
        "[bounds.specialist]\nmax_input_tokens = 20_000",
        "[bounds.specialist]\nmax_input_tokens = 100",
        1,
    );
    let adapter = adapter_with(&server.base_url(), &tight, 5_000);
    let mut call = specialist_call();
    call.reservation = UsdMicros::new(RESERVATION);
    match adapter.execute(&call).await {
        AgentOutcome::Refused { reason } => {
            assert!(reason.contains("above its bounds"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn b6_a_reservation_below_the_quote_is_refused_before_anything_is_sent() {
    let server = Server::start(vec![]).await;
    let mut call = reasoner_call();
    call.reservation = UsdMicros::new(RESERVATION - 1);
    match adapter(&server).interpret(&call).await {
        AgentOutcome::Refused { reason } => {
            assert!(reason.contains("may cost $0.060003"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_check_is_one_tiny_request_in_the_roles_words_charged_like_a_call() {
    let server = Server::start(vec![Reply::Json(200, completion("{}", Some((41, 2))))]).await;
    let outcome = adapter(&server).check(CallRole::Reviewer, op(0xd4)).await;
    // B3, as for a call: ⌈41 × 2.5⌉ + 2 × 10 + 3 = 103 + 20 + 3.
    let charge = Charge::Actual(UsdMicros::new(126));
    assert_eq!(
        outcome,
        AgentOutcome::Returned {
            result: CheckReply {
                usage: Some(TokenUsage {
                    input_tokens: 41,
                    output_tokens: 2
                }),
                charge,
                reply: Ok("{}".to_owned()),
            },
            charge,
        }
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(
        headers["idempotency-key"],
        "00000000-0000-0000-0000-0000000000d4"
    );
    assert_eq!(headers["authorization"], "Bearer sk-test-123");
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], CHECK_MAX_TOKENS);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are a reviewer") && system.contains("JSON"),
        "{system}"
    );
}

#[tokio::test]
async fn a_checks_failure_is_classified_like_a_calls_and_sent_once() {
    let server = Server::start(vec![Reply::Raw(
        503,
        vec![("content-type", "application/json")],
        r#"{"error":{"message":"upstream timed out","type":"timeout"}}"#,
    )])
    .await;
    let outcome = adapter(&server).check(CallRole::Reasoner, op(0xd5)).await;
    assert!(
        matches!(&outcome, AgentOutcome::Uncertain { reason } if reason.contains("503")),
        "{outcome:?}"
    );
    assert_eq!(server.requests().len(), 1);
    let server = Server::start(vec![Reply::Json(
        404,
        json!({"error": {"message": "The model `x` does not exist", "type": "invalid_request_error"}}),
    )])
    .await;
    let outcome = adapter(&server).check(CallRole::Specialist, op(0xd6)).await;
    assert!(
        matches!(&outcome, AgentOutcome::Refused { reason } if reason.contains("check base_url and model")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn each_role_calls_the_model_its_providers_configuration_gives_it() {
    let prices = PRICES.replace("[models.test-model]", "[models.m-default]")
        + &["m-reasoner", "m-sam", "m-reviewer"]
            .iter()
            .map(|m| {
                format!(
                    "[models.{m}]\ninput_micros_per_mtok = 2_500_000\noutput_micros_per_mtok = 10_000_000\nconnector_micros = 3\n"
                )
            })
            .collect::<String>();
    let prices = PriceTable::parse(&prices).unwrap();
    let server = Server::start(vec![Reply::Json(200, completion(ANSWER, Some((10, 2)))); 5]).await;
    let config = ProvidersConfig::from_toml(&format!(
        "[endpoints.one]\nbase_url = \"{base}\"\n\
         [endpoints.two]\nbase_url = \"{base}\"\napi_key_env = \"AGENTROOM_TEST_KEY\"\n\
         [models]\n\
         default = {{ endpoint = \"one\", model = \"m-default\" }}\n\
         reasoner = {{ endpoint = \"two\", model = \"m-reasoner\" }}\n\
         reviewer = {{ endpoint = \"one\", model = \"m-reviewer\" }}\n\
         [models.specialists]\nsam = {{ endpoint = \"two\", model = \"m-sam\" }}\n",
        base = server.base_url()
    ))
    .unwrap();
    let providers = config
        .build(&prices, |var| {
            (var == "AGENTROOM_TEST_KEY").then(|| "sk-test-123".to_owned())
        })
        .unwrap();
    let agents = providers.agents();
    let mut other = specialist_call();
    other.principal = p("sue");
    for call in [
        AgentCall::Reasoner(reasoner_call()),
        AgentCall::Specialist(specialist_call()),
        AgentCall::Specialist(other),
        AgentCall::Reviewer(reviewer_call()),
    ] {
        let outcome = agents.dispatch(&call).await;
        assert!(
            matches!(outcome, AgentOutcome::Returned { .. }),
            "{outcome:?}"
        );
    }
    let sent: Vec<(String, bool)> = server
        .requests()
        .iter()
        .map(|(headers, body)| {
            (
                body["model"].as_str().unwrap().to_owned(),
                headers.contains_key("authorization"),
            )
        })
        .collect();
    // The key goes to the endpoint that names it, and only there.
    assert_eq!(
        sent,
        [
            ("m-reasoner".to_owned(), true),
            ("m-sam".to_owned(), true),
            ("m-default".to_owned(), false),
            ("m-reviewer".to_owned(), false),
        ]
    );
}

/// The JSON brief of a request's user message (the Room content follows it as data, C1).
fn brief_of(body: &Value) -> Value {
    let user = body["messages"][1]["content"].as_str().unwrap();
    let (brief, _data) = user
        .split_once("\n\nRoom content:\n")
        .expect("the brief, then the Room content");
    serde_json::from_str(brief).unwrap()
}

/// Prices with every role's input bound `max_input` and message overhead `overhead`.
fn prices_bounded(max_input: u64, overhead: u64) -> String {
    let mut text = String::from(
        "[models.test-model]\ninput_micros_per_mtok = 2_500_000\noutput_micros_per_mtok = 10_000_000\nconnector_micros = 3\n",
    );
    for role in ["reasoner", "specialist", "reviewer"] {
        text.push_str(&format!(
            "[bounds.{role}]\nmax_input_tokens = {max_input}\nmax_output_tokens = 500\nper_message_overhead = {overhead}\n"
        ));
    }
    text
}

/// Text of `len` characters drawn from a pattern with markup to escape and multi-byte
/// characters, so rendering grows it and bytes differ from characters.
fn awkward_text(len: usize, seed: u8) -> String {
    const PATTERN: [&str; 6] = ["a", "<", "&", "é", "\"", " "];
    (0..len)
        .map(|i| PATTERN[(i + usize::from(seed)) % PATTERN.len()])
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// B6 and C1: for any Room content and any bounds, a call is sent only when what is sent
    /// (every byte of both messages plus their overhead) fits the role's input bound, so the
    /// reservation, the quote at that bound, is at least the price of what was sent; what
    /// was left out is named in the prompt by its digest, never a required item; and a call
    /// whose required content cannot fit is refused, nothing sent.
    #[test]
    fn b6_the_reservation_is_at_least_the_price_of_the_bytes_sent(
        items in proptest::collection::vec((0_usize..6_000, proptest::bool::weighted(0.2), 0_u8..6), 0..10),
        max_input in 2_500_u64..40_000,
        overhead in 0_u64..32,
        role in 0_u8..3,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let reply = match role {
                0 => r#"{"kind":"answer","text":"ok"}"#,
                1 => r#"{"result":"failure","reason":"nothing to do"}"#,
                _ => r#"{"verdicts":[]}"#,
            };
            let server = Server::start(vec![Reply::Json(200, completion(reply, Some((10, 10))))]).await;
            let prices = prices_bounded(max_input, overhead);
            let table = PriceTable::parse(&prices).unwrap();
            let openai = Arc::new(adapter_with(&server.base_url(), &prices, 5_000));
            let agents = Agents::new()
                .with_reasoner(Arc::clone(&openai) as _)
                .with_any_specialist(Arc::clone(&openai) as _)
                .with_any_reviewer(Arc::clone(&openai) as _);
            let context = CallContext::new(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, (len, required, seed))| {
                        let item = ContextItem::new("source", format!("s{i}"), awkward_text(*len, *seed))
                            .attr("title", awkward_text(*len % 40, *seed));
                        if *required { item.required() } else { item }
                    })
                    .collect(),
            );
            let (call, call_role) = match role {
                0 => (AgentCall::Reasoner(reasoner_call()), CallRole::Reasoner),
                1 => (AgentCall::Specialist(specialist_call()), CallRole::Specialist),
                _ => (AgentCall::Reviewer(reviewer_call()), CallRole::Reviewer),
            };
            let reservation = table.reservation(call_role, "test-model").unwrap();
            let call = match call {
                AgentCall::Reasoner(c) => AgentCall::Reasoner(ReasonerCall { reservation, ..c }),
                AgentCall::Specialist(c) => AgentCall::Specialist(SpecialistCall { reservation, ..c }),
                AgentCall::Reviewer(c) => AgentCall::Reviewer(ReviewerCall { reservation, ..c }),
            };
            let (fitted, omitted) = match agents.fitted(call, &context) {
                Ok(fitted) => fitted,
                Err(err) => {
                    // Only the required items are above what the bound leaves: refused.
                    assert!(err.required > err.budget, "{err}");
                    assert!(server.requests().is_empty());
                    return;
                }
            };
            let outcome = agents.dispatch(&fitted).await;
            let requests = server.requests();
            match &outcome {
                AgentOutcome::Returned { .. } => {}
                AgentOutcome::Refused { reason } => {
                    // Refused by the adapter's own bound check: nothing sent.
                    assert!(requests.is_empty(), "{reason}");
                    panic!("a fitted call was refused: {reason}");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(requests.len(), 1);
            let body = &requests[0].1;
            let sent: u64 = body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["content"].as_str().unwrap().len() as u64 + overhead)
                .sum();
            assert!(sent <= max_input, "sent {sent} above the bound {max_input}");
            let max_tokens = body["max_tokens"].as_u64().unwrap();
            let price = table
                .cost("test-model", TokenUsage { input_tokens: sent, output_tokens: max_tokens })
                .unwrap();
            assert!(price <= reservation, "{price} above the reservation {reservation}");
            // What was left out is named in the prompt; no required item was.
            let user = body["messages"][1]["content"].as_str().unwrap();
            for (i, (_, required, _)) in items.iter().enumerate() {
                let name = format!("id=\"s{i}\"");
                if *required {
                    assert!(user.contains(&format!("<data kind=\"source\" {name}")), "required s{i} missing");
                }
            }
            for left_out in &omitted {
                let digest = left_out.split(['(', ')']).nth(1).unwrap();
                assert!(user.contains(digest), "{left_out} not named in the prompt");
            }
        });
    }
}
