//! The web board at `/`, end to end in headless Chromium: the real host (the A2E app with the
//! board mounted, merged with the REST API) on port 0, the real coordinator on a fresh SQLite
//! database, scripted agents from `scenarios/demo.toml` whose first task has a hostile title,
//! and real bearer tokens. The objective runs to completion through the REST API (a human
//! reviewer finds a criterion unmet, then approves report version 2); then Chromium loads the
//! board as the owner and the test asserts on the DOM it rendered, and keeps a screenshot at
//! `target/artifacts/board.png`.
//!
//! Chromium is Debian's `chromium` package (`.ci/run` installs it). Without it the browser
//! test fails when `CI=true` and is skipped with a message elsewhere.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests: a failed unwrap is a failed test; the test prints where its artifacts are, or why it skipped"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::PriceTable;
use agentroom_agents::scripted::{Journal, Scenario, Scripted};
use agentroom_coordinator::RunnerConfig;
use agentroom_coordinator::{Coordinator, CoordinatorConfig, InputId};
use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::MembershipChange;
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_ports::tokens::RANDOM_BYTES;
use agentroom_ports::{Clock, NewToken, SystemClock, TokenMaterial, TokenStore};
use agentroom_server::api::{self, Api, Feed};
use agentroom_server::board::CONTENT_SECURITY_POLICY_VALUE;
use agentroom_server::{ServerConfig, router};
use agentroom_store_sqlite::{Durability, SqlitePlanning, SqliteRooms};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::time::timeout;

/// How long any one network step may take before the test fails (a hang, not a measure).
const STEP: Duration = Duration::from_secs(30);
/// How long one Chromium run may take before the test fails.
const BROWSER: Duration = Duration::from_secs(120);

/// A task title that would run script if it reached an HTML parser.
const HOSTILE: &str = "<img src=x onerror=alert(1)></script><script>alert(2)</script>";
/// How the serialized DOM shows it when it was inserted as text.
const HOSTILE_ESCAPED: &str =
    "&lt;img src=x onerror=alert(1)&gt;&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;";
/// The demo's first task title, which the hostile one replaces in both plans.
const GATHER_TITLE: &str = "Gather papers and release notes on durable agent runtimes";
/// A criterion's text, and the hostile markup added to it in both plans.
const CRITERION_TEXT: &str = "every claim cites a source";
const HOSTILE_CRITERION: &str = "<svg onload=alert(3)>";
/// The start of both report versions' content, and the hostile markup put before it.
const REPORT_START: &str = "Durable agent runtimes checkpoint";
const HOSTILE_REPORT: &str = "<iframe src=javascript:alert(4)></iframe>";
/// The start of the research notes (the report's cited source, whose text a reviewer reads
/// as its excerpt), and the hostile markup put before it.
const NOTES_START: &str = "Two surveys describe";
const HOSTILE_EXCERPT: &str = "<object data=javascript:alert(6)></object>";
/// The owner's message (the objective's title), with hostile markup in it.
const OWNER_MESSAGE: &str = "Summarize what changed in durable agent runtimes <b onmouseover=alert(5)>with sources</b> for every claim.";

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

