//! `krabka remote-metadata dump` against a real broker: segment events
//! published through the topic-based metadata manager come back in the
//! command's JSON with their states.

use {
    assert2::{assert, check},
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentDetails, RemoteLogSegmentId,
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        RlmmCacheDump, TopicIdPartition, kafka_uuid,
    },
    krabka_remote_storage_topic::{
        KafkaMetadataEventLog, KafkaMetadataEventLogConfig, TopicBasedRemoteLogMetadataManager,
        TopicBasedRlmmConfig,
    },
    std::{
        collections::BTreeMap,
        process::{Child, Command, Stdio},
        sync::Arc,
        time::{Duration, Instant},
    },
    uuid::Uuid,
};

/// The broker under test; killed when dropped.
struct Broker {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Broker {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_krabka"))
            .arg("serve")
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://{addr}"))
            .arg("--override")
            .arg(format!("log.dirs={}", dir.path().join("data").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "krabka did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn segment(partition: &TopicIdPartition, start: i64, end: i64) -> RemoteLogSegmentMetadata {
    RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::generate_new(partition.clone()),
        start,
        end,
        1_700_000_000_000 + end,
        1,
        1_700_000_000_000,
        RemoteLogSegmentDetails::new(
            4096,
            RemoteLogSegmentState::CopySegmentStarted,
            BTreeMap::from([(LeaderEpoch(0), start)]),
        ),
    )
    .unwrap()
}

fn dump(addr: &str, topic: Option<&str>) -> RlmmCacheDump {
    let mut command = Command::new(env!("CARGO_BIN_EXE_krabka"));
    command.args(["remote-metadata", "dump", "--bootstrap", addr]);
    if let Some(topic) = topic {
        command.args(["--topic", topic]);
    }
    let output = command.stderr(Stdio::inherit()).output().unwrap();
    assert!(output.status.success(), "dump failed: {:?}", output.status);
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_prints_the_segments_published_to_the_metadata_topic_with_their_states() {
    let broker = Broker::start();
    let log = Arc::new(
        KafkaMetadataEventLog::connect(KafkaMetadataEventLogConfig::new(vec![broker.addr.clone()]))
            .await
            .unwrap(),
    );
    let orders = TopicIdPartition::new(Uuid::new_v4(), "orders", 0);
    let audit = TopicIdPartition::new(Uuid::new_v4(), "audit", 2);
    let first = segment(&orders, 0, 99);
    let second = segment(&orders, 100, 199);
    let other = segment(&audit, 0, 9);
    let ids = (
        first.remote_log_segment_id().clone(),
        second.remote_log_segment_id().clone(),
        other.remote_log_segment_id().clone(),
    );
    let finished = ids.0.clone();
    let runtime = tokio::runtime::Handle::current();
    let writer_log = Arc::clone(&log);
    tokio::task::spawn_blocking(move || {
        let rlmm = TopicBasedRemoteLogMetadataManager::new(
            writer_log,
            runtime,
            TopicBasedRlmmConfig::default(),
        );
        rlmm.on_partition_leadership_changes(&[orders.clone(), audit.clone()], &[])
            .unwrap();
        while !(rlmm.is_ready(&orders) && rlmm.is_ready(&audit)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        rlmm.add_remote_log_segment_metadata(first).unwrap();
        rlmm.add_remote_log_segment_metadata(second).unwrap();
        rlmm.add_remote_log_segment_metadata(other).unwrap();
        // The first segment finishes its copy; the second stays in flight.
        rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate::new(
            finished,
            1_700_000_000_500,
            None,
            RemoteLogSegmentState::CopySegmentFinished,
            1,
        ))
        .unwrap();
        rlmm.close().unwrap();
    })
    .await
    .unwrap();
    log.close().await;

    let addr = broker.addr.clone();
    let (everything, only_orders, absent) = tokio::task::spawn_blocking(move || {
        (
            dump(&addr, None),
            dump(&addr, Some("orders")),
            dump(&addr, Some("absent")),
        )
    })
    .await
    .unwrap();

    check!(everything.partitions.len() == 2);
    let orders_dump = everything
        .partitions
        .iter()
        .find(|p| p.topic == "orders")
        .unwrap();
    check!(orders_dump.partition == 0);
    check!(orders_dump.delete_state == None);
    let states: Vec<_> = orders_dump
        .segments
        .iter()
        .map(|s| {
            (
                s.segment_id.clone(),
                s.state.clone(),
                s.start_offset,
                s.end_offset,
            )
        })
        .collect();
    check!(
        states
            == vec![
                (
                    kafka_uuid(ids.0.id()),
                    "COPY_SEGMENT_FINISHED".to_owned(),
                    0,
                    99
                ),
                (
                    kafka_uuid(ids.1.id()),
                    "COPY_SEGMENT_STARTED".to_owned(),
                    100,
                    199
                ),
            ]
    );
    let audit_dump = everything
        .partitions
        .iter()
        .find(|p| p.topic == "audit")
        .unwrap();
    check!(audit_dump.partition == 2);
    check!(audit_dump.segments.len() == 1);
    check!(audit_dump.segments[0].segment_id == kafka_uuid(ids.2.id()));
    check!(audit_dump.segments[0].state == "COPY_SEGMENT_STARTED");

    check!(only_orders.partitions.len() == 1);
    check!(only_orders.partitions[0].topic == "orders");
    check!(only_orders.partitions[0].segments.len() == 2);
    check!(absent.partitions.is_empty());
}
