//! Building the remote storage manager from the broker's settings.
//!
//! Kafka names the plugin with `remote.log.storage.manager.class.name` (a Java
//! class) and hands it every broker setting that starts with
//! `remote.log.storage.manager.impl.prefix` (default `rsm.config.`), prefix
//! stripped. Krabka has built-in plugins instead of classes, so
//! `krabka.remote.log.storage.manager` chooses one (`filesystem`, the
//! default, `s3` or `gcs`), and the plugin's own settings follow Kafka's
//! prefix convention: `rsm.config.s3.bucket`, `rsm.config.worm.enable`, ...
//!
//! The prefixed settings have their own table ([`RSM_SETTINGS`]) so that the
//! startup check refuses an unknown or mistyped one by name, exactly as it
//! does for the broker's own settings; [`StorageSettings::from_config`] then
//! checks the combinations (a bucket for the chosen backend, a signing key
//! for WORM mode, no settings of a backend that is not chosen). Everything
//! that needs the network — the bucket check and, in WORM mode, the check of
//! the bucket's versioning and locked retention — happens in [`build`].

use {
    crate::{
        config::{BrokerConfig, defs::ConfigKind},
        error::BrokerError,
    },
    krabka_object_store::{GcsCredentials, RetrySettings, S3Credentials},
    krabka_remote_storage::{
        GcsConfig, LocalTieredStorage, ObjectStoreConfig, RemoteStorageManager, S3Config,
        S3RemoteStorage, TrustedManifestKeys, WormConfig,
    },
    std::{path::PathBuf, sync::Arc, time::Duration},
};

/// Kafka's setting naming the prefix of the storage manager's own settings.
pub const IMPL_PREFIX_SETTING: &str = "remote.log.storage.manager.impl.prefix";
/// Kafka's default of [`IMPL_PREFIX_SETTING`].
pub const DEFAULT_IMPL_PREFIX: &str = "rsm.config.";
/// The setting that chooses the built-in storage manager.
pub const BACKEND_SETTING: &str = "krabka.remote.log.storage.manager";

/// One setting of the storage manager, named without its prefix.
#[derive(Debug, Clone, Copy)]
pub struct RsmSetting {
    /// The name after the prefix, e.g. `s3.bucket`.
    pub name: &'static str,
    /// The default as text; `None` where there is none.
    pub default: Option<&'static str>,
    /// Value type and range.
    pub kind: ConfigKind,
    /// One line of documentation.
    pub doc: &'static str,
}

const fn rsm(
    name: &'static str,
    default: Option<&'static str>,
    kind: ConfigKind,
    doc: &'static str,
) -> RsmSetting {
    RsmSetting {
        name,
        default,
        kind,
        doc,
    }
}

const POSITIVE_LONG: ConfigKind = ConfigKind::Long {
    min: 1,
    max: i64::MAX,
};

