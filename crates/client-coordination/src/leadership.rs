//! The API an application uses: campaign for a role, wait until elected,
//! keep the role in the background, resign, and watch leadership change.
//!
//! [`Coordinator::campaign`] registers the member and starts one background
//! task that applies the [`crate::succession`] rules in a loop:
//! as a standby it re-reads the role's records, waits for its challenge time
//! and challenges; as the holder it renews its lease and steps down on the
//! first fence. The [`Campaign`] handle only talks to that task (a watch for
//! the current state, a broadcast for changes, a channel for resign), so the
//! handle is cheap to query and the task owns every decision.
//!
//! Everything is generic over [`CoordinationTransport`], so the whole loop is
//! tested against the mock; [`crate::broker`] adds the transactional producer
//! bound to the epoch for the broker transport.

use std::{sync::Arc, time::Duration};

use futures_util::{StreamExt as _, stream::BoxStream};
use tokio::{
    sync::{broadcast, mpsc, oneshot, watch},
    task::JoinHandle,
    time::Instant,
};
use tracing::{debug, info, warn};

use crate::{
    error::CoordinationError,
    record::{FencingToken, Lease, MemberId, Role},
    succession::{self, AfterFailure, HolderStep, StandbyStep, Timing},
    transport::{CoordinationTransport, RoleRecords},
};

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// Lease deadlines are compared across members, so they are wall-clock
/// times; the clock is a trait so a test can run on tokio's paused time.
pub trait Clock: Send + Sync + 'static {
    /// The current time (ms since the Unix epoch).
    fn now_ms(&self) -> i64;
}

/// The wall clock read once at creation, advanced by tokio's monotonic clock.
///
/// A wall clock that jumps (NTP step) would move every deadline a member
/// computes; anchoring once and advancing monotonically keeps a member's own
/// schedule steady, and under tokio's paused test time it advances with the
/// test.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    anchor_ms: i64,
    anchor: Instant,
}

impl SystemClock {
    /// Anchors the clock at the current wall-clock time.
    #[must_use]
    pub fn new() -> Self {
        let anchor_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
            });
        Self {
            anchor_ms,
            anchor: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.anchor.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.anchor_ms.saturating_add(elapsed)
    }
}

/// One change in a member's view of a role, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeadershipChange {
    /// The member appended its registration and stands in the line.
    Registered,
    /// The member took the role under `token`.
    Elected {
        /// The new epoch.
        token: FencingToken,
        /// The deadline of the first lease (ms).
        deadline: i64,
    },
    /// The holder renewed its lease.
    Renewed {
        /// The epoch, unchanged.
        token: FencingToken,
        /// The new deadline (ms).
        deadline: i64,
    },
    /// The broker fenced the holder: another member took the role.
    Deposed {
        /// The epoch that was lost.
        token: FencingToken,
    },
    /// The holder could not renew before its deadline and stepped down.
    Expired {
        /// The epoch whose lease ran out.
        token: FencingToken,
    },
    /// The holder resigned.
    Resigned {
        /// The epoch it gave up.
        token: FencingToken,
    },
    /// A standby saw a live lease it had not seen before.
    LeaderObserved {
        /// The holder named by the lease.
        member: MemberId,
        /// The holder's epoch.
        token: FencingToken,
        /// The lease's deadline (ms).
        deadline: i64,
    },
}

/// The stream of a campaign's [`LeadershipChange`]s, from [`Campaign::changes`].
pub type LeadershipChanges = BoxStream<'static, LeadershipChange>;

/// Where a member stands right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberState {
    /// Waiting in the line (or about to register).
    Standby,
    /// Holding the role.
    Leader {
        /// The member's epoch.
        token: FencingToken,
        /// The deadline of its latest lease (ms).
        deadline: i64,
    },
    /// The campaign ended (resigned or dropped).
    Stopped,
}

/// What a third party learns about a writer's token from [`Coordinator::authority`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// The token is the role's current epoch.
    Current,
    /// A later epoch holds the role; writes under the token are fenced.
    Superseded {
        /// The role's current token.
        current: FencingToken,
    },
    /// The coordinator knows no holder at or after the token.
    Unknown,
}

/// The entry point: campaigns for roles and answers questions about them.
pub struct Coordinator<T> {
    transport: Arc<T>,
    timing: Timing,
    poll: Duration,
    clock: Arc<dyn Clock>,
}

