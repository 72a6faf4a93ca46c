//! Idempotent / transactional producer state of one partition, and Kafka's
//! `.snapshot` file format for it.
//!
//! Per producer id the log keeps the epoch, the last five batches (sequence
//! range and offsets, to answer retried batches with their original offsets),
//! the coordinator epoch of the last marker and the first offset of an
//! ongoing transaction. Checks follow Kafka's `ProducerAppendInfo`.
//!
//! Snapshot format (Kafka `ProducerStateManager`, version 1), big-endian:
//! `version: i16 = 1`, `crc: u32` (CRC-32C of everything after it), then an
//! array (`i32` count) of entries `producer_id i64, epoch i16,
//! last_sequence i32, last_offset i64, offset_delta i32, timestamp i64,
//! coordinator_epoch i32, current_txn_first_offset i64 (-1 = none)`. As in
//! Kafka only the last batch of each producer is persisted.

use {
    crate::{LogError, batch::BatchHeader, checkpoint},
    krabka_ids::{ProducerEpoch, ProducerId, TransactionVersion},
    std::{
        collections::{BTreeMap, HashMap, VecDeque},
        path::{Path, PathBuf},
    },
};

/// Batches remembered per producer for duplicate detection (Kafka: 5).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Suffix of snapshot files.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const ENTRY_SIZE: usize = 46;

/// Sequence and offset range of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence.
    pub first_seq: i32,
    /// Last sequence.
    pub last_seq: i32,
    /// First offset.
    pub first_offset: i64,
    /// Last offset.
    pub last_offset: i64,
    /// Max timestamp of the batch.
    pub timestamp: i64,
}

/// State of one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The producer id.
    pub producer_id: i64,
    /// Current epoch (-1 before the first batch).
    pub epoch: i16,
    /// Last batches, oldest first, at most [`NUM_BATCHES_TO_RETAIN`].
    pub batches: VecDeque<BatchMetadata>,
    /// Coordinator epoch of the last transaction marker (-1 if none).
    pub coordinator_epoch: i32,
    /// Timestamp of the last append.
    pub last_timestamp: i64,
    /// First offset of the ongoing transaction.
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn empty(producer_id: i64) -> Self {
        Self {
            producer_id,
            epoch: -1,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
        }
    }

    /// Last sequence written (-1 if none).
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    fn find_duplicate(&self, header: &BatchHeader) -> Option<BatchMetadata> {
        if header.producer_epoch != self.epoch {
            return None;
        }
        let last_seq = header.last_sequence();
        self.batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last_seq)
            .copied()
    }

    fn bump_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn add_batch(&mut self, header: &BatchHeader, first_offset: i64) {
        self.bump_epoch(header.producer_epoch);
        let delta = i64::from(header.last_offset_delta);
        self.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            first_offset,
            last_offset: first_offset + delta,
            timestamp: header.max_timestamp,
        });
        while self.batches.len() > NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.last_timestamp = header.max_timestamp;
    }
}

/// What the log answers for DescribeProducers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSummary {
    /// The producer id.
    pub producer_id: ProducerId,
    /// Its current epoch.
    pub producer_epoch: ProducerEpoch,
    /// Last sequence written (-1 if none).
    pub last_sequence: i32,
    /// Timestamp of its last append (-1 if none).
    pub last_timestamp: i64,
    /// Coordinator epoch of its last marker (-1 if none).
    pub coordinator_epoch: i32,
    /// First offset of its ongoing transaction.
    pub current_txn_start_offset: Option<i64>,
}

/// Who is appending a batch (Kafka's `AppendOrigin`): a client's batches are
/// checked for duplicates and sequence order, a coordinator's (transactional
/// offset commits written by the group coordinator with the producer's id and
/// epoch) only for epoch fencing, since the coordinator does not number them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer's batch, as sent.
    Client,
    /// A batch the broker's own coordinator wrote for a producer.
    Coordinator,
}

/// Outcome of checking a client batch against producer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// New batch: append it.
    Append,
    /// A retry of a batch already in the log at these offsets.
    Duplicate(BatchMetadata),
}

/// A transaction completed by a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// First offset of the transaction (the marker's if it wrote no data here).
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    /// Whether it was aborted.
    pub aborted: bool,
}

fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// Pending changes of one append, applied together with
/// [`ProducerStateManager::commit`] once the bytes are written.
#[derive(Debug, Default)]
pub struct PendingUpdate {
    entries: HashMap<i64, ProducerEntry>,
    started_txns: Vec<(i64, i64)>,
}

/// All producers of a partition plus the ongoing transactions.
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Ongoing transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
}

impl ProducerStateManager {
    /// Producers known to the log.
    #[must_use]
    pub fn producers(&self) -> &HashMap<i64, ProducerEntry> {
        &self.producers
    }

    /// First offset of the earliest ongoing transaction.
    #[must_use]
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    fn current<'a>(&'a self, pending: &'a PendingUpdate, pid: i64) -> Option<&'a ProducerEntry> {
        pending
            .entries
            .get(&pid)
            .or_else(|| self.producers.get(&pid))
    }

    /// Checks a batch (Kafka's leader-append validation) whose first offset
    /// will be `first_offset`, recording it in `pending` when it is to be
    /// appended. A [`AppendOrigin::Coordinator`] batch skips the duplicate
    /// and sequence checks.
    ///
    /// # Errors
    ///
    /// [`LogError::InvalidProducerEpoch`], [`LogError::OutOfOrderSequence`]
    /// or [`LogError::InvalidTxnState`].
    pub fn check_and_stage(
        &self,
        pending: &mut PendingUpdate,
        header: &BatchHeader,
        first_offset: i64,
        origin: AppendOrigin,
    ) -> Result<SequenceCheck, LogError> {
        let pid = header.producer_id;
        let entry = self
            .current(pending, pid)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::empty(pid));
        if header.producer_epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch {
                producer_id: ProducerId(pid),
                current: ProducerEpoch(entry.epoch),
                found: ProducerEpoch(header.producer_epoch),
            });
        }
        if origin == AppendOrigin::Client
            && let Some(dup) = entry.find_duplicate(header)
        {
            return Ok(SequenceCheck::Duplicate(dup));
        }
        let out_of_order = |expected: i32| LogError::OutOfOrderSequence {
            producer_id: ProducerId(pid),
            expected_sequence: expected,
            found_sequence: header.base_sequence,
        };
        if origin == AppendOrigin::Coordinator {
            // Not numbered by the producer: nothing to check.
        } else if header.producer_epoch != entry.epoch {
            // A new epoch must start at sequence 0, unless the producer is
            // unknown (its state may have been removed with old segments).
            if header.base_sequence != 0 && entry.epoch != -1 {
                return Err(out_of_order(0));
            }
        } else {
            let last = entry.last_seq();
            if last == -1 && header.base_sequence != 0 {
                return Err(out_of_order(-1));
            }
            if last != -1 && !in_sequence(last, header.base_sequence) {
                return Err(out_of_order(last.wrapping_add(1)));
            }
        }
        let mut entry = entry;
        if header.is_transactional() {
            if entry.current_txn_first_offset.is_none() {
                entry.current_txn_first_offset = Some(first_offset);
                pending.started_txns.push((first_offset, pid));
            }
        } else if entry.current_txn_first_offset.is_some() {
            return Err(LogError::InvalidTxnState {
                producer_id: ProducerId(pid),
                reason: "non-transactional batch while a transaction is ongoing".into(),
            });
        }
        entry.add_batch(header, first_offset);
        pending.entries.insert(pid, entry);
        Ok(SequenceCheck::Append)
    }

    /// Checks a transaction marker for `pid` at epoch `epoch`, written under
    /// transaction version `version`.
    ///
    /// Before transactions version 2 the marker's epoch may equal the
    /// producer's. From version 2 the coordinator ends every transaction
    /// under a bumped epoch, so a marker at the producer's epoch is a stale
    /// one that must not end the producer's next transaction (KIP-1228);
    /// it is still accepted as the retry of a marker already written when
    /// no transaction is open, or at the last epoch, as Kafka accepts it.
    ///
    /// # Errors
    ///
    /// [`LogError::InvalidProducerEpoch`] if the epoch is fenced, or
    /// [`LogError::InvalidTxnState`] if the coordinator epoch went backwards.
    pub fn check_marker(
        &self,
        pid: i64,
        epoch: i16,
        coordinator_epoch: i32,
        version: TransactionVersion,
    ) -> Result<(), LogError> {
        if let Some(entry) = self.producers.get(&pid) {
            let fenced = if version.bumps_epoch() {
                let retry = epoch == entry.epoch
                    && (entry.current_txn_first_offset.is_none() || epoch == i16::MAX);
                epoch <= entry.epoch && !retry
            } else {
                epoch < entry.epoch
            };
            if fenced {
                return Err(LogError::InvalidProducerEpoch {
                    producer_id: ProducerId(pid),
                    current: ProducerEpoch(entry.epoch),
                    found: ProducerEpoch(epoch),
                });
            }
            if coordinator_epoch < entry.coordinator_epoch {
                return Err(LogError::InvalidTxnState {
                    producer_id: ProducerId(pid),
                    reason: format!(
                        "coordinator epoch {coordinator_epoch} is older than {}",
                        entry.coordinator_epoch
                    ),
                });
            }
        }
        Ok(())
    }

    /// Applies staged changes.
    pub fn commit(&mut self, pending: PendingUpdate) {
        for (first, pid) in pending.started_txns {
            self.ongoing.insert(first, pid);
        }
        self.producers.extend(pending.entries);
    }

    /// Applies a marker at `offset` (already checked) and returns the
    /// completed transaction.
    pub fn complete_txn(
        &mut self,
        pid: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
        offset: i64,
        timestamp: i64,
    ) -> CompletedTxn {
        let entry = self
            .producers
            .entry(pid)
            .or_insert_with(|| ProducerEntry::empty(pid));
        entry.bump_epoch(epoch);
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = timestamp;
        let first = entry.current_txn_first_offset.take();
        if let Some(first) = first {
            self.ongoing.remove(&first);
        }
        CompletedTxn {
            producer_id: pid,
            first_offset: first.unwrap_or(offset),
            last_offset: offset,
            aborted: !commit,
        }
    }

    /// Replays a data batch read back from the log (no checks).
    pub fn replay_data(&mut self, header: &BatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        let mut pending = PendingUpdate::default();
        let pid = header.producer_id;
        let mut entry = self
            .current(&pending, pid)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::empty(pid));
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            pending.started_txns.push((header.base_offset, pid));
        }
        entry.add_batch(header, header.base_offset);
        pending.entries.insert(pid, entry);
        self.commit(pending);
    }

    /// Removes producers without an open transaction whose last append is
    /// older than `horizon_ms`; returns how many.
    pub fn remove_expired(&mut self, horizon_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, e| e.current_txn_first_offset.is_some() || e.last_timestamp >= horizon_ms);
        before - self.producers.len()
    }

    /// Drops everything (before a full rebuild).
    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
    }

    /// Summaries for DescribeProducers.
    #[must_use]
    pub fn summaries(&self) -> Vec<ProducerSummary> {
        let mut out: Vec<_> = self
            .producers
            .values()
            .map(|e| ProducerSummary {
                producer_id: ProducerId(e.producer_id),
                producer_epoch: ProducerEpoch(e.epoch),
                last_sequence: e.last_seq(),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset,
            })
            .collect();
        out.sort_by_key(|s| s.producer_id);
        out
    }

    /// Encodes the snapshot bytes.
    #[must_use]
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut entries: Vec<&ProducerEntry> = self.producers.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        let mut body = Vec::with_capacity(4 + entries.len() * ENTRY_SIZE);
        body.extend_from_slice(&(entries.len() as i32).to_be_bytes());
        for e in entries {
            let last = e.batches.back();
            body.extend_from_slice(&e.producer_id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&last.map_or(-1, |b| b.last_seq).to_be_bytes());
            body.extend_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
            let delta = last.map_or(0, |b| (b.last_offset - b.first_offset) as i32);
            body.extend_from_slice(&delta.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        }
        let mut out = Vec::with_capacity(6 + body.len());
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Decodes snapshot bytes into a manager.
    ///
    /// # Errors
    ///
    /// [`LogError::CorruptFile`] on a wrong version, CRC or length.
    pub fn decode_snapshot(path: &Path, raw: &[u8]) -> Result<Self, LogError> {
        let corrupt = |reason: String| LogError::CorruptFile {
            path: path.to_path_buf(),
            reason,
        };
        let i16_at = |at: usize| {
            raw.get(at..at + 2)
                .and_then(|b| b.try_into().ok())
                .map(i16::from_be_bytes)
        };
        let i32_at = |at: usize| {
            raw.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_be_bytes)
        };
        let i64_at = |at: usize| {
            raw.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        let version = i16_at(0).ok_or_else(|| corrupt("too short".into()))?;
        if version != SNAPSHOT_VERSION {
            return Err(corrupt(format!("unsupported snapshot version {version}")));
        }
        let stored_crc = i32_at(2).ok_or_else(|| corrupt("too short".into()))? as u32;
        let body = raw.get(6..).unwrap_or_default();
        if crc32c::crc32c(body) != stored_crc {
            return Err(corrupt("snapshot CRC-32C mismatch".into()));
        }
        let count = i32_at(6).ok_or_else(|| corrupt("missing entry count".into()))?;
        let count =
            usize::try_from(count).map_err(|_| corrupt(format!("negative entry count {count}")))?;
        if count
            .checked_mul(ENTRY_SIZE)
            .and_then(|n| n.checked_add(10))
            != Some(raw.len())
        {
            return Err(corrupt(format!(
                "{} bytes do not hold {count} entries",
                raw.len()
            )));
        }
        let mut state = Self::default();
        for i in 0..count {
            let at = 10 + i * ENTRY_SIZE;
            let bad = || corrupt(format!("entry {i} is cut off"));
            let producer_id = i64_at(at).ok_or_else(bad)?;
            let epoch = i16_at(at + 8).ok_or_else(bad)?;
            let last_seq = i32_at(at + 10).ok_or_else(bad)?;
            let last_offset = i64_at(at + 14).ok_or_else(bad)?;
            let delta = i32_at(at + 22).ok_or_else(bad)?;
            let timestamp = i64_at(at + 26).ok_or_else(bad)?;
            let coordinator_epoch = i32_at(at + 34).ok_or_else(bad)?;
            let txn_first = i64_at(at + 38).ok_or_else(bad)?;
            let mut entry = ProducerEntry::empty(producer_id);
            entry.epoch = epoch;
            entry.coordinator_epoch = coordinator_epoch;
            entry.last_timestamp = timestamp;
            if last_offset >= 0 {
                entry.batches.push_back(BatchMetadata {
                    first_seq: last_seq.wrapping_sub(delta),
                    last_seq,
                    first_offset: last_offset.saturating_sub(i64::from(delta)),
                    last_offset,
                    timestamp,
                });
            }
            if txn_first >= 0 {
                entry.current_txn_first_offset = Some(txn_first);
                state.ongoing.insert(txn_first, producer_id);
            }
            state.producers.insert(producer_id, entry);
        }
        Ok(state)
    }

    /// Writes `<offset>.snapshot` in `dir`.
    ///
    /// # Errors
    ///
    /// [`LogError::Io`] on a file error.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> Result<(), LogError> {
        checkpoint::write_atomic(&snapshot_path(dir, offset), &self.encode_snapshot())
    }
}

