//! Liveness and readiness, as Kubernetes probes ask for them on the metrics
//! port (`/healthz`, `/readyz`).
//!
//! Liveness is "the process answers and its event loop runs": a ticker task
//! on the runtime stamps a heartbeat every second, and `/healthz` fails when
//! the stamp is older than [`STALL_LIMIT`] (a worker wedged by blocking
//! work). Readiness is a list of named checks, each true once the broker has
//! got that far in its start: the logs are open (recovery done), the
//! listener is bound, both coordinators have loaded their state, and every
//! tiered partition's remote metadata is loaded. Shutdown makes it not
//! ready again, so a load balancer stops sending clients first.
//!
//! The state is built before anything else starts, so the probes answer
//! while the logs are still being recovered: a long recovery shows as "not
//! ready" rather than as a dead process that Kubernetes would restart.

use {
    crate::broker::Broker,
    serde::Serialize,
    std::{
        sync::{
            Arc, OnceLock,
            atomic::{AtomicBool, AtomicU64, Ordering},
        },
        time::{Duration, Instant},
    },
};

/// A heartbeat older than this means the event loop is stalled.
pub const STALL_LIMIT: Duration = Duration::from_secs(10);

/// The broker's start-up progress and liveness, shared with the endpoint.
#[derive(Debug)]
pub struct Health {
    started: Instant,
    /// Milliseconds since `started` of the last heartbeat.
    heartbeat_ms: AtomicU64,
    listener_bound: AtomicBool,
    stopping: AtomicBool,
    /// Whether tiered storage is enabled (then its metadata must be loaded).
    remote_enabled: bool,
    broker: OnceLock<Arc<Broker>>,
}

/// One readiness check in the `/readyz` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check's name (`logs`, `listener`, `coordinators`, `tiered_metadata`, `shutdown`).
    pub name: &'static str,
    /// Whether it passes.
    pub ok: bool,
    /// What is missing, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The `/readyz` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Whether every check passes.
    pub ready: bool,
    /// Every check, in start-up order.
    pub checks: Vec<Check>,
    /// The names of the checks that fail.
    pub not_ready: Vec<&'static str>,
}

/// The `/healthz` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Liveness {
    /// Whether the event loop ran within [`STALL_LIMIT`].
    pub alive: bool,
    /// Milliseconds since the last heartbeat.
    pub heartbeat_age_ms: u64,
    /// Seconds since the process started serving probes.
    pub uptime_seconds: u64,
}

impl Health {
    /// The state at the very start: nothing ready yet.
    #[must_use]
    pub fn new(remote_enabled: bool) -> Self {
        Self {
            started: Instant::now(),
            heartbeat_ms: AtomicU64::new(0),
            listener_bound: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            remote_enabled,
            broker: OnceLock::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Stamps the heartbeat (the ticker calls this every second).
    pub fn beat(&self) {
        self.heartbeat_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The logs are open: the broker's state exists.
    pub fn set_broker(&self, broker: &Arc<Broker>) {
        let _ = self.broker.set(Arc::clone(broker));
    }

    /// The client listener is bound.
    pub fn set_listener_bound(&self) {
        self.listener_bound.store(true, Ordering::Release);
    }

    /// Shutdown began: no longer ready.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether the event loop is alive.
    #[must_use]
    pub fn liveness(&self) -> Liveness {
        let age = self
            .now_ms()
            .saturating_sub(self.heartbeat_ms.load(Ordering::Relaxed));
        Liveness {
            alive: u128::from(age) <= STALL_LIMIT.as_millis(),
            heartbeat_age_ms: age,
            uptime_seconds: self.started.elapsed().as_secs(),
        }
    }

    /// Every readiness check, evaluated now.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        let broker = self.broker.get();
        let check = |name, ok: bool, detail: &dyn Fn() -> String| Check {
            name,
            ok,
            detail: (!ok).then(detail),
        };
        let mut checks = vec![
            check("logs", broker.is_some(), &|| {
                "opening the partition logs (recovery may be running)".to_owned()
            }),
            check(
                "listener",
                self.listener_bound.load(Ordering::Acquire),
                &|| "the client listener is not bound yet".to_owned(),
            ),
        ];
        let (groups, txns) = broker.map_or((false, false), |b| {
            (b.groups.get().is_some(), b.txns.get().is_some())
        });
        checks.push(check("coordinators", groups && txns, &|| {
            let mut missing = Vec::new();
            if !groups {
                missing.push("group coordinator");
            }
            if !txns {
                missing.push("transaction coordinator");
            }
            format!("{} not loaded", missing.join(" and "))
        }));
        if self.remote_enabled {
            let (ok, detail) = match broker {
                None => (false, "the logs are not open yet".to_owned()),
                Some(b) => tiered_metadata(b),
            };
            checks.push(Check {
                name: "tiered_metadata",
                ok,
                detail: (!ok).then_some(detail),
            });
        }
        let stopping = self.stopping.load(Ordering::Acquire);
        checks.push(check("shutdown", !stopping, &|| {
            "the broker is shutting down".to_owned()
        }));
        let not_ready: Vec<&'static str> =
            checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
        Readiness {
            ready: not_ready.is_empty(),
            checks,
            not_ready,
        }
    }
}

/// Whether the remote log manager runs and has loaded the metadata of every
/// tiered partition; otherwise what is missing.
fn tiered_metadata(broker: &Broker) -> (bool, String) {
    let Some(rlm) = broker.remote.get() else {
        return (false, "the remote log manager has not started".to_owned());
    };
    let tiered: Vec<_> = broker
        .partitions
        .all()
        .into_iter()
        .filter(|p| crate::remote::RemoteLogManager::is_tiered(broker, p))
        .collect();
    let waiting: Vec<String> = tiered
        .iter()
        .filter(|p| !rlm.is_loaded(p))
        .map(|p| format!("{}-{}", p.topic, p.index))
        .collect();
    if waiting.is_empty() {
        return (true, String::new());
    }
    let shown: Vec<&str> = waiting.iter().take(10).map(String::as_str).collect();
    (
        false,
        format!(
            "remote metadata of {} of {} tiered partitions not loaded yet ({}{})",
            waiting.len(),
            tiered.len(),
            shown.join(", "),
            if waiting.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn nothing_is_ready_before_the_logs_open() {
        let health = Health::new(true);
        health.beat();
        let r = health.readiness();
        check!(!r.ready);
        check!(r.not_ready == vec!["logs", "listener", "coordinators", "tiered_metadata"]);
        let json = serde_json::to_value(&r).unwrap();
        check!(
            json["checks"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("recovery")
        );
        check!(health.liveness().alive);
        health.set_listener_bound();
        health.set_stopping();
        let r = health.readiness();
        check!(r.not_ready == vec!["logs", "coordinators", "tiered_metadata", "shutdown"]);
    }

    #[test]
    fn a_stalled_heartbeat_is_not_alive() {
        let Some(long_ago) = Instant::now().checked_sub(STALL_LIMIT + Duration::from_secs(1))
        else {
            return; // the machine booted less than that ago
        };
        let health = Health {
            started: long_ago,
            ..Health::new(false)
        };
        // The heartbeat was stamped at `started` and never since.
        check!(!health.liveness().alive);
        health.beat();
        check!(health.liveness().alive);
        check!(health.readiness().not_ready == vec!["logs", "listener", "coordinators"]);
    }
}