impl<T> std::fmt::Debug for Coordinator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("timing", &self.timing)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

/// How often a standby re-reads the role's records by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

impl<T: CoordinationTransport + 'static> Coordinator<T> {
    /// A coordinator over `transport` with the given lease timing, the
    /// [`SystemClock`] and [`DEFAULT_POLL_INTERVAL`].
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when `timing` does not pass
    /// [`Timing::validate`].
    pub fn new(transport: Arc<T>, timing: Timing) -> Result<Self, CoordinationError> {
        timing.validate()?;
        Ok(Self {
            transport,
            timing,
            poll: DEFAULT_POLL_INTERVAL,
            clock: Arc::new(SystemClock::new()),
        })
    }

    /// Replaces the clock (tests, or an application with its own time source).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets how often a standby re-reads the role's records; a zero interval
    /// is raised to one millisecond.
    #[must_use]
    pub fn with_poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The transport the coordinator uses.
    #[must_use]
    pub fn transport(&self) -> &Arc<T> {
        &self.transport
    }

    /// The lease timing.
    #[must_use]
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The token that holds `role` now, from the transaction coordinator, in
    /// one request and without joining anything.
    ///
    /// # Errors
    ///
    /// Returns what [`CoordinationTransport::describe`] returns.
    pub async fn describe(&self, role: &Role) -> Result<Option<FencingToken>, CoordinationError> {
        self.transport.describe(role).await
    }

    /// Checks a writer's `token` against the current epoch of `role`.
    ///
    /// # Errors
    ///
    /// Returns what [`CoordinationTransport::describe`] returns.
    pub async fn authority(
        &self,
        role: &Role,
        token: FencingToken,
    ) -> Result<Authority, CoordinationError> {
        Ok(match self.transport.describe(role).await? {
            Some(current) if current == token => Authority::Current,
            Some(current) if current > token => Authority::Superseded { current },
            _ => Authority::Unknown,
        })
    }

    /// Registers `member` for `role` and starts campaigning in the background.
    ///
    /// Every campaign starts with a fresh registration, so a member that
    /// restarts joins the line at its tail. The campaign runs until
    /// [`Campaign::resign`] or until the handle is dropped; dropping a holder's
    /// handle stops its renewals, and a standby takes over once the lease
    /// runs out.
    ///
    /// A transport keeps one epoch per role, so run at most one campaign per
    /// role on one transport.
    ///
    /// # Errors
    ///
    /// Returns what [`CoordinationTransport::register`] returns for the first
    /// registration; later failures are logged and retried by the task.
    pub async fn campaign(
        &self,
        role: Role,
        member: MemberId,
    ) -> Result<Campaign<T>, CoordinationError> {
        self.transport.register(&role, &member).await?;
        let (status_tx, status_rx) = watch::channel(MemberState::Standby);
        let (changes_tx, first_changes) = broadcast::channel(256);
        let (commands_tx, commands_rx) = mpsc::channel(4);
        let _ = changes_tx.send(LeadershipChange::Registered);
        let runner = Runner {
            transport: Arc::clone(&self.transport),
            role: role.clone(),
            member: member.clone(),
            timing: self.timing,
            poll_ms: i64::try_from(self.poll.as_millis()).unwrap_or(i64::MAX),
            clock: Arc::clone(&self.clock),
            status: status_tx,
            changes: changes_tx.clone(),
            commands: commands_rx,
            observed: None,
        };
        info!(%role, %member, "campaign started");
        let task = tokio::spawn(runner.run());
        Ok(Campaign {
            role,
            member,
            transport: Arc::clone(&self.transport),
            status: status_rx,
            changes: changes_tx,
            first_changes: std::sync::Mutex::new(Some(first_changes)),
            commands: commands_tx,
            task: Some(task),
        })
    }
}

/// A member's campaign for a role; the background task renews while it holds.
///
/// Dropping the handle stops the campaign without writing anything.
pub struct Campaign<T> {
    role: Role,
    member: MemberId,
    transport: Arc<T>,
    status: watch::Receiver<MemberState>,
    changes: broadcast::Sender<LeadershipChange>,
    first_changes: std::sync::Mutex<Option<broadcast::Receiver<LeadershipChange>>>,
    commands: mpsc::Sender<Command>,
    task: Option<JoinHandle<()>>,
}

