//! [`RemoteLogMetadataTopicPartitioner`]: which `__remote_log_metadata`
//! partition holds a user partition's events.
//!
//! The mapping must be Kafka's, bit for bit, so a Krabka broker and a Kafka
//! broker sharing one metadata topic look for a partition's events in the same
//! place. Kafka hashes the topic id and partition with Java's
//! `Objects.hash(lsb, msb, partition)` — deliberately not `Uuid.hashCode`,
//! which it does not want to depend on — and runs its producer's `murmur2`
//! over the four big-endian bytes of that `int`.

use krabka_ids::TopicId;
pub use krabka_ids::murmur2;

/// Maps a user partition to its metadata-topic partition, as Kafka's
/// `RemoteLogMetadataTopicPartitioner` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteLogMetadataTopicPartitioner {
    partitions: i32,
}

impl RemoteLogMetadataTopicPartitioner {
    /// A partitioner over a metadata topic of `partitions` partitions.
    ///
    /// A count below one is raised to one, so the modulus is never zero.
    #[must_use]
    pub const fn new(partitions: i32) -> Self {
        Self {
            partitions: if partitions < 1 { 1 } else { partitions },
        }
    }

    /// The number of metadata partitions this partitioner spreads over.
    #[must_use]
    pub const fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The metadata partition of `(topic_id, partition)`, in
    /// `[0, self.partitions())`.
    #[must_use]
    pub fn metadata_partition(&self, topic_id: TopicId, partition: i32) -> i32 {
        let hash = java_objects_hash(topic_id, partition);
        to_positive(murmur2(&hash.to_be_bytes())) % self.partitions
    }
}

/// Java's `Objects.hash(lsb, msb, partition)`: `Arrays.hashCode` over a
/// boxed `Long`, `Long` and `Integer`.
fn java_objects_hash(topic_id: TopicId, partition: i32) -> i32 {
    let (msb, lsb) = topic_id.as_u64_pair();
    [java_long_hash(lsb), java_long_hash(msb), partition]
        .into_iter()
        .fold(1_i32, |h, element| h.wrapping_mul(31).wrapping_add(element))
}

/// Java's `Long.hashCode`: `(int) (value ^ (value >>> 32))`.
fn java_long_hash(value: u64) -> i32 {
    // Truncation to the low 32 bits is the point (Java's `(int)` cast).
    #[allow(clippy::cast_possible_truncation)]
    let folded = (value ^ (value >> 32)) as u32;
    i32::from_ne_bytes(folded.to_ne_bytes())
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which would
/// overflow on `i32::MIN`).
const fn to_positive(number: i32) -> i32 {
    number & 0x7fff_ffff
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*, uuid::Uuid};

    #[test]
    fn objects_hash_follows_java_arrays_hash_code() {
        // 31 * (31 * (31 * 1 + 202) + 0) + 7 for lsb 0xCA, msb 0, partition 7.
        check!(java_objects_hash(Uuid::from_u128(0xCA), 7) == 223_920);
        check!(java_objects_hash(Uuid::nil(), 0) == 29_791);
        // Long.hashCode folds the high half into the low one: -1L hashes to 0.
        check!(java_long_hash(u64::MAX) == 0);
        check!(java_long_hash(0x1_0000_0001) == 0);
        check!(java_long_hash(0x8000_0000_0000_0000) == i32::MIN);
    }

    #[test]
    fn metadata_partition_matches_values_derived_from_kafkas_algorithm() {
        // Derived step by step: Objects.hash, its four big-endian bytes,
        // murmur2, sign bit cleared, modulo the partition count.
        let fifty = RemoteLogMetadataTopicPartitioner::new(50);
        check!(murmur2(&223_920_i32.to_be_bytes()) == -1_468_235_967);
        check!(fifty.metadata_partition(Uuid::from_u128(0xCA), 7) == 31);
        check!(fifty.metadata_partition(Uuid::from_u128(0xCA), 0) == 12);
        check!(fifty.metadata_partition(Uuid::nil(), 0) == 6);
        check!(
            fifty.metadata_partition(
                Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210),
                3
            ) == 12
        );
        check!(fifty.metadata_partition(Uuid::from_u128(u128::MAX), i32::MAX) == 10);
        check!(
            RemoteLogMetadataTopicPartitioner::new(7).metadata_partition(Uuid::from_u128(0xCA), 7)
                == 0
        );
    }

    #[test]
    fn a_non_positive_count_is_raised_to_one() {
        let one = RemoteLogMetadataTopicPartitioner::new(0);
        check!(one.partitions() == 1);
        check!(one.metadata_partition(Uuid::from_u128(0xCA), 7) == 0);
    }

    proptest! {
        #[test]
        fn always_in_range(raw in any::<u128>(), partition in any::<i32>(), count in 1..200_i32) {
            let chosen = RemoteLogMetadataTopicPartitioner::new(count)
                .metadata_partition(Uuid::from_u128(raw), partition);
            prop_assert!((0..count).contains(&chosen));
        }
    }
}