/// Every storage-manager setting Krabka accepts (after the prefix).
pub const RSM_SETTINGS: &[RsmSetting] = &[
    // Both object stores.
    rsm(
        "prefix",
        Some(""),
        ConfigKind::Text,
        "Key prefix of every object in the bucket.",
    ),
    rsm(
        "multipart.threshold.bytes",
        Some("67108864"),
        POSITIVE_LONG,
        "Objects at or above this size are uploaded in parts.",
    ),
    rsm(
        "multipart.chunk.size.bytes",
        Some("8388608"),
        ConfigKind::Long {
            min: 5_242_880,
            max: i32::MAX as i64,
        },
        "Part size of multipart uploads (at least 5 MiB).",
    ),
    rsm(
        "retries",
        Some("3"),
        ConfigKind::Int { min: 0, max: 1000 },
        "Retries of a failed object-store request (exponential backoff).",
    ),
    rsm(
        "retry.backoff.ms",
        Some("100"),
        POSITIVE_LONG,
        "First backoff before a retry; doubles each time.",
    ),
    rsm(
        "retry.backoff.max.ms",
        Some("2000"),
        POSITIVE_LONG,
        "Longest backoff between retries.",
    ),
    rsm(
        "retry.timeout.ms",
        Some("10000"),
        POSITIVE_LONG,
        "No retry starts later than this after the first attempt.",
    ),
    rsm(
        "request.timeout.ms",
        Some("30000"),
        POSITIVE_LONG,
        "One request attempt (whole response included) gives up after this.",
    ),
    rsm(
        "connect.timeout.ms",
        Some("5000"),
        POSITIVE_LONG,
        "Connecting to the object store gives up after this.",
    ),
    // S3.
    rsm(
        "s3.bucket",
        None,
        ConfigKind::Text,
        "S3 bucket of the tier.",
    ),
    rsm(
        "s3.region",
        None,
        ConfigKind::Text,
        "S3 region; default from AWS_REGION / AWS_DEFAULT_REGION, then us-east-1.",
    ),
    rsm(
        "s3.endpoint",
        None,
        ConfigKind::Text,
        "Endpoint URL of an S3-compatible server; default AWS (or AWS_ENDPOINT).",
    ),
    rsm(
        "s3.path.style.access",
        Some("false"),
        ConfigKind::Boolean,
        "Address the bucket as <endpoint>/<bucket> (most S3-compatible servers).",
    ),
    rsm(
        "s3.allow.http",
        Some("false"),
        ConfigKind::Boolean,
        "Permit a plain http:// endpoint (local test servers only).",
    ),
    rsm(
        "s3.access.key.id",
        None,
        ConfigKind::Text,
        "Access key id; default from the AWS environment (AWS_ACCESS_KEY_ID, profiles, instance roles).",
    ),
    rsm(
        "s3.secret.access.key",
        None,
        ConfigKind::Text,
        "Secret access key (with s3.access.key.id).",
    ),
    rsm(
        "s3.session.token",
        None,
        ConfigKind::Text,
        "Session token of temporary credentials.",
    ),
    rsm(
        "s3.checksum.sha256",
        Some("true"),
        ConfigKind::Boolean,
        "Send x-amz-checksum-sha256 with every upload (Object Lock buckets need a checksum).",
    ),
    rsm(
        "s3.sdk.checksum.header",
        Some("false"),
        ConfigKind::Boolean,
        "Also send x-amz-sdk-checksum-algorithm (some S3-compatible test servers want it; not for AWS).",
    ),
    // GCS.
    rsm(
        "gcs.bucket",
        None,
        ConfigKind::Text,
        "GCS bucket of the tier.",
    ),
    rsm(
        "gcs.endpoint",
        None,
        ConfigKind::Text,
        "GCS API root, e.g. of an emulator; default storage.googleapis.com.",
    ),
    rsm(
        "gcs.allow.http",
        Some("false"),
        ConfigKind::Boolean,
        "Permit a plain http:// endpoint (emulators only).",
    ),
    rsm(
        "gcs.service.account.path",
        None,
        ConfigKind::Text,
        "Service-account key file; default application default credentials.",
    ),
    rsm(
        "gcs.service.account.json",
        None,
        ConfigKind::Text,
        "Service-account key as JSON text.",
    ),
    rsm(
        "gcs.anonymous",
        Some("false"),
        ConfigKind::Boolean,
        "Send no credentials (emulators only).",
    ),
    // Write-once archive mode.
    rsm(
        "worm.enable",
        Some("false"),
        ConfigKind::Boolean,
        "Run the object-store tier as a write-once archive (versioned bucket with locked retention).",
    ),
    rsm(
        "worm.signing.key.file",
        None,
        ConfigKind::Text,
        "File holding the broker's Ed25519 manifest-signing key as 64 hex digits.",
    ),
    rsm(
        "worm.previous.public.keys",
        Some(""),
        ConfigKind::List { choices: &[] },
        "Public keys (hex) of earlier signing keys of the same archive, after a key rotation.",
    ),
    rsm(
        "worm.write.only",
        Some("false"),
        ConfigKind::Boolean,
        "Archive only: refuse every remote read (consumers then cannot read below the local log start).",
    ),
];

