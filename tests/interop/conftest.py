"""Fixtures that run the real `krabka` binary for interop tests.

The binary comes from $KRABKA_BIN (default: the workspace's release build).
Each test gets its own data directory and a free 127.0.0.1 port; the
`broker` fixture starts the broker and stops it afterwards, and the
`KrabkaBroker` object lets a test restart it cleanly or kill -9 it.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

KRABKA_BIN = os.environ.get("KRABKA_BIN", "/work/main/target/release/krabka")


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            preexec_fn=self.preexec_fn,
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

    def stop(self, timeout=30):
        """SIGTERM and wait for the clean shutdown; returns the exit code."""
        if self.process is None:
            return None
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
    for b in started:
        if b.alive():
            code = b.stop()
            if code != 0:
                print(b.log())


@pytest.fixture
def broker(broker_factory):
    """A running broker with default settings."""
    return broker_factory()


def kcat_path():
    return shutil.which("kcat") or shutil.which("kafkacat")
