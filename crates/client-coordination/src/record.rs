//! The records of coordination state and their binary codec.
//!
//! Every role keeps its state in one partition of the compacted topic
//! `__coordination_state`. Two kinds of record live there:
//!
//! * a [`Registration`] under the key [`CoordinationKey::registration`], one
//!   key per `(role, member)`, so compaction keeps the latest registration of
//!   each member and its offset is that member's place in the line;
//! * a [`Lease`] under the key [`CoordinationKey::lease`], one key per role,
//!   so compaction keeps the latest grant.
//!
//! The names are validated newtypes because a role becomes a Kafka
//! `transactional.id` and both names go on the wire; a [`FencingToken`] is the
//! `(producer id, producer epoch)` pair the transaction coordinator minted,
//! ordered lexicographically, which is the order in which the broker fences.
//!
//! # Wire layout (version 0)
//!
//! All integers are big-endian; a string is an `i16` byte length followed by
//! UTF-8 bytes (Kafka's `STRING`). Keys and values both open with an `i16`
//! version and an `i8` kind (`0` registration, `1` lease), so a reader can
//! tell an old layout from a foreign one before it reads further.
//!
//! ```text
//! key   = version:i16 kind:i8 role:string [member:string if kind = 0]
//! value = version:i16 kind:i8 member:string
//!         kind 0: registered_at:i64
//!         kind 1: producer_id:i64 epoch:i16 granted_at:i64 deadline:i64
//! ```
//!
//! The decoder never trusts a length: a truncated buffer, trailing bytes, a
//! negative length, an unknown version or kind, or a name that fails
//! validation each come back as [`CoordinationError::Record`].

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use krabka_ids::{ProducerEpoch, ProducerId};

use crate::error::CoordinationError;

/// The longest role or member name, in bytes (Kafka's topic-name limit).
pub const MAX_NAME_LEN: usize = 249;

/// The codec version this crate writes and the only one it reads.
pub const CODEC_VERSION: i16 = 0;

const KIND_REGISTRATION: i8 = 0;
const KIND_LEASE: i8 = 1;

fn validate_name(what: &'static str, value: &str) -> Result<(), CoordinationError> {
    let invalid = |reason| CoordinationError::Invalid {
        what,
        value: value.to_owned(),
        reason,
    };
    if value.is_empty() {
        return Err(invalid("must not be empty"));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(invalid("longer than 249 bytes"));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(invalid(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

/// A role that members compete for, e.g. `controller`.
///
/// The role is also the `transactional.id` whose producer epoch is the
/// leadership epoch, so its name follows a conservative subset of what Kafka
/// accepts: 1 to 249 bytes of ASCII letters, digits, `.`, `_` and `-`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Role(String);

impl Role {
    /// Validates `name` as a role.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when `name` is empty, longer
    /// than [`MAX_NAME_LEN`] bytes, or holds a character outside
    /// `[A-Za-z0-9._-]`.
    pub fn new(name: &str) -> Result<Self, CoordinationError> {
        validate_name("role", name)?;
        Ok(Self(name.to_owned()))
    }

    /// The role's name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of a member that campaigns for a role, e.g. `node-1`.
///
/// Same rules as [`Role`]: 1 to 249 bytes of `[A-Za-z0-9._-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberId(String);

impl MemberId {
    /// Validates `name` as a member id.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when `name` is empty, longer
    /// than [`MAX_NAME_LEN`] bytes, or holds a character outside
    /// `[A-Za-z0-9._-]`.
    pub fn new(name: &str) -> Result<Self, CoordinationError> {
        validate_name("member id", name)?;
        Ok(Self(name.to_owned()))
    }

    /// The member's name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The authority of a role holder: the producer id and epoch that the
/// transaction coordinator minted for `transactional.id = <role>`.
///
/// Tokens order by producer id first, then by epoch (the derived order of the
/// fields), which is the order in which the broker fences: a writer with a
/// smaller token is refused once a larger one exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken {
    producer_id: ProducerId,
    epoch: ProducerEpoch,
}

impl FencingToken {
    /// Builds a token from the raw values of an `InitProducerId` answer.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when either value is negative:
    /// Kafka uses `-1` for "no producer" and "no epoch", which carry no
    /// authority.
    pub fn new(producer_id: i64, epoch: i16) -> Result<Self, CoordinationError> {
        if producer_id < 0 {
            return Err(CoordinationError::Invalid {
                what: "producer id",
                value: producer_id.to_string(),
                reason: "must not be negative",
            });
        }
        if epoch < 0 {
            return Err(CoordinationError::Invalid {
                what: "producer epoch",
                value: epoch.to_string(),
                reason: "must not be negative",
            });
        }
        Ok(Self {
            producer_id: ProducerId(producer_id),
            epoch: ProducerEpoch(epoch),
        })
    }

    /// The producer id the coordinator assigned to the role.
    #[must_use]
    pub fn producer_id(&self) -> ProducerId {
        self.producer_id
    }

    /// The producer epoch: the leadership epoch of the role.
    #[must_use]
    pub fn epoch(&self) -> ProducerEpoch {
        self.epoch
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.producer_id, self.epoch)
    }
}

impl std::str::FromStr for FencingToken {
    type Err = CoordinationError;

    /// Parses the `producer_id/epoch` text that `Display` writes, so a token
    /// printed by one process (a log line, a record) can be checked by another.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when the text is not two
    /// integers joined by `/`, or when [`FencingToken::new`] refuses them.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || CoordinationError::Invalid {
            what: "fencing token",
            value: text.to_owned(),
            reason: "expected producer_id/epoch",
        };
        let (producer_id, epoch) = text.split_once('/').ok_or_else(invalid)?;
        let producer_id = producer_id.parse().map_err(|_| invalid())?;
        let epoch = epoch.parse().map_err(|_| invalid())?;
        Self::new(producer_id, epoch)
    }
}

/// A grant of a role to one member until `deadline`.
///
/// Timestamps are milliseconds since the Unix epoch, taken from the holder's
/// clock. The lease is advisory: it tells standbys when to challenge. What
/// stops a deposed holder is the broker refusing its `token`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The member that holds the role.
    pub member: MemberId,
    /// The epoch under which the lease was written.
    pub token: FencingToken,
    /// When the holder wrote this grant (ms).
    pub granted_at: i64,
    /// When standbys may start to challenge (ms); a resigned lease has
    /// `deadline == granted_at`.
    pub deadline: i64,
}

/// A member's announcement that it stands for a role.
///
/// Its offset in the role's partition is the member's place in the line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The member that registered.
    pub member: MemberId,
    /// When the member registered (ms since the Unix epoch, member's clock).
    pub registered_at: i64,
}

