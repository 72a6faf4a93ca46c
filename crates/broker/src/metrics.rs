//! Prometheus metrics: request counts, errors and latency by API, bytes in
//! and out, partition log sizes; served on `/metrics` by
//! `metrics-exporter-prometheus` at `krabka.metrics.listener`.

use {
    crate::broker::Broker,
    kafka_protocol::messages::ApiKey,
    metrics::{counter, gauge, histogram},
    std::{net::SocketAddr, sync::Arc, time::Duration},
};

/// Installs the Prometheus recorder and its HTTP listener. Must run inside
/// the tokio runtime.
///
/// # Errors
///
/// The exporter's message if the address cannot be bound or a recorder is
/// already installed.
pub fn install(address: SocketAddr) -> Result<(), String> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(
                "krabka_request_duration_seconds".to_owned(),
            ),
            &[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ],
        )
        .map_err(|e| e.to_string())?
        .install()
        .map_err(|e| e.to_string())
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

/// Record bytes returned by fetches.
pub fn bytes_out(n: usize) {
    counter!("krabka_bytes_out_total").increment(u64::try_from(n).unwrap_or(u64::MAX));
}

/// Publishes the size of every partition log (called periodically).
pub fn publish_log_sizes(broker: &Arc<Broker>) {
    for p in broker.partitions.all() {
        gauge!("krabka_partition_log_size_bytes", "topic" => p.topic.clone(), "partition" => p.index.to_string())
            .set(p.local_log().size_bytes() as f64);
    }
}
