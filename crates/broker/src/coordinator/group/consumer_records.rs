//! Kafka's `__consumer_offsets` record schemas of KIP-848 consumer groups.
//!
//! Written by hand from Kafka's JSON schemas
//! (`group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`),
//! like the classic ones in [`records`](super::records). The key opens with
//! its record type (Kafka's `apiKey`) and holds non-flexible strings; the
//! value opens with version 0 and is flexible (compact strings and arrays,
//! a tagged-field section per struct):
//!
//! | type | key                  | value                                     |
//! |------|----------------------|-------------------------------------------|
//! | 3    | group                | group epoch                               |
//! | 5    | group, member        | instance, rack, client, subscription, ... |
//! | 6    | group                | target assignment epoch                   |
//! | 7    | group, member        | the member's target partitions            |
//! | 8    | group, member        | member epochs, state, held and revoking   |
//!
//! Type 4 (`ConsumerGroupPartitionMetadata`) is deprecated since Kafka 4.1
//! (KIP-1101 replaced it by a metadata hash in the group record): it is
//! neither written nor read. Tagged fields this coordinator does not keep
//! (the metadata hash, the assignment timestamp, a classic member's
//! protocols) are skipped on read and not written, which is what Kafka
//! reads as their defaults. The per-partition assignment epochs of KIP-1251
//! are kept: they are tag 0 of each `TopicPartitions` of type 8.

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::assignor::Assignment;
use super::error::GroupError;
use crate::coordinator::record_codec::{
    Reader, put_array_len, put_nullable_string, put_string, put_tagged_fields, put_uvarint,
};

/// Key type of `ConsumerGroupMetadataKey`.
pub const GROUP_EPOCH_KEY: i16 = 3;
/// Key type of `ConsumerGroupMemberMetadataKey`.
pub const MEMBER_METADATA_KEY: i16 = 5;
/// Key type of `ConsumerGroupTargetAssignmentMetadataKey`.
pub const TARGET_EPOCH_KEY: i16 = 6;
/// Key type of `ConsumerGroupTargetAssignmentMemberKey`.
pub const TARGET_MEMBER_KEY: i16 = 7;
/// Key type of `ConsumerGroupCurrentMemberAssignmentKey`.
pub const CURRENT_ASSIGNMENT_KEY: i16 = 8;

/// The key of a consumer group record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConsumerKey {
    /// Type 3: the group epoch.
    GroupEpoch {
        /// The group id.
        group: String,
    },
    /// Type 5: a member's metadata.
    Member {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
    },
    /// Type 6: the target assignment's epoch.
    TargetEpoch {
        /// The group id.
        group: String,
    },
    /// Type 7: a member's target assignment.
    Target {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
    },
    /// Type 8: a member's current assignment.
    Current {
        /// The group id.
        group: String,
        /// The member id.
        member: String,
    },
}

impl ConsumerKey {
    /// The group the key belongs to.
    pub fn group(&self) -> &str {
        match self {
            ConsumerKey::GroupEpoch { group }
            | ConsumerKey::Member { group, .. }
            | ConsumerKey::TargetEpoch { group }
            | ConsumerKey::Target { group, .. }
            | ConsumerKey::Current { group, .. } => group,
        }
    }

