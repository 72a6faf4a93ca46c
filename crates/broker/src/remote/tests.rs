//! The remote log manager in process, on a real broker state (logs on a
//! temporary disk, the filesystem tier, the in-memory metadata manager):
//! read_committed and timestamp lookups reaching into the tier, deletion on
//! request, the reader pool, and metrics. Task passes are run by hand, so
//! nothing here waits on a timer.

use {
    super::{Archive, RemoteLogManager, UNFINISHED_AGE_MS, settings::RemoteSettings},
    crate::{
        broker::Broker,
        config::{BrokerConfig, RawSettings},
        fetch::{READ_COMMITTED, handle_fetch},
        partition::{LEADER_EPOCH, Partition},
    },
    assert2::check,
    bytes::Bytes,
    kafka_protocol::{
        messages::{
            FetchRequest, TopicName,
            fetch_request::{FetchPartition, FetchTopic},
            fetch_response::PartitionData,
        },
        protocol::StrBytes,
        records::{Record, RecordBatchDecoder, TimestampType},
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::ControlMarker,
    krabka_remote_storage::{
        BytePosition, CustomMetadata, IndexType, InmemoryRemoteLogMetadataManager,
        LocalTieredStorage, LogSegmentData, RemoteLogMetadataManager, RemoteLogSegmentDetails,
        RemoteLogSegmentId, RemoteLogSegmentMetadata, RemoteLogSegmentState,
        RemotePartitionDeleteMetadata, RemotePartitionDeleteState, RemoteStorageError,
        RemoteStorageManager, TopicIdPartition,
    },
    std::{
        collections::BTreeMap,
        path::{Path, PathBuf},
        sync::{
            Arc, Condvar, Mutex,
            atomic::{AtomicUsize, Ordering},
        },
    },
};

/// Records per batch in these tests.
pub(crate) const PER_BATCH: i64 = 10;

pub(crate) struct Harness {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) broker: Arc<Broker>,
    pub(crate) rlm: Arc<RemoteLogManager>,
    pub(crate) metadata: Arc<InmemoryRemoteLogMetadataManager>,
    pub(crate) tier: PathBuf,
}

pub(crate) fn config(dir: &Path, extra: &[(&str, &str)]) -> BrokerConfig {
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    raw.set("remote.log.storage.system.enable", "true", "test");
    raw.set("krabka.remote.log.metadata.manager", "in-memory", "test");
    for (k, v) in extra {
        raw.set(k, v, "test");
    }
    BrokerConfig::from_raw(&raw).unwrap()
}

/// A broker with tiering on; `wrap` may put a test tier around the filesystem one.
pub(crate) fn harness_with(
    extra: &[(&str, &str)],
    wrap: impl FnOnce(Arc<dyn RemoteStorageManager>) -> Arc<dyn RemoteStorageManager>,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let broker = Arc::new(Broker::open(config(dir.path(), extra)).unwrap());
    let settings = RemoteSettings::from_config(&broker.config)
        .unwrap()
        .unwrap();
    std::fs::create_dir_all(&settings.storage_dir).unwrap();
    let tier = settings.storage_dir.clone();
    let storage = wrap(Arc::new(LocalTieredStorage::new(tier.clone())));
    let metadata = Arc::new(InmemoryRemoteLogMetadataManager::new());
    let rlm = RemoteLogManager::from_parts(
        0,
        &broker.config.log_dir,
        settings,
        storage,
        Arc::clone(&metadata) as Arc<dyn RemoteLogMetadataManager>,
        Archive::default(),
    )
    .unwrap();
    broker.remote.set(Arc::clone(&rlm)).unwrap();
    Harness {
        _dir: dir,
        broker,
        rlm,
        metadata,
        tier,
    }
}

pub(crate) fn harness() -> Harness {
    harness_with(&[], |s| s)
}

