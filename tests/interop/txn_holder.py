"""A transactional producer (confluent-kafka) that opens a transaction,
writes to it and then hangs, for tests that kill it with SIGKILL — a
producer dying mid-transaction.

    txn_holder.py BOOTSTRAP TOPIC TRANSACTIONAL_ID TIMEOUT_MS COUNT

Prints "open" once the records are acknowledged, then waits to be killed.
"""

import sys
import time

from confluent_kafka import Producer


def main():
    bootstrap, topic, txn_id, timeout_ms, count = sys.argv[1:6]
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": int(timeout_ms),
        "linger.ms": 1,
    })
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(int(count)):
        producer.produce(topic, value=b"open-%d" % i, partition=0)
    if producer.flush(30) != 0:
        return 3
    print("open", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