impl<T> std::fmt::Debug for Campaign<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Campaign")
            .field("role", &self.role)
            .field("member", &self.member)
            .field("state", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

enum Command {
    Resign(oneshot::Sender<Result<(), CoordinationError>>),
    /// A write under the token outside the task was fenced.
    Fenced(FencingToken),
}

/// Tells a campaign's task that a write under its token was fenced, so the
/// holder steps down at once instead of at its next renewal.
#[derive(Debug, Clone)]
pub(crate) struct FenceReporter {
    commands: mpsc::Sender<Command>,
}

impl FenceReporter {
    /// Passes `error` on when it is a fence of `token`.
    pub(crate) fn report(&self, token: FencingToken, error: &CoordinationError) {
        if error.is_fenced() {
            // A full channel means the task is busy with commands already;
            // its next renewal meets the same fence.
            let _ = self.commands.try_send(Command::Fenced(token));
        }
    }
}

impl<T: CoordinationTransport + 'static> Campaign<T> {
    /// The role campaigned for.
    #[must_use]
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The campaigning member.
    #[must_use]
    pub fn member(&self) -> &MemberId {
        &self.member
    }

    /// The transport the campaign writes through.
    #[must_use]
    pub fn transport(&self) -> &Arc<T> {
        &self.transport
    }

    /// Where the member stands now.
    #[must_use]
    pub fn state(&self) -> MemberState {
        self.status.borrow().clone()
    }

    /// The member's fencing token while it holds the role.
    #[must_use]
    pub fn token(&self) -> Option<FencingToken> {
        match *self.status.borrow() {
            MemberState::Leader { token, .. } => Some(token),
            MemberState::Standby | MemberState::Stopped => None,
        }
    }

    /// Waits until the member holds the role and returns its token; returns
    /// at once when it holds the role already.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Stopped`] when the campaign ends first.
    pub async fn elected(&self) -> Result<FencingToken, CoordinationError> {
        let mut status = self.status.clone();
        let stopped = || CoordinationError::Stopped {
            role: self.role.clone(),
        };
        let state = status
            .wait_for(|state| !matches!(state, MemberState::Standby))
            .await
            .map_err(|_| stopped())?;
        match *state {
            MemberState::Leader { token, .. } => Ok(token),
            MemberState::Standby | MemberState::Stopped => Err(stopped()),
        }
    }

    /// Waits until the member no longer holds the role (deposed, expired,
    /// resigned or stopped); returns at once when it does not hold it.
    pub async fn lost(&self) {
        let mut status = self.status.clone();
        let _ = status
            .wait_for(|state| !matches!(state, MemberState::Leader { .. }))
            .await;
    }

    /// The stream of leadership changes.
    ///
    /// The first call sees every change since the campaign started (from the
    /// initial [`LeadershipChange::Registered`]); later calls see the changes
    /// after the call. A subscriber that falls more than 256 changes behind
    /// skips the oldest. The stream ends when the campaign stops.
    pub fn changes(&self) -> LeadershipChanges {
        let receiver = self
            .first_changes
            .lock()
            .ok()
            .and_then(|mut first| first.take())
            .unwrap_or_else(|| self.changes.subscribe());
        futures_util::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(change) => return Some((change, receiver)),
                    Err(broadcast::error::RecvError::Lagged(skipped)) => {
                        debug!(skipped, "leadership change subscriber lagged");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .boxed()
    }

    /// Tells the campaign that a write the application made under `token`
    /// failed with `error`. A fence ([`CoordinationError::is_fenced`]) makes
    /// the holder step down at once ([`LeadershipChange::Deposed`]) instead
    /// of at its next renewal; any other error, or a token the member no
    /// longer holds, is ignored.
    pub fn report_write_error(&self, token: FencingToken, error: &CoordinationError) {
        self.fence_reporter().report(token, error);
    }

    pub(crate) fn fence_reporter(&self) -> FenceReporter {
        FenceReporter {
            commands: self.commands.clone(),
        }
    }

    /// Ends the campaign. A holder first writes a released lease (deadline
    /// now) under its epoch, so the head of the line challenges at once
    /// instead of waiting for the deadline.
    ///
    /// The member's registration stays in the log (the seam has no way to
    /// withdraw it); it only costs the members behind it one stagger each.
    ///
    /// # Errors
    ///
    /// Returns the error of the released-lease write; the campaign has
    /// stopped either way.
    pub async fn resign(mut self) -> Result<(), CoordinationError> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let outcome = if self.commands.send(Command::Resign(reply_tx)).await.is_ok() {
            reply_rx.await.unwrap_or(Ok(()))
        } else {
            Ok(())
        };
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        outcome
    }
}

