//! Reading the bucket-level protection a write-once archive relies on.
//!
//! `object_store` covers objects, not buckets, so the two bucket reads the
//! WORM layer needs are made here as plain REST calls through
//! `object_store`'s own HTTP client and SigV4 signer (`AwsAuthorizer`):
//!
//! - S3: `GET /<bucket>?versioning` (`GetBucketVersioning`) and
//!   `GET /<bucket>?object-lock` (`GetObjectLockConfiguration`).
//! - GCS: `GET /storage/v1/b/<bucket>?fields=versioning,retentionPolicy`, the
//!   JSON API bucket resource.
//!
//! The responses are small and fixed-shape, so the S3 XML is read by element
//! name instead of through a full XML parser.

use std::time::Duration;

use object_store::{
    ClientOptions,
    aws::{AmazonS3ConfigKey, AwsAuthorizer},
    client::{HttpClient, HttpConnector, HttpRequest, HttpRequestBody, ReqwestConnector},
};

use crate::{GcsConfig, ObjectStoreError, S3Config};

/// The kind of default retention a bucket applies to new objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RetentionMode {
    /// S3 Object Lock compliance mode: nobody, not even the root account, can
    /// delete a locked version or shorten its retention.
    Compliance,
    /// S3 Object Lock governance mode: a privileged user can bypass it.
    Governance,
    /// A locked GCS retention policy (Bucket Lock): cannot be removed or
    /// shortened.
    GcsLocked,
    /// A GCS retention policy that is not locked yet and can still be removed.
    GcsUnlocked,
}

/// What a bucket does to keep objects from being overwritten or deleted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketProtection {
    /// Object versioning is enabled (S3 `Status=Enabled`, GCS
    /// `versioning.enabled`).
    pub versioning: bool,
    /// The default retention mode, if the bucket has one.
    pub retention_mode: Option<RetentionMode>,
    /// The default retention period, if the bucket has one.
    pub retention_period: Option<Duration>,
}

impl BucketProtection {
    /// Whether the default retention can neither be bypassed nor shortened
    /// (S3 compliance mode, or a locked GCS policy) and lasts a positive time.
    pub fn has_locked_retention(&self) -> bool {
        matches!(
            self.retention_mode,
            Some(RetentionMode::Compliance | RetentionMode::GcsLocked)
        ) && self.retention_period.is_some_and(|p| !p.is_zero())
    }
}

fn http_client(allow_http: bool) -> Result<HttpClient, ObjectStoreError> {
    ReqwestConnector::default()
        .connect(&ClientOptions::new().with_allow_http(allow_http))
        .map_err(ObjectStoreError::Build)
}

fn request(url: &str) -> Result<HttpRequest, ObjectStoreError> {
    let mut req = HttpRequest::new(HttpRequestBody::empty());
    *req.uri_mut() = url
        .parse()
        .map_err(|e| ObjectStoreError::InvalidConfig(format!("bad URL {url}: {e}")))?;
    Ok(req)
}

/// Sends `req`, returning status and body text.
async fn send(
    client: &HttpClient,
    bucket: &str,
    req: HttpRequest,
) -> Result<(u16, String), ObjectStoreError> {
    let resp = client
        .execute(req)
        .await
        .map_err(|e| ObjectStoreError::Request {
            bucket: bucket.to_owned(),
            reason: e.to_string(),
        })?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .bytes()
        .await
        .map_err(|e| ObjectStoreError::Request {
            bucket: bucket.to_owned(),
            reason: e.to_string(),
        })?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn classify(bucket: &str, status: u16, body: &str) -> ObjectStoreError {
    let bucket = bucket.to_owned();
    match status {
        404 => ObjectStoreError::BucketNotFound { bucket },
        401 | 403 => ObjectStoreError::AccessDenied {
            bucket,
            reason: body.chars().take(300).collect(),
        },
        _ => ObjectStoreError::Request {
            bucket,
            reason: format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            ),
        },
    }
}

/// The text of the first `<tag>...</tag>` element in `xml`.
fn xml_element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let len = xml.get(start..)?.find(&close)?;
    xml.get(start..start + len).map(str::trim)
}

