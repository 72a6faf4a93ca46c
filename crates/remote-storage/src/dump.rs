//! An operator's JSON view of a metadata manager's state.
//!
//! `krabka remote-metadata dump` prints what the broker's
//! [`RemoteLogMetadataManager`] believes about each partition: every remote
//! segment with its lifecycle state, offsets, epochs and size, and the
//! partition's delete state. The dump is built only through the SPI, so it
//! works for any implementation; the caller names the partitions (the
//! broker knows which ones it hosts, and
//! [`InmemoryRemoteLogMetadataManager::partitions`](crate::InmemoryRemoteLogMetadataManager::partitions)
//! lists its own). Ids are in Kafka's text form and states by Kafka's names,
//! so the output reads like Kafka's own tooling.

use {
    crate::{
        error::RemoteStorageError,
        metadata::{RemoteLogSegmentMetadata, TopicIdPartition},
        metadata_manager::RemoteLogMetadataManager,
        storage_manager::kafka_uuid,
    },
    serde::{Deserialize, Serialize},
    std::collections::BTreeMap,
};

/// The state of a metadata manager over a set of partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RlmmCacheDump {
    /// One entry per partition asked for, in the order given.
    pub partitions: Vec<PartitionDump>,
}

/// What the manager holds for one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionDump {
    /// Topic id, Kafka's text form.
    pub topic_id: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Latest partition-delete step (`DELETE_PARTITION_MARKED`, ...), if any.
    pub delete_state: Option<String>,
    /// Sum of the listed segments' sizes.
    pub total_size_bytes: u64,
    /// Every segment not yet `DELETE_SEGMENT_FINISHED`, by start offset.
    pub segments: Vec<SegmentDump>,
}

/// One remote segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentDump {
    /// Segment id, Kafka's text form.
    pub segment_id: String,
    /// Lifecycle state by Kafka's name.
    pub state: String,
    /// First offset (inclusive).
    pub start_offset: i64,
    /// Last offset (inclusive).
    pub end_offset: i64,
    /// Largest record timestamp.
    pub max_timestamp_ms: i64,
    /// Size of the `.log` in bytes.
    pub segment_size_in_bytes: i32,
    /// Leader epoch → its first offset in the segment.
    pub leader_epochs: BTreeMap<i32, i64>,
    /// Broker that recorded the latest event.
    pub broker_id: i32,
    /// Time of the latest event.
    pub event_timestamp_ms: i64,
    /// The storage plugin's custom metadata, hex-encoded.
    pub custom_metadata_hex: Option<String>,
    /// Whether the transaction index is known to be empty.
    pub txn_index_empty: bool,
}

impl From<&RemoteLogSegmentMetadata> for SegmentDump {
    fn from(metadata: &RemoteLogSegmentMetadata) -> Self {
        Self {
            segment_id: kafka_uuid(metadata.remote_log_segment_id().id()),
            state: metadata.state().name().to_owned(),
            start_offset: metadata.start_offset(),
            end_offset: metadata.end_offset(),
            max_timestamp_ms: metadata.max_timestamp_ms(),
            segment_size_in_bytes: metadata.segment_size_in_bytes(),
            leader_epochs: metadata
                .segment_leader_epochs()
                .iter()
                .map(|(epoch, &offset)| (epoch.0, offset))
                .collect(),
            broker_id: metadata.broker_id().0,
            event_timestamp_ms: metadata.event_timestamp_ms(),
            custom_metadata_hex: metadata.custom_metadata().map(|c| hex::encode(c.value())),
            txn_index_empty: metadata.is_txn_idx_empty(),
        }
    }
}