/// The storage-manager setting named `name` (without the prefix).
#[must_use]
pub fn rsm_setting(name: &str) -> Option<&'static RsmSetting> {
    RSM_SETTINGS.iter().find(|s| s.name == name)
}

/// The prefix in force: [`IMPL_PREFIX_SETTING`] as given, else Kafka's default.
#[must_use]
pub fn impl_prefix(explicit: Option<&str>) -> String {
    explicit
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_IMPL_PREFIX)
        .to_owned()
}

/// Checks one prefixed setting at startup: its name must be known and its
/// value of the right type.
///
/// # Errors
///
/// The reason, naming the full setting.
pub fn validate_rsm(prefix: &str, full_name: &str, value: &str) -> Result<(), String> {
    let name = full_name.strip_prefix(prefix).unwrap_or(full_name);
    let setting = rsm_setting(name).ok_or_else(|| {
        format!("unknown remote storage manager setting {full_name} (known after {prefix}: s3.*, gcs.*, worm.*, prefix, multipart.*, retries, retry.*, request.timeout.ms, connect.timeout.ms)")
    })?;
    setting
        .kind
        .validate(value)
        .map_err(|reason| format!("invalid value {value:?} for setting {full_name}: {reason}"))
}

/// Which built-in storage manager the broker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// [`LocalTieredStorage`] in a directory.
    Filesystem,
    /// [`S3RemoteStorage`] on S3.
    S3,
    /// [`S3RemoteStorage`] on Google Cloud Storage.
    Gcs,
}

/// Write-once archive settings, read (key file included) at startup.
#[derive(Clone)]
pub struct WormSettings {
    /// The archive configuration handed to [`S3RemoteStorage::with_worm`].
    pub config: WormConfig,
    /// Where the signing key came from, for messages.
    pub key_file: PathBuf,
}

impl std::fmt::Debug for WormSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WormSettings")
            .field("config", &self.config)
            .field("key_file", &self.key_file)
            .finish()
    }
}

/// The storage manager to build.
// Built once at startup: the size of the object-store variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum StorageSettings {
    /// The filesystem tier in `dir`.
    Filesystem {
        /// Root directory of the tier.
        dir: PathBuf,
    },
    /// An object-store tier, optionally a write-once archive.
    Object {
        /// Bucket, credentials, endpoint and transfer settings.
        store: ObjectStoreConfig,
        /// Archive mode, if on.
        worm: Option<WormSettings>,
    },
}

/// Reads the settings a storage manager uses from the validated config
/// (also the diskless store's, under their own prefix).
pub(crate) struct Reader<'a> {
    config: &'a BrokerConfig,
    prefix: String,
}

impl<'a> Reader<'a> {
    /// Reads the settings named `<prefix><name>`.
    pub(crate) fn new(config: &'a BrokerConfig, prefix: &str) -> Self {
        Self {
            config,
            prefix: prefix.to_owned(),
        }
    }

