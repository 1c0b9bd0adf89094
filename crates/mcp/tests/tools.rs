//! The tools of specialists, reviewers and owners in a process that decides (`Posting::Decide`,
//! as `serve` runs them), on the in-memory store, with a whole objective driven in-process: the
//! demo scenario's scripted reasoner plans it, sam and sue are hosted specialists whose work
//! the MCP tools submit, and the review is a person's (rita's) through `record_review`. Each
//! tool's happy path and its refusals; a refused call changes nothing (the Room's revision).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::PriceTable;
use agentroom_agents::hosted::HostedSpecialists;
use agentroom_agents::scripted::{Journal, Scenario, Scripted};
use agentroom_coordinator::{Coordinator, CoordinatorConfig, NewMember, RunnerConfig};
use agentroom_domain::catalog::{DeclaredOutput, MemoryCatalog, MemoryEntry, OutputType};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_mcp::{Assignment, Checked, Posting, RoomTools, Token, ToolError};
use agentroom_ports::memory::MemoryStore;
use agentroom_ports::{NewToken, SystemClock};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How long a step may take before the test fails (a hang, not a measure).
const STEP: Duration = Duration::from_secs(30);

/// A digest of a document as read (any well-formed one).
const DIGEST: &str = "sha256:9689f6287a68c8c6a28acb9452b06fa6dec179938470ef1e02c7a6a50fd6e003";

