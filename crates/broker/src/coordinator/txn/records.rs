//! Kafka's `__transaction_state` record schemas, byte for byte
//! (`transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json`).
//!
//! * `TransactionLogKey` — `int16` record type 0, then the transactional id
//!   as a classic `int16`-length string.
//! * `TransactionLogValue` — `int16` version, then producer id (`int64`),
//!   epoch (`int16`), timeout (`int32`), status (`int8`: Kafka's
//!   `TransactionState` ids), the partitions as a nullable array of
//!   `{topic, [partition]}` (null in state `Empty`), last-update and start
//!   timestamps (`int64`). Version 0 is classic; version 1 is flexible
//!   (compact lengths, tagged fields: 0 previous producer id, 1 next
//!   producer id, 2 client transaction version).
//!
//! Kafka 3.x (and 4.x at `transaction.version` 0) writes version 0; 4.x at
//! transaction version 1 or 2 writes version 1. This coordinator writes
//! version 0 for a transaction that needs none of the tagged fields and
//! version 1 for one that does (transactions v2); it reads both. A
//! tombstone (null value) removes an expired transactional id.

use {
    super::state::{TopicPartition, TxnState},
    crate::coordinator::record_codec::{
        Malformed, Reader, put_array_len, put_null_array, put_string, put_tagged_fields,
    },
    bytes::{BufMut, Bytes, BytesMut},
    krabka_ids::{ProducerEpoch, ProducerId},
    std::collections::BTreeSet,
};

/// The record type (key version) of `TransactionLogKey`.
pub const TRANSACTION_LOG_KEY_TYPE: i16 = 0;
/// The value version this coordinator writes when no tagged field is set
/// (Kafka's transaction version 0).
pub const VALUE_VERSION: i16 = 0;

/// Why a `__transaction_state` record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Short or garbled bytes.
    #[error("malformed __transaction_state record: {0}")]
    Malformed(String),
    /// A key type or value version this coordinator does not know.
    #[error("unsupported __transaction_state {what} version {version}")]
    UnsupportedVersion {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// The version found.
        version: i16,
    },
    /// A transaction status id that is never persisted (or unknown).
    #[error("transaction status {0} is not a persisted state")]
    UnknownStatus(i8),
}

impl From<Malformed> for RecordError {
    fn from(e: Malformed) -> Self {
        RecordError::Malformed(e.0)
    }
}

/// Encodes the key of `transactional_id`'s record.
#[must_use]
pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut w = BytesMut::with_capacity(4 + transactional_id.len());
    w.put_i16(TRANSACTION_LOG_KEY_TYPE);
    put_string(&mut w, transactional_id, false);
    w.freeze()
}

/// Decodes a record key into its transactional id.
///
/// # Errors
///
/// [`RecordError::UnsupportedVersion`] for another key type,
/// [`RecordError::Malformed`] for bad bytes.
pub fn decode_key(buf: &[u8]) -> Result<String, RecordError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if version != TRANSACTION_LOG_KEY_TYPE {
        return Err(RecordError::UnsupportedVersion {
            what: "key",
            version,
        });
    }
    let id = r.string(false)?;
    r.finish()?;
    Ok(id)
}

/// `TransactionLogValue`: the persisted metadata of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The producer id in use.
    pub producer_id: ProducerId,
    /// Its epoch.
    pub producer_epoch: ProducerEpoch,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// The transaction's state.
    pub state: TxnState,
    /// The partitions of the transaction (none in `Empty`).
    pub partitions: BTreeSet<TopicPartition>,
    /// When the metadata last changed (ms).
    pub last_update_ms: i64,
    /// When the transaction started (ms), -1 when none is open.
    pub start_ms: i64,
    /// Tagged field 0 (v1): the producer id of the last committed
    /// transaction (transaction version 2), -1 by default.
    pub previous_producer_id: i64,
    /// Tagged field 1 (v1): the next producer id (transaction version 2),
    /// -1 by default.
    pub next_producer_id: i64,
    /// Tagged field 2 (v1): the client's transaction version, 0 by default.
    pub client_transaction_version: i16,
}

