//! Diskless topics (KIP-1150): batches in object storage, their order in a
//! batch coordinator.
//!
//! A diskless partition has no leader on the data path and no local log.
//! A broker gathers the batches producers send it, for every partition and
//! every client, into one shared object; when the object is full or its
//! time is up it is uploaded with a create-only PUT and then *committed*:
//! the [`BatchCoordinator`] checks idempotent producers, assigns each batch
//! its offsets and records where its bytes lie. Any broker then serves any
//! diskless partition by asking the coordinator which batches cover a fetch
//! and reading those byte ranges back. Order and offsets come from the
//! coordinator alone — in a cluster a PostgreSQL database
//! (`krabka-cluster`), on a single node an embedded store — so no broker
//! replicates anything and any broker can be lost.
//!
//! The pieces, each in its own child module:
//!
//! - `object`: the object format. Batches exactly as clients sent them,
//!   then a footer naming each batch's partition, position, size and
//!   CRC-32C, so an object can be verified without the coordinator;
//!   [`rewrite_base_offset`] gives a batch read back its assigned offsets
//!   (the batch CRC does not cover the base offset).
//! - `coordinator`: the [`BatchCoordinator`] trait and its request and
//!   answer types; [`conformance`] holds the test bodies every
//!   implementation must pass, so the in-memory and the PostgreSQL
//!   coordinator are held to one contract.
//! - `memory`: [`InMemoryBatchCoordinator`], the reference
//!   implementation; [`InMemoryBatchCoordinator::open`] journals it to a
//!   directory, which makes it the embedded store a single node runs
//!   diskless topics on without a database.
//!
//! - `writer`: [`ObjectWriter`], the produce side: one shared open object
//!   per broker, closed by size or time, uploaded in parallel and committed
//!   strictly in order, each batch answered after its commit.
//! - `reader`: [`read_batches`], the fetch side: the found batches read
//!   per object in runs, their assigned offsets written in.
//! - `cleaner`: [`clean_once`] deletes objects dead for a grace period;
//!   [`sweep_orphans`] finds objects an uploader left uncommitted.
//! - `store`: [`DisklessStore`], create-only uploads and ranged reads
//!   through an [`ObjectCache`] that keeps the objects a broker wrote apart
//!   from what lagging readers fetch, so they never evict the hot tail.
//!
//! The object store itself is any `object_store` backend — a directory,
//! or S3 and GCS configured through [`krabka_object_store`] as for the
//! remote tier.
//!
//! ```
//! use krabka_remote_storage::diskless::{DisklessPartition, ObjectBuilder, ObjectFile};
//! use uuid::Uuid;
//!
//! let partition = DisklessPartition::new(Uuid::from_u128(7), 0);
//! let mut builder = ObjectBuilder::new();
//! let placed = builder.push(partition, b"batch bytes as the client sent them").unwrap();
//! let bytes = builder.finish();
//! let object = ObjectFile::parse(&bytes).expect("a fresh object verifies");
//! assert_eq!(object.batches(), &[placed]);
//! assert_eq!(object.batch_bytes(&placed), &b"batch bytes as the client sent them"[..]);
//! ```

mod buffers;
mod cache;
mod cleaner;
pub mod conformance;
mod coordinator;
mod memory;
mod object;
mod producer_state;
mod reader;
mod store;
mod types;
mod writer;

pub use {
    cache::ObjectCache,
    cleaner::{CleanerPass, SweepPass, clean_once, sweep_orphans},
    coordinator::BatchCoordinator,
    memory::{
        COMPACT_AT_BYTES, Clock, InMemoryBatchCoordinator, JOURNAL_FILE, MemoryState, SNAPSHOT_FILE,
    },
    object::{
        OBJECT_FORMAT_VERSION, OBJECT_MAGIC, ObjectBatch, ObjectBuilder, ObjectFile,
        rewrite_base_offset,
    },
    producer_state::{BATCHES_TO_RETAIN, ProducerCheck, ProducerState, RecentBatch},
    reader::read_batches,
    store::{DisklessStore, ListedObject},
    types::{
        BatchError, CommitBatch, Committed, Consolidate, Consolidated, DeleteRecords,
        DisklessPartition, FindBatches, FoundBatch, FoundBatches, ListOffsetsQuery, LogInfo,
        ObjectCommit, ObjectKey, OffsetAnswer, OffsetQuery, PartitionError, ProducerBatch,
        ProducerInfo, RetentionOutcome, RetentionPolicy,
    },
    writer::{Appended, ObjectWriter, OnCommit, WriteError, WriterConfig},
};
