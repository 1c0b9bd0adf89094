-- Closed objectives' records (issue 21): a completed or canceled objective whose work is
-- settled leaves the live Room state; its record (the objective as it closed and its
-- contributions, an agentroom_domain::archive::ObjectiveRecord) is kept here by the commit
-- that removes it, so what a decision reads and writes depends on open work only.
CREATE TABLE objective_records (
    room_id      TEXT    NOT NULL REFERENCES rooms (room_id),
    objective_id TEXT    NOT NULL,
    -- The order records left the Room's live state in (positions for paging).
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    -- The Room revision whose commit kept it.
    revision     INTEGER NOT NULL CHECK (revision >= 1),
    record       TEXT    NOT NULL CHECK (json_valid(record)),
    PRIMARY KEY (room_id, objective_id),
    UNIQUE (room_id, seq)
) STRICT;

-- What a record is found by besides its id (agentroom_ports::RecordKey): its owner messages,
-- its contributions and the content they name.
CREATE TABLE objective_record_keys (
    room_id      TEXT NOT NULL,
    key          TEXT NOT NULL,
    objective_id TEXT NOT NULL,
    PRIMARY KEY (room_id, key, objective_id),
    FOREIGN KEY (room_id, objective_id) REFERENCES objective_records (room_id, objective_id)
) STRICT;
