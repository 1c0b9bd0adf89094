-- Room changes reach other processes by notification (issue 21, item 4): a persisted event or
-- a new Room notifies the channel `agentroom_rooms` with the Room's id, delivered when its
-- transaction commits (never for one rolled back). A host LISTENs on it and accepts the
-- Room's events at once instead of polling every Room on a short period; it still passes over
-- every Room on a long one, so a missed notice (a lost connection) costs latency only.
-- The commits that decide (room_commit's statement) do not notify: NOTIFY serializes the
-- commits that use it, and nothing another process does waits on a decision of this one.

CREATE FUNCTION agentroom_notify_room() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('agentroom_rooms', NEW.room_id);
    RETURN NULL;
END;
$fn$;

CREATE TRIGGER room_events_notify AFTER INSERT ON room_events
    FOR EACH ROW EXECUTE FUNCTION agentroom_notify_room();

CREATE TRIGGER rooms_notify AFTER INSERT ON rooms
    FOR EACH ROW EXECUTE FUNCTION agentroom_notify_room();
