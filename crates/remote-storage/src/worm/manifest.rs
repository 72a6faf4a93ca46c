//! The segment manifest and its canonical byte encoding.
//!
//! A manifest is stored as JSON (readable by an auditor with any tool) but
//! hashed and signed over a separate *canonical* binary encoding, so that
//! JSON whitespace, field order or number formatting never change a digest.
//!
//! # Canonical encoding of a [`ManifestBody`]
//!
//! All integers big-endian; `str` is a `u32` byte length then UTF-8; `opt` is
//! a `u8` 0 (absent) or 1 followed by the value; `uuid` is 16 raw bytes.
//!
//! ```text
//! "KWMB"                      4-byte magic
//! format_version              u16
//! identity:
//!   topic                     str
//!   partition                 i32
//!   topic_id                  uuid
//!   segment_id                uuid
//!   start_offset, end_offset  i64, i64
//!   max_timestamp_ms          i64
//!   broker_id                 i32
//!   segment_size_bytes        i64
//!   leader_epochs             u32 count, then per span: epoch i32, start_offset i64
//! objects                     u32 count, then per object:
//!   name                      str   (file name inside the partition directory)
//!   size                      u64
//!   sha256                    32 bytes
//!   protection                u8 tag (1 conditional create, 2 reserved multipart),
//!                             opt str e_tag, opt str version,
//!                             tag 2 only: opt str reservation_version, u32 parts
//! sealed_at_ms                i64
//! ```
//!
//! The golden test in this module pins the encoding; changing it requires a
//! new [`MANIFEST_FORMAT_VERSION`].

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::digest::{Sha256Digest, kafka_uuid_serde};

/// Version of the manifest format (canonical encoding and JSON shape).
pub const MANIFEST_FORMAT_VERSION: u16 = 1;

/// Domain-separation prefix of a chain head: `head_n = SHA-256(MANIFEST_DOMAIN
/// || seq_n || head_{n-1} || body_digest_n)`.
pub const MANIFEST_DOMAIN: &[u8] = b"krabka/worm/manifest-chain/v1\0";

/// Domain-separation prefix of a body digest: `body_digest = SHA-256(
/// MANIFEST_BODY_DOMAIN || canonical_manifest_bytes(body))`.
pub const MANIFEST_BODY_DOMAIN: &[u8] = b"krabka/worm/manifest-body/v1\0";

/// Suffix of a manifest object, stored next to the segment's objects as
/// `<start offset>-<segment id>.manifest`.
pub const MANIFEST_SUFFIX: &str = ".manifest";

/// Largest manifest object a reader accepts (1 MiB); anything larger is
/// refused before parsing.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// Position of a manifest in its partition's chain, from 0.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ManifestSeq(pub u64);

impl std::fmt::Display for ManifestSeq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A leader epoch as recorded in a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EpochId(pub i32);

/// One leader epoch that the segment covers, from its first offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochSpan {
    /// The leader epoch.
    pub epoch: EpochId,
    /// The first offset written in that epoch (within this segment).
    pub start_offset: i64,
}

/// Which segment a manifest describes: everything the broker's segment
/// metadata says about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentIdentity {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Topic id (Kafka UUID text in JSON).
    #[serde(with = "kafka_uuid_serde")]
    pub topic_id: Uuid,
    /// Remote segment id (Kafka UUID text in JSON).
    #[serde(with = "kafka_uuid_serde")]
    pub segment_id: Uuid,
    /// First offset.
    pub start_offset: i64,
    /// Last offset (inclusive).
    pub end_offset: i64,
    /// Largest record timestamp.
    pub max_timestamp_ms: i64,
    /// Broker that copied the segment.
    pub broker_id: i32,
    /// Size of the `.log` as the broker's metadata states it.
    pub segment_size_bytes: i64,
    /// Leader epochs, ascending.
    pub leader_epochs: Vec<EpochSpan>,
}

