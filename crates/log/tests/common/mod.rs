//! Test helpers: batches built with kafka-protocol's record-batch encoder,
//! a manual clock and a temp log.
#![allow(dead_code)]

use {
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
    krabka_log::{Log, LogConfig, ManualClock},
    std::{path::Path, sync::Arc},
    uuid::Uuid,
};

pub const TOPIC: Uuid = Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788);

pub fn record(key: Option<&[u8]>, value: Option<&[u8]>, ts: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: ts,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: Default::default(),
    }
}

/// One batch of `records` (offsets renumbered from 0), optionally idempotent.
pub fn encode(
    mut records: Vec<Record>,
    producer: Option<(i64, i16, i32)>,
    transactional: bool,
    compression: Compression,
) -> Bytes {
    for (i, r) in records.iter_mut().enumerate() {
        r.offset = i as i64;
        if let Some((pid, epoch, seq)) = producer {
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.sequence = seq + i as i32;
        } else {
            // The encoder splits batches where offset - sequence changes;
            // this keeps one batch with base sequence -1.
            r.sequence = i as i32 - 1;
        }
        r.transactional = transactional;
    }
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.freeze()
}

/// A batch of `n` records with values of `size` bytes and timestamp `ts`.
pub fn batch(n: usize, size: usize, ts: i64) -> Bytes {
    let value = vec![b'x'; size];
    encode(
        (0..n).map(|_| record(None, Some(&value), ts)).collect(),
        None,
        false,
        Compression::None,
    )
}

pub fn keyed(key: &str, value: Option<&str>, ts: i64) -> Bytes {
    encode(
        vec![record(Some(key.as_bytes()), value.map(str::as_bytes), ts)],
        None,
        false,
        Compression::None,
    )
}

pub fn open(dir: &Path, config: LogConfig, clock: &Arc<ManualClock>) -> Log {
    Log::open(dir, TOPIC, config, clock.clone()).unwrap()
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        segment_index_bytes: 1024,
        index_interval_bytes: 256,
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// Offsets of all records readable from `start`, following the log.
pub fn read_all(log: &Log, start: i64) -> Vec<(i64, Record)> {
    let mut out = Vec::new();
    let mut next = start;
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, i64::MAX, true).unwrap();
        if info.records.is_empty() {
            break;
        }
        let mut buf = info.records.clone();
        let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).unwrap();
        for set in sets {
            for r in set.records {
                next = r.offset + 1;
                if r.offset >= start {
                    out.push((r.offset, r));
                }
            }
        }
    }
    out
}
