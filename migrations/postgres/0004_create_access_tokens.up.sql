-- Bearer tokens (issue 7): one row per token, the secret kept only as its SHA-256 (hex).
-- Times are Unix milliseconds from the caller's clock (expiry is checked against a time the
-- caller passes in).
CREATE TABLE access_tokens (
    token_id      text PRIMARY KEY,
    room_id       text NOT NULL,
    principal_id  text NOT NULL,
    secret_sha256 text NOT NULL,
    created_at_ms bigint NOT NULL,
    expires_at_ms bigint,
    revoked_at_ms bigint,
    label         text,
    seq           bigint GENERATED ALWAYS AS IDENTITY UNIQUE
);

CREATE INDEX access_tokens_by_room ON access_tokens (room_id, created_at_ms, seq);
