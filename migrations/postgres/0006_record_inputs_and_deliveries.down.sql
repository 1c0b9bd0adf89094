-- Reverts 0006: history rows no longer record their operator input, the outbox no longer
-- numbers its deliveries.
DROP INDEX outbox_delivered;
ALTER TABLE outbox DROP COLUMN delivered_seq;
DROP SEQUENCE outbox_delivery_seq;
DROP INDEX room_history_input_once;
ALTER TABLE room_history DROP COLUMN input_id;
