//! Kafka's `transaction.version` feature (KIP-584 levels, KIP-890 part 2).
//!
//! A cluster announces the level it has finalized in ApiVersions, and a
//! Kafka 4 client turns transactions version 2 on when it reads level 2 or
//! more. The level changes three things, all the client's choice per
//! request rather than a mode of the coordinator:
//!
//! * EndTxn v5 bumps the producer epoch at the end of every transaction (a
//!   fresh producer id once the epoch is exhausted) and answers with it, so
//!   a late write of the finished transaction is fenced by the markers'
//!   epoch — the server-side defence against hanging transactions;
//! * Produce v12+ adds its partitions to the open transaction itself (the
//!   client sends no AddPartitionsToTxn);
//! * TxnOffsetCommit v5 adds the group's `__consumer_offsets` partition
//!   itself (no AddOffsetsToTxn).
//!
//! A broker speaks every level; `krabka.transaction.version` says which one
//! it announces, as `kafka-features` finalizes it on Kafka.

/// The name of the feature in ApiVersions.
pub const FEATURE: &str = "transaction.version";

/// The highest level this broker implements.
pub const MAX_LEVEL: i16 = 2;

pub use krabka_ids::TransactionVersion;

/// The version an EndTxn request of `version` follows (v5 is the version 2
/// form).
#[must_use]
pub fn of_end_txn(version: i16) -> TransactionVersion {
    if version >= 5 {
        TransactionVersion::V2
    } else {
        TransactionVersion::V0
    }
}

/// Whether a Produce of `version` adds its partitions to the transaction
/// itself.
#[must_use]
pub fn produce_adds_partitions(version: i16) -> bool {
    version >= 12
}

/// Whether a TxnOffsetCommit of `version` adds the group's partition to
/// the transaction itself.
#[must_use]
pub fn offset_commit_adds_partition(version: i16) -> bool {
    version >= 5
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn request_versions_map_to_kafkas_transaction_versions() {
        check!(of_end_txn(4) == TransactionVersion::V0);
        check!(of_end_txn(5).bumps_epoch());
        check!(!TransactionVersion(1).bumps_epoch());
        check!(!produce_adds_partitions(11));
        check!(produce_adds_partitions(12));
        check!(!offset_commit_adds_partition(4));
        check!(offset_commit_adds_partition(5));
    }
}
