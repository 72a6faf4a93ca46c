//! [`GcsConfig`]: Google Cloud Storage and `fake-gcs-server`.

use std::path::PathBuf;

use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder};

use crate::{
    DEFAULT_MULTIPART_CHUNK_SIZE, DEFAULT_MULTIPART_THRESHOLD, ObjectStoreError, RetrySettings,
    s3::{check_endpoint, default_chunk, default_threshold, validate_common},
};

/// The public GCS JSON/XML API root.
pub(crate) const DEFAULT_GCS_BASE_URL: &str = "https://storage.googleapis.com";

/// How a GCS client authenticates.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GcsCredentials {
    /// Application default credentials: `GOOGLE_APPLICATION_CREDENTIALS`,
    /// `GOOGLE_SERVICE_ACCOUNT`, the gcloud user file, then the metadata server.
    ApplicationDefault,
    /// A service-account key file.
    ServiceAccountPath(PathBuf),
    /// A service-account key, as JSON text.
    ServiceAccountJson(String),
    /// No authentication, for an emulator such as `fake-gcs-server`.
    Anonymous,
}

impl std::fmt::Debug for GcsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ApplicationDefault => f.write_str("ApplicationDefault"),
            Self::ServiceAccountPath(p) => f.debug_tuple("ServiceAccountPath").field(p).finish(),
            Self::ServiceAccountJson(_) => f.write_str("ServiceAccountJson(<redacted>)"),
            Self::Anonymous => f.write_str("Anonymous"),
        }
    }
}

/// Where and how to reach a GCS bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcsConfig {
    /// Bucket name.
    pub bucket: String,
    /// Authentication.
    pub credentials: GcsCredentials,
    /// API root override, e.g. `http://127.0.0.1:4443` for `fake-gcs-server`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Permits a plain `http://` endpoint (emulators only).
    #[serde(default)]
    pub allow_http: bool,
    /// Key prefix for every object.
    #[serde(default)]
    pub prefix: String,
    /// See [`DEFAULT_MULTIPART_THRESHOLD`].
    #[serde(default = "default_threshold")]
    pub multipart_threshold: u64,
    /// See [`DEFAULT_MULTIPART_CHUNK_SIZE`].
    #[serde(default = "default_chunk")]
    pub multipart_chunk_size: usize,
    /// Retry and backoff on transient errors.
    #[serde(default)]
    pub retry: RetrySettings,
}

impl GcsConfig {
    /// A config for `bucket` with application default credentials.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            credentials: GcsCredentials::ApplicationDefault,
            endpoint: None,
            allow_http: false,
            prefix: String::new(),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            multipart_chunk_size: DEFAULT_MULTIPART_CHUNK_SIZE,
            retry: RetrySettings::default(),
        }
    }

    /// A config for an emulator at `endpoint` (anonymous, plain HTTP allowed).
    pub fn emulator(bucket: impl Into<String>, endpoint: impl Into<String>) -> Self {
        Self {
            credentials: GcsCredentials::Anonymous,
            endpoint: Some(endpoint.into()),
            allow_http: true,
            ..Self::new(bucket)
        }
    }

    /// The API root requests go to.
    pub(crate) fn base_url(&self) -> String {
        self.endpoint
            .as_deref()
            .unwrap_or(DEFAULT_GCS_BASE_URL)
            .trim_end_matches('/')
            .to_owned()
    }

    /// Builds the GCS client.
    ///
    /// # Errors
    ///
    /// See [`crate::ObjectStoreConfig::build`].
    pub fn build(&self) -> Result<GoogleCloudStorage, ObjectStoreError> {
        validate_common(
            &self.bucket,
            self.multipart_threshold,
            self.multipart_chunk_size,
        )?;
        let mut builder = GoogleCloudStorageBuilder::new()
            .with_bucket_name(&self.bucket)
            .with_retry(self.retry.to_retry_config())
            .with_client_options(self.retry.apply_timeouts(
                object_store::ClientOptions::new().with_allow_http(self.allow_http),
            ));
        if let Some(endpoint) = &self.endpoint {
            check_endpoint(endpoint, self.allow_http)?;
            builder = builder.with_base_url(endpoint.trim_end_matches('/'));
        }
        builder = match &self.credentials {
            GcsCredentials::ApplicationDefault => {
                // The same variables `GoogleCloudStorageBuilder::from_env` reads.
                if let Ok(path) = std::env::var("GOOGLE_SERVICE_ACCOUNT") {
                    builder.with_service_account_path(path)
                } else if let Ok(key) = std::env::var("GOOGLE_SERVICE_ACCOUNT_KEY") {
                    builder.with_service_account_key(key)
                } else if let Ok(path) = std::env::var("GOOGLE_APPLICATION_CREDENTIALS") {
                    builder.with_application_credentials(path)
                } else {
                    builder
                }
            }
            GcsCredentials::ServiceAccountPath(path) => {
                if !path.is_file() {
                    return Err(ObjectStoreError::Credentials(format!(
                        "service account file {} does not exist",
                        path.display()
                    )));
                }
                builder.with_service_account_path(path.to_string_lossy())
            }
            GcsCredentials::ServiceAccountJson(json) => {
                serde_json::from_str::<serde_json::Value>(json).map_err(|e| {
                    ObjectStoreError::Credentials(format!("service account key is not JSON: {e}"))
                })?;
                builder.with_service_account_key(json)
            }
            // `object_store`'s documented emulator switch: a key with
            // `disable_oauth` sends no token at all.
            GcsCredentials::Anonymous => builder.with_service_account_key(
                serde_json::json!({
                    "disable_oauth": true,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                })
                .to_string(),
            ),
        };
        builder.build().map_err(|e| match e {
            object_store::Error::Generic { source, .. } => {
                ObjectStoreError::Credentials(source.to_string())
            }
            other => ObjectStoreError::Build(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use assert2::assert;

    use super::*;

    #[test]
    fn missing_key_file_is_a_credentials_error() {
        let mut config = GcsConfig::new("b");
        config.credentials = GcsCredentials::ServiceAccountPath("/nonexistent/key.json".into());
        assert!(let Err(ObjectStoreError::Credentials(_)) = config.build());
    }

    #[test]
    fn bad_json_key_is_a_credentials_error() {
        let mut config = GcsConfig::new("b");
        config.credentials = GcsCredentials::ServiceAccountJson("{not json".into());
        assert!(let Err(ObjectStoreError::Credentials(_)) = config.build());
    }

    #[test]
    fn emulator_builds_without_network() {
        assert!(let Ok(_) = GcsConfig::emulator("b", "http://127.0.0.1:9").build());
    }
}
