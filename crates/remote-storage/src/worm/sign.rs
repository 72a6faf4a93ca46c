//! Ed25519 sealing of manifests and the trusted-key set.
//!
//! The signature covers [`manifest_signing_bytes`] of the manifest's head.
//! The head already commits to the body, the position and the whole chain
//! before it, so one 64-byte signature authenticates all of that.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::{
    WormError,
    chain::{ChainHead, manifest_head},
    digest::HexBytes,
    manifest::{MAX_MANIFEST_BYTES, SegmentManifest},
};

/// Domain-separation prefix of the signed message.
const SIGNATURE_DOMAIN: &[u8] = b"krabka/worm/manifest-signature/v1\0";

/// The bytes an archive key signs for a manifest with head `head`:
/// `"krabka/worm/manifest-signature/v1\0" || head`.
#[must_use]
pub fn manifest_signing_bytes(head: &ChainHead) -> Vec<u8> {
    let mut out = Vec::with_capacity(SIGNATURE_DOMAIN.len() + 32);
    out.extend_from_slice(SIGNATURE_DOMAIN);
    out.extend_from_slice(&head.0.0);
    out
}

/// An Ed25519 signature and the public key that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestSignature {
    /// 32-byte Ed25519 public key.
    pub public_key: HexBytes,
    /// 64-byte signature over [`manifest_signing_bytes`].
    pub signature: HexBytes,
}

/// A manifest as stored: the chained manifest, its head and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedManifest {
    /// The chained manifest.
    pub manifest: SegmentManifest,
    /// Its head as the writer computed it (the verifier recomputes it).
    pub head: ChainHead,
    /// The writer's signature.
    pub signature: ManifestSignature,
}

impl SealedManifest {
    /// Computes the head of `manifest` and signs it with `key`.
    #[must_use]
    pub fn seal(manifest: SegmentManifest, key: &SigningKey) -> Self {
        let head = manifest_head(&manifest.stamp, &manifest.body);
        let signature = key.sign(&manifest_signing_bytes(&head));
        Self {
            manifest,
            head,
            signature: ManifestSignature {
                public_key: HexBytes(key.verifying_key().to_bytes().to_vec()),
                signature: HexBytes(signature.to_bytes().to_vec()),
            },
        }
    }

    /// The stored JSON form.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Parses the stored JSON form.
    ///
    /// # Errors
    ///
    /// [`WormError::Malformed`] if `bytes` exceed [`MAX_MANIFEST_BYTES`] or are
    /// not a sealed manifest.
    pub fn from_json(bytes: &[u8]) -> Result<Self, WormError> {
        if bytes.len() as u64 > MAX_MANIFEST_BYTES {
            return Err(WormError::Malformed(format!(
                "manifest of {} bytes exceeds {MAX_MANIFEST_BYTES}",
                bytes.len()
            )));
        }
        serde_json::from_slice(bytes).map_err(|e| WormError::Malformed(format!("manifest: {e}")))
    }
}

/// The public keys whose manifest signatures an auditor accepts, each with
/// a label for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedManifestKeys {
    keys: BTreeMap<[u8; 32], String>,
}

impl TrustedManifestKeys {
    /// An empty set (nothing verifies).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a key.
    pub fn insert(&mut self, key: VerifyingKey, label: impl Into<String>) {
        self.keys.insert(key.to_bytes(), label.into());
    }

    /// Adds a key given as 64 hex digits.
    ///
    /// # Errors
    ///
    /// [`WormError::Malformed`] unless `hex` is a valid Ed25519 public key.
    pub fn insert_hex(&mut self, hex: &str, label: impl Into<String>) -> Result<(), WormError> {
        let bytes = HexBytes::from_hex(hex).map_err(WormError::Malformed)?;
        let array: [u8; 32] = bytes
            .0
            .as_slice()
            .try_into()
            .map_err(|_| WormError::Malformed(format!("public key {hex:?} is not 32 bytes")))?;
        let key = VerifyingKey::from_bytes(&array)
            .map_err(|e| WormError::Malformed(format!("public key {hex:?}: {e}")))?;
        self.insert(key, label);
        Ok(())
    }

