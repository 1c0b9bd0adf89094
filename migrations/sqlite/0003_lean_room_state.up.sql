-- Lean Room state (issue 4): ledger entries and closed operations leave the live state with
-- the decision that made them, and an event's acceptance is committed once per Room (T1),
-- which the store guarantees (checked in the commit under the writer lock; this index is the
-- backstop) instead of a set of every event id in the state.
CREATE UNIQUE INDEX room_history_event_once ON room_history (room_id, event_id)
    WHERE event_id IS NOT NULL;

-- A Room's persisted events in the order they were persisted: a coordinator starting up
-- accepts those no history row records (T1), without reading other Rooms' events.
CREATE INDEX room_events_by_room ON room_events (room_id, at_ms, event_id);
