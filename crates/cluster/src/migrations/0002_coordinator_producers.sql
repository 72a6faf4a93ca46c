-- Krabka cluster schema, version 2.
--
-- The producers each coordinator state shard has seen in transactional
-- records and markers, as a compacted topic's partition keeps its producer
-- state: a transactional write or marker of an older producer epoch than
-- the latest (a zombie), or a marker of an older transaction coordinator,
-- is refused.
CREATE TABLE coordinator_producers (
    kind              text     NOT NULL,
    shard             integer  NOT NULL,
    producer_id       bigint   NOT NULL,
    producer_epoch    smallint NOT NULL,
    coordinator_epoch integer  NOT NULL DEFAULT -1,
    PRIMARY KEY (kind, shard, producer_id)
);
