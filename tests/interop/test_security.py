"""Security with real clients: TLS and mTLS, SASL PLAIN / SCRAM /
OAUTHBEARER, KIP-368 re-authentication, SCRAM users managed through
kafka-python's admin API, and refusals (wrong password, expired or
untrusted certificate, garbage handshakes, an exchange cut halfway) that
leave every other client working."""

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import kcat_path
from helpers import wait_for
from security_helpers import (
    SCRAM_PASSWORD,
    RawConnection,
    RsaSigner,
    SecureBroker,
    generate_certs,
)

KCAT = kcat_path()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA, the broker's certificate (key encrypted, and as PKCS#12), a
    client certificate, an expired one; and a second CA's client, untrusted."""
    base = tmp_path_factory.mktemp("certs")
    trusted = generate_certs(
        base / "trusted", "--client", "alice", "--expired-client", "old",
        "--key-password", "key-pw", "--pkcs12-password", "store-pw",
    )
    untrusted = generate_certs(base / "untrusted", "--client", "mallory")
    return trusted, untrusted


def produce(conf, topic, values, timeout=30):
    """Produces `values`; returns the delivery errors (empty on success)."""
    errors = []
    producer = Producer(dict(conf, **{"linger.ms": 5, "message.timeout.ms": int(timeout * 1000)}))

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    for v in values:
        producer.produce(topic, value=v, on_delivery=delivered)
    remaining = producer.flush(timeout + 10)
    assert remaining == 0, "%d records not delivered" % remaining
    return errors


