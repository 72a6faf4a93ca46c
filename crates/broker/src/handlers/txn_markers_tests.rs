//! WriteTxnMarkers end to end in process: a broker serving its listener on
//! a loopback port, a transactional producer's open transaction driven
//! through the dispatcher, and the marker sent over TCP by
//! [`RoutedMarkers`] with a Remote route to that broker — then what a
//! read_committed fetch and the group coordinator see.

use {
    crate::{
        broker::Broker,
        cluster::markers::{MarkerClient, MarkerRoute, RoutedMarkers},
        config::{BrokerConfig, RawSettings},
        coordinator::{
            group::OFFSETS_TOPIC,
            txn::{
                MarkerError, MarkerWriter, TopicPartition,
                test_client::{add_partition, committed_offset, init, produce, sb, send_offsets},
            },
        },
        network::codec::Request,
    },
    assert2::check,
    kafka_protocol::{messages::*, records::RecordBatchDecoder},
    krabka_ids::{BrokerId, TransactionVersion},
    krabka_log::ControlMarker,
    std::{path::Path, sync::Arc, time::Duration},
    tokio::sync::watch,
};

/// Every wait of these tests ends by this deadline.
const DEADLINE: Duration = Duration::from_secs(30);

/// A broker with both coordinators, serving its inter-broker listener on a
/// loopback port until dropped.
struct Served {
    broker: Arc<Broker>,
    listeners: String,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(dir: &Path, extra: &[(&str, &str)]) -> Self {
        let mut raw = RawSettings::default();
        for (k, v) in [
            ("log.dirs", dir.display().to_string().as_str()),
            ("log.cleaner.enable", "false"),
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            ("offsets.topic.num.partitions", "3"),
            ("transaction.state.log.num.partitions", "3"),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                "600000",
            ),
        ] {
            raw.set(k, v, "test");
        }
        for (k, v) in extra {
            raw.set(k, v, "test");
        }
        let config = BrokerConfig::from_raw(&raw).unwrap();
        let network = Arc::new(crate::network::Network::new(&config).await.unwrap());
        let broker = Arc::new(
            crate::blocking::run(move || Broker::open(config))
                .await
                .unwrap()
                .unwrap(),
        );
        let groups = crate::coordinator::group::broker_log::start(&broker)
            .await
            .unwrap();
        let _ = broker.groups.set(groups);
        let txns = crate::coordinator::txn::broker_log::start(&broker)
            .await
            .unwrap();
        let _ = broker.txns.set(txns);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let endpoint = Arc::clone(broker.security.inter_broker());
        endpoint.set_bound_port(port);
        broker.set_bound_port(port);
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(crate::network::serve(
            Arc::clone(&broker),
            network,
            listener,
            endpoint,
            stopped,
        ));
        Self {
            broker,
            listeners: format!("PLAINTEXT://127.0.0.1:{port}"),
            stop,
            server,
        }
    }

    /// Markers routed to this broker over TCP, as another broker's
    /// coordinator sends them.
    fn remote_markers(&self) -> RoutedMarkers {
        let listeners = self.listeners.clone();
        RoutedMarkers::new(
            Arc::new(NoLocal),
            Arc::new(move |_: &TopicPartition| MarkerRoute::Remote {
                node: BrokerId(0),
                listeners: listeners.clone(),
            }),
            Arc::new(MarkerClient::for_broker(&self.broker)),
            tokio::runtime::Handle::current(),
        )
    }

    async fn stop(self) {
        self.stop.send_replace(true);
        tokio::time::timeout(DEADLINE, self.server)
            .await
            .expect("the listener stops within the deadline")
            .unwrap();
        let broker = self.broker;
        crate::blocking::run(move || broker.partitions.close_all())
            .await
            .unwrap();
    }
}

/// The local writer of a route that never says Local.
struct NoLocal;

