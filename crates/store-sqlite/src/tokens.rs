//! [`TokenStore`] on SQLite for [`SqliteRooms`]: the `access_tokens` table (migration 0004),
//! one statement per method. Only the SHA-256 of a secret is stored.

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::BoxError;
use agentroom_ports::tokens::{SecretHash, TokenError, TokenId, TokenRecord, TokenStore};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};

use crate::rooms::SqliteRooms;

const COLUMNS: &str = "token_id, room_id, principal_id, created_at_ms, expires_at_ms, \
                       revoked_at_ms, label, secret_sha256";

fn db(context: &'static str) -> impl Fn(rusqlite::Error) -> TokenError {
    move |e| TokenError::database(context, e)
}

/// A column of token `id` that does not parse, with the parser's error.
fn unreadable<E: Into<BoxError>>(id: &str, what: &str) -> impl FnOnce(E) -> TokenError {
    let context = format!("token {id}: {what}");
    move |e| TokenError::corrupt(context, e)
}

/// A row as read: the record and its hash, or what could not be read back.
fn from_row(row: &Row<'_>) -> rusqlite::Result<Result<(TokenRecord, SecretHash), TokenError>> {
    let id: String = row.get(0)?;
    let room: String = row.get(1)?;
    let principal: String = row.get(2)?;
    let created: i64 = row.get(3)?;
    let expires: Option<i64> = row.get(4)?;
    let revoked: Option<i64> = row.get(5)?;
    let label: Option<String> = row.get(6)?;
    let hash: String = row.get(7)?;
    Ok(decode(
        id, room, principal, created, expires, revoked, label, &hash,
    ))
}

#[allow(clippy::too_many_arguments, reason = "one argument per column")]
fn decode(
    id: String,
    room: String,
    principal: String,
    created: i64,
    expires: Option<i64>,
    revoked: Option<i64>,
    label: Option<String>,
    hash: &str,
) -> Result<(TokenRecord, SecretHash), TokenError> {
    let record = TokenRecord {
        id: TokenId::parse(&id).map_err(unreadable(&id, "id"))?,
        room: RoomId::parse(&room).map_err(unreadable(&id, "room"))?,
        principal: PrincipalId::parse(&principal).map_err(unreadable(&id, "principal"))?,
        created_at: Timestamp::from_millis(created),
        expires_at: expires.map(Timestamp::from_millis),
        revoked_at: revoked.map(Timestamp::from_millis),
        label,
    };
    let hash = SecretHash::from_hex(hash)
        .ok_or_else(|| TokenError::inconsistent(format!("token {id}: secret hash")))?;
    Ok((record, hash))
}

#[async_trait]
impl TokenStore for SqliteRooms {
    #[tracing::instrument(skip_all, fields(token = %record.id, room = %record.room))]
    async fn insert_token(
        &self,
        record: &TokenRecord,
        hash: &SecretHash,
    ) -> Result<(), TokenError> {
        let connection = self.connections.writer();
        let inserted = connection
            .prepare_cached(
                "INSERT INTO access_tokens (token_id, room_id, principal_id, secret_sha256, \
                 created_at_ms, expires_at_ms, revoked_at_ms, label) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7) ON CONFLICT (token_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    record.id.as_str(),
                    record.room.as_str(),
                    record.principal.as_str(),
                    hash.to_hex(),
                    record.created_at.as_millis(),
                    record.expires_at.map(Timestamp::as_millis),
                    record.label,
                ])
            })
            .map_err(db("storing a token"))?;
        if inserted == 0 {
            return Err(TokenError::Exists(record.id.clone()));
        }
        Ok(())
    }

    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError> {
        let connection = self.connections.reader();
        connection
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM access_tokens WHERE token_id = ?1"
            ))
            .and_then(|mut s| s.query_row([id.as_str()], from_row).optional())
            .map_err(db("reading a token"))?
            .transpose()
    }

    #[tracing::instrument(skip(self))]
    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError> {
        let connection = self.connections.writer();
        connection
            .prepare_cached(&format!(
                "UPDATE access_tokens SET revoked_at_ms = coalesce(revoked_at_ms, ?2) \
                 WHERE token_id = ?1 RETURNING {COLUMNS}"
            ))
            .and_then(|mut s| {
                s.query_row(params![id.as_str(), at.as_millis()], from_row)
                    .optional()
            })
            .map_err(db("revoking a token"))?
            .transpose()?
            .map(|(record, _)| record)
            .ok_or_else(|| TokenError::Unknown(id.clone()))
    }

    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError> {
        let connection = self.connections.reader();
        let rows = connection
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM access_tokens WHERE room_id = ?1 \
                 ORDER BY created_at_ms, rowid"
            ))
            .and_then(|mut s| {
                s.query_map([room.as_str()], from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(db("listing tokens"))?;
        rows.into_iter()
            .map(|row| row.map(|(record, _)| record))
            .collect()
    }

    #[tracing::instrument(skip(self))]
    async fn revoke_principal_tokens(
        &self,
        room: &RoomId,
        principal: &PrincipalId,
        issued_until: Timestamp,
        at: Timestamp,
    ) -> Result<u64, TokenError> {
        let connection = self.connections.writer();
        let revoked = connection
            .prepare_cached(
                "UPDATE access_tokens SET revoked_at_ms = ?4 WHERE room_id = ?1 \
                 AND principal_id = ?2 AND created_at_ms <= ?3 AND revoked_at_ms IS NULL",
            )
            .and_then(|mut s| {
                s.execute(params![
                    room.as_str(),
                    principal.as_str(),
                    issued_until.as_millis(),
                    at.as_millis(),
                ])
            })
            .map_err(db("revoking a principal's tokens"))?;
        Ok(u64::try_from(revoked).unwrap_or(u64::MAX))
    }
}
