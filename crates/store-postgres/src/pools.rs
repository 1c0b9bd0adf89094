//! [`PoolStore`] on PostgreSQL for [`PgRooms`] (migration 0008): a pool is one row of
//! `budget_pools` (its ledger as JSON, a revision, how many log rows it has) and its log rows
//! in `pool_ledger`. [`follow_in`] moves a Room's pool inside the transaction of the Room's
//! commit: the pool's row is locked after the Room's (`FOR UPDATE`), the domain decides
//! ([`agentroom_domain::pool::follow`]), and the new ledger and its rows are written, or the
//! whole commit rolls back (B8).

use agentroom_domain::ids::{PoolId, RoomId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::pool::{follow, reserves};
use agentroom_ports::{
    PoolChange, PoolChangeError, PoolLogEntry, PoolStore, StoreError, StoredPool,
};
use async_trait::async_trait;
use sqlx::PgConnection;

use crate::rooms::{PgRooms, failed, parse_json, to_json};

const INSERT_POOL: &str = "INSERT INTO budget_pools (pool_id, revision, ledger, entries, created_at_ms) \
     VALUES ($1, 1, $2::jsonb, $3, $4) ON CONFLICT (pool_id) DO NOTHING";
const SELECT_POOL: &str = "SELECT ledger::text, revision FROM budget_pools WHERE pool_id = $1";
const LOCK_POOL: &str =
    "SELECT ledger::text, revision, entries FROM budget_pools WHERE pool_id = $1 FOR UPDATE";
const UPDATE_POOL: &str = "UPDATE budget_pools SET ledger = $2::jsonb, revision = revision + 1, \
     entries = entries + $3 WHERE pool_id = $1 RETURNING revision";
const APPEND_POOL_LOG: &str = "INSERT INTO pool_ledger (pool_id, seq, room_id, entry, at_ms) \
     SELECT $1, $2 + t.o, $3, t.e::jsonb, $5 FROM unnest($4::text[]) WITH ORDINALITY AS t(e, o)";
const SELECT_POOL_LOG: &str = "SELECT seq, room_id, entry::text, at_ms FROM pool_ledger \
     WHERE pool_id = $1 ORDER BY seq";
const SELECT_POOLS: &str = "SELECT pool_id FROM budget_pools ORDER BY pool_id";

fn ledger_texts(entries: &[LedgerEntry]) -> Result<Vec<String>, StoreError> {
    entries
        .iter()
        .map(|entry| to_json("a pool's ledger entry", entry))
        .collect()
}

fn count(entries: &[LedgerEntry]) -> i64 {
    i64::try_from(entries.len()).unwrap_or(i64::MAX)
}

/// What moving a Room's pool in its commit came to.
pub(crate) enum Followed {
    /// The pool holds, charges and releases what the Room does.
    Moved,
    /// B8: the pool cannot take the Room's entries (or there is no such pool); why.
    Refused(String),
}

/// B8: moves pool `pool` by the Room's ledger `entries`, on `conn` inside the transaction of
/// the Room's commit (which took the Room's row first).
pub(crate) async fn follow_in(
    conn: &mut PgConnection,
    room: &RoomId,
    pool: &PoolId,
    entries: &[LedgerEntry],
    at: Timestamp,
) -> Result<Result<Followed, StoreError>, sqlx::Error> {
    let row: Option<(String, i64, i64)> = sqlx::query_as(LOCK_POOL)
        .bind(pool.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    let Some((text, _, logged)) = row else {
        // A pool that is gone holds nothing: a reservation is refused, but what the Room
        // settles or releases is the Room's alone, so its open calls still close.
        if reserves(entries) {
            return Ok(Ok(Followed::Refused(format!("there is no pool {pool}"))));
        }
        return Ok(Ok(Followed::Moved));
    };
    let mut ledger: BudgetLedger = match parse_json("a pool's ledger", &text) {
        Ok(ledger) => ledger,
        Err(err) => return Ok(Err(err)),
    };
    if let Err(refusal) = follow(&mut ledger, entries) {
        return Ok(Ok(Followed::Refused(refusal.to_string())));
    }
    let appended = ledger.take_journal();
    if appended.is_empty() {
        return Ok(Ok(Followed::Moved));
    }
    let (state, texts) = match (to_json("a pool's ledger", &ledger), ledger_texts(&appended)) {
        (Ok(state), Ok(texts)) => (state, texts),
        (Err(err), _) | (_, Err(err)) => return Ok(Err(err)),
    };
    sqlx::query(UPDATE_POOL)
        .bind(pool.as_str())
        .bind(state)
        .bind(count(&appended))
        .execute(&mut *conn)
        .await?;
    sqlx::query(APPEND_POOL_LOG)
        .bind(pool.as_str())
        .bind(logged)
        .bind(room.as_str())
        .bind(texts)
        .bind(at.as_millis())
        .execute(&mut *conn)
        .await?;
    Ok(Ok(Followed::Moved))
}

#[async_trait]
impl PoolStore for PgRooms {
    #[tracing::instrument(level = "debug", skip(self, ledger))]
    async fn create_pool(
        &self,
        id: &PoolId,
        ledger: &BudgetLedger,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let opening = ledger.journal().to_vec();
        if opening.is_empty() {
            return Err(StoreError::inconsistent(format!(
                "pool {id} is created from a ledger without its opening"
            )));
        }
        let state = to_json("a pool's ledger", ledger)?;
        let texts = ledger_texts(&opening)?;
        let mut tx = self.pool.begin().await.map_err(failed("creating a pool"))?;
        let inserted = sqlx::query(INSERT_POOL)
            .bind(id.as_str())
            .bind(state)
            .bind(count(&opening))
            .bind(at.as_millis())
            .execute(&mut *tx)
            .await
            .map_err(failed("creating a pool"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::PoolExists(id.clone()));
        }
        sqlx::query(APPEND_POOL_LOG)
            .bind(id.as_str())
            .bind(0_i64)
            .bind(None::<String>)
            .bind(texts)
            .bind(at.as_millis())
            .execute(&mut *tx)
            .await
            .map_err(failed("creating a pool"))?;
        tx.commit().await.map_err(failed("creating a pool"))
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn load_pool(&self, id: &PoolId) -> Result<Option<StoredPool>, StoreError> {
        let row: Option<(String, i64)> = sqlx::query_as(SELECT_POOL)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading a pool"))?;
        row.map(|(text, revision)| {
            Ok(StoredPool {
                id: id.clone(),
                ledger: parse_json("a pool's ledger", &text)?,
                revision,
            })
        })
        .transpose()
    }

    #[tracing::instrument(level = "debug", skip(self, change))]
    async fn change_pool(
        &self,
        id: &PoolId,
        change: PoolChange<'_>,
        at: Timestamp,
    ) -> Result<StoredPool, PoolChangeError> {
        let mut tx = self.pool.begin().await.map_err(failed("changing a pool"))?;
        // The pool's row is locked while the domain decides: a Room's commit that moves the
        // pool waits for it (and takes it after its own Room's row, as always).
        let row: Option<(String, i64, i64)> = sqlx::query_as(LOCK_POOL)
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed("changing a pool"))?;
        let Some((text, _, logged)) = row else {
            return Err(PoolChangeError::UnknownPool(id.clone()));
        };
        let mut ledger: BudgetLedger = parse_json("a pool's ledger", &text)?;
        ledger.take_journal();
        change(&mut ledger).map_err(|refusal| PoolChangeError::Refused {
            pool: id.clone(),
            refusal,
        })?;
        let entries = ledger.take_journal();
        let revision: i64 = sqlx::query_scalar(UPDATE_POOL)
            .bind(id.as_str())
            .bind(to_json("a pool's ledger", &ledger)?)
            .bind(count(&entries))
            .fetch_one(&mut *tx)
            .await
            .map_err(failed("changing a pool"))?;
        sqlx::query(APPEND_POOL_LOG)
            .bind(id.as_str())
            .bind(logged)
            .bind(None::<String>)
            .bind(ledger_texts(&entries)?)
            .bind(at.as_millis())
            .execute(&mut *tx)
            .await
            .map_err(failed("changing a pool"))?;
        tx.commit().await.map_err(failed("changing a pool"))?;
        Ok(StoredPool {
            id: id.clone(),
            ledger,
            revision,
        })
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, StoreError> {
        let rows: Vec<(i64, Option<String>, String, i64)> = sqlx::query_as(SELECT_POOL_LOG)
            .bind(id.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(failed("reading a pool's log"))?;
        rows.into_iter()
            .map(|(seq, room, entry, at)| {
                Ok(PoolLogEntry {
                    seq,
                    room: room
                        .map(|room| {
                            RoomId::parse(&room)
                                .map_err(|e| StoreError::corrupt("a pool log row's room", e))
                        })
                        .transpose()?,
                    entry: parse_json("a pool's ledger entry", &entry)?,
                    at: Timestamp::from_millis(at),
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn pools(&self) -> Result<Vec<PoolId>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(SELECT_POOLS)
            .fetch_all(&self.pool)
            .await
            .map_err(failed("listing pools"))?;
        ids.iter()
            .map(|id| PoolId::parse(id).map_err(|e| StoreError::corrupt("a pool's id", e)))
            .collect()
    }
}
