//! Builders shared by this crate's tests: partitions, segment metadata, and
//! Kafka v2 record batches encoded by `kafka-protocol` (so the bytes are the
//! real format, CRC-32C included).

use {
    crate::{
        RemoteLogSegmentDetails, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentState, TopicIdPartition,
    },
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
    krabka_ids::LeaderEpoch,
    std::collections::BTreeMap,
    uuid::Uuid,
};

/// The partition most tests use.
pub fn partition() -> TopicIdPartition {
    TopicIdPartition::new(Uuid::from_u128(0xCA), "orders", 7)
}

/// Metadata of a segment `start..=end` of `tp` in `state`, with `epochs`.
pub fn segment_in(
    tp: &TopicIdPartition,
    start: i64,
    end: i64,
    epochs: &[(i32, i64)],
    state: RemoteLogSegmentState,
) -> RemoteLogSegmentMetadata {
    let epochs: BTreeMap<LeaderEpoch, i64> =
        epochs.iter().map(|&(e, o)| (LeaderEpoch(e), o)).collect();
    RemoteLogSegmentMetadata::new(
        RemoteLogSegmentId::generate_new(tp.clone()),
        start,
        end,
        1_000 + end,
        1,
        2_000,
        RemoteLogSegmentDetails::new(i32::try_from(end - start + 1).unwrap() * 10, state, epochs),
    )
    .unwrap()
}

/// A `COPY_SEGMENT_STARTED` segment `start..=end` of [`partition`] in epoch 0.
pub fn segment(start: i64, end: i64) -> RemoteLogSegmentMetadata {
    segment_in(
        &partition(),
        start,
        end,
        &[(0, start)],
        RemoteLogSegmentState::CopySegmentStarted,
    )
}

/// One v2 batch holding offsets `base..base + timestamps.len()`, the n-th
/// record stamped `timestamps[n]`.
pub fn batch(base: i64, timestamps: &[i64], compression: Compression) -> Bytes {
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        .map(|(n, &timestamp)| {
            let offset = base + i64::try_from(n).unwrap();
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset,
                // Sequence tracking the offset keeps the encoder from
                // splitting the records into one batch each.
                sequence: i32::try_from(offset).unwrap(),
                timestamp,
                key: None,
                value: Some(Bytes::from(format!("value-{offset}"))),
                headers: Default::default(),
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

/// A segment `.log`: batches of `sizes[i]` records each, offsets contiguous
/// from `base`, timestamps from `timestamps` (one per record, in offset
/// order). Returns the bytes and each batch's `(position, base, last)`.
pub fn log_of(base: i64, sizes: &[usize], timestamps: &[i64]) -> (Vec<u8>, Vec<(u32, i64, i64)>) {
    let mut log = Vec::new();
    let mut layout = Vec::new();
    let mut offset = base;
    let mut ts = timestamps.iter().copied();
    for &size in sizes {
        let stamps: Vec<i64> = ts.by_ref().take(size).collect();
        assert_eq!(stamps.len(), size, "one timestamp per record");
        let bytes = batch(offset, &stamps, Compression::None);
        let last = offset + i64::try_from(size).unwrap() - 1;
        layout.push((u32::try_from(log.len()).unwrap(), offset, last));
        log.extend_from_slice(&bytes);
        offset = last + 1;
    }
    (log, layout)
}
