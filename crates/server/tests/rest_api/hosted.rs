//! Hosted specialists: agent hosts execute the specialists' work over the REST API with the
//! specialists' own tokens (assignments listed, results submitted once, recorded before use),
//! while the reasoner stays scripted and the reviewer is a person using the review endpoint.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::time::{sleep, timeout};

use super::support::{App, STEP, spawn_app_hosting};
use super::{UNKNOWN, evidence, task};

const ASSIGNMENTS: &str = "/v1/rooms/local/assignments";

fn result_path(op: &str) -> String {
    format!("{ASSIGNMENTS}/{op}/result")
}

/// Waits until `who` has an assignment for the task `key` and returns it (a hang fails the
/// test after [`STEP`]; nothing is measured).
/// A host with sam and sue hosted, where the owner's message made an objective whose first
/// task, `gather`, is assigned to sam: the app and sam's assignment.
pub(super) async fn objective_with_sams_gather() -> (App, Value) {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    let text = "Summarize what changed in durable agent runtimes, with sources for every claim.";
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": text}).to_string(),
    )
    .await;
    let gather = assignment(&app, "sam", "gather").await;
    (app, gather)
}

pub(super) async fn assignment(app: &App, who: &str, key: &str) -> Value {
    timeout(STEP, async {
        loop {
            let list = app.get(who, ASSIGNMENTS).await;
            if let Some(found) = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["task"]["key"] == key)
            {
                return found.clone();
            }
            sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{who} got no assignment for {key}"))
}

/// Waits until `who` has no assignment left.
async fn no_assignment(app: &App, who: &str) {
    no_assignment_but(app, who, |_| true).await;
}

/// Waits until `who` has no assignment for the operation `op` (the Room may already have
/// dispatched the task again under a new operation, e.g. after a failure).
async fn no_assignment_for(app: &App, who: &str, op: &str) {
    no_assignment_but(app, who, |a| op_of(a) == op).await;
}

/// Waits until none of `who`'s assignments matches `counts`.
async fn no_assignment_but(app: &App, who: &str, counts: impl Fn(&Value) -> bool) {
    timeout(STEP, async {
        loop {
            let list = app.get(who, ASSIGNMENTS).await;
            if !list["items"].as_array().unwrap().iter().any(&counts) {
                return;
            }
            sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{who} kept an assignment"));
}

fn op_of(assignment: &Value) -> String {
    assignment["operation"].as_str().unwrap().to_owned()
}

/// The contribution `who`'s agent host submits for `assignment`: notes citing an external
/// source, or for a report its content citing every contribution it may cite.
fn contribution(assignment: &Value, content: &str, usage: i64) -> String {
    let mut sources: Vec<Value> = assignment["task"]["dep_contributions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| json!({"kind": "contribution", "id": id}))
        .collect();
    if sources.is_empty() {
        sources.push(json!({
            "kind": "external",
            "url": "https://example.org/runtime-benchmarks-2026",
            "digest": "sha256:9689f6287a68c8c6a28acb9452b06fa6dec179938470ef1e02c7a6a50fd6e003",
        }));
    }
    // T2: the outputs the shipped capabilities declare (research: findings; writing: report).
    let outputs = if assignment["task"]["kind"] == "report" {
        json!({"report": content})
    } else {
        json!({"findings": [content]})
    };
    json!({
        "outcome": "contribution",
        "artifacts": [{"name": "notes", "content": content}],
        "sources": sources,
        "outputs": outputs,
        "usage_micros": usage,
    })
    .to_string()
}

/// A document source with its excerpt, as an agent host submits it.
fn document(id: &str) -> Value {
    json!({
        "kind": "document",
        "id": id,
        "uri": format!("https://example.org/{id}"),
        "title": format!("Paper {id}"),
        "excerpt": "Leases fence stale writers.",
        "retrieved_at": 1_764_460_800_000_i64,
        "content_digest": "sha256:9689f6287a68c8c6a28acb9452b06fa6dec179938470ef1e02c7a6a50fd6e003",
    })
}

async fn submit(app: &App, who: &str, assignment: &Value, body: &str) -> Value {
    let answer = app
        .as_(who, Method::POST, &result_path(&op_of(assignment)), body)
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
    answer.json()
}

async fn review(app: &App, path: &str, version: u64, covers_2026: &str) -> Value {
    let reviews = app.get("rita", &format!("{path}/reviews")).await;
    assert_eq!(reviews["awaiting_review"]["version"], version, "{reviews}");
    let (source, quote) = evidence(&reviews, version);
    let body = json!({
        "report_version": version,
        "observed": reviews["observed"],
        "verdicts": [
            {"criterion": "cites-sources", "verdict": "met", "evidence": "every claim cites a contribution", "sources": [source], "quote": quote},
            {"criterion": "covers-2026", "verdict": covers_2026, "evidence": format!("checked version {version}"), "sources": [source], "quote": quote},
        ],
    });
    app.post("rita", &format!("{path}/reviews"), &body.to_string())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_a_whole_objective_runs_with_the_specialists_work_submitted_over_http() {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    let text = "Summarize what changed in durable agent runtimes, with sources for every claim.";
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": text}).to_string(),
    )
    .await;

    // sam's agent host sees the research task, what it may see and its reservation (B1:
    // reserved before it was assigned); sue has nothing yet (write waits on gather).
    let gather = assignment(&app, "sam", "gather").await;
    assert_eq!(gather["task"]["inputs"]["topic"], "durable agent runtimes");
    assert!(
        gather["reservation_micros"].as_i64().unwrap() > 0,
        "{gather}"
    );
    assert!(
        app.get("sue", ASSIGNMENTS).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let id = gather["objective"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    let board = app.get("olive", &path).await;
    assert_eq!(task(&board, "gather")["column"], "in_progress", "{board}");

    let submitted = submit(
        &app,
        "sam",
        &gather,
        &contribution(&gather, "Two surveys describe leases on tool calls.", 3_400),
    )
    .await;
    assert_eq!(submitted["recorded"], true);

    // sue's report task cites the research contribution the domain let it see.
    let write = assignment(&app, "sue", "write").await;
    assert_eq!(
        write["task"]["dep_contributions"].as_array().unwrap().len(),
        1,
        "{write}"
    );
    assert_eq!(write["task"]["kind"], "report");
    // What the report may cite is readable by its writer, its author and the overseers, and
    // by nobody else: a bystander is not even told that it exists.
    let cited = format!(
        "/v1/rooms/local/contributions/{}",
        write["task"]["dep_contributions"][0].as_str().unwrap()
    );
    for reader in ["sue", "sam", "rita", "olive", "oscar"] {
        let read = app.get(reader, &cited).await;
        assert_eq!(read["author"], "sam", "{reader}: {read}");
        assert!(
            read["task"].as_str().unwrap().ends_with("/gather"),
            "{read}"
        );
        assert!(
            read["body"]
                .as_str()
                .unwrap()
                .contains("Two surveys describe leases on tool calls."),
            "{read}"
        );
    }
    let bystander = app.as_("hank", Method::GET, &cited, "").await;
    assert_eq!(bystander.status, StatusCode::NOT_FOUND, "{bystander:?}");
    let unknown = app
        .as_(
            "olive",
            Method::GET,
            &format!("/v1/rooms/local/contributions/{UNKNOWN}"),
            "",
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{unknown:?}");
    submit(
        &app,
        "sue",
        &write,
        &contribution(&write, "Runtimes lease their tool calls [gather].", 2_800),
    )
    .await;
    app.settle().await;

    let objective = app.get("olive", &path).await;
    assert_eq!(task(&objective, "gather")["column"], "done", "{objective}");
    assert_eq!(task(&objective, "write")["column"], "done", "{objective}");
    let unmet = review(&app, &path, 1, "unmet").await;
    assert_eq!(unmet["accepted"], true, "{unmet}");

    // R3: the corrective plan reuses gather (O3) and assigns new work over the API again.
    let benchmarks = assignment(&app, "sam", "benchmarks").await;
    assert_eq!(benchmarks["task"]["inputs"]["year"], 2026);
    submit(
        &app,
        "sam",
        &benchmarks,
        &contribution(&benchmarks, "A 2026 benchmark measures recovery.", 3_100),
    )
    .await;
    let write = assignment(&app, "sue", "write").await;
    assert_eq!(
        write["task"]["dep_contributions"].as_array().unwrap().len(),
        2,
        "{write}"
    );
    submit(
        &app,
        "sue",
        &write,
        &contribution(
            &write,
            "Leases [gather]; 2026 recovery [benchmarks].",
            3_000,
        ),
    )
    .await;
    app.settle().await;
    let met = review(&app, &path, 2, "met").await;
    assert_eq!(met["accepted"], true, "{met}");
    app.settle().await;

    let objective = app.get("olive", &path).await;
    assert_eq!(objective["status"], "completed", "{objective}");
    let reviews = app.get("olive", &format!("{path}/reviews")).await;
    assert_eq!(
        reviews["reports"][1]["source_set"]["sources"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{reviews}"
    );
    // B3: each submitted usage is charged as the actual; the specialists' spend is their sum.
    let budget = app.get("oscar", "/v1/rooms/local/budget?limit=200").await;
    assert_eq!(
        budget["spent_micros_by_role"]["specialist"].as_i64(),
        Some(3_400 + 2_800 + 3_100 + 3_000),
        "{budget}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_bad_submissions_get_a_clear_4xx_and_change_nothing() {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."}).to_string(),
    )
    .await;
    let gather = assignment(&app, "sam", "gather").await;
    let op = op_of(&gather);
    let good = contribution(&gather, "notes", 1_000);
    let before = app.snapshot().await;

    let cases: Vec<(&str, String, String, StatusCode, &str)> = vec![
        // T2/T3: another specialist, or the agent host holding no such assignment.
        ("sue", result_path(&op), good.clone(), StatusCode::FORBIDDEN, "refused"),
        ("hank", result_path(&op), good.clone(), StatusCode::FORBIDDEN, "refused"),
        // Unknown or unreadable operations.
        ("sam", result_path(UNKNOWN), good.clone(), StatusCode::NOT_FOUND, "not_found"),
        ("sam", result_path("not-an-id"), good.clone(), StatusCode::NOT_FOUND, "not_found"),
        // Malformed, unknown fields, wrong shapes, bad values.
        ("sam", result_path(&op), "{not json".to_owned(), StatusCode::BAD_REQUEST, "malformed_json"),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "artifacts": [{"name": "n", "content": "c"}], "extra": 1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "artifacts": [{"name": "n", "content": "c", "x": 1}]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "success"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "artifacts": []}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        // T2: a declared output missing or mistyped; sources the Room cannot keep.
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "body": "Notes."}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "body": "Notes.", "outputs": {"findings": "one"}}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "body": "Notes [s1].", "outputs": {"findings": []},
                   "sources": [document("s1"), document("s1")]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "contribution", "body": "Notes [s1].", "outputs": {"findings": []},
                   "sources": [{"kind": "document", "id": "s1", "uri": "https://example.org/a", "title": "A",
                                "excerpt": "x", "retrieved_at": 0, "content_digest": "md5:00"}]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "failure", "reason": "x", "usage_micros": -1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        // Issue 17: usage no call can cost (the ledger cannot take it) is refused here.
        (
            "sam",
            result_path(&op),
            json!({"outcome": "failure", "reason": "x", "usage_micros": i64::MAX}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            contribution(&gather, "notes", 1_000_000_000_000_001),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        (
            "sam",
            result_path(&op),
            json!({"outcome": "failure", "reason": "  "}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
        ),
        // Oversized: refused before it is read.
        (
            "sam",
            result_path(&op),
            contribution(&gather, &"x".repeat(70 * 1024), 1),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
    ];
    for (who, url, body, status, code) in &cases {
        let answer = app.as_(who, Method::POST, url, body).await;
        answer.assert_error(*status, code);
    }
    // Nothing changed: the Room, the ledger, and the assignment still waits for sam alone.
    assert_eq!(app.snapshot().await, before);
    assert_eq!(assignment(&app, "sam", "gather").await, gather);
    assert!(
        app.get("sue", ASSIGNMENTS).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // A failure is a result too (charged its usage, B3); a second submission is a 409.
    submit(
        &app,
        "sam",
        &gather,
        &json!({"outcome": "failure", "reason": "the sources are unreachable", "usage_micros": 500}).to_string(),
    )
    .await;
    let again = app.as_("sam", Method::POST, &result_path(&op), &good).await;
    again.assert_error(StatusCode::CONFLICT, "wrong_state");
    assert!(again.body.contains("already"), "{again:?}");
    no_assignment_for(&app, "sam", &op).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d3_a_paused_objective_takes_back_the_assignment_and_refuses_its_result() {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."}).to_string(),
    )
    .await;
    let gather = assignment(&app, "sam", "gather").await;
    let id = gather["objective"].as_str().unwrap();
    app.post(
        "olive",
        &format!("/v1/rooms/local/objectives/{id}/control"),
        r#"{"action":"pause"}"#,
    )
    .await;
    // The waiting call is aborted: it leaves the assignments and takes no result.
    no_assignment(&app, "sam").await;
    let late = app
        .as_(
            "sam",
            Method::POST,
            &result_path(&op_of(&gather)),
            &contribution(&gather, "too late", 10),
        )
        .await;
    late.assert_error(StatusCode::CONFLICT, "wrong_state");
    assert!(late.body.contains("not waiting"), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b5_a_usage_above_the_reservation_is_charged_and_stops_admissions() {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."}).to_string(),
    )
    .await;
    let gather = assignment(&app, "sam", "gather").await;
    let above = gather["reservation_micros"].as_i64().unwrap() + 1;
    submit(&app, "sam", &gather, &contribution(&gather, "notes", above)).await;
    app.settle().await;

    // B3: the actual is charged, not cut to the reservation; B5: the overrun stops new
    // admissions, so the report task is not dispatched to sue.
    let budget = app.get("oscar", "/v1/rooms/local/budget?limit=200").await;
    assert_eq!(
        budget["spent_micros_by_principal"]["sam"].as_i64(),
        Some(above),
        "{budget}"
    );
    assert!(!budget["overrun"].is_null(), "{budget}");
    assert!(
        app.get("sue", ASSIGNMENTS).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// T2, T3 over the A2E transports: a session acts as the principal of its bearer token, so an
/// agent acknowledges its own running task on the objective's board, and moving another's is
/// refused by its rule (T3) — on the A2E one-message endpoint and on the Room's planning
/// endpoint alike. Without the binding every agent update was refused as anonymous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_an_a2e_session_acts_as_its_tokens_principal_on_an_objective_board() {
    let (app, gather) = objective_with_sams_gather().await;
    let plan_id = gather["objective"].as_str().unwrap().to_owned();
    let task_id = gather["task"]["identity"].as_str().unwrap().to_owned();
    let update = |id: &str| {
        json!({
            "type": "planning/task/update", "id": id, "version": "1.0", "ts": 1_764_460_800.0,
            "plan_id": plan_id, "task_id": task_id, "status": "in_progress",
            "assignee": "", "deps": [],
        })
        .to_string()
    };
    for path in ["/v1/planning", "/v1/rooms/local/planning"] {
        let own = app.as_("sam", Method::POST, path, &update("own")).await;
        assert_eq!(own.status, StatusCode::OK, "{path}: {own:?}");
        let own = own.json();
        assert_eq!(own["type"], "planning/task/update/resp", "{path}: {own}");
        assert_eq!(own["success"], true, "{path}: sam's own task: {own}");
        assert_eq!(own["task_id"], json!(task_id));

        let other = app.as_("sue", Method::POST, path, &update("other")).await;
        assert_eq!(other.status, StatusCode::OK, "{path}: {other:?}");
        let other = other.json();
        assert_eq!(
            other["success"], false,
            "{path}: sue moved sam's task: {other}"
        );
        assert!(
            other["message"].as_str().unwrap().starts_with("T3:"),
            "{path}: {other}"
        );
    }
}

/// R7 over REST: a human's verdict naming a source the report does not cite is refused as
/// written (422, nothing recorded); a `met` whose quote is in neither the report nor a named
/// source's excerpt is recorded as `unknown` with the reason, and the objective waits (R5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r7_a_human_met_needs_a_supplied_source_and_a_quote_found_in_what_was_supplied() {
    let app = spawn_app_hosting(&["sam", "sue"]).await;
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": "Summarize durable agent runtimes."}).to_string(),
    )
    .await;
    let gather = assignment(&app, "sam", "gather").await;
    let id = gather["objective"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    submit(
        &app,
        "sam",
        &gather,
        &contribution(&gather, "Leases fence stale writers.", 1_000),
    )
    .await;
    let write = assignment(&app, "sue", "write").await;
    // The writer's assignment carries its dependency's content (C1).
    assert!(
        write["context"].as_array().unwrap().iter().any(|item| {
            item["kind"] == "dependency"
                && item["text"]
                    .as_str()
                    .unwrap()
                    .contains("Leases fence stale writers.")
        }),
        "{write}"
    );
    submit(
        &app,
        "sue",
        &write,
        &contribution(&write, "Runtimes use leases [gather].", 1_000),
    )
    .await;
    app.settle().await;

    let reviews = app.get("rita", &format!("{path}/reviews")).await;
    let (source, quote) = evidence(&reviews, 1);
    let body = |sources: Vec<&str>, quote: &str| {
        json!({
            "report_version": 1,
            "observed": reviews["observed"],
            "verdicts": [
                {"criterion": "cites-sources", "verdict": "met", "evidence": "cited", "sources": sources, "quote": quote},
                {"criterion": "covers-2026", "verdict": "met", "evidence": "seen", "sources": [source.as_str()], "quote": "a sentence nobody wrote"},
            ],
        })
        .to_string()
    };
    let before = app.snapshot().await;
    let refused = app
        .as_(
            "rita",
            Method::POST,
            &format!("{path}/reviews"),
            &body(vec!["s9"], &quote),
        )
        .await;
    refused.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
    assert!(refused.body.contains("`s9`"), "{refused:?}");
    assert_eq!(app.snapshot().await, before, "nothing changed");

    let taken = app
        .post(
            "rita",
            &format!("{path}/reviews"),
            &body(vec![source.as_str()], &quote),
        )
        .await;
    assert_eq!(taken["accepted"], true, "{taken}");
    let reviews = app.get("olive", &format!("{path}/reviews")).await;
    let verdicts = &reviews["reviews"][0]["verdicts"];
    assert_eq!(verdicts[0]["verdict"], "met", "{reviews}");
    assert_eq!(verdicts[1]["verdict"], "unknown", "{reviews}");
    assert!(
        verdicts[1]["evidence"]
            .as_str()
            .unwrap()
            .starts_with("R7: recorded as unknown"),
        "{reviews}"
    );
    let objective = app.get("olive", &path).await;
    assert_eq!(objective["status"], "waiting_for_owner", "{objective}");
}

/// Issue 17, visibility decided once (the domain's `sees_task`, `visible_changes`,
/// `sees_log_entry`): over the planning messages (both endpoints) a specialist's board and
/// task list hold only its own tasks, its plan diff only their keys, and its decision log no
/// entry about money; the owner sees everything. Before, boards and task lists listed every
/// task, the diff every key, and the log every reservation and charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_a_specialist_reads_only_its_tasks_and_no_money_on_every_surface() {
    let (app, gather) = objective_with_sams_gather().await;
    let objective = gather["objective"].as_str().unwrap().to_owned();
    let own = gather["task"]["identity"].as_str().unwrap().to_owned();

    let ids_in = |reply: &Value, key: &str| -> Vec<String> {
        let mut ids = Vec::new();
        let mut walk = vec![reply[key].clone()];
        while let Some(v) = walk.pop() {
            match v {
                Value::Object(map) => {
                    if let Some(Value::String(id)) = map.get("task_id") {
                        ids.push(id.clone());
                    }
                    walk.extend(map.into_values());
                }
                Value::Array(items) => walk.extend(items),
                _ => {}
            }
        }
        ids.sort();
        ids
    };
    for path in ["/v1/planning", "/v1/rooms/local/planning"] {
        for (kind, body) in [
            ("planning/plan/board", json!({"plan_id": objective})),
            (
                "planning/task/list",
                json!({"plan_id": objective, "status": ""}),
            ),
            ("planning/task/list", json!({"status": ""})),
        ] {
            let mut message = body.clone();
            message["type"] = json!(kind);
            message["id"] = json!("v1");
            message["version"] = json!("1.0");
            message["ts"] = json!(1_764_460_800.0);
            let key = if kind.ends_with("board") {
                "boards"
            } else {
                "tasks"
            };
            let as_sam = app
                .as_("sam", Method::POST, path, &message.to_string())
                .await;
            assert_eq!(as_sam.status, StatusCode::OK, "{path} {kind}: {as_sam:?}");
            let as_sam = as_sam.json();
            assert_eq!(as_sam["success"], true, "{as_sam}");
            assert_eq!(
                ids_in(&as_sam, key),
                vec![own.clone()],
                "{path} {kind}: {as_sam}"
            );
            let as_olive = app
                .as_("olive", Method::POST, path, &message.to_string())
                .await
                .json();
            let all = ids_in(&as_olive, key);
            assert_eq!(
                all.len(),
                2,
                "{path} {kind}: the owner sees both: {as_olive}"
            );
            assert!(all.contains(&own));
        }
    }

    let plans = format!("/v1/rooms/local/objectives/{objective}/plans");
    let diff_keys = |page: &Value| -> Vec<String> {
        page["items"][0]["diff"]["added"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(diff_keys(&app.get("sam", &plans).await), ["gather"]);
    assert_eq!(diff_keys(&app.get("sue", &plans).await), ["write"]);
    assert_eq!(
        diff_keys(&app.get("olive", &plans).await),
        ["gather", "write"]
    );

    let decisions = format!("/v1/rooms/local/objectives/{objective}/decisions?limit=200");
    let rules = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["rule"].as_str().map(str::to_owned))
            .collect()
    };
    let owner_rules = rules(&app.get("olive", &decisions).await);
    assert!(
        owner_rules.iter().any(|r| r.starts_with('B')),
        "the owner reads the reservations: {owner_rules:?}"
    );
    let sam_page = app.get("sam", &decisions).await;
    assert!(
        !rules(&sam_page).iter().any(|r| r.starts_with('B')),
        "no money for a specialist: {sam_page}"
    );
    assert!(
        !sam_page.to_string().contains("$0."),
        "no amount anywhere: {sam_page}"
    );
}