def consume(conf, topic, count, timeout=30):
    consumer = Consumer(dict(conf, **{"group.id": "unused", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
    finally:
        consumer.close()
    assert len(out) == count, "read %d of %d" % (len(out), count)
    return out


def refused(conf, timeout=20):
    """Connects with `conf`, expecting the broker to refuse it: returns the
    errors the client reported (its error callback runs on poll)."""
    errors = []
    client = AdminClient(dict(conf, error_cb=errors.append))
    with pytest.raises(Exception):
        client.list_topics(timeout=5)
    deadline = time.time() + timeout
    while not errors and time.time() < deadline:
        client.poll(0.2)
    return errors


def full_log(secure):
    with open(secure.broker.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def kcat(args, stdin=None, timeout=30):
    return subprocess.run([KCAT] + args, input=stdin, capture_output=True, timeout=timeout)


def metadata_port(conf):
    """The broker port the listener advertises in Metadata."""
    md = AdminClient(conf).list_topics(timeout=20)
    return md.brokers[1].port


@pytest.fixture
def secure(broker_factory, certs, tmp_path):
    return SecureBroker(broker_factory, certs[0], tmp_path).start()


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_tls_and_mtls_with_kcat_and_confluent(secure, certs):
    """SSL with a PKCS#12 keystore, mTLS with an encrypted PEM key: kcat and
    confluent-kafka produce and consume; each listener's Metadata names
    its own port; the mTLS principal comes from the certificate subject."""
    out = kcat(secure.kcat_args("SSL") + ["-P", "-t", "tls-topic"], stdin=b"over-ssl-1\nover-ssl-2\n")
    assert out.returncode == 0, out.stderr
    errors = produce(secure.client("MTLS", cert="alice"), "tls-topic", [b"over-mtls"])
    assert errors == []
    got = consume(secure.client("SSL"), "tls-topic", 3)
    assert got == [b"over-ssl-1", b"over-ssl-2", b"over-mtls"]
    out = kcat(secure.kcat_args("MTLS", cert="alice") + ["-C", "-t", "tls-topic", "-e", "-o", "beginning"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"over-ssl-1", b"over-ssl-2", b"over-mtls"]
    for listener in ("SSL", "SASL_SSL", "SASL_PLAINTEXT"):
        conf = secure.client(listener, "PLAIN" if "SASL" in listener else None, "alice")
        assert metadata_port(conf) == secure.ports[listener]
    assert metadata_port(secure.client("MTLS", cert="alice")) == secure.ports["MTLS"]
    assert metadata_port({"bootstrap.servers": secure.bootstrap("PLAINTEXT")}) == secure.broker.port


def test_bad_certificates_and_garbage_are_refused_alone(secure, certs):
    """An expired client certificate, one from an unknown CA, no certificate
    on a required-mTLS listener, and garbage instead of a TLS handshake:
    each connection is refused with a logged reason; a client on the same
    listener keeps working."""
    trusted, untrusted = certs
    plain_producer = Producer(dict(secure.client("MTLS", cert="alice"), **{"linger.ms": 0}))
    for name, conf in [
        ("expired", secure.client("MTLS", cert="old")),
        ("untrusted", dict(secure.client("MTLS"), **{
            "ssl.certificate.location": os.path.join(untrusted, "mallory.pem"),
            "ssl.key.location": os.path.join(untrusted, "mallory.key"),
        })),
        ("no certificate", secure.client("MTLS")),
    ]:
        assert refused(conf), name
    raw = RawConnection(secure.bootstrap("MTLS"))
    raw.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10)
    assert raw.closed(), "garbage handshake left the connection open"
    raw.close()
    delivered = []
    plain_producer.produce("mtls-ok", value=b"still-fine", on_delivery=lambda e, m: delivered.append(e))
    assert plain_producer.flush(30) == 0
    assert delivered == [None]
    log = full_log(secure)
    assert "certificate expired" in log
    assert "BadSignature" in log or "UnknownIssuer" in log
    assert "peer sent no certificates" in log


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_mechanisms_over_plaintext_and_tls(secure, mechanism):
    """kcat over SASL_PLAINTEXT and confluent-kafka over SASL_SSL with each
    mechanism (SCRAM's admin comes from the bootstrap file)."""
    topic = "sasl-" + mechanism.lower()
    out = kcat(secure.kcat_args("SASL_PLAINTEXT", mechanism, "admin") + ["-P", "-t", topic], stdin=b"one\ntwo\n")
    assert out.returncode == 0, out.stderr
    assert produce(secure.client("SASL_SSL", mechanism, "admin"), topic, [b"three"]) == []
    assert consume(secure.client("SASL_SSL", mechanism, "admin"), topic, 3) == [b"one", b"two", b"three"]
    out = kcat(secure.kcat_args("SASL_PLAINTEXT", mechanism, "admin") + ["-C", "-t", topic, "-e", "-o", "beginning"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"one", b"two", b"three"]


def test_scram_users_through_kafka_python_survive_restart(secure):
    """kafka-python's admin creates SCRAM users (both mechanisms), describes
    and deletes them; the users authenticate with confluent-kafka, and are
    still there after a restart."""
    from kafka import KafkaAdminClient
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    admin = KafkaAdminClient(**secure.kafka_python("SASL_PLAINTEXT", "SCRAM-SHA-256", "admin"))
    try:
        result = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, SCRAM_PASSWORD["alice"]),
            UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512, SCRAM_PASSWORD["bob"], iterations=8192),
            UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256, "x", iterations=100),
        ])
        assert result["alice"] is None and result["bob"] is None
        assert result["carol"] == "Too few iterations"
        described = admin.describe_user_scram_credentials()
        assert described["bob"]["credential_infos"] == [{"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 8192}]
        assert "carol" not in described
        missing = admin.describe_user_scram_credentials(["nobody"])
        assert "does not exist" in missing["nobody"]["error"]
    finally:
        admin.close()
    assert produce(secure.client("SASL_SSL", "SCRAM-SHA-256", "alice"), "scram-users", [b"from-alice"]) == []
    assert produce(secure.client("SASL_SSL", "SCRAM-SHA-512", "bob"), "scram-users", [b"from-bob"]) == []
    secure.broker.restart()
    assert consume(secure.client("SASL_SSL", "SCRAM-SHA-512", "bob"), "scram-users", 2) == [b"from-alice", b"from-bob"]
    admin = KafkaAdminClient(**secure.kafka_python("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin"))
    try:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256),
        ]) == {"alice": None}
    finally:
        admin.close()
    errors = refused(secure.client("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice"))
    assert any("Authentication failed" in str(e) for e in errors), errors


