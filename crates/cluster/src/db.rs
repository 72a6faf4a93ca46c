//! The connection pool and the one place every statement goes through, so
//! that each round trip is timed and each failure counted
//! (`krabka_cluster_db_round_trip_seconds`, `krabka_cluster_db_errors_total`).

use {
    crate::{
        config::{DatabaseConfig, DatabaseTls},
        error::ClusterError,
    },
    deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts},
    std::{sync::Arc, time::Instant},
};

/// A pool of connections to the cluster database.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("Database")
            .field("size", &status.size)
            .field("available", &status.available)
            .finish()
    }
}

impl Database {
    /// Builds the pool. No connection is opened until the first statement.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Config`] for a URL that does not parse, a pool size of
    /// zero, or a CA file that cannot be read.
    pub fn new(config: &DatabaseConfig) -> Result<Self, ClusterError> {
        let mut pg: tokio_postgres::Config = config
            .url
            .parse()
            .map_err(|e| ClusterError::Config(format!("database url: {e}")))?;
        if config.pool_size == 0 {
            return Err(ClusterError::Config("pool size must be at least 1".into()));
        }
        pg.connect_timeout(config.connect_timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("krabka");
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match &config.tls {
            DatabaseTls::Disabled => {
                Manager::from_config(pg, tokio_postgres::NoTls, manager_config)
            }
            DatabaseTls::Enabled { ca_file } => {
                Manager::from_config(pg, tls_connector(ca_file.as_deref())?, manager_config)
            }
        };
        let timeouts = Timeouts {
            wait: Some(config.connect_timeout),
            create: Some(config.connect_timeout),
            recycle: Some(config.connect_timeout),
        };
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .timeouts(timeouts)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| ClusterError::Config(format!("connection pool: {e}")))?;
        Ok(Self { pool })
    }

    /// A connection from the pool.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Unavailable`] when none can be had within the connect
    /// timeout.
    pub async fn connection(&self) -> Result<Object, ClusterError> {
        self.pool.get().await.map_err(|e| {
            metrics::counter!("krabka_cluster_db_errors_total", "op" => "connect").increment(1);
            ClusterError::Unavailable(e.to_string())
        })
    }

    /// Runs one store operation `op` (one or a few statements on one
    /// connection), timing it and counting its failure.
    ///
    /// # Errors
    ///
    /// What `body` returns, or [`ClusterError::Unavailable`] when no
    /// connection can be had.
    pub async fn run<T, F>(&self, op: &'static str, body: F) -> Result<T, ClusterError>
    where
        F: AsyncFnOnce(&mut Object) -> Result<T, OpError>,
    {
        let started = Instant::now();
        let mut conn = self.connection().await?;
        let result = body(&mut conn).await;
        metrics::histogram!("krabka_cluster_db_round_trip_seconds", "op" => op)
            .record(started.elapsed().as_secs_f64());
        result.map_err(|e| match e {
            OpError::Db(source) => {
                metrics::counter!("krabka_cluster_db_errors_total", "op" => op).increment(1);
                ClusterError::Database { op, source }
            }
            OpError::Store(e) => e,
        })
    }
}

/// How a store operation fails inside [`Database::run`]: a statement failed,
/// or the store refused (fenced, conflict), which is not a database error.
#[derive(Debug)]
pub enum OpError {
    /// A statement failed.
    Db(tokio_postgres::Error),
    /// The operation's own refusal.
    Store(ClusterError),
}

impl From<tokio_postgres::Error> for OpError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

impl From<ClusterError> for OpError {
    fn from(e: ClusterError) -> Self {
        Self::Store(e)
    }
}

fn tls_connector(
    ca_file: Option<&std::path::Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, ClusterError> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| ClusterError::Config(format!("CA file {}: {e}", path.display())))?;
            for cert in certs {
                let cert = cert.map_err(|e| {
                    ClusterError::Config(format!("CA file {}: {e}", path.display()))
                })?;
                roots.add(cert).map_err(|e| {
                    ClusterError::Config(format!("CA file {}: {e}", path.display()))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A platform root rustls cannot parse is skipped, as browsers do.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClusterError::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
