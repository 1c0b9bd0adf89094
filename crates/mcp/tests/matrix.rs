//! The role × tool matrix (T3), written out: for each tool, the permission it needs and
//! whether each role of the default access policy holds it. Every tool is called by every
//! role through rmcp's own client over an in-memory pipe, as an MCP host calls it: a role
//! without the permission is refused with `forbidden` naming it (and nothing changed: the
//! Room's revision is the same), a role with it is not refused for it. The matrix must list
//! exactly the tools the server lists, so a new tool cannot skip it. A token never reaches
//! another Room.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, NewMember};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_mcp::{Posting, RoomTools, Token};
use agentroom_planning::conformance::MemoryRepository;
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_ports::NewToken;
use agentroom_ports::memory::MemoryStore;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// Allowed.
const Y: bool = true;
/// Refused: the role lacks the permission.
const N: bool = false;

/// The roles, in the matrix's column order.
const ROLES: [(&str, Role); 5] = [
    ("olive", Role::Owner),
    ("oscar", Role::Operator),
    ("rita", Role::Reviewer),
    ("sam", Role::Specialist),
    ("hank", Role::AgentHost),
];

/// Tool, the permission it needs; owner, operator, reviewer, specialist, agent host.
const MATRIX: &[(&str, &str, [bool; 5])] = &[
    ("room_overview", "objective.read", [Y, Y, Y, Y, Y]),
    ("list_objectives", "objective.read", [Y, Y, Y, Y, Y]),
    ("post_owner_message", "event.post", [Y, Y, Y, Y, Y]),
    ("read_objective", "objective.read", [Y, Y, Y, Y, Y]),
    ("correct_objective", "event.post", [Y, Y, Y, Y, Y]),
    ("list_my_assignments", "task.update_own", [N, N, N, Y, Y]),
    ("submit_result", "task.update_own", [N, N, N, Y, Y]),
    ("post_wait", "task.update_own", [N, N, N, Y, Y]),
    ("post_receipt", "task.update_own", [N, N, N, Y, Y]),
    ("update_my_task", "task.update_own", [N, N, N, Y, Y]),
    ("read_report", "report.read", [Y, Y, Y, N, N]),
    ("record_review", "review.record", [N, N, Y, N, N]),
    ("budget_show", "budget.read", [Y, Y, N, N, N]),
    ("budget_raise", "budget.raise", [N, Y, N, N, N]),
    ("budget_acknowledge", "budget.acknowledge", [N, Y, N, N, N]),
    ("control_objective", "objective.control", [Y, Y, N, N, N]),
    ("list_late_results", "late_result.decide", [Y, Y, N, N, N]),
    ("decide_late_result", "late_result.decide", [Y, Y, N, N, N]),
    (
        "list_uncertain_operations",
        "operation.resolve",
        [N, Y, N, N, N],
    ),
    ("resolve_operation", "operation.resolve", [N, Y, N, N, N]),
    ("planning_plan_create", "planning.use", [Y, Y, Y, Y, Y]),
    ("planning_plan_list", "planning.use", [Y, Y, Y, Y, Y]),
    ("planning_task_add", "planning.use", [Y, Y, Y, Y, Y]),
    ("planning_task_update", "planning.use", [Y, Y, Y, Y, Y]),
    ("planning_task_list", "planning.use", [Y, Y, Y, Y, Y]),
    ("planning_plan_board", "planning.use", [Y, Y, Y, Y, Y]),
];

/// An id of nothing in the Room: allowed callers get past the permission and find nothing.
const NOTHING: &str = "00000000-0000-4000-8000-000000000001";

