//! Prometheus metrics, named for what a Kafka operator looks for: request
//! rates, errors and latency per API, bytes and records in and out per
//! topic, partition counts and sizes, log flush latency, fetches waiting in
//! purgatory, consumer group lag, and (in [`crate::remote::metrics`]) tiered
//! storage. [`CATALOG`] lists every family with its labels and meaning;
//! `docs/OPERATIONS.md` documents the same list for operators, and a test
//! holds the two together.
//!
//! Series go through the `metrics` facade into the broker's own recorder
//! ([`registry`]), which can forget series: a deleted topic's per-topic
//! series and a vanished group's lag disappear from the scrape. The
//! endpoint ([`endpoint`]) serves `/metrics` beside the `/healthz` and
//! `/readyz` probes on `krabka.metrics.listener`.

pub mod endpoint;
pub mod registry;

use {
    crate::broker::Broker,
    kafka_protocol::messages::{ApiKey, FetchResponse},
    metrics::{counter, gauge, histogram},
    registry::KrabkaRecorder,
    std::{
        collections::{BTreeSet, HashMap},
        sync::{Arc, LazyLock},
        time::Duration,
    },
};

/// The kind of a metric family, as Prometheus types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (a rate with `rate()`).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observations in buckets (percentiles with `histogram_quantile()`).
    Histogram,
}

/// One metric family: its name, kind, labels and meaning.
#[derive(Debug, Clone, Copy)]
pub struct MetricDoc {
    /// The Prometheus name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// Label names.
    pub labels: &'static [&'static str],
    /// What it measures, and its Kafka equivalent.
    pub help: &'static str,
}

