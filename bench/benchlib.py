"""Shared pieces of the benchmark scripts: a release broker on a free
127.0.0.1 port with a temporary data directory, bounded waits, and a
process's CPU time, resident memory and descriptors read from /proc (any
broker's: Krabka's or Apache Kafka's JVM).

Every script here starts its own broker (`target/release/krabka`, or
$KRABKA_BIN) and stops it again, so a run never touches anything else.
"""

import contextlib
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KRABKA_BIN = os.environ.get("KRABKA_BIN", os.path.join(ROOT, "target", "release", "krabka"))
WAIT = 60  # seconds any single wait may take


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, what, timeout=WAIT, step=0.001):
    """Polls `predicate` until true; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(step)
    raise RuntimeError("timed out waiting for " + what)


def frame(api_key, version, correlation, body, flexible):
    """A size-prefixed Kafka request (header v1, or v2 when `flexible`,
    client id "bench") around an encoded `body`, for hand-made connections."""
    client_id = b"bench"
    header = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    if flexible:
        header += b"\x00"  # no tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock):
    """The next size-prefixed response on `sock` (without its size);
    ConnectionError if the broker closes the connection first."""
    def exact(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (n,) = struct.unpack(">i", exact(4))
    return exact(n)


def cpu_times(pid):
    """(user, system) CPU seconds the process has used so far, all its
    threads included (/proc/<pid>/stat fields utime and stime)."""
    with open("/proc/%d/stat" % pid) as f:
        # The command name may hold spaces: the fields follow its ")".
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid):
    """User plus system CPU seconds the process has used so far (see cpu_times)."""
    return sum(cpu_times(pid))


def rss_bytes(pid, field="VmRSS"):
    """A memory figure of /proc/<pid>/status in bytes: VmRSS (resident
    now) or VmHWM (the resident high-water mark since the process began)."""
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds(pid):
    """Open file descriptors of the process (/proc/<pid>/fd)."""
    return len(os.listdir("/proc/%d/fd" % pid))


class Broker:
    """One `krabka serve` process with its own data directory."""

    def __init__(self, settings=None, prefix="krabka-bench-", directory=None, binary=None, port=None):
        # A directory the caller names is the caller's: it is kept on stop.
        self.owns_dir = directory is None
        self.dir = tempfile.mkdtemp(prefix=prefix) if directory is None else directory
        self.data_dir = os.path.join(self.dir, "data")
        # A caller that lists more listeners names the PLAINTEXT port itself.
        self.port = port or free_port()
        self.bootstrap = "127.0.0.1:%d" % self.port
        merged = {
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.port,
            "log.dirs": self.data_dir,
            "krabka.metrics.listener": "",
        }
        merged.update(settings or {})
        cmd = [binary or KRABKA_BIN, "serve"]
        for k, v in merged.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        self.log = open(os.path.join(self.dir, "krabka.log"), "wb")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)

        def listening():
            if self.process.poll() is not None:
                raise RuntimeError("krabka exited with %s" % self.process.returncode)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        try:
            wait_until(listening, "the broker to listen", step=0.05)
        except BaseException:  # a failed start or Ctrl-C leaves no broker behind
            self.stop()
            raise

    def rss_bytes(self):
        """The broker's resident set size now, in bytes."""
        return rss_bytes(self.process.pid)

    def stop(self):
        """SIGTERM, a bounded wait, then the data directory is removed
        (unless the caller named it)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class RssSampler:
    """Samples a broker's RSS every `interval` seconds while in a `with` block;
    `peak` is the largest sample. `broker` is a `Broker` or a process id."""

    def __init__(self, broker, interval=0.05):
        self.broker = broker if hasattr(broker, "rss_bytes") else _Pid(broker)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.broker.rss_bytes())
            except OSError:
                return
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


class _Pid:
    """A process id seen as something with an RSS (for `RssSampler`)."""

    def __init__(self, pid):
        self.pid = pid

    def rss_bytes(self):
        return rss_bytes(self.pid)


@contextlib.contextmanager
def ab_brokers(baseline, candidate, prefix):
    """A broker from each binary, for an A/B run within one run (so the
    machine's noise falls on both): checks the binaries, prints the run's
    heading, yields {"baseline": Broker, "candidate": Broker}, stops both."""
    for binary in (baseline, candidate):
        if not os.path.exists(binary):
            sys.exit("no binary at %s" % binary)
    print("## Run of %s, load average %.2f %.2f %.2f\n" % (time.strftime("%Y-%m-%d %H:%M"), *os.getloadavg()))
    brokers = {
        "baseline": Broker(prefix=prefix + "base-", binary=baseline),
        "candidate": Broker(prefix=prefix + "cand-", binary=candidate),
    }
    try:
        yield brokers
    finally:
        for b in brokers.values():
            b.stop()
    print("\nLoad average at the end: %.2f %.2f %.2f" % os.getloadavg())


def ab_rounds(brokers, cases, rounds, columns):
    """Runs every case on both brokers of `ab_brokers`, the order of the two
    alternating by round, and prints each measurement, then the medians
    with the candidate/baseline ratio. `cases`: (name, run(broker, round)
    returning one figure per column); `columns`: (heading, %-format)."""
    results = {}
    headings = " | ".join(h for h, _ in columns)
    print("| round | case | build | %s |\n| --- | --- | --- |%s" % (headings, " --- |" * len(columns)))
    for r in range(rounds):
        order = ["baseline", "candidate"] if r % 2 == 0 else ["candidate", "baseline"]
        for name, run in cases:
            for which in order:
                got = run(brokers[which], r)
                results.setdefault((name, which), []).append(got)
                cells = " | ".join(f % v for (_, f), v in zip(columns, got))
                print("| %d | %s | %s | %s |" % (r + 1, name, which, cells))
    print("\nMedians of %d rounds (candidate / baseline):\n" % rounds)
    print("| case | %s |\n| --- |%s" % (headings, " --- |" * len(columns)))
    for name, _ in cases:
        cells = []
        for i, (_, f) in enumerate(columns):
            base = statistics.median(x[i] for x in results[(name, "baseline")])
            cand = statistics.median(x[i] for x in results[(name, "candidate")])
            cells.append("%s / %s (%.2f)" % (f % cand, f % base, cand / base if base else float("nan")))
        print("| %s | %s |" % (name, " | ".join(cells)))
