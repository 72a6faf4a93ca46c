//! Deleting remote data on request: DeleteRecords below the local log start,
//! topic deletion (the partition delete lifecycle), and turning
//! `remote.storage.enable` off with `remote.log.delete.on.disable=true`
//! (KIP-950).
//!
//! A topic deletion or a disable must finish even if the broker stops in the
//! middle, and by then the topic may be gone from the registry, so each
//! partition to clear is first recorded as pending in a [`DeletionStore`];
//! the remote log manager's task works through the stores on every pass
//! (also the first one after a restart) and drops an entry only once its
//! remote data is gone; a failed entry waits for a later pass. A topic
//! deletion walks the partition through `DELETE_PARTITION_MARKED` →
//! `DELETE_PARTITION_STARTED` → (every segment through the segment delete
//! lifecycle) → `DELETE_PARTITION_FINISHED`, resuming from whichever step
//! the metadata shows. A disable uses the segment lifecycle alone, as Kafka
//! does, so tiering can be turned on again afterwards.
//!
//! On a single node the store is a small journal file in the log dir
//! ([`DeletionJournal`]), written before the topic is deleted. In cluster
//! mode a broker is stateless and may never come back, so a diskless
//! topic's deletion records its partitions in the cluster database instead,
//! in the transaction that deletes the topic
//! (`krabka_cluster::remote_deletions`): every broker's pass claims entries
//! there (`crate::cluster::remote_deletions::DbDeletionStore`), so the
//! segments its consolidation wrote are deleted even if the deleting broker
//! dies at once; a dead broker's claims pass to the others. A copy may be
//! uploading into the partition meanwhile (a consolidation that began
//! before the deletion): its finish is refused and its broker deletes what
//! it uploaded, and the entry stays pending until no copy can still land
//! (this broker's own are tracked, other brokers' age out after
//! [`UNFINISHED_AGE_MS`]), so nothing is left in the tier.
//!
//! DeleteRecords moves the partition's log start, which for a tiered
//! partition may lie below the local log start: the partition has its log
//! keep it as its log start floor (`krabka_log::Log::raise_log_start_floor`,
//! a durable checkpoint of the log's own), because the remote metadata
//! cannot hold an offset in the middle of a remote segment; the task deletes
//! the remote segments wholly below it.

use {
    super::{
        RemoteLogManager, UNFINISHED_AGE_MS, backend, now_ms, settings::MetadataManagerChoice,
    },
    crate::{
        broker::Broker,
        error::BrokerError,
        partition::{Partition, TierOffsets},
    },
    krabka_remote_storage::{
        RemoteLogSegmentMetadata, RemoteLogSegmentState, RemotePartitionDeleteMetadata,
        RemotePartitionDeleteState, RemoteStorageError, TopicIdPartition,
    },
    std::{
        path::{Path, PathBuf},
        sync::{Mutex, PoisonError},
        time::{Duration, Instant},
    },
    uuid::Uuid,
};

/// The journal file of pending remote deletions, in the log dir.
pub const JOURNAL_FILE: &str = "krabka-remote-deletions";
/// Longest wait for a partition's remote metadata to load.
const READY_WAIT: Duration = Duration::from_secs(30);

/// Why a partition's remote data is to be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionCause {
    /// The topic was deleted: the partition delete lifecycle.
    TopicDeleted,
    /// `remote.storage.enable` was turned off with
    /// `remote.log.delete.on.disable=true`: the segment lifecycle only.
    TieringDisabled,
}

impl DeletionCause {
    fn word(self) -> &'static str {
        match self {
            Self::TopicDeleted => "topic-deleted",
            Self::TieringDisabled => "tiering-disabled",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [Self::TopicDeleted, Self::TieringDisabled]
            .into_iter()
            .find(|c| c.word() == word)
    }
}

/// One partition whose remote data is to be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDeletion {
    /// Why.
    pub cause: DeletionCause,
    /// The partition.
    pub partition: TopicIdPartition,
}

impl PendingDeletion {
    fn line(&self) -> String {
        let tp = &self.partition;
        format!(
            "{} {} {} {}\n",
            self.cause.word(),
            tp.topic_id().hyphenated(),
            tp.partition(),
            tp.topic()
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        let cause = DeletionCause::parse(words.next()?)?;
        let id = Uuid::parse_str(words.next()?).ok()?;
        let partition = words.next()?.parse().ok()?;
        let topic = words.next()?;
        Some(Self {
            cause,
            partition: TopicIdPartition::new(id, topic.to_owned(), partition),
        })
    }
}

/// Where pending remote deletions are kept: what a task pass works
/// through, entry by entry.
pub trait DeletionStore {
    /// What the store is, for the log.
    fn name(&self) -> &'static str;