/// Path of the snapshot at `offset`.
#[must_use]
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!(
        "{}{SNAPSHOT_SUFFIX}",
        checkpoint::file_stem(offset)
    ))
}

/// Offsets of the snapshot files in `dir`, ascending.
///
/// # Errors
///
/// [`LogError::Io`] if the directory cannot be listed.
pub fn list_snapshots(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        if let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(|n| checkpoint::offset_from_file_name(n, SNAPSHOT_SUFFIX))
        {
            out.push(offset);
        }
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, txn: bool) -> BatchHeader {
        let mut h = BatchHeader::parse(&[0u8; crate::batch::HEADER_SIZE]).unwrap();
        h.producer_id = pid;
        h.producer_epoch = epoch;
        h.base_sequence = seq;
        h.last_offset_delta = count - 1;
        h.record_count = count;
        h.max_timestamp = 77;
        if txn {
            h.attributes = 1 << 4;
        }
        h
    }

    #[test]
    fn a_snapshot_claiming_more_entries_than_its_bytes_is_corrupt() {
        // A valid CRC over a body whose count says 2^31 - 1 entries.
        let mut body = i32::MAX.to_be_bytes().to_vec();
        body.extend_from_slice(&[0u8; 90]);
        let mut raw = SNAPSHOT_VERSION.to_be_bytes().to_vec();
        raw.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        raw.extend_from_slice(&body);
        let path = Path::new("00000000000000000000.snapshot");
        let err = ProducerStateManager::decode_snapshot(path, &raw).unwrap_err();
        check!(err.to_string().contains("do not hold"));
        // A negative count too.
        let mut body = (-1i32).to_be_bytes().to_vec();
        body.extend_from_slice(&[0u8; 4]);
        let mut raw = SNAPSHOT_VERSION.to_be_bytes().to_vec();
        raw.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        raw.extend_from_slice(&body);
        check!(ProducerStateManager::decode_snapshot(path, &raw).is_err());
    }

    fn stage(
        m: &mut ProducerStateManager,
        h: &BatchHeader,
        first: i64,
    ) -> Result<SequenceCheck, LogError> {
        let mut p = PendingUpdate::default();
        let r = m.check_and_stage(&mut p, h, first, AppendOrigin::Client)?;
        m.commit(p);
        Ok(r)
    }

    #[test]
    fn sequences_epochs_and_duplicates() {
        let mut m = ProducerStateManager::default();
        check!(stage(&mut m, &header(1, 0, 0, 3, false), 0).unwrap() == SequenceCheck::Append);
        check!(stage(&mut m, &header(1, 0, 3, 2, false), 3).unwrap() == SequenceCheck::Append);
        let dup = stage(&mut m, &header(1, 0, 0, 3, false), 99).unwrap();
        check!(
            matches!(dup, SequenceCheck::Duplicate(b) if b.first_offset == 0 && b.last_offset == 2)
        );
        check!(
            stage(&mut m, &header(1, 0, 7, 1, false), 5)
                .unwrap_err()
                .kafka_error_code()
                == 45
        );
        check!(
            stage(&mut m, &header(1, 1, 3, 1, false), 5)
                .unwrap_err()
                .kafka_error_code()
                == 45
        );
        check!(stage(&mut m, &header(1, 1, 0, 1, false), 5).unwrap() == SequenceCheck::Append);
        check!(
            stage(&mut m, &header(1, 0, 6, 1, false), 6)
                .unwrap_err()
                .kafka_error_code()
                == 47
        );
        // Unknown producer may start anywhere.
        check!(stage(&mut m, &header(2, 4, 17, 1, false), 6).unwrap() == SequenceCheck::Append);
    }

    #[test]
    fn coordinator_batches_skip_sequences_but_not_fencing() {
        let mut m = ProducerStateManager::default();
        let coordinator = |m: &mut ProducerStateManager, h: &BatchHeader, first: i64| {
            let mut p = PendingUpdate::default();
            let r = m.check_and_stage(&mut p, h, first, AppendOrigin::Coordinator);
            if r.is_ok() {
                m.commit(p);
            }
            r
        };
        // The same (unnumbered) sequence twice is two appends, not a retry.
        check!(coordinator(&mut m, &header(9, 3, 0, 1, true), 0).unwrap() == SequenceCheck::Append);
        check!(coordinator(&mut m, &header(9, 3, 0, 1, true), 1).unwrap() == SequenceCheck::Append);
        check!(m.first_unstable_offset() == Some(0));
        check!(
            coordinator(&mut m, &header(9, 2, 0, 1, true), 2)
                .unwrap_err()
                .kafka_error_code()
                == 47
        );
    }

    #[test]
    fn snapshot_round_trip_and_txn() {
        let mut m = ProducerStateManager::default();
        stage(&mut m, &header(5, 2, 0, 4, true), 10).unwrap();
        check!(m.first_unstable_offset() == Some(10));
        check!(
            stage(&mut m, &header(5, 2, 4, 1, false), 14)
                .unwrap_err()
                .kafka_error_code()
                == 48
        );
        let raw = m.encode_snapshot();
        check!(raw.len() == 10 + ENTRY_SIZE);
        let back = ProducerStateManager::decode_snapshot(Path::new("s"), &raw).unwrap();
        check!(back.producers() == m.producers());
        check!(back.first_unstable_offset() == Some(10));
        let done = m.complete_txn(5, 2, 3, false, 20, 100);
        check!(
            done == CompletedTxn {
                producer_id: 5,
                first_offset: 10,
                last_offset: 20,
                aborted: true
            }
        );
        check!(m.first_unstable_offset().is_none());
        let mut bad = raw.clone();
        bad[12] ^= 1;
        check!(ProducerStateManager::decode_snapshot(Path::new("s"), &bad).is_err());
    }
}