    fn full(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The value as given (trimmed, empty treated as unset).
    fn given(&self, name: &str) -> Option<String> {
        self.config
            .explicit
            .get(&self.full(name))
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn text(&self, name: &str) -> String {
        self.given(name)
            .or_else(|| rsm_setting(name).and_then(|s| s.default.map(str::to_owned)))
            .unwrap_or_default()
    }

    fn flag(&self, name: &str) -> bool {
        self.text(name).eq_ignore_ascii_case("true")
    }

    fn number(&self, name: &str) -> Result<u64, BrokerError> {
        self.text(name).parse().map_err(|_| {
            BrokerError::Config(format!(
                "setting {} must be a non-negative number",
                self.full(name)
            ))
        })
    }

    fn millis(&self, name: &str) -> Result<Duration, BrokerError> {
        Ok(Duration::from_millis(self.number(name)?))
    }

    fn required(&self, name: &str, why: &str) -> Result<String, BrokerError> {
        self.given(name).ok_or_else(|| {
            BrokerError::Config(format!("setting {} is required {why}", self.full(name)))
        })
    }

    fn retry(&self) -> Result<RetrySettings, BrokerError> {
        Ok(RetrySettings {
            max_retries: usize::try_from(self.number("retries")?).unwrap_or(usize::MAX),
            init_backoff: self.millis("retry.backoff.ms")?,
            max_backoff: self.millis("retry.backoff.max.ms")?,
            retry_timeout: self.millis("retry.timeout.ms")?,
            request_timeout: self.millis("request.timeout.ms")?,
            connect_timeout: self.millis("connect.timeout.ms")?,
        })
    }

    /// Refuses settings of a backend family that is not in use.
    pub(crate) fn refuse_family(&self, family: &str, chosen: &str) -> Result<(), BrokerError> {
        let prefix = self.full(family);
        if let Some(name) = self.config.explicit.keys().find(|k| k.starts_with(&prefix)) {
            return Err(BrokerError::Config(format!(
                "setting {name} does not apply: {BACKEND_SETTING} is {chosen}"
            )));
        }
        Ok(())
    }

    pub(crate) fn s3(&self) -> Result<S3Config, BrokerError> {
        let bucket = self.required("s3.bucket", "when krabka.remote.log.storage.manager is s3")?;
        let mut c = S3Config::new(bucket);
        c.region = self.given("s3.region");
        c.endpoint = self.given("s3.endpoint");
        c.path_style = self.flag("s3.path.style.access");
        c.allow_http = self.flag("s3.allow.http");
        c.checksum_sha256 = self.flag("s3.checksum.sha256");
        c.sdk_checksum_header = self.flag("s3.sdk.checksum.header");
        c.credentials = match (
            self.given("s3.access.key.id"),
            self.given("s3.secret.access.key"),
        ) {
            (Some(access_key_id), Some(secret_access_key)) => Some(S3Credentials {
                access_key_id,
                secret_access_key,
                session_token: self.given("s3.session.token"),
            }),
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                return Err(BrokerError::Config(format!(
                    "settings {} and {} must be set together",
                    self.full("s3.access.key.id"),
                    self.full("s3.secret.access.key")
                )));
            }
        };
        if c.credentials.is_none() && self.given("s3.session.token").is_some() {
            return Err(BrokerError::Config(format!(
                "setting {} needs {} and {}",
                self.full("s3.session.token"),
                self.full("s3.access.key.id"),
                self.full("s3.secret.access.key")
            )));
        }
        c.prefix = self.text("prefix");
        c.multipart_threshold = self.number("multipart.threshold.bytes")?;
        c.multipart_chunk_size =
            usize::try_from(self.number("multipart.chunk.size.bytes")?).unwrap_or(usize::MAX);
        c.retry = self.retry()?;
        Ok(c)
    }

    pub(crate) fn gcs(&self) -> Result<GcsConfig, BrokerError> {
        let bucket = self.required(
            "gcs.bucket",
            "when krabka.remote.log.storage.manager is gcs",
        )?;
        let mut c = GcsConfig::new(bucket);
        c.endpoint = self.given("gcs.endpoint");
        c.allow_http = self.flag("gcs.allow.http");
        c.credentials = match (
            self.given("gcs.service.account.path"),
            self.given("gcs.service.account.json"),
            self.flag("gcs.anonymous"),
        ) {
            (None, None, false) => GcsCredentials::ApplicationDefault,
            (Some(path), None, false) => GcsCredentials::ServiceAccountPath(PathBuf::from(path)),
            (None, Some(json), false) => GcsCredentials::ServiceAccountJson(json),
            (None, None, true) => GcsCredentials::Anonymous,
            _ => {
                return Err(BrokerError::Config(format!(
                    "settings {}, {} and {} exclude each other",
                    self.full("gcs.service.account.path"),
                    self.full("gcs.service.account.json"),
                    self.full("gcs.anonymous")
                )));
            }
        };
        c.prefix = self.text("prefix");
        c.multipart_threshold = self.number("multipart.threshold.bytes")?;
        c.multipart_chunk_size =
            usize::try_from(self.number("multipart.chunk.size.bytes")?).unwrap_or(usize::MAX);
        c.retry = self.retry()?;
        Ok(c)
    }

    fn worm(&self) -> Result<Option<WormSettings>, BrokerError> {
        if !self.flag("worm.enable") {
            if let Some(name) = ["worm.signing.key.file", "worm.previous.public.keys"]
                .into_iter()
                .find(|n| self.given(n).is_some())
            {
                return Err(BrokerError::Config(format!(
                    "setting {} needs {}=true",
                    self.full(name),
                    self.full("worm.enable")
                )));
            }
            return Ok(None);
        }
        let key_name = self.full("worm.signing.key.file");
        let key_file = PathBuf::from(self.required("worm.signing.key.file", "in WORM mode")?);
        let secret = std::fs::read_to_string(&key_file).map_err(|e| {
            BrokerError::Config(format!(
                "setting {key_name}: cannot read {}: {e}",
                key_file.display()
            ))
        })?;
        let mut config = WormConfig::from_secret_hex(&secret).map_err(|e| {
            BrokerError::Config(format!(
                "setting {key_name}: {} does not hold a signing key: {e}",
                key_file.display()
            ))
        })?;
        let mut previous = TrustedManifestKeys::new();
        for (i, key) in self
            .text("worm.previous.public.keys")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .enumerate()
        {
            previous
                .insert_hex(key, format!("previous key #{}", i + 1))
                .map_err(|e| {
                    BrokerError::Config(format!(
                        "setting {}: key #{}: {e}",
                        self.full("worm.previous.public.keys"),
                        i + 1
                    ))
                })?;
        }
        config.previous_keys = previous;
        config.write_only = self.flag("worm.write.only");
        Ok(Some(WormSettings { config, key_file }))
    }
}

impl StorageSettings {
    /// The storage manager the settings choose, checked for consistency.
    /// The filesystem tier's directory is `filesystem_dir` (see
    /// [`super::settings::RemoteSettings::storage_dir`]).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] naming the setting that is missing, does not
    /// apply to the chosen backend, or (for the signing key file) cannot be
    /// read.
    pub fn from_config(
        config: &BrokerConfig,
        filesystem_dir: PathBuf,
    ) -> Result<Self, BrokerError> {
        let reader = Reader {
            config,
            prefix: impl_prefix(config.explicit.get(IMPL_PREFIX_SETTING).map(String::as_str)),
        };
        let backend = config
            .static_value(BACKEND_SETTING)
            .0
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match backend.as_str() {
            "s3" => {
                reader.refuse_family("gcs.", "s3")?;
                Ok(Self::Object {
                    store: ObjectStoreConfig::S3(reader.s3()?),
                    worm: reader.worm()?,
                })
            }
            "gcs" => {
                reader.refuse_family("s3.", "gcs")?;
                Ok(Self::Object {
                    store: ObjectStoreConfig::Gcs(reader.gcs()?),
                    worm: reader.worm()?,
                })
            }
            "filesystem" | "" => {
                for family in [
                    "s3.",
                    "gcs.",
                    "worm.",
                    "prefix",
                    "multipart.",
                    "retr",
                    "request.",
                    "connect.",
                ] {
                    reader.refuse_family(family, "filesystem")?;
                }
                Ok(Self::Filesystem {
                    dir: filesystem_dir,
                })
            }
            other => Err(BrokerError::Config(format!(
                "invalid value {other:?} for setting {BACKEND_SETTING}: must be filesystem, s3 or gcs"
            ))),
        }
    }

