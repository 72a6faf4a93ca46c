//! Small text files in the partition directory, each written atomically
//! (temp file, fsync, rename) so a crash leaves either the old or the new one.
//!
//! Kafka's files: `partition.metadata` (`version: 0` / `topic_id: <id>`) and
//! `leader-epoch-checkpoint` (see [`crate::leader_epoch`]). Kafka keeps the
//! log start offset, recovery point and cleaner offset in per-log-dir
//! checkpoint files shared by all partitions; a Krabka partition directory is
//! self-contained instead and keeps each in its own file
//! ([`LOG_START_OFFSET_FILE`], [`RECOVERY_POINT_FILE`], [`CLEANER_OFFSET_FILE`],
//! [`LOG_START_FLOOR_FILE`]),
//! in the same text shape as Kafka's checkpoints: a version line `0`, then
//! the offset. Kafka ignores these unknown files when loading the directory.

use {
    crate::LogError,
    std::{fs, path::Path},
    uuid::Uuid,
};

/// Kafka's partition metadata file (topic id).
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// Log start offset (Kafka: `log-start-offset-checkpoint`, per log dir).
pub const LOG_START_OFFSET_FILE: &str = "krabka-log-start-offset";
/// Recovery point (Kafka: `recovery-point-offset-checkpoint`, per log dir).
pub const RECOVERY_POINT_FILE: &str = "krabka-recovery-point";
/// Cleaner first dirty offset (Kafka: `cleaner-offset-checkpoint`, per log dir).
pub const CLEANER_OFFSET_FILE: &str = "krabka-cleaner-offset";
/// The partition's log start when it lies below the local one: a tiered
/// log's DeleteRecords floor (Kafka: the `UnifiedLog` log start offset in
/// `log-start-offset-checkpoint`). See [`crate::Log::log_start_floor`].
pub const LOG_START_FLOOR_FILE: &str = "krabka-log-start-floor";
/// Where brokers before the log owned the floor kept it; taken over (and
/// removed) when the log opens.
pub const LEGACY_REMOTE_LOG_START_FILE: &str = "remote-log-start-offset";
/// Present after a clean shutdown (Kafka: `.kafka_cleanshutdown`, per log dir).
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// Writes `contents` to `path` atomically and durably (through
/// [`krabka_ids::durable::write_atomic`], the workspace's one helper).
///
/// # Errors
///
/// [`LogError::Io`] on any file error.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    krabka_ids::durable::write_atomic(path, contents).map_err(|e| LogError::Io {
        path: e.path,
        source: e.source,
    })
}

/// Reads a file, `None` if it does not exist.
///
/// # Errors
///
/// [`LogError::Io`] on any other file error.
pub fn read_optional(path: &Path) -> Result<Option<String>, LogError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> LogError {
    LogError::CorruptFile {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Writes an offset file (`0\n<offset>\n`).
///
/// # Errors
///
/// [`LogError::Io`] on any file error.
pub fn write_offset(path: &Path, offset: i64) -> Result<(), LogError> {
    write_atomic(path, format!("0\n{offset}\n").as_bytes())
}

/// Reads an offset file written by [`write_offset`]; `None` if absent.
///
/// # Errors
///
/// [`LogError::CorruptFile`] if it is not in that shape.
pub fn read_offset(path: &Path) -> Result<Option<i64>, LogError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err(corrupt(path, "expected version line 0"));
    }
    let offset = lines
        .next()
        .and_then(|l| l.trim().parse::<i64>().ok())
        .ok_or_else(|| corrupt(path, "expected an offset line"))?;
    Ok(Some(offset))
}

/// Kafka's `partition.metadata` text for a topic id.
#[must_use]
pub fn partition_metadata_text(topic_id: Uuid) -> String {
    format!(
        "version: 0\ntopic_id: {}\n",
        krabka_ids::kafka_uuid(topic_id)
    )
}

/// Parses Kafka's `partition.metadata`.
///
/// # Errors
///
/// [`LogError::CorruptFile`] unless it is version 0 with a valid topic id.
pub fn parse_partition_metadata(path: &Path, text: &str) -> Result<Uuid, LogError> {
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "version" => version = Some(value.trim().to_owned()),
            "topic_id" => {
                topic_id = Some(
                    krabka_ids::decode_kafka_uuid(value.trim())
                        .map_err(|e| corrupt(path, e.to_string()))?,
                );
            }
            _ => {}
        }
    }
    if version.as_deref() != Some("0") {
        return Err(corrupt(path, "expected version: 0"));
    }
    topic_id.ok_or_else(|| corrupt(path, "missing topic_id"))
}

/// A 20-digit zero-padded offset, as in Kafka's segment file names.
#[must_use]
pub fn file_stem(offset: i64) -> String {
    format!("{offset:020}")
}

/// The offset in a file name like `00000000000000000042.log`.
#[must_use]
pub fn offset_from_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn partition_metadata_round_trip() {
        let id = Uuid::from_u128(0xCA);
        let text = partition_metadata_text(id);
        check!(text == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAyg\n");
        check!(parse_partition_metadata(Path::new("x"), &text).unwrap() == id);
        check!(
            parse_partition_metadata(
                Path::new("x"),
                "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAyg\n"
            )
            .is_err()
        );
    }

    #[test]
    fn file_names() {
        check!(file_stem(42) == "00000000000000000042");
        check!(offset_from_file_name("00000000000000000042.log", ".log") == Some(42));
        check!(offset_from_file_name("42.log", ".log").is_none());
        check!(offset_from_file_name("00000000000000000042.index", ".log").is_none());
    }
}
