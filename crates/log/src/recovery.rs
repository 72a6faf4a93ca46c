//! What opening a log removed, and how a bad batch in the middle of a log
//! is told apart from the torn tail a crash leaves.
//!
//! Recovery follows Kafka's `LogLoader`: after an unclean shutdown every
//! segment from the one holding the recovery point is checked batch by
//! batch (framing, CRC-32C, offsets); the first invalid batch ends the log —
//! its segment is truncated there and every later segment is deleted, since
//! they were never flushed past the recovery point. On a clean start only a
//! segment whose indexes fail their checks (or whose tail does not end on a
//! batch boundary) is rescanned, and only that segment is truncated.
//!
//! Kafka logs a byte count and moves on. Krabka says what was lost: every
//! cut is a [`Removal`] in the log's [`RecoveryReport`] and a WARN line with
//! the partition, the offset range and the records and bytes removed. It
//! also tells the two causes apart: a *torn tail* (the invalid bytes run to
//! the end of the last segment and no valid batch follows them — what a
//! crash during a write leaves, never acknowledged data) and *corruption*
//! (a valid batch, or a later segment with data, follows the bad one). With
//! [`CorruptionPolicy::Refuse`] a corrupted log is not cut at all: opening
//! fails with [`LogError::CorruptLog`] and the files stay as they are, which
//! is what a coordinator's internal topic needs, as its state cannot lose a
//! committed record without a word.

use crate::{
    LogError,
    batch::{self, BatchHeader, HEADER_SIZE},
    segment::Segment,
};

/// What to do when recovery finds an invalid batch that is not a torn tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptionPolicy {
    /// Kafka's recovery: truncate at the invalid batch (and, after an
    /// unclean shutdown, delete the later segments), reporting the loss.
    #[default]
    Truncate,
    /// Open nothing and change nothing: [`crate::Log::open_with`] fails with
    /// [`LogError::CorruptLog`]. A torn tail is still cut.
    Refuse,
}

/// How a log is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// What a corrupt batch in the middle of the log does.
    pub corruption: CorruptionPolicy,
    /// Check every batch of every segment (CRC included), not only what
    /// Kafka's recovery checks; for an operator's deliberate repair.
    pub verify_all: bool,
}

/// Why recovery removed data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossCause {
    /// The end of the last segment held an incomplete or invalid batch with
    /// nothing valid after it: a write cut short by a crash.
    TornTail,
    /// A batch failed its checks with valid data after it.
    Corruption {
        /// What was wrong with the batch.
        reason: String,
    },
    /// A whole segment after a corrupt batch, deleted as Kafka's recovery
    /// deletes the unflushed segments after a truncation.
    AfterCorruption,
}

impl std::fmt::Display for LossCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TornTail => f.write_str("torn tail"),
            Self::Corruption { reason } => write!(f, "corrupt batch: {reason}"),
            Self::AfterCorruption => f.write_str("segment after a corrupt batch"),
        }
    }
}

/// One cut made while opening a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// Base offset of the segment cut or deleted.
    pub segment: i64,
    /// First offset removed.
    pub from_offset: i64,
    /// One past the last offset removed, as far as the removed batches'
    /// headers could be read (`None` when none could).
    pub to_offset: Option<i64>,
    /// Records in the removed batches whose headers could be read (the
    /// loss is at least this).
    pub records: u64,
    /// Bytes removed.
    pub bytes: u64,
    /// Why.
    pub cause: LossCause,
}

/// What opening a log did to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Whether the log had been closed cleanly.
    pub clean_start: bool,
    /// Data removed, in offset order.
    pub removals: Vec<Removal>,
    /// Segments (base offsets) whose indexes were rebuilt without any loss.
    pub rebuilt_indexes: Vec<i64>,
}

impl RecoveryReport {
    /// Records removed in all.
    #[must_use]
    pub fn records_removed(&self) -> u64 {
        self.removals.iter().map(|r| r.records).sum()
    }