impl PartitionDump {
    /// What `rlmm` holds for `partition`.
    ///
    /// # Errors
    ///
    /// The manager's error from a listing call.
    pub fn collect(
        rlmm: &dyn RemoteLogMetadataManager,
        partition: &TopicIdPartition,
    ) -> Result<Self, RemoteStorageError> {
        let segments: Vec<SegmentDump> = rlmm
            .list_remote_log_segments(partition)?
            .iter()
            .map(SegmentDump::from)
            .collect();
        let delete_state = rlmm
            .remote_partition_delete_metadata(partition)?
            .map(|delete| delete.state().name().to_owned());
        Ok(Self {
            topic_id: kafka_uuid(partition.topic_id()),
            topic: partition.topic().to_owned(),
            partition: partition.partition(),
            delete_state,
            total_size_bytes: segments
                .iter()
                .map(|s| u64::try_from(s.segment_size_in_bytes).unwrap_or(0))
                .sum(),
            segments,
        })
    }
}

impl RlmmCacheDump {
    /// What `rlmm` holds for each of `partitions`.
    ///
    /// # Errors
    ///
    /// The manager's error from a listing call.
    pub fn collect(
        rlmm: &dyn RemoteLogMetadataManager,
        partitions: &[TopicIdPartition],
    ) -> Result<Self, RemoteStorageError> {
        Ok(Self {
            partitions: partitions
                .iter()
                .map(|partition| PartitionDump::collect(rlmm, partition))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The dump as indented JSON, the form `krabka remote-metadata dump`
    /// prints.
    #[must_use]
    pub fn to_json_pretty(&self) -> String {
        // Plain strings, integers and maps with integer keys: serializing
        // these cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{
            CustomMetadata, InmemoryRemoteLogMetadataManager, RemoteLogSegmentMetadataUpdate,
            RemoteLogSegmentState, RemotePartitionDeleteMetadata, RemotePartitionDeleteState,
            test_support::{partition, segment},
        },
        assert2::check,
    };

    #[test]
    fn dump_shows_segments_and_delete_state_and_round_trips() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let tp = partition();
        let first = segment(0, 9);
        let second = segment(10, 19);
        rlmm.add_remote_log_segment_metadata(second.clone())
            .unwrap();
        rlmm.add_remote_log_segment_metadata(first.clone()).unwrap();
        rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate::new(
            first.remote_log_segment_id().clone(),
            5_000,
            Some(CustomMetadata::new(vec![0xAB, 0x01])),
            RemoteLogSegmentState::CopySegmentFinished,
            3,
        ))
        .unwrap();
        let other = TopicIdPartition::new(tp.topic_id(), "orders", 8);
        rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata::new(
            other.clone(),
            RemotePartitionDeleteState::DeletePartitionMarked,
            1,
            1,
        ))
        .unwrap();

        let dump = RlmmCacheDump::collect(&rlmm, &rlmm.partitions().unwrap()).unwrap();
        check!(dump.partitions.len() == 2);
        let p7 = &dump.partitions[0];
        check!(
            (p7.topic.as_str(), p7.partition, p7.topic_id.as_str())
                == ("orders", 7, "AAAAAAAAAAAAAAAAAAAAyg")
        );
        check!(p7.delete_state == None);
        check!(p7.total_size_bytes == 200);
        let states: Vec<&str> = p7.segments.iter().map(|s| s.state.as_str()).collect();
        check!(states == ["COPY_SEGMENT_FINISHED", "COPY_SEGMENT_STARTED"]);
        check!(p7.segments[0].custom_metadata_hex.as_deref() == Some("ab01"));
        check!(p7.segments[0].broker_id == 3);
        check!(p7.segments[0].leader_epochs == BTreeMap::from([(0, 0)]));
        check!(dump.partitions[1].delete_state.as_deref() == Some("DELETE_PARTITION_MARKED"));
        check!(dump.partitions[1].segments.is_empty());

        let json = dump.to_json_pretty();
        check!(json.contains("\"state\": \"COPY_SEGMENT_FINISHED\""));
        let back: RlmmCacheDump = serde_json::from_str(&json).unwrap();
        check!(back == dump);
    }

    #[test]
    fn dump_reports_the_managers_error() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        rlmm.close().unwrap();
        assert2::assert!(let Err(RemoteStorageError::Closed) = RlmmCacheDump::collect(&rlmm, &[partition()]));
    }
}
