-- Artifact and source content (issue 15, DESIGN.md "Artifact and source"): stored once per
-- Room under the SHA-256 of its bytes, immutable (agentroom_ports::ArtifactStore). A put
-- inserts with ON CONFLICT DO NOTHING on the primary key, so the same bytes are one row and
-- the first media type stays; nothing updates or deletes a row.
--
-- No foreign key to rooms, as no table has had one since 0005 (access_tokens, 0004, never
-- did): the coordinator stores content before it commits the decision that names it, always
-- for a Room that exists, and nothing deletes a Room.
--
-- Unlike the tables a commit writes (0005 dropped their CHECKs, which cost every commit),
-- this table keeps its CHECKs: content is written once per artifact, off the commit path,
-- and they refuse a row the store could never have written. Whether the bytes hash to the
-- digest is checked by the store on every read rather than by a CHECK on sha256(bytes): a
-- CHECK runs only when a row is written, while the read check also catches bytes changed by
-- a restore, a damaged page or anything else that writes behind the store, and it is the one
-- check the SQLite twin can make too.
CREATE TABLE room_contents (
    room_id       text   NOT NULL,
    -- `sha256:` and 64 lowercase hex digits (agentroom_domain::artifact::ContentDigest).
    digest        text   NOT NULL
        CONSTRAINT room_contents_digest_format CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    -- How to read it, e.g. `text/markdown`.
    media_type    text   NOT NULL,
    bytes         bytea  NOT NULL,
    -- Its length in bytes, kept beside it so sizes are summed without reading the bytes.
    size          bigint NOT NULL
        CONSTRAINT room_contents_size_of_bytes CHECK (size = octet_length(bytes)),
    -- Unix milliseconds from the caller's clock (the time the put was asked for).
    created_at_ms bigint NOT NULL,
    PRIMARY KEY (room_id, digest)
);