impl<T> Drop for Campaign<T> {
    fn drop(&mut self) {
        // The task notices the closed command channel and stops at its next
        // wait; aborting also stops it mid-request, which is just as safe
        // (the broker fences whatever a later member does).
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

enum Phase {
    Standby,
    Leader(Lease),
}

/// The background task of one campaign.
struct Runner<T> {
    transport: Arc<T>,
    role: Role,
    member: MemberId,
    timing: Timing,
    poll_ms: i64,
    clock: Arc<dyn Clock>,
    status: watch::Sender<MemberState>,
    changes: broadcast::Sender<LeadershipChange>,
    commands: mpsc::Receiver<Command>,
    /// The latest live lease reported by `LeaderObserved` (or our own).
    observed: Option<(MemberId, FencingToken)>,
}

impl<T: CoordinationTransport + 'static> Runner<T> {
    async fn run(mut self) {
        let mut phase = Phase::Standby;
        loop {
            let (next, wake_at) = match phase {
                Phase::Standby => self.standby_round().await,
                Phase::Leader(lease) => self.holder_round(lease).await,
            };
            phase = next;
            let delay = wake_at
                .saturating_sub(self.clock.now_ms())
                .clamp(0, self.poll_ms);
            let delay = Duration::from_millis(u64::try_from(delay).unwrap_or(0));
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                command = self.commands.recv() => match command {
                    Some(Command::Fenced(token)) => {
                        if matches!(&phase, Phase::Leader(lease) if lease.token == token) {
                            info!(role = %self.role, member = %self.member, %token, "deposed (an application write was fenced)");
                            self.status.send_replace(MemberState::Standby);
                            self.emit(LeadershipChange::Deposed { token });
                            phase = Phase::Standby;
                        }
                    }
                    Some(Command::Resign(reply)) => {
                        let outcome = self.resign(&phase).await;
                        let _ = reply.send(outcome);
                        break;
                    }
                    None => break,
                }
            }
        }
        self.status.send_replace(MemberState::Stopped);
        info!(role = %self.role, member = %self.member, "campaign stopped");
    }

    fn emit(&self, change: LeadershipChange) {
        debug!(role = %self.role, member = %self.member, ?change, "leadership change");
        let _ = self.changes.send(change);
    }

    fn observe(&mut self, records: &RoleRecords, now: i64) {
        if let Some(lease) = succession::live_lease(records, now) {
            let seen = (lease.member.clone(), lease.token);
            if self.observed.as_ref() != Some(&seen) {
                self.emit(LeadershipChange::LeaderObserved {
                    member: lease.member.clone(),
                    token: lease.token,
                    deadline: lease.deadline,
                });
                self.observed = Some(seen);
            }
        }
    }

    async fn standby_round(&mut self) -> (Phase, i64) {
        let now = self.clock.now_ms();
        let records = match self.transport.read_role_records(&self.role).await {
            Ok(records) => records,
            Err(error) => {
                warn!(role = %self.role, member = %self.member, %error, "cannot read the role's records");
                return (Phase::Standby, now.saturating_add(self.poll_ms));
            }
        };
        self.observe(&records, now);
        match succession::standby_step(&records, &self.member, now, &self.timing) {
            StandbyStep::Register => {
                match self.transport.register(&self.role, &self.member).await {
                    Ok(()) => self.emit(LeadershipChange::Registered),
                    Err(error) => {
                        warn!(role = %self.role, member = %self.member, %error, "registration failed")
                    }
                }
                (Phase::Standby, now.saturating_add(self.poll_ms))
            }
            StandbyStep::Wait { until } => (Phase::Standby, until),
            StandbyStep::Challenge => self.challenge().await,
        }
    }