    /// The entries this broker is to work on now (a store shared by the
    /// brokers of a cluster claims them for this one). Blocking.
    ///
    /// # Errors
    ///
    /// The store's error; the pass skips the store then.
    fn take(&self) -> Result<Vec<PendingDeletion>, BrokerError>;

    /// Drops an entry whose remote data is gone. Blocking.
    ///
    /// # Errors
    ///
    /// The store's error; the entry stays and a later pass finds its data
    /// gone.
    fn finished(&self, entry: &PendingDeletion) -> Result<(), BrokerError>;

    /// An entry whose deletion failed: it stays for a later pass (a shared
    /// store lets any broker take it). Blocking.
    ///
    /// # Errors
    ///
    /// The store's error.
    fn failed(&self, _entry: &PendingDeletion) -> Result<(), BrokerError> {
        Ok(())
    }
}

/// The durable list of partitions whose remote data is still to go.
#[derive(Debug)]
pub struct DeletionJournal {
    path: PathBuf,
    entries: Mutex<Vec<PendingDeletion>>,
}

impl DeletionJournal {
    /// Reads the journal under `log_dir` (empty if there is none).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Io`] if the file exists but cannot be read.
    pub fn open(log_dir: &Path) -> Result<Self, BrokerError> {
        let path = log_dir.join(JOURNAL_FILE);
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .lines()
                .filter_map(|line| {
                    let entry = PendingDeletion::parse(line);
                    if entry.is_none() && !line.trim().is_empty() {
                        tracing::warn!(line, "ignoring a malformed remote-deletion journal line");
                    }
                    entry
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(BrokerError::Io {
                    action: "read the remote-deletion journal",
                    path,
                    source,
                });
            }
        };
        Ok(Self {
            path,
            entries: Mutex::new(entries),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PendingDeletion>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn persist(&self, entries: &[PendingDeletion]) -> Result<(), BrokerError> {
        let text: String = entries.iter().map(PendingDeletion::line).collect();
        krabka_log::checkpoint::write_atomic(&self.path, text.as_bytes())
            .map_err(|e| BrokerError::Task(format!("write {}: {e}", self.path.display())))
    }

    /// Adds entries (durably) unless already there.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written; nothing is
    /// added then.
    pub fn add(&self, new: &[PendingDeletion]) -> Result<(), BrokerError> {
        let mut entries = self.lock();
        let mut next = entries.clone();
        for entry in new {
            if !next.contains(entry) {
                next.push(entry.clone());
            }
        }
        self.persist(&next)?;
        *entries = next;
        Ok(())
    }

    /// Drops every entry `gone` picks (durably).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written; the entries stay.
    pub fn remove_where(&self, gone: impl Fn(&PendingDeletion) -> bool) -> Result<(), BrokerError> {
        let mut entries = self.lock();
        let next: Vec<PendingDeletion> = entries.iter().filter(|e| !gone(e)).cloned().collect();
        if next.len() != entries.len() {
            self.persist(&next)?;
            *entries = next;
        }
        Ok(())
    }

    /// Drops a finished entry (durably).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written; the entry stays.
    pub fn remove(&self, done: &PendingDeletion) -> Result<(), BrokerError> {
        self.remove_where(|e| e == done)
    }

    /// The entries still pending.
    #[must_use]
    pub fn pending(&self) -> Vec<PendingDeletion> {
        self.lock().clone()
    }

    /// Whether remote data of `topic` is still being deleted after tiering
    /// was turned off.
    #[must_use]
    pub fn disabling(&self, topic: &str) -> bool {
        self.lock()
            .iter()
            .any(|e| e.cause == DeletionCause::TieringDisabled && e.partition.topic() == topic)
    }
}

impl DeletionStore for DeletionJournal {
    fn name(&self) -> &'static str {
        "the remote-deletion journal"
    }

    fn take(&self) -> Result<Vec<PendingDeletion>, BrokerError> {
        Ok(self.pending())
    }

    fn finished(&self, entry: &PendingDeletion) -> Result<(), BrokerError> {
        self.remove(entry)
    }
}

/// Kafka's reason for refusing to turn tiering off without deleting.
pub const DISABLE_WITHOUT_DELETE: &str = "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.";

/// What a change of a topic's `remote.storage.enable` asks for (KIP-950).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieringChange {
    /// No change of `remote.storage.enable`.
    None,
    /// Turned off: the remote data is to be deleted.
    Disable,
    /// Turned on (again).
    Enable,
}

/// Kafka's rules for turning `remote.storage.enable` of an existing topic
/// on or off: turning it off needs `remote.log.delete.on.disable=true` in
/// the new configuration; turning it on again waits until the remote data
/// of an earlier disable is gone (`disabling`).
///
/// # Errors
///
/// The reason text for `INVALID_CONFIG`.
pub fn validate_tiering_change(
    topic: &str,
    was_enabled: bool,
    now_enabled: bool,
    delete_on_disable: bool,
    disabling: bool,
) -> Result<TieringChange, String> {
    match (was_enabled, now_enabled) {
        (true, false) if !delete_on_disable => Err(DISABLE_WITHOUT_DELETE.to_owned()),
        (true, false) => Ok(TieringChange::Disable),
        (false, true) if disabling => Err(format!(
            "Remote data of topic {topic} is still being deleted after remote storage was disabled; enable it again once that has finished."
        )),
        (false, true) => Ok(TieringChange::Enable),
        _ => Ok(TieringChange::None),
    }
}

/// Whether the topic of `tp` (the same topic, not one of the same name
/// created since) still has `remote.storage.enable=true`.
fn still_tiered(broker: &Broker, tp: &TopicIdPartition) -> bool {
    broker.registry.get(tp.topic()).is_some_and(|meta| {
        meta.id == tp.topic_id() && super::is_tiered(broker, &meta.configs, "remote.storage.enable")
    })
}

impl RemoteLogManager {
    /// Deletes the finished remote segments wholly below the partition's
    /// log start floor (DeleteRecords). Part of the task pass.
    pub(super) fn delete_below_log_start(
        &self,
        p: &Partition,
        tp: &TopicIdPartition,
    ) -> Result<(), RemoteStorageError> {
        let floor = p.local_log().log_start_floor();
        if floor == 0 {
            return Ok(());
        }
        let mut deleted = 0usize;
        for m in self.metadata.list_remote_log_segments(tp)? {
            if m.state() == RemoteLogSegmentState::CopySegmentFinished && m.end_offset() < floor {
                self.delete_remote(&m, true)?;
                deleted += 1;
            }
        }
        if deleted > 0 {
            tracing::info!(partition = ?p, segments = deleted, log_start = floor, "deleted remote segments below the log start");
        }
        Ok(())
    }

