-- Content once per Room, addressed by the SHA-256 of its bytes (issue 15, DESIGN.md
-- "Artifact and source"): contribution bodies and the content of their sources. Immutable:
-- a row is inserted once and never updated; the Room's state names content by its digest and
-- never holds it. A rowid table, not WITHOUT ROWID: its rows may be large.
CREATE TABLE room_contents (
    room_id     TEXT    NOT NULL,
    digest      TEXT    NOT NULL CHECK (length(digest) = 71 AND substr(digest, 1, 7) = 'sha256:'),
    media_type  TEXT    NOT NULL,
    bytes       BLOB    NOT NULL,
    size        INTEGER NOT NULL CHECK (size = length(bytes)),
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (room_id, digest)
) STRICT;
