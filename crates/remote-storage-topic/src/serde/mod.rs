//! The event codec of `__remote_log_metadata`, byte for byte Kafka's
//! `RemoteLogMetadataSerde`.
//!
//! Each record value is the frame Kafka's `BytesApiMessageSerde` writes — an
//! unsigned-varint frame version (always `1`), the record's api key and its
//! version — followed by the record in Kafka's generated flexible encoding.
//! The four records and their api keys are those of Kafka's
//! `storage/src/main/resources/message/*.json`:
//!
//! | api key | record | data-model type |
//! | --- | --- | --- |
//! | 0 | `RemoteLogSegmentMetadataRecord` | [`RemoteLogSegmentMetadata`] |
//! | 1 | `RemoteLogSegmentMetadataUpdateRecord` | [`RemoteLogSegmentMetadataUpdate`] |
//! | 2 | `RemotePartitionDeleteMetadataRecord` | [`RemotePartitionDeleteMetadata`] |
//! | 3 | `RemoteLogSegmentMetadataSnapshotRecord` | [`RemoteLogSegmentMetadataSnapshot`] |
//!
//! Krabka writes version 0 of each, as Kafka 4.0 does. It reads versions 0
//! and 1; the version-1 additions (`BrokerLeaderEpoch`, `EndOffset`) are
//! tagged fields the data model has no place for, so they are skipped like
//! any unknown tagged field. Decoding goes straight to the validated data
//! model, so a record that decodes is one the manager can apply.

pub(crate) mod wire;

use {
    self::wire::{Reader, Writer},
    crate::error::MetadataLogError,
    bytes::Bytes,
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        CustomMetadata, RemoteLogSegmentDetails, RemoteLogSegmentId, RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
        RemotePartitionDeleteState, TopicIdPartition,
    },
    std::collections::BTreeMap,
    uuid::Uuid,
};

/// The frame version Kafka's `AbstractApiMessageSerde` writes.
const FRAME_VERSION: u32 = 1;
/// The record version Krabka writes (Kafka 4.0's).
const WRITE_VERSION: u32 = 0;
/// The highest record version Krabka reads.
const MAX_READ_VERSION: u32 = 1;

const SEGMENT_API_KEY: u32 = 0;
const SEGMENT_UPDATE_API_KEY: u32 = 1;
const PARTITION_DELETE_API_KEY: u32 = 2;
const SEGMENT_SNAPSHOT_API_KEY: u32 = 3;

/// `TxnIndexEmpty`: tag 0 of the segment and snapshot records.
const TXN_INDEX_EMPTY_TAG: u32 = 0;

/// Smallest encoding of a `SegmentLeaderEpochEntry`: epoch, offset and an
/// empty tagged-field section.
const MIN_EPOCH_ENTRY_SIZE: usize = 4 + 8 + 1;

/// One event of the metadata topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteLogMetadata {
    /// A new segment (api key 0).
    Segment(RemoteLogSegmentMetadata),
    /// A segment's state change (api key 1).
    SegmentUpdate(RemoteLogSegmentMetadataUpdate),
    /// A step of a partition's deletion (api key 2).
    PartitionDelete(RemotePartitionDeleteMetadata),
    /// A segment's full state without its partition (api key 3), as Kafka's
    /// snapshot files held it.
    SegmentSnapshot(RemoteLogSegmentMetadataSnapshot),
}

impl RemoteLogMetadata {
    /// The user partition the event is about (`None` for a snapshot record,
    /// which does not carry one).
    #[must_use]
    pub fn topic_id_partition(&self) -> Option<&TopicIdPartition> {
        match self {
            Self::Segment(metadata) => Some(metadata.topic_id_partition()),
            Self::SegmentUpdate(update) => Some(update.topic_id_partition()),
            Self::PartitionDelete(delete) => Some(delete.topic_id_partition()),
            Self::SegmentSnapshot(_) => None,
        }
    }
}

/// A segment's state without its partition (Kafka's
/// `RemoteLogSegmentMetadataSnapshot`): the partition is implied by where the
/// snapshot is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLogSegmentMetadataSnapshot {
    segment_id: Uuid,
    start_offset: i64,
    end_offset: i64,
    max_timestamp_ms: i64,
    broker_id: i32,
    event_timestamp_ms: i64,
    details: RemoteLogSegmentDetails,
}

