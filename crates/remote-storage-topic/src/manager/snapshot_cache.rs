//! The local snapshot cache: one file per consumed metadata partition that
//! holds the state built from its events below a given offset, so a restart
//! resumes the partition from that offset instead of replaying the topic.
//!
//! The file reuses Kafka's own record encodings for its contents: each
//! segment is a `RemoteLogSegmentMetadataSnapshotRecord` (api key 3, the
//! record Kafka made for exactly this), each partition-delete step a
//! `RemotePartitionDeleteMetadataRecord`. Around them:
//!
//! ```text
//! magic "KRLMSNAP" | version i16 = 1 | metadata partition i32 | next offset i64
//! | compact array of user partitions:
//! |   topic (compact string) | topic id (uuid) | partition i32
//! |   delete step: compact nullable bytes (api key 2 record)
//! |   highest copied offsets: compact array of (epoch i32, offset i64)
//! |   segments: compact array of compact bytes (api key 3 records)
//! | CRC-32C (u32, big-endian) of everything before it
//! ```
//!
//! A write goes to a temporary file that is synced and then renamed over
//! the old one, and the directory is synced, so a crash leaves either the
//! old snapshot or the new one, never a torn file.

use {
    super::store::PartitionStore,
    crate::{
        error::MetadataLogError,
        serde::{
            RemoteLogMetadata, RemoteLogMetadataSerde, RemoteLogSegmentMetadataSnapshot,
            wire::{Reader, Writer},
        },
    },
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::TopicIdPartition,
    std::{
        collections::{BTreeMap, HashMap},
        fs,
        path::{Path, PathBuf},
    },
};

const MAGIC: &[u8; 8] = b"KRLMSNAP";
const VERSION: i16 = 1;
/// Smallest encoding of one highest-offset entry.
const MIN_HIGHEST_OFFSET_SIZE: usize = 4 + 8;

/// The restored state of one metadata partition.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PartitionSnapshot {
    /// Every event below this offset is reflected in `stores`.
    pub(crate) next_offset: i64,
    /// State of each user partition whose events live in the partition.
    pub(crate) stores: HashMap<TopicIdPartition, PartitionStore>,
}

/// The cache file of `metadata_partition` in `dir`.
pub(crate) fn file_path(dir: &Path, metadata_partition: i32) -> PathBuf {
    dir.join(format!(
        "__remote_log_metadata-{metadata_partition}.snapshot"
    ))
}

/// The file contents for `stores` of `metadata_partition` below `next_offset`.
pub(crate) fn encode(
    metadata_partition: i32,
    next_offset: i64,
    stores: &HashMap<TopicIdPartition, PartitionStore>,
) -> Vec<u8> {
    let mut w = Writer::default();
    w.raw(MAGIC);
    w.i16(VERSION);
    w.i32(metadata_partition);
    w.i64(next_offset);
    let mut partitions: Vec<_> = stores.iter().collect();
    partitions.sort_by(|a, b| a.0.cmp(b.0));
    w.compact_array_len(partitions.len());
    for (partition, store) in partitions {
        let (segments, highest_offsets, delete) = store.parts();
        w.compact_string(partition.topic());
        w.uuid(partition.topic_id());
        w.i32(partition.partition());
        let delete = delete.map(|delete| {
            RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::PartitionDelete(delete.clone()))
        });
        w.compact_nullable_bytes(delete.as_deref());
        w.compact_array_len(highest_offsets.len());
        for (epoch, &offset) in highest_offsets {
            w.i32(epoch.0);
            w.i64(offset);
        }
        w.compact_array_len(segments.len());
        for segment in &segments {
            let record = RemoteLogMetadataSerde::serialize(&RemoteLogMetadata::SegmentSnapshot(
                RemoteLogSegmentMetadataSnapshot::from_metadata(segment),
            ));
            w.compact_nullable_bytes(Some(&record));
        }
    }
    let mut bytes = w.into_inner().to_vec();
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// Parses a cache file of `metadata_partition`.
pub(crate) fn decode(
    bytes: &[u8],
    metadata_partition: i32,
    path: &Path,
) -> Result<PartitionSnapshot, MetadataLogError> {
    let corrupt = |reason: String| MetadataLogError::CorruptSnapshot {
        path: path.to_owned(),
        reason,
    };
    let body_len = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| corrupt("shorter than its checksum".into()))?;
    let (body, crc) = bytes.split_at(body_len);
    let stored_crc =
        u32::from_be_bytes(crc.try_into().map_err(|_| corrupt("bad checksum".into()))?);
    if crc32c::crc32c(body) != stored_crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    decode_body(body, metadata_partition).map_err(|error| corrupt(error.to_string()))
}

