//! Object buffers used again: a writer's next object is built in the
//! memory of one that left the cache, not in fresh pages.
//!
//! A diskless object is built in one buffer of about
//! `diskless.object.max.bytes`, then kept whole in the object cache until
//! evicted. Freed, a buffer that size goes back to the kernel, and the next
//! one is faulted in page by page and zeroed by the kernel: measured on the
//! development VM, one fault per 4 KiB of produced data, and the broker's
//! CPU per diskless GB twice a classic topic's. The pool keeps a few
//! buffers that come back (the cache evicted their object, the last fetch
//! holding a slice of it finished) and hands them to the next objects.

use {
    bytes::Bytes,
    std::sync::{Arc, Mutex, PoisonError, Weak},
};

/// A bounded set of spare object buffers.
#[derive(Debug)]
pub struct BufferPool {
    spare: Mutex<Vec<Vec<u8>>>,
    max_spare: usize,
}

/// An object's bytes, whose buffer returns to its pool when the last
/// [`Bytes`] of it is dropped.
struct Pooled {
    buffer: Vec<u8>,
    pool: Weak<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.give_back(std::mem::take(&mut self.buffer));
        }
    }
}

impl BufferPool {
    /// A pool keeping at most `max_spare` buffers between uses.
    #[must_use]
    pub fn new(max_spare: usize) -> Arc<Self> {
        Arc::new(Self {
            spare: Mutex::new(Vec::new()),
            max_spare,
        })
    }

    /// An empty buffer with room for at least `capacity` bytes: a spare one
    /// when the pool has one that large, else a new one of `fresh` bytes
    /// (or `capacity`, if larger): a little more than needed now, so that
    /// it also fits the next objects, whose first batches differ.
    #[must_use]
    pub fn take(&self, capacity: usize, fresh: usize) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        match spare.iter().position(|b| b.capacity() >= capacity) {
            Some(i) => spare.swap_remove(i),
            None => Vec::with_capacity(capacity.max(fresh)),
        }
    }

    /// `object` as [`Bytes`]: a buffer mostly empty (an object closed early
    /// by its timer) is copied to its own size and goes back to the pool at
    /// once, so the cache holds no reserved room; any other comes back when
    /// its last view is dropped.
    #[must_use]
    pub fn freeze(self: &Arc<Self>, object: Vec<u8>) -> Bytes {
        if object.capacity() > 2 * object.len() {
            let bytes = Bytes::copy_from_slice(&object);
            self.give_back(object);
            return bytes;
        }
        Bytes::from_owner(Pooled {
            buffer: object,
            pool: Arc::downgrade(self),
        })
    }

    /// Keeps `buffer` for a later object if there is room among the spares.
    fn give_back(&self, mut buffer: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < self.max_spare {
            buffer.clear();
            spare.push(buffer);
        }
    }

    /// Buffers kept right now.
    #[cfg(test)]
    pub(crate) fn spare(&self) -> usize {
        self.spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn a_buffer_comes_back_when_its_last_view_is_dropped() {
        let pool = BufferPool::new(2);
        let mut buffer = pool.take(1024, 0);
        let at = buffer.as_ptr();
        buffer.extend_from_slice(&[7; 1000]);
        let bytes = pool.freeze(buffer);
        let view = bytes.slice(10..20);
        drop(bytes);
        check!(pool.spare() == 0, "a slice still holds it");
        check!(view[..] == [7; 10]);
        drop(view);
        check!(pool.spare() == 1);
        let again = pool.take(1024, 0);
        check!(again.as_ptr() == at, "the same memory is used again");
        check!(again.is_empty());
    }

    #[test]
    fn a_mostly_empty_buffer_is_copied_and_kept_at_once() {
        let pool = BufferPool::new(2);
        let mut buffer = pool.take(1 << 20, 0);
        buffer.extend_from_slice(b"small object");
        let bytes = pool.freeze(buffer);
        check!(&bytes[..] == b"small object");
        check!(pool.spare() == 1);
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_bound_and_nothing_too_small() {
        let pool = BufferPool::new(1);
        let a = pool.freeze(vec![1; 100]);
        let b = pool.freeze(vec![2; 100]);
        drop((a, b));
        check!(pool.spare() == 1);
        check!(
            pool.take(4096, 0).capacity() >= 4096,
            "a spare too small is not handed out"
        );
        check!(pool.spare() == 1);
    }

    #[test]
    fn buffers_outliving_their_pool_are_freed() {
        let pool = BufferPool::new(1);
        let bytes = pool.freeze(vec![3; 64]);
        drop(pool);
        check!(bytes[..] == [3; 64]);
    }
}