def test_wrong_passwords_are_refused_with_kafkas_message(secure):
    """A wrong PLAIN and a wrong SCRAM password get SASL_AUTHENTICATION_FAILED
    with Kafka's texts; a correct client on the same listener works on."""
    good = Producer(dict(secure.client("SASL_PLAINTEXT", "PLAIN", "alice"), **{"linger.ms": 0}))
    cases = [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ]
    for mechanism, text in cases:
        user = "alice" if mechanism == "PLAIN" else "admin"
        errors = refused(secure.client("SASL_PLAINTEXT", mechanism, user, password="guess"))
        assert any(text in str(e) for e in errors), (mechanism, errors)
    # The raw answer: SASL_AUTHENTICATION_FAILED (58), then the broker closes.
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse

    raw = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    hs = raw.call(SaslHandshakeRequest(mechanism="PLAIN", version=1), SaslHandshakeResponse)
    assert hs.error_code == 0 and "SCRAM-SHA-512" in hs.mechanisms
    auth = raw.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong", version=2), SaslAuthenticateResponse)
    assert auth.error_code == 58
    assert auth.error_message == "Authentication failed: Invalid username or password"
    assert raw.closed()
    raw.close()
    delivered = []
    good.produce("after-bad-passwords", value=b"ok", on_delivery=lambda e, m: delivered.append(e))
    assert good.flush(30) == 0 and delivered == [None]


def test_cut_and_out_of_order_exchanges_close_only_that_connection(secure):
    """A SCRAM exchange cut after the first message, a request before
    authentication, an unknown mechanism and a raw garbage frame each end
    their own connection; a SASL_SSL client keeps producing meanwhile."""
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse

    good = Producer(dict(secure.client("SASL_SSL", "SCRAM-SHA-512", "admin"), **{"linger.ms": 0}))
    delivered = []
    good.produce("cut-exchanges", value=b"before", on_delivery=lambda e, m: delivered.append(e))
    assert good.flush(30) == 0

    cut = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    cut.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256", version=1), SaslHandshakeResponse)
    first = cut.call(SaslAuthenticateRequest(auth_bytes=b"n,,n=admin,r=abcdef", version=2), SaslAuthenticateResponse)
    assert first.error_code == 0 and first.auth_bytes.startswith(b"r=abcdef")
    cut.close()

    early = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    early.send(MetadataRequest(topics=None, version=9))
    assert early.closed(), "a request before authentication was answered"
    early.close()

    unknown = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    hs = unknown.call(SaslHandshakeRequest(mechanism="GSSAPI", version=1), SaslHandshakeResponse)
    assert hs.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert unknown.closed()
    unknown.close()

    garbage = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    garbage.sock.sendall(b"\x00\x00\x00\x08" + b"\xff" * 8)
    assert garbage.closed()
    garbage.close()

    good.produce("cut-exchanges", value=b"after", on_delivery=lambda e, m: delivered.append(e))
    assert good.flush(30) == 0
    assert delivered == [None, None]
    log = full_log(secure)
    assert "Unexpected Kafka request of type Metadata during SASL handshake" in log


