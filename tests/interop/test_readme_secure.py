"""The README's "Secure broker" section, run as written: its shell
blocks in order, in a fresh directory, with `krabka` on the PATH and
port 9093 replaced by a free one."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import KRABKA_BIN, free_port, kcat_path

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def section_blocks():
    text = open(README).read()
    start = text.index("## Secure broker")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```(\w+)\n(.*?)```", text[start:end], re.S)


@pytest.mark.skipif(kcat_path() is None, reason="kcat not installed")
def test_readme_secure_broker(tmp_path):
    port = free_port()
    shims = tmp_path / "bin"
    shims.mkdir()
    os.symlink(KRABKA_BIN, shims / "krabka")
    env = dict(os.environ, PATH="%s:%s" % (shims, os.environ["PATH"]))
    workdir = tmp_path / "work"
    workdir.mkdir()
    blocks = section_blocks()
    assert [lang for lang, _ in blocks] == ["sh", "sh", "sh", "sh"]
    server = None
    outputs = []
    try:
        for lang, code in blocks:
            code = code.replace("9093", str(port))
            if code.strip().startswith("krabka serve"):
                log = open(tmp_path / "broker.log", "wb")
                server = subprocess.Popen(
                    code.split(), cwd=workdir, env=dict(env, RUST_LOG="info"),
                    stdout=log, stderr=subprocess.STDOUT,
                )
                deadline = time.time() + 30
                while True:
                    assert server.poll() is None, open(tmp_path / "broker.log").read()
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        assert time.time() < deadline, "the broker did not listen"
                        time.sleep(0.1)
                continue
            command = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else [sys.executable, "-c", code]
            out = subprocess.run(command, cwd=workdir, env=env, capture_output=True, timeout=120)
            assert out.returncode == 0, (code, out.stdout, out.stderr)
            outputs.append(out.stdout)
        # The consumer group read what the application wrote.
        assert outputs[-1].split() == [b"order-1"], outputs[-1]
        # Nothing else is allowed: the consumer cannot write.
        tls = ["-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=tls/ca.pem",
               "-X", "sasl.mechanism=SCRAM-SHA-512"]
        out = subprocess.run(
            [kcat_path(), "-b", "127.0.0.1:%d" % port] + tls
            + ["-X", "sasl.username=billing", "-X", "sasl.password=billing-secret", "-P", "-t", "orders"],
            input=b"not-allowed\n", cwd=workdir, capture_output=True, timeout=60,
        )
        assert out.returncode != 0 and b"Topic authorization failed" in out.stderr, out.stderr
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0
