//! Record batches: building them for produce, reading them from fetch.
//!
//! Encoding and decoding of the v2 batch format (CRC-32C, varints,
//! compression) is `kafka-protocol`'s [`RecordBatchEncoder`] and
//! [`RecordBatchDecoder`]. What this module adds is what those leave to the
//! client: framing a fetched byte range into whole batches (a fetch may end
//! in a partial batch), the batch's `lastOffsetDelta` (which
//! `BatchDecodeInfo` does not carry), skipping records below the fetch
//! offset, and read_committed filtering with the response's aborted
//! transactions and the control batches, as Kafka's consumer does it.

use {
    crate::ClientError,
    bytes::{Buf, Bytes, BytesMut},
    kafka_protocol::{
        protocol::StrBytes,
        records::{
            Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
            TimestampType,
        },
    },
    krabka_ids::{LeaderEpoch, ProducerEpoch, ProducerId},
    std::collections::{BTreeSet, HashSet},
};

/// Bytes of a v2 batch header before the records.
pub const BATCH_HEADER_SIZE: usize = 61;
/// Bytes of the per-record overhead counted by the batch-size estimate
/// (length, attributes, deltas, key/value lengths, header count: all varints).
const RECORD_OVERHEAD: usize = 21;
/// Offset of `lastOffsetDelta` in a v2 batch.
const LAST_OFFSET_DELTA_AT: usize = 23;
/// Offset of the magic byte in a v2 batch.
const MAGIC_AT: usize = 16;
/// Offset of the attributes in a v2 batch.
const ATTRIBUTES_AT: usize = 21;
/// Offset of the record count in a v2 batch.
const RECORD_COUNT_AT: usize = 57;

/// A record to produce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The key; `None` is a null key.
    pub key: Option<Bytes>,
    /// The value; `None` is a null value (a tombstone on compacted topics).
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// CreateTime in ms since the epoch; `None` means "now" when it is batched.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with just a value.
    #[must_use]
    pub fn value(value: impl Into<Bytes>) -> Self {
        Self {
            value: Some(value.into()),
            ..Self::default()
        }
    }

    /// A record with a key and a value.
    #[must_use]
    pub fn keyed(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Self {
            key: Some(key.into()),
            value: Some(value.into()),
            ..Self::default()
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push((key.into(), value));
        self
    }

    /// The bytes this record adds to a batch, as estimated for `batch.size`.
    #[must_use]
    pub fn estimated_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        RECORD_OVERHEAD
            + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
    }
}

/// Who writes a batch: producer id and epoch, and whether it is transactional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProducer {
    /// Producer id from InitProducerId.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub epoch: ProducerEpoch,
    /// Sequence number of the batch's first record.
    pub base_sequence: i32,
    /// Whether the batch belongs to a transaction.
    pub transactional: bool,
}

impl BatchProducer {
    /// The header fields of a plain (non-idempotent) producer's batch.
    pub const NONE: Self = Self {
        producer_id: ProducerId::NONE,
        epoch: ProducerEpoch::NONE,
        base_sequence: -1,
        transactional: false,
    };
}

/// Encodes `records` as one v2 batch (base offset 0; the broker assigns offsets).
///
/// # Errors
///
/// Returns [`ClientError::InvalidArgument`] for an empty record list and
/// [`ClientError::Protocol`] when the encoder refuses the records.
pub fn encode_batch(
    records: &[ProducerRecord],
    producer: BatchProducer,
    compression: Compression,
    now_ms: i64,
) -> Result<Bytes, ClientError> {
    if records.is_empty() {
        return Err(ClientError::InvalidArgument(
            "a batch needs at least one record".into(),
        ));
    }
    let wire: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| to_wire(r, i, producer, now_ms))
        .collect::<Result<_, _>>()?;
    encode_wire_batch(&wire, compression)
}

/// Encodes records already in `kafka-protocol`'s form as one batch.
pub(crate) fn encode_wire_batch(
    wire: &[Record],
    compression: Compression,
) -> Result<Bytes, ClientError> {
    let capacity = BATCH_HEADER_SIZE
        + wire
            .iter()
            .map(|r| {
                RECORD_OVERHEAD
                    + r.key.as_ref().map_or(0, Bytes::len)
                    + r.value.as_ref().map_or(0, Bytes::len)
            })
            .sum::<usize>();
    let mut buf = BytesMut::with_capacity(capacity);
    RecordBatchEncoder::encode(
        &mut buf,
        wire,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| ClientError::Protocol(format!("encoding a record batch: {e}")))?;
    Ok(buf.freeze())
}

