-- Reverts 0003.
DROP INDEX IF EXISTS room_history_event_once;
