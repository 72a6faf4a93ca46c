//! v2 record batches: header checks, the batch scanner, and record decoding
//! (with the CRC fixed up so the fuzzer reaches the records).
#![no_main]

use {
    krabka_log::{LogError, batch, compression},
    libfuzzer_sys::fuzz_target,
};

/// What a compressed input may inflate to for its records to be decoded.
/// `decode_records` allows the 1 GiB stored-batch bound, and inputs that
/// inflate toward it kept an unoptimised build in the decompressor for the
/// whole of a short run (53 inputs in 10 s, all of them the saved corpus);
/// the bound itself has unit and property tests in krabka-log.
const INFLATE_LIMIT: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = batch::check_batch(data);
    for verify in [false, true] {
        let mut scan = batch::BatchScan::new(data, verify);
        for _ in scan.by_ref() {}
        assert!(scan.valid_bytes() <= data.len());
    }
    let mut fixed = data.to_vec();
    batch::recompute_crc(&mut fixed);
    if inflates_past_the_limit(&fixed) {
        return;
    }
    if let Ok(records) = batch::decode_records(&fixed) {
        // Every record took at least its minimum size.
        assert!(records.len() * batch::MIN_RECORD_SIZE <= fixed.len());
    }
});

/// Whether `batch`'s compressed records inflate past [`INFLATE_LIMIT`].
fn inflates_past_the_limit(batch: &[u8]) -> bool {
    let Ok(header) = batch::check_batch(batch) else {
        return false;
    };
    // Uncompressed records "inflate" to a copy of themselves: never past.
    let Some(codec) = header.compression() else {
        return false;
    };
    let end = usize::try_from(header.size()).map_or(batch.len(), |size| size.min(batch.len()));
    let Some(records) = batch.get(batch::HEADER_SIZE..end) else {
        return false;
    };
    matches!(
        compression::inflate(codec, records, INFLATE_LIMIT),
        Err(LogError::DecompressedTooLarge { .. })
    )
}
