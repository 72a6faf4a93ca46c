"""Apache Kafka itself, from Maven Central, for side-by-side runs with Krabka.

Used by the compatibility tests (tests/compat) and meant for the benchmark
against Kafka (bench/): it resolves Kafka's jars with Maven into a local
repository under the project (``tests/compat/.m2``, or
``$KRABKA_COMPAT_M2``), formats a fresh KRaft log directory with Kafka's own
``StorageTool`` and runs one broker+controller node (KRaft combined mode) on
free 127.0.0.1 ports until it is stopped.

    from kafka_ref import KafkaRef

    with KafkaRef(workdir) as kafka:      # formats, starts, waits until ready
        run_clients(kafka.bootstrap)      # "127.0.0.1:PORT"
                                          # stopped (SIGTERM, then SIGKILL)

It also runs Kafka's command-line tools (``run_tool``) and gives the Java
client's classpath for a client version (``classpath("client", "3.9.1")``).

From a shell (the benchmark's way): ``python3 tests/compat/kafka_ref.py serve
--dir DIR`` prints ``bootstrap=127.0.0.1:PORT`` once Kafka is ready and keeps
it running until SIGTERM/SIGINT; ``classpath kafka`` prints the classpath.

Every wait has a deadline and fails with Kafka's log tail, since a JVM on a
loaded two-core machine can take tens of seconds to start.
"""

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
MAVEN_DIR = os.path.join(HERE, "maven")
CACHE_DIR = os.path.join(HERE, ".cache")

# The Kafka release the reference broker, its tools and the newest Java
# client come from, and the 3.x client the tests also drive.
KAFKA_VERSION = os.environ.get("KRABKA_COMPAT_KAFKA_VERSION", "4.4.0")
KAFKA_3X_VERSION = os.environ.get("KRABKA_COMPAT_KAFKA_3X_VERSION", "3.9.1")

# Broker settings the tests give both Kafka and Krabka, so their answers
# compare: the first rebalance of a new group is not delayed by 3 s.
SHARED_BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
}

LOG4J2_PROPERTIES = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.err.ref = STDERR
"""


def m2_repo():
    """The Maven repository the jars are resolved into (under the project)."""
    return os.environ.get("KRABKA_COMPAT_M2", os.path.join(HERE, ".m2"))


def _load_ports():
    """tests/interop/ports.py, one module for every test server's ports
    (registered as `ports`, which the interop conftest imports)."""
    if "ports" not in sys.modules:
        import importlib.util
        path = os.path.join(os.path.dirname(HERE), "interop", "ports.py")
        spec = importlib.util.spec_from_file_location("ports", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["ports"] = module
    return sys.modules["ports"]


free_port = _load_ports().free_port


def classpath(kind, version=KAFKA_VERSION, timeout=900):
    """The resolved classpath of ``maven/<kind>/pom.xml`` at ``version``.

    ``kind`` is ``client`` (kafka-clients and a logger) or ``kafka`` (the
    broker and the tools). Maven runs once per kind and version; the answer
    is cached in ``tests/compat/.cache``.

    Raises RuntimeError with Maven's output when resolution fails.
    """
    os.makedirs(CACHE_DIR, exist_ok=True)
    out = os.path.join(CACHE_DIR, "cp-%s-%s.txt" % (kind, version))
    if not os.path.exists(out) or not _jars_present(out):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("mvn not found: install Maven (scripts/test does: apt-get install maven)")
        tmp = out + ".tmp"
        cmd = [
            mvn, "-B", "-q", "-f", os.path.join(MAVEN_DIR, kind, "pom.xml"),
            "-Dmaven.repo.local=" + m2_repo(), "-Dkafka.version=" + version,
            "dependency:build-classpath", "-Dmdep.outputFile=" + tmp,
        ]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        if proc.returncode != 0 or not os.path.exists(tmp):
            raise RuntimeError(
                "Maven could not resolve %s %s:\n%s" % (kind, version, proc.stdout.decode("utf-8", "replace")[-5000:])
            )
        os.replace(tmp, out)
    with open(out) as f:
        return f.read().strip()


def _jars_present(cp_file):
    with open(cp_file) as f:
        entries = [e for e in f.read().strip().split(os.pathsep) if e]
    return bool(entries) and all(os.path.exists(e) for e in entries)


def java():
    """The `java` launcher (JAVA_HOME first)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("java not found: install a JDK 17+ (scripts/test does: apt-get install openjdk-17-jdk-headless)")
    return found


def log4j2_config(level="WARN"):
    """A log4j2 configuration file sending Kafka's logs at ``level`` to stderr."""
    os.makedirs(CACHE_DIR, exist_ok=True)
    path = os.path.join(CACHE_DIR, "log4j2-%s.properties" % level.lower())
    text = LOG4J2_PROPERTIES.format(level=level)
    if not os.path.exists(path) or open(path).read() != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return path


# Short-lived tool JVMs start faster with the C1 compiler only and a small heap.
TOOL_JVM_OPTS = ["-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"]


