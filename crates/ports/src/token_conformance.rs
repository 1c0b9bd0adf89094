//! The token store conformance suite (feature `conformance`): every [`TokenStore`] runs these
//! cases on a fresh store each (`token_conformance!(factory)`), and so does
//! [`MemoryTokens`](crate::memory_tokens::MemoryTokens), which checks the suite itself.
//!
//! This is test code: a failed check panics, which is a failed test.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};

use crate::memory_tokens::MemoryTokens;
use crate::tokens::{
    AuthError, IssuedToken, NewToken, RANDOM_BYTES, TokenError, TokenId, TokenMaterial, TokenStore,
};

/// Generates one `#[tokio::test]` per case; `$factory` is an async fn returning a fresh,
/// migrated `Arc<S>` where `S` implements [`TokenStore`].
#[macro_export]
macro_rules! token_conformance {
    ($factory:path) => {
        $crate::token_conformance!(@cases $factory;
            tokens_issue_authenticate_expire_revoke,
            t3_a_token_of_one_room_never_authenticates_for_another,
            tokens_are_malformed_unknown_or_mismatched,
            tokens_are_listed_per_room_without_secrets,
            tokens_revoking_an_unknown_id_is_an_error,
            tokens_ids_are_unique,
            t6_revoking_a_principal_revokes_its_tokens_in_that_room_issued_until_then,
        );
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store = $factory().await;
                $crate::token_conformance::$case(store).await;
            }
        )*
    };
}

const AT: Timestamp = Timestamp::from_millis(1_764_460_800_000);
const HOUR: i64 = 3_600_000;

fn at(hours: i64) -> Timestamp {
    Timestamp::from_millis(AT.as_millis() + hours * HOUR)
}

fn room(name: &str) -> RoomId {
    RoomId::parse(name).unwrap()
}

fn principal(name: &str) -> PrincipalId {
    PrincipalId::parse(name).unwrap()
}

/// Distinct, deterministic material for the `n`-th token of a case.
pub fn material(n: u8) -> TokenMaterial {
    let mut bytes = [0u8; RANDOM_BYTES];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = n
            .wrapping_mul(31)
            .wrapping_add(u8::try_from(i % 251).unwrap());
    }
    TokenMaterial::from_random(bytes)
}

async fn issue<S: TokenStore + ?Sized>(
    store: &S,
    n: u8,
    room_name: &str,
    who: &str,
    expires_at: Option<Timestamp>,
) -> IssuedToken {
    store
        .issue_token(
            NewToken {
                room: room(room_name),
                principal: principal(who),
                created_at: at(0),
                expires_at,
                label: Some(format!("token {n}")),
            },
            material(n),
        )
        .await
        .unwrap()
}

/// Issue → authenticate → expire → revoke.
pub async fn tokens_issue_authenticate_expire_revoke<S: TokenStore>(store: Arc<S>) {
    let token = issue(&*store, 1, "alpha", "olive", Some(at(24))).await;
    assert!(token.text().starts_with("ar_"));
    let who = store.authenticate(token.text(), at(1)).await.unwrap();
    assert_eq!(who.room, room("alpha"));
    assert_eq!(who.principal, principal("olive"));
    assert_eq!(who.token_id, token.record.id);
    // Valid until just before its expiry, expired from it on.
    store
        .authenticate(token.text(), Timestamp::from_millis(at(24).as_millis() - 1))
        .await
        .unwrap();
    assert!(matches!(
        store.authenticate(token.text(), at(24)).await,
        Err(AuthError::Expired(id)) if id == token.record.id
    ));

    let forever = issue(&*store, 2, "alpha", "oscar", None).await;
    store
        .authenticate(forever.text(), at(10_000))
        .await
        .unwrap();
    let revoked = store.revoke_token(&forever.record.id, at(2)).await.unwrap();
    assert_eq!(revoked.revoked_at, Some(at(2)));
    assert!(matches!(
        store.authenticate(forever.text(), at(3)).await,
        Err(AuthError::Revoked(id)) if id == forever.record.id
    ));
    // Revoking again keeps the first time.
    let again = store.revoke_token(&forever.record.id, at(5)).await.unwrap();
    assert_eq!(again.revoked_at, Some(at(2)));
    // The other token is untouched.
    store.authenticate(token.text(), at(3)).await.unwrap();
}

