//! Consolidation: a diskless partition's cold batches become one ordinary
//! KIP-405 segment in the remote tier, and the batch coordinator forgets
//! them (`diskless.consolidation.enable`, Inkless's design).
//!
//! Without it every batch a diskless partition ever kept is a coordinator
//! row and a byte range of some shared object: the batch table grows with
//! retention, and a lagging reader reads many small ranges of many
//! objects. With it, once a partition holds `segment.bytes` of batches or
//! its oldest batch is `segment.ms` old, the broker Metadata names its
//! leader (one per partition, so brokers rarely race):
//!
//! 1. reads the batches from the batch start on, with their assigned
//!    offsets, a bounded chunk at a time, into a segment built under
//!    `<log dir>/krabka-consolidation/` with Kafka's offset and time indexes;
//! 2. copies the segment through the remote log manager's metadata
//!    lifecycle, ending in `COPY_SEGMENT_FINISHED` (the copy is finished
//!    before anything is forgotten, so a crash at any step loses nothing);
//! 3. asks the coordinator to forget the batches below the segment's end
//!    ([`BatchCoordinator::consolidate`](krabka_remote_storage::diskless::BatchCoordinator::consolidate)),
//!    a compare-and-set on the batch start: of two brokers that raced, one
//!    is refused, and the loser's copy is deleted unless it may be the only
//!    one (its own earlier answer lost).
//!
//! A copy its broker never finished (it died mid-copy) stays in
//! `COPY_SEGMENT_STARTED`; the partition's consolidator deletes it once it
//! is [`UNFINISHED_AGE_MS`] old.
//!
//! Fetches below the batch start then read the segment
//! (`DisklessStorage`'s read), and objects left with no live batch go to
//! the cleaner. The same pass applies retention to the segments:
//! `retention.ms` and `retention.bytes` over segments plus batches move
//! the log start through the coordinator, and segments wholly below the log
//! start (retention, DeleteRecords) are deleted.

use {
    super::{DisklessRuntime, DisklessStorage, ReportedHere},
    crate::{
        broker::Broker,
        partition::LEADER_EPOCH,
        remote::{
            RemoteLogManager, SegmentToCopy, UNFINISHED_AGE_MS,
            policy::{self, RemoteSegment, Retention},
        },
    },
    bytes::Bytes,
    krabka_log::{
        batch,
        leader_epoch::{EpochEntry, render},
        segment::{Segment, segment_paths},
    },
    krabka_remote_storage::{
        LogSegmentData, RemoteLogSegmentMetadata, RemoteStorageError,
        diskless::{Consolidate, Consolidated, DeleteRecords, FindBatches, LogInfo, read_batches},
    },
    std::{
        collections::BTreeMap,
        path::{Path, PathBuf},
        sync::Arc,
    },
};

/// The directory under the log dir where segments are built.
pub const BUILD_DIR: &str = "krabka-consolidation";
/// Bytes of batches read from the store per step of a build.
const CHUNK_BYTES: u32 = 8 * 1024 * 1024;
/// Segments one partition consolidates per pass at most, so one partition
/// with a backlog does not hold up the others.
const SEGMENTS_PER_PASS: usize = 4;

fn failed(message: impl std::fmt::Display) -> RemoteStorageError {
    RemoteStorageError::Backend {
        message: message.to_string(),
    }
}

/// One pass over the diskless partitions this broker reports: tier
/// retention, then consolidation. Does nothing unless consolidation is
/// enabled and a diskless partition started the runtime.
pub async fn run_pass(broker: &Arc<Broker>, rlm: &Arc<RemoteLogManager>) {
    let Some(runtime) = broker.partitions.diskless_started() else {
        return;
    };
    if !runtime.settings().consolidation {
        return;
    }
    let mine = ReportedHere::of(broker);
    let build_root = broker.config.log_dir.join(BUILD_DIR);
    for p in broker.partitions.all_diskless() {
        if !mine.contains(p.topic_id, p.index) {
            continue;
        }
        if let Err(e) = consolidate_partition(&runtime, rlm, &p, &build_root).await {
            tracing::warn!(partition = ?p, error = %e, "diskless consolidation failed; retrying next pass");
        }
    }
}

