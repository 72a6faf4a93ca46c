//! A `stateright` model check of shard ownership: lease acquisition,
//! renewal, expiry, pauses and writes, showing that two brokers never both
//! act as owner and that a deposed owner's write never lands.
//!
//! The database is the model's single arbiter, with the crate's rules: a
//! shard can be acquired when free or expired (`now >= expires`), which bumps
//! the epoch and sets `expires = now + duration` on the database's clock; a
//! renewal or write is applied only for the current owner at its epoch while
//! `now < expires`. Brokers follow the crate's own local rule
//! ([`LeaseTiming::local_deadline`], [`LocalLease`]): a grant or renewal sent
//! at local time `t` is trusted until `t + duration - margin`.
//!
//! Every request and reply is a separate step, and any broker may stay
//! silent for any number of ticks between two of its steps — between its
//! check of the lease and its write, say — which is what a `SIGSTOP`, a GC
//! pause or a slow network look like. A broker's monotonic clock may also
//! run slow against the database's by up to `max_lag` ticks over the run;
//! the margin must cover that.
//!
//! Properties:
//! * at most one broker trusts its lease at any moment (so no two serve the
//!   shard from memory);
//! * the database never accepts a write of an epoch older than one it
//!   already accepted (a deposed owner's write never lands after its
//!   successor's);
//! * and, so the check is not vacuous, a failover to another broker and a
//!   refused stale write are both reachable.
//!
//! A second check runs the same model with no margin and a slow clock and
//! expects the first property to fail: the margin is what makes it hold.

use {
    krabka_cluster::{LeaseTiming, LocalLease},
    stateright::{Checker, Model, Property},
    std::{ops::Add, time::Duration},
};

/// A point on a clock, one tick per millisecond of the crate's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Tick(u64);

