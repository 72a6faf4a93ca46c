//! Request frames (without the size prefix) through the broker's codec:
//! any input is a request or a `DecodeError`, never a panic, and a count on
//! the wire never allocates more than the process-wide guard allows.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: krabka_broker::alloc_guard::GuardedAllocator =
    krabka_broker::alloc_guard::GuardedAllocator;

fuzz_target!(|data: &[u8]| {
    let _ = krabka_broker::network::codec::decode_request(bytes::Bytes::copy_from_slice(data));
});
