//! The produce side of diskless topics: one shared open object per broker,
//! closed by size or time, uploaded, then committed in order.
//!
//! Every diskless batch a broker receives — any partition, any client —
//! goes into the one open object, so the number of PUTs follows the bytes
//! written, not the number of partitions. The object closes when it
//! reaches `max_object_bytes` or `commit_interval` after its first batch.
//! Closed objects upload side by side (up to `upload_parallelism`), but
//! they are committed strictly in the order they were opened: a producer's
//! consecutive batches may sit in consecutive objects, and the coordinator
//! must see them in order. Each batch's sender is answered after the
//! commit, with its offsets or its refusal.
//!
//! A failed upload or a failed commit answers every batch of the object
//! with a retriable error; nothing of it is visible. Either may still have
//! left the object in the store — an upload whose answer was lost landed,
//! a commit whose answer was lost happened — so the writer never deletes
//! it itself: it asks the coordinator to record the object as abandoned
//! ([`BatchCoordinator::abandon_object`]), which makes it dead unless its
//! commit went through, and the cleaner deletes it with the other dead
//! objects. While the coordinator cannot answer (a database outage is when
//! commits fail), the writer keeps the keys and tries again with backoff.

use {
    super::{
        buffers::BufferPool,
        coordinator::BatchCoordinator,
        object::ObjectBuilder,
        store::DisklessStore,
        types::{BatchError, CommitBatch, Committed, DisklessPartition, ObjectCommit},
    },
    crate::RemoteStorageError,
    bytes::Bytes,
    krabka_ids::BrokerId,
    std::{
        collections::VecDeque,
        sync::{Arc, Mutex, PoisonError},
        time::Duration,
    },
    tokio::{
        sync::{Notify, Semaphore, mpsc, oneshot},
        task::JoinHandle,
        time::Instant,
    },
};

/// Object buffers kept between objects (see [`BufferPool`]): enough for
/// the next objects while evicted ones come back, a few object sizes of
/// memory at most.
const SPARE_BUFFERS: usize = 4;

/// How a broker's writer gathers and commits objects.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// The broker whose writer this is.
    pub uploader: BrokerId,
    /// An object closes once its batches reach this many bytes
    /// (`diskless.object.max.bytes`).
    pub max_object_bytes: usize,
    /// An object closes this long after its first batch
    /// (`diskless.commit.interval.ms`).
    pub commit_interval: Duration,
    /// Objects uploading at once.
    pub upload_parallelism: usize,
}

/// Why a batch was not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The coordinator refused this batch (and only it).
    #[error(transparent)]
    Refused(#[from] BatchError),
    /// The object could not be uploaded or committed; retriable.
    #[error("diskless object not committed: {0}")]
    Failed(String),
    /// The writer is shutting down.
    #[error("diskless writer stopped")]
    Stopped,
}

/// The answer for one appended batch.
pub type Appended = oneshot::Receiver<Result<Committed, WriteError>>;

/// Told which partitions a commit made new offsets visible on.
pub type OnCommit = Arc<dyn Fn(&[DisklessPartition]) + Send + Sync>;

struct Waiting {
    batch: CommitBatch,
    done: oneshot::Sender<Result<Committed, WriteError>>,
}

#[derive(Default)]
struct Open {
    builder: ObjectBuilder,
    waiting: Vec<Waiting>,
    /// Counts opened objects, so a timer closes only the object it was set for.
    generation: u64,
    opened_at: Option<Instant>,
}

struct Closed {
    bytes: Bytes,
    waiting: Vec<Waiting>,
    closed_at: Instant,
}

struct Shared {
    config: WriterConfig,
    open: Mutex<Open>,
    /// Buffers of objects gone from the cache, for the next objects.
    buffers: Arc<BufferPool>,
    opened: Notify,
    closed: mpsc::Sender<Closed>,
}

