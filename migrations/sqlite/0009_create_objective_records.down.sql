-- Reverts 0009: drops closed objectives' records. Their Rooms' live states keep only what
-- the rules consult about them, so their details are lost with this rollback.
DROP TABLE objective_record_keys;
DROP TABLE objective_records;