    /// Topic deletion on a single node: journals every partition of the
    /// topic; the task's next pass deletes its remote data (after any copy
    /// of the pass that is running, so nothing copied late is left behind).
    /// In cluster mode the database records them with the topic's deletion
    /// instead (`crate::cluster::ClusterNode::delete_topic`). Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written (nothing is
    /// deleted then, and the caller must not delete the topic).
    pub fn topic_deleted(&self, topic: &str, id: Uuid, partitions: i32) -> Result<(), BrokerError> {
        self.journal_topic(DeletionCause::TopicDeleted, topic, id, partitions)?;
        self.forget_topic(topic);
        Ok(())
    }

    /// `remote.storage.enable` turned off with
    /// `remote.log.delete.on.disable=true`: journals every partition; the
    /// task deletes the remote data. Blocking.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written.
    pub fn tiering_disabled(
        &self,
        topic: &str,
        id: Uuid,
        partitions: i32,
    ) -> Result<(), BrokerError> {
        self.journal_topic(DeletionCause::TieringDisabled, topic, id, partitions)
    }

    /// Whether remote data of `topic` is still being deleted after tiering
    /// was turned off (re-enabling must wait for it).
    #[must_use]
    pub fn disabling(&self, topic: &str) -> bool {
        self.deletions.disabling(topic)
    }

    fn journal_topic(
        &self,
        cause: DeletionCause,
        topic: &str,
        id: Uuid,
        partitions: i32,
    ) -> Result<(), BrokerError> {
        let entries: Vec<PendingDeletion> = (0..partitions)
            .map(|index| PendingDeletion {
                cause,
                partition: TopicIdPartition::new(id, topic.to_owned(), index),
            })
            .collect();
        self.deletions.add(&entries)
    }

    /// Forgets the task's state of a deleted topic's partitions (its
    /// remote data is recorded as pending elsewhere).
    pub(crate) fn forget_topic(&self, topic: &str) {
        self.lock().retain(|(t, _), _| t != topic);
    }

