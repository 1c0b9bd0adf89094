//! The tools in a process that decides what they post (`Posting::Decide`, as `serve` will run
//! them), on the in-memory store: the owner's message is accepted (O9) as REST's `POST
//! …/events` accepts it; a reviewer's is refused by O9 with REST's code, rule and words, the
//! refusal committed like any decision; a revoked token is refused at its next call (T3).
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
use agentroom_domain::rules::Rule;
use agentroom_domain::state::{Quotes, RoomSetup, RoomState};
use agentroom_mcp::{Checked, PostOwnerMessage, Posting, RoomTools, Token, ToolError};
use agentroom_ports::NewToken;
use agentroom_ports::memory::MemoryStore;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::Extensions;
use serde_json::json;

fn p(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

/// Room `lab` on a fresh in-memory store: olive owns it, rita reviews; the coordinator and
/// the owner's and rita's tokens.
async fn room() -> (Coordinator, String, String) {
    let store = Arc::new(MemoryStore::new());
    let coordinator =
        Coordinator::builder(store, CoordinatorConfig::for_command("mcp-test")).build();
    let room = RoomId::parse("lab").unwrap();
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
    let tokens = coordinator
        .open_room(
            &state,
            &p("olive"),
            &[NewMember {
                principal: p("rita"),
                roles: vec![Role::Reviewer],
            }],
        )
        .await
        .unwrap();
    let rita = coordinator
        .issue_token(NewToken {
            room,
            principal: p("rita"),
            created_at: coordinator.now(),
            expires_at: None,
            label: None,
        })
        .await
        .unwrap();
    (
        coordinator,
        tokens[0].issued.text().to_owned(),
        rita.text().to_owned(),
    )
}

fn message(text: &str) -> Parameters<Checked<PostOwnerMessage>> {
    Parameters(serde_json::from_value(json!({ "text": text })).unwrap())
}

#[tokio::test]
async fn o9_the_owners_message_is_decided_and_a_reviewers_is_refused_by_its_rule() {
    let (coordinator, owner, rita) = room().await;
    let lab = RoomId::parse("lab").unwrap();

    let tools = RoomTools::open(
        coordinator.clone(),
        Posting::Decide,
        Token::new(&owner),
        &lab,
    )
    .await
    .unwrap();
    let posted = tools
        .post_owner_message(
            Extensions::default(),
            message("Summarize durable runtimes."),
        )
        .await
        .unwrap()
        .0;
    assert!(posted.decided, "{posted:?}");
    assert_eq!(posted.log[0].verdict, "accepted", "{posted:?}");

    let tools = RoomTools::open(
        coordinator.clone(),
        Posting::Decide,
        Token::new(&rita),
        &lab,
    )
    .await
    .unwrap();
    let Err(refused) = tools
        .post_owner_message(Extensions::default(), message("Start an objective for me."))
        .await
    else {
        panic!("a reviewer's owner message was not refused")
    };
    assert_eq!(refused.code(), "rule_refused", "{refused}");
    assert_eq!(refused.rule(), Some(Rule::O9), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("only the owner's messages can create objectives"),
        "{refused}"
    );
    let ToolError::RuleRefused { revision, .. } = refused else {
        panic!("not a rule refusal")
    };
    assert!(revision.is_some(), "the refusal is a committed decision");
}

#[tokio::test]
async fn t3_a_token_revoked_mid_session_is_refused_at_its_next_call() {
    let (coordinator, _, rita) = room().await;
    let lab = RoomId::parse("lab").unwrap();
    let tools = RoomTools::open(
        coordinator.clone(),
        Posting::Decide,
        Token::new(&rita),
        &lab,
    )
    .await
    .unwrap();
    let none = || Parameters(serde_json::from_value(json!({})).unwrap());
    tools
        .list_objectives(Extensions::default(), none())
        .await
        .unwrap();
    let listed = coordinator.tokens(&lab).await.unwrap();
    let token = listed.iter().find(|t| t.principal == p("rita")).unwrap();
    coordinator.revoke_token(&token.id).await.unwrap();
    let Err(refused) = tools.list_objectives(Extensions::default(), none()).await else {
        panic!("a revoked token still lists objectives")
    };
    assert_eq!(refused.code(), "unauthenticated", "{refused}");
    // Another Room's name is not found, whether it exists or not.
    let other = RoomId::parse("elsewhere").unwrap();
    let (coordinator, owner, _) = room().await;
    let refused = RoomTools::open(coordinator, Posting::Decide, Token::new(&owner), &other)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "not_found", "{refused}");
}
