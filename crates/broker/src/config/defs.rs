//! The table of settings Krabka understands, in Kafka's names and with Kafka's
//! defaults and ranges.
//!
//! One table serves three users: startup parsing (unknown names are refused),
//! `DescribeConfigs` (names, types, defaults, documentation) and the
//! `AlterConfigs` family (validation of new values). Keeping them in one place
//! means a setting cannot be accepted by one path and refused by another.

/// The type of a setting, as Kafka's `ConfigDef.Type` (the numbers are the
/// `config_type` codes of `DescribeConfigs` v3+).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConfigKind {
    /// `true` / `false`.
    Boolean,
    /// Free text.
    Text,
    /// A secret (Kafka's `PASSWORD`): never described, never logged.
    Password,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A 32-bit integer within `[min, max]`.
    Int { min: i64, max: i64 },
    /// A 64-bit integer within `[min, max]`.
    Long { min: i64, max: i64 },
    /// A floating point number within `[min, max]`.
    Double { min: f64, max: f64 },
    /// A comma-separated list; when `choices` is not empty every element must
    /// be one of them.
    List { choices: &'static [&'static str] },
}

impl ConfigKind {
    /// Kafka's `DescribeConfigs` type code.
    #[must_use]
    pub fn type_code(self) -> i8 {
        match self {
            Self::Boolean => 1,
            Self::Text | Self::Choice(_) => 2,
            Self::Int { .. } => 3,
            Self::Long { .. } => 5,
            Self::Double { .. } => 6,
            Self::List { .. } => 7,
            Self::Password => 9,
        }
    }