    /// An alter that journaled a disable but could not store the new
    /// configuration: the entries go again, since tiering stays on.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Task`] if the journal cannot be written.
    pub fn tiering_disable_aborted(&self, topic: &str) -> Result<(), BrokerError> {
        self.deletions.remove_where(|e| {
            e.cause == DeletionCause::TieringDisabled && e.partition.topic() == topic
        })
    }

    /// At start: a disable whose alter never stored the configuration (the
    /// broker stopped in between) was never answered, so the topic is still
    /// tiered and its remote data must stay. Blocking.
    pub(super) fn drop_unfinished_disables(&self, broker: &Broker) {
        let unfinished = |e: &PendingDeletion| {
            e.cause == DeletionCause::TieringDisabled && still_tiered(broker, &e.partition)
        };
        if self.deletions.pending().iter().any(unfinished) {
            tracing::warn!(
                "dropping remote deletions of an alter that did not finish: the topic is still tiered"
            );
            if let Err(e) = self.deletions.remove_where(unfinished) {
                tracing::warn!(error = %e, "dropping unfinished remote deletions failed");
            }
        }
    }

    /// Works through the pending deletions: this broker's journal, and in
    /// cluster mode the entries it claims in the cluster database. An entry
    /// that fails stays for the next pass. Runs on the task's thread only,
    /// so it never overlaps a copy or a consolidation of this broker.
    /// A broker whose remote metadata is in memory (a test setting) takes
    /// no entry of the database: it cannot see the segments other brokers
    /// wrote, and would drop entries whose data it never deleted.
    pub(super) fn process_pending_deletions(&self, broker: &Broker) {
        self.work_through(broker, &self.deletions);
        if let Some(node) = broker.cluster.get()
            && self.settings.metadata_manager == MetadataManagerChoice::Topic
        {
            self.work_through(
                broker,
                &crate::cluster::remote_deletions::DbDeletionStore::new(node),
            );
        }
    }

    /// Works through one store's entries. A disable waits until its alter
    /// has stored the new configuration: before that the pass may still
    /// copy, and a copy made after the deletion would be left in the tier
    /// with nobody to delete it.
    fn work_through(&self, broker: &Broker, store: &dyn DeletionStore) {
        let entries = match store.take() {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(store = store.name(), error = %e, "cannot read pending remote deletions; retrying later");
                return;
            }
        };
        for entry in entries {
            if self.stopping() {
                return;
            }
            if entry.cause == DeletionCause::TieringDisabled
                && still_tiered(broker, &entry.partition)
            {
                continue;
            }
            match self.delete_partition_data(&entry) {
                Ok(()) => {
                    if let Err(e) = store.finished(&entry) {
                        tracing::warn!(store = store.name(), error = %e, "remote deletion done but not recorded");
                    }
                    if entry.cause == DeletionCause::TieringDisabled {
                        // The next enable starts from an empty tier.
                        let (topic, index) = (entry.partition.topic(), entry.partition.partition());
                        self.lock().remove(&(topic.to_owned(), index));
                        if let Some(p) = broker
                            .partitions
                            .get(topic, index)
                            .filter(|p| p.topic_id == entry.partition.topic_id())
                        {
                            p.publish_tier_offsets(TierOffsets::default());
                        }
                    }
                    tracing::info!(partition = %entry.partition, cause = entry.cause.word(), "remote data deleted");
                }
                Err(e) => {
                    tracing::warn!(partition = %entry.partition, error = %e, "deleting remote data failed; retrying later");
                    if let Err(e) = store.failed(&entry) {
                        tracing::warn!(store = store.name(), error = %e, "cannot give up a failed remote deletion");
                    }
                }
            }
        }
    }

