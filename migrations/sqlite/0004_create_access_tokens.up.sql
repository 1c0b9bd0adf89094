-- Bearer tokens (issue 7): one row per token, the secret kept only as its SHA-256 (hex).
-- Times are Unix milliseconds from the caller's clock (expiry is checked against a time the
-- caller passes in); ties in a listing are broken by rowid (insertion order).
CREATE TABLE access_tokens (
    token_id      TEXT PRIMARY KEY NOT NULL,
    room_id       TEXT NOT NULL,
    principal_id  TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    revoked_at_ms INTEGER,
    label         TEXT
) STRICT;

CREATE INDEX access_tokens_by_room ON access_tokens (room_id, created_at_ms);
