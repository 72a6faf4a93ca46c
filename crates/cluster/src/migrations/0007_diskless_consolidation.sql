-- Krabka cluster schema, version 7.
--
-- Consolidation of diskless partitions into tiered segments: the batches
-- below consolidated_to were copied into a KIP-405 segment and their rows
-- deleted, so the offsets from log_start_offset up to it are read from the
-- remote tier. A partition's batch start is the larger of the two.
ALTER TABLE diskless_partitions
    ADD COLUMN consolidated_to bigint NOT NULL DEFAULT 0;