struct App {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    coordinator: Coordinator,
    tokens: HashMap<String, String>,
    dir: tempfile::TempDir,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

/// The demo scenario with the hostile title for the `gather` task.
fn hostile_scenario(dir: &Path) -> Scenario {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/demo.toml");
    let text = std::fs::read_to_string(demo).unwrap();
    assert!(text.contains(GATHER_TITLE), "the demo scenario changed");
    let path = dir.join("hostile.toml");
    assert!(
        text.contains(CRITERION_TEXT) && text.contains(REPORT_START) && text.contains(NOTES_START)
    );
    let hostile = text
        .replace(GATHER_TITLE, HOSTILE)
        .replace(
            CRITERION_TEXT,
            &format!("{CRITERION_TEXT} {HOSTILE_CRITERION}"),
        )
        .replace(REPORT_START, &format!("{HOSTILE_REPORT}{REPORT_START}"))
        .replace(NOTES_START, &format!("{HOSTILE_EXCERPT}{NOTES_START}"));
    std::fs::write(&path, hostile).unwrap();
    Scenario::from_file(&path).unwrap()
}

/// Starts the host over a fresh Room `local` (the demo's members, reviews by a human).
async fn spawn_app() -> App {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    let store = Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap());
    let scenario = hostile_scenario(dir.path());
    let spec = scenario.room().cloned().unwrap();
    let journal = Arc::new(Journal::open(dir.path().join("journal.jsonl")).unwrap());
    let scripted = Arc::new(Scripted::new(scenario).with_journal(journal));
    let reconciler = scripted.reconciler().unwrap();
    let catalog = spec
        .bindings
        .iter()
        .fold(MemoryCatalog::new(), |c, (capability, provider)| {
            c.bind(capability, provider)
        });
    let feed = Arc::new(Feed::new());
    let coordinator = Coordinator::builder(
        store.clone(),
        CoordinatorConfig::new(RunnerConfig::new("board-test", Duration::from_secs(30))),
    )
    .provider(Arc::new(scripted.agents()))
    .reconciler(Arc::new(reconciler))
    .clock(Arc::new(SystemClock))
    .catalog(Arc::new(catalog))
    .notifier(Arc::clone(&feed) as _)
    .build();
    let room = RoomId::parse("local").unwrap();
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: spec.owner.clone(),
        policy: RoomPolicy::from_toml("[review]\nsource = \"human\"\n").unwrap(),
        access: AccessPolicy::default(),
        quotes: PriceTable::shipped().unwrap().quotes("scripted").unwrap(),
        limit: UsdMicros::new(spec.limit_micros),
    })
    .unwrap();
    coordinator.recover().await.unwrap();
    coordinator.create_room(&state).await.unwrap();
    for (who, roles) in &spec.members {
        for role in roles {
            coordinator
                .change_membership(
                    &room,
                    InputId::named(&format!("grant {who} {role:?}")),
                    spec.owner.clone(),
                    who.clone(),
                    *role,
                    MembershipChange::Grant,
                )
                .await
                .unwrap();
        }
    }
    let mut tokens = HashMap::new();
    for who in ["olive", "oscar", "rita", "sam", "sue"] {
        let mut bytes = [0u8; RANDOM_BYTES];
        agentroom_ports::Random::fill(&agentroom_ports::SystemRandom, &mut bytes).unwrap();
        let issued = store
            .issue_token(
                NewToken {
                    room: room.clone(),
                    principal: p(who),
                    created_at: SystemClock.now(),
                    expires_at: None,
                    label: None,
                },
                TokenMaterial::from_random(bytes),
            )
            .await
            .unwrap();
        tokens.insert(who.to_owned(), issued.text().to_owned());
    }
    let planning = Arc::new(PlanningService::new(
        Arc::new(SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap()),
        Arc::new(SystemAmbient),
    ));
    // The host as `serve` composes it: the A2E app (which mounts the board at `/`) and the
    // REST API.
    let app =
        router(Arc::clone(&planning), ServerConfig::new(room.clone())).merge(api::router(Api {
            rooms: coordinator.clone(),
            planning,
            feed: Arc::clone(&feed),
        }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(agentroom_server::serve(
        listener,
        app,
        std::future::pending(),
    ));
    App {
        base: format!("http://{address}"),
        client: Client::builder(TokioExecutor::new()).build_http(),
        coordinator,
        tokens,
        dir,
    }
}

impl App {
    async fn call(&self, method: Method, path: &str, who: Option<&str>, body: &str) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json");
        if let Some(who) = who {
            request = request.header("authorization", format!("Bearer {}", self.tokens[who]));
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = timeout(STEP, self.client.request(request))
            .await
            .expect("no answer in time")
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = timeout(STEP, response.into_body().collect())
            .await
            .expect("no body in time")
            .unwrap()
            .to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    async fn get(&self, who: &str, path: &str) -> Value {
        let answer = self.call(Method::GET, path, Some(who), "").await;
        assert_eq!(answer.status, StatusCode::OK, "GET {path}: {}", answer.body);
        serde_json::from_str(&answer.body).unwrap()
    }

    async fn post(&self, who: &str, path: &str, body: &Value) -> Value {
        let answer = self
            .call(Method::POST, path, Some(who), &body.to_string())
            .await;
        assert!(answer.status.is_success(), "POST {path}: {}", answer.body);
        serde_json::from_str(&answer.body).unwrap()
    }

    async fn settle(&self) {
        timeout(STEP, self.coordinator.wait_idle())
            .await
            .expect("the room did not get quiet");
        self.coordinator.deliver_notifications().await.unwrap();
    }

    /// Each specialist confirms its completed tasks with their contribution (T2).
    async fn specialists_confirm(&self, objective: &str) {
        for me in ["sam", "sue"] {
            let detail = self.get(me, objective).await;
            for column in detail["board"]["columns"].as_array().unwrap() {
                for task in column["tasks"].as_array().unwrap() {
                    let Some(contribution) = task["state"]["contribution"].as_str() else {
                        continue;
                    };
                    let update = json!({"task": task["identity"], "status": "done", "contribution": contribution});
                    self.post(me, &format!("{objective}/tasks"), &update).await;
                }
            }
        }
    }

    async fn review(&self, objective: &str, version: u64, covers_2026: &str) {
        let reviews = self.get("rita", &format!("{objective}/reviews")).await;
        assert_eq!(reviews["awaiting_review"]["version"], version, "{reviews}");
        let (source, quote) = evidence(&reviews, version);
        let body = json!({
            "report_version": version,
            "observed": reviews["observed"],
            "verdicts": [
                {"criterion": "cites-sources", "verdict": "met", "evidence": "every claim cites a contribution", "sources": [source], "quote": quote},
                {"criterion": "covers-2026", "verdict": covers_2026, "evidence": format!("checked report version {version}"), "sources": [source], "quote": quote},
            ],
        });
        let answer = self
            .post("rita", &format!("{objective}/reviews"), &body)
            .await;
        assert_eq!(answer["accepted"], true, "{answer}");
        self.settle().await;
    }
}

/// Runs the demo objective through the REST API: planned, one agent's move refused by O7,
/// reviewed unmet, corrected, until report version 2 awaits review. Returns its path.
async fn run_until_second_review(app: &App) -> String {
    let message = json!({"kind": "owner_message", "text": OWNER_MESSAGE});
    app.post("olive", "/v1/rooms/local/events", &message).await;
    app.settle().await;
    let objectives = app.get("olive", "/v1/rooms/local/objectives").await;
    let id = objectives["items"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/rooms/local/objectives/{id}");
    app.specialists_confirm(&path).await;
    // O7: an agent cannot move work back; the domain rejects it by rule (on the timeline).
    let detail = app.get("sam", &path).await;
    let gather = detail["board"]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["tasks"].as_array().unwrap())
        .find(|t| t["key"] == "gather")
        .unwrap()["identity"]
        .clone();
    let moved = app
        .call(
            Method::POST,
            &format!("{path}/tasks"),
            Some("sam"),
            &json!({"task": gather, "status": "todo"}).to_string(),
        )
        .await;
    // Refused by a rule: 409 naming it.
    assert_eq!(moved.status, StatusCode::CONFLICT, "{}", moved.body);
    let moved: Value = serde_json::from_str(&moved.body).unwrap();
    assert_eq!(moved["rule"], "O7", "{moved}");
    app.review(&path, 1, "unmet").await;
    app.specialists_confirm(&path).await;
    path
}

/// Runs the objective to completion: [`run_until_second_review`], then approval.
async fn run_objective(app: &App) -> String {
    let path = run_until_second_review(app).await;
    app.review(&path, 2, "met").await;
    let detail = app.get("olive", &path).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    path
}

/// Where the screenshot is kept: `target/artifacts/board.png` of the workspace.
fn artifact() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let dir = target.join("artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("board.png")
}

/// Whether Chromium is here; without it the test fails in CI and is skipped elsewhere.
fn chromium() -> Option<&'static str> {
    let found = std::process::Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if found {
        return Some("chromium");
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "chromium is missing and CI=true: install Debian's chromium package (.ci/run does)"
    );
    eprintln!("SKIPPED: chromium is not installed (apt-get install -y chromium)");
    None
}

/// Runs headless Chromium on `url` with `extra` arguments; its standard output.
async fn run_chromium(binary: &str, profile: &Path, url: &str, extra: &[&str]) -> String {
    let mut command = tokio::process::Command::new(binary);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            // Virtual time runs only while no fetch is pending, so the page's API calls are
            // answered before the DOM is taken; the open notification stream does not hold it.
            "--virtual-time-budget=15000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let output = timeout(BROWSER, command.output())
        .await
        .expect("chromium did not finish in time")
        .unwrap();
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The part of `dom` from `start` to the next `end` (or the end).
fn between<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let from = dom
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the DOM:\n{dom}"));
    let rest = &dom[from + start.len()..];
    rest.find(end).map_or(rest, |to| &rest[..to])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_shows_the_room_in_chromium_with_every_user_string_as_text() {
    let Some(binary) = chromium() else { return };
    let app = spawn_app().await;
    run_objective(&app).await;
    // A second message, which the scripted reasoner has no reply for: its call is refused
    // before it runs, so the message waits for attention, naming why (issue 16).
    app.post(
        "olive",
        "/v1/rooms/local/events",
        &json!({"kind": "owner_message", "text": "And what about leases?"}),
    )
    .await;
    app.settle().await;
    // The Room's memory (M1): an entry whose text is markup, and a retracted one.
    let digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    for text in ["<img src=x onerror=alert(1)> remember", "forget me"] {
        app.post(
            "olive",
            "/v1/rooms/local/memory",
            &json!({"text": text, "provenance": {"from": "external", "url": "https://example.org/m", "digest": digest}}),
        )
        .await;
    }
    let memory = app.get("olive", "/v1/rooms/local/memory").await;
    let forgotten = memory["items"][1]["id"].as_str().unwrap().to_owned();
    app.post(
        "oscar",
        &format!("/v1/rooms/local/memory/{forgotten}/retract"),
        &json!({"why": "wrong room"}),
    )
    .await;
    // A third entry, redacted by the owner: its record is on the board, its text nowhere.
    app.post(
        "olive",
        "/v1/rooms/local/memory",
        &json!({"text": "the door code is 4711", "provenance": {"from": "external", "url": "https://example.org/m", "digest": digest}}),
    )
    .await;
    let memory = app.get("olive", "/v1/rooms/local/memory").await;
    let secret = memory["items"][2]["id"].as_str().unwrap().to_owned();
    app.post(
        "olive",
        "/v1/rooms/local/redactions",
        &json!({"target": {"kind": "memory", "entry": secret}, "reason": "<b>a door code</b>"}),
    )
    .await;
    let room = app.get("olive", "/v1/rooms/local").await;
    let held = room["pending_messages"][0]["held"]
        .as_str()
        .unwrap_or_default();
    assert!(held.contains("refused before it ran"), "{room}");
    let balances = room["budget"].clone();
    assert!(
        balances["spent"].as_i64().unwrap() > 0,
        "nothing charged: {room}"
    );

    // The owner opens a sign-in link: the token travels in the fragment, which the page
    // moves into sessionStorage and removes from the address bar.
    let url = format!("{}/#room=local&token={}", app.base, app.tokens["olive"]);
    let profile = app.dir.path().join("chromium-profile");
    let dom = run_chromium(binary, &profile, &url, &["--dump-dom"]).await;
    let screenshot = artifact();
    let _ = std::fs::remove_file(&screenshot);
    run_chromium(
        binary,
        &app.dir.path().join("chromium-profile-2"),
        &url,
        &[
            &format!("--screenshot={}", screenshot.display()),
            "--window-size=1400,2600",
        ],
    )
    .await;
    assert!(
        std::fs::metadata(&screenshot).is_ok_and(|m| m.len() > 0),
        "no screenshot at {}",
        screenshot.display()
    );
    println!("board screenshot: {}", screenshot.display());
    let dom_file = screenshot.with_extension("html");
    std::fs::write(&dom_file, &dom).unwrap();
    println!("board DOM: {}", dom_file.display());

    assert!(
        dom.contains(r#"data-loaded="true""#),
        "never loaded:\n{dom}"
    );
    assert!(dom.contains("olive (owner)"), "{dom}");
    assert!(dom.contains(r#"<section id="sign-in" hidden="">"#), "{dom}");
    // The members and their roles, read only (issue 18): no form, no button on them.
    let members = between(&dom, r#"<section id="members">"#, "</section>");
    assert!(
        members.contains(
            r#"<li data-principal="rita"><span class="principal">rita</span> · reviewer</li>"#
        ),
        "{members}"
    );
    assert!(
        !members.contains("<form") && !members.contains("<button"),
        "{members}"
    );
    // The memory, read only, its text as text; the retracted entry says who and why.
    let memory = between(&dom, r#"<section id="memory">"#, "</section>");
    assert!(
        memory.contains("&lt;img src=x onerror=alert(1)&gt; remember") && !memory.contains("<img"),
        "{memory}"
    );
    assert!(memory.contains("added by olive"), "{memory}");
    assert!(
        memory.contains(r#"data-state="retracted""#)
            && memory.contains("retracted by oscar: wrong room"),
        "{memory}"
    );
    assert!(
        !memory.contains("<form") && !memory.contains("<button"),
        "{memory}"
    );
    // The redaction record, read only, its reason as text; the redacted entry's text is gone.
    assert!(memory.contains(r#"data-state="redacted""#), "{memory}");
    assert!(
        !dom.contains("door code is 4711"),
        "a redacted text on the board"
    );
    let redactions = between(&dom, r#"<section id="redactions">"#, "</section>");
    assert!(
        redactions.contains(&format!("memory entry {secret}"))
            && redactions.contains("redacted by olive")
            && redactions.contains("&lt;b&gt;a door code&lt;/b&gt;")
            && !redactions.contains("<b>"),
        "{redactions}"
    );
    assert!(
        !redactions.contains("<form") && !redactions.contains("<button"),
        "{redactions}"
    );
    // The failed call's cause, on the board: the pending message waits, and says why.
    let pending = between(&dom, r#"<section class="pending-messages">"#, "</section>");
    assert!(pending.contains(r#"data-held="true""#), "{pending}");
    assert!(pending.contains("And what about leases?"), "{pending}");
    assert!(
        pending.contains("waits for attention: the reasoner call")
            && pending.contains("was refused before it ran"),
        "{pending}"
    );

    // Task titles in their columns: every task is done at the end; nothing is elsewhere.
    let done = between(
        &dom,
        r#"<div class="column" data-column="done">"#,
        r#"<div class="column""#,
    );
    for key in ["gather", "benchmarks", "write"] {
        assert!(
            done.contains(&format!(r#"data-task="{key}""#)),
            "{key} not in done:\n{done}"
        );
    }
    assert!(done.contains("Write the sourced summary"), "{done}");
    for column in ["backlog", "todo", "in_progress"] {
        let cards = between(
            &dom,
            &format!(r#"<div class="column" data-column="{column}">"#),
            "</div>",
        );
        assert!(!cards.contains("data-task"), "a task in {column}: {cards}");
    }

    // The hostile title is shown as text, in its card: no element was made from it.
    assert!(
        done.contains(&format!(r#"<div class="title">{HOSTILE_ESCAPED}</div>"#)),
        "the hostile title is not shown as text:\n{done}"
    );
    assert!(!dom.contains("<img"), "an img element was created:\n{dom}");
    // So are the objective's title (the owner's message), a criterion and report content.
    for (markup, escaped) in [
        (
            "<b ",
            "&lt;b onmouseover=alert(5)&gt;with sources&lt;/b&gt;",
        ),
        ("<svg", "&lt;svg onload=alert(3)&gt;"),
        (
            "<iframe",
            "&lt;iframe src=javascript:alert(4)&gt;&lt;/iframe&gt;Durable agent runtimes",
        ),
    ] {
        assert!(dom.contains(escaped), "{escaped} not shown as text:\n{dom}");
        assert!(
            !dom.contains(markup),
            "an element {markup} was created:\n{dom}"
        );
    }
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "a script element was created:\n{dom}"
    );

    // The budget figures, as the API reports them.
    for field in ["limit", "spent", "reserved", "uncertain", "available"] {
        let micros = balances[field].as_i64().unwrap();
        assert!(
            dom.contains(&format!(
                r#"<dd data-field="{field}" data-micros="{micros}">"#
            )),
            "budget {field} = {micros} not shown:\n{dom}"
        );
    }
    assert!(dom.contains(r#"data-field="limit" data-micros="1000000">$1.000000 "#));

    // Each report version's review, criterion by criterion, with the reviewer.
    let v1 = between(&dom, r#"data-report-version="1">"#, "</section>");
    assert!(
        v1.contains(r#"data-reviewer="rita" data-outcome="unmet""#),
        "{v1}"
    );
    assert!(
        v1.contains(r#"<tr data-criterion="covers-2026" data-verdict="unmet">"#),
        "{v1}"
    );
    assert!(v1.contains("checked report version 1"), "{v1}");
    let v2 = between(&dom, r#"data-report-version="2">"#, "</section>");
    assert!(
        v2.contains(r#"data-reviewer="rita" data-outcome="all_met""#),
        "{v2}"
    );
    assert!(
        v2.contains(r#"<tr data-criterion="covers-2026" data-verdict="met">"#),
        "{v2}"
    );
    assert!(
        v2.contains(r#"<tr data-criterion="cites-sources" data-verdict="met">"#),
        "{v2}"
    );

    // The report's text, its sources with their excerpts and the evidence per criterion,
    // every string shown as text (issue 15).
    assert!(
        v2.contains(r#"<div class="report-content report-body">"#)
            && v2.contains(&format!(
                "&lt;iframe src=javascript:alert(4)&gt;&lt;/iframe&gt;{REPORT_START}"
            )),
        "the report's text is not shown:\n{v2}"
    );
    let sources = between(v2, r#"<ul class="sources">"#, "</ul>");
    assert!(sources.contains(r#"data-kind="contribution""#), "{sources}");
    assert!(
        sources.contains(&format!(
            r#"<blockquote class="excerpt">## notes

&lt;object data=javascript:alert(6)&gt;&lt;/object&gt;{NOTES_START}"#
        )),
        "the cited source's text is not shown as text:\n{sources}"
    );
    assert!(
        !dom.contains("<object"),
        "an object element was created:\n{dom}"
    );
    let quote = between(
        v2,
        r#"<tr data-criterion="cites-sources" data-verdict="met">"#,
        "</tr>",
    );
    assert!(
        quote.contains(r#"<td class="verdict-quote"><q>"#) && quote.contains("[gather]"),
        "the quoted evidence is not shown:\n{quote}"
    );

    // The decision timeline: what was accepted and what a rule rejected.
    let timeline = between(&dom, r#"<ol class="timeline">"#, "</ol>");
    assert!(
        timeline.contains(r#"data-verdict="rejected" data-rule="O7""#),
        "{timeline}"
    );
    assert!(
        timeline.contains(r#"data-verdict="accepted" data-rule="T2""#),
        "{timeline}"
    );

    // Live updates: the notification stream was read (the owner's completion notice).
    let notifications = between(&dom, r#"<ol id="notifications">"#, "</ol>");
    assert!(
        notifications.contains("completed: every criterion met"),
        "{notifications}"
    );
    assert!(dom.contains(r#"data-state="connected""#), "{dom}");
}

/// The page and its assets carry the strict policy and `nosniff`, and need no token; the data
/// they show needs one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_assets_are_sent_with_a_strict_policy_and_nosniff() {
    let app = spawn_app().await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/board.js", "text/javascript"),
        ("/board.css", "text/css"),
    ] {
        let answer = app.call(Method::GET, path, None, "").await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        let header = |name: &str| {
            answer
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(header("content-type").starts_with(kind), "{path}");
        assert_eq!(
            header("content-security-policy"),
            CONTENT_SECURITY_POLICY_VALUE
        );
        assert!(!CONTENT_SECURITY_POLICY_VALUE.contains("unsafe-inline"));
        assert!(CONTENT_SECURITY_POLICY_VALUE.contains("script-src 'self'"));
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert!(header("set-cookie").is_empty(), "{path} sets a cookie");
        assert!(!answer.body.is_empty());
    }
    let room = app.call(Method::GET, "/v1/rooms/local", None, "").await;
    assert_eq!(room.status, StatusCode::UNAUTHORIZED);
}

/// Headless Chromium driven through the DevTools protocol over a pipe
/// (`--remote-debugging-pipe`: commands on its fd 3, answers on its fd 4, each JSON message
/// ended by a NUL byte), attached to one page.
struct Browser {
    child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::io::BufReader<tokio::process::ChildStdout>,
    next: u64,
    session: Option<String>,
}

impl Browser {
    async fn launch(binary: &str, profile: &Path) -> Browser {
        use std::process::Stdio;
        // The shell gives Chromium our pipes as its fds 3 and 4, and nothing on 0 and 1.
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 1>/dev/null 0</dev/null"#)
            .arg(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut browser = Browser {
            child,
            input,
            output,
            next: 0,
            session: None,
        };
        let target = browser
            .command("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let target = target["targetId"].as_str().unwrap().to_owned();
        let attached = browser
            .command(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
            .await;
        browser.session = Some(attached["sessionId"].as_str().unwrap().to_owned());
        browser
    }

    /// Sends one command (to the attached page once there is one) and returns its result.
    async fn command(&mut self, method: &str, params: Value) -> Value {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.input.write_all(&bytes).await.unwrap();
        self.input.flush().await.unwrap();
        loop {
            let mut frame = Vec::new();
            let read = timeout(BROWSER, self.output.read_until(0, &mut frame))
                .await
                .expect("chromium did not answer in time")
                .unwrap();
            assert!(read > 0, "chromium closed its DevTools pipe");
            frame.pop();
            let answer: Value = serde_json::from_slice(&frame).unwrap();
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .command(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true}),
            )
            .await;
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the page (a hang guard, not a measure).
    async fn wait_for(&mut self, expression: &str) {
        let waited = timeout(BROWSER, async {
            while self.eval(expression).await != json!(true) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        if waited.is_err() {
            let dom = self.eval("document.documentElement.outerHTML").await;
            panic!("never true in the page: {expression}\n{dom}");
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Live updates: the board the owner has open changes when the notification stream reports
/// that the reviewer approved report version 2, without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_updates_live_from_the_notification_stream() {
    let Some(binary) = chromium() else { return };
    let app = spawn_app().await;
    let path = run_until_second_review(&app).await;
    let mut browser = Browser::launch(binary, &app.dir.path().join("chromium-live")).await;
    let url = format!("{}/#room=local&token={}", app.base, app.tokens["olive"]);
    browser.command("Page.navigate", json!({"url": url})).await;
    browser
        .wait_for(r#"document.body.dataset.loaded === "true" && document.getElementById("live").dataset.state === "connected""#)
        .await;
    // The token left the address bar; it is in this tab's sessionStorage only.
    assert_eq!(browser.eval("location.hash").await, json!(""));
    assert_eq!(
        browser
            .eval(r#"sessionStorage.getItem("agentroom.token")"#)
            .await,
        json!(app.tokens["olive"])
    );
    assert_eq!(browser.eval("document.cookie").await, json!(""));
    assert_ne!(
        browser
            .eval(r#"document.querySelector(".objective").dataset.status"#)
            .await,
        json!("completed"),
        "already completed"
    );
    assert_eq!(
        browser
            .eval(r#"document.querySelector('[data-report-version="2"] .review') === null"#)
            .await,
        json!(true),
        "report v2 shows a review before it was recorded"
    );

    app.review(&path, 2, "met").await;
    browser
        .wait_for(r#"document.querySelector('[data-report-version="2"] [data-outcome="all_met"]') !== null && document.querySelector(".objective").dataset.status === "completed""#)
        .await;
    let notices = browser
        .eval(r#"document.getElementById("notifications").textContent"#)
        .await;
    assert!(
        notices
            .as_str()
            .unwrap()
            .contains("completed: every criterion met"),
        "{notices}"
    );
}

/// Evidence for a `met` on report `version` as R7 asks: its first source and the first line
/// of its body, read from the reviews the API shows.
fn evidence(reviews: &Value, version: u64) -> (String, String) {
    let report = reviews["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["version"] == version)
        .unwrap_or_else(|| panic!("no report v{version}: {reviews}"));
    let content = &report["content"];
    let source = content["sources"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} cites nothing: {report}"))
        .to_owned();
    let quote = content["body"]
        .as_str()
        .unwrap_or_else(|| panic!("report v{version} has no body: {report}"))
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap()
        .to_owned();
    (source, quote)
}

/// Opens the board as `who` and waits until it has loaded.
async fn board_as(app: &App, binary: &str, who: &str) -> Browser {
    let mut browser =
        Browser::launch(binary, &app.dir.path().join(format!("chromium-{who}"))).await;
    let url = format!("{}/#room=local&token={}", app.base, app.tokens[who]);
    browser.command("Page.navigate", json!({"url": url})).await;
    browser
        .wait_for(r#"document.body.dataset.loaded === "true""#)
        .await;
    browser
}

/// R1, R2, R7 from the board (issue 18): the reviewer records the review of the report
/// awaiting review through the board's form, one verdict per criterion with its evidence,
/// source and quote; the Room decides it like any review and the objective completes. The
/// owner, who holds no `review.record`, is shown no review form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_records_a_human_review_through_its_form() {
    let Some(binary) = chromium() else { return };
    let app = spawn_app().await;
    let path = run_until_second_review(&app).await;
    let reviews = app.get("rita", &format!("{path}/reviews")).await;
    let (source, quote) = evidence(&reviews, 2);

    let mut owner = board_as(&app, binary, "olive").await;
    assert_eq!(
        owner
            .eval(r#"document.querySelector("form.review") === null"#)
            .await,
        json!(true),
        "the owner may not record a review"
    );
    drop(owner);

    let mut rita = board_as(&app, binary, "rita").await;
    rita.wait_for(r#"document.querySelector("form.review") !== null"#)
        .await;
    let fill = format!(
        r#"(() => {{
            const form = document.querySelector("form.review");
            for (const set of form.querySelectorAll("fieldset")) {{
                const id = set.dataset.criterion;
                form.elements.namedItem(`verdict-${{id}}`).value = "met";
                form.elements.namedItem(`evidence-${{id}}`).value = "checked report version 2";
                form.elements.namedItem(`sources-${{id}}`).value = {source};
                form.elements.namedItem(`quote-${{id}}`).value = {quote};
            }}
            form.requestSubmit();
            return form.querySelectorAll("fieldset").length;
        }})()"#,
        source = serde_json::to_string(&source).unwrap(),
        quote = serde_json::to_string(&quote).unwrap(),
    );
    assert_eq!(
        rita.eval(&fill).await,
        json!(2),
        "one fieldset per criterion"
    );
    app.settle().await;
    rita.wait_for(r#"document.querySelector(".objective").dataset.status === "completed""#)
        .await;
    let detail = app.get("olive", &path).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    let recorded = app.get("olive", &format!("{path}/reviews")).await;
    let last = recorded["reviews"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert_eq!(last["reviewer"], "rita", "{last}");
    assert_eq!(last["report_version"], 2, "{last}");
}

/// O14, R6 from the board (issue 18): the owner corrects the active objective's text and
/// criteria through the board's form; the correction is an owner_correction event the Room
/// decides, listed among the corrections with its criteria, and the objective's criteria are
/// the new ones. A criteria line that is not `id: text` is refused in the form and nothing is
/// sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_posts_the_owners_correction_through_its_form() {
    let Some(binary) = chromium() else { return };
    let app = spawn_app().await;
    let path = run_until_second_review(&app).await;
    let before = app.get("olive", &format!("{path}/corrections")).await;
    let corrections = before["items"].as_array().map_or(0, Vec::len);

    let mut olive = board_as(&app, binary, "olive").await;
    olive
        .wait_for(r#"document.querySelector("form.correct") !== null"#)
        .await;
    let bad = olive
        .eval(
            r#"(() => {
                const form = document.querySelector("form.correct");
                form.elements.namedItem("text").value = "Cover 2027 too";
                form.elements.namedItem("criteria").value = "no colon on this line";
                form.requestSubmit();
                return true;
            })()"#,
        )
        .await;
    assert_eq!(bad, json!(true));
    olive
        .wait_for(r#"document.querySelector("form.correct .form-status").textContent.includes("is not \"id: text\"")"#)
        .await;
    let unchanged = app.get("olive", &format!("{path}/corrections")).await;
    assert_eq!(
        unchanged["items"].as_array().map_or(0, Vec::len),
        corrections,
        "nothing was sent"
    );

    let sent = olive
        .eval(
            r#"(() => {
                const form = document.querySelector("form.correct");
                form.elements.namedItem("text").value = "Cover the 2027 figures too";
                form.elements.namedItem("criteria").value = "cites-sources: every claim cites a source\ncovers-2027: states the 2027 recovery figure";
                form.requestSubmit();
                return true;
            })()"#,
        )
        .await;
    assert_eq!(sent, json!(true));
    // The page posts it; the Room decides it (poll the API: the page re-renders as it goes).
    let after = timeout(BROWSER, async {
        loop {
            app.settle().await;
            let after = app.get("olive", &format!("{path}/corrections")).await;
            if after["items"].as_array().map_or(0, Vec::len) > corrections {
                return after;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the board's correction never reached the Room");
    let items = after["items"].as_array().unwrap();
    assert_eq!(items.len(), corrections + 1, "{after}");
    let last = items.last().unwrap();
    assert_eq!(last["text"], "Cover the 2027 figures too", "{last}");
    let ids: Vec<&str> = last["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cites-sources", "covers-2027"], "{last}");
    let detail = app.get("olive", &path).await;
    let criteria: Vec<&str> = detail["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(criteria, ["cites-sources", "covers-2027"], "{detail}");
    olive
        .wait_for(
            r#"document.querySelector('.corrections [data-criterion="covers-2027"]') !== null"#,
        )
        .await;
}

/// B8 on the board (issue 18): a member with `budget.read` sees the gauge of the pool the
/// Room draws on, its figures as the API gives them; a member without it is shown none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_shows_the_pool_gauge_to_those_who_read_the_budget() {
    let Some(binary) = chromium() else { return };
    let app = spawn_app().await;
    let pool = agentroom_ports::domain::ids::PoolId::parse("campaign").unwrap();
    app.coordinator
        .create_pool(&pool, UsdMicros::new(5_000_000))
        .await
        .unwrap();
    let room = RoomId::parse("local").unwrap();
    app.coordinator
        .attach_pool(&room, InputId::named("attach campaign"), Some(pool.clone()))
        .await
        .unwrap();
    let budget = app.get("olive", "/v1/rooms/local/budget?limit=1").await;
    assert_eq!(budget["pool"]["id"], "campaign", "{budget}");

    let mut olive = board_as(&app, binary, "olive").await;
    olive
        .wait_for(r#"document.getElementById("pool").hidden === false"#)
        .await;
    assert_eq!(
        olive
            .eval(r#"document.getElementById("pool-title").textContent"#)
            .await,
        json!("Pool campaign")
    );
    assert_eq!(
        olive
            .eval(r#"document.querySelector('#pool-figures [data-field="limit"]').dataset.micros"#)
            .await,
        json!("5000000")
    );
    assert_eq!(
        olive
            .eval(
                r#"document.querySelector('#pool-figures [data-field="available"]').dataset.micros"#
            )
            .await,
        json!(budget["pool"]["balances"]["available"].to_string())
    );
    drop(olive);

    // A specialist holds no budget.read: the API refuses it the budget, the board shows none.
    let refused = app
        .call(Method::GET, "/v1/rooms/local/budget", Some("sam"), "")
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let mut sam = board_as(&app, binary, "sam").await;
    assert_eq!(
        sam.eval(r#"document.getElementById("pool").hidden"#).await,
        json!(true)
    );
}
