//! [`TokenStore`] on PostgreSQL for [`PgRooms`]: the `access_tokens` table (migration 0004),
//! one statement per method. Only the SHA-256 of a secret is stored.

use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_ports::BoxError;
use agentroom_ports::tokens::{SecretHash, TokenError, TokenId, TokenRecord, TokenStore};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::rooms::PgRooms;

// The statements live here rather than in `sql` so this module lands without touching it;
// they move there with the next change to `sql`.
mod sql {
    /// Stores a token unless its id exists.
    pub(super) const TOKEN_INSERT: &str = "\
INSERT INTO access_tokens (token_id, room_id, principal_id, secret_sha256, created_at_ms, \
expires_at_ms, label) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (token_id) DO NOTHING";

    /// A token by id.
    pub(super) const TOKEN_FIND: &str = "\
SELECT token_id, room_id, principal_id, secret_sha256, created_at_ms, expires_at_ms, \
revoked_at_ms, label FROM access_tokens WHERE token_id = $1";

    /// Revokes token `$1` at `$2` unless revoked already; returns its row.
    pub(super) const TOKEN_REVOKE: &str = "\
UPDATE access_tokens SET revoked_at_ms = coalesce(revoked_at_ms, $2) WHERE token_id = $1 \
RETURNING token_id, room_id, principal_id, secret_sha256, created_at_ms, expires_at_ms, \
revoked_at_ms, label";

    /// Revokes at `$4` every token of principal `$2` in Room `$1` created at or before `$3`
    /// and not revoked yet.
    pub(super) const TOKEN_REVOKE_PRINCIPAL: &str = "\
UPDATE access_tokens SET revoked_at_ms = $4 WHERE room_id = $1 AND principal_id = $2 \
AND created_at_ms <= $3 AND revoked_at_ms IS NULL";

    /// A Room's tokens, oldest first.
    pub(super) const TOKEN_LIST: &str = "\
SELECT token_id, room_id, principal_id, secret_sha256, created_at_ms, expires_at_ms, \
revoked_at_ms, label FROM access_tokens WHERE room_id = $1 ORDER BY created_at_ms, seq";
}

/// A database error as a token error; a missing table means the schema was reverted.
fn db(context: &'static str) -> impl Fn(sqlx::Error) -> TokenError {
    move |error| match error.as_database_error().and_then(|e| e.code()).as_deref() {
        Some("42P01") => TokenError::NotMigrated {
            context: context.to_owned(),
            source: Some(error.into()),
        },
        _ => TokenError::database(context, error),
    }
}

/// A column of token `id` that does not parse, with the parser's error.
fn unreadable<E: Into<BoxError>>(id: &str, what: &str) -> impl FnOnce(E) -> TokenError {
    let context = format!("token {id}: {what}");
    move |e| TokenError::corrupt(context, e)
}

fn from_row(row: &PgRow) -> Result<(TokenRecord, SecretHash), TokenError> {
    let read = |e: sqlx::Error| TokenError::corrupt("a token row", e);
    let id: String = row.try_get("token_id").map_err(read)?;
    let room: String = row.try_get("room_id").map_err(read)?;
    let principal: String = row.try_get("principal_id").map_err(read)?;
    let hash: String = row.try_get("secret_sha256").map_err(read)?;
    let record = TokenRecord {
        id: TokenId::parse(&id).map_err(unreadable(&id, "id"))?,
        room: RoomId::parse(&room).map_err(unreadable(&id, "room"))?,
        principal: PrincipalId::parse(&principal).map_err(unreadable(&id, "principal"))?,
        created_at: Timestamp::from_millis(row.try_get("created_at_ms").map_err(read)?),
        expires_at: row
            .try_get::<Option<i64>, _>("expires_at_ms")
            .map_err(read)?
            .map(Timestamp::from_millis),
        revoked_at: row
            .try_get::<Option<i64>, _>("revoked_at_ms")
            .map_err(read)?
            .map(Timestamp::from_millis),
        label: row.try_get("label").map_err(read)?,
    };
    let hash = SecretHash::from_hex(&hash)
        .ok_or_else(|| TokenError::inconsistent(format!("token {id}: secret hash")))?;
    Ok((record, hash))
}

#[async_trait]
impl TokenStore for PgRooms {
    #[tracing::instrument(skip_all, fields(token = %record.id, room = %record.room))]
    async fn insert_token(
        &self,
        record: &TokenRecord,
        hash: &SecretHash,
    ) -> Result<(), TokenError> {
        let inserted = sqlx::query(sql::TOKEN_INSERT)
            .bind(record.id.as_str())
            .bind(record.room.as_str())
            .bind(record.principal.as_str())
            .bind(hash.to_hex())
            .bind(record.created_at.as_millis())
            .bind(record.expires_at.map(Timestamp::as_millis))
            .bind(record.label.as_deref())
            .execute(&self.pool)
            .await
            .map_err(db("storing a token"))?;
        if inserted.rows_affected() == 0 {
            return Err(TokenError::Exists(record.id.clone()));
        }
        Ok(())
    }

    async fn find_token(
        &self,
        id: &TokenId,
    ) -> Result<Option<(TokenRecord, SecretHash)>, TokenError> {
        sqlx::query(sql::TOKEN_FIND)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading a token"))?
            .map(|row| from_row(&row))
            .transpose()
    }

    #[tracing::instrument(skip(self))]
    async fn revoke_token(&self, id: &TokenId, at: Timestamp) -> Result<TokenRecord, TokenError> {
        let row = sqlx::query(sql::TOKEN_REVOKE)
            .bind(id.as_str())
            .bind(at.as_millis())
            .fetch_optional(&self.pool)
            .await
            .map_err(db("revoking a token"))?
            .ok_or_else(|| TokenError::Unknown(id.clone()))?;
        from_row(&row).map(|(record, _)| record)
    }

    async fn list_tokens(&self, room: &RoomId) -> Result<Vec<TokenRecord>, TokenError> {
        sqlx::query(sql::TOKEN_LIST)
            .bind(room.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db("listing tokens"))?
            .iter()
            .map(|row| from_row(row).map(|(record, _)| record))
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
        let revoked = sqlx::query(sql::TOKEN_REVOKE_PRINCIPAL)
            .bind(room.as_str())
            .bind(principal.as_str())
            .bind(issued_until.as_millis())
            .bind(at.as_millis())
            .execute(&self.pool)
            .await
            .map_err(db("revoking a principal's tokens"))?;
        Ok(revoked.rows_affected())
    }
}