    /// Encodes the key (its type, then non-flexible strings).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        let (kind, group, member) = match self {
            ConsumerKey::GroupEpoch { group } => (GROUP_EPOCH_KEY, group, None),
            ConsumerKey::Member { group, member } => (MEMBER_METADATA_KEY, group, Some(member)),
            ConsumerKey::TargetEpoch { group } => (TARGET_EPOCH_KEY, group, None),
            ConsumerKey::Target { group, member } => (TARGET_MEMBER_KEY, group, Some(member)),
            ConsumerKey::Current { group, member } => (CURRENT_ASSIGNMENT_KEY, group, Some(member)),
        };
        w.put_i16(kind);
        put_string(&mut w, group, false);
        if let Some(member) = member {
            put_string(&mut w, member, false);
        }
        w.freeze()
    }

    /// Decodes the rest of a key of type `kind` (its first two bytes
    /// already read); `None` for a type that is not a consumer group's.
    ///
    /// # Errors
    ///
    /// [`GroupError::Malformed`] when the bytes do not hold a complete key.
    pub(crate) fn decode_body(kind: i16, r: &mut Reader<'_>) -> Result<Option<Self>, GroupError> {
        let key = match kind {
            GROUP_EPOCH_KEY => ConsumerKey::GroupEpoch {
                group: r.string(false)?,
            },
            TARGET_EPOCH_KEY => ConsumerKey::TargetEpoch {
                group: r.string(false)?,
            },
            MEMBER_METADATA_KEY | TARGET_MEMBER_KEY | CURRENT_ASSIGNMENT_KEY => {
                let group = r.string(false)?;
                let member = r.string(false)?;
                match kind {
                    MEMBER_METADATA_KEY => ConsumerKey::Member { group, member },
                    TARGET_MEMBER_KEY => ConsumerKey::Target { group, member },
                    _ => ConsumerKey::Current { group, member },
                }
            }
            _ => return Ok(None),
        };
        r.finish()?;
        Ok(Some(key))
    }
}

/// Reads a value's version and refuses any but 0.
fn value_reader<'a>(buf: &'a [u8], what: &'static str) -> Result<Reader<'a>, GroupError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if version != 0 {
        return Err(GroupError::UnsupportedVersion { what, version });
    }
    Ok(r)
}

/// `ConsumerGroupMetadataValue` (type 3): the group epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupEpochValue {
    /// The group epoch.
    pub epoch: i32,
}

impl GroupEpochValue {
    /// Encodes the value (version 0, no tagged fields).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(0);
        w.put_i32(self.epoch);
        put_uvarint(&mut w, 0);
        w.freeze()
    }

    /// Decodes the value, skipping its tagged fields.
    ///
    /// # Errors
    ///
    /// [`GroupError::Malformed`] for a short or garbled buffer,
    /// [`GroupError::UnsupportedVersion`] for a version other than 0.
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = value_reader(buf, "ConsumerGroupMetadataValue")?;
        let epoch = r.i32()?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self { epoch })
    }
}

/// `ConsumerGroupTargetAssignmentMetadataValue` (type 6): the epoch of the
/// target assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetEpochValue {
    /// The assignment epoch.
    pub epoch: i32,
}

impl TargetEpochValue {
    /// Encodes the value (version 0, no tagged fields).
    pub fn encode(&self) -> Bytes {
        GroupEpochValue { epoch: self.epoch }.encode()
    }

    /// Decodes the value, skipping its tagged fields.
    ///
    /// # Errors
    ///
    /// As [`GroupEpochValue::decode`].
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = value_reader(buf, "ConsumerGroupTargetAssignmentMetadataValue")?;
        let epoch = r.i32()?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self { epoch })
    }
}

/// `ConsumerGroupMemberMetadataValue` (type 5): what a member said about
/// itself when it joined or last changed its subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack id.
    pub rack_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// The subscribed regular expression.
    pub subscribed_topic_regex: Option<String>,
    /// The rebalance timeout (ms).
    pub rebalance_timeout_ms: i32,
    /// The server assignor the member asked for.
    pub server_assignor: Option<String>,
}

