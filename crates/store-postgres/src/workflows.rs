//! The [`WorkflowStore`] half of [`PgRooms`]: operations claimed with `FOR UPDATE SKIP
//! LOCKED`, leases timed by the database clock, heartbeats, receipts and uncertainty marks
//! fenced on the lease generation (D2, D3), dead letters and operator resolutions. Each call
//! is one statement.

use std::str::FromStr;
use std::time::Duration;

use agentroom_domain::ids::{OperationId, RoomId};
use agentroom_ports::{
    ClaimedOperation, Heartbeat, LeaseGrant, OperationFilter, OperationRecord, OperationStatus,
    Receipt, ReceiptWrite, Resolution, StoreError, WorkflowStore,
};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::rooms::{PgRooms, failed, parse_json, to_json};
use crate::sql;

/// Gives up the lease of in-flight operation `$1` without a receipt, only at generation `$2`:
/// expired now by the database clock (claimable at once), the generation moved on so the
/// releasing holder's late writes are fenced. (Kept here, not in `sql`, with the one method
/// that uses it.)
const RELEASE_LEASE: &str = "\
UPDATE operations \
SET lease_generation = lease_generation + 1, lease_owner = NULL, \
    lease_expires_at = clock_timestamp(), updated_at = clock_timestamp() \
WHERE op_id = $1::uuid AND lease_generation = $2 AND status = 'in_flight' \
  AND receipt IS NULL";

fn millis(duration: Duration) -> i64 {
    agentroom_ports::lease_millis(duration)
}

/// Reads a row of `operation_columns!` (see `sql`).
fn operation_record(row: &PgRow) -> Result<OperationRecord, StoreError> {
    let read = |e: sqlx::Error| StoreError::corrupt("an operations row", e);
    let op: String = row.try_get(0).map_err(read)?;
    let room: String = row.try_get(1).map_err(read)?;
    let request: String = row.try_get(2).map_err(read)?;
    let status: String = row.try_get(3).map_err(read)?;
    let receipt: Option<String> = row.try_get(8).map_err(read)?;
    let attempts: i32 = row.try_get(9).map_err(read)?;
    let resolution: Option<String> = row.try_get(11).map_err(read)?;
    let record = OperationRecord {
        room: RoomId::parse(&room)
            .map_err(|e| StoreError::corrupt("the room of an operation", e))?,
        request: parse_json("an operation request", &request)?,
        status: OperationStatus::parse(&status)
            .ok_or_else(|| StoreError::inconsistent(format!("operation status `{status}`")))?,
        generation: row.try_get(4).map_err(read)?,
        lease_owner: row.try_get(5).map_err(read)?,
        lease_expired: row.try_get(6).map_err(read)?,
        cancel_requested: row.try_get(7).map_err(read)?,
        receipt: receipt
            .map(|text| parse_json::<Receipt>("an operation receipt", &text))
            .transpose()?,
        recovery_attempts: u32::try_from(attempts)
            .map_err(|e| StoreError::corrupt(format!("recovery attempts {attempts}"), e))?,
        dead_letter_reason: row.try_get(10).map_err(read)?,
        resolution: resolution
            .map(|text| parse_json::<Resolution>("an operation resolution", &text))
            .transpose()?,
    };
    let id = OperationId::from_str(&op).map_err(|e| StoreError::corrupt("an operation id", e))?;
    if record.op() != id {
        return Err(StoreError::inconsistent(format!(
            "operation row {id} holds the request of {}",
            record.op()
        )));
    }
    Ok(record)
}

/// Claimed operations, as their rows were returned.
fn claimed(rows: Vec<sqlx::postgres::PgRow>) -> Result<Vec<ClaimedOperation>, StoreError> {
    rows.iter()
        .map(|row| {
            let record = operation_record(row)?;
            Ok(ClaimedOperation {
                generation: record.generation,
                record,
            })
        })
        .collect()
}

