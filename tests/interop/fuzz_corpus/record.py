"""Records the corpus of real client request frames the frame fuzzer mutates
(tests/interop/test_fuzz_frames.py).

Run once against a release binary, then commit the frames:

    KRABKA_BIN=target/release/krabka .venv/bin/python tests/interop/fuzz_corpus/record.py [--clients java]

A broker is started advertising the address of a small recording proxy, so
every connection of confluent-kafka (librdkafka), kafka-python and the Java
client (kafka-clients, running tests/compat/java/Compat.java's scenarios:
produce, fetch, classic and KIP-848 groups, transactions, exactly-once,
admin APIs) goes through the proxy; each request frame a client sends is
saved (without its size prefix) as `frames/<api>-v<version>-<client>-<n>.bin`,
at most a few per (API, version, client), and none over MAX_FRAME bytes (the
corpus stays small; the fuzzer grows frames itself). `--clients` records
only those clients and replaces only their frames. The Java client needs
Java and Maven (`scripts/test` installs them); its jars come from Maven
Central through tests/compat/kafka_ref.py.
"""

import collections
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

KEEP_PER_KIND = 3
MAX_FRAME = 16 * 1024
CLIENTS = ("confluent", "kafkapython", "java")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RecordingProxy:
    """Forwards 127.0.0.1:<port> to the broker and records client frames."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.port = free_port()
        self.client = "unknown"
        self.frames = []
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                down.close()
                continue
            client = self.client
            threading.Thread(target=self._requests, args=(down, up, client), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, down), daemon=True).start()

    def _pipe(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _requests(self, down, up, client):
        buf = b""
        try:
            while True:
                data = down.recv(65536)
                if not data:
                    break
                up.sendall(data)
                buf += data
                while len(buf) >= 4:
                    (size,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + size:
                        break
                    with self.lock:
                        self.frames.append((client, buf[4:4 + size]))
                    buf = buf[4 + size:]
        except OSError:
            pass
        for s in (down, up):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def confluent_workload(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions, NewTopic, OffsetSpec)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("c-topic", 2, 1), NewTopic("c-doomed", 1, 1)])
    for f in futures.values():
        f.result(timeout=30)
    admin.create_partitions([NewPartitions("c-topic", 3)])["c-topic"].result(timeout=30)
    resource = ConfigResource("topic", "c-topic")
    admin.describe_configs([resource])[resource].result(timeout=30)
    entry = ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
    altered = ConfigResource("topic", "c-topic", incremental_configs=[entry])
    for f in admin.incremental_alter_configs([altered]).values():
        f.result(timeout=30)
    admin.describe_cluster().result(timeout=30)
    for f in admin.describe_topics(TopicCollection(["c-topic"])).values():
        f.result(timeout=30)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(200):
        producer.produce("c-topic", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                         headers=[("h", b"x")])
    producer.flush(30)
    plain = Producer({"bootstrap.servers": bootstrap, "acks": 0, "compression.type": "zstd"})
    for i in range(50):
        plain.produce("c-topic", value=b"zstd-%d" % i, partition=0)
    plain.flush(30)

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "c-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce("c-topic", value=b"t%d" % i, partition=1)
    txn.commit_transaction(30)
    txn.begin_transaction()
    txn.produce("c-topic", value=b"aborted", partition=1)
    txn.abort_transaction(30)
    # A consume-transform-produce step: AddOffsetsToTxn and TxnOffsetCommit.
    holder = Consumer({"bootstrap.servers": bootstrap, "group.id": "c-txn-group"})
    txn.begin_transaction()
    txn.produce("c-topic", value=b"transformed", partition=2)
    txn.send_offsets_to_transaction([TopicPartition("c-topic", 0, 3)],
                                    holder.consumer_group_metadata(), 30)
    txn.commit_transaction(30)
    holder.close()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "c-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe(["c-topic"])
    got = 0
    deadline = time.time() + 30
    while got < 100 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition("c-topic", 0)], timeout=10)
    consumer.close()
    try:
        nextgen = Consumer({"bootstrap.servers": bootstrap, "group.id": "c-group-848",
                            "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        nextgen.subscribe(["c-topic"])
        deadline = time.time() + 15
        while time.time() < deadline:
            if nextgen.poll(0.5) is not None:
                break
        nextgen.close()
    except Exception as e:  # noqa: BLE001 - the corpus is best effort
        print("KIP-848 consumer:", e)

    admin.list_consumer_groups().result(timeout=30)
    admin.describe_consumer_groups(["c-group"])["c-group"].result(timeout=30)
    list_offsets = {TopicPartition("c-topic", 0): OffsetSpec.latest(),
                    TopicPartition("c-topic", 1): OffsetSpec.earliest()}
    for f in admin.list_offsets(list_offsets).values():
        f.result(timeout=30)
    admin.delete_records([TopicPartition("c-topic", 0, 5)])
    admin.delete_consumer_groups(["c-group"])["c-group"].result(timeout=30)
    admin.delete_topics(["c-doomed"])["c-doomed"].result(timeout=30)
    time.sleep(1)


def kafka_python_workload(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("p-topic", 2, 1), NewTopic("p-doomed", 1, 1)])
    admin.create_partitions({"p-topic": NewPartitions(3)})
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "p-topic")])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "p-topic", configs={"retention.ms": "3600000"})])
    admin.describe_cluster()
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(100):
        producer.send("p-topic", key=b"k", value=b"p%d" % i, partition=i % 3)
    producer.flush(30)
    producer.close()
    idem = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    idem.send("p-topic", value=b"idempotent", partition=0)
    idem.flush(30)
    idem.close()
    consumer = KafkaConsumer("p-topic", bootstrap_servers=bootstrap, group_id="p-group",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    for n, _ in enumerate(consumer):
        if n >= 50:
            break
    consumer.commit()
    consumer.close()
    from kafka.structs import TopicPartition
    for name, call in [
        ("list groups", lambda: admin.list_groups()),
        ("describe groups", lambda: admin.describe_groups(["p-group"])),
        ("group offsets", lambda: admin.list_group_offsets("p-group")),
        ("delete group offsets", lambda: admin.delete_group_offsets("p-group", [TopicPartition("p-topic", 0)])),
        ("partition offsets", lambda: admin.list_partition_offsets({TopicPartition("p-topic", 0): -1})),
        ("log dirs", lambda: admin.describe_log_dirs()),
        ("delete records", lambda: admin.delete_records({TopicPartition("p-topic", 0): 3})),
        ("describe producers", lambda: admin.describe_producers([TopicPartition("c-topic", 1)])),
        ("list transactions", lambda: admin.list_transactions()),
        ("describe transactions", lambda: admin.describe_transactions(["c-txn"])),
        ("delete groups", lambda: admin.delete_groups(["p-group"])),
        ("delete topics", lambda: admin.delete_topics(["p-doomed"])),
    ]:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the corpus is best effort
            print("kafka-python %s: %r" % (name, e))
    admin.close()


def java_workload(bootstrap, work):
    """Compat.java's scenarios with the newest kafka-clients, through the proxy."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "compat"))
    import kafka_ref

    cp = kafka_ref.classpath("client", kafka_ref.KAFKA_VERSION)
    classes = os.path.join(work, "classes")
    os.makedirs(classes)
    javac = os.path.join(os.path.dirname(os.path.realpath(kafka_ref.java())), "javac")
    source = os.path.join(HERE, "..", "..", "compat", "java", "Compat.java")
    subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", classes, "-cp", cp, source],
                   check=True, timeout=600)
    out = os.path.join(work, "java-transcript.txt")
    proc = subprocess.run(
        [kafka_ref.java(), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", cp + os.pathsep + classes, "Compat", "--bootstrap", bootstrap, "--out", out,
         "--prefix", "fuzz"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    if proc.returncode != 0:
        print("Compat.java exited with %d:\n%s" % (proc.returncode, proc.stdout[-4000:]))


def main():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help="comma-separated, of %s; only their frames are replaced" % ", ".join(CLIENTS))
    clients = parser.parse_args().clients.split(",")
    assert set(clients) <= set(CLIENTS), clients
    binary = os.environ.get("KRABKA_BIN", os.path.join(HERE, "../../../target/release/krabka"))
    work = tempfile.mkdtemp(prefix="krabka-corpus-")
    broker_port = free_port()
    proxy = RecordingProxy(broker_port)
    log = open(os.path.join(work, "broker.log"), "wb")
    broker = subprocess.Popen([
        binary, "serve",
        "--override", "listeners=PLAINTEXT://127.0.0.1:%d" % broker_port,
        "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:%d" % proxy.port,
        "--override", "log.dirs=%s" % os.path.join(work, "data"),
        "--override", "krabka.metrics.listener=",
        "--override", "group.initial.rebalance.delay.ms=0",
    ], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", broker_port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline, "broker did not start"
                time.sleep(0.1)
        bootstrap = "127.0.0.1:%d" % proxy.port
        if "confluent" in clients:
            proxy.client = "confluent"
            confluent_workload(bootstrap)
        if "kafkapython" in clients:
            proxy.client = "kafkapython"
            try:
                kafka_python_workload(bootstrap)
            except Exception as e:  # noqa: BLE001 - keep what was recorded
                print("kafka-python workload stopped: %r" % e)
        if "java" in clients:
            proxy.client = "java"
            java_workload(bootstrap, work)
        time.sleep(1)
    finally:
        broker.terminate()
        broker.wait(30)
        log.close()
    out = os.path.join(HERE, "frames")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.endswith(".bin") and name.rsplit("-", 2)[-2] in clients:
            os.remove(os.path.join(out, name))
    kept = collections.Counter()
    with proxy.lock:
        frames = list(proxy.frames)
    for client, frame in frames:
        if len(frame) < 4 or len(frame) > MAX_FRAME:
            continue
        api, version = struct.unpack(">hh", frame[:4])
        kind = (api, version, client)
        if kept[kind] >= KEEP_PER_KIND:
            continue
        with open(os.path.join(out, "%02d-v%d-%s-%d.bin" % (api, version, client, kept[kind])), "wb") as f:
            f.write(frame)
        kept[kind] += 1
    apis = sorted({k[0] for k in kept})
    print("recorded %d frames of %d APIs: %s" % (sum(kept.values()), len(apis), apis))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
