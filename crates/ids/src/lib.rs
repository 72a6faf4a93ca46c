//! Identifiers shared by every Krabka crate.
//!
//! Kafka passes most of its identifiers around as bare integers; mixing up a
//! leader epoch with a producer epoch, or a broker id with a partition index,
//! is a silent bug there. Each id here is a newtype so the compiler keeps them
//! apart, with the same width Kafka's wire protocol and file formats use.
//!
//! Topic ids and segment ids are [`uuid::Uuid`]s. Kafka prints them in its own
//! text form — URL-safe base64 of the 16 bytes, without padding (22 chars) —
//! which [`kafka_uuid`] and [`decode_kafka_uuid`] produce and parse.

pub mod durable;
mod hash;

pub use hash::murmur2;

use {
    base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD},
    std::fmt,
    uuid::Uuid,
};

/// A topic id, as Kafka assigns it at topic creation.
pub type TopicId = Uuid;

/// The epoch of a partition's leader (`partitionLeaderEpoch` in a record batch,
/// one line of `leader-epoch-checkpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// Kafka's "no epoch" marker (`RecordBatch.NO_PARTITION_LEADER_EPOCH`).
    pub const NONE: Self = Self(-1);
}

impl fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A broker's (node's) id: `node.id` / `broker.id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerId(pub i32);

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A producer id minted by `InitProducerId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// Kafka's "no producer" marker (`RecordBatch.NO_PRODUCER_ID`).
    pub const NONE: Self = Self(-1);
}

impl fmt::Display for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The transaction version a transaction follows: Kafka's
/// `transaction.version` feature level (KIP-584, KIP-890 part 2), which a
/// transaction marker also carries (WriteTxnMarkers v2, KIP-1228).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TransactionVersion(pub i16);

impl TransactionVersion {
    /// Transactions as before KIP-890 part 2 (levels 0 and 1 differ only
    /// in Kafka's record format).
    pub const V0: Self = Self(0);
    /// KIP-890 part 2: an epoch bump per transaction, implicit adds.
    pub const V2: Self = Self(2);

    /// Whether every transaction ends under a bumped producer epoch, so a
    /// transaction's marker carries an epoch above its records'.
    #[must_use]
    pub fn bumps_epoch(self) -> bool {
        self.0 >= 2
    }
}

impl fmt::Display for TransactionVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The epoch of a producer id; bumped by `InitProducerId` to fence older holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerEpoch(pub i16);

impl ProducerEpoch {
    /// Kafka's "no epoch" marker (`RecordBatch.NO_PRODUCER_EPOCH`).
    pub const NONE: Self = Self(-1);
}

impl fmt::Display for ProducerEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a Kafka UUID text could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text was not 22 characters of URL-safe base64 encoding 16 bytes.
    #[error("invalid Kafka UUID text {text:?}: {reason}")]
    InvalidUuid {
        /// The text that was refused.
        text: String,
        /// What was wrong with it.
        reason: &'static str,
    },
}

/// Kafka's text form of a UUID: URL-safe base64 of its 16 bytes, no padding.
#[must_use]
pub fn kafka_uuid(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Parses Kafka's text form of a UUID (the inverse of [`kafka_uuid`]).
///
/// # Errors
///
/// Returns [`IdError::InvalidUuid`] unless `text` is exactly 22 characters of
/// URL-safe base64 without padding that decode to 16 bytes.
pub fn decode_kafka_uuid(text: &str) -> Result<Uuid, IdError> {
    let invalid = |reason| IdError::InvalidUuid {
        text: text.to_owned(),
        reason,
    };
    if text.len() != 22 {
        return Err(invalid("expected 22 characters"));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| invalid("not URL-safe base64"))?;
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| invalid("does not decode to 16 bytes"))?;
    let id = Uuid::from_bytes(bytes);
    // Reject non-canonical encodings (stray low bits in the last character),
    // so every accepted text is the one `kafka_uuid` writes.
    if kafka_uuid(id) != text {
        return Err(invalid("not the canonical encoding"));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn known_text_form() {
        // Kafka prints Uuid(0, 0xCA) as "AAAAAAAAAAAAAAAAAAAAyg".
        let id = Uuid::from_u128(0xCA);
        check!(kafka_uuid(id) == "AAAAAAAAAAAAAAAAAAAAyg");
        check!(decode_kafka_uuid("AAAAAAAAAAAAAAAAAAAAyg") == Ok(id));
    }

    #[test]
    fn malformed_texts_are_refused() {
        for text in [
            "",
            "short",
            "AAAAAAAAAAAAAAAAAAAAy",
            "AAAAAAAAAAAAAAAAAAAA+g",
            "AAAAAAAAAAAAAAAAAAAAyh",
        ] {
            check!(decode_kafka_uuid(text).is_err(), "{text}");
        }
    }

    proptest! {
        #[test]
        fn round_trip(raw in any::<u128>()) {
            let id = Uuid::from_u128(raw);
            prop_assert_eq!(decode_kafka_uuid(&kafka_uuid(id)), Ok(id));
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,30}") {
            let _ = decode_kafka_uuid(&text);
        }
    }
}
