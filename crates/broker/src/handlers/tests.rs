//! Every handler at every advertised version, in process: the answer must
//! encode (a field set that a version cannot carry would close the
//! connection) and carry the expected values.

use {
    crate::{
        api_versions::APIS,
        broker::Broker,
        config::{BrokerConfig, RawSettings},
        network::codec::Request,
    },
    assert2::check,
    bytes::Bytes,
    kafka_protocol::{
        messages::*,
        protocol::StrBytes,
        records::{Record, TimestampType},
    },
    std::sync::Arc,
};

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    Arc::new(Broker::open(BrokerConfig::from_raw(&raw).unwrap()).unwrap())
}

/// Record `i` of a test batch: key "k", the given value.
fn record(i: usize, value: Bytes) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i64::try_from(i).unwrap(),
        sequence: -1,
        timestamp: 1_000 + i64::try_from(i).unwrap(),
        key: Some(Bytes::from_static(b"k")),
        value: Some(value),
        headers: Default::default(),
    }
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| record(i, Bytes::copy_from_slice(v.as_bytes())))
        .collect();
    crate::coordinator::state_topic::encode_v2_batch(&records).unwrap()
}

use super::test_call::call;

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

/// Creates topic "t" with 2 partitions.
async fn create_topic_t(broker: &Arc<Broker>) {
    let mut create = CreateTopicsRequest::default();
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = name("t");
    topic.num_partitions = 2;
    topic.replication_factor = -1;
    create.topics.push(topic);
    let created: CreateTopicsResponse = call(
        broker,
        ApiKey::CreateTopics,
        7,
        Request::CreateTopics(create),
    )
    .await;
    check!(created.topics[0].error_code == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_at_every_version_answers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    create_topic_t(&broker).await;
    let topic_id = broker.registry.get("t").unwrap().id;

    for row in APIS {
        let (api, min, max) = (row.key, row.min, row.max);
        for version in min..=max {
            // Versions newer than kafka-protocol's are answered in forms it
            // cannot always read back: network::newer's tests check those.
            if row.is_newer(version) {
                continue;
            }
            match api {
                ApiKey::Produce => {
                    let mut r = ProduceRequest::default();
                    r.acks = 1;
                    r.timeout_ms = 1000;
                    let mut t = produce_request::TopicProduceData::default();
                    if version >= 13 {
                        t.topic_id = topic_id
                    } else {
                        t.name = name("t")
                    }
                    let mut p = produce_request::PartitionProduceData::default();
                    p.records = Some(batch(&["a", "b"]));
                    t.partition_data.push(p);
                    r.topic_data.push(t);
                    let resp: ProduceResponse =
                        call(&broker, api, version, Request::Produce(r)).await;
                    check!(
                        resp.responses[0].partition_responses[0].error_code == 0,
                        "v{version}"
                    );
                }
                ApiKey::Fetch => {
                    let mut r = FetchRequest::default();
                    r.max_bytes = 1 << 20;
                    r.session_epoch = -1;
                    let mut t = fetch_request::FetchTopic::default();
                    if version >= 13 {
                        t.topic_id = topic_id
                    } else {
                        t.topic = name("t")
                    }
                    let mut p = fetch_request::FetchPartition::default();
                    p.partition_max_bytes = 1 << 20;
                    t.partitions.push(p);
                    r.topics.push(t);
                    let resp: FetchResponse = call(&broker, api, version, Request::Fetch(r)).await;
                    let part = &resp.responses[0].partitions[0];
                    check!(part.error_code == 0, "v{version}");
                    check!(
                        part.records.as_ref().is_some_and(|r| !r.is_empty()),
                        "v{version}"
                    );
                }
                ApiKey::ListOffsets => {
                    let mut r = ListOffsetsRequest::default();
                    let mut t = list_offsets_request::ListOffsetsTopic::default();
                    t.name = name("t");
                    let mut p = list_offsets_request::ListOffsetsPartition::default();
                    p.timestamp = -1;
                    t.partitions.push(p);
                    r.topics.push(t);
                    let resp: ListOffsetsResponse =
                        call(&broker, api, version, Request::ListOffsets(r)).await;
                    check!(resp.topics[0].partitions[0].error_code == 0, "v{version}");
                    check!(resp.topics[0].partitions[0].offset > 0, "v{version}");
                }
                ApiKey::Metadata => {
                    let resp: MetadataResponse = call(
                        &broker,
                        api,
                        version,
                        Request::Metadata(MetadataRequest::default()),
                    )
                    .await;
                    if version >= 1 {
                        check!(resp.topics.is_empty(), "v{version}: empty list means none");
                    } else {
                        check!(resp.topics.len() == 1);
                    }
                    let mut all = MetadataRequest::default();
                    all.topics = if version == 0 { Some(vec![]) } else { None };
                    let resp: MetadataResponse =
                        call(&broker, api, version, Request::Metadata(all)).await;
                    check!(resp.topics.len() == 1, "v{version}");
                    check!(resp.topics[0].partitions.len() == 2, "v{version}");
                }
                ApiKey::ApiVersions => {
                    let resp: ApiVersionsResponse = call(
                        &broker,
                        api,
                        version,
                        Request::ApiVersions(ApiVersionsRequest::default()),
                    )
                    .await;
                    check!(resp.api_keys.len() == APIS.len());
                }
                ApiKey::InitProducerId => {
                    let mut r = InitProducerIdRequest::default();
                    // An idempotent producer's: no transactional.id (null).
                    r.transactional_id = None;
                    r.producer_id = ProducerId(-1);
                    r.producer_epoch = -1;
                    let resp: InitProducerIdResponse =
                        call(&broker, api, version, Request::InitProducerId(r)).await;
                    check!(resp.error_code == 0);
                    check!(resp.producer_id.0 >= 0);
                }
                ApiKey::OffsetForLeaderEpoch => {
                    let mut r = OffsetForLeaderEpochRequest::default();
                    let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
                    t.topic = name("t");
                    let mut p =
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
                    p.leader_epoch = 0;
                    p.current_leader_epoch = -1;
                    t.partitions.push(p);
                    r.topics.push(t);
                    let resp: OffsetForLeaderEpochResponse =
                        call(&broker, api, version, Request::OffsetForLeaderEpoch(r)).await;
                    check!(resp.topics[0].partitions[0].end_offset > 0);
                }
                ApiKey::DescribeConfigs => {
                    let mut r = DescribeConfigsRequest::default();
                    let mut res = describe_configs_request::DescribeConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = StrBytes::from_static_str("t");
                    r.resources.push(res);
                    let mut b = describe_configs_request::DescribeConfigsResource::default();
                    b.resource_type = 4;
                    b.resource_name = StrBytes::from_static_str("1");
                    r.resources.push(b);
                    r.include_synonyms = true;
                    let resp: DescribeConfigsResponse =
                        call(&broker, api, version, Request::DescribeConfigs(r)).await;
                    check!(resp.results.iter().all(|r| r.error_code == 0));
                    check!(
                        resp.results[0]
                            .configs
                            .iter()
                            .any(|c| c.name.as_str() == "retention.ms")
                    );
                }
                ApiKey::DescribeLogDirs => {
                    let resp: DescribeLogDirsResponse = call(
                        &broker,
                        api,
                        version,
                        Request::DescribeLogDirs({
                            let mut all = DescribeLogDirsRequest::default();
                            all.topics = None;
                            all
                        }),
                    )
                    .await;
                    check!(
                        resp.results[0]
                            .topics
                            .iter()
                            .any(|t| t.name.0.as_str() == "t")
                    );
                }
                ApiKey::DescribeCluster => {
                    let resp: DescribeClusterResponse = call(
                        &broker,
                        api,
                        version,
                        Request::DescribeCluster(DescribeClusterRequest::default()),
                    )
                    .await;
                    check!(resp.brokers.len() == 1);
                }
                ApiKey::ElectLeaders => {
                    let mut r = ElectLeadersRequest::default();
                    let mut t = elect_leaders_request::TopicPartitions::default();
                    t.topic = name("t");
                    t.partitions = vec![1, 7];
                    r.topic_partitions = Some(vec![t]);
                    let resp: ElectLeadersResponse =
                        call(&broker, api, version, Request::ElectLeaders(r)).await;
                    let codes: Vec<i16> = resp.replica_election_results[0]
                        .partition_result
                        .iter()
                        .map(|p| p.error_code)
                        .collect();
                    // ELECTION_NOT_NEEDED for the partition, UNKNOWN_TOPIC_OR_PARTITION past the last.
                    check!(codes == vec![84, 3], "v{version}");
                    let all: ElectLeadersResponse = call(
                        &broker,
                        api,
                        version,
                        Request::ElectLeaders(ElectLeadersRequest::default()),
                    )
                    .await;
                    check!(all.replica_election_results.is_empty(), "v{version}");
                }
                ApiKey::CreateTopics => {
                    let mut r = CreateTopicsRequest::default();
                    let mut t = create_topics_request::CreatableTopic::default();
                    t.name = TopicName(StrBytes::from_string(format!("c{version}")));
                    t.num_partitions = 1;
                    t.replication_factor = 1;
                    r.topics.push(t);
                    let resp: CreateTopicsResponse =
                        call(&broker, api, version, Request::CreateTopics(r)).await;
                    check!(resp.topics[0].error_code == 0, "v{version}");
                }
                ApiKey::CreatePartitions => {
                    let mut r = CreatePartitionsRequest::default();
                    let mut t = create_partitions_request::CreatePartitionsTopic::default();
                    t.name = TopicName(StrBytes::from_string(format!("c{}", 2 + version)));
                    t.count = 2;
                    t.assignments = None;
                    r.topics.push(t);
                    let resp: CreatePartitionsResponse =
                        call(&broker, api, version, Request::CreatePartitions(r)).await;
                    check!(resp.results[0].error_code == 0, "v{version}");
                }
                ApiKey::DeleteRecords => {
                    let mut r = DeleteRecordsRequest::default();
                    let mut t = delete_records_request::DeleteRecordsTopic::default();
                    t.name = name("t");
                    let mut p = delete_records_request::DeleteRecordsPartition::default();
                    p.partition_index = 1;
                    p.offset = 0;
                    t.partitions.push(p);
                    r.topics.push(t);
                    let resp: DeleteRecordsResponse =
                        call(&broker, api, version, Request::DeleteRecords(r)).await;
                    check!(resp.topics[0].partitions[0].error_code == 0);
                }
                ApiKey::AlterConfigs => {
                    let mut r = AlterConfigsRequest::default();
                    let mut res = alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = StrBytes::from_static_str("t");
                    let mut c = alter_configs_request::AlterableConfig::default();
                    c.name = StrBytes::from_static_str("retention.ms");
                    c.value = Some(StrBytes::from_static_str("86400000"));
                    res.configs.push(c);
                    r.resources.push(res);
                    let resp: AlterConfigsResponse =
                        call(&broker, api, version, Request::AlterConfigs(r)).await;
                    check!(resp.responses[0].error_code == 0);
                }
                ApiKey::IncrementalAlterConfigs => {
                    let mut r = IncrementalAlterConfigsRequest::default();
                    let mut res =
                        incremental_alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = StrBytes::from_static_str("t");
                    let mut c = incremental_alter_configs_request::AlterableConfig::default();
                    c.name = StrBytes::from_static_str("cleanup.policy");
                    c.config_operation = 2;
                    c.value = Some(StrBytes::from_static_str("compact"));
                    res.configs.push(c);
                    r.resources.push(res);
                    let resp: IncrementalAlterConfigsResponse =
                        call(&broker, api, version, Request::IncrementalAlterConfigs(r)).await;
                    check!(resp.responses[0].error_code == 0);
                    let meta = broker.registry.get("t").unwrap();
                    check!(
                        meta.configs.get("cleanup.policy").map(String::as_str) == Some("compact")
                    );
                }
                ApiKey::DeleteTopics => {
                    let mut r = DeleteTopicsRequest::default();
                    let doomed = format!("d{version}");
                    crate::handlers::admin::create_topic(
                        &broker,
                        &doomed,
                        1,
                        -1,
                        &[],
                        Default::default(),
                        false,
                    )
                    .await
                    .unwrap();
                    let target = TopicName(StrBytes::from_string(doomed.clone()));
                    if version >= 6 {
                        let mut s = delete_topics_request::DeleteTopicState::default();
                        s.name = Some(target);
                        r.topics.push(s);
                    } else {
                        r.topic_names.push(target);
                    }
                    let resp: DeleteTopicsResponse =
                        call(&broker, api, version, Request::DeleteTopics(r)).await;
                    check!(resp.responses[0].error_code == 0, "v{version}");
                    check!(broker.registry.get(&doomed).is_none());
                    check!(!dir.path().join(format!("{doomed}-0")).exists());
                }
                // APIs of other modules (the group coordinator) are tested there.
                _ => {}
            }
        }
    }
    broker.partitions.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_fetch_sessions_answer_only_news() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    crate::handlers::admin::create_topic(&broker, "s", 2, -1, &[], Default::default(), false)
        .await
        .unwrap();
    let fetch = |epoch: i32, session: i32, partitions: &[(i32, i64)]| {
        let mut r = FetchRequest::default();
        r.max_bytes = 1 << 20;
        r.session_id = session;
        r.session_epoch = epoch;
        let mut t = fetch_request::FetchTopic::default();
        t.topic = name("s");
        for &(p, offset) in partitions {
            let mut fp = fetch_request::FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = offset;
            fp.partition_max_bytes = 1 << 20;
            t.partitions.push(fp);
        }
        if !partitions.is_empty() {
            r.topics.push(t);
        }
        Request::Fetch(r)
    };
    let full: FetchResponse =
        call(&broker, ApiKey::Fetch, 12, fetch(0, 0, &[(0, 0), (1, 0)])).await;
    check!(full.session_id > 0);
    check!(full.responses[0].partitions.len() == 2);
    let session = full.session_id;
    let quiet: FetchResponse = call(&broker, ApiKey::Fetch, 12, fetch(1, session, &[])).await;
    check!(quiet.error_code == 0);
    check!(quiet.responses.is_empty());
    let partition = broker.partitions.get("s", 1).unwrap();
    partition
        .local_log()
        .append_as_leader(batch(&["x"]), crate::partition::LEADER_EPOCH)
        .unwrap();
    let news: FetchResponse = call(&broker, ApiKey::Fetch, 12, fetch(2, session, &[])).await;
    check!(news.responses[0].partitions.len() == 1);
    check!(news.responses[0].partitions[0].partition_index == 1);
    let stale: FetchResponse = call(&broker, ApiKey::Fetch, 12, fetch(2, session, &[])).await;
    check!(stale.error_code == 71);
    let unknown: FetchResponse =
        call(&broker, ApiKey::Fetch, 12, fetch(1, session + 100, &[])).await;
    check!(unknown.error_code == 70);
    broker.partitions.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_is_woken_by_an_append() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    crate::handlers::admin::create_topic(&broker, "w", 1, -1, &[], Default::default(), false)
        .await
        .unwrap();
    let mut r = FetchRequest::default();
    r.max_bytes = 1 << 20;
    r.min_bytes = 1;
    r.max_wait_ms = 30_000;
    r.session_epoch = -1;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = name("w");
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition_max_bytes = 1 << 20;
    t.partitions.push(fp);
    r.topics.push(t);
    let waiting = {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move { crate::fetch::handle_fetch(&broker, 12, r).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    check!(!waiting.is_finished());
    let partition = broker.partitions.get("w", 0).unwrap();
    partition
        .local_log()
        .append_as_leader(batch(&["wake"]), crate::partition::LEADER_EPOCH)
        .unwrap();
    partition.notify_appended();
    let resp = waiting.await.unwrap();
    check!(
        resp.responses[0].partitions[0]
            .records
            .as_ref()
            .is_some_and(|r| !r.is_empty())
    );
    broker.partitions.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_topics_are_flagged_in_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let mut create = CreateTopicsRequest::default();
    for n in ["__consumer_offsets", "__transaction_state", "orders"] {
        let mut topic = create_topics_request::CreatableTopic::default();
        topic.name = name(n);
        topic.num_partitions = 1;
        topic.replication_factor = -1;
        create.topics.push(topic);
    }
    let created: CreateTopicsResponse = call(
        &broker,
        ApiKey::CreateTopics,
        7,
        Request::CreateTopics(create),
    )
    .await;
    check!(created.topics.iter().all(|t| t.error_code == 0));
    for version in [1, 12] {
        let resp: MetadataResponse = call(
            &broker,
            ApiKey::Metadata,
            version,
            Request::Metadata(MetadataRequest::default().with_topics(None)),
        )
        .await;
        let flags: std::collections::BTreeMap<String, bool> = resp
            .topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.is_internal))
            .collect();
        check!(flags["__consumer_offsets"], "v{version}");
        check!(flags["__transaction_state"], "v{version}");
        check!(!flags["orders"], "v{version}");
    }
}

/// OffsetCommit and OffsetFetch v10 name topics by id (KIP-848): a known id
/// is committed and fetched under its topic, an unknown one is answered
/// UNKNOWN_TOPIC_ID, and a whole-group fetch names its topics by id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_by_topic_id_at_v10() {
    use {crate::coordinator::group::wire::GroupRequest, kafka_protocol::ResponseError};
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let groups = crate::coordinator::group::broker_log::start(&broker)
        .await
        .unwrap();
    let _ = broker.groups.set(groups);
    create_topic_t(&broker).await;
    let id = broker.registry.get("t").unwrap().id;
    let stranger = uuid::Uuid::from_u128(0x5);

    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_static_str("g"));
    commit.generation_id_or_member_epoch = -1;
    for topic_id in [id, stranger] {
        let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
        t.topic_id = topic_id;
        let mut p = offset_commit_request::OffsetCommitRequestPartition::default();
        p.partition_index = 1;
        p.committed_offset = 42;
        t.partitions.push(p);
        commit.topics.push(t);
    }
    let committed: OffsetCommitResponse = call(
        &broker,
        ApiKey::OffsetCommit,
        10,
        Request::Group(GroupRequest::OffsetCommit(commit)),
    )
    .await;
    let answers: Vec<(uuid::Uuid, i16)> = committed
        .topics
        .iter()
        .map(|t| (t.topic_id, t.partitions[0].error_code))
        .collect();
    check!(answers.contains(&(id, 0)));
    check!(answers.contains(&(stranger, ResponseError::UnknownTopicId.code())));
    check!(answers.len() == 2);

    let fetch = |topics: Option<Vec<uuid::Uuid>>| {
        let mut r = OffsetFetchRequest::default();
        let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
        g.group_id = GroupId(StrBytes::from_static_str("g"));
        g.member_epoch = -1;
        g.topics = topics.map(|ids| {
            ids.into_iter()
                .map(|topic_id| {
                    let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
                    t.topic_id = topic_id;
                    t.partition_indexes = vec![1];
                    t
                })
                .collect()
        });
        r.groups.push(g);
        Request::Group(GroupRequest::OffsetFetch(r))
    };
    let fetched: OffsetFetchResponse = call(
        &broker,
        ApiKey::OffsetFetch,
        10,
        fetch(Some(vec![id, stranger])),
    )
    .await;
    let group = &fetched.groups[0];
    check!(group.error_code == 0);
    let mut answers: Vec<(uuid::Uuid, i64, i16)> = group
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions[0].committed_offset,
                t.partitions[0].error_code,
            )
        })
        .collect();
    answers.sort();
    let mut expected = vec![
        (id, 42, 0),
        (stranger, -1, ResponseError::UnknownTopicId.code()),
    ];
    expected.sort();
    check!(answers == expected);

    let all: OffsetFetchResponse = call(&broker, ApiKey::OffsetFetch, 10, fetch(None)).await;
    let topics: Vec<(uuid::Uuid, i64)> = all.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.committed_offset))
        })
        .collect();
    check!(topics == vec![(id, 42)]);
}

