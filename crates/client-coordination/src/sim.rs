//! An in-memory cluster behind the generated mock, for the leadership tests.
//!
//! Each member gets its own `MockCoordinationTransport` whose expectations
//! act on one shared [`SimCluster`]: a partition log, the transaction
//! coordinator's current epoch, and the epoch each member's transport minted.
//! The fencing rule is the broker's: a lease write succeeds only under the
//! current epoch. [`Gated`] wraps a transport so a test can freeze a member
//! mid-flight, the way `SIGSTOP` freezes a process.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    error::CoordinationError,
    leadership::{Clock, SystemClock},
    record::{
        CoordinationKey, CoordinationRecord, FencingToken, Lease, MemberId, Registration, Role,
    },
    transport::{CoordinationTransport, MockCoordinationTransport, RoleRecords},
};

/// The shared state of the simulated cluster.
#[derive(Debug, Default)]
pub struct SimState {
    /// The role's partition.
    pub records: RoleRecords,
    /// The coordinator's current epoch.
    pub current: Option<FencingToken>,
    /// Every lease write the "broker" accepted, in order.
    pub accepted: Vec<Lease>,
    /// When set, every call fails with a client error (a network fault).
    pub unreachable: bool,
}

/// The simulated cluster.
#[derive(Debug)]
pub struct SimCluster {
    /// Its state, for assertions.
    pub state: Mutex<SimState>,
    /// Stamps registrations, on tokio's (paused) time.
    clock: SystemClock,
}

const PRODUCER_ID: i64 = 4242;

impl SimCluster {
    /// A new, empty cluster.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::default(),
            clock: SystemClock::new(),
        })
    }

    /// A transport for one member, with its own minted epoch.
    pub fn transport(self: &Arc<Self>) -> MockCoordinationTransport {
        let held: Arc<Mutex<Option<FencingToken>>> = Arc::default();
        let mut mock = MockCoordinationTransport::new();

        let cluster = Arc::clone(self);
        let minted = Arc::clone(&held);
        mock.expect_acquire_epoch().returning(move |_role| {
            let mut state = cluster.state.lock().unwrap();
            check_reachable(&state)?;
            let epoch = state.current.map_or(0, |t| t.epoch().0 + 1);
            let token = FencingToken::new(PRODUCER_ID, epoch)?;
            state.current = Some(token);
            *minted.lock().unwrap() = Some(token);
            Ok(token)
        });

        let cluster = Arc::clone(self);
        mock.expect_read_role_records().returning(move |_role| {
            let state = cluster.state.lock().unwrap();
            check_reachable(&state)?;
            Ok(state.records.clone())
        });

        let cluster = Arc::clone(self);
        mock.expect_register().returning(move |role, member| {
            let mut state = cluster.state.lock().unwrap();
            check_reachable(&state)?;
            let registered_at = cluster.clock.now_ms();
            state.append(
                CoordinationKey::registration(role.clone(), member.clone()),
                CoordinationRecord::Registration(Registration {
                    member: member.clone(),
                    registered_at,
                }),
            );
            Ok(())
        });

        let cluster = Arc::clone(self);
        let minted = Arc::clone(&held);
        mock.expect_write_lease()
            .returning(move |role, token, lease| {
                let mut state = cluster.state.lock().unwrap();
                check_reachable(&state)?;
                if *minted.lock().unwrap() != Some(token) {
                    return Err(CoordinationError::NotHeld {
                        role: role.clone(),
                        token,
                    });
                }
                if state.current != Some(token) {
                    return Err(CoordinationError::Fenced { role: role.clone() });
                }
                state.append(
                    CoordinationKey::lease(role.clone()),
                    CoordinationRecord::Lease(lease.clone()),
                );
                state.accepted.push(lease.clone());
                Ok(())
            });

        let cluster = Arc::clone(self);
        mock.expect_describe().returning(move |_role| {
            let state = cluster.state.lock().unwrap();
            check_reachable(&state)?;
            Ok(state.current)
        });
        mock
    }

    /// Runs `f` on the state.
    pub fn with<R>(&self, f: impl FnOnce(&mut SimState) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    /// The members of the accepted lease writes, deduplicated in order.
    pub fn holders(&self) -> Vec<(String, i16)> {
        let mut out: Vec<(String, i16)> = Vec::new();
        for lease in &self.state.lock().unwrap().accepted {
            let entry = (lease.member.to_string(), lease.token.epoch().0);
            if out.last() != Some(&entry) {
                out.push(entry);
            }
        }
        out
    }
}

impl SimState {
    fn append(&mut self, key: CoordinationKey, record: CoordinationRecord) {
        let offset = self.records.last().map_or(0, |(offset, _, _)| offset + 1);
        self.records.push((offset, key, record));
    }
}

fn check_reachable(state: &SimState) -> Result<(), CoordinationError> {
    if state.unreachable {
        Err(CoordinationError::Client("simulated network fault".into()))
    } else {
        Ok(())
    }
}

/// A transport that a test can freeze: while frozen, every call waits at the
/// gate, like a process under `SIGSTOP`; it resumes where it stopped.
pub struct Gated<T> {
    inner: T,
    open: watch::Receiver<bool>,
}

/// Opens and closes a [`Gated`] transport.
pub struct Gate(watch::Sender<bool>);

impl Gate {
    /// Freezes the member.
    pub fn stop(&self) {
        self.0.send_replace(false);
    }

    /// Lets the member run again.
    pub fn resume(&self) {
        self.0.send_replace(true);
    }
}

/// Wraps `inner` behind an open gate.
pub fn gated<T>(inner: T) -> (Gated<T>, Gate) {
    let (tx, rx) = watch::channel(true);
    (Gated { inner, open: rx }, Gate(tx))
}

impl<T> Gated<T> {
    async fn pass(&self) {
        let mut open = self.open.clone();
        let _ = open.wait_for(|open| *open).await;
    }
}

#[async_trait]
impl<T: CoordinationTransport> CoordinationTransport for Gated<T> {
    async fn acquire_epoch(&self, role: &Role) -> Result<FencingToken, CoordinationError> {
        self.pass().await;
        self.inner.acquire_epoch(role).await
    }

    async fn read_role_records(&self, role: &Role) -> Result<RoleRecords, CoordinationError> {
        self.pass().await;
        self.inner.read_role_records(role).await
    }

    async fn register(&self, role: &Role, member: &MemberId) -> Result<(), CoordinationError> {
        self.pass().await;
        self.inner.register(role, member).await
    }

    async fn write_lease(
        &self,
        role: &Role,
        token: FencingToken,
        lease: &Lease,
    ) -> Result<(), CoordinationError> {
        self.pass().await;
        self.inner.write_lease(role, token, lease).await
    }

    async fn describe(&self, role: &Role) -> Result<Option<FencingToken>, CoordinationError> {
        self.pass().await;
        self.inner.describe(role).await
    }
}