    async fn challenge(&mut self) -> (Phase, i64) {
        let token = match self.transport.acquire_epoch(&self.role).await {
            Ok(token) => token,
            Err(error) => {
                warn!(role = %self.role, member = %self.member, %error, "cannot mint an epoch");
                return (
                    Phase::Standby,
                    self.clock.now_ms().saturating_add(self.poll_ms),
                );
            }
        };
        let now = self.clock.now_ms();
        let lease = succession::grant(&self.member, token, now, &self.timing);
        match self.transport.write_lease(&self.role, token, &lease).await {
            Ok(()) => {
                info!(role = %self.role, member = %self.member, %token, "elected");
                self.observed = Some((self.member.clone(), token));
                self.status.send_replace(MemberState::Leader {
                    token,
                    deadline: lease.deadline,
                });
                self.emit(LeadershipChange::Elected {
                    token,
                    deadline: lease.deadline,
                });
                let wake = lease
                    .granted_at
                    .saturating_add(self.timing.renew_after_ms());
                (Phase::Leader(lease), wake)
            }
            Err(error) => {
                // Most often a later challenger fenced this epoch already.
                info!(role = %self.role, member = %self.member, %error, "challenge lost");
                (Phase::Standby, now.saturating_add(self.poll_ms))
            }
        }
    }

    async fn holder_round(&mut self, lease: Lease) -> (Phase, i64) {
        let now = self.clock.now_ms();
        match succession::holder_step(&lease, now, &self.timing) {
            HolderStep::Wait { until } => (Phase::Leader(lease), until),
            HolderStep::Renew => {
                let fresh = succession::grant(&self.member, lease.token, now, &self.timing);
                match self
                    .transport
                    .write_lease(&self.role, lease.token, &fresh)
                    .await
                {
                    Ok(()) => {
                        self.status.send_replace(MemberState::Leader {
                            token: fresh.token,
                            deadline: fresh.deadline,
                        });
                        self.emit(LeadershipChange::Renewed {
                            token: fresh.token,
                            deadline: fresh.deadline,
                        });
                        let wake = fresh
                            .granted_at
                            .saturating_add(self.timing.renew_after_ms());
                        (Phase::Leader(fresh), wake)
                    }
                    Err(error) => self.renewal_failed(lease, &error),
                }
            }
        }
    }

    fn renewal_failed(&mut self, lease: Lease, error: &CoordinationError) -> (Phase, i64) {
        let now = self.clock.now_ms();
        let token = lease.token;
        match succession::after_write_failure(error, &lease, now) {
            AfterFailure::Retry => {
                warn!(role = %self.role, member = %self.member, %error, "renewal failed, retrying");
                (Phase::Leader(lease), now.saturating_add(self.poll_ms))
            }
            AfterFailure::Deposed => {
                info!(role = %self.role, member = %self.member, %token, %error, "deposed");
                self.status.send_replace(MemberState::Standby);
                self.emit(LeadershipChange::Deposed { token });
                (Phase::Standby, now)
            }
            AfterFailure::Expired => {
                warn!(role = %self.role, member = %self.member, %token, %error, "lease expired");
                self.status.send_replace(MemberState::Standby);
                self.emit(LeadershipChange::Expired { token });
                (Phase::Standby, now)
            }
        }
    }

    async fn resign(&mut self, phase: &Phase) -> Result<(), CoordinationError> {
        let Phase::Leader(lease) = phase else {
            return Ok(());
        };
        let released = succession::release(lease, self.clock.now_ms());
        let outcome = self
            .transport
            .write_lease(&self.role, lease.token, &released)
            .await;
        self.status.send_replace(MemberState::Stopped);
        self.emit(LeadershipChange::Resigned { token: lease.token });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use assert2::{assert, check};
    use futures_util::StreamExt;

    use super::*;
    use crate::{
        sim::{SimCluster, gated},
        succession,
    };

    fn role() -> Role {
        Role::new("controller").unwrap()
    }

    fn m(name: &str) -> MemberId {
        MemberId::new(name).unwrap()
    }

    fn timing() -> Timing {
        Timing {
            lease: Duration::from_millis(1_000),
            stagger: Duration::from_millis(200),
            renew_after: Duration::from_millis(300),
        }
    }

    fn coordinator<T: CoordinationTransport + 'static>(transport: T) -> Coordinator<T> {
        Coordinator::new(Arc::new(transport), timing())
            .unwrap()
            .with_poll_interval(Duration::from_millis(50))
    }

    async fn campaign(
        cluster: &Arc<SimCluster>,
        name: &str,
    ) -> Campaign<crate::transport::MockCoordinationTransport> {
        coordinator(cluster.transport())
            .campaign(role(), m(name))
            .await
            .unwrap()
    }