/// A broker's diskless object writer.
pub struct ObjectWriter {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectWriter")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the open object if it is `generation` (any, when `None`) and
    /// has batches.
    fn take(&self, generation: Option<u64>) -> Option<Closed> {
        let mut open = self.lock();
        if open.builder.is_empty() || generation.is_some_and(|g| g != open.generation) {
            return None;
        }
        let taken = std::mem::take(&mut *open);
        open.generation = taken.generation + 1;
        drop(open);
        let closed_at = Instant::now();
        if let Some(opened_at) = taken.opened_at {
            metrics::histogram!("krabka_diskless_object_fill_seconds")
                .record((closed_at - opened_at).as_secs_f64());
        }
        Some(Closed {
            bytes: self.buffers.freeze(taken.builder.finish_vec()),
            waiting: taken.waiting,
            closed_at,
        })
    }
}

impl ObjectWriter {
    /// Starts a writer uploading to `store` and committing to
    /// `coordinator`; `on_commit` hears of every commit. Must be called
    /// within a tokio runtime.
    #[must_use]
    pub fn start(
        config: WriterConfig,
        store: DisklessStore,
        coordinator: Arc<dyn BatchCoordinator>,
        on_commit: OnCommit,
    ) -> Self {
        let parallelism = config.upload_parallelism.max(1);
        let (closed, closed_rx) = mpsc::channel(parallelism);
        let shared = Arc::new(Shared {
            config,
            open: Mutex::default(),
            buffers: BufferPool::new(SPARE_BUFFERS),
            opened: Notify::new(),
            closed,
        });
        let (uploaded_tx, uploaded_rx) = mpsc::channel(parallelism);
        let (abandoned_tx, abandoned_rx) = mpsc::unbounded_channel();
        let tasks = vec![
            tokio::spawn(timer(Arc::clone(&shared))),
            tokio::spawn(upload(
                closed_rx,
                uploaded_tx,
                store,
                Arc::new(Semaphore::new(parallelism)),
                shared.config.uploader,
            )),
            tokio::spawn(commit(
                uploaded_rx,
                Arc::clone(&coordinator),
                on_commit,
                abandoned_tx,
            )),
            tokio::spawn(abandon(abandoned_rx, coordinator)),
        ];
        Self { shared, tasks }
    }

    /// Adds one validated batch to the open object; the receiver gets its
    /// offsets once the object is committed. `batch.position` and
    /// `batch.size` are filled in here.
    pub async fn append(&self, batch: CommitBatch, bytes: &[u8]) -> Appended {
        self.append_patched(batch, bytes, |_| {}).await
    }

    /// [`ObjectWriter::append`], with `patch` applied to the batch's copy in
    /// the object (see [`ObjectBuilder::push_patched`]).
    pub async fn append_patched(
        &self,
        mut batch: CommitBatch,
        bytes: &[u8],
        patch: impl FnOnce(&mut [u8]),
    ) -> Appended {
        let (done, appended) = oneshot::channel();
        let max = self.shared.config.max_object_bytes;
        let full = {
            let mut open = self.shared.lock();
            if open.builder.is_empty() {
                // A full object's batches and (most of) its footer, in one
                // allocation: growing by doubling copied each object about
                // once more. Memory an earlier object used when there is.
                let room = max.saturating_add(max / 8).saturating_add(bytes.len());
                let fresh = max.saturating_add(max / 4);
                open.builder = ObjectBuilder::with_buffer(self.shared.buffers.take(room, fresh));
            }
            match open.builder.push_patched(batch.partition, bytes, patch) {
                Ok(placed) => {
                    batch.position = placed.position;
                    batch.size = placed.size;
                    open.waiting.push(Waiting { batch, done });
                    if open.opened_at.is_none() {
                        open.opened_at = Some(Instant::now());
                        self.shared.opened.notify_one();
                    }
                    (open.builder.data_len() >= max).then_some(open.generation)
                }
                Err(e) => {
                    let _ = done.send(Err(WriteError::Failed(e.to_string())));
                    None
                }
            }
        };
        if let Some(closed) = full.and_then(|generation| self.shared.take(Some(generation))) {
            if let Err(mpsc::error::SendError(closed)) = self.shared.closed.send(closed).await {
                for w in closed.waiting {
                    let _ = w.done.send(Err(WriteError::Stopped));
                }
            }
        }
        appended
    }

