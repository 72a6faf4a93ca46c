//! [`S3Config`]: Amazon S3 and S3-compatible servers.

use object_store::{
    ClientOptions, HeaderMap, HeaderValue,
    aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, Checksum},
};

use crate::{
    DEFAULT_MULTIPART_CHUNK_SIZE, DEFAULT_MULTIPART_THRESHOLD, MIN_MULTIPART_CHUNK_SIZE,
    ObjectStoreError, RetrySettings,
};

/// Static S3 credentials.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct S3Credentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    #[serde(default)]
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Credentials {
    // Never print secrets into logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Where and how to reach an S3 bucket.
///
/// Fields left `None` fall back to the standard AWS environment
/// (`AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, web identity and instance
/// credentials), exactly as the AWS SDKs do; explicit fields win.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct S3Config {
    /// Bucket name.
    pub bucket: String,
    /// Region; `None` reads the environment, then defaults to `us-east-1`.
    #[serde(default)]
    pub region: Option<String>,
    /// Endpoint URL of an S3-compatible server (`None` for AWS).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Static credentials; `None` uses the AWS environment chain.
    #[serde(default)]
    pub credentials: Option<S3Credentials>,
    /// `true` addresses the bucket as `<endpoint>/<bucket>` (path style, what
    /// most S3-compatible servers want); `false` uses virtual-hosted style
    /// (`<bucket>.s3.<region>.amazonaws.com`, or the endpoint as given when it
    /// already names the bucket).
    #[serde(default)]
    pub path_style: bool,
    /// Permits a plain `http://` endpoint. Meant for a local test server on
    /// `127.0.0.1`; real buckets need TLS.
    #[serde(default)]
    pub allow_http: bool,
    /// Key prefix for every object (no leading or trailing `/` needed).
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
    /// Send an `x-amz-checksum-sha256` with every upload. S3 requires a
    /// checksum (or Content-MD5) on every PUT into an Object Lock bucket, and
    /// it makes the server verify the bytes it stores. On by default.
    #[serde(default = "default_true")]
    pub checksum_sha256: bool,
    /// Also send the `x-amz-sdk-checksum-algorithm: SHA256` header that AWS
    /// SDKs send, which some S3-compatible test servers (moto) insist on for
    /// Object Lock buckets. It is added outside the request signature, so
    /// leave it off against AWS itself.
    #[serde(default)]
    pub sdk_checksum_header: bool,
}

fn default_true() -> bool {
    true
}

pub(crate) fn default_threshold() -> u64 {
    DEFAULT_MULTIPART_THRESHOLD
}

pub(crate) fn default_chunk() -> usize {
    DEFAULT_MULTIPART_CHUNK_SIZE
}

