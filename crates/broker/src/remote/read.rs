//! Reads that reach into the remote tier beyond plain record batches:
//! the aborted transactions of a read_committed fetch, and ListOffsets by
//! timestamp and by max timestamp over the remote segments.
//!
//! They follow Kafka's `RemoteLogManager`: aborted transactions come from
//! the remote `.txnindex` of the segment read and, while the search is not
//! complete, of the next segments that have one (found through the metadata
//! manager's `next_segment_with_txn_index`), then from the local log; a
//! timestamp lookup takes the first remote segment whose max timestamp
//! reaches the target, starts at its time index entry and scans the batches.
//! All of it is blocking and runs on the remote reader threads.

use {
    super::{RemoteLogManager, backend, reader::ReaderRefusal},
    crate::partition::{LEADER_EPOCH, Partition},
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    krabka_log::{AbortedTxn, TimestampOffset},
    krabka_remote_storage::{
        BytePosition, IndexType, LogOffset, RemoteLogSegmentMetadata, RemoteLogSegmentState,
        RemoteStorageError, TimestampMs, TopicIdPartition, first_record_at_or_after_timestamp,
        parse_offset_index, parse_time_index, parse_txn_index, position_for_relative_offset,
        relative_offset_floor_for_timestamp, txn_overlaps,
    },
    std::sync::Arc,
};

/// Bytes of a remote segment scanned per ranged read in a timestamp search.
const SCAN_CHUNK: u32 = 1024 * 1024;
/// Size of the batch fields up to the last offset delta.
const HEADER_PREFIX: usize = 27;

/// What a remote fetch returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteRead {
    /// Whole record batches, all below the fetch's upper bound.
    pub records: Bytes,
    /// For read_committed: the aborted transactions overlapping them.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// Why a remote fetch returned no records.
#[derive(Debug, thiserror::Error)]
pub enum RemoteReadError {
    /// The tier or the metadata failed.
    #[error(transparent)]
    Storage(#[from] RemoteStorageError),
    /// The reader pool refused the read.
    #[error(transparent)]
    Refused(#[from] ReaderRefusal),
}

/// `(base offset, last offset, total size)` of the batch at `at`, if its
/// header is whole in `bytes`.
fn batch_at(bytes: &[u8], at: usize) -> Option<(i64, i64, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER_PREFIX)?)?;
    let base = i64::from_be_bytes(header.get(0..8)?.try_into().ok()?);
    let len = i32::from_be_bytes(header.get(8..12)?.try_into().ok()?);
    let delta = i32::from_be_bytes(header.get(23..27)?.try_into().ok()?);
    let size = usize::try_from(len).ok()?.checked_add(12)?;
    Some((base, base.saturating_add(i64::from(delta)), size))
}

/// The leading whole batches of `records` that end below `upper`, and the
/// offset after the last of them (`None` if there is none).
#[must_use]
pub fn cut_at(records: &Bytes, upper: i64) -> (Bytes, Option<i64>) {
    let mut at = 0usize;
    let mut next = None;
    while let Some((_, last, size)) = batch_at(records, at) {
        if last >= upper || at.saturating_add(size) > records.len() {
            break;
        }
        at += size;
        next = Some(last + 1);
    }
    (records.slice(..at), next)
}

/// Byte length of the whole batches at the start of `chunk`.
fn whole_batches_len(chunk: &[u8]) -> usize {
    let mut at = 0usize;
    while let Some((_, _, size)) = batch_at(chunk, at) {
        match at.checked_add(size) {
            Some(end) if end <= chunk.len() => at = end,
            _ => break,
        }
    }
    at
}

/// A ListOffsets lookup in the remote tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampQuery {
    /// The first record with a timestamp at or after this one.
    AtOrAfter(i64),
    /// The first record with the largest timestamp (ListOffsets -3).
    Max,
}

