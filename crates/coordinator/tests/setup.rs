//! The service's setup use cases (issue 14): a Room opened with its members and first tokens;
//! a failing randomness source gives an error, never a zero or guessable id, and nothing is
//! stored; a message of a non-member is refused and nothing is stored.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod support;

use std::sync::Arc;

use agentroom_coordinator::{Coordinator, CoordinatorConfig, CoordinatorError, NewMember};
use agentroom_ports::domain::ids::PrincipalId;
use agentroom_ports::domain::room::Role;
use agentroom_ports::memory::MemoryStore;
use agentroom_ports::{NewToken, NoRandomness, Random, RoomStore, TokenStore};
use support::*;

/// A randomness source that always fails.
struct Broken;

impl Random for Broken {
    fn fill(&self, _: &mut [u8]) -> Result<(), NoRandomness> {
        Err(NoRandomness::new("the generator is broken"))
    }
}

fn principal(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

fn service(store: &Arc<MemoryStore>, random: Option<Arc<dyn Random>>) -> Coordinator {
    let builder = Coordinator::builder(store.clone(), CoordinatorConfig::for_command("setup"));
    match random {
        Some(random) => builder.random(random).build(),
        None => builder.build(),
    }
}

#[tokio::test]
async fn a_room_opens_with_its_members_and_tokens_for_the_owner_and_first_operator() {
    let store = Arc::new(MemoryStore::new());
    let (state, _) = room_of(&scenario("demo.toml"));
    let owner = principal("olive");
    let members = [
        NewMember {
            principal: principal("oscar"),
            roles: vec![Role::Operator],
        },
        NewMember {
            principal: principal("rita"),
            roles: vec![Role::Reviewer],
        },
    ];
    let tokens = service(&store, None)
        .open_room(&state, &owner, &members)
        .await
        .unwrap();
    let issued: Vec<_> = tokens
        .iter()
        .map(|t| (t.label, t.principal.as_str()))
        .collect();
    assert_eq!(issued, [("owner", "olive"), ("operator", "oscar")]);
    let stored = store.load(state.room()).await.unwrap().unwrap();
    assert!(
        stored
            .state
            .members()
            .has(&principal("rita"), Role::Reviewer)
    );
    let authenticated = store
        .authenticate(tokens[0].issued.text(), stored_now())
        .await
        .unwrap();
    assert_eq!(authenticated.principal, owner);
    // Opening it again is refused and changes nothing.
    let again = service(&store, None)
        .open_room(&state, &owner, &members)
        .await
        .unwrap_err();
    assert!(matches!(again, CoordinatorError::RoomExists(_)), "{again}");
    assert_eq!(store.list_tokens(state.room()).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_failing_randomness_source_gives_an_error_never_a_zero_id_and_stores_nothing() {
    let store = Arc::new(MemoryStore::new());
    let (state, _) = room_of(&scenario("demo.toml"));
    let owner = principal("olive");
    service(&store, None)
        .open_room(&state, &owner, &[])
        .await
        .unwrap();
    let broken = service(&store, Some(Arc::new(Broken)));

    let error = broken
        .record_message(state.room(), &owner, "hello".to_owned())
        .await
        .unwrap_err();
    assert!(
        matches!(error, CoordinatorError::NoRandomness(_)),
        "{error}"
    );
    assert!(
        store
            .unaccepted_events(state.room(), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let error = broken
        .issue_token(NewToken {
            room: state.room().clone(),
            principal: owner.clone(),
            created_at: stored_now(),
            expires_at: None,
            label: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(error, CoordinatorError::NoRandomness(_)),
        "{error}"
    );
    assert_eq!(store.list_tokens(state.room()).await.unwrap().len(), 1);

    assert!(matches!(
        broken.fresh_input_id(),
        Err(CoordinatorError::NoRandomness(_))
    ));
}

#[tokio::test]
async fn a_message_of_a_non_member_is_refused_and_nothing_is_stored() {
    let store = Arc::new(MemoryStore::new());
    let (state, _) = room_of(&scenario("demo.toml"));
    let service = service(&store, None);
    service
        .open_room(&state, &principal("olive"), &[])
        .await
        .unwrap();
    let error = service
        .record_message(state.room(), &principal("mallory"), "let me in".to_owned())
        .await
        .unwrap_err();
    assert!(
        matches!(error, CoordinatorError::NotMember { .. }),
        "{error}"
    );
    assert!(
        store
            .unaccepted_events(state.room(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let id = service
        .record_message(state.room(), &principal("olive"), "hello".to_owned())
        .await
        .unwrap();
    let pending = store.unaccepted_events(state.room(), 10).await.unwrap();
    assert_eq!(pending.iter().map(|e| e.id).collect::<Vec<_>>(), [id]);
}

fn stored_now() -> agentroom_ports::domain::ids::Timestamp {
    use agentroom_ports::Clock;
    agentroom_ports::SystemClock.now()
}

/// T6: revoking a member revokes its tokens in the Room. When that fails after the decision
/// committed, the answer says so (the member is revoked, its tokens not); a retry of the same
/// input revokes them; and adding the principal again never revives an old token, while its
/// new one works (a retry of the old revocation leaves the new token alone).
#[tokio::test]
async fn t6_revoking_a_member_revokes_its_tokens_and_a_retry_finishes_a_failed_revocation() {
    use agentroom_coordinator::{InputId, Outcome, TokenTerms};
    use agentroom_ports::AuthError;
    use support::calls::Interposed;

    let store = Interposed::new();
    let (state, _) = room_of(&scenario("demo.toml"));
    let room = state.room().clone();
    let owner = principal("olive");
    let oscar = principal("oscar");
    let service =
        Coordinator::builder(store.clone(), CoordinatorConfig::for_command("setup")).build();
    let tokens = service
        .open_room(
            &state,
            &owner,
            &[NewMember {
                principal: oscar.clone(),
                roles: vec![Role::Operator],
            }],
        )
        .await
        .unwrap();
    let old = tokens[1].issued.text().to_owned();
    store.authenticate(&old, stored_now()).await.unwrap();

    // The decision commits; revoking the tokens fails: the error names both.
    store.fail_token_revocations(1);
    let revoke = InputId::named("revoke oscar");
    let failed = service
        .revoke_member(&room, revoke, owner.clone(), oscar.clone())
        .await
        .unwrap_err();
    let CoordinatorError::TokensNotRevoked {
        principal: named,
        revision,
        ..
    } = &failed
    else {
        panic!("{failed}");
    };
    assert_eq!(named, &oscar);
    assert!(
        failed
            .to_string()
            .contains("retry with the same Idempotency-Key"),
        "{failed}"
    );
    let stored = store.load(&room).await.unwrap().unwrap();
    assert!(!stored.state.members().is_member(&oscar));
    store.authenticate(&old, stored_now()).await.unwrap();

    // The retry finds the decision and revokes the tokens.
    let retried = service
        .revoke_member(&room, revoke, owner.clone(), oscar.clone())
        .await
        .unwrap();
    assert!(
        matches!(&retried, Outcome::AlreadyDecided { revision: r, .. } if r == revision),
        "{retried:?}"
    );
    assert!(matches!(
        store.authenticate(&old, stored_now()).await,
        Err(AuthError::Revoked(_))
    ));

    // Added again (a moment later): the old token stays revoked, the new one works, and a
    // retry of the old revocation leaves the new one alone.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let added = service
        .add_member(
            &room,
            InputId::named("add oscar again"),
            owner.clone(),
            oscar.clone(),
            vec![Role::Operator],
            Some(TokenTerms::default()),
        )
        .await
        .unwrap();
    let new = added.token.expect("a new token").text().to_owned();
    service
        .revoke_member(&room, revoke, owner.clone(), oscar.clone())
        .await
        .unwrap();
    assert!(matches!(
        store.authenticate(&old, stored_now()).await,
        Err(AuthError::Revoked(_))
    ));
    assert_eq!(
        store
            .authenticate(&new, stored_now())
            .await
            .unwrap()
            .principal,
        oscar
    );

    // Revoked again under a new input: the new token ends too.
    service
        .revoke_member(&room, InputId::named("revoke oscar again"), owner, oscar)
        .await
        .unwrap();
    assert!(matches!(
        store.authenticate(&new, stored_now()).await,
        Err(AuthError::Revoked(_))
    ));
}
