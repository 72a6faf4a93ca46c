//! ListOffsets (latest, earliest, max timestamp, earliest local, latest
//! tiered, earliest pending upload, by timestamp) and OffsetForLeaderEpoch (one epoch, 0, for the
//! life of every partition).
//!
//! Every answer comes from the partition's storage seam
//! ([`PartitionStorage::list_offset`]), which knows where its records are:
//! on a tiered partition a timestamp lookup searches the remote tier first,
//! as Kafka does, and the log start lies in the tier.

use {
    crate::{
        broker::Broker,
        partition::{Isolation, LEADER_EPOCH, OffsetQuery},
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
/// Earliest offset not yet copied to the remote tier (v11+).
pub const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// The question a ListOffsets timestamp asks at `version`, `None` for a
/// special timestamp that version does not know.
fn query(timestamp: i64, version: i16) -> Option<OffsetQuery> {
    match timestamp {
        LATEST => Some(OffsetQuery::Latest),
        EARLIEST => Some(OffsetQuery::Earliest),
        MAX_TIMESTAMP if version >= 7 => Some(OffsetQuery::MaxTimestamp),
        EARLIEST_LOCAL if version >= 8 => Some(OffsetQuery::EarliestLocal),
        LATEST_TIERED if version >= 9 => Some(OffsetQuery::LatestTiered),
        EARLIEST_PENDING_UPLOAD if version >= 11 => Some(OffsetQuery::EarliestPendingUpload),
        ts if ts >= 0 => Some(OffsetQuery::AtOrAfter(ts)),
        _ => None,
    }
}

/// Handles ListOffsets.
pub async fn handle_list_offsets(
    broker: &Arc<Broker>,
    version: i16,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    let isolation = Isolation::from_wire(request.isolation_level);
    for topic in request.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        for p in topic.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            r.timestamp = -1;
            r.offset = -1;
            r.leader_epoch = -1;
            let Some(partition) = broker.partitions.storage(&topic.name.0, p.partition_index)
            else {
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
            let Some(query) = query(p.timestamp, version) else {
                r.error_code = ResponseError::UnsupportedVersion.code();
                t.partitions.push(r);
                continue;
            };
            match partition.list_offset(query, isolation).await {
                Ok(Some(found)) => {
                    r.timestamp = found.timestamp;
                    r.offset = found.offset;
                    // The field exists from v4 on; older versions refuse a non-default.
                    if version >= 4 {
                        r.leader_epoch = found.leader_epoch.0;
                    }
                }
                Ok(None) => {}
                Err(e) => r.error_code = e.kafka_error_code(),
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
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
            match broker.partitions.storage(&topic.topic.0, p.partition) {
                None => r.error_code = broker.missing_partition(&topic.topic.0, p.partition).code(),
                Some(_) if p.current_leader_epoch > LEADER_EPOCH.0 => {
                    r.error_code = ResponseError::UnknownLeaderEpoch.code();
                }
                Some(partition) => {
                    if p.leader_epoch <= LEADER_EPOCH.0 && p.leader_epoch >= 0 {
                        r.leader_epoch = LEADER_EPOCH.0;
                        r.end_offset = partition.offsets().log_end;
                    }
                }
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    response
}
