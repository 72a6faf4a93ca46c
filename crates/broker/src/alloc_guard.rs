//! A global allocator that keeps a hostile array length from aborting the
//! process.
//!
//! `kafka-protocol` decodes an array by first reserving room for as many
//! elements as the length field claims. A client can claim two billion
//! elements in a 20-byte frame; the decoder would fail a moment later on the
//! missing bytes, but the reservation itself (hundreds of GiB) fails first,
//! and Rust aborts the whole process on a failed allocation. Every
//! connection would die with it.
//!
//! This allocator serves allocations of 1 GiB and more from anonymous
//! `mmap(MAP_NORESERVE)` mappings: the kernel grants the address space
//! without committing memory, untouched pages cost nothing, and the
//! decoder's error path frees the mapping again. Smaller allocations go to
//! the system allocator unchanged.
//!
//! It exists only because `kafka-protocol` 0.18 still sizes vectors from
//! wire counts (`Vec::with_capacity(n)` for arrays, `reserve(record_count)`
//! for records, `with_capacity(num_headers)` for record headers); bounding
//! them by the bytes left is an open upstream pull request. Keep it until a
//! release does that. Krabka's own decoders never need it: each bounds
//! every count by the bytes left before allocating (and the log checks a
//! batch's record count against its records before `kafka-protocol` sees
//! it). The interop test
//! `test_an_array_claiming_two_billion_elements_closes_only_that_connection`
//! sends such frames to the binary and checks that its memory does not grow,
//! and the `request` fuzz target runs the codec under this allocator.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    ptr,
};

/// Allocations at least this large are served by [`map`].
const HUGE: usize = 1 << 30;
/// Mappings are page-aligned; larger alignments go to the system allocator.
const PAGE: usize = 4096;

/// The allocator; install with `#[global_allocator]`.
#[derive(Debug, Clone, Copy)]
pub struct GuardedAllocator;

fn is_huge(layout: Layout) -> bool {
    layout.size() >= HUGE && layout.align() <= PAGE
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no address hint has no
    // preconditions; failure is reported as MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block is returned by exactly one of the two backends and
// freed by the same one, chosen by the (size, align) that the caller must
// pass unchanged to `dealloc`; mmap'd memory is page-aligned and zeroed.
unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if is_huge(layout) {
            // SAFETY: `block` came from `map` with this size.
            unsafe {
                libc::munmap(block.cast(), layout.size());
            }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.dealloc(block, layout) }
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to the
        // alignment, does not overflow isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(layout) && !is_huge(new_layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.realloc(block, layout, new_size) };
        }
        // SAFETY: as for `alloc`.
        let new_block = unsafe { self.alloc(new_layout) };
        if !new_block.is_null() {
            // SAFETY: both blocks are valid for the smaller of the two sizes
            // and distinct.
            unsafe {
                ptr::copy_nonoverlapping(block, new_block, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        new_block
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    #[test]
    fn an_absurd_reservation_does_not_abort() {
        // 2^31 elements of 64 bytes: 128 GiB of address space, no memory.
        let v: Vec<[u8; 64]> = Vec::with_capacity(1 << 31);
        check!(v.capacity() >= 1 << 31);
        drop(v);
        let mut small = vec![1u8; 10];
        small.extend_from_slice(&[2; 100]);
        check!(small.len() == 110);
    }
}
