//! [`PartitionStore`]: the remote-segment state of one user partition, as the
//! consumer builds it from the metadata topic.
//!
//! It enforces the lifecycle state machine of `krabka-remote-storage`
//! ([`RemoteLogSegmentState::is_valid_transition`],
//! [`RemotePartitionDeleteState::is_valid_transition`]) on every event and
//! answers the SPI's lookups with the semantics its trait documents. It is
//! not `InmemoryRemoteLogMetadataManager` because the snapshot cache must
//! write and restore the state exactly — including the highest copied offset
//! of each epoch, which outlives deleted segments — and a store refilled
//! through the SPI's add/update calls could not reproduce event times, broker
//! ids and custom metadata of segments already past `COPY_SEGMENT_STARTED`.

use {
    krabka_ids::LeaderEpoch,
    krabka_remote_storage::{
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        RemotePartitionDeleteMetadata, RemotePartitionDeleteState, RemoteStorageError,
    },
    std::collections::{BTreeMap, HashMap},
    uuid::Uuid,
};

/// The state of one user partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PartitionStore {
    /// Every segment before `DELETE_SEGMENT_FINISHED`, by segment UUID.
    segments: HashMap<Uuid, RemoteLogSegmentMetadata>,
    /// Highest offset of each epoch over `COPY_SEGMENT_FINISHED` segments.
    highest_offsets: BTreeMap<LeaderEpoch, i64>,
    /// The latest partition-delete step.
    delete: Option<RemotePartitionDeleteMetadata>,
}

impl PartitionStore {
    /// A store restored from its parts (see the snapshot cache).
    pub(crate) fn from_parts(
        segments: Vec<RemoteLogSegmentMetadata>,
        highest_offsets: BTreeMap<LeaderEpoch, i64>,
        delete: Option<RemotePartitionDeleteMetadata>,
    ) -> Self {
        Self {
            segments: segments
                .into_iter()
                .map(|segment| (segment.remote_log_segment_id().id(), segment))
                .collect(),
            highest_offsets,
            delete,
        }
    }

    /// Segments (sorted), highest offsets and delete step, for the snapshot.
    pub(crate) fn parts(
        &self,
    ) -> (
        Vec<RemoteLogSegmentMetadata>,
        &BTreeMap<LeaderEpoch, i64>,
        Option<&RemotePartitionDeleteMetadata>,
    ) {
        (self.list(), &self.highest_offsets, self.delete.as_ref())
    }

