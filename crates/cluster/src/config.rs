//! How a broker reaches the cluster database: the typed form of the
//! `krabka.cluster.database.*` settings, resolved from strings by the
//! broker's configuration layer.

use std::{path::PathBuf, time::Duration};

/// Connection settings of the cluster database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseConfig {
    /// A `postgresql://user:password@host:port/dbname?…` URL (libpq's URL
    /// form, as `tokio-postgres` parses it).
    pub url: String,
    /// Most connections the broker keeps open.
    pub pool_size: usize,
    /// How long to wait for a connection (new or from the pool) before the
    /// database counts as unreachable.
    pub connect_timeout: Duration,
    /// TLS to the database, off by default.
    pub tls: DatabaseTls,
    /// PostgreSQL ends a session of this broker that sits inside an open
    /// transaction this long (`idle_in_transaction_session_timeout`), so a
    /// broker frozen mid-transaction (a stopped process, a paused VM) does
    /// not hold its row locks — a shard lease another broker must take —
    /// until it wakes. `None` leaves the server's setting.
    pub idle_in_transaction_timeout: Option<Duration>,
}

/// TLS to the database.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DatabaseTls {
    /// Plain TCP (or whatever the URL's `sslmode` allows without TLS).
    #[default]
    Disabled,
    /// TLS with `rustls`, verifying the server against `ca_file` (PEM), or
    /// against the platform's roots when none is given.
    Enabled {
        /// PEM file with the CA certificates to trust.
        ca_file: Option<PathBuf>,
    },
}

impl DatabaseConfig {
    /// Settings for `url` with the defaults: a pool of 8 connections, a
    /// 5-second connect timeout, no TLS, sessions idle in a transaction for
    /// 10 seconds ended by the server.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_size: 8,
            connect_timeout: Duration::from_secs(5),
            tls: DatabaseTls::Disabled,
            idle_in_transaction_timeout: Some(Duration::from_secs(10)),
        }
    }
}