/// A token names its Room; a secret of one Room's token never opens another's id.
pub async fn t3_a_token_of_one_room_never_authenticates_for_another<S: TokenStore>(store: Arc<S>) {
    let a = issue(&*store, 1, "room-a", "olive", None).await;
    let b = issue(&*store, 2, "room-b", "olive", None).await;
    assert_eq!(
        store.authenticate(a.text(), at(1)).await.unwrap().room,
        room("room-a")
    );
    assert_eq!(
        store.authenticate(b.text(), at(1)).await.unwrap().room,
        room("room-b")
    );
    // A's id with B's secret: unknown.
    let (a_id, _) = a.text().trim_start_matches("ar_").split_once('_').unwrap();
    let (_, b_secret) = b.text().trim_start_matches("ar_").split_once('_').unwrap();
    let spliced = format!("ar_{a_id}_{b_secret}");
    assert!(matches!(
        store.authenticate(&spliced, at(1)).await,
        Err(AuthError::Unknown)
    ));
}

/// Malformed text, an unknown id and a wrong secret are told apart from valid tokens.
pub async fn tokens_are_malformed_unknown_or_mismatched<S: TokenStore>(store: Arc<S>) {
    let token = issue(&*store, 1, "alpha", "olive", None).await;
    for bad in ["", "Bearer x", "ar_nothex_nothex", &token.text()[1..]] {
        assert!(
            matches!(
                store.authenticate(bad, at(1)).await,
                Err(AuthError::Malformed)
            ),
            "{bad}"
        );
    }
    let unknown = format!(
        "ar_{}_{}",
        TokenId::parse("0123456789abcdef").unwrap(),
        "0".repeat(64)
    );
    assert!(matches!(
        store.authenticate(&unknown, at(1)).await,
        Err(AuthError::Unknown)
    ));
    let mut wrong = token.text().to_owned();
    let last = if wrong.ends_with('0') { '1' } else { '0' };
    wrong.pop();
    wrong.push(last);
    assert!(matches!(
        store.authenticate(&wrong, at(1)).await,
        Err(AuthError::Unknown)
    ));
}

/// A Room's tokens are listed oldest first, with their labels and without secrets; another
/// Room's are not.
pub async fn tokens_are_listed_per_room_without_secrets<S: TokenStore>(store: Arc<S>) {
    let first = issue(&*store, 1, "alpha", "olive", Some(at(48))).await;
    let second = issue(&*store, 2, "alpha", "oscar", None).await;
    issue(&*store, 3, "beta", "olive", None).await;
    store.revoke_token(&second.record.id, at(1)).await.unwrap();
    let listed = store.list_tokens(&room("alpha")).await.unwrap();
    let ids: Vec<_> = listed.iter().map(|r| r.id.clone()).collect();
    let mut expected = vec![first.record.id.clone(), second.record.id.clone()];
    expected.sort();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, expected);
    let first_row = listed.iter().find(|r| r.id == first.record.id).unwrap();
    assert_eq!(first_row, &first.record);
    let second_row = listed.iter().find(|r| r.id == second.record.id).unwrap();
    assert_eq!(second_row.revoked_at, Some(at(1)));
    assert_eq!(second_row.label.as_deref(), Some("token 2"));
    assert!(store.list_tokens(&room("gamma")).await.unwrap().is_empty());
}

/// Revoking an id no token has says so.
pub async fn tokens_revoking_an_unknown_id_is_an_error<S: TokenStore>(store: Arc<S>) {
    let id = TokenId::parse("00000000000000ff").unwrap();
    assert!(matches!(
        store.revoke_token(&id, at(1)).await,
        Err(TokenError::Unknown(unknown)) if unknown == id
    ));
}