impl S3Config {
    /// A config for `bucket` with every other field at its default.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            region: None,
            endpoint: None,
            credentials: None,
            path_style: false,
            allow_http: false,
            prefix: String::new(),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            multipart_chunk_size: DEFAULT_MULTIPART_CHUNK_SIZE,
            retry: RetrySettings::default(),
            checksum_sha256: true,
            sdk_checksum_header: false,
        }
    }

    /// A config for a local S3-compatible test server at `endpoint`
    /// (path style, plain HTTP allowed, static credentials, the SDK checksum
    /// header on).
    pub fn local(bucket: impl Into<String>, endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: Some(endpoint.into()),
            region: Some("us-east-1".into()),
            credentials: Some(S3Credentials {
                access_key_id: "krabka".into(),
                secret_access_key: "krabka".into(),
                session_token: None,
            }),
            path_style: true,
            allow_http: true,
            sdk_checksum_header: true,
            ..Self::new(bucket)
        }
    }

    /// The `object_store` builder for this config, environment included.
    ///
    /// # Errors
    ///
    /// See [`crate::ObjectStoreConfig::build`].
    pub(crate) fn builder(&self) -> Result<AmazonS3Builder, ObjectStoreError> {
        validate_common(
            &self.bucket,
            self.multipart_threshold,
            self.multipart_chunk_size,
        )?;
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&self.bucket)
            .with_virtual_hosted_style_request(!self.path_style)
            .with_allow_http(self.allow_http)
            .with_retry(self.retry.to_retry_config());
        if self.checksum_sha256 {
            builder = builder.with_checksum_algorithm(Checksum::SHA256);
        }
        let mut options = self
            .retry
            .apply_timeouts(ClientOptions::new().with_allow_http(self.allow_http));
        if self.sdk_checksum_header {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-amz-sdk-checksum-algorithm",
                HeaderValue::from_static("SHA256"),
            );
            options = options.with_default_headers(headers);
        }
        builder = builder.with_client_options(options);
        if let Some(region) = &self.region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = &self.endpoint {
            check_endpoint(endpoint, self.allow_http)?;
            builder = builder.with_endpoint(endpoint);
        } else if let Some(endpoint) = builder.get_config_value(&AmazonS3ConfigKey::Endpoint) {
            check_endpoint(&endpoint, self.allow_http)?;
        }
        match &self.credentials {
            Some(c) => {
                if c.access_key_id.is_empty() || c.secret_access_key.is_empty() {
                    return Err(ObjectStoreError::Credentials(format!(
                        "bucket {:?}: access key id and secret access key must both be set",
                        self.bucket
                    )));
                }
                builder = builder
                    .with_access_key_id(&c.access_key_id)
                    .with_secret_access_key(&c.secret_access_key);
                if let Some(token) = &c.session_token {
                    builder = builder.with_token(token);
                }
            }
            None => {
                let id = builder.get_config_value(&AmazonS3ConfigKey::AccessKeyId);
                let secret = builder.get_config_value(&AmazonS3ConfigKey::SecretAccessKey);
                if id.is_some() != secret.is_some() {
                    return Err(ObjectStoreError::Credentials(format!(
                        "bucket {:?}: the environment sets only one of AWS_ACCESS_KEY_ID and \
                         AWS_SECRET_ACCESS_KEY",
                        self.bucket
                    )));
                }
            }
        }
        Ok(builder)
    }

    /// Builds the S3 client.
    ///
    /// # Errors
    ///
    /// See [`crate::ObjectStoreConfig::build`].
    pub fn build(&self) -> Result<AmazonS3, ObjectStoreError> {
        self.builder()?.build().map_err(ObjectStoreError::Build)
    }
}

pub(crate) fn validate_common(
    bucket: &str,
    threshold: u64,
    chunk: usize,
) -> Result<(), ObjectStoreError> {
    if bucket.trim().is_empty() {
        return Err(ObjectStoreError::MissingBucket);
    }
    if chunk < MIN_MULTIPART_CHUNK_SIZE {
        return Err(ObjectStoreError::InvalidConfig(format!(
            "multipart chunk size {chunk} is below the 5 MiB minimum part size"
        )));
    }
    if threshold == 0 {
        return Err(ObjectStoreError::InvalidConfig(
            "multipart threshold must be positive".into(),
        ));
    }
    Ok(())
}

pub(crate) fn check_endpoint(endpoint: &str, allow_http: bool) -> Result<(), ObjectStoreError> {
    if endpoint.starts_with("http://") && !allow_http {
        return Err(ObjectStoreError::InvalidConfig(format!(
            "endpoint {endpoint} is plain http; set allow_http (test servers only)"
        )));
    }
    if !endpoint.starts_with("http://") && !endpoint.starts_with("https://") {
        return Err(ObjectStoreError::InvalidConfig(format!(
            "endpoint {endpoint:?} must be an http:// or https:// URL"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use assert2::{assert, check};

    use super::*;

    #[test]
    fn empty_bucket_is_refused() {
        assert!(let Err(ObjectStoreError::MissingBucket) = S3Config::new(" ").build());
    }

    #[test]
    fn plain_http_needs_allow_http() {
        let mut config = S3Config::local("b", "http://127.0.0.1:9");
        config.allow_http = false;
        assert!(let Err(ObjectStoreError::InvalidConfig(msg)) = config.build());
        check!(msg.contains("allow_http"));
        config.allow_http = true;
        check!(config.build().is_ok());
    }

    #[test]
    fn half_credentials_are_refused() {
        let mut config = S3Config::local("b", "http://127.0.0.1:9");
        if let Some(c) = config.credentials.as_mut() {
            c.secret_access_key.clear();
        }
        assert!(let Err(ObjectStoreError::Credentials(_)) = config.build());
    }

    #[test]
    fn tiny_parts_are_refused() {
        let mut config = S3Config::local("b", "http://127.0.0.1:9");
        config.multipart_chunk_size = 1024;
        assert!(let Err(ObjectStoreError::InvalidConfig(_)) = config.build());
    }

    #[test]
    fn debug_redacts_secret() {
        let config = S3Config::local("b", "http://127.0.0.1:9");
        check!(!format!("{config:?}").contains("secret_access_key: \"krabka\""));
    }
}