/// ApiVersions v5 (KIP-1242): a client that expects this cluster and node
/// gets the API list; one that expects another gets REBOOTSTRAP_REQUIRED
/// and no list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_v5_checks_the_cluster_and_node() {
    use {
        crate::network::{
            codec::DecodedRequest,
            newer::api_versions::{Checked, REBOOTSTRAP_REQUIRED},
        },
        kafka_protocol::protocol::Decodable,
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path());
    let ask = |cluster: &str, node: i32| {
        let broker = Arc::clone(&broker);
        let cluster = StrBytes::from_string(cluster.to_owned());
        async move {
            let mut header = RequestHeader::default();
            header.request_api_key = ApiKey::ApiVersions as i16;
            header.request_api_version = 5;
            let request = DecodedRequest {
                api_key: ApiKey::ApiVersions,
                version: 5,
                header,
                body: Request::ApiVersionsChecked(Box::new(Checked {
                    request: ApiVersionsRequest::default(),
                    cluster_id: Some(cluster),
                    node_id: node,
                })),
                peer: None,
                session: None,
                zero_copy: false,
            };
            let super::Reply::Frame(frame) = super::handle(&broker, request).await else {
                panic!("no answer");
            };
            // Size, correlation id (response header v0), then v4's body.
            let mut body = frame.slice(8..);
            ApiVersionsResponse::decode(&mut body, 4).unwrap()
        }
    };
    let me = broker.cluster_id();
    let node = broker.config.node_id;
    let ok = ask(&me, node).await;
    check!(ok.error_code == 0);
    check!(
        ok.api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version == 5)
    );
    for (cluster, node) in [("another-cluster", node), (me.as_str(), node + 1)] {
        let refused = ask(cluster, node).await;
        check!(refused.error_code == REBOOTSTRAP_REQUIRED);
        check!(refused.api_keys.is_empty());
    }
}

