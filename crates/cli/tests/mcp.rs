//! `agentroom mcp --stdio` (issue 20), the real binary spawned as an agent host spawns it and
//! driven by rmcp's own client, on a Room made by `agentroom room create` (embedded SQLite):
//! the handshake, the tools and their input schemas, a post as the owner (stored for the host
//! to decide, its author the token's principal, T1), a permission a reviewer lacks (named as
//! REST names it, T3), inputs refused whole (an unknown field, an over-long text) with nothing
//! stored, and tokens refused before a line is served.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::{Command, Stdio};

use agentroom_domain::event::EventBody;
use agentroom_domain::ids::RoomId;
use agentroom_ports::RoomStore;
use agentroom_store_sqlite::{Durability, SqliteRooms};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

const ROOM: &str = "lab";

/// `agentroom ARGS` with none of the environment a developer may have set.
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
    command
        .args(args)
        .env_remove("AGENTROOM_HOST")
        .env_remove("AGENTROOM_ROOM")
        .env_remove("AGENTROOM_TOKEN")
        .env_remove("AGENTROOM_DATABASE_URL")
        .env_remove("AGENTROOM_LOG");
    command
}

/// Creates Room `lab` under `root` (olive owns it, oscar operates, rita reviews, sam is a
/// specialist); the owner's token and a reviewer token for rita.
fn create_room(root: &Path) -> (String, String) {
    let root = root.to_str().unwrap();
    let created = command(&[
        "room",
        "create",
        "--root",
        root,
        "--room",
        ROOM,
        "--owner",
        "olive",
        "--member",
        "oscar=operator",
        "--member",
        "rita=reviewer",
        "--member",
        "sam=specialist",
        "--limit-micros",
        "1000000",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8(created.stdout).unwrap();
    assert!(
        created.status.success(),
        "room create: {stdout} {:?}",
        created.stderr
    );
    let owner = stdout
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token in {stdout}"))
        .trim()
        .to_owned();
    let issued = command(&[
        "token",
        "issue",
        "--room",
        ROOM,
        "--principal",
        "rita",
        "--json",
        "--root",
        root,
    ])
    .output()
    .unwrap();
    assert!(issued.status.success(), "token issue: {issued:?}");
    let issued: Value = serde_json::from_slice(&issued.stdout).unwrap();
    (owner, issued["token"].as_str().unwrap().to_owned())
}

/// How the session gets its token: never an argument.
enum TokenFrom<'a> {
    Env(&'a str),
    File(&'a Path),
}

/// An MCP client session with `agentroom mcp --stdio` on `root`.
async fn session(root: &Path, token: TokenFrom<'_>) -> RunningService<RoleClient, ()> {
    let mut child = tokio::process::Command::from(command(&[
        "mcp",
        "--stdio",
        "--room",
        ROOM,
        "--root",
        root.to_str().unwrap(),
    ]));
    match token {
        TokenFrom::Env(token) => child.env("AGENTROOM_TOKEN", token),
        TokenFrom::File(path) => child.arg("--token-file").arg(path),
    };
    let transport = TokioChildProcess::builder(child)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
        .0;
    ().serve(transport).await.unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured content of a result, which must (not) be an error.
fn content(result: &CallToolResult, error: bool) -> Value {
    assert_eq!(result.is_error, Some(error), "{result:?}");
    result.structured_content.clone().unwrap()
}

/// The events stored in `lab` that no host accepted yet (this process decides nothing).
async fn stored_events(root: &Path) -> Vec<(String, String)> {
    let store = SqliteRooms::open(&root.join("planning.db"), Durability::ProcessCrash).unwrap();
    let room = RoomId::parse(ROOM).unwrap();
    store
        .unaccepted_events(&room, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|event| match event.body {
            EventBody::OwnerMessage { text } => (event.author.to_string(), text),
            other => panic!("unexpected event {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_t3_mcp_stdio_serves_the_rooms_tools_to_the_tokens_principal() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    let (owner, reviewer) = create_room(root);

    let client = session(root, TokenFrom::Env(&owner)).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "agentroom");

    // Every tool (crates/mcp/tests/matrix.rs lists them all), each with an object input
    // schema that refuses unknown fields.
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for tool in [
        "list_my_assignments",
        "list_objectives",
        "post_owner_message",
        "room_overview",
        "budget_show",
        "planning_plan_board",
    ] {
        assert!(names.contains(&tool), "{tool} is not listed: {names:?}");
    }
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        assert_eq!(
            schema["additionalProperties"], false,
            "{}: {schema}",
            tool.name
        );
        assert!(
            tool.output_schema.is_some(),
            "{} has no output schema",
            tool.name
        );
    }
    let post = tools
        .iter()
        .find(|t| t.name == "post_owner_message")
        .unwrap();
    let schema = Value::Object((*post.input_schema).clone());
    assert_eq!(schema["required"], json!(["text"]), "{schema}");
    assert_eq!(schema["properties"]["text"]["maxLength"], 16000, "{schema}");

    // The owner's view of the Room.
    let overview = content(&call(&client, "room_overview", json!({})).await, false);
    assert_eq!(overview["room"], ROOM);
    assert_eq!(
        overview["you"],
        json!({"principal": "olive", "roles": ["owner"]})
    );
    assert_eq!(overview["budget"]["limit_micros"], 1_000_000);
    assert_eq!(overview["objectives"], json!([]));
    let objectives = content(&call(&client, "list_objectives", json!({})).await, false);
    assert_eq!(objectives, json!({"objectives": []}));

    // The owner posts: stored, authored by the token's principal (T1), for the host to decide.
    let text = "Summarize how durable agent runtimes recover from crashes, with sources.";
    let posted = content(
        &call(
            &client,
            "post_owner_message",
            json!({"text": text, "idempotency_key": "first"}),
        )
        .await,
        false,
    );
    assert_eq!(posted["recorded"], true, "{posted}");
    assert_eq!(posted["decided"], false, "{posted}");
    assert_eq!(
        stored_events(root).await,
        [("olive".to_owned(), text.to_owned())]
    );
    // The same key posts it once.
    let again = content(
        &call(
            &client,
            "post_owner_message",
            json!({"text": text, "idempotency_key": "first"}),
        )
        .await,
        false,
    );
    assert_eq!(again["event"], posted["event"]);
    assert_eq!(stored_events(root).await.len(), 1);

    // An unknown field is refused whole, naming it, with REST's code for a body that does
    // not fit; nothing is stored.
    let refused = content(
        &call(
            &client,
            "post_owner_message",
            json!({"text": "x", "author": "sam"}),
        )
        .await,
        true,
    );
    assert_eq!(refused["error"], "invalid_body", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `author`"),
        "{refused}"
    );
    let extra = content(
        &call(&client, "list_objectives", json!({"limit": 5})).await,
        true,
    );
    assert!(
        extra["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `limit`"),
        "{extra}"
    );
    // So is an over-long text, with REST's code for a body that does not fit.
    let long = content(
        &call(
            &client,
            "post_owner_message",
            json!({"text": "x".repeat(16_001)}),
        )
        .await,
        true,
    );
    assert_eq!(long["error"], "invalid_body", "{long}");
    assert!(
        long["message"].as_str().unwrap().contains("16000"),
        "{long}"
    );
    // And a blank one, by the domain's check (REST's 422).
    let blank = content(
        &call(&client, "post_owner_message", json!({"text": "   "})).await,
        true,
    );
    assert_eq!(blank["error"], "invalid_body", "{blank}");
    assert_eq!(stored_events(root).await.len(), 1);
    client.cancel().await.unwrap();

    // A reviewer lacks `task.update_own`: refused as REST refuses it (403 `forbidden`, the
    // permission named).
    let file = root.join("rita.token");
    std::fs::write(&file, format!("{reviewer}\n")).unwrap();
    let client = session(root, TokenFrom::File(&file)).await;
    let forbidden = content(&call(&client, "list_my_assignments", json!({})).await, true);
    assert_eq!(forbidden["error"], "forbidden", "{forbidden}");
    assert_eq!(forbidden["permission"], "task.update_own", "{forbidden}");
    assert!(
        forbidden["message"]
            .as_str()
            .unwrap()
            .contains("this needs the permission `task.update_own`"),
        "{forbidden}"
    );
    let overview = content(&call(&client, "room_overview", json!({})).await, false);
    assert_eq!(
        overview["you"],
        json!({"principal": "rita", "roles": ["reviewer"]})
    );
    assert_eq!(
        overview["budget"],
        Value::Null,
        "no budget.read: {overview}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn t3_mcp_stdio_refuses_a_bad_token_before_serving_and_takes_none_as_an_argument() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    create_room(root);
    let root = root.to_str().unwrap();
    let args = ["mcp", "--stdio", "--room", ROOM, "--root", root];

    let unknown = command(&args)
        .env("AGENTROOM_TOKEN", "ar_not-a-token")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(unknown.stdout.is_empty(), "nothing on stdout: {unknown:?}");
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("the token was refused for room lab"),
        "{stderr}"
    );

    let none = command(&args).stdin(Stdio::null()).output().unwrap();
    assert!(!none.status.success());
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(stderr.contains("AGENTROOM_TOKEN"), "{stderr}");

    let mut with_argument = args.to_vec();
    with_argument.extend(["--token", "ar_x"]);
    let refused = command(&with_argument)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");

    // The bridge opens no store: naming one with it is a usage error, not silently ignored.
    let mut both = args.to_vec();
    both.extend(["--host", "http://127.0.0.1:9"]);
    let refused = command(&both)
        .env("AGENTROOM_TOKEN", "ar_x")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cannot be used with") && stderr.contains("'--host <URL>'"),
        "{stderr}"
    );
}
