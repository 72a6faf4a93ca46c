//! ListOffsets (latest, earliest, max timestamp, by timestamp) and
//! OffsetForLeaderEpoch (one epoch, 0, for the life of every partition).
//!
//! On a tiered partition a timestamp lookup (and -3, max timestamp) first
//! searches the remote tier, as Kafka does, then the local log.

use {
    crate::{
        broker::Broker,
        fetch::READ_COMMITTED,
        partition::{LEADER_EPOCH, Partition},
        remote::read::TimestampQuery,
    },
    kafka_protocol::{
        error::ResponseError,
        messages::{
            ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse},
            offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult},
        },
    },
    krabka_log::TimestampOffset,
    std::sync::Arc,
};

/// ListOffsets special timestamps.
pub const LATEST: i64 = -1;
/// Earliest offset.
pub const EARLIEST: i64 = -2;
/// Offset of the record with the largest timestamp (v7+).
pub const MAX_TIMESTAMP: i64 = -3;
/// Earliest offset still on local disk (v8+).
pub const EARLIEST_LOCAL: i64 = -4;
/// Latest offset copied to the remote tier (v9+).
pub const LATEST_TIERED: i64 = -5;

/// Handles ListOffsets.
pub async fn handle_list_offsets(
    broker: &Arc<Broker>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let committed = request.isolation_level == READ_COMMITTED;
    for topic in request.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        for p in topic.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            r.timestamp = -1;
            r.offset = -1;
            r.leader_epoch = -1;
            let Some(partition) = broker.partitions.get(&topic.name.0, p.partition_index) else {
                r.error_code = broker
                    .missing_partition(&topic.name.0, p.partition_index)
                    .code();
                t.partitions.push(r);
                continue;
            };
            if p.current_leader_epoch > LEADER_EPOCH.0 {
                r.error_code = ResponseError::UnknownLeaderEpoch.code();
                t.partitions.push(r);
                continue;
            }
            let log = Arc::clone(&partition.log);
            let ts = p.timestamp;
            // Tiered partitions: the log start and the latest tiered offset
            // come from the remote log manager (KIP-405, KIP-1005).
            // Until its remote metadata is loaded a tiered partition cannot
            // name its log start (LEADER_NOT_AVAILABLE: retry).
            let pending = crate::remote::fetch::remote_pending(broker, &partition);
            let remote = broker.remote.get().map(|rlm| {
                (
                    rlm.log_start_offset(&partition),
                    rlm.highest_tiered_offset(&partition).unwrap_or(-1),
                    !pending,
                )
            });
            let remote_found = match ts {
                MAX_TIMESTAMP if version >= 7 => {
                    remote_lookup(broker, &partition, TimestampQuery::Max).await
                }
                ts if ts >= 0 => {
                    remote_lookup(broker, &partition, TimestampQuery::AtOrAfter(ts)).await
                }
                _ => Ok(None),
            };
            let found = tokio::task::spawn_blocking(move || -> Result<(i64, i64, i32), i16> {
                let epoch = LEADER_EPOCH.0;
                match ts {
                    LATEST => Ok((
                        -1,
                        if committed {
                            log.last_stable_offset()
                        } else {
                            log.log_end_offset()
                        },
                        epoch,
                    )),
                    EARLIEST => match remote {
                        _ if pending => Err(ResponseError::LeaderNotAvailable.code()),
                        Some((_, _, false)) => Err(ResponseError::LeaderNotAvailable.code()),
                        Some((start, _, true)) => Ok((-1, start, epoch)),
                        None => Ok((-1, log.log_start_offset(), epoch)),
                    },
                    EARLIEST_LOCAL if version >= 8 => Ok((-1, log.log_start_offset(), epoch)),
                    LATEST_TIERED if version >= 9 => match remote {
                        Some((_, tiered, _)) if tiered >= 0 => Ok((-1, tiered, epoch)),
                        _ => Ok((-1, -1, -1)),
                    },
                    MAX_TIMESTAMP if version >= 7 => {
                        let remote = remote_found?;
                        match log.max_timestamp_offset() {
                            // On a tie the remote record, the earlier one, wins.
                            Ok(Some(t)) if remote.is_none_or(|r| t.timestamp > r.timestamp) => {
                                Ok((t.timestamp, t.offset, t.leader_epoch.0))
                            }
                            Ok(_) => Ok(remote.map_or((-1, -1, -1), answer)),
                            Err(e) => Err(e.kafka_error_code()),
                        }
                    }
                    ts if ts < 0 => Err(ResponseError::UnsupportedVersion.code()),
                    ts => match remote_found? {
                        Some(t) => Ok(answer(t)),
                        None => match log.offset_for_timestamp(ts) {
                            Ok(Some(t)) => Ok(answer(t)),
                            Ok(None) => Ok((-1, -1, -1)),
                            Err(e) => Err(e.kafka_error_code()),
                        },
                    },
                }
            })
            .await
            .unwrap_or(Err(ResponseError::UnknownServerError.code()));
            match found {
                Ok((timestamp, offset, epoch)) => {
                    r.timestamp = timestamp;
                    r.offset = offset;
                    // The field exists from v4 on; older versions refuse a non-default.
                    if version >= 4 {
                        r.leader_epoch = epoch;
                    }
                }
                Err(code) => r.error_code = code,
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}

fn answer(t: TimestampOffset) -> (i64, i64, i32) {
    (t.timestamp, t.offset, t.leader_epoch.0)
}

/// The remote tier's part of a timestamp lookup: `None` for a partition that
/// is not tiered or has nothing remote that matches;
/// `LEADER_NOT_AVAILABLE` (retriable) while its remote metadata loads,
/// `KAFKA_STORAGE_ERROR` (retriable) when the tier fails.
async fn remote_lookup(
    broker: &Broker,
    partition: &Arc<Partition>,
    query: TimestampQuery,
) -> Result<Option<TimestampOffset>, i16> {
    if crate::remote::fetch::remote_pending(broker, partition) {
        return Err(ResponseError::LeaderNotAvailable.code());
    }
    let Some(rlm) = broker.remote.get() else {
        return Ok(None);
    };
    if !crate::remote::RemoteLogManager::is_tiered(broker, partition) {
        return Ok(None);
    }
    rlm.find_offset(partition, query).await.map_err(|e| {
        tracing::warn!(partition = ?partition, error = %e, "remote timestamp lookup failed");
        ResponseError::KafkaStorageError.code()
    })
}

/// Handles OffsetForLeaderEpoch: epoch 0 ends at the log end; a later epoch
/// is unknown.
#[must_use]
pub fn handle_offset_for_leader_epoch(
    broker: &Broker,
    request: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    for topic in &request.topics {
        let mut t = OffsetForLeaderTopicResult::default();
        t.topic = topic.topic.clone();
        for p in &topic.partitions {
            let mut r = EpochEndOffset::default();
            r.partition = p.partition;
            r.leader_epoch = -1;
            r.end_offset = -1;
            match broker.partitions.get(&topic.topic.0, p.partition) {
                None => r.error_code = broker.missing_partition(&topic.topic.0, p.partition).code(),
                Some(_) if p.current_leader_epoch > LEADER_EPOCH.0 => {
                    r.error_code = ResponseError::UnknownLeaderEpoch.code();
                }
                Some(partition) => {
                    if p.leader_epoch <= LEADER_EPOCH.0 && p.leader_epoch >= 0 {
                        r.leader_epoch = LEADER_EPOCH.0;
                        r.end_offset = partition.log.log_end_offset();
                    }
                }
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}
