//! Which `__consumer_offsets` partition holds a group.
//!
//! Kafka maps a group to `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`
//! where `hashCode` is Java's `String.hashCode` over UTF-16 code units and
//! `Utils.abs` maps `Integer.MIN_VALUE` to 0. Using the same function means a
//! Krabka broker and a Kafka broker agree on where a group's records live.

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code
/// units, in wrapping 32-bit arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs`: absolute value with `i32::MIN` mapped to 0.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN { 0 } else { n.abs() }
}

/// The `__consumer_offsets` partition for `group` among `partitions`
/// partitions (a non-positive count is treated as 1).
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    kafka_abs(java_string_hash(group)) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_string_hash_code() {
        // Values from java.lang.String#hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // "polygenelubricants" is the classic String whose hashCode is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A non-BMP character hashes as its two surrogate units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn partition_follows_utils_abs() {
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // "Aa" and "BB" collide in Java, so they share a partition.
        assert_eq!(partition_for("Aa", 50), partition_for("BB", 50));
        for g in ["g", "my-group", "groupé", "x".repeat(300).as_str()] {
            let p = partition_for(g, 50);
            assert!((0..50).contains(&p));
        }
        assert_eq!(partition_for("anything", 0), 0);
    }
}
