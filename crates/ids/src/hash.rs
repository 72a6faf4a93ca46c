//! Kafka's `Utils.murmur2`, shared by everything that must place data where
//! a Kafka client or broker would: the producer's key partitioner and the
//! `__remote_log_metadata` partition mapping.

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, the
/// hash its default producer partitioner uses for keys.
#[must_use]
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java masks the length into an `int`; slices this long never reach here
    // in practice, and wrapping matches Java for any that did.
    #[allow(clippy::cast_possible_truncation)]
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if let Some(&byte) = tail.get(2) {
        h ^= u32::from(byte) << 16;
    }
    if let Some(&byte) = tail.get(1) {
        h ^= u32::from(byte) << 8;
    }
    if let Some(&byte) = tail.first() {
        h ^= u32::from(byte);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    i32::from_ne_bytes(h.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn matches_kafka_utils_test_vectors() {
        // The cases of Kafka's own `UtilsTest.testMurmur2`.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            check!(
                murmur2(data) == expected,
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }
}
