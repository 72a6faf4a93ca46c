"""kcat against krabka: metadata listing, produce and consume."""

import subprocess

import pytest

from conftest import kcat_path
from helpers import create_topic, stored_codecs

# scripts/test installs kcat; without it these tests must fail, not skip.
assert kcat_path() is not None, "kcat is not installed (scripts/test installs it)"


def kcat(bootstrap, *args, stdin=None, timeout=60):
    result = subprocess.run(
        [kcat_path(), "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_kcat_lists_metadata(broker):
    create_topic(broker.bootstrap, "kc-meta", partitions=3)
    out = kcat(broker.bootstrap, "-L", "-t", "kc-meta").decode()
    assert "3 partitions" in out
    assert "leader 1" in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume(broker, codec):
    topic = "kc-" + codec
    create_topic(broker.bootstrap, topic)
    lines = ["%d:line %d %s" % (i % 10, i, "x" * (i % 30)) for i in range(5000)]
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec, stdin=("\n".join(lines) + "\n").encode())
    out = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-K", ":", "-f", "%k:%s\n")
    assert out.decode().splitlines() == lines
    # The log holds what kcat really sent: librdkafka before 2.11.1 (Debian
    # 12's kcat has 2.0.2) compresses only when the broker advertises
    # Produce v0, and silently sends uncompressed batches otherwise.
    assert stored_codecs(broker.data_dir, topic) == {codec}
