//! The broker-wide fetch memory budget (`krabka.fetch.memory.max.bytes`).
//!
//! On a plain connection the records of local segments go straight from
//! the page cache to the socket (`sendfile`, see [`super::zero_copy`]) and
//! hold no memory; otherwise (TLS, remote tier, diskless, old versions)
//! Krabka reads them into memory, encodes the response and writes it, so a
//! fetch costs its bytes about twice while the response is built and once
//! while it is sent. Without a bound, a few clients asking for 2 GiB each
//! (or many asking for the 55 MiB `fetch.max.bytes` default) could make the
//! broker allocate without limit. As Redpanda does with its fetch memory
//! units, a fetch first takes units from this budget for the most it may
//! allocate, waits when they are not free, gives back what it did not use
//! once it has read (all of a file slice's share), and holds the rest until
//! its response has been written (the units ride on the frame's `Bytes`,
//! see [`MemoryUnits::attach`], or on its parts). A parked fetch holds no
//! units.
//!
//! One exception is bounded by the topic's `max.message.bytes`: the single
//! batch a fetch must return even when it is larger than the fetch's limit
//! (KIP-74). Its excess is taken from the budget if free, else allocated
//! anyway, since the fetch has already read it.
//!
//! The budget bounds the broker's memory only if freed fetch buffers go
//! back to the operating system. glibc's malloc serves anything below a
//! threshold from per-thread arenas, and after the first large buffer is
//! freed it raises that threshold to 32 MiB *and* lets each arena keep up
//! to 64 MiB free before trimming; a few hundred MiB of fetches then stay
//! resident in the blocking threads' arenas. Creating the budget therefore
//! pins both ([`ARENA_MAX_ALLOCATION`], [`ARENA_MAX_FREE`]), which turns the
//! dynamic adjustment off: large buffers (a capped 55 MiB response) are
//! mapped and unmapped, while the buffers of ordinary fetches (a few MiB)
//! stay in arenas that keep a few of them warm. Keeping less would fault in
//! the pages of every ordinary response afresh and cost consumers a good
//! part of their throughput; keeping more lets hostile fetches leave their
//! buffers resident.

use {
    bytes::Bytes,
    std::sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    tokio::sync::Semaphore,
};

/// The budget shared by every fetch of the broker.
#[derive(Debug)]
pub struct FetchMemory {
    semaphore: Arc<Semaphore>,
    total: usize,
    reservations: AtomicU64,
}

/// Allocations from this size up are mapped from the operating system and
/// given back when freed (glibc's `M_MMAP_THRESHOLD`, see the module docs).
pub const ARENA_MAX_ALLOCATION: usize = 8 << 20;

/// Free memory an arena keeps at its top before giving it back (glibc's
/// `M_TRIM_THRESHOLD`, see the module docs).
pub const ARENA_MAX_FREE: usize = 16 << 20;

/// Pins glibc's mmap and trim thresholds (once per process).
fn return_large_buffers_to_the_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static PINNED: std::sync::Once = std::sync::Once::new();
        PINNED.call_once(|| {
            for (parameter, value) in [
                (libc::M_MMAP_THRESHOLD, ARENA_MAX_ALLOCATION),
                (libc::M_TRIM_THRESHOLD, ARENA_MAX_FREE),
            ] {
                let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
                // SAFETY: `mallopt` only changes a malloc tuning parameter;
                // it may be called at any time from any thread.
                if unsafe { libc::mallopt(parameter, value) } != 1 {
                    tracing::warn!(
                        parameter,
                        "could not set a malloc parameter; freed fetch buffers may stay resident"
                    );
                }
            }
        });
    }
}

impl FetchMemory {
    /// A budget of `total` bytes (at most 4 GiB - 1, the most one wait can
    /// take).
    #[must_use]
    pub fn new(total: usize) -> Self {
        return_large_buffers_to_the_os();
        let total = total.clamp(1, u32::MAX as usize);
        Self {
            semaphore: Arc::new(Semaphore::new(total)),
            total,
            reservations: AtomicU64::new(0),
        }
    }

    /// Reservations made since start: one per read attempt of a fetch.
    #[must_use]
    pub fn reservations(&self) -> u64 {
        self.reservations.load(Ordering::Relaxed)
    }

