//! [`PoolStore`] on SQLite for [`SqliteRooms`] (migration 0008): a pool is one row of
//! `budget_pools` (its ledger as JSON, a revision, how many log rows it has) and its log rows
//! in `pool_ledger`. [`follow_in`] moves a Room's pool inside the (single-writer) transaction
//! of the Room's commit: the domain decides ([`agentroom_domain::pool::follow`]), and the new
//! ledger and its rows are written, or the whole commit is dropped (B8).

use agentroom_domain::ids::{PoolId, RoomId, Timestamp};
use agentroom_domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_domain::pool::{follow, reserves};
use agentroom_ports::{
    PoolChange, PoolChangeError, PoolLogEntry, PoolStore, StoreError, StoredPool,
};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};
use serde::Serialize;

use crate::rooms::{SqliteRooms, immediate};

const SELECT_POOL: &str = "SELECT ledger, revision, entries FROM budget_pools WHERE pool_id = ?1";
const UPDATE_POOL: &str = "UPDATE budget_pools SET ledger = ?2, revision = revision + 1, \
     entries = entries + ?3 WHERE pool_id = ?1";
const APPEND_POOL_LOG: &str =
    "INSERT INTO pool_ledger (pool_id, seq, room_id, entry, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)";

fn db(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::database(context, e)
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::database("serializing a pool", e))
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Pool `id`'s ledger, revision and log length, read in `tx`.
fn read(tx: &Transaction<'_>, id: &PoolId) -> Result<Option<(BudgetLedger, i64, i64)>, StoreError> {
    let row: Option<(String, i64, i64)> = tx
        .prepare_cached(SELECT_POOL)
        .and_then(|mut s| {
            s.query_row([id.as_str()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()
        })
        .map_err(db("reading a pool"))?;
    row.map(|(text, revision, entries)| {
        let ledger =
            serde_json::from_str(&text).map_err(|e| StoreError::corrupt("a pool's ledger", e))?;
        Ok((ledger, revision, entries))
    })
    .transpose()
}

/// Writes `ledger` as pool `id`'s and appends `entries` after its `logged` rows.
fn write(
    tx: &Transaction<'_>,
    id: &PoolId,
    ledger: &BudgetLedger,
    logged: i64,
    room: Option<&RoomId>,
    entries: &[LedgerEntry],
    at: Timestamp,
) -> Result<(), StoreError> {
    let state = json(ledger)?;
    tx.prepare_cached(UPDATE_POOL)
        .and_then(|mut s| s.execute(params![id.as_str(), state, count(entries.len())]))
        .map_err(db("changing a pool"))?;
    append(tx, id, logged, room, entries, at)
}

fn append(
    tx: &Transaction<'_>,
    id: &PoolId,
    logged: i64,
    room: Option<&RoomId>,
    entries: &[LedgerEntry],
    at: Timestamp,
) -> Result<(), StoreError> {
    let mut statement = tx
        .prepare_cached(APPEND_POOL_LOG)
        .map_err(db("appending to a pool's log"))?;
    for (n, entry) in entries.iter().enumerate() {
        statement
            .execute(params![
                id.as_str(),
                logged.saturating_add(count(n)).saturating_add(1),
                room.map(RoomId::as_str),
                json(entry)?,
                at.as_millis()
            ])
            .map_err(db("appending to a pool's log"))?;
    }
    Ok(())
}

/// B8: moves pool `pool` by the Room's ledger `entries` in `tx`, the transaction of the
/// Room's commit. `Ok(Err(why))` when the pool refuses them (or does not exist).
pub(crate) fn follow_in(
    tx: &Transaction<'_>,
    room: &RoomId,
    pool: &PoolId,
    entries: &[LedgerEntry],
    at: Timestamp,
) -> Result<Result<(), String>, StoreError> {
    let Some((mut ledger, _, logged)) = read(tx, pool)? else {
        // A pool that is gone holds nothing: a reservation is refused, but what the Room
        // settles or releases is the Room's alone, so its open calls still close.
        if reserves(entries) {
            return Ok(Err(format!("there is no pool {pool}")));
        }
        return Ok(Ok(()));
    };
    if let Err(refusal) = follow(&mut ledger, entries) {
        return Ok(Err(refusal.to_string()));
    }
    let appended = ledger.take_journal();
    if !appended.is_empty() {
        write(tx, pool, &ledger, logged, Some(room), &appended, at)?;
    }
    Ok(Ok(()))
}

#[async_trait]
impl PoolStore for SqliteRooms {
    async fn create_pool(
        &self,
        id: &PoolId,
        ledger: &BudgetLedger,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let opening = ledger.journal();
        if opening.is_empty() {
            return Err(StoreError::inconsistent(format!(
                "pool {id} is created from a ledger without its opening"
            )));
        }
        let state = json(ledger)?;
        let mut connection = self.connections.writer();
        let tx = immediate(&mut connection)?;
        let inserted = tx
            .prepare_cached(
                "INSERT INTO budget_pools (pool_id, revision, ledger, entries, created_ms) \
                 VALUES (?1, 1, ?2, ?3, ?4) ON CONFLICT (pool_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id.as_str(),
                    state,
                    count(opening.len()),
                    at.as_millis()
                ])
            })
            .map_err(db("creating a pool"))?;
        if inserted == 0 {
            return Err(StoreError::PoolExists(id.clone()));
        }
        append(&tx, id, 0, None, opening, at)?;
        tx.commit().map_err(db("creating a pool"))
    }

    async fn load_pool(&self, id: &PoolId) -> Result<Option<StoredPool>, StoreError> {
        let mut connection = self.connections.reader();
        let tx = connection.transaction().map_err(db("reading a pool"))?;
        Ok(read(&tx, id)?.map(|(ledger, revision, _)| StoredPool {
            id: id.clone(),
            ledger,
            revision,
        }))
    }

    async fn change_pool(
        &self,
        id: &PoolId,
        change: PoolChange<'_>,
        at: Timestamp,
    ) -> Result<StoredPool, PoolChangeError> {
        let mut connection = self.connections.writer();
        // The writer's transaction is the pool's lock while the domain decides.
        let tx = immediate(&mut connection)?;
        let Some((mut ledger, revision, logged)) = read(&tx, id)? else {
            return Err(PoolChangeError::UnknownPool(id.clone()));
        };
        ledger.take_journal();
        change(&mut ledger).map_err(|refusal| PoolChangeError::Refused {
            pool: id.clone(),
            refusal,
        })?;
        let entries = ledger.take_journal();
        write(&tx, id, &ledger, logged, None, &entries, at)?;
        tx.commit().map_err(db("changing a pool"))?;
        Ok(StoredPool {
            id: id.clone(),
            ledger,
            revision: revision.saturating_add(1),
        })
    }

    async fn pool_log(&self, id: &PoolId) -> Result<Vec<PoolLogEntry>, StoreError> {
        let connection = self.connections.reader();
        let err = db("reading a pool's log");
        let mut statement = connection
            .prepare_cached(
                "SELECT seq, room_id, entry, at_ms FROM pool_ledger WHERE pool_id = ?1 ORDER BY seq",
            )
            .map_err(&err)?;
        let rows = statement
            .query_map([id.as_str()], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            })
            .map_err(&err)?;
        let mut log = Vec::new();
        for row in rows {
            let (seq, room, entry, at) = row.map_err(&err)?;
            log.push(PoolLogEntry {
                seq,
                room: room
                    .map(|room| {
                        RoomId::parse(&room)
                            .map_err(|e| StoreError::corrupt("a pool log row's room", e))
                    })
                    .transpose()?,
                entry: serde_json::from_str(&entry)
                    .map_err(|e| StoreError::corrupt("a pool's ledger entry", e))?,
                at: Timestamp::from_millis(at),
            });
        }
        Ok(log)
    }

    async fn pools(&self) -> Result<Vec<PoolId>, StoreError> {
        let connection = self.connections.reader();
        let err = db("listing pools");
        let mut statement = connection
            .prepare_cached("SELECT pool_id FROM budget_pools ORDER BY pool_id")
            .map_err(&err)?;
        let ids = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(&err)?;
        let mut pools = Vec::new();
        for id in ids {
            let id = id.map_err(&err)?;
            pools.push(PoolId::parse(&id).map_err(|e| StoreError::corrupt("a pool's id", e))?);
        }
        Ok(pools)
    }
}
