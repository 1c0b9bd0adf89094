-- Operator inputs accepted once, and the notification feed from the store (issue 7).
--
-- A history row records the operator input it decided (a control, a limit raise, a review, …:
-- the input id the request carried), and a Room decides each input id once: a commit that
-- decides it again fails on the unique index room_history_input_once and writes nothing, the
-- way room_history_event_once (0003) accepts an event once (T1). The commit statement binds
-- the id as one more parameter written into the history row.
ALTER TABLE room_history ADD COLUMN input_id uuid NULL;
CREATE UNIQUE INDEX room_history_input_once ON room_history (room_id, input_id)
    WHERE input_id IS NOT NULL;

-- The outbox numbers its notifications in the order they are marked delivered, so a stream
-- resumes after a notification (Last-Event-ID) in any process, after any restart, and a
-- notification delivered late is still after the one a client saw last. The number is taken
-- from a sequence when the row is marked delivered; the index reads a Room's deliveries after
-- a position, and holds only delivered rows.
CREATE SEQUENCE outbox_delivery_seq AS bigint;
ALTER TABLE outbox ADD COLUMN delivered_seq bigint NULL;
UPDATE outbox o
SET delivered_seq = d.n
FROM (SELECT notification_id, row_number() OVER (ORDER BY delivered_at, seq) AS n
      FROM outbox WHERE delivered_at IS NOT NULL) d
WHERE o.notification_id = d.notification_id;
SELECT setval('outbox_delivery_seq',
              coalesce((SELECT max(delivered_seq) FROM outbox), 0) + 1, false);
CREATE INDEX outbox_delivered ON outbox (room_id, delivered_seq)
    WHERE delivered_seq IS NOT NULL;