/// One record in the crate's form, at `index` within its batch.
pub(crate) fn to_wire(
    record: &ProducerRecord,
    index: usize,
    producer: BatchProducer,
    now_ms: i64,
) -> Result<Record, ClientError> {
    let offset =
        i64::try_from(index).map_err(|_| ClientError::InvalidArgument("batch too large".into()))?;
    let delta =
        i32::try_from(index).map_err(|_| ClientError::InvalidArgument("batch too large".into()))?;
    Ok(Record {
        transactional: producer.transactional,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: LeaderEpoch::NONE.0,
        producer_id: producer.producer_id.0,
        producer_epoch: producer.epoch.0,
        timestamp_type: TimestampType::Creation,
        offset,
        // The encoder keeps records in one batch while offset - sequence is
        // constant, and writes the first record's sequence as the base.
        sequence: producer.base_sequence.wrapping_add(delta),
        timestamp: record.timestamp.unwrap_or(now_ms),
        key: record.key.clone(),
        value: record.value.clone(),
        headers: record
            .headers
            .iter()
            .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
            .collect(),
    })
}

/// Which records a fetch returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Everything up to the high watermark, aborted transactions included (`read_uncommitted`).
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, without aborted transactions (`read_committed`).
    ReadCommitted,
}

impl IsolationLevel {
    /// The wire code: 0 read_uncommitted, 1 read_committed.
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            Self::ReadUncommitted => 0,
            Self::ReadCommitted => 1,
        }
    }
}

/// One aborted transaction of a fetch response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbortedTransaction {
    /// First offset of the aborted transaction in this partition.
    pub first_offset: i64,
    /// Its producer.
    pub producer_id: ProducerId,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Its offset.
    pub offset: i64,
    /// Its timestamp (ms).
    pub timestamp: i64,
    /// CreateTime or LogAppendTime.
    pub timestamp_type: TimestampType,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers (the decoder keeps one value per header key).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The producer that wrote it (`ProducerId::NONE` for a plain producer).
    pub producer_id: ProducerId,
    /// The leader epoch stamped on its batch.
    pub leader_epoch: LeaderEpoch,
    /// Whether it was written inside a transaction.
    pub transactional: bool,
}

/// The outcome of decoding one partition's fetched bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedRecords {
    /// The records to hand to the application.
    pub records: Vec<ConsumerRecord>,
    /// The offset to fetch next: one past the last complete batch, or `None`
    /// when no complete batch was in the bytes.
    pub next_offset: Option<i64>,
}

/// A control record's type (the key's second field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// Transaction aborted (type 0).
    Abort,
    /// Transaction committed (type 1).
    Commit,
    /// Another control type.
    Other(i16),
}

/// Reads a control record's key: version (i16) then type (i16).
///
/// # Errors
///
/// [`ClientError::Protocol`] for a key shorter than 4 bytes.
pub fn control_type(key: Option<&Bytes>) -> Result<ControlType, ClientError> {
    let mut key = key.map(Bytes::as_ref).unwrap_or_default();
    if key.len() < 4 {
        return Err(ClientError::Protocol(format!(
            "control record key of {} bytes",
            key.len()
        )));
    }
    let _version = key.get_i16();
    Ok(match key.get_i16() {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        other => ControlType::Other(other),
    })
}

