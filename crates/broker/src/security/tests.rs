//! The authorizer in the dispatcher, in process: requests carrying a
//! session are checked, refused parts answered with Kafka's codes and never
//! reach the handlers, and secrets are described as sensitive. The
//! interop tests drive the same paths with real clients.

use {
    super::{
        acl::binding::{
            AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern,
            ResourceType,
        },
        principal::KafkaPrincipal,
        session::Session,
    },
    crate::{
        broker::Broker,
        config::{BrokerConfig, RawSettings},
        network::codec::Request,
    },
    assert2::check,
    bytes::Bytes,
    kafka_protocol::{
        messages::*,
        protocol::{Decodable, StrBytes},
        records::{Record, TimestampType},
    },
    std::{collections::BTreeMap, sync::Arc},
};

fn broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    raw.set(
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "test",
    );
    raw.set("super.users", "User:admin", "test");
    for (k, v) in extra {
        raw.set(k, v, "test");
    }
    Arc::new(Broker::open(BrokerConfig::from_raw(&raw).unwrap()).unwrap())
}

fn session(broker: &Broker, user: &str) -> Arc<Session> {
    Arc::new(Session::new(
        KafkaPrincipal::user(user),
        std::net::SocketAddr::from(([127, 0, 0, 1], 40_000)),
        Arc::clone(broker.security.inter_broker()),
    ))
}

async fn call<R: Decodable>(
    broker: &Arc<Broker>,
    session: &Arc<Session>,
    api: ApiKey,
    version: i16,
    body: Request,
) -> R {
    crate::handlers::test_call::call_as(broker, Some(session), api, version, body).await
}

/// Topics `open` and `closed`, one partition each, for the ACL tests.
async fn create_open_and_closed(broker: &Arc<Broker>) {
    for topic in ["open", "closed"] {
        crate::handlers::admin::create_topic(broker, topic, 1, -1, &[], BTreeMap::new(), false)
            .await
            .unwrap();
    }
}

fn allow(user: &str, operation: Operation, name: &str) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        entry: AccessControlEntry {
            principal: format!("User:{user}"),
            host: "*".into(),
            operation,
            permission: Permission::Allow,
        },
    }
}