impl MarkerWriter for NoLocal {
    fn write_marker(&self, _: &TopicPartition, _: ControlMarker) -> Result<(), MarkerError> {
        Err(MarkerError::Failed(
            "no local partitions in this test".into(),
        ))
    }
}

/// `write_marker` on the blocking pool, as the coordinator calls it.
async fn write(
    markers: &Arc<RoutedMarkers>,
    topic: &str,
    partition: i32,
    producer: (i64, i16),
    commit: bool,
) -> Result<(), MarkerError> {
    write_as(
        markers,
        topic,
        partition,
        producer,
        commit,
        TransactionVersion::V0,
    )
    .await
}

/// [`write`] for a transaction of `version`.
async fn write_as(
    markers: &Arc<RoutedMarkers>,
    topic: &str,
    partition: i32,
    producer: (i64, i16),
    commit: bool,
    version: TransactionVersion,
) -> Result<(), MarkerError> {
    let markers = Arc::clone(markers);
    let tp = TopicPartition::new(topic, partition);
    let marker = ControlMarker {
        producer_id: krabka_ids::ProducerId(producer.0),
        producer_epoch: krabka_ids::ProducerEpoch(producer.1),
        commit,
        coordinator_epoch: 0,
        transaction_version: version,
    };
    tokio::time::timeout(
        DEADLINE,
        crate::blocking::run(move || markers.write_marker(&tp, marker)),
    )
    .await
    .expect("the marker is answered within the deadline")
    .unwrap()
}

use crate::handlers::test_call::call;

/// A transactional producer with an open transaction on `data-0` holding
/// `values`.
async fn open_transaction(broker: &Arc<Broker>, id: &str, values: &[&str]) -> (i64, i16) {
    let producer = init(broker, id, 600_000).await;
    add_partition(broker, id, producer, "data").await;
    produce(broker, id, producer, values).await;
    producer
}

/// The values a read_committed consumer of `data-0` is given, fetching
/// from 0 to the last stable offset: control records and those of the
/// aborted transactions the answers list are left out (as clients filter
/// them).
async fn read_committed(broker: &Arc<Broker>) -> Vec<String> {
    let (mut offset, mut values, mut aborted) = (0, Vec::new(), Vec::new());
    loop {
        let mut request = FetchRequest::default();
        request.max_wait_ms = 0;
        request.min_bytes = 0;
        request.max_bytes = 1 << 20;
        request.isolation_level = 1;
        request.session_epoch = -1;
        let mut t = fetch_request::FetchTopic::default();
        t.topic = TopicName(sb("data"));
        let mut part = fetch_request::FetchPartition::default();
        part.fetch_offset = offset;
        part.partition_max_bytes = 1 << 20;
        t.partitions.push(part);
        request.topics.push(t);
        let response = crate::fetch::handle_fetch(broker, 12, request).await;
        let data = &response.responses[0].partitions[0];
        check!(data.error_code == 0);
        aborted.extend(
            data.aborted_transactions
                .iter()
                .flatten()
                .map(|a| (a.producer_id.0, a.first_offset)),
        );
        let mut buf = data.records.clone().unwrap_or_default();
        if buf.is_empty() {
            return values;
        }
        while !buf.is_empty() {
            for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
                offset = r.offset + 1;
                let hidden = aborted
                    .iter()
                    .any(|(pid, first)| *pid == r.producer_id && r.offset >= *first);
                if !r.control && !hidden {
                    values.push(String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned());
                }
            }
        }
    }
}

