-- Krabka cluster schema, version 6.
--
-- The largest timestamp of each remembered batch of an idempotent producer
-- on a diskless partition: DescribeProducers reports the last batch's as
-- the producer's last timestamp, and producer.id.expiration.ms forgets a
-- producer once that timestamp is older than the expiration (as Kafka's
-- ProducerStateManager does for a classic partition). Rows from before
-- this version count as written now, so no producer expires early.
ALTER TABLE diskless_producer_batches
    ADD COLUMN max_timestamp bigint NOT NULL DEFAULT krabka_now_ms();
ALTER TABLE diskless_producer_batches ALTER COLUMN max_timestamp DROP DEFAULT;
