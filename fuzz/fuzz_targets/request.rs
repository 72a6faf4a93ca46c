//! Request frames (without the size prefix) through the broker's codec:
//! any input is a request or a `DecodeError`, never a panic, and a count on
//! the wire never allocates more than the process-wide guard allows. The
//! legacy versions are served too (`krabka.legacy.protocol.enable`), so
//! their hand-written decoders and the message-set conversion of Produce
//! v0–v2 are fuzzed with the rest.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: krabka_broker::alloc_guard::GuardedAllocator =
    krabka_broker::alloc_guard::GuardedAllocator;

fuzz_target!(|data: &[u8]| {
    let _ = krabka_broker::network::codec::decode_request(
        bytes::Bytes::copy_from_slice(data),
        krabka_broker::api_versions::Served::WithLegacy,
    );
});
