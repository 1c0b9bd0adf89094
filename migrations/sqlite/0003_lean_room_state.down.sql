-- Reverts 0003.
DROP INDEX IF EXISTS room_events_by_room;
DROP INDEX IF EXISTS room_history_event_once;
