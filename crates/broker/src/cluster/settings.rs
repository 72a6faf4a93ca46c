//! The `krabka.cluster.*` settings, typed once at startup from the validated
//! [`BrokerConfig`] (the table in `config::defs` has checked types and
//! ranges already).

use {
    crate::{config::BrokerConfig, error::BrokerError},
    krabka_cluster::{DatabaseConfig, DatabaseTls, LeaseTiming},
    std::{path::PathBuf, time::Duration},
};

/// Cluster-mode settings of a broker with `krabka.cluster.database.url` set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// How to reach the database.
    pub database: DatabaseConfig,
    /// Lease duration, renewal interval and safety margin.
    pub timing: LeaseTiming,
    /// `broker.rack`.
    pub rack: Option<String>,
}

impl ClusterSettings {
    /// The settings, or `None` when `krabka.cluster.database.url` is unset
    /// (a single node).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] when the lease timings do not fit together.
    pub fn from_config(config: &BrokerConfig) -> Result<Option<Self>, BrokerError> {
        let text = |name: &str| config.static_value(name).0.unwrap_or_default();
        let url = text("krabka.cluster.database.url");
        if url.trim().is_empty() {
            return Ok(None);
        }
        let number = |name: &str| -> Result<u64, BrokerError> {
            text(name)
                .trim()
                .parse()
                .map_err(|_| BrokerError::Config(format!("setting {name} must be a number")))
        };
        let millis = |name: &str| number(name).map(Duration::from_millis);
        let tls = if text("krabka.cluster.database.tls.enable").eq_ignore_ascii_case("true") {
            let ca = text("krabka.cluster.database.tls.ca.file");
            DatabaseTls::Enabled {
                ca_file: (!ca.trim().is_empty()).then(|| PathBuf::from(ca.trim())),
            }
        } else {
            DatabaseTls::Disabled
        };
        let timing = LeaseTiming {
            duration: millis("krabka.cluster.lease.duration.ms")?,
            renew_interval: millis("krabka.cluster.lease.renew.interval.ms")?,
            safety_margin: millis("krabka.cluster.lease.safety.margin.ms")?,
        };
        let database = DatabaseConfig {
            url: url.trim().to_owned(),
            pool_size: usize::try_from(number("krabka.cluster.database.pool.size")?)
                .unwrap_or(usize::MAX),
            connect_timeout: millis("krabka.cluster.database.connect.timeout.ms")?,
            tls,
            // A broker frozen for its whole lease has lost its leases; the
            // locks of a transaction it froze in go too (never under 5 s,
            // so a busy machine's scheduling stalls do not abort work).
            idle_in_transaction_timeout: Some(timing.duration.max(Duration::from_secs(5))),
        };
        timing
            .validate()
            .map_err(|e| BrokerError::Config(format!("krabka.cluster.lease.*: {e}")))?;
        let rack = text("broker.rack");
        Ok(Some(Self {
            database,
            timing,
            rack: (!rack.trim().is_empty()).then(|| rack.trim().to_owned()),
        }))
    }
}