async fn create_data(broker: &Arc<Broker>) {
    crate::handlers::admin::create_topic(broker, "data", 1, -1, &[], Default::default(), false)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_commit_marker_makes_the_transaction_visible_and_an_abort_hides_it() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &[]).await;
    let broker = Arc::clone(&served.broker);
    create_data(&broker).await;
    let markers = Arc::new(served.remote_markers());

    let committed = open_transaction(&broker, "committed", &["c1", "c2"]).await;
    check!(read_committed(&broker).await.is_empty());
    write(&markers, "data", 0, committed, true).await.unwrap();
    check!(read_committed(&broker).await == vec!["c1", "c2"]);
    let log = Arc::clone(broker.partitions.get("data", 0).unwrap().local_log());
    check!(log.last_stable_offset() == log.log_end_offset());

    let aborted = open_transaction(&broker, "aborted", &["a1"]).await;
    write(&markers, "data", 0, aborted, false).await.unwrap();
    check!(read_committed(&broker).await == vec!["c1", "c2"]);
    let listed = log.aborted_transactions(0, log.log_end_offset()).unwrap();
    check!(listed.len() == 1);
    check!(listed[0].producer_id.0 == aborted.0);

    // A marker of an older epoch than the log knows is moot: dropped.
    let fenced = (committed.0, committed.1 - 1);
    check!(write(&markers, "data", 0, fenced, true).await == Err(MarkerError::Gone));
    // So is one for a partition the broker does not have.
    check!(write(&markers, "nope", 0, committed, true).await == Err(MarkerError::Gone));
    check!(write(&markers, "data", 7, committed, true).await == Err(MarkerError::Gone));

    // The handler's own codes, per partition: INVALID_PRODUCER_EPOCH for
    // the fenced epoch, UNKNOWN_TOPIC_OR_PARTITION past the last partition.
    let mut request = crate::cluster::markers::request(
        &TopicPartition::new("data", 0),
        ControlMarker {
            producer_id: krabka_ids::ProducerId(fenced.0),
            producer_epoch: krabka_ids::ProducerEpoch(fenced.1),
            commit: true,
            coordinator_epoch: 0,
            transaction_version: krabka_ids::TransactionVersion::V0,
        },
    );
    request.0.markers[0].topics[0].partition_indexes.push(7);
    let answer: WriteTxnMarkersResponse = call(
        &broker,
        ApiKey::WriteTxnMarkers,
        1,
        Request::WriteTxnMarkers(request.0),
    )
    .await;
    let codes: Vec<(i32, i16)> = answer.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    check!(codes == vec![(0, 47), (7, 3)]);
    check!(read_committed(&broker).await == vec!["c1", "c2"]);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_consumer_offsets_marker_goes_through_the_group_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &[]).await;
    let broker = Arc::clone(&served.broker);
    create_data(&broker).await;
    let markers = Arc::new(served.remote_markers());
    let producer = open_transaction(&broker, "offsets", &["x"]).await;

    send_offsets(&broker, "offsets", producer, "g", 1).await;

    let groups = Arc::clone(broker.groups.get().unwrap());
    // Pending until the marker: UNSTABLE_OFFSET_COMMIT for a stable read.
    check!(committed_offset(&broker, "g").await == -88);
    let shard = groups.partition_for("g");
    write(&markers, OFFSETS_TOPIC, shard, producer, true)
        .await
        .unwrap();
    check!(committed_offset(&broker, "g").await == 1);
    // A shard index the group coordinator does not have is not its: retried.
    check!(matches!(
        write(&markers, OFFSETS_TOPIC, 99, producer, true).await,
        Err(MarkerError::Failed(_))
    ));
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cluster_action_every_partition_is_refused_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(
        dir.path(),
        &[
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", "User:admin"),
        ],
    )
    .await;
    let broker = Arc::clone(&served.broker);
    create_data(&broker).await;
    // Through the dispatcher without a session: the broker's own request.
    let producer = open_transaction(&broker, "refused", &["r"]).await;

    // The anonymous PLAINTEXT principal has no CLUSTER_ACTION.
    let markers = Arc::new(served.remote_markers());
    let Err(MarkerError::Failed(reason)) = write(&markers, "data", 0, producer, true).await else {
        panic!("a refused marker must be retried");
    };
    check!(reason.contains("ClusterAuthorizationFailed"), "{reason}");

    let connection = tokio::time::timeout(
        DEADLINE,
        krabka_client::Connection::connect(
            served.listeners.trim_start_matches("PLAINTEXT://"),
            &krabka_client::ConnectionConfig::default(),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let mut request = crate::cluster::markers::request(
        &TopicPartition::new("data", 0),
        ControlMarker {
            producer_id: krabka_ids::ProducerId(producer.0),
            producer_epoch: krabka_ids::ProducerEpoch(producer.1),
            commit: true,
            coordinator_epoch: 0,
            transaction_version: krabka_ids::TransactionVersion::V0,
        },
    );
    request.0.markers[0].topics[0].partition_indexes.push(5);
    let answer = tokio::time::timeout(DEADLINE, connection.send_version(&request, 1))
        .await
        .unwrap()
        .unwrap();
    let codes: Vec<(i32, i16)> = answer.0.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    check!(codes == vec![(0, 31), (5, 31)]);
    check!(answer.0.markers[0].producer_id.0 == producer.0);
    let log = Arc::clone(broker.partitions.get("data", 0).unwrap().local_log());
    check!(log.last_stable_offset() == 0);
    drop(connection);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_does_not_answer_is_retried_and_the_connection_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &[]).await;
    let broker = Arc::clone(&served.broker);
    create_data(&broker).await;
    let client = Arc::new(MarkerClient::for_broker(&broker));

    // Nothing listens on a port just released: connection refused, retried.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let listeners = format!("PLAINTEXT://127.0.0.1:{closed}");
    let dead = RoutedMarkers::new(
        Arc::new(NoLocal),
        Arc::new(move |_: &TopicPartition| MarkerRoute::Remote {
            node: BrokerId(9),
            listeners: listeners.clone(),
        }),
        Arc::clone(&client),
        tokio::runtime::Handle::current(),
    );
    let Err(MarkerError::Failed(reason)) = write(&Arc::new(dead), "data", 0, (1, 0), true).await
    else {
        panic!("an unreachable broker must be retried");
    };
    check!(reason.contains("broker 9"), "{reason}");

    // Two markers to the live broker share one connection.
    let listeners = served.listeners.clone();
    let live = Arc::new(RoutedMarkers::new(
        Arc::new(NoLocal),
        Arc::new(move |_: &TopicPartition| MarkerRoute::Remote {
            node: BrokerId(0),
            listeners: listeners.clone(),
        }),
        Arc::clone(&client),
        tokio::runtime::Handle::current(),
    ));
    let first = open_transaction(&broker, "first", &["1"]).await;
    write(&live, "data", 0, first, true).await.unwrap();
    let second = open_transaction(&broker, "second", &["2"]).await;
    write(&live, "data", 0, second, true).await.unwrap();
    check!(read_committed(&broker).await == vec!["1", "2"]);
    check!(client.connections() == 1);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_marker_travels_with_its_version_and_a_stale_one_ends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path(), &[]).await;
    let broker = Arc::clone(&served.broker);
    create_data(&broker).await;
    let markers = Arc::new(served.remote_markers());
    let producer = open_transaction(&broker, "v2", &["a"]).await;
    let log = Arc::clone(broker.partitions.get("data", 0).unwrap().local_log());
    // Sent as WriteTxnMarkers v2: at the records' own epoch a version 2
    // marker is a stale one, and the transaction stays open.
    check!(
        write_as(&markers, "data", 0, producer, true, TransactionVersion::V2).await
            == Err(MarkerError::Gone)
    );
    check!(log.last_stable_offset() == 0);
    // The coordinator's bumped epoch ends it.
    let bumped = (producer.0, producer.1 + 1);
    check!(write_as(&markers, "data", 0, bumped, true, TransactionVersion::V2).await == Ok(()));
    check!(log.last_stable_offset() == log.log_end_offset());
    check!(read_committed(&broker).await == vec!["a"]);
    served.stop().await;
}
