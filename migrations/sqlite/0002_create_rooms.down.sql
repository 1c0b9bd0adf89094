DROP TABLE outbox;
DROP TABLE ledger_entries;
DROP TABLE operations;
DROP TABLE room_events;
DROP TABLE room_snapshots;
DROP TABLE room_history;
DROP TABLE rooms;
