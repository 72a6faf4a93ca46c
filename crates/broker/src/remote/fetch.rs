//! The fetch path's hook into the remote tier: a read that the local log
//! refused as out of range, for an offset below the local log start but at
//! or above the partition's log start, is answered from the remote tier.

use {
    crate::{broker::Broker, partition::Partition},
    krabka_log::{AbortedTxn, LogError, ReadInfo},
    std::sync::Arc,
};

/// What [`below_local_start`] answers: the log start offset to report, the
/// read, and for a remote read_committed read the aborted transactions of
/// the remote data (`None`: take the local log's).
pub type Answer = (i64, Result<ReadInfo, LogError>, Option<Vec<AbortedTxn>>);

/// Turns a local read of `offset` into the answer the client gets, and the
/// log start offset to report: unchanged for partitions that are not tiered
/// or offsets the local log holds; from the remote tier for offsets below the
/// local log start, never past `upper` (the high watermark, or the last
/// stable offset when `committed`). A failing remote tier or a full reader
/// queue gives `KAFKA_STORAGE_ERROR`, which clients retry.
#[allow(clippy::too_many_arguments)] // one fetch partition's whole request
pub async fn below_local_start(
    broker: &Broker,
    partition: &Arc<Partition>,
    offset: i64,
    max_bytes: usize,
    min_one_batch: bool,
    (upper, committed): (i64, bool),
    log_start: i64,
    local: Result<ReadInfo, LogError>,
) -> Answer {
    let local_start = partition.log.log_start_offset();
    if offset < local_start && remote_pending(broker, partition) {
        // Remote metadata not loaded yet (just after start): retriable.
        return (
            log_start,
            Err(unavailable(
                partition,
                "remote log metadata is still loading",
            )),
            None,
        );
    }
    let Some(rlm) = broker.remote.get() else {
        return (log_start, local, None);
    };
    let start = rlm.log_start_offset(partition);
    let below_local = matches!(local, Err(LogError::OffsetOutOfRange { .. }))
        && offset >= start
        && offset < partition.log.log_start_offset();
    if !below_local {
        return (start, local, None);
    }
    let log_end_offset = partition.log.log_end_offset();
    match rlm
        .read_remote(
            partition,
            offset,
            max_bytes,
            min_one_batch,
            upper,
            committed,
        )
        .await
    {
        Ok(read) => (
            start,
            Ok(ReadInfo {
                records: read.records,
                log_start_offset: start,
                log_end_offset,
            }),
            read.aborted,
        ),
        Err(e) => {
            tracing::warn!(partition = ?partition, offset, error = %e, "remote fetch failed");
            (start, Err(unavailable(partition, &e.to_string())), None)
        }
    }
}

/// Whether a tiered partition cannot answer for its remote data yet: the
/// remote log manager has not started (it starts once the listener serves)
/// or has not loaded the partition's metadata. Offsets below the local log
/// start then get a retriable error, never an answer from local data alone.
/// A log that still starts at 0 has nothing below it and is never pending.
#[must_use]
pub fn remote_pending(broker: &Broker, partition: &Partition) -> bool {
    partition.log.log_start_offset() > 0
        && super::settings::system_enabled(&broker.config)
        && super::RemoteLogManager::is_tiered(broker, partition)
        && broker
            .remote
            .get()
            .is_none_or(|rlm| !rlm.is_loaded(partition))
}

/// `KAFKA_STORAGE_ERROR` (retriable) for an offset the remote tier cannot serve now.
fn unavailable(partition: &Partition, reason: &str) -> LogError {
    LogError::Io {
        path: partition.log.dir().to_owned(),
        source: std::io::Error::other(reason.to_owned()),
    }
}
