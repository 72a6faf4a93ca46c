//! Byte types that travel as lowercase hex in JSON.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    /// The digest of `data`.
    #[must_use]
    pub fn of(data: &[u8]) -> Self {
        Self(Sha256::digest(data).into())
    }

    /// The digest of the concatenation of `parts`.
    #[must_use]
    pub fn of_parts(parts: &[&[u8]]) -> Self {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update(part);
        }
        Self(hasher.finalize().into())
    }

    /// Parses 64 hex digits.
    ///
    /// # Errors
    ///
    /// A message when `text` is not 64 hex digits.
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(text.trim(), &mut out)
            .map_err(|e| format!("not a SHA-256 hex digest ({e}): {text:?}"))?;
        Ok(Self(out))
    }

    /// Lowercase hex.
    #[must_use]
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({})", self.to_hex())
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_hex(&text).map_err(D::Error::custom)
    }
}

/// Arbitrary bytes (a public key, a signature) shown as hex.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HexBytes(pub Vec<u8>);

impl HexBytes {
    /// Parses hex digits.
    ///
    /// # Errors
    ///
    /// A message when `text` is not hex.
    pub fn from_hex(text: &str) -> Result<Self, String> {
        hex::decode(text.trim())
            .map(Self)
            .map_err(|e| format!("not hex ({e}): {text:?}"))
    }

    /// Lowercase hex.
    #[must_use]
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }
}

impl fmt::Display for HexBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for HexBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HexBytes({})", self.to_hex())
    }
}

impl Serialize for HexBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for HexBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::from_hex(&text).map_err(D::Error::custom)
    }
}

/// Serde for a `Uuid` in Kafka's text form (the `uuid` crate's serde feature
/// is not enabled in the workspace, and Kafka's form is what an operator
/// sees everywhere else).
pub(crate) mod kafka_uuid_serde {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};
    use uuid::Uuid;

    pub(crate) fn serialize<S: Serializer>(id: &Uuid, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&krabka_ids::kafka_uuid(*id))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Uuid, D::Error> {
        let text = String::deserialize(d)?;
        krabka_ids::decode_kafka_uuid(&text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;

    #[test]
    fn hex_round_trip() {
        let d = Sha256Digest::of(b"abc");
        check!(d.to_hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        check!(Sha256Digest::from_hex(&d.to_hex()) == Ok(d));
        check!(Sha256Digest::from_hex("00").is_err());
        let json = serde_json::to_string(&d).unwrap();
        check!(serde_json::from_str::<Sha256Digest>(&json).unwrap() == d);
        check!(Sha256Digest::of_parts(&[b"a", b"bc"]) == d);
    }
}
