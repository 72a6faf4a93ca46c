//! Fields of the newer versions that `kafka-protocol` 0.18's structs lack,
//! kept in the struct's map of unknown tagged fields under a negative key.
//!
//! Tags on the wire are unsigned varints, and the newer decoders skip the
//! client's own tags, so a negative key can only be one of these slots:
//! the decoder fills it, the handler reads it and copies it into its
//! answer, and the newer encoder writes it as the field it stands for. No
//! `kafka-protocol` encoder sees a filled slot: a request carrying one is
//! answered at the same (newer) version, by hand.

use {bytes::Bytes, std::collections::BTreeMap, uuid::Uuid};

/// The unknown-tagged-fields map of a `kafka-protocol` struct.
pub type Fields = BTreeMap<i32, Bytes>;

/// A topic's id (TxnOffsetCommit v6).
pub const TOPIC_ID: i32 = -1;

/// A marker's transaction version (WriteTxnMarkers v2).
pub const TRANSACTION_VERSION: i32 = -2;

/// The id in slot `key` of `fields`, if any.
#[must_use]
pub fn uuid(fields: &Fields, key: i32) -> Option<Uuid> {
    Uuid::from_slice(fields.get(&key)?).ok()
}

/// Keeps `id` in slot `key` of `fields`.
pub fn set_uuid(fields: &mut Fields, key: i32, id: Uuid) {
    fields.insert(key, Bytes::copy_from_slice(id.as_bytes().as_slice()));
}

/// The byte in slot `key` of `fields`, if any.
#[must_use]
pub fn i8(fields: &Fields, key: i32) -> Option<i8> {
    match fields.get(&key)?.as_ref() {
        [byte] => Some(i8::from_be_bytes([*byte])),
        _ => None,
    }
}

/// Keeps `value` in slot `key` of `fields`.
pub fn set_i8(fields: &mut Fields, key: i32, value: i8) {
    fields.insert(key, Bytes::copy_from_slice(&value.to_be_bytes()));
}