impl Add<Duration> for Tick {
    type Output = Tick;
    fn add(self, d: Duration) -> Tick {
        Tick(self.0 + d.as_millis() as u64)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Reply {
    Granted { sent_at: Tick, epoch: u8 },
    Renewed { sent_at: Tick },
    Refused,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct Broker {
    /// How far this broker's clock is behind the database's.
    lag: u64,
    /// The lease it trusts (epoch, belief).
    belief: Option<(u8, LocalLease<Tick>)>,
    /// An acquisition or renewal on its way (sent at, epoch to renew).
    request: Option<(Tick, Option<u8>)>,
    /// The database's answer on its way back.
    reply: Option<Reply>,
    /// A write on its way, under this epoch.
    write: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    /// The database's clock.
    now: u64,
    owner: Option<usize>,
    epoch: u8,
    expires: u64,
    brokers: Vec<Broker>,
    /// The highest epoch whose write the database accepted.
    accepted: u8,
    stale_write_accepted: bool,
    stale_write_refused: bool,
    failed_over: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Time passes for the database and for every broker clock.
    Tick,
    /// Time passes for the database and every clock but this broker's.
    SlowTick(usize),
    /// The broker asks for the shard.
    SendAcquire(usize),
    /// The broker asks to renew its lease.
    SendRenew(usize),
    /// The database applies the broker's request.
    Deliver(usize),
    /// The broker reads the database's answer.
    Receive(usize),
    /// The broker checks its lease and sends a write.
    SendWrite(usize),
    /// The database applies the broker's write.
    DeliverWrite(usize),
    /// The broker's lease ran out on its clock: it stops acting as owner.
    LetGo(usize),
}

struct Ownership {
    brokers: usize,
    max_time: u64,
    timing: LeaseTiming,
    max_lag: u64,
}

impl Ownership {
    fn duration(&self) -> u64 {
        self.timing.duration.as_millis() as u64
    }

    fn local_now(&self, state: &State, b: usize) -> Tick {
        Tick(state.now - state.brokers[b].lag)
    }

    fn trusts(&self, state: &State, b: usize) -> bool {
        let now = self.local_now(state, b);
        state.brokers[b]
            .belief
            .is_some_and(|(_, lease)| lease.is_valid_at(now))
    }
}

impl Model for Ownership {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            owner: None,
            epoch: 0,
            expires: 0,
            brokers: vec![Broker::default(); self.brokers],
            accepted: 0,
            stale_write_accepted: false,
            stale_write_refused: false,
            failed_over: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < self.max_time {
            actions.push(Action::Tick);
            for b in 0..self.brokers {
                if state.brokers[b].lag < self.max_lag {
                    actions.push(Action::SlowTick(b));
                }
            }
        }
        for (b, broker) in state.brokers.iter().enumerate() {
            let idle = broker.request.is_none() && broker.reply.is_none();
            if idle && broker.belief.is_none() {
                actions.push(Action::SendAcquire(b));
            }
            if idle && self.trusts(state, b) {
                actions.push(Action::SendRenew(b));
            }
            if broker.request.is_some() {
                actions.push(Action::Deliver(b));
            }
            if broker.reply.is_some() {
                actions.push(Action::Receive(b));
            }
            if broker.write.is_none() && self.trusts(state, b) {
                actions.push(Action::SendWrite(b));
            }
            if broker.write.is_some() {
                actions.push(Action::DeliverWrite(b));
            }
            if broker.belief.is_some() && !self.trusts(state, b) {
                actions.push(Action::LetGo(b));
            }
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        let duration = self.duration();
        match action {
            Action::Tick => next.now += 1,
            Action::SlowTick(b) => {
                next.now += 1;
                next.brokers[b].lag += 1;
            }
            Action::SendAcquire(b) => {
                next.brokers[b].request = Some((self.local_now(state, b), None));
            }
            Action::SendRenew(b) => {
                let (epoch, _) = state.brokers[b].belief?;
                next.brokers[b].request = Some((self.local_now(state, b), Some(epoch)));
            }
            Action::Deliver(b) => {
                let (sent_at, renewing) = next.brokers[b].request.take()?;
                let reply = match renewing {
                    None if state.now >= state.expires => {
                        if state.owner.is_some_and(|o| o != b) {
                            next.failed_over = true;
                        }
                        next.owner = Some(b);
                        next.epoch += 1;
                        next.expires = state.now + duration;
                        Reply::Granted {
                            sent_at,
                            epoch: next.epoch,
                        }
                    }
                    Some(epoch)
                        if state.owner == Some(b)
                            && state.epoch == epoch
                            && state.now < state.expires =>
                    {
                        next.expires = state.now + duration;
                        Reply::Renewed { sent_at }
                    }
                    _ => Reply::Refused,
                };
                next.brokers[b].reply = Some(reply);
            }
            Action::Receive(b) => {
                let broker = &mut next.brokers[b];
                match broker.reply.take()? {
                    Reply::Granted { sent_at, epoch } => {
                        broker.belief = Some((epoch, LocalLease::granted(&self.timing, sent_at)));
                    }
                    Reply::Renewed { sent_at } => {
                        if let Some((epoch, _)) = broker.belief {
                            broker.belief =
                                Some((epoch, LocalLease::granted(&self.timing, sent_at)));
                        }
                    }
                    Reply::Refused => broker.belief = None,
                }
            }
            Action::SendWrite(b) => {
                let (epoch, _) = state.brokers[b].belief?;
                next.brokers[b].write = Some(epoch);
            }
            Action::DeliverWrite(b) => {
                let epoch = next.brokers[b].write.take()?;
                let applies =
                    state.owner == Some(b) && state.epoch == epoch && state.now < state.expires;
                if applies {
                    if epoch < state.accepted {
                        next.stale_write_accepted = true;
                    }
                    next.accepted = next.accepted.max(epoch);
                } else if epoch < state.epoch {
                    next.stale_write_refused = true;
                }
            }
            Action::LetGo(b) => next.brokers[b].belief = None,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "at most one broker trusts its lease",
                |model: &Ownership, s: &State| {
                    (0..model.brokers).filter(|&b| model.trusts(s, b)).count() <= 1
                },
            ),
            Property::always("no stale write lands", |_, s: &State| {
                !s.stale_write_accepted
            }),
            Property::sometimes("the shard fails over", |_, s: &State| s.failed_over),
            Property::sometimes("a deposed owner's write is refused", |_, s: &State| {
                s.stale_write_refused
            }),
        ]
    }
}

fn timing(margin: u64) -> LeaseTiming {
    LeaseTiming {
        duration: Duration::from_millis(3),
        renew_interval: Duration::from_millis(1),
        safety_margin: Duration::from_millis(margin),
    }
}

#[test]
fn two_owners_never_both_act() {
    let model = Ownership {
        brokers: 2,
        max_time: 7,
        timing: timing(1),
        max_lag: 1,
    };
    let checker = model.checker().spawn_bfs().join();
    checker.assert_properties();
    eprintln!("explored {} states", checker.unique_state_count());
}

#[test]
fn without_the_margin_a_slow_clock_splits_the_brain() {
    let model = Ownership {
        brokers: 2,
        max_time: 7,
        timing: LeaseTiming {
            safety_margin: Duration::ZERO,
            ..timing(1)
        },
        max_lag: 1,
    };
    let checker = model.checker().spawn_bfs().join();
    assert!(
        checker
            .discovery("at most one broker trusts its lease")
            .is_some(),
        "a broker whose clock runs slow must be able to outlive its lease without a margin"
    );
    // The database still refuses the deposed owner's write.
    assert!(checker.discovery("no stale write lands").is_none());
}