/// The key of a record in `__coordination_state`.
///
/// Compaction keeps the latest value per key, so the key shape decides what
/// survives: the latest registration of each member, and the latest lease of
/// each role.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CoordinationKey {
    /// The registration of one member for one role.
    Registration {
        /// The role registered for.
        role: Role,
        /// The member that registered.
        member: MemberId,
    },
    /// The lease of one role.
    Lease {
        /// The role the lease grants.
        role: Role,
    },
}

impl CoordinationKey {
    /// The key under which `member` registers for `role`.
    #[must_use]
    pub fn registration(role: Role, member: MemberId) -> Self {
        Self::Registration { role, member }
    }

    /// The key under which the lease of `role` is written.
    #[must_use]
    pub fn lease(role: Role) -> Self {
        Self::Lease { role }
    }

    /// The role this key belongs to.
    #[must_use]
    pub fn role(&self) -> &Role {
        match self {
            Self::Registration { role, .. } | Self::Lease { role } => role,
        }
    }

    /// Encodes the key in the version-0 layout.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(CODEC_VERSION);
        match self {
            Self::Registration { role, member } => {
                buf.put_i8(KIND_REGISTRATION);
                put_string(&mut buf, role.as_str());
                put_string(&mut buf, member.as_str());
            }
            Self::Lease { role } => {
                buf.put_i8(KIND_LEASE);
                put_string(&mut buf, role.as_str());
            }
        }
        buf.freeze()
    }

    /// Decodes a key written by [`Self::encode`].
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Record`] when `bytes` is truncated, has
    /// trailing bytes, holds a negative length, an unknown version or kind,
    /// or a name that is not a valid [`Role`] or [`MemberId`].
    pub fn decode(bytes: &[u8]) -> Result<Self, CoordinationError> {
        let mut reader = Reader::new(bytes);
        let kind = reader.header("key")?;
        let role = Role::new(&reader.string("role")?).map_err(invalid_field)?;
        let key = match kind {
            KIND_REGISTRATION => {
                let member = MemberId::new(&reader.string("member")?).map_err(invalid_field)?;
                Self::Registration { role, member }
            }
            KIND_LEASE => Self::Lease { role },
            other => return Err(record_error(format!("unknown key kind {other}"))),
        };
        reader.finish("key")?;
        Ok(key)
    }
}

/// The value of a record in `__coordination_state`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CoordinationRecord {
    /// A member stands for the role.
    Registration(Registration),
    /// A member holds the role.
    Lease(Lease),
}

impl CoordinationRecord {
    /// The member the record names.
    #[must_use]
    pub fn member(&self) -> &MemberId {
        match self {
            Self::Registration(registration) => &registration.member,
            Self::Lease(lease) => &lease.member,
        }
    }

    /// Encodes the value in the version-0 layout.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(CODEC_VERSION);
        match self {
            Self::Registration(registration) => {
                buf.put_i8(KIND_REGISTRATION);
                put_string(&mut buf, registration.member.as_str());
                buf.put_i64(registration.registered_at);
            }
            Self::Lease(lease) => {
                buf.put_i8(KIND_LEASE);
                put_string(&mut buf, lease.member.as_str());
                buf.put_i64(lease.token.producer_id().0);
                buf.put_i16(lease.token.epoch().0);
                buf.put_i64(lease.granted_at);
                buf.put_i64(lease.deadline);
            }
        }
        buf.freeze()
    }

    /// Decodes a value written by [`Self::encode`].
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Record`] when `bytes` is truncated, has
    /// trailing bytes, holds a negative length, an unknown version or kind,
    /// an invalid member id, or a negative producer id or epoch.
    pub fn decode(bytes: &[u8]) -> Result<Self, CoordinationError> {
        let mut reader = Reader::new(bytes);
        let kind = reader.header("value")?;
        let member = MemberId::new(&reader.string("member")?).map_err(invalid_field)?;
        let record = match kind {
            KIND_REGISTRATION => Self::Registration(Registration {
                member,
                registered_at: reader.i64("registered_at")?,
            }),
            KIND_LEASE => {
                let producer_id = reader.i64("producer_id")?;
                let epoch = reader.i16("epoch")?;
                let token = FencingToken::new(producer_id, epoch).map_err(invalid_field)?;
                Self::Lease(Lease {
                    member,
                    token,
                    granted_at: reader.i64("granted_at")?,
                    deadline: reader.i64("deadline")?,
                })
            }
            other => return Err(record_error(format!("unknown value kind {other}"))),
        };
        reader.finish("value")?;
        Ok(record)
    }
}

