//! v2 record batches: header checks, the batch scanner, and record decoding
//! (with the CRC fixed up so the fuzzer reaches the records).
#![no_main]

use {krabka_log::batch, libfuzzer_sys::fuzz_target};

fuzz_target!(|data: &[u8]| {
    let _ = batch::check_batch(data);
    for verify in [false, true] {
        let mut scan = batch::BatchScan::new(data, verify);
        for _ in scan.by_ref() {}
        assert!(scan.valid_bytes() <= data.len());
    }
    let mut fixed = data.to_vec();
    batch::recompute_crc(&mut fixed);
    if let Ok(records) = batch::decode_records(&fixed) {
        // Every record took at least its minimum size.
        assert!(records.len() * batch::MIN_RECORD_SIZE <= fixed.len());
    }
});