def run_tool(main_class, args, timeout=120, input=None, version=KAFKA_VERSION, check=True, env=None,
             jvm_opts=None):
    """Runs one of Kafka's command-line tools (``main_class``) with ``args``.

    ``jvm_opts`` replaces the quick-start JVM options (the benchmark's load
    generators want the full JIT and a larger heap).

    Returns the CompletedProcess (``stdout``/``stderr`` as text). With
    ``check``, a non-zero exit raises RuntimeError with both streams.
    """
    cmd = [java()] + (TOOL_JVM_OPTS if jvm_opts is None else list(jvm_opts)) + [
        "-Dlog4j2.configurationFile=" + log4j2_config("WARN"),
        "-cp", classpath("kafka", version), main_class,
    ] + list(args)
    try:
        proc = subprocess.run(
            cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=timeout, text=True, env=env,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError("%s %s did not finish within %ss:\nstdout: %s\nstderr: %s" % (
            main_class, " ".join(args), timeout, e.stdout, e.stderr)) from None
    if check and proc.returncode != 0:
        raise RuntimeError("%s %s exited %s:\nstdout: %s\nstderr: %s" % (
            main_class, " ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def random_cluster_id():
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.
    Never one that starts with "-", which `kafka-storage format -t` would
    take for an option (Kafka's own Uuid.randomUuid draws again too)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaRef:
    """One Apache Kafka node (KRaft broker+controller) in ``workdir``.

    ``overrides`` adds or replaces server.properties entries;
    ``heap`` is the JVM's -Xmx/-Xms.
    """

    def __init__(self, workdir, overrides=None, version=KAFKA_VERSION, heap="768m", jvm_opts=None):
        self.workdir = os.path.abspath(str(workdir))
        self.version = version
        self.heap = heap
        self.jvm_opts = list(jvm_opts or [])
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.data_dir = os.path.join(self.workdir, "kafka-data")
        self.config_path = os.path.join(self.workdir, "server.properties")
        self.log_path = os.path.join(self.workdir, "kafka.log")
        self.settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:%d" % self.controller_port,
            "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (self.port, self.controller_port),
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.data_dir,
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        self.settings.update(SHARED_BROKER_SETTINGS)
        self.settings.update(overrides or {})
        self.process = None
        self._log_file = None

    @property
    def bootstrap(self):
        """``127.0.0.1:PORT`` of the PLAINTEXT listener."""
        return "127.0.0.1:%d" % self.port

    def format(self, timeout=180):
        """Writes server.properties and formats the log dir (StorageTool)."""
        os.makedirs(self.workdir, exist_ok=True)
        with open(self.config_path, "w") as f:
            for key, value in self.settings.items():
                f.write("%s=%s\n" % (key, value))
        run_tool(
            "kafka.tools.StorageTool",
            ["format", "-t", random_cluster_id(), "-c", self.config_path, "--ignore-formatted"],
            timeout=timeout, version=self.version,
        )

    def start(self, timeout=240):
        """Formats, starts Kafka, and waits until it has started and listens.

        Raises RuntimeError with the log's tail if it exits or the deadline
        passes first.
        """
        assert self.process is None, "already running"
        self.format()
        self._log_file = open(self.log_path, "ab")
        cmd = [java(), "-Xmx" + self.heap, "-Xms" + self.heap, "-XX:+UseG1GC",
               "-Djava.awt.headless=true",
               "-Dlog4j2.configurationFile=" + log4j2_config("INFO")] + self.jvm_opts + [
            "-cp", classpath("kafka", self.version), "kafka.Kafka", self.config_path,
        ]
        self.process = subprocess.Popen(
            cmd, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self._closed()
                raise RuntimeError("Kafka exited with %s before it was ready:\n%s" % (code, self.log()))
            if "Kafka Server started" in self.log(200000) and self._listening():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("Kafka did not start within %ss:\n%s" % (timeout, self.log()))

    def _listening(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self, timeout=60):
        """SIGTERM, a clean shutdown within ``timeout``, else SIGKILL."""
        if self.process is None:
            return None
        try:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait(timeout=30)
        finally:
            self._closed()

    def pid(self):
        """The JVM's process id while it runs (for /proc CPU and RSS figures)."""
        return self.process.pid if self.process is not None else None

    def _closed(self):
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log(self, limit=20000):
        """The last ``limit`` characters of Kafka's log."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run Kafka until SIGTERM/SIGINT")
    serve.add_argument("--dir", required=True, help="work directory (config, data, log)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    serve.add_argument("--heap", default="1g")
    serve.add_argument("--version", default=KAFKA_VERSION)
    cp = sub.add_parser("classpath", help="print a resolved classpath")
    cp.add_argument("kind", choices=["client", "kafka"])
    cp.add_argument("--version", default=KAFKA_VERSION)
    args = parser.parse_args(argv)
    if args.command == "classpath":
        print(classpath(args.kind, args.version))
        return 0
    overrides = dict(o.split("=", 1) for o in args.override)
    kafka = KafkaRef(args.dir, overrides, version=args.version, heap=args.heap)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    kafka.start()
    print("bootstrap=%s" % kafka.bootstrap, flush=True)
    print("pid=%d" % kafka.pid(), flush=True)
    try:
        while not stop and kafka.process.poll() is None:
            time.sleep(0.5)
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
