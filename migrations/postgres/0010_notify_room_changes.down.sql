-- Reverts 0010: hosts poll again. Nothing stored changes.
DROP TRIGGER IF EXISTS rooms_notify ON rooms;
DROP TRIGGER IF EXISTS room_events_notify ON room_events;
DROP FUNCTION IF EXISTS agentroom_notify_room();
