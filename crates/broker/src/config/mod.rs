//! Broker configuration: Kafka's property names and defaults, read from a
//! `server.properties`-style file, `KRABKA_*` environment variables and
//! command-line overrides (later sources win, in that order).
//!
//! Every value is validated once, at startup, against the table in [`defs`];
//! an unknown name or a bad value stops the broker with a message naming it,
//! because a silently ignored typo in a retention setting loses data.

mod connections;
pub mod defs;
mod listener;
pub mod reference;

use {
    crate::error::BrokerError,
    std::{collections::BTreeMap, net::SocketAddr, path::PathBuf},
};

pub use {
    connections::ConnectionSettings,
    listener::{Listener, ListenerSpec, SecurityProtocol},
};

/// Where a setting's value came from (Kafka's `ConfigSource` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// A per-topic override (`DYNAMIC_TOPIC_CONFIG`, 1).
    DynamicTopic,
    /// Set at runtime for this broker (`DYNAMIC_BROKER_CONFIG`, 2).
    DynamicBroker,
    /// Set at runtime as the cluster-wide default (`DYNAMIC_DEFAULT_BROKER_CONFIG`, 3).
    DynamicDefaultBroker,
    /// From the properties file, environment or command line (`STATIC_BROKER_CONFIG`, 4).
    StaticBroker,
    /// Kafka's built-in default (`DEFAULT_CONFIG`, 5).
    Default,
    /// A per-group config (`GROUP_CONFIG`, 8).
    Group,
}

impl ConfigSource {
    /// Kafka's wire code for this source.
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            Self::DynamicTopic => 1,
            Self::DynamicBroker => 2,
            Self::DynamicDefaultBroker => 3,
            Self::StaticBroker => 4,
            Self::Default => 5,
            Self::Group => 8,
        }
    }
}

/// The raw settings as given, before interpretation: name → value, with the
/// origin of each for error messages.
#[derive(Debug, Clone, Default)]
pub struct RawSettings {
    values: BTreeMap<String, (String, String)>,
}

impl RawSettings {
    /// Sets `name` to `value`, remembering `origin` (e.g. `"server.properties:12"`).
    pub fn set(&mut self, name: &str, value: &str, origin: &str) {
        self.values.insert(
            name.trim().to_owned(),
            (value.trim().to_owned(), origin.to_owned()),
        );
    }

    /// Parses `server.properties` text: `name=value` or `name: value` lines,
    /// `#` / `!` comments, blank lines ignored.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] naming the line that is not a property.
    pub fn parse_properties(&mut self, text: &str, file: &str) -> Result<(), BrokerError> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let split = line.find(['=', ':']).ok_or_else(|| {
                BrokerError::Config(format!(
                    "{file}:{}: expected name=value, got {line:?}",
                    number + 1
                ))
            })?;
            let (name, value) = (&line[..split], &line[split + 1..]);
            self.set(name, value, &format!("{file}:{}", number + 1));
        }
        Ok(())
    }

    /// Parses a `name=value` override from the command line.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] if there is no `=`.
    pub fn parse_override(&mut self, text: &str) -> Result<(), BrokerError> {
        let (name, value) = text.split_once('=').ok_or_else(|| {
            BrokerError::Config(format!("override {text:?}: expected name=value"))
        })?;
        self.set(name, value, "command line");
        Ok(())
    }

    /// Reads `KRABKA_<NAME>` environment variables: the name is lower-cased and
    /// `_` becomes `.` (`KRABKA_LOG_DIRS` → `log.dirs`). Variables that do not
    /// name a known setting are left alone: the environment is shared with
    /// other Krabka tools (`KRABKA_BIN`, `KRABKA_VENV`, ...).
    pub fn read_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        for (key, value) in vars {
            let Some(rest) = key.strip_prefix("KRABKA_") else {
                continue;
            };
            let name = rest.to_ascii_lowercase().replace('_', ".");
            // The storage manager's settings under Kafka's default prefix
            // (`KRABKA_RSM_CONFIG_S3_BUCKET` → `rsm.config.s3.bucket`).
            let storage_manager = name
                .strip_prefix(crate::remote::backend::DEFAULT_IMPL_PREFIX)
                .is_some_and(|rest| crate::remote::backend::rsm_setting(rest).is_some());
            if defs::broker_setting(&name).is_some() || storage_manager {
                self.set(&name, &value, &format!("environment {key}"));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|(v, _)| v.as_str())
    }
}