/// Decodes a key and its value and checks that they belong together.
///
/// # Errors
///
/// Returns [`CoordinationError::Record`] when either half does not decode,
/// when the kinds differ, or when a registration's value names another member
/// than its key.
pub fn decode_record(
    key: &[u8],
    value: &[u8],
) -> Result<(CoordinationKey, CoordinationRecord), CoordinationError> {
    let key = CoordinationKey::decode(key)?;
    let record = CoordinationRecord::decode(value)?;
    match (&key, &record) {
        (CoordinationKey::Registration { member, .. }, CoordinationRecord::Registration(r))
            if *member == r.member => {}
        (CoordinationKey::Registration { .. }, CoordinationRecord::Registration(_)) => {
            return Err(record_error(
                "registration key and value name different members".to_owned(),
            ));
        }
        (CoordinationKey::Lease { .. }, CoordinationRecord::Lease(_)) => {}
        _ => return Err(record_error("key kind and value kind differ".to_owned())),
    }
    Ok((key, record))
}

fn record_error(reason: String) -> CoordinationError {
    CoordinationError::Record { reason }
}

fn invalid_field(error: CoordinationError) -> CoordinationError {
    record_error(error.to_string())
}

fn put_string(buf: &mut BytesMut, value: &str) {
    // Names are validated to at most 249 bytes, so the length fits an i16.
    let len = i16::try_from(value.len()).unwrap_or(i16::MAX);
    buf.put_i16(len);
    buf.put_slice(value.as_bytes());
}

