//! The token conformance suite on SQLite, and what is stored of a secret.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agentroom_ports::TokenStore;
use agentroom_ports::domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::token_conformance::material;
use agentroom_ports::tokens::NewToken;
use agentroom_store_sqlite::{Durability, SqliteRooms, migrate};

async fn fresh() -> Arc<SqliteRooms> {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("agentroom.db");
    migrate::up(&path).unwrap();
    Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap())
}

agentroom_ports::token_conformance!(fresh);

#[tokio::test]
async fn tokens_the_secret_is_not_stored_in_plain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    migrate::up(&path).unwrap();
    let store = SqliteRooms::open(&path, Durability::ProcessCrash).unwrap();
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
    let raw = rusqlite::Connection::open(&path).unwrap();
    let row: Vec<String> = raw
        .prepare("SELECT * FROM access_tokens")
        .unwrap()
        .query_map([], |row| {
            (0..row.as_ref().column_count())
                .map(|i| {
                    row.get_ref(i).map(|v| match v {
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
                        other => format!("{other:?}"),
                    })
                })
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap()
        .concat();
    assert!(!row.is_empty());
    assert!(row.iter().all(|cell| !cell.contains(&secret)), "{row:?}");
    assert!(
        row.iter().any(|cell| cell.len() == 64),
        "the hash is stored: {row:?}"
    );
}
