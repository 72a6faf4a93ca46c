#!/usr/bin/env python3
"""Cluster-mode coordinator benchmark (issue 16): what moving coordinators
into PostgreSQL costs, and how fast they move.

One run starts its own PostgreSQL server (scripts/postgres-server on a temp
directory and a free port), then measures, side by side with a single-node
broker on local disk where the figure exists there too:

* coordinator failover: three brokers; kill -9 of the broker owning a
  group's shard, and the time until an OffsetCommit succeeds on the new
  owner (the test lease settings, 2 s, and the defaults, 10 s);
* group rebalance: 4 confluent-kafka consumers joining a new group, until
  every partition is assigned once; then one leaves, until the other three
  cover everything again;
* offset commits/s on one connection to the group's coordinator: one at a
  time (as a client committing synchronously does) and 32 in flight;
* InitProducerId/s with a transactional id, one at a time, each a new id of
  a shard the broker owns;
* database round trips per produced record on a classic topic (from
  `krabka_cluster_db_round_trip_seconds_count`, without the periodic
  renewal statements): must be zero.

    cargo build --release -p krabka-broker
    /work/main/.venv/bin/python bench/cluster_coordinators.py [--rounds 3]
"""

import argparse
import os
import statistics
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import Broker, free_port, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
from conftest import PostgresServer, create_database, sql  # noqa: E402
from kafka.protocol.consumer.group import OffsetCommitResponse  # noqa: E402
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse  # noqa: E402
from raw_client import RawConnection  # noqa: E402
from test_cluster import PERIODIC_OPS, db_ops  # noqa: E402
from test_cluster_coordinators import shard_of  # noqa: E402
from test_cluster_coordinators import commit_request as offset_commit_request  # noqa: E402
from test_cluster_coordinators import shard_owner as owner_and_epoch  # noqa: E402

SHORT_LEASE = {
    "krabka.cluster.lease.duration.ms": "2000",
    "krabka.cluster.lease.renew.interval.ms": "300",
    "krabka.cluster.lease.safety.margin.ms": "500",
}


def shard_owner(db, kind, shard):
    owner = owner_and_epoch(db, kind, shard)
    return owner[0] if owner else None


def commit_request(group, offset):
    return offset_commit_request(group, "bench", 0, offset)


def commits_per_second(bootstrap, group, count, in_flight):
    with RawConnection(bootstrap) as conn:
        started = time.perf_counter()
        pending = 0
        for i in range(count):
            conn.send(commit_request(group, i))
            pending += 1
            if pending == in_flight:
                _, r = conn.receive(OffsetCommitResponse, 8)
                assert r.topics[0].partitions[0].error_code == 0, r
                pending -= 1
        while pending:
            _, r = conn.receive(OffsetCommitResponse, 8)
            assert r.topics[0].partitions[0].error_code == 0, r
            pending -= 1
        return count / (time.perf_counter() - started)


def init_producer_ids_per_second(bootstrap, ids):
    with RawConnection(bootstrap) as conn:
        started = time.perf_counter()
        for tid in ids:
            _, r = conn.call(InitProducerIdRequest[4](
                transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
                InitProducerIdResponse)
            assert r.error_code == 0, (tid, r)
        return len(ids) / (time.perf_counter() - started)


def rebalance_times(bootstrap, group, partitions=8):
    """Seconds until 4 new members cover every partition once, then until 3
    do after one leaves."""
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
                 for _ in range(4)]

    def covered(members):
        for c in members:
            c.poll(0.05)
        parts = sorted(tp.partition for c in members for tp in c.assignment())
        return parts == list(range(partitions))

    try:
        started = time.perf_counter()
        for c in consumers:
            c.subscribe(["bench"])
        wait_until(lambda: covered(consumers), "4 members to cover the topic", step=0)
        joined = time.perf_counter() - started
        started = time.perf_counter()
        consumers.pop().close()
        wait_until(lambda: covered(consumers), "3 members to cover the topic", step=0)
        left = time.perf_counter() - started
        return joined, left
    finally:
        for c in consumers:
            c.close()


def create_bench_topic(bootstrap, brokers_to_see, partitions=8):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(30)
    for b in brokers_to_see:
        wait_until(lambda b=b: "bench" in AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics,
                   "the topic on " + b, step=0.05)


class Cluster:
    def __init__(self, server, lease):
        self.db = create_database(server.url(), "bench_%d" % int(time.time() * 1000))
        self.lease = lease
        self.metrics = {n: free_port() for n in (1, 2, 3)}
        self.brokers = {n: self.start(n) for n in (1, 2, 3)}
        self.wait_spread()

    def start(self, node, directory=None):
        settings = {"node.id": str(node), "krabka.cluster.database.url": self.db,
                    "krabka.metrics.listener": "127.0.0.1:%d" % self.metrics[node]}
        settings.update(self.lease)
        return Broker(settings, prefix="krabka-bench-cluster-", directory=directory)

    def wait_spread(self):
        def spread():
            rows = sql(self.db, "SELECT owner, count(*) FROM shard_leases WHERE kind <> 'controller' "
                                "AND expires_at > now() AND owner IS NOT NULL GROUP BY owner")
            return len(rows) == 3 and sum(int(c) for _, c in rows) == 100
        wait_until(spread, "the shards to spread over three brokers", step=0.05)

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers.values())

    def stop(self):
        for b in self.brokers.values():
            b.stop()


