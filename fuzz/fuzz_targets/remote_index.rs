//! Tiered segments' index files and `.log` scans as the remote tier reads
//! them.
#![no_main]

use {
    krabka_remote_storage::{
        BytePosition, LogOffset, TimestampMs, corrupt_log, first_record_at_or_after_timestamp,
        parse_offset_index, parse_time_index, parse_txn_index,
    },
    libfuzzer_sys::fuzz_target,
};

fuzz_target!(|data: &[u8]| {
    let _ = parse_offset_index(data);
    let _ = parse_time_index(data);
    let _ = parse_txn_index(data);
    let _ = corrupt_log(data);
    let _ = first_record_at_or_after_timestamp(
        data,
        BytePosition(0),
        TimestampMs(i64::MIN),
        LogOffset(0),
    );
});
