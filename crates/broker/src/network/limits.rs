//! What one client may make the broker hold: connection slots and request
//! bytes.
//!
//! [`ConnectionLimits`] counts open connections, in total and per client IP
//! address (`max.connections`, `max.connections.per.ip` and its overrides);
//! a connection over a limit is refused at accept, before any task or
//! buffer exists for it. [`RequestBudget`] is `queued.max.request.bytes`:
//! the bytes of requests read but not yet answered, across all
//! connections. A request's buffer takes budget as it grows (never all at
//! once from the size prefix a client sent) and gives it back when its
//! answer is ready, so a crowd of clients cannot make the broker hold more
//! request bytes than the budget, however large the sizes they announce.

use {
    crate::config::ConnectionSettings,
    std::{
        collections::HashMap,
        net::IpAddr,
        sync::{Arc, Mutex, PoisonError},
    },
    tokio::sync::{OwnedSemaphorePermit, Semaphore},
};

/// Open connections, in total and per client address, with their limits.
#[derive(Debug)]
pub struct ConnectionLimits {
    max: usize,
    per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// `max.connections` connections are open.
    #[error("max.connections ({limit}) reached")]
    Total {
        /// The limit.
        limit: usize,
    },
    /// The client's address holds its limit of connections.
    #[error("{ip} holds its limit of {limit} connections ({setting})")]
    PerIp {
        /// The client's address.
        ip: IpAddr,
        /// The limit that applies to it.
        limit: usize,
        /// The setting the limit came from.
        setting: &'static str,
    },
}

/// One counted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.limits.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionLimits {
    /// The limits of `settings`, with the host names among the overrides
    /// resolved to their addresses.
    ///
    /// # Errors
    ///
    /// The host name that does not resolve.
    pub async fn resolve(settings: &ConnectionSettings) -> Result<Self, String> {
        let mut overrides = HashMap::new();
        for (host, limit) in &settings.max_connections_per_ip_overrides {
            let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                Err(_) => tokio::net::lookup_host((host.as_str(), 0))
                    .await
                    .map_err(|e| {
                        format!("max.connections.per.ip.overrides: cannot resolve {host}: {e}")
                    })?
                    .map(|a| a.ip())
                    .collect(),
            };
            for ip in addresses {
                overrides.insert(ip.to_canonical(), *limit);
            }
        }
        Ok(Self::new(
            settings.max_connections,
            settings.max_connections_per_ip,
            overrides,
        ))
    }

    /// Limits with already resolved overrides.
    #[must_use]
    pub fn new(max: usize, per_ip: usize, overrides: HashMap<IpAddr, usize>) -> Self {
        Self {
            max,
            per_ip,
            overrides: overrides
                .into_iter()
                .map(|(ip, limit)| (ip.to_canonical(), limit))
                .collect(),
            open: Mutex::new(Open::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // The counts stay consistent whatever panicked while holding them.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a new connection from `ip`, or says which limit refuses it.
    ///
    /// # Errors
    ///
    /// [`Refused`] when `max.connections` or the address's limit is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        let ip = ip.to_canonical();
        let (limit, setting) = match self.overrides.get(&ip) {
            Some(&limit) => (limit, "max.connections.per.ip.overrides"),
            None => (self.per_ip, "max.connections.per.ip"),
        };
        let mut open = self.lock();
        if open.total >= self.max {
            return Err(Refused::Total { limit: self.max });
        }
        let from_ip = open.by_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= limit {
            return Err(Refused::PerIp { ip, limit, setting });
        }
        open.total += 1;
        *open.by_ip.entry(ip).or_insert(0) += 1;
        drop(open);
        Ok(ConnectionSlot {
            limits: Arc::clone(self),
            ip,
        })
    }

    /// Connections open now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.lock().total
    }
}

/// `queued.max.request.bytes`: request bytes held across all connections.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    semaphore: Option<Arc<Semaphore>>,
    total: usize,
}

/// Request bytes a connection holds from the [`RequestBudget`]; dropping it
/// gives them back.
#[derive(Debug, Default)]
pub struct BudgetHold {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl BudgetHold {
    /// The bytes held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl RequestBudget {
    /// A budget of `bytes`; `None` is unbounded.
    #[must_use]
    pub fn new(bytes: Option<usize>) -> Self {
        match bytes {
            Some(total) => {
                let total = total.min(Semaphore::MAX_PERMITS);
                Self {
                    semaphore: Some(Arc::new(Semaphore::new(total))),
                    total,
                }
            }
            None => Self {
                semaphore: None,
                total: usize::MAX,
            },
        }
    }