/// The validated broker configuration.
#[derive(Clone)]
pub struct BrokerConfig {
    /// `node.id` (or `broker.id`).
    pub node_id: i32,
    /// Where the inter-broker listener binds (the one listener of a default
    /// configuration).
    pub listener: Listener,
    /// What the inter-broker listener advertises: the address the broker's
    /// own clients use.
    pub advertised_listener: Listener,
    /// Every listener (`listeners`, `advertised.listeners`,
    /// `listener.security.protocol.map`), in the order given.
    pub listeners: Vec<ListenerSpec>,
    /// The single log directory.
    pub log_dir: PathBuf,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `socket.request.max.bytes`.
    pub socket_request_max_bytes: usize,
    /// `krabka.legacy.protocol.enable`: also serve the request versions
    /// Kafka 4 removed (KIP-896), see [`crate::network::legacy`].
    pub legacy_protocol: bool,
    /// `krabka.decompressed.batch.max.bytes`: the most bytes a produced
    /// batch's compressed records may inflate to (see
    /// [`krabka_log::compression`]).
    pub decompressed_batch_max_bytes: usize,
    /// `krabka.transaction.version`: the `transaction.version` feature
    /// level announced in ApiVersions.
    pub transaction_version: i16,
    /// The connection and request budgets (`max.connections`, ...).
    pub connections: ConnectionSettings,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// `log.cleaner.enable`.
    pub cleaner_enable: bool,
    /// `log.cleaner.dedupe.buffer.size`.
    pub cleaner_dedupe_buffer_size: u64,
    /// `log.cleaner.backoff.ms`.
    pub cleaner_backoff_ms: u64,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_listener: Option<SocketAddr>,
    /// Every setting that was given explicitly (file, environment, command line).
    pub explicit: BTreeMap<String, String>,
}