fn decode_body(
    body: &[u8],
    metadata_partition: i32,
) -> Result<PartitionSnapshot, MetadataLogError> {
    let invalid = |reason: String| MetadataLogError::Invalid(reason);
    let mut r = Reader::new(body);
    if r.raw(MAGIC.len(), "magic")? != MAGIC {
        return Err(invalid("not a remote log metadata snapshot".into()));
    }
    let version = r.i16("version")?;
    if version != VERSION {
        return Err(invalid(format!("unsupported snapshot version {version}")));
    }
    let stored_partition = r.i32("metadata partition")?;
    if stored_partition != metadata_partition {
        return Err(invalid(format!(
            "snapshot of metadata partition {stored_partition}, expected {metadata_partition}"
        )));
    }
    let next_offset = r.i64("next offset")?;
    // A partition entry takes at least 1 + 16 + 4 + 1 + 1 + 1 bytes.
    let count = r.compact_array_len("user partitions", 24)?;
    let mut stores = HashMap::with_capacity(count);
    for _ in 0..count {
        let topic = r.compact_string("topic")?;
        let topic_id = r.uuid("topic id")?;
        let partition = TopicIdPartition::new(topic_id, topic, r.i32("partition")?);
        let delete = match r.compact_nullable_bytes("delete step")? {
            None => None,
            Some(bytes) => match RemoteLogMetadataSerde::deserialize(bytes)? {
                RemoteLogMetadata::PartitionDelete(delete)
                    if delete.topic_id_partition() == &partition =>
                {
                    Some(delete)
                }
                _ => return Err(invalid(format!("bad delete step for {partition}"))),
            },
        };
        let highest_count = r.compact_array_len("highest offsets", MIN_HIGHEST_OFFSET_SIZE)?;
        let mut highest_offsets = BTreeMap::new();
        for _ in 0..highest_count {
            let epoch = LeaderEpoch(r.i32("epoch")?);
            highest_offsets.insert(epoch, r.i64("highest offset")?);
        }
        let segment_count = r.compact_array_len("segments", 1)?;
        let mut segments = Vec::with_capacity(segment_count);
        for _ in 0..segment_count {
            let record = r
                .compact_nullable_bytes("segment")?
                .ok_or_else(|| invalid("null segment record".into()))?;
            match RemoteLogMetadataSerde::deserialize(record)? {
                RemoteLogMetadata::SegmentSnapshot(snapshot) => {
                    segments.push(snapshot.to_metadata(partition.clone())?);
                }
                _ => return Err(invalid(format!("bad segment record for {partition}"))),
            }
        }
        let store = PartitionStore::from_parts(segments, highest_offsets, delete);
        if stores.insert(partition.clone(), store).is_some() {
            return Err(invalid(format!("{partition} listed twice")));
        }
    }
    r.finish("snapshot")?;
    Ok(PartitionSnapshot {
        next_offset,
        stores,
    })
}

/// Reads the cache file of `metadata_partition`, `None` if there is none.
pub(crate) fn read(
    dir: &Path,
    metadata_partition: i32,
) -> Result<Option<PartitionSnapshot>, MetadataLogError> {
    let path = file_path(dir, metadata_partition);
    match fs::read(&path) {
        Ok(bytes) => decode(&bytes, metadata_partition, &path).map(Some),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MetadataLogError::Io { path, source }),
    }
}

