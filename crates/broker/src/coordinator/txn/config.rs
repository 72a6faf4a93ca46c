//! The transaction coordinator's settings, with Kafka's names and defaults
//! (`TransactionStateManagerConfig`, `TransactionLogConfig`).
//!
//! The broker's settings table (`config::defs`) validates each value at
//! startup; [`TxnConfig::from_broker`] only reads them.

use {
    super::version::{self, TransactionVersion},
    crate::config::BrokerConfig,
};

/// Everything the transaction coordinator can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a
    /// producer may ask for.
    pub max_timeout_ms: i32,
    /// `transaction.state.log.num.partitions` (fixed once the topic exists).
    pub state_log_partitions: i32,
    /// `transaction.state.log.segment.bytes`.
    pub state_log_segment_bytes: i64,
    /// `transactional.id.expiration.ms`: an id idle this long without an
    /// open transaction is forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: u64,
    /// `transaction.partition.verification.enable`: transactional produce
    /// must go to a partition added to the open transaction.
    pub partition_verification: bool,
    /// `producer.id.expiration.ms`: partition producer state idle this long
    /// (and with no open transaction) is dropped.
    pub producer_id_expiration_ms: u64,
    /// `producer.id.expiration.check.interval.ms`.
    pub producer_id_expiration_check_interval_ms: u64,
    /// `krabka.transaction.version`: the `transaction.version` level
    /// announced in ApiVersions.
    pub version: TransactionVersion,
}

impl Default for TxnConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        Self {
            max_timeout_ms: 900_000,
            state_log_partitions: 50,
            state_log_segment_bytes: 104_857_600,
            id_expiration_ms: 604_800_000,
            abort_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
            partition_verification: true,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            version: TransactionVersion(version::MAX_LEVEL),
        }
    }
}

impl TxnConfig {
    /// The settings of a validated broker configuration. A value that does
    /// not parse (impossible after validation) falls back to Kafka's default.
    #[must_use]
    pub fn from_broker(config: &BrokerConfig) -> Self {
        let d = Self::default();
        let get = |name: &str| -> Option<i64> { config.static_value(name).0?.trim().parse().ok() };
        let positive = |name: &str, default: u64| {
            get(name)
                .and_then(|v| u64::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Self {
            max_timeout_ms: get("transaction.max.timeout.ms")
                .and_then(|v| i32::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(d.max_timeout_ms),
            state_log_partitions: get("transaction.state.log.num.partitions")
                .and_then(|v| i32::try_from(v).ok())
                .filter(|v| *v > 0)
                .unwrap_or(d.state_log_partitions),
            state_log_segment_bytes: get("transaction.state.log.segment.bytes")
                .filter(|v| *v > 0)
                .unwrap_or(d.state_log_segment_bytes),
            id_expiration_ms: get("transactional.id.expiration.ms")
                .filter(|v| *v > 0)
                .unwrap_or(d.id_expiration_ms),
            abort_interval_ms: positive(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                d.abort_interval_ms,
            ),
            remove_expired_interval_ms: positive(
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                d.remove_expired_interval_ms,
            ),
            partition_verification: config
                .static_value("transaction.partition.verification.enable")
                .0
                .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false")),
            producer_id_expiration_ms: positive(
                "producer.id.expiration.ms",
                d.producer_id_expiration_ms,
            ),
            producer_id_expiration_check_interval_ms: positive(
                "producer.id.expiration.check.interval.ms",
                d.producer_id_expiration_check_interval_ms,
            ),
            version: get("krabka.transaction.version")
                .and_then(|v| i16::try_from(v).ok())
                .filter(|v| (0..=version::MAX_LEVEL).contains(v))
                .map_or(d.version, TransactionVersion),
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::config::{BrokerConfig, RawSettings},
        assert2::check,
    };

    fn config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, crate::error::BrokerError> {
        let mut raw = RawSettings::default();
        for (k, v) in pairs {
            raw.set(k, v, "test");
        }
        BrokerConfig::from_raw(&raw)
    }

    #[test]
    fn defaults_of_the_settings_table_are_kafkas() {
        check!(TxnConfig::from_broker(&config(&[]).unwrap()) == TxnConfig::default());
    }

    #[test]
    fn set_values_reach_the_coordinator() {
        let got = TxnConfig::from_broker(
            &config(&[
                ("transaction.max.timeout.ms", "60000"),
                ("transaction.state.log.num.partitions", "3"),
                ("transaction.state.log.segment.bytes", "1048576"),
                ("transactional.id.expiration.ms", "1000"),
                (
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                    "200",
                ),
                (
                    "transaction.remove.expired.transaction.cleanup.interval.ms",
                    "300",
                ),
                ("transaction.partition.verification.enable", "false"),
                ("producer.id.expiration.ms", "5000"),
                ("producer.id.expiration.check.interval.ms", "400"),
                ("krabka.transaction.version", "1"),
            ])
            .unwrap(),
        );
        check!(
            got == TxnConfig {
                max_timeout_ms: 60_000,
                state_log_partitions: 3,
                state_log_segment_bytes: 1_048_576,
                id_expiration_ms: 1000,
                abort_interval_ms: 200,
                remove_expired_interval_ms: 300,
                partition_verification: false,
                producer_id_expiration_ms: 5000,
                producer_id_expiration_check_interval_ms: 400,
                version: TransactionVersion(1),
            }
        );
    }

    #[test]
    fn out_of_range_values_are_refused_at_startup() {
        for (name, value) in [
            ("transaction.max.timeout.ms", "0"),
            ("transaction.max.timeout.ms", "9999999999"),
            ("transaction.state.log.num.partitions", "0"),
            ("transaction.state.log.segment.bytes", "0"),
            ("transactional.id.expiration.ms", "0"),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                "0",
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                "-1",
            ),
            ("transaction.partition.verification.enable", "maybe"),
            ("producer.id.expiration.ms", "0"),
            ("producer.id.expiration.check.interval.ms", "0"),
            ("krabka.transaction.version", "3"),
        ] {
            let err = config(&[(name, value)]).unwrap_err().to_string();
            check!(err.contains(name), "{name}={value}: {err}");
        }
    }
}
