//! What both coordinators share about their internal topics
//! (`__consumer_offsets`, `__transaction_state`): creating the compacted
//! topic on first start, writing records as one v2 batch per append, and
//! reading a partition back in offset order on load.
//!
//! A coordinator's records are ordinary records of an ordinary topic of this
//! broker, appended through the partition's log like a producer's, so they
//! survive a crash exactly as acknowledged produce data does. Two twists come
//! from transactions: the group coordinator writes a transactional offset
//! commit as a *transactional* batch under the producer's id and epoch (Kafka's
//! `AppendOrigin.COORDINATOR`, not sequence-checked), and the transaction
//! coordinator's markers land in `__consumer_offsets` too — so a load yields
//! markers as well as records ([`LoadedEntry`]).
//!
//! Everything here blocks (disk I/O); callers run it on tokio's blocking pool.

use {
    crate::{broker::Broker, partition::LEADER_EPOCH},
    bytes::{Bytes, BytesMut},
    kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    },
    krabka_ids::{ProducerEpoch, ProducerId},
    krabka_log::{
        Log, LogError,
        batch::{BatchScan, ControlRecord, decode_records},
    },
    std::collections::BTreeMap,
};

/// How much of a partition one read pulls while loading.
const LOAD_READ_BYTES: usize = 1 << 20;

/// One record a coordinator writes: Kafka's key and value schemas, already
/// encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRecord {
    /// The encoded record key.
    pub key: Bytes,
    /// The encoded value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// The record timestamp (ms since the epoch) to put in the batch.
    pub timestamp_ms: i64,
}

/// One entry of a coordinator partition, as a load reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedEntry {
    /// A record at `offset`; `producer_id` is set when it belongs to a
    /// transactional batch (pending until that producer's marker).
    Record {
        /// The record's offset.
        offset: i64,
        /// Its key, value and timestamp.
        record: CoordinatorRecord,
        /// The producer of a transactional batch.
        producer_id: Option<ProducerId>,
    },
    /// A transaction marker (control batch) at `offset`.
    Marker {
        /// The marker's offset.
        offset: i64,
        /// The producer whose transaction it ends.
        producer_id: ProducerId,
        /// COMMIT (`true`) or ABORT.
        commit: bool,
    },
}

/// Creates the compacted internal topic `name` with `partitions` partitions
/// and `segment_bytes` segments when it does not exist yet; an existing
/// topic keeps its partition count, as on Kafka.
///
/// # Errors
///
/// A reason when the topic cannot be recorded or its logs opened.
pub fn ensure_topic(
    broker: &Broker,
    name: &str,
    partitions: i32,
    segment_bytes: i64,
) -> Result<(), String> {
    // The topic setting's own lower bound (Kafka clamps nothing, but a
    // smaller value would be refused by the topic config validation).
    let segment_bytes = segment_bytes.max(14).to_string();
    ensure_topic_with(
        broker,
        name,
        partitions,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", segment_bytes.as_str()),
        ],
    )
}

/// Creates the internal topic `name` with `partitions` partitions and the
/// topic settings `configs` when it does not exist yet; an existing topic
/// keeps its partition count and settings.
///
/// # Errors
///
/// A reason when the topic cannot be recorded or its logs opened.
pub fn ensure_topic_with(
    broker: &Broker,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<(), String> {
    if broker.registry.get(name).is_some() {
        return Ok(());
    }
    let configs: BTreeMap<String, String> = configs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    // The broker's own topic: created whatever the partition budget.
    crate::handlers::admin::create_topic_now(broker, name, partitions, configs, None)
        .map_err(|e| format!("creating {name}: {}", e.message))?;
    tracing::info!(partitions, "created {name}");
    Ok(())
}

/// Encodes `records` as one uncompressed v2 batch; a transactional one when
/// `producer` is given.
///
/// # Errors
///
/// The encoder's message.
pub fn encode_batch(
    records: &[CoordinatorRecord],
    producer: Option<(ProducerId, ProducerEpoch)>,
) -> Result<Bytes, String> {
    let (pid, epoch) = producer.map_or((-1, -1), |(p, e)| (p.0, e.0));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: LEADER_EPOCH.0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::try_from(i).unwrap_or(i64::MAX),
            // Kafka's coordinators write base sequence 0 for a producer's
            // batch (never checked) and none (-1) otherwise. The encoder
            // starts a new batch wherever `offset - sequence` changes, so
            // the sequence must step with the offset even when there is
            // none: a record -1 below the next keeps one append one batch
            // (all or nothing), with base sequence -1.
            sequence: if producer.is_some() {
                i32::try_from(i).unwrap_or(i32::MAX)
            } else {
                i32::try_from(i).unwrap_or(i32::MAX).wrapping_sub(1)
            },
            timestamp: r.timestamp_ms,
            key: Some(r.key.clone()),
            value: r.value.clone(),
            headers: Default::default(),
        })
        .collect();
    encode_v2_batch(&records)
}

/// `records` as one uncompressed v2 batch.
///
/// # Errors
///
/// The encoder's refusal, as text.
pub(crate) fn encode_v2_batch(records: &[Record]) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| format!("encoding batch: {e}"))?;
    Ok(buf.freeze())
}