    /// Closes the open object now, uploads and commits whatever is
    /// pending, and stops.
    pub async fn stop(self) {
        if let Some(closed) = self.shared.take(None) {
            let _ = self.shared.closed.send(closed).await;
        }
        let Self { shared, mut tasks } = self;
        // The timer never ends by itself; the upload task ends when the
        // last sender of closed objects (in `shared`) is gone, the commit
        // task after it, and the abandoning task once it has recorded
        // what it holds (or cannot: the keys are logged).
        let timer = tasks.remove(0);
        timer.abort();
        let _ = timer.await;
        drop(shared);
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// Closes each object `commit_interval` after its first batch.
async fn timer(shared: Arc<Shared>) {
    loop {
        shared.opened.notified().await;
        let (generation, deadline) = {
            let open = shared.lock();
            match open.opened_at {
                Some(at) => (open.generation, at + shared.config.commit_interval),
                None => continue,
            }
        };
        tokio::time::sleep_until(deadline).await;
        if let Some(closed) = shared.take(Some(generation)) {
            if shared.closed.send(closed).await.is_err() {
                return;
            }
        }
    }
}

struct Uploaded {
    commit: ObjectCommit,
    waiting: Vec<Waiting>,
    upload: JoinHandle<Result<(), RemoteStorageError>>,
    closed_at: Instant,
}

/// Starts uploads in the order objects closed, at most `parallel` at once,
/// and hands them on in that order.
async fn upload(
    mut closed: mpsc::Receiver<Closed>,
    uploaded: mpsc::Sender<Uploaded>,
    store: DisklessStore,
    parallel: Arc<Semaphore>,
    uploader: BrokerId,
) {
    while let Some(Closed {
        bytes,
        waiting,
        closed_at,
    }) = closed.recv().await
    {
        let Ok(permit) = Arc::clone(&parallel).acquire_owned().await else {
            return;
        };
        let key = store.new_key();
        let commit = ObjectCommit {
            key: key.clone(),
            uploader,
            size: bytes.len() as u64,
            batches: waiting.iter().map(|w| w.batch.clone()).collect(),
        };
        let store = store.clone();
        let upload = tokio::spawn(async move {
            let started = Instant::now();
            let result = store.put(&key, bytes).await;
            metrics::histogram!("krabka_diskless_object_upload_seconds")
                .record(started.elapsed().as_secs_f64());
            drop(permit);
            result
        });
        if uploaded
            .send(Uploaded {
                commit,
                waiting,
                upload,
                closed_at,
            })
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Commits uploaded objects strictly in order and answers their batches;
/// hands the objects it could not commit to [`abandon`].
async fn commit(
    mut uploaded: mpsc::Receiver<Uploaded>,
    coordinator: Arc<dyn BatchCoordinator>,
    on_commit: OnCommit,
    abandoned: mpsc::UnboundedSender<ObjectCommit>,
) {
    while let Some(Uploaded {
        commit,
        waiting,
        upload,
        closed_at,
    }) = uploaded.recv().await
    {
        let outcome = match upload.await {
            Ok(Ok(())) => {
                let started = Instant::now();
                let committed = coordinator
                    .commit_object(&commit)
                    .await
                    .map_err(|e| format!("commit of {}: {e}", commit.key));
                metrics::histogram!("krabka_diskless_object_commit_seconds")
                    .record(started.elapsed().as_secs_f64());
                committed
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("upload task of {}: {e}", commit.key)),
        };
        match outcome {
            Ok(answers) => {
                let mut touched: Vec<DisklessPartition> = waiting
                    .iter()
                    .zip(&answers)
                    .filter(|(_, a)| a.as_ref().is_ok_and(|c| !c.duplicate))
                    .map(|(w, _)| w.batch.partition)
                    .collect();
                touched.sort_unstable();
                touched.dedup();
                if !touched.is_empty() {
                    on_commit(&touched);
                }
                for (w, answer) in waiting.into_iter().zip(answers) {
                    let _ = w.done.send(answer.map_err(WriteError::Refused));
                }
                metrics::histogram!("krabka_diskless_object_closed_to_committed_seconds")
                    .record(closed_at.elapsed().as_secs_f64());
            }
            Err(reason) => {
                tracing::warn!(object = %commit.key, %reason, batches = waiting.len(), "diskless object not committed");
                for w in waiting {
                    let _ = w.done.send(Err(WriteError::Failed(reason.clone())));
                }
                let _ = abandoned.send(ObjectCommit {
                    batches: Vec::new(),
                    ..commit
                });
            }
        }
    }
}

/// Most abandoned objects waiting for the coordinator; past this the
/// oldest are dropped (and logged): they stay in the store.
const MAX_ABANDONED: usize = 100_000;
/// The wait before trying again after the coordinator failed to record an
/// abandoned object; it doubles up to [`MAX_ABANDON_BACKOFF`].
const FIRST_ABANDON_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between attempts to record abandoned objects.
const MAX_ABANDON_BACKOFF: Duration = Duration::from_secs(5);

/// Queues an abandoned object, dropping the oldest past [`MAX_ABANDONED`].
fn hold(pending: &mut VecDeque<ObjectCommit>, object: ObjectCommit) {
    if pending.len() >= MAX_ABANDONED {
        if let Some(dropped) = pending.pop_front() {
            tracing::warn!(object = %dropped.key, "too many abandoned diskless objects waiting; this one stays in the store");
        }
    }
    pending.push_back(object);
}

/// Records the objects the writer could not commit as abandoned, in the
/// order they failed, retrying with backoff while the coordinator fails.
/// Ends when the commit task has ended and nothing is left, or when the
/// coordinator still fails then (the keys left are logged).
async fn abandon(
    mut abandoned: mpsc::UnboundedReceiver<ObjectCommit>,
    coordinator: Arc<dyn BatchCoordinator>,
) {
    let mut pending = VecDeque::new();
    let mut backoff = FIRST_ABANDON_BACKOFF;
    loop {
        if pending.is_empty() {
            match abandoned.recv().await {
                Some(object) => pending.push_back(object),
                None => return,
            }
        }
        while let Ok(object) = abandoned.try_recv() {
            hold(&mut pending, object);
        }
        while let Some(object) = pending.front() {
            match coordinator
                .abandon_object(&object.key, object.uploader, object.size)
                .await
            {
                Ok(recorded) => {
                    tracing::debug!(object = %object.key, recorded, "abandoned diskless object handed to the cleaner (recorded: false means its commit had gone through)");
                    pending.pop_front();
                    backoff = FIRST_ABANDON_BACKOFF;
                }
                Err(e) => {
                    tracing::debug!(object = %object.key, error = %e, waiting = pending.len(), "recording an abandoned diskless object failed; trying again");
                    break;
                }
            }
        }
        if pending.is_empty() {
            continue;
        }
        // The coordinator failed: wait, still taking what else fails.
        let deadline = Instant::now() + backoff;
        backoff = (backoff * 2).min(MAX_ABANDON_BACKOFF);
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                next = abandoned.recv() => match next {
                    Some(object) => hold(&mut pending, object),
                    None => {
                        for object in &pending {
                            tracing::warn!(object = %object.key, "writer stopped before the coordinator recorded this abandoned diskless object; it stays in the store");
                        }
                        return;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::diskless::{
            DeleteRecords, DisklessPartition, FindBatches, FoundBatches, InMemoryBatchCoordinator,
            ListOffsetsQuery, LogInfo, ObjectCache, ObjectFile, ObjectKey, OffsetAnswer,
            PartitionError, ProducerBatch, ProducerInfo, RetentionOutcome, RetentionPolicy,
            clean_once,
        },
        assert2::check,
        async_trait::async_trait,
        object_store::local::LocalFileSystem,
        std::sync::atomic::{AtomicUsize, Ordering},
    };

    fn batch(partition: DisklessPartition, producer: Option<ProducerBatch>) -> CommitBatch {
        CommitBatch {
            partition,
            position: 0,
            size: 0,
            offset_count: 2,
            max_timestamp: 1,
            producer,
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: DisklessStore,
        coordinator: Arc<InMemoryBatchCoordinator>,
        commits: Arc<AtomicUsize>,
        partition: DisklessPartition,
    }

    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = DisklessStore::new(
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
            "",
            Arc::new(ObjectCache::new(0, 0)),
        );
        let coordinator = Arc::new(InMemoryBatchCoordinator::new());
        let partition = DisklessPartition::new(uuid::Uuid::new_v4(), 0);
        coordinator.create_partitions(&[partition]).await.unwrap();
        Fixture {
            _dir: dir,
            store,
            coordinator,
            commits: Arc::default(),
            partition,
        }
    }

    fn writer(f: &Fixture, max_object_bytes: usize, interval: Duration) -> ObjectWriter {
        let commits = Arc::clone(&f.commits);
        ObjectWriter::start(
            WriterConfig {
                uploader: BrokerId(1),
                max_object_bytes,
                commit_interval: interval,
                upload_parallelism: 4,
            },
            f.store.clone(),
            Arc::clone(&f.coordinator) as Arc<dyn BatchCoordinator>,
            Arc::new(move |_| {
                commits.fetch_add(1, Ordering::SeqCst);
            }),
        )
    }

    #[tokio::test]
    async fn batches_of_many_appends_share_one_object_closed_by_time() {
        let f = fixture().await;
        let w = writer(&f, 1 << 20, Duration::from_millis(50));
        let mut answers = Vec::new();
        for i in 0..10u8 {
            answers.push(w.append(batch(f.partition, None), &[i; 100]).await);
        }
        for (i, a) in answers.into_iter().enumerate() {
            let committed = tokio::time::timeout(Duration::from_secs(30), a)
                .await
                .expect("answered within the deadline")
                .unwrap()
                .unwrap();
            check!(committed.base_offset == 2 * i as i64);
        }
        let objects = f.store.list().await.unwrap();
        check!(objects.len() == 1, "one PUT for all ten batches");
        check!(f.commits.load(Ordering::SeqCst) == 1);
        // 10 batches of 100 bytes, 10 footer entries of 36, an 18-byte trailer.
        let bytes = f.store.read(&objects[0], 0..1378).await.unwrap();
        let object = ObjectFile::parse(&bytes).unwrap();
        check!(object.batches().len() == 10);
        check!(object.batch_bytes(&object.batches()[3]) == &[3u8; 100][..]);
        w.stop().await;
    }

    #[tokio::test]
    async fn a_full_object_s_buffer_holds_the_next_object() {
        let f = fixture().await;
        // The cache keeps nothing: an object's bytes go once committed.
        let w = writer(&f, 4096, Duration::from_secs(3600));
        for round in 0..3u8 {
            // Three batches fill the object's room (no copy to shrink it).
            let mut answers = Vec::new();
            for _ in 0..3 {
                answers.push(w.append(batch(f.partition, None), &[round; 2000]).await);
            }
            for answer in answers {
                tokio::time::timeout(Duration::from_secs(30), answer)
                    .await
                    .expect("answered within the deadline")
                    .unwrap()
                    .unwrap();
            }
            // The upload's and commit's last views are dropped just after.
            let deadline = Instant::now() + Duration::from_secs(30);
            while w.shared.buffers.spare() == 0 {
                assert!(Instant::now() < deadline, "the buffer never came back");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            check!(
                w.shared.buffers.spare() == 1,
                "one buffer, used again each round"
            );
        }
        let objects = f.store.list().await.unwrap();
        check!(objects.len() == 3);
        let mut firsts = Vec::new();
        for key in &objects {
            let bytes = f.store.read(key, 0..6000).await.unwrap();
            check!(
                bytes.iter().all(|b| *b == bytes[0]),
                "one round's batches, whole"
            );
            firsts.push(bytes[0]);
        }
        firsts.sort_unstable();
        check!(firsts == [0, 1, 2]);
        w.stop().await;
    }

    #[tokio::test]
    async fn objects_close_by_size_and_commit_in_order() {
        let f = fixture().await;
        // Every second batch fills an object: many objects in flight.
        let w = writer(&f, 150, Duration::from_secs(3600));
        let producer = |seq| ProducerBatch {
            producer_id: 5,
            producer_epoch: 0,
            base_sequence: seq,
            last_sequence: seq + 1,
        };
        let mut answers = Vec::new();
        for i in 0..40 {
            answers.push(
                w.append(batch(f.partition, Some(producer(2 * i))), &[1; 100])
                    .await,
            );
        }
        w.stop().await;
        for (i, a) in answers.into_iter().enumerate() {
            let committed = tokio::time::timeout(Duration::from_secs(30), a)
                .await
                .expect("answered within the deadline")
                .unwrap()
                .expect("in order, so no sequence is refused");
            check!(committed.base_offset == 2 * i as i64);
        }
        check!(f.store.list().await.unwrap().len() == 20);
        let found = f
            .coordinator
            .find_batches(&[FindBatches {
                partition: f.partition,
                offset: 0,
                max_bytes: u32::MAX,
            }])
            .await
            .unwrap();
        check!(found[0].as_ref().unwrap().info.high_watermark == 80);
    }

    #[tokio::test]
    async fn a_refused_batch_is_answered_alone_and_a_failed_upload_fails_all() {
        let f = fixture().await;
        let w = writer(&f, 1 << 20, Duration::from_millis(20));
        let unknown = DisklessPartition::new(uuid::Uuid::new_v4(), 0);
        let good = w.append(batch(f.partition, None), &[1; 10]).await;
        let bad = w.append(batch(unknown, None), &[2; 10]).await;
        check!(good.await.unwrap().is_ok());
        check!(bad.await.unwrap() == Err(WriteError::Refused(BatchError::UnknownTopicOrPartition)));
        w.stop().await;

        // A store that cannot be written (its root is a file): every batch
        // of the object fails.
        let file = tempfile::NamedTempFile::new().unwrap();
        let broken = DisklessStore::new(
            Arc::new(LocalFileSystem::new_with_prefix(file.path()).unwrap()),
            "",
            Arc::new(ObjectCache::new(0, 0)),
        );
        let w = ObjectWriter::start(
            WriterConfig {
                uploader: BrokerId(1),
                max_object_bytes: 1,
                commit_interval: Duration::from_secs(3600),
                upload_parallelism: 1,
            },
            broken,
            Arc::clone(&f.coordinator) as Arc<dyn BatchCoordinator>,
            Arc::new(|_| {}),
        );
        let failed = w.append(batch(f.partition, None), &[3; 10]).await;
        let answer = tokio::time::timeout(Duration::from_secs(60), failed)
            .await
            .expect("answered within the deadline")
            .unwrap();
        check!(matches!(answer, Err(WriteError::Failed(_))));
        w.stop().await;
        let info = f.coordinator.log_info(&[f.partition]).await.unwrap();
        check!(
            info[0].as_ref().unwrap().high_watermark == 2,
            "nothing of it is visible"
        );
        // The upload may have landed all the same: the object is handed to
        // the cleaner (which finds nothing to delete).
        check!(
            f.coordinator
                .objects_to_delete(i64::MAX)
                .await
                .unwrap()
                .len()
                == 1
        );
    }

    /// The in-memory coordinator, with its next `fail_commits` commits and
    /// `fail_abandons` abandons failing as a database outage would.
    #[derive(Debug)]
    struct Flaky {
        inner: InMemoryBatchCoordinator,
        fail_commits: AtomicUsize,
        fail_abandons: AtomicUsize,
    }

    fn take_one(failures: &AtomicUsize) -> Result<(), RemoteStorageError> {
        match failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
            Ok(_) => Err(RemoteStorageError::Backend {
                message: "the database is down".into(),
            }),
            Err(_) => Ok(()),
        }
    }

    #[async_trait]
    impl BatchCoordinator for Flaky {
        async fn create_partitions(
            &self,
            partitions: &[DisklessPartition],
        ) -> Result<(), RemoteStorageError> {
            self.inner.create_partitions(partitions).await
        }
        async fn commit_object(
            &self,
            commit: &ObjectCommit,
        ) -> Result<Vec<Result<Committed, BatchError>>, RemoteStorageError> {
            take_one(&self.fail_commits)?;
            self.inner.commit_object(commit).await
        }
        async fn find_batches(
            &self,
            requests: &[FindBatches],
        ) -> Result<Vec<Result<FoundBatches, PartitionError>>, RemoteStorageError> {
            self.inner.find_batches(requests).await
        }
        async fn list_offsets(
            &self,
            requests: &[ListOffsetsQuery],
        ) -> Result<Vec<Result<OffsetAnswer, PartitionError>>, RemoteStorageError> {
            self.inner.list_offsets(requests).await
        }
        async fn log_info(
            &self,
            partitions: &[DisklessPartition],
        ) -> Result<Vec<Result<LogInfo, PartitionError>>, RemoteStorageError> {
            self.inner.log_info(partitions).await
        }
        async fn delete_records(
            &self,
            requests: &[DeleteRecords],
        ) -> Result<Vec<Result<i64, PartitionError>>, RemoteStorageError> {
            self.inner.delete_records(requests).await
        }
        async fn consolidate(
            &self,
            requests: &[crate::diskless::Consolidate],
        ) -> Result<Vec<Result<crate::diskless::Consolidated, PartitionError>>, RemoteStorageError>
        {
            self.inner.consolidate(requests).await
        }
        async fn enforce_retention(
            &self,
            policies: &[RetentionPolicy],
            now_ms: i64,
        ) -> Result<Vec<Result<RetentionOutcome, PartitionError>>, RemoteStorageError> {
            self.inner.enforce_retention(policies, now_ms).await
        }
        async fn delete_topics(&self, topic_ids: &[uuid::Uuid]) -> Result<(), RemoteStorageError> {
            self.inner.delete_topics(topic_ids).await
        }
        async fn abandon_object(
            &self,
            key: &ObjectKey,
            uploader: BrokerId,
            size: u64,
        ) -> Result<bool, RemoteStorageError> {
            take_one(&self.fail_abandons)?;
            self.inner.abandon_object(key, uploader, size).await
        }
        async fn objects_to_delete(
            &self,
            dead_before_ms: i64,
        ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
            self.inner.objects_to_delete(dead_before_ms).await
        }
        async fn delete_objects(&self, keys: &[ObjectKey]) -> Result<(), RemoteStorageError> {
            self.inner.delete_objects(keys).await
        }
        async fn unknown_objects(
            &self,
            keys: &[ObjectKey],
        ) -> Result<Vec<ObjectKey>, RemoteStorageError> {
            self.inner.unknown_objects(keys).await
        }
        async fn describe_producers(
            &self,
            partitions: &[DisklessPartition],
        ) -> Result<Vec<Result<Vec<ProducerInfo>, PartitionError>>, RemoteStorageError> {
            self.inner.describe_producers(partitions).await
        }
        async fn expire_producers(&self, idle_before_ms: i64) -> Result<u64, RemoteStorageError> {
            self.inner.expire_producers(idle_before_ms).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_whose_commit_failed_goes_to_the_cleaner_once_the_coordinator_is_back() {
        let f = fixture().await;
        // The commit fails, and so do the first three attempts to record
        // the object as abandoned: the writer keeps it and tries again.
        let flaky = Arc::new(Flaky {
            inner: (*f.coordinator).clone(),
            fail_commits: AtomicUsize::new(1),
            fail_abandons: AtomicUsize::new(3),
        });
        let w = ObjectWriter::start(
            WriterConfig {
                uploader: BrokerId(1),
                max_object_bytes: 1 << 20,
                commit_interval: Duration::from_millis(20),
                upload_parallelism: 1,
            },
            f.store.clone(),
            Arc::clone(&flaky) as Arc<dyn BatchCoordinator>,
            Arc::new(|_| {}),
        );
        let failed = w.append(batch(f.partition, None), &[1; 10]).await;
        check!(matches!(failed.await.unwrap(), Err(WriteError::Failed(_))));
        let uploaded = f.store.list().await.unwrap();
        check!(uploaded.len() == 1, "uploaded, then not committed");
        // Paused time: the backoff costs no wall time (spawn_blocking holds
        // the clock while the store writes).
        let dead = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let dead = f.coordinator.objects_to_delete(i64::MAX).await.unwrap();
                if !dead.is_empty() {
                    return dead;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("recorded within the deadline");
        check!(dead == uploaded);
        check!(flaky.fail_abandons.load(Ordering::SeqCst) == 0);
        let pass = clean_once(f.coordinator.as_ref(), &f.store, Duration::ZERO, i64::MAX)
            .await
            .unwrap();
        check!(pass.deleted == 1);
        check!(
            f.store.list().await.unwrap().is_empty(),
            "the store holds no orphan"
        );

        // Later objects commit as usual, from offset 0: nothing of the
        // abandoned one is visible.
        let next = w.append(batch(f.partition, None), &[2; 10]).await;
        check!(next.await.unwrap().unwrap().base_offset == 0);
        w.stop().await;
    }
}