impl RemoteLogSegmentMetadataSnapshot {
    /// The snapshot of `metadata` (Kafka's `RemoteLogSegmentMetadataSnapshot.create`).
    #[must_use]
    pub fn from_metadata(metadata: &RemoteLogSegmentMetadata) -> Self {
        Self {
            segment_id: metadata.remote_log_segment_id().id(),
            start_offset: metadata.start_offset(),
            end_offset: metadata.end_offset(),
            max_timestamp_ms: metadata.max_timestamp_ms(),
            broker_id: metadata.broker_id().0,
            event_timestamp_ms: metadata.event_timestamp_ms(),
            details: metadata.details().clone(),
        }
    }

    /// The segment's metadata, placing it in `topic_id_partition`.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Invalid`] if the values break an invariant of
    /// [`RemoteLogSegmentMetadata::new`].
    pub fn to_metadata(
        &self,
        topic_id_partition: TopicIdPartition,
    ) -> Result<RemoteLogSegmentMetadata, MetadataLogError> {
        RemoteLogSegmentMetadata::new(
            RemoteLogSegmentId::new(topic_id_partition, self.segment_id),
            self.start_offset,
            self.end_offset,
            self.max_timestamp_ms,
            self.broker_id,
            self.event_timestamp_ms,
            self.details.clone(),
        )
        .map_err(|error| MetadataLogError::Invalid(error.to_string()))
    }

    /// The segment's UUID.
    #[must_use]
    pub fn segment_id(&self) -> Uuid {
        self.segment_id
    }

    /// The lifecycle state.
    #[must_use]
    pub fn state(&self) -> RemoteLogSegmentState {
        self.details.state()
    }
}

/// Kafka's `RemoteLogMetadataSerde`: turns [`RemoteLogMetadata`] into record
/// values and back.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoteLogMetadataSerde;

impl RemoteLogMetadataSerde {
    /// The record value Kafka's serde writes for `event`.
    #[must_use]
    pub fn serialize(event: &RemoteLogMetadata) -> Bytes {
        let mut w = Writer::default();
        w.unsigned_varint(FRAME_VERSION);
        match event {
            RemoteLogMetadata::Segment(metadata) => {
                w.unsigned_varint(SEGMENT_API_KEY);
                w.unsigned_varint(WRITE_VERSION);
                write_segment_id(&mut w, metadata.remote_log_segment_id());
                w.i64(metadata.start_offset());
                w.i64(metadata.end_offset());
                w.i32(metadata.broker_id().0);
                w.i64(metadata.max_timestamp_ms());
                w.i64(metadata.event_timestamp_ms());
                write_segment_body(&mut w, metadata.details());
            }
            RemoteLogMetadata::SegmentUpdate(update) => {
                w.unsigned_varint(SEGMENT_UPDATE_API_KEY);
                w.unsigned_varint(WRITE_VERSION);
                write_segment_id(&mut w, update.remote_log_segment_id());
                w.i32(update.broker_id().0);
                w.i64(update.event_timestamp_ms());
                w.compact_nullable_bytes(update.custom_metadata().map(CustomMetadata::value));
                w.i8(update.state().id());
                w.no_tagged_fields();
            }
            RemoteLogMetadata::PartitionDelete(delete) => {
                w.unsigned_varint(PARTITION_DELETE_API_KEY);
                w.unsigned_varint(WRITE_VERSION);
                write_topic_id_partition(&mut w, delete.topic_id_partition());
                w.i32(delete.broker_id().0);
                w.i64(delete.event_timestamp_ms());
                w.i8(delete.state().id());
                w.no_tagged_fields();
            }
            RemoteLogMetadata::SegmentSnapshot(snapshot) => {
                w.unsigned_varint(SEGMENT_SNAPSHOT_API_KEY);
                w.unsigned_varint(WRITE_VERSION);
                w.uuid(snapshot.segment_id);
                w.i64(snapshot.start_offset);
                w.i64(snapshot.end_offset);
                w.i32(snapshot.broker_id);
                w.i64(snapshot.max_timestamp_ms);
                w.i64(snapshot.event_timestamp_ms);
                write_segment_body(&mut w, &snapshot.details);
            }
        }
        w.into_inner().freeze()
    }

