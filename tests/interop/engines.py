"""The engines the shared scenarios (test_scenarios.py) run against.

One scenario, every engine: a scenario is written once against an `Engine`
and runs on each of them, so single-node and cluster mode cannot drift
apart. `single` is one broker on local disk; `cluster3` is three brokers
sharing one PostgreSQL database, whose classic partitions each live on one
of them. Both get the same broker settings (fast group and transaction
timers, tiered storage on a filesystem remote tier shared by every broker
of the engine, as an object store would be).
"""

import os
import re
import time

from confluent_kafka.admin import AdminClient

from helpers import create_topic

# Groups rebalance without the initial delay; timed-out transactions are
# aborted within half a second; the remote log manager copies every 300 ms.
ENGINE_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "300",
}


def wait_until(what, check, timeout=30, interval=0.1, context=None):
    """Polls `check` until it returns something truthy (returned), or fails
    naming `what` after `timeout` seconds (with `context()` appended, to say
    what the brokers were doing)."""
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s%s"
                                 % (timeout, what, "\n" + context() if context else ""))
        time.sleep(interval)


def metadata(bootstrap):
    """Metadata of every topic (asking for one by name would auto-create it)."""
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)


class Engine:
    """Brokers that together serve one cluster, and what scenarios ask of them."""

    def __init__(self, name, brokers, remote_dir, database_url=None):
        self.name = name
        self.brokers = brokers
        self.remote_dir = str(remote_dir)
        self.database_url = database_url

    def metadata_source_args(self):
        """Where `krabka remote-metadata` reads this engine's remote log
        metadata: a broker's topic, or in a cluster the database."""
        if self.database_url:
            return ["--database-url", self.database_url]
        return ["--bootstrap", self.brokers[0].bootstrap]

    @property
    def bootstrap(self):
        """Every broker's address, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers)

    def bootstrap_of(self, i):
        """One broker's address, round robin: to spread clients over brokers."""
        return self.brokers[i % len(self.brokers)].bootstrap

    def wait_for_members(self):
        """Until every broker lists all of them."""
        ports = sorted(b.port for b in self.brokers)
        for b in self.brokers:
            wait_until("%s to list %d brokers" % (b.bootstrap, len(ports)),
                       lambda b=b: sorted(m.port for m in metadata(b.bootstrap).brokers.values()) == ports)

    def create_topic(self, name, partitions=1, config=None):
        """Creates the topic and waits until every broker names a leader for
        each of its partitions; returns {partition: leader node id}."""
        create_topic(self.bootstrap, name, partitions=partitions, config=config)
        views = [
            wait_until("%s to see %s with its leaders" % (b.bootstrap, name),
                       lambda b=b: self._leaders(b.bootstrap, name, partitions))
            for b in self.brokers
        ]
        assert all(v == views[0] for v in views), views
        return views[0]

    @staticmethod
    def _leaders(bootstrap, topic, partitions):
        t = metadata(bootstrap).topics.get(topic)
        if t is None or t.error is not None or len(t.partitions) != partitions:
            return None
        if any(p.error is not None or p.leader < 0 for p in t.partitions.values()):
            return None
        return {p.id: p.leader for p in t.partitions.values()}

    def leaders(self, topic):
        """{partition: leader node id} as the first broker sees it."""
        t = metadata(self.brokers[0].bootstrap).topics[topic]
        return {p.id: p.leader for p in t.partitions.values()}

    def partition_dir(self, topic, partition):
        """The local directory of a classic partition: on its one broker."""
        found = [
            os.path.join(b.data_dir, "%s-%d" % (topic, partition)) for b in self.brokers
            if os.path.isdir(os.path.join(b.data_dir, "%s-%d" % (topic, partition)))
        ]
        assert len(found) == 1, "partition %s-%d on %d brokers: %s" % (topic, partition, len(found), found)
        return found[0]

    def warnings(self, last=3):
        """The last WARN and ERROR lines of each broker's log."""
        out = []
        for b in self.brokers:
            text = re.sub(r"\x1b\[[0-9;]*m", "", b.log())  # tracing's colours
            lines = [line for line in text.splitlines() if " WARN " in line or " ERROR " in line]
            out += ["%s: %s" % (b.bootstrap, line) for line in lines[-last:]]
        return "\n".join(out) or "(no warnings)"
