//! Closed objectives' records (issue 21, migration 0009): kept by the commit that moves an
//! objective out of the live Room state, read by id, in closing order, or by a
//! [`RecordKey`].

use agentroom_domain::archive::ObjectiveRecord;
use agentroom_domain::ids::{ObjectiveId, RoomId};
use agentroom_ports::{RecordKey, Revision, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rooms::{db, from_json, limit, to_json};

/// Keeps `records` of `room`, kept by the commit of `revision`, after the Room's last one.
pub(crate) fn keep(
    tx: &Connection,
    room: &RoomId,
    revision: Revision,
    records: &[ObjectiveRecord],
) -> Result<(), StoreError> {
    let err = db("keeping closed objectives' records");
    let last: i64 = tx
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM objective_records WHERE room_id = ?1")
        .and_then(|mut s| s.query_row([room.as_str()], |row| row.get(0)))
        .map_err(&err)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO objective_records (room_id, objective_id, seq, revision, record) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(&err)?;
    let mut key = tx
        .prepare_cached(
            "INSERT INTO objective_record_keys (room_id, key, objective_id) VALUES (?1, ?2, ?3)",
        )
        .map_err(&err)?;
    for (seq, record) in (last + 1..).zip(records) {
        let id = record.id().to_string();
        insert
            .execute(params![
                room.as_str(),
                id,
                seq,
                revision.0,
                to_json(record, "a closed objective's record")?
            ])
            .map_err(&err)?;
        for k in RecordKey::of(record) {
            key.execute(params![room.as_str(), k.text(), id])
                .map_err(&err)?;
        }
    }
    Ok(())
}

/// The record of `objective` of `room`.
pub(crate) fn one(
    connection: &Connection,
    room: &RoomId,
    objective: ObjectiveId,
) -> Result<Option<ObjectiveRecord>, StoreError> {
    let err = db("reading a closed objective's record");
    let text: Option<String> = connection
        .prepare_cached(
            "SELECT record FROM objective_records WHERE room_id = ?1 AND objective_id = ?2",
        )
        .and_then(|mut s| {
            s.query_row(params![room.as_str(), objective.to_string()], |row| {
                row.get(0)
            })
            .optional()
        })
        .map_err(&err)?;
    text.map(|t| from_json(&t, "a closed objective's record"))
        .transpose()
}

/// Up to `limit_to` records of `room` after position `after`, with their positions.
pub(crate) fn page(
    connection: &Connection,
    room: &RoomId,
    after: i64,
    limit_to: usize,
) -> Result<Vec<(i64, ObjectiveRecord)>, StoreError> {
    let err = db("listing closed objectives' records");
    let mut statement = connection
        .prepare_cached(
            "SELECT seq, record FROM objective_records WHERE room_id = ?1 AND seq > ?2 \
             ORDER BY seq LIMIT ?3",
        )
        .map_err(&err)?;
    let rows = statement
        .query_map(params![room.as_str(), after, limit(limit_to)], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(&err)?;
    let mut records = Vec::new();
    for row in rows {
        let (seq, text) = row.map_err(&err)?;
        records.push((seq, from_json(&text, "a closed objective's record")?));
    }
    Ok(records)
}

/// The records of `room` found by `key`, in closing order.
pub(crate) fn by(
    connection: &Connection,
    room: &RoomId,
    key: &RecordKey,
) -> Result<Vec<ObjectiveRecord>, StoreError> {
    let err = db("finding closed objectives' records");
    let mut statement = connection
        .prepare_cached(
            "SELECT r.record FROM objective_record_keys k \
             JOIN objective_records r \
               ON r.room_id = k.room_id AND r.objective_id = k.objective_id \
             WHERE k.room_id = ?1 AND k.key = ?2 ORDER BY r.seq",
        )
        .map_err(&err)?;
    let rows = statement
        .query_map(params![room.as_str(), key.text()], |row| {
            row.get::<_, String>(0)
        })
        .map_err(&err)?;
    let mut records = Vec::new();
    for row in rows {
        records.push(from_json(
            &row.map_err(&err)?,
            "a closed objective's record",
        )?);
    }
    Ok(records)
}
