//! Diskless objects (`krabka_remote_storage::diskless`): any bytes, and
//! objects whose footer entries, count and data the fuzzer chooses under a
//! valid footer CRC, so the range checks behind the CRC are reached too.
#![no_main]

use {
    krabka_remote_storage::diskless::{OBJECT_FORMAT_VERSION, OBJECT_MAGIC, ObjectFile},
    libfuzzer_sys::fuzz_target,
};

/// Bytes of one footer entry: topic id, partition, position, size, CRC.
const ENTRY: usize = 16 + 4 + 8 + 4 + 4;

fn check(bytes: &[u8]) {
    if let Ok(object) = ObjectFile::parse(bytes) {
        let mut end = 0u64;
        for b in object.batches() {
            // Every batch lies in the data region, one after the other.
            assert_eq!(b.position, end);
            assert_eq!(object.batch_bytes(b).len(), b.size as usize);
            assert_eq!(crc32c::crc32c(object.batch_bytes(b)), b.crc);
            end = b.position + u64::from(b.size);
        }
        assert!(end <= bytes.len() as u64);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // [data length: u16][data][footer entries...][count delta: i8]
    let Some((&[hi, lo], rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let data_len = usize::from(u16::from_be_bytes([hi, lo])).min(rest.len());
    let (region, rest) = rest.split_at(data_len);
    let Some((&delta, entries)) = rest.split_last() else {
        return;
    };
    let entries = &entries[..entries.len() / ENTRY * ENTRY];
    let count = (entries.len() / ENTRY) as i64 + i64::from(delta as i8 % 3);
    let Ok(count) = u32::try_from(count) else {
        return;
    };
    let mut object = region.to_vec();
    object.extend_from_slice(entries);
    object.extend_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&object[data_len..]);
    object.extend_from_slice(&crc.to_be_bytes());
    object.extend_from_slice(&OBJECT_FORMAT_VERSION.to_be_bytes());
    object.extend_from_slice(&OBJECT_MAGIC);
    check(&object);
});