/// Retention of the partition's segments, then up to
/// [`SEGMENTS_PER_PASS`] new segments.
///
/// # Errors
///
/// The coordinator's, the store's or the tier's error.
pub async fn consolidate_partition(
    runtime: &Arc<DisklessRuntime>,
    rlm: &Arc<RemoteLogManager>,
    p: &Arc<DisklessStorage>,
    build_root: &Path,
) -> Result<(), RemoteStorageError> {
    let tier = p.tier_id();
    let cleaning = Arc::clone(rlm);
    crate::blocking::run(move || cleaning.clean_unfinished_diskless(&tier, UNFINISHED_AGE_MS))
        .await
        .map_err(failed)??;
    let mut info = log_info(runtime, p).await?;
    info = expire_segments(runtime, rlm, p, info).await?;
    for _ in 0..SEGMENTS_PER_PASS {
        let Some(to) = next_segment_end(runtime, p, &info).await? else {
            break;
        };
        consolidate_one(runtime, rlm, p, &info, to, build_root).await?;
        info = log_info(runtime, p).await?;
    }
    p.refresh().await;
    publish_gauges(rlm, p).await
}

/// The partition's finished segments in the tier (on the blocking pool).
async fn tier_segments(
    rlm: &Arc<RemoteLogManager>,
    p: &DisklessStorage,
) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
    let tier = p.tier_id();
    let listing = Arc::clone(rlm);
    crate::blocking::run(move || listing.diskless_segments(&tier))
        .await
        .map_err(failed)?
}

/// Publishes the partition's tier size (`krabka_remote_log_size_bytes`,
/// `krabka_remote_log_segments`) as the classic pass does: the
/// consolidated part of a diskless partition is in the tier, the rest
/// (its batches) is its log size.
async fn publish_gauges(
    rlm: &Arc<RemoteLogManager>,
    p: &DisklessStorage,
) -> Result<(), RemoteStorageError> {
    let segments = tier_segments(rlm, p).await?;
    let mut gauges = crate::remote::metrics::PartitionGauges::default();
    for m in &segments {
        gauges.remote_bytes += u64::try_from(m.segment_size_in_bytes()).unwrap_or(0);
        gauges.remote_segments += 1;
    }
    crate::remote::metrics::partition(&p.topic, p.index, gauges);
    Ok(())
}

async fn log_info(
    runtime: &DisklessRuntime,
    p: &DisklessStorage,
) -> Result<LogInfo, RemoteStorageError> {
    runtime
        .coordinator
        .log_info(&[p.id()])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| failed("the batch coordinator gave no answer"))?
        .map_err(failed)
}

/// Applies `retention.*` to the segments (over segments plus batches) and
/// deletes the segments wholly below the log start; answers the offsets
/// after it.
async fn expire_segments(
    runtime: &Arc<DisklessRuntime>,
    rlm: &Arc<RemoteLogManager>,
    p: &Arc<DisklessStorage>,
    info: LogInfo,
) -> Result<LogInfo, RemoteStorageError> {
    let segments = tier_segments(rlm, p).await?;
    if segments.is_empty() {
        return Ok(info);
    }
    let policy = p.retention_policy();
    let retention = Retention::from_raw(policy.retention_ms, policy.retention_bytes, -2, -2);
    let live: Vec<&RemoteLogSegmentMetadata> = segments
        .iter()
        .filter(|m| m.end_offset() >= info.log_start_offset)
        .collect();
    let remote: Vec<RemoteSegment> = live.iter().map(|m| RemoteSegment::of(m)).collect();
    let expired =
        policy::remote_segments_to_delete(&remote, info.byte_size, retention, super::now_ms());
    let mut info = info;
    if let Some(last) = expired.checked_sub(1).and_then(|i| live.get(i)) {
        // The log start moves first: no fetch is sent to a deleted segment.
        let start = (last.end_offset() + 1).min(info.batch_start_offset);
        runtime
            .coordinator
            .delete_records(&[DeleteRecords {
                partition: p.id(),
                offset: start,
            }])
            .await?;
        info = log_info(runtime, p).await?;
        tracing::info!(partition = ?p, segments = expired, log_start = info.log_start_offset, "diskless retention expired consolidated segments");
    }
    let doomed: Vec<RemoteLogSegmentMetadata> = segments
        .into_iter()
        .filter(|m| m.end_offset() < info.log_start_offset)
        .collect();
    if !doomed.is_empty() {
        let deleting = Arc::clone(rlm);
        crate::blocking::run(move || deleting.delete_segments(&doomed))
            .await
            .map_err(failed)??;
    }
    Ok(info)
}

