//! The partition-storage seam of a classic partition, on a real broker state
//! (logs on a temporary disk, the filesystem tier, the in-memory metadata
//! manager): reads that cross from the remote tier into the local log,
//! ListOffsets' special timestamps, DeleteRecords' floor across a broker
//! restart, a corrupt floor checkpoint, and parked fetches woken only by
//! their own partitions.

use {
    super::{
        Isolation, OffsetQuery, Partition, PartitionStorage, Read, ReadRequest, ReadResult,
        Records, StorageError, TierOffsets,
    },
    crate::{
        broker::Broker,
        remote::{
            Archive, RemoteLogManager,
            settings::RemoteSettings,
            tests::{Harness, PER_BATCH, append, base, batch, config, decode, harness},
        },
    },
    assert2::check,
    bytes::Bytes,
    krabka_remote_storage::{LocalTieredStorage, RemoteLogMetadataManager},
    std::sync::Arc,
};

/// Reads through the seam as a zero-copy fetch does: local records come
/// back as a file slice, remote ones as bytes; the result holds them read
/// into memory, and whether the remote tier answered.
async fn read(
    p: &Arc<Partition>,
    offset: i64,
    isolation: Isolation,
) -> Result<(ReadResult, bool), StorageError> {
    let target = Arc::clone(p);
    let request = ReadRequest {
        offset,
        max_bytes: 4096,
        min_one_batch: true,
        isolation,
        zero_copy: true,
    };
    let (mut r, remote) = match crate::blocking::run(move || target.read(&request)).await?? {
        Read::Ready(r) => (r, false),
        Read::Later(future) => (future.await?, true),
    };
    r.records = match r.records {
        Records::File(slice) => {
            check!(!remote, "only local reads answer file slices");
            Records::Bytes(slice.read().unwrap())
        }
        Records::Bytes(bytes) => {
            check!(
                remote || bytes.is_empty(),
                "a local read answers a file slice"
            );
            Records::Bytes(bytes)
        }
    };
    Ok((r, remote))
}

fn records(r: &ReadResult) -> &Bytes {
    r.records.in_memory().unwrap()
}

