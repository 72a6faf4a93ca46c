"""Security in cluster mode.

Listeners: each broker registers every listener it advertises, so a client
on one broker's SSL listener is told every broker's SSL address (and is
never sent to a PLAINTEXT port); a keystore change made through one broker
reaches the others' listeners.

ACLs and SCRAM users live in the cluster's database: a user created or an
ACL granted through one broker authenticates and authorizes on the others
(and on a broker that joins later with an empty log dir), and a revoked
one stops working there."""

import os
import ssl
import socket
import subprocess

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KRABKA_BIN, free_port, sql
from helpers import wait_for_cluster
from security_helpers import generate_certs
from test_cluster import wait_for


def cluster_broker(cluster_factory, url, node, listener, settings):
    """A started cluster broker with PLAINTEXT (inter-broker) and
    `listener` (the protocol of that name) listeners; the second's port is
    `broker.secure_port`."""
    port = free_port()
    broker = cluster_factory(url, node, start=False)
    broker.overrides.update({
        "listeners": "PLAINTEXT://127.0.0.1:%d,%s://127.0.0.1:%d" % (broker.port, listener, port),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,%s:%s" % (listener, listener),
        "inter.broker.listener.name": "PLAINTEXT",
    })
    broker.overrides.update(settings)
    broker.start()
    broker.secure_port = port
    return broker


def ssl_broker(cluster_factory, url, node, certs):
    return cluster_broker(cluster_factory, url, node, "SSL", {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": os.path.join(certs, "broker.p12"),
        "ssl.keystore.password": "store-pw",
    })


def ssl_conf(broker, ca):
    return {
        "bootstrap.servers": "127.0.0.1:%d" % broker.secure_port,
        "security.protocol": "SSL",
        "ssl.ca.location": os.path.join(ca, "ca.pem"),
    }