impl MemberMetadataValue {
    /// Encodes the value (version 0; the classic member metadata tag is a
    /// consumer-protocol member's default, absent).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(0);
        put_nullable_string(&mut w, self.instance_id.as_deref(), true);
        put_nullable_string(&mut w, self.rack_id.as_deref(), true);
        put_string(&mut w, &self.client_id, true);
        put_string(&mut w, &self.client_host, true);
        put_array_len(&mut w, self.subscribed_topic_names.len(), true);
        for topic in &self.subscribed_topic_names {
            put_string(&mut w, topic, true);
        }
        put_nullable_string(&mut w, self.subscribed_topic_regex.as_deref(), true);
        w.put_i32(self.rebalance_timeout_ms);
        put_nullable_string(&mut w, self.server_assignor.as_deref(), true);
        put_uvarint(&mut w, 0);
        w.freeze()
    }

    /// Decodes the value, skipping its tagged fields.
    ///
    /// # Errors
    ///
    /// As [`GroupEpochValue::decode`].
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = value_reader(buf, "ConsumerGroupMemberMetadataValue")?;
        let instance_id = r.nullable_string(true)?;
        let rack_id = r.nullable_string(true)?;
        let client_id = r.string(true)?;
        let client_host = r.string(true)?;
        let count = r.array_len(true)?;
        let mut subscribed_topic_names = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            subscribed_topic_names.push(r.string(true)?);
        }
        let subscribed_topic_regex = r.nullable_string(true)?;
        let rebalance_timeout_ms = r.i32()?;
        let server_assignor = r.nullable_string(true)?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self {
            instance_id,
            rack_id,
            client_id,
            client_host,
            subscribed_topic_names,
            subscribed_topic_regex,
            rebalance_timeout_ms,
            server_assignor,
        })
    }
}

fn put_partitions(w: &mut BytesMut, partitions: &[i32]) {
    put_array_len(w, partitions.len(), true);
    for p in partitions {
        w.put_i32(*p);
    }
}

fn read_partitions(r: &mut Reader<'_>) -> Result<Vec<i32>, GroupError> {
    let count = r.array_len(true)?;
    let mut out = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        out.push(r.i32()?);
    }
    Ok(out)
}

fn read_uuid(r: &mut Reader<'_>) -> Result<Uuid, GroupError> {
    let raw = r.take(16)?;
    Uuid::from_slice(raw).map_err(|e| GroupError::Malformed(e.to_string()))
}

/// `ConsumerGroupTargetAssignmentMemberValue` (type 7): the partitions the
/// assignor gave a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetMemberValue {
    /// The target partitions by topic id.
    pub partitions: Assignment,
}

impl TargetMemberValue {
    /// Encodes the value (version 0).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(0);
        put_array_len(&mut w, self.partitions.len(), true);
        for (topic, ps) in &self.partitions {
            w.put_slice(topic.as_bytes());
            put_partitions(&mut w, &ps.iter().copied().collect::<Vec<_>>());
            put_uvarint(&mut w, 0);
        }
        put_uvarint(&mut w, 0);
        w.freeze()
    }

    /// Decodes the value, skipping its tagged fields.
    ///
    /// # Errors
    ///
    /// As [`GroupEpochValue::decode`].
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = value_reader(buf, "ConsumerGroupTargetAssignmentMemberValue")?;
        let count = r.array_len(true)?;
        let mut partitions = Assignment::new();
        for _ in 0..count {
            let topic = read_uuid(&mut r)?;
            let ps = read_partitions(&mut r)?;
            r.skip_tagged_fields()?;
            partitions.entry(topic).or_default().extend(ps);
        }
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self { partitions })
    }
}

/// Kafka's `MemberState`, as type 8 stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Reconciled with its target.
    Stable,
    /// Must revoke partitions before moving to the next epoch.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions others still hold.
    UnreleasedPartitions,
    /// A state a newer Kafka wrote.
    Unknown,
}