fn p(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

fn lab() -> RoomId {
    RoomId::parse("lab").unwrap()
}

/// A tool's arguments, as a client sends them.
fn args<T: DeserializeOwned>(value: Value) -> Parameters<Checked<T>> {
    Parameters(serde_json::from_value(value).unwrap())
}

fn declared(name: &str, kind: OutputType) -> DeclaredOutput {
    DeclaredOutput {
        name: name.to_owned(),
        kind,
        description: None,
    }
}

/// Room `lab` run by a coordinator on the in-memory store: the demo scenario's scripted
/// reasoner, sam and sue hosted (their calls wait for what the MCP tools submit), reviews by a
/// person. olive owns it, oscar operates, rita reviews, sam researches, sue writes and also
/// holds the reviewer role (so R1 can refuse her review of her own report).
struct Lab {
    coordinator: Coordinator,
    tokens: HashMap<&'static str, String>,
    _dir: tempfile::TempDir,
}

impl Lab {
    async fn open() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/demo.toml");
        let scripted = Arc::new(Scripted::new(Scenario::from_file(&path).unwrap()));
        let journal = Arc::new(Journal::open(dir.path().join("hosted.jsonl")).unwrap());
        let desk = Arc::new(HostedSpecialists::new([p("sam"), p("sue")], journal));
        let catalog = MemoryCatalog::new()
            .with(
                "research",
                MemoryEntry {
                    provider: Some(p("sam")),
                    outputs: vec![declared("findings", OutputType::Array)],
                    ..MemoryEntry::default()
                },
            )
            .with(
                "writing",
                MemoryEntry {
                    provider: Some(p("sue")),
                    outputs: vec![declared("report", OutputType::String)],
                    ..MemoryEntry::default()
                },
            );
        let coordinator = Coordinator::builder(
            Arc::new(MemoryStore::new()),
            CoordinatorConfig::new(RunnerConfig::new("mcp-tools-test", Duration::from_secs(30))),
        )
        .provider(Arc::new(desk.install(scripted.agents())))
        .clock(Arc::new(SystemClock))
        .catalog(Arc::new(catalog))
        .desk(Arc::clone(&desk) as _)
        .build();
        let state = RoomState::new(RoomSetup {
            room: lab(),
            owner: p("olive"),
            policy: RoomPolicy::from_toml("[review]\nsource = \"human\"\n").unwrap(),
            access: AccessPolicy::default(),
            quotes: PriceTable::shipped().unwrap().quotes("scripted").unwrap(),
            limit: UsdMicros::new(1_000_000),
        })
        .unwrap();
        let members = [
            ("oscar", vec![Role::Operator]),
            ("rita", vec![Role::Reviewer]),
            ("sam", vec![Role::Specialist]),
            ("sue", vec![Role::Specialist, Role::Reviewer]),
        ];
        let first = coordinator
            .open_room(
                &state,
                &p("olive"),
                &members
                    .iter()
                    .map(|(who, roles)| NewMember {
                        principal: p(who),
                        roles: roles.clone(),
                    })
                    .collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        let mut tokens = HashMap::from([("olive", first[0].issued.text().to_owned())]);
        for (who, _) in members {
            let issued = coordinator
                .issue_token(NewToken {
                    room: lab(),
                    principal: p(who),
                    created_at: coordinator.now(),
                    expires_at: None,
                    label: None,
                })
                .await
                .unwrap();
            tokens.insert(who, issued.text().to_owned());
        }
        Lab {
            coordinator,
            tokens,
            _dir: dir,
        }
    }

    /// The tools of `who`, as a stdio session opened with its token.
    async fn tools(&self, who: &str) -> RoomTools {
        RoomTools::open(
            self.coordinator.clone(),
            Posting::Decide,
            Token::new(&self.tokens[who]),
            &lab(),
        )
        .await
        .unwrap()
    }

    /// The Room's revision now: what a refused call must leave as it was.
    async fn revision(&self) -> i64 {
        self.coordinator.room(&lab()).await.unwrap().revision.0
    }

    /// olive's message is decided; the scripted reasoner plans gather (sam) then write (sue).
    /// The objective's id and sam's gather assignment.
    async fn with_gather() -> (Self, String, Assignment) {
        let lab = Lab::open().await;
        lab.tools("olive")
            .await
            .post_owner_message(
                Extensions::default(),
                args(json!({"text": "Summarize what changed in durable agent runtimes."})),
            )
            .await
            .unwrap();
        let gather = lab.assignment("sam", "gather").await;
        let objective = gather.objective.clone().unwrap();
        (lab, objective, gather)
    }

    /// Waits until `who` has an assignment for the task `key`.
    async fn assignment(&self, who: &str, key: &str) -> Assignment {
        let tools = self.tools(who).await;
        tokio::time::timeout(STEP, async {
            loop {
                let listed = tools
                    .list_my_assignments(Extensions::default(), args(json!({})))
                    .await
                    .unwrap()
                    .0;
                if let Some(found) = listed
                    .assignments
                    .into_iter()
                    .find(|a| a.task["key"] == key)
                {
                    return found;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{who} got no assignment for {key}"))
    }

    /// sam's result for his gather assignment, citing document `s1`, through the tools.
    async fn submit_gather(&self, gather: &Assignment) {
        self.tools("sam")
            .await
            .submit_result(
                Extensions::default(),
                args(json!({
                    "operation": gather.operation,
                    "result": {
                        "outcome": "contribution",
                        "body": "Two surveys describe leases on tool calls.",
                        "sources": [document("s1", "Leases fence stale writers.")],
                        "outputs": {"findings": ["leases on tool calls"]},
                        "usage_micros": 3_400,
                    },
                })),
            )
            .await
            .unwrap();
    }

    /// sam's gather (citing document `s1`) and sue's report (citing gather and document `s2`)
    /// submitted through the tools; the report's version 1 awaits review.
    async fn with_report() -> (Self, String) {
        let (lab, objective, gather) = Lab::with_gather().await;
        lab.submit_gather(&gather).await;
        let write = lab.assignment("sue", "write").await;
        let gathered = write.task["dep_contributions"][0]
            .as_str()
            .unwrap()
            .to_owned();
        lab.tools("sue")
            .await
            .submit_result(
                Extensions::default(),
                args(json!({
                    "operation": write.operation,
                    "result": {
                        "outcome": "contribution",
                        "body": "Runtimes lease their tool calls, and leases fence stale writers.",
                        "sources": [
                            {"kind": "contribution", "id": gathered},
                            document("s2", "A 2026 benchmark measures recovery."),
                        ],
                        "outputs": {"report": "Runtimes lease their tool calls."},
                        "usage_micros": 2_800,
                    },
                })),
            )
            .await
            .unwrap();
        let rita = lab.tools("rita").await;
        tokio::time::timeout(STEP, async {
            loop {
                if let Ok(report) = rita
                    .read_report(Extensions::default(), args(json!({"objective": objective})))
                    .await
                    && report.0.awaiting_review
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("report v1 never awaited review");
        (lab, objective)
    }
}

/// A document source with its excerpt.
fn document(id: &str, excerpt: &str) -> Value {
    json!({
        "kind": "document",
        "id": id,
        "uri": format!("https://example.org/{id}"),
        "title": format!("Paper {id}"),
        "excerpt": excerpt,
        "retrieved_at": 1_764_460_800_000_i64,
        "content_digest": DIGEST,
    })
}

fn refused<T>(result: Result<T, ToolError>, code: &str) -> ToolError {
    let Err(error) = result else {
        panic!("the call was not refused")
    };
    assert_eq!(error.code(), code, "{error}");
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_a_specialist_submits_its_own_result_once_and_bad_or_anothers_are_refused() {
    let (lab, objective, gather) = Lab::with_gather().await;
    let (sam, sue, rita) = (
        lab.tools("sam").await,
        lab.tools("sue").await,
        lab.tools("rita").await,
    );
    let good = json!({
        "operation": gather.operation,
        "result": {
            "outcome": "contribution",
            "body": "Two surveys describe leases on tool calls.",
            "sources": [document("s1", "Leases fence stale writers.")],
            "outputs": {"findings": ["leases"]},
            "usage_micros": 3_400,
        },
    });
    let before = lab.revision().await;

    // T2: another specialist's operation is refused; a reviewer may not submit at all.
    let error = refused(
        sue.submit_result(Extensions::default(), args(good.clone()))
            .await,
        "refused",
    );
    assert!(error.to_string().contains("another specialist"), "{error}");
    let error = refused(
        rita.submit_result(Extensions::default(), args(good.clone()))
            .await,
        "forbidden",
    );
    assert_eq!(
        error.permission().map(|p| p.as_str()),
        Some("task.update_own")
    );
    // Bad input: an unknown field, a negative usage, a digest that is not one, a blank
    // failure, an operation of no assignment.
    let mut unknown = good.clone();
    unknown["result"]["colour"] = json!("blue");
    refused(
        sam.submit_result(Extensions::default(), args(unknown))
            .await,
        "invalid_body",
    );
    let mut negative = good.clone();
    negative["result"]["usage_micros"] = json!(-1);
    let error = refused(
        sam.submit_result(Extensions::default(), args(negative))
            .await,
        "invalid_body",
    );
    assert!(
        error.to_string().contains("must not be negative"),
        "{error}"
    );
    let mut digest = good.clone();
    digest["result"]["sources"][0]["content_digest"] = json!("md5:abc");
    let error = refused(
        sam.submit_result(Extensions::default(), args(digest)).await,
        "invalid_body",
    );
    assert!(error.to_string().contains("content_digest"), "{error}");
    let blank =
        json!({"operation": gather.operation, "result": {"outcome": "failure", "reason": " "}});
    refused(
        sam.submit_result(Extensions::default(), args(blank)).await,
        "invalid_body",
    );
    let none = json!({"operation": "7d0c4c6e-1111-4a5b-9c3d-2e2f3a4b5c6d", "result": {"outcome": "failure", "reason": "x"}});
    refused(
        sam.submit_result(Extensions::default(), args(none)).await,
        "not_found",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused submission changed the Room"
    );

    // Nothing of those was recorded: the good one is taken, once.
    let recorded = sam
        .submit_result(Extensions::default(), args(good.clone()))
        .await
        .unwrap()
        .0;
    assert!(recorded.recorded);
    refused(
        sam.submit_result(Extensions::default(), args(good)).await,
        "wrong_state",
    );
    lab.assignment("sue", "write").await;
    let board = lab
        .tools("olive")
        .await
        .read_objective(Extensions::default(), args(json!({"objective": objective})))
        .await
        .unwrap()
        .0;
    let done = &board.board.as_ref().unwrap().columns[3];
    assert_eq!(done.column, "done");
    assert_eq!(done.tasks.len(), 1, "{board:?}");
    assert_eq!(done.tasks[0].key, "gather");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_a_specialist_moves_only_its_own_task_and_sees_only_its_own_on_the_board() {
    let (lab, objective, _gather) = Lab::with_gather().await;
    let (sam, sue) = (lab.tools("sam").await, lab.tools("sue").await);
    // A specialist's board holds only its own tasks (the domain's visibility).
    let board = sam
        .read_objective(Extensions::default(), args(json!({"objective": objective})))
        .await
        .unwrap()
        .0;
    let seen: Vec<&str> = board
        .board
        .as_ref()
        .unwrap()
        .columns
        .iter()
        .flat_map(|c| c.tasks.iter().map(|t| t.key.as_str()))
        .collect();
    assert_eq!(seen, ["gather"], "{board:?}");
    let gather = board.board.as_ref().unwrap().columns[2].tasks[0]
        .identity
        .clone();
    let before = lab.revision().await;

    // T2: sue may not move sam's task; nothing is decided.
    let error = refused(
        sue.update_my_task(
            Extensions::default(),
            args(json!({"objective": objective, "task": gather, "status": "in_progress"})),
        )
        .await,
        "refused",
    );
    assert!(error.to_string().contains("only its own tasks"), "{error}");
    // Bad input: a status no one may ask for, a task of no plan.
    refused(
        sam.update_my_task(
            Extensions::default(),
            args(json!({"objective": objective, "task": gather, "status": "backlog"})),
        )
        .await,
        "invalid_body",
    );
    refused(
        sam.update_my_task(
            Extensions::default(),
            args(json!({"objective": objective, "task": "nope/gather", "status": "in_progress"})),
        )
        .await,
        "not_found",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused update changed the Room"
    );

    // sam acknowledges its own running task: decided, with a log.
    let applied = sam
        .update_my_task(
            Extensions::default(),
            args(json!({
                "objective": objective,
                "task": gather,
                "status": "in_progress",
                "idempotency_key": "ack-gather",
            })),
        )
        .await
        .unwrap()
        .0;
    assert!(applied.decided, "{applied:?}");
    assert_eq!(applied.log[0].verdict, "accepted", "{applied:?}");
    // T2: done without a contribution is refused by its rule, committed as a decision.
    let error = refused(
        sam.update_my_task(
            Extensions::default(),
            args(json!({"objective": objective, "task": gather, "status": "done"})),
        )
        .await,
        "rule_refused",
    );
    assert_eq!(error.rule(), Some(Rule::T2), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o12_o13_an_assignee_posts_a_wait_and_a_receipt_about_its_own_assignment_only() {
    let (lab, _objective, gather) = Lab::with_gather().await;
    let (sam, sue) = (lab.tools("sam").await, lab.tools("sue").await);
    let before = lab.revision().await;
    let wait = json!({"operation": gather.operation, "reason": "waiting for the vendor's answer"});
    refused(
        sue.post_wait(Extensions::default(), args(wait.clone()))
            .await,
        "refused",
    );
    refused(
        sam.post_wait(
            Extensions::default(),
            args(json!({"operation": gather.operation, "reason": "   "})),
        )
        .await,
        "invalid_body",
    );
    refused(
        sam.post_wait(
            Extensions::default(),
            args(json!({"operation": gather.operation, "reason": "x", "why": "y"})),
        )
        .await,
        "invalid_body",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused wait changed the Room"
    );

    // O12: the wait is decided; the task shows waiting.
    let posted = sam
        .post_wait(Extensions::default(), args(wait))
        .await
        .unwrap()
        .0;
    assert!(posted.decided, "{posted:?}");
    assert_eq!(posted.log[0].verdict, "accepted", "{posted:?}");
    assert_eq!(posted.log[0].rule.as_deref(), Some("O12"), "{posted:?}");

    // O13: on a running assignment (a fresh Room's), a receipt is decided (the reasoner may take
    // it into account); another's is refused, a blank one is bad input.
    let (lab, _objective, gather) = Lab::with_gather().await;
    let (sam, sue) = (lab.tools("sam").await, lab.tools("sue").await);
    let receipt = json!({
        "operation": gather.operation,
        "note": "the vendor answered",
        "idempotency_key": "vendor-answer",
    });
    let before = lab.revision().await;
    refused(
        sue.post_receipt(Extensions::default(), args(receipt.clone()))
            .await,
        "refused",
    );
    refused(
        sam.post_receipt(
            Extensions::default(),
            args(json!({"operation": gather.operation, "note": "\t"})),
        )
        .await,
        "invalid_body",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused receipt changed the Room"
    );
    let posted = sam
        .post_receipt(Extensions::default(), args(receipt))
        .await
        .unwrap()
        .0;
    assert!(posted.decided, "{posted:?}");
    assert_eq!(posted.log[0].verdict, "accepted", "{posted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r1_r2_r7_a_reviewer_reads_the_report_and_records_a_review_bound_to_its_sources() {
    let (lab, objective) = Lab::with_report().await;
    let (rita, sue, sam) = (
        lab.tools("rita").await,
        lab.tools("sue").await,
        lab.tools("sam").await,
    );
    let report = rita
        .read_report(Extensions::default(), args(json!({"objective": objective})))
        .await
        .unwrap()
        .0;
    assert_eq!((report.version, report.versions), (1, 1));
    assert_eq!(report.author.as_deref(), Some("sue"));
    assert_eq!(report.criteria.len(), 2, "{report:?}");
    let s2 = report
        .sources
        .iter()
        .find(|s| s.id.as_deref() == Some("s2"))
        .unwrap();
    assert_eq!(
        s2.excerpt.as_deref(),
        Some("A 2026 benchmark measures recovery.")
    );
    assert_eq!(s2.content_digest.as_deref(), Some(DIGEST));
    // A cited contribution's body is its excerpt (what a verdict may quote).
    let cited = report
        .sources
        .iter()
        .find(|s| s.kind == "contribution")
        .unwrap();
    assert_eq!(
        cited.excerpt.as_deref(),
        Some("Two surveys describe leases on tool calls.")
    );
    // A specialist may not read reports (report.read).
    refused(
        sam.read_report(Extensions::default(), args(json!({"objective": objective})))
            .await,
        "forbidden",
    );
    refused(
        rita.read_report(
            Extensions::default(),
            args(json!({"objective": objective, "version": 2})),
        )
        .await,
        "not_found",
    );

    let review = |who_sources: &[&str], quote: &str| {
        json!({
            "objective": objective,
            "report_version": 1,
            "observed": {"objective": report.observed.objective, "control": report.observed.control},
            "verdicts": [
                {"criterion": "cites-sources", "verdict": "met", "evidence": "every claim cites", "sources": who_sources, "quote": quote},
                {"criterion": "covers-2026", "verdict": "met", "evidence": "the 2026 benchmark", "sources": ["s2"], "quote": "A 2026 benchmark measures recovery."},
            ],
        })
    };
    let before = lab.revision().await;
    // R7: evidence naming a source the report does not cite is refused as written.
    let error = refused(
        rita.record_review(
            Extensions::default(),
            args(review(&["s9"], "leases fence stale writers")),
        )
        .await,
        "invalid_body",
    );
    assert!(error.to_string().contains("`s9`"), "{error}");
    // Bad input: an unknown field, a verdict no one may give.
    let mut unknown = review(&["s2"], "x");
    unknown["mood"] = json!("fine");
    refused(
        rita.record_review(Extensions::default(), args(unknown))
            .await,
        "invalid_body",
    );
    let mut verdict = review(&["s2"], "x");
    verdict["verdicts"][0]["verdict"] = json!("probably");
    refused(
        rita.record_review(Extensions::default(), args(verdict))
            .await,
        "invalid_body",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused review changed the Room"
    );

    // R1: sue holds the reviewer role but wrote the report: refused by that rule, a decision.
    let error = refused(
        sue.record_review(
            Extensions::default(),
            args(review(&["s2"], "leases fence stale writers")),
        )
        .await,
        "rule_refused",
    );
    assert_eq!(error.rule(), Some(Rule::R1), "{error}");
    assert!(error.to_string().contains("authored work"), "{error}");

    // rita's review, every criterion met on a supplied source and a quote found: completed.
    let applied = rita
        .record_review(
            Extensions::default(),
            args(review(&["s2"], "leases fence stale writers")),
        )
        .await
        .unwrap()
        .0;
    assert!(applied.decided, "{applied:?}");
    assert_eq!(applied.log[0].verdict, "accepted", "{applied:?}");
    let read = rita
        .read_report(
            Extensions::default(),
            args(json!({"objective": objective, "version": 1})),
        )
        .await
        .unwrap()
        .0;
    assert_eq!(read.status, "completed", "{read:?}");
    assert_eq!(read.reviews.len(), 1, "{read:?}");
    assert_eq!(read.reviews[0].reviewer, "rita");
    assert!(!read.awaiting_review);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o14_only_the_owner_corrects_an_objective_and_a_refused_correction_stores_nothing() {
    let (lab, objective, _gather) = Lab::with_gather().await;
    let (olive, rita) = (lab.tools("olive").await, lab.tools("rita").await);
    let correction = json!({
        "objective": objective,
        "text": "Only cover 2026.",
        "criteria": [{"id": "covers-2026", "text": "covers only work published in 2026"}],
    });
    let before = lab.revision().await;
    let error = refused(
        rita.correct_objective(Extensions::default(), args(correction.clone()))
            .await,
        "refused",
    );
    assert_eq!(error.rule(), Some(Rule::O14), "{error}");
    let mut bad = correction.clone();
    bad["criteria"][0]["id"] = json!("Not A Slug");
    refused(
        olive
            .correct_objective(Extensions::default(), args(bad))
            .await,
        "invalid_body",
    );
    refused(
        olive
            .correct_objective(
                Extensions::default(),
                args(json!({"objective": objective, "text": " "})),
            )
            .await,
        "invalid_body",
    );
    assert_eq!(
        lab.revision().await,
        before,
        "a refused correction changed the Room"
    );

    let posted = olive
        .correct_objective(Extensions::default(), args(correction))
        .await
        .unwrap()
        .0;
    assert!(posted.decided, "{posted:?}");
    assert_eq!(posted.log[0].verdict, "accepted", "{posted:?}");
    let detail = olive
        .read_objective(Extensions::default(), args(json!({"objective": objective})))
        .await
        .unwrap()
        .0;
    assert_eq!(detail.criteria.len(), 1, "{detail:?}");
    assert_eq!(
        detail.criteria[0].text,
        "covers only work published in 2026"
    );
}

/// Protocol 2026-07-28's `subscriptions/listen` (rmcp's client in discover mode, over an
/// in-memory pipe): a subscription to the objective's board is acknowledged for it and told
/// when sam's result moves the board; a resource this server does not serve is left out of
/// what it accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_listen_subscription_to_a_board_is_told_when_the_board_changes() {
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};

    let (lab, objective, gather) = Lab::with_gather().await;
    let olive = lab.tools("olive").await;
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    tokio::spawn(async move { olive.serve(read, write).await });
    let client = ()
        .serve_with_lifecycle(
            tokio::io::split(client_side),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let board = format!("agentroom://objectives/{objective}/board");
    let mut subscription = client
        .peer()
        .listen(
            SubscriptionFilter::builder()
                .resource_subscription(board.clone())
                .resource_subscription("file:///etc/passwd")
                .build(),
        )
        .await
        .unwrap();
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec![board.clone()])
    );

    lab.submit_gather(&gather).await;
    let told = tokio::time::timeout(STEP, subscription.next())
        .await
        .expect("no notification of the board's change")
        .unwrap()
        .unwrap();
    let ServerNotification::ResourceUpdatedNotification(updated) = told else {
        panic!("{told:?}")
    };
    assert_eq!(updated.params.uri, board);

    // A principal holds at most MAX_LISTENS_PER_PRINCIPAL listen streams open at once: of
    // one more, one is ended. The server counts a stream when it starts serving it, which may
    // come after the client saw it acknowledged, so which one is ended is not fixed; nothing
    // changes on the board meanwhile, so the first stream to yield must be an ending one.
    let filter = || {
        SubscriptionFilter::builder()
            .resource_subscription(board.clone())
            .build()
    };
    let mut waiting = tokio::task::JoinSet::new();
    let mut refused_at_once = 0;
    let mut streams = vec![subscription];
    for _ in 0..agentroom_mcp::MAX_LISTENS_PER_PRINCIPAL {
        match client.peer().listen(filter()).await {
            Ok(stream) => streams.push(stream),
            Err(_) => refused_at_once += 1,
        }
    }
    for (n, mut stream) in streams.into_iter().enumerate() {
        waiting.spawn(async move { (n, stream.next().await, stream) });
    }
    if refused_at_once == 0 {
        let (n, ended, _) = tokio::time::timeout(STEP, waiting.join_next())
            .await
            .expect("no stream was ended at the bound")
            .unwrap()
            .unwrap();
        assert!(
            matches!(ended, Err(_) | Ok(None)),
            "stream {n} yielded instead of ending: {ended:?}"
        );
    } else {
        assert_eq!(refused_at_once, 1);
    }
    waiting.abort_all();
    client.cancel().await.unwrap();
}

/// Bad input (issue 20): a text above the bound its schema advertises is refused as
/// `invalid_body` before anything is looked up or stored, as REST's body limit refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o12_o13_o14_r2_over_long_texts_are_refused_whole_and_change_nothing() {
    let lab = Lab::open().await;
    let before = lab.revision().await;
    let long = "x".repeat(16_001);
    let nothing = "00000000-0000-4000-8000-000000000001";
    let sam = lab.tools("sam").await;
    refused(
        sam.post_wait(
            Extensions::default(),
            args(json!({"operation": nothing, "reason": long})),
        )
        .await,
        "invalid_body",
    );
    refused(
        sam.post_receipt(
            Extensions::default(),
            args(json!({"operation": nothing, "note": long})),
        )
        .await,
        "invalid_body",
    );
    let rita = lab.tools("rita").await;
    refused(
        rita.record_review(
            Extensions::default(),
            args(json!({
                "objective": nothing,
                "report_version": 1,
                "observed": {"objective": 1, "control": 0},
                "verdicts": [{"criterion": "c1", "verdict": "met", "evidence": long}],
            })),
        )
        .await,
        "invalid_body",
    );
    let olive = lab.tools("olive").await;
    refused(
        olive
            .correct_objective(
                Extensions::default(),
                args(json!({
                    "objective": nothing,
                    "text": "Narrower.",
                    "criteria": [{"id": "c1", "text": "y".repeat(2_001)}],
                })),
            )
            .await,
        "invalid_body",
    );
    assert_eq!(lab.revision().await, before);
}
