//! The v2 record batch header: parsing, validation and the few in-place edits
//! the broker makes (offsets, leader epoch, LogAppendTime).
//!
//! The log stores batches byte for byte as the client sent them; only the
//! header fields outside the CRC (base offset, partition leader epoch) are
//! rewritten on append, and the CRC is recomputed only when LogAppendTime
//! changes the attributes and max timestamp. Record bodies are never decoded
//! on the append path.

use {
    crate::LogError,
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
        TimestampType as WireTimestampType,
    },
};

/// Size of the v2 batch header (everything before the first record).
pub const HEADER_SIZE: usize = 61;
/// Bytes before and including the length field (`baseOffset` + `batchLength`).
pub const LOG_OVERHEAD: usize = 12;

const BASE_OFFSET: usize = 0;
const LENGTH: usize = 8;
const LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORD_COUNT: usize = 57;

const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// The parsed fixed-size header of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// `baseOffset`.
    pub base_offset: i64,
    /// `batchLength`: bytes after this field.
    pub batch_length: i32,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: i32,
    /// `magic` (2).
    pub magic: i8,
    /// `crc` (CRC-32C over attributes..end).
    pub crc: u32,
    /// `attributes`.
    pub attributes: i16,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `baseTimestamp`.
    pub base_timestamp: i64,
    /// `maxTimestamp`.
    pub max_timestamp: i64,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
    /// `recordCount`.
    pub record_count: i32,
}

fn be<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = buf.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

impl BatchHeader {
    /// Parses the header from the first [`HEADER_SIZE`] bytes of `buf`;
    /// `None` if `buf` is shorter. No field is checked here.
    #[must_use]
    pub fn parse(buf: &[u8]) -> Option<Self> {
        if buf.len() < HEADER_SIZE {
            return None;
        }
        Some(Self {
            base_offset: i64::from_be_bytes(be(buf, BASE_OFFSET)),
            batch_length: i32::from_be_bytes(be(buf, LENGTH)),
            partition_leader_epoch: i32::from_be_bytes(be(buf, LEADER_EPOCH)),
            magic: i8::from_be_bytes(be(buf, MAGIC)),
            crc: u32::from_be_bytes(be(buf, CRC)),
            attributes: i16::from_be_bytes(be(buf, ATTRIBUTES)),
            last_offset_delta: i32::from_be_bytes(be(buf, LAST_OFFSET_DELTA)),
            base_timestamp: i64::from_be_bytes(be(buf, BASE_TIMESTAMP)),
            max_timestamp: i64::from_be_bytes(be(buf, MAX_TIMESTAMP)),
            producer_id: i64::from_be_bytes(be(buf, PRODUCER_ID)),
            producer_epoch: i16::from_be_bytes(be(buf, PRODUCER_EPOCH)),
            base_sequence: i32::from_be_bytes(be(buf, BASE_SEQUENCE)),
            record_count: i32::from_be_bytes(be(buf, RECORD_COUNT)),
        })
    }

    /// Total size of the batch on disk (`batchLength` + 12), as declared.
    #[must_use]
    pub fn size(&self) -> u64 {
        u64::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD as u64
    }