    /// The label of `key`, if trusted.
    #[must_use]
    pub fn label(&self, key: &[u8]) -> Option<&str> {
        let array: [u8; 32] = key.try_into().ok()?;
        self.keys.get(&array).map(String::as_str)
    }

    /// Number of keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Checks that `sealed` is signed over its *recomputed* head by a trusted key.
///
/// # Errors
///
/// [`WormError::Malformed`] with the reason: untrusted key, a signature that
/// does not decode or does not verify, or a stored head that differs from
/// the recomputed one.
pub fn verify_manifest_signature(
    sealed: &SealedManifest,
    trusted: &TrustedManifestKeys,
) -> Result<(), WormError> {
    let head = manifest_head(&sealed.manifest.stamp, &sealed.manifest.body);
    if head != sealed.head {
        return Err(WormError::Malformed(format!(
            "stored head {} differs from recomputed head {head}",
            sealed.head
        )));
    }
    let key_bytes = &sealed.signature.public_key.0;
    if trusted.label(key_bytes).is_none() {
        return Err(WormError::Malformed(format!(
            "signed by untrusted key {}",
            sealed.signature.public_key
        )));
    }
    let array: [u8; 32] = key_bytes
        .as_slice()
        .try_into()
        .map_err(|_| WormError::Malformed("public key is not 32 bytes".into()))?;
    let key = VerifyingKey::from_bytes(&array)
        .map_err(|e| WormError::Malformed(format!("public key: {e}")))?;
    let signature = Signature::from_slice(&sealed.signature.signature.0)
        .map_err(|e| WormError::Malformed(format!("signature: {e}")))?;
    key.verify(&manifest_signing_bytes(&head), &signature)
        .map_err(|_| WormError::Malformed("signature does not verify".into()))
}

#[cfg(test)]
pub(crate) mod tests {
    use assert2::check;

    use super::*;
    use crate::worm::{chain::next_chain_stamp, manifest::tests::sample_body};

    pub(crate) fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn trusted(k: &SigningKey) -> TrustedManifestKeys {
        let mut t = TrustedManifestKeys::new();
        t.insert(k.verifying_key(), "test");
        t
    }

    #[test]
    fn sign_and_verify() {
        let k = key(1);
        let sealed = SealedManifest::seal(
            SegmentManifest {
                stamp: next_chain_stamp(None),
                body: sample_body(),
            },
            &k,
        );
        check!(verify_manifest_signature(&sealed, &trusted(&k)).is_ok());
        let back = SealedManifest::from_json(&sealed.to_json()).unwrap();
        check!(verify_manifest_signature(&back, &trusted(&k)).is_ok());
        // Untrusted key.
        check!(verify_manifest_signature(&sealed, &trusted(&key(2))).is_err());
        // Altered body: recomputed head differs.
        let mut altered = sealed.clone();
        altered.manifest.body.objects[0].size += 1;
        check!(verify_manifest_signature(&altered, &trusted(&k)).is_err());
        // Altered body, head fixed up, but the signature no longer matches.
        altered.head = manifest_head(&altered.manifest.stamp, &altered.manifest.body);
        check!(verify_manifest_signature(&altered, &trusted(&k)).is_err());
        // Re-signed with an untrusted key.
        let forged = SealedManifest::seal(altered.manifest.clone(), &key(3));
        check!(verify_manifest_signature(&forged, &trusted(&k)).is_err());
    }

    #[test]
    fn hex_keys() {
        let mut t = TrustedManifestKeys::new();
        t.insert_hex(&hex::encode(key(1).verifying_key().to_bytes()), "a")
            .unwrap();
        check!(t.len() == 1);
        check!(t.insert_hex("abcd", "b").is_err());
    }
}