impl Harness {
    /// A "restarted" manager: a new one over the same metadata, tier and
    /// disk, after its first task pass.
    pub(crate) async fn restarted(&self) -> Arc<RemoteLogManager> {
        let again = RemoteLogManager::from_parts(
            0,
            &self.broker.config.log_dir,
            RemoteSettings::from_config(&self.broker.config)
                .unwrap()
                .unwrap(),
            Arc::new(LocalTieredStorage::new(self.tier.clone())),
            Arc::clone(&self.metadata) as Arc<dyn RemoteLogMetadataManager>,
            Archive::default(),
        )
        .unwrap();
        let (rlm, broker) = (Arc::clone(&again), Arc::clone(&self.broker));
        crate::blocking::run(move || {
            rlm.before_first_pass(&broker);
            rlm.run_once(&broker);
        })
        .await
        .unwrap();
        again
    }

    pub(crate) async fn topic(&self, name: &str, extra: &[(&str, &str)]) -> Arc<Partition> {
        let mut configs: BTreeMap<String, String> = [
            ("segment.bytes", "2048"),
            ("remote.storage.enable", "true"),
            ("local.retention.bytes", "1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in extra {
            configs.insert((*k).to_owned(), (*v).to_owned());
        }
        crate::handlers::admin::create_topic(&self.broker, name, 1, -1, &[], configs, false)
            .await
            .unwrap();
        self.broker.partitions.get(name, 0).unwrap()
    }

    /// One task pass on a blocking thread, as the task runs it.
    pub(crate) async fn pass(&self) {
        let (rlm, broker) = (Arc::clone(&self.rlm), Arc::clone(&self.broker));
        crate::blocking::run(move || rlm.run_once(&broker))
            .await
            .unwrap();
    }

    /// `.log` files of the partition in the tier.
    pub(crate) fn tier_logs(&self, p: &Partition) -> Vec<String> {
        self.tier_logs_of(&RemoteLogManager::tip(p))
    }

    fn tier_logs_of(&self, tp: &TopicIdPartition) -> Vec<String> {
        let dir = self
            .tier
            .join(krabka_remote_storage::partition_dir_name(tp));
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".log"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

fn encode(records: &[Record]) -> Bytes {
    crate::coordinator::state_topic::encode_v2_batch(records).unwrap()
}

/// An hour ago: record timestamps are relative to it, so retention by time
/// (seven days by default) never takes them.
pub(crate) fn base() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| super::now_ms() - 3_600_000)
}

/// One batch of `PER_BATCH` records; timestamps are `base() + ts + offset in batch`.
pub(crate) fn batch(tag: &str, ts: i64, producer: Option<(i64, i16, i32)>) -> Bytes {
    let records: Vec<Record> = (0..PER_BATCH)
        .map(|i| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer.map_or(-1, |p| p.0),
            producer_epoch: producer.map_or(-1, |p| p.1),
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: producer.map_or(-1, |p| p.2 + i32::try_from(i).unwrap()),
            timestamp: base() + ts + i,
            key: Some(Bytes::from(format!("{tag}-{i}"))),
            value: Some(Bytes::from(format!("value {tag} {i} {}", "x".repeat(40)))),
            headers: Default::default(),
        })
        .collect();
    encode(&records)
}

pub(crate) fn append(p: &Partition, records: Bytes) -> i64 {
    p.local_log()
        .append_as_leader(records, LEADER_EPOCH)
        .unwrap()
        .first_offset
}

pub(crate) fn decode(records: &Bytes) -> Vec<Record> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.extend(RecordBatchDecoder::decode(&mut buf).unwrap().records);
    }
    out
}

