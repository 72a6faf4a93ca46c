//! `__remote_log_metadata` record values (Kafka's `RemoteLogMetadataSerde`).
#![no_main]

use {krabka_remote_storage_topic::serde::RemoteLogMetadataSerde, libfuzzer_sys::fuzz_target};

fuzz_target!(|data: &[u8]| {
    if let Ok(event) = RemoteLogMetadataSerde::deserialize(data) {
        // What decodes re-encodes to something that decodes the same.
        let again = RemoteLogMetadataSerde::serialize(&event);
        assert!(RemoteLogMetadataSerde::deserialize(&again).is_ok());
    }
});
