-- Krabka cluster schema, version 1.
--
-- Every lease expiry is a database timestamp set from clock_timestamp(), so
-- no broker's clock takes part in deciding who owns what.

CREATE TABLE cluster (
    singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cluster_id       text    NOT NULL,
    -- Bumped by every change to topics or configs; brokers poll it.
    metadata_version bigint  NOT NULL DEFAULT 0,
    -- Producer ids below this were handed out in blocks.
    next_producer_id bigint  NOT NULL DEFAULT 0
);

CREATE TABLE brokers (
    node_id          integer     PRIMARY KEY,
    rack             text,
    listeners        text        NOT NULL,
    incarnation      uuid        NOT NULL,
    -- Bumped by every registration: a broker's lease is (node_id, epoch).
    epoch            bigint      NOT NULL,
    registered_at    timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL
);

CREATE TABLE shard_leases (
    kind       text        NOT NULL,
    shard      integer     NOT NULL,
    owner      integer,
    -- Bumped by every acquisition, never reset.
    epoch      bigint      NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (kind, shard)
);

CREATE TABLE topics (
    name       text    PRIMARY KEY,
    topic_id   uuid    NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE topic_partitions (
    topic_id  uuid    NOT NULL REFERENCES topics (topic_id) ON DELETE CASCADE,
    partition integer NOT NULL,
    -- The broker that holds a classic partition's log.
    broker_id integer NOT NULL,
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE topic_configs (
    topic_id uuid NOT NULL REFERENCES topics (topic_id) ON DELETE CASCADE,
    name     text NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (topic_id, name)
);

-- Dynamic broker configs: resource '' is the cluster-wide default, else a
-- node id.
CREATE TABLE broker_configs (
    resource text NOT NULL,
    name     text NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (resource, name)
);

CREATE TABLE producer_id_blocks (
    first_id     bigint      PRIMARY KEY,
    size         integer     NOT NULL,
    node_id      integer     NOT NULL,
    allocated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Coordinator state, keyed as the compacted topics are keyed: one row per
-- (shard, key), so an upsert is a compaction and a tombstone a delete. `seq`
-- is the write order, which a load replays.
CREATE SEQUENCE coordinator_seq;

CREATE TABLE coordinator_state (
    kind   text    NOT NULL,
    shard  integer NOT NULL,
    key    bytea   NOT NULL,
    value  bytea   NOT NULL,
    seq    bigint  NOT NULL,
    -- The lease epoch of the owner that wrote the row.
    epoch  bigint  NOT NULL,
    PRIMARY KEY (kind, shard, key)
);
CREATE INDEX coordinator_state_by_seq ON coordinator_state (kind, shard, seq);

-- Records of open transactions (transactional offset commits), applied to
-- coordinator_state by a commit marker and dropped by an abort.
CREATE TABLE coordinator_pending (
    kind           text     NOT NULL,
    shard          integer  NOT NULL,
    producer_id    bigint   NOT NULL,
    producer_epoch smallint NOT NULL,
    key            bytea    NOT NULL,
    value          bytea,
    seq            bigint   NOT NULL,
    epoch          bigint   NOT NULL,
    PRIMARY KEY (kind, shard, producer_id, key)
);

-- Append-only event logs (the partitions of __remote_log_metadata).
CREATE TABLE event_log_heads (
    shard       integer PRIMARY KEY,
    next_offset bigint  NOT NULL
);

CREATE TABLE event_log (
    shard    integer NOT NULL,
    "offset" bigint  NOT NULL,
    key      bytea,
    value    bytea,
    PRIMARY KEY (shard, "offset")
);
