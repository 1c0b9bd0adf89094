//! The operators' tools and the planning tools in a process that decides (`Posting::Decide`,
//! as `serve` runs them), on the in-memory store: each answers what REST's route of the same
//! name answers, refuses a caller without its permission (T3) and a bad input with a clear
//! error that changed nothing, and an input posted twice under one key is decided once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, NewMember};
use agentroom_domain::ids::{PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_mcp::{Checked, Posting, RoomTools, Token, ToolError};
use agentroom_planning::conformance::MemoryRepository;
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_ports::NewToken;
use agentroom_ports::memory::MemoryStore;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn p(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

fn lab() -> RoomId {
    RoomId::parse("lab").unwrap()
}

/// A tool's input from JSON, as a client sends it.
fn input<T: DeserializeOwned>(value: Value) -> Parameters<Checked<T>> {
    Parameters(serde_json::from_value(value).unwrap())
}

/// Room `lab` (olive owns it, oscar operates, sam is a specialist; a limit of 1,000,000
/// micros) on a fresh in-memory store, and a token for each.
struct Lab {
    coordinator: Coordinator,
    olive: String,
    oscar: String,
    sam: String,
}

async fn room() -> Lab {
    let store = Arc::new(MemoryStore::new());
    let coordinator =
        Coordinator::builder(store, CoordinatorConfig::for_command("mcp-test")).build();
    let quote = UsdMicros::new(1_000);
    let state = RoomState::new(RoomSetup {
        room: lab(),
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
    let tokens = coordinator
        .open_room(
            &state,
            &p("olive"),
            &[
                NewMember {
                    principal: p("oscar"),
                    roles: vec![Role::Operator],
                },
                NewMember {
                    principal: p("sam"),
                    roles: vec![Role::Specialist],
                },
            ],
        )
        .await
        .unwrap();
    let mut issued = Vec::new();
    for name in ["oscar", "sam"] {
        let token = coordinator
            .issue_token(NewToken {
                room: lab(),
                principal: p(name),
                created_at: coordinator.now(),
                expires_at: None,
                label: None,
            })
            .await
            .unwrap();
        issued.push(token.text().to_owned());
    }
    Lab {
        coordinator,
        olive: tokens[0].issued.text().to_owned(),
        oscar: issued[0].clone(),
        sam: issued[1].clone(),
    }
}

async fn tools(lab_room: &Lab, token: &str, posting: Posting) -> RoomTools {
    let planning = Arc::new(
        PlanningService::new(
            Arc::new(MemoryRepository::default()),
            Arc::new(SystemAmbient),
        )
        .with_coordinator_plans(Arc::new(lab_room.coordinator.clone())),
    );
    RoomTools::open(
        lab_room.coordinator.clone(),
        posting,
        Token::new(token),
        &lab(),
    )
    .await
    .unwrap()
    .with_planning(planning)
}

fn ctx() -> Extensions {
    Extensions::default()
}

async fn revision(coordinator: &Coordinator) -> i64 {
    coordinator.room(&lab()).await.unwrap().revision.0
}

async fn limit(coordinator: &Coordinator) -> i64 {
    let stored = coordinator.room(&lab()).await.unwrap();
    stored.state.ledger().balances().limit.micros()
}

#[tokio::test]
async fn b4_an_operator_raises_the_limit_once_per_key_and_a_bad_amount_changes_nothing() {
    let lab_room = room().await;
    let oscar = tools(&lab_room, &lab_room.oscar, Posting::Decide).await;

    let shown = oscar.budget_show(ctx(), input(json!({}))).await.unwrap().0;
    assert_eq!(shown.balances.limit_micros, 1_000_000);
    assert_eq!(shown.balances.available_micros, 1_000_000);
    assert!(shown.overrun.is_none() && shown.pool.is_none());

    let raise = json!({"amount_micros": 500_000, "idempotency_key": "raise-1"});
    let first = oscar
        .budget_raise(ctx(), input(raise.clone()))
        .await
        .unwrap()
        .0;
    assert!(
        first.decided && first.log[0].verdict == "accepted",
        "{first:?}"
    );
    assert_eq!(limit(&lab_room.coordinator).await, 1_500_000);
    // The same key again: the original decision, nothing raised twice.
    let again = oscar.budget_raise(ctx(), input(raise)).await.unwrap().0;
    assert!(!again.decided, "{again:?}");
    assert_eq!(again.revision, first.revision);
    assert_eq!(limit(&lab_room.coordinator).await, 1_500_000);

    let before = revision(&lab_room.coordinator).await;
    for bad in [
        json!({"amount_micros": 0}),
        json!({"amount_micros": -5}),
        json!({"amount_micros": "lots"}),
        json!({"amount_micros": 5, "by": "me"}),
        json!({"amount_micros": 5, "idempotency_key": ""}),
    ] {
        let refused = oscar
            .budget_raise(ctx(), input(bad.clone()))
            .await
            .err()
            .expect("the tool refused");
        assert_eq!(refused.code(), "invalid_body", "{bad}: {refused}");
    }
    assert_eq!(revision(&lab_room.coordinator).await, before);
    assert_eq!(limit(&lab_room.coordinator).await, 1_500_000);

    // B5: no overrun to acknowledge is the domain's refusal, with its rule.
    let refused = oscar
        .budget_acknowledge(ctx(), input(json!({})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "rule_refused", "{refused}");
    assert!(refused.rule().is_some(), "{refused}");
}

#[tokio::test]
async fn t3_operator_tools_refuse_a_role_without_their_permission_and_change_nothing() {
    let lab_room = room().await;
    let sam = tools(&lab_room, &lab_room.sam, Posting::Decide).await;
    let olive = tools(&lab_room, &lab_room.olive, Posting::Decide).await;
    let before = revision(&lab_room.coordinator).await;

    let refused = sam
        .budget_show(ctx(), input(json!({})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(
        refused.permission().map(|p| p.as_str()),
        Some("budget.read")
    );
    let refused = sam
        .budget_raise(ctx(), input(json!({"amount_micros": 1})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(
        refused.permission().map(|p| p.as_str()),
        Some("budget.raise")
    );
    // The owner reads the budget but does not raise it (the default policy).
    olive.budget_show(ctx(), input(json!({}))).await.unwrap();
    let refused = olive
        .budget_raise(ctx(), input(json!({"amount_micros": 1})))
        .await
        .err()
        .expect("the tool refused");
    assert!(matches!(refused, ToolError::Forbidden(_)), "{refused}");
    let refused = sam
        .list_uncertain_operations(ctx(), input(json!({})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(
        refused.permission().map(|p| p.as_str()),
        Some("operation.resolve")
    );
    let refused = sam
        .control_objective(ctx(), input(json!({"objective": "x", "action": "pause"})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(
        refused.permission().map(|p| p.as_str()),
        Some("objective.control")
    );
    assert_eq!(revision(&lab_room.coordinator).await, before);
    assert_eq!(limit(&lab_room.coordinator).await, 1_000_000);
}

#[tokio::test]
async fn d2_d3_d4_unknown_objectives_and_operations_are_not_found_and_bad_input_is_refused() {
    let lab_room = room().await;
    let oscar = tools(&lab_room, &lab_room.oscar, Posting::Decide).await;
    let before = revision(&lab_room.coordinator).await;

    let refused = oscar
        .control_objective(
            ctx(),
            input(json!({"objective": "nope", "action": "pause"})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "not_found", "{refused}");
    let refused = oscar
        .control_objective(
            ctx(),
            input(json!({"objective": "nope", "action": "explode"})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "invalid_body", "{refused}");

    let late = oscar
        .list_late_results(ctx(), input(json!({})))
        .await
        .unwrap()
        .0;
    assert!(late.late_results.is_empty());
    let op = "00000000-0000-4000-8000-000000000001";
    let refused = oscar
        .decide_late_result(
            ctx(),
            input(json!({"operation": op, "decision": "readmit"})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "not_found", "{refused}");

    let operations = oscar
        .list_uncertain_operations(ctx(), input(json!({})))
        .await
        .unwrap()
        .0;
    assert!(operations.operations.is_empty());
    let refused = oscar
        .resolve_operation(
            ctx(),
            input(json!({"operation": op, "outcome": "failed", "reason": "checked the vendor"})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "not_found", "{refused}");
    let refused = oscar
        .resolve_operation(
            ctx(),
            input(json!({"operation": op, "outcome": "failed", "reason": "   "})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "invalid_body", "{refused}");
    assert_eq!(revision(&lab_room.coordinator).await, before);
}

#[tokio::test]
async fn b4_where_the_process_only_records_an_operator_input_is_left_to_the_host() {
    let lab_room = room().await;
    let oscar = tools(&lab_room, &lab_room.oscar, Posting::Record).await;
    let before = revision(&lab_room.coordinator).await;
    let refused = oscar
        .budget_raise(ctx(), input(json!({"amount_micros": 10})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "wrong_state", "{refused}");
    assert!(refused.to_string().contains("/mcp"), "{refused}");
    assert_eq!(revision(&lab_room.coordinator).await, before);
    assert_eq!(limit(&lab_room.coordinator).await, 1_000_000);
    // Reads need no host.
    oscar.budget_show(ctx(), input(json!({}))).await.unwrap();
}

#[tokio::test]
async fn a2e_the_six_planning_messages_are_tools_answering_what_a2e_answers() {
    let lab_room = room().await;
    let olive = tools(&lab_room, &lab_room.olive, Posting::Decide).await;

    let created = olive
        .planning_plan_create(ctx(), input(json!({"name": "release"})))
        .await
        .unwrap()
        .0;
    assert_eq!(created.reply_type, "planning/plan/create/resp");
    assert_eq!(created.fields["success"], true);
    let plan = created.fields["plan_id"].as_str().unwrap().to_owned();

    let added = olive
        .planning_task_add(
            ctx(),
            input(json!({"plan_id": plan, "title": "write notes"})),
        )
        .await
        .unwrap()
        .0;
    let task = added.fields["task_id"].as_str().unwrap().to_owned();
    assert_eq!(added.fields["status"], "backlog");

    let moved = olive
        .planning_task_update(
            ctx(),
            input(json!({"plan_id": plan, "task_id": task, "status": "in_progress"})),
        )
        .await
        .unwrap()
        .0;
    assert_eq!(moved.fields["task_id"], task.as_str());

    let listed = olive
        .planning_task_list(ctx(), input(json!({"plan_id": plan})))
        .await
        .unwrap()
        .0;
    assert!(
        listed.fields["tasks"].to_string().contains("write notes"),
        "{listed:?}"
    );
    let plans = olive
        .planning_plan_list(ctx(), input(json!({})))
        .await
        .unwrap()
        .0;
    assert!(
        plans.fields["plans"].to_string().contains("release"),
        "{plans:?}"
    );
    let board = olive
        .planning_plan_board(ctx(), input(json!({"plan_id": plan})))
        .await
        .unwrap()
        .0;
    assert!(
        board.fields["boards"].to_string().contains("in_progress"),
        "{board:?}"
    );

    // A rule's refusal is a tool error with the A2E reply's code; nothing was added.
    let refused = olive
        .planning_task_add(ctx(), input(json!({"plan_id": plan, "title": "  "})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "invalid_title", "{refused}");
    let refused = olive
        .planning_task_add(ctx(), input(json!({"plan_id": "nope", "title": "x"})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "unknown_plan", "{refused}");
    // A field the message does not have, a NUL: refused before the service sees them.
    let refused = olive
        .planning_task_add(
            ctx(),
            input(json!({"plan_id": plan, "title": "x", "owner": "me"})),
        )
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "invalid_body", "{refused}");
    let refused = olive
        .planning_task_add(ctx(), input(json!({"plan_id": plan, "title": "a\u{0}b"})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "invalid_body", "{refused}");
    let listed = olive
        .planning_task_list(ctx(), input(json!({"plan_id": plan})))
        .await
        .unwrap()
        .0;
    assert_eq!(
        listed.fields["tasks"]
            .to_string()
            .matches("task_id")
            .count(),
        1,
        "{listed:?}"
    );
}

#[tokio::test]
async fn a2e_without_a_planning_service_the_planning_tools_say_where_to_connect() {
    let lab_room = room().await;
    let bare = RoomTools::open(
        lab_room.coordinator.clone(),
        Posting::Record,
        Token::new(&lab_room.olive),
        &lab(),
    )
    .await
    .unwrap();
    let refused = bare
        .planning_plan_list(ctx(), input(json!({})))
        .await
        .err()
        .expect("the tool refused");
    assert_eq!(refused.code(), "wrong_state", "{refused}");
    assert!(refused.to_string().contains("/mcp"), "{refused}");
}