    /// Checks `value` against this type, returning Kafka-style reason text.
    ///
    /// # Errors
    ///
    /// A human-readable reason when the value does not parse or is out of range.
    pub fn validate(self, value: &str) -> Result<(), String> {
        let value = value.trim();
        match self {
            Self::Boolean => match value.to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err("Expected value to be either true or false".to_owned()),
            },
            Self::Text | Self::Password => Ok(()),
            Self::Choice(choices) => {
                if choices.iter().any(|c| c.eq_ignore_ascii_case(value)) {
                    Ok(())
                } else {
                    Err(format!("String must be one of: {}", choices.join(", ")))
                }
            }
            Self::Int { min, max } | Self::Long { min, max } => {
                let parsed: i64 = value
                    .parse()
                    .map_err(|_| "Not a number of type INT/LONG".to_owned())?;
                if matches!(self, Self::Int { .. }) && i32::try_from(parsed).is_err() {
                    return Err("Not a number of type INT".to_owned());
                }
                if parsed < min || parsed > max {
                    return Err(range_text(min, max));
                }
                Ok(())
            }
            Self::Double { min, max } => {
                let parsed: f64 = value
                    .parse()
                    .map_err(|_| "Not a number of type DOUBLE".to_owned())?;
                if !(min..=max).contains(&parsed) {
                    return Err(format!("Value must be in [{min},...,{max}]"));
                }
                Ok(())
            }
            Self::List { choices } => {
                if choices.is_empty() {
                    return Ok(());
                }
                for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if !choices.iter().any(|c| c.eq_ignore_ascii_case(item)) {
                        return Err(format!(
                            "Invalid value {item}: must be one of [{}]",
                            choices.join(", ")
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

fn range_text(min: i64, max: i64) -> String {
    match (min, max) {
        (i64::MIN, _) => format!("Value must be no more than {max}"),
        (_, i64::MAX) | (_, 2_147_483_647) => format!("Value must be at least {min}"),
        _ => format!("Value must be in [{min},...,{max}]"),
    }
}

const LONG_MAX: i64 = i64::MAX;
const INT_MAX: i64 = i32::MAX as i64;

/// One broker setting.
#[derive(Debug, Clone, Copy)]
pub struct BrokerSetting {
    /// Kafka's property name.
    pub name: &'static str,
    /// Kafka's default (as text), `None` where Kafka's default is null.
    pub default: Option<&'static str>,
    /// Value type and range.
    pub kind: ConfigKind,
    /// Whether `AlterConfigs` on a broker resource may change it at runtime
    /// (the per-topic defaults Kafka also lets operators change dynamically).
    pub dynamic: bool,
    /// One line of documentation.
    pub doc: &'static str,
}

const fn broker(
    name: &'static str,
    default: Option<&'static str>,
    kind: ConfigKind,
    dynamic: bool,
    doc: &'static str,
) -> BrokerSetting {
    BrokerSetting {
        name,
        default,
        kind,
        dynamic,
        doc,
    }
}

/// Every broker setting Krabka accepts.
pub const BROKER_SETTINGS: &[BrokerSetting] = &[
    broker(
        "node.id",
        Some("1"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "The node id of this server.",
    ),
    broker(
        "broker.id",
        None,
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "Alias of node.id.",
    ),
    broker(
        "listeners",
        Some("PLAINTEXT://127.0.0.1:9092"),
        ConfigKind::Text,
        false,
        "Listeners to bind, NAME://host:port,... (the name gives the security protocol).",
    ),
    broker(
        "advertised.listeners",
        None,
        ConfigKind::Text,
        false,
        "Listeners given to clients in metadata, NAME://host:port,...; defaults to listeners.",
    ),
    broker(
        "log.dirs",
        None,
        ConfigKind::Text,
        false,
        "The directory in which the log data is kept.",
    ),
    broker(
        "log.dir",
        Some("./krabka-data"),
        ConfigKind::Text,
        false,
        "The directory in which the log data is kept (used if log.dirs is unset).",
    ),
    broker(
        "num.partitions",
        Some("1"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The default number of partitions per topic.",
    ),
    broker(
        "default.replication.factor",
        Some("1"),
        ConfigKind::Int { min: 1, max: 1 },
        false,
        "Replication factor of automatically created topics.",
    ),
    broker(
        "auto.create.topics.enable",
        Some("true"),
        ConfigKind::Boolean,
        false,
        "Enable auto creation of topics on the server.",
    ),
    broker(
        "delete.topic.enable",
        Some("true"),
        ConfigKind::Boolean,
        false,
        "Enables delete topic.",
    ),
    broker(
        "socket.request.max.bytes",
        Some("104857600"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The maximum number of bytes in a socket request.",
    ),
    broker(
        "socket.send.buffer.bytes",
        Some("102400"),
        ConfigKind::Int {
            min: -1,
            max: INT_MAX,
        },
        false,
        "The SO_SNDBUF buffer of each client connection; -1 keeps the OS default (and its autotuning).",
    ),
    broker(
        "socket.receive.buffer.bytes",
        Some("-1"),
        ConfigKind::Int {
            min: -1,
            max: INT_MAX,
        },
        false,
        "The SO_RCVBUF buffer of each client connection; -1 keeps the OS default and its autotuning (Krabka's default; Kafka's is 102400, which cut produce throughput by about 40% in this repository's benchmarks).",
    ),
    // Connection and request budgets (`config::connections`).
    broker(
        "queued.max.request.bytes",
        Some("268435456"),
        ConfigKind::Long {
            min: -1,
            max: LONG_MAX,
        },
        false,
        "Request bytes read but not yet answered, across all connections, before no more are read; -1 is unbounded (Kafka's default; Krabka's is 256 MiB so a crowd of slow clients cannot fill memory). At least socket.request.max.bytes.",
    ),
    broker(
        "max.connections",
        Some("2147483647"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "Connections the broker holds at once; one over the limit is closed at accept.",
    ),
    broker(
        "max.connections.per.ip",
        Some("2147483647"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "Connections allowed from one IP address; one over the limit is closed at accept.",
    ),
    broker(
        "max.connections.per.ip.overrides",
        Some(""),
        ConfigKind::Text,
        false,
        "Per-IP or hostname limits that replace max.connections.per.ip, e.g. hostName:100,127.0.0.1:200.",
    ),
    broker(
        "connections.max.idle.ms",
        Some("600000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "A connection with no request in flight and no bytes received for this long is closed.",
    ),
    broker(
        "krabka.request.read.timeout.ms",
        Some("30000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How far a request that has started to arrive may fall behind krabka.request.read.min.bytes.per.sec before it is dropped (so also the longest it may stall).",
    ),
    broker(
        "krabka.request.read.min.bytes.per.sec",
        Some("65536"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "The slowest rate at which a request's bytes may arrive, after krabka.request.read.timeout.ms of grace.",
    ),
    broker(
        "fetch.max.bytes",
        Some("57671680"),
        ConfigKind::Int {
            min: 1024,
            max: INT_MAX,
        },
        false,
        "The maximum number of bytes returned for a fetch request (at least one batch is returned).",
    ),
    broker(
        "krabka.fetch.memory.max.bytes",
        Some("268435456"),
        ConfigKind::Long {
            min: 1_048_576,
            max: 4_294_967_295,
        },
        false,
        "Memory all fetch responses being read, built or sent may hold at once; a fetch waits for its share.",
    ),
    broker(
        "krabka.decompressed.batch.max.bytes",
        Some("67108864"),
        ConfigKind::Int {
            min: krabka_log::compression::MIN_DECOMPRESSED_BATCH_MAX_BYTES as i64,
            max: krabka_log::compression::MAX_DECOMPRESSED_BATCH_MAX_BYTES as i64,
        },
        false,
        "The most bytes one produced batch's compressed records may inflate to when the broker opens them (any codec, message formats v0-v2); a batch past it is refused with MESSAGE_TOO_LARGE before that memory is taken.",
    ),
    broker(
        "krabka.legacy.protocol.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Also serve the request versions Kafka 3.9 served and Kafka 4 removed (KIP-896: Produce v0-2, Fetch v0-3, ...), converting message formats v0/v1; off as in Kafka 4.",
    ),
    broker(
        "max.incremental.fetch.session.cache.slots",
        Some("1000"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "The maximum number of incremental fetch sessions the broker keeps.",
    ),
    broker(
        "message.max.bytes",
        Some("1048588"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        true,
        "The largest record batch size allowed.",
    ),
    broker(
        "compression.type",
        Some("producer"),
        ConfigKind::Choice(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        true,
        "Compression type for a topic.",
    ),
    broker(
        "min.insync.replicas",
        Some("1"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        true,
        "Minimum in-sync replicas for acks=all.",
    ),
    broker(
        "log.segment.bytes",
        Some("1073741824"),
        ConfigKind::Int {
            min: 14,
            max: INT_MAX,
        },
        true,
        "The maximum size of a single log file.",
    ),
    broker(
        "log.roll.ms",
        None,
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        true,
        "Time after which a new log segment is rolled out (ms).",
    ),
    broker(
        "log.roll.hours",
        Some("168"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Time after which a new log segment is rolled out (hours).",
    ),
    broker(
        "log.retention.ms",
        None,
        ConfigKind::Long {
            min: -1,
            max: LONG_MAX,
        },
        true,
        "Time to keep a log file before deleting it (ms).",
    ),
    broker(
        "log.retention.minutes",
        None,
        ConfigKind::Int {
            min: -1,
            max: INT_MAX,
        },
        false,
        "Time to keep a log file before deleting it (minutes).",
    ),
    broker(
        "log.retention.hours",
        Some("168"),
        ConfigKind::Int {
            min: -1,
            max: INT_MAX,
        },
        false,
        "Time to keep a log file before deleting it (hours).",
    ),
    broker(
        "log.retention.bytes",
        Some("-1"),
        ConfigKind::Long {
            min: -1,
            max: LONG_MAX,
        },
        true,
        "The maximum size of the log before deleting it.",
    ),
    broker(
        "log.retention.check.interval.ms",
        Some("300000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How often the log cleaner checks for deletable logs.",
    ),
    broker(
        "log.cleanup.policy",
        Some("delete"),
        ConfigKind::List {
            choices: &["delete", "compact"],
        },
        true,
        "The default cleanup policy for segments.",
    ),
    broker(
        "log.cleaner.enable",
        Some("true"),
        ConfigKind::Boolean,
        false,
        "Enable the log cleaner process.",
    ),
    broker(
        "log.cleaner.dedupe.buffer.size",
        Some("134217728"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        false,
        "Memory used for log deduplication.",
    ),
    broker(
        "log.cleaner.backoff.ms",
        Some("15000"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        false,
        "Sleep when there are no logs to clean.",
    ),
    broker(
        "log.cleaner.delete.retention.ms",
        Some("86400000"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "How long delete markers are retained.",
    ),
    broker(
        "log.cleaner.min.compaction.lag.ms",
        Some("0"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "Minimum time a message remains uncompacted.",
    ),
    broker(
        "log.cleaner.min.cleanable.ratio",
        Some("0.5"),
        ConfigKind::Double { min: 0.0, max: 1.0 },
        true,
        "Minimum dirty ratio for a log to be cleaned.",
    ),
    broker(
        "log.index.interval.bytes",
        Some("4096"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        true,
        "Interval at which an offset index entry is added.",
    ),
    broker(
        "log.index.size.max.bytes",
        Some("10485760"),
        ConfigKind::Int {
            min: 4,
            max: INT_MAX,
        },
        true,
        "The maximum size of the offset index.",
    ),
    broker(
        "log.segment.delete.delay.ms",
        Some("60000"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "Time to wait before deleting a file.",
    ),
    broker(
        "log.flush.interval.messages",
        Some("9223372036854775807"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        true,
        "Messages accumulated before a flush.",
    ),
    broker(
        "log.flush.interval.ms",
        None,
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "Maximum time a message stays in memory before a flush.",
    ),
    broker(
        "log.preallocate",
        Some("false"),
        ConfigKind::Boolean,
        true,
        "Preallocate segment files.",
    ),
    broker(
        "log.message.timestamp.type",
        Some("CreateTime"),
        ConfigKind::Choice(&["CreateTime", "LogAppendTime"]),
        true,
        "Timestamp type of messages.",
    ),
    // Partition budgets (Kafka has none: KIP-578 was never adopted).
    broker(
        "krabka.max.partitions",
        Some("4000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Most partitions this broker hosts, internal topics included; CreateTopics and CreatePartitions beyond it are refused (POLICY_VIOLATION) before any file is created. Kafka's guidance is at most 4000 per broker.",
    ),
    broker(
        "krabka.max.partitions.per.request",
        Some("1000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Most partitions one CreateTopics or CreatePartitions request may add, all its topics together (POLICY_VIOLATION beyond).",
    ),
    broker(
        "log.message.timestamp.before.max.ms",
        Some("9223372036854775807"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "How far in the past a CreateTime record's timestamp may be.",
    ),
    broker(
        "log.message.timestamp.after.max.ms",
        Some("3600000"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "How far in the future a CreateTime record's timestamp may be.",
    ),
    broker(
        "log.cleaner.max.compaction.lag.ms",
        Some("9223372036854775807"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        true,
        "The longest a record stays uncompacted in a compacted log.",
    ),
    broker(
        "log.message.downconversion.enable",
        Some("true"),
        ConfigKind::Boolean,
        true,
        "Whether fetches of old versions get batches down-converted (with krabka.legacy.protocol.enable).",
    ),
    broker(
        "log.roll.jitter.ms",
        Some("0"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        true,
        "Random jitter subtracted from the segment roll time; only 0 is supported.",
    ),
    broker(
        "compression.gzip.level",
        Some("-1"),
        ConfigKind::Int { min: -1, max: 9 },
        true,
        "The gzip level when the broker compresses; only the codec's default is supported.",
    ),
    broker(
        "compression.lz4.level",
        Some("9"),
        ConfigKind::Int { min: 1, max: 17 },
        true,
        "The lz4 level when the broker compresses; only the codec's default is supported.",
    ),
    broker(
        "compression.zstd.level",
        Some("3"),
        ConfigKind::Int {
            min: -131_072,
            max: 22,
        },
        true,
        "The zstd level when the broker compresses; only the codec's default is supported.",
    ),
    broker(
        "unclean.leader.election.enable",
        Some("false"),
        ConfigKind::Boolean,
        true,
        "Whether an out-of-sync replica may become leader; one node is always its own in-sync leader.",
    ),
    broker(
        "leader.replication.throttled.replicas",
        Some(""),
        ConfigKind::List { choices: &[] },
        true,
        "Replicas whose leader-side replication is throttled; one node replicates nothing.",
    ),
    broker(
        "follower.replication.throttled.replicas",
        Some(""),
        ConfigKind::List { choices: &[] },
        true,
        "Replicas whose follower-side replication is throttled; one node replicates nothing.",
    ),
    broker(
        "remote.log.storage.system.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Whether tiered storage (KIP-405) is enabled on this broker.",
    ),
    broker(
        "krabka.remote.log.storage.dir",
        Some(""),
        ConfigKind::Text,
        false,
        "Directory of the filesystem remote tier; empty means <log.dir>/krabka-remote-tier.",
    ),
    broker(
        "krabka.remote.log.storage.manager",
        Some("filesystem"),
        ConfigKind::Choice(&["filesystem", "s3", "gcs"]),
        false,
        "Remote storage manager: filesystem (krabka.remote.log.storage.dir), s3 or gcs (settings under remote.log.storage.manager.impl.prefix).",
    ),
    broker(
        "remote.log.storage.manager.impl.prefix",
        Some("rsm.config."),
        ConfigKind::Text,
        false,
        "Prefix of the remote storage manager's own settings.",
    ),
    broker(
        "krabka.remote.log.metadata.manager",
        Some("topic"),
        ConfigKind::Choice(&["topic", "in-memory"]),
        false,
        "Remote log metadata manager: topic-based (__remote_log_metadata) or in-memory (tests only).",
    ),
    broker(
        "remote.log.metadata.topic.num.partitions",
        Some("50"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Partitions of the __remote_log_metadata topic.",
    ),
    broker(
        "remote.log.manager.task.interval.ms",
        Some("30000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "Interval of the remote log manager's copy and retention tasks.",
    ),
    broker(
        "remote.log.manager.task.retry.backoff.ms",
        Some("500"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "First back-off of a partition's copy task after the remote tier failed; doubles per failure.",
    ),
    broker(
        "remote.log.manager.task.retry.backoff.max.ms",
        Some("30000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "Longest back-off of a partition's copy task after repeated failures.",
    ),
    broker(
        "remote.log.index.file.cache.total.size.bytes",
        Some("1073741824"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "Total size bound of the remote index file cache.",
    ),
    broker(
        "remote.log.reader.threads",
        Some("10"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Threads of the remote log reader pool.",
    ),
    broker(
        "remote.log.reader.max.pending.tasks",
        Some("100"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Remote reads that may wait for a reader thread; a fetch past that gets a retriable error.",
    ),
    broker(
        "remote.fetch.max.wait.ms",
        Some("500"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Longest a fetch of remote data waits for it.",
    ),
    broker(
        "log.local.retention.ms",
        Some("-2"),
        ConfigKind::Long {
            min: -2,
            max: LONG_MAX,
        },
        true,
        "Local retention of tiered topics; -2 means log.retention.ms.",
    ),
    broker(
        "log.local.retention.bytes",
        Some("-2"),
        ConfigKind::Long {
            min: -2,
            max: LONG_MAX,
        },
        true,
        "Local retention bytes of tiered topics; -2 means log.retention.bytes.",
    ),
    broker(
        "krabka.log.remote.storage.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Default of the topic setting remote.storage.enable (Kafka has no broker default: false).",
    ),
    broker(
        "krabka.log.diskless.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Default of the topic setting diskless.enable (create-only; KIP-1150).",
    ),
    broker(
        "krabka.diskless.storage",
        Some("filesystem"),
        ConfigKind::Choice(&["filesystem", "s3", "gcs"]),
        false,
        "Object store of diskless topics: filesystem (krabka.diskless.storage.dir), s3 or gcs (settings under krabka.diskless.storage.config., named as after rsm.config.).",
    ),
    broker(
        "krabka.diskless.storage.dir",
        Some(""),
        ConfigKind::Text,
        false,
        "Directory of the filesystem diskless store; empty means <log.dir>/krabka-diskless. Brokers on one machine may share one.",
    ),
    broker(
        "krabka.diskless.coordinator.dir",
        Some(""),
        ConfigKind::Text,
        false,
        "Directory of the embedded batch coordinator of a single node (journal and snapshot); empty means <log.dir>/krabka-diskless-coordinator.",
    ),
    broker(
        "diskless.object.max.bytes",
        Some("8388608"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "A diskless object closes (and is uploaded and committed) once its batches reach this size.",
    ),
    broker(
        "diskless.commit.interval.ms",
        Some("250"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "A diskless object closes this long after its first batch; producers wait up to this long for their acknowledgement.",
    ),
    broker(
        "diskless.upload.parallelism",
        Some("8"),
        ConfigKind::Int { min: 1, max: 1024 },
        false,
        "Diskless objects uploading at once (they still commit in order).",
    ),
    broker(
        "diskless.fetch.cache.bytes",
        Some("268435456"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        false,
        "Memory caching diskless object bytes: three quarters for objects this broker wrote, a quarter for ranges read back.",
    ),
    broker(
        "diskless.cleaner.grace.period.ms",
        Some("60000"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        false,
        "A diskless object with no live batch is deleted from the store once it has been dead this long (fetches that found it may still read it).",
    ),
    broker(
        "diskless.cleaner.interval.ms",
        Some("30000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How often diskless retention is applied and dead objects are deleted.",
    ),
    broker(
        "diskless.cleaner.orphan.interval.ms",
        Some("3600000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How often a broker lists the diskless store for orphans: objects of this cluster, older than this interval, that the batch coordinator has no record of (their uploader died between upload and commit). Each is recorded as dead and deleted after the grace period.",
    ),
    broker(
        "diskless.consolidation.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Consolidates the cold data of diskless partitions into ordinary tiered segments in the remote tier (remote.log.storage.system.enable=true is required): once a partition holds segment.bytes of batches, or its oldest batch is segment.ms old, the broker Metadata names its leader copies them into one segment and the batch coordinator forgets them, so lagging readers read segment files and the coordinator stays small. Retention, DeleteRecords and topic deletion apply to the segments too.",
    ),
    broker(
        "krabka.log.remote.log.copy.disable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Default of the topic setting remote.log.copy.disable.",
    ),
    broker(
        "krabka.log.remote.log.delete.on.disable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Default of the topic setting remote.log.delete.on.disable.",
    ),
    broker(
        "krabka.metrics.listener",
        Some("127.0.0.1:9464"),
        ConfigKind::Text,
        false,
        "host:port of the HTTP endpoint serving /metrics (Prometheus), /healthz and /readyz; empty disables it.",
    ),
    broker(
        "krabka.log.format",
        Some("text"),
        ConfigKind::Choice(&["text", "json"]),
        false,
        "Format of the broker's log: text for people, json (one object per line) for log collectors.",
    ),
    // Cluster mode (several brokers sharing their state in PostgreSQL).
    broker(
        "broker.rack",
        None,
        ConfigKind::Text,
        false,
        "Rack of the broker; cluster mode spreads partitions across racks.",
    ),
    broker(
        "krabka.cluster.database.url",
        None,
        ConfigKind::Text,
        false,
        "postgresql:// URL of the cluster database; unset runs a single node on local disk.",
    ),
    broker(
        "krabka.cluster.database.pool.size",
        Some("8"),
        ConfigKind::Int { min: 1, max: 1024 },
        false,
        "Most connections to the cluster database.",
    ),
    broker(
        "krabka.cluster.database.connect.timeout.ms",
        Some("5000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How long to wait for a connection to the cluster database.",
    ),
    broker(
        "krabka.cluster.database.tls.enable",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Connect to the cluster database over TLS (rustls).",
    ),
    broker(
        "krabka.cluster.database.tls.ca.file",
        None,
        ConfigKind::Text,
        false,
        "PEM file of the CAs that sign the database's certificate; default: the platform's roots.",
    ),
    broker(
        "krabka.cluster.lease.duration.ms",
        Some("10000"),
        ConfigKind::Int {
            min: 100,
            max: INT_MAX,
        },
        false,
        "How long a broker's or coordinator shard's lease lasts, by the database's clock.",
    ),
    broker(
        "krabka.cluster.lease.renew.interval.ms",
        Some("2000"),
        ConfigKind::Int {
            min: 10,
            max: INT_MAX,
        },
        false,
        "How often a broker renews its leases.",
    ),
    broker(
        "krabka.cluster.lease.safety.margin.ms",
        Some("1000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How much earlier than the database a broker stops trusting a lease.",
    ),
    // Listeners and security (Kafka's `SocketServerConfigs`,
    // `BrokerSecurityConfigs`, `SslConfigs`, `SaslConfigs`). The ssl.* and
    // sasl.* settings may also be given per listener as
    // `listener.name.<listener>.<setting>`, and the JAAS config and server
    // callback handler per mechanism as
    // `listener.name.<listener>.<mechanism>.sasl.jaas.config`.
    broker(
        "listener.security.protocol.map",
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        ConfigKind::Text,
        false,
        "Listener name to security protocol, NAME:PROTOCOL,...",
    ),
    broker(
        "inter.broker.listener.name",
        None,
        ConfigKind::Text,
        false,
        "The listener the broker's own clients use; default the one of security.inter.broker.protocol.",
    ),
    broker(
        "security.inter.broker.protocol",
        Some("PLAINTEXT"),
        ConfigKind::Choice(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
        false,
        "Security protocol of the broker's own clients when inter.broker.listener.name is unset.",
    ),
    broker(
        "sasl.mechanism.inter.broker.protocol",
        None,
        ConfigKind::Choice(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
        false,
        "SASL mechanism of the broker's own connections to other brokers (default: the inter-broker listener's one enabled mechanism; Kafka's GSSAPI is not supported).",
    ),
    broker(
        "ssl.keystore.type",
        None,
        ConfigKind::Choice(&["PEM", "PKCS12"]),
        true,
        "PEM or PKCS12; default PEM when ssl.keystore.key is set or the file is PEM, else PKCS12.",
    ),
    broker(
        "ssl.keystore.location",
        None,
        ConfigKind::Text,
        true,
        "The keystore file: PKCS#12, or PEM with the key and certificate chain.",
    ),
    broker(
        "ssl.keystore.password",
        None,
        ConfigKind::Password,
        true,
        "The password of a PKCS#12 keystore.",
    ),
    broker(
        "ssl.key.password",
        None,
        ConfigKind::Password,
        true,
        "The password of an encrypted private key (PEM PKCS#8, or within a PKCS#12 keystore).",
    ),
    broker(
        "ssl.keystore.certificate.chain",
        None,
        ConfigKind::Password,
        true,
        "The certificate chain in PEM, inline (KIP-651).",
    ),
    broker(
        "ssl.keystore.key",
        None,
        ConfigKind::Password,
        true,
        "The private key in PEM (PKCS#8, encrypted with ssl.key.password or not), inline (KIP-651).",
    ),
    broker(
        "ssl.truststore.type",
        None,
        ConfigKind::Choice(&["PEM", "PKCS12"]),
        true,
        "PEM or PKCS12; default PEM when the file is PEM, else PKCS12.",
    ),
    broker(
        "ssl.truststore.location",
        None,
        ConfigKind::Text,
        true,
        "The certificates that client certificates must chain to.",
    ),
    broker(
        "ssl.truststore.password",
        None,
        ConfigKind::Password,
        true,
        "The password of a PKCS#12 truststore.",
    ),
    broker(
        "ssl.truststore.certificates",
        None,
        ConfigKind::Password,
        true,
        "Trusted certificates in PEM, inline (KIP-651).",
    ),
    broker(
        "ssl.client.auth",
        Some("none"),
        ConfigKind::Choice(&["none", "requested", "required"]),
        true,
        "Whether clients present certificates: none, requested or required.",
    ),
    broker(
        "ssl.enabled.protocols",
        Some("TLSv1.2,TLSv1.3"),
        ConfigKind::List {
            choices: &["TLSv1.2", "TLSv1.3"],
        },
        true,
        "The TLS versions accepted.",
    ),
    broker(
        "ssl.protocol",
        Some("TLSv1.3"),
        ConfigKind::Choice(&["TLSv1.2", "TLSv1.3", "TLS"]),
        false,
        "Kafka's SSLContext protocol; the versions accepted are ssl.enabled.protocols.",
    ),
    broker(
        "ssl.endpoint.identification.algorithm",
        Some("https"),
        ConfigKind::Text,
        false,
        "Host name verification of the broker's own clients.",
    ),
    broker(
        "ssl.principal.mapping.rules",
        Some("DEFAULT"),
        ConfigKind::Text,
        false,
        "Rules mapping a client certificate's subject to a principal name.",
    ),
    broker(
        "sasl.enabled.mechanisms",
        None,
        ConfigKind::List {
            choices: &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
        },
        false,
        "The SASL mechanisms a SASL listener offers (Kafka's default, GSSAPI, is not supported).",
    ),
    broker(
        "sasl.server.max.receive.size",
        Some("524288"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "Largest frame a client may send on a SASL listener before it has authenticated; a larger one closes the connection.",
    ),
    broker(
        "sasl.jaas.config",
        None,
        ConfigKind::Password,
        false,
        "JAAS login module text (users of PlainLoginModule, options of OAuthBearerLoginModule).",
    ),
    broker(
        "sasl.server.callback.handler.class",
        None,
        ConfigKind::Text,
        false,
        "OAUTHBEARER validator: Kafka's OAuthBearerValidatorCallbackHandler or OAuthBearerUnsecuredValidatorCallbackHandler.",
    ),
    broker(
        "sasl.oauthbearer.jwks.endpoint.url",
        None,
        ConfigKind::Text,
        false,
        "The JSON Web Key Set that OAUTHBEARER tokens are verified against (file: URL).",
    ),
    broker(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        Some("3600000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How often the JWKS file is read again.",
    ),
    broker(
        "sasl.oauthbearer.sub.claim.name",
        Some("sub"),
        ConfigKind::Text,
        false,
        "The token claim that names the principal.",
    ),
    broker(
        "sasl.oauthbearer.scope.claim.name",
        Some("scope"),
        ConfigKind::Text,
        false,
        "The token claim that holds the scope.",
    ),
    broker(
        "sasl.oauthbearer.expected.audience",
        None,
        ConfigKind::List { choices: &[] },
        false,
        "Audiences a token must name one of.",
    ),
    broker(
        "sasl.oauthbearer.expected.issuer",
        None,
        ConfigKind::Text,
        false,
        "The issuer a token must name.",
    ),
    broker(
        "sasl.oauthbearer.clock.skew.seconds",
        Some("30"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "Clock difference tolerated when checking a token's times.",
    ),
    broker(
        "connections.max.reauth.ms",
        Some("0"),
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        false,
        "Longest SASL session before re-authentication (KIP-368); 0 disables.",
    ),
    broker(
        "connection.failed.authentication.delay.ms",
        Some("100"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "How long a failed authentication is delayed before the connection closes.",
    ),
    broker(
        "krabka.sasl.scram.bootstrap.file",
        None,
        ConfigKind::Text,
        false,
        "SCRAM users created at start if missing, one MECHANISM=[name=...,password=...] per line.",
    ),
    broker(
        "authorizer.class.name",
        Some(""),
        ConfigKind::Choice(&[
            "",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "kafka.security.authorizer.AclAuthorizer",
        ]),
        false,
        "Kafka's StandardAuthorizer class name turns on ACL authorization; empty turns it off.",
    ),
    broker(
        "super.users",
        Some(""),
        ConfigKind::Text,
        false,
        "Principals allowed everything, User:a;User:b.",
    ),
    broker(
        "allow.everyone.if.no.acl.found",
        Some("false"),
        ConfigKind::Boolean,
        false,
        "Whether a resource that no ACL names is open to everyone.",
    ),
    // The group coordinator's settings (Kafka's `GroupCoordinatorConfig`).
    broker(
        "group.initial.rebalance.delay.ms",
        Some("3000"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "How long the coordinator waits for more members before the first rebalance of a new group.",
    ),
    broker(
        "group.min.session.timeout.ms",
        Some("6000"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "The smallest session timeout a classic group member may ask for.",
    ),
    broker(
        "group.max.session.timeout.ms",
        Some("1800000"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "The largest session timeout a classic group member may ask for.",
    ),
    broker(
        "group.max.size",
        Some("2147483647"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The maximum number of members of a classic group.",
    ),
    broker(
        "group.consumer.session.timeout.ms",
        Some("45000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The session timeout of consumer-protocol (KIP-848) group members.",
    ),
    broker(
        "group.consumer.heartbeat.interval.ms",
        Some("5000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The heartbeat interval given to consumer-protocol group members.",
    ),
    broker(
        "group.consumer.min.session.timeout.ms",
        Some("45000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The lowest consumer.session.timeout.ms a consumer group may set.",
    ),
    broker(
        "group.consumer.max.session.timeout.ms",
        Some("60000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The highest consumer.session.timeout.ms a consumer group may set.",
    ),
    broker(
        "group.consumer.min.heartbeat.interval.ms",
        Some("5000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The lowest consumer.heartbeat.interval.ms a consumer group may set.",
    ),
    broker(
        "group.consumer.max.heartbeat.interval.ms",
        Some("15000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The highest consumer.heartbeat.interval.ms a consumer group may set.",
    ),
    broker(
        "group.consumer.assignors",
        Some("uniform,range"),
        ConfigKind::List {
            choices: &["uniform", "range"],
        },
        false,
        "The server-side assignors of consumer-protocol groups; the first is the default.",
    ),
    broker(
        "offsets.topic.num.partitions",
        Some("50"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The number of partitions of __consumer_offsets (fixed once the topic exists).",
    ),
    broker(
        "offsets.retention.minutes",
        Some("10080"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How long committed offsets of an empty group are kept.",
    ),
    broker(
        "offsets.retention.check.interval.ms",
        Some("600000"),
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        false,
        "How often the coordinator looks for expired offsets.",
    ),
    broker(
        "offset.metadata.max.bytes",
        Some("4096"),
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        false,
        "The largest metadata string allowed with an offset commit.",
    ),
    // The transaction coordinator's settings (Kafka's
    // `TransactionStateManagerConfig` and `TransactionLogConfig`).
    broker(
        "transaction.max.timeout.ms",
        Some("900000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The largest transaction.timeout.ms a transactional producer may ask for.",
    ),
    broker(
        "transactional.id.expiration.ms",
        Some("604800000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How long a transactional id without an open transaction is kept after its last update.",
    ),
    broker(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Some("10000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How often transactions open past their timeout are aborted.",
    ),
    broker(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Some("3600000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How often expired transactional ids are removed.",
    ),
    broker(
        "transaction.state.log.num.partitions",
        Some("50"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The number of partitions of __transaction_state (fixed once the topic exists).",
    ),
    broker(
        "transaction.state.log.segment.bytes",
        Some("104857600"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "The segment size of __transaction_state.",
    ),
    broker(
        "transaction.partition.verification.enable",
        Some("true"),
        ConfigKind::Boolean,
        false,
        "Refuse transactional records for a partition not added to the open transaction.",
    ),
    broker(
        "krabka.transaction.version",
        Some("2"),
        ConfigKind::Int { min: 0, max: 2 },
        false,
        "The transaction.version feature level the broker finalizes in ApiVersions (what kafka-features sets on Kafka): 2 lets Kafka 4 clients use transactions v2 (KIP-890: an epoch bump per transaction, partitions added by Produce and TxnOffsetCommit); 0 or 1 keep them on v1.",
    ),
    broker(
        "producer.id.expiration.ms",
        Some("86400000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How long a partition keeps the state of a producer idle without an open transaction (measured from its last batch's timestamp; a diskless partition's in the batch coordinator).",
    ),
    broker(
        "producer.id.expiration.check.interval.ms",
        Some("600000"),
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        false,
        "How often partitions drop the state of expired producer ids.",
    ),
];

/// Looks up a broker setting by name. A listener-scoped name
/// (`listener.name.<listener>.ssl.keystore.location`,
/// `listener.name.<listener>.<mechanism>.sasl.jaas.config`) finds the
/// setting it scopes.
#[must_use]
pub fn broker_setting(name: &str) -> Option<&'static BrokerSetting> {
    if let Some((_, base)) = listener_scoped(name) {
        return BROKER_SETTINGS.iter().find(|s| s.name == base);
    }
    BROKER_SETTINGS.iter().find(|s| s.name == name)
}

/// The SASL mechanisms of per-mechanism settings, as their prefixes.
const MECHANISM_PREFIXES: &[&str] = &["plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer."];

/// Splits `listener.name.<listener>.<setting>` into the listener name (as
/// written, lower case by Kafka's convention) and the setting it scopes:
/// one of the ssl.* and sasl.* settings, `connections.max.reauth.ms`, or a
/// per-mechanism `sasl.jaas.config`, `sasl.server.callback.handler.class`
/// or `connections.max.reauth.ms` (`<mechanism>.` stripped).
#[must_use]
pub fn listener_scoped(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("listener.name.")?;
    let (listener, setting) = rest.split_once('.')?;
    let base = MECHANISM_PREFIXES
        .iter()
        .find_map(|m| setting.strip_prefix(m))
        .filter(|b| {
            [
                "sasl.jaas.config",
                "sasl.server.callback.handler.class",
                "connections.max.reauth.ms",
            ]
            .contains(b)
        })
        .unwrap_or(setting);
    let scoped = (base.starts_with("ssl.")
        || base.starts_with("sasl.")
        || base == "connections.max.reauth.ms")
        && BROKER_SETTINGS.iter().any(|s| s.name == base);
    (!listener.is_empty() && scoped).then_some((listener, base))
}

/// Whether the value of a setting must never be shown or logged: Kafka's
/// PASSWORD settings (also per listener), and the remote storage manager's
/// credentials and WORM signing key file (`rsm_prefix` is
/// `remote.log.storage.manager.impl.prefix` in force).
#[must_use]
pub fn is_sensitive(name: &str, rsm_prefix: &str) -> bool {
    if broker_setting(name).is_some_and(|s| s.kind == ConfigKind::Password) {
        return true;
    }
    name.strip_prefix(rsm_prefix).is_some_and(|rest| {
        [
            "s3.access.key.id",
            "s3.secret.access.key",
            "s3.session.token",
            "gcs.service.account.path",
            "gcs.service.account.json",
            "worm.signing.key.file",
        ]
        .contains(&rest)
    })
}

/// One topic-level setting, with the broker setting that supplies its default.
#[derive(Debug, Clone, Copy)]
pub struct TopicSetting {
    /// Kafka's topic config name.
    pub name: &'static str,
    /// The broker setting whose value is this topic setting's default.
    pub broker_synonym: &'static str,
    /// Value type and range.
    pub kind: ConfigKind,
    /// One line of documentation.
    pub doc: &'static str,
}

const fn topic(
    name: &'static str,
    broker_synonym: &'static str,
    kind: ConfigKind,
    doc: &'static str,
) -> TopicSetting {
    TopicSetting {
        name,
        broker_synonym,
        kind,
        doc,
    }
}

/// Every topic setting Krabka accepts.
pub const TOPIC_SETTINGS: &[TopicSetting] = &[
    topic(
        "cleanup.policy",
        "log.cleanup.policy",
        ConfigKind::List {
            choices: &["delete", "compact"],
        },
        "Retention policy: delete, compact or both.",
    ),
    topic(
        "compression.type",
        "compression.type",
        ConfigKind::Choice(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "Final compression type for the topic.",
    ),
    topic(
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "How long delete tombstones are retained.",
    ),
    topic(
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "Time to wait before deleting a file.",
    ),
    topic(
        "flush.messages",
        "log.flush.interval.messages",
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        "Messages accumulated before a forced fsync.",
    ),
    topic(
        "flush.ms",
        "log.flush.interval.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "Time before a forced fsync.",
    ),
    topic(
        "index.interval.bytes",
        "log.index.interval.bytes",
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        "Bytes between offset index entries.",
    ),
    topic(
        "max.message.bytes",
        "message.max.bytes",
        ConfigKind::Int {
            min: 0,
            max: INT_MAX,
        },
        "Largest record batch size allowed.",
    ),
    topic(
        "message.timestamp.type",
        "log.message.timestamp.type",
        ConfigKind::Choice(&["CreateTime", "LogAppendTime"]),
        "CreateTime or LogAppendTime.",
    ),
    topic(
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        ConfigKind::Double { min: 0.0, max: 1.0 },
        "Dirty ratio that triggers compaction.",
    ),
    topic(
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "Minimum time a message remains uncompacted.",
    ),
    topic(
        "min.insync.replicas",
        "min.insync.replicas",
        ConfigKind::Int {
            min: 1,
            max: INT_MAX,
        },
        "Minimum in-sync replicas for acks=all.",
    ),
    topic(
        "preallocate",
        "log.preallocate",
        ConfigKind::Boolean,
        "Preallocate segment files.",
    ),
    topic(
        "retention.bytes",
        "log.retention.bytes",
        ConfigKind::Long {
            min: -1,
            max: LONG_MAX,
        },
        "Maximum partition size before old segments are deleted.",
    ),
    topic(
        "retention.ms",
        "log.retention.ms",
        ConfigKind::Long {
            min: -1,
            max: LONG_MAX,
        },
        "Maximum age of a segment before it is deleted.",
    ),
    topic(
        "segment.bytes",
        "log.segment.bytes",
        ConfigKind::Int {
            min: 14,
            max: INT_MAX,
        },
        "Segment file size.",
    ),
    topic(
        "segment.index.bytes",
        "log.index.size.max.bytes",
        ConfigKind::Int {
            min: 4,
            max: INT_MAX,
        },
        "Size of the offset index.",
    ),
    topic(
        "segment.ms",
        "log.roll.ms",
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        "Time after which a segment is rolled.",
    ),
    topic(
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        ConfigKind::Long {
            min: 1,
            max: LONG_MAX,
        },
        "Maximum time a message remains uncompacted.",
    ),
    topic(
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "How far in the past a CreateTime record's timestamp may be.",
    ),
    topic(
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "How far in the future a CreateTime record's timestamp may be.",
    ),
    topic(
        "message.downconversion.enable",
        "log.message.downconversion.enable",
        ConfigKind::Boolean,
        "Whether fetches of old versions get batches down-converted.",
    ),
    topic(
        "segment.jitter.ms",
        "log.roll.jitter.ms",
        ConfigKind::Long {
            min: 0,
            max: LONG_MAX,
        },
        "Random jitter subtracted from the segment roll time; only 0 is supported.",
    ),
    topic(
        "compression.gzip.level",
        "compression.gzip.level",
        ConfigKind::Int { min: -1, max: 9 },
        "The gzip level when the broker compresses; only the default is supported.",
    ),
    topic(
        "compression.lz4.level",
        "compression.lz4.level",
        ConfigKind::Int { min: 1, max: 17 },
        "The lz4 level when the broker compresses; only the default is supported.",
    ),
    topic(
        "compression.zstd.level",
        "compression.zstd.level",
        ConfigKind::Int {
            min: -131_072,
            max: 22,
        },
        "The zstd level when the broker compresses; only the default is supported.",
    ),
    topic(
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        ConfigKind::Boolean,
        "Accepted and reported; a single node is always its own in-sync leader.",
    ),
    topic(
        "leader.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        ConfigKind::List { choices: &[] },
        "Accepted and reported; a single node replicates nothing.",
    ),
    topic(
        "follower.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        ConfigKind::List { choices: &[] },
        "Accepted and reported; a single node replicates nothing.",
    ),
    topic(
        "remote.storage.enable",
        "krabka.log.remote.storage.enable",
        ConfigKind::Boolean,
        "Whether closed segments of this topic move to the remote tier.",
    ),
    topic(
        "diskless.enable",
        "krabka.log.diskless.enable",
        ConfigKind::Boolean,
        "Create-only: keep this topic's batches in object storage, ordered by the batch coordinator (KIP-1150), with no local log.",
    ),
    topic(
        "local.retention.ms",
        "log.local.retention.ms",
        ConfigKind::Long {
            min: -2,
            max: LONG_MAX,
        },
        "Local retention of a tiered topic; -2 means retention.ms.",
    ),
    topic(
        "local.retention.bytes",
        "log.local.retention.bytes",
        ConfigKind::Long {
            min: -2,
            max: LONG_MAX,
        },
        "Local retention bytes of a tiered topic; -2 means retention.bytes.",
    ),
    topic(
        "remote.log.copy.disable",
        "krabka.log.remote.log.copy.disable",
        ConfigKind::Boolean,
        "Stop copying segments to the remote tier (KIP-950).",
    ),
    topic(
        "remote.log.delete.on.disable",
        "krabka.log.remote.log.delete.on.disable",
        ConfigKind::Boolean,
        "Delete remote data when remote.storage.enable is turned off (KIP-950).",
    ),
];

/// Looks up a topic setting by name.
#[must_use]
pub fn topic_setting(name: &str) -> Option<&'static TopicSetting> {
    TOPIC_SETTINGS.iter().find(|s| s.name == name)
}

/// Validates a topic setting value, including the rules that go beyond the
/// value's type.
///
/// # Errors
///
/// Kafka-style reason text for an unknown name or an invalid value.
pub fn validate_topic_setting(name: &str, value: &str) -> Result<(), String> {
    let setting =
        topic_setting(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    setting
        .kind
        .validate(value)
        .map_err(|reason| format!("Invalid value {value} for configuration {name}: {reason}"))?;
    check_supported_value(name, value)
}

/// The rules of Kafka's own validators beyond a value's type, and the
/// values Krabka refuses (saying why) rather than accept and ignore.
///
/// # Errors
///
/// Kafka-style reason text for a refused value.
pub fn check_supported_value(name: &str, value: &str) -> Result<(), String> {
    let value = value.trim();
    let refuse = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    match name {
        "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas" => {
            // Kafka's ThrottledReplicaListValidator: "*" or partition:broker pairs.
            let pair = |item: &str| {
                item.split_once(':').is_some_and(|(p, b)| {
                    p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                })
            };
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            if value.is_empty() || value == "*" || items.iter().all(|i| pair(i)) {
                Ok(())
            } else {
                refuse(
                    "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                )
            }
        }
        "segment.jitter.ms" | "log.roll.jitter.ms" if value != "0" => {
            refuse("krabka rolls segments at segment.ms exactly; only 0 is supported")
        }
        "compression.gzip.level" if value != "-1" => {
            refuse("krabka compresses at the codec's default level; only -1 is supported")
        }
        "compression.lz4.level" if value != "9" => {
            refuse("krabka compresses at the codec's default level; only 9 is supported")
        }
        "compression.zstd.level" if value != "3" => {
            refuse("krabka compresses at the codec's default level; only 3 is supported")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn every_topic_synonym_is_a_broker_setting() {
        for t in TOPIC_SETTINGS {
            check!(broker_setting(t.broker_synonym).is_some(), "{}", t.name);
        }
    }

    #[test]
    fn listener_scoped_names_find_their_setting() {
        check!(
            listener_scoped("listener.name.sasl_ssl.ssl.keystore.location")
                == Some(("sasl_ssl", "ssl.keystore.location"))
        );
        check!(
            listener_scoped("listener.name.x.scram-sha-256.sasl.jaas.config")
                == Some(("x", "sasl.jaas.config"))
        );
        check!(
            listener_scoped("listener.name.x.plain.connections.max.reauth.ms")
                == Some(("x", "connections.max.reauth.ms"))
        );
        check!(listener_scoped("listener.name.x.num.partitions").is_none());
        check!(listener_scoped("listener.name.x.ssl.nope").is_none());
        check!(
            broker_setting("listener.name.x.ssl.key.password")
                .unwrap()
                .kind
                == ConfigKind::Password
        );
        check!(is_sensitive(
            "listener.name.x.plain.sasl.jaas.config",
            "rsm.config."
        ));
        check!(is_sensitive("ssl.keystore.key", "rsm.config."));
        check!(is_sensitive(
            "rsm.config.s3.secret.access.key",
            "rsm.config."
        ));
        check!(is_sensitive(
            "rsm.config.worm.signing.key.file",
            "rsm.config."
        ));
        check!(!is_sensitive("ssl.keystore.location", "rsm.config."));
        check!(!is_sensitive("rsm.config.s3.bucket", "rsm.config."));
    }

    #[test]
    fn values_are_checked_against_their_type() {
        check!(validate_topic_setting("retention.ms", "1000").is_ok());
        check!(validate_topic_setting("retention.ms", "-2").is_err());
        check!(validate_topic_setting("retention.ms", "soon").is_err());
        check!(validate_topic_setting("cleanup.policy", "compact,delete").is_ok());
        check!(validate_topic_setting("cleanup.policy", "shred").is_err());
        check!(validate_topic_setting("message.timestamp.type", "LogAppendTime").is_ok());
        check!(validate_topic_setting("min.cleanable.dirty.ratio", "1.5").is_err());
        check!(validate_topic_setting("max.message.bytes", "99999999999").is_err());
        check!(validate_topic_setting("no.such.config", "1").is_err());
        check!(validate_topic_setting("compression.type", "gzip").is_ok());
        check!(validate_topic_setting("max.compaction.lag.ms", "0").is_err());
        check!(
            validate_topic_setting("follower.replication.throttled.replicas", "0:1,1:1").is_ok()
        );
        check!(validate_topic_setting("leader.replication.throttled.replicas", "*").is_ok());
        check!(validate_topic_setting("leader.replication.throttled.replicas", "x").is_err());
        check!(validate_topic_setting("segment.jitter.ms", "10").is_err());
        check!(validate_topic_setting("compression.zstd.level", "3").is_ok());
        check!(validate_topic_setting("compression.zstd.level", "9").is_err());
    }
}
