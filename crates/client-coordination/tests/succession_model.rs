//! A `stateright` model check of the succession rules under crashes and
//! recoveries.
//!
//! The model drives the crate's own pure rules (`succession::standby_step`,
//! `holder_step`, `grant`, `line`) over a real `RoleRecords` log, and plays
//! the broker's part itself: one epoch counter that every challenge bumps, and
//! a lease write that succeeds only under the current epoch. Time advances
//! one millisecond per `Tick`, and any member may fall silent for any number
//! of ticks, which covers a paused (`SIGSTOP`) process; `Crash` wipes a
//! member's memory and `Recover` restarts it the way a new campaign does, by
//! registering again.
//!
//! A standby's read of the log and its challenge are one step here; in the
//! real system a holder can renew between the two, and then the broker's
//! fence — the first property — is what keeps the role safe.
//!
//! Properties:
//! * at most one member holds an unfenced epoch;
//! * a recovered member never preempts a live lease of the current holder;
//! * the accepted leases carry non-decreasing epochs, each epoch one member's
//!   (no two members complete a fenced write in the same epoch window);
//! * and, so the check is not vacuous, a failover and a recovered member's
//!   election are both reachable.

use std::time::Duration;

use krabka_client_coordination::{
    record::{
        CoordinationKey, CoordinationRecord, FencingToken, Lease, MemberId, Registration, Role,
    },
    succession::{self, HolderStep, StandbyStep, Timing},
    transport::RoleRecords,
};
use stateright::{Checker, Model, Property};

const MEMBERS: usize = 3;
const MAX_TIME: i64 = 5;
const MAX_CRASHES: u8 = 1;
const MAX_RECORDS: usize = 6;
/// Two standbys can fence each other's fresh epochs forever without writing
/// anything (a liveness matter the poll interval settles in practice), so the
/// epoch counter needs its own bound.
const MAX_EPOCH: i16 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Phase {
    /// Crashed: no memory, takes no step until it recovers.
    Down,
    /// Waiting in the line (or about to register).
    Standby { recovered: bool },
    /// Minted `epoch`, has not written its first lease yet.
    Challenging { epoch: i16, recovered: bool },
    /// Believes it holds the role under `lease`.
    Leader { lease: Lease, recovered: bool },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    now: i64,
    records: RoleRecords,
    /// The coordinator's current epoch for the role.
    current: Option<i16>,
    members: Vec<Phase>,
    crashes: u8,
    /// Set when a recovered member challenged a live lease of another member.
    preempted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Tick,
    Crash(usize),
    Recover(usize),
    /// A standby reads the log and acts on the rules (register or challenge).
    StandbyStep(usize),
    /// A challenger writes its first lease.
    WriteFirstLease(usize),
    /// A holder renews its lease.
    Renew(usize),
}

struct Succession {
    timing: Timing,
}

fn role() -> Role {
    Role::new("controller").unwrap()
}

fn member(index: usize) -> MemberId {
    MemberId::new(["a", "b", "c"][index]).unwrap()
}

fn token(epoch: i16) -> FencingToken {
    FencingToken::new(1, epoch).unwrap()
}

fn append(records: &mut RoleRecords, key: CoordinationKey, record: CoordinationRecord) {
    let offset = records.last().map_or(0, |(offset, _, _)| offset + 1);
    records.push((offset, key, record));
}

fn register(state: &mut State, index: usize) {
    append(
        &mut state.records,
        CoordinationKey::registration(role(), member(index)),
        CoordinationRecord::Registration(Registration {
            member: member(index),
            registered_at: state.now,
        }),
    );
}

fn accepted(records: &RoleRecords) -> impl Iterator<Item = &Lease> {
    records.iter().filter_map(|(_, _, record)| match record {
        CoordinationRecord::Lease(lease) => Some(lease),
        CoordinationRecord::Registration(_) => None,
    })
}