    /// Which backend these settings choose.
    #[must_use]
    pub fn backend(&self) -> Backend {
        match self {
            Self::Filesystem { .. } => Backend::Filesystem,
            Self::Object {
                store: ObjectStoreConfig::S3(_),
                ..
            } => Backend::S3,
            Self::Object {
                store: ObjectStoreConfig::Gcs(_),
                ..
            } => Backend::Gcs,
        }
    }
}

/// A built storage manager.
pub struct BuiltStorage {
    /// The SPI the remote log manager calls.
    pub storage: Arc<dyn RemoteStorageManager>,
    /// The object-store tier itself when there is one (for its chain
    /// records in WORM mode).
    pub object: Option<Arc<S3RemoteStorage>>,
    /// Whether the tier is a write-once archive (it refuses deletes).
    pub worm: bool,
}

impl std::fmt::Debug for BuiltStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltStorage")
            .field("object", &self.object)
            .field("worm", &self.worm)
            .finish_non_exhaustive()
    }
}

/// Builds the storage manager. Blocking: an object-store tier confirms that
/// its bucket exists and takes the credentials, and in WORM mode that the
/// bucket has versioning and locked retention.
///
/// # Errors
///
/// [`BrokerError::Io`] if the filesystem tier's directory cannot be created;
/// [`BrokerError::Config`] saying what is wrong with the bucket (missing,
/// unreachable, credentials refused, not protected for WORM mode).
pub fn build(settings: &StorageSettings) -> Result<BuiltStorage, BrokerError> {
    match settings {
        StorageSettings::Filesystem { dir } => {
            std::fs::create_dir_all(dir).map_err(|source| BrokerError::Io {
                action: "create remote tier directory",
                path: dir.clone(),
                source,
            })?;
            Ok(BuiltStorage {
                storage: Arc::new(LocalTieredStorage::new(dir.clone())),
                object: None,
                worm: false,
            })
        }
        StorageSettings::Object { store, worm } => {
            let what = store.describe();
            let mut storage = S3RemoteStorage::new(store.clone())
                .map_err(|e| BrokerError::Config(format!("remote storage {what}: {e}")))?;
            if let Some(worm) = worm {
                storage = storage.with_worm(worm.config.clone()).map_err(|e| {
                    BrokerError::Config(format!(
                        "remote storage {what} cannot run in WORM mode \
                         ({}worm.enable=true): {e}",
                        DEFAULT_IMPL_PREFIX
                    ))
                })?;
                tracing::info!(
                    bucket = %what,
                    public_key = %worm.config.public_key_hex(),
                    write_only = worm.config.write_only,
                    "remote tier is a write-once archive"
                );
            }
            let storage = Arc::new(storage);
            Ok(BuiltStorage {
                storage: Arc::clone(&storage) as Arc<dyn RemoteStorageManager>,
                object: Some(storage),
                worm: worm.is_some(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::config::RawSettings,
        assert2::{assert, check},
    };

    fn config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, BrokerError> {
        let mut raw = RawSettings::default();
        raw.set("remote.log.storage.system.enable", "true", "test");
        for (k, v) in pairs {
            raw.set(k, v, "test");
        }
        BrokerConfig::from_raw(&raw)
    }

    fn settings(pairs: &[(&str, &str)]) -> Result<StorageSettings, String> {
        let config = config(pairs).map_err(|e| e.to_string())?;
        StorageSettings::from_config(&config, PathBuf::from("/tier")).map_err(|e| e.to_string())
    }

    #[test]
    fn filesystem_is_the_default() {
        assert!(let Ok(StorageSettings::Filesystem { dir }) = settings(&[]));
        check!(dir == PathBuf::from("/tier"));
    }

    #[test]
    fn s3_settings_map_onto_the_config() {
        let s = settings(&[
            ("krabka.remote.log.storage.manager", "s3"),
            ("rsm.config.s3.bucket", "tier"),
            ("rsm.config.s3.region", "eu-west-1"),
            ("rsm.config.s3.endpoint", "http://127.0.0.1:9"),
            ("rsm.config.s3.path.style.access", "true"),
            ("rsm.config.s3.allow.http", "true"),
            ("rsm.config.s3.access.key.id", "id"),
            ("rsm.config.s3.secret.access.key", "secret"),
            ("rsm.config.prefix", "cluster-a"),
            ("rsm.config.multipart.threshold.bytes", "1048576"),
            ("rsm.config.multipart.chunk.size.bytes", "5242880"),
            ("rsm.config.retries", "1"),
            ("rsm.config.request.timeout.ms", "2000"),
        ])
        .unwrap();
        check!(s.backend() == Backend::S3);
        assert!(let StorageSettings::Object { store: ObjectStoreConfig::S3(c), worm: None } = s);
        check!(c.bucket == "tier");
        check!(c.region.as_deref() == Some("eu-west-1"));
        check!(c.endpoint.as_deref() == Some("http://127.0.0.1:9"));
        check!(c.path_style);
        check!(c.allow_http);
        check!(c.credentials.as_ref().map(|c| c.access_key_id.as_str()) == Some("id"));
        check!(c.prefix == "cluster-a");
        check!(c.multipart_threshold == 1_048_576);
        check!(c.multipart_chunk_size == 5_242_880);
        check!(c.retry.max_retries == 1);
        check!(c.retry.request_timeout == Duration::from_secs(2));
        check!(c.retry.retry_timeout == Duration::from_secs(10));
    }

    #[test]
    fn storage_manager_settings_come_from_the_environment_too() {
        let mut raw = RawSettings::default();
        raw.read_env([
            (
                "KRABKA_RSM_CONFIG_S3_BUCKET".to_owned(),
                "from-env".to_owned(),
            ),
            ("KRABKA_RSM_CONFIG_NOT_A_SETTING".to_owned(), "x".to_owned()),
        ]);
        raw.set("remote.log.storage.system.enable", "true", "test");
        raw.set("krabka.remote.log.storage.manager", "s3", "test");
        let config = BrokerConfig::from_raw(&raw).unwrap();
        let s = StorageSettings::from_config(&config, PathBuf::new()).unwrap();
        assert!(let StorageSettings::Object { store: ObjectStoreConfig::S3(c), .. } = s);
        check!(c.bucket == "from-env");
    }

    #[test]
    fn a_custom_prefix_is_honoured() {
        let s = settings(&[
            ("remote.log.storage.manager.impl.prefix", "tier."),
            ("krabka.remote.log.storage.manager", "gcs"),
            ("tier.gcs.bucket", "b"),
            ("tier.gcs.anonymous", "true"),
        ])
        .unwrap();
        assert!(let StorageSettings::Object { store: ObjectStoreConfig::Gcs(c), .. } = s);
        check!(c.bucket == "b");
        check!(c.credentials == GcsCredentials::Anonymous);
        // The default prefix is then just an unknown name.
        let err = config(&[
            ("remote.log.storage.manager.impl.prefix", "tier."),
            ("rsm.config.gcs.bucket", "b"),
        ])
        .unwrap_err()
        .to_string();
        check!(err.contains("rsm.config.gcs.bucket"));
    }

    #[test]
    fn unknown_invalid_and_inconsistent_settings_are_named() {
        for (pairs, named) in [
            (vec![("rsm.config.s3.bukket", "b")], "rsm.config.s3.bukket"),
            (
                vec![("rsm.config.s3.path.style.access", "yes")],
                "rsm.config.s3.path.style.access",
            ),
            (
                vec![("rsm.config.multipart.chunk.size.bytes", "1024")],
                "rsm.config.multipart.chunk.size.bytes",
            ),
            (
                vec![("krabka.remote.log.storage.manager", "azure")],
                "krabka.remote.log.storage.manager",
            ),
        ] {
            let err = config(&pairs).unwrap_err().to_string();
            check!(err.contains(named), "{err}");
        }
        for (pairs, named) in [
            (
                vec![("krabka.remote.log.storage.manager", "s3")],
                "rsm.config.s3.bucket",
            ),
            (vec![("rsm.config.s3.bucket", "b")], "rsm.config.s3.bucket"),
            (
                vec![
                    ("krabka.remote.log.storage.manager", "s3"),
                    ("rsm.config.s3.bucket", "b"),
                    ("rsm.config.gcs.bucket", "b"),
                ],
                "rsm.config.gcs.bucket",
            ),
            (
                vec![
                    ("krabka.remote.log.storage.manager", "s3"),
                    ("rsm.config.s3.bucket", "b"),
                    ("rsm.config.s3.access.key.id", "id"),
                ],
                "rsm.config.s3.secret.access.key",
            ),
            (
                vec![
                    ("krabka.remote.log.storage.manager", "s3"),
                    ("rsm.config.s3.bucket", "b"),
                    ("rsm.config.worm.enable", "true"),
                ],
                "rsm.config.worm.signing.key.file",
            ),
            (
                vec![
                    ("krabka.remote.log.storage.manager", "s3"),
                    ("rsm.config.s3.bucket", "b"),
                    ("rsm.config.worm.enable", "true"),
                    ("rsm.config.worm.signing.key.file", "/nonexistent/key"),
                ],
                "rsm.config.worm.signing.key.file",
            ),
            (
                vec![
                    ("krabka.remote.log.storage.manager", "gcs"),
                    ("rsm.config.gcs.bucket", "b"),
                    ("rsm.config.gcs.anonymous", "true"),
                    ("rsm.config.gcs.service.account.path", "/k.json"),
                ],
                "rsm.config.gcs.anonymous",
            ),
        ] {
            let err = settings(&pairs).unwrap_err();
            check!(err.contains(named), "{err}");
        }
    }

    #[test]
    fn worm_reads_the_key_file_and_previous_keys() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("signing.key");
        std::fs::write(&key, format!("{}\n", "11".repeat(32))).unwrap();
        let other = WormConfig::from_secret_hex(&"22".repeat(32)).unwrap();
        let s = settings(&[
            ("krabka.remote.log.storage.manager", "s3"),
            ("rsm.config.s3.bucket", "b"),
            ("rsm.config.worm.enable", "true"),
            ("rsm.config.worm.signing.key.file", key.to_str().unwrap()),
            (
                "rsm.config.worm.previous.public.keys",
                &other.public_key_hex(),
            ),
            ("rsm.config.worm.write.only", "true"),
        ])
        .unwrap();
        assert!(let StorageSettings::Object { worm: Some(w), .. } = s);
        check!(w.config.write_only);
        check!(w.config.previous_keys.len() == 1);
        check!(
            w.config.public_key_hex()
                == WormConfig::from_secret_hex(&"11".repeat(32))
                    .unwrap()
                    .public_key_hex()
        );

        std::fs::write(&key, "not hex").unwrap();
        let err = settings(&[
            ("krabka.remote.log.storage.manager", "s3"),
            ("rsm.config.s3.bucket", "b"),
            ("rsm.config.worm.enable", "true"),
            ("rsm.config.worm.signing.key.file", key.to_str().unwrap()),
        ])
        .unwrap_err();
        check!(err.contains("does not hold a signing key"));
    }

    #[test]
    fn an_unreachable_bucket_is_refused_with_its_name() {
        // Nothing listens on port 9 of the loopback address.
        let s = settings(&[
            ("krabka.remote.log.storage.manager", "s3"),
            ("rsm.config.s3.bucket", "tier"),
            ("rsm.config.s3.endpoint", "http://127.0.0.1:9"),
            ("rsm.config.s3.allow.http", "true"),
            ("rsm.config.s3.path.style.access", "true"),
            ("rsm.config.s3.access.key.id", "id"),
            ("rsm.config.s3.secret.access.key", "secret"),
            ("rsm.config.retries", "0"),
        ])
        .unwrap();
        let err = build(&s).unwrap_err().to_string();
        check!(err.contains("s3://tier"), "{err}");
    }
}