/// Decodes the record batches of one partition's fetch answer.
///
/// Records below `fetch_offset` are dropped (a fetch returns whole batches).
/// A trailing partial batch is ignored. Control batches are never returned;
/// under [`IsolationLevel::ReadCommitted`], batches of aborted transactions
/// are dropped too: an aborted transaction's producer is "aborting" from its
/// `first_offset` until its ABORT marker.
///
/// # Errors
///
/// [`ClientError::Protocol`] for a batch that does not decode (bad CRC, bad
/// magic, an impossible record count).
pub fn decode_fetched(
    mut bytes: Bytes,
    fetch_offset: i64,
    isolation: IsolationLevel,
    aborted: &[AbortedTransaction],
) -> Result<DecodedRecords, ClientError> {
    let mut pending_aborts: BTreeSet<AbortedTransaction> = match isolation {
        IsolationLevel::ReadCommitted => aborted.iter().copied().collect(),
        IsolationLevel::ReadUncommitted => BTreeSet::new(),
    };
    let mut aborting: HashSet<ProducerId> = HashSet::new();
    let mut out = DecodedRecords::default();
    while bytes.len() >= 12 {
        let base_offset = i64::from_be_bytes(read_array(&bytes, 0)?);
        let length = i32::from_be_bytes(read_array(&bytes, 8)?);
        let length = usize::try_from(length)
            .map_err(|_| ClientError::Protocol(format!("negative batch length {length}")))?;
        let total = 12 + length;
        if bytes.len() < total {
            break; // a partial batch at the end of the fetch
        }
        let mut batch = bytes.split_to(total);
        if total < BATCH_HEADER_SIZE {
            return Err(ClientError::Protocol(format!(
                "batch of {total} bytes at offset {base_offset}"
            )));
        }
        let magic = batch.get(MAGIC_AT).copied().unwrap_or_default();
        if magic != 2 {
            return Err(ClientError::Protocol(format!(
                "unsupported record batch magic {magic} at offset {base_offset}"
            )));
        }
        let attributes = i16::from_be_bytes(read_array(&batch, ATTRIBUTES_AT)?);
        let last_offset_delta = i32::from_be_bytes(read_array(&batch, LAST_OFFSET_DELTA_AT)?);
        let record_count = i32::from_be_bytes(read_array(&batch, RECORD_COUNT_AT)?);
        check_record_count(record_count, attributes, total, base_offset)?;
        let last_offset = base_offset + i64::from(last_offset_delta);
        out.next_offset = Some(last_offset + 1);
        if last_offset < fetch_offset {
            continue;
        }
        // Producers whose aborted transactions start at or before this batch.
        while let Some(first) = pending_aborts.first().copied() {
            if first.first_offset > last_offset {
                break;
            }
            pending_aborts.pop_first();
            aborting.insert(first.producer_id);
        }
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| {
            ClientError::Protocol(format!("record batch at offset {base_offset}: {e}"))
        })?;
        let Some(first) = set.records.first() else {
            continue;
        };
        let producer_id = ProducerId(first.producer_id);
        if first.control {
            if isolation == IsolationLevel::ReadCommitted
                && control_type(first.key.as_ref())? == ControlType::Abort
            {
                aborting.remove(&producer_id);
            }
            continue;
        }
        if isolation == IsolationLevel::ReadCommitted
            && first.transactional
            && aborting.contains(&producer_id)
        {
            continue;
        }
        out.records.extend(
            set.records
                .into_iter()
                .filter(|r| r.offset >= fetch_offset)
                .map(|r| ConsumerRecord {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    timestamp_type: r.timestamp_type,
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(k, v)| (k.as_str().to_owned(), v))
                        .collect(),
                    producer_id: ProducerId(r.producer_id),
                    leader_epoch: LeaderEpoch(r.partition_leader_epoch),
                    transactional: r.transactional,
                }),
        );
    }
    Ok(out)
}

/// The offset after the last complete batch in `bytes` (base offset plus
/// `lastOffsetDelta` plus one), from the batch headers alone; `None` when
/// `bytes` holds no complete batch.
#[must_use]
pub fn next_fetch_offset(bytes: &[u8]) -> Option<i64> {
    let mut at = 0usize;
    let mut next = None;
    loop {
        let Some(rest) = bytes.get(at..) else {
            return next;
        };
        let (Ok(base), Ok(length)) = (read_array::<8>(rest, 0), read_array::<4>(rest, 8)) else {
            return next;
        };
        let Ok(length) = usize::try_from(i32::from_be_bytes(length)) else {
            return next;
        };
        let total = 12 + length;
        if rest.len() < total || total < BATCH_HEADER_SIZE {
            return next;
        }
        let Ok(delta) = read_array::<4>(rest, LAST_OFFSET_DELTA_AT) else {
            return next;
        };
        next = Some(i64::from_be_bytes(base) + i64::from(i32::from_be_bytes(delta)) + 1);
        at += total;
    }
}