/// Arguments of the right shape for `tool`.
fn arguments(tool: &str) -> Value {
    match tool {
        "post_owner_message" => json!({"text": "What is on the board?"}),
        "read_objective" | "read_report" => json!({"objective": NOTHING}),
        "correct_objective" => json!({"objective": NOTHING, "text": "Narrower, please."}),
        "submit_result" => {
            json!({"operation": NOTHING, "result": {"outcome": "failure", "reason": "no"}})
        }
        "post_wait" => json!({"operation": NOTHING, "reason": "waiting on a vendor"}),
        "post_receipt" => json!({"operation": NOTHING, "note": "sent the mail"}),
        "update_my_task" => json!({"objective": NOTHING, "task": "T-1", "status": "in_progress"}),
        "record_review" => json!({
            "objective": NOTHING,
            "report_version": 1,
            "observed": {"objective": 1, "control": 0},
            "verdicts": [{"criterion": "c1", "verdict": "met", "evidence": "it holds"}],
        }),
        "budget_raise" => json!({"amount_micros": 1}),
        "control_objective" => json!({"objective": NOTHING, "action": "pause"}),
        "decide_late_result" => json!({"operation": NOTHING, "decision": "discard"}),
        "resolve_operation" => {
            json!({"operation": NOTHING, "outcome": "failed", "reason": "checked"})
        }
        "planning_task_add" => json!({"plan_id": "nope", "title": "x"}),
        "planning_task_update" => json!({"plan_id": "nope", "task_id": "t", "status": "done"}),
        _ => json!({}),
    }
}

fn p(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

/// A Room with one member per role on `store`, and a token for each, in [`ROLES`] order.
async fn room(coordinator: &Coordinator, name: &str) -> Vec<String> {
    let room = RoomId::parse(name).unwrap();
    let quote = UsdMicros::new(1_000);
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: p("olive"),
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: quote,
            specialist: quote,
            reviewer: quote,
        },
        limit: UsdMicros::new(1_000_000),
    })
    .unwrap();
    let members: Vec<NewMember> = ROLES[1..]
        .iter()
        .map(|(principal, role)| NewMember {
            principal: p(principal),
            roles: vec![*role],
        })
        .collect();
    let first = coordinator
        .open_room(&state, &p("olive"), &members)
        .await
        .unwrap();
    let mut tokens = vec![first[0].issued.text().to_owned()];
    for (principal, _) in &ROLES[1..] {
        let issued = coordinator
            .issue_token(NewToken {
                room: room.clone(),
                principal: p(principal),
                created_at: coordinator.now(),
                expires_at: None,
                label: None,
            })
            .await
            .unwrap();
        tokens.push(issued.text().to_owned());
    }
    tokens
}

