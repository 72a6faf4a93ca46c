//! Retry and backoff settings shared by both backends.

use std::time::Duration;

use object_store::{BackoffConfig, RetryConfig};

/// How requests are retried on transient errors (5xx, throttling, timeouts,
/// connection resets): exponential backoff with jitter, from `init_backoff`
/// doubling up to `max_backoff`, at most `max_retries` times and never past
/// `retry_timeout` after the first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RetrySettings {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: usize,
    /// The first backoff.
    pub init_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// No retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
}

impl Default for RetrySettings {
    /// 10 retries, 100 ms doubling to 15 s, 3 minutes in total: the
    /// `object_store` defaults, which keep a signed request within its
    /// validity window.
    fn default() -> Self {
        Self {
            max_retries: 10,
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            retry_timeout: Duration::from_secs(180),
        }
    }
}

impl RetrySettings {
    /// The `object_store` form.
    pub(crate) fn to_retry_config(self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}
