//! Kafka's `__consumer_offsets` record schemas: keys and values, byte for byte.
//!
//! `kafka-protocol` ships the client/broker messages but not the coordinator's
//! internal records, so they are written here by hand from Kafka's schemas
//! (`group-coordinator/src/main/resources/common/message/*.json`). A record
//! key opens with an `int16` that names the schema:
//!
//! * 0 and 1 — `OffsetCommitKey {group, topic, partition}` (0 is the legacy
//!   spelling; both decode the same),
//! * 2 — `GroupMetadataKey {group}`,
//! * 3, 5, 6, 7 and 8 — a KIP-848 consumer group's records
//!   ([`consumer_records`](super::consumer_records)),
//! * any other above 2 — deprecated, share or streams records this
//!   coordinator does not read back; [`RecordKey::Other`] lets a loader skip
//!   them.
//!
//! A value opens with its own `int16` version. `OffsetCommitValue` has
//! versions 0–4 and `GroupMetadataValue` 0–4; version 4 of both is "flexible"
//! (compact strings and arrays, tagged fields). A `null` value is a tombstone.
//!
//! Decoding never panics: every read is bounds-checked and a short or garbled
//! buffer is a [`GroupError::Malformed`].

use bytes::{BufMut, Bytes, BytesMut};

use super::consumer_records::ConsumerKey;
use super::error::GroupError;
use crate::coordinator::record_codec::{
    Malformed, Reader, put_array_len, put_bytes, put_nullable_string, put_string, put_uvarint,
};

impl From<Malformed> for GroupError {
    fn from(e: Malformed) -> Self {
        GroupError::Malformed(e.0)
    }
}

/// Key schema id of the legacy offset-commit key (still readable).
pub const OFFSET_COMMIT_KEY_V0: i16 = 0;
/// Key schema id Kafka writes for offset commits.
pub const OFFSET_COMMIT_KEY_V1: i16 = 1;
/// Key schema id of the group metadata key.
pub const GROUP_METADATA_KEY: i16 = 2;

/// A decoded `__consumer_offsets` record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    /// A committed offset of one partition for one group.
    Offset(OffsetCommitKey),
    /// A classic group's metadata.
    Group(GroupMetadataKey),
    /// A KIP-848 consumer group's record.
    Consumer(ConsumerKey),
    /// A record type this coordinator does not keep (share or streams
    /// groups, or deprecated ones); carries the key version.
    Other(i16),
}

impl RecordKey {
    /// Decodes a record key.
    ///
    /// # Errors
    ///
    /// [`GroupError::Malformed`] when the bytes do not hold a complete key.
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = Reader::new(buf);
        let version = r.i16()?;
        let key = match version {
            OFFSET_COMMIT_KEY_V0 | OFFSET_COMMIT_KEY_V1 => RecordKey::Offset(OffsetCommitKey {
                group: r.string(false)?,
                topic: r.string(false)?,
                partition: r.i32()?,
            }),
            GROUP_METADATA_KEY => RecordKey::Group(GroupMetadataKey {
                group: r.string(false)?,
            }),
            v if v > GROUP_METADATA_KEY => {
                return Ok(match ConsumerKey::decode_body(v, &mut r)? {
                    Some(key) => RecordKey::Consumer(key),
                    None => RecordKey::Other(v),
                });
            }
            v => {
                return Err(GroupError::UnsupportedVersion {
                    what: "key",
                    version: v,
                });
            }
        };
        r.finish()?;
        Ok(key)
    }

    /// The group this key belongs to, when it is one this coordinator reads.
    pub fn group(&self) -> Option<&str> {
        match self {
            RecordKey::Offset(k) => Some(&k.group),
            RecordKey::Group(k) => Some(&k.group),
            RecordKey::Consumer(k) => Some(k.group()),
            RecordKey::Other(_) => None,
        }
    }
}

/// `OffsetCommitKey`: which group's offset for which partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetCommitKey {
    /// The consumer group id.
    pub group: String,
    /// The topic name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl OffsetCommitKey {
    /// Encodes the key as Kafka writes it (key version 1).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(OFFSET_COMMIT_KEY_V1);
        put_string(&mut w, &self.group, false);
        put_string(&mut w, &self.topic, false);
        w.put_i32(self.partition);
        w.freeze()
    }
}

/// `GroupMetadataKey`: the key of a classic group's metadata record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupMetadataKey {
    /// The group id.
    pub group: String,
}

impl GroupMetadataKey {
    /// Encodes the key (key version 2).
    pub fn encode(&self) -> Bytes {
        let mut w = BytesMut::new();
        w.put_i16(GROUP_METADATA_KEY);
        put_string(&mut w, &self.group, false);
        w.freeze()
    }
}

