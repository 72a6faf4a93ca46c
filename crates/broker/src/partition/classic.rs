//! [`PartitionStorage`] for a classic partition: the local log, and for a
//! tiered topic the remote tier below the local log start.
//!
//! This is where local and remote answers are merged, as Kafka's
//! `ReplicaManager` and `RemoteLogManager` do between them: a read below the
//! local log start (and at or above the partition's log start) becomes a
//! remote read on the remote log manager's reader threads; a timestamp
//! lookup searches the remote tier first, then the local log; the log start
//! is the first remote offset, raised by the DeleteRecords floor the log
//! keeps. While a tiered partition's remote metadata is still loading it
//! answers offsets below its local start with retriable errors, never from
//! local data alone.

use {
    super::{
        Appended, Isolation, LEADER_EPOCH, OffsetQuery, Offsets, Partition, PartitionStorage, Read,
        ReadRequest, ReadResult, Records, StorageError,
    },
    crate::{blocking, remote::read::TimestampQuery},
    bytes::Bytes,
    krabka_log::{LogError, ProducerSummary, TimestampOffset},
    std::{sync::Arc, time::Duration},
    tokio::{sync::Notify, time::Instant},
};

/// How long an offset lookup on a tiered partition waits for its remote
/// metadata to load (just after a start) before it answers with a retriable
/// error: Kafka delays a remote ListOffsets rather than failing it, and a
/// client asking right after a restart should get its answer.
const LOAD_WAIT: Duration = Duration::from_secs(10);
const LOAD_POLL: Duration = Duration::from_millis(20);

impl Partition {
    /// Waits, up to [`LOAD_WAIT`], until the partition's remote metadata is
    /// loaded.
    async fn wait_remote_loaded(&self) -> Result<(), StorageError> {
        let deadline = Instant::now() + LOAD_WAIT;
        while self.remote_pending() {
            if Instant::now() >= deadline {
                return Err(StorageError::Loading);
            }
            tokio::time::sleep(LOAD_POLL).await;
        }
        Ok(())
    }

    fn out_of_range(&self, offset: i64, offsets: &Offsets) -> StorageError {
        StorageError::OffsetOutOfRange {
            offset,
            log_start: offsets.log_start,
            log_end: offsets.log_end,
        }
    }

    /// A read below the local log start: from the remote tier, if the
    /// partition has remote data there and its metadata is loaded.
    fn read_below_local_start(
        &self,
        request: &ReadRequest,
        offsets: Offsets,
    ) -> Result<Read, StorageError> {
        if self.remote_pending() {
            return Err(StorageError::Unavailable(
                "the remote log metadata is still loading".into(),
            ));
        }
        let (Some(rlm), Some(me)) = (self.remote.get().cloned(), self.me.upgrade()) else {
            return Err(self.out_of_range(request.offset, &offsets));
        };
        if request.offset < offsets.log_start {
            return Err(self.out_of_range(request.offset, &offsets));
        }
        let request = *request;
        let upper = offsets.upper(request.isolation);
        Ok(Read::Later(Box::pin(async move {
            rlm.read_remote(
                &me,
                request.offset,
                request.max_bytes,
                request.min_one_batch,
                upper,
                request.isolation == Isolation::ReadCommitted,
            )
            .await
            .map(|read| ReadResult {
                records: read.records.into(),
                aborted: read.aborted,
                offsets,
            })
            .map_err(|e| {
                tracing::warn!(partition = ?me, offset = request.offset, error = %e, "remote fetch failed");
                StorageError::Unavailable(e.to_string())
            })
        })))
    }

    /// The remote tier's part of a timestamp lookup: `None` for a partition
    /// that is not tiered or has nothing remote that matches.
    async fn remote_lookup(
        &self,
        query: TimestampQuery,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        self.wait_remote_loaded().await?;
        let (Some(rlm), Some(me)) = (self.remote.get(), self.me.upgrade()) else {
            return Ok(None);
        };
        if !self.is_tiered() {
            return Ok(None);
        }
        rlm.find_offset(&me, query).await.map_err(|e| {
            tracing::warn!(partition = ?self, error = %e, "remote timestamp lookup failed");
            StorageError::Unavailable(e.to_string())
        })
    }
}

fn at_offset(offset: i64) -> Option<TimestampOffset> {
    Some(TimestampOffset {
        timestamp: -1,
        offset,
        leader_epoch: LEADER_EPOCH,
    })
}

#[async_trait::async_trait]
impl PartitionStorage for Partition {
    fn offsets(&self) -> Offsets {
        let local_log_start = self.log.log_start_offset();
        let log_end = self.log.log_end_offset();
        let last_stable = self.log.last_stable_offset();
        Offsets {
            log_start: self.log_start_offset(),
            local_log_start,
            high_watermark: log_end,
            last_stable,
            log_end,
        }
    }

