//! A partition's queue of produce appends, worked through by one task on
//! the blocking pool at a time, or, for a small append to an idle queue,
//! by the connection that read it.
//!
//! A Produce request's batches take their place in the queue as soon as the
//! request is read, so a connection can read its next request while the
//! append runs and the log still sees the batches in the order they were
//! sent. Whatever queues up while one append runs is appended by the same
//! blocking task: a client that sends a record per request (librdkafka with
//! `linger.ms=0`) pays the hop to the blocking pool once per queue-full
//! rather than once per request. Each append wakes the partition's waiters
//! (parked fetches) before its producer is answered. An append that rolls
//! the segment leaves the closed segment's flush to a blocking task of its
//! own ([`Log::flush_rolled`]), as Kafka schedules it after a roll.
//!
//! The hop itself (waking a pool thread, then the connection's task from
//! it) costs more than writing a small request's batches to the page
//! cache: with the Java producer's 16 KiB requests it was a third of the
//! broker's CPU per byte. So an append of at most
//! [`INLINE_APPEND_MAX_BYTES`] to a queue with nothing queued or running is
//! made on the connection's own task, if the log can take it as a plain
//! write ([`Log::try_append_as_leader`]: no segment roll, no flush, no new
//! epoch, no other thread in the log); anything else goes to the pool. A
//! write can still wait when the kernel throttles a writer over its dirty
//! page limit, so only one task in the broker appends this way at a time:
//! such a wait holds up one async worker, never all of them.

use {
    super::LEADER_EPOCH,
    bytes::Bytes,
    krabka_log::{AppendInfo, Log, LogError},
    std::{
        collections::VecDeque,
        sync::{
            Arc, Mutex, PoisonError,
            atomic::{AtomicBool, Ordering},
        },
    },
    tokio::sync::{Notify, oneshot},
};

/// The answer to one queued append.
pub type Appended = oneshot::Receiver<Result<AppendInfo, LogError>>;

/// Largest append made on the connection's task rather than the blocking
/// pool: larger ones pay for the hop many times over in copying alone.
pub const INLINE_APPEND_MAX_BYTES: usize = 64 * 1024;

/// Whether some connection's task is appending right now (see the module
/// documentation: one at a time).
static APPENDING_INLINE: AtomicBool = AtomicBool::new(false);

/// The broker-wide turn to append on a connection's task, given back on drop.
struct InlineTurn;

impl InlineTurn {
    fn take() -> Option<Self> {
        APPENDING_INLINE
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(Self)
    }
}

impl Drop for InlineTurn {
    fn drop(&mut self) {
        APPENDING_INLINE.store(false, Ordering::Release);
    }
}

struct Job {
    records: Bytes,
    done: oneshot::Sender<Result<AppendInfo, LogError>>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// An append is running (on the pool or a connection's task); jobs
    /// pushed meanwhile wait in `jobs` for the blocking task.
    draining: bool,
}

/// The queue of one partition's produce appends.
#[derive(Default)]
pub struct AppendQueue {
    state: Mutex<State>,
}

impl std::fmt::Debug for AppendQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendQueue").finish_non_exhaustive()
    }
}

/// Should an append panic, the queue is not left marked as draining by an
/// append that is gone: the jobs still queued fail, the next push starts
/// afresh. Forgotten when the append ends normally.
struct Reset<'a>(&'a AppendQueue);

impl Drop for Reset<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.draining = false;
        state.jobs.clear();
    }
}

impl AppendQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `records` for `log.append_as_leader` behind every append
    /// queued before. A small one to an idle queue is appended here when
    /// the log takes it as a plain write (answered before this returns);
    /// otherwise a blocking task works through the queue if none is
    /// running, notifying `changed` after each append. Must be called
    /// within a tokio runtime.
    pub fn push(
        self: &Arc<Self>,
        log: &Arc<Log>,
        changed: &Arc<Notify>,
        records: Bytes,
    ) -> Appended {
        let (done, appended) = oneshot::channel();
        let job = Job { records, done };
        {
            let mut state = self.lock();
            if state.draining {
                state.jobs.push_back(job);
                return appended;
            }
            state.draining = true;
        }
        let reset = Reset(self);
        let pending = match append_here(log, changed, job) {
            Some(job) => {
                // It came first: whatever was pushed meanwhile goes after it.
                self.lock().jobs.push_front(job);
                true
            }
            None => {
                let mut state = self.lock();
                state.draining = !state.jobs.is_empty();
                state.draining
            }
        };
        std::mem::forget(reset);
        if pending {
            let (queue, log, changed) = (Arc::clone(self), Arc::clone(log), Arc::clone(changed));
            crate::blocking::spawn(move || queue.drain(&log, &changed));
        }
        appended
    }

    fn drain(&self, log: &Arc<Log>, changed: &Notify) {
        let reset = Reset(self);
        loop {
            let jobs = {
                let mut state = self.lock();
                if state.jobs.is_empty() {
                    state.draining = false;
                    std::mem::forget(reset);
                    return;
                }
                std::mem::take(&mut state.jobs)
            };
            for job in jobs {
                let result = log.append_as_leader(job.records, LEADER_EPOCH);
                if result.is_ok() {
                    changed.notify_waiters();
                }
                let _ = job.done.send(result);
                flush_rolled(log);
            }
        }
    }
}