impl Model for Succession {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        // Every member starts by registering, in member order.
        let mut state = State {
            now: 0,
            records: Vec::new(),
            current: None,
            members: vec![Phase::Standby { recovered: false }; MEMBERS],
            crashes: 0,
            preempted: false,
        };
        for index in 0..MEMBERS {
            register(&mut state, index);
        }
        vec![state]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.now < MAX_TIME {
            actions.push(Action::Tick);
        }
        for (index, phase) in state.members.iter().enumerate() {
            match phase {
                Phase::Down => actions.push(Action::Recover(index)),
                Phase::Standby { .. } => {
                    let step = succession::standby_step(
                        &state.records,
                        &member(index),
                        state.now,
                        &self.timing,
                    );
                    if !matches!(step, StandbyStep::Wait { .. }) {
                        actions.push(Action::StandbyStep(index));
                    }
                }
                Phase::Challenging { .. } => actions.push(Action::WriteFirstLease(index)),
                Phase::Leader { lease, .. } => {
                    if succession::holder_step(lease, state.now, &self.timing) == HolderStep::Renew
                    {
                        actions.push(Action::Renew(index));
                    }
                }
            }
            if *phase != Phase::Down && state.crashes < MAX_CRASHES {
                actions.push(Action::Crash(index));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Tick => state.now += 1,
            Action::Crash(index) => {
                state.members[index] = Phase::Down;
                state.crashes += 1;
            }
            Action::Recover(index) => {
                register(&mut state, index);
                state.members[index] = Phase::Standby { recovered: true };
            }
            Action::StandbyStep(index) => {
                let Phase::Standby { recovered } = state.members[index] else {
                    return None;
                };
                match succession::standby_step(
                    &state.records,
                    &member(index),
                    state.now,
                    &self.timing,
                ) {
                    StandbyStep::Register => register(&mut state, index),
                    StandbyStep::Challenge => {
                        let holder_alive = succession::live_lease(&state.records, state.now).is_some_and(|lease| {
                            state.members.iter().any(
                                |phase| matches!(phase, Phase::Leader { lease: held, .. } if held.token == lease.token),
                            )
                        });
                        if recovered && holder_alive {
                            state.preempted = true;
                        }
                        let epoch = state.current.map_or(0, |epoch| epoch + 1);
                        state.current = Some(epoch);
                        state.members[index] = Phase::Challenging { epoch, recovered };
                    }
                    StandbyStep::Wait { .. } => return None,
                }
            }
            Action::WriteFirstLease(index) => {
                let Phase::Challenging { epoch, recovered } = state.members[index] else {
                    return None;
                };
                if state.current == Some(epoch) {
                    let lease =
                        succession::grant(&member(index), token(epoch), state.now, &self.timing);
                    append(
                        &mut state.records,
                        CoordinationKey::lease(role()),
                        CoordinationRecord::Lease(lease.clone()),
                    );
                    state.members[index] = Phase::Leader { lease, recovered };
                } else {
                    state.members[index] = Phase::Standby { recovered };
                }
            }
            Action::Renew(index) => {
                let Phase::Leader { lease, recovered } = state.members[index].clone() else {
                    return None;
                };
                if state.current == Some(lease.token.epoch().0) {
                    let fresh =
                        succession::grant(&member(index), lease.token, state.now, &self.timing);
                    append(
                        &mut state.records,
                        CoordinationKey::lease(role()),
                        CoordinationRecord::Lease(fresh.clone()),
                    );
                    state.members[index] = Phase::Leader {
                        lease: fresh,
                        recovered,
                    };
                } else {
                    // Fenced: step down; the rules make it register again.
                    state.members[index] = Phase::Standby { recovered };
                }
            }
        }
        Some(state)
    }

    fn within_boundary(&self, state: &State) -> bool {
        state.records.len() <= MAX_RECORDS && state.current.is_none_or(|epoch| epoch <= MAX_EPOCH)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "at most one member holds an unfenced epoch",
                |_, state: &State| {
                    state
                    .members
                    .iter()
                    .filter(|phase| {
                        matches!(phase, Phase::Leader { lease, .. } if Some(lease.token.epoch().0) == state.current)
                    })
                    .count()
                    <= 1
                },
            ),
            Property::always(
                "a recovered member never preempts the current holder",
                |_, state: &State| !state.preempted,
            ),
            Property::always(
                "each epoch's leases are one member's, in epoch order",
                |_, state: &State| {
                    let leases: Vec<&Lease> = accepted(&state.records).collect();
                    leases.windows(2).all(|pair| {
                        pair[0].token < pair[1].token
                            || (pair[0].token == pair[1].token && pair[0].member == pair[1].member)
                    })
                },
            ),
            Property::sometimes("a standby takes over", |_, state: &State| {
                accepted(&state.records).any(|lease| lease.token.epoch().0 >= 1)
            }),
            Property::sometimes("a recovered member is elected", |_, state: &State| {
                state.members.iter().any(|phase| {
                    matches!(
                        phase,
                        Phase::Leader {
                            recovered: true,
                            ..
                        }
                    )
                })
            }),
        ]
    }
}

#[test]
fn succession_is_safe_under_crashes_and_recoveries() {
    let model = Succession {
        timing: Timing {
            lease: Duration::from_millis(2),
            stagger: Duration::from_millis(1),
            renew_after: Duration::from_millis(1),
        },
    };
    let checker = model.checker().threads(2).spawn_bfs().join();
    checker.assert_properties();
    assert!(
        checker.unique_state_count() > 10_000,
        "the model explores a real state space"
    );
}