    /// Offset of the last record (`baseOffset + lastOffsetDelta`).
    #[must_use]
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    /// The offset after this batch.
    #[must_use]
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Attribute bit 4.
    #[must_use]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Attribute bit 5.
    #[must_use]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Attribute bit 3 (LogAppendTime).
    #[must_use]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    /// Whether the batch carries a producer id (idempotent or transactional).
    #[must_use]
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence of the last record, wrapping as Kafka does.
    #[must_use]
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = i64::from(self.base_sequence) + i64::from(self.last_offset_delta);
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }

    /// Compression codec in attribute bits 0-2.
    #[must_use]
    pub fn compression(&self) -> Option<Compression> {
        match self.attributes & 0x7 {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// Checks framing, magic and CRC of the batch at the start of `buf` and
/// returns its header. `buf` may hold more bytes after the batch.
///
/// # Errors
///
/// [`LogError::CorruptRecord`] when the header is short, the length is
/// impossible, the batch is cut off, the magic is not 2 or the CRC differs.
pub fn check_batch(buf: &[u8]) -> Result<BatchHeader, LogError> {
    let header = BatchHeader::parse(buf).ok_or_else(|| {
        LogError::corrupt(format!(
            "{} bytes are too few for a batch header",
            buf.len()
        ))
    })?;
    if header.batch_length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(LogError::corrupt(format!(
            "batch length {} is below the header size",
            header.batch_length
        )));
    }
    if header.magic != 2 {
        return Err(LogError::corrupt(format!(
            "unsupported magic {}",
            header.magic
        )));
    }
    let size = header.size() as usize;
    let body = buf.get(ATTRIBUTES..size).ok_or_else(|| {
        LogError::corrupt(format!("batch of {size} bytes is cut off at {}", buf.len()))
    })?;
    let crc = crc32c::crc32c(body);
    if crc != header.crc {
        return Err(LogError::corrupt(format!(
            "CRC-32C mismatch: stored {:#010x}, computed {crc:#010x}",
            header.crc
        )));
    }
    Ok(header)
}

/// Validation of a client batch beyond framing: record count consistency,
/// a known codec, and no control batches from clients.
///
/// # Errors
///
/// [`LogError::InvalidRecord`] for each violated rule.
pub fn check_client_batch(header: &BatchHeader) -> Result<(), LogError> {
    if header.record_count <= 0 {
        return Err(LogError::invalid(format!(
            "record count {} is not positive",
            header.record_count
        )));
    }
    if header.last_offset_delta < 0
        || i64::from(header.last_offset_delta) + 1 != i64::from(header.record_count)
    {
        return Err(LogError::invalid(format!(
            "record count {} does not match last offset delta {}",
            header.record_count, header.last_offset_delta
        )));
    }
    if header.compression().is_none() {
        return Err(LogError::invalid(format!(
            "unknown compression codec {}",
            header.attributes & 0x7
        )));
    }
    if header.is_control() {
        return Err(LogError::invalid("clients may not send control batches"));
    }
    Ok(())
}

/// Rewrites the base offset (outside the CRC).
pub fn set_base_offset(batch: &mut [u8], offset: i64) {
    if let Some(dst) = batch.get_mut(BASE_OFFSET..BASE_OFFSET + 8) {
        dst.copy_from_slice(&offset.to_be_bytes());
    }
}

/// Rewrites the partition leader epoch (outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    if let Some(dst) = batch.get_mut(LEADER_EPOCH..LEADER_EPOCH + 4) {
        dst.copy_from_slice(&epoch.to_be_bytes());
    }
}

/// Bytes at the head of a batch that an append rewrites outside the CRC:
/// the base offset, the length (kept) and the partition leader epoch.
pub const PATCHED_PREFIX: usize = LEADER_EPOCH + 4;

/// The first [`PATCHED_PREFIX`] bytes of `batch` with its base offset and
/// partition leader epoch rewritten; `None` if the batch is shorter. The
/// rest of the batch is stored as the client sent it, so an append writes
/// this head and the client's bytes side by side instead of copying them.
#[must_use]
pub fn patched_prefix(batch: &[u8], offset: i64, epoch: i32) -> Option<[u8; PATCHED_PREFIX]> {
    let mut head: [u8; PATCHED_PREFIX] = batch.get(..PATCHED_PREFIX)?.try_into().ok()?;
    set_base_offset(&mut head, offset);
    set_partition_leader_epoch(&mut head, epoch);
    Some(head)
}

/// Marks the batch LogAppendTime with max timestamp `ts` and recomputes the CRC.
pub fn set_log_append_time(batch: &mut [u8], ts: i64) {
    let Some(header) = BatchHeader::parse(batch) else {
        return;
    };
    let attributes = header.attributes | TIMESTAMP_TYPE_BIT;
    if let Some(dst) = batch.get_mut(ATTRIBUTES..ATTRIBUTES + 2) {
        dst.copy_from_slice(&attributes.to_be_bytes());
    }
    if let Some(dst) = batch.get_mut(MAX_TIMESTAMP..MAX_TIMESTAMP + 8) {
        dst.copy_from_slice(&ts.to_be_bytes());
    }
    recompute_crc(batch);
}