    async fn pass(millis: u64) {
        tokio::time::sleep(Duration::from_millis(millis)).await;
    }

    fn line(cluster: &SimCluster) -> Vec<String> {
        cluster.with(|state| {
            succession::line(&state.records)
                .into_iter()
                .map(|candidate| candidate.member.to_string())
                .collect()
        })
    }

    fn holders(list: &[(&str, i16)]) -> Vec<(String, i16)> {
        list.iter().map(|(m, e)| ((*m).to_owned(), *e)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_member_is_elected_and_keeps_renewing() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let mut changes = a.changes();
        let token = a.elected().await.unwrap();
        check!(token == FencingToken::new(4242, 0).unwrap());
        check!(a.token() == Some(token));
        pass(5_000).await;
        check!(a.token() == Some(token));
        check!(cluster.holders() == holders(&[("a", 0)]));
        // A renewal every 300 ms over 5 s, and never a lapse.
        let accepted = cluster.with(|state| state.accepted.clone());
        check!(accepted.len() > 10);
        for pair in accepted.windows(2) {
            check!(pair[1].granted_at < pair[0].deadline);
        }
        check!(changes.next().await == Some(LeadershipChange::Registered));
        assert!(let Some(LeadershipChange::Elected { .. }) = changes.next().await);
        assert!(let Some(LeadershipChange::Renewed { .. }) = changes.next().await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_head_of_the_line_is_elected_and_the_others_wait() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let b = campaign(&cluster, "b").await;
        let c = campaign(&cluster, "c").await;
        a.elected().await.unwrap();
        pass(3_000).await;
        check!(cluster.holders() == holders(&[("a", 0)]));
        check!(b.state() == MemberState::Standby);
        check!(c.token() == None);
        check!(line(&cluster) == ["b", "c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_frozen_holder_is_replaced_and_fenced_when_it_resumes() {
        let cluster = SimCluster::new();
        let (transport, gate) = gated(cluster.transport());
        let a = coordinator(transport)
            .campaign(role(), m("a"))
            .await
            .unwrap();
        let mut a_changes = a.changes();
        a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        let c = campaign(&cluster, "c").await;
        pass(500).await;

        // SIGSTOP the holder past its lease: the head of the line takes over.
        gate.stop();
        let b_token = b.elected().await.unwrap();
        check!(b_token.epoch().0 == 1);
        check!(a.token().is_some(), "a is frozen and does not know yet");

        // SIGCONT: the frozen renewal runs into the fence and a steps down.
        gate.resume();
        a.lost().await;
        check!(a.token() == None);
        let mut seen = Vec::new();
        while let Some(change) = a_changes.next().await {
            let deposed = matches!(change, LeadershipChange::Deposed { .. });
            seen.push(change);
            if deposed {
                break;
            }
        }
        check!(seen.contains(&LeadershipChange::Deposed {
            token: FencingToken::new(4242, 0).unwrap()
        }));

        // a registers again and waits at the tail, behind c: no failback.
        pass(2_000).await;
        check!(line(&cluster) == ["c", "a"]);
        check!(b.token() == Some(b_token));
        check!(c.state() == MemberState::Standby);
        check!(cluster.holders() == holders(&[("a", 0), ("b", 1)]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_killed_holder_is_replaced_within_lease_plus_stagger() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        pass(700).await;
        drop(a); // kill -9
        let last_deadline = cluster.with(|state| state.accepted.last().unwrap().deadline);
        b.elected().await.unwrap();
        let taken_at = cluster.with(|state| state.accepted.last().unwrap().granted_at);
        // Rank 0 challenges at the deadline; it notices within one poll.
        check!(taken_at >= last_deadline);
        check!(taken_at <= last_deadline + 200 + 50);
        check!(cluster.holders() == holders(&[("a", 0), ("b", 1)]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_recovered_member_rejoins_at_the_tail_and_never_fails_back() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        let c = campaign(&cluster, "c").await;
        drop(a);
        b.elected().await.unwrap();

        // a comes back: a new campaign is a fresh registration at the tail.
        let a = campaign(&cluster, "a").await;
        check!(line(&cluster) == ["c", "a"]);
        pass(3_000).await;
        check!(a.state() == MemberState::Standby);
        check!(cluster.holders() == holders(&[("a", 0), ("b", 1)]));

        // When b dies, c goes first, and a is next in line.
        drop(b);
        c.elected().await.unwrap();
        pass(1_000).await;
        check!(a.state() == MemberState::Standby);
        check!(cluster.holders() == holders(&[("a", 0), ("b", 1), ("c", 2)]));
    }

    #[tokio::test(start_paused = true)]
    async fn resigning_hands_the_role_over_before_the_deadline() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let a_token = a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        let mut a_changes = a.changes();
        pass(100).await;
        let deadline = cluster.with(|state| state.accepted.last().unwrap().deadline);
        a.resign().await.unwrap();
        b.elected().await.unwrap();
        let taken_at = cluster.with(|state| state.accepted.last().unwrap().granted_at);
        check!(taken_at < deadline);
        let mut seen = Vec::new();
        while let Some(change) = a_changes.next().await {
            seen.push(change);
        }
        check!(seen.last() == Some(&LeadershipChange::Resigned { token: a_token }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_cut_off_from_the_cluster_steps_down_at_its_deadline() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let mut changes = a.changes();
        let token = a.elected().await.unwrap();
        cluster.with(|state| state.unreachable = true);
        a.lost().await;
        let mut seen = Vec::new();
        while let Some(change) = changes.next().await {
            let expired = matches!(change, LeadershipChange::Expired { .. });
            seen.push(change);
            if expired {
                break;
            }
        }
        check!(seen.last() == Some(&LeadershipChange::Expired { token }));

        // Back on the network, the lone member registers again and wins a new epoch.
        cluster.with(|state| state.unreachable = false);
        let again = a.elected().await.unwrap();
        check!(again > token);
    }

    #[tokio::test(start_paused = true)]
    async fn a_third_party_checks_a_writers_token() {
        let cluster = SimCluster::new();
        let observer = coordinator(cluster.transport());
        check!(observer.describe(&role()).await.unwrap() == None);
        let a = campaign(&cluster, "a").await;
        let a_token = a.elected().await.unwrap();
        check!(observer.describe(&role()).await.unwrap() == Some(a_token));
        check!(observer.authority(&role(), a_token).await.unwrap() == Authority::Current);
        let b = campaign(&cluster, "b").await;
        drop(a);
        let b_token = b.elected().await.unwrap();
        check!(
            observer.authority(&role(), a_token).await.unwrap()
                == Authority::Superseded { current: b_token }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_reports_the_leader_it_sees() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let a_token = a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        let mut changes = b.changes();
        check!(changes.next().await == Some(LeadershipChange::Registered));
        assert!(let Some(LeadershipChange::LeaderObserved { member, token, .. }) = changes.next().await);
        check!(member == m("a"));
        check!(token == a_token);
    }

    #[tokio::test]
    async fn elected_fails_once_the_campaign_stopped() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        a.elected().await.unwrap();
        let b = campaign(&cluster, "b").await;
        let mut b_status = b.status.clone();
        b.commands
            .send(Command::Resign(oneshot::channel().0))
            .await
            .unwrap();
        let _ = b_status
            .wait_for(|state| *state == MemberState::Stopped)
            .await;
        let error = b.elected().await.unwrap_err();
        check!(error.to_string() == "the campaign for role controller has stopped");
    }

    /// The holder's path scripted call by call on the bare mock: elected,
    /// its first renewal is fenced, it writes nothing more under that token,
    /// and it registers again because the rules put it out of the line.
    #[tokio::test(start_paused = true)]
    async fn the_holder_steps_down_on_the_first_fence_and_registers_again() {
        use crate::{
            record::{CoordinationKey, CoordinationRecord, Registration},
            transport::MockCoordinationTransport,
        };
        let registration = |offset: i64, member: &str| {
            (
                offset,
                CoordinationKey::registration(role(), m(member)),
                CoordinationRecord::Registration(Registration {
                    member: m(member),
                    registered_at: 0,
                }),
            )
        };
        let lease = |offset: i64, member: &str, epoch: i16| {
            (
                offset,
                CoordinationKey::lease(role()),
                CoordinationRecord::Lease(Lease {
                    member: m(member),
                    token: FencingToken::new(4242, epoch).unwrap(),
                    granted_at: 0,
                    // b's lease outlives the test, so a only waits.
                    deadline: i64::MAX / 2,
                }),
            )
        };
        let after_fence = vec![
            registration(0, "a"),
            registration(1, "b"),
            lease(2, "a", 0),
            lease(3, "b", 1),
        ];
        let mut at_tail = after_fence.clone();
        at_tail.push(registration(4, "a"));

        let mut mock = MockCoordinationTransport::new();
        let mut order = mockall::Sequence::new();
        mock.expect_register()
            .times(1)
            .in_sequence(&mut order)
            .returning(|_, _| Ok(()));
        let first_read = vec![registration(0, "a")];
        mock.expect_read_role_records()
            .times(1)
            .in_sequence(&mut order)
            .returning(move |_| Ok(first_read.clone()));
        mock.expect_acquire_epoch()
            .times(1)
            .in_sequence(&mut order)
            .returning(|_| Ok(FencingToken::new(4242, 0).unwrap()));
        mock.expect_write_lease()
            .times(1)
            .in_sequence(&mut order)
            .returning(|_, _, _| Ok(()));
        mock.expect_write_lease()
            .times(1)
            .in_sequence(&mut order)
            .returning(|role, _, _| Err(CoordinationError::Fenced { role: role.clone() }));
        mock.expect_read_role_records()
            .times(1)
            .in_sequence(&mut order)
            .returning(move |_| Ok(after_fence.clone()));
        mock.expect_register()
            .times(1)
            .in_sequence(&mut order)
            .returning(|_, _| Ok(()));
        mock.expect_read_role_records()
            .returning(move |_| Ok(at_tail.clone()));

        let a = coordinator(mock).campaign(role(), m("a")).await.unwrap();
        let mut changes = a.changes();
        let token = FencingToken::new(4242, 0).unwrap();
        let mut seen = Vec::new();
        while let Some(change) = changes.next().await {
            seen.push(change);
            if seen.len() == 5 {
                break;
            }
        }
        // A mock call out of order would panic the task and end the stream early.
        check!(
            seen == [
                LeadershipChange::Registered,
                LeadershipChange::Elected {
                    token,
                    deadline: seen
                        .iter()
                        .find_map(|c| match c {
                            LeadershipChange::Elected { deadline, .. } => Some(*deadline),
                            _ => None,
                        })
                        .unwrap(),
                },
                LeadershipChange::Deposed { token },
                LeadershipChange::LeaderObserved {
                    member: m("b"),
                    token: FencingToken::new(4242, 1).unwrap(),
                    deadline: i64::MAX / 2,
                },
                LeadershipChange::Registered,
            ]
        );
        pass(2_000).await;
        check!(a.state() == MemberState::Standby);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fenced_application_write_deposes_the_holder_at_once() {
        let cluster = SimCluster::new();
        let a = campaign(&cluster, "a").await;
        let token = a.elected().await.unwrap();
        let mut changes = a.changes();
        // Another process minted a later epoch; the application's write met the fence.
        let rogue = cluster.transport();
        rogue.acquire_epoch(&role()).await.unwrap();
        // Cut the holder off, so its own renewals could only ever end in
        // `Expired` at the deadline: a `Deposed` can only come from the report.
        cluster.with(|state| state.unreachable = true);
        a.report_write_error(token, &CoordinationError::Client("reset".into()));
        a.report_write_error(
            FencingToken::new(4242, 9).unwrap(),
            &CoordinationError::Fenced { role: role() },
        );
        check!(
            a.token() == Some(token),
            "other errors and other tokens change nothing"
        );
        a.report_write_error(token, &CoordinationError::Fenced { role: role() });
        a.lost().await;
        let mut seen = Vec::new();
        while let Some(change) = changes.next().await {
            let deposed = matches!(
                change,
                LeadershipChange::Deposed { .. } | LeadershipChange::Expired { .. }
            );
            seen.push(change);
            if deposed {
                break;
            }
        }
        check!(seen.last() == Some(&LeadershipChange::Deposed { token }));
        check!(
            !seen
                .iter()
                .any(|change| matches!(change, LeadershipChange::Expired { .. }))
        );
    }

    #[test]
    fn invalid_timing_is_refused() {
        let cluster = SimCluster::new();
        let bad = Timing {
            renew_after: Duration::from_secs(5),
            ..timing()
        };
        check!(Coordinator::new(Arc::new(cluster.transport()), bad).is_err());
    }
}