/// A bounds-checked cursor over an untrusted buffer.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn take(&mut self, len: usize, field: &str) -> Result<&'a [u8], CoordinationError> {
        if self.rest.len() < len {
            return Err(record_error(format!(
                "truncated: {field} needs {len} bytes, {} left",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], CoordinationError> {
        let bytes = self.take(N, field)?;
        let mut out = [0_u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn i8(&mut self, field: &str) -> Result<i8, CoordinationError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }

    fn i16(&mut self, field: &str) -> Result<i16, CoordinationError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i64(&mut self, field: &str) -> Result<i64, CoordinationError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    fn string(&mut self, field: &str) -> Result<String, CoordinationError> {
        let len = self.i16(field)?;
        let len = usize::try_from(len)
            .map_err(|_| record_error(format!("negative length {len} of {field}")))?;
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| record_error(format!("{field} is not UTF-8")))
    }

    /// Reads the version and kind that open every key and value.
    fn header(&mut self, what: &str) -> Result<i8, CoordinationError> {
        let version = self.i16("version")?;
        if version != CODEC_VERSION {
            return Err(record_error(format!("unknown {what} version {version}")));
        }
        self.i8("kind")
    }

    fn finish(&self, what: &str) -> Result<(), CoordinationError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(record_error(format!(
                "{} trailing bytes after the {what}",
                self.rest.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use assert2::{assert, check};
    use proptest::prelude::*;

    use super::*;

    fn role() -> Role {
        Role::new("controller").unwrap()
    }

    fn member() -> MemberId {
        MemberId::new("node-1").unwrap()
    }

    #[test]
    fn names_are_validated() {
        check!(Role::new("controller").is_ok());
        check!(Role::new("a.b_c-D9").is_ok());
        check!(Role::new(&"r".repeat(249)).is_ok());
        for bad in ["", "has space", "slash/", "ü", &"r".repeat(250)] {
            check!(Role::new(bad).is_err(), "{bad}");
            check!(MemberId::new(bad).is_err(), "{bad}");
        }
        let error = Role::new("").unwrap_err();
        check!(error.to_string() == "invalid role \"\": must not be empty");
    }

    #[test]
    fn tokens_are_validated_and_ordered_by_producer_id_then_epoch() {
        check!(FencingToken::new(-1, 0).is_err());
        check!(FencingToken::new(0, -1).is_err());
        let t = |p, e| FencingToken::new(p, e).unwrap();
        check!(t(1, 9) < t(2, 0));
        check!(t(2, 0) < t(2, 1));
        check!(t(3, 0) > t(2, i16::MAX));
        check!(t(4242, 7).to_string() == "4242/7");
        check!(t(4242, 7).producer_id() == ProducerId(4242));
        check!(t(4242, 7).epoch() == ProducerEpoch(7));
    }

    #[test]
    fn tokens_parse_back_from_their_text() {
        check!("4242/7".parse::<FencingToken>().unwrap() == FencingToken::new(4242, 7).unwrap());
        for bad in [
            "", "4242", "4242/", "/7", "a/b", "1/2/3", "-1/0", "0/-1", "1/40000",
        ] {
            let error = bad.parse::<FencingToken>().unwrap_err();
            check!(
                matches!(error, CoordinationError::Invalid { .. }),
                "{bad:?}: {error}"
            );
        }
    }

    #[test]
    fn golden_registration_key() {
        let key =
            CoordinationKey::registration(Role::new("ctl").unwrap(), MemberId::new("n1").unwrap());
        let expected: &[u8] = &[
            0, 0, // version 0
            0, // kind: registration
            0, 3, b'c', b't', b'l', // role
            0, 2, b'n', b'1', // member
        ];
        check!(key.encode().as_ref() == expected);
        check!(CoordinationKey::decode(expected).unwrap() == key);
    }

    #[test]
    fn golden_lease_key() {
        let key = CoordinationKey::lease(Role::new("ctl").unwrap());
        let expected: &[u8] = &[0, 0, 1, 0, 3, b'c', b't', b'l'];
        check!(key.encode().as_ref() == expected);
        check!(CoordinationKey::decode(expected).unwrap() == key);
    }

    #[test]
    fn golden_registration_value() {
        let record = CoordinationRecord::Registration(Registration {
            member: MemberId::new("n1").unwrap(),
            registered_at: 0x0102_0304_0506_0708,
        });
        let expected: &[u8] = &[
            0, 0, // version 0
            0, // kind: registration
            0, 2, b'n', b'1', // member
            1, 2, 3, 4, 5, 6, 7, 8, // registered_at
        ];
        check!(record.encode().as_ref() == expected);
        check!(CoordinationRecord::decode(expected).unwrap() == record);
    }

    #[test]
    fn golden_lease_value() {
        let record = CoordinationRecord::Lease(Lease {
            member: MemberId::new("n1").unwrap(),
            token: FencingToken::new(4242, 7).unwrap(),
            granted_at: 1_700_000_000_000,
            deadline: 1_700_000_030_000,
        });
        let expected: &[u8] = &[
            0, 0, // version 0
            1, // kind: lease
            0, 2, b'n', b'1', // member
            0, 0, 0, 0, 0, 0, 0x10, 0x92, // producer id 4242
            0, 7, // epoch 7
            0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00, // granted_at 1_700_000_000_000
            0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0xDD, 0x30, // deadline 1_700_000_030_000
        ];
        check!(record.encode().as_ref() == expected);
        check!(CoordinationRecord::decode(expected).unwrap() == record);
    }

    #[test]
    fn malformed_inputs_are_refused_with_a_reason() {
        let reason = |result: Result<CoordinationKey, CoordinationError>| match result {
            Err(CoordinationError::Record { reason }) => reason,
            other => panic!("expected a record error, got {other:?}"),
        };
        check!(reason(CoordinationKey::decode(&[])).starts_with("truncated"));
        check!(
            reason(CoordinationKey::decode(&[0, 0, 1, 0, 3, b'c', b't'])).starts_with("truncated")
        );
        check!(
            reason(CoordinationKey::decode(&[
                0, 0, 1, 0, 3, b'c', b't', b'l', 9
            ])) == "1 trailing bytes after the key"
        );
        check!(
            reason(CoordinationKey::decode(&[0, 0, 1, 0xFF, 0xFF])) == "negative length -1 of role"
        );
        check!(reason(CoordinationKey::decode(&[0, 1, 1, 0, 1, b'c'])) == "unknown key version 1");
        check!(reason(CoordinationKey::decode(&[0, 0, 7, 0, 1, b'c'])) == "unknown key kind 7");
        check!(reason(CoordinationKey::decode(&[0, 0, 1, 0, 1, b' '])).starts_with("invalid role"));

        let lease_with_negative_epoch: &[u8] = &[
            0, 0, 1, 0, 2, b'n', b'1', 0, 0, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let outcome = CoordinationRecord::decode(lease_with_negative_epoch);
        assert!(let Err(CoordinationError::Record { .. }) = outcome);
    }

    #[test]
    fn decode_record_checks_that_key_and_value_agree() {
        let registration = CoordinationRecord::Registration(Registration {
            member: member(),
            registered_at: 1,
        });
        let lease = CoordinationRecord::Lease(Lease {
            member: member(),
            token: FencingToken::new(1, 1).unwrap(),
            granted_at: 1,
            deadline: 2,
        });
        let reg_key = CoordinationKey::registration(role(), member());
        let other_key = CoordinationKey::registration(role(), MemberId::new("node-2").unwrap());
        check!(decode_record(&reg_key.encode(), &registration.encode()).is_ok());
        check!(decode_record(&CoordinationKey::lease(role()).encode(), &lease.encode()).is_ok());
        check!(decode_record(&reg_key.encode(), &lease.encode()).is_err());
        check!(decode_record(&other_key.encode(), &registration.encode()).is_err());
    }

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9._-]{1,40}"
    }

    fn key() -> impl Strategy<Value = CoordinationKey> {
        prop_oneof![
            (name(), name()).prop_map(|(r, m)| CoordinationKey::registration(
                Role::new(&r).unwrap(),
                MemberId::new(&m).unwrap()
            )),
            name().prop_map(|r| CoordinationKey::lease(Role::new(&r).unwrap())),
        ]
    }

    fn value() -> impl Strategy<Value = CoordinationRecord> {
        prop_oneof![
            (name(), any::<i64>()).prop_map(|(m, at)| CoordinationRecord::Registration(
                Registration {
                    member: MemberId::new(&m).unwrap(),
                    registered_at: at,
                }
            )),
            (
                name(),
                0..=i64::MAX,
                0..=i16::MAX,
                any::<i64>(),
                any::<i64>()
            )
                .prop_map(|(m, p, e, granted_at, deadline)| CoordinationRecord::Lease(
                    Lease {
                        member: MemberId::new(&m).unwrap(),
                        token: FencingToken::new(p, e).unwrap(),
                        granted_at,
                        deadline,
                    }
                )),
        ]
    }

    proptest! {
        #[test]
        fn keys_round_trip(key in key()) {
            prop_assert_eq!(CoordinationKey::decode(&key.encode()).unwrap(), key);
        }

        #[test]
        fn values_round_trip(value in value()) {
            prop_assert_eq!(CoordinationRecord::decode(&value.encode()).unwrap(), value);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = CoordinationKey::decode(&bytes);
            let _ = CoordinationRecord::decode(&bytes);
            let _ = decode_record(&bytes, &bytes);
        }

        #[test]
        fn every_strict_prefix_of_a_value_is_refused(value in value()) {
            let bytes = value.encode();
            for len in 0..bytes.len() {
                prop_assert!(CoordinationRecord::decode(&bytes[..len]).is_err());
            }
        }

        #[test]
        fn corrupted_encodings_never_panic(value in value(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut bytes = value.encode().to_vec();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let _ = CoordinationRecord::decode(&bytes);
        }
    }
}
