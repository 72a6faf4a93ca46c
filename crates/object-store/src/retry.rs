//! Retry, backoff and timeout settings shared by both backends.
//!
//! Timeouts live beside the retries because together they bound how long one
//! call can take: a hung server costs at most `request_timeout` per attempt,
//! and no attempt starts after `retry_timeout`. A caller that must not stall
//! (the broker's copy task) relies on that bound.

use std::time::Duration;

use object_store::{BackoffConfig, ClientOptions, RetryConfig};

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
    /// One attempt (connect, send, whole response) gives up after this.
    pub request_timeout: Duration,
    /// Connecting gives up after this.
    pub connect_timeout: Duration,
}

impl Default for RetrySettings {
    /// 10 retries, 100 ms doubling to 15 s, 3 minutes in total, 30 s per
    /// attempt, 5 s to connect: the `object_store` defaults, which keep a
    /// signed request within its validity window.
    fn default() -> Self {
        Self {
            max_retries: 10,
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            retry_timeout: Duration::from_secs(180),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
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

    /// `options` with this setting's timeouts applied.
    pub(crate) fn apply_timeouts(self, options: ClientOptions) -> ClientOptions {
        options
            .with_timeout(self.request_timeout)
            .with_connect_timeout(self.connect_timeout)
    }
}
