-- Reverts 0003's indexes. The function stays as 0003 left it: it answers the callers of 0002
-- too (their `ledger_from` always equalled the Room's row count, which it now computes), and
-- a Room with an event accepted twice cannot exist while the index stood.
DROP INDEX IF EXISTS room_events_by_room;
DROP INDEX IF EXISTS room_history_event_once;
