//! A partition's queue of produce appends, worked through by one task on
//! the blocking pool at a time.
//!
//! A Produce request's batches take their place in the queue as soon as the
//! request is read, so a connection can read its next request while the
//! append runs and the log still sees the batches in the order they were
//! sent. Whatever queues up while one append runs is appended by the same
//! blocking task: a client that sends a record per request (librdkafka with
//! `linger.ms=0`) pays the hop to the blocking pool once per queue-full
//! rather than once per request. Each append wakes the partition's waiters
//! (parked fetches) before its producer is answered.

use {
    super::LEADER_EPOCH,
    bytes::Bytes,
    krabka_log::{AppendInfo, Log, LogError},
    std::{
        collections::VecDeque,
        sync::{Arc, Mutex, PoisonError},
    },
    tokio::sync::{Notify, oneshot},
};

/// The answer to one queued append.
pub type Appended = oneshot::Receiver<Result<AppendInfo, LogError>>;

struct Job {
    records: Bytes,
    done: oneshot::Sender<Result<AppendInfo, LogError>>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// A blocking task is working through `jobs`.
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

impl AppendQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `records` for `log.append_as_leader` behind every append
    /// queued before; starts a blocking task to work through the queue if
    /// none is running, which notifies `changed` after its appends. Must be
    /// called within a tokio runtime.
    pub fn push(
        self: &Arc<Self>,
        log: &Arc<Log>,
        changed: &Arc<Notify>,
        records: Bytes,
    ) -> Appended {
        let (done, appended) = oneshot::channel();
        let start = {
            let mut state = self.lock();
            state.jobs.push_back(Job { records, done });
            !std::mem::replace(&mut state.draining, true)
        };
        if start {
            let (queue, log, changed) = (Arc::clone(self), Arc::clone(log), Arc::clone(changed));
            crate::blocking::spawn(move || queue.drain(&log, &changed));
        }
        appended
    }

    fn drain(&self, log: &Log, changed: &Notify) {
        // Should an append panic, the queue is not left marked as draining
        // by a task that is gone: the jobs still queued fail, the next push
        // starts afresh.
        struct Reset<'a>(&'a AppendQueue);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                let mut state = self.0.lock();
                state.draining = false;
                state.jobs.clear();
            }
        }
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
            }
        }
    }
}
