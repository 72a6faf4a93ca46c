//! `krabka remote-metadata worm-heads`: print the WORM chain heads the
//! brokers published into `__remote_log_metadata`, one `WormChainRecord`
//! JSON per line — the file format `krabka-worm-verify --expect-head` reads.
//!
//! The heads are the auditor's independent tip: a bucket whose newest
//! manifests were removed still verifies on its own, but not against them.
//! Reading needs only `READ` on the metadata topic (bounded range reads).

use {
    super::metadata_source::{self, MetadataSource},
    krabka_broker::remote::worm::latest_chain_heads,
    krabka_remote_storage::WormChainRecord,
    std::time::Duration,
};

/// What `krabka remote-metadata worm-heads` was asked for.
#[derive(Debug, Clone)]
pub struct HeadsRequest {
    /// Where the metadata is read.
    pub source: MetadataSource,
    /// Only partitions of this topic; every topic when `None`.
    pub topic: Option<String>,
    /// How long to wait for the cluster and the reads.
    pub timeout: Duration,
}

/// Reads the newest chain head of every partition.
///
/// # Errors
///
/// A message saying whether the cluster was unreachable or the metadata
/// could not be read in time.
pub async fn heads(request: &HeadsRequest) -> Result<Vec<WormChainRecord>, String> {
    let opened = metadata_source::open(&request.source, request.timeout)
        .await
        .map_err(|e| e.to_string())?;
    let Some(log) = opened.log() else {
        return Ok(Vec::new());
    };
    let result = tokio::time::timeout(
        request.timeout,
        latest_chain_heads(log.as_ref(), request.topic.as_deref()),
    )
    .await
    .map_err(|_| "timed out reading the remote log metadata".to_owned())
    .and_then(|r| r.map_err(|e| format!("cannot read the remote log metadata: {e}")));
    opened.close().await;
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