    /// The event a record value holds.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Decode`] if the bytes are not a complete record of
    /// a known api key and version (truncated, trailing bytes, overlong
    /// varint, null where Kafka's schema forbids it, invalid UTF-8), and
    /// [`MetadataLogError::Invalid`] if they decode to values the data model
    /// refuses (unknown state id, end offset before start, no leader epochs).
    pub fn deserialize(value: &[u8]) -> Result<RemoteLogMetadata, MetadataLogError> {
        let mut r = Reader::new(value);
        let frame_version = r.unsigned_varint("frame version")?;
        if frame_version != FRAME_VERSION {
            return Err(MetadataLogError::Decode(format!(
                "unsupported frame version {frame_version}"
            )));
        }
        let api_key = r.unsigned_varint("api key")?;
        let version = r.unsigned_varint("version")?;
        if version > MAX_READ_VERSION {
            return Err(MetadataLogError::Decode(format!(
                "unsupported version {version} of api key {api_key}"
            )));
        }
        let event = match api_key {
            SEGMENT_API_KEY => RemoteLogMetadata::Segment(read_segment(&mut r)?),
            SEGMENT_UPDATE_API_KEY => RemoteLogMetadata::SegmentUpdate(read_update(&mut r)?),
            PARTITION_DELETE_API_KEY => RemoteLogMetadata::PartitionDelete(read_delete(&mut r)?),
            SEGMENT_SNAPSHOT_API_KEY => RemoteLogMetadata::SegmentSnapshot(read_snapshot(&mut r)?),
            other => {
                return Err(MetadataLogError::Decode(format!("unknown api key {other}")));
            }
        };
        r.finish("record")?;
        Ok(event)
    }
}

fn write_topic_id_partition(w: &mut Writer, partition: &TopicIdPartition) {
    w.compact_string(partition.topic());
    w.uuid(partition.topic_id());
    w.i32(partition.partition());
    w.no_tagged_fields();
}

fn write_segment_id(w: &mut Writer, id: &RemoteLogSegmentId) {
    write_topic_id_partition(w, id.topic_id_partition());
    w.uuid(id.id());
    w.no_tagged_fields();
}

/// The fields the segment and snapshot records share after their
/// timestamps: leader epochs, size, custom metadata, state, and the tagged
/// `TxnIndexEmpty`, written only when true (it defaults to false).
fn write_segment_body(w: &mut Writer, details: &RemoteLogSegmentDetails) {
    let epochs = details.segment_leader_epochs();
    w.compact_array_len(epochs.len());
    for (epoch, &offset) in epochs {
        w.i32(epoch.0);
        w.i64(offset);
        w.no_tagged_fields();
    }
    w.i32(details.segment_size_in_bytes());
    w.compact_nullable_bytes(details.custom_metadata().map(CustomMetadata::value));
    w.i8(details.state().id());
    if details.is_txn_idx_empty() {
        w.unsigned_varint(1);
        w.unsigned_varint(TXN_INDEX_EMPTY_TAG);
        w.unsigned_varint(1);
        w.i8(1);
    } else {
        w.no_tagged_fields();
    }
}

fn skip_unknown_tags(what: &str, r: &mut Reader<'_>) -> Result<(), MetadataLogError> {
    r.tagged_fields(what, |_, _| Ok(false))
}

fn read_topic_id_partition(r: &mut Reader<'_>) -> Result<TopicIdPartition, MetadataLogError> {
    let topic = r.compact_string("topic name")?;
    let topic_id = r.uuid("topic id")?;
    let partition = r.i32("partition")?;
    skip_unknown_tags("topic partition tagged fields", r)?;
    Ok(TopicIdPartition::new(topic_id, topic, partition))
}

fn read_segment_id(r: &mut Reader<'_>) -> Result<RemoteLogSegmentId, MetadataLogError> {
    let partition = read_topic_id_partition(r)?;
    let id = r.uuid("segment id")?;
    skip_unknown_tags("segment id tagged fields", r)?;
    Ok(RemoteLogSegmentId::new(partition, id))
}

fn segment_state(id: i8) -> Result<RemoteLogSegmentState, MetadataLogError> {
    RemoteLogSegmentState::from_id(id)
        .ok_or_else(|| MetadataLogError::Invalid(format!("unknown remote log segment state {id}")))
}

