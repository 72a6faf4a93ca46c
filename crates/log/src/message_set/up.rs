//! A produced message set becomes one v2 batch (Kafka's up-conversion).
//!
//! As Kafka 3.9's `LogValidator` does: every message, the inner messages of
//! compressed wrappers included, becomes one record of a single batch; the
//! batch keeps the codec of the compressed wrappers (the topic's
//! `compression.type` may then recompress it); magic 0 messages have no
//! timestamp and get -1 (a LogAppendTime topic stamps the batch when it is
//! appended); offsets are the log's to assign, so the message's own offsets
//! are ignored. The batch carries no producer id.

use {
    super::{LOG_APPEND_TIME_BIT, MAGIC_V1, Message, MessageSetError, codec, parse},
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
        Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
};

/// Converts the message set of one produced partition into one v2 batch
/// (base offset 0). Compressed wrappers inflate into at most `budget`
/// bytes in all, which is reduced by what they inflated to (a request's
/// partitions share one budget).
///
/// # Errors
///
/// [`MessageSetError`] for a set that is cut off, fails its CRC, nests
/// compression, names a codec v0/v1 do not have, inflates past the limit,
/// or holds no message.
pub fn to_batch(set: Bytes, budget: &mut usize) -> Result<Bytes, MessageSetError> {
    let mut records = Vec::new();
    let mut compression = Compression::None;
    for message in parse(set)? {
        match message.codec() {
            0 => records.push(record(&message, &message)),
            codec => {
                compression = codec::wire_codec(codec)?;
                let Some(value) = &message.value else {
                    return Err(MessageSetError::Decompress {
                        codec: crate::compression::codec_name(compression),
                        reason: "the wrapper has no value".into(),
                    });
                };
                let inner = codec::inflate(codec, message.magic, value, *budget)?;
                *budget -= inner.len();
                for m in parse(inner)? {
                    if m.codec() != 0 {
                        return Err(MessageSetError::Nested);
                    }
                    records.push(record(&m, &message));
                }
            }
        }
    }
    if records.is_empty() {
        return Err(MessageSetError::Empty);
    }
    for (delta, r) in records.iter_mut().enumerate() {
        r.offset = i64::try_from(delta).unwrap_or(i64::MAX);
        // The encoder keeps records in one batch while offset - sequence is
        // constant, and writes the first record's sequence (none) as the base.
        r.sequence = NO_SEQUENCE.wrapping_add(i32::try_from(delta).unwrap_or(i32::MAX));
    }
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .map_err(|e| MessageSetError::Encode(e.to_string()))?;
    Ok(out.freeze())
}

/// The record of `message`, whose outermost message is `wrapper` (itself
/// when not compressed). A magic 1 wrapper stamped with the log append time
/// gives its time to its inner messages, as Kafka reads them.
fn record(message: &Message, wrapper: &Message) -> Record {
    let timestamp = if wrapper.magic == MAGIC_V1 && wrapper.attributes & LOG_APPEND_TIME_BIT != 0 {
        wrapper.timestamp
    } else if message.magic == MAGIC_V1 {
        message.timestamp
    } else {
        -1
    };
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: NO_SEQUENCE,
        timestamp,
        key: message.key.clone(),
        value: message.value.clone(),
        headers: Default::default(),
    }
}
