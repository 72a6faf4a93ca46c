"""Authorization with Kafka's StandardAuthorizer semantics, driven by real
clients: ACLs created, described and deleted through kafka-python's admin
API; confluent-kafka producers and consumers refused with Kafka's error
codes; prefixed bindings, DENY over ALLOW, super users, auto-creation
needing CREATE, Metadata hiding what a principal may not describe,
KIP-430 authorized operations, `allow.everyone.if.no.acl.found` both ways,
ACLs surviving a restart, and secrets described as sensitive."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from security_helpers import SecureBroker, generate_certs

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return generate_certs(
        tmp_path_factory.mktemp("acl-certs"), "--key-password", "key-pw", "--pkcs12-password", "store-pw",
    )


def authorized_broker(broker_factory, certs, tmp_path, allow_everyone=False):
    return SecureBroker(broker_factory, certs, tmp_path, {
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true" if allow_everyone else "false",
    }).start()


def acl(principal, operation, permission, resource_type, name, pattern=ACLResourcePatternType.LITERAL):
    return ACL(
        principal=principal, host="*", operation=operation, permission_type=permission,
        resource_pattern=ResourcePattern(resource_type, name, pattern),
    )


def produce_errors(conf, topic, value, extra=None):
    """Delivery errors of one record (empty list: stored)."""
    errors = []
    producer = Producer(dict(conf, **{"linger.ms": 0, "message.timeout.ms": 15000}, **(extra or {})))
    try:
        producer.produce(topic, value=value, on_delivery=lambda e, m: errors.append(e))
    except KafkaException as e:
        # The producer may already know from its first metadata that the
        # topic is refused: the error then comes from produce() itself.
        errors.append(e.args[0])
    assert producer.flush(30) == 0
    return [e for e in errors if e is not None]


def high_watermark(conf, topic):
    consumer = Consumer(dict(conf, **{"group.id": "wm"}))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        consumer.close()


def group_consume(conf, topic, group, count, timeout=40):
    """Subscribes with `group`; returns (values, consumer errors)."""
    consumer = Consumer(dict(conf, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
    }))
    consumer.subscribe([topic])
    values, errors = [], []
    deadline = time.time() + timeout
    try:
        while len(values) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
                if msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    break
                continue
            values.append(msg.value())
        if values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values, errors


def test_acls_enforced_for_real_clients_and_durable(broker_factory, certs, tmp_path):
    secure = authorized_broker(broker_factory, certs, tmp_path)
    admin = KafkaAdminClient(**secure.kafka_python("SASL_PLAINTEXT", "PLAIN", "admin"))
    alice = secure.client("SASL_PLAINTEXT", "PLAIN", "alice")
    bob = secure.client("SASL_PLAINTEXT", "PLAIN", "bob")
    su = secure.client("SASL_PLAINTEXT", "PLAIN", "admin")
    try:
        admin.create_topics([NewTopic(n, 1, 1) for n in ("orders-1", "orders-2", "secret")])
        created = admin.create_acls([
            acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders-",
                ACLResourcePatternType.PREFIXED),
            acl("User:alice", ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, "orders-2"),
            acl("User:bob", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders-1"),
            acl("User:bob", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, "g1"),
        ])
        assert created["failed"] == [] and len(created["succeeded"]) == 4
        any_filter = ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        listed, _ = admin.describe_acls(any_filter)
        assert len(listed) == 4
        matching, _ = admin.describe_acls(ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "orders-1", ACLResourcePatternType.MATCH),
        ))
        assert {(a.principal, a.resource_pattern.resource_name) for a in matching} == {
            ("User:alice", "orders-"), ("User:bob", "orders-1")}

        # A prefixed ALLOW lets alice write; a DENY overrides it.
        assert produce_errors(alice, "orders-1", b"from-alice") == []
        denied = produce_errors(alice, "orders-2", b"denied")
        assert [e.code() for e in denied] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert high_watermark(su, "orders-2") == 0, "a refused record was stored"
        # No WRITE: refused, nothing stored.
        assert [e.code() for e in produce_errors(bob, "orders-1", b"bob")] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert [e.code() for e in produce_errors(alice, "secret", b"x")] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # The super user needs no ACL.
        assert produce_errors(su, "secret", b"classified") == []

        # bob reads with group g1; without READ on group g2 he cannot join.
        values, errors = group_consume(bob, "orders-1", "g1", 1)
        assert values == [b"from-alice"], errors
        values, errors = group_consume(bob, "orders-1", "g2", 1, timeout=20)
        assert values == []
        assert any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors), errors

        # Metadata hides what bob may not describe; KIP-430 operations.
        bob_admin = AdminClient(bob)
        su_admin = AdminClient(su)
        topics = bob_admin.list_topics(timeout=20).topics
        assert sorted(topics) == ["orders-1"]
        described = bob_admin.describe_topics(
            TopicCollection(["orders-1"]), include_authorized_operations=True)
        ops = described["orders-1"].result(timeout=20).authorized_operations
        assert set(ops) == {AclOperation.READ, AclOperation.DESCRIBE}
        described = su_admin.describe_topics(
            TopicCollection(["secret"]), include_authorized_operations=True)
        assert AclOperation.DELETE in described["secret"].result(timeout=20).authorized_operations
        # PLAINTEXT clients are User:ANONYMOUS: they see and write nothing.
        anonymous = {"bootstrap.servers": secure.bootstrap("PLAINTEXT")}
        assert [t for t in AdminClient(anonymous).list_topics(timeout=20).topics] == []

        # Auto-creation needs CREATE.
        refused = produce_errors(alice, "orders-new", b"x")
        assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        admin.create_acls([acl("User:alice", ACLOperation.CREATE, ACLPermissionType.ALLOW, ResourceType.TOPIC,
                               "orders-", ACLResourcePatternType.PREFIXED)])
        assert produce_errors(alice, "orders-new", b"auto-created") == []

        # Cluster and config actions.
        futures = bob_admin.create_topics([ConfluentNewTopic("bobs", 1, 1)])
        with pytest.raises(KafkaException) as refused_create:
            futures["bobs"].result(timeout=20)
        assert refused_create.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        broker_resource = ConfigResource("BROKER", "1")
        with pytest.raises(KafkaException) as refused_configs:
            bob_admin.describe_configs([broker_resource])[broker_resource].result(timeout=20)
        assert refused_configs.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        configs = su_admin.describe_configs([broker_resource])[broker_resource].result(timeout=20)
        jaas = configs["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
        assert jaas.is_sensitive and jaas.value is None
        assert configs["listener.name.ssl.ssl.keystore.password"].value is None

        # A transactional id needs WRITE on it.
        txn_conf = dict(alice, **{"transactional.id": "tx-alice"})
        producer = Producer(txn_conf)
        with pytest.raises(KafkaException) as refused_txn:
            producer.init_transactions(20)
        assert refused_txn.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        admin.create_acls([acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                               ResourceType.TRANSACTIONAL_ID, "tx-alice")])
        producer = Producer(txn_conf)
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce("orders-1", value=b"in-txn")
        producer.commit_transaction(20)

        # DeleteAcls: without the DENY alice may write orders-2.
        deleted = admin.delete_acls([ACLFilter(
            principal="User:alice", host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.DENY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
        )])
        assert len(deleted[0][1]) == 1
        assert produce_errors(alice, "orders-2", b"allowed-now") == []
    finally:
        admin.close()

    # ACLs survive a restart.
    secure.broker.restart()
    admin = KafkaAdminClient(**secure.kafka_python("SASL_PLAINTEXT", "PLAIN", "admin"))
    try:
        listed, _ = admin.describe_acls(any_filter)
        assert len(listed) == 5
    finally:
        admin.close()
    assert [e.code() for e in produce_errors(bob, "orders-1", b"bob")] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce_errors(alice, "orders-1", b"after-restart") == []


def test_allow_everyone_if_no_acl_found(broker_factory, certs, tmp_path):
    """With allow.everyone.if.no.acl.found=true a resource no ACL names is
    open to all, ANONYMOUS included; once an ACL names it, only the ACLs
    decide. With false (the other test) nothing is open."""
    secure = authorized_broker(broker_factory, certs, tmp_path, allow_everyone=True)
    anonymous = {"bootstrap.servers": secure.bootstrap("PLAINTEXT")}
    assert produce_errors(anonymous, "open-topic", b"anyone") == []
    admin = KafkaAdminClient(**secure.kafka_python("SASL_PLAINTEXT", "PLAIN", "admin"))
    try:
        admin.create_acls([acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC,
                               "open-topic")])
    finally:
        admin.close()
    refused = produce_errors(anonymous, "open-topic", b"not-anymore")
    assert [e.code() for e in refused] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce_errors(secure.client("SASL_PLAINTEXT", "PLAIN", "alice"), "open-topic", b"alice") == []
    assert produce_errors(anonymous, "other-topic", b"still-open") == []


def test_acl_apis_without_an_authorizer(broker):
    """No authorizer: the ACL APIs answer SECURITY_DISABLED, as Kafka's."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        result = admin.create_acls([acl("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW,
                                        ResourceType.TOPIC, "t")])
        assert [e.__name__ for e in result["failed"]] == ["SecurityDisabledError"]
    finally:
        admin.close()