/// Replaces the cache file of `metadata_partition` with `contents`
/// atomically and durably ([`krabka_ids::durable::write_atomic`]).
pub(crate) fn write_atomic(
    dir: &Path,
    metadata_partition: i32,
    contents: &[u8],
) -> Result<(), MetadataLogError> {
    fs::create_dir_all(dir).map_err(|source| MetadataLogError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let path = file_path(dir, metadata_partition);
    krabka_ids::durable::write_atomic(&path, contents).map_err(|e| MetadataLogError::Io {
        path: e.path,
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::{assert, check},
        krabka_remote_storage::{
            CustomMetadata, RemoteLogSegmentDetails, RemoteLogSegmentId, RemoteLogSegmentMetadata,
            RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
            RemotePartitionDeleteState,
        },
        uuid::Uuid,
    };

    fn sample() -> HashMap<TopicIdPartition, PartitionStore> {
        let a = TopicIdPartition::new(Uuid::from_u128(1), "a", 0);
        let b = TopicIdPartition::new(Uuid::from_u128(2), "b", 3);
        let mut store = PartitionStore::default();
        for (id, start) in [(10_u128, 0_i64), (11, 100)] {
            let epochs = BTreeMap::from([(LeaderEpoch(0), start)]);
            let details =
                RemoteLogSegmentDetails::new(7, RemoteLogSegmentState::CopySegmentStarted, epochs)
                    .with_custom_metadata(Some(CustomMetadata::new(vec![1, 2])));
            let segment_id = RemoteLogSegmentId::new(a.clone(), Uuid::from_u128(id));
            store
                .add(
                    RemoteLogSegmentMetadata::new(
                        segment_id.clone(),
                        start,
                        start + 99,
                        1,
                        2,
                        3,
                        details,
                    )
                    .unwrap(),
                )
                .unwrap();
            store
                .update(&RemoteLogSegmentMetadataUpdate::new(
                    segment_id,
                    9,
                    None,
                    RemoteLogSegmentState::CopySegmentFinished,
                    4,
                ))
                .unwrap();
        }
        let mut deleted = PartitionStore::default();
        deleted
            .put_delete(RemotePartitionDeleteMetadata::new(
                b.clone(),
                RemotePartitionDeleteState::DeletePartitionMarked,
                5,
                6,
            ))
            .unwrap();
        HashMap::from([(a, store), (b, deleted)])
    }

    #[test]
    fn snapshots_round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let stores = sample();
        write_atomic(dir.path(), 4, &encode(4, 77, &stores)).unwrap();
        let restored = read(dir.path(), 4).unwrap().unwrap();
        check!(
            restored
                == PartitionSnapshot {
                    next_offset: 77,
                    stores
                }
        );
        check!(read(dir.path(), 5).unwrap().is_none());
        // Only the final file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        check!(names == vec![std::ffi::OsString::from("__remote_log_metadata-4.snapshot")]);
    }

    #[test]
    fn damaged_files_are_refused() {
        let bytes = encode(4, 77, &sample());
        let path = Path::new("x");
        for len in 0..bytes.len() {
            check!(decode(&bytes[..len], 4, path).is_err(), "{len}");
        }
        let mut flipped = bytes.clone();
        flipped[20] ^= 1;
        assert!(let Err(MetadataLogError::CorruptSnapshot { .. }) = decode(&flipped, 4, path));
        assert!(let Err(MetadataLogError::CorruptSnapshot { .. }) = decode(&bytes, 5, path));
    }

    /// One step of a random history of one partition (most are refused).
    #[derive(Debug, Clone)]
    enum Step {
        Add(u8, i64),
        Update(u8, RemoteLogSegmentState),
        Delete(RemotePartitionDeleteState),
    }

    fn arb_step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..6_u8, 0..20_i64).prop_map(|(id, at)| Step::Add(id, at)),
            6 => (0..6_u8, proptest::sample::select(RemoteLogSegmentState::ALL.to_vec()))
                .prop_map(|(id, state)| Step::Update(id, state)),
            1 => proptest::sample::select(RemotePartitionDeleteState::ALL.to_vec()).prop_map(Step::Delete),
        ]
    }

    proptest::proptest! {
        #[test]
        fn any_history_is_restored_exactly(steps in proptest::collection::vec(arb_step(), 0..60)) {
            let partition = TopicIdPartition::new(Uuid::from_u128(5), "p", 1);
            let mut store = PartitionStore::default();
            for (time, step) in steps.into_iter().enumerate() {
                let time = i64::try_from(time).unwrap();
                let segment_id = |id: u8| RemoteLogSegmentId::new(partition.clone(), Uuid::from_u128(u128::from(id)));
                let _ = match step {
                    Step::Add(id, at) => {
                        let start = at * 100;
                        let epochs = BTreeMap::from([(LeaderEpoch(0), start), (LeaderEpoch(1), start + 50)]);
                        let details = RemoteLogSegmentDetails::new(10, RemoteLogSegmentState::CopySegmentStarted, epochs)
                            .with_txn_idx_empty(id % 2 == 0);
                        store.add(RemoteLogSegmentMetadata::new(segment_id(id), start, start + 99, time, 1, time, details).unwrap())
                    }
                    Step::Update(id, state) => store.update(&RemoteLogSegmentMetadataUpdate::new(
                        segment_id(id),
                        time,
                        (id % 3 == 0).then(|| CustomMetadata::new(vec![id])),
                        state,
                        2,
                    )),
                    Step::Delete(state) => store.put_delete(RemotePartitionDeleteMetadata::new(partition.clone(), state, time, 3)),
                };
            }
            let stores = HashMap::from([(partition, store)]);
            let restored = decode(&encode(9, 123, &stores), 9, Path::new("x")).unwrap();
            proptest::prop_assert_eq!(restored, PartitionSnapshot { next_offset: 123, stores });
        }
    }
}
