-- Krabka cluster schema, version 8.
--
-- Partitions of deleted topics whose remote data (the segments of a
-- consolidated diskless topic) is still in the tier. A topic's deletion
-- inserts its partitions here in the transaction that deletes the topic
-- row, so no broker can die between "topic gone" and "deletion pending";
-- any broker's remote log manager claims rows, deletes their data through
-- the partition delete lifecycle and removes each row once its data is
-- gone. A claim holds while claim_expires_at (the database's clock) is in
-- the future and the claimant's registration is live, so a dead broker's
-- claims pass to the next broker that asks. No foreign key: the topic row
-- is gone by design.
CREATE TABLE pending_remote_deletions (
    topic_id         uuid        NOT NULL,
    topic_name       text        NOT NULL,
    partition        integer     NOT NULL,
    added_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The broker working on the row, if any.
    claimed_by       integer,
    claim_expires_at timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (topic_id, partition)
);