/// An MCP client session with the tools of `room` for `token`, over an in-memory pipe.
async fn session(
    coordinator: &Coordinator,
    token: &str,
    room: &str,
) -> RunningService<RoleClient, ()> {
    let planning = Arc::new(
        PlanningService::new(
            Arc::new(MemoryRepository::default()),
            Arc::new(SystemAmbient),
        )
        .with_coordinator_plans(Arc::new(coordinator.clone())),
    );
    let tools = RoomTools::open(
        coordinator.clone(),
        Posting::Decide,
        Token::new(token),
        &RoomId::parse(room).unwrap(),
    )
    .await
    .unwrap()
    .with_planning(planning);
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_side);
    tokio::spawn(async move { tools.serve(read, write).await });
    ().serve(tokio::io::split(client_side)).await.unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str) -> CallToolResult {
    let Value::Object(args) = arguments(tool) else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_the_role_tool_matrix_holds_for_every_tool_the_server_lists() {
    let coordinator = Coordinator::builder(
        Arc::new(MemoryStore::new()),
        CoordinatorConfig::for_command("mcp-matrix"),
    )
    .build();
    let tokens = room(&coordinator, "lab").await;
    let lab = RoomId::parse("lab").unwrap();

    // The matrix lists exactly the tools the server lists.
    let listed: BTreeSet<String> = session(&coordinator, &tokens[0], "lab")
        .await
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    let written: BTreeSet<String> = MATRIX.iter().map(|(tool, ..)| (*tool).to_owned()).collect();
    assert_eq!(listed, written, "the matrix and the server's tools differ");

    for (column, (principal, role)) in ROLES.iter().enumerate() {
        let client = session(&coordinator, &tokens[column], "lab").await;
        for (tool, permission, allowed) in MATRIX {
            let before = coordinator.room(&lab).await.unwrap().revision;
            let result = call(&client, tool).await;
            let content = result.structured_content.clone().unwrap_or(Value::Null);
            let forbidden = result.is_error == Some(true) && content["error"] == "forbidden";
            if allowed[column] {
                assert!(
                    !forbidden,
                    "{principal} ({role:?}) was refused {tool}: {content}"
                );
            } else {
                assert!(
                    forbidden,
                    "{principal} ({role:?}) was not refused {tool}: {result:?}"
                );
                assert_eq!(content["permission"], *permission, "{tool}: {content}");
                assert_eq!(
                    coordinator.room(&lab).await.unwrap().revision,
                    before,
                    "{principal}'s refused {tool} changed the Room"
                );
            }
        }
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_rooms_token_never_opens_or_reaches_another_room() {
    let coordinator = Coordinator::builder(
        Arc::new(MemoryStore::new()),
        CoordinatorConfig::for_command("mcp-matrix"),
    )
    .build();
    let lab = room(&coordinator, "lab").await;
    let other = room(&coordinator, "other").await;
    for token in lab.iter().chain(&other) {
        for room in ["lab", "other"] {
            let opened = RoomTools::open(
                coordinator.clone(),
                Posting::Decide,
                Token::new(token),
                &RoomId::parse(room).unwrap(),
            )
            .await;
            let own = if lab.contains(token) { "lab" } else { "other" };
            match opened {
                Ok(tools) => assert_eq!(room, own, "{tools:?}"),
                Err(refused) => {
                    assert_ne!(room, own, "{refused}");
                    assert_eq!(refused.code(), "not_found", "{refused}");
                }
            }
        }
    }
    // A session's calls stay in its own Room: the owner of `lab` sees `lab` only.
    let client = session(&coordinator, &lab[0], "lab").await;
    let result = client
        .call_tool(CallToolRequestParams::new("room_overview").with_arguments(Default::default()))
        .await
        .unwrap();
    assert_eq!(result.structured_content.unwrap()["room"], "lab");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_a_report_resource_needs_report_read_and_a_bad_uri_is_not_found() {
    let coordinator = Coordinator::builder(
        Arc::new(MemoryStore::new()),
        CoordinatorConfig::for_command("mcp-matrix"),
    )
    .build();
    let tokens = room(&coordinator, "lab").await;
    let report = format!("agentroom://objectives/{NOTHING}/reports/1");
    let error = |result: Result<_, rmcp::ServiceError>| match result {
        Err(rmcp::ServiceError::McpError(error)) => error.data.unwrap()["error"].clone(),
        other => panic!("not refused: {other:?}"),
    };
    // sam, a specialist, holds no report.read; rita, a reviewer, does and finds nothing.
    let sam = session(&coordinator, &tokens[3], "lab").await;
    let read = |uri: &str| rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
    assert_eq!(error(sam.read_resource(read(&report)).await), "forbidden");
    let rita = session(&coordinator, &tokens[2], "lab").await;
    assert_eq!(error(rita.read_resource(read(&report)).await), "not_found");
    for bad in [
        "agentroom://objectives/x/board",
        &format!("agentroom://objectives/{NOTHING}/reports/0"),
        &format!("agentroom://objectives/{NOTHING}/secrets"),
        "file:///etc/passwd",
    ] {
        assert_eq!(
            error(rita.read_resource(read(bad)).await),
            "not_found",
            "{bad}"
        );
    }
    let templates = rita.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 2, "{templates:?}");
    // No objective yet: nothing to list.
    assert!(rita.list_all_resources().await.unwrap().is_empty());
}