/// The batch at the start of `batch` with its record area replaced by
/// `payload` compressed with `codec`: same header fields, new codec bits,
/// length and CRC (what recompressing to a topic's `compression.type` does).
///
/// # Errors
///
/// [`LogError::CorruptRecord`] if `batch` has no whole header,
/// [`LogError::RecordTooLarge`] if the result cannot be framed.
pub(crate) fn rebuild_with_payload(
    batch: &[u8],
    codec: Compression,
    payload: &[u8],
) -> Result<Vec<u8>, LogError> {
    let header = batch
        .get(..HEADER_SIZE)
        .ok_or_else(|| LogError::corrupt("batch shorter than its header"))?;
    let size = HEADER_SIZE + payload.len();
    let length = i32::try_from(size - LOG_OVERHEAD).map_err(|_| LogError::RecordTooLarge {
        size: size as u64,
        max: i32::MAX as u64,
    })?;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(header);
    out.extend_from_slice(payload);
    out[LENGTH..LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let attributes =
        (i16::from_be_bytes([out[ATTRIBUTES], out[ATTRIBUTES + 1]]) & !0x7) | codec as i16;
    out[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    recompute_crc(&mut out);
    Ok(out)
}

/// Recomputes the CRC-32C of the batch at the start of `batch`.
pub fn recompute_crc(batch: &mut [u8]) {
    let Some(header) = BatchHeader::parse(batch) else {
        return;
    };
    let size = (header.size() as usize).min(batch.len());
    let crc = batch.get(ATTRIBUTES..size).map(crc32c::crc32c).unwrap_or(0);
    if let Some(dst) = batch.get_mut(CRC..CRC + 4) {
        dst.copy_from_slice(&crc.to_be_bytes());
    }
}

/// A transaction control marker record (key: version + type, value: version +
/// coordinator epoch), as Kafka's `EndTransactionMarker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    /// `true` for COMMIT (type 1), `false` for ABORT (type 0).
    pub commit: bool,
    /// The transaction coordinator's epoch.
    pub coordinator_epoch: i32,
}

impl ControlRecord {
    /// Parses the key and value of a control record; `None` unless the key is
    /// a version-0 ABORT/COMMIT marker.
    #[must_use]
    pub fn parse(key: &[u8], value: &[u8]) -> Option<Self> {
        let version = i16::from_be_bytes(key.get(0..2)?.try_into().ok()?);
        let kind = i16::from_be_bytes(key.get(2..4)?.try_into().ok()?);
        if version != 0 {
            return None;
        }
        let commit = match kind {
            0 => false,
            1 => true,
            _ => return None,
        };
        let coordinator_epoch = value
            .get(2..6)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes)
            .unwrap_or(-1);
        Some(Self {
            commit,
            coordinator_epoch,
        })
    }
}

/// Encodes a control batch holding one transaction marker at `offset`.
///
/// # Errors
///
/// [`LogError::InvalidRecord`] if the record-batch encoder refuses.
pub fn encode_control_batch(
    offset: i64,
    producer_id: i64,
    producer_epoch: i16,
    marker: ControlRecord,
    leader_epoch: i32,
    timestamp: i64,
) -> Result<Vec<u8>, LogError> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(marker.commit).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: leader_epoch,
        producer_id,
        producer_epoch,
        timestamp_type: WireTimestampType::Creation,
        offset,
        sequence: -1,
        timestamp,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
    };
    let mut buf = BytesMut::with_capacity(128);
    RecordBatchEncoder::encode(
        &mut buf,
        std::iter::once(&record),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| LogError::invalid(format!("encoding control batch: {e}")))?;
    Ok(buf.to_vec())
}

/// The fewest bytes one v2 record takes: its length, attributes, timestamp
/// and offset deltas, key and value lengths and header count are at least
/// one byte each.
pub const MIN_RECORD_SIZE: usize = 7;

/// Checks that `count` records can fit in `bytes` bytes of (uncompressed)
/// records: the decoder reserves room for `count` records before reading
/// them, so a count the bytes cannot hold is refused first.
///
/// # Errors
///
/// [`LogError::CorruptRecord`] when the count is negative or too large.
pub fn check_record_count(count: i32, bytes: usize) -> Result<(), LogError> {
    let fits = usize::try_from(count).is_ok_and(|n| n <= bytes / MIN_RECORD_SIZE);
    if fits {
        Ok(())
    } else {
        Err(LogError::corrupt(format!(
            "record count {count} cannot fit in {bytes} bytes of records"
        )))
    }
}