impl RemoteLogManager {
    /// A ListOffsets lookup over the finished remote segments from the
    /// partition's log start, on the remote reader threads.
    ///
    /// # Errors
    ///
    /// [`RemoteReadError::Refused`] when the reader queue is full,
    /// [`RemoteReadError::Storage`] when the tier or metadata fails.
    pub async fn find_offset(
        self: &Arc<Self>,
        p: &Arc<Partition>,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>, RemoteReadError> {
        let rlm = Arc::clone(self);
        let partition = Arc::clone(p);
        let start = p.log_start_offset();
        self.readers
            .run(move || match query {
                TimestampQuery::AtOrAfter(ts) => rlm.offset_for_timestamp(&partition, ts, start),
                TimestampQuery::Max => rlm.max_timestamp_offset(&partition, start),
            })
            .await?
            .map_err(RemoteReadError::from)
    }

    /// A fetch below the local log start, on the remote reader threads:
    /// whole batches from `offset`, none at or past `upper` (the high
    /// watermark, or the last stable offset for read_committed), and with
    /// `committed` the aborted transactions overlapping them.
    ///
    /// # Errors
    ///
    /// [`RemoteReadError::Refused`] when the reader queue is full,
    /// [`RemoteReadError::Storage`] when the tier or metadata fails.
    pub async fn read_remote(
        self: &Arc<Self>,
        p: &Arc<Partition>,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: i64,
        committed: bool,
    ) -> Result<RemoteRead, RemoteReadError> {
        let rlm = Arc::clone(self);
        let partition = Arc::clone(p);
        let task = self.readers.run(move || {
            rlm.read_remote_blocking(
                &partition,
                offset,
                max_bytes,
                min_one_batch,
                upper,
                committed,
            )
        });
        let outcome = match tokio::time::timeout(self.settings.fetch_max_wait, task).await {
            Ok(Ok(result)) => result.map_err(RemoteReadError::from),
            Ok(Err(refused)) => Err(RemoteReadError::from(refused)),
            // `remote.fetch.max.wait.ms` passed: no records this time.
            Err(_) => Ok(RemoteRead::default()),
        };
        match &outcome {
            Ok(read) => super::metrics::fetch_done(&p.topic, read.records.len()),
            Err(_) => super::metrics::fetch_failed(&p.topic),
        }
        outcome
    }

    fn read_remote_blocking(
        &self,
        p: &Partition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: i64,
        committed: bool,
    ) -> Result<RemoteRead, RemoteStorageError> {
        let tp = Self::tip(p);
        let read = self.read_blocking(&tp, offset, max_bytes, min_one_batch)?;
        let (records, next) = cut_at(&read, upper);
        let aborted = match (committed, next) {
            (false, _) => None,
            (true, None) => Some(Vec::new()),
            (true, Some(end)) => Some(self.aborted_transactions(p, &tp, offset, end)?),
        };
        Ok(RemoteRead { records, aborted })
    }

    /// The epochs to search, oldest first: the log's cached ones, and the
    /// broker's single epoch when the cache no longer reaches that far back.
    fn epochs(p: &Partition) -> Vec<LeaderEpoch> {
        let mut epochs: Vec<LeaderEpoch> = p
            .local_log()
            .leader_epochs()
            .iter()
            .map(|e| e.epoch)
            .collect();
        epochs.push(LEADER_EPOCH);
        epochs.sort_unstable();
        epochs.dedup();
        epochs
    }

    /// The first segment at or after `offset` that may hold aborted
    /// transactions (Kafka's `findNextSegmentWithTxnIndex`).
    fn next_with_txn_index(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        for epoch in Self::epochs(p) {
            if let Some(m) = self
                .metadata
                .next_segment_with_txn_index(tp, epoch, offset)?
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// Aborted transactions overlapping `[start, upper)` from the remote
    /// transaction indexes, then the local log's (Kafka's
    /// `collectAbortedTransactions`).
    fn aborted_transactions(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
        start: i64,
        upper: i64,
    ) -> Result<Vec<AbortedTxn>, RemoteStorageError> {
        let mut out: Vec<AbortedTxn> = Vec::new();
        let mut complete = false;
        let mut current = self.next_with_txn_index(p, tp, start)?;
        while let Some(m) = current.take() {
            if m.start_offset() >= upper {
                break;
            }
            if !m.is_txn_idx_empty() {
                let (bytes, _) = self.index_cache.get(&m, IndexType::Transaction)?;
                let overlap = txn_overlaps(
                    &parse_txn_index(&bytes)?,
                    LogOffset(start),
                    LogOffset(upper),
                );
                out.extend(overlap.aborted.iter().map(|e| AbortedTxn {
                    producer_id: krabka_ids::ProducerId(e.producer_id.0),
                    first_offset: e.first_offset.0,
                }));
                complete = overlap.complete;
                if complete {
                    break;
                }
            }
            current = self.next_with_txn_index(p, tp, m.end_offset() + 1)?;
        }
        if !complete && let Ok(local) = p.local_log().aborted_transactions(start, upper) {
            out.extend(local);
        }
        out.sort_by_key(|a| (a.first_offset, a.producer_id.0));
        out.dedup_by_key(|a| (a.first_offset, a.producer_id.0));
        Ok(out)
    }

    /// Finished remote segments, oldest first.
    pub(crate) fn finished_segments(
        &self,
        tp: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        Ok(self
            .metadata
            .list_remote_log_segments(tp)?
            .into_iter()
            .filter(|m| m.state() == RemoteLogSegmentState::CopySegmentFinished)
            .collect())
    }

    /// ListOffsets by timestamp in the remote tier: the first record at or
    /// after `starting_offset` whose timestamp is at least `ts`, if a remote
    /// segment holds one (Kafka's `findOffsetByTimestamp`). Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error.
    pub fn offset_for_timestamp(
        &self,
        p: &Partition,
        ts: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, RemoteStorageError> {
        self.offset_for_timestamp_in(&Self::tip(p), ts, starting_offset)
    }

    /// [`RemoteLogManager::offset_for_timestamp`] by the partition's tier
    /// id (a diskless partition's consolidated segments). Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error.
    pub fn offset_for_timestamp_in(
        &self,
        tp: &TopicIdPartition,
        ts: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, RemoteStorageError> {
        for m in self.finished_segments(tp)? {
            if m.max_timestamp_ms() < ts || m.end_offset() < starting_offset {
                continue;
            }
            if let Some(found) = self.search_segment(&m, ts, starting_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// ListOffsets -3 in the remote tier: the first record carrying the
    /// largest timestamp of all finished remote segments at or after
    /// `starting_offset`. Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error.
    pub fn max_timestamp_offset(
        &self,
        p: &Partition,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, RemoteStorageError> {
        self.max_timestamp_offset_in(&Self::tip(p), starting_offset)
    }

    /// [`RemoteLogManager::max_timestamp_offset`] by the partition's tier
    /// id. Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error.
    pub fn max_timestamp_offset_in(
        &self,
        tp: &TopicIdPartition,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, RemoteStorageError> {
        let mut best: Option<RemoteLogSegmentMetadata> = None;
        for m in self.finished_segments(tp)? {
            if m.end_offset() < starting_offset || m.max_timestamp_ms() < 0 {
                continue;
            }
            // Strictly greater: the earliest segment wins a tie.
            if best
                .as_ref()
                .is_none_or(|b| m.max_timestamp_ms() > b.max_timestamp_ms())
            {
                best = Some(m);
            }
        }
        match best {
            Some(m) => self.search_segment(&m, m.max_timestamp_ms(), starting_offset),
            None => Ok(None),
        }
    }

    /// The first record of segment `m` at or after `starting_offset` with a
    /// timestamp of at least `ts`: the time index gives an offset to start
    /// from, the offset index its position, and the batches from there are
    /// read in ranged chunks.
    fn search_segment(
        &self,
        m: &RemoteLogSegmentMetadata,
        ts: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampOffset>, RemoteStorageError> {
        let base = LogOffset(m.start_offset());
        let (time_index, _) = self.index_cache.get(m, IndexType::Timestamp)?;
        let floor =
            relative_offset_floor_for_timestamp(&parse_time_index(&time_index)?, TimestampMs(ts));
        let from_starting = LogOffset(starting_offset.max(base.0))
            .relative_to(base)
            .unwrap_or(floor);
        let (offset_index, _) = self.index_cache.get(m, IndexType::Offset)?;
        let mut position = position_for_relative_offset(
            &parse_offset_index(&offset_index)?,
            floor.max(from_starting),
        );
        let size = u32::try_from(m.segment_size_in_bytes()).unwrap_or(0);
        while position.0 < size {
            let end = position.0.saturating_add(SCAN_CHUNK).min(size);
            let chunk = self
                .storage
                .fetch_log_segment(m, position, Some(BytePosition(end - 1)))?;
            let mut whole = whole_batches_len(&chunk);
            let chunk = if whole == 0 {
                // One batch larger than the chunk: read exactly it.
                let Some((_, _, batch)) = batch_at(&chunk, 0) else {
                    return Err(backend(format!(
                        "corrupt batch at {position} of remote segment {}",
                        m.remote_log_segment_id()
                    )));
                };
                let batch = u32::try_from(batch).unwrap_or(u32::MAX);
                let last = position.0.saturating_add(batch).min(size).saturating_sub(1);
                let whole_batch =
                    self.storage
                        .fetch_log_segment(m, position, Some(BytePosition(last)))?;
                whole = whole_batches_len(&whole_batch);
                if whole == 0 {
                    return Err(backend(format!(
                        "truncated batch at {position} of remote segment {}",
                        m.remote_log_segment_id()
                    )));
                }
                whole_batch
            } else {
                chunk
            };
            let found = first_record_at_or_after_timestamp(
                chunk.get(..whole).unwrap_or_default(),
                BytePosition(0),
                TimestampMs(ts),
                LogOffset(starting_offset),
            )?;
            if let Some(found) = found {
                return Ok(Some(TimestampOffset {
                    timestamp: found.timestamp.0,
                    offset: found.offset.0,
                    leader_epoch: found.leader_epoch.unwrap_or(LEADER_EPOCH),
                }));
            }
            position = BytePosition(
                position
                    .0
                    .saturating_add(u32::try_from(whole).unwrap_or(u32::MAX)),
            );
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, bytes::BytesMut};

    fn batch(base: i64, records: i32, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&i32::try_from(size - 12).unwrap().to_be_bytes());
        b[23..27].copy_from_slice(&(records - 1).to_be_bytes());
        b
    }

    #[test]
    fn cut_keeps_whole_batches_below_the_bound() {
        let mut all = BytesMut::new();
        all.extend_from_slice(&batch(0, 5, 100));
        all.extend_from_slice(&batch(5, 5, 80));
        all.extend_from_slice(&batch(10, 5, 90));
        let all = all.freeze();
        check!(cut_at(&all, 100) == (all.clone(), Some(15)));
        check!(cut_at(&all, 10) == (all.slice(..180), Some(10)));
        check!(cut_at(&all, 9) == (all.slice(..100), Some(5)));
        check!(cut_at(&all, 4) == (Bytes::new(), None));
        // A batch cut off by the read is not returned.
        check!(cut_at(&all.slice(..150), 100) == (all.slice(..100), Some(5)));
        check!(whole_batches_len(&all.slice(..150)) == 100);
        check!(whole_batches_len(&all) == 270);
    }
}
