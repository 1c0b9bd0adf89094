-- Operator inputs accepted once, and the notification feed from the store (issue 7).
--
-- A history row records the operator input it decided (a control, a limit raise, a review, …:
-- the input id the request carried), and a Room decides each input id once: the commit checks
-- it under the writer lock and this unique index is the backstop, the way
-- room_history_event_once (0003) accepts an event once (T1).
ALTER TABLE room_history ADD COLUMN input_id TEXT;
CREATE UNIQUE INDEX room_history_input_once ON room_history (room_id, input_id)
    WHERE input_id IS NOT NULL;

-- The outbox numbers its notifications in the order they are marked delivered (one count
-- for the database, under the writer lock), so a stream resumes after a notification
-- (Last-Event-ID) after any restart, and a notification delivered late is still after the one
-- a client saw last.
ALTER TABLE outbox ADD COLUMN delivered_seq INTEGER;
UPDATE outbox SET delivered_seq = outbox_key WHERE delivered_ms IS NOT NULL;
CREATE UNIQUE INDEX outbox_delivered ON outbox (delivered_seq)
    WHERE delivered_seq IS NOT NULL;
