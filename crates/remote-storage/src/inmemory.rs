//! A process-memory [`RemoteLogMetadataManager`].
//!
//! It is the reference implementation of the lifecycle rules and the lookup
//! semantics (Kafka's `RemoteLogMetadataCache`), used by tests, by a
//! single-node broker whose remote tier needs no durable metadata, and as the
//! cache the topic-based manager can rebuild from its event log.
//!
//! Every change is validated against the strict state machine before
//! anything is touched, so a refused call leaves the state exactly as it was.
//! One `RwLock` guards the whole state: lookups share it, changes take it
//! briefly; none of the work under the lock does I/O.

use {
    crate::{
        error::RemoteStorageError,
        metadata::{
            RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
            RemotePartitionDeleteMetadata, RemotePartitionDeleteState, TopicIdPartition,
        },
        metadata_manager::RemoteLogMetadataManager,
    },
    krabka_ids::LeaderEpoch,
    std::{
        collections::{BTreeMap, HashMap},
        sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
    },
    uuid::Uuid,
};

/// Remote-segment metadata held in process memory. Thread-safe; share it
/// behind an `Arc`.
#[derive(Debug, Default)]
pub struct InmemoryRemoteLogMetadataManager {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    closed: bool,
    partitions: HashMap<TopicIdPartition, PartitionState>,
}

#[derive(Debug, Default)]
struct PartitionState {
    /// Every segment not yet `DELETE_SEGMENT_FINISHED`, by segment UUID.
    segments: HashMap<Uuid, RemoteLogSegmentMetadata>,
    /// Per epoch, the `COPY_SEGMENT_FINISHED` segments keyed by the offset
    /// where the epoch starts in them (Kafka's `offsetToId`). A later
    /// segment with the same epoch start replaces an earlier one.
    readable: BTreeMap<LeaderEpoch, BTreeMap<i64, Uuid>>,
    /// Per epoch, the highest offset ever copied (Kafka's
    /// `highestLogOffset`; deletion does not lower it).
    highest_offset: BTreeMap<LeaderEpoch, i64>,
    /// The latest partition-delete step, if any.
    delete: Option<RemotePartitionDeleteMetadata>,
}

impl PartitionState {
    fn refuse_if_deleting(&self, partition: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        match &self.delete {
            Some(delete) => Err(RemoteStorageError::PartitionDeleted {
                partition: partition.clone(),
                state: delete.state(),
            }),
            None => Ok(()),
        }
    }

    fn mark_readable(&mut self, metadata: &RemoteLogSegmentMetadata) {
        let id = metadata.remote_log_segment_id().id();
        for (&epoch, &start) in metadata.segment_leader_epochs() {
            self.readable.entry(epoch).or_default().insert(start, id);
            if let Some(end) = metadata.epoch_end_offset(epoch) {
                let highest = self.highest_offset.entry(epoch).or_insert(end);
                *highest = (*highest).max(end);
            }
        }
    }

    fn unmark_readable(&mut self, metadata: &RemoteLogSegmentMetadata) {
        let id = metadata.remote_log_segment_id().id();
        for (epoch, start) in metadata.segment_leader_epochs() {
            if let Some(by_offset) = self.readable.get_mut(epoch) {
                // Only if this segment still owns the slot: a later copy of
                // the same range may have replaced it.
                if by_offset.get(start) == Some(&id) {
                    by_offset.remove(start);
                }
                if by_offset.is_empty() {
                    self.readable.remove(epoch);
                }
            }
        }
    }

    fn sorted(
        &self,
        mut keep: impl FnMut(&RemoteLogSegmentMetadata) -> bool,
    ) -> Vec<RemoteLogSegmentMetadata> {
        let mut segments: Vec<RemoteLogSegmentMetadata> = self
            .segments
            .values()
            .filter(|m| keep(m))
            .cloned()
            .collect();
        segments.sort_by_key(|m| {
            (
                m.start_offset(),
                m.end_offset(),
                m.remote_log_segment_id().id(),
            )
        });
        segments
    }
}

