//! Per-API counts of the requests a client has sent.
//!
//! Some callers promise a number of round trips (the coordination client's
//! `describe` promises one request); the counts let a test check that
//! promise against a real broker instead of trusting the code's shape. A
//! count is one relaxed atomic add per request, cheap enough to keep on
//! always, so there is no switch for it.

use {
    kafka_protocol::messages::ApiKey,
    std::sync::atomic::{AtomicU64, Ordering},
};

/// One slot per API key; Kafka's keys are below 128.
const SLOTS: usize = 128;

/// How many requests of each API were sent, shared by all the connections
/// of one [`crate::Client`].
#[derive(Debug)]
pub struct RequestCounts {
    sent: [AtomicU64; SLOTS],
}

impl Default for RequestCounts {
    fn default() -> Self {
        Self {
            sent: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl RequestCounts {
    /// Counts one request of API `key` (a raw key outside the table is not
    /// counted; no such key exists today).
    pub(crate) fn record(&self, key: i16) {
        if let Some(slot) = usize::try_from(key).ok().and_then(|k| self.sent.get(k)) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many requests of `api` were sent so far.
    #[must_use]
    pub fn sent(&self, api: ApiKey) -> u64 {
        usize::try_from(api as i16)
            .ok()
            .and_then(|k| self.sent.get(k))
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    /// How many requests were sent so far, of every API.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.sent
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn counts_each_api_on_its_own() {
        let counts = RequestCounts::default();
        counts.record(ApiKey::DescribeTransactions as i16);
        counts.record(ApiKey::DescribeTransactions as i16);
        counts.record(ApiKey::FindCoordinator as i16);
        counts.record(-1);
        counts.record(i16::MAX);
        check!(counts.sent(ApiKey::DescribeTransactions) == 2);
        check!(counts.sent(ApiKey::FindCoordinator) == 1);
        check!(counts.sent(ApiKey::Produce) == 0);
        check!(counts.total() == 3);
    }
}
