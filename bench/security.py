#!/usr/bin/env python3
"""Security benchmark (issue 15), in one run so the figures compare as
ratios:

1. confluent-kafka produce and consume throughput of 1 KiB records, and
   produce latency at a fixed rate, over PLAINTEXT, SSL and SASL_SSL
   (SCRAM-SHA-512) listeners of one broker; then the same over PLAINTEXT
   and SSL with krabka-bench (raw mode, 1 GB per row), a client that does
   so little per record that the rows show the broker rather than the
   client (librdkafka's own TLS costs it more CPU than the broker's), with
   the broker's and the client's CPU seconds per GB, and (with
   --split-cores) again with the broker's threads on CPU 1 and the client
   on CPU 0;
2. SCRAM connection setup rate (connect, SaslHandshake, the two
   SaslAuthenticate round trips, one Metadata) over SASL_PLAINTEXT and
   SASL_SSL, from a client that caches its salted password so the figure
   is the broker's;
3. the cost of authorization: 1 KiB records in 16 KiB batches through a
   broker without an authorizer and one with `StandardAuthorizer` ACLs,
   alternated A/B/A/B, with confluent-kafka over SASL_PLAINTEXT and with
   krabka-bench over PLAINTEXT (principal User:ANONYMOUS), the broker's
   CPU seconds per GB beside the latter.

Build first, then run with the interop venv:

    cargo build --release -p krabka-broker -p krabka-bench
    /work/main/.venv/bin/python bench/security.py [--seconds 8] [--rounds 3] [--split-cores] [--acl-rounds 2]
"""

import argparse
import base64
import hashlib
import hmac
import os
import shutil
import socket
import resource
import ssl
import statistics
import struct
import subprocess
import tempfile
import time

from benchlib import KRABKA_BIN, WAIT, Broker, cpu_seconds, frame, free_port, read_frame
from broker import BENCH_BIN, THROUGHPUT, confluent_consume, confluent_latency, confluent_produce
from confluent_kafka.admin import AdminClient

ADMIN_PASSWORD = "admin-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_writer="writer-secret";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def certificates(directory):
    out = subprocess.run([KRABKA_BIN, "tls", "generate", "--dir", directory, "--pkcs12-password", "bench"],
                         capture_output=True, timeout=60)
    if out.returncode:
        raise RuntimeError(out.stderr.decode())
    return directory


