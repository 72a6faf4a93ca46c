//! The broker's one error type.
//!
//! Request handlers answer clients with Kafka error codes and never return
//! this; it is for startup, persistence and shutdown failures, where the
//! message is what an operator reads.

use std::path::PathBuf;

/// Everything that can stop the broker or fail a broker-side operation.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A setting is unknown, invalid or inconsistent.
    #[error("configuration: {0}")]
    Config(String),
    /// A file or directory operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The topic registry file could not be read or written.
    #[error("topic registry {path}: {reason}")]
    Registry {
        /// The registry file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The log directory cannot be used: in use by another process, another
    /// node's or cluster's, or missing its identity or topic registry.
    #[error("log directory {dir}: {reason}")]
    LogDir {
        /// The log directory.
        dir: PathBuf,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// The storage engine refused an operation.
    #[error("log {dir}: {source}")]
    Log {
        /// The partition directory.
        dir: PathBuf,
        /// The log's error.
        source: krabka_log::LogError,
    },
    /// The listener or metrics endpoint could not be bound.
    #[error("bind {address}: {source}")]
    Bind {
        /// The address.
        address: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The cluster database refused or could not be reached (cluster mode).
    #[error("cluster: {0}")]
    Cluster(#[from] krabka_cluster::ClusterError),
    /// A blocking task panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(String),
}
