//! Prometheus metrics of tiered storage, named after Kafka's
//! `RemoteStorageMetrics` (`RemoteCopyBytesPerSec` becomes the counter
//! `krabka_remote_copy_bytes_total`, `RemoteCopyLagBytes` the gauge
//! `krabka_remote_copy_lag_bytes`, and so on), so dashboards map one to one.
//!
//! Counters carry the topic, as Kafka's `BrokerTopicMetrics` do; the lag and
//! size gauges carry topic and partition. They go through the `metrics`
//! facade: without an installed recorder (tests, no metrics listener) they
//! cost nothing.

use metrics::{counter, gauge};

fn n(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// A segment copy finished: `bytes` of `.log` went to the tier.
pub fn copy_done(topic: &str, bytes: u64) {
    counter!("krabka_remote_copy_requests_total", "topic" => topic.to_owned()).increment(1);
    counter!("krabka_remote_copy_bytes_total", "topic" => topic.to_owned()).increment(bytes);
}

/// A segment copy failed.
pub fn copy_failed(topic: &str) {
    counter!("krabka_remote_copy_requests_total", "topic" => topic.to_owned()).increment(1);
    counter!("krabka_remote_copy_errors_total", "topic" => topic.to_owned()).increment(1);
}

/// A remote read returned `bytes` of records.
pub fn fetch_done(topic: &str, bytes: usize) {
    counter!("krabka_remote_fetch_requests_total", "topic" => topic.to_owned()).increment(1);
    counter!("krabka_remote_fetch_bytes_total", "topic" => topic.to_owned()).increment(n(bytes));
}

/// A remote read failed (tier error, refused by a full reader queue).
pub fn fetch_failed(topic: &str) {
    counter!("krabka_remote_fetch_requests_total", "topic" => topic.to_owned()).increment(1);
    counter!("krabka_remote_fetch_errors_total", "topic" => topic.to_owned()).increment(1);
}

/// A remote segment was deleted (retention, DeleteRecords, topic deletion).
pub fn delete_done(topic: &str) {
    counter!("krabka_remote_delete_requests_total", "topic" => topic.to_owned()).increment(1);
}

/// A remote segment deletion failed.
pub fn delete_failed(topic: &str) {
    counter!("krabka_remote_delete_requests_total", "topic" => topic.to_owned()).increment(1);
    counter!("krabka_remote_delete_errors_total", "topic" => topic.to_owned()).increment(1);
}

/// What one partition holds in the tier and how far copying lags behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionGauges {
    /// `.log` bytes of the finished remote segments (`RemoteLogSizeBytes`).
    pub remote_bytes: u64,
    /// Finished remote segments (`RemoteLogMetadataCount`).
    pub remote_segments: u64,
    /// Bytes of closed local segments eligible for copy and not copied yet
    /// (`RemoteCopyLagBytes`).
    pub copy_lag_bytes: u64,
    /// Those segments (`RemoteCopyLagSegments`).
    pub copy_lag_segments: u64,
}

/// Publishes one partition's gauges.
#[allow(clippy::cast_precision_loss)] // gauges are f64 by the facade's design
pub fn partition(topic: &str, index: i32, g: PartitionGauges) {
    let labels = [
        ("topic", topic.to_owned()),
        ("partition", index.to_string()),
    ];
    gauge!("krabka_remote_log_size_bytes", &labels).set(g.remote_bytes as f64);
    gauge!("krabka_remote_log_segments", &labels).set(g.remote_segments as f64);
    gauge!("krabka_remote_copy_lag_bytes", &labels).set(g.copy_lag_bytes as f64);
    gauge!("krabka_remote_copy_lag_segments", &labels).set(g.copy_lag_segments as f64);
    // The request and error counters exist (at 0) from the first pass, so
    // a rate or an alert has a series to watch before the first event.
    for name in [
        "krabka_remote_copy_requests_total",
        "krabka_remote_copy_errors_total",
        "krabka_remote_fetch_requests_total",
        "krabka_remote_fetch_errors_total",
        "krabka_remote_delete_requests_total",
        "krabka_remote_delete_errors_total",
    ] {
        counter!(name, "topic" => topic.to_owned()).increment(0);
    }
}

/// Reads waiting for a reader thread (`RemoteLogReaderTaskQueueSize`).
#[allow(clippy::cast_precision_loss)]
pub fn reader_queue(pending: usize) {
    gauge!("krabka_remote_log_reader_task_queue_size").set(pending as f64);
}

/// A read refused because the reader queue was full.
pub fn reader_rejected() {
    counter!("krabka_remote_log_reader_rejected_total").increment(1);
}

impl super::RemoteLogManager {
    /// Publishes a partition's remote size and copy lag (part of the task
    /// pass, after copies and retention).
    pub(super) fn publish_gauges(
        &self,
        p: &crate::partition::Partition,
        tp: &krabka_remote_storage::TopicIdPartition,
        state: &super::PartitionState,
    ) -> Result<(), krabka_remote_storage::RemoteStorageError> {
        let mut g = PartitionGauges::default();
        for m in self.metadata.list_remote_log_segments(tp)? {
            if m.state() == krabka_remote_storage::RemoteLogSegmentState::CopySegmentFinished {
                g.remote_bytes += u64::try_from(m.segment_size_in_bytes()).unwrap_or(0);
                g.remote_segments += 1;
            }
        }
        let local: Vec<super::LocalSegment> = Self::local_segments(p)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        let upper = p.log.last_stable_offset().min(p.high_watermark());
        for s in super::policy::segments_to_copy(&local, Self::next_to_copy(state), upper) {
            g.copy_lag_bytes += s.size_bytes;
            g.copy_lag_segments += 1;
        }
        partition(&p.topic, p.index, g);
        Ok(())
    }
}
