//! The batch coordinator: the one authority on the order and offsets of
//! diskless batches.
//!
//! Brokers hold no diskless state of their own; everything they must agree
//! on goes through this trait, and an implementation makes each call one
//! atomic step (in PostgreSQL, one transaction that locks the partitions
//! it touches in a fixed order). That is what lets any broker accept
//! produce for any partition: two brokers committing at once are ordered
//! by the coordinator, never by each other.

use {
    super::types::{
        BatchError, Committed, Consolidate, Consolidated, DeleteRecords, DisklessPartition,
        FindBatches, FoundBatches, ListOffsetsQuery, LogInfo, ObjectCommit, ObjectKey,
        OffsetAnswer, PartitionError, ProducerInfo, RetentionOutcome, RetentionPolicy,
    },
    crate::RemoteStorageError,
    async_trait::async_trait,
    krabka_ids::BrokerId,
    uuid::Uuid,
};

/// Orders diskless batches and answers where they are.
///
/// Guarantees every implementation keeps (checked by
/// [`conformance`](super::conformance)):
///
/// - offsets of a partition are dense and increase in commit order; a
///   committed batch is visible to every later call;
/// - a commit is all or nothing for the batches it accepts, and refusing
///   one batch does not refuse the others;
/// - an idempotent producer's retried batch is answered with its original
///   offsets and adds nothing; a batch whose sequence does not follow, or
///   whose epoch is stale, is refused with Kafka's error;
/// - a producer is described by its last accepted batch (epoch, last
///   sequence, largest timestamp), and forgotten by
///   [`expire_producers`](Self::expire_producers) only once that batch's
///   timestamp is below the horizon; a forgotten producer may start again
///   at any sequence;
/// - an object none of whose batches is live any more (never accepted,
///   deleted by retention, DeleteRecords or topic deletion) is offered for
///   deletion once it has been dead for the grace period, and never before;
/// - an object its uploader abandoned is dead unless its commit went
///   through, and once abandoned it can no longer be committed;
/// - consolidated offsets (below the batch start, from the log start) are
///   found in no batch: a fetch there is answered with no batches, and the
///   reader goes to the tiered segments; the log start, the high watermark
///   and DeleteRecords are unchanged by a consolidation.
#[async_trait]
pub trait BatchCoordinator: Send + Sync + std::fmt::Debug {
    /// Makes `partitions` known, each starting empty at offset 0. Creating
    /// a partition that already exists changes nothing.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator itself fails.
    async fn create_partitions(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<(), RemoteStorageError>;

    /// Commits an uploaded object: each batch is accepted (and assigned
    /// offsets) or refused on its own; the answers are in batch order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails; then nothing of
    /// the object was committed.
    async fn commit_object(
        &self,
        commit: &ObjectCommit,
    ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError>;

    /// Finds the batches that answer each fetch, in request order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn find_batches(
        &self,
        requests: &[FindBatches],
    ) -> Result<Vec<Result<FoundBatches, PartitionError>>, RemoteStorageError>;

    /// Answers ListOffsets questions, in request order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn list_offsets(
        &self,
        requests: &[ListOffsetsQuery],
    ) -> Result<Vec<Result<OffsetAnswer, PartitionError>>, RemoteStorageError>;

    /// The offsets and sizes of partitions, in request order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn log_info(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<LogInfo, PartitionError>>, RemoteStorageError>;

    /// Moves log start offsets forward (Kafka's DeleteRecords); answers the
    /// new log start offset of each, in request order. An offset above the
    /// high watermark is `OFFSET_OUT_OF_RANGE`; one below the current log
    /// start changes nothing.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn delete_records(
        &self,
        requests: &[DeleteRecords],
    ) -> Result<Vec<Result<i64, PartitionError>>, RemoteStorageError>;

    /// Records consolidations ([`Consolidate`]): the batches below `to`
    /// leave the partition (objects left with no live batch become dead)
    /// and its batch start becomes `to`, only if the batch start is `from`
    /// and `to` ends a batch at or below the high watermark — a
    /// compare-and-set, so of two brokers consolidating the same range one
    /// is [`Consolidated::Refused`]. Answers in request order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails; then nothing
    /// changed.
    async fn consolidate(
        &self,
        requests: &[Consolidate],
    ) -> Result<Vec<Result<Consolidated, PartitionError>>, RemoteStorageError>;

    /// Applies time and size retention at time `now_ms`, removing whole
    /// batches from the start of each partition; answers in request order.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn enforce_retention(
        &self,
        policies: &[RetentionPolicy],
        now_ms: i64,
    ) -> Result<Vec<Result<RetentionOutcome, PartitionError>>, RemoteStorageError>;

    /// Forgets every partition of these topics; their objects become dead.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn delete_topics(&self, topic_ids: &[Uuid]) -> Result<(), RemoteStorageError>;

    /// Records an object its uploader could not commit — its upload failed
    /// (it may have landed anyway) or its commit did (the answer may have
    /// been lost after the commit happened) — as dead since now, so the
    /// cleaner deletes it from the store. If a commit of the object went
    /// through, its batches own it and nothing changes. Atomic against that
    /// commit: once this has recorded the object, committing it fails, so
    /// an abandoned object never gets live batches. Answers whether the
    /// object was recorded now.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails; the uploader
    /// tries again later.
    async fn abandon_object(
        &self,
        key: &ObjectKey,
        uploader: BrokerId,
        size: u64,
    ) -> Result<bool, RemoteStorageError>;

    /// Objects dead since `dead_before_ms` or earlier: the cleaner deletes
    /// them from the store, then calls [`delete_objects`](Self::delete_objects).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn objects_to_delete(
        &self,
        dead_before_ms: i64,
    ) -> Result<Vec<ObjectKey>, RemoteStorageError>;

    /// Forgets objects the cleaner removed from the store. Keys that are
    /// not dead (or not known) are left alone.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn delete_objects(&self, keys: &[ObjectKey]) -> Result<(), RemoteStorageError>;

    /// Which of `keys` the coordinator has no record of — neither committed
    /// nor abandoned, or already forgotten by the cleaner — in the order
    /// given. The orphan sweep asks this of the objects it lists.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn unknown_objects(
        &self,
        keys: &[ObjectKey],
    ) -> Result<Vec<ObjectKey>, RemoteStorageError>;

    /// The idempotent producers each partition knows, by producer id, in
    /// request order (Kafka's DescribeProducers).
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails.
    async fn describe_producers(
        &self,
        partitions: &[DisklessPartition],
    ) -> Result<Vec<Result<Vec<ProducerInfo>, PartitionError>>, RemoteStorageError>;

    /// Forgets, on every partition, the producers whose last batch's
    /// largest timestamp is below `idle_before_ms` — now minus Kafka's
    /// `producer.id.expiration.ms`, as `ProducerStateManager` expires
    /// producers of a classic partition; answers how many it forgot.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError`] when the coordinator fails; producers already
    /// forgotten stay forgotten (the next call finishes the work).
    async fn expire_producers(&self, idle_before_ms: i64) -> Result<u64, RemoteStorageError>;
}