    /// Whether `metadata` may be added (see [`Self::add`]).
    pub(crate) fn check_add(
        &self,
        metadata: &RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        let segment_id = metadata.remote_log_segment_id();
        if metadata.state() != RemoteLogSegmentState::CopySegmentStarted {
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id: segment_id.clone(),
                from: None,
                to: metadata.state(),
            });
        }
        if let Some(delete) = &self.delete {
            return Err(RemoteStorageError::PartitionDeleted {
                partition: metadata.topic_id_partition().clone(),
                state: delete.state(),
            });
        }
        if self.segments.contains_key(&segment_id.id()) {
            return Err(RemoteStorageError::DuplicateSegment {
                segment_id: segment_id.clone(),
            });
        }
        Ok(())
    }

    /// Records a new `COPY_SEGMENT_STARTED` segment.
    pub(crate) fn add(
        &mut self,
        metadata: RemoteLogSegmentMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.check_add(&metadata)?;
        self.segments
            .insert(metadata.remote_log_segment_id().id(), metadata);
        Ok(())
    }

    /// Whether `update` may be applied (see [`Self::update`]).
    pub(crate) fn check_update(
        &self,
        update: &RemoteLogSegmentMetadataUpdate,
    ) -> Result<&RemoteLogSegmentMetadata, RemoteStorageError> {
        let segment_id = update.remote_log_segment_id();
        let current = self
            .segments
            .get(&segment_id.id())
            .filter(|current| current.remote_log_segment_id() == segment_id)
            .ok_or_else(|| RemoteStorageError::UnknownSegment {
                segment_id: segment_id.clone(),
            })?;
        if !RemoteLogSegmentState::is_valid_transition(Some(current.state()), update.state()) {
            return Err(RemoteStorageError::IllegalStateTransition {
                segment_id: segment_id.clone(),
                from: Some(current.state()),
                to: update.state(),
            });
        }
        if update.state() == RemoteLogSegmentState::CopySegmentFinished
            && let Some(delete) = &self.delete
        {
            return Err(RemoteStorageError::PartitionDeleted {
                partition: update.topic_id_partition().clone(),
                state: delete.state(),
            });
        }
        Ok(current)
    }

    /// Moves a known segment to its next state; `COPY_SEGMENT_FINISHED`
    /// raises the highest copied offsets, `DELETE_SEGMENT_FINISHED` forgets
    /// the segment.
    pub(crate) fn update(
        &mut self,
        update: &RemoteLogSegmentMetadataUpdate,
    ) -> Result<(), RemoteStorageError> {
        let updated = self.check_update(update)?.create_with_updates(update)?;
        let id = updated.remote_log_segment_id().id();
        match updated.state() {
            RemoteLogSegmentState::DeleteSegmentFinished => {
                self.segments.remove(&id);
            }
            RemoteLogSegmentState::CopySegmentFinished => {
                for &epoch in updated.segment_leader_epochs().keys() {
                    if let Some(end) = updated.epoch_end_offset(epoch) {
                        let highest = self.highest_offsets.entry(epoch).or_insert(end);
                        *highest = (*highest).max(end);
                    }
                }
                self.segments.insert(id, updated);
            }
            _ => {
                self.segments.insert(id, updated);
            }
        }
        Ok(())
    }

    /// Whether `delete` may be recorded (see [`Self::put_delete`]).
    pub(crate) fn check_delete(
        &self,
        delete: &RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        let from = self
            .delete
            .as_ref()
            .map(RemotePartitionDeleteMetadata::state);
        if RemotePartitionDeleteState::is_valid_transition(from, delete.state()) {
            Ok(())
        } else {
            Err(RemoteStorageError::IllegalPartitionDeleteTransition {
                partition: delete.topic_id_partition().clone(),
                from,
                to: delete.state(),
            })
        }
    }

    /// Records a partition-delete step; `DELETE_PARTITION_FINISHED` drops
    /// every segment.
    pub(crate) fn put_delete(
        &mut self,
        delete: RemotePartitionDeleteMetadata,
    ) -> Result<(), RemoteStorageError> {
        self.check_delete(&delete)?;
        if delete.state() == RemotePartitionDeleteState::DeletePartitionFinished {
            self.segments.clear();
            self.highest_offsets.clear();
        }
        self.delete = Some(delete);
        Ok(())
    }

    /// The latest delete step.
    pub(crate) fn delete_metadata(&self) -> Option<&RemotePartitionDeleteMetadata> {
        self.delete.as_ref()
    }

    /// The `COPY_SEGMENT_FINISHED` segment holding `offset` of `epoch`: the
    /// greatest epoch start not after `offset` whose epoch end is not before
    /// it.
    pub(crate) fn lookup(
        &self,
        epoch: LeaderEpoch,
        offset: i64,
    ) -> Option<RemoteLogSegmentMetadata> {
        self.segments
            .values()
            .filter(|segment| segment.state() == RemoteLogSegmentState::CopySegmentFinished)
            .filter_map(|segment| {
                let start = *segment.segment_leader_epochs().get(&epoch)?;
                let end = segment.epoch_end_offset(epoch)?;
                (start <= offset && offset <= end).then_some((start, segment))
            })
            .max_by_key(|(start, segment)| {
                (
                    *start,
                    segment.start_offset(),
                    segment.remote_log_segment_id().id(),
                )
            })
            .map(|(_, segment)| segment.clone())
    }

    /// The highest copied offset of `epoch`.
    pub(crate) fn highest_offset_for_epoch(&self, epoch: LeaderEpoch) -> Option<i64> {
        self.highest_offsets.get(&epoch).copied()
    }

    /// Every segment, sorted by start offset (ties by segment id, so every
    /// replica lists them alike).
    pub(crate) fn list(&self) -> Vec<RemoteLogSegmentMetadata> {
        let mut segments: Vec<_> = self.segments.values().cloned().collect();
        segments
            .sort_by_key(|segment| (segment.start_offset(), segment.remote_log_segment_id().id()));
        segments
    }

    /// The segments in which `epoch` occurs, sorted as [`Self::list`].
    pub(crate) fn list_for_epoch(&self, epoch: LeaderEpoch) -> Vec<RemoteLogSegmentMetadata> {
        let mut segments = self.list();
        segments.retain(|segment| segment.segment_leader_epochs().contains_key(&epoch));
        segments
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::{assert, check},
        krabka_remote_storage::{RemoteLogSegmentDetails, RemoteLogSegmentId, TopicIdPartition},
    };

    fn tp() -> TopicIdPartition {
        TopicIdPartition::new(Uuid::from_u128(1), "t", 0)
    }

    fn segment(id: u128, start: i64, end: i64, epochs: &[(i32, i64)]) -> RemoteLogSegmentMetadata {
        let epochs = epochs.iter().map(|&(e, o)| (LeaderEpoch(e), o)).collect();
        RemoteLogSegmentMetadata::new(
            RemoteLogSegmentId::new(tp(), Uuid::from_u128(id)),
            start,
            end,
            0,
            1,
            0,
            RemoteLogSegmentDetails::new(100, RemoteLogSegmentState::CopySegmentStarted, epochs),
        )
        .unwrap()
    }

    fn update(id: u128, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate {
        RemoteLogSegmentMetadataUpdate::new(
            RemoteLogSegmentId::new(tp(), Uuid::from_u128(id)),
            5,
            None,
            state,
            2,
        )
    }

    #[test]
    fn lifecycle_is_enforced() {
        use RemoteLogSegmentState::*;
        let mut store = PartitionStore::default();
        store.add(segment(1, 0, 9, &[(0, 0)])).unwrap();
        assert!(let Err(RemoteStorageError::DuplicateSegment { .. }) = store.add(segment(1, 0, 9, &[(0, 0)])));
        assert!(let Err(RemoteStorageError::UnknownSegment { .. }) = store.update(&update(2, CopySegmentFinished)));
        assert!(
            let Err(RemoteStorageError::IllegalStateTransition { from: Some(CopySegmentStarted), to: DeleteSegmentFinished, .. })
                = store.update(&update(1, DeleteSegmentFinished))
        );
        store.update(&update(1, CopySegmentFinished)).unwrap();
        assert!(let Err(RemoteStorageError::IllegalStateTransition { .. }) = store.update(&update(1, CopySegmentFinished)));
        store.update(&update(1, DeleteSegmentStarted)).unwrap();
        store.update(&update(1, DeleteSegmentFinished)).unwrap();
        check!(store.list().is_empty());
        // Deletion does not lower the highest copied offset.
        check!(store.highest_offset_for_epoch(LeaderEpoch(0)) == Some(9));
    }

    #[test]
    fn lookups_serve_finished_segments_only() {
        use RemoteLogSegmentState::*;
        let mut store = PartitionStore::default();
        store.add(segment(1, 0, 99, &[(0, 0), (1, 50)])).unwrap();
        store.add(segment(2, 100, 199, &[(1, 100)])).unwrap();
        check!(store.lookup(LeaderEpoch(0), 10).is_none());
        store.update(&update(1, CopySegmentFinished)).unwrap();
        check!(store.lookup(LeaderEpoch(0), 10).unwrap().start_offset() == 0);
        // Offset 60 was written under epoch 1, not 0.
        check!(store.lookup(LeaderEpoch(0), 60).is_none());
        check!(store.lookup(LeaderEpoch(1), 60).unwrap().start_offset() == 0);
        check!(store.lookup(LeaderEpoch(1), 150).is_none());
        store.update(&update(2, CopySegmentFinished)).unwrap();
        check!(store.lookup(LeaderEpoch(1), 150).unwrap().start_offset() == 100);
        check!(store.highest_offset_for_epoch(LeaderEpoch(0)) == Some(49));
        check!(store.highest_offset_for_epoch(LeaderEpoch(1)) == Some(199));
        check!(store.list_for_epoch(LeaderEpoch(0)).len() == 1);
        check!(store.list_for_epoch(LeaderEpoch(1)).len() == 2);
    }

    #[test]
    fn partition_delete_steps_in_order_and_blocks_new_segments() {
        use RemotePartitionDeleteState::*;
        let mut store = PartitionStore::default();
        store.add(segment(1, 0, 9, &[(0, 0)])).unwrap();
        let step = |state| RemotePartitionDeleteMetadata::new(tp(), state, 1, 1);
        assert!(let Err(RemoteStorageError::IllegalPartitionDeleteTransition { from: None, .. }) = store.put_delete(step(DeletePartitionStarted)));
        store.put_delete(step(DeletePartitionMarked)).unwrap();
        assert!(let Err(RemoteStorageError::PartitionDeleted { .. }) = store.add(segment(2, 10, 19, &[(0, 10)])));
        assert!(
            let Err(RemoteStorageError::PartitionDeleted { .. })
                = store.update(&update(1, RemoteLogSegmentState::CopySegmentFinished))
        );
        store
            .update(&update(1, RemoteLogSegmentState::DeleteSegmentStarted))
            .unwrap();
        store.put_delete(step(DeletePartitionStarted)).unwrap();
        store.put_delete(step(DeletePartitionFinished)).unwrap();
        check!(store.list().is_empty());
        check!(store.delete_metadata().unwrap().state() == DeletePartitionFinished);
    }
}
