//! The token conformance suite on PostgreSQL (a fresh migrated schema per case), and what is
//! stored of a secret.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use agentroom_ports::TokenStore;
use agentroom_ports::domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::token_conformance::material;
use agentroom_ports::tokens::NewToken;
use agentroom_store_postgres::PgRooms;

async fn postgres() -> Arc<PgRooms> {
    let (_schema, store) = common::migrated_rooms().await;
    Arc::new(store)
}

agentroom_ports::token_conformance!(postgres);

#[tokio::test]
async fn tokens_the_secret_is_not_stored_in_plain() {
    let (schema, pool) = common::fresh_schema().await;
    let store = common::migrate_rooms(&schema, pool.clone()).await;
    let issued = store
        .issue_token(
            NewToken {
                room: RoomId::parse("alpha").unwrap(),
                principal: PrincipalId::parse("olive").unwrap(),
                created_at: Timestamp::from_millis(1),
                expires_at: None,
                label: Some("laptop".to_owned()),
            },
            material(1),
        )
        .await
        .unwrap();
    let secret = issued.text().rsplit('_').next().unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    let row: String = sqlx::query_scalar("SELECT row_to_json(t)::text FROM access_tokens t")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!row.contains(&secret), "{row}");
    assert!(row.contains("\"secret_sha256\""), "{row}");
    assert!(row.contains("laptop"), "{row}");
    pool.close().await;
    common::drop_schema(&schema).await;
}
