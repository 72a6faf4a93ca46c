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
    /// What a connection outside the pool (a LISTEN) is opened with.
    pg: tokio_postgres::Config,
    tls: DatabaseTls,
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
        if let Some(timeout) = config.idle_in_transaction_timeout {
            // Sent at connect as a server option, after any the URL gives.
            let ms = timeout.as_millis().max(1);
            let option = format!("-c idle_in_transaction_session_timeout={ms}");
            let options = match pg.get_options() {
                Some(given) if !given.trim().is_empty() => format!("{given} {option}"),
                _ => option,
            };
            pg.options(&options);
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match &config.tls {
            DatabaseTls::Disabled => {
                Manager::from_config(pg.clone(), tokio_postgres::NoTls, manager_config)
            }
            DatabaseTls::Enabled { ca_file } => Manager::from_config(
                pg.clone(),
                tls_connector(ca_file.as_deref())?,
                manager_config,
            ),
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
        Ok(Self {
            pool,
            pg,
            tls: config.tls.clone(),
        })
    }

    /// Opens a connection of its own (not from the pool), subscribes it to
    /// `channel` and calls `on` with each notification's payload until the
    /// connection ends; `on(None)` once subscribed, since notifications sent
    /// while no connection listened are lost.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Unavailable`] when the connection cannot be opened or
    /// breaks.
    pub(crate) async fn listen(
        &self,
        channel: &str,
        on: &(dyn Fn(Option<&str>) + Send + Sync),
    ) -> Result<(), ClusterError> {
        let unavailable = |e: tokio_postgres::Error| ClusterError::Unavailable(e.to_string());
        match &self.tls {
            DatabaseTls::Disabled => {
                let (client, connection) = self
                    .pg
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(unavailable)?;
                listen_on(&client, connection, channel, on).await
            }
            DatabaseTls::Enabled { ca_file } => {
                let (client, connection) = self
                    .pg
                    .connect(tls_connector(ca_file.as_deref())?)
                    .await
                    .map_err(unavailable)?;
                listen_on(&client, connection, channel, on).await
            }
        }
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

/// Drives `connection` (whose client is `client`): sends `LISTEN channel`,
/// then hands every notification on it to `on`.
async fn listen_on<T>(
    client: &tokio_postgres::Client,
    mut connection: tokio_postgres::Connection<tokio_postgres::Socket, T>,
    channel: &str,
    on: &(dyn Fn(Option<&str>) + Send + Sync),
) -> Result<(), ClusterError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let unavailable = |e: tokio_postgres::Error| ClusterError::Unavailable(e.to_string());
    // The channel name is ours (a constant), never a client's.
    let statement = format!("LISTEN {channel}");
    let subscribe = client.batch_execute(&statement);
    tokio::pin!(subscribe);
    let mut subscribed = false;
    loop {
        tokio::select! {
            done = &mut subscribe, if !subscribed => {
                done.map_err(unavailable)?;
                subscribed = true;
                on(None);
            }
            message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) if n.channel() == channel => {
                    on(Some(n.payload()));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(unavailable(e)),
                None => return Err(ClusterError::Unavailable("the listening connection closed".into())),
            }
        }
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