/// `OffsetCommitValue`: one committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch of the committed record, -1 when unknown (v3+).
    pub leader_epoch: i32,
    /// Client-supplied metadata string.
    pub metadata: String,
    /// When the commit happened (ms since the epoch).
    pub commit_timestamp: i64,
    /// Explicit expiry (ms since the epoch, only in v1), -1 when absent.
    pub expire_timestamp: i64,
}

impl OffsetCommitValue {
    /// The version Kafka writes for this value: 1 when it carries an explicit
    /// expire timestamp (the only version that can), 3 otherwise.
    pub fn preferred_version(&self) -> i16 {
        if self.expire_timestamp >= 0 { 1 } else { 3 }
    }

    /// Encodes the value at its [`preferred_version`](Self::preferred_version).
    pub fn encode(&self) -> Bytes {
        self.encode_version(self.preferred_version())
    }

    /// Encodes the value at `version` (0–4; fields a version lacks are
    /// dropped, an out-of-range version is clamped to 4).
    pub fn encode_version(&self, version: i16) -> Bytes {
        let version = version.clamp(0, 4);
        let flexible = version >= 4;
        let mut w = BytesMut::new();
        w.put_i16(version);
        w.put_i64(self.offset);
        if version >= 3 {
            w.put_i32(self.leader_epoch);
        }
        put_string(&mut w, &self.metadata, flexible);
        w.put_i64(self.commit_timestamp);
        if version == 1 {
            w.put_i64(self.expire_timestamp);
        }
        if flexible {
            put_uvarint(&mut w, 0);
        }
        w.freeze()
    }

    /// Decodes a value of any version 0–4.
    ///
    /// # Errors
    ///
    /// [`GroupError::Malformed`] for a short or garbled buffer,
    /// [`GroupError::UnsupportedVersion`] for a version above 4.
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = Reader::new(buf);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(GroupError::UnsupportedVersion {
                what: "OffsetCommitValue",
                version,
            });
        }
        let flexible = version >= 4;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string(flexible)?;
        let commit_timestamp = r.i64()?;
        let expire_timestamp = if version == 1 { r.i64()? } else { -1 };
        if flexible {
            r.skip_tagged_fields()?;
        }
        r.finish()?;
        Ok(Self {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
            expire_timestamp,
        })
    }
}

/// `GroupMetadataValue`: a classic group's generation and members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// The protocol type (`consumer`, `connect`, ...), empty for none.
    pub protocol_type: String,
    /// The generation id.
    pub generation: i32,
    /// The selected protocol (assignor), `None` when the group is empty.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the group entered its current state (v2+), -1 when unknown.
    pub current_state_timestamp: i64,
    /// The members.
    pub members: Vec<MemberMetadata>,
}

