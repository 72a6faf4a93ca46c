//! Chain and signature checks over one partition's manifests, without I/O.
//!
//! [`authenticate_archive`] is the pure core of the audit: given the
//! manifests found in one partition directory, the trusted keys and
//! optionally an independently recorded tip, it decides which manifests form
//! the authentic chain and lists every [`VerifyBreak`] it sees. The async
//! [`verify_archive`](crate::verify_archive) feeds it and then checks the
//! objects the chain names.

use serde::Serialize;

use super::{
    chain::{ChainHead, WormChainRecord},
    manifest::ManifestSeq,
    sign::{SealedManifest, TrustedManifestKeys, verify_manifest_signature},
};
use crate::metadata::TopicIdPartition;

/// One finding of an audit: something in the archive that does not match
/// what its signed manifests say.
///
/// The findings fall into three classes, which the `krabka-worm-verify` exit
/// codes follow: [`is_chain_break`](Self::is_chain_break) (a manifest is
/// unreadable, forged, misplaced, missing or out of order),
/// [`is_object_break`](Self::is_object_break) (an object a manifest names is
/// missing or altered) and [`is_truncation`](Self::is_truncation) (the chain
/// ends before the independently recorded tip).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VerifyBreak {
    /// A manifest object that cannot be read or parsed.
    UnreadableManifest {
        /// Its file name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A manifest stored under a name (or partition) other than the one its
    /// own body implies, e.g. one manifest copied over another.
    MisplacedManifest {
        /// Where it was found.
        name: String,
        /// Where its body says it belongs.
        expected: String,
    },
    /// A manifest whose signature does not verify against a trusted key, or
    /// whose stored head is not the recomputed one.
    BadSignature {
        /// Its file name.
        name: String,
        /// Its claimed position.
        seq: ManifestSeq,
        /// Why.
        reason: String,
    },
    /// Two authentic manifests claim the same position.
    ForkedChain {
        /// The position.
        seq: ManifestSeq,
        /// The second manifest's file name.
        name: String,
    },
    /// Positions with no manifest (dropped manifests).
    MissingManifests {
        /// First missing position.
        first: ManifestSeq,
        /// Last missing position.
        last: ManifestSeq,
    },
    /// A manifest that does not extend the head before it.
    ChainMismatch {
        /// Its position.
        seq: ManifestSeq,
        /// Its file name.
        name: String,
    },
    /// A manifest whose segment does not come after its predecessor's.
    OutOfOrder {
        /// Its position.
        seq: ManifestSeq,
        /// Its file name.
        name: String,
    },
    /// The manifest at the recorded tip's position has a different head.
    HeadMismatch {
        /// The position.
        seq: ManifestSeq,
        /// The recorded head.
        expected: ChainHead,
        /// The head found.
        found: ChainHead,
    },
    /// The chain ends before the recorded tip.
    TruncatedTail {
        /// The recorded tip position.
        expected_seq: ManifestSeq,
        /// The recorded tip head.
        expected_head: ChainHead,
        /// The last authentic position found (`None`: no chain at all).
        found_seq: Option<ManifestSeq>,
    },
    /// An object named by a manifest is not in the store.
    MissingObject {
        /// The manifest's position.
        seq: ManifestSeq,
        /// The object's file name.
        name: String,
    },
    /// An object has a different size than recorded.
    SizeMismatch {
        /// The manifest's position.
        seq: ManifestSeq,
        /// The object's file name.
        name: String,
        /// Recorded size.
        expected: u64,
        /// Actual size.
        actual: u64,
    },
    /// An object's entity tag or version differs from the recorded one
    /// (it was overwritten, or its recorded version was deleted).
    ObjectReplaced {
        /// The manifest's position.
        seq: ManifestSeq,
        /// The object's file name.
        name: String,
        /// What differs.
        reason: String,
    },
    /// An object's SHA-256 differs from the recorded one.
    DigestMismatch {
        /// The manifest's position.
        seq: ManifestSeq,
        /// The object's file name.
        name: String,
    },
}

impl VerifyBreak {
    /// A manifest-level finding: unreadable, forged, misplaced, forked,
    /// missing, mislinked or out of order, or a head that differs from the
    /// recorded tip.
    #[must_use]
    pub fn is_chain_break(&self) -> bool {
        !self.is_object_break() && !self.is_truncation()
    }