/// Checks that every length and count inside the records of an
/// uncompressed record area lies within the bytes at hand: each record
/// within its area, its key and value within the record, and its header
/// count no larger than the record's remaining bytes allow (a header takes
/// at least two bytes). `kafka-protocol` reserves room for a record's
/// headers from the count on the wire, so a forged count must be refused
/// before it decodes. Each record's timestamp and offset deltas must also
/// add to the batch's `base_timestamp` and `base_offset` without
/// overflowing (the decoder adds them unchecked).
///
/// # Errors
///
/// [`LogError::CorruptRecord`] naming the first malformed record.
pub fn check_record_frames(
    plain: &[u8],
    base_offset: i64,
    base_timestamp: i64,
) -> Result<(), LogError> {
    use crate::validate::read_varint;
    let mut pos = 0usize;
    let mut index = 0usize;
    while pos < plain.len() {
        let corrupt = || LogError::corrupt(format!("record {index} of the batch is malformed"));
        let length = read_varint(plain, &mut pos).ok_or_else(corrupt)?;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|e| *e <= plain.len())
            .ok_or_else(corrupt)?;
        let body = plain.get(pos..end).ok_or_else(corrupt)?;
        let mut at = 1usize; // attributes
        let timestamp_delta = read_varint(body, &mut at).ok_or_else(corrupt)?;
        base_timestamp
            .checked_add(timestamp_delta)
            .ok_or_else(corrupt)?;
        let offset_delta = read_varint(body, &mut at).ok_or_else(corrupt)?;
        i32::try_from(offset_delta)
            .ok()
            .and_then(|d| base_offset.checked_add(i64::from(d)))
            .ok_or_else(corrupt)?;
        let skip = |at: &mut usize, nullable: bool| -> Result<(), LogError> {
            let len = read_varint(body, at).ok_or_else(corrupt)?;
            if len == -1 && nullable {
                return Ok(());
            }
            *at = usize::try_from(len)
                .ok()
                .and_then(|l| at.checked_add(l))
                .filter(|e| *e <= body.len())
                .ok_or_else(corrupt)?;
            Ok(())
        };
        skip(&mut at, true)?; // key
        skip(&mut at, true)?; // value
        let headers = read_varint(body, &mut at).ok_or_else(corrupt)?;
        let headers = usize::try_from(headers)
            .ok()
            .filter(|n| *n <= body.len().saturating_sub(at) / 2)
            .ok_or_else(corrupt)?;
        for _ in 0..headers {
            skip(&mut at, false)?; // header key
            skip(&mut at, true)?; // header value
        }
        pos = end;
        index += 1;
    }
    Ok(())
}

/// Decodes the records of one whole batch (any codec) the log holds. For
/// LogAppendTime batches every record's timestamp is the batch's max
/// timestamp, as Kafka defines it. Compressed records inflate into at most
/// [`crate::compression::STORED_BATCH_INFLATE_LIMIT`] bytes (see there why
/// not the produce bound). The record count and every record's lengths and
/// header count are checked against the (decompressed) record bytes before
/// any record is decoded.
///
/// # Errors
///
/// [`LogError::DecompressedTooLarge`] past that bound,
/// [`LogError::CorruptRecord`] if the batch is corrupt, its record count
/// cannot fit in its records, or the decoder refuses the batch.
pub fn decode_records(batch: &[u8]) -> Result<Vec<Record>, LogError> {
    let header = check_batch(batch)?;
    let size = header.size() as usize;
    let count = header.record_count;
    let mut buf = Bytes::copy_from_slice(batch.get(..size).unwrap_or(batch));
    // The decoder's callback can only return an `anyhow` error; the
    // refusal is kept here to be returned as itself.
    let refusal = std::cell::Cell::new(None);
    let plain_records = |records: &mut Bytes, compression: Compression| {
        let plain = match compression {
            Compression::None => Ok(std::mem::take(records)),
            codec => crate::compression::inflate(
                codec,
                records,
                crate::compression::STORED_BATCH_INFLATE_LIMIT,
            ),
        }
        .and_then(|plain| {
            check_record_count(count, plain.len()).and_then(|()| {
                check_record_frames(&plain, header.base_offset, header.base_timestamp)
            })?;
            Ok(plain)
        });
        match plain {
            Ok(plain) => Ok(plain),
            Err(e) => {
                let message = e.to_string();
                refusal.set(Some(e));
                Err(std::io::Error::other(message).into())
            }
        }
    };
    let decoded = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(plain_records));
    let set = match (decoded, refusal.take()) {
        (Ok(set), _) => set,
        (Err(_), Some(e)) => return Err(e),
        (Err(e), None) => return Err(LogError::corrupt(format!("decoding batch: {e}"))),
    };
    let mut records = set.records;
    if header.is_log_append_time() {
        for r in &mut records {
            r.timestamp = header.max_timestamp;
            r.timestamp_type = WireTimestampType::LogAppend;
        }
    }
    Ok(records)
}