/// Appends `records` to `log` as one batch (transactional under `producer`
/// when given) and returns the offset of the first.
///
/// # Errors
///
/// The log's refusal ([`LogError::InvalidProducerEpoch`] for a fenced
/// producer among them), or an encoding failure as
/// [`LogError::InvalidRecord`].
pub fn append(
    log: &Log,
    records: &[CoordinatorRecord],
    producer: Option<(ProducerId, ProducerEpoch)>,
) -> Result<i64, LogError> {
    let bytes =
        encode_batch(records, producer).map_err(|reason| LogError::InvalidRecord { reason })?;
    Ok(log.append_as_coordinator(bytes, LEADER_EPOCH)?.first_offset)
}

/// Every entry of `log` from its start to its end, in offset order.
///
/// A batch that fails its checks (CRC-32C, framing) is an error, not a
/// gap: skipping it would drop committed state without a word, and the
/// state built from the rest would be served as if whole. The caller
/// refuses the partition instead (`COORDINATOR_NOT_AVAILABLE`).
///
/// # Errors
///
/// The log's error when a read fails; [`LogError::CorruptRecord`] naming
/// the partition directory and offset of a batch that fails its checks.
pub fn read_all(log: &Log) -> Result<Vec<LoadedEntry>, LogError> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    let end = log.log_end_offset();
    while next < end {
        let read = log.read(next, LOAD_READ_BYTES, end, true)?;
        if read.records.is_empty() {
            break;
        }
        let before = next;
        for (at, header) in BatchScan::new(&read.records, false) {
            next = next.max(header.next_offset());
            let Some(batch) = read.records.get(at..) else {
                break;
            };
            let records = decode_records(batch).map_err(|e| LogError::CorruptRecord {
                reason: format!(
                    "{}: batch at offset {} ({} records): {e}",
                    log.dir().display(),
                    header.base_offset,
                    header.record_count
                ),
            })?;
            let producer = header
                .is_transactional()
                .then_some(ProducerId(header.producer_id));
            for r in records {
                if r.offset < before {
                    continue;
                }
                if r.control {
                    let marker = r
                        .key
                        .as_deref()
                        .zip(r.value.as_deref())
                        .and_then(|(k, v)| ControlRecord::parse(k, v));
                    if let Some(marker) = marker {
                        out.push(LoadedEntry::Marker {
                            offset: r.offset,
                            producer_id: ProducerId(r.producer_id),
                            commit: marker.commit,
                        });
                    }
                    continue;
                }
                let Some(key) = r.key else { continue };
                out.push(LoadedEntry::Record {
                    offset: r.offset,
                    record: CoordinatorRecord {
                        key,
                        value: r.value,
                        timestamp_ms: r.timestamp,
                    },
                    producer_id: producer,
                });
            }
        }
        if next <= before {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, krabka_log::ControlMarker};

    fn record(key: &str, value: Option<&str>) -> CoordinatorRecord {
        CoordinatorRecord {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            timestamp_ms: 5,
        }
    }

    #[test]
    fn records_transactional_batches_and_markers_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(
            &dir.path().join("t-0"),
            uuid::Uuid::new_v4(),
            krabka_log::LogConfig::default(),
            std::sync::Arc::new(krabka_log::SystemClock),
        )
        .unwrap();
        check!(append(&log, &[record("a", Some("1")), record("b", None)], None).unwrap() == 0);
        let producer = (ProducerId(7), ProducerEpoch(2));
        // Two unnumbered batches of one producer are both appended.
        check!(append(&log, &[record("c", Some("2"))], Some(producer)).unwrap() == 2);
        check!(append(&log, &[record("d", Some("3"))], Some(producer)).unwrap() == 3);
        check!(log.last_stable_offset() == 2);
        log.append_control_marker(
            ControlMarker {
                producer_id: ProducerId(7),
                producer_epoch: ProducerEpoch(2),
                commit: true,
                coordinator_epoch: 0,
                transaction_version: krabka_ids::TransactionVersion::V0,
            },
            LEADER_EPOCH,
        )
        .unwrap();
        // A fenced epoch is the log's refusal.
        let fenced = append(
            &log,
            &[record("e", Some("4"))],
            Some((ProducerId(7), ProducerEpoch(1))),
        );
        check!(matches!(fenced, Err(LogError::InvalidProducerEpoch { .. })));
        // Every append is one batch, whatever its number of records: a
        // commit of many offsets is all or nothing.
        let read = log.read(0, 1 << 20, 4, true).unwrap();
        let batches: Vec<_> = BatchScan::new(&read.records, true)
            .map(|(_, h)| (h.base_offset, h.record_count, h.base_sequence))
            .collect();
        check!(batches == vec![(0, 2, -1), (2, 1, 0), (3, 1, 0)]);
        let entries = read_all(&log).unwrap();
        check!(
            entries
                == vec![
                    LoadedEntry::Record {
                        offset: 0,
                        record: record("a", Some("1")),
                        producer_id: None
                    },
                    LoadedEntry::Record {
                        offset: 1,
                        record: record("b", None),
                        producer_id: None
                    },
                    LoadedEntry::Record {
                        offset: 2,
                        record: record("c", Some("2")),
                        producer_id: Some(ProducerId(7))
                    },
                    LoadedEntry::Record {
                        offset: 3,
                        record: record("d", Some("3")),
                        producer_id: Some(ProducerId(7))
                    },
                    LoadedEntry::Marker {
                        offset: 4,
                        producer_id: ProducerId(7),
                        commit: true
                    },
                ]
        );
        log.close().unwrap();
    }
}
