//! Startup, background housekeeping and clean shutdown.
//!
//! Shutdown (Ctrl-C or SIGTERM) stops accepting connections, stops reading
//! new requests, lets every request already read be answered (long polls
//! return early), and then closes every log cleanly so the next start needs
//! no recovery.

use {
    crate::{broker::Broker, config::BrokerConfig, error::BrokerError, metrics, network},
    std::{sync::Arc, time::Duration},
    tokio::{net::TcpListener, sync::watch},
};

/// Opens the broker's state, binds the listener and serves until `stop`
/// becomes true; then shuts down cleanly.
///
/// # Errors
///
/// [`BrokerError`] if the log directory, registry or a log cannot be
/// opened, or the listener cannot be bound.
pub async fn run_until(
    config: BrokerConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<(), BrokerError> {
    let metrics_address = config.metrics_listener;
    let broker = tokio::task::spawn_blocking(move || Broker::open(config))
        .await
        .map_err(|e| BrokerError::Task(e.to_string()))??;
    let broker = Arc::new(broker);
    let mut listeners = Vec::new();
    for endpoint in broker.security.endpoints() {
        let address = endpoint.spec.bind.bind_address();
        let listener = TcpListener::bind(&address)
            .await
            .map_err(|source| BrokerError::Bind {
                address: address.clone(),
                source,
            })?;
        let local = listener.local_addr().map_err(|source| BrokerError::Bind {
            address: address.clone(),
            source,
        })?;
        endpoint.set_bound_port(local.port());
        if Arc::ptr_eq(endpoint, broker.security.inter_broker()) {
            broker.set_bound_port(local.port());
        }
        tracing::info!(
            listener = %endpoint.spec.name,
            protocol = endpoint.spec.protocol.name(),
            listen = %local,
            advertised = %format!("{}:{}", endpoint.advertised().0, endpoint.advertised().1),
            "listening"
        );
        listeners.push((listener, Arc::clone(endpoint)));
    }
    let local = listeners
        .first()
        .and_then(|(l, _)| l.local_addr().ok())
        .map_or_else(String::new, |a| a.to_string());
    let groups = crate::coordinator::group::broker_log::start(&broker)
        .await
        .map_err(|e| BrokerError::Task(format!("group coordinator: {e}")))?;
    let _ = broker.groups.set(groups);
    let txns = crate::coordinator::txn::broker_log::start(&broker)
        .await
        .map_err(|e| BrokerError::Task(format!("transaction coordinator: {e}")))?;
    let _ = broker.txns.set(txns);
    if let Some(metrics_address) = metrics_address {
        match metrics::install(metrics_address) {
            Ok(()) => {
                tracing::info!(address = %metrics_address, "serving Prometheus metrics on /metrics")
            }
            Err(e) => {
                tracing::warn!(address = %metrics_address, error = %e, "metrics endpoint not started")
            }
        }
    }
    let (host, port) = broker.advertised();
    tracing::info!(
        node_id = broker.config.node_id,
        listen = %local,
        advertised = %format!("{host}:{port}"),
        log_dir = %broker.config.log_dir.display(),
        cluster_id = %broker.registry.cluster_id(),
        "krabka broker started"
    );

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let housekeeping = tokio::spawn(housekeeping(Arc::clone(&broker), shutdown_rx.clone()));
    let mut servers = tokio::task::JoinSet::new();
    for (listener, endpoint) in listeners {
        servers.spawn(network::serve(
            Arc::clone(&broker),
            listener,
            endpoint,
            shutdown_rx.clone(),
        ));
    }
    // Tiered storage starts once the listener serves: the topic-based metadata
    // manager reaches `__remote_log_metadata` through it.
    // A tier that cannot start (bad bucket, WORM bucket without locked
    // retention) stops the broker: serving a tiered topic without its tier
    // would strand its data.
    let mut fatal = None;
    // Its own stop signal: it must finish (its metadata goes through this
    // broker's listener) before the listener stops.
    let (remote_stop_tx, remote_stop_rx) = watch::channel(false);
    let remote_tasks = match crate::remote::RemoteLogManager::start(&broker).await {
        Ok(Some(rlm)) => {
            let _ = broker.remote.set(Arc::clone(&rlm));
            Some(tokio::spawn(rlm.run(Arc::clone(&broker), remote_stop_rx)))
        }
        Ok(None) => None,
        Err(e) => {
            tracing::error!(error = %e, "remote log manager cannot start; shutting down");
            fatal = Some(e);
            None
        }
    };
    while fatal.is_none() && !*stop.borrow() {
        if stop.changed().await.is_err() {
            break;
        }
    }
    tracing::info!("shutting down: answering in-flight requests");
    remote_stop_tx.send_replace(true);
    if let Some(task) = remote_tasks {
        let _ = task.await;
    }
    broker.begin_shutdown();
    shutdown_tx.send_replace(true);
    while servers.join_next().await.is_some() {}
    let _ = housekeeping.await;
    tracing::info!("closing logs");
    let closing = Arc::clone(&broker);
    tokio::task::spawn_blocking(move || closing.partitions.close_all())
        .await
        .map_err(|e| BrokerError::Task(e.to_string()))?;
    tracing::info!("krabka broker stopped");
    fatal.map_or(Ok(()), Err)
}

/// Runs until Ctrl-C or SIGTERM.
///
/// # Errors
///
/// As [`run_until`].
pub async fn run(config: BrokerConfig) -> Result<(), BrokerError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        stop_tx.send_replace(true);
    });
    run_until(config, stop_rx).await
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => tracing::info!("received Ctrl-C"),
                    _ = term.recv() => tracing::info!("received SIGTERM"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Periodic work: retention and segment roll (`log.retention.check.interval.ms`),
/// and the partition-size gauges.
async fn housekeeping(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let retention_every = Duration::from_millis(broker.config.retention_check_interval_ms.max(1));
    let mut retention = tokio::time::interval(retention_every);
    let mut gauges = tokio::time::interval(Duration::from_secs(5));
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = retention.tick() => {
                let broker = Arc::clone(&broker);
                let _ = tokio::task::spawn_blocking(move || {
                    for p in broker.partitions.all() {
                        if let Err(e) = p.log.maybe_roll() {
                            tracing::warn!(partition = ?p, error = %e, "segment roll failed");
                        }
                        match p.log.apply_retention() {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(partition = ?p, segments = n, "retention deleted segments"),
                            Err(e) => tracing::warn!(partition = ?p, error = %e, "retention failed"),
                        }
                    }
                }).await;
            }
            _ = gauges.tick() => metrics::publish_log_sizes(&broker),
            _ = shutdown.changed() => return,
        }
    }
}