    fn read(&self, request: &ReadRequest) -> Result<Read, StorageError> {
        let offsets = self.offsets();
        let upper = offsets.upper(request.isolation);
        let (offset, max_bytes, min_one) =
            (request.offset, request.max_bytes, request.min_one_batch);
        let read = if request.zero_copy {
            self.log
                .read_slice(offset, max_bytes, upper, min_one)
                .map(|info| info.records.map_or_else(Records::default, Records::File))
        } else {
            self.log
                .read(offset, max_bytes, upper, min_one)
                .map(|info| Records::Bytes(info.records))
        };
        match read {
            Ok(records) => {
                let aborted = match request.isolation {
                    Isolation::ReadCommitted => {
                        Some(self.log.aborted_transactions(request.offset, upper)?)
                    }
                    Isolation::ReadUncommitted => None,
                };
                Ok(Read::Ready(ReadResult {
                    records,
                    aborted,
                    offsets,
                }))
            }
            Err(LogError::OffsetOutOfRange { .. }) if request.offset < offsets.local_log_start => {
                self.read_below_local_start(request, offsets)
            }
            Err(LogError::OffsetOutOfRange { .. }) => {
                Err(self.out_of_range(request.offset, &offsets))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn append(&self, records: Bytes) -> Appended {
        self.queue_append(records)
    }

    async fn list_offset(
        &self,
        query: OffsetQuery,
        isolation: Isolation,
    ) -> Result<Option<TimestampOffset>, StorageError> {
        match query {
            OffsetQuery::Latest => Ok(at_offset(self.offsets().upper(isolation))),
            // Until its remote metadata is loaded a tiered partition cannot
            // name its log start.
            OffsetQuery::Earliest => {
                self.wait_remote_loaded().await?;
                Ok(at_offset(self.log_start_offset()))
            }
            OffsetQuery::EarliestLocal => Ok(at_offset(self.log.log_start_offset())),
            OffsetQuery::LatestTiered => Ok(self
                .tier_offsets()
                .highest_tiered
                .filter(|t| *t >= 0)
                .and_then(at_offset)),
            OffsetQuery::EarliestPendingUpload => {
                if !self.is_tiered() {
                    return Ok(None);
                }
                self.wait_remote_loaded().await?;
                let start = self.log_start_offset();
                Ok(
                    match self.tier_offsets().highest_tiered.filter(|t| *t >= 0) {
                        Some(tiered) => at_offset((tiered + 1).max(start)),
                        // Nothing copied yet: the whole log is pending, unless
                        // its head was copied and then deleted from the tier.
                        None if self.log.log_start_offset() == start => at_offset(start),
                        None => None,
                    },
                )
            }
            OffsetQuery::MaxTimestamp => {
                let remote = self.remote_lookup(TimestampQuery::Max).await?;
                let log = Arc::clone(&self.log);
                let local = blocking::run(move || log.max_timestamp_offset()).await??;
                Ok(match local {
                    // On a tie the remote record, the earlier one, wins.
                    Some(t) if remote.is_none_or(|r| t.timestamp > r.timestamp) => Some(t),
                    _ => remote,
                })
            }
            OffsetQuery::AtOrAfter(ts) => {
                if let Some(found) = self.remote_lookup(TimestampQuery::AtOrAfter(ts)).await? {
                    return Ok(Some(found));
                }
                let log = Arc::clone(&self.log);
                Ok(blocking::run(move || log.offset_for_timestamp(ts)).await??)
            }
        }
    }

    async fn delete_records(&self, offset: i64) -> Result<i64, StorageError> {
        let Some(me) = self.me.upgrade() else {
            return Err(LogError::Closed {
                dir: self.log.dir().to_owned(),
            }
            .into());
        };
        blocking::run(move || {
            if me.remote_pending() {
                return Err(StorageError::Loading);
            }
            let log = &me.log;
            let hw = log.log_end_offset();
            let target = if offset == -1 { hw } else { offset };
            if target < 0 || target > hw {
                return Err(me.out_of_range(target, &me.offsets()));
            }
            // A tiered partition's log start may lie in the remote tier:
            // the log keeps it as its floor, and the remote log manager's
            // task deletes the remote segments wholly below it.
            if me.is_tiered() && me.remote.get().is_some() {
                if !me.tier_offsets().loaded {
                    return Err(StorageError::Loading);
                }
                let current = me.log_start_offset();
                if target <= current {
                    return Ok(current);
                }
                log.raise_log_start_floor(target)?;
                tracing::info!(partition = ?me, log_start = target, "DeleteRecords moved the log start into the tiered log");
                return Ok(target);
            }
            Ok(log.advance_log_start_offset(target)?)
        })
        .await?
    }

    fn size_bytes(&self) -> u64 {
        self.log.size_bytes()
    }

    async fn producers(&self) -> Result<Vec<ProducerSummary>, StorageError> {
        // Reading the producer state takes the log's append lock.
        let log = Arc::clone(&self.log);
        Ok(blocking::run(move || log.producers()).await?)
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }
}