def served_certificate(port):
    """The DER certificate a new TLS connection to `port` is served."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def der(path):
    """The DER form of the first certificate in the PEM file at `path`
    (the leaf of a chain)."""
    text = open(path).read()
    end = "-----END CERTIFICATE-----"
    return ssl.PEM_cert_to_DER_cert(text[:text.index(end) + len(end)])


def test_clients_get_every_brokers_address_on_their_listener(cluster_db, cluster_factory, tmp_path):
    certs = generate_certs(tmp_path / "certs", "--pkcs12-password", "store-pw")
    brokers = {node: ssl_broker(cluster_factory, cluster_db, node, certs) for node in (1, 2)}

    # The database holds both listeners of each, the inter-broker one first.
    rows = dict(sql(cluster_db, "SELECT node_id, listeners FROM brokers ORDER BY node_id"))
    for node, b in brokers.items():
        assert rows[str(node)] == "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (b.port, b.secure_port)

    # Through broker 1's SSL listener: both brokers, at their SSL ports.
    def ssl_view():
        md = AdminClient(ssl_conf(brokers[1], certs)).list_topics(timeout=10)
        got = {m.id: m.port for m in md.brokers.values()}
        return got if len(got) == 2 else None

    view = wait_for("both brokers on the SSL listener", ssl_view)
    assert view == {node: b.secure_port for node, b in brokers.items()}
    # Through PLAINTEXT: their PLAINTEXT ports.
    md = AdminClient({"bootstrap.servers": brokers[2].bootstrap}).list_topics(timeout=10)
    assert {m.id: m.port for m in md.brokers.values()} == {node: b.port for node, b in brokers.items()}

    # A producer that knows only broker 1's SSL address writes to both
    # brokers' partitions over SSL.
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("over-ssl", num_partitions=4, replication_factor=1)])["over-ssl"].result(30)

    def leaders():
        t = AdminClient(ssl_conf(brokers[1], certs)).list_topics("over-ssl", timeout=10).topics.get("over-ssl")
        if t is None or len(t.partitions) != 4 or any(p.leader < 0 for p in t.partitions.values()):
            return None
        return {p.id: p.leader for p in t.partitions.values()}

    assert set(wait_for("the topic's leaders", leaders).values()) == {1, 2}
    producer = Producer(dict(ssl_conf(brokers[1], certs), **{"linger.ms": 5}))
    errors = []
    for p in range(4):
        producer.produce("over-ssl", value=b"v%d" % p, partition=p,
                         on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(30) == 0
    assert errors == []
    for node, b in brokers.items():
        assert sum(1 for d in os.listdir(b.data_dir) if d.startswith("over-ssl-")) == 2, node

    # The cluster-wide keystore change, made through broker 1, is served by
    # broker 2's new connections too; established ones keep working.
    fresh = generate_certs(tmp_path / "fresh", "--pkcs12-password", "new-pw")
    # (confluent-kafka and kafka-python refuse the default's empty name;
    # Krabka's CLI sends it as kafka-configs.sh --entity-default does)
    subprocess.run(
        [KRABKA_BIN, "config", "alter", "-b", brokers[1].bootstrap, "--broker-defaults",
         "--set", "listener.name.ssl.ssl.keystore.location=" + os.path.join(fresh, "broker.p12"),
         "--set", "listener.name.ssl.ssl.keystore.password=new-pw"],
        check=True, capture_output=True, timeout=60,
    )
    new_cert = der(os.path.join(fresh, "broker.pem"))
    old_cert = der(os.path.join(certs, "broker.pem"))
    assert served_certificate(brokers[1].secure_port) == new_cert
    wait_for("broker 2 to serve the new certificate",
             lambda: served_certificate(brokers[2].secure_port) == new_cert)
    assert old_cert != new_cert
    for p in range(4):
        producer.produce("over-ssl", value=b"after", partition=p,
                         on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(30) == 0
    # A client that trusts only the new CA reaches both brokers.
    fresh_producer = Producer(dict(ssl_conf(brokers[2], fresh), **{"linger.ms": 5}))
    for p in range(4):
        fresh_producer.produce("over-ssl", value=b"new-ca", partition=p,
                               on_delivery=lambda e, m: errors.append(e) if e else None)
    assert fresh_producer.flush(30) == 0
    assert errors == []


ADMIN_PASSWORD = "admin-scram"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def sasl_broker(cluster_factory, url, node, tmp_path):
    """A cluster broker with PLAINTEXT (inter-broker) and SASL_PLAINTEXT
    (SCRAM-SHA-256) listeners, StandardAuthorizer, admin as super user
    from the bootstrap file."""
    bootstrap = tmp_path / ("scram-%d.txt" % node)
    bootstrap.write_text("SCRAM-SHA-256=[name=admin,password=%s]\n" % ADMIN_PASSWORD)
    return cluster_broker(cluster_factory, url, node, "SASL_PLAINTEXT", {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "krabka.sasl.scram.bootstrap.file": str(bootstrap),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "10",
    })


def scram_conf(broker, user, password):
    return {
        "bootstrap.servers": "127.0.0.1:%d" % broker.secure_port,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def kafka_python_admin(broker, user, password):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers="127.0.0.1:%d" % broker.secure_port, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user, sasl_plain_password=password,
    )


def produce_outcome(conf, topic):
    """None when one record is stored, else the delivery error's code, or
    "auth" when the client could not authenticate."""
    errors, outcome = [], []
    producer = Producer(dict(conf, **{"linger.ms": 0, "message.timeout.ms": 5000},
                             error_cb=lambda e: errors.append(e)))
    producer.produce(topic, value=b"x", on_delivery=lambda e, m: outcome.append(e))
    producer.flush(15)
    if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        return "auth"
    if not outcome:
        return "undelivered"
    return None if outcome[0] is None else outcome[0].code()


def test_acls_and_scram_users_live_in_the_database(cluster_db, cluster_factory, tmp_path):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter, ResourceType, ScramMechanism,
                             UserScramCredentialUpsertion)
    from kafka.admin import NewTopic as KpNewTopic

    b1 = sasl_broker(cluster_factory, cluster_db, 1, tmp_path)
    b2 = sasl_broker(cluster_factory, cluster_db, 2, tmp_path)

    # A user created through broker 1 authenticates on broker 2.
    admin = kafka_python_admin(b1, "admin", ADMIN_PASSWORD)
    try:
        admin.create_topics([KpNewTopic("guarded", 1, 1)])
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, "alice-pw"),
        ]) == {"alice": None}
    finally:
        admin.close()
    alice_on_2 = scram_conf(b2, "alice", "alice-pw")
    wait_for("alice to be refused for lack of ACLs on broker 2",
             lambda: produce_outcome(alice_on_2, "guarded") == KafkaError.TOPIC_AUTHORIZATION_FAILED)
    rows = sql(cluster_db, "SELECT user_name, mechanism FROM scram_credentials ORDER BY user_name")
    assert rows == [("admin", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-256")]
    assert "alice-pw" not in str(sql(cluster_db, "SELECT credential FROM scram_credentials"))

    # An ACL granted through broker 2 lets alice write to the partition's
    # leader (either broker), bootstrapped from either.
    admin = kafka_python_admin(b2, "admin", ADMIN_PASSWORD)
    write = ACL(principal="User:alice", host="*", operation=ACLOperation.WRITE,
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(ResourceType.TOPIC, "guarded", ACLResourcePatternType.LITERAL))
    try:
        created = admin.create_acls([write])
        assert not created["failed"], created
    finally:
        admin.close()
    wait_for("alice to write bootstrapped from broker 2", lambda: produce_outcome(alice_on_2, "guarded") is None)
    wait_for("alice to write bootstrapped from broker 1",
             lambda: produce_outcome(scram_conf(b1, "alice", "alice-pw"), "guarded") is None)
    assert len(sql(cluster_db, "SELECT binding FROM acl_bindings")) == 1

    # A broker that joins later, with an empty log dir, knows both.
    b3 = sasl_broker(cluster_factory, cluster_db, 3, tmp_path)
    assert produce_outcome(scram_conf(b3, "alice", "alice-pw"), "guarded") is None

    # Revoked through broker 1: refused on broker 3 once mirrored.
    admin = kafka_python_admin(b1, "admin", ADMIN_PASSWORD)
    try:
        admin.delete_acls([ACLFilter(
            principal="User:alice", host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "guarded", ACLResourcePatternType.LITERAL))])
    finally:
        admin.close()
    wait_for("the revocation on broker 3",
             lambda: produce_outcome(scram_conf(b3, "alice", "alice-pw"), "guarded")
             == KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert sql(cluster_db, "SELECT binding FROM acl_bindings") == []

    # A wrong password is refused everywhere.
    assert produce_outcome(scram_conf(b2, "alice", "wrong"), "guarded") == "auth"


def test_transaction_markers_cross_a_sasl_ssl_inter_broker_listener(cluster_db, cluster_factory, tmp_path):
    """The brokers' own connections (WriteTxnMarkers) authenticate on the
    inter-broker listener as Kafka's do: TLS trusting ssl.truststore.*,
    SASL with the username and password of the listener's JAAS config; the
    broker principal is a super user, so it may CLUSTER_ACTION."""
    from confluent_kafka import Consumer, TopicPartition

    certs = generate_certs(tmp_path / "certs", "--pkcs12-password", "store-pw")
    brokers = {}
    for node in (1, 2):
        internal = free_port()
        broker = cluster_factory(cluster_db, node, start=False)
        broker.overrides.update({
            "listeners": "EXTERNAL://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (broker.port, internal),
            "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required '
                'username="broker" password="broker-pw" user_broker="broker-pw";',
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": os.path.join(certs, "broker.p12"),
            "ssl.keystore.password": "store-pw",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": os.path.join(certs, "ca.pem"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker",
            "allow.everyone.if.no.acl.found": "true",
        })
        broker.start()
        brokers[node] = broker
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for_cluster([b.bootstrap for b in brokers.values()])
    admin.create_topics([NewTopic("secure-txn", num_partitions=4, replication_factor=1)])["secure-txn"].result(30)

    def leaders():
        t = admin.list_topics(timeout=10).topics.get("secure-txn")
        ok = t and len(t.partitions) == 4 and all(m.leader in (1, 2) for m in t.partitions.values())
        return {p: m.leader for p, m in t.partitions.items()} if ok else None

    placed = wait_for("the topic's leaders", leaders)
    assert set(placed.values()) == {1, 2}, "partitions on both brokers"

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "secure-markers"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(4):
        for i in range(5):
            producer.produce("secure-txn", value=b"%d-%d" % (p, i), partition=p)
    producer.commit_transaction(30)

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "secure-reader",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition("secure-txn", p) for p in range(4)])
    seen = []
    try:
        wait_for("every committed record on both brokers",
                 lambda: seen.extend(m.value() for m in reader.consume(20, 0.5) if not m.error())
                 or len(seen) >= 20)
    finally:
        reader.close()
    assert sorted(seen) == sorted(b"%d-%d" % (p, i) for p in range(4) for i in range(5))