/// The protection an object got when it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ObjectProtectionReport {
    /// Written in one conditional create (`PutMode::Create`): the store
    /// refused to overwrite an existing key.
    ConditionalCreate {
        /// The entity tag the store returned.
        e_tag: Option<String>,
        /// The object version the store returned.
        version: Option<String>,
    },
    /// Written by multipart upload after an empty placeholder reserved the
    /// key with a conditional create; the completed object was read back and
    /// its SHA-256 and version confirmed. Bucket retention keeps both
    /// versions.
    ReservedMultipart {
        /// The entity tag of the completed object.
        e_tag: Option<String>,
        /// The version of the completed object.
        version: Option<String>,
        /// The version of the reservation placeholder.
        reservation_version: Option<String>,
        /// Number of parts uploaded.
        parts: u32,
    },
}

impl ObjectProtectionReport {
    /// The entity tag the store reported for the object.
    #[must_use]
    pub fn e_tag(&self) -> Option<&str> {
        match self {
            Self::ConditionalCreate { e_tag, .. } | Self::ReservedMultipart { e_tag, .. } => {
                e_tag.as_deref()
            }
        }
    }

    /// The version the store reported for the object.
    #[must_use]
    pub fn version(&self) -> Option<&str> {
        match self {
            Self::ConditionalCreate { version, .. } | Self::ReservedMultipart { version, .. } => {
                version.as_deref()
            }
        }
    }
}

/// One object of a segment copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    /// File name inside the partition directory (see `segment_file_name`).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the content.
    pub sha256: Sha256Digest,
    /// How the store protected it.
    pub protection: ObjectProtectionReport,
}

/// What one segment copy produced: the segment and its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestBody {
    /// [`MANIFEST_FORMAT_VERSION`] when written.
    pub format_version: u16,
    /// The segment.
    pub identity: SegmentIdentity,
    /// Every object of the copy, `.log` first.
    pub objects: Vec<ObjectEntry>,
    /// Wall-clock time of sealing (informational; covered by the digest).
    pub sealed_at_ms: i64,
}

impl ManifestBody {
    /// Total bytes of the objects.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.objects
            .iter()
            .map(|o| o.size)
            .fold(0, u64::saturating_add)
    }

    /// The manifest's own file name in the partition directory.
    #[must_use]
    pub fn manifest_name(&self) -> String {
        crate::storage_manager::segment_file_name(
            self.identity.start_offset,
            self.identity.segment_id,
            MANIFEST_SUFFIX,
        )
    }
}

/// A body placed on its partition's chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentManifest {
    /// Position and predecessor.
    pub stamp: super::chain::ChainStamp,
    /// Content.
    pub body: ManifestBody,
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn len(&mut self, n: usize) {
        // Lengths beyond u32 cannot occur under MAX_MANIFEST_BYTES; saturate
        // rather than wrap so a pathological value still changes the digest.
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
        }
    }
}

/// The canonical byte encoding of `body` (see the module documentation).
#[must_use]
pub fn canonical_manifest_bytes(body: &ManifestBody) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256 + body.objects.len() * 96));
    w.0.extend_from_slice(b"KWMB");
    w.u16(body.format_version);
    let id = &body.identity;
    w.str(&id.topic);
    w.i32(id.partition);
    w.0.extend_from_slice(id.topic_id.as_bytes());
    w.0.extend_from_slice(id.segment_id.as_bytes());
    w.i64(id.start_offset);
    w.i64(id.end_offset);
    w.i64(id.max_timestamp_ms);
    w.i32(id.broker_id);
    w.i64(id.segment_size_bytes);
    w.len(id.leader_epochs.len());
    for span in &id.leader_epochs {
        w.i32(span.epoch.0);
        w.i64(span.start_offset);
    }
    w.len(body.objects.len());
    for object in &body.objects {
        w.str(&object.name);
        w.u64(object.size);
        w.0.extend_from_slice(&object.sha256.0);
        match &object.protection {
            ObjectProtectionReport::ConditionalCreate { e_tag, version } => {
                w.u8(1);
                w.opt_str(e_tag.as_deref());
                w.opt_str(version.as_deref());
            }
            ObjectProtectionReport::ReservedMultipart {
                e_tag,
                version,
                reservation_version,
                parts,
            } => {
                w.u8(2);
                w.opt_str(e_tag.as_deref());
                w.opt_str(version.as_deref());
                w.opt_str(reservation_version.as_deref());
                w.u32(*parts);
            }
        }
    }
    w.i64(body.sealed_at_ms);
    w.0
}