#[async_trait]
impl WorkflowStore for PgRooms {
    #[tracing::instrument(level = "debug", skip(self, lease), fields(owner = %lease.owner))]
    async fn claim_expired(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        let rows = sqlx::query(sql::CLAIM_EXPIRED)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(&lease.owner)
            .bind(millis(lease.duration))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("claiming expired operations"))?;
        claimed(rows)
    }

    /// One statement: the claim and the uncertain mark of a whole batch in one commit.
    #[tracing::instrument(level = "debug", skip(self, lease), fields(owner = %lease.owner))]
    async fn claim_expired_uncertain(
        &self,
        lease: LeaseGrant,
        limit: usize,
    ) -> Result<Vec<ClaimedOperation>, StoreError> {
        claimed(
            sqlx::query(sql::CLAIM_EXPIRED_UNCERTAIN)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .bind(&lease.owner)
                .bind(millis(lease.duration))
                .fetch_all(&self.pool)
                .await
                .map_err(failed("claiming expired operations as uncertain"))?,
        )
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn heartbeat(
        &self,
        op: OperationId,
        generation: i64,
        duration: Duration,
    ) -> Result<Heartbeat, StoreError> {
        let (op_text, lease) = (op.to_string(), millis(duration));
        // A second run sets the same expiry from the server's clock, fenced on the same
        // generation, and answers the same: safe to run again on a fresh connection
        // (held::Held::rerunnable).
        let cancel: Option<bool> = self
            .held
            .rerunnable(|mut conn| {
                let op_text = op_text.clone();
                async move {
                    let cancel = sqlx::query_scalar(sql::HEARTBEAT)
                        .bind(op_text)
                        .bind(generation)
                        .bind(lease)
                        .fetch_optional(&mut conn)
                        .await;
                    (conn, cancel)
                }
            })
            .await
            .map_err(failed("extending a lease"))?;
        Ok(match cancel {
            Some(cancel) => Heartbeat::Extended { cancel },
            None => Heartbeat::Fenced,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(leases = leases.len()))]
    async fn heartbeat_all(
        &self,
        leases: &[(OperationId, i64)],
        duration: Duration,
    ) -> Result<Vec<Heartbeat>, StoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let ops: Vec<String> = leases.iter().map(|(op, _)| op.to_string()).collect();
        let generations: Vec<i64> = leases.iter().map(|(_, generation)| *generation).collect();
        let lease = millis(duration);
        // Rerunnable as one heartbeat is: a second run sets the same expiries, fenced on the
        // same generations, and answers the same.
        let rows: Vec<(String, i64, bool)> = self
            .held
            .rerunnable(|mut conn| {
                let (ops, generations) = (ops.clone(), generations.clone());
                async move {
                    let rows = sqlx::query_as(sql::HEARTBEAT_ALL)
                        .bind(ops)
                        .bind(generations)
                        .bind(lease)
                        .fetch_all(&mut conn)
                        .await;
                    (conn, rows)
                }
            })
            .await
            .map_err(failed("extending leases"))?;
        let mut extended = std::collections::HashMap::with_capacity(rows.len());
        for (op, generation, cancel) in rows {
            let op = OperationId::from_str(&op)
                .map_err(|e| StoreError::corrupt("an operation id", e))?;
            extended.insert((op, generation), cancel);
        }
        Ok(leases
            .iter()
            .map(|lease| match extended.get(lease) {
                Some(cancel) => Heartbeat::Extended { cancel: *cancel },
                None => Heartbeat::Fenced,
            })
            .collect())
    }

    #[tracing::instrument(level = "debug", skip(self, receipt), fields(op = %op))]
    async fn record_receipt(
        &self,
        op: OperationId,
        generation: i64,
        receipt: &Receipt,
    ) -> Result<ReceiptWrite, StoreError> {
        // Not rerunnable here (held::Held::rerunnable): a second run of a receipt that went
        // through would answer "fenced". The runner retries it and reads a "fenced" retry
        // back to tell its own receipt from another generation's (workflows::lease).
        let mut lent = self
            .held
            .lend()
            .await
            .map_err(failed("recording a receipt"))?;
        let done = sqlx::query(sql::RECORD_RECEIPT)
            .bind(op.to_string())
            .bind(generation)
            .bind(to_json("a receipt", receipt)?)
            .execute(lent.conn())
            .await;
        let done = lent.finish(done).map_err(failed("recording a receipt"))?;
        Ok(if done.rows_affected() == 1 {
            ReceiptWrite::Recorded
        } else {
            ReceiptWrite::Fenced
        })
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn mark_uncertain(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        let mut lent = self
            .held
            .lend()
            .await
            .map_err(failed("marking an operation uncertain"))?;
        let done = sqlx::query(sql::MARK_UNCERTAIN)
            .bind(op.to_string())
            .bind(generation)
            .execute(lent.conn())
            .await;
        let done = lent
            .finish(done)
            .map_err(failed("marking an operation uncertain"))?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn count_recovery_attempt(&self, op: OperationId) -> Result<Option<u32>, StoreError> {
        let count: Option<i32> = sqlx::query_scalar(sql::COUNT_RECOVERY_ATTEMPT)
            .bind(op.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("counting a recovery attempt"))?;
        count
            .map(|n| {
                u32::try_from(n)
                    .map_err(|e| StoreError::corrupt(format!("recovery attempts {n}"), e))
            })
            .transpose()
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn dead_letter(&self, op: OperationId, reason: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(sql::DEAD_LETTER)
            .bind(op.to_string())
            .bind(reason)
            .execute(&self.pool)
            .await
            .map_err(failed("dead-lettering an operation"))?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip(self, resolution), fields(op = %op))]
    async fn resolve(&self, op: OperationId, resolution: &Resolution) -> Result<bool, StoreError> {
        let done = sqlx::query(sql::RESOLVE)
            .bind(op.to_string())
            .bind(to_json("a resolution", resolution)?)
            .execute(&self.pool)
            .await
            .map_err(failed("resolving an operation"))?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn operation(&self, op: OperationId) -> Result<Option<OperationRecord>, StoreError> {
        let row = sqlx::query(sql::SELECT_OPERATION)
            .bind(op.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(failed("reading an operation"))?;
        row.as_ref().map(operation_record).transpose()
    }

    #[tracing::instrument(level = "debug", skip(self))]
    async fn operations(
        &self,
        filter: OperationFilter,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let rows = match filter {
            OperationFilter::Open => {
                sqlx::query(sql::SELECT_OPEN_OPERATIONS)
                    .fetch_all(&self.pool)
                    .await
            }
            OperationFilter::Status(status) => {
                sqlx::query(sql::SELECT_OPERATIONS_BY_STATUS)
                    .bind(status.as_str())
                    .fetch_all(&self.pool)
                    .await
            }
        }
        .map_err(failed("listing operations"))?;
        rows.iter().map(operation_record).collect()
    }

    async fn room_operations(
        &self,
        room: &RoomId,
        status: Option<OperationStatus>,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let rows = sqlx::query(sql::SELECT_ROOM_OPERATIONS)
            .bind(room.as_str())
            .bind(status.map(|s| s.as_str()))
            .fetch_all(&self.pool)
            .await
            .map_err(failed("listing a room's operations"))?;
        rows.iter().map(operation_record).collect()
    }

    #[tracing::instrument(level = "debug", skip(self), fields(op = %op))]
    async fn release_lease(&self, op: OperationId, generation: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(RELEASE_LEASE)
            .bind(op.to_string())
            .bind(generation)
            .execute(&self.pool)
            .await
            .map_err(failed("releasing a lease"))?;
        Ok(done.rows_affected() == 1)
    }
}