impl BrokerConfig {
    /// Validates `raw` and builds the configuration.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] naming the first unknown setting, invalid value
    /// or inconsistent combination.
    pub fn from_raw(raw: &RawSettings) -> Result<Self, BrokerError> {
        // The remote storage manager's own settings (Kafka's
        // `remote.log.storage.manager.impl.prefix` convention) have their own table.
        let rsm_prefix = crate::remote::backend::impl_prefix(
            raw.get(crate::remote::backend::IMPL_PREFIX_SETTING),
        );
        for (name, (value, origin)) in &raw.values {
            if name.starts_with(&rsm_prefix) && defs::broker_setting(name).is_none() {
                crate::remote::backend::validate_rsm(&rsm_prefix, name, value)
                    .map_err(|reason| BrokerError::Config(format!("{reason} ({origin})")))?;
                continue;
            }
            // The diskless store's settings take the same names under their own prefix.
            if name.starts_with(crate::diskless::STORAGE_CONFIG_PREFIX) {
                crate::remote::backend::validate_rsm(
                    crate::diskless::STORAGE_CONFIG_PREFIX,
                    name,
                    value,
                )
                .map_err(|reason| BrokerError::Config(format!("{reason} ({origin})")))?;
                continue;
            }
            let setting = defs::broker_setting(name)
                .ok_or_else(|| BrokerError::Config(format!("unknown setting {name} ({origin})")))?;
            setting.kind.validate(value).map_err(|reason| {
                BrokerError::Config(format!(
                    "invalid value {value:?} for setting {name} ({origin}): {reason}"
                ))
            })?;
            if name == "compression.type" && !value.eq_ignore_ascii_case("producer") {
                return Err(BrokerError::Config(format!(
                    "invalid value {value:?} for setting compression.type ({origin}): only 'producer' is supported"
                )));
            }
        }
        check_group_settings(raw)?;
        let value = |name: &str| -> String {
            raw.get(name)
                .map(str::to_owned)
                .or_else(|| defs::broker_setting(name).and_then(|s| s.default.map(str::to_owned)))
                .unwrap_or_default()
        };
        let int = |name: &str| -> Result<i64, BrokerError> {
            value(name)
                .parse()
                .map_err(|_| BrokerError::Config(format!("setting {name} must be a number")))
        };
        let node_id = match raw.get("broker.id") {
            Some(id) if raw.get("node.id").is_some_and(|n| n != id) => {
                return Err(BrokerError::Config(format!(
                    "broker.id {id} and node.id {} differ",
                    value("node.id")
                )));
            }
            Some(id) => id
                .parse()
                .map_err(|_| BrokerError::Config("broker.id".into()))?,
            None => i32::try_from(int("node.id")?)
                .map_err(|_| BrokerError::Config("node.id out of range".into()))?,
        };
        let (listeners, inter_broker) = listener::resolve(
            &value("listeners"),
            raw.get("advertised.listeners"),
            &value("listener.security.protocol.map"),
            raw.get("inter.broker.listener.name"),
            &value("security.inter.broker.protocol"),
        )
        .map_err(|reason| {
            BrokerError::Config(format!("invalid value for setting listeners: {reason}"))
        })?;
        for name in raw.values.keys() {
            if let Some((scoped, _)) = defs::listener_scoped(name)
                && !listeners
                    .iter()
                    .any(|l| l.name.eq_ignore_ascii_case(scoped))
            {
                return Err(BrokerError::Config(format!(
                    "setting {name}: {scoped} is not one of listeners"
                )));
            }
        }
        let listener = listeners[inter_broker].bind.clone();
        let advertised_listener = listeners[inter_broker].advertised.clone();
        let dirs = raw
            .get("log.dirs")
            .map(str::to_owned)
            .unwrap_or_else(|| value("log.dir"));
        let dirs: Vec<&str> = dirs
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .collect();
        let log_dir = match dirs.as_slice() {
            [one] => PathBuf::from(one),
            [] => return Err(BrokerError::Config("log.dirs is empty".into())),
            _ => {
                return Err(BrokerError::Config(
                    "log.dirs: krabka supports exactly one log directory".into(),
                ));
            }
        };
        let metrics_text = value("krabka.metrics.listener");
        let metrics_listener = if metrics_text.is_empty() {
            None
        } else {
            Some(metrics_text.parse().map_err(|_| {
                BrokerError::Config(format!(
                    "invalid value {metrics_text:?} for setting krabka.metrics.listener: expected host:port"
                ))
            })?)
        };
        let to_u64 = |name: &str| -> Result<u64, BrokerError> {
            u64::try_from(int(name)?)
                .map_err(|_| BrokerError::Config(format!("setting {name} must not be negative")))
        };
        let socket_request_max_bytes = usize::try_from(int("socket.request.max.bytes")?)
            .map_err(|_| BrokerError::Config("socket.request.max.bytes".into()))?;
        let connections = ConnectionSettings::from_values(value, socket_request_max_bytes)?;
        let config = Self {
            node_id,
            listener,
            advertised_listener,
            listeners,
            log_dir,
            num_partitions: i32::try_from(int("num.partitions")?)
                .map_err(|_| BrokerError::Config("num.partitions out of range".into()))?,
            auto_create_topics: value("auto.create.topics.enable").eq_ignore_ascii_case("true"),
            delete_topic_enable: value("delete.topic.enable").eq_ignore_ascii_case("true"),
            socket_request_max_bytes,
            legacy_protocol: value("krabka.legacy.protocol.enable").eq_ignore_ascii_case("true"),
            decompressed_batch_max_bytes: usize::try_from(int(
                "krabka.decompressed.batch.max.bytes",
            )?)
            .map_err(|_| {
                BrokerError::Config("krabka.decompressed.batch.max.bytes out of range".into())
            })?,
            transaction_version: i16::try_from(int("krabka.transaction.version")?).map_err(
                |_| BrokerError::Config("krabka.transaction.version out of range".into()),
            )?,
            connections,
            retention_check_interval_ms: to_u64("log.retention.check.interval.ms")?,
            cleaner_enable: value("log.cleaner.enable").eq_ignore_ascii_case("true"),
            cleaner_dedupe_buffer_size: to_u64("log.cleaner.dedupe.buffer.size")?,
            cleaner_backoff_ms: to_u64("log.cleaner.backoff.ms")?,
            metrics_listener,
            explicit: raw
                .values
                .iter()
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect(),
        };
        if crate::remote::settings::system_enabled(&config) {
            // Combinations of the storage manager's settings, checked before
            // anything starts (the directory is not needed for that).
            crate::remote::backend::StorageSettings::from_config(&config, PathBuf::new())?;
        }
        Ok(config)
    }