/// Issuing twice from the same material is refused, not overwritten.
pub async fn tokens_ids_are_unique<S: TokenStore>(store: Arc<S>) {
    let token = issue(&*store, 1, "alpha", "olive", None).await;
    let again = store
        .issue_token(
            NewToken {
                room: room("alpha"),
                principal: principal("mallory"),
                created_at: at(1),
                expires_at: None,
                label: None,
            },
            material(1),
        )
        .await;
    assert!(matches!(again, Err(TokenError::Exists(id)) if id == token.record.id));
    assert_eq!(
        store
            .authenticate(token.text(), at(1))
            .await
            .unwrap()
            .principal,
        principal("olive")
    );
}

/// T6: revoking a principal's tokens in a Room revokes each of its tokens there issued until
/// the given time and not revoked yet, says how many, keeps an earlier revocation's time, and
/// leaves alone other principals, other Rooms and tokens issued later; doing it again revokes
/// none, and a principal without tokens is not an error.
pub async fn t6_revoking_a_principal_revokes_its_tokens_in_that_room_issued_until_then<
    S: TokenStore,
>(
    store: Arc<S>,
) {
    let first = issue(&*store, 1, "alpha", "sam", None).await;
    let second = issue(&*store, 2, "alpha", "sam", Some(at(48))).await;
    let earlier = issue(&*store, 3, "alpha", "sam", None).await;
    store.revoke_token(&earlier.record.id, at(1)).await.unwrap();
    let other_principal = issue(&*store, 4, "alpha", "olive", None).await;
    let other_room = issue(&*store, 5, "beta", "sam", None).await;
    let later = store
        .issue_token(
            NewToken {
                room: room("alpha"),
                principal: principal("sam"),
                created_at: at(3),
                expires_at: None,
                label: None,
            },
            material(6),
        )
        .await
        .unwrap();

    let revoked = store
        .revoke_principal_tokens(&room("alpha"), &principal("sam"), at(2), at(4))
        .await
        .unwrap();
    assert_eq!(revoked, 2);
    for token in [&first, &second] {
        assert!(matches!(
            store.authenticate(token.text(), at(5)).await,
            Err(AuthError::Revoked(id)) if id == token.record.id
        ));
    }
    let listed = store.list_tokens(&room("alpha")).await.unwrap();
    let revoked_at = |id: &TokenId| listed.iter().find(|r| &r.id == id).unwrap().revoked_at;
    assert_eq!(revoked_at(&first.record.id), Some(at(4)));
    assert_eq!(revoked_at(&second.record.id), Some(at(4)));
    assert_eq!(revoked_at(&earlier.record.id), Some(at(1)));
    for untouched in [&other_principal, &other_room, &later] {
        store.authenticate(untouched.text(), at(5)).await.unwrap();
    }

    // Again: nothing left to revoke; a principal without tokens neither.
    assert_eq!(
        store
            .revoke_principal_tokens(&room("alpha"), &principal("sam"), at(2), at(6))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .revoke_principal_tokens(&room("alpha"), &principal("nobody"), at(9), at(9))
            .await
            .unwrap(),
        0
    );
    // Issued exactly at the bound: revoked.
    assert_eq!(
        store
            .revoke_principal_tokens(&room("alpha"), &principal("sam"), at(3), at(7))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        store.authenticate(later.text(), at(8)).await,
        Err(AuthError::Revoked(_))
    ));
    assert_eq!(
        store
            .list_tokens(&room("alpha"))
            .await
            .unwrap()
            .iter()
            .find(|r| r.id == first.record.id)
            .unwrap()
            .revoked_at,
        Some(at(4))
    );
}

/// The in-memory store, for checking the suite itself.
pub async fn memory() -> Arc<MemoryTokens> {
    Arc::new(MemoryTokens::new())
}