/// One v2 batch of one record whose value is `size` zeros, gzip-compressed:
/// a few kilobytes that inflate to `size`.
fn gzip_zeros(size: usize) -> Bytes {
    let record = record(0, Bytes::from(vec![0; size]));
    let mut out = bytes::BytesMut::new();
    kafka_protocol::records::RecordBatchEncoder::encode(
        &mut out,
        [&record],
        &kafka_protocol::records::RecordEncodeOptions {
            version: 2,
            compression: kafka_protocol::records::Compression::Gzip,
        },
    )
    .unwrap();
    out.freeze()
}

/// A broker whose topics compact (so every compressed batch is opened to
/// check its keys) and whose bound on inflating a batch is 1 MiB.
fn bounded_broker(dir: &std::path::Path) -> Arc<Broker> {
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    raw.set("log.cleanup.policy", "compact", "test");
    raw.set("krabka.decompressed.batch.max.bytes", "1048576", "test");
    Arc::new(Broker::open(BrokerConfig::from_raw(&raw).unwrap()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_inflating_past_the_bound_is_refused_for_its_partition_alone() {
    let dir = tempfile::tempdir().unwrap();
    let broker = bounded_broker(dir.path());
    create_topic_t(&broker).await;
    let bomb = gzip_zeros(8 << 20);
    check!(bomb.len() < 64 << 10);
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 1000;
    let mut t = produce_request::TopicProduceData::default();
    t.name = name("t");
    for (index, records) in [(0, bomb), (1, gzip_zeros(1000))] {
        let mut p = produce_request::PartitionProduceData::default();
        p.index = index;
        p.records = Some(records);
        t.partition_data.push(p);
    }
    r.topic_data.push(t);
    let resp: ProduceResponse = call(&broker, ApiKey::Produce, 9, Request::Produce(r)).await;
    let parts = &resp.responses[0].partition_responses;
    check!(parts[0].error_code == kafka_protocol::ResponseError::MessageTooLarge.code());
    check!(parts[0].base_offset == -1);
    let message = parts[0].error_message.as_deref().unwrap_or_default();
    check!(
        message.contains("krabka.decompressed.batch.max.bytes"),
        "{message}"
    );
    check!(message.contains("1048576"), "{message}");
    check!(parts[1].error_code == 0);
    check!(parts[1].base_offset == 0);
    // Nothing of the refused batch was appended.
    let high_watermark = |i| broker.partitions.get("t", i).unwrap().high_watermark();
    check!(high_watermark(0) == 0);
    check!(high_watermark(1) == 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_message_set_inflating_past_the_bound_is_refused_for_its_partition_alone() {
    let dir = tempfile::tempdir().unwrap();
    let broker = bounded_broker(dir.path());
    create_topic_t(&broker).await;
    // Magic 1 gzip wrappers, as a Produce v2 client sends them.
    let wrapper = |size| krabka_log::message_set::from_batches(&gzip_zeros(size), 1, 0, usize::MAX);
    let mut r = ProduceRequest::default();
    r.acks = 1;
    r.timeout_ms = 1000;
    let mut t = produce_request::TopicProduceData::default();
    t.name = name("t");
    for (index, records) in [(0, wrapper(8 << 20)), (1, wrapper(1000))] {
        let mut p = produce_request::PartitionProduceData::default();
        p.index = index;
        p.records = Some(records);
        t.partition_data.push(p);
    }
    r.topic_data.push(t);
    let answer = super::produce::queue_produce(&broker, 2, "old", r, None)
        .answer()
        .await
        .response;
    let parts = &answer.responses[0].partition_responses;
    check!(parts[0].error_code == kafka_protocol::ResponseError::MessageTooLarge.code());
    check!(parts[1].error_code == 0);
    check!(parts[1].base_offset == 0);
    check!(broker.partitions.get("t", 0).unwrap().high_watermark() == 0);
}