impl InmemoryRemoteLogMetadataManager {
    /// An empty manager.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Every partition the manager holds metadata or a delete record for,
    /// sorted.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::Closed`] after `close`.
    pub fn partitions(&self) -> Result<Vec<TopicIdPartition>, RemoteStorageError> {
        let state = self.read()?;
        let mut partitions: Vec<TopicIdPartition> = state.partitions.keys().cloned().collect();
        partitions.sort();
        Ok(partitions)
    }

    // A panic cannot leave the state half-changed (every change is validated
    // first, then applied without a fallible step), so a poisoned lock is
    // still consistent and is used as is.
    fn read(&self) -> Result<RwLockReadGuard<'_, State>, RemoteStorageError> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return Err(RemoteStorageError::Closed);
        }
        Ok(state)
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, State>, RemoteStorageError> {
        let state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return Err(RemoteStorageError::Closed);
        }
        Ok(state)
    }

    fn with_partition<T>(
        &self,
        partition: &TopicIdPartition,
        absent: T,
        f: impl FnOnce(&PartitionState) -> T,
    ) -> Result<T, RemoteStorageError> {
        let state = self.read()?;
        Ok(state.partitions.get(partition).map_or(absent, f))
    }
}

impl RemoteLogMetadataManager for InmemoryRemoteLogMetadataManager {
    fn add_remote_log_segment_metadata(
        &self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let segment_id = metadata.remote_log_segment_id().clone();
        if !RemoteLogSegmentState::is_valid_transition(None, metadata.state()) {
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id,
                from: None,
                to: metadata.state(),
            });
        }
        let mut state = self.write()?;
        let partition = state
            .partitions
            .entry(segment_id.topic_id_partition().clone())
            .or_default();
        partition.refuse_if_deleting(segment_id.topic_id_partition())?;
        if partition.segments.contains_key(&segment_id.id()) {
            return Err(RemoteStorageError::DuplicateSegment { segment_id });
        }
        partition.segments.insert(segment_id.id(), metadata);
        Ok(())
    }

    fn update_remote_log_segment_metadata(
        &self,
        update: RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError> {
        let segment_id = update.remote_log_segment_id().clone();
        let mut state = self.write()?;
        let partition = state
            .partitions
            .get_mut(segment_id.topic_id_partition())
            .ok_or_else(|| RemoteStorageError::UnknownSegment {
                segment_id: segment_id.clone(),
            })?;
        let current = partition.segments.get(&segment_id.id()).ok_or_else(|| {
            RemoteStorageError::UnknownSegment {
                segment_id: segment_id.clone(),
            }
        })?;
        let from = current.state();
        let to = update.state();
        if !RemoteLogSegmentState::is_valid_transition(Some(from), to) {
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id,
                from: Some(from),
                to,
            });
        }
        // Deleting segments of a partition being deleted is the point of the
        // partition delete; finishing a copy into it is not.
        if to == RemoteLogSegmentState::CopySegmentFinished {
            partition.refuse_if_deleting(segment_id.topic_id_partition())?;
        }
        let updated = current.create_with_updates(&update)?;
        match to {
            RemoteLogSegmentState::CopySegmentFinished => {
                partition.mark_readable(&updated);
                partition.segments.insert(segment_id.id(), updated);
            }
            RemoteLogSegmentState::DeleteSegmentStarted => {
                partition.unmark_readable(&updated);
                partition.segments.insert(segment_id.id(), updated);
            }
            RemoteLogSegmentState::DeleteSegmentFinished => {
                partition.unmark_readable(&updated);
                partition.segments.remove(&segment_id.id());
            }
            // Refused by the transition check above.
            RemoteLogSegmentState::CopySegmentStarted => {}
        }
        Ok(())
    }

    fn remote_log_segment_metadata(
        &self,
        partition: &TopicIdPartition,
        epoch_for_offset: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.with_partition(partition, None, |p| {
            let (_, id) = p
                .readable
                .get(&epoch_for_offset)?
                .range(..=offset)
                .next_back()?;
            let metadata = p.segments.get(id)?;
            let epoch_end = metadata.epoch_end_offset(epoch_for_offset)?;
            (offset <= epoch_end).then(|| metadata.clone())
        })
    }

    /// Kafka's topic-based manager's refinement of the default: from the
    /// segment holding `offset` in `epoch` onwards (within that epoch), the
    /// first one whose transaction index is not marked empty.
    fn next_segment_with_txn_index(
        &self,
        partition: &TopicIdPartition,
        epoch: LeaderEpoch,
        offset: i64,
    ) -> Result<Option<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.with_partition(partition, None, |p| {
            let by_offset = p.readable.get(&epoch)?;
            // Start at the segment holding `offset` if there is one, else at
            // the next segment of the epoch.
            let from = by_offset
                .range(..=offset)
                .next_back()
                .map_or(offset, |(&start, _)| start);
            by_offset
                .range(from..)
                .filter_map(|(_, id)| p.segments.get(id))
                .filter(|m| m.epoch_end_offset(epoch).is_some_and(|end| end >= offset))
                .find(|m| !m.is_txn_idx_empty())
                .cloned()
        })
    }

    fn highest_offset_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Option<i64>, RemoteStorageError> {
        self.with_partition(partition, None, |p| {
            p.highest_offset.get(&leader_epoch).copied()
        })
    }

    fn put_remote_partition_delete_metadata(
        &self,
        metadata: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        let mut state = self.write()?;
        let partition = state
            .partitions
            .entry(metadata.topic_id_partition().clone())
            .or_default();
        let from = partition
            .delete
            .as_ref()
            .map(RemotePartitionDeleteMetadata::state);
        let to = metadata.state();
        if !RemotePartitionDeleteState::is_valid_transition(from, to) {
            return Err(RemoteStorageError::IllegalPartitionDeleteTransition {
                partition: metadata.topic_id_partition().clone(),
                from,
                to,
            });
        }
        if to == RemotePartitionDeleteState::DeletePartitionFinished {
            // The remover deleted every segment; forget them (Kafka drops the
            // partition's cache). The delete record stays, so the partition
            // keeps refusing new segments.
            partition.segments.clear();
            partition.readable.clear();
            partition.highest_offset.clear();
        }
        partition.delete = Some(metadata);
        Ok(())
    }

    fn remote_partition_delete_metadata(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Option<RemotePartitionDeleteMetadata>, RemoteStorageError> {
        self.with_partition(partition, None, |p| p.delete.clone())
    }

    fn list_remote_log_segments(
        &self,
        partition: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.with_partition(partition, Vec::new(), |p| p.sorted(|_| true))
    }

    fn list_remote_log_segments_for_epoch(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.with_partition(partition, Vec::new(), |p| {
            p.sorted(|m| m.segment_leader_epochs().contains_key(&leader_epoch))
        })
    }

    /// Nothing to load: every partition's metadata is already in memory.
    fn on_partition_leadership_changes(
        &self,
        _leader_partitions: &[TopicIdPartition],
        _follower_partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        self.read().map(drop)
    }

    /// Nothing to release: the metadata stays for when the partition comes
    /// back, as in Kafka's in-memory manager.
    fn on_stopped_partitions(
        &self,
        _partitions: &[TopicIdPartition],
    ) -> Result<(), RemoteStorageError> {
        self.read().map(drop)
    }

    fn remote_log_size(
        &self,
        partition: &TopicIdPartition,
        leader_epoch: LeaderEpoch,
    ) -> Result<u64, RemoteStorageError> {
        self.with_partition(partition, 0, |p| {
            p.segments
                .values()
                .filter(|m| m.segment_leader_epochs().contains_key(&leader_epoch))
                .map(|m| u64::try_from(m.segment_size_in_bytes()).unwrap_or(0))
                .sum()
        })
    }

    fn close(&self) -> Result<(), RemoteStorageError> {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.partitions.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::{
            metadata::RemoteLogSegmentId,
            test_support::{partition, segment, segment_in},
        },
        assert2::check,
        proptest::prelude::*,
        std::{sync::Arc, thread},
    };

    use RemoteLogSegmentState::*;

    fn update(
        metadata: &RemoteLogSegmentMetadata,
        to: RemoteLogSegmentState,
    ) -> RemoteLogSegmentMetadataUpdate {
        RemoteLogSegmentMetadataUpdate::new(
            metadata.remote_log_segment_id().clone(),
            3_000,
            None,
            to,
            2,
        )
    }

    fn finished(rlmm: &InmemoryRemoteLogMetadataManager, metadata: &RemoteLogSegmentMetadata) {
        rlmm.add_remote_log_segment_metadata(metadata.clone())
            .unwrap();
        rlmm.update_remote_log_segment_metadata(update(metadata, CopySegmentFinished))
            .unwrap();
    }

    fn path_to(state: RemoteLogSegmentState) -> &'static [RemoteLogSegmentState] {
        match state {
            CopySegmentStarted => &[],
            CopySegmentFinished => &[CopySegmentFinished],
            DeleteSegmentStarted => &[CopySegmentFinished, DeleteSegmentStarted],
            DeleteSegmentFinished => &[DeleteSegmentStarted, DeleteSegmentFinished],
        }
    }

    fn state_of(
        rlmm: &InmemoryRemoteLogMetadataManager,
        id: &RemoteLogSegmentId,
    ) -> Option<RemoteLogSegmentState> {
        rlmm.list_remote_log_segments(id.topic_id_partition())
            .unwrap()
            .into_iter()
            .find(|m| m.remote_log_segment_id() == id)
            .map(|m| m.state())
    }

    #[test]
    fn every_transition_pair_is_applied_or_refused_with_a_typed_error() {
        let legal = [
            (None, CopySegmentStarted),
            (Some(CopySegmentStarted), CopySegmentFinished),
            (Some(CopySegmentStarted), DeleteSegmentStarted),
            (Some(CopySegmentFinished), DeleteSegmentStarted),
            (Some(DeleteSegmentStarted), DeleteSegmentFinished),
        ];
        for to in RemoteLogSegmentState::ALL {
            // From nothing: only an add in COPY_SEGMENT_STARTED creates a segment.
            let rlmm = InmemoryRemoteLogMetadataManager::new();
            let metadata = segment_in(&partition(), 0, 9, &[(0, 0)], to);
            let result = rlmm.add_remote_log_segment_metadata(metadata.clone());
            if legal.contains(&(None, to)) {
                check!(result.is_ok(), "add in {to}");
                check!(state_of(&rlmm, metadata.remote_log_segment_id()) == Some(to));
            } else {
                assert2::assert!(let
                    Err(RemoteStorageError::IllegalStateTransition {
                        from: None,
                        to: refused,
                        ..
                    }) = result
                );
                check!(refused == to);
                check!(
                    rlmm.list_remote_log_segments(&partition())
                        .unwrap()
                        .is_empty()
                );
            }
            // An update can never create a segment.
            let result = InmemoryRemoteLogMetadataManager::new()
                .update_remote_log_segment_metadata(update(&metadata, to));
            assert2::assert!(let Err(RemoteStorageError::UnknownSegment { .. }) = result);
        }
        for from in RemoteLogSegmentState::ALL {
            for to in RemoteLogSegmentState::ALL {
                let rlmm = InmemoryRemoteLogMetadataManager::new();
                let metadata = segment(0, 9);
                rlmm.add_remote_log_segment_metadata(metadata.clone())
                    .unwrap();
                for &step in path_to(from) {
                    rlmm.update_remote_log_segment_metadata(update(&metadata, step))
                        .unwrap();
                }
                let id = metadata.remote_log_segment_id();
                let before = state_of(&rlmm, id);
                let result = rlmm.update_remote_log_segment_metadata(update(&metadata, to));
                if legal.contains(&(Some(from), to)) {
                    check!(result.is_ok(), "{from} -> {to}");
                    let expected = (to != DeleteSegmentFinished).then_some(to);
                    check!(state_of(&rlmm, id) == expected, "{from} -> {to}");
                } else if from == DeleteSegmentFinished {
                    // A finished delete forgets the segment.
                    assert2::assert!(let
                        Err(RemoteStorageError::UnknownSegment { .. }) = result,
                        "{from} -> {to}"
                    );
                } else {
                    assert2::assert!(let
                        Err(RemoteStorageError::IllegalStateTransition {
                            from: Some(f),
                            to: t,
                            ..
                        }) = result,
                        "{from} -> {to}"
                    );
                    check!((f, t) == (from, to));
                    check!(
                        state_of(&rlmm, id) == before,
                        "refused {from} -> {to} changed state"
                    );
                }
            }
        }
    }

    #[test]
    fn duplicate_add_is_refused() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let metadata = segment(0, 9);
        rlmm.add_remote_log_segment_metadata(metadata.clone())
            .unwrap();
        assert2::assert!(let
            Err(RemoteStorageError::DuplicateSegment { .. }) =
                rlmm.add_remote_log_segment_metadata(metadata)
        );
    }

    #[test]
    fn lookups_follow_kafkas_epoch_semantics() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let tp = partition();
        let seg1 = segment_in(&tp, 0, 99, &[(0, 0), (1, 50)], CopySegmentStarted);
        let seg2 = segment_in(&tp, 100, 199, &[(1, 100), (2, 150)], CopySegmentStarted);
        let seg3 = segment_in(&tp, 200, 299, &[(2, 200)], CopySegmentStarted);
        finished(&rlmm, &seg1);
        finished(&rlmm, &seg2);
        rlmm.add_remote_log_segment_metadata(seg3.clone()).unwrap();

        let find = |epoch, offset| {
            rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(epoch), offset)
                .unwrap()
                .map(|m| m.start_offset())
        };
        check!(find(0, 10) == Some(0));
        check!(find(0, 49) == Some(0));
        check!(find(0, 50) == None, "epoch 0 ends at 49");
        check!(find(1, 50) == Some(0));
        check!(find(1, 120) == Some(100));
        check!(find(2, 160) == Some(100));
        check!(find(2, 220) == None, "a started copy is not readable");
        check!(find(3, 0) == None);

        let highest = |epoch| {
            rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(epoch))
                .unwrap()
        };
        check!(highest(0) == Some(49));
        check!(highest(1) == Some(149));
        check!(highest(2) == Some(199));
        check!(highest(3) == None);

        let starts = |segments: Vec<RemoteLogSegmentMetadata>| -> Vec<i64> {
            segments
                .iter()
                .map(RemoteLogSegmentMetadata::start_offset)
                .collect()
        };
        check!(starts(rlmm.list_remote_log_segments(&tp).unwrap()) == [0, 100, 200]);
        check!(
            starts(
                rlmm.list_remote_log_segments_for_epoch(&tp, LeaderEpoch(2))
                    .unwrap()
            ) == [100, 200]
        );
        check!(
            starts(
                rlmm.list_remote_log_segments_for_epoch(&tp, LeaderEpoch(0))
                    .unwrap()
            ) == [0]
        );
        let size = |epoch| rlmm.remote_log_size(&tp, LeaderEpoch(epoch)).unwrap();
        check!(size(1) == 2000);
        check!(size(2) == 2000);
        check!(size(7) == 0);

        rlmm.update_remote_log_segment_metadata(update(&seg1, DeleteSegmentStarted))
            .unwrap();
        check!(find(0, 10) == None, "a deleting segment is not readable");
        check!(
            highest(0) == Some(49),
            "deletion does not lower the copied high mark"
        );
        check!(starts(rlmm.list_remote_log_segments(&tp).unwrap()) == [0, 100, 200]);
        rlmm.update_remote_log_segment_metadata(update(&seg1, DeleteSegmentFinished))
            .unwrap();
        check!(starts(rlmm.list_remote_log_segments(&tp).unwrap()) == [100, 200]);
        check!(size(1) == 1000);

        let other = TopicIdPartition::new(tp.topic_id(), tp.topic(), 8);
        check!(rlmm.list_remote_log_segments(&other).unwrap().is_empty());
        check!(
            rlmm.remote_log_segment_metadata(&other, LeaderEpoch(0), 0)
                .unwrap()
                == None
        );
    }

    #[test]
    fn next_segment_with_txn_index_skips_empty_ones() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let tp = partition();
        let make = |start: i64, empty: bool| {
            let base = segment_in(&tp, start, start + 9, &[(0, start)], CopySegmentStarted);
            let details = base.details().clone().with_txn_idx_empty(empty);
            RemoteLogSegmentMetadata::new(
                base.remote_log_segment_id().clone(),
                start,
                start + 9,
                0,
                1,
                0,
                details,
            )
            .unwrap()
        };
        let segments = [
            make(0, true),
            make(10, true),
            make(20, false),
            make(30, false),
        ];
        for metadata in &segments {
            finished(&rlmm, metadata);
        }
        let next = |offset| {
            rlmm.next_segment_with_txn_index(&tp, LeaderEpoch(0), offset)
                .unwrap()
                .map(|m| m.start_offset())
        };
        check!(next(5) == Some(20));
        check!(next(25) == Some(20));
        check!(next(31) == Some(30));
        check!(next(45) == None);
        check!(
            rlmm.next_segment_with_txn_index(&tp, LeaderEpoch(1), 5)
                .unwrap()
                == None
        );
    }

    #[test]
    fn a_recopy_of_the_same_range_replaces_the_old_one_for_lookups() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let tp = partition();
        let old = segment_in(&tp, 0, 99, &[(0, 0)], CopySegmentStarted);
        let new = segment_in(&tp, 0, 99, &[(0, 0)], CopySegmentStarted);
        finished(&rlmm, &old);
        finished(&rlmm, &new);
        let found = rlmm
            .remote_log_segment_metadata(&tp, LeaderEpoch(0), 5)
            .unwrap()
            .unwrap();
        check!(found.remote_log_segment_id() == new.remote_log_segment_id());
        // Deleting the replaced copy must not hide the live one.
        rlmm.update_remote_log_segment_metadata(update(&old, DeleteSegmentStarted))
            .unwrap();
        let found = rlmm
            .remote_log_segment_metadata(&tp, LeaderEpoch(0), 5)
            .unwrap()
            .unwrap();
        check!(found.remote_log_segment_id() == new.remote_log_segment_id());
    }

    #[test]
    fn partition_delete_lifecycle() {
        use RemotePartitionDeleteState::*;
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        let tp = partition();
        let put = |state| {
            rlmm.put_remote_partition_delete_metadata(RemotePartitionDeleteMetadata::new(
                tp.clone(),
                state,
                9,
                1,
            ))
        };
        let copied = segment(0, 9);
        let copying = segment(10, 19);
        finished(&rlmm, &copied);
        rlmm.add_remote_log_segment_metadata(copying.clone())
            .unwrap();

        assert2::assert!(let
            Err(RemoteStorageError::IllegalPartitionDeleteTransition { from: None, .. }) =
                put(DeletePartitionStarted)
        );
        put(DeletePartitionMarked).unwrap();
        check!(
            rlmm.remote_partition_delete_metadata(&tp)
                .unwrap()
                .map(|d| d.state())
                == Some(DeletePartitionMarked)
        );
        assert2::assert!(let
            Err(RemoteStorageError::IllegalPartitionDeleteTransition { .. }) =
                put(DeletePartitionMarked)
        );
        assert2::assert!(let
            Err(RemoteStorageError::PartitionDeleted { .. }) =
                rlmm.add_remote_log_segment_metadata(segment(20, 29))
        );
        assert2::assert!(let
            Err(RemoteStorageError::PartitionDeleted { .. }) =
                rlmm.update_remote_log_segment_metadata(update(&copying, CopySegmentFinished))
        );
        put(DeletePartitionStarted).unwrap();
        for metadata in [&copied, &copying] {
            rlmm.update_remote_log_segment_metadata(update(metadata, DeleteSegmentStarted))
                .unwrap();
        }
        put(DeletePartitionFinished).unwrap();
        check!(rlmm.list_remote_log_segments(&tp).unwrap().is_empty());
        check!(rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(0)).unwrap() == None);
        for state in RemotePartitionDeleteState::ALL {
            assert2::assert!(let
                Err(RemoteStorageError::IllegalPartitionDeleteTransition { .. }) = put(state)
            );
        }
        assert2::assert!(let
            Err(RemoteStorageError::PartitionDeleted { .. }) =
                rlmm.add_remote_log_segment_metadata(segment(0, 9))
        );
    }

    #[test]
    fn closed_manager_refuses_everything() {
        let rlmm = InmemoryRemoteLogMetadataManager::new();
        finished(&rlmm, &segment(0, 9));
        rlmm.close().unwrap();
        let tp = partition();
        assert2::assert!(let
            Err(RemoteStorageError::Closed) = rlmm.add_remote_log_segment_metadata(segment(10, 19))
        );
        assert2::assert!(let Err(RemoteStorageError::Closed) = rlmm.list_remote_log_segments(&tp));
        assert2::assert!(let
            Err(RemoteStorageError::Closed) =
                rlmm.remote_log_segment_metadata(&tp, LeaderEpoch(0), 1)
        );
        assert2::assert!(let Err(RemoteStorageError::Closed) = rlmm.on_stopped_partitions(&[tp]));
    }

    #[test]
    fn concurrent_writers_and_readers() {
        let rlmm = Arc::new(InmemoryRemoteLogMetadataManager::new());
        let tp = partition();
        let writers: Vec<_> = (0..4i64)
            .map(|w| {
                let rlmm = Arc::clone(&rlmm);
                thread::spawn(move || {
                    for n in 0..50 {
                        let start = (w * 50 + n) * 10;
                        finished(&rlmm, &segment(start, start + 9));
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (rlmm, tp) = (Arc::clone(&rlmm), tp.clone());
                thread::spawn(move || {
                    for _ in 0..200 {
                        let listed = rlmm.list_remote_log_segments(&tp).unwrap();
                        check!(
                            listed
                                .windows(2)
                                .all(|w| w[0].start_offset() <= w[1].start_offset())
                        );
                    }
                })
            })
            .collect();
        for handle in writers.into_iter().chain(readers) {
            handle.join().unwrap();
        }
        check!(rlmm.list_remote_log_segments(&tp).unwrap().len() == 200);
        for offset in (0..2000).step_by(7) {
            let found = rlmm
                .remote_log_segment_metadata(&tp, LeaderEpoch(0), offset)
                .unwrap()
                .unwrap();
            check!(found.start_offset() <= offset && offset <= found.end_offset());
        }
        check!(rlmm.highest_offset_for_epoch(&tp, LeaderEpoch(0)).unwrap() == Some(1999));
    }

    proptest! {
        /// Lookups against a linear scan over random contiguous segments with
        /// random epoch changes, some copies still in progress.
        #[test]
        fn lookup_matches_a_linear_scan(
            lengths in proptest::collection::vec(1i64..20, 1..12),
            epoch_bumps in proptest::collection::vec(proptest::option::of(0i64..20), 1..12),
            unfinished in proptest::collection::vec(any::<bool>(), 1..12),
            probes in proptest::collection::vec((0i32..6, 0i64..250), 1..40),
        ) {
            let rlmm = InmemoryRemoteLogMetadataManager::new();
            let tp = partition();
            let mut start = 0;
            let mut epoch = 0;
            let mut all = Vec::new();
            for (n, len) in lengths.iter().enumerate() {
                let end = start + len - 1;
                let mut epochs = vec![(epoch, start)];
                if let Some(Some(bump)) = epoch_bumps.get(n) {
                    let at = start + bump % len;
                    if at > start {
                        epoch += 1;
                        epochs.push((epoch, at));
                    }
                }
                let metadata = segment_in(&tp, start, end, &epochs, CopySegmentStarted);
                rlmm.add_remote_log_segment_metadata(metadata.clone()).unwrap();
                let done = !unfinished.get(n).copied().unwrap_or(false);
                if done {
                    rlmm.update_remote_log_segment_metadata(update(&metadata, CopySegmentFinished)).unwrap();
                }
                all.push((metadata, done));
                start = end + 1;
                epoch += i32::from(n % 3 == 2);
            }
            for (epoch, offset) in probes {
                let epoch = LeaderEpoch(epoch);
                let expected = all.iter().find(|(m, done)| {
                    *done && m.segment_leader_epochs().get(&epoch).is_some_and(|&s| s <= offset)
                        && m.epoch_end_offset(epoch).is_some_and(|e| offset <= e)
                }).map(|(m, _)| m.remote_log_segment_id().clone());
                let found = rlmm.remote_log_segment_metadata(&tp, epoch, offset).unwrap()
                    .map(|m| m.remote_log_segment_id().clone());
                prop_assert_eq!(found, expected);
                let highest = all.iter()
                    .filter(|(_, done)| *done)
                    .filter_map(|(m, _)| m.epoch_end_offset(epoch))
                    .max();
                prop_assert_eq!(rlmm.highest_offset_for_epoch(&tp, epoch).unwrap(), highest);
            }
        }
    }
}