fn produce_request(topic: &str) -> ProduceRequest {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_000,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut partition = produce_request::PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(crate::coordinator::state_topic::encode_v2_batch(&[record]).unwrap());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(StrBytes::from_string(topic.to_owned()));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5_000;
    request.topic_data = vec![data];
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_parts_never_reach_the_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), &[]);
    create_open_and_closed(&broker).await;
    let authorizer = broker.security.authorizer.as_ref().unwrap();
    check!(
        authorizer
            .create(&[allow("alice", Operation::Write, "open")])
            .iter()
            .all(Result::is_ok)
    );
    let alice = session(&broker, "alice");

    let mut request = produce_request("open");
    request
        .topic_data
        .extend(produce_request("closed").topic_data);
    let response: ProduceResponse = call(
        &broker,
        &alice,
        ApiKey::Produce,
        9,
        Request::Produce(request),
    )
    .await;
    let code = |topic: &str| {
        response
            .responses
            .iter()
            .find(|t| t.name.0.as_str() == topic)
            .map(|t| t.partition_responses[0].error_code)
    };
    check!(code("open") == Some(0));
    check!(code("closed") == Some(29));
    check!(
        broker
            .partitions
            .get("closed", 0)
            .unwrap()
            .local_log()
            .log_end_offset()
            == 0
    );

    // Metadata of all topics lists only what alice may describe (WRITE
    // implies DESCRIBE), with KIP-430 operations when asked.
    let mut metadata = MetadataRequest::default();
    metadata.topics = None;
    metadata.include_topic_authorized_operations = true;
    let response: MetadataResponse = call(
        &broker,
        &alice,
        ApiKey::Metadata,
        12,
        Request::Metadata(metadata),
    )
    .await;
    let names: Vec<&str> = response
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    check!(names == vec!["open"]);
    check!(response.topics[0].topic_authorized_operations == (1 << 4) | (1 << 8));

    // A cluster action: refused whole.
    let response: DescribeClusterResponse = call(
        &broker,
        &alice,
        ApiKey::DescribeCluster,
        1,
        Request::DescribeCluster(DescribeClusterRequest::default()),
    )
    .await;
    check!(response.error_code == 31);
    // The super user may.
    let admin = session(&broker, "admin");
    let response: DescribeClusterResponse = call(
        &broker,
        &admin,
        ApiKey::DescribeCluster,
        1,
        Request::DescribeCluster(DescribeClusterRequest::default()),
    )
    .await;
    check!(response.error_code == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_described_as_sensitive() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(
        dir.path(),
        &[
            ("rsm.config.s3.secret.access.key", "hunter2"),
            ("rsm.config.worm.signing.key.file", "/keys/worm.hex"),
            ("rsm.config.s3.bucket", "tier"),
            ("ssl.key.password", "hunter3"),
        ],
    );
    let admin = session(&broker, "admin");
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 4;
    resource.resource_name = StrBytes::from_static_str("1");
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    request.include_synonyms = true;
    let response: DescribeConfigsResponse = call(
        &broker,
        &admin,
        ApiKey::DescribeConfigs,
        4,
        Request::DescribeConfigs(request),
    )
    .await;
    let configs = &response.results[0].configs;
    let get = |name: &str| configs.iter().find(|c| c.name.as_str() == name).unwrap();
    for secret in [
        "rsm.config.s3.secret.access.key",
        "rsm.config.worm.signing.key.file",
        "ssl.key.password",
    ] {
        let entry = get(secret);
        check!(entry.is_sensitive, "{secret}");
        check!(entry.value.is_none(), "{secret}");
        check!(entry.synonyms.iter().all(|s| s.value.is_none()), "{secret}");
    }
    let bucket = get("rsm.config.s3.bucket");
    check!(!bucket.is_sensitive);
    check!(bucket.value.as_ref().map(StrBytes::as_str) == Some("tier"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_topic_partitions_and_elect_leaders_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), &[]);
    for topic in ["a-hidden", "b-open", "c-hidden", "d-open"] {
        crate::handlers::admin::create_topic(&broker, topic, 1, -1, &[], BTreeMap::new(), false)
            .await
            .unwrap();
    }
    let authorizer = broker.security.authorizer.as_ref().unwrap();
    check!(
        authorizer
            .create(&[
                allow("alice", Operation::Describe, "b-open"),
                allow("alice", Operation::Describe, "d-open"),
            ])
            .iter()
            .all(Result::is_ok)
    );
    let alice = session(&broker, "alice");
    let names = |r: &DescribeTopicPartitionsResponse| -> Vec<(String, i16)> {
        r.topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    t.error_code,
                )
            })
            .collect()
    };

    // Every topic: only the describable ones, paged without naming a
    // hidden one in the cursor.
    let mut request = DescribeTopicPartitionsRequest::default();
    request.response_partition_limit = 1;
    let response: DescribeTopicPartitionsResponse = call(
        &broker,
        &alice,
        ApiKey::DescribeTopicPartitions,
        0,
        Request::DescribeTopicPartitions(request.clone()),
    )
    .await;
    check!(names(&response) == vec![("b-open".to_owned(), 0)]);
    let next = response
        .next_cursor
        .as_ref()
        .map(|c| c.topic_name.0.as_str());
    check!(next == Some("d-open"));
    check!(response.topics[0].topic_authorized_operations == 1 << 8);
    // A cursor naming a hidden topic goes on from the next visible one.
    let mut hidden_cursor = describe_topic_partitions_request::Cursor::default();
    hidden_cursor.topic_name = TopicName(StrBytes::from_static_str("c-hidden"));
    request.cursor = Some(hidden_cursor);
    let response: DescribeTopicPartitionsResponse = call(
        &broker,
        &alice,
        ApiKey::DescribeTopicPartitions,
        0,
        Request::DescribeTopicPartitions(request),
    )
    .await;
    check!(names(&response) == vec![("d-open".to_owned(), 0)]);
    check!(response.next_cursor.is_none());

    // Named topics: the hidden one is refused by name.
    let mut request = DescribeTopicPartitionsRequest::default();
    request.response_partition_limit = 10;
    request.topics = ["a-hidden", "b-open"]
        .into_iter()
        .map(|n| {
            let mut t = describe_topic_partitions_request::TopicRequest::default();
            t.name = TopicName(StrBytes::from_static_str(n));
            t
        })
        .collect();
    let response: DescribeTopicPartitionsResponse = call(
        &broker,
        &alice,
        ApiKey::DescribeTopicPartitions,
        0,
        Request::DescribeTopicPartitions(request),
    )
    .await;
    check!(names(&response) == vec![("b-open".to_owned(), 0), ("a-hidden".to_owned(), 29)]);

    // ElectLeaders needs ALTER on the cluster.
    let mut partitions = elect_leaders_request::TopicPartitions::default();
    partitions.topic = TopicName(StrBytes::from_static_str("b-open"));
    partitions.partitions = vec![0];
    let mut request = ElectLeadersRequest::default();
    request.topic_partitions = Some(vec![partitions]);
    let response: ElectLeadersResponse = call(
        &broker,
        &alice,
        ApiKey::ElectLeaders,
        2,
        Request::ElectLeaders(request.clone()),
    )
    .await;
    check!(response.error_code == 31);
    check!(response.replica_election_results[0].partition_result[0].error_code == 31);
    let admin = session(&broker, "admin");
    let response: ElectLeadersResponse = call(
        &broker,
        &admin,
        ApiKey::ElectLeaders,
        2,
        Request::ElectLeaders(request),
    )
    .await;
    check!(response.error_code == 0);
}