    /// Bytes removed in all.
    #[must_use]
    pub fn bytes_removed(&self) -> u64 {
        self.removals.iter().map(|r| r.bytes).sum()
    }
}

/// The bytes of a segment after its last valid batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    /// Records of the batches whose headers could be read.
    pub records: u64,
    /// One past the highest offset those headers name.
    pub end_offset: Option<i64>,
    /// Whether a valid (CRC-checked) batch lies after the invalid one.
    pub valid_after: bool,
}

/// Reads at most this much of a tail at a time while looking for batches.
const TAIL_CHUNK: usize = 1 << 20;

/// Looks at `seg` from byte `from` (the end of its valid batches, whose
/// next offset is `next_offset`) to the end of the file: counts the records
/// of every batch that can be framed there, and whether any of them is
/// valid. After a batch that cannot be framed it searches byte by byte for
/// the next valid batch (a header with magic 2, a plausible length and
/// offsets, and a matching CRC). Read only.
///
/// # Errors
///
/// [`LogError::Io`] on a read error.
pub(crate) fn analyse_tail(seg: &Segment, from: u64, next_offset: i64) -> Result<Tail, LogError> {
    let end = seg.file_len()?;
    let mut tail = Tail::default();
    let mut pos = from;
    let mut first = true;
    while pos < end {
        let Some(bytes) = seg.read_raw(pos, (end - pos).min(TAIL_CHUNK as u64) as usize)? else {
            break;
        };
        let framed = BatchHeader::parse(&bytes).filter(|h| plausible(h, next_offset));
        match framed {
            Some(h) if pos + h.size() <= end => {
                let valid = batch_is_valid(seg, pos, &h)?;
                if valid || first {
                    count(&mut tail, &h);
                    tail.valid_after |= valid && !first;
                    first = false;
                    pos += h.size();
                    continue;
                }
                // A framed but invalid batch after the first: look further.
            }
            Some(h) if first => {
                // The first bad batch runs past the end: count what its
                // header says, then look for a valid batch inside it.
                count(&mut tail, &h);
            }
            _ => {}
        }
        first = false;
        match find_valid(seg, pos + 1, end, next_offset)? {
            Some(at) => {
                pos = at;
                tail.valid_after = true;
            }
            None => break,
        }
    }
    Ok(tail)
}

fn count(tail: &mut Tail, h: &BatchHeader) {
    tail.records += u64::try_from(h.record_count.max(0)).unwrap_or(0);
    let end = h.next_offset();
    tail.end_offset = Some(tail.end_offset.map_or(end, |e| e.max(end)));
}

/// A header that could start a batch of this segment.
fn plausible(h: &BatchHeader, next_offset: i64) -> bool {
    h.magic == 2
        && h.batch_length >= (HEADER_SIZE - batch::LOG_OVERHEAD) as i32
        && h.base_offset >= next_offset
        && h.record_count >= 0
        && i64::from(h.record_count) <= i64::from(h.last_offset_delta) + 1
}

fn batch_is_valid(seg: &Segment, pos: u64, h: &BatchHeader) -> Result<bool, LogError> {
    let Some(bytes) = seg.read_raw(pos, h.size() as usize)? else {
        return Ok(false);
    };
    Ok(batch::check_batch(&bytes).is_ok())
}

/// The position of the first valid batch at or after `from`.
fn find_valid(
    seg: &Segment,
    from: u64,
    end: u64,
    next_offset: i64,
) -> Result<Option<u64>, LogError> {
    let mut chunk_start = from;
    while chunk_start + HEADER_SIZE as u64 <= end {
        let len = (end - chunk_start).min(TAIL_CHUNK as u64) as usize;
        let Some(bytes) = seg.read_raw(chunk_start, len)? else {
            return Ok(None);
        };
        let last = bytes.len().saturating_sub(HEADER_SIZE);
        for at in 0..=last {
            let Some(h) = bytes.get(at..).and_then(BatchHeader::parse) else {
                continue;
            };
            let pos = chunk_start + at as u64;
            if plausible(&h, next_offset) && pos + h.size() <= end && batch_is_valid(seg, pos, &h)?
            {
                return Ok(Some(pos));
            }
        }
        // Headers straddling the chunk boundary are seen by the next chunk.
        chunk_start += (last + 1) as u64;
    }
    Ok(None)
}

