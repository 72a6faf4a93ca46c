"""Fixtures that run the real `krabka` binary for interop tests.

The binary comes from $KRABKA_BIN (default: the workspace's release build).
Each test gets its own data directory and a free 127.0.0.1 port; the
`broker` fixture starts the broker and stops it afterwards, and the
`KrabkaBroker` object lets a test restart it cleanly or kill -9 it.
"""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from ports import free_port  # noqa: F401 (tests import it from here)

PR_SET_PDEATHSIG = 1
# Looked up here, not in the forked child (which must not import).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent():
    """In a child before exec: SIGKILL when the process that started it
    exits (Linux's PR_SET_PDEATHSIG)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


KRABKA_BIN = os.environ.get("KRABKA_BIN", "/work/main/target/release/krabka")


class KrabkaBroker:
    """One broker process with a fixed data directory and port."""

    def __init__(self, data_dir, overrides=None):
        self.data_dir = str(data_dir)
        self.port = free_port()
        self.overrides = dict(overrides or {})
        self.process = None
        self.log_path = os.path.join(os.path.dirname(self.data_dir), "krabka-%d.log" % self.port)
        self.log_file = None
        # Run in the child before exec (e.g. to lower its resource limits).
        self.preexec_fn = None

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def command(self):
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "log.dirs": self.data_dir,
            "krabka.metrics.listener": "",
        }
        settings.update(self.overrides)
        cmd = [KRABKA_BIN, "serve"]
        for key, value in settings.items():
            cmd += ["--override", "%s=%s" % (key, value)]
        return cmd

    def start(self, timeout=30):
        assert self.process is None, "already running"
        if not os.path.exists(KRABKA_BIN):
            pytest.fail("krabka binary not found at %s (set KRABKA_BIN)" % KRABKA_BIN)
        self.log_file = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        self.process = subprocess.Popen(
            self.command(), stdout=self.log_file, stderr=subprocess.STDOUT, env=env,
            preexec_fn=self._in_child,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("krabka exited with %s:\n%s" % (self.process.returncode, self.log()))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("krabka did not start listening:\n" + self.log())

    def _in_child(self):
        # Dies with pytest: a run that crashes (librdkafka has crashed the
        # interpreter) must not leave brokers running behind it.
        die_with_parent()
        if self.preexec_fn is not None:
            self.preexec_fn()

    def stop(self, timeout=30):
        """SIGTERM and wait for the clean shutdown; returns the exit code."""
        if self.process is None:
            return None
        # A test that paused the broker (SIGSTOP) and failed before waking
        # it: a stopped process would hold SIGTERM until continued.
        self.process.send_signal(signal.SIGCONT)
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError("krabka did not stop within %ss:\n%s" % (timeout, self.log()))
        finally:
            self._closed()
        return code

    def kill9(self):
        """SIGKILL: no clean shutdown at all."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._closed()

    def restart(self):
        code = self.stop()
        assert code == 0, "clean shutdown failed with %s:\n%s" % (code, self.log())
        return self.start()

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def _closed(self):
        self.process = None
        if self.log_file:
            self.log_file.close()
            self.log_file = None

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-20000:]
        except OSError:
            return ""


@pytest.fixture
def broker_factory(tmp_path):
    """Builds brokers with extra settings: `broker_factory({"num.partitions": 3})`."""
    started = []

    def make(overrides=None, start=True):
        data = tmp_path / ("data-%d" % len(started))
        data.mkdir()
        b = KrabkaBroker(data, overrides)
        started.append(b)
        if start:
            b.start()
        return b

    yield make
    # Every broker is stopped even when one of them will not stop cleanly.
    failures = []
    for b in started:
        if b.alive():
            try:
                code = b.stop()
            except RuntimeError as e:
                failures.append(e)
                continue
            if code != 0:
                print(b.log())
    if failures:
        raise failures[0]


@pytest.fixture
def broker(broker_factory):
    """A running broker with default settings."""
    return broker_factory()


def kcat_path():
    return shutil.which("kcat") or shutil.which("kafkacat")