impl MemberState {
    /// The byte Kafka stores.
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// The state a stored byte names.
    pub fn from_value(value: i8) -> Self {
        match value {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// `ConsumerGroupCurrentMemberAssignmentValue` (type 8): where a member is
/// in its reconciliation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignmentValue {
    /// The epoch the member must heartbeat with.
    pub member_epoch: i32,
    /// The epoch before the last bump (a retry may carry it).
    pub previous_member_epoch: i32,
    /// The member's state.
    pub state: MemberState,
    /// The partitions the member holds, each with the epoch it was assigned
    /// at (KIP-1251; `None` when the record carries none).
    pub assigned: Vec<EpochedPartitions>,
    /// The partitions the member must revoke, likewise.
    pub revoking: Vec<EpochedPartitions>,
}

/// One topic's partitions of a current assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochedPartitions {
    /// The topic id.
    pub topic: Uuid,
    /// The partitions.
    pub partitions: Vec<i32>,
    /// The epoch each partition was assigned at, aligned with `partitions`.
    pub assignment_epochs: Option<Vec<i32>>,
}

fn put_epoched(w: &mut BytesMut, topics: &[EpochedPartitions]) {
    put_array_len(w, topics.len(), true);
    for t in topics {
        w.put_slice(t.topic.as_bytes());
        put_partitions(w, &t.partitions);
        match &t.assignment_epochs {
            Some(epochs) => {
                let mut value = BytesMut::new();
                put_partitions(&mut value, epochs);
                put_tagged_fields(w, &[(0, value.to_vec())]);
            }
            None => put_uvarint(w, 0),
        }
    }
}

fn read_epoched(r: &mut Reader<'_>) -> Result<Vec<EpochedPartitions>, GroupError> {
    let count = r.array_len(true)?;
    let mut out = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let topic = read_uuid(r)?;
        let partitions = read_partitions(r)?;
        let mut assignment_epochs = None;
        for (tag, raw) in r.tagged_fields()? {
            if tag == 0 {
                let mut inner = Reader::new(raw);
                if let Some(n) = inner.nullable_array_len(true)? {
                    let mut epochs = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        epochs.push(inner.i32()?);
                    }
                    assignment_epochs = Some(epochs);
                }
                inner.finish()?;
            }
        }
        out.push(EpochedPartitions {
            topic,
            partitions,
            assignment_epochs,
        });
    }
    Ok(out)
}