    /// Adds `bytes` to `hold`, waiting until the budget has them. A request
    /// never needs more than the whole budget (`queued.max.request.bytes` is
    /// at least `socket.request.max.bytes`); asking for more is clamped to
    /// it, so the wait always ends once other requests are answered.
    pub async fn grow(&self, hold: &mut BudgetHold, bytes: usize) {
        let Some(semaphore) = &self.semaphore else {
            hold.bytes = hold.bytes.saturating_add(bytes);
            return;
        };
        let wanted = bytes.min(self.total.saturating_sub(hold.bytes));
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX);
        if wanted == 0 {
            return;
        }
        // The semaphore is never closed, so acquiring only waits.
        let Ok(permit) = Arc::clone(semaphore).acquire_many_owned(wanted).await else {
            return;
        };
        hold.bytes += wanted as usize;
        match &mut hold.permit {
            Some(held) => held.merge(permit),
            None => hold.permit = Some(permit),
        }
    }

    /// Bytes held by requests now.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.semaphore
            .as_ref()
            .map_or(0, |s| self.total - s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, std::time::Duration};

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn total_and_per_ip_limits_with_overrides() {
        let overrides = HashMap::from([(ip("10.0.0.2"), 3), (ip("10.0.0.3"), 0)]);
        let limits = Arc::new(ConnectionLimits::new(5, 2, overrides));
        let a1 = limits.admit(ip("10.0.0.1")).unwrap();
        let _a2 = limits.admit(ip("10.0.0.1")).unwrap();
        check!(
            limits.admit(ip("10.0.0.1")).unwrap_err()
                == Refused::PerIp {
                    ip: ip("10.0.0.1"),
                    limit: 2,
                    setting: "max.connections.per.ip"
                }
        );
        // IPv4-mapped IPv6 is the same client.
        check!(limits.admit(ip("::ffff:10.0.0.1")).is_err());
        let b: Vec<_> = (0..3)
            .map(|_| limits.admit(ip("10.0.0.2")).unwrap())
            .collect();
        check!(limits.admit(ip("10.0.0.3")).is_err());
        check!(limits.admit(ip("10.0.0.4")).unwrap_err() == Refused::Total { limit: 5 });
        check!(limits.open() == 5);
        drop(a1);
        check!(limits.open() == 4);
        let _a3 = limits.admit(ip("10.0.0.1")).unwrap();
        drop(b);
        check!(limits.open() == 2);
        check!(limits.admit(ip("10.0.0.4")).is_ok());
    }

    #[tokio::test]
    async fn overrides_resolve_host_names() {
        let settings = ConnectionSettings {
            queued_max_request_bytes: None,
            max_connections: 10,
            max_connections_per_ip: 10,
            max_connections_per_ip_overrides: vec![("localhost".into(), 1)],
            connections_max_idle: Duration::from_secs(1),
            request_read_timeout: Duration::from_secs(1),
            request_read_min_bytes_per_sec: 1,
            send_buffer_bytes: None,
            receive_buffer_bytes: None,
        };
        let limits = Arc::new(ConnectionLimits::resolve(&settings).await.unwrap());
        let _one = limits.admit(ip("127.0.0.1")).unwrap();
        check!(limits.admit(ip("127.0.0.1")).is_err());
        let bad = ConnectionSettings {
            max_connections_per_ip_overrides: vec![("no-such-host.invalid".into(), 1)],
            ..settings
        };
        check!(ConnectionLimits::resolve(&bad).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn budget_waits_and_is_given_back_on_drop() {
        let budget = RequestBudget::new(Some(100));
        let mut first = BudgetHold::default();
        budget.grow(&mut first, 60).await;
        budget.grow(&mut first, 30).await;
        check!(first.bytes() == 90);
        check!(budget.in_use() == 90);
        let mut second = BudgetHold::default();
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move {
                budget.grow(&mut second, 20).await;
                second
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        check!(!waiting.is_finished());
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the budget freed by the first hold reaches the second")
            .unwrap();
        check!(second.bytes() == 20);
        check!(budget.in_use() == 20);
        drop(second);
        check!(budget.in_use() == 0);
        // More than the budget is clamped to it.
        let mut big = BudgetHold::default();
        budget.grow(&mut big, 1000).await;
        check!(big.bytes() == 100);
        let unbounded = RequestBudget::new(None);
        let mut hold = BudgetHold::default();
        unbounded.grow(&mut hold, usize::MAX).await;
        check!(unbounded.in_use() == 0);
    }
}