/// Where the next segment ends (one past its last offset), if one is due:
/// `segment.bytes` of batches from the batch start, or all of them once the
/// first is `segment.ms` old.
async fn next_segment_end(
    runtime: &DisklessRuntime,
    p: &DisklessStorage,
    info: &LogInfo,
) -> Result<Option<i64>, RemoteStorageError> {
    if info.batch_start_offset >= info.high_watermark {
        return Ok(None);
    }
    let config = p.config();
    let limit = config.segment_bytes.min(i32::MAX as u64);
    let age_limit = i64::try_from(config.segment_ms).unwrap_or(i64::MAX);
    if info.byte_size < limit {
        // Not a full segment's worth: only age can close one, and then it
        // takes every batch.
        let first = find(runtime, p, info.batch_start_offset, 1).await?;
        let old = first
            .first()
            .is_some_and(|b| super::now_ms().saturating_sub(b.max_timestamp) >= age_limit);
        return Ok(old.then_some(info.high_watermark));
    }
    let mut offset = info.batch_start_offset;
    let mut bytes = 0u64;
    let mut first_timestamp = None;
    while offset < info.high_watermark {
        let budget = u32::try_from(limit.saturating_sub(bytes))
            .unwrap_or(u32::MAX)
            .clamp(1, CHUNK_BYTES);
        let found = find(runtime, p, offset, budget).await?;
        let Some(last) = found.last() else {
            break;
        };
        for b in &found {
            first_timestamp.get_or_insert(b.max_timestamp);
            if bytes > 0 && bytes + u64::from(b.size) > limit {
                // Full: this batch starts the next segment.
                return Ok(Some(b.base_offset));
            }
            bytes += u64::from(b.size);
        }
        offset = last.last_offset + 1;
        if bytes >= limit {
            return Ok(Some(offset));
        }
    }
    let old = first_timestamp.is_some_and(|ts| super::now_ms().saturating_sub(ts) >= age_limit);
    Ok((old && offset > info.batch_start_offset).then_some(offset))
}

async fn find(
    runtime: &DisklessRuntime,
    p: &DisklessStorage,
    offset: i64,
    max_bytes: u32,
) -> Result<Vec<krabka_remote_storage::diskless::FoundBatch>, RemoteStorageError> {
    let found = runtime
        .coordinator
        .find_batches(&[FindBatches {
            partition: p.id(),
            offset,
            max_bytes,
        }])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| failed("the batch coordinator gave no answer"))?
        .map_err(failed)?;
    Ok(found.batches)
}

/// Builds, copies and commits the segment `[batch start, to)`.
pub(crate) async fn consolidate_one(
    runtime: &Arc<DisklessRuntime>,
    rlm: &Arc<RemoteLogManager>,
    p: &Arc<DisklessStorage>,
    info: &LogInfo,
    to: i64,
    build_root: &Path,
) -> Result<(), RemoteStorageError> {
    let from = info.batch_start_offset;
    let dir = build_root.join(format!("{}-{}-{from}", p.topic, p.index));
    let built = build_segment(runtime, p, from, to, &dir).await;
    let copied = match built {
        Ok(segment) => {
            let copying = Arc::clone(rlm);
            let tier = p.tier_id();
            crate::blocking::run(move || copying.copy_files(&tier, segment))
                .await
                .map_err(failed)
                .and_then(|r| r)
        }
        Err(e) => Err(e),
    };
    let cleanup = dir.clone();
    let _ = crate::blocking::run(move || std::fs::remove_dir_all(cleanup)).await;
    let copied = copied?;
    let answer = runtime
        .coordinator
        .consolidate(&[Consolidate {
            partition: p.id(),
            from,
            to,
        }])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| failed("the batch coordinator gave no answer"))?
        .map_err(failed)?;
    match answer {
        Consolidated::Applied => {
            tracing::info!(partition = ?p, from, to, bytes = copied.segment_size_in_bytes(), "diskless batches consolidated into a tiered segment");
            Ok(())
        }
        Consolidated::Refused { batch_start_offset } => {
            settle_refused(rlm, p, &copied, batch_start_offset).await
        }
    }
}

