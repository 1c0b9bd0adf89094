-- Reverts 0007: no stored content.
DROP TABLE room_contents;
