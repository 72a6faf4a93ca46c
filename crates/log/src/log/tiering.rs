//! What a remote tier (KIP-405) needs from a log, exported so that the
//! broker's remote log manager never assembles it from the log's internals:
//!
//! * [`Log::tierable_segments`]: the segments that may be copied (closed,
//!   wholly below the last stable offset, in offset order), each with its
//!   files, its producer snapshot and its slice of the leader-epoch cache;
//! * [`Log::delete_local_segments_below`]: local retention of a tiered log,
//!   dropping local segments whose copy finished;
//! * the **log start floor** ([`Log::log_start_floor`],
//!   [`Log::raise_log_start_floor`]): the partition's log start when it lies
//!   below the local one. A tiered partition's records start in the remote
//!   tier, below the first local segment; DeleteRecords can move that start
//!   into the middle of a remote segment, which neither the local log nor
//!   the remote metadata can hold. Kafka keeps it as the `UnifiedLog`'s log
//!   start offset in `log-start-offset-checkpoint`; here it is the log's own
//!   checkpoint [`LOG_START_FLOOR_FILE`], written durably before a
//!   DeleteRecords is answered. A client must never read a record it
//!   deleted, so a floor that cannot be read stops the log from opening.
//!
//! [`LOG_START_FLOOR_FILE`]: crate::checkpoint::LOG_START_FLOOR_FILE

use {
    super::Log,
    crate::{
        LogError, SegmentInfo,
        checkpoint::{self, LEGACY_REMOTE_LOG_START_FILE, LOG_START_FLOOR_FILE},
        leader_epoch::{self, EpochEntry},
        producer_state,
    },
    krabka_ids::LeaderEpoch,
    std::{
        collections::BTreeMap,
        path::{Path, PathBuf},
        sync::atomic::Ordering,
    },
};

/// A closed segment that may be copied to a remote tier, with everything
/// the copy ships beside the `.log` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierableSegment {
    /// The segment and its files.
    pub segment: SegmentInfo,
    /// Bytes in its `.txnindex` (0: no aborted transaction in it).
    pub txn_index_bytes: u64,
    /// The producer-state snapshot at the segment's end offset, if the log
    /// wrote one (it does at every roll).
    pub producer_snapshot: Option<PathBuf>,
    /// The leader-epoch entries that start below the segment's end offset:
    /// the `leader-epoch-checkpoint` as it stood when the segment was the
    /// end of the log (Kafka ships exactly this with the segment).
    pub leader_epochs: Vec<EpochEntry>,
}

impl TierableSegment {
    /// Each leader epoch with records in the segment, mapped to its first
    /// offset in it (Kafka's `segmentLeaderEpochs` of the remote segment's
    /// metadata). Empty when the epoch cache holds nothing for the segment.
    #[must_use]
    pub fn segment_epochs(&self) -> BTreeMap<LeaderEpoch, i64> {
        let base = self.segment.base_offset;
        let mut out = BTreeMap::new();
        for (i, e) in self.leader_epochs.iter().enumerate() {
            let next = self
                .leader_epochs
                .get(i + 1)
                .map_or(i64::MAX, |n| n.start_offset);
            if next > base {
                out.insert(e.epoch, e.start_offset.max(base));
            }
        }
        out
    }

    /// The leader-epoch slice in Kafka's `leader-epoch-checkpoint` text.
    #[must_use]
    pub fn leader_epoch_checkpoint(&self) -> String {
        leader_epoch::render(&self.leader_epochs)
    }
}

/// Reads the log start floor of the partition in `dir` (0 if none was ever
/// set), taking over a floor an older broker kept in
/// [`LEGACY_REMOTE_LOG_START_FILE`]: the larger of the two is written to
/// [`LOG_START_FLOOR_FILE`] and the old file removed.
///
/// # Errors
///
/// [`LogError::CorruptFile`] naming the file when either is not an offset
/// checkpoint, [`LogError::Io`] when one cannot be read or the migration
/// cannot be written: losing the floor would let clients read records they
/// deleted.
pub(crate) fn load_log_start_floor(dir: &Path) -> Result<i64, LogError> {
    let path = dir.join(LOG_START_FLOOR_FILE);
    let stored = read_floor(&path)?;
    let legacy_path = dir.join(LEGACY_REMOTE_LOG_START_FILE);
    let Some(legacy) = read_floor(&legacy_path)? else {
        return Ok(stored.unwrap_or(0));
    };
    let floor = stored.unwrap_or(0).max(legacy);
    checkpoint::write_offset(&path, floor)?;
    std::fs::remove_file(&legacy_path).map_err(LogError::io(&legacy_path))?;
    krabka_ids::durable::sync_dir(dir).map_err(|e| LogError::Io {
        path: e.path,
        source: e.source,
    })?;
    tracing::info!(dir = %dir.display(), floor, "moved the remote log start into the log's checkpoint");
    Ok(floor)
}

