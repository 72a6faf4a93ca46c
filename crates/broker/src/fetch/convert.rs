//! What a fetch of an old version may not be sent, applied to one
//! partition's records after they are read.
//!
//! Clients that fetch below v10 predate zstd (KIP-110): Kafka answers
//! `UNSUPPORTED_COMPRESSION_TYPE` for a partition whose topic has
//! `compression.type=zstd`, and so does Krabka. Krabka also never hands such
//! a client a zstd batch a producer chose (`compression.type=producer`): the
//! records are cut before the first one, and a read that starts with one is
//! answered with the same error.
//!
//! Clients of Fetch v0–v3 (served with `krabka.legacy.protocol.enable`)
//! read message format v0 (Fetch v0–v1) or v1 (v2–v3): their batches are
//! down-converted ([`to_message_format`]) when the topic's
//! `message.downconversion.enable` is true, and the partition is answered
//! UNSUPPORTED_VERSION when it is false, as Kafka 3.9 did.
//!
//! This is the one place the fetch path converts records for a request
//! version; it is a separate step so it stays attached wherever the read
//! itself happens.

use {
    bytes::Bytes,
    kafka_protocol::{error::ResponseError, records::Compression},
    krabka_log::{CompressionType, batch::BatchScan},
};

/// The first Fetch version whose clients understand zstd batches.
pub const ZSTD_MIN_FETCH_VERSION: i16 = 10;

/// The first Fetch version whose clients read v2 batches.
pub const V2_MIN_FETCH_VERSION: i16 = 4;

/// The records a Fetch of `version` below [`V2_MIN_FETCH_VERSION`] is sent:
/// `records` (v2 batches read from `fetch_offset`) as messages of the
/// version's magic, at most `max_bytes` of them but at least one.
///
/// # Errors
///
/// UNSUPPORTED_VERSION when `downconversion` (the topic's
/// `message.downconversion.enable`) is false.
pub fn to_message_format(
    version: i16,
    downconversion: bool,
    fetch_offset: i64,
    max_bytes: i32,
    records: &[u8],
) -> Result<Bytes, i16> {
    if !downconversion {
        return Err(ResponseError::UnsupportedVersion.code());
    }
    let limit = usize::try_from(max_bytes).unwrap_or(0);
    let magic = crate::network::legacy::fetch::magic(version);
    Ok(krabka_log::message_set::from_batches(
        records,
        magic,
        fetch_offset,
        limit,
    ))
}

/// The records a Fetch of `version` may carry, out of `records` read from a
/// partition whose topic has `compression_type`.
///
/// # Errors
///
/// The error code to answer the partition with instead.
pub fn for_fetch_version(
    version: i16,
    compression_type: CompressionType,
    records: Bytes,
) -> Result<Bytes, i16> {
    if version >= ZSTD_MIN_FETCH_VERSION {
        return Ok(records);
    }
    let unsupported = ResponseError::UnsupportedCompressionType.code();
    if compression_type == CompressionType::Zstd {
        return Err(unsupported);
    }
    let first_zstd = BatchScan::new(&records, false)
        .find(|(_, h)| h.compression() == Some(Compression::Zstd))
        .map(|(at, _)| at);
    match first_zstd {
        None => Ok(records),
        Some(0) => Err(unsupported),
        Some(at) => Ok(records.slice(..at)),
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        bytes::BytesMut,
        kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType},
    };

    fn batch(offset: i64, compression: Compression) -> Vec<u8> {
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: -1,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(b"value")),
            headers: Default::default(),
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            [&record],
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        buf.to_vec()
    }

    #[test]
    fn old_fetches_get_no_zstd_batch() {
        let gzip = batch(0, Compression::Gzip);
        let mut mixed = gzip.clone();
        mixed.extend(batch(1, Compression::Zstd));
        let mixed = Bytes::from(mixed);
        let producer = CompressionType::Producer;
        check!(for_fetch_version(10, producer, mixed.clone()) == Ok(mixed.clone()));
        check!(for_fetch_version(9, producer, mixed.clone()) == Ok(Bytes::from(gzip)));
        let zstd_first = Bytes::from(batch(1, Compression::Zstd));
        check!(for_fetch_version(9, producer, zstd_first) == Err(76));
        check!(for_fetch_version(9, CompressionType::Zstd, Bytes::new()) == Err(76));
        check!(for_fetch_version(4, producer, Bytes::new()) == Ok(Bytes::new()));
    }
}
