"""Exactly-once across crashes, with confluent-kafka against the krabka binary.

* A consume-transform-produce loop (ctp_driver.py: read_committed input,
  transactional output, send_offsets_to_transaction) is killed with SIGKILL
  at random points — the driver several times, the broker twice — and
  restarted each time; the output read with read_committed must hold every
  input record exactly once, and the group's offsets must end at the input's
  end.
* A broker restart (clean, and kill -9) with open transactions whose
  producers died: after the restart they are aborted once their timeout
  passes, the LSO moves on, and a committed transaction stays committed.
"""

import os
import random
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient

from helpers import create_topic, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))

# Timed-out transactions are aborted within half a second (Kafka's default
# check interval is 10 s); groups rebalance without the initial delay.
FAST = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
}


class Script:
    """A helper script run as its own process, output in a log file."""

    def __init__(self, tmp_path, name, *args):
        self.log_path = str(tmp_path / ("%s-%s.log" % (name, uuid.uuid4().hex[:8])))
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, name)] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT)

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_for_line(self, text, timeout=60):
        wait_for(lambda: text in self.output() or self.process.poll() is not None,
                 timeout=timeout, what="%r from the script" % text)
        assert text in self.output(), self.output()

    def kill9(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def exited(self):
        return self.process.poll()


def read_all(bootstrap, topic, partitions, isolation, expect=None, timeout=60.0, quiet=2.0):
    """Every value of `topic` from the start: until `expect` values arrived
    and then `quiet` seconds passed without more, or `timeout`."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "eos-reader-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": False,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values = []
    deadline = time.time() + timeout
    last = time.time()
    try:
        while time.time() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.3):
                if msg.error():
                    raise KafkaException(msg.error())
                values.append(msg.value())
                last = time.time()
            enough = expect is None or len(values) >= expect
            if enough and values and time.time() - last > quiet:
                break
    finally:
        consumer.close()
    return values


def committed(bootstrap, group, topic, partitions):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        return [tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=20)]
    finally:
        consumer.close()


def test_consume_transform_produce_is_exactly_once_across_kill_9(broker_factory, tmp_path):
    broker = broker_factory(FAST)
    source, sink, group, txn_id = "eos-in", "eos-out", "eos-group", "eos-driver"
    partitions, per_partition = 3, 200
    create_topic(broker.bootstrap, source, partitions=partitions)
    create_topic(broker.bootstrap, sink, partitions=partitions)
    inputs = []
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            value = b"in-%d-%d" % (p, i)
            plain.produce(source, value=value, partition=p)
            inputs.append(value)
    assert plain.flush(30) == 0

    seed = random.randrange(1 << 30)
    print("kill schedule seed", seed)
    rng = random.Random(seed)
    crashes = ["driver"] * 6 + ["broker"] * 2
    rng.shuffle(crashes)
    args = (broker.bootstrap, source, sink, group, txn_id)

    driver = Script(tmp_path, "ctp_driver.py", *args)
    restarts = 0
    for what in crashes:
        if driver.exited() is not None:
            # It crashed on its own (a broker crash makes it fail): again.
            driver.kill9()
            driver = Script(tmp_path, "ctp_driver.py", *args)
            restarts += 1
        driver.wait_for_line("driver ready")
        time.sleep(rng.uniform(0.2, 1.5))
        if what == "driver":
            driver.kill9()
            driver = Script(tmp_path, "ctp_driver.py", *args)
            restarts += 1
        else:
            broker.kill9()
            broker.start()

    # Let it finish: restart it whenever it fails, until it exits cleanly.
    deadline = time.time() + 120
    while time.time() < deadline:
        code = driver.exited()
        if code == 0:
            break
        if code is not None:
            driver.kill9()
            driver = Script(tmp_path, "ctp_driver.py", *args)
            restarts += 1
        time.sleep(0.2)
    assert driver.exited() == 0, driver.output()
    print("driver restarts:", restarts)

    out = read_all(broker.bootstrap, sink, partitions, "read_committed", expect=len(inputs))
    expected = sorted(b"out:" + v for v in inputs)
    assert len(out) == len(expected), "%d records for %d inputs" % (len(out), len(inputs))
    assert sorted(out) == expected
    # Per partition, in input order.
    by_partition = {}
    for v in out:
        p = int(v.split(b"-")[1])
        by_partition.setdefault(p, []).append(v)
    for p, values in by_partition.items():
        assert values == [b"out:in-%d-%d" % (p, i) for i in range(per_partition)]
    assert committed(broker.bootstrap, group, source, partitions) == [per_partition] * partitions
    everything = read_all(broker.bootstrap, sink, partitions, "read_uncommitted", expect=len(inputs))
    print("records written, aborted ones included:", len(everything))
    assert len(everything) >= len(inputs)


def end_offsets(bootstrap, topic, isolation):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False)
    try:
        tp = KTopicPartition(topic, 0)
        return consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def describe(bootstrap, txn_id):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_transactions([txn_id])[txn_id]
    finally:
        admin.close()


@pytest.mark.parametrize("restart", ["clean", "kill9"])
def test_open_transactions_are_aborted_after_a_broker_restart(broker_factory, tmp_path, restart):
    broker = broker_factory(FAST)
    topic = "restart-open-" + restart
    create_topic(broker.bootstrap, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    assert plain.flush(10) == 0

    dying_id = "dying-" + uuid.uuid4().hex
    holder = Script(tmp_path, "txn_holder.py", broker.bootstrap, topic, dying_id, "6000", "5")
    holder.wait_for_line("open")
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0
    # A committed transaction written behind the open one.
    committing = Producer({"bootstrap.servers": broker.bootstrap,
                           "transactional.id": "committer-" + uuid.uuid4().hex})
    committing.init_transactions(10)
    committing.begin_transaction()
    for i in range(3):
        committing.produce(topic, value=b"committed-%d" % i, partition=0)
    committing.commit_transaction(10)
    # The producer of the open transaction dies.
    holder.kill9()
    started = time.time()

    if restart == "clean":
        broker.restart()
    else:
        broker.kill9()
        broker.start()

    # Right after the restart the open transaction still holds the LSO.
    if time.time() - started < 4:
        assert end_offsets(broker.bootstrap, topic, "read_committed") == 1
        held = read_all(broker.bootstrap, topic, 1, "read_committed", timeout=2.0, quiet=1.0)
        assert held == [b"before"]
    state = describe(broker.bootstrap, dying_id)
    assert state.state.value in ("Ongoing", "PrepareAbort", "CompleteAbort")

    # Once its timeout passed the coordinator aborts it and the LSO moves on.
    wait_for(lambda: describe(broker.bootstrap, dying_id).state.value == "CompleteAbort",
             timeout=30, what="the dead producer's transaction to be aborted")
    seen = read_all(broker.bootstrap, topic, 1, "read_committed", expect=5, quiet=1.0)
    assert seen == [b"before", b"after", b"committed-0", b"committed-1", b"committed-2"]
    high = end_offsets(broker.bootstrap, topic, "read_uncommitted")
    assert end_offsets(broker.bootstrap, topic, "read_committed") == high
    everything = read_all(broker.bootstrap, topic, 1, "read_uncommitted", expect=10, quiet=1.0)
    assert [v for v in everything if v.startswith(b"open-")] == [b"open-%d" % i for i in range(5)]
    # The fenced epoch stays fenced: a new producer with the id gets the next one.
    aborted = describe(broker.bootstrap, dying_id)
    again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": dying_id})
    again.init_transactions(10)
    after = describe(broker.bootstrap, dying_id)
    assert after.producer_id == aborted.producer_id
    assert after.producer_epoch == aborted.producer_epoch + 1
    assert after.state.value == "Empty"
