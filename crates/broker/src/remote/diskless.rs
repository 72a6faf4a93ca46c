//! The remote tier's side of diskless consolidation: a diskless
//! partition's cold batches become ordinary KIP-405 segments
//! (`crate::diskless::consolidate` builds and commits them), and these
//! are the tier operations on such a partition, addressed by its
//! [`TopicIdPartition`] alone because it has no local log.
//!
//! Any broker serves a diskless partition, so any broker may read its
//! segments: a partition's remote metadata is loaded on first use
//! ([`RemoteLogManager::load_diskless`]), on every broker that reads it,
//! and kept loaded. Reads and timestamp lookups run on the remote reader
//! threads, as a classic partition's do.

use {
    super::{
        RemoteLogManager,
        read::{RemoteReadError, TimestampQuery, cut_at},
    },
    bytes::Bytes,
    krabka_log::TimestampOffset,
    krabka_remote_storage::{
        RemoteLogSegmentMetadata, RemoteLogSegmentState, RemoteStorageError, TopicIdPartition,
    },
    std::sync::{Arc, PoisonError},
};

impl RemoteLogManager {
    /// Makes sure the metadata of `tp` is loaded here (assigned to the
    /// metadata manager and caught up), once per broker run. Blocking.
    ///
    /// # Errors
    ///
    /// The metadata manager's error, or a timeout while it catches up.
    pub(crate) fn load_diskless(&self, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        let known = self
            .diskless_loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tp);
        if known {
            return Ok(());
        }
        self.wait_ready(tp)?;
        self.diskless_loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tp.clone());
        Ok(())
    }

    /// The finished segments of a diskless partition, oldest first.
    /// Blocking.
    ///
    /// # Errors
    ///
    /// The metadata manager's error.
    pub(crate) fn diskless_segments(
        &self,
        tp: &TopicIdPartition,
    ) -> Result<Vec<RemoteLogSegmentMetadata>, RemoteStorageError> {
        self.load_diskless(tp)?;
        self.finished_segments(tp)
    }

    /// Finishes what a consolidator left unfinished in the partition's
    /// metadata more than `age_ms` ago: a copy stuck in
    /// `COPY_SEGMENT_STARTED` (its broker died mid-copy; nothing was
    /// forgotten for it) is deleted, an interrupted delete is completed.
    /// Answers how many it handled. Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error.
    pub(crate) fn clean_unfinished_diskless(
        &self,
        tp: &TopicIdPartition,
        age_ms: i64,
    ) -> Result<usize, RemoteStorageError> {
        self.load_diskless(tp)?;
        let before = super::now_ms().saturating_sub(age_ms);
        let mut handled = 0;
        for m in self.metadata.list_remote_log_segments(tp)? {
            if m.event_timestamp_ms() > before {
                continue;
            }
            match m.state() {
                RemoteLogSegmentState::CopySegmentStarted => {
                    tracing::info!(segment = %m.remote_log_segment_id(), "cleaning up an unfinished consolidation copy");
                    self.delete_remote(&m, true)?;
                }
                RemoteLogSegmentState::DeleteSegmentStarted => self.delete_remote(&m, false)?,
                _ => continue,
            }
            handled += 1;
        }
        Ok(handled)
    }

    /// A fetch of consolidated offsets of a diskless partition: whole
    /// batches from `offset`, none at or past `upper`.
    ///
    /// # Errors
    ///
    /// [`RemoteReadError::Refused`] when the reader queue is full,
    /// [`RemoteReadError::Storage`] when the tier or metadata fails.
    pub async fn read_diskless(
        self: &Arc<Self>,
        tp: TopicIdPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper: i64,
    ) -> Result<Bytes, RemoteReadError> {
        let rlm = Arc::clone(self);
        let topic = tp.topic().to_owned();
        let outcome = self
            .readers
            .run(move || {
                rlm.load_diskless(&tp)?;
                let read = rlm.read_blocking(&tp, offset, max_bytes, min_one_batch)?;
                Ok::<_, RemoteStorageError>(cut_at(&read, upper).0)
            })
            .await
            .map_err(RemoteReadError::from)
            .and_then(|r| r.map_err(RemoteReadError::from));
        match &outcome {
            Ok(records) => super::metrics::fetch_done(&topic, records.len()),
            Err(_) => super::metrics::fetch_failed(&topic),
        }
        outcome
    }

    /// A ListOffsets lookup over a diskless partition's segments from
    /// `start` (its log start).
    ///
    /// # Errors
    ///
    /// As [`RemoteLogManager::read_diskless`].
    pub async fn find_diskless_offset(
        self: &Arc<Self>,
        tp: TopicIdPartition,
        query: TimestampQuery,
        start: i64,
    ) -> Result<Option<TimestampOffset>, RemoteReadError> {
        let rlm = Arc::clone(self);
        self.readers
            .run(move || {
                rlm.load_diskless(&tp)?;
                match query {
                    TimestampQuery::AtOrAfter(ts) => rlm.offset_for_timestamp_in(&tp, ts, start),
                    TimestampQuery::Max => rlm.max_timestamp_offset_in(&tp, start),
                }
            })
            .await?
            .map_err(RemoteReadError::from)
    }
}