/// After a refused consolidation: deletes this broker's copy unless it may
/// be the only copy of offsets the coordinator forgot.
async fn settle_refused(
    rlm: &Arc<RemoteLogManager>,
    p: &DisklessStorage,
    copied: &RemoteLogSegmentMetadata,
    batch_start: i64,
) -> Result<(), RemoteStorageError> {
    let segments = tier_segments(rlm, p).await?;
    let ours = copied.remote_log_segment_id();
    let twins: Vec<&RemoteLogSegmentMetadata> = segments
        .iter()
        .filter(|m| {
            m.remote_log_segment_id() != ours
                && m.start_offset() == copied.start_offset()
                && m.end_offset() == copied.end_offset()
        })
        .collect();
    // The batches below the batch start are forgotten: keep a copy of them
    // unless a twin with the smaller id stays (the rule both racers apply).
    let forgotten = batch_start > copied.end_offset();
    let twin_wins = twins
        .iter()
        .any(|t| t.remote_log_segment_id().id() < ours.id());
    if forgotten && !twin_wins {
        tracing::info!(partition = ?p, start = copied.start_offset(), end = copied.end_offset(), "diskless consolidation refused, its segment kept");
        return Ok(());
    }
    tracing::info!(partition = ?p, start = copied.start_offset(), end = copied.end_offset(), batch_start, "diskless consolidation refused (another broker was first), its segment deleted");
    let deleting = Arc::clone(rlm);
    let doomed = vec![copied.clone()];
    crate::blocking::run(move || deleting.delete_segments(&doomed))
        .await
        .map_err(failed)?
}

/// Reads the batches `[from, to)` with their assigned offsets into a new
/// segment in `dir`, with its indexes; answers what the copy needs.
async fn build_segment(
    runtime: &Arc<DisklessRuntime>,
    p: &DisklessStorage,
    from: i64,
    to: i64,
    dir: &Path,
) -> Result<SegmentToCopy, RemoteStorageError> {
    let config = p.config();
    let index_bytes = config.segment_index_bytes;
    let interval = config.index_interval_bytes;
    let creating = dir.to_path_buf();
    let segment = crate::blocking::run(move || -> Result<Segment, RemoteStorageError> {
        let _ = std::fs::remove_dir_all(&creating);
        std::fs::create_dir_all(&creating).map_err(failed)?;
        Segment::create(&creating, from, index_bytes, super::now_ms()).map_err(failed)
    })
    .await
    .map_err(failed)??;
    let segment = Arc::new(segment);
    let mut offset = from;
    while offset < to {
        let found: Vec<_> = find(runtime, p, offset, CHUNK_BYTES)
            .await?
            .into_iter()
            .filter(|b| b.last_offset < to)
            .collect();
        let Some(last) = found.last() else {
            return Err(failed(format!(
                "diskless batches of {p:?} from {offset} are gone"
            )));
        };
        if found.first().is_some_and(|b| b.base_offset != offset) {
            return Err(failed(format!(
                "diskless batches of {p:?} do not start at {offset}"
            )));
        }
        let next = last.last_offset + 1;
        let bytes = read_batches(&runtime.store, &found).await?;
        let appending = Arc::clone(&segment);
        crate::blocking::run(move || append(&appending, &bytes, interval))
            .await
            .map_err(failed)??;
        offset = next;
    }
    let closing = Arc::clone(&segment);
    let dir = dir.to_path_buf();
    crate::blocking::run(move || -> Result<SegmentToCopy, RemoteStorageError> {
        closing.seal().map_err(failed)?;
        closing.flush().map_err(failed)?;
        let stats = closing.stats();
        let [log, index, time, _] = segment_paths(&dir, from);
        let epochs = [EpochEntry {
            epoch: LEADER_EPOCH,
            start_offset: from,
        }];
        Ok(SegmentToCopy {
            base: from,
            end: to,
            max_timestamp: stats.max_timestamp,
            size_bytes: closing.size(),
            epochs: BTreeMap::from([(LEADER_EPOCH, from)]),
            data: LogSegmentData {
                log_segment: log,
                offset_index: index,
                time_index: time,
                transaction_index: None,
                producer_snapshot_index: None::<PathBuf>,
                leader_epoch_index: Bytes::from(render(&epochs)),
            },
        })
    })
    .await
    .map_err(failed)?
}

