-- Krabka cluster schema, version 3.
--
-- The batch coordinator of diskless topics (KIP-1150): which batches each
-- diskless partition holds, at which offsets, in which object. A broker
-- commits an uploaded object in one transaction that locks the partition
-- rows it touches (in key order, so brokers never deadlock), checks
-- idempotent producers against diskless_producer_batches, assigns offsets
-- from high_watermark and inserts one diskless_batches row per batch.
-- Times are milliseconds since the epoch.

-- The database's clock in milliseconds: the one clock every broker agrees on
-- for LogAppendTime of the record and for when an object died.
CREATE FUNCTION krabka_now_ms() RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

CREATE TABLE diskless_partitions (
    topic_id         uuid    NOT NULL,
    partition        integer NOT NULL,
    log_start_offset bigint  NOT NULL DEFAULT 0,
    -- The next offset to assign; every committed batch is below it.
    high_watermark   bigint  NOT NULL DEFAULT 0,
    -- Bytes of the live batches.
    byte_size        bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE diskless_objects (
    object_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object_key   text    NOT NULL UNIQUE,
    uploader     integer NOT NULL,
    size         bigint  NOT NULL,
    committed_ms bigint  NOT NULL,
    -- Batches of the object still in some partition.
    live_batches bigint  NOT NULL,
    -- When live_batches reached 0; NULL while the object is live.
    dead_since_ms bigint
);
CREATE INDEX diskless_objects_dead ON diskless_objects (dead_since_ms)
    WHERE dead_since_ms IS NOT NULL;

CREATE TABLE diskless_batches (
    topic_id       uuid    NOT NULL,
    partition      integer NOT NULL,
    base_offset    bigint  NOT NULL,
    last_offset    bigint  NOT NULL,
    object_id      bigint  NOT NULL REFERENCES diskless_objects (object_id),
    position       bigint  NOT NULL,
    size           bigint  NOT NULL,
    max_timestamp  bigint  NOT NULL,
    -- LogAppendTime: when the batch was committed, by the database's clock.
    append_time_ms bigint  NOT NULL,
    PRIMARY KEY (topic_id, partition, last_offset)
);
CREATE INDEX diskless_batches_object ON diskless_batches (object_id);

-- The last batches (at most five, Kafka's in-flight limit) of each
-- idempotent producer on each partition, all of the producer's current
-- epoch: a retry is answered with its original offsets.
CREATE TABLE diskless_producer_batches (
    topic_id       uuid     NOT NULL,
    partition      integer  NOT NULL,
    producer_id    bigint   NOT NULL,
    producer_epoch smallint NOT NULL,
    base_sequence  integer  NOT NULL,
    last_sequence  integer  NOT NULL,
    base_offset    bigint   NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id, base_offset)
);
