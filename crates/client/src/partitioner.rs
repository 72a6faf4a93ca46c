//! Kafka's default partitioner for keyed records: `toPositive(murmur2(key)) % partitions`.
//!
//! The same hash as Kafka's Java client (`Utils.murmur2`, seed `0x9747b28c`),
//! so a keyed record lands in the partition any Kafka client would pick.

pub use krabka_ids::murmur2;

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
    fn partitions_are_in_range() {
        for key in [&b""[..], b"a", b"key-1", b"\xff\xff"] {
            let p = partition_for_key(key, 8);
            check!((0..8).contains(&p));
        }
    }
}
