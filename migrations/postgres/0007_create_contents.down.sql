-- Reverts 0007: drops every Room's stored artifact and source content. History rows that
-- name content by its digest stay, and name content that is no longer there.
DROP TABLE room_contents;