const fn doc(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDoc {
    MetricDoc {
        name,
        kind,
        labels,
        help,
    }
}

/// Every metric family the broker exports.
pub const CATALOG: &[MetricDoc] = &[
    doc(
        "krabka_build_info",
        Kind::Gauge,
        &["version"],
        "Always 1; the version label names the running build.",
    ),
    doc(
        "krabka_requests_total",
        Kind::Counter,
        &["api"],
        "Requests answered, per API (Kafka's RequestsPerSec).",
    ),
    doc(
        "krabka_request_errors_total",
        Kind::Counter,
        &["api"],
        "Requests that closed the connection, per API; api=\"undecodable\" counts frames that did not decode.",
    ),
    doc(
        "krabka_request_duration_seconds",
        Kind::Histogram,
        &["api"],
        "Time from reading a request to its answer being ready, per API (Kafka's TotalTimeMs; percentiles with histogram_quantile).",
    ),
    doc(
        "krabka_network_bytes_in_total",
        Kind::Counter,
        &[],
        "Bytes of request frames read from clients.",
    ),
    doc(
        "krabka_bytes_in_total",
        Kind::Counter,
        &["topic"],
        "Record batch bytes appended, per topic (Kafka's BytesInPerSec).",
    ),
    doc(
        "krabka_messages_in_total",
        Kind::Counter,
        &["topic"],
        "Records appended, per topic (Kafka's MessagesInPerSec).",
    ),
    doc(
        "krabka_bytes_out_total",
        Kind::Counter,
        &["topic"],
        "Record batch bytes returned by fetches, per topic (Kafka's BytesOutPerSec).",
    ),
    doc(
        "krabka_fetch_zero_copy_bytes_total",
        Kind::Counter,
        &[],
        "Record bytes of fetch answers sent from the page cache with sendfile (plain connections; local segments).",
    ),
    doc(
        "krabka_fetch_file_chunk_bytes_total",
        Kind::Counter,
        &[],
        "Record bytes of fetch answers read from segment files in chunks and written through TLS (local segments).",
    ),
    doc(
        "krabka_fetch_purgatory_size",
        Kind::Gauge,
        &[],
        "Fetches waiting for data or for their max wait (Kafka's Fetch PurgatorySize).",
    ),
    doc(
        "krabka_log_flush_duration_seconds",
        Kind::Histogram,
        &[],
        "Time of one forced log flush (fsync) by flush.messages / flush.ms or at close (Kafka's LogFlushRateAndTimeMs).",
    ),
    doc(
        "krabka_topics",
        Kind::Gauge,
        &[],
        "Topics on this broker, internal ones included.",
    ),
    doc(
        "krabka_partitions",
        Kind::Gauge,
        &[],
        "Partitions this broker leads (Kafka's PartitionCount and LeaderCount), diskless ones Metadata names it the leader of included.",
    ),
    doc(
        "krabka_partition_log_size_bytes",
        Kind::Gauge,
        &["topic", "partition"],
        "Bytes of the partition's local log (Kafka's Log Size).",
    ),
    doc(
        "krabka_diskless_object_fill_seconds",
        Kind::Histogram,
        &[],
        "From a diskless object's first batch to its close (by diskless.object.max.bytes or diskless.commit.interval.ms).",
    ),
    doc(
        "krabka_diskless_object_upload_seconds",
        Kind::Histogram,
        &[],
        "One diskless object's upload to the store, retries included.",
    ),
    doc(
        "krabka_diskless_object_commit_seconds",
        Kind::Histogram,
        &[],
        "One diskless object's commit by the batch coordinator.",
    ),
    doc(
        "krabka_diskless_object_closed_to_committed_seconds",
        Kind::Histogram,
        &[],
        "From a diskless object's close to its producers being answered: upload, the wait for the objects before it (commits are in order), and the commit.",
    ),
    doc(
        "krabka_diskless_log_size_bytes",
        Kind::Gauge,
        &["topic", "partition"],
        "Bytes of a diskless partition's live batches in object storage, as the batch coordinator counts them; published by the broker Metadata names its leader.",
    ),
    doc(
        "krabka_partition_log_end_offset",
        Kind::Gauge,
        &["topic", "partition"],
        "The partition's high watermark (Kafka's LogEndOffset; one replica, so they are equal).",
    ),
    doc(
        "krabka_partition_log_start_offset",
        Kind::Gauge,
        &["topic", "partition"],
        "The partition's local log start offset (Kafka's LogStartOffset).",
    ),
    doc(
        "krabka_consumer_group_committed_offset",
        Kind::Gauge,
        &["group", "topic", "partition"],
        "A group's committed offset for a partition.",
    ),
    doc(
        "krabka_consumer_group_lag",
        Kind::Gauge,
        &["group", "topic", "partition"],
        "High watermark minus the group's committed offset (what kafka_exporter calls kafka_consumergroup_lag).",
    ),
    doc(
        "krabka_remote_copy_requests_total",
        Kind::Counter,
        &["topic"],
        "Segment copies to the remote tier, failed ones included (RemoteCopyRequestsPerSec).",
    ),
    doc(
        "krabka_remote_copy_bytes_total",
        Kind::Counter,
        &["topic"],
        "Bytes copied to the remote tier (RemoteCopyBytesPerSec).",
    ),
    doc(
        "krabka_remote_copy_errors_total",
        Kind::Counter,
        &["topic"],
        "Failed segment copies (RemoteCopyErrorsPerSec).",
    ),
    doc(
        "krabka_remote_fetch_requests_total",
        Kind::Counter,
        &["topic"],
        "Reads served from the remote tier (RemoteFetchRequestsPerSec).",
    ),
    doc(
        "krabka_remote_fetch_bytes_total",
        Kind::Counter,
        &["topic"],
        "Bytes read from the remote tier (RemoteFetchBytesPerSec).",
    ),
    doc(
        "krabka_remote_fetch_errors_total",
        Kind::Counter,
        &["topic"],
        "Failed remote reads (RemoteFetchErrorsPerSec).",
    ),
    doc(
        "krabka_remote_delete_requests_total",
        Kind::Counter,
        &["topic"],
        "Remote segment deletions (RemoteDeleteRequestsPerSec).",
    ),
    doc(
        "krabka_remote_delete_errors_total",
        Kind::Counter,
        &["topic"],
        "Failed remote segment deletions (RemoteDeleteErrorsPerSec).",
    ),
    doc(
        "krabka_remote_log_size_bytes",
        Kind::Gauge,
        &["topic", "partition"],
        "Bytes of the partition's finished remote segments (RemoteLogSizeBytes).",
    ),
    doc(
        "krabka_remote_log_segments",
        Kind::Gauge,
        &["topic", "partition"],
        "The partition's finished remote segments (RemoteLogMetadataCount).",
    ),
    doc(
        "krabka_remote_copy_lag_bytes",
        Kind::Gauge,
        &["topic", "partition"],
        "Bytes of closed segments eligible for copy and not copied yet (RemoteCopyLagBytes).",
    ),
    doc(
        "krabka_remote_copy_lag_segments",
        Kind::Gauge,
        &["topic", "partition"],
        "Closed segments eligible for copy and not copied yet (RemoteCopyLagSegments).",
    ),
    doc(
        "krabka_remote_log_reader_task_queue_size",
        Kind::Gauge,
        &[],
        "Remote reads waiting for a reader thread (RemoteLogReaderTaskQueueSize).",
    ),
    doc(
        "krabka_remote_log_reader_rejected_total",
        Kind::Counter,
        &[],
        "Remote reads refused because the reader queue was full.",
    ),
    doc(
        "krabka_tls_handshake_failures_total",
        Kind::Counter,
        &["listener"],
        "TLS handshakes that failed or timed out, per listener (Kafka's failed-authentication-total for SSL).",
    ),
    doc(
        "krabka_sasl_authentications_total",
        Kind::Counter,
        &["mechanism", "result"],
        "SASL authentications and re-authentications, result=\"success\" or \"failure\" (Kafka's successful-/failed-authentication-total).",
    ),
    doc(
        "krabka_authorization_denied_total",
        Kind::Counter,
        &["operation", "resource_type"],
        "Authorizer decisions that denied an operation (counted when decided, not per cached reuse).",
    ),
];

/// The process-wide recorder every series goes to.
static RECORDER: LazyLock<KrabkaRecorder> = LazyLock::new(|| {
    let recorder = KrabkaRecorder::new();
    for m in CATALOG {
        recorder.set_help(m.name, m.help);
    }
    recorder
});

/// Installs the broker's recorder as the global `metrics` recorder (once per
/// process; later calls return the same one) and returns it.
pub fn install() -> &'static KrabkaRecorder {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let recorder: &'static KrabkaRecorder = &RECORDER;
    INSTALLED.call_once(|| {
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics will be empty");
        }
        gauge!("krabka_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    });
    recorder
}

/// One request has been answered.
pub fn request_done(api: ApiKey, elapsed: Duration, failed: bool) {
    let name = format!("{api:?}");
    counter!("krabka_requests_total", "api" => name.clone()).increment(1);
    if failed {
        counter!("krabka_request_errors_total", "api" => name.clone()).increment(1);
    }
    histogram!("krabka_request_duration_seconds", "api" => name).record(elapsed.as_secs_f64());
}

/// A frame could not be decoded.
pub fn decode_error() {
    counter!("krabka_request_errors_total", "api" => "undecodable").increment(1);
}

/// Bytes of request frames received.
pub fn request_bytes(n: usize) {
    counter!("krabka_network_bytes_in_total").increment(u64::try_from(n).unwrap_or(u64::MAX));
}

/// Record bytes appended to a topic.
pub fn bytes_in(topic: &str, n: usize) {
    counter!("krabka_bytes_in_total", "topic" => topic.to_owned())
        .increment(u64::try_from(n).unwrap_or(u64::MAX));
}

/// Records appended to a topic.
pub fn messages_in(topic: &str, records: u32) {
    counter!("krabka_messages_in_total", "topic" => topic.to_owned()).increment(u64::from(records));
}

/// Counts the record bytes of a Fetch answer per topic (v13+ names topics
/// by id, resolved through the registry), those left in segment files
/// (`files`) included.
pub fn fetch_answered(
    broker: &Broker,
    response: &FetchResponse,
    files: &[crate::fetch::zero_copy::FileRecords],
) {
    for (i, t) in response.responses.iter().enumerate() {
        let in_files: u64 = files
            .iter()
            .filter(|f| f.topic == i && f.applies_to(response))
            .map(|f| f.slice.len())
            .sum();
        let bytes: usize = t
            .partitions
            .iter()
            .map(|p| p.records.as_ref().map_or(0, bytes::Bytes::len))
            .sum();
        let bytes = u64::try_from(bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(in_files);
        if bytes == 0 {
            continue;
        }
        let name = if t.topic.0.is_empty() {
            match broker.registry.by_id(t.topic_id) {
                Some(meta) => meta.name,
                None => continue,
            }
        } else {
            t.topic.0.to_string()
        };
        counter!("krabka_bytes_out_total", "topic" => name).increment(bytes);
    }
}

/// Record bytes a connection sent with `sendfile`.
pub fn fetch_zero_copy_bytes(bytes: u64) {
    counter!("krabka_fetch_zero_copy_bytes_total").increment(bytes);
}

/// Record bytes a connection that must see them (TLS) read from a segment
/// file and wrote in chunks.
pub fn fetch_file_chunk_bytes(bytes: u64) {
    counter!("krabka_fetch_file_chunk_bytes_total").increment(bytes);
}

/// Counts a fetch parked in purgatory for as long as the guard lives.
#[derive(Debug)]
pub struct ParkedFetch(());

/// Marks a fetch as waiting (see [`ParkedFetch`]).
#[must_use]
pub fn parked_fetch() -> ParkedFetch {
    gauge!("krabka_fetch_purgatory_size").increment(1.0);
    ParkedFetch(())
}

impl Drop for ParkedFetch {
    fn drop(&mut self) {
        gauge!("krabka_fetch_purgatory_size").decrement(1.0);
    }
}

/// Removes every series of a deleted topic at once (the periodic sweep in
/// [`publish`] catches any a racing update brings back).
pub fn topic_deleted(topic: &str) {
    RECORDER.remove_labelled("topic", topic);
}

/// Publishes the partition and group gauges (called periodically), and
/// drops the series of topics and groups that no longer exist.
#[allow(clippy::cast_precision_loss)] // gauges are f64 by the facade's design
pub fn publish(broker: &Arc<Broker>) {
    let partitions = broker.partitions.all();
    let mut ends: HashMap<(String, i32), i64> = HashMap::with_capacity(partitions.len());
    for p in &partitions {
        let labels = [
            ("topic", p.topic.clone()),
            ("partition", p.index.to_string()),
        ];
        let end = p.high_watermark();
        ends.insert((p.topic.clone(), p.index), end);
        gauge!("krabka_partition_log_size_bytes", &labels).set(p.local_log().size_bytes() as f64);
        gauge!("krabka_partition_log_end_offset", &labels).set(end as f64);
        gauge!("krabka_partition_log_start_offset", &labels)
            .set(p.local_log().log_start_offset() as f64);
    }
    // Diskless partitions: every broker knows every one's end (lag), but
    // only the broker Metadata names the leader publishes its series, so
    // sums over brokers count each once. Their offsets and sizes were
    // refreshed from the batch coordinator just before (see
    // `refresh_diskless`).
    let here = crate::diskless::ReportedHere::of(broker);
    let mut reported: Vec<(String, String)> = Vec::new();
    for p in broker.partitions.all_diskless() {
        let offsets = crate::partition::PartitionStorage::offsets(p.as_ref());
        ends.insert((p.topic.clone(), p.index), offsets.high_watermark);
        if !here.contains(p.topic_id, p.index) {
            continue;
        }
        let labels = [
            ("topic", p.topic.clone()),
            ("partition", p.index.to_string()),
        ];
        gauge!("krabka_diskless_log_size_bytes", &labels)
            .set(crate::partition::PartitionStorage::size_bytes(p.as_ref()) as f64);
        gauge!("krabka_partition_log_end_offset", &labels).set(offsets.high_watermark as f64);
        gauge!("krabka_partition_log_start_offset", &labels).set(offsets.log_start as f64);
        reported.push((p.topic.clone(), p.index.to_string()));
    }
    gauge!("krabka_partitions").set((partitions.len() + reported.len()) as f64);
    let topics: BTreeSet<String> = broker
        .registry
        .topics()
        .into_iter()
        .map(|t| t.name)
        .collect();
    gauge!("krabka_topics").set(topics.len() as f64);

    let mut lagging: BTreeSet<(String, String, String)> = BTreeSet::new();
    if let Some(groups) = broker.groups.get() {
        for c in groups.committed_positions() {
            let Some(&end) = ends.get(&(c.topic.clone(), c.partition)) else {
                continue;
            };
            let labels = [
                ("group", c.group.clone()),
                ("topic", c.topic.clone()),
                ("partition", c.partition.to_string()),
            ];
            gauge!("krabka_consumer_group_committed_offset", &labels).set(c.offset as f64);
            gauge!("krabka_consumer_group_lag", &labels).set((end - c.offset).max(0) as f64);
            lagging.insert((c.group, c.topic, c.partition.to_string()));
        }
    }
    let live: BTreeSet<(String, String)> = partitions
        .iter()
        .map(|p| (p.topic.clone(), p.index.to_string()))
        .chain(reported)
        .collect();
    RECORDER.retain(|name, labels| {
        let label = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        if name.starts_with("krabka_consumer_group_") {
            return match (label("group"), label("topic"), label("partition")) {
                (Some(g), Some(t), Some(p)) => {
                    lagging.contains(&(g.to_owned(), t.to_owned(), p.to_owned()))
                }
                _ => true,
            };
        }
        match (label("topic"), label("partition")) {
            (Some(t), Some(p)) => live.contains(&(t.to_owned(), p.to_owned())),
            (Some(t), None) => topics.contains(t),
            _ => true,
        }
    });
}

/// How long a gauge pass waits for the batch coordinator: the pass shares
/// the housekeeping loop with retention, which an unreachable database must
/// not hold up.
const DISKLESS_REFRESH_TIMEOUT: Duration = Duration::from_secs(2);

/// Asks the batch coordinator for the offsets and sizes of every diskless
/// partition, in one call, so [`publish`] reports the coordinator's word
/// rather than what this broker last saw (the last known values if it does
/// not answer within [`DISKLESS_REFRESH_TIMEOUT`]).
pub async fn refresh_diskless(broker: &Broker) {
    let partitions = broker.partitions.all_diskless();
    let refresh = crate::diskless::DisklessStorage::refresh_all(&partitions);
    if tokio::time::timeout(DISKLESS_REFRESH_TIMEOUT, refresh)
        .await
        .is_err()
    {
        tracing::debug!("diskless sizes not refreshed: the batch coordinator is slow");
    }
}

/// The rendered scrape, for tests of the broker in-process.
#[must_use]
pub fn render() -> String {
    RECORDER.render()
}

/// Client connections open now.
pub fn connections_open(n: usize) {
    gauge!("krabka_connections_open").set(n as f64);
}

/// A connection was refused at accept; `reason` names the limit
/// (`max.connections`, `max.connections.per.ip`, ...).
pub fn connection_refused(reason: &'static str) {
    counter!("krabka_connections_refused_total", "reason" => reason).increment(1);
}

/// A TLS handshake on `listener` failed or timed out.
pub fn tls_handshake_failed(listener: &str) {
    counter!("krabka_tls_handshake_failures_total", "listener" => listener.to_owned()).increment(1);
}

/// A SASL exchange with `mechanism` ended, successfully or not.
pub fn sasl_authentication(mechanism: &'static str, success: bool) {
    let result = if success { "success" } else { "failure" };
    counter!("krabka_sasl_authentications_total", "mechanism" => mechanism, "result" => result)
        .increment(1);
}

/// The authorizer denied `operation` on a resource of `resource_type`.
pub fn authorization_denied(operation: &'static str, resource_type: &'static str) {
    counter!(
        "krabka_authorization_denied_total",
        "operation" => operation,
        "resource_type" => resource_type
    )
    .increment(1);
}

/// The space reserve of the log directory was given back to let an
/// operation that frees space run on a full disk.
pub fn space_reserve_released() {
    counter!("krabka_log_dir_space_reserve_released_total").increment(1);
}

/// What opening one partition's log removed (recovery at start): counted
/// per topic, by cause.
pub fn recovery_removed(topic: &str, report: &krabka_log::RecoveryReport) {
    for removal in &report.removals {
        let cause = match removal.cause {
            krabka_log::recovery::LossCause::TornTail => "torn_tail",
            krabka_log::recovery::LossCause::Corruption { .. } => "corruption",
            krabka_log::recovery::LossCause::AfterCorruption => "after_corruption",
        };
        let labels = [("topic", topic.to_owned()), ("cause", cause.to_owned())];
        counter!("krabka_log_recovery_truncations_total", &labels).increment(1);
        counter!("krabka_log_recovery_removed_records_total", &labels).increment(removal.records);
        counter!("krabka_log_recovery_removed_bytes_total", &labels).increment(removal.bytes);
    }
    if !report.rebuilt_indexes.is_empty() {
        counter!("krabka_log_recovery_rebuilt_indexes_total", "topic" => topic.to_owned())
            .increment(report.rebuilt_indexes.len() as u64);
    }
}

/// Partitions that could not be opened and are refused (KAFKA_STORAGE_ERROR).
pub fn offline_partitions(count: usize) {
    gauge!("krabka_offline_partitions").set(count as f64);
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn every_metric_is_documented_for_operators() {
        let docs = include_str!("../../../docs/OPERATIONS.md");
        for m in CATALOG {
            check!(
                docs.contains(&format!("`{}`", m.name)),
                "{} is not in docs/OPERATIONS.md",
                m.name
            );
        }
        let names: BTreeSet<&str> = CATALOG.iter().map(|m| m.name).collect();
        check!(names.len() == CATALOG.len(), "a name is listed twice");
    }
}
