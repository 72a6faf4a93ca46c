-- The partition count of each event log, fixed by the first broker that
-- opens it (as a Kafka topic keeps the count it was created with), so every
-- broker hashes user partitions to the same metadata partition even when
-- their configured counts differ.
CREATE TABLE event_log_partitions (
    log        text    PRIMARY KEY,
    partitions integer NOT NULL CHECK (partitions > 0)
);