# --- Cluster mode: PostgreSQL and brokers sharing it -----------------------

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
POSTGRES_SERVER = os.path.join(ROOT, "scripts", "postgres-server")
# Short leases so failover tests take seconds: a lease lasts 2 s, is renewed
# every 300 ms, and its holder lets go 500 ms before the database would.
CLUSTER_LEASE = {
    "krabka.cluster.lease.duration.ms": "2000",
    "krabka.cluster.lease.renew.interval.ms": "300",
    "krabka.cluster.lease.safety.margin.ms": "500",
}


def postgres_installed():
    base = "/usr/lib/postgresql"
    return os.path.isdir(base) and any(
        os.path.exists(os.path.join(base, v, "bin", "postgres")) for v in os.listdir(base)
    )


class PostgresServer:
    """A PostgreSQL server of the test's own (scripts/postgres-server), for
    tests that kill it; `url(db)` names a database on it."""

    def __init__(self):
        # Not under pytest's tmp_path: its parents are private to root, and
        # the server runs as the `postgres` user.
        import tempfile
        self.dir = tempfile.mkdtemp(prefix="krabka-pg-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.process = None

    def url(self, database="postgres"):
        return "postgresql://postgres@127.0.0.1:%d/%s" % (self.port, database)

    def start(self, timeout=60):
        log = open(os.path.join(self.dir, "server.log"), "ab")
        self.process = subprocess.Popen([POSTGRES_SERVER, self.dir, str(self.port)], stdout=log, stderr=log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("PostgreSQL exited: " + self.log())
            ready = subprocess.run(
                ["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
            )
            if ready.returncode == 0:
                return self
            time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not come up: " + self.log())

    def kill9(self):
        """SIGKILL of the postmaster."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self):
        if self.process is not None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")[-5000:]
        except OSError:
            return ""


def create_database(server_url, name):
    """CREATE DATABASE `name` on the server at `server_url`; returns its URL."""
    subprocess.run(["psql", server_url, "-q", "-c", "CREATE DATABASE %s" % name], check=True)
    base, _, _ = server_url.rpartition("/")
    return base + "/" + name


def sql(url, statement):
    """Runs one statement with psql and returns its rows as tuples of text."""
    out = subprocess.run(
        ["psql", url, "-q", "-A", "-t", "-F", "\t", "-c", statement],
        check=True, capture_output=True, text=True,
    ).stdout
    return [tuple(line.split("\t")) for line in out.splitlines() if line]


@pytest.fixture
def postgres():
    """A PostgreSQL server of the test's own (which it may kill)."""
    if not postgres_installed():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed (scripts/test installs it)")
        pytest.skip("PostgreSQL is not installed")
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def cluster_db(request):
    """The URL of a fresh database: on the run's shared server
    (KRABKA_TEST_DATABASE_URL) or on a server started for this test."""
    shared = os.environ.get("KRABKA_TEST_DATABASE_URL")
    name = "krabka_py_%d_%d" % (os.getpid(), int(time.time() * 1e6) % 10**12)
    if shared:
        yield create_database(shared, name)
        return
    server = request.getfixturevalue("postgres")
    yield create_database(server.url(), name)


@pytest.fixture
def cluster_factory(broker_factory):
    """Starts a broker of the cluster in database `url` with node id `node`:
    `cluster_factory(url, node, extra_settings)`."""

    def make(url, node, overrides=None, start=True):
        settings = {
            "node.id": str(node),
            "krabka.cluster.database.url": url,
        }
        settings.update(CLUSTER_LEASE)
        settings.update(overrides or {})
        broker = broker_factory(settings, start=start)
        if start:
            wait_registered(url, node, broker)
        return broker

    return make


def wait_registered(url, node, broker, timeout=30):
    """Until `broker` holds `node`'s registration in the cluster database.
    Its port accepts connections once bound, which is before it joins the
    cluster, so a test that starts another broker right after could
    otherwise race the first one's registration."""
    address = "127.0.0.1:%d" % broker.port
    deadline = time.time() + timeout
    while True:
        try:
            rows = sql(url, "SELECT listeners FROM brokers WHERE node_id = %d" % int(node))
        except subprocess.CalledProcessError:
            rows = []  # the schema is not there yet
        if rows and address in rows[0][0]:
            return
        if not broker.alive():
            raise RuntimeError("broker %d exited before registering:\n%s" % (node, broker.log()))
        if time.time() >= deadline:
            raise RuntimeError("broker %d did not register within %ss:\n%s" % (node, timeout, broker.log()))
        time.sleep(0.05)