async fn fetch(h: &Harness, topic: &str, offset: i64, isolation: i8) -> PartitionData {
    let mut request = FetchRequest::default();
    request.max_wait_ms = 0;
    request.min_bytes = 0;
    request.max_bytes = 1 << 20;
    request.isolation_level = isolation;
    request.session_epoch = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    let mut part = FetchPartition::default();
    part.fetch_offset = offset;
    part.partition_max_bytes = 1 << 20;
    t.partitions.push(part);
    request.topics.push(t);
    let response = handle_fetch(&h.broker, 12, request).await;
    response.responses[0].partitions[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_from_the_tier_reports_remote_aborted_transactions() {
    let h = harness();
    let p = h.topic("txn", &[]).await;
    let (pid, epoch) = (7000_i64, 0_i16);
    let mut aborted_first = Vec::new();
    let mut seq = 0;
    // Plain batches, then transactions alternately committed and aborted,
    // spread over many 2 KiB segments.
    for n in 0..30 {
        append(&p, batch(&format!("plain{n}"), 1_000, None));
        let first = append(
            &p,
            batch(&format!("txn{n}"), 1_000, Some((pid, epoch, seq))),
        );
        seq += i32::try_from(PER_BATCH).unwrap();
        let commit = n % 2 == 0;
        if !commit {
            aborted_first.push(first);
        }
        p.local_log()
            .append_control_marker(
                ControlMarker {
                    producer_id: ProducerId(pid),
                    producer_epoch: ProducerEpoch(epoch),
                    commit,
                    coordinator_epoch: 0,
                    transaction_version: krabka_ids::TransactionVersion::V0,
                },
                LEADER_EPOCH,
            )
            .unwrap();
    }
    append(&p, batch("tail", 1_000, None));
    h.pass().await;
    let local_start = p.local_log().log_start_offset();
    check!(local_start > 100, "most segments left local disk");
    check!(p.log_start_offset() == 0);

    // Walk the whole log read_committed from 0, as a consumer does.
    let mut offset = 0;
    let mut reported = Vec::new();
    let mut remote_reads = 0;
    while offset < p.local_log().last_stable_offset() {
        let data = fetch(&h, "txn", offset, READ_COMMITTED).await;
        check!(data.error_code == 0);
        if offset < local_start {
            remote_reads += 1;
        }
        let records = decode(data.records.as_ref().unwrap());
        assert!(!records.is_empty(), "no progress at {offset}");
        check!(records.iter().all(|r| r.offset < data.last_stable_offset));
        for a in data.aborted_transactions.unwrap() {
            check!(a.producer_id.0 == pid);
            reported.push(a.first_offset);
        }
        offset = records.last().unwrap().offset + 1;
    }
    check!(remote_reads > 1);
    reported.sort_unstable();
    reported.dedup();
    // Every aborted transaction below the local start came from the tier.
    let remote_aborted: Vec<i64> = aborted_first
        .iter()
        .copied()
        .filter(|f| *f < local_start)
        .collect();
    check!(!remote_aborted.is_empty());
    for first in &remote_aborted {
        check!(reported.contains(first));
    }
    // read_uncommitted gets no aborted list.
    let data = fetch(&h, "txn", 0, 0).await;
    check!(data.aborted_transactions.unwrap_or_default().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_with_an_empty_txn_index_is_skipped() {
    let h = harness();
    let p = h.topic("skip", &[]).await;
    for n in 0..40 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    let tp = RemoteLogManager::tip(&p);
    // No transaction anywhere: no remote segment has a transaction index.
    check!(
        h.metadata
            .next_segment_with_txn_index(&tp, LEADER_EPOCH, 0)
            .unwrap()
            .is_none()
    );
    let data = fetch(&h, "skip", 0, READ_COMMITTED).await;
    check!(data.error_code == 0);
    check!(data.aborted_transactions == Some(Vec::new()));
    check!(!decode(data.records.as_ref().unwrap()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamp_lookups_reach_into_the_tier() {
    let h = harness();
    let p = h.topic("times", &[]).await;
    // Batch n holds timestamps 10_000 + 100 n .. + 9, but batch 3 holds the
    // largest ones, 50_000 .. 50_009.
    for n in 0..40_i64 {
        let ts = if n == 3 { 50_000 } else { 10_000 + 100 * n };
        append(&p, batch(&format!("b{n}"), ts, None));
    }
    h.pass().await;
    let local_start = p.local_log().log_start_offset();
    check!(local_start > 50);
    let lookup = |ts: i64| {
        h.rlm
            .offset_for_timestamp(&p, base() + ts, 0)
            .unwrap()
            .map(|t| (t.offset, t.timestamp - base()))
    };
    // The first record: by a timestamp before everything.
    check!(lookup(0) == Some((0, 10_000)));
    // A record in the middle of a remote batch (batch 2, record 5).
    check!(lookup(10_205) == Some((25, 10_205)));
    // Between batches: the first record of the next one.
    check!(lookup(10_150) == Some((20, 10_200)));
    // Past batch 2 the first record at or after 14_000 is batch 3's.
    check!(lookup(14_000) == Some((30, 50_000)));
    // Past all data: not in the tier (the local log answers).
    check!(lookup(60_000).is_none());
    // The starting offset (the log start) bounds the answer.
    check!(
        h.rlm
            .offset_for_timestamp(&p, base(), 33)
            .unwrap()
            .map(|t| t.offset)
            == Some(33)
    );

    // Max timestamp: the first record carrying it, in the tier.
    let max = h.rlm.max_timestamp_offset(&p, 0).unwrap().unwrap();
    check!((max.offset, max.timestamp - base()) == (39, 50_009));

    // Through the handler: a timestamp in remote data, and -3 across local
    // and remote data.
    check!(list_offsets(&h, "times", 10_205).await == (25, 10_205));
    check!(list_offsets(&h, "times", -3).await == (39, 50_009));
    // A timestamp only the local log holds.
    let newest = append(&p, batch("newest", 70_000, None));
    check!(newest >= local_start);
    check!(list_offsets(&h, "times", 60_000).await == (newest, 70_000));
    check!(list_offsets(&h, "times", -3).await == (newest + PER_BATCH - 1, 70_009));
}

async fn list_offsets(h: &Harness, topic: &str, ts: i64) -> (i64, i64) {
    use kafka_protocol::messages::{
        ListOffsetsRequest,
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    };
    let mut request = ListOffsetsRequest::default();
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    let mut p = ListOffsetsPartition::default();
    p.timestamp = if ts >= 0 { base() + ts } else { ts };
    t.partitions.push(p);
    request.topics.push(t);
    let response = crate::handlers::offsets::handle_list_offsets(&h.broker, 8, request).await;
    let r = &response.topics[0].partitions[0];
    check!(r.error_code == 0);
    // Timestamps relative to `base()`, as the batches are written.
    (
        r.offset,
        if r.timestamp >= 0 {
            r.timestamp - base()
        } else {
            r.timestamp
        },
    )
}

async fn delete_records(h: &Harness, topic: &str, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::{
        DeleteRecordsRequest,
        delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic},
    };
    let mut request = DeleteRecordsRequest::default();
    let mut t = DeleteRecordsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    let mut p = DeleteRecordsPartition::default();
    p.offset = offset;
    t.partitions.push(p);
    request.topics.push(t);
    let response = crate::handlers::admin::handle_delete_records(&h.broker, request).await;
    let r = &response.topics[0].partitions[0];
    (r.error_code, r.low_watermark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_below_the_local_start_moves_the_log_start_and_deletes_remote_segments() {
    let h = harness();
    let p = h.topic("dr", &[]).await;
    for n in 0..40 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    let local_start = p.local_log().log_start_offset();
    let before = h.tier_logs(&p);
    check!(before.len() > 3);
    // An offset in the middle of the third remote segment.
    let third = before[2].split('-').next().unwrap().parse::<i64>().unwrap();
    let target = third + 3;
    check!(target < local_start);

    check!(delete_records(&h, "dr", target).await == (0, target));
    // Answered at once from the persisted offset; an older target is a no-op.
    check!(p.log_start_offset() == target);
    check!(delete_records(&h, "dr", 5).await == (0, target));
    let data = fetch(&h, "dr", 0, 0).await;
    check!(data.error_code == kafka_protocol::error::ResponseError::OffsetOutOfRange.code());
    check!(data.log_start_offset == target);

    h.pass().await;
    // The two segments wholly below the new start are gone from the tier.
    check!(h.tier_logs(&p) == before[2..].to_vec());
    check!(p.log_start_offset() == target);
    let data = fetch(&h, "dr", target, 0).await;
    check!(data.error_code == 0);
    check!(decode(data.records.as_ref().unwrap())[0].offset <= target);

    // After a restart (a new manager over the same metadata and disk) the
    // log start is still the one DeleteRecords set.
    let _again = h.restarted().await;
    check!(p.log_start_offset() == target);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_on_a_tiered_topic_above_the_local_start_also_drops_the_tier() {
    let h = harness();
    let p = h.topic("drl", &[("local.retention.bytes", "-2")]).await;
    for n in 0..20 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    check!(
        p.local_log().log_start_offset() == 0,
        "local retention unlimited"
    );
    check!(!h.tier_logs(&p).is_empty());
    let target = p.local_log().log_end_offset() - 5;
    check!(delete_records(&h, "drl", target).await == (0, target));
    h.pass().await;
    check!(p.log_start_offset() == target);
    check!(list_offsets(&h, "drl", -2).await.0 == target);
    // Every remote segment ends below the target: all gone.
    check!(h.tier_logs(&p).is_empty());
}

/// A tier around the filesystem one with two hooks: its deletes fail
/// while `failing` is set, and once `deleting` is armed with the metadata
/// manager, each copy marks its partition deleted as it uploads (what a
/// topic deletion on another broker does to a copy in flight).
#[derive(Default)]
struct HookedTier {
    failing: Arc<std::sync::atomic::AtomicBool>,
    deleting: Arc<std::sync::OnceLock<Arc<InmemoryRemoteLogMetadataManager>>>,
}

impl HookedTier {
    fn around(&self, inner: Arc<dyn RemoteStorageManager>) -> Arc<dyn RemoteStorageManager> {
        Arc::new(Hooked {
            inner,
            failing: Arc::clone(&self.failing),
            deleting: Arc::clone(&self.deleting),
        })
    }
}

struct Hooked {
    inner: Arc<dyn RemoteStorageManager>,
    failing: Arc<std::sync::atomic::AtomicBool>,
    deleting: Arc<std::sync::OnceLock<Arc<InmemoryRemoteLogMetadataManager>>>,
}

impl RemoteStorageManager for Hooked {
    fn copy_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<Option<CustomMetadata>, RemoteStorageError> {
        let custom = self.inner.copy_log_segment_data(metadata, segment)?;
        if let Some(manager) = self.deleting.get() {
            manager.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata::new(
                metadata.topic_id_partition().clone(),
                RemotePartitionDeleteState::DeletePartitionMarked,
                super::now_ms(),
                1,
            ))?;
        }
        Ok(custom)
    }

    fn fetch_log_segment(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        start: BytePosition,
        end: Option<BytePosition>,
    ) -> Result<Bytes, RemoteStorageError> {
        self.inner.fetch_log_segment(metadata, start, end)
    }

    fn fetch_index(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        self.inner.fetch_index(metadata, index_type)
    }

    fn delete_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        if self.failing.load(Ordering::Acquire) {
            return Err(RemoteStorageError::Backend {
                message: "store stopped".into(),
            });
        }
        self.inner.delete_log_segment_data(metadata)
    }
}

/// The partition's deletion has started, and the journal still holds it
/// for a later pass.
fn check_deletion_pending(h: &Harness, tp: &TopicIdPartition) {
    check!(
        h.metadata
            .remote_partition_delete_metadata(tp)
            .unwrap()
            .map(|d| d.state())
            == Some(RemotePartitionDeleteState::DeletePartitionStarted)
    );
    let journal = h.broker.config.log_dir.join(super::delete::JOURNAL_FILE);
    check!(
        std::fs::read_to_string(&journal)
            .unwrap()
            .contains("topic-deleted")
    );
}

async fn delete_topic(h: &Harness, name: &str) {
    use kafka_protocol::messages::DeleteTopicsRequest;
    let mut request = DeleteTopicsRequest::default();
    request
        .topic_names
        .push(TopicName(StrBytes::from_string(name.to_owned())));
    let response = crate::handlers::admin::handle_delete_topics(&h.broker, 5, request).await;
    check!(response.responses[0].error_code == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_deletion_deletes_the_remote_data_through_the_partition_lifecycle_across_a_restart() {
    let hooks = HookedTier::default();
    let failing = Arc::clone(&hooks.failing);
    let h = harness_with(&[], |inner| hooks.around(inner));
    let p = h.topic("gone", &[]).await;
    for n in 0..20 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    check!(h.tier_logs(&p).len() > 3);
    let tp = RemoteLogManager::tip(&p);
    let old_id = p.topic_id;
    // Deleting a topic waits for in-flight users of its logs to let go.
    drop(p);

    // The store refuses deletes: the pass stops half way, the journal keeps
    // the partition.
    failing.store(true, Ordering::Release);
    delete_topic(&h, "gone").await;
    check!(h.broker.partitions.get("gone", 0).is_none());
    h.pass().await;
    check!(h.tier_logs_of(&tp).len() > 3);
    check_deletion_pending(&h, &tp);
    let journal = h.broker.config.log_dir.join(super::delete::JOURNAL_FILE);

    // "Restart": a new manager over the same metadata, disk and journal.
    failing.store(false, Ordering::Release);
    let _again = h.restarted().await;
    check!(h.tier_logs_of(&tp).is_empty());
    check!(
        h.metadata
            .remote_partition_delete_metadata(&tp)
            .unwrap()
            .map(|d| d.state())
            == Some(RemotePartitionDeleteState::DeletePartitionFinished)
    );
    check!(std::fs::read_to_string(&journal).unwrap().is_empty());

    // The same name again is a new topic with a fresh tier.
    let q = h.topic("gone", &[]).await;
    check!(q.topic_id != old_id);
    check!(q.log_start_offset() == 0);
    check!(!q.tier_offsets().loaded);
}

/// Another broker's copy into `tp`, begun `age_ms` ago and not finished.
fn copy_begun(tp: &TopicIdPartition, age_ms: i64) -> RemoteLogSegmentMetadata {
    RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::generate_new(tp.clone()),
        0,
        9,
        base(),
        2,
        super::now_ms() - age_ms,
        RemoteLogSegmentDetails::new(
            100,
            RemoteLogSegmentState::CopySegmentStarted,
            BTreeMap::from([(LEADER_EPOCH, 0)]),
        ),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_meets_a_topic_deletion_leaves_nothing_in_the_tier() {
    let hooks = HookedTier::default();
    let h = harness_with(&[], |inner| hooks.around(inner));
    let p = h.topic("racing", &[]).await;
    for n in 0..10 {
        append(&p, batch(&format!("a{n}"), 1_000, None));
    }
    h.pass().await;
    let tiered = h.tier_logs(&p);
    check!(tiered.len() > 1);
    let tp = RemoteLogManager::tip(&p);
    // Other brokers' copies: one begun a second ago, which may still land,
    // and one a dead broker began long ago, which cannot.
    let (fresh, stale) = (
        copy_begun(&tp, 1_000),
        copy_begun(&tp, UNFINISHED_AGE_MS + 60_000),
    );
    for m in [&fresh, &stale] {
        h.metadata
            .add_remote_log_segment_metadata(m.clone())
            .unwrap();
    }

    // The partition is deleted while this broker uploads its next segment:
    // the finish is refused and it deletes what it uploaded, which no
    // metadata would find.
    for n in 0..10 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    hooks.deleting.set(Arc::clone(&h.metadata)).unwrap();
    h.pass().await;
    check!(h.tier_logs(&p) == tiered);
    let unfinished = h
        .metadata
        .list_remote_log_segments(&tp)
        .unwrap()
        .into_iter()
        .filter(|m| m.state() == RemoteLogSegmentState::CopySegmentStarted)
        .count();
    check!(unfinished == 3);
    drop(p);

    delete_topic(&h, "racing").await;
    h.pass().await;
    // The tiered segments, this broker's refused copy (no longer under
    // way) and the stale one are deleted; the other broker's fresh copy
    // holds the deletion open for a later pass, by when nothing can land
    // any more.
    let left: Vec<_> = h
        .metadata
        .list_remote_log_segments(&tp)
        .unwrap()
        .into_iter()
        .map(|m| m.remote_log_segment_id().clone())
        .collect();
    check!(left == vec![fresh.remote_log_segment_id().clone()]);
    check!(h.tier_logs_of(&tp).is_empty());
    check_deletion_pending(&h, &tp);
}

async fn alter_topic(h: &Harness, topic: &str, pairs: &[(&str, &str)]) -> (i16, String) {
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest,
        incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    };
    let mut request = IncrementalAlterConfigsRequest::default();
    let mut r = AlterConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = StrBytes::from_string(topic.to_owned());
    for (k, v) in pairs {
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string((*k).to_owned());
        c.config_operation = 0;
        c.value = Some(StrBytes::from_string((*v).to_owned()));
        r.configs.push(c);
    }
    request.resources.push(r);
    let response =
        crate::handlers::configs::handle_incremental_alter_configs(&h.broker, request).await;
    let r = &response.responses[0];
    (
        r.error_code,
        r.error_message
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_tiering_needs_delete_on_disable_and_deletes_the_remote_data() {
    let h = harness();
    let p = h.topic("off", &[]).await;
    for n in 0..20 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    check!(h.tier_logs(&p).len() > 3);
    let invalid = kafka_protocol::error::ResponseError::InvalidConfig.code();

    let (code, message) = alter_topic(&h, "off", &[("remote.storage.enable", "false")]).await;
    check!(code == invalid);
    check!(message.contains("without deleting remote data"));
    check!(h.tier_logs(&p).len() > 3);

    let (code, _) = alter_topic(
        &h,
        "off",
        &[
            ("remote.storage.enable", "false"),
            ("remote.log.delete.on.disable", "true"),
        ],
    )
    .await;
    check!(code == 0);
    // Until the task has deleted the remote data, enabling again is refused.
    let (code, message) = alter_topic(&h, "off", &[("remote.storage.enable", "true")]).await;
    check!(code == invalid);
    check!(message.contains("still being deleted"));
    h.pass().await;
    check!(h.tier_logs(&p).is_empty());
    check!(p.log_start_offset() == p.local_log().log_start_offset());

    // Enabled again: copying starts over from the local log.
    let (code, _) = alter_topic(&h, "off", &[("remote.storage.enable", "true")]).await;
    check!(code == 0);
    for n in 0..10 {
        append(&p, batch(&format!("c{n}"), 1_000, None));
    }
    h.pass().await;
    check!(!h.tier_logs(&p).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disable_waits_for_its_config_and_one_that_never_stored_it_is_dropped_at_start() {
    let h = harness();
    let p = h.topic("half-off", &[]).await;
    for n in 0..20 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    let copied = h.tier_logs(&p);
    check!(copied.len() > 3);

    // Journaled as an alter does first, but the configuration is not (yet)
    // stored: the pass leaves the remote data alone, or a copy after the
    // deletion would stay in the tier for good.
    h.rlm.tiering_disabled("half-off", p.topic_id, 1).unwrap();
    h.pass().await;
    check!(h.tier_logs(&p) == copied);
    check!(h.rlm.disabling("half-off"));

    // The broker stopped before storing it: the alter was never answered,
    // so after a start the topic is tiered as before.
    let again = h.restarted().await;
    check!(!again.disabling("half-off"));
    check!(h.tier_logs(&p) == copied);
    let journal = h.broker.config.log_dir.join(super::delete::JOURNAL_FILE);
    check!(std::fs::read_to_string(&journal).unwrap().is_empty());
}

/// A tier whose segment reads wait at a gate the test opens.
struct GatedReads {
    inner: Arc<dyn RemoteStorageManager>,
    open: Arc<(Mutex<bool>, Condvar)>,
    waiting: Arc<AtomicUsize>,
}

impl RemoteStorageManager for GatedReads {
    fn copy_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        segment: &LogSegmentData,
    ) -> Result<Option<CustomMetadata>, RemoteStorageError> {
        self.inner.copy_log_segment_data(metadata, segment)
    }

    fn fetch_log_segment(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        start: BytePosition,
        end: Option<BytePosition>,
    ) -> Result<Bytes, RemoteStorageError> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let (lock, cv) = &*self.open;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        drop(open);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        self.inner.fetch_log_segment(metadata, start, end)
    }

    fn fetch_index(
        &self,
        metadata: &RemoteLogSegmentMetadata,
        index_type: IndexType,
    ) -> Result<Bytes, RemoteStorageError> {
        self.inner.fetch_index(metadata, index_type)
    }

    fn delete_log_segment_data(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.inner.delete_log_segment_data(metadata)
    }
}

/// Waits (bounded) until `cond` holds.
async fn until(cond: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_remote_read_neither_delays_local_fetches_nor_queues_without_bound() {
    let open = Arc::new((Mutex::new(false), Condvar::new()));
    let waiting = Arc::new(AtomicUsize::new(0));
    let (gate, count) = (Arc::clone(&open), Arc::clone(&waiting));
    let h = harness_with(
        &[
            ("remote.log.reader.threads", "1"),
            ("remote.log.reader.max.pending.tasks", "1"),
            ("remote.fetch.max.wait.ms", "60000"),
        ],
        move |inner| {
            Arc::new(GatedReads {
                inner,
                open: gate,
                waiting: count,
            })
        },
    );
    let p = h.topic("slow", &[]).await;
    for n in 0..20 {
        append(&p, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    let local_start = p.local_log().log_start_offset();
    check!(local_start > 0);

    // The only reader thread is stuck in the tier, one more read waits in
    // the queue.
    let h = Arc::new(h);
    let stuck = {
        let h = Arc::clone(&h);
        tokio::spawn(async move { fetch(&h, "slow", 0, 0).await })
    };
    until(
        || waiting.load(Ordering::Acquire) > 0,
        "the first read to reach the tier",
    )
    .await;
    let queued = {
        let h = Arc::clone(&h);
        tokio::spawn(async move { fetch(&h, "slow", 0, 0).await })
    };
    until(|| h.rlm.readers.pending() > 0, "the second read to queue").await;

    // A local fetch is answered while the remote reads are stuck.
    let local = fetch(&h, "slow", local_start, 0).await;
    check!(local.error_code == 0);
    check!(decode(local.records.as_ref().unwrap())[0].offset == local_start);
    check!(!stuck.is_finished());

    // A third remote read finds the queue full: a retriable error at once.
    let refused = fetch(&h, "slow", 0, 0).await;
    check!(refused.error_code == kafka_protocol::error::ResponseError::KafkaStorageError.code());

    let (lock, cv) = &*open;
    *lock.lock().unwrap() = true;
    cv.notify_all();
    for task in [stuck, queued] {
        let data = task.await.unwrap();
        check!(data.error_code == 0);
        check!(decode(data.records.as_ref().unwrap())[0].offset == 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_remote_read_answers_empty_at_the_deadline_beside_local_data() {
    let open = Arc::new((Mutex::new(false), Condvar::new()));
    let waiting = Arc::new(AtomicUsize::new(0));
    let (gate, count) = (Arc::clone(&open), Arc::clone(&waiting));
    let h = harness_with(&[("remote.fetch.max.wait.ms", "60000")], move |inner| {
        Arc::new(GatedReads {
            inner,
            open: gate,
            waiting: count,
        })
    });
    let slow = h.topic("slow", &[]).await;
    for n in 0..20 {
        append(&slow, batch(&format!("b{n}"), 1_000, None));
    }
    h.pass().await;
    check!(slow.local_log().log_start_offset() > 0);
    // Created after the pass: its data stays on local disk.
    let fast = h.topic("fast", &[]).await;
    append(&fast, batch("f", 1_000, None));

    // One fetch of both: the tier is stuck, the local partition has data.
    let mut request = FetchRequest::default();
    request.max_wait_ms = 300;
    request.min_bytes = 1;
    request.max_bytes = 4 << 20;
    request.session_epoch = -1;
    for topic in ["slow", "fast"] {
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
        let mut part = FetchPartition::default();
        part.partition_max_bytes = 1 << 20;
        t.partitions.push(part);
        request.topics.push(t);
    }
    // Real time: the tier's reads run on OS threads, which a paused clock
    // would not wait for. The deadline is 300 ms, the tier's own bound 60 s.
    let started = std::time::Instant::now();
    let response = handle_fetch(&h.broker, 12, request).await;
    let waited = started.elapsed();
    check!(waited >= std::time::Duration::from_millis(300));
    check!(waited < std::time::Duration::from_secs(30));
    until(
        || waiting.load(Ordering::Acquire) == 1,
        "the remote read to reach the tier",
    )
    .await;
    let (slow_data, fast_data) = (
        &response.responses[0].partitions[0],
        &response.responses[1].partitions[0],
    );
    check!(slow_data.error_code == 0);
    check!(slow_data.records.as_ref().is_none_or(Bytes::is_empty));
    check!(slow_data.log_start_offset == 0);
    check!(fast_data.error_code == 0);
    check!(
        decode(fast_data.records.as_ref().unwrap()).len() == usize::try_from(PER_BATCH).unwrap()
    );

    // Once the tier answers, the remote partition is read as before.
    let (lock, cv) = &*open;
    *lock.lock().unwrap() = true;
    cv.notify_all();
    let data = fetch(&h, "slow", 0, 0).await;
    check!(data.error_code == 0);
    check!(decode(data.records.as_ref().unwrap())[0].offset == 0);
}
