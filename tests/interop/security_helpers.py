"""Shared pieces of the security interop tests: certificates made by
`krabka tls generate`, a broker with one listener of each security
protocol, client settings per protocol and mechanism, JWTs signed for a
JWKS file, and a raw connection that speaks Kafka frames one by one."""

import base64
import json
import os
import socket
import struct
import subprocess
import time

from conftest import KRABKA_BIN, free_port

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SUPER_USER = "admin"
SCRAM_PASSWORD = {"admin": "admin-scram", "alice": "alice-scram", "bob": "bob-scram"}


def generate_certs(directory, *args):
    """Runs `krabka tls generate` into `directory`; returns its path."""
    directory = str(directory)
    out = subprocess.run(
        [KRABKA_BIN, "tls", "generate", "--dir", directory, *args],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return directory


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jaas_plain(users):
    entries = " ".join('user_%s="%s"' % (u, p) for u, p in users.items())
    return 'org.apache.kafka.common.security.plain.PlainLoginModule required %s;' % entries


class SecureBroker:
    """A broker with PLAINTEXT (the conftest port), SSL, mTLS (SSL with
    required client certificates), SASL_PLAINTEXT and SASL_SSL listeners."""

    def __init__(self, factory, certs, tmp_path, extra=None, mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"):
        self.certs = certs
        self.ports = {name: free_port() for name in ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")}
        bootstrap_file = os.path.join(str(tmp_path), "scram-bootstrap.txt")
        with open(bootstrap_file, "w") as f:
            f.write("SCRAM-SHA-256=[name=admin,password=%s]\n" % SCRAM_PASSWORD["admin"])
            f.write("SCRAM-SHA-512=[name=admin,password=%s]\n" % SCRAM_PASSWORD["admin"])
        combined = os.path.join(str(tmp_path), "broker-combined.pem")
        with open(combined, "w") as f:
            f.write(open(os.path.join(certs, "broker.key")).read())
            f.write(open(os.path.join(certs, "broker.pem")).read())
        self.broker = factory(start=False)
        listeners = ",".join(
            ["PLAINTEXT://127.0.0.1:%d" % self.broker.port]
            + ["%s://127.0.0.1:%d" % (name, port) for name, port in self.ports.items()]
        )
        settings = {
            "listeners": listeners,
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            # SSL: a PKCS#12 keystore.
            "listener.name.ssl.ssl.keystore.type": "PKCS12",
            "listener.name.ssl.ssl.keystore.location": os.path.join(certs, "broker.p12"),
            "listener.name.ssl.ssl.keystore.password": "store-pw",
            # mTLS: a PEM file with an encrypted key, client certificates required.
            "listener.name.mtls.ssl.keystore.type": "PEM",
            "listener.name.mtls.ssl.keystore.location": combined,
            "listener.name.mtls.ssl.key.password": "key-pw",
            "listener.name.mtls.ssl.truststore.location": os.path.join(certs, "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=(.*?),O=Krabka$/$1/,DEFAULT",
            # SASL_SSL: PEM inline (KIP-651).
            "listener.name.sasl_ssl.ssl.keystore.certificate.chain": "@broker.pem",
            "listener.name.sasl_ssl.ssl.keystore.key": "@broker.key",
            "listener.name.sasl_ssl.ssl.key.password": "key-pw",
            "sasl.enabled.mechanisms": mechanisms,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
            "krabka.sasl.scram.bootstrap.file": bootstrap_file,
            "connection.failed.authentication.delay.ms": "50",
        }
        # Inline PEM values (KIP-651) on one line, as a properties file
        # or command line carries them.
        for key, value in list(settings.items()):
            if isinstance(value, str) and value.startswith("@"):
                settings[key] = open(os.path.join(certs, value[1:])).read().replace("\n", " ").strip()
        settings.update(extra or {})
        self.broker.overrides.update(settings)

    def start(self):
        self.broker.start()
        for port in self.ports.values():
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise RuntimeError("listener %d did not open:\n%s" % (port, self.broker.log()))
                    time.sleep(0.05)
        return self

    def bootstrap(self, listener):
        if listener == "PLAINTEXT":
            return self.broker.bootstrap
        return "127.0.0.1:%d" % self.ports[listener]

    def client(self, listener, mechanism=None, user=None, password=None, cert=None):
        """librdkafka settings for this listener."""
        conf = {"bootstrap.servers": self.bootstrap(listener)}
        protocol = {"MTLS": "SSL"}.get(listener, listener)
        conf["security.protocol"] = protocol
        if protocol in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = os.path.join(self.certs, "ca.pem")
        if cert:
            conf["ssl.certificate.location"] = os.path.join(self.certs, cert + ".pem")
            conf["ssl.key.location"] = os.path.join(self.certs, cert + ".key")
        if mechanism:
            conf["sasl.mechanism"] = mechanism
            if mechanism != "OAUTHBEARER":
                if password is None:
                    password = (PLAIN_USERS if mechanism == "PLAIN" else SCRAM_PASSWORD)[user]
                conf["sasl.username"] = user
                conf["sasl.password"] = password
        return conf

    def kcat_args(self, listener, mechanism=None, user=None, password=None, cert=None):
        args = []
        for key, value in self.client(listener, mechanism, user, password, cert).items():
            if key == "bootstrap.servers":
                args += ["-b", value]
            else:
                args += ["-X", "%s=%s" % (key, value)]
        return args

    def kafka_python(self, listener, mechanism, user):
        """kafka-python admin settings."""
        conf = {
            "bootstrap_servers": self.bootstrap(listener),
            "security_protocol": listener,
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": (PLAIN_USERS if mechanism == "PLAIN" else SCRAM_PASSWORD)[user],
            "request_timeout_ms": 20000,
        }
        if listener == "SASL_SSL":
            conf["ssl_cafile"] = os.path.join(self.certs, "ca.pem")
            conf["ssl_check_hostname"] = False
        return conf


class RsaSigner:
    """An RS256 key and the JWKS file that holds its public half."""

    def __init__(self, path, kid="test-key"):
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = self.key.public_key().public_numbers()

        def be(n):
            return n.to_bytes((n.bit_length() + 7) // 8, "big")

        self.path = str(path)
        with open(self.path, "w") as f:
            json.dump({"keys": [{
                "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": b64url(be(numbers.n)), "e": b64url(be(numbers.e)),
            }]}, f)

    def token(self, subject, lifetime=300, kid=None, **claims):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = int(time.time())
        header = b64url(json.dumps({"alg": "RS256", "kid": kid or self.kid, "typ": "JWT"}).encode())
        body = {"sub": subject, "iat": now, "exp": now + lifetime}
        body.update(claims)
        payload = b64url(json.dumps(body).encode())
        signed = ("%s.%s" % (header, payload)).encode()
        signature = self.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        return "%s.%s.%s" % (header, payload, b64url(signature))


class RawConnection:
    """A plain TCP connection speaking Kafka frames, for exchanges no client
    API lets a test send as it wants (cut halfway, out of order, raw)."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.correlation = 0

    def send(self, request):
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="interop-raw")
        self.sock.sendall(request.encode(header=True, framed=True))

    def frame(self):
        size = self._exact(4)
        (n,) = struct.unpack(">i", size)
        return self._exact(n)

    def call(self, request, response_class):
        version = request.API_VERSION
        self.send(request)
        return response_class[version].decode(self.frame(), header=True)

    def _exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed after %d of %d bytes" % (len(data), n))
            data += chunk
        return data

    def closed(self, timeout=10):
        """Whether the broker closes the connection within `timeout` (what
        it sends before, e.g. a TLS alert, is read and dropped)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.time()))
            try:
                if self.sock.recv(4096) == b"":
                    return True
            except ConnectionResetError:
                return True
            except socket.timeout:
                return False
        return False

    def close(self):
        self.sock.close()