/// Appends whole batches (their CRCs checked) to the segment being built.
fn append(segment: &Segment, bytes: &[u8], interval: u64) -> Result<(), RemoteStorageError> {
    let mut headers = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = bytes.get(at..).unwrap_or_default();
        let header = batch::check_batch(rest).map_err(failed)?;
        let size = usize::try_from(header.size()).map_err(failed)?;
        headers.push((at, header));
        at = at.saturating_add(size);
    }
    segment.append(bytes, &headers, interval).map_err(failed)
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{
            handlers::admin::create_topic_now,
            partition::{Isolation, OffsetQuery, PartitionStorage, Read, ReadRequest},
            remote::tests::harness_with,
        },
        assert2::check,
        kafka_protocol::records::{Record, RecordBatchDecoder, TimestampType},
        krabka_remote_storage::{
            RemoteLogMetadataManager, RemoteLogSegmentDetails, RemoteLogSegmentId,
            RemoteLogSegmentState,
        },
        std::time::Duration,
    };

    /// `n` records of about 100 bytes each, timestamps from `ts` (one
    /// batch each).
    fn batch(n: i64, ts: i64) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: -1,
                timestamp: ts + i,
                key: None,
                value: Some(Bytes::from(format!("{ts}-{i}-{}", "x".repeat(90)))),
                headers: Default::default(),
            })
            .collect();
        crate::coordinator::state_topic::encode_v2_batch(&records).unwrap()
    }

    /// Every record from `offset` on, read as a consumer would.
    async fn read_all(p: &Arc<DisklessStorage>, mut offset: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        loop {
            let request = ReadRequest {
                offset,
                max_bytes: 4096,
                min_one_batch: true,
                isolation: Isolation::ReadUncommitted,
                zero_copy: false,
            };
            let target = Arc::clone(p);
            let read = match crate::blocking::run(move || target.read(&request))
                .await
                .unwrap()
                .unwrap()
            {
                Read::Ready(r) => r,
                Read::Later(future) => future.await.unwrap(),
            };
            let mut bytes = read.records.in_memory().cloned().unwrap();
            if bytes.is_empty() {
                return out;
            }
            while !bytes.is_empty() {
                for r in RecordBatchDecoder::decode(&mut bytes).unwrap().records {
                    out.push((r.offset, r.timestamp));
                    offset = r.offset + 1;
                }
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cold_batches_become_a_segment_read_back_and_a_racer_is_refused() {
        let h = harness_with(&[("diskless.consolidation.enable", "true")], |s| s);
        let broker = Arc::clone(&h.broker);
        crate::blocking::run(move || {
            create_topic_now(
                &broker,
                "d",
                1,
                BTreeMap::from([
                    ("diskless.enable".to_owned(), "true".to_owned()),
                    ("segment.bytes".to_owned(), "4096".to_owned()),
                ]),
                None,
            )
        })
        .await
        .unwrap()
        .unwrap();
        let p = h.broker.partitions.get_diskless("d", 0).unwrap();
        // An hour ago: within the default retention.ms.
        let t0 = super::super::now_ms() - 3_600_000;
        for i in 0..12 {
            let appended = tokio::time::timeout(
                Duration::from_secs(60),
                PartitionStorage::append(p.as_ref(), batch(10, t0 + 1000 * i)),
            )
            .await
            .unwrap()
            .unwrap()
            .unwrap();
            check!(appended.first_offset == 10 * i);
        }
        let before = read_all(&p, 0).await;
        check!(before.len() == 120);
        let runtime = h.broker.partitions.diskless_started().unwrap();
        let build_root = h.broker.config.log_dir.join(BUILD_DIR);
        // A racing broker builds and copies the first segment too, and
        // commits it late.
        let fresh = log_info(&runtime, &p).await.unwrap();
        let first_end = next_segment_end(&runtime, &p, &fresh)
            .await
            .unwrap()
            .unwrap();
        let racer_dir = build_root.join("racer");
        let racer_files = build_segment(&runtime, &p, 0, first_end, &racer_dir)
            .await
            .unwrap();
        let racer = h.rlm.copy_files(&p.tier_id(), racer_files).unwrap();
        consolidate_partition(&runtime, &h.rlm, &p, &build_root)
            .await
            .unwrap();
        let info = log_info(&runtime, &p).await.unwrap();
        // Segments of whole batches, until less than a segment's worth of
        // batches is left.
        check!(info.log_start_offset == 0);
        check!(info.batch_start_offset > first_end);
        let tier = h.rlm.diskless_segments(&p.tier_id()).unwrap();
        check!(tier.len() >= 3);
        // The racer's twin and the rest, back to back.
        for pair in tier.windows(2).skip(1) {
            check!(pair[0].end_offset() + 1 == pair[1].start_offset());
        }
        check!(tier.last().unwrap().end_offset() + 1 == info.batch_start_offset);
        // The same records, offsets and timestamps, segments then batches.
        check!(read_all(&p, 0).await == before);
        // ListOffsets: -4 and -5 at the boundary, a timestamp in a segment.
        let offset = |q| {
            let p = Arc::clone(&p);
            async move {
                PartitionStorage::list_offset(p.as_ref(), q, Isolation::ReadUncommitted)
                    .await
                    .unwrap()
                    .map(|t| t.offset)
            }
        };
        check!(offset(OffsetQuery::EarliestLocal).await == Some(info.batch_start_offset));
        check!(offset(OffsetQuery::LatestTiered).await == Some(info.batch_start_offset - 1));
        check!(offset(OffsetQuery::EarliestPendingUpload).await == Some(info.batch_start_offset));
        check!(offset(OffsetQuery::AtOrAfter(t0 + 1003)).await == Some(13));
        check!(offset(OffsetQuery::MaxTimestamp).await == Some(119));
        // The racer's commit is refused: its copy stays only if it has the
        // smaller id of the twins (the rule both racers apply).
        let refused = runtime
            .coordinator
            .consolidate(&[Consolidate {
                partition: p.id(),
                from: 0,
                to: first_end,
            }])
            .await
            .unwrap();
        check!(matches!(refused[0], Ok(Consolidated::Refused { .. })));
        settle_refused(&h.rlm, &p, &racer, info.batch_start_offset)
            .await
            .unwrap();
        let after = h.rlm.diskless_segments(&p.tier_id()).unwrap();
        let twin = tier
            .iter()
            .find(|m| {
                m.start_offset() == 0 && m.remote_log_segment_id() != racer.remote_log_segment_id()
            })
            .unwrap();
        let racer_kept = after
            .iter()
            .any(|m| m.remote_log_segment_id() == racer.remote_log_segment_id());
        check!(
            racer_kept == (racer.remote_log_segment_id().id() < twin.remote_log_segment_id().id())
        );
        check!(after.len() == tier.len() - usize::from(!racer_kept));
        check!(log_info(&runtime, &p).await.unwrap() == info);
        check!(read_all(&p, 0).await == before);
        // A copy a dead broker left unfinished long ago is cleaned up;
        // a fresh one (a racer still copying) is left alone.
        let unfinished = |age_ms: i64| {
            RemoteLogSegmentMetadata::new(
                RemoteLogSegmentId::generate_new(p.tier_id()),
                info.batch_start_offset,
                info.batch_start_offset + 5,
                t0,
                1,
                super::super::now_ms() - age_ms,
                RemoteLogSegmentDetails::new(
                    100,
                    RemoteLogSegmentState::CopySegmentStarted,
                    BTreeMap::from([(LEADER_EPOCH, info.batch_start_offset)]),
                ),
            )
            .unwrap()
        };
        let (old, fresh) = (unfinished(UNFINISHED_AGE_MS + 60_000), unfinished(1_000));
        for m in [&old, &fresh] {
            h.metadata
                .add_remote_log_segment_metadata(m.clone())
                .unwrap();
        }
        consolidate_partition(&runtime, &h.rlm, &p, &build_root)
            .await
            .unwrap();
        let states: BTreeMap<_, _> = h
            .metadata
            .list_remote_log_segments(&p.tier_id())
            .unwrap()
            .into_iter()
            .map(|m| (m.remote_log_segment_id().clone(), m.state()))
            .collect();
        // Deleted (the metadata manager forgets a finished delete).
        check!(!states.contains_key(old.remote_log_segment_id()));
        check!(
            states.get(fresh.remote_log_segment_id())
                == Some(&RemoteLogSegmentState::CopySegmentStarted)
        );
        // DeleteRecords past the first segment: it is deleted.
        PartitionStorage::delete_records(p.as_ref(), 31)
            .await
            .unwrap();
        consolidate_partition(&runtime, &h.rlm, &p, &build_root)
            .await
            .unwrap();
        let left = h.rlm.diskless_segments(&p.tier_id()).unwrap();
        check!(left.iter().all(|m| m.end_offset() >= 31));
        check!(read_all(&p, 31).await == before[31..]);
    }
}