impl CurrentAssignmentValue {
    /// Encodes the value (version 0).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(0);
        w.put_i32(self.member_epoch);
        w.put_i32(self.previous_member_epoch);
        w.put_i8(self.state.value());
        put_epoched(&mut w, &self.assigned);
        put_epoched(&mut w, &self.revoking);
        put_uvarint(&mut w, 0);
        w.freeze()
    }

    /// Decodes the value, skipping tagged fields it does not know.
    ///
    /// # Errors
    ///
    /// As [`GroupEpochValue::decode`].
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = value_reader(buf, "ConsumerGroupCurrentMemberAssignmentValue")?;
        let member_epoch = r.i32()?;
        let previous_member_epoch = r.i32()?;
        let state = MemberState::from_value(r.i8()?);
        let assigned = read_epoched(&mut r)?;
        let revoking = read_epoched(&mut r)?;
        r.skip_tagged_fields()?;
        r.finish()?;
        Ok(Self {
            member_epoch,
            previous_member_epoch,
            state,
            assigned,
            revoking,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const TOPIC: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

    #[test]
    fn keys_golden() {
        let cases = [
            (
                ConsumerKey::GroupEpoch { group: "g".into() },
                "0003 0001 67",
            ),
            (
                ConsumerKey::Member {
                    group: "g".into(),
                    member: "m1".into(),
                },
                "0005 0001 67 0002 6d31",
            ),
            (
                ConsumerKey::TargetEpoch { group: "g".into() },
                "0006 0001 67",
            ),
            (
                ConsumerKey::Target {
                    group: "g".into(),
                    member: "m1".into(),
                },
                "0007 0001 67 0002 6d31",
            ),
            (
                ConsumerKey::Current {
                    group: "g".into(),
                    member: "m1".into(),
                },
                "0008 0001 67 0002 6d31",
            ),
        ];
        for (key, bytes) in cases {
            let bytes = hex(bytes);
            assert_eq!(key.encode().as_ref(), bytes.as_slice(), "{key:?}");
            let mut r = Reader::new(&bytes);
            let kind = r.i16().unwrap();
            assert_eq!(ConsumerKey::decode_body(kind, &mut r).unwrap(), Some(key));
        }
    }

    #[test]
    fn epoch_values_golden() {
        let bytes = hex("0000 00000007 00");
        assert_eq!(GroupEpochValue { epoch: 7 }.encode().as_ref(), bytes);
        assert_eq!(GroupEpochValue::decode(&bytes).unwrap().epoch, 7);
        assert_eq!(TargetEpochValue::decode(&bytes).unwrap().epoch, 7);
        // Kafka 4.1's metadata hash (tag 0) and a creation time (tag 1) are
        // skipped.
        let tagged = hex("0000 00000007 02 00 08 0000000000000001 01 08 0000000000000002");
        assert_eq!(GroupEpochValue::decode(&tagged).unwrap().epoch, 7);
        assert!(GroupEpochValue::decode(&hex("0001 00000007 00")).is_err());
    }

    fn member_value() -> MemberMetadataValue {
        MemberMetadataValue {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["t".into(), "u".into()],
            subscribed_topic_regex: Some("a.*".into()),
            rebalance_timeout_ms: 300,
            server_assignor: Some("uniform".into()),
        }
    }

    #[test]
    fn member_metadata_golden() {
        let bytes = hex(concat!(
            "0000",
            "02 69",             // instanceId "i"
            "00",                // rackId null
            "02 63",             // clientId "c"
            "03 2f68",           // clientHost "/h"
            "03 02 74 02 75",    // subscribedTopicNames [t, u]
            "04 612e2a",         // subscribedTopicRegex "a.*"
            "0000012c",          // rebalanceTimeoutMs 300
            "08 756e69666f726d", // serverAssignor "uniform"
            "00",                // tagged fields
        ));
        assert_eq!(member_value().encode().as_ref(), bytes.as_slice());
        assert_eq!(MemberMetadataValue::decode(&bytes).unwrap(), member_value());
    }

    #[test]
    fn target_member_golden() {
        let value = TargetMemberValue {
            partitions: Assignment::from([(TOPIC, BTreeSet::from([0, 2]))]),
        };
        let bytes = hex(concat!(
            "0000",
            "02",                               // one topic
            "0102030405060708090a0b0c0d0e0f10", // topicId
            "03 00000000 00000002",             // partitions [0, 2]
            "00",                               // topic tagged fields
            "00",                               // tagged fields
        ));
        assert_eq!(value.encode().as_ref(), bytes.as_slice());
        assert_eq!(TargetMemberValue::decode(&bytes).unwrap(), value);
    }

    fn current_value() -> CurrentAssignmentValue {
        CurrentAssignmentValue {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: MemberState::UnrevokedPartitions,
            assigned: vec![EpochedPartitions {
                topic: TOPIC,
                partitions: vec![1],
                assignment_epochs: Some(vec![3]),
            }],
            revoking: vec![EpochedPartitions {
                topic: TOPIC,
                partitions: vec![2],
                assignment_epochs: None,
            }],
        }
    }

    #[test]
    fn current_assignment_golden() {
        let bytes = hex(concat!(
            "0000",
            "00000005", // memberEpoch
            "00000004", // previousMemberEpoch
            "01",       // state UNREVOKED_PARTITIONS
            "02 0102030405060708090a0b0c0d0e0f10 02 00000001",
            "01 00 05 02 00000003", // tag 0 (assignmentEpochs [3]), 5 bytes
            "02 0102030405060708090a0b0c0d0e0f10 02 00000002 00",
            "00",
        ));
        assert_eq!(current_value().encode().as_ref(), bytes.as_slice());
        assert_eq!(
            CurrentAssignmentValue::decode(&bytes).unwrap(),
            current_value()
        );
    }

    #[test]
    fn truncations_are_errors() {
        type Fails = fn(&[u8]) -> bool;
        let values: [(Bytes, Fails); 3] = [
            (member_value().encode(), |b| {
                MemberMetadataValue::decode(b).is_err()
            }),
            (current_value().encode(), |b| {
                CurrentAssignmentValue::decode(b).is_err()
            }),
            (
                TargetMemberValue {
                    partitions: Assignment::from([(TOPIC, BTreeSet::from([1]))]),
                }
                .encode(),
                |b| TargetMemberValue::decode(b).is_err(),
            ),
        ];
        for (full, fails) in values {
            for n in 0..full.len() {
                assert!(fails(&full[..n]), "prefix {n}");
            }
            let mut long = full.to_vec();
            long.push(0);
            assert!(fails(&long));
        }
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = GroupEpochValue::decode(&bytes);
            let _ = MemberMetadataValue::decode(&bytes);
            let _ = TargetMemberValue::decode(&bytes);
            let _ = CurrentAssignmentValue::decode(&bytes);
        }
    }
}
