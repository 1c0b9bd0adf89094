-- Reverts 0002: drops the durable Room state (destroys every Room, operation, ledger row
-- and undelivered notification).
DROP FUNCTION IF EXISTS room_commit(jsonb);
DROP TABLE IF EXISTS outbox;
DROP TABLE IF EXISTS ledger_entries;
DROP TABLE IF EXISTS operations;
DROP TABLE IF EXISTS room_events;
DROP TABLE IF EXISTS room_snapshots;
DROP TABLE IF EXISTS room_history;
DROP TABLE IF EXISTS rooms;