/// Iterates over the well-formed batches at the start of a byte slice,
/// yielding `(position, header)`; stops at the first incomplete or invalid
/// batch, whose position is then in [`BatchScan::valid_bytes`].
pub struct BatchScan<'a> {
    buf: &'a [u8],
    pos: usize,
    verify_crc: bool,
    error: Option<LogError>,
}

impl<'a> BatchScan<'a> {
    /// Scans `buf`; with `verify_crc` each batch's CRC is checked.
    #[must_use]
    pub fn new(buf: &'a [u8], verify_crc: bool) -> Self {
        Self {
            buf,
            pos: 0,
            verify_crc,
            error: None,
        }
    }

    /// Bytes of whole valid batches seen so far.
    #[must_use]
    pub fn valid_bytes(&self) -> usize {
        self.pos
    }

    /// Why the scan stopped early, if it did.
    #[must_use]
    pub fn error(&self) -> Option<&LogError> {
        self.error.as_ref()
    }
}

impl Iterator for BatchScan<'_> {
    type Item = (usize, BatchHeader);

    fn next(&mut self) -> Option<Self::Item> {
        if self.error.is_some() {
            return None;
        }
        let rest = self.buf.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        let result = if self.verify_crc {
            check_batch(rest)
        } else {
            BatchHeader::parse(rest)
                .filter(|h| h.magic == 2 && h.batch_length >= (HEADER_SIZE - LOG_OVERHEAD) as i32)
                .filter(|h| h.size() as usize <= rest.len())
                .ok_or_else(|| LogError::corrupt("incomplete batch"))
        };
        match result {
            Ok(header) => {
                let at = self.pos;
                self.pos += header.size() as usize;
                Some((at, header))
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn control_batch_round_trips() {
        let bytes = encode_control_batch(
            42,
            7,
            3,
            ControlRecord {
                commit: false,
                coordinator_epoch: 9,
            },
            5,
            1000,
        )
        .unwrap();
        let header = check_batch(&bytes).unwrap();
        check!(header.base_offset == 42);
        check!(header.is_control() && header.is_transactional());
        check!(header.producer_id == 7 && header.producer_epoch == 3);
        check!(header.partition_leader_epoch == 5);
        check!(header.record_count == 1);
        let records = decode_records(&bytes).unwrap();
        let r = &records[0];
        let marker =
            ControlRecord::parse(r.key.as_deref().unwrap(), r.value.as_deref().unwrap()).unwrap();
        check!(
            marker
                == ControlRecord {
                    commit: false,
                    coordinator_epoch: 9
                }
        );
    }

    #[test]
    fn corrupt_crc_is_refused() {
        let mut bytes = encode_control_batch(
            0,
            1,
            0,
            ControlRecord {
                commit: true,
                coordinator_epoch: 0,
            },
            0,
            0,
        )
        .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        check!(matches!(
            check_batch(&bytes),
            Err(LogError::CorruptRecord { .. })
        ));
    }

    /// A v2 batch of `records` records (`codec`) with its header's record
    /// count replaced by `claimed` and the CRC fixed up.
    fn batch_claiming(records: usize, codec: Compression, claimed: i32) -> Vec<u8> {
        let records: Vec<Record> = (0..records)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: WireTimestampType::Creation,
                offset: i as i64,
                // Contiguous, so the encoder writes one batch.
                sequence: i as i32,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from_static(b"v")),
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: codec,
            },
        )
        .unwrap();
        let mut bytes = buf.to_vec();
        bytes[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&claimed.to_be_bytes());
        recompute_crc(&mut bytes);
        bytes
    }

    #[test]
    fn record_counts_beyond_the_bytes_left_are_refused_before_decoding() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            check!(decode_records(&batch_claiming(3, codec, 3)).unwrap().len() == 3);
            for claimed in [i32::MAX, 1 << 20] {
                let err = decode_records(&batch_claiming(3, codec, claimed)).unwrap_err();
                check!(
                    err.to_string().contains("cannot fit"),
                    "{codec:?} {claimed}: {err}"
                );
            }
            check!(decode_records(&batch_claiming(3, codec, -1)).is_err());
        }
        check!(check_record_count(10, 70).is_ok());
        check!(check_record_count(11, 70).is_err());
        check!(check_record_count(0, 0).is_ok());
    }

    #[test]
    fn header_counts_beyond_the_record_are_refused_before_decoding() {
        // One record: attributes, timestamp and offset deltas, a null key,
        // a one-byte value, then a header count of about 2^34 (zig-zag
        // varint) with nothing after it.
        let body = [0u8, 0, 0, 0x01, 0x02, b'v', 0xfe, 0xff, 0xff, 0xff, 0x7f];
        let mut area = vec![u8::try_from(body.len() * 2).unwrap()];
        area.extend_from_slice(&body);
        let err = check_record_frames(&area, 0, 0).unwrap_err();
        check!(err.to_string().contains("record 0"), "{err}");
        // The same record with one real header passes, and so does a batch
        // the encoder wrote with headers.
        let mut ok = vec![0u8, 0, 0, 0x01, 0x02, b'v', 0x02, 0x02, b'h', 0x02, b'x'];
        ok.insert(0, u8::try_from(ok.len() * 2).unwrap());
        check!(check_record_frames(&ok, 0, 0).is_ok());
        // Deltas that overflow the batch's base timestamp or offset.
        check!(check_record_frames(&ok, 0, i64::MAX).is_ok());
        let mut late = vec![0u8, 0x02, 0x02, 0x01, 0x02, b'v', 0x00];
        late.insert(0, u8::try_from(late.len() * 2).unwrap());
        check!(check_record_frames(&late, 0, 0).is_ok());
        check!(check_record_frames(&late, 0, i64::MAX).is_err());
        check!(check_record_frames(&late, i64::MAX, 0).is_err());
        let mut record_headers: kafka_protocol::records::Record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: WireTimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        };
        record_headers.headers.insert(
            kafka_protocol::protocol::StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"x")),
        );
        let record = record_headers;
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            std::iter::once(&record),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        let mut bytes = buf.to_vec();
        check!(decode_records(&bytes).unwrap()[0].headers.len() == 1);
        // A header count of 63 where one header fits is refused.
        let at = bytes.len() - 5;
        check!(bytes[at] == 0x02);
        bytes[at] = 0x7e;
        recompute_crc(&mut bytes);
        check!(decode_records(&bytes).is_err());
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_batches_never_panics(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            count in proptest::prelude::any::<i32>(),
        ) {
            let mut bytes = batch_claiming(1, Compression::None, count);
            bytes.truncate(HEADER_SIZE);
            bytes.extend_from_slice(&body);
            let length = i32::try_from(bytes.len() - LOG_OVERHEAD).unwrap();
            bytes[LENGTH..LENGTH + 4].copy_from_slice(&length.to_be_bytes());
            recompute_crc(&mut bytes);
            let _ = decode_records(&bytes);
        }
    }

    #[test]
    fn last_sequence_wraps() {
        let mut h = BatchHeader::parse(&[0u8; HEADER_SIZE]).unwrap();
        h.base_sequence = i32::MAX;
        h.last_offset_delta = 1;
        check!(h.last_sequence() == 0);
    }
}