def secure_broker(work, extra=None):
    """PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners (SCRAM-SHA-512
    and PLAIN), one PKCS#12 keystore for both TLS listeners."""
    certs = os.path.join(work, "tls")
    scram = os.path.join(work, "admin.scram")
    with open(scram, "w") as f:
        f.write("SCRAM-SHA-512=[name=admin,password=%s]\n" % ADMIN_PASSWORD)
    port = free_port()
    ports = {name: free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    settings = {
        "listeners": ",".join(
            ["PLAINTEXT://127.0.0.1:%d" % port] + ["%s://127.0.0.1:%d" % (n, p) for n, p in ports.items()]),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "krabka.sasl.scram.bootstrap.file": scram,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": os.path.join(certs, "broker.p12"),
        "ssl.keystore.password": "bench",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    }
    settings.update(extra or {})
    broker = Broker(settings, directory=work, port=port)
    broker.ports = ports
    broker.certs = certs
    return broker


def client(broker, listener, user="admin", mechanism="SCRAM-SHA-512", password=ADMIN_PASSWORD):
    if listener == "PLAINTEXT":
        return broker.bootstrap, {}
    conf = {"security.protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = os.path.join(broker.certs, "ca.pem")
    if listener.startswith("SASL"):
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return "127.0.0.1:%d" % broker.ports[listener], conf


# --- SCRAM connection setup, by hand -------------------------------------------------

def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def compact_bytes(data):
    return uvarint(len(data) + 1) + data


def read_uvarint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def authenticate_response(data):
    """(error_code, auth_bytes) of a SaslAuthenticate v2 response."""
    pos = 4  # correlation id
    _, pos = read_uvarint(data, pos)  # header tagged fields
    (error,) = struct.unpack(">h", data[pos:pos + 2])
    pos += 2
    n, pos = read_uvarint(data, pos)  # nullable compact string
    pos += max(n - 1, 0)
    n, pos = read_uvarint(data, pos)
    return error, data[pos:pos + n - 1]


class ScramClient:
    """SCRAM-SHA-512 with the salted password cached per salt."""

    def __init__(self, user, password):
        self.user = user
        self.password = password.encode()
        self.salted = {}

    def connect(self, address, context=None):
        sock = socket.create_connection(address, timeout=30)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
        mechanism = b"SCRAM-SHA-512"
        sock.sendall(frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism, False))
        read_frame(sock)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = "n=%s,r=%s" % (self.user, nonce)
        sock.sendall(frame(36, 2, 2, compact_bytes(("n,," + first_bare).encode()) + b"\x00", True))
        error, server_first = authenticate_response(read_frame(sock))
        assert error == 0, error
        fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        key = (salt, iterations)
        if key not in self.salted:
            self.salted[key] = hashlib.pbkdf2_hmac("sha512", self.password, salt, iterations)
        salted = self.salted[key]
        client_key = hmac.new(salted, b"Client Key", "sha512").digest()
        stored_key = hashlib.sha512(client_key).digest()
        without_proof = "c=biws,r=%s" % fields["r"]
        auth = ",".join([first_bare, server_first.decode(), without_proof]).encode()
        signature = hmac.new(stored_key, auth, "sha512").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        final = ("%s,p=%s" % (without_proof, proof)).encode()
        sock.sendall(frame(36, 2, 3, compact_bytes(final) + b"\x00", True))
        error, _ = authenticate_response(read_frame(sock))
        assert error == 0, error
        # One request as the authenticated principal: Metadata v9, no topics.
        sock.sendall(frame(3, 9, 4, b"\x01\x00\x00\x00\x00", True))
        read_frame(sock)
        sock.close()


def setup_rate(address, seconds, context=None):
    scram = ScramClient("admin", ADMIN_PASSWORD)
    scram.connect(address, context)  # warm: the salted password is cached
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        scram.connect(address, context)
        done += 1
    return done / (time.perf_counter() - start)


# --- the runs ---------------------------------------------------------------------------

def protocols(seconds, rounds):
    """Per listener, the median of `rounds` rounds whose listener order
    rotates; each produce row starts with the page cache's dirty pages
    written back (os.sync) and its topic is deleted after, so one row's
    writeback does not throttle the next."""
    work = tempfile.mkdtemp(prefix="krabka-bench-sec-")
    certificates(os.path.join(work, "tls"))
    broker = secure_broker(work)
    listeners = ("PLAINTEXT", "SSL", "SASL_SSL")
    runs = {listener: [] for listener in listeners}
    try:
        for r in range(rounds):
            for listener in listeners[r % 3:] + listeners[:r % 3]:
                bootstrap, extra = client(broker, listener)
                topic = "sec-%s-%d" % (listener.lower(), r)
                os.sync()
                p_rec, p_mb, sent = confluent_produce(bootstrap, topic, 1024, seconds, extra=extra)
                c_rec, c_mb = confluent_consume(bootstrap, topic, sent, extra=extra)
                rate, lat = confluent_latency(bootstrap, topic + "-lat", 1024, 5000, seconds, "1", extra=extra)
                runs[listener].append((p_rec, p_mb, c_rec, c_mb, rate, lat))
                admin = AdminClient(dict({"bootstrap.servers": bootstrap}, **extra))
                for future in admin.delete_topics([topic, topic + "-lat"], operation_timeout=30).values():
                    future.result(timeout=60)
        rows = []
        for listener in listeners:
            got = runs[listener]
            median = lambda i: statistics.median(g[i] for g in got)  # noqa: E731
            lat = tuple(statistics.median(g[5][k] for g in got) for k in range(3))
            rows.append((listener, median(0), median(1), median(2), median(3), median(4), lat))
        setups = []
        for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
            context = None
            if listener == "SASL_SSL":
                context = ssl.create_default_context(cafile=os.path.join(broker.certs, "ca.pem"))
            setups.append((listener, setup_rate(("127.0.0.1", broker.ports[listener]), seconds, context)))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return rows, setups


def child_cpu_seconds():
    """User plus system CPU seconds of this script's waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_run(args, broker_pid, gb, client_core=None):
    """One krabka-bench run: (MB/s, broker CPU-s/GB, client CPU-s/GB)."""
    pin = ["taskset", "-c", str(client_core)] if client_core is not None else []
    before, client_before = cpu_seconds(broker_pid), child_cpu_seconds()
    out = subprocess.run([*pin, BENCH_BIN, *args], check=True, capture_output=True, text=True,
                         timeout=10 * WAIT).stdout
    cpu, client_cpu = cpu_seconds(broker_pid) - before, child_cpu_seconds() - client_before
    m = THROUGHPUT.search(out.strip().splitlines()[-1])
    if not m:
        raise RuntimeError("unexpected krabka-bench output: " + out)
    return float(m.group(4)), cpu / gb, client_cpu / gb


def lean_client(rounds, records=1_000_000, split_cores=False):
    """krabka-bench raw produce then consume of `records` 1 KiB records
    per row over PLAINTEXT and SSL, order rotating per round; per listener
    the medians of (produce MB/s, broker CPU-s/GB, client CPU-s/GB,
    consume MB/s, broker CPU-s/GB, client CPU-s/GB). With `split_cores`
    every thread of the broker runs on CPU 1 and the client on CPU 0, as
    if each had a machine of its own; otherwise they share both cores."""
    work = tempfile.mkdtemp(prefix="krabka-bench-sec-")
    certificates(os.path.join(work, "tls"))
    broker = secure_broker(work)
    if split_cores:
        subprocess.run(["taskset", "-a", "-cp", "1", str(broker.process.pid)], check=True,
                       capture_output=True, timeout=WAIT)
    listeners = ("PLAINTEXT", "SSL")
    runs = {listener: [] for listener in listeners}
    gb = records * 1024 / 1e9

    def run(listener, *args):
        if listener == "PLAINTEXT":
            target = ["-b", broker.bootstrap]
        else:
            target = ["-b", "127.0.0.1:%d" % broker.ports["SSL"], "--tls-ca", os.path.join(broker.certs, "ca.pem")]
        return bench_run([args[0], "--quiet", *target, *args[1:]], broker.process.pid, gb,
                         0 if split_cores else None)

    try:
        for r in range(rounds):
            for listener in listeners[r % 2:] + listeners[:r % 2]:
                topic = "lean-%s-%d" % (listener.lower(), r)
                os.sync()
                produced = run(listener, "produce", "-t", topic, "-n", str(records), "-s", "1024", "--acks", "1")
                consumed = run(listener, "consume", "-t", topic, "-n", str(records))
                runs[listener].append(produced + consumed)
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                for future in admin.delete_topics([topic], operation_timeout=30).values():
                    future.result(timeout=60)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return [(listener, *(statistics.median(g[i] for g in runs[listener]) for i in range(6)))
            for listener in listeners]


def print_lean(lean, title, shared=True):
    """The lean-client table, and what the two processes' CPU per GB
    allows: the SSL/PLAINTEXT ratio if the broker's TLS cost nothing
    (its PLAINTEXT CPU per GB with the client's SSL CPU per GB), for
    processes that share the cores."""
    print("| %s | produce | broker / client CPU-s/GB | consume | broker / client CPU-s/GB |" % title)
    print("| --- | --- | --- | --- | --- |")
    base = lean[0]
    for listener, p_mb, p_cpu, p_client, c_mb, c_cpu, c_client in lean:
        print("| %s | %.0f MB/s (%.0f%%) | %.2f / %.2f | %.0f MB/s (%.0f%%) | %.2f / %.2f |" % (
            listener, p_mb, 100 * p_mb / base[1], p_cpu, p_client, c_mb, 100 * c_mb / base[4], c_cpu, c_client))
    if not shared:
        return
    plain, tls = lean[0], lean[1]
    for name, i in (("produce", 2), ("consume", 5)):
        both_plain = plain[i] + plain[i + 1]
        free_tls = plain[i] + tls[i + 1]
        print("%s on shared cores, if the broker's TLS were free: (%.2f + %.2f) / (%.2f + %.2f) = %.0f%% of PLAINTEXT"
              % (name, plain[i], plain[i + 1], plain[i], tls[i + 1], 100 * both_plain / free_tls))


def authorization(seconds, rounds=2, raw_records=1_000_000):
    """Produce of 1 KiB records in 16 KiB batches without and with an
    authorizer, alternating, a fresh broker each: confluent-kafka over
    SASL_PLAINTEXT (PLAIN), then krabka-bench's raw mode over PLAINTEXT
    (the principal User:ANONYMOUS, granted WRITE and CREATE), whose rows
    are bound by the broker, with its CPU per GB."""
    results = {"off": [], "on": []}
    works = []
    gb = raw_records * 1024 / 1e9
    for _ in range(rounds):
        for mode in ("off", "on"):
            work = tempfile.mkdtemp(prefix="krabka-bench-acl-")
            certificates(os.path.join(work, "tls"))
            works.append(work)
            extra = {}
            if mode == "on":
                extra = {"authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}
            broker = secure_broker(work, extra)
            try:
                bootstrap, conf = client(broker, "SASL_PLAINTEXT", "writer", "PLAIN", "writer-secret")
                if mode == "on":
                    grant_write(broker, "writer", "acl-bench")
                    grant_write(broker, "ANONYMOUS", "acl-raw")
                conf = dict(conf, **{"batch.size": 16384, "linger.ms": 5})
                _, mb, _ = confluent_produce(bootstrap, "acl-bench", 1024, seconds, extra=conf)
                os.sync()
                raw_mb, raw_cpu, _ = bench_run(
                    ["produce", "--quiet", "-b", broker.bootstrap, "-t", "acl-raw", "-n", str(raw_records),
                     "-s", "1024", "--batch-size", "16384", "--acks", "1"], broker.process.pid, gb)
                results[mode].append((mb, raw_mb, raw_cpu))
            finally:
                broker.stop()
    for work in works:
        shutil.rmtree(work, ignore_errors=True)
    return results


def grant_write(broker, user, topic):
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType

    admin = KafkaAdminClient(
        bootstrap_servers="127.0.0.1:%d" % broker.ports["SASL_PLAINTEXT"], security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret")
    try:
        for op in (ACLOperation.WRITE, ACLOperation.CREATE):
            admin.create_acls([ACL("User:%s" % user, "*", op, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))])
    finally:
        admin.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acl-rounds", type=int, default=2, help="rounds of the authorizer A/B")
    parser.add_argument("--split-cores", action="store_true",
                        help="also run the krabka-bench rows with the broker on CPU 1 and the client on CPU 0")
    args = parser.parse_args()
    rows, setups = protocols(args.seconds, args.rounds)
    print("| listener | produce | consume | latency at %s/s, acks=1: p50 / p99 / p99.9 |" % 5000)
    print("| --- | --- | --- | --- |")
    base = rows[0]
    for listener, p_rec, p_mb, c_rec, c_mb, rate, lat in rows:
        print("| %s | %.0f MB/s (%.0f%%) | %.0f MB/s (%.0f%%) | %.2f / %.2f / %.2f ms |" % (
            listener, p_mb, 100 * p_mb / base[2], c_mb, 100 * c_mb / base[4], *lat))
    print()
    print_lean(lean_client(args.rounds), "krabka-bench, 1 GB of 1 KiB records, shared cores")
    print()
    if args.split_cores:
        print_lean(lean_client(args.rounds, split_cores=True),
                   "krabka-bench, 1 GB of 1 KiB records, broker on CPU 1, client on CPU 0", shared=False)
        print()
    print("| SCRAM-SHA-512 connection setup | per second |")
    print("| --- | --- |")
    for listener, rate in setups:
        print("| %s | %.0f |" % (listener, rate))
    results = authorization(args.seconds, args.acl_rounds)
    print()
    print("| 1 KiB records, 16 KiB batches | confluent-kafka, SASL_PLAINTEXT: MB/s per round "
          "| krabka-bench, PLAINTEXT: MB/s per round | broker CPU-s/GB per round |")
    print("| --- | --- | --- | --- |")
    for mode in ("off", "on"):
        label = "no authorizer" if mode == "off" else "StandardAuthorizer with ACLs"
        got = results[mode]
        print("| %s | %s | %s | %s |" % (label, " / ".join("%.1f" % g[0] for g in got),
                                         " / ".join("%.0f" % g[1] for g in got),
                                         " / ".join("%.2f" % g[2] for g in got)))

if __name__ == "__main__":
    main()
