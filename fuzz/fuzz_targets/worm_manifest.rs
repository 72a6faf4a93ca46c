//! WORM sealed manifests and chain records (bounded JSON).
#![no_main]

use {
    krabka_remote_storage::{SealedManifest, WormChainRecord},
    libfuzzer_sys::fuzz_target,
};

fuzz_target!(|data: &[u8]| {
    let _ = SealedManifest::from_json(data);
    let _ = WormChainRecord::from_bytes(data);
});
