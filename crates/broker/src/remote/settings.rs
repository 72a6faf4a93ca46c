//! The broker settings of tiered storage, read once at startup from the
//! validated [`BrokerConfig`] (Kafka's names; the `krabka.` ones choose
//! between Krabka's built-in plugins where Kafka takes a class name).

use {
    crate::{config::BrokerConfig, error::BrokerError},
    std::{path::PathBuf, time::Duration},
};

/// Which `RemoteLogMetadataManager` the broker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataManagerChoice {
    /// `TopicBasedRemoteLogMetadataManager` over the broker's own
    /// `__remote_log_metadata` topic (the default, durable).
    Topic,
    /// `InmemoryRemoteLogMetadataManager`: lost on restart; for tests.
    InMemory,
}

/// Tiered-storage settings of a broker with `remote.log.storage.system.enable=true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSettings {
    /// Root of the filesystem tier (`krabka.remote.log.storage.dir`, default
    /// `<log.dir>/krabka-remote-tier`).
    pub storage_dir: PathBuf,
    /// `krabka.remote.log.metadata.manager`.
    pub metadata_manager: MetadataManagerChoice,
    /// `remote.log.metadata.topic.num.partitions`.
    pub metadata_partitions: i32,
    /// `remote.log.manager.task.interval.ms`.
    pub task_interval: Duration,
    /// `remote.log.manager.task.retry.backoff.ms`: first back-off after a
    /// failure of the remote tier.
    pub retry_backoff: Duration,
    /// `remote.log.manager.task.retry.backoff.max.ms`: longest back-off.
    pub retry_backoff_max: Duration,
    /// `remote.log.index.file.cache.total.size.bytes`.
    pub index_cache_bytes: u64,
    /// `remote.log.reader.threads`.
    pub reader_threads: usize,
    /// `remote.log.reader.max.pending.tasks`.
    pub reader_max_pending: usize,
    /// `remote.fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
}

/// The directory name of the default filesystem tier under the log dir.
pub const DEFAULT_TIER_DIR: &str = "krabka-remote-tier";

impl RemoteSettings {
    /// The settings, or `None` when `remote.log.storage.system.enable` is false.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] if a value does not parse (the table in
    /// `config::defs` has already checked types and ranges).
    pub fn from_config(config: &BrokerConfig) -> Result<Option<Self>, BrokerError> {
        let text = |name: &str| config.static_value(name).0.unwrap_or_default();
        if !text("remote.log.storage.system.enable")
            .trim()
            .eq_ignore_ascii_case("true")
        {
            return Ok(None);
        }
        let number = |name: &str| -> Result<u64, BrokerError> {
            text(name).trim().parse().map_err(|_| {
                BrokerError::Config(format!("setting {name} must be a positive number"))
            })
        };
        let dir = text("krabka.remote.log.storage.dir");
        let storage_dir = if dir.trim().is_empty() {
            config.log_dir.join(DEFAULT_TIER_DIR)
        } else {
            PathBuf::from(dir.trim())
        };
        let metadata_manager = if text("krabka.remote.log.metadata.manager")
            .trim()
            .eq_ignore_ascii_case("in-memory")
        {
            MetadataManagerChoice::InMemory
        } else {
            MetadataManagerChoice::Topic
        };
        Ok(Some(Self {
            storage_dir,
            metadata_manager,
            metadata_partitions: i32::try_from(number("remote.log.metadata.topic.num.partitions")?)
                .map_err(|_| {
                    BrokerError::Config(
                        "remote.log.metadata.topic.num.partitions out of range".into(),
                    )
                })?,
            task_interval: Duration::from_millis(
                number("remote.log.manager.task.interval.ms")?.max(1),
            ),
            retry_backoff: Duration::from_millis(
                number("remote.log.manager.task.retry.backoff.ms")?.max(1),
            ),
            retry_backoff_max: Duration::from_millis(
                number("remote.log.manager.task.retry.backoff.max.ms")?.max(1),
            ),
            index_cache_bytes: number("remote.log.index.file.cache.total.size.bytes")?,
            reader_threads: usize::try_from(number("remote.log.reader.threads")?.max(1))
                .unwrap_or(1),
            reader_max_pending: usize::try_from(
                number("remote.log.reader.max.pending.tasks")?.max(1),
            )
            .unwrap_or(1),
            fetch_max_wait: Duration::from_millis(number("remote.fetch.max.wait.ms")?),
        }))
    }
}

/// Whether `remote.log.storage.system.enable` is true.
#[must_use]
pub fn system_enabled(config: &BrokerConfig) -> bool {
    config
        .static_value("remote.log.storage.system.enable")
        .0
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Kafka's cross-setting checks for a tiered topic, given its effective
/// values: `remote.storage.enable` needs the broker's system enabled and a
/// `delete`-only cleanup policy, and local retention may not exceed total
/// retention.
///
/// # Errors
///
/// Kafka's reason text.
pub fn validate_topic(
    system_enabled: bool,
    effective: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let flag = |name: &str| effective(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let long = |name: &str| {
        effective(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(-1)
    };
    if !flag("remote.storage.enable") {
        return Ok(());
    }
    if !system_enabled {
        return Err("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into());
    }
    if effective("cleanup.policy").is_some_and(|v| {
        v.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("compact"))
    }) {
        return Err("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.".into());
    }
    for (local, total) in [
        ("local.retention.ms", "retention.ms"),
        ("local.retention.bytes", "retention.bytes"),
    ] {
        let (l, t) = (long(local), long(total));
        if l == -2 || t == -1 {
            continue;
        }
        if l == -1 {
            return Err(format!(
                "Value must not be -1 as {total} value is set as {t}."
            ));
        }
        if l > t {
            return Err(format!(
                "Value must not be more than {total} property value: {t}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::collections::HashMap};

    fn check_with(system: bool, pairs: &[(&str, &str)]) -> Result<(), String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        validate_topic(system, &|name| map.get(name).cloned())
    }

    #[test]
    fn kafka_topic_validation() {
        check!(check_with(false, &[("remote.storage.enable", "false")]).is_ok());
        check!(check_with(false, &[("remote.storage.enable", "true")]).is_err());
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("cleanup.policy", "delete")
                ]
            )
            .is_ok()
        );
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("cleanup.policy", "compact,delete")
                ]
            )
            .is_err()
        );
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("retention.bytes", "1000"),
                    ("local.retention.bytes", "2000")
                ]
            )
            .is_err()
        );
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("retention.bytes", "1000"),
                    ("local.retention.bytes", "-1")
                ]
            )
            .is_err()
        );
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("retention.bytes", "-1"),
                    ("local.retention.bytes", "2000")
                ]
            )
            .is_ok()
        );
        check!(
            check_with(
                true,
                &[
                    ("remote.storage.enable", "true"),
                    ("retention.ms", "1000"),
                    ("local.retention.ms", "-2")
                ]
            )
            .is_ok()
        );
    }
}
