//! Kafka's default partitioner for keyed records: `toPositive(murmur2(key)) % partitions`.
//!
//! The same hash as Kafka's Java client (`Utils.murmur2`, seed `0x9747b28c`),
//! so a keyed record lands in the partition any Kafka client would pick.

/// Kafka's 32-bit murmur2 of `data`.
#[must_use]
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java truncates the length to an int; lengths beyond that cannot occur for a key.
    #[allow(clippy::cast_possible_truncation)]
    let length = data.len() as u32;
    let mut h = SEED ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if let Some(&first) = rest.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    i32::from_ne_bytes(h.to_ne_bytes())
}

/// The partition Kafka's default partitioner picks for `key` among `partitions` (> 0).
#[must_use]
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    let positive = murmur2(key) & 0x7fff_ffff;
    positive % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn matches_kafka_vectors() {
        // Values from Kafka's UtilsTest.testMurmur2.
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

    #[test]
    fn partitions_are_in_range() {
        for key in [&b""[..], b"a", b"key-1", b"\xff\xff"] {
            let p = partition_for_key(key, 8);
            check!((0..8).contains(&p));
        }
    }
}
