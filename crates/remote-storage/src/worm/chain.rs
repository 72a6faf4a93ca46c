//! Per-partition hash chains of manifests.
//!
//! `head_n = SHA-256(MANIFEST_DOMAIN || seq_n as u64 BE || head_{n-1} ||
//! body_digest_n)` with `head_{-1}` = [`ChainHead::GENESIS`] (32 zero bytes)
//! and `body_digest_n = SHA-256(MANIFEST_BODY_DOMAIN || canonical body)`.
//! Because each head folds in its predecessor and its position, changing,
//! dropping, inserting or reordering any manifest changes every later head;
//! and because each manifest's signature is over its head, nobody without a
//! trusted key can produce a consistent replacement.
//!
//! The newest head is the tip. A cut-off tail leaves a shorter but
//! internally consistent chain, so the broker also publishes each new tip
//! outside the bucket as a [`WormChainRecord`] (keyed by partition, in the
//! metadata topic); an auditor compares against it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    digest::{Sha256Digest, kafka_uuid_serde},
    manifest::{MANIFEST_DOMAIN, ManifestBody, ManifestSeq, body_digest},
};
use crate::metadata::TopicIdPartition;

/// A chain head: the running digest after one manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChainHead(pub Sha256Digest);

impl ChainHead {
    /// The predecessor of the first manifest of every chain.
    pub const GENESIS: Self = Self(Sha256Digest([0; 32]));
}

impl std::fmt::Display for ChainHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a manifest sits on the chain: its sequence number and the head it
/// extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainStamp {
    /// Position, from 0.
    pub seq: ManifestSeq,
    /// Head of the previous manifest ([`ChainHead::GENESIS`] for seq 0).
    pub prev: ChainHead,
}

/// The stamp of the manifest after `tip` (`None`: the chain is empty).
#[must_use]
pub fn next_chain_stamp(tip: Option<(ManifestSeq, ChainHead)>) -> ChainStamp {
    match tip {
        None => ChainStamp {
            seq: ManifestSeq(0),
            prev: ChainHead::GENESIS,
        },
        Some((seq, head)) => ChainStamp {
            seq: ManifestSeq(seq.0.saturating_add(1)),
            prev: head,
        },
    }
}

/// The head after appending `body` at `stamp`.
#[must_use]
pub fn manifest_head(stamp: &ChainStamp, body: &ManifestBody) -> ChainHead {
    ChainHead(Sha256Digest::of_parts(&[
        MANIFEST_DOMAIN,
        &stamp.seq.0.to_be_bytes(),
        &stamp.prev.0.0,
        &body_digest(body).0,
    ]))
}

/// Version of the [`WormChainRecord`] encoding.
pub const WORM_CHAIN_RECORD_VERSION: u16 = 1;

/// A partition's chain tip as the broker publishes it outside the bucket
/// (keyed by [`WormChainRecord::key`], so a compacted topic keeps the newest
/// tip per partition). An auditor passes these to
/// [`VerifyRequest::expect_head`](crate::VerifyRequest::expect_head).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WormChainRecord {
    /// [`WORM_CHAIN_RECORD_VERSION`].
    pub version: u16,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Topic id.
    #[serde(with = "kafka_uuid_serde")]
    pub topic_id: Uuid,
    /// Sequence number of the newest manifest.
    pub seq: ManifestSeq,
    /// Its head.
    pub head: ChainHead,
    /// The segment it sealed.
    #[serde(with = "kafka_uuid_serde")]
    pub segment_id: Uuid,
    /// The segment's last offset.
    pub end_offset: i64,
}

impl WormChainRecord {
    /// The partition this tip belongs to.
    #[must_use]
    pub fn topic_id_partition(&self) -> TopicIdPartition {
        TopicIdPartition::new(self.topic_id, self.topic.clone(), self.partition)
    }

    /// The publication key: `worm-chain/<topic>-<partition>-<topic id>`.
    #[must_use]
    pub fn key(&self) -> Vec<u8> {
        format!(
            "worm-chain/{}",
            crate::storage_manager::partition_dir_name(&self.topic_id_partition())
        )
        .into_bytes()
    }

    /// The publication value (JSON).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output.
    ///
    /// # Errors
    ///
    /// [`WormError::Malformed`](crate::WormError::Malformed) if the bytes are
    /// not a record, or of a newer version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, super::WormError> {
        let record: Self = serde_json::from_slice(bytes)
            .map_err(|e| super::WormError::Malformed(format!("chain record: {e}")))?;
        if record.version != WORM_CHAIN_RECORD_VERSION {
            return Err(super::WormError::Malformed(format!(
                "chain record version {} is not {WORM_CHAIN_RECORD_VERSION}",
                record.version
            )));
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;
    use crate::worm::manifest::tests::sample_body;

    #[test]
    fn heads_depend_on_position_predecessor_and_body() {
        let body = sample_body();
        let s0 = next_chain_stamp(None);
        check!(s0.seq == ManifestSeq(0));
        check!(s0.prev == ChainHead::GENESIS);
        let h0 = manifest_head(&s0, &body);
        let s1 = next_chain_stamp(Some((s0.seq, h0)));
        check!(s1.seq == ManifestSeq(1));
        let h1 = manifest_head(&s1, &body);
        check!(h0 != h1);
        let mut altered = body.clone();
        altered.objects[0].size += 1;
        check!(manifest_head(&s0, &altered) != h0);
    }

    #[test]
    fn record_round_trip() {
        let record = WormChainRecord {
            version: WORM_CHAIN_RECORD_VERSION,
            topic: "t".into(),
            partition: 0,
            topic_id: Uuid::from_u128(7),
            seq: ManifestSeq(4),
            head: ChainHead(Sha256Digest::of(b"x")),
            segment_id: Uuid::from_u128(9),
            end_offset: 42,
        };
        check!(WormChainRecord::from_bytes(&record.to_bytes()).unwrap() == record);
        check!(record.key().starts_with(b"worm-chain/t-0-"));
    }
}
