#!/usr/bin/env python3
"""Consumer-group benchmark (issue 4): rebalance time of a 10-member group
after one member leaves, and offset-commit throughput.

Starts the release broker (`target/release/krabka`, or $KRABKA_BIN) on a
free 127.0.0.1 port with a temporary data directory, runs both measurements
with confluent-kafka (librdkafka) clients and stops the broker. Every wait
is bounded, so a broken broker makes the script fail instead of hanging.

    /work/main/.venv/bin/python bench/groups.py [--rounds 3] [--commit-seconds 5]

Rebalance time: from the moment the leaving member starts `close()` (which
sends LeaveGroup) until the nine remaining members together own every
partition again, each exactly once, as seen by their assignment callbacks.
Measured for the classic protocol (eager `range`, heartbeat.interval.ms) and
for KIP-848 (`group.protocol=consumer`, broker-side
`group.consumer.heartbeat.interval.ms`), both 500 ms unless --heartbeat-ms.

Commit throughput: synchronous OffsetCommit of one partition per request,
one committer, then four committers in parallel (aggregate).
"""

import argparse
import os
import statistics
import sys
import threading
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import KRABKA_BIN, WAIT, Broker, wait_until

MEMBERS = 10
PARTITIONS = 20


def start_broker(heartbeat_ms):
    """A release broker tuned so only the measured rebalances are timed."""
    return Broker(
        {
            # Only the first rebalance of a new group waits for this; the
            # measured rebalances (a member leaving) never do.
            "group.initial.rebalance.delay.ms": "0",
            "group.consumer.heartbeat.interval.ms": str(heartbeat_ms),
        },
        prefix="krabka-bench-groups-",
    )


class Member(threading.Thread):
    """A group member that polls and tracks what it owns."""

    def __init__(self, bootstrap, group, topic, name, protocol, heartbeat_ms):
        super().__init__(daemon=True, name=name)
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
        }
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": heartbeat_ms})
        self.consumer = Consumer(conf)
        self.topic = topic
        self.lock = threading.Lock()
        self.owned = set()
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def _assign(self, consumer, partitions):
        with self.lock:
            self.owned |= {p.partition for p in partitions}

    def _revoke(self, consumer, partitions):
        with self.lock:
            self.owned -= {p.partition for p in partitions}

    def run(self):
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke)
        while not self.stopping.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()
        self.closed.set()

    def partitions(self):
        with self.lock:
            return set(self.owned)

    def stop(self):
        self.stopping.set()
        self.closed.wait(WAIT)


def balanced(members):
    """Every partition owned exactly once and every member owning some (with
    20 partitions and 9 or 10 members, a member with none is still waiting
    for its share)."""
    owned = [m.partitions() for m in members]
    flat = [p for ps in owned for p in ps]
    return all(owned) and len(flat) == PARTITIONS and set(flat) == set(range(PARTITIONS))


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(WAIT)


def rebalance_after_leave(bootstrap, protocol, rounds, heartbeat_ms):
    topic, group = "bench-rebalance-" + protocol, "bench-group-" + protocol
    create_topic(bootstrap, topic, PARTITIONS)
    members = [Member(bootstrap, group, topic, "m%d" % i, protocol, heartbeat_ms) for i in range(MEMBERS)]
    for m in members:
        m.start()
    times = []
    try:
        for r in range(rounds):
            wait_until(lambda: balanced(members), "%d members to share %d partitions" % (len(members), PARTITIONS))
            time.sleep(1)  # let the group settle into Stable
            leaving = members.pop(0)
            start = time.monotonic()
            leaving.stopping.set()
            done = wait_until(lambda: balanced(members), "the remaining members to take over")
            times.append(done - start)
            leaving.closed.wait(WAIT)
            newcomer = Member(bootstrap, group, topic, "m%d" % (MEMBERS + r), protocol, heartbeat_ms)
            newcomer.start()
            members.append(newcomer)
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.closed.wait(WAIT)
    return times


def commit_throughput(bootstrap, committers, seconds):
    topic = "bench-commits"
    try:
        create_topic(bootstrap, topic, 8)
    except Exception:
        pass  # created by an earlier pass
    counts = [0] * committers
    errors = []

    def run(i):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commit-%d" % i, "enable.auto.commit": False})
        try:
            deadline = time.monotonic() + seconds
            n = 0
            while time.monotonic() < deadline:
                n += 1
                c.commit(offsets=[TopicPartition(topic, i % 8, n)], asynchronous=False)
            counts[i] = n
        except Exception as e:  # reported after the threads finish
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(committers)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + WAIT)
    elapsed = time.monotonic() - start
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="leaves measured per protocol")
    parser.add_argument("--commit-seconds", type=float, default=5.0, help="duration of each commit run")
    parser.add_argument(
        "--heartbeat-ms",
        type=int,
        default=500,
        help="heartbeat.interval.ms (classic) and group.consumer.heartbeat.interval.ms (KIP-848)",
    )
    args = parser.parse_args()
    if not os.path.exists(KRABKA_BIN):
        sys.exit("no broker binary at %s: cargo build --release -p krabka-broker" % KRABKA_BIN)
    broker = start_broker(args.heartbeat_ms)
    try:
        for protocol in ("classic", "consumer"):
            times = rebalance_after_leave(broker.bootstrap, protocol, args.rounds, args.heartbeat_ms)
            print(
                "rebalance after one of %d members leaves (%s, heartbeat %d ms): median %.0f ms, min %.0f ms, max %.0f ms (%s)"
                % (
                    MEMBERS,
                    protocol,
                    args.heartbeat_ms,
                    statistics.median(times) * 1000,
                    min(times) * 1000,
                    max(times) * 1000,
                    ", ".join("%.0f" % (t * 1000) for t in times),
                ),
                flush=True,
            )
        for committers in (1, 4):
            rate = commit_throughput(broker.bootstrap, committers, args.commit_seconds)
            print("synchronous commits, %d committer(s): %.0f commits/s" % (committers, rate), flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