/// A tiered topic of 40 batches whose older segments left local disk.
async fn tiered(h: &Harness, name: &str) -> Arc<Partition> {
    let p = h.topic(name, &[]).await;
    for n in 0..40 {
        append(&p, batch(&format!("b{n}"), n * 100, None));
    }
    h.pass().await;
    check!(
        p.local_log().log_start_offset() > 0,
        "segments left local disk"
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_crosses_from_the_remote_tier_into_the_local_log() {
    let h = harness();
    let p = tiered(&h, "cross").await;
    let offsets = p.offsets();
    check!(offsets.log_start == 0);
    check!(offsets.local_log_start == p.local_log().log_start_offset());
    check!(offsets.log_end == 40 * PER_BATCH);
    // Read everything through the seam alone, as a consumer would.
    let (mut next, mut remote_reads, mut local_reads) = (0, 0, 0);
    let mut seen = Vec::new();
    while next < offsets.log_end {
        let (r, remote) = read(&p, next, Isolation::ReadUncommitted).await.unwrap();
        check!(r.offsets.log_start == 0);
        let records = decode(records(&r));
        check!(!records.is_empty(), "progress at {next}");
        if remote {
            remote_reads += 1;
            check!(next < offsets.local_log_start);
        } else {
            local_reads += 1;
            check!(next >= offsets.local_log_start);
        }
        for record in records.iter().filter(|r| r.offset >= next) {
            seen.push(record.offset);
        }
        next = records.last().unwrap().offset + 1;
    }
    check!(remote_reads > 0 && local_reads > 0);
    check!(seen == (0..offsets.log_end).collect::<Vec<_>>());
    // Past the end: out of range.
    let past = read(&p, offsets.log_end + 1, Isolation::ReadUncommitted).await;
    check!(matches!(past, Err(StorageError::OffsetOutOfRange { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_specials_answer_for_local_and_remote_storage() {
    let h = harness();
    let p = tiered(&h, "specials").await;
    let local_start = p.local_log().log_start_offset();
    let end = 40 * PER_BATCH;
    let ask = |q| {
        let p = Arc::clone(&p);
        async move { p.list_offset(q, Isolation::ReadUncommitted).await.unwrap() }
    };
    check!(ask(OffsetQuery::Latest).await.unwrap().offset == end);
    check!(ask(OffsetQuery::Earliest).await.unwrap().offset == 0);
    check!(ask(OffsetQuery::EarliestLocal).await.unwrap().offset == local_start);
    let tiered = ask(OffsetQuery::LatestTiered).await.unwrap().offset;
    check!(tiered == p.tier_offsets().highest_tiered.unwrap());
    check!(tiered >= local_start - 1 && tiered < end);
    // KIP-1023: the first offset the tier does not hold yet.
    check!(
        ask(OffsetQuery::EarliestPendingUpload)
            .await
            .unwrap()
            .offset
            == tiered + 1
    );
    // The largest timestamp is in the last batch (local); an early
    // timestamp is found in the tier, a late one locally.
    let max = ask(OffsetQuery::MaxTimestamp).await.unwrap();
    check!(max.offset == end - 1);
    check!(max.timestamp == base() + 3900 + PER_BATCH - 1);
    let early = ask(OffsetQuery::AtOrAfter(base() + 205)).await.unwrap();
    check!(early.offset == 2 * PER_BATCH + 5);
    check!(early.offset < local_start);
    let late = ask(OffsetQuery::AtOrAfter(base() + 3905)).await.unwrap();
    check!(late.offset == 39 * PER_BATCH + 5);
    check!(
        ask(OffsetQuery::AtOrAfter(base() + 1_000_000))
            .await
            .is_none()
    );

    // An open transaction: read_committed stops at the last stable offset.
    let open = append(&p, batch("open", 5_000, Some((77, 0, 0))));
    let committed = p
        .list_offset(OffsetQuery::Latest, Isolation::ReadCommitted)
        .await
        .unwrap()
        .unwrap();
    check!(committed.offset == open);
    check!(ask(OffsetQuery::Latest).await.unwrap().offset == open + PER_BATCH);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_whose_remote_metadata_is_loading_refuses_below_its_local_start() {
    let h = harness();
    let p = tiered(&h, "loading").await;
    let local_start = p.local_log().log_start_offset();
    // As just after a start: nothing is known of the tier yet.
    p.publish_tier_offsets(TierOffsets::default());
    check!(p.remote_pending());
    let below = read(&p, 0, Isolation::ReadUncommitted).await;
    check!(matches!(below, Err(StorageError::Unavailable(_))));
    check!(below.unwrap_err().kafka_error_code() == 56);
    // The earliest offset waits for the load rather than failing.
    let earliest = {
        let p = Arc::clone(&p);
        tokio::spawn(async move {
            p.list_offset(OffsetQuery::Earliest, Isolation::ReadUncommitted)
                .await
        })
    };
    check!(matches!(
        p.delete_records(1).await,
        Err(StorageError::Loading)
    ));
    // Local data is served meanwhile.
    let (local, remote) = read(&p, local_start, Isolation::ReadUncommitted)
        .await
        .unwrap();
    check!(!remote && !local.records.is_empty());
    // The next pass loads it again.
    h.pass().await;
    check!(!p.remote_pending());
    // Only the loaded remote metadata names 0, below the local start.
    check!(earliest.await.unwrap().unwrap().unwrap().offset == 0);
    check!(read(&p, 0, Isolation::ReadUncommitted).await.unwrap().1);
}

#[tokio::test(start_paused = true)]
async fn an_offset_lookup_waits_ten_seconds_for_the_remote_metadata_then_is_retriable() {
    let h = harness();
    let p = tiered(&h, "never-loaded").await;
    p.publish_tier_offsets(TierOffsets::default());
    let started = tokio::time::Instant::now();
    let earliest = p
        .list_offset(OffsetQuery::Earliest, Isolation::ReadUncommitted)
        .await;
    check!(matches!(earliest, Err(StorageError::Loading)));
    check!(
        earliest.unwrap_err().kafka_error_code() == 5,
        "LEADER_NOT_AVAILABLE"
    );
    let waited = started.elapsed();
    check!(waited >= std::time::Duration::from_secs(10));
    check!(waited < std::time::Duration::from_secs(11));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_records_floor_survives_a_broker_restart() {
    let h = harness();
    let p = tiered(&h, "floor").await;
    let local_start = p.local_log().log_start_offset();
    // In the middle of a remote segment.
    let target = local_start / 2 + 3;
    check!(p.delete_records(target).await.unwrap() == target);
    check!(p.log_start_offset() == target);
    check!(p.delete_records(2).await.unwrap() == target, "never back");
    // -1 is the high watermark; past it is out of range.
    check!(matches!(
        p.delete_records(p.offsets().high_watermark + 1).await,
        Err(StorageError::OffsetOutOfRange { .. })
    ));

    // A real restart: logs closed, a new broker and remote log manager over
    // the same disk, tier and metadata.
    let Harness {
        _dir: data,
        broker,
        rlm,
        metadata,
        tier,
    } = h;
    crate::blocking::run(move || broker.partitions.close_all())
        .await
        .unwrap();
    drop((p, rlm));
    let dir = data.path().to_owned();
    let broker = Arc::new(
        crate::blocking::run(move || Broker::open(config(&dir, &[])))
            .await
            .unwrap()
            .unwrap(),
    );
    let rlm = RemoteLogManager::from_parts(
        0,
        &broker.config.log_dir,
        RemoteSettings::from_config(&broker.config)
            .unwrap()
            .unwrap(),
        Arc::new(LocalTieredStorage::new(tier)),
        metadata as Arc<dyn RemoteLogMetadataManager>,
        Archive::default(),
    )
    .unwrap();
    broker.remote.set(Arc::clone(&rlm)).unwrap();
    let p = broker.partitions.get("floor", 0).unwrap();
    check!(p.local_log().log_start_floor() == target);
    // Before the remote metadata is loaded nothing below the local start is
    // served; once it is, the log starts at the floor.
    check!(matches!(
        read(&p, target, Isolation::ReadUncommitted).await,
        Err(StorageError::Unavailable(_))
    ));
    let (r, b) = (Arc::clone(&rlm), Arc::clone(&broker));
    crate::blocking::run(move || {
        r.before_first_pass(&b);
        r.run_once(&b);
    })
    .await
    .unwrap();
    check!(p.log_start_offset() == target);
    check!(matches!(
        read(&p, target - 1, Isolation::ReadUncommitted).await,
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let (r, remote) = read(&p, target, Isolation::ReadUncommitted).await.unwrap();
    check!(remote);
    check!(decode(records(&r)).iter().any(|rec| rec.offset == target));
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
        .await
        .unwrap();
}

#[test]
fn a_corrupt_floor_checkpoint_stops_the_partition_from_serving() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let broker = Arc::new(Broker::open(config(dir.path(), &[])).unwrap());
    runtime
        .block_on(crate::handlers::admin::create_topic(
            &broker,
            "guarded",
            1,
            -1,
            &[],
            std::iter::once(("remote.storage.enable".to_owned(), "true".to_owned())).collect(),
            false,
        ))
        .unwrap();
    let p = broker.partitions.get("guarded", 0).unwrap();
    append(&p, batch("a", 0, None));
    p.local_log().raise_log_start_floor(5).unwrap();
    broker.partitions.close_all();
    drop(p);
    drop(broker);
    let file = dir
        .path()
        .join("guarded-0")
        .join(krabka_log::checkpoint::LOG_START_FLOOR_FILE);
    std::fs::write(&file, "0\nnot a number\n").unwrap();
    // The broker starts; the partition is offline, named with the file, and
    // refused rather than served from a lost floor.
    let broker = Broker::open(config(dir.path(), &[])).unwrap();
    let reason = broker.partitions.offline_reason("guarded", 0).unwrap();
    check!(reason.contains(&file.display().to_string()), "{reason}");
    check!(broker.partitions.storage("guarded", 0).is_none());
    check!(
        broker.missing_partition("guarded", 0)
            == kafka_protocol::error::ResponseError::KafkaStorageError
    );
}

/// A broker without tiering, and a plain topic of `partitions` partitions.
async fn plain(partitions: i32, extra: &[(&str, &str)]) -> (tempfile::TempDir, Arc<Broker>) {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = crate::config::RawSettings::default();
    raw.set("log.dirs", &dir.path().display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    for (k, v) in extra {
        raw.set(k, v, "test");
    }
    let config = crate::config::BrokerConfig::from_raw(&raw).unwrap();
    let broker = Arc::new(Broker::open(config).unwrap());
    crate::handlers::admin::create_topic(
        &broker,
        "t",
        partitions,
        -1,
        &[],
        Default::default(),
        false,
    )
    .await
    .unwrap();
    (dir, broker)
}

fn fetch_request(
    partition: i32,
    offset: i64,
    wait_ms: i32,
    max_bytes: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::{
        messages::{
            FetchRequest, TopicName,
            fetch_request::{FetchPartition, FetchTopic},
        },
        protocol::StrBytes,
    };
    let mut r = FetchRequest::default();
    r.max_bytes = max_bytes;
    r.min_bytes = 1;
    r.max_wait_ms = wait_ms;
    r.session_epoch = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_static_str("t"));
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = max_bytes;
    t.partitions.push(p);
    r.topics.push(t);
    r
}

async fn produce(broker: &Broker, partition: i32, records: Bytes) {
    let p = broker.partitions.storage("t", partition).unwrap();
    p.append(records).await.unwrap().unwrap();
}

/// Fetch v12 of partition 0 from offset 0 (up to 1 MiB), answered as the
/// network layer would, `zero_copy` if the connection can send files.
async fn answer(broker: &Arc<Broker>, zero_copy: bool) -> crate::handlers::Reply {
    crate::fetch::answer(
        broker,
        12,
        7,
        fetch_request(0, 0, 0, 1 << 20),
        crate::security::authorize::Fixup::none(),
        zero_copy,
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn a_parked_fetch_is_woken_by_its_partitions_only() {
    let (_dir, broker) = plain(2, &[]).await;
    let reads = broker.fetch_memory.reservations();
    let waiting = {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move {
            crate::fetch::handle_fetch(&broker, 12, fetch_request(0, 0, 30_000, 1 << 20)).await
        })
    };
    let wait_for_reads = |n: u64| {
        let broker = Arc::clone(&broker);
        async move {
            for _ in 0..1000 {
                if broker.fetch_memory.reservations() >= n {
                    return;
                }
                tokio::task::yield_now().await;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            panic!("the fetch never read");
        }
    };
    wait_for_reads(reads + 1).await;
    // A hundred appends to the other partition: the fetch does not read again.
    for n in 0..100 {
        produce(&broker, 1, batch(&format!("other{n}"), 0, None)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    check!(broker.fetch_memory.reservations() == reads + 1);
    check!(!waiting.is_finished());
    // One append to its own partition wakes it, long before its deadline.
    let started = tokio::time::Instant::now();
    produce(&broker, 0, batch("mine", 0, None)).await;
    let response = waiting.await.unwrap();
    check!(started.elapsed() < std::time::Duration::from_secs(1));
    check!(broker.fetch_memory.reservations() == reads + 2);
    let records = response.responses[0].partitions[0].records.clone().unwrap();
    check!(decode(&records).len() == usize::try_from(PER_BATCH).unwrap());
    broker.partitions.close_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_max_bytes_caps_a_response_but_one_whole_batch_always_comes() {
    let (_dir, broker) = plain(2, &[("fetch.max.bytes", "2048")]).await;
    for n in 0..20 {
        produce(&broker, 0, batch(&format!("b{n}"), 0, None)).await;
    }
    let one = batch("x", 0, None).len();
    check!(one < 2048);
    // A client asking for 2 GiB gets at most fetch.max.bytes.
    let response = crate::fetch::handle_fetch(&broker, 12, fetch_request(0, 0, 0, i32::MAX)).await;
    let got = response.responses[0].partitions[0].records.clone().unwrap();
    check!(got.len() <= 2048);
    check!(got.len() >= one);
    check!(decode(&got)[0].offset == 0);
    // A batch larger than the cap still comes whole (KIP-74).
    let mut record = decode(&batch("big", 0, None)).remove(0);
    record.value = Some(Bytes::from(vec![b'y'; 5000]));
    let big = crate::coordinator::state_topic::encode_v2_batch(&[record]).unwrap();
    check!(big.len() > 4096);
    produce(&broker, 1, big.clone()).await;
    let response = crate::fetch::handle_fetch(&broker, 12, fetch_request(1, 0, 0, i32::MAX)).await;
    let got = response.responses[0].partitions[0].records.clone().unwrap();
    check!(got.len() == big.len());
    broker.partitions.close_all();
}

#[tokio::test(start_paused = true)]
async fn a_fetch_waits_for_the_memory_budget_and_its_frame_holds_it_until_sent() {
    let (_dir, broker) = plain(1, &[("krabka.fetch.memory.max.bytes", "1048576")]).await;
    for n in 0..50 {
        produce(&broker, 0, batch(&format!("b{n}"), 0, None)).await;
    }
    // Another fetch holds the whole budget: this one waits for it.
    let held = broker.fetch_memory.reserve(1 << 20).await;
    let answering = {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move { answer(&broker, false).await })
    };
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    check!(
        !answering.is_finished(),
        "a fetch never allocates past the budget"
    );
    drop(held);
    let crate::handlers::Reply::Frame(frame) = answering.await.unwrap() else {
        panic!("a buffered fetch answers one frame");
    };
    // The frame holds its bytes of the budget until the connection drops it.
    check!(broker.fetch_memory.in_use() >= frame.len());
    check!(broker.fetch_memory.in_use() < 2 * frame.len());
    drop(frame);
    check!(broker.fetch_memory.in_use() == 0);
    broker.partitions.close_all();
}

#[tokio::test(start_paused = true)]
async fn records_sent_from_their_segment_file_hold_no_budget() {
    use crate::network::writer::Part;
    let (_dir, broker) = plain(1, &[("krabka.fetch.memory.max.bytes", "1048576")]).await;
    for n in 0..50 {
        produce(&broker, 0, batch(&format!("b{n}"), 0, None)).await;
    }
    let reply = answer(&broker, true).await;
    let crate::handlers::Reply::Parts(parts) = reply else {
        panic!("a zero-copy fetch of a local log answers parts");
    };
    let (mut memory, mut frame) = (0, Vec::new());
    for part in parts.parts() {
        match part {
            Part::Bytes(b) => {
                memory += b.len();
                frame.extend_from_slice(b);
            }
            Part::File(f) => frame.extend_from_slice(&f.read().unwrap()),
        }
    }
    check!(parts.parts().iter().any(|p| matches!(p, Part::File(_))));
    // Only the bytes around the records hold budget, until written.
    check!(memory < 200);
    check!(broker.fetch_memory.in_use() <= memory);
    drop(parts);
    check!(broker.fetch_memory.in_use() == 0);
    // The same bytes as the buffered answer.
    let crate::handlers::Reply::Frame(buffered) = answer(&broker, false).await else {
        panic!("a buffered fetch answers one frame");
    };
    check!(frame == buffered.to_vec());
    broker.partitions.close_all();
}

#[tokio::test(start_paused = true)]
async fn many_records_in_memory_leave_in_parts_of_their_own() {
    use crate::network::writer::Part;
    let (_dir, broker) = plain(1, &[]).await;
    // Over 64 KiB of batches, read into memory (no zero copy here).
    for n in 0..120 {
        produce(&broker, 0, batch(&format!("b{n}"), 0, None)).await;
    }
    let reply = answer(&broker, false).await;
    let crate::handlers::Reply::Parts(parts) = reply else {
        panic!("a large in-memory answer leaves in parts");
    };
    check!(parts.parts().iter().all(|p| matches!(p, Part::Bytes(_))));
    let records = parts.parts().iter().map(Part::len).max().unwrap();
    check!(
        records > 64 * 1024,
        "the records are one part, not copied into a frame"
    );
    let frame: Vec<u8> = parts
        .parts()
        .iter()
        .flat_map(|p| match p {
            Part::Bytes(b) => b.to_vec(),
            Part::File(_) => unreachable!(),
        })
        .collect();
    // They hold the fetch's budget until written.
    check!(broker.fetch_memory.in_use() >= frame.len());
    drop(parts);
    check!(broker.fetch_memory.in_use() == 0);
    // The same bytes as the response encoded whole.
    let response = crate::fetch::handle_fetch(&broker, 12, fetch_request(0, 0, 0, 1 << 20)).await;
    let whole = crate::network::codec::encode_response(
        kafka_protocol::messages::ApiKey::Fetch,
        12,
        7,
        &response,
    )
    .unwrap();
    check!(frame == whole.to_vec());
    broker.partitions.close_all();
}

/// An append made directly on the log (as a coordinator's is) that rolls
/// leaves the closed segments to `notify_appended`, which flushes them in
/// the background and moves the persisted recovery point to the active
/// segment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_appended_flushes_what_a_direct_append_rolled() {
    let (dir, broker) = plain(1, &[("log.segment.bytes", "2048")]).await;
    let p = broker.partitions.get("t", 0).unwrap();
    let log = Arc::clone(p.local_log());
    let point_file = log.dir().join(krabka_log::checkpoint::RECOVERY_POINT_FILE);
    let point = || krabka_log::checkpoint::read_offset(&point_file).unwrap();
    let before = point();
    for i in 0..8 {
        log.append_as_leader(batch(&format!("d{i}"), i, None), super::LEADER_EPOCH)
            .unwrap();
    }
    let active = log.segments().last().unwrap().base_offset;
    check!(active > 0, "the appends rolled");
    check!(log.roll_flush_due());
    check!(point() == before);
    p.notify_appended();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log.roll_flush_due() || point() != Some(active) {
        assert!(
            std::time::Instant::now() < deadline,
            "the rolled segments were not flushed: recovery point {:?}, active segment {active}",
            point()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    broker.partitions.close_all();
    drop(dir);
}
