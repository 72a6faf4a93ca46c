//! [`WormConfig`]: what turns an object-store tier into an archive.

use ed25519_dalek::SigningKey;

use super::{WormError, sign::TrustedManifestKeys};

/// Archive-mode settings for
/// [`S3RemoteStorage::with_worm`](crate::S3RemoteStorage::with_worm).
#[derive(Clone)]
pub struct WormConfig {
    /// The broker's Ed25519 manifest-signing key.
    pub signing_key: SigningKey,
    /// Keys of earlier manifests of the same archive (after a key rotation),
    /// accepted when the chain tip is recovered from the bucket. The
    /// signing key's own public key is always accepted.
    pub previous_keys: TrustedManifestKeys,
    /// Refuse every fetch: the tier is an archive only, never read back by
    /// the broker.
    pub write_only: bool,
}

impl std::fmt::Debug for WormConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WormConfig")
            .field(
                "public_key",
                &hex::encode(self.signing_key.verifying_key().to_bytes()),
            )
            .field("previous_keys", &self.previous_keys.len())
            .field("write_only", &self.write_only)
            .finish()
    }
}

impl WormConfig {
    /// Archive mode signing with `signing_key`, fetches allowed.
    #[must_use]
    pub fn new(signing_key: SigningKey) -> Self {
        Self {
            signing_key,
            previous_keys: TrustedManifestKeys::new(),
            write_only: false,
        }
    }

    /// Archive mode with the secret key given as 64 hex digits.
    ///
    /// # Errors
    ///
    /// [`WormError::Malformed`] unless `hex` is 32 bytes of hex.
    pub fn from_secret_hex(hex: &str) -> Result<Self, WormError> {
        let mut secret = [0u8; 32];
        hex::decode_to_slice(hex.trim(), &mut secret)
            .map_err(|e| WormError::Malformed(format!("signing key is not 32 hex bytes: {e}")))?;
        Ok(Self::new(SigningKey::from_bytes(&secret)))
    }

    /// Sets [`write_only`](Self::write_only).
    #[must_use]
    pub fn with_write_only(mut self, write_only: bool) -> Self {
        self.write_only = write_only;
        self
    }

    /// The public key auditors must trust, as hex.
    #[must_use]
    pub fn public_key_hex(&self) -> String {
        hex::encode(self.signing_key.verifying_key().to_bytes())
    }

    /// The keys accepted for this archive's existing manifests.
    #[must_use]
    pub fn trusted_keys(&self) -> TrustedManifestKeys {
        let mut keys = self.previous_keys.clone();
        keys.insert(self.signing_key.verifying_key(), "signing key");
        keys
    }
}