/// Reads versioning and Object Lock configuration of an S3 bucket.
pub(crate) async fn s3_bucket_protection(
    config: &S3Config,
) -> Result<BucketProtection, ObjectStoreError> {
    let builder = config.builder()?;
    let region = builder
        .get_config_value(&AmazonS3ConfigKey::Region)
        .unwrap_or_else(|| "us-east-1".to_owned());
    let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
    let store = builder.build().map_err(ObjectStoreError::Build)?;
    let bucket = &config.bucket;
    let bucket_url = match (endpoint, config.path_style) {
        (Some(e), false) => e.trim_end_matches('/').to_owned(),
        (Some(e), true) => format!("{}/{bucket}", e.trim_end_matches('/')),
        (None, false) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
        (None, true) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
    };
    let credential = store
        .credentials()
        .get_credential()
        .await
        .map_err(|e| ObjectStoreError::Credentials(e.to_string()))?;
    let client = http_client(config.allow_http)?;
    let signed = |query: &str| -> Result<HttpRequest, ObjectStoreError> {
        let mut req = request(&format!("{bucket_url}/?{query}"))?;
        AwsAuthorizer::new(&credential, "s3", &region)
            .try_authorize(&mut req, None)
            .map_err(|e| ObjectStoreError::Credentials(e.to_string()))?;
        Ok(req)
    };

    let (status, body) = send(&client, bucket, signed("versioning")?).await?;
    if status != 200 {
        return Err(classify(bucket, status, &body));
    }
    let versioning = xml_element(&body, "Status") == Some("Enabled");

    let (status, body) = send(&client, bucket, signed("object-lock")?).await?;
    let (mut retention_mode, mut retention_period) = (None, None);
    match status {
        200 => {
            let enabled = xml_element(&body, "ObjectLockEnabled") == Some("Enabled");
            if enabled && let Some(rule) = xml_element(&body, "DefaultRetention") {
                retention_mode = match xml_element(rule, "Mode") {
                    Some("COMPLIANCE") => Some(RetentionMode::Compliance),
                    Some("GOVERNANCE") => Some(RetentionMode::Governance),
                    _ => None,
                };
                let days = xml_element(rule, "Days")
                    .and_then(|d| d.parse::<u64>().ok())
                    .or_else(|| {
                        xml_element(rule, "Years")
                            .and_then(|y| y.parse::<u64>().ok())
                            .map(|y| y.saturating_mul(365))
                    });
                retention_period = days.map(|d| Duration::from_secs(d.saturating_mul(86_400)));
            }
        }
        // No Object Lock configuration at all.
        404 if body.contains("ObjectLockConfigurationNotFound") => {}
        _ => return Err(classify(bucket, status, &body)),
    }
    Ok(BucketProtection {
        versioning,
        retention_mode,
        retention_period,
    })
}

/// Reads versioning and the retention policy of a GCS bucket.
pub(crate) async fn gcs_bucket_protection(
    config: &GcsConfig,
) -> Result<BucketProtection, ObjectStoreError> {
    let store = config.build()?;
    let bucket = &config.bucket;
    let credential = store
        .credentials()
        .get_credential()
        .await
        .map_err(|e| ObjectStoreError::Credentials(e.to_string()))?;
    let mut req = request(&format!(
        "{}/storage/v1/b/{bucket}?fields=versioning,retentionPolicy",
        config.base_url()
    ))?;
    if !credential.bearer.is_empty() {
        let value = format!("Bearer {}", credential.bearer)
            .parse()
            .map_err(|_| ObjectStoreError::Credentials("bearer token is not a header".into()))?;
        req.headers_mut().insert("authorization", value);
    }
    let (status, body) = send(&http_client(config.allow_http)?, bucket, req).await?;
    if status != 200 {
        return Err(classify(bucket, status, &body));
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| ObjectStoreError::Request {
            bucket: bucket.clone(),
            reason: format!("bucket resource is not JSON: {e}"),
        })?;
    let versioning = json["versioning"]["enabled"].as_bool().unwrap_or(false);
    let policy = &json["retentionPolicy"];
    // `retentionPeriod` is an int64 encoded as a JSON string, in seconds.
    let period = policy["retentionPeriod"]
        .as_str()
        .and_then(|s| s.parse::<u64>().ok())
        .or_else(|| policy["retentionPeriod"].as_u64())
        .map(Duration::from_secs);
    let retention_mode = period.map(|_| {
        if policy["isLocked"].as_bool().unwrap_or(false) {
            RetentionMode::GcsLocked
        } else {
            RetentionMode::GcsUnlocked
        }
    });
    Ok(BucketProtection {
        versioning,
        retention_mode,
        retention_period: period,
    })
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;

    #[test]
    fn reads_object_lock_xml() {
        let xml = "<?xml version=\"1.0\"?><ObjectLockConfiguration><ObjectLockEnabled>Enabled\
                   </ObjectLockEnabled><Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Days>3\
                   </Days></DefaultRetention></Rule></ObjectLockConfiguration>";
        check!(xml_element(xml, "ObjectLockEnabled") == Some("Enabled"));
        let rule = xml_element(xml, "DefaultRetention").unwrap();
        check!(xml_element(rule, "Mode") == Some("COMPLIANCE"));
        check!(xml_element(rule, "Days") == Some("3"));
        check!(xml_element(xml, "Years").is_none());
    }

    #[test]
    fn locked_retention_needs_lock_and_period() {
        let mut p = BucketProtection {
            versioning: true,
            retention_mode: Some(RetentionMode::Governance),
            retention_period: Some(Duration::from_secs(86_400)),
        };
        check!(!p.has_locked_retention());
        p.retention_mode = Some(RetentionMode::Compliance);
        check!(p.has_locked_retention());
        p.retention_period = Some(Duration::ZERO);
        check!(!p.has_locked_retention());
    }
}