/// `SHA-256(MANIFEST_BODY_DOMAIN || canonical_manifest_bytes(body))`.
#[must_use]
pub fn body_digest(body: &ManifestBody) -> Sha256Digest {
    Sha256Digest::of_parts(&[MANIFEST_BODY_DOMAIN, &canonical_manifest_bytes(body)])
}

#[cfg(test)]
pub(crate) mod tests {
    use assert2::check;
    use proptest::prelude::*;

    use super::*;

    /// A fixed body for golden tests.
    pub(crate) fn sample_body() -> ManifestBody {
        ManifestBody {
            format_version: MANIFEST_FORMAT_VERSION,
            identity: SegmentIdentity {
                topic: "orders".into(),
                partition: 3,
                topic_id: Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff),
                segment_id: Uuid::from_u128(0xfedc_ba98_7654_3210_0123_4567_89ab_cdef),
                start_offset: 100,
                end_offset: 199,
                max_timestamp_ms: 1_713_000_000_000,
                broker_id: 1,
                segment_size_bytes: 4096,
                leader_epochs: vec![EpochSpan {
                    epoch: EpochId(2),
                    start_offset: 100,
                }],
            },
            objects: vec![
                ObjectEntry {
                    name: "00000000000000000100-_ty6mHZUMhABI0VniavN7w.log".into(),
                    size: 4096,
                    sha256: Sha256Digest::of(b"log"),
                    protection: ObjectProtectionReport::ConditionalCreate {
                        e_tag: Some("\"e1\"".into()),
                        version: Some("v1".into()),
                    },
                },
                ObjectEntry {
                    name: "00000000000000000100-_ty6mHZUMhABI0VniavN7w.index".into(),
                    size: 8,
                    sha256: Sha256Digest::of(b"index"),
                    protection: ObjectProtectionReport::ReservedMultipart {
                        e_tag: None,
                        version: Some("v2".into()),
                        reservation_version: Some("v0".into()),
                        parts: 2,
                    },
                },
            ],
            sealed_at_ms: 1_713_000_000_123,
        }
    }

    #[test]
    fn canonical_bytes_are_golden() {
        let bytes = canonical_manifest_bytes(&sample_body());
        check!(bytes.len() == 337);
        check!(
            Sha256Digest::of(&bytes).to_hex()
                == "fad44c0a027b60d27ce4b2bbd36a19fc59012fb0edb0a98718ca9234b199de9e"
        );
        check!(bytes.starts_with(b"KWMB\x00\x01\x00\x00\x00\x06orders\x00\x00\x00\x03"));
    }

    #[test]
    fn json_round_trip_keeps_canonical_bytes() {
        let body = sample_body();
        let json = serde_json::to_string_pretty(&body).unwrap();
        let back: ManifestBody = serde_json::from_str(&json).unwrap();
        check!(canonical_manifest_bytes(&back) == canonical_manifest_bytes(&body));
    }

    proptest! {
        #[test]
        fn any_field_change_changes_the_digest(size in 0u64..u64::MAX, end in 100i64..i64::MAX,
                                               name in "[a-z.]{1,40}") {
            let body = sample_body();
            let mut other = body.clone();
            other.objects[0].size = size;
            other.identity.end_offset = end;
            other.objects[1].name = name;
            prop_assume!(other != body);
            prop_assert_ne!(body_digest(&body), body_digest(&other));
        }
    }
}