def test_frames_before_authentication_are_bounded(secure):
    """Until a client has authenticated, sasl.server.max.receive.size
    (Kafka's 512 KiB default) bounds its frames: a 600 kB one closes the
    connection before the broker reads it. After authenticating, a client
    sends larger requests as usual (socket.request.max.bytes)."""
    import struct

    big = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    try:
        big.sock.sendall(struct.pack(">i", 600_000) + b"\0" * 600_000)
    except OSError:
        pass  # the broker may close before all of it is sent
    assert big.closed(), "a 600 kB frame before authentication was read"
    big.close()

    delivered = []
    good = Producer(dict(secure.client("SASL_PLAINTEXT", "PLAIN", "admin"), **{"linger.ms": 0}))
    good.produce("big-after-auth", value=b"v" * 900_000, on_delivery=lambda e, m: delivered.append(e))
    assert good.flush(30) == 0
    assert delivered == [None]
    wait_for(lambda: "request of 600000 bytes exceeds sasl.server.max.receive.size (524288)" in full_log(secure),
             timeout=30, what="the logged reason")


def test_sasl_handshake_v0_raw_tokens(secure):
    """SaslHandshake v0: the PLAIN token follows as a raw frame (no Kafka
    header), as clients before KIP-152 send it; then requests work."""
    import struct

    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

    raw = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    hs = raw.call(SaslHandshakeRequest(mechanism="PLAIN", version=0), SaslHandshakeResponse)
    assert hs.error_code == 0
    token = b"\0bob\0bob-secret"
    raw.sock.sendall(struct.pack(">i", len(token)) + token)
    assert raw.frame() == b""
    md = raw.call(MetadataRequest(topics=None, version=9), MetadataResponse)
    assert md.brokers[0].port == secure.ports["SASL_PLAINTEXT"]
    raw.close()


