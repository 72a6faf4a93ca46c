//! krabka-log: the on-disk partition log in Apache Kafka's own file formats.
//!
//! A partition directory `<topic>-<partition>` holds segments
//! `<20-digit base offset>.log` with v2 record batches stored exactly as the
//! producer sent them (only base offset, partition leader epoch and, for
//! LogAppendTime, the max timestamp are rewritten), a sparse `.index`
//! (relative offset u32 + position u32, big-endian) and `.timeindex`
//! (timestamp i64 + relative offset u32) entry every `index.interval.bytes`,
//! `.txnindex` entries for aborted transactions, producer-state `.snapshot`
//! files, `leader-epoch-checkpoint` and `partition.metadata` — the same bytes
//! Kafka writes, so tiered storage can copy them verbatim and Kafka's tools
//! can read them.
//!
//! Kafka keeps the log start offset, recovery point and cleaner offset in
//! checkpoint files shared by a whole log dir; a Krabka partition directory is
//! self-contained and keeps them in `krabka-log-start-offset`,
//! `krabka-recovery-point` and `krabka-cleaner-offset` (see
//! [`checkpoint`]), plus a `.kafka_cleanshutdown` marker after a clean close.
//! Kafka ignores these files when it loads the directory.
//!
//! The entry point is [`Log`]; [`LogCleaner`] compacts logs with
//! `cleanup.policy=compact`. All I/O is synchronous `std::fs`; async callers
//! use `spawn_blocking` or dedicated threads.

#![warn(missing_docs)]

pub mod batch;
pub mod checkpoint;
mod cleaner;
pub mod compression;

mod clock;
mod config;
mod error;
mod file_slice;
pub mod index;
pub mod leader_epoch;
mod load;
mod log;
pub mod message_set;
pub mod producer_state;
pub mod recovery;
pub mod segment;
mod segment_file;
pub mod txn_index;
mod types;
pub mod validate;

pub use {
    cleaner::{CleanStats, LogCleaner},
    clock::{Clock, ManualClock, SystemClock},
    config::{CleanerConfig, CleanupPolicy, CompressionType, LogConfig, TimestampType},
    error::LogError,
    file_slice::FileSlice,
    leader_epoch::EpochEntry,
    log::{Log, tiering::TierableSegment},
    producer_state::ProducerSummary,
    recovery::{CorruptionPolicy, OpenOptions, RecoveryReport},
    types::{
        AbortedTxn, AppendInfo, ControlMarker, ReadInfo, SegmentInfo, SliceInfo, TimestampOffset,
    },
    validate::RecordError,
};