    /// An object-level finding: missing, resized, replaced or altered.
    #[must_use]
    pub fn is_object_break(&self) -> bool {
        matches!(
            self,
            Self::MissingObject { .. }
                | Self::SizeMismatch { .. }
                | Self::ObjectReplaced { .. }
                | Self::DigestMismatch { .. }
        )
    }

    /// The chain ends before the recorded tip.
    #[must_use]
    pub fn is_truncation(&self) -> bool {
        matches!(self, Self::TruncatedTail { .. })
    }
}

impl std::fmt::Display for VerifyBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnreadableManifest { name, reason } => {
                write!(f, "manifest {name} is unreadable: {reason}")
            }
            Self::MisplacedManifest { name, expected } => {
                write!(f, "manifest {name} belongs at {expected}")
            }
            Self::BadSignature { name, seq, reason } => {
                write!(f, "manifest {seq} ({name}) fails authentication: {reason}")
            }
            Self::ForkedChain { seq, name } => {
                write!(f, "a second manifest claims {seq}: {name}")
            }
            Self::MissingManifests { first, last } => {
                write!(f, "manifests {first}..={last} are missing")
            }
            Self::ChainMismatch { seq, name } => {
                write!(
                    f,
                    "manifest {seq} ({name}) does not extend the previous head"
                )
            }
            Self::OutOfOrder { seq, name } => {
                write!(f, "manifest {seq} ({name}) is out of offset order")
            }
            Self::HeadMismatch {
                seq,
                expected,
                found,
            } => write!(f, "head at {seq} is {found}, recorded tip says {expected}"),
            Self::TruncatedTail {
                expected_seq,
                found_seq,
                ..
            } => match found_seq {
                Some(found) => {
                    write!(f, "chain ends at {found}, recorded tip is {expected_seq}")
                }
                None => write!(f, "no chain found, recorded tip is {expected_seq}"),
            },
            Self::MissingObject { seq, name } => {
                write!(f, "object {name} of manifest {seq} is missing")
            }
            Self::SizeMismatch {
                seq,
                name,
                expected,
                actual,
            } => write!(
                f,
                "object {name} of manifest {seq} has {actual} bytes, recorded {expected}"
            ),
            Self::ObjectReplaced { seq, name, reason } => {
                write!(f, "object {name} of manifest {seq} was replaced: {reason}")
            }
            Self::DigestMismatch { seq, name } => {
                write!(f, "object {name} of manifest {seq} has a different SHA-256")
            }
        }
    }
}

/// The authentic chain of one partition and what is wrong with it.
#[derive(Debug, Clone, Default)]
pub struct AuthenticatedArchive {
    /// Manifests that authenticate, in chain order.
    pub chain: Vec<SealedManifest>,
    /// Every chain-level finding.
    pub breaks: Vec<VerifyBreak>,
}

impl AuthenticatedArchive {
    /// Position and head of the last authentic manifest.
    #[must_use]
    pub fn tip(&self) -> Option<(ManifestSeq, ChainHead)> {
        self.chain.last().map(|m| (m.manifest.stamp.seq, m.head))
    }

    /// Whether nothing is wrong.
    #[must_use]
    pub fn is_intact(&self) -> bool {
        self.breaks.is_empty()
    }
}

