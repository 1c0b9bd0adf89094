-- Reverts 0011: every persisted event notifies again, through 0010's function. Nothing
-- stored changes.
DROP TRIGGER IF EXISTS room_events_notify ON room_events;
CREATE TRIGGER room_events_notify AFTER INSERT ON room_events
    FOR EACH ROW EXECUTE FUNCTION agentroom_notify_room();
DROP FUNCTION IF EXISTS agentroom_notify_room_event();
