//! Leases: the database decides who holds what, a broker decides when to
//! stop believing it does.
//!
//! A lease row carries an expiry set from the database's clock
//! (`clock_timestamp() + duration`) when the grant or renewal is applied, so
//! no broker clock decides ownership. The broker, for its part, takes the
//! instant it *sent* the request on its monotonic clock and trusts the lease
//! only until `sent + duration - safety_margin`. The database applied the
//! request after it was sent, so the database's expiry is later than the
//! broker's deadline by at least the margin (give or take clock-rate drift,
//! which the margin also covers): the broker stops serving before anyone
//! else can acquire. A deposed broker that keeps going anyway (paused between
//! its check and its write) is stopped by the database: every write is
//! conditional on the writer's lease epoch being current and unexpired.

use std::{ops::Add, time::Duration};

use crate::error::ClusterError;

/// A broker's registration: its node id and the epoch its latest
/// registration minted. Writes fenced by the broker (rather than by a shard)
/// are conditional on this pair being live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BrokerLease {
    /// The node id.
    pub node: krabka_ids::BrokerId,
    /// The registration epoch.
    pub epoch: BrokerEpoch,
}

/// The epoch of a broker registration; every registration of a node id
/// gets a larger one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerEpoch(pub i64);

/// The epoch of a shard lease; every acquisition of a shard gets a larger
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseEpoch(pub i64);

impl std::fmt::Display for LeaseEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How long leases last and how a broker keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a grant or renewal lasts, by the database's clock.
    pub duration: Duration,
    /// How often the holder renews.
    pub renew_interval: Duration,
    /// How much earlier than the database the holder gives the lease up.
    pub safety_margin: Duration,
}

impl Default for LeaseTiming {
    /// A 10-second lease renewed every 2 seconds with a 1-second margin, so
    /// four renewals in a row may fail before the holder lets go.
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(10),
            renew_interval: Duration::from_secs(2),
            safety_margin: Duration::from_secs(1),
        }
    }
}

impl LeaseTiming {
    /// Checks that a renewal fits in a lease with the margin to spare.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Config`] when the margin is zero, or the renewal
    /// interval plus the margin does not fit in the duration.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.safety_margin.is_zero() || self.renew_interval.is_zero() {
            return Err(ClusterError::Config(
                "lease renewal interval and safety margin must be positive".into(),
            ));
        }
        if self.renew_interval + self.safety_margin >= self.duration {
            return Err(ClusterError::Config(format!(
                "lease duration {:?} must exceed the renewal interval {:?} plus the safety \
                 margin {:?}",
                self.duration, self.renew_interval, self.safety_margin
            )));
        }
        Ok(())
    }

    /// The lease duration in whole milliseconds, as the statements take it.
    #[must_use]
    pub fn duration_ms(&self) -> i64 {
        i64::try_from(self.duration.as_millis()).unwrap_or(i64::MAX)
    }

    /// Until when (on the holder's monotonic clock) a grant or renewal whose
    /// request was sent at `sent_at` may be trusted.
    #[must_use]
    pub fn local_deadline<I: Add<Duration, Output = I>>(&self, sent_at: I) -> I {
        sent_at + self.duration.saturating_sub(self.safety_margin)
    }
}

/// A holder's belief in a lease: valid until a deadline on its monotonic
/// clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocalLease<I> {
    deadline: I,
}

impl<I: Copy + PartialOrd + Add<Duration, Output = I>> LocalLease<I> {
    /// The belief a grant or renewal sent at `sent_at` gives.
    #[must_use]
    pub fn granted(timing: &LeaseTiming, sent_at: I) -> Self {
        Self {
            deadline: timing.local_deadline(sent_at),
        }
    }

    /// Whether the holder may still act as owner at `now`.
    #[must_use]
    pub fn is_valid_at(&self, now: I) -> bool {
        now < self.deadline
    }

    /// The deadline.
    #[must_use]
    pub fn deadline(&self) -> I {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_local_deadline_is_the_send_time_plus_duration_less_the_margin() {
        let timing = LeaseTiming::default();
        let sent = Instant::now();
        let lease = LocalLease::granted(&timing, sent);
        assert!(lease.is_valid_at(sent + Duration::from_millis(8_999)));
        assert!(!lease.is_valid_at(sent + Duration::from_secs(9)));
    }

    #[test]
    fn timing_needs_room_for_a_renewal_and_the_margin() {
        assert!(LeaseTiming::default().validate().is_ok());
        let tight = LeaseTiming {
            duration: Duration::from_secs(3),
            renew_interval: Duration::from_secs(2),
            safety_margin: Duration::from_secs(1),
        };
        assert!(tight.validate().is_err());
        let no_margin = LeaseTiming {
            safety_margin: Duration::ZERO,
            ..LeaseTiming::default()
        };
        assert!(no_margin.validate().is_err());
    }
}