    pub(super) fn wait_ready(&self, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        self.metadata
            .on_partition_leadership_changes(std::slice::from_ref(tp), &[])?;
        let waited = Instant::now();
        while !self.metadata.is_ready(tp) {
            if waited.elapsed() > READY_WAIT {
                return Err(backend(format!("metadata of {tp} not ready")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Deletes `segments` through the delete lifecycle (finishing deletes
    /// already started). Blocking.
    ///
    /// # Errors
    ///
    /// The tier's or the metadata manager's error (the rest are left for
    /// the next pass).
    pub(crate) fn delete_segments(
        &self,
        segments: &[RemoteLogSegmentMetadata],
    ) -> Result<(), RemoteStorageError> {
        for m in segments {
            let started = m.state() == RemoteLogSegmentState::DeleteSegmentStarted;
            self.delete_remote(m, !started)?;
        }
        Ok(())
    }

    /// Deletes every segment of a partition whose remote data is to go,
    /// except copies that may still be uploading: this broker's own copies
    /// under way, and other brokers' begun less than [`UNFINISHED_AGE_MS`]
    /// ago (a consolidation that began before the topic was deleted), whose
    /// data would land after a delete. Those are left to a later pass, and
    /// the error keeps the entry pending until nothing can land any more.
    fn delete_all_segments(&self, tp: &TopicIdPartition) -> Result<(), RemoteStorageError> {
        let recent = now_ms().saturating_sub(UNFINISHED_AGE_MS);
        let (in_flight, done): (Vec<_>, Vec<_>) = self
            .metadata
            .list_remote_log_segments(tp)?
            .into_iter()
            .partition(|m| {
                m.state() == RemoteLogSegmentState::CopySegmentStarted
                    && if m.broker_id().0 == self.broker_id {
                        self.is_copying(m.remote_log_segment_id().id())
                    } else {
                        m.event_timestamp_ms() > recent
                    }
            });
        self.delete_segments(&done)?;
        if in_flight.is_empty() {
            Ok(())
        } else {
            Err(backend(format!(
                "{} copies into {tp} may still be uploading (under way here, or begun by another broker less than {} minutes ago); they are deleted on a later pass",
                in_flight.len(),
                UNFINISHED_AGE_MS / 60_000
            )))
        }
    }

    fn delete_partition_data(&self, entry: &PendingDeletion) -> Result<(), RemoteStorageError> {
        let tp = &entry.partition;
        self.wait_ready(tp)?;
        match entry.cause {
            DeletionCause::TieringDisabled => self.delete_all_segments(tp),
            DeletionCause::TopicDeleted => {
                use RemotePartitionDeleteState::{
                    DeletePartitionFinished, DeletePartitionMarked, DeletePartitionStarted,
                };
                let put = |state| {
                    self.metadata.put_remote_partition_delete_metadata(
                        RemotePartitionDeleteMetadata::new(
                            tp.clone(),
                            state,
                            now_ms(),
                            self.broker_id,
                        ),
                    )
                };
                let mut step = self
                    .metadata
                    .remote_partition_delete_metadata(tp)?
                    .map(|d| d.state());
                if step.is_none() {
                    put(DeletePartitionMarked)?;
                    step = Some(DeletePartitionMarked);
                }
                if step == Some(DeletePartitionMarked) {
                    put(DeletePartitionStarted)?;
                    step = Some(DeletePartitionStarted);
                }
                if step == Some(DeletePartitionStarted) {
                    self.delete_all_segments(tp)?;
                    put(DeletePartitionFinished)?;
                }
                self.metadata
                    .on_stopped_partitions(std::slice::from_ref(tp))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn kip950_disable_needs_delete_and_reenable_waits_for_it() {
        check!(
            validate_tiering_change("t", true, false, false, false)
                == Err(DISABLE_WITHOUT_DELETE.to_owned())
        );
        check!(
            validate_tiering_change("t", true, false, true, false) == Ok(TieringChange::Disable)
        );
        check!(validate_tiering_change("t", false, true, false, true).is_err());
        check!(
            validate_tiering_change("t", false, true, false, false) == Ok(TieringChange::Enable)
        );
        check!(validate_tiering_change("t", true, true, false, true) == Ok(TieringChange::None));
        check!(validate_tiering_change("t", false, false, false, false) == Ok(TieringChange::None));
    }

    #[test]
    fn journal_survives_reopen_and_forgets_finished_entries() {
        let dir = tempfile::tempdir().unwrap();
        let journal = DeletionJournal::open(dir.path()).unwrap();
        check!(journal.pending().is_empty());
        let id = Uuid::new_v4();
        let a = PendingDeletion {
            cause: DeletionCause::TopicDeleted,
            partition: TopicIdPartition::new(id, "gone".to_owned(), 0),
        };
        let b = PendingDeletion {
            cause: DeletionCause::TieringDisabled,
            partition: TopicIdPartition::new(id, "off.topic_1".to_owned(), 3),
        };
        journal.add(&[a.clone(), b.clone(), a.clone()]).unwrap();
        let reopened = DeletionJournal::open(dir.path()).unwrap();
        check!(reopened.pending() == vec![a.clone(), b.clone()]);
        check!(reopened.disabling("off.topic_1"));
        check!(!reopened.disabling("gone"));
        reopened.remove(&a).unwrap();
        check!(DeletionJournal::open(dir.path()).unwrap().pending() == vec![b]);
    }
}