/// Authenticates the manifests found in `partition`'s directory (`found`:
/// file name and parsed manifest) against `trusted`, and, when given, the
/// independently recorded tip `expect`.
///
/// Manifests that fail their signature, belong elsewhere, or fork the chain
/// are reported and left out; the rest are walked in sequence order and
/// every gap, mislink or out-of-order segment is reported.
#[must_use]
pub fn authenticate_archive(
    partition: &TopicIdPartition,
    found: Vec<(String, SealedManifest)>,
    trusted: &TrustedManifestKeys,
    expect: Option<&WormChainRecord>,
) -> AuthenticatedArchive {
    let mut out = AuthenticatedArchive::default();
    let mut valid = Vec::with_capacity(found.len());
    for (name, sealed) in found {
        let body = &sealed.manifest.body;
        let expected_name = body.manifest_name();
        let same_partition = body.identity.topic_id == partition.topic_id()
            && body.identity.partition == partition.partition()
            && body.identity.topic == partition.topic();
        if name != expected_name || !same_partition {
            out.breaks.push(VerifyBreak::MisplacedManifest {
                name,
                expected: format!(
                    "{}-{}/{expected_name}",
                    body.identity.topic, body.identity.partition
                ),
            });
            continue;
        }
        if let Err(e) = verify_manifest_signature(&sealed, trusted) {
            out.breaks.push(VerifyBreak::BadSignature {
                name,
                seq: sealed.manifest.stamp.seq,
                reason: e.to_string(),
            });
            continue;
        }
        valid.push((name, sealed));
    }
    valid.sort_by_key(|(_, m)| m.manifest.stamp.seq);

    let mut expected_seq = 0u64;
    let mut prev_head = ChainHead::GENESIS;
    let mut prev_end: Option<i64> = None;
    for (name, sealed) in valid {
        let stamp = sealed.manifest.stamp;
        if out
            .chain
            .last()
            .is_some_and(|m| m.manifest.stamp.seq == stamp.seq)
        {
            out.breaks.push(VerifyBreak::ForkedChain {
                seq: stamp.seq,
                name,
            });
            continue;
        }
        if stamp.seq.0 > expected_seq {
            out.breaks.push(VerifyBreak::MissingManifests {
                first: ManifestSeq(expected_seq),
                last: ManifestSeq(stamp.seq.0 - 1),
            });
        } else if stamp.prev != prev_head {
            out.breaks.push(VerifyBreak::ChainMismatch {
                seq: stamp.seq,
                name: name.clone(),
            });
        }
        let identity = &sealed.manifest.body.identity;
        if prev_end.is_some_and(|end| identity.start_offset <= end) {
            out.breaks.push(VerifyBreak::OutOfOrder {
                seq: stamp.seq,
                name: name.clone(),
            });
        }
        prev_end = Some(identity.end_offset);
        prev_head = sealed.head;
        expected_seq = stamp.seq.0.saturating_add(1);
        out.chain.push(sealed);
    }

    if let Some(record) = expect {
        match out
            .chain
            .iter()
            .find(|m| m.manifest.stamp.seq == record.seq)
        {
            Some(m) if m.head != record.head => out.breaks.push(VerifyBreak::HeadMismatch {
                seq: record.seq,
                expected: record.head,
                found: m.head,
            }),
            Some(_) => {}
            None => {
                let found_seq = out.tip().map(|(seq, _)| seq);
                if found_seq.is_none_or(|s| s < record.seq) {
                    out.breaks.push(VerifyBreak::TruncatedTail {
                        expected_seq: record.seq,
                        expected_head: record.head,
                        found_seq,
                    });
                } else {
                    // The position exists in the walk but not in the chain:
                    // it was a forged or dropped manifest, already reported.
                    out.breaks.push(VerifyBreak::HeadMismatch {
                        seq: record.seq,
                        expected: record.head,
                        found: ChainHead::GENESIS,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use assert2::check;
    use uuid::Uuid;

    use super::*;
    use crate::worm::{
        chain::{WORM_CHAIN_RECORD_VERSION, next_chain_stamp},
        manifest::{SegmentManifest, tests::sample_body},
        sign::tests::key,
    };

    fn partition() -> TopicIdPartition {
        let body = sample_body();
        TopicIdPartition::new(body.identity.topic_id, "orders", 3)
    }

    /// A chain of `n` consecutive segments of 100 offsets each.
    fn chain(n: u64) -> Vec<(String, SealedManifest)> {
        let k = key(1);
        let mut tip = None;
        (0..n)
            .map(|i| {
                let mut body = sample_body();
                body.identity.segment_id = Uuid::from_u128(u128::from(i) + 1);
                body.identity.start_offset = i64::try_from(i).unwrap() * 100;
                body.identity.end_offset = body.identity.start_offset + 99;
                let sealed = SealedManifest::seal(
                    SegmentManifest {
                        stamp: next_chain_stamp(tip),
                        body,
                    },
                    &k,
                );
                tip = Some((sealed.manifest.stamp.seq, sealed.head));
                (sealed.manifest.body.manifest_name(), sealed)
            })
            .collect()
    }

    fn trusted() -> TrustedManifestKeys {
        let mut t = TrustedManifestKeys::new();
        t.insert(key(1).verifying_key(), "broker");
        t
    }

    fn record(m: &SealedManifest) -> WormChainRecord {
        WormChainRecord {
            version: WORM_CHAIN_RECORD_VERSION,
            topic: "orders".into(),
            partition: 3,
            topic_id: m.manifest.body.identity.topic_id,
            seq: m.manifest.stamp.seq,
            head: m.head,
            segment_id: m.manifest.body.identity.segment_id,
            end_offset: m.manifest.body.identity.end_offset,
        }
    }

    #[test]
    fn intact_chain_in_any_listing_order() {
        let mut found = chain(5);
        let tip = record(&found[4].1);
        found.reverse();
        let auth = authenticate_archive(&partition(), found, &trusted(), Some(&tip));
        check!(auth.is_intact(), "{:?}", auth.breaks);
        check!(auth.chain.len() == 5);
        check!(auth.tip() == Some((tip.seq, tip.head)));
    }

    #[test]
    fn dropped_manifest_is_detected() {
        let mut found = chain(5);
        found.remove(2);
        let auth = authenticate_archive(&partition(), found, &trusted(), None);
        check!(
            auth.breaks
                == vec![VerifyBreak::MissingManifests {
                    first: ManifestSeq(2),
                    last: ManifestSeq(2)
                }]
        );
    }

    #[test]
    fn altered_manifest_is_detected() {
        let mut found = chain(3);
        found[1].1.manifest.body.objects[0].size += 1;
        let auth = authenticate_archive(&partition(), found, &trusted(), None);
        check!(
            auth.breaks
                .iter()
                .any(|b| matches!(b, VerifyBreak::BadSignature { .. }))
        );
        check!(auth.breaks.iter().all(VerifyBreak::is_chain_break));
    }

    #[test]
    fn reordered_manifests_are_detected() {
        // Swap the stored contents of two manifests: each now sits under the
        // other's name.
        let mut found = chain(3);
        let (a, b) = (found[0].1.clone(), found[1].1.clone());
        found[0].1 = b;
        found[1].1 = a;
        let auth = authenticate_archive(&partition(), found, &trusted(), None);
        check!(
            auth.breaks
                .iter()
                .filter(|b| matches!(b, VerifyBreak::MisplacedManifest { .. }))
                .count()
                == 2
        );

        // Re-stamp a later segment at an earlier position with a trusted
        // key: the chain links but the offsets go backwards.
        let k = key(1);
        let found = chain(2);
        let mut early = sample_body();
        early.identity.segment_id = Uuid::from_u128(99);
        early.identity.start_offset = 0;
        early.identity.end_offset = 5;
        let stamp = next_chain_stamp(Some((found[1].1.manifest.stamp.seq, found[1].1.head)));
        let sealed = SealedManifest::seal(SegmentManifest { stamp, body: early }, &k);
        let mut all = found;
        all.push((sealed.manifest.body.manifest_name(), sealed));
        let auth = authenticate_archive(&partition(), all, &trusted(), None);
        check!(
            auth.breaks
                .iter()
                .any(|b| matches!(b, VerifyBreak::OutOfOrder { .. }))
        );
    }

    #[test]
    fn untrusted_resign_is_detected() {
        let mut found = chain(3);
        let mut m = found[1].1.manifest.clone();
        m.body.objects[0].size = 1;
        found[1].1 = SealedManifest::seal(m, &key(9));
        let auth = authenticate_archive(&partition(), found, &trusted(), None);
        check!(matches!(
            auth.breaks.first(),
            Some(VerifyBreak::BadSignature { .. })
        ));
    }

    #[test]
    fn truncated_tail_needs_the_recorded_tip() {
        let mut found = chain(4);
        let tip = record(&found[3].1);
        found.truncate(2);
        let auth = authenticate_archive(&partition(), found.clone(), &trusted(), None);
        check!(auth.is_intact());
        let auth = authenticate_archive(&partition(), found, &trusted(), Some(&tip));
        check!(auth.breaks.len() == 1);
        check!(auth.breaks[0].is_truncation());
        let auth = authenticate_archive(&partition(), Vec::new(), &trusted(), Some(&tip));
        check!(auth.breaks[0].is_truncation());
    }
}