/// One member inside a [`GroupMetadataValue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    /// The member id.
    pub member_id: String,
    /// The static instance id (v3+).
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// The rebalance timeout (v1+, ms).
    pub rebalance_timeout: i32,
    /// The session timeout (ms).
    pub session_timeout: i32,
    /// The member's metadata for the selected protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl GroupMetadataValue {
    /// The version Kafka writes (3).
    pub const PREFERRED_VERSION: i16 = 3;

    /// Encodes the value at [`PREFERRED_VERSION`](Self::PREFERRED_VERSION).
    pub fn encode(&self) -> Bytes {
        self.encode_version(Self::PREFERRED_VERSION)
    }

    /// Encodes the value at `version` (0–4, clamped).
    pub fn encode_version(&self, version: i16) -> Bytes {
        let version = version.clamp(0, 4);
        let flexible = version >= 4;
        let mut w = BytesMut::new();
        w.put_i16(version);
        put_string(&mut w, &self.protocol_type, flexible);
        w.put_i32(self.generation);
        put_nullable_string(&mut w, self.protocol.as_deref(), flexible);
        put_nullable_string(&mut w, self.leader.as_deref(), flexible);
        if version >= 2 {
            w.put_i64(self.current_state_timestamp);
        }
        put_array_len(&mut w, self.members.len(), flexible);
        for m in &self.members {
            put_string(&mut w, &m.member_id, flexible);
            if version >= 3 {
                put_nullable_string(&mut w, m.group_instance_id.as_deref(), flexible);
            }
            put_string(&mut w, &m.client_id, flexible);
            put_string(&mut w, &m.client_host, flexible);
            if version >= 1 {
                w.put_i32(m.rebalance_timeout);
            }
            w.put_i32(m.session_timeout);
            put_bytes(&mut w, &m.subscription, flexible);
            put_bytes(&mut w, &m.assignment, flexible);
            if flexible {
                put_uvarint(&mut w, 0);
            }
        }
        if flexible {
            put_uvarint(&mut w, 0);
        }
        w.freeze()
    }

    /// Decodes a value of any version 0–4.
    ///
    /// # Errors
    ///
    /// [`GroupError::Malformed`] for a short or garbled buffer,
    /// [`GroupError::UnsupportedVersion`] for a version above 4.
    pub fn decode(buf: &[u8]) -> Result<Self, GroupError> {
        let mut r = Reader::new(buf);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(GroupError::UnsupportedVersion {
                what: "GroupMetadataValue",
                version,
            });
        }
        let flexible = version >= 4;
        let protocol_type = r.string(flexible)?;
        let generation = r.i32()?;
        let protocol = r.nullable_string(flexible)?;
        let leader = r.nullable_string(flexible)?;
        let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        let count = r.array_len(flexible)?;
        let mut members = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let member_id = r.string(flexible)?;
            let group_instance_id = if version >= 3 {
                r.nullable_string(flexible)?
            } else {
                None
            };
            let client_id = r.string(flexible)?;
            let client_host = r.string(flexible)?;
            let rebalance_timeout = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout = r.i32()?;
            let subscription = r.bytes(flexible)?;
            let assignment = r.bytes(flexible)?;
            if flexible {
                r.skip_tagged_fields()?;
            }
            members.push(MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout: if rebalance_timeout < 0 {
                    session_timeout
                } else {
                    rebalance_timeout
                },
                session_timeout,
                subscription,
                assignment,
            });
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
        r.finish()?;
        Ok(Self {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn offset_commit_key_golden() {
        let key = OffsetCommitKey {
            group: "g1".into(),
            topic: "t".into(),
            partition: 7,
        };
        let bytes = hex("0001 0002 6731 0001 74 00000007");
        assert_eq!(key.encode().as_ref(), bytes.as_slice());
        assert_eq!(
            RecordKey::decode(&bytes).unwrap(),
            RecordKey::Offset(key.clone())
        );
        // The legacy key version 0 has the same layout.
        let legacy = hex("0000 0002 6731 0001 74 00000007");
        assert_eq!(RecordKey::decode(&legacy).unwrap(), RecordKey::Offset(key));
    }

    #[test]
    fn group_metadata_key_golden() {
        let key = GroupMetadataKey {
            group: "grp".into(),
        };
        let bytes = hex("0002 0003 677270");
        assert_eq!(key.encode().as_ref(), bytes.as_slice());
        assert_eq!(RecordKey::decode(&bytes).unwrap(), RecordKey::Group(key));
    }

    #[test]
    fn newer_record_types_are_skippable() {
        // ConsumerGroupPartitionMetadataKey (type 4, deprecated) and a share
        // group's key (type 10) are skipped; type 3 is a consumer group's.
        assert_eq!(
            RecordKey::decode(&hex("0004 0001 67")).unwrap(),
            RecordKey::Other(4)
        );
        assert_eq!(
            RecordKey::decode(&hex("000a 0001 67")).unwrap(),
            RecordKey::Other(10)
        );
        assert_eq!(
            RecordKey::decode(&hex("0003 0001 67")).unwrap(),
            RecordKey::Consumer(ConsumerKey::GroupEpoch { group: "g".into() })
        );
        assert!(RecordKey::decode(&hex("ffff 0001 67")).is_err());
    }

    fn offset_value() -> OffsetCommitValue {
        OffsetCommitValue {
            offset: 5,
            leader_epoch: 2,
            metadata: "m".into(),
            commit_timestamp: 10,
            expire_timestamp: -1,
        }
    }

    #[test]
    fn offset_commit_value_golden_v3() {
        let v = offset_value();
        let bytes = hex("0003 0000000000000005 00000002 0001 6d 000000000000000a");
        assert_eq!(v.encode().as_ref(), bytes.as_slice());
        assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), v);
    }

    #[test]
    fn offset_commit_value_golden_v1_carries_expiry() {
        let v = OffsetCommitValue {
            expire_timestamp: 99,
            leader_epoch: -1,
            ..offset_value()
        };
        let bytes = hex("0001 0000000000000005 0001 6d 000000000000000a 0000000000000063");
        assert_eq!(v.preferred_version(), 1);
        assert_eq!(v.encode().as_ref(), bytes.as_slice());
        assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), v);
    }

    #[test]
    fn offset_commit_value_golden_v0_v2_v4() {
        let v0 = hex("0000 0000000000000005 0001 6d 000000000000000a");
        let v2 = hex("0002 0000000000000005 0001 6d 000000000000000a");
        let v4 = hex("0004 0000000000000005 00000002 02 6d 000000000000000a 00");
        let expect_old = OffsetCommitValue {
            leader_epoch: -1,
            ..offset_value()
        };
        assert_eq!(OffsetCommitValue::decode(&v0).unwrap(), expect_old);
        assert_eq!(OffsetCommitValue::decode(&v2).unwrap(), expect_old);
        assert_eq!(OffsetCommitValue::decode(&v4).unwrap(), offset_value());
        assert_eq!(offset_value().encode_version(4).as_ref(), v4.as_slice());
        // A v4 value with an unknown tagged field still decodes.
        let tagged = hex("0004 0000000000000005 00000002 02 6d 000000000000000a 01 05 02 abcd");
        assert_eq!(OffsetCommitValue::decode(&tagged).unwrap(), offset_value());
    }

    fn group_value() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 1000,
            members: vec![MemberMetadata {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout: 300,
                session_timeout: 45,
                subscription: Bytes::from_static(&[1, 2]),
                assignment: Bytes::from_static(&[3]),
            }],
        }
    }

    #[test]
    fn group_metadata_value_golden_v3() {
        let bytes = hex(concat!(
            "0003",
            "0008 636f6e73756d6572", // protocolType "consumer"
            "00000003",              // generation
            "0005 72616e6765",       // protocol "range"
            "0002 6d31",             // leader "m1"
            "00000000000003e8",      // currentStateTimestamp 1000
            "00000001",              // one member
            "0002 6d31",             // memberId
            "0002 6931",             // groupInstanceId
            "0001 63",               // clientId
            "0002 2f68",             // clientHost
            "0000012c",              // rebalanceTimeout 300
            "0000002d",              // sessionTimeout 45
            "00000002 0102",         // subscription
            "00000001 03",           // assignment
        ));
        assert_eq!(group_value().encode().as_ref(), bytes.as_slice());
        assert_eq!(GroupMetadataValue::decode(&bytes).unwrap(), group_value());
    }

    #[test]
    fn group_metadata_value_golden_v0_and_v4() {
        let v0 = hex(concat!(
            "0000",
            "0008 636f6e73756d6572",
            "00000003",
            "ffff", // protocol null
            "ffff", // leader null
            "00000001",
            "0002 6d31",
            "0001 63",
            "0002 2f68",
            "0000002d", // sessionTimeout (no rebalanceTimeout before v1)
            "00000000",
            "00000000",
        ));
        let decoded = GroupMetadataValue::decode(&v0).unwrap();
        assert_eq!(decoded.protocol, None);
        assert_eq!(decoded.leader, None);
        assert_eq!(decoded.current_state_timestamp, -1);
        assert_eq!(decoded.members[0].group_instance_id, None);
        assert_eq!(decoded.members[0].rebalance_timeout, 45);
        let v4 = hex(concat!(
            "0004",
            "09 636f6e73756d6572",
            "00000003",
            "06 72616e6765",
            "03 6d31",
            "00000000000003e8",
            "02", // compact array: 1 member
            "03 6d31",
            "03 6931",
            "02 63",
            "03 2f68",
            "0000012c",
            "0000002d",
            "03 0102",
            "02 03",
            "00", // member tagged fields
            "00", // top-level tagged fields
        ));
        assert_eq!(group_value().encode_version(4).as_ref(), v4.as_slice());
        assert_eq!(GroupMetadataValue::decode(&v4).unwrap(), group_value());
    }

    #[test]
    fn every_version_round_trips() {
        for version in 0..=4 {
            let bytes = group_value().encode_version(version);
            let back = GroupMetadataValue::decode(&bytes).unwrap();
            assert_eq!(back.generation, 3);
            assert_eq!(back.members.len(), 1);
            let bytes = offset_value().encode_version(version);
            assert_eq!(OffsetCommitValue::decode(&bytes).unwrap().offset, 5);
        }
    }

    #[test]
    fn truncations_are_errors() {
        let full = group_value().encode();
        for n in 0..full.len() {
            assert!(
                GroupMetadataValue::decode(&full[..n]).is_err(),
                "prefix {n}"
            );
        }
        let full = offset_value().encode();
        for n in 0..full.len() {
            assert!(OffsetCommitValue::decode(&full[..n]).is_err(), "prefix {n}");
        }
        let mut long = full.to_vec();
        long.push(0);
        assert!(OffsetCommitValue::decode(&long).is_err());
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = RecordKey::decode(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
        }

        #[test]
        fn offset_values_round_trip(offset in any::<i64>(), epoch in any::<i32>(),
                                    metadata in ".{0,40}", ts in any::<i64>()) {
            let v = OffsetCommitValue { offset, leader_epoch: epoch, metadata,
                                        commit_timestamp: ts, expire_timestamp: -1 };
            prop_assert_eq!(OffsetCommitValue::decode(&v.encode()).unwrap(), v.clone());
            prop_assert_eq!(OffsetCommitValue::decode(&v.encode_version(4)).unwrap(), v);
        }
    }
}