/// Records, bytes and end offset of a whole segment that is about to be
/// deleted (its batches are framed from its start; nothing is checked).
///
/// # Errors
///
/// [`LogError::Io`] on a read error.
pub(crate) fn summarise(seg: &Segment) -> Result<(u64, u64, Option<i64>), LogError> {
    let mut tail = Tail::default();
    seg.scan_headers(0, |_, h| {
        count(&mut tail, h);
        true
    })?;
    Ok((tail.records, seg.file_len()?, tail.end_offset))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn batch(base: i64, values: &[&str]) -> Vec<u8> {
        let records: Vec<kafka_protocol::records::Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| kafka_protocol::records::Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: kafka_protocol::records::TimestampType::Creation,
                offset: base + i as i64,
                // One batch: the encoder splits where offset - sequence changes.
                sequence: i as i32 - 1,
                timestamp: 1,
                key: None,
                value: Some(bytes::Bytes::copy_from_slice(v.as_bytes())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        kafka_protocol::records::RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &kafka_protocol::records::RecordEncodeOptions {
                version: 2,
                compression: kafka_protocol::records::Compression::None,
            },
        )
        .unwrap();
        buf.to_vec()
    }

    fn segment_with(dir: &std::path::Path, bytes: &[u8]) -> Segment {
        let seg = Segment::create(dir, 0, 1 << 20, 0).unwrap();
        std::fs::write(seg.log_path(), bytes).unwrap();
        Segment::open(dir, 0, 1 << 20, 0).unwrap()
    }

    #[test]
    fn a_flipped_byte_in_the_middle_is_corruption_with_its_records_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (a, mut b, c) = (
            batch(0, &["a", "b"]),
            batch(2, &["c", "d", "e"]),
            batch(5, &["f"]),
        );
        let at = a.len();
        let body = b.len() - 3;
        b[body] ^= 0x40;
        let seg = segment_with(dir.path(), &[a, b, c].concat());
        let tail = analyse_tail(&seg, at as u64, 2).unwrap();
        check!(
            tail == Tail {
                records: 4,
                end_offset: Some(6),
                valid_after: true
            }
        );
    }

    #[test]
    fn a_cut_last_batch_or_zero_fill_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (batch(0, &["a"]), batch(1, &["b", "c"]));
        let cut = [a.clone(), b.get(..b.len() - 5).unwrap().to_vec()].concat();
        let seg = segment_with(dir.path(), &cut);
        let tail = analyse_tail(&seg, a.len() as u64, 1).unwrap();
        check!(
            tail == Tail {
                records: 2,
                end_offset: Some(3),
                valid_after: false
            }
        );

        let zeros = [a.clone(), vec![0u8; 300]].concat();
        let seg = segment_with(dir.path(), &zeros);
        check!(analyse_tail(&seg, a.len() as u64, 1).unwrap() == Tail::default());
    }

    #[test]
    fn a_broken_length_is_resynchronised_on_the_next_valid_batch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, mut b, c) = (batch(0, &["a"]), batch(1, &["b"]), batch(2, &["c", "d"]));
        // batch_length (bytes 8..12) made huge: framing is lost.
        b[8] = 0x7f;
        let seg = segment_with(dir.path(), &[a.clone(), b, c].concat());
        let tail = analyse_tail(&seg, a.len() as u64, 1).unwrap();
        check!(tail.valid_after);
        check!(tail.records >= 2);
        check!(tail.end_offset == Some(4));
    }
}
