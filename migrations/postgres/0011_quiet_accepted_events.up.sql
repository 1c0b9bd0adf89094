-- An owner message persisted by the process that decides it is accepted in the same commit
-- (issue 21, item 2): room_commit's statement inserts the event with the history row that
-- accepts it. Such an event needs no other process's attention, and the commits that decide
-- do not notify (NOTIFY serializes the commits that use it; see 0010). So the trigger on
-- room_events gets a function of its own, which notifies only for an event no history row
-- accepts yet; fired at the end of the statement, it sees every row the statement wrote.
-- A new Room still notifies through 0010's function.

CREATE FUNCTION agentroom_notify_room_event() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (
        SELECT 1 FROM room_history h
        WHERE h.room_id = NEW.room_id AND h.event_id = NEW.event_id
    ) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('agentroom_rooms', NEW.room_id);
    RETURN NULL;
END;
$fn$;

DROP TRIGGER room_events_notify ON room_events;
CREATE TRIGGER room_events_notify AFTER INSERT ON room_events
    FOR EACH ROW EXECUTE FUNCTION agentroom_notify_room_event();