impl TransactionLogValue {
    /// Encodes the value at [`VALUE_VERSION`], or at the flexible version 1
    /// when a tagged field is set (version 0 has no room for them).
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let tagged = self.previous_producer_id != -1
            || self.next_producer_id != -1
            || self.client_transaction_version != 0;
        self.encode_version(if tagged { 1 } else { VALUE_VERSION })
    }

    /// Encodes the value at `version` (0 or 1; anything above 0 is written
    /// as the flexible version 1).
    #[must_use]
    pub fn encode_version(&self, version: i16) -> Bytes {
        let flexible = version >= 1;
        let mut w = BytesMut::with_capacity(64);
        w.put_i16(if flexible { 1 } else { 0 });
        w.put_i64(self.producer_id.0);
        w.put_i16(self.producer_epoch.0);
        w.put_i32(self.timeout_ms);
        w.put_i8(self.state.id());
        if self.state == TxnState::Empty {
            put_null_array(&mut w, flexible);
        } else {
            let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
            for tp in &self.partitions {
                match topics.last_mut() {
                    Some((topic, ids)) if *topic == tp.topic => ids.push(tp.partition),
                    _ => topics.push((&tp.topic, vec![tp.partition])),
                }
            }
            put_array_len(&mut w, topics.len(), flexible);
            for (topic, ids) in topics {
                put_string(&mut w, topic, flexible);
                put_array_len(&mut w, ids.len(), flexible);
                for id in ids {
                    w.put_i32(id);
                }
                if flexible {
                    put_tagged_fields(&mut w, &[]);
                }
            }
        }
        w.put_i64(self.last_update_ms);
        w.put_i64(self.start_ms);
        if flexible {
            let mut tagged = Vec::new();
            if self.previous_producer_id != -1 {
                tagged.push((0, self.previous_producer_id.to_be_bytes().to_vec()));
            }
            if self.next_producer_id != -1 {
                tagged.push((1, self.next_producer_id.to_be_bytes().to_vec()));
            }
            if self.client_transaction_version != 0 {
                tagged.push((2, self.client_transaction_version.to_be_bytes().to_vec()));
            }
            put_tagged_fields(&mut w, &tagged);
        }
        w.freeze()
    }

    /// Decodes a value of version 0 or 1.
    ///
    /// # Errors
    ///
    /// [`RecordError::UnsupportedVersion`] above version 1,
    /// [`RecordError::UnknownStatus`] for a status that is never persisted,
    /// [`RecordError::Malformed`] for bad bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader::new(buf);
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                what: "value",
                version,
            });
        }
        let flexible = version >= 1;
        let producer_id = ProducerId(r.i64()?);
        let producer_epoch = ProducerEpoch(r.i16()?);
        let timeout_ms = r.i32()?;
        let status = r.i8()?;
        let state = TxnState::from_id(status).ok_or(RecordError::UnknownStatus(status))?;
        let mut partitions = BTreeSet::new();
        if let Some(topics) = r.nullable_array_len(flexible)? {
            for _ in 0..topics {
                let topic = r.string(flexible)?;
                let count = r.array_len(flexible)?;
                for _ in 0..count {
                    partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
                }
                if flexible {
                    r.skip_tagged_fields()?;
                }
            }
        }
        let last_update_ms = r.i64()?;
        let start_ms = r.i64()?;
        let mut value = Self {
            producer_id,
            producer_epoch,
            timeout_ms,
            state,
            // Kafka ignores the partitions of an `Empty` record.
            partitions: if state == TxnState::Empty {
                BTreeSet::new()
            } else {
                partitions
            },
            last_update_ms,
            start_ms,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        };
        if flexible {
            for (tag, raw) in r.tagged_fields()? {
                let mut field = Reader::new(raw);
                match tag {
                    0 => value.previous_producer_id = field.i64()?,
                    1 => value.next_producer_id = field.i64()?,
                    2 => value.client_transaction_version = field.i16()?,
                    // Newer fields (e.g. the next producer epoch) are not
                    // used by this coordinator.
                    _ => continue,
                }
                field.finish()?;
            }
        }
        r.finish()?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The `Ongoing` record of a Kafka 4.0 broker at transaction version 1,
    /// captured from `__transaction_state` (producer id 0, epoch 0, timeout
    /// 60 s, partition `txtest-0`).
    const KAFKA_4_0_ONGOING_V1: &str = "0001 0000000000000000 0000 0000ea60 01 \
        02 07 747874657374 02 00000000 00 0000019e7b4b367a 0000019e7b4b367a 00";

    fn ongoing() -> TransactionLogValue {
        TransactionLogValue {
            producer_id: ProducerId(0),
            producer_epoch: ProducerEpoch(0),
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [TopicPartition::new("txtest", 0)].into_iter().collect(),
            last_update_ms: 0x0000_019e_7b4b_367a,
            start_ms: 0x0000_019e_7b4b_367a,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn key_golden() {
        let bytes = hex("0000 0009 6d792d74786e2d6964");
        check!(encode_key("my-txn-id").as_ref() == bytes.as_slice());
        check!(decode_key(&bytes).unwrap() == "my-txn-id");
        check!(
            decode_key(&hex("0001 0001 61"))
                == Err(RecordError::UnsupportedVersion {
                    what: "key",
                    version: 1
                })
        );
    }

    #[test]
    fn value_v1_matches_what_kafka_4_0_wrote() {
        let bytes = hex(KAFKA_4_0_ONGOING_V1);
        check!(bytes.len() == 48);
        check!(TransactionLogValue::decode(&bytes).unwrap() == ongoing());
        check!(ongoing().encode_version(1).as_ref() == bytes.as_slice());
    }

    #[test]
    fn value_v0_golden() {
        // The same metadata in the classic version 0 Kafka 3.x writes.
        let bytes = hex("0000 0000000000000000 0000 0000ea60 01 \
             00000001 0006 747874657374 00000001 00000000 \
             0000019e7b4b367a 0000019e7b4b367a");
        check!(ongoing().encode().as_ref() == bytes.as_slice());
        check!(TransactionLogValue::decode(&bytes).unwrap() == ongoing());
    }

    #[test]
    fn empty_state_has_null_partitions_and_complete_states_an_empty_list() {
        let empty = TransactionLogValue {
            producer_id: ProducerId(4000),
            producer_epoch: ProducerEpoch(3),
            timeout_ms: 10_000,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            last_update_ms: 7,
            start_ms: -1,
            ..ongoing()
        };
        let bytes = hex("0000 0000000000000fa0 0003 00002710 00 ffffffff \
             0000000000000007 ffffffffffffffff");
        check!(empty.encode().as_ref() == bytes.as_slice());
        check!(TransactionLogValue::decode(&bytes).unwrap() == empty);
        let done = TransactionLogValue {
            state: TxnState::CompleteCommit,
            ..empty.clone()
        };
        let bytes = hex("0000 0000000000000fa0 0003 00002710 04 00000000 \
             0000000000000007 ffffffffffffffff");
        check!(done.encode().as_ref() == bytes.as_slice());
        // Flexible: null is a zero length.
        check!(empty.encode_version(1).as_ref()[17] == 0);
    }

    #[test]
    fn partitions_group_by_topic_and_status_ids_are_kafkas() {
        let value = TransactionLogValue {
            state: TxnState::PrepareCommit,
            partitions: [("b", 1), ("a", 2), ("a", 0)]
                .into_iter()
                .map(|(t, p)| TopicPartition::new(t, p))
                .collect(),
            ..ongoing()
        };
        let bytes = value.encode();
        check!(bytes[16] == 2);
        // Two topics: "a" with [0, 2], "b" with [1].
        check!(bytes.get(17..21).unwrap() == [0, 0, 0, 2], "topic count");
        check!(TransactionLogValue::decode(&bytes).unwrap() == value);
        for (state, id) in [
            (TxnState::Empty, 0),
            (TxnState::Ongoing, 1),
            (TxnState::PrepareCommit, 2),
            (TxnState::PrepareAbort, 3),
            (TxnState::CompleteCommit, 4),
            (TxnState::CompleteAbort, 5),
        ] {
            check!(state.id() == id);
            check!(TxnState::from_id(id) == Some(state));
        }
        // Dead (6) and PrepareEpochFence (7) are never persisted.
        check!(TxnState::from_id(6).is_none());
        check!(TxnState::from_id(7).is_none());
    }

    #[test]
    fn flexible_tagged_fields_round_trip_and_unknown_tags_are_skipped() {
        let value = TransactionLogValue {
            previous_producer_id: 5,
            next_producer_id: 6,
            client_transaction_version: 2,
            ..ongoing()
        };
        let bytes = value.encode_version(1);
        check!(TransactionLogValue::decode(&bytes).unwrap() == value);
        // An unknown tag 3 (a newer Kafka's next producer epoch) is skipped.
        let mut with_tag3 = hex(KAFKA_4_0_ONGOING_V1);
        with_tag3.pop();
        with_tag3.extend_from_slice(&hex("01 03 02 0007"));
        check!(TransactionLogValue::decode(&with_tag3).unwrap() == ongoing());
    }

    #[test]
    fn truncations_and_trailing_bytes_are_errors() {
        for version in [0, 1] {
            let full = ongoing().encode_version(version);
            for n in 0..full.len() {
                check!(
                    TransactionLogValue::decode(&full[..n]).is_err(),
                    "v{version} prefix {n}"
                );
            }
            let mut long = full.to_vec();
            long.push(0);
            check!(TransactionLogValue::decode(&long).is_err());
        }
        check!(
            TransactionLogValue::decode(&hex("0002")).unwrap_err()
                == RecordError::UnsupportedVersion {
                    what: "value",
                    version: 2
                }
        );
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_key(&bytes);
            let _ = TransactionLogValue::decode(&bytes);
        }

        #[test]
        fn values_round_trip(pid in any::<i64>(), epoch in any::<i16>(), timeout in any::<i32>(),
                             state in 1i8..=5, parts in proptest::collection::btree_set(("[a-z]{1,5}", 0i32..8), 0..6),
                             update in any::<i64>(), start in any::<i64>(), version in 0i16..=1) {
            let value = TransactionLogValue {
                producer_id: ProducerId(pid),
                producer_epoch: ProducerEpoch(epoch),
                timeout_ms: timeout,
                state: TxnState::from_id(state).unwrap(),
                partitions: parts.into_iter().map(|(t, p)| TopicPartition::new(t, p)).collect(),
                last_update_ms: update,
                start_ms: start,
                previous_producer_id: -1,
                next_producer_id: -1,
                client_transaction_version: 0,
            };
            prop_assert_eq!(TransactionLogValue::decode(&value.encode_version(version)).unwrap(), value);
        }
    }
}
