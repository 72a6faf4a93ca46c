//! The seam for diskless topics (planned; nothing is implemented here yet).
//!
//! DESIGN.md's scale-out plan keeps a growing deployment's data in object
//! storage instead of a home-made replication scheme: produced batches go
//! straight to the object store, a real database (PostgreSQL) assigns their
//! offsets and orders them per partition, and several stateless brokers
//! serve the same partitions by reading that order back. No broker then
//! owns a partition's local log.
//!
//! This module is where that layer will live, beside the two KIP-405 SPIs it
//! reuses:
//!
//! - batches land in the object store through the same key codec as tiered
//!   segments ([`partition_dir_name`](crate::partition_dir_name) /
//!   [`segment_file_name`](crate::segment_file_name)), so an archive reader
//!   and [`verify_archive`](crate::verify_archive) audits need no second format;
//! - the database's per-partition batch order plays the role that
//!   [`RemoteLogMetadataManager`](crate::RemoteLogMetadataManager) plays for
//!   tiered segments: offset → object lookups, leader-epoch-free because the
//!   database is the single writer of order;
//! - fetches read byte ranges through
//!   [`RemoteStorageManager::fetch_log_segment`](crate::RemoteStorageManager::fetch_log_segment)
//!   and locate batches with the decoders in [`index`](crate::index).
//!
//! Until that issue is taken up the module exports nothing, so no caller can
//! depend on behaviour that does not exist.