    /// `remote.log.storage.manager.impl.prefix` in force.
    #[must_use]
    pub fn rsm_prefix(&self) -> String {
        crate::remote::backend::impl_prefix(
            self.explicit
                .get(crate::remote::backend::IMPL_PREFIX_SETTING)
                .map(String::as_str),
        )
    }

    /// The static (startup) value of a broker setting that supplies a topic
    /// default, resolving Kafka's fallbacks (`log.retention.ms` ←
    /// `log.retention.minutes` ← `log.retention.hours`, `log.roll.ms` ←
    /// `log.roll.hours`). Returns the value and whether it was set explicitly.
    #[must_use]
    pub fn static_value(&self, name: &str) -> (Option<String>, ConfigSource) {
        if let Some(v) = self.explicit.get(name) {
            return (Some(v.clone()), ConfigSource::StaticBroker);
        }
        let scaled = |key: &str, factor: i64| -> Option<String> {
            let v: i64 = self.explicit.get(key)?.parse().ok()?;
            Some(if v < 0 {
                v.to_string()
            } else {
                v.saturating_mul(factor).to_string()
            })
        };
        match name {
            "log.retention.ms" => {
                if let Some(v) = scaled("log.retention.minutes", 60_000)
                    .or_else(|| scaled("log.retention.hours", 3_600_000))
                {
                    return (Some(v), ConfigSource::StaticBroker);
                }
                (Some("604800000".into()), ConfigSource::Default)
            }
            "log.roll.ms" => {
                if let Some(v) = scaled("log.roll.hours", 3_600_000) {
                    return (Some(v), ConfigSource::StaticBroker);
                }
                (Some("604800000".into()), ConfigSource::Default)
            }
            "log.flush.interval.ms" => (Some(i64::MAX.to_string()), ConfigSource::Default),
            _ => (
                defs::broker_setting(name).and_then(|s| s.default.map(str::to_owned)),
                ConfigSource::Default,
            ),
        }
    }
}