def failover_seconds(cluster, group):
    """kill -9 of the group's coordinator to the first successful commit on
    its new owner; the victim is restarted afterwards."""
    shard = shard_of(group)
    victim = shard_owner(cluster.db, "__consumer_offsets", shard)
    victim_broker = cluster.brokers[victim]
    killed = time.perf_counter()
    victim_broker.process.kill()
    victim_broker.process.wait()
    seconds = None
    while seconds is None:
        assert time.perf_counter() - killed < 120, "no new owner within 120 s"
        owner = shard_owner(cluster.db, "__consumer_offsets", shard)
        if owner in (None, victim):
            time.sleep(0.01)
            continue
        try:
            with RawConnection(cluster.brokers[owner].bootstrap, timeout=10) as conn:
                _, r = conn.call(commit_request(group, 1), OffsetCommitResponse)
            if r.topics[0].partitions[0].error_code == 0:
                seconds = time.perf_counter() - killed
        except OSError:
            pass
        time.sleep(0.005)
    # Back with the same data directory once its registration lapsed.
    directory = victim_broker.dir
    victim_broker.log.close()
    wait_until(lambda: not sql(cluster.db, "SELECT 1 FROM brokers WHERE node_id = %d "
                                           "AND lease_expires_at > now()" % victim),
               "the victim's registration to lapse", step=0.05)
    cluster.brokers[victim] = cluster.start(victim, directory=directory)
    cluster.brokers[victim].owns_dir = True  # removed on stop, as the first one would have been
    cluster.wait_spread()
    return seconds


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--inits", type=int, default=500)
    args = parser.parse_args()

    server = PostgresServer()
    server.start()
    results = {}
    try:
        # Failover under both lease settings.
        for name, lease in (("2 s lease (tests)", SHORT_LEASE), ("10 s lease (defaults)", {})):
            cluster = Cluster(server, lease)
            try:
                create_bench_topic(cluster.bootstrap, [b.bootstrap for b in cluster.brokers.values()])
                times = [failover_seconds(cluster, "failover-%d" % r) for r in range(args.rounds)]
                results["failover, " + name] = times
                print("failover, %s: %s s" % (name, ", ".join("%.2f" % t for t in times)), flush=True)
            finally:
                cluster.stop()

        # Per-broker costs: cluster (short lease) against a single node.
        cluster = Cluster(server, SHORT_LEASE)
        single = Broker({}, prefix="krabka-bench-single-")
        try:
            create_bench_topic(cluster.bootstrap, [b.bootstrap for b in cluster.brokers.values()])
            create_bench_topic(single.bootstrap, [single.bootstrap])
            group = "commits"
            owner = cluster.brokers[shard_owner(cluster.db, "__consumer_offsets", shard_of(group))]
            node = next(n for n, b in cluster.brokers.items() if b is owner)
            for label, target in (("cluster", owner.bootstrap), ("single", single.bootstrap)):
                for in_flight in (1, 32):
                    rates = [commits_per_second(target, group, args.commits, in_flight)
                             for _ in range(args.rounds)]
                    results["commits/s %s, %d in flight" % (label, in_flight)] = rates
                    print("commits/s, %s, %d in flight: %s" % (
                        label, in_flight, ", ".join("%.0f" % r for r in rates)), flush=True)
            owned = [r[0] for r in sql(cluster.db, "SELECT shard FROM shard_leases WHERE "
                                                   "kind = '__transaction_state' AND owner = %d" % node)]
            owned = {int(s) for s in owned}
            ids = [t for t in ("txn-%d" % i for i in range(100000)) if shard_of(t) in owned]
            for label, target in (("cluster", owner.bootstrap), ("single", single.bootstrap)):
                rates = []
                for r in range(args.rounds):
                    chunk = ids[r * args.inits:(r + 1) * args.inits]
                    rates.append(init_producer_ids_per_second(target, ["%s-%s" % (label, t) if label == "single"
                                                                       else t for t in chunk]))
                results["InitProducerId/s %s" % label] = rates
                print("InitProducerId/s, %s: %s" % (label, ", ".join("%.0f" % r for r in rates)), flush=True)
            for label, target in (("cluster", cluster.bootstrap), ("single", single.bootstrap)):
                times = [rebalance_times(target, "rebalance-%s-%d" % (label, r)) for r in range(args.rounds)]
                results["rebalance join %s" % label] = [t[0] for t in times]
                results["rebalance leave %s" % label] = [t[1] for t in times]
                print("rebalance, %s: join %s s, leave %s s" % (
                    label, ", ".join("%.2f" % t[0] for t in times), ", ".join("%.2f" % t[1] for t in times)),
                    flush=True)

            # Database round trips per produced record.
            before = {n: db_ops(p) for n, p in cluster.metrics.items()}
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
            records = 200000
            for i in range(records):
                producer.produce("bench", value=b"x" * 100, partition=i % 8)
                if i % 10000 == 0:
                    producer.poll(0)
            assert producer.flush(60) == 0
            after = {n: db_ops(p) for n, p in cluster.metrics.items()}
            extra = 0
            for n in after:
                for op, v in after[n].items():
                    if op not in PERIODIC_OPS:
                        extra += v - before[n].get(op, 0)
            results["db round trips per record"] = [extra / records]
            print("database round trips during %d produced records (besides renewals): %d" % (records, extra))
        finally:
            single.stop()
            cluster.stop()
    finally:
        server.remove()

    print("\n| measure | median | rounds |\n| --- | --- | --- |")
    for k, v in results.items():
        print("| %s | %.3f | %s |" % (k, median(v), ", ".join("%.3f" % x for x in v)))


if __name__ == "__main__":
    main()