#[test]
fn tiered_storage_runs_beside_an_authorizer() {
    // Its metadata topic is read and written in process, so no internal
    // client needs a principal.
    let dir = tempfile::tempdir().unwrap();
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.path().display().to_string(), "test");
    raw.set("remote.log.storage.system.enable", "true", "test");
    raw.set(
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "test",
    );
    check!(Broker::open(BrokerConfig::from_raw(&raw).unwrap()).is_ok());
}

#[test]
fn the_brokers_own_sasl_login_comes_from_the_inter_broker_listeners_jaas_config() {
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                username=\"broker\" password=\"secret\" user_broker=\"secret\";";
    let sasl_listener = [
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas),
    ];
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), &sasl_listener);
    let own = b.security.inter_broker_client().unwrap();
    check!(own.tls.is_none());
    let sasl = own.sasl.unwrap();
    check!((sasl.username.as_str(), sasl.password.as_str()) == ("broker", "secret"));

    // A JAAS config with users only cannot log the broker in: it says so
    // when used, the broker itself still starts.
    let dir = tempfile::tempdir().unwrap();
    let users_only = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                      user_alice=\"pw\";";
    let b = broker(
        dir.path(),
        &[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                users_only,
            ),
        ],
    );
    let refused = b.security.inter_broker_client().unwrap_err();
    check!(refused.contains("username and password"), "{refused}");

    // A plain inter-broker listener needs nothing.
    let dir = tempfile::tempdir().unwrap();
    let own = broker(dir.path(), &[])
        .security
        .inter_broker_client()
        .unwrap();
    check!(own.tls.is_none() && own.sasl.is_none());
}

/// TxnOffsetCommit v6 names topics by id: the ACL check reads the topic
/// the id names, and a refused topic is answered under its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactions_offsets_by_topic_id_are_checked_by_name() {
    use crate::network::{newer::txn_offset_commit, wire::Reader};
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), &[]);
    create_open_and_closed(&broker).await;
    let grant = |resource_type, name: &str, operation| AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type: PatternType::Literal,
        },
        ..allow("alice", operation, name)
    };
    let authorizer = broker.security.authorizer.as_ref().unwrap();
    check!(
        authorizer
            .create(&[
                allow("alice", Operation::Read, "open"),
                grant(ResourceType::Group, "g", Operation::Read),
                grant(ResourceType::TransactionalId, "tx", Operation::Write),
            ])
            .iter()
            .all(Result::is_ok)
    );
    let alice = session(&broker, "alice");
    let id = |name: &str| broker.registry.get(name).unwrap().id;
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(StrBytes::from_static_str("tx"));
    request.group_id = GroupId(StrBytes::from_static_str("g"));
    request.producer_id = ProducerId(1);
    request.generation_id = -1;
    for topic in ["open", "closed"] {
        let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
        txn_offset_commit::set_topic_id(&mut t.unknown_tagged_fields, id(topic));
        let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
        p.committed_offset = 3;
        t.partitions.push(p);
        request.topics.push(t);
    }
    let mut answer = crate::handlers::test_call::call_raw(
        &broker,
        Some(&alice),
        ApiKey::TxnOffsetCommit,
        6,
        Request::Txn(crate::coordinator::txn::wire::TxnRequest::TxnOffsetCommit(
            request,
        )),
    )
    .await;
    let mut r = Reader::new(&mut answer);
    check!(r.i32() == Ok(0));
    let topics = crate::handlers::test_call::topics_by_id(&mut r);
    // "open" passes the check and reaches the (unstarted) coordinator;
    // "closed" is refused under its id.
    check!(topics.contains(&(id("closed"), vec![(0, 29)])));
    check!(topics.contains(&(id("open"), vec![(0, 15)])));
    check!(topics.len() == 2);
}
