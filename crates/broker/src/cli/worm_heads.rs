//! `krabka remote-metadata worm-heads`: print the WORM chain heads the
//! brokers published into `__remote_log_metadata`, one `WormChainRecord`
//! JSON per line — the file format `krabka-worm-verify --expect-head` reads.
//!
//! The heads are the auditor's independent tip: a bucket whose newest
//! manifests were removed still verifies on its own, but not against them.
//! Reading needs only `READ` on the metadata topic (bounded range reads).

use {
    krabka_broker::remote::worm::latest_chain_heads,
    krabka_remote_storage::WormChainRecord,
    krabka_remote_storage_topic::{KafkaMetadataEventLog, KafkaMetadataEventLogConfig},
    std::time::Duration,
};

/// What `krabka remote-metadata worm-heads` was asked for.
#[derive(Debug, Clone)]
pub struct HeadsRequest {
    /// `host:port` of a broker of the cluster.
    pub bootstrap: String,
    /// Only partitions of this topic; every topic when `None`.
    pub topic: Option<String>,
    /// TLS and SASL of the connections (`--command-config`).
    pub security: super::command_config::ClientSecurity,
    /// How long to wait for the cluster and the reads.
    pub timeout: Duration,
}

/// Reads the newest chain head of every partition.
///
/// # Errors
///
/// A message saying whether the cluster was unreachable or the topic could
/// not be read in time.
pub async fn heads(request: &HeadsRequest) -> Result<Vec<WormChainRecord>, String> {
    let mut config = KafkaMetadataEventLogConfig::new(vec![request.bootstrap.clone()]);
    config.delivery_timeout = request.timeout;
    request.security.apply(&mut config.client.connection);
    let log = tokio::time::timeout(request.timeout, KafkaMetadataEventLog::connect(config))
        .await
        .map_err(|_| {
            format!(
                "could not reach the cluster at {} in time",
                request.bootstrap
            )
        })?
        .map_err(|e| format!("cannot read the remote log metadata topic: {e}"))?;
    let result = tokio::time::timeout(
        request.timeout,
        latest_chain_heads(&log, request.topic.as_deref()),
    )
    .await
    .map_err(|_| "timed out reading the remote log metadata topic".to_owned())
    .and_then(|r| r.map_err(|e| format!("cannot read the remote log metadata topic: {e}")));
    log.close().await;
    result
}

/// The records as `krabka-worm-verify --expect-head` reads them: one JSON
/// object per line.
#[must_use]
pub fn render(records: &[WormChainRecord]) -> String {
    records
        .iter()
        .map(|r| format!("{}\n", String::from_utf8_lossy(&r.to_bytes())))
        .collect()
}