fn read_floor(path: &Path) -> Result<Option<i64>, LogError> {
    match checkpoint::read_offset(path)? {
        Some(offset) if offset < 0 => Err(LogError::CorruptFile {
            path: path.to_path_buf(),
            reason: format!("negative log start {offset}"),
        }),
        other => Ok(other),
    }
}

impl Log {
    /// The partition's log start as deletion left it, wherever its records
    /// are stored (0 if never raised): no record below it may be served,
    /// even while a remote tier still holds its segment. The local log
    /// start ([`Log::log_start_offset`]) is never below it.
    #[must_use]
    pub fn log_start_floor(&self) -> i64 {
        self.log_start_floor.load(Ordering::Acquire)
    }

    /// DeleteRecords on a tiered log: raises the log start floor to
    /// `offset` (never lowers it), durably before returning, and moves the
    /// local log start up to it when it lies past the local start (deleting
    /// the local segments wholly below). Returns the floor.
    ///
    /// # Errors
    ///
    /// [`LogError::OffsetOutOfRange`] if `offset` is negative or past the
    /// log end; [`LogError::Io`] if the checkpoint cannot be written (the
    /// floor is then unchanged); [`LogError::Closed`].
    pub fn raise_log_start_floor(&self, offset: i64) -> Result<i64, LogError> {
        let mut inner = self.lock_inner()?;
        let leo = self.log_end_offset();
        let current = self.log_start_floor();
        if offset > leo || offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: current,
                log_end_offset: leo,
            });
        }
        if offset <= current {
            return Ok(current);
        }
        checkpoint::write_offset(&self.dir.join(LOG_START_FLOOR_FILE), offset)?;
        self.log_start_floor.store(offset, Ordering::Release);
        self.advance_locked(&mut inner, offset)?;
        Ok(offset)
    }

    /// The segments that may be copied to a remote tier now, in offset
    /// order: closed, not empty, wholly below the last stable offset (which
    /// is never above the log end), and starting at or after `next_to_copy`
    /// (one past the highest offset already in the tier). Copies must stay
    /// in order, so the list stops at the first segment that does not
    /// qualify yet.
    #[must_use]
    pub fn tierable_segments(&self, next_to_copy: i64) -> Vec<TierableSegment> {
        let upper = self.last_stable_offset().min(self.log_end_offset());
        let epochs = self.leader_epochs();
        self.segments()
            .into_iter()
            .skip_while(|s| s.base_offset < next_to_copy)
            .take_while(|s| !s.active && s.end_offset <= upper && s.end_offset > s.base_offset)
            .map(|segment| {
                let txn_index_bytes = segment.txn_index_path.metadata().map_or(0, |m| m.len());
                let snapshot = producer_state::snapshot_path(&self.dir, segment.end_offset);
                let leader_epochs = epochs
                    .iter()
                    .copied()
                    .filter(|e| e.start_offset < segment.end_offset)
                    .collect();
                TierableSegment {
                    txn_index_bytes,
                    producer_snapshot: snapshot.exists().then_some(snapshot),
                    leader_epochs,
                    segment,
                }
            })
            .collect()
    }

    /// Local retention of a tiered log: moves the local log start to
    /// `offset` and deletes the closed local segments wholly below it
    /// (their copies are in the tier). Returns the local log start.
    ///
    /// # Errors
    ///
    /// As [`Log::advance_log_start_offset`].
    pub fn delete_local_segments_below(&self, offset: i64) -> Result<i64, LogError> {
        self.advance_log_start_offset(offset)
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{LogConfig, SystemClock},
        assert2::check,
        bytes::Bytes,
        std::sync::Arc,
    };

    fn open(dir: &Path, segment_bytes: u64) -> Result<Log, LogError> {
        let config = LogConfig {
            segment_bytes,
            ..LogConfig::default()
        };
        Log::open(dir, uuid::Uuid::from_u128(7), config, Arc::new(SystemClock))
    }

    fn batch(n: usize) -> Bytes {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i64::try_from(i).unwrap(),
                sequence: i32::try_from(i).unwrap() - 1,
                timestamp: 1_000,
                key: None,
                value: Some(Bytes::from(vec![b'x'; 100])),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
        buf.freeze()
    }

    /// One transactional batch of producer 9 (left open).
    fn transactional_batch() -> Bytes {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let record = Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: 9,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: 1_000,
            key: None,
            value: Some(Bytes::from_static(b"open")),
            headers: Default::default(),
        };
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).unwrap();
        buf.freeze()
    }

    fn fill(log: &Log, batches: usize) {
        for _ in 0..batches {
            log.append_as_leader(batch(5), LeaderEpoch(0)).unwrap();
        }
    }

    #[test]
    fn the_floor_survives_a_restart_and_raises_the_local_start_only_past_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = open(&dir, 2048).unwrap();
        fill(&log, 20);
        check!(log.log_start_floor() == 0);
        // Below the local start: only the floor moves.
        log.delete_local_segments_below(log.segments()[2].base_offset)
            .unwrap();
        let local = log.log_start_offset();
        check!(local > 10);
        check!(log.raise_log_start_floor(7).unwrap() == 7);
        check!(log.log_start_offset() == local);
        // Never back.
        check!(log.raise_log_start_floor(3).unwrap() == 7);
        // Past the end: refused.
        check!(matches!(
            log.raise_log_start_floor(1_000),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        log.close().unwrap();
        drop(log);
        let log = open(&dir, 2048).unwrap();
        check!(log.log_start_floor() == 7);
        // Past the local start: the local start follows.
        check!(log.raise_log_start_floor(local + 3).unwrap() == local + 3);
        check!(log.log_start_offset() == local + 3);
        drop(log);
        // Even after a crash (no clean close).
        let log = open(&dir, 2048).unwrap();
        check!(log.log_start_floor() == local + 3);
    }

    #[test]
    fn a_corrupt_floor_stops_the_log_from_opening_and_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = open(&dir, 2048).unwrap();
        fill(&log, 3);
        log.raise_log_start_floor(5).unwrap();
        log.close().unwrap();
        drop(log);
        let path = dir.join(LOG_START_FLOOR_FILE);
        for garbage in ["0\nfive\n", "7\n5\n", "0\n-5\n", ""] {
            std::fs::write(&path, garbage).unwrap();
            let error = open(&dir, 2048).unwrap_err();
            check!(matches!(&error, LogError::CorruptFile { path: p, .. } if *p == path));
            check!(error.to_string().contains(LOG_START_FLOOR_FILE), "{error}");
        }
    }

    #[test]
    fn an_older_brokers_remote_log_start_file_is_taken_over() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = open(&dir, 2048).unwrap();
        fill(&log, 3);
        log.close().unwrap();
        drop(log);
        let legacy = dir.join(LEGACY_REMOTE_LOG_START_FILE);
        std::fs::write(&legacy, "0\n9\n").unwrap();
        let log = open(&dir, 2048).unwrap();
        check!(log.log_start_floor() == 9);
        check!(!legacy.exists());
        check!(checkpoint::read_offset(&dir.join(LOG_START_FLOOR_FILE)).unwrap() == Some(9));
        log.close().unwrap();
        drop(log);
        // A corrupt old file is an error too, not a lost floor.
        std::fs::write(&legacy, "garbage").unwrap();
        let error = open(&dir, 2048).unwrap_err();
        check!(
            error.to_string().contains(LEGACY_REMOTE_LOG_START_FILE),
            "{error}"
        );
    }

    #[test]
    fn tierable_segments_are_closed_below_the_lso_and_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = open(&dir, 2048).unwrap();
        fill(&log, 20);
        let all = log.segments();
        check!(all.len() > 3);
        let tierable = log.tierable_segments(0);
        // Every closed segment, not the active one.
        check!(tierable.len() == all.len() - 1);
        for (t, s) in tierable.iter().zip(&all) {
            check!(t.segment == *s);
            check!(t.txn_index_bytes == 0);
            check!(
                t.leader_epochs
                    == vec![EpochEntry {
                        epoch: LeaderEpoch(0),
                        start_offset: 0
                    }]
            );
            check!(t.segment_epochs() == BTreeMap::from([(LeaderEpoch(0), s.base_offset)]));
            check!(t.leader_epoch_checkpoint() == "0\n1\n0 0\n");
        }
        // From the next offset to copy on.
        let from_second = log.tierable_segments(all[1].base_offset);
        check!(from_second.first().map(|t| t.segment.base_offset) == Some(all[1].base_offset));
        check!(
            log.tierable_segments(all[all.len() - 1].base_offset)
                .is_empty()
        );
        // An open transaction holds back the segment holding its first
        // offset and every later one (the last stable offset stops there).
        let txn_first = log
            .append_as_leader(transactional_batch(), LeaderEpoch(0))
            .unwrap()
            .first_offset;
        fill(&log, 20);
        check!(log.last_stable_offset() == txn_first);
        let held: Vec<i64> = log
            .tierable_segments(0)
            .iter()
            .map(|t| t.segment.end_offset)
            .collect();
        check!(held.iter().all(|end| *end <= txn_first));
        check!(held.len() + 2 <= log.segments().len());
        // Local retention drops copied segments.
        let start = log.delete_local_segments_below(all[2].base_offset).unwrap();
        check!(start == all[2].base_offset);
        check!(log.segments().first().map(|s| s.base_offset) == Some(all[2].base_offset));
    }
}