/// Flushes the segments a roll of `log` closed, if any, on a blocking task
/// of its own, so that appends go on while the disk takes them (on the
/// caller's thread when no runtime is at hand).
pub(super) fn flush_rolled(log: &Arc<Log>) {
    if !log.roll_flush_due() {
        return;
    }
    let log = Arc::clone(log);
    let flush = move || {
        if let Err(e) = log.flush_rolled() {
            tracing::warn!(dir = %log.dir().display(), error = %e, "flushing rolled segments failed");
        }
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        crate::blocking::spawn(flush);
    } else {
        flush();
    }
}

/// Appends `job` on the caller's task if it is small, the broker-wide turn
/// is free and the log takes it as a plain write; hands it back otherwise.
fn append_here(log: &Log, changed: &Notify, job: Job) -> Option<Job> {
    if job.records.len() > INLINE_APPEND_MAX_BYTES {
        return Some(job);
    }
    let Some(_turn) = InlineTurn::take() else {
        return Some(job);
    };
    let result = match log.try_append_as_leader(job.records.clone(), LEADER_EPOCH) {
        Ok(None) => return Some(job),
        Ok(Some(info)) => Ok(info),
        Err(e) => Err(e),
    };
    if result.is_ok() {
        changed.notify_waiters();
    }
    let _ = job.done.send(result);
    None
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::remote::tests::{PER_BATCH, batch},
        assert2::check,
        futures_util::FutureExt,
        krabka_log::{LogConfig, ManualClock},
    };

    fn open(dir: &std::path::Path) -> Arc<Log> {
        let clock = Arc::new(ManualClock::new(crate::remote::tests::base()));
        let log = Log::open(dir, uuid::Uuid::new_v4(), LogConfig::default(), clock).unwrap();
        // The first append records the leader epoch: done the long way.
        log.append_as_leader(batch("first", 0, None), LEADER_EPOCH)
            .unwrap();
        Arc::new(log)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_append_to_an_idle_queue_is_made_before_push_returns() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path());
        let (queue, changed) = (Arc::new(AppendQueue::default()), Arc::new(Notify::new()));
        let woken = changed.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let mut appended = queue.push(&log, &changed, batch("a", 1, None));
        // Answered already, and the partition's waiters woken, with no
        // trip to the blocking pool.
        let info = appended.try_recv().unwrap().unwrap();
        check!(info.first_offset == PER_BATCH);
        check!(woken.now_or_never().is_some());
        check!(log.log_end_offset() == 2 * PER_BATCH);
        check!(!queue.lock().draining);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_appends_and_appends_behind_them_go_to_the_pool_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path());
        let (queue, changed) = (Arc::new(AppendQueue::default()), Arc::new(Notify::new()));
        let large = batch(&"L".repeat(INLINE_APPEND_MAX_BYTES / 8), 1, None);
        check!(large.len() > INLINE_APPEND_MAX_BYTES);
        let mut answers = vec![queue.push(&log, &changed, large)];
        for i in 0..20 {
            answers.push(queue.push(&log, &changed, batch(&format!("s{i}"), 2, None)));
        }
        let mut offsets = Vec::new();
        for answer in answers {
            offsets.push(answer.await.unwrap().unwrap().first_offset);
        }
        let expected: Vec<i64> = (1..=21).map(|i| i * PER_BATCH).collect();
        check!(offsets == expected);
        check!(log.log_end_offset() == 22 * PER_BATCH);

        // While the broker-wide turn is taken, a small append to an idle
        // queue goes to the pool, and is still made.
        let other_dir = tempfile::tempdir().unwrap();
        let other_log = open(other_dir.path());
        let other = Arc::new(AppendQueue::default());
        let turn = InlineTurn::take().unwrap();
        // Handed back untouched by the on-the-spot path...
        let (done, mut unanswered) = oneshot::channel();
        let job = Job {
            records: batch("other", 3, None),
            done,
        };
        let job = append_here(&other_log, &changed, job).unwrap();
        check!(unanswered.try_recv().is_err());
        check!(other_log.log_end_offset() == PER_BATCH);
        drop(job);
        // ...and made by the pool through the queue.
        let waited = other.push(&other_log, &changed, batch("other", 3, None));
        check!(waited.await.unwrap().unwrap().first_offset == PER_BATCH);
        drop(turn);
        check!(InlineTurn::take().is_some());
    }
}
