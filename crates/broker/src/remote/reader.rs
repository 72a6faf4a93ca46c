//! The remote log reader pool: `remote.log.reader.threads` dedicated OS
//! threads that run remote reads, fed by a queue bounded at
//! `remote.log.reader.max.pending.tasks` (Kafka's `RemoteLogReader` pool).
//!
//! Remote reads block on the tier (a disk or an object store) for as long as
//! the tier takes. Running them on tokio's blocking pool would let a slow
//! tier take the threads that local fetches, appends and the metadata
//! manager use; on their own threads a slow tier only delays other remote
//! reads. When the queue is full a new read is refused at once, so a fetch
//! answers with a retriable error instead of waiting behind a backlog.

use {
    std::sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
        mpsc::{self, Receiver, SyncSender, TrySendError},
    },
    tokio::sync::oneshot,
};

/// One queued read.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a read was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReaderRefusal {
    /// `remote.log.reader.max.pending.tasks` reads are already waiting.
    #[error("the remote log reader queue is full")]
    QueueFull,
    /// The pool's threads are gone (shutdown).
    #[error("the remote log reader pool is shut down")]
    ShutDown,
}

/// A fixed pool of reader threads behind a bounded queue.
pub struct RemoteReaderPool {
    queue: SyncSender<Job>,
    pending: Arc<AtomicUsize>,
    threads: usize,
}

impl std::fmt::Debug for RemoteReaderPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteReaderPool")
            .field("threads", &self.threads)
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}

impl RemoteReaderPool {
    /// Starts `threads` reader threads (at least one) with room for
    /// `max_pending` waiting reads (at least one).
    ///
    /// # Errors
    ///
    /// The OS error if a thread cannot be spawned.
    pub fn new(threads: usize, max_pending: usize) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let (queue, jobs) = mpsc::sync_channel::<Job>(max_pending.max(1));
        let jobs = Arc::new(Mutex::new(jobs));
        let pending = Arc::new(AtomicUsize::new(0));
        for n in 0..threads {
            let jobs = Arc::clone(&jobs);
            let pending = Arc::clone(&pending);
            std::thread::Builder::new()
                .name(format!("remote-log-reader-{n}"))
                .spawn(move || worker(&jobs, &pending))?;
        }
        Ok(Self {
            queue,
            pending,
            threads,
        })
    }

    /// Reads queued and not yet started.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Queues `read` and waits for its result without holding a tokio thread.
    ///
    /// # Errors
    ///
    /// [`ReaderRefusal::QueueFull`] when the queue is full (the read is not
    /// run), [`ReaderRefusal::ShutDown`] when the threads are gone or the
    /// read panicked.
    pub async fn run<T: Send + 'static>(
        &self,
        read: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ReaderRefusal> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(read());
        });
        self.pending.fetch_add(1, Ordering::AcqRel);
        match self.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                crate::remote::metrics::reader_rejected();
                return Err(ReaderRefusal::QueueFull);
            }
            Err(TrySendError::Disconnected(_)) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                return Err(ReaderRefusal::ShutDown);
            }
        }
        crate::remote::metrics::reader_queue(self.pending());
        rx.await.map_err(|_| ReaderRefusal::ShutDown)
    }
}

/// One reader thread: takes jobs until the pool (its sender) is dropped.
fn worker(jobs: &Mutex<Receiver<Job>>, pending: &AtomicUsize) {
    loop {
        // Only the wait for the next job holds the lock; the job runs without it.
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else {
            return;
        };
        pending.fetch_sub(1, Ordering::AcqRel);
        // A panicking read drops its result sender: the caller gets ShutDown,
        // and this thread keeps serving.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("a remote read panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        assert2::check,
        std::{sync::Barrier, time::Duration},
    };

    #[tokio::test]
    async fn runs_reads_and_returns_their_results() {
        let pool = RemoteReaderPool::new(2, 4).unwrap();
        check!(pool.run(|| 40 + 2).await == Ok(42));
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once() {
        let pool = Arc::new(RemoteReaderPool::new(1, 1).unwrap());
        let gate = Arc::new(Barrier::new(2));
        let (started_tx, started) = std::sync::mpsc::channel();
        // One read occupies the only thread, one waits in the queue.
        let busy = {
            let (pool, gate) = (Arc::clone(&pool), Arc::clone(&gate));
            tokio::spawn(async move {
                pool.run(move || {
                    let _ = started_tx.send(());
                    gate.wait();
                })
                .await
                .is_ok()
            })
        };
        crate::blocking::run(move || started.recv())
            .await
            .unwrap()
            .unwrap();
        let queued = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { pool.run(|| 1).await })
        };
        while pool.pending() == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        check!(pool.run(|| 2).await == Err(ReaderRefusal::QueueFull));
        gate.wait();
        check!(busy.await.unwrap());
        check!(queued.await.unwrap() == Ok(1));
    }

    #[tokio::test]
    async fn a_panicking_read_does_not_kill_the_thread() {
        let pool = RemoteReaderPool::new(1, 2).unwrap();
        check!(pool.run(|| panic!("boom")).await == Err::<(), _>(ReaderRefusal::ShutDown));
        check!(pool.run(|| 7).await == Ok(7));
    }
}
