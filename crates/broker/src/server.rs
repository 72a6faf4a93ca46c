//! Startup, background housekeeping and clean shutdown.
//!
//! Shutdown (Ctrl-C or SIGTERM) stops accepting connections, stops reading
//! new requests, lets every request already read be answered (long polls
//! return early), and then closes every log cleanly so the next start needs
//! no recovery.

use {
    crate::{
        broker::Broker, config::BrokerConfig, error::BrokerError, health::Health, metrics, network,
    },
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
    // The probes answer from the start, so a long log recovery reads as
    // "not ready" rather than as a dead process.
    let health = Arc::new(Health::new(crate::remote::settings::system_enabled(
        &config,
    )));
    let recorder = metrics::install();
    let _endpoint = match metrics_address {
        Some(address) => {
            match metrics::endpoint::start(address, recorder, Arc::clone(&health)).await {
                Ok(endpoint) => {
                    tracing::info!(address = %endpoint.local_addr, "serving /metrics, /healthz and /readyz");
                    Some(endpoint)
                }
                Err(e) => {
                    tracing::warn!(address = %address, error = %e, "metrics endpoint not started");
                    None
                }
            }
        }
        None => None,
    };
    match network::fd::raise_limit() {
        Ok(limit) => tracing::info!(
            soft = limit.now,
            was = limit.before,
            hard = limit.hard,
            "open-file limit (RLIMIT_NOFILE)"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
    let network = network::Network::new(&config)
        .await
        .map_err(BrokerError::Config)?;
    let broker = crate::blocking::run(move || Broker::open(config))
        .await
        .map_err(|e| BrokerError::Task(e.to_string()))??;
    let broker = Arc::new(broker);
    health.set_broker(&broker);
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
    health.set_listener_bound();
    // Cluster mode: join before serving anything (a refusal stops startup),
    // and renew from then on: the rest of startup may outlast a lease.
    let (membership_stop, membership_stopped) = watch::channel(false);
    let cluster = match crate::cluster::ClusterSettings::from_config(&broker.config)? {
        Some(settings) => {
            let node = crate::cluster::ClusterNode::join(
                settings,
                broker.config.node_id,
                crate::cluster::advertised_listeners(&broker.security),
            )
            .await?;
            let _ = broker.cluster.set(Arc::clone(&node));
            {
                let (broker, node) = (Arc::clone(&broker), Arc::clone(&node));
                crate::blocking::run(move || node.use_security_stores(&broker))
                    .await
                    .map_err(|e| BrokerError::Task(e.to_string()))?
                    .map_err(|e| {
                        BrokerError::Config(format!(
                            "ACLs and SCRAM users in the cluster database: {e}"
                        ))
                    })?;
            }
            broker.partitions.use_cluster_coordinator(
                Arc::new(node.cluster().batch_coordinator()),
                node.cluster_id(),
            );
            // Fetches parked on a diskless partition wake on commits made
            // through any broker, not only this one.
            let waking = Arc::downgrade(&broker);
            let commits = node.cluster().watch_diskless_commits(Arc::new(move |wake| {
                if let Some(broker) = waking.upgrade()
                    && let Some(diskless) = broker.partitions.diskless_started()
                {
                    diskless.wake(&wake);
                }
            }));
            node.sync_metadata(&broker).await?;
            Some((
                tokio::spawn(node.run(Arc::downgrade(&broker), membership_stopped)),
                commits,
            ))
        }
        None => None,
    };
    let groups = crate::coordinator::group::broker_log::start(&broker)
        .await
        .map_err(|e| BrokerError::Task(format!("group coordinator: {e}")))?;
    let _ = broker.groups.set(groups);
    let txns = crate::coordinator::txn::broker_log::start(&broker)
        .await
        .map_err(|e| BrokerError::Task(format!("transaction coordinator: {e}")))?;
    let _ = broker.txns.set(txns);
    let (host, port) = broker.advertised();
    tracing::info!(
        node_id = broker.config.node_id,
        listen = %local,
        advertised = %format!("{host}:{port}"),
        log_dir = %broker.config.log_dir.display(),
        cluster_id = %broker.cluster_id(),
        "krabka broker started"
    );

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let housekeeping = tokio::spawn(housekeeping(Arc::clone(&broker), shutdown_rx.clone()));
    // One accept loop per listener; they share the connection limits and
    // the request budget.
    let network = Arc::new(network);
    let mut servers = tokio::task::JoinSet::new();
    for (listener, endpoint) in listeners {
        servers.spawn(network::serve(
            Arc::clone(&broker),
            Arc::clone(&network),
            listener,
            endpoint,
            shutdown_rx.clone(),
        ));
    }
    // Tiered storage starts beside the listeners (its metadata topic is read
    // in process, never through a listener); reads below a tiered
    // partition's local start are served once its remote metadata is loaded.
    // A tier that cannot start (bad bucket, WORM bucket without locked
    // retention) stops the broker: serving a tiered topic without its tier
    // would strand its data.
    let mut fatal = None;
    // Its own stop signal: it finishes its pass (and persists its metadata
    // cache) before requests stop and the logs close.
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
    health.set_stopping();
    remote_stop_tx.send_replace(true);
    if let Some(task) = remote_tasks {
        let _ = task.await;
    }
    broker.begin_shutdown();
    shutdown_tx.send_replace(true);
    while servers.join_next().await.is_some() {}
    let _ = housekeeping.await;
    if let Some(diskless) = broker.partitions.diskless_started() {
        diskless.stop().await;
    }
    // Deregistering releases this broker's leases at once.
    membership_stop.send_replace(true);
    if let Some((membership, commits)) = cluster {
        commits.abort();
        let _ = membership.await;
    }
    tracing::info!("closing logs");
    let closing = Arc::clone(&broker);
    crate::blocking::run(move || closing.partitions.close_all())
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
/// and the partition and group gauges.
async fn housekeeping(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let retention_every = Duration::from_millis(broker.config.retention_check_interval_ms.max(1));
    let mut retention = tokio::time::interval(retention_every);
    let mut gauges = tokio::time::interval(Duration::from_secs(5));
    let diskless_every = crate::diskless::DisklessSettings::from_config(&broker.config)
        .map_or(Duration::from_secs(30), |s| s.cleaner_interval);
    let mut diskless = tokio::time::interval(diskless_every);
    diskless.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = retention.tick() => {
                let broker = Arc::clone(&broker);
                let _ = crate::blocking::run(move || {
                    let reserve = broker.log_dir.reserve();
                    for p in broker.partitions.all() {
                        if let Err(e) = p.local_log().maybe_roll() {
                            tracing::warn!(partition = ?p, error = %e, "segment roll failed");
                        }
                        // Segments rolled here (by time) are flushed here.
                        if let Err(e) = p.local_log().flush_rolled() {
                            tracing::warn!(partition = ?p, error = %e, "flushing rolled segments failed");
                        }
                        // Retention frees space: on a full disk the reserve
                        // makes room for its checkpoint.
                        match reserve.run_freeing(
                            || p.local_log().apply_retention(),
                            |e| crate::log_dir::reserve::is_out_of_space(e),
                        ) {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(partition = ?p, segments = n, "retention deleted segments"),
                            Err(e) => tracing::warn!(partition = ?p, error = %e, "retention failed"),
                        }
                    }
                    // Put the reserve back once there is room again.
                    reserve.ensure();
                }).await;
            }
            _ = gauges.tick() => {
                metrics::refresh_diskless(&broker).await;
                metrics::publish(&broker);
            }
            _ = diskless.tick() => {
                // Diskless retention and the cleaner, once a diskless
                // partition has started the runtime.
                if let Some(runtime) = broker.partitions.diskless_started() {
                    runtime.housekeeping(&broker.partitions.all_diskless()).await;
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}
