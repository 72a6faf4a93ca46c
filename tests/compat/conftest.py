"""Fixtures for the compatibility tests against the reference (tests/compat).

One Apache Kafka (kafka_ref.KafkaRef) and one Krabka broker serve the whole
run: JVMs start slowly on a loaded two-core machine, so nothing is started
per test. The Java client's scenario program (java/Compat.java) is compiled
once per client version and run once per broker and version; the tests then
read its transcripts.

``KRABKA_COMPAT=quick`` (the default, what ``./scripts/test`` runs) skips the
tests marked ``full``; ``KRABKA_COMPAT=full`` runs everything
(``tests/compat/run --full``).
"""

import importlib.util
import os
import subprocess
import sys
import time

import pytest

import kafka_ref

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODE = os.environ.get("KRABKA_COMPAT", "quick")

# The broker fixtures of the interop tests, shared rather than copied.
INTEROP = os.path.join(ROOT, "tests", "interop")
_spec = importlib.util.spec_from_file_location("krabka_interop_conftest", os.path.join(INTEROP, "conftest.py"))
_interop = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_interop)
KrabkaBroker = _interop.KrabkaBroker


def interop_module(name):
    """A module of tests/interop (helpers, objstore, ...), imported as it
    expects to be: with tests/interop on the path and its own conftest
    answering its `from conftest import ...`."""
    if name in sys.modules:
        return sys.modules[name]
    here_conftest = sys.modules.get("conftest")
    sys.path.insert(0, INTEROP)
    sys.modules["conftest"] = _interop
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(INTEROP)
        if here_conftest is None:
            del sys.modules["conftest"]
        else:
            sys.modules["conftest"] = here_conftest

# Settings both brokers get (Kafka's config file names node.id too, so its
# source compares equal).
KRABKA_SETTINGS = dict(kafka_ref.SHARED_BROKER_SETTINGS, **{"node.id": "1"})

CLIENT_VERSIONS = [kafka_ref.KAFKA_VERSION, kafka_ref.KAFKA_3X_VERSION]


def pytest_configure(config):
    config.addinivalue_line("markers", "full: part of the long run only (tests/compat/run --full)")


def pytest_collection_modifyitems(config, items):
    if MODE == "full":
        return
    skip = pytest.mark.skip(reason="long run only: tests/compat/run --full")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


def is_full():
    return MODE == "full"


def version_param(version):
    """A pytest param for a client version; all but the newest are long-run only."""
    marks = [] if version == kafka_ref.KAFKA_VERSION else [pytest.mark.full]
    return pytest.param(version, marks=marks, id=version)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("compat")


@pytest.fixture(scope="session")
def kafka(workdir):
    """Apache Kafka, started once for the run."""
    with kafka_ref.KafkaRef(workdir / "kafka") as k:
        yield k


def start_krabka(data_dir, overrides=None):
    settings = dict(KRABKA_SETTINGS)
    settings.update(overrides or {})
    os.makedirs(str(data_dir), exist_ok=True)
    return KrabkaBroker(data_dir, settings).start()


@pytest.fixture(scope="session")
def krabka(workdir):
    """Krabka, started once for the run with the settings Kafka also gets."""
    b = start_krabka(workdir / "krabka-data")
    yield b
    if b.alive():
        code = b.stop()
        assert code == 0, "krabka did not shut down cleanly:\n" + b.log()


@pytest.fixture(scope="session")
def brokers(request):
    """Looks a broker fixture up by name ("kafka" or "krabka") lazily, so
    Kafka starts only when a test needs it."""
    return lambda name: request.getfixturevalue(name)


def compile_java(main_class, version):
    """java/<main_class>.java compiled against kafka-clients ``version``;
    returns the classpath to run it."""
    cp = kafka_ref.classpath("client", version)
    classes = os.path.join(kafka_ref.CACHE_DIR, "classes-%s" % version)
    source = os.path.join(HERE, "java", main_class + ".java")
    marker = os.path.join(classes, main_class + ".class")
    if not os.path.exists(marker) or os.path.getmtime(marker) < os.path.getmtime(source):
        os.makedirs(classes, exist_ok=True)
        javac = os.path.join(os.path.dirname(os.path.realpath(kafka_ref.java())), "javac")
        proc = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-d", classes, "-cp", cp, source],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        assert proc.returncode == 0, "javac failed against kafka-clients %s:\n%s" % (version, proc.stdout)
    return cp + os.pathsep + classes


class Transcript:
    """What Compat.java printed for one broker and client version."""

    def __init__(self, values, failures, stderr, seconds):
        self.values = values
        self.failures = failures
        self.stderr = stderr
        self.seconds = seconds

    def scenario(self, name):
        return {k: v for k, v in self.values.items() if k.startswith(name + ".")}

    def failure(self, name):
        return [f for f in self.failures if f.startswith(name + ":")]


_transcripts = {}


@pytest.fixture(scope="session")
def transcript(brokers, workdir):
    """``transcript(broker_name, client_version)``: Compat.java's run, once per pair."""

    def get(name, version):
        key = (name, version)
        if key not in _transcripts:
            cp = compile_java("Compat", version)
            broker = brokers(name)
            out = str(workdir / ("transcript-%s-%s.txt" % (name, version)))
            # Each client version gets its own topic and group names, so
            # runs against the same broker do not meet.
            prefix = "compat-" + version.replace(".", "")
            started = time.time()
            try:
                proc = subprocess.run(
                    [kafka_ref.java(), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                     "-cp", cp, "Compat", "--bootstrap", broker.bootstrap, "--out", out, "--prefix", prefix],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            except subprocess.TimeoutExpired as e:
                pytest.fail("Compat.java against %s with kafka-clients %s did not finish in 900 s:\n%s"
                            % (name, version, (e.stdout or "")[-10000:]))
            values, failures = {}, []
            if os.path.exists(out):
                with open(out, encoding="utf-8") as f:
                    for line in f:
                        line = line.rstrip("\n")
                        if line.startswith("FAIL "):
                            failures.append(line[5:])
                        elif line:
                            k, _, v = line.partition("\t")
                            values[k.replace(prefix + "-", "compat-")] = v.replace(prefix + "-", "compat-")
            else:
                failures.append("run: no transcript written (exit %s)" % proc.returncode)
            _transcripts[key] = Transcript(values, failures, proc.stdout, time.time() - started)
        return _transcripts[key]

    return get