    /// The budget's size.
    #[must_use]
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes held by fetches now.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.total
            .saturating_sub(self.semaphore.available_permits())
    }

    /// Waits until `bytes` (at most the whole budget) are free and takes
    /// them; fetches are served in the order they asked.
    pub async fn reserve(&self, bytes: usize) -> MemoryUnits {
        self.reservations.fetch_add(1, Ordering::Relaxed);
        let bytes = bytes.clamp(1, self.total);
        let wanted = u32::try_from(bytes).unwrap_or(u32::MAX);
        match Arc::clone(&self.semaphore).acquire_many_owned(wanted).await {
            Ok(permit) => permit.forget(),
            // The semaphore is never closed; should it be, nothing is held.
            Err(_) => return MemoryUnits::none(&self.semaphore),
        }
        MemoryUnits {
            semaphore: Arc::clone(&self.semaphore),
            held: bytes,
        }
    }
}

/// Bytes of the budget one fetch holds; given back when dropped.
#[derive(Debug)]
pub struct MemoryUnits {
    semaphore: Arc<Semaphore>,
    held: usize,
}

impl MemoryUnits {
    fn none(semaphore: &Arc<Semaphore>) -> Self {
        Self {
            semaphore: Arc::clone(semaphore),
            held: 0,
        }
    }

    /// Bytes held.
    #[must_use]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Gives back everything above `bytes`.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.held {
            self.semaphore.add_permits(self.held - bytes);
            self.held = bytes;
        }
    }

    /// Takes `bytes` more if they are free now (never waits: the caller
    /// already holds units, and waiting while holding could deadlock);
    /// returns whether it could.
    pub fn try_grow(&mut self, bytes: usize) -> bool {
        let Ok(wanted) = u32::try_from(bytes) else {
            return false;
        };
        match self.semaphore.try_acquire_many(wanted) {
            Ok(permit) => {
                permit.forget();
                self.held += bytes;
                true
            }
            Err(_) => false,
        }
    }

    /// Holds (the frame's size of) these units until the last clone of
    /// `frame` is dropped, that is until the connection has written it.
    #[must_use]
    pub fn attach(mut self, frame: Bytes) -> Bytes {
        self.shrink_to(frame.len());
        Bytes::from_owner(Framed {
            frame,
            _units: self,
        })
    }
}

impl Drop for MemoryUnits {
    fn drop(&mut self) {
        if self.held > 0 {
            self.semaphore.add_permits(self.held);
        }
    }
}

/// A response frame and the budget it holds.
struct Framed {
    frame: Bytes,
    _units: MemoryUnits,
}

impl AsRef<[u8]> for Framed {
    fn as_ref(&self) -> &[u8] {
        &self.frame
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::time::Duration};

    #[tokio::test(start_paused = true)]
    async fn a_fetch_waits_for_units_and_a_sent_frame_gives_them_back() {
        let budget = FetchMemory::new(100);
        let mut first = budget.reserve(80).await;
        check!(budget.in_use() == 80);
        // A second fetch waits while the first holds its units...
        let waiting = budget.reserve(50);
        tokio::pin!(waiting);
        check!(
            tokio::time::timeout(Duration::from_secs(5), &mut waiting)
                .await
                .is_err()
        );
        // ...until the first read less than it reserved.
        first.shrink_to(30);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap();
        check!(budget.in_use() == 80);
        // A frame holds its own size until dropped.
        let frame = first.attach(Bytes::from(vec![7u8; 20]));
        check!(budget.in_use() == 70);
        check!(frame.len() == 20 && frame[0] == 7);
        let copy = frame.clone();
        drop(frame);
        check!(budget.in_use() == 70);
        drop(copy);
        check!(budget.in_use() == 50);
        drop(second);
        check!(budget.in_use() == 0);
        // More than the whole budget is clamped to it; growth never waits.
        let mut all = budget.reserve(1_000).await;
        check!(all.held() == 100);
        check!(!all.try_grow(1));
        all.shrink_to(90);
        check!(all.try_grow(10));
        check!(budget.in_use() == 100);
    }
}