/// The common tail of the segment and snapshot records (see
/// [`write_segment_body`]).
fn read_segment_body(r: &mut Reader<'_>) -> Result<RemoteLogSegmentDetails, MetadataLogError> {
    let count = r.compact_array_len("segment leader epochs", MIN_EPOCH_ENTRY_SIZE)?;
    let mut epochs = BTreeMap::new();
    for _ in 0..count {
        let epoch = r.i32("leader epoch")?;
        let offset = r.i64("leader epoch start offset")?;
        skip_unknown_tags("leader epoch tagged fields", r)?;
        if epochs.insert(LeaderEpoch(epoch), offset).is_some() {
            return Err(MetadataLogError::Invalid(format!(
                "leader epoch {epoch} listed twice"
            )));
        }
    }
    let size = r.i32("segment size")?;
    let custom = r
        .compact_nullable_bytes("custom metadata")?
        .map(|bytes| CustomMetadata::new(Bytes::copy_from_slice(bytes)));
    let state = segment_state(r.i8("segment state")?)?;
    let mut txn_index_empty = false;
    r.tagged_fields("segment tagged fields", |tag, field| {
        if tag == TXN_INDEX_EMPTY_TAG {
            txn_index_empty = field.bool("txn index empty")?;
            Ok(true)
        } else {
            Ok(false)
        }
    })?;
    Ok(RemoteLogSegmentDetails::new(size, state, epochs)
        .with_custom_metadata(custom)
        .with_txn_idx_empty(txn_index_empty))
}

fn read_segment(r: &mut Reader<'_>) -> Result<RemoteLogSegmentMetadata, MetadataLogError> {
    let id = read_segment_id(r)?;
    let start_offset = r.i64("start offset")?;
    let end_offset = r.i64("end offset")?;
    let broker_id = r.i32("broker id")?;
    let max_timestamp_ms = r.i64("max timestamp")?;
    let event_timestamp_ms = r.i64("event timestamp")?;
    let details = read_segment_body(r)?;
    RemoteLogSegmentMetadata::new(
        id,
        start_offset,
        end_offset,
        max_timestamp_ms,
        broker_id,
        event_timestamp_ms,
        details,
    )
    .map_err(|error| MetadataLogError::Invalid(error.to_string()))
}

fn read_update(r: &mut Reader<'_>) -> Result<RemoteLogSegmentMetadataUpdate, MetadataLogError> {
    let id = read_segment_id(r)?;
    let broker_id = r.i32("broker id")?;
    let event_timestamp_ms = r.i64("event timestamp")?;
    let custom = r
        .compact_nullable_bytes("custom metadata")?
        .map(|bytes| CustomMetadata::new(Bytes::copy_from_slice(bytes)));
    let state = segment_state(r.i8("segment state")?)?;
    skip_unknown_tags("segment update tagged fields", r)?;
    Ok(RemoteLogSegmentMetadataUpdate::new(
        id,
        event_timestamp_ms,
        custom,
        state,
        broker_id,
    ))
}

fn read_delete(r: &mut Reader<'_>) -> Result<RemotePartitionDeleteMetadata, MetadataLogError> {
    let partition = read_topic_id_partition(r)?;
    let broker_id = r.i32("broker id")?;
    let event_timestamp_ms = r.i64("event timestamp")?;
    let state_id = r.i8("partition delete state")?;
    let state = RemotePartitionDeleteState::from_id(state_id).ok_or_else(|| {
        MetadataLogError::Invalid(format!("unknown remote partition delete state {state_id}"))
    })?;
    skip_unknown_tags("partition delete tagged fields", r)?;
    Ok(RemotePartitionDeleteMetadata::new(
        partition,
        state,
        event_timestamp_ms,
        broker_id,
    ))
}

fn read_snapshot(r: &mut Reader<'_>) -> Result<RemoteLogSegmentMetadataSnapshot, MetadataLogError> {
    let segment_id = r.uuid("segment id")?;
    let start_offset = r.i64("start offset")?;
    let end_offset = r.i64("end offset")?;
    let broker_id = r.i32("broker id")?;
    let max_timestamp_ms = r.i64("max timestamp")?;
    let event_timestamp_ms = r.i64("event timestamp")?;
    let details = read_segment_body(r)?;
    let snapshot = RemoteLogSegmentMetadataSnapshot {
        segment_id,
        start_offset,
        end_offset,
        max_timestamp_ms,
        broker_id,
        event_timestamp_ms,
        details,
    };
    // The same invariants as a full segment record; the partition placeholder
    // does not take part in them.
    snapshot.to_metadata(TopicIdPartition::new(Uuid::nil(), "", 0))?;
    Ok(snapshot)
}

#[cfg(test)]
mod tests;