/// Refuses record counts no batch of this size can hold, before the decoder
/// reserves memory for them. An uncompressed record takes at least 7 bytes;
/// a compressed one is bounded by a generous expansion ratio.
fn check_record_count(
    count: i32,
    attributes: i16,
    total: usize,
    base_offset: i64,
) -> Result<(), ClientError> {
    let payload = total.saturating_sub(BATCH_HEADER_SIZE);
    let count_usize = usize::try_from(count)
        .map_err(|_| ClientError::Protocol(format!("negative record count {count}")))?;
    let limit = if attributes & 0x7 == Compression::None as i16 {
        payload / 7
    } else {
        payload.saturating_mul(64).max(64)
    };
    if count_usize > limit {
        return Err(ClientError::Protocol(format!(
            "batch at offset {base_offset} claims {count} records in {payload} bytes"
        )));
    }
    Ok(())
}

fn read_array<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N], ClientError> {
    bytes
        .get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| ClientError::Protocol("truncated record batch header".into()))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    /// Encodes a batch and rewrites its base offset, as a broker would.
    fn batch_at(base_offset: i64, records: &[ProducerRecord], producer: BatchProducer) -> Bytes {
        let mut bytes =
            BytesMut::from(&encode_batch(records, producer, Compression::None, 1_000).unwrap()[..]);
        bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
        bytes.freeze()
    }

    /// A control batch (one marker record) at `offset` for `producer_id`.
    fn marker(offset: i64, producer_id: i64, commit: bool) -> Bytes {
        let mut key = BytesMut::new();
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&i16::from(commit).to_be_bytes());
        let record = Record {
            transactional: true,
            control: true,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 1,
            key: Some(key.freeze()),
            value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
            headers: Default::default(),
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &[record],
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn txn(pid: i64) -> BatchProducer {
        BatchProducer {
            producer_id: ProducerId(pid),
            epoch: ProducerEpoch(0),
            base_sequence: 0,
            transactional: true,
        }
    }

    fn values(decoded: &DecodedRecords) -> Vec<&[u8]> {
        decoded
            .records
            .iter()
            .map(|r| r.value.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn round_trip_with_keys_headers_and_nulls() {
        let records = vec![
            ProducerRecord::keyed("k1", "v1")
                .header("h", Some(Bytes::from_static(b"x")))
                .header("n", None),
            ProducerRecord {
                key: None,
                value: None,
                headers: vec![],
                timestamp: Some(5),
            },
            ProducerRecord::value("v3"),
        ];
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = encode_batch(&records, BatchProducer::NONE, compression, 42).unwrap();
            let decoded = decode_fetched(batch, 0, IsolationLevel::ReadUncommitted, &[]).unwrap();
            check!(decoded.next_offset == Some(3));
            check!(decoded.records.len() == 3);
            check!(decoded.records[0].key.as_deref() == Some(&b"k1"[..]));
            check!(
                decoded.records[0].headers
                    == vec![
                        ("h".to_owned(), Some(Bytes::from_static(b"x"))),
                        ("n".to_owned(), None)
                    ]
            );
            check!(decoded.records[0].timestamp == 42);
            check!(decoded.records[1].key.is_none());
            check!(decoded.records[1].value.is_none());
            check!(decoded.records[1].timestamp == 5);
            check!(decoded.records[2].offset == 2);
        }
    }

    #[test]
    fn idempotent_batch_is_one_batch_with_base_sequence() {
        let records: Vec<_> = (0..10)
            .map(|i| ProducerRecord::value(format!("v{i}")))
            .collect();
        let producer = BatchProducer {
            producer_id: ProducerId(7),
            epoch: ProducerEpoch(3),
            base_sequence: 100,
            transactional: false,
        };
        let mut batch = encode_batch(&records, producer, Compression::None, 0).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut batch.clone()).unwrap();
        check!(info.len() == 1);
        check!(info[0].base_sequence == 100);
        check!(info[0].producer_id == 7);
        check!(info[0].producer_epoch == 3);
        check!(info[0].record_count == 10);
        // A plain producer's batch is one batch too, with base sequence -1.
        batch = encode_batch(&records, BatchProducer::NONE, Compression::None, 0).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut batch).unwrap();
        check!(info.len() == 1);
        check!(info[0].base_sequence == -1);
    }

    #[test]
    fn partial_trailing_batch_and_fetch_offset() {
        let a = batch_at(
            0,
            &[ProducerRecord::value("a0"), ProducerRecord::value("a1")],
            BatchProducer::NONE,
        );
        let b = batch_at(2, &[ProducerRecord::value("b2")], BatchProducer::NONE);
        let mut bytes = BytesMut::new();
        bytes.extend_from_slice(&a);
        bytes.extend_from_slice(&b[..b.len() - 3]);
        let bytes = bytes.freeze();
        check!(next_fetch_offset(&bytes) == Some(2));
        check!(next_fetch_offset(&bytes[..20]).is_none());
        let decoded = decode_fetched(bytes, 1, IsolationLevel::ReadUncommitted, &[]).unwrap();
        check!(values(&decoded) == vec![&b"a1"[..]]);
        check!(decoded.next_offset == Some(2));
    }

    #[test]
    fn read_committed_drops_aborted_transactions() {
        // offsets: 0-1 txn pid 1 (aborted), 2-3 txn pid 2 (committed), 4 abort marker pid 1,
        // 5 commit marker pid 2, 6 plain, 7 txn pid 1 (a new, committed transaction), 8 commit pid 1.
        let parts = [
            batch_at(
                0,
                &[ProducerRecord::value("x0"), ProducerRecord::value("x1")],
                txn(1),
            ),
            batch_at(
                2,
                &[ProducerRecord::value("c2"), ProducerRecord::value("c3")],
                txn(2),
            ),
            marker(4, 1, false),
            marker(5, 2, true),
            batch_at(6, &[ProducerRecord::value("p6")], BatchProducer::NONE),
            batch_at(7, &[ProducerRecord::value("c7")], txn(1)),
            marker(8, 1, true),
        ];
        let mut bytes = BytesMut::new();
        for p in &parts {
            bytes.extend_from_slice(p);
        }
        let bytes = bytes.freeze();
        let aborted = [AbortedTransaction {
            first_offset: 0,
            producer_id: ProducerId(1),
        }];
        let committed =
            decode_fetched(bytes.clone(), 0, IsolationLevel::ReadCommitted, &aborted).unwrap();
        check!(values(&committed) == vec![&b"c2"[..], b"c3", b"p6", b"c7"]);
        check!(committed.next_offset == Some(9));
        let uncommitted =
            decode_fetched(bytes, 0, IsolationLevel::ReadUncommitted, &aborted).unwrap();
        check!(values(&uncommitted) == vec![&b"x0"[..], b"x1", b"c2", b"c3", b"p6", b"c7"]);
    }

    #[test]
    fn corrupt_batches_are_errors() {
        let batch = batch_at(0, &[ProducerRecord::value("abc")], BatchProducer::NONE);
        let mut corrupt = BytesMut::from(&batch[..]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        check!(decode_fetched(corrupt.freeze(), 0, IsolationLevel::ReadUncommitted, &[]).is_err());
        let mut bad_count = BytesMut::from(&batch[..]);
        bad_count[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        check!(
            decode_fetched(bad_count.freeze(), 0, IsolationLevel::ReadUncommitted, &[]).is_err()
        );
    }

    #[test]
    fn control_keys() {
        check!(
            control_type(Some(&Bytes::from_static(&[0, 0, 0, 1]))).unwrap() == ControlType::Commit
        );
        check!(
            control_type(Some(&Bytes::from_static(&[0, 0, 0, 0]))).unwrap() == ControlType::Abort
        );
        check!(control_type(None).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_fetch_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), offset in 0i64..10) {
            let _ = decode_fetched(Bytes::from(bytes), offset, IsolationLevel::ReadCommitted, &[]);
        }

        #[test]
        fn values_round_trip(values in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)), 1..20)) {
            let records: Vec<_> = values.iter().map(|v| ProducerRecord { value: v.clone().map(Bytes::from), ..Default::default() }).collect();
            let batch = encode_batch(&records, BatchProducer::NONE, Compression::Lz4, 0).unwrap();
            let decoded = decode_fetched(batch, 0, IsolationLevel::ReadUncommitted, &[]).unwrap();
            let got: Vec<_> = decoded.records.into_iter().map(|r| r.value.map(|b| b.to_vec())).collect();
            prop_assert_eq!(got, values);
        }
    }
}
