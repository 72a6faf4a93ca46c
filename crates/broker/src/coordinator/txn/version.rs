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

/// The transaction version a request (or a transaction) follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct TransactionVersion(pub i16);

impl TransactionVersion {
    /// Transactions as before KIP-890 part 2 (levels 0 and 1 differ only
    /// in Kafka's record format).
    pub const V0: Self = Self(0);
    /// KIP-890 part 2: an epoch bump per transaction, implicit adds.
    pub const V2: Self = Self(2);

    /// Whether every EndTxn bumps the producer epoch.
    #[must_use]
    pub fn bumps_epoch(self) -> bool {
        self.0 >= 2
    }

    /// The version an EndTxn request of `version` follows (v5 is the
    /// version 2 form).
    #[must_use]
    pub fn of_end_txn(version: i16) -> Self {
        if version >= 5 { Self::V2 } else { Self::V0 }
    }

    /// Whether a Produce of `version` adds its partitions to the
    /// transaction itself.
    #[must_use]
    pub fn produce_adds_partitions(version: i16) -> bool {
        version >= 12
    }

    /// Whether a TxnOffsetCommit of `version` adds the group's partition
    /// to the transaction itself.
    #[must_use]
    pub fn offset_commit_adds_partition(version: i16) -> bool {
        version >= 5
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn request_versions_map_to_kafkas_transaction_versions() {
        check!(TransactionVersion::of_end_txn(4) == TransactionVersion::V0);
        check!(TransactionVersion::of_end_txn(5).bumps_epoch());
        check!(!TransactionVersion(1).bumps_epoch());
        check!(!TransactionVersion::produce_adds_partitions(11));
        check!(TransactionVersion::produce_adds_partitions(12));
        check!(!TransactionVersion::offset_commit_adds_partition(4));
        check!(TransactionVersion::offset_commit_adds_partition(5));
    }
}