/// Secrets stay out of logs: settings Kafka types as PASSWORD, and the
/// storage manager's credentials, print as `[hidden]`.
impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefix = self.rsm_prefix();
        let explicit: BTreeMap<&str, &str> = self
            .explicit
            .iter()
            .map(|(k, v)| {
                let shown = if defs::is_sensitive(k, &prefix) {
                    "[hidden]"
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("BrokerConfig")
            .field("node_id", &self.node_id)
            .field("listeners", &self.listeners)
            .field("log_dir", &self.log_dir)
            .field("explicit", &explicit)
            .finish_non_exhaustive()
    }
}

/// Kafka's consistency checks across the group coordinator's settings
/// (each is valid alone, but not every combination is).
fn check_group_settings(raw: &RawSettings) -> Result<(), BrokerError> {
    let int = |name: &str| -> i64 {
        raw.get(name)
            .or_else(|| defs::broker_setting(name).and_then(|s| s.default))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_default()
    };
    if int("group.min.session.timeout.ms") > int("group.max.session.timeout.ms") {
        return Err(BrokerError::Config(
            "group.min.session.timeout.ms must not be greater than group.max.session.timeout.ms"
                .into(),
        ));
    }
    if int("group.consumer.heartbeat.interval.ms") >= int("group.consumer.session.timeout.ms") {
        return Err(BrokerError::Config(
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
                .into(),
        ));
    }
    if raw
        .get("group.consumer.assignors")
        .is_some_and(|list| list.split(',').all(|a| a.trim().is_empty()))
    {
        return Err(BrokerError::Config(
            "group.consumer.assignors must name at least one assignor".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn build(pairs: &[(&str, &str)]) -> Result<BrokerConfig, BrokerError> {
        let mut raw = RawSettings::default();
        for (k, v) in pairs {
            raw.set(k, v, "test");
        }
        BrokerConfig::from_raw(&raw)
    }

    #[test]
    fn defaults_are_kafka_defaults_on_localhost() {
        let config = build(&[]).unwrap();
        check!(config.node_id == 1);
        check!(config.listener.port == 9092);
        check!(config.listener.host == "127.0.0.1");
        check!(config.log_dir == PathBuf::from("./krabka-data"));
        check!(config.socket_request_max_bytes == 104_857_600);
        check!(config.num_partitions == 1);
        check!(config.static_value("log.retention.ms").0.as_deref() == Some("604800000"));
        check!(
            config.decompressed_batch_max_bytes
                == krabka_log::compression::DEFAULT_DECOMPRESSED_BATCH_MAX_BYTES
        );
        // The bound is a setting, checked against its range.
        let small = build(&[("krabka.decompressed.batch.max.bytes", "2097152")]).unwrap();
        check!(small.decompressed_batch_max_bytes == 2 << 20);
        let err = build(&[("krabka.decompressed.batch.max.bytes", "1024")])
            .unwrap_err()
            .to_string();
        check!(err.contains("krabka.decompressed.batch.max.bytes"));
    }

    #[test]
    fn unknown_and_invalid_settings_are_named() {
        let err = build(&[("log.retentoin.ms", "1")]).unwrap_err().to_string();
        check!(err.contains("log.retentoin.ms"));
        let err = build(&[("num.partitions", "zero")])
            .unwrap_err()
            .to_string();
        check!(err.contains("num.partitions"));
        let err = build(&[("listeners", "FOO://x:1")])
            .unwrap_err()
            .to_string();
        check!(err.contains("listeners"));
        let err = build(&[("listener.name.ssl.ssl.keystore.location", "/k")])
            .unwrap_err()
            .to_string();
        check!(err.contains("not one of listeners"));
    }

    #[test]
    fn secrets_are_hidden_from_debug_output() {
        let config = build(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
            ),
            ("listener.name.sasl_ssl.ssl.key.password", "hunter2"),
            (
                "listener.name.sasl_ssl.plain.sasl.jaas.config",
                "x required user_a=\"hunter3\";",
            ),
        ])
        .unwrap();
        let text = format!("{config:?}");
        check!(!text.contains("hunter"));
        check!(text.contains("[hidden]"));
        check!(config.listeners.len() == 2);
        check!(config.listener.port == 9092);
    }

    #[test]
    fn group_settings_are_validated() {
        let config = build(&[
            ("group.initial.rebalance.delay.ms", "0"),
            ("offsets.retention.minutes", "1"),
            ("group.consumer.assignors", "range,uniform"),
        ])
        .unwrap();
        check!(config.explicit["group.initial.rebalance.delay.ms"] == "0");
        for (name, value) in [
            ("group.initial.rebalance.delay.ms", "-1"),
            ("group.max.size", "0"),
            ("offsets.topic.num.partitions", "0"),
            ("offsets.retention.minutes", "soon"),
            ("offsets.retention.check.interval.ms", "0"),
            ("offset.metadata.max.bytes", "99999999999"),
            ("group.consumer.assignors", "sticky"),
            ("group.consumer.assignors", ","),
            ("group.consumer.session.timeout.ms", "0"),
        ] {
            let err = build(&[(name, value)]).unwrap_err().to_string();
            check!(err.contains(name), "{name}={value}: {err}");
        }
        let err = build(&[
            ("group.min.session.timeout.ms", "60000"),
            ("group.max.session.timeout.ms", "10000"),
        ])
        .unwrap_err()
        .to_string();
        check!(err.contains("group.min.session.timeout.ms"));
        let err = build(&[("group.consumer.heartbeat.interval.ms", "45000")])
            .unwrap_err()
            .to_string();
        check!(err.contains("group.consumer.heartbeat.interval.ms"));
    }

    #[test]
    fn properties_env_and_overrides() {
        let mut raw = RawSettings::default();
        raw.parse_properties("# comment\nnum.partitions=3\nlog.dirs : /tmp/x\n", "f")
            .unwrap();
        raw.read_env([
            ("KRABKA_NUM_PARTITIONS".to_owned(), "4".to_owned()),
            ("KRABKA_BIN".to_owned(), "/bin/krabka".to_owned()),
        ]);
        raw.parse_override("log.retention.hours=1").unwrap();
        let config = BrokerConfig::from_raw(&raw).unwrap();
        check!(config.num_partitions == 4);
        check!(config.log_dir == PathBuf::from("/tmp/x"));
        check!(config.static_value("log.retention.ms").0.as_deref() == Some("3600000"));
        check!(raw.parse_properties("just words", "f").is_err());
    }
}
