"""A consume-transform-produce loop with confluent-kafka, for the
exactly-once tests (test_exactly_once.py): a process the test kills with
SIGKILL at random points and starts again.

    ctp_driver.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID

It reads INPUT with isolation.level=read_committed from the group's
committed offsets, and for every small batch runs one transaction: produce
the transformed records (same partition, value prefixed with "out:") and
send the consumed offsets to the transaction, then commit. A restarted
driver fences its predecessor through the transactional id
(init_transactions aborts whatever it left open). It exits 0 once every
input partition is consumed up to its end and stays so for a moment; any
error ends it with status 3 (the test starts it again), as a crash would.
"""

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BATCH = 20
# Slow enough that the test's kills land inside transactions.
PAUSE = 0.03
IDLE_EXIT = 2.0


def main():
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 10000,
        "linger.ms": 1,
    })
    producer.init_transactions(30)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
    })
    metadata = consumer.list_topics(source, timeout=20)
    partitions = sorted(metadata.topics[source].partitions)
    # assign() without an offset starts from the group's committed offset
    # (fetched with require_stable under read_committed).
    consumer.assign([TopicPartition(source, p) for p in partitions])
    print("driver ready", flush=True)
    idle_since = None
    while True:
        messages = consumer.consume(num_messages=BATCH, timeout=0.5)
        messages = [m for m in messages if m.error() is None]
        if not messages:
            if caught_up(consumer, source, partitions):
                idle_since = idle_since or time.time()
                if time.time() - idle_since > IDLE_EXIT:
                    print("driver done", flush=True)
                    return 0
            continue
        idle_since = None
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
        positions = consumer.position([TopicPartition(source, p) for p in partitions])
        producer.send_offsets_to_transaction(
            [tp for tp in positions if tp.offset >= 0], consumer.consumer_group_metadata(), 30)
        time.sleep(PAUSE)
        producer.commit_transaction(30)


def caught_up(consumer, source, partitions):
    """Whether every partition is consumed (or committed) up to its end."""
    for tp in consumer.position([TopicPartition(source, p) for p in partitions]):
        offset = tp.offset
        if offset < 0:
            # Nothing fetched yet: where the group's committed offset is.
            [committed] = consumer.committed([TopicPartition(source, tp.partition)], timeout=10)
            offset = committed.offset
        _, high = consumer.get_watermark_offsets(TopicPartition(source, tp.partition), timeout=10)
        if offset < high:
            return False
    return True


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KafkaException, BufferError, RuntimeError) as e:
        print("driver failed: %s" % e, flush=True)
        sys.exit(3)