def test_reauthentication_and_session_expiry(broker_factory, certs, tmp_path):
    """connections.max.reauth.ms=1500: SaslAuthenticate reports the session
    lifetime; confluent-kafka re-authenticates and keeps producing for
    several lifetimes; a raw client that does not re-authenticate is
    closed at its first request after the session ended."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse

    secure = SecureBroker(broker_factory, certs[0], tmp_path, {"connections.max.reauth.ms": "1500"}).start()
    raw = RawConnection(secure.bootstrap("SASL_PLAINTEXT"))
    raw.call(SaslHandshakeRequest(mechanism="PLAIN", version=1), SaslHandshakeResponse)
    auth = raw.call(SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret", version=2), SaslAuthenticateResponse)
    assert auth.error_code == 0 and 0 < auth.session_lifetime_ms <= 1500
    assert raw.call(MetadataRequest(topics=None, version=9), MetadataResponse).brokers

    producer = Producer(dict(secure.client("SASL_SSL", "SCRAM-SHA-256", "admin"), **{"linger.ms": 0}))
    delivered = []
    start = time.time()
    sent = 0
    while time.time() - start < 6:
        producer.produce("reauth", value=b"v%d" % sent, on_delivery=lambda e, m: delivered.append(e))
        sent += 1
        producer.poll(0.2)
    assert producer.flush(30) == 0
    assert delivered == [None] * sent

    # The raw session has ended meanwhile: its next request closes it.
    raw.send(MetadataRequest(topics=None, version=9))
    assert raw.closed()
    raw.close()
    # Only the raw client's session ran out: confluent-kafka re-authenticated
    # its connections in time (KIP-368), so none of them was closed for it.
    assert full_log(secure).count("SASL session expired") == 1


def test_oauthbearer_unsecured_and_jwks(broker_factory, certs, tmp_path):
    """OAUTHBEARER with Kafka's unsecured validator on one broker (kcat and
    confluent-kafka's built-in unsigned tokens), and with a JWKS file on
    another (confluent-kafka's oauth_cb with RS256 tokens): the subject is
    the principal; an unsigned, expired or foreign-key token is refused."""
    unsecured = SecureBroker(broker_factory, certs[0], tmp_path, {
        "sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    }, mechanisms="OAUTHBEARER").start()
    conf = dict(secure_oauth_conf(unsecured), **{
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=alice",
    })
    assert produce(conf, "oauth", [b"unsigned-ok"]) == []
    if KCAT:
        args = unsecured.kcat_args("SASL_SSL", "OAUTHBEARER") + [
            "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
            "-X", "sasl.oauthbearer.config=principal=alice",
            "-C", "-t", "oauth", "-e", "-o", "beginning",
        ]
        out = kcat(args)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [b"unsigned-ok"]

    signer = RsaSigner(tmp_path / "jwks.json")
    other = RsaSigner(tmp_path / "other-jwks.json", kid="test-key")
    signed = SecureBroker(broker_factory, certs[0], tmp_path, {
        "sasl.oauthbearer.jwks.endpoint.url": "file://%s" % signer.path,
        "sasl.oauthbearer.expected.audience": "krabka",
    }, mechanisms="OAUTHBEARER,SCRAM-SHA-256").start()

    def token_conf(make):
        return dict(secure_oauth_conf(signed), oauth_cb=lambda _config: (make(), time.time() + 300, "svc", {}))

    good = token_conf(lambda: signer.token("svc-orders", aud="krabka"))
    assert produce(good, "oauth-signed", [b"signed-ok"]) == []
    assert consume(good, "oauth-signed", 1) == [b"signed-ok"]
    for name, make in [
        ("expired", lambda: signer.token("svc", lifetime=-120, aud="krabka")),
        ("foreign key", lambda: other.token("svc", aud="krabka")),
        ("wrong audience", lambda: signer.token("svc", aud="elsewhere")),
        ("unsigned", lambda: signer.token("svc", aud="krabka").rsplit(".", 1)[0] + "."),
    ]:
        errors = refused(token_conf(make))
        assert any("invalid_token" in str(e) for e in errors), (name, errors)
    assert "OAUTHBEARER token refused" in full_log(signed)


def secure_oauth_conf(secure):
    return {
        "bootstrap.servers": secure.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": os.path.join(secure.certs, "ca.pem"),
        "sasl.mechanism": "OAUTHBEARER",
    }


def test_keystore_reload_keeps_other_connections(secure, certs, tmp_path):
    """IncrementalAlterConfigs replaces the SSL listener's keystore: new
    connections get the new certificate, an established connection keeps
    working, and a keystore that does not load is refused with
    INVALID_CONFIG and changes nothing."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    fresh = generate_certs(tmp_path / "fresh", "--pkcs12-password", "new-pw")
    established = Producer(dict(secure.client("SSL"), **{"linger.ms": 0}))
    delivered = []
    established.produce("reload", value=b"before", on_delivery=lambda e, m: delivered.append(e))
    assert established.flush(30) == 0

    admin = AdminClient(secure.client("SASL_PLAINTEXT", "PLAIN", "admin"))

    def alter(entries):
        resource = ConfigResource("BROKER", "1", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()
        ])
        return admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    with pytest.raises(Exception) as bad:
        alter({"listener.name.ssl.ssl.keystore.location": "/nonexistent.p12"})
    assert "SSLFactory" in str(bad.value)
    alter({
        "listener.name.ssl.ssl.keystore.location": os.path.join(fresh, "broker.p12"),
        "listener.name.ssl.ssl.keystore.password": "new-pw",
    })
    # A new connection that trusts only the old CA is refused ...
    assert refused(secure.client("SSL"))
    # ... one that trusts the new CA connects ...
    new_ca = dict(secure.client("SSL"), **{"ssl.ca.location": os.path.join(fresh, "ca.pem")})
    assert produce(new_ca, "reload", [b"new-cert"]) == []
    # ... and the established connection still works.
    established.produce("reload", value=b"after", on_delivery=lambda e, m: delivered.append(e))
    assert established.flush(30) == 0
    assert delivered == [None, None]
    # The password is described as sensitive, never by value.
    resource = ConfigResource("BROKER", "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    entry = configs["listener.name.ssl.ssl.keystore.password"]
    assert entry.is_sensitive and entry.value is None
    assert "new-pw" not in full_log(secure)
