//! The succession rules, as pure functions over a role's records and a clock.
//!
//! Everything a member decides — register, wait, challenge, renew, step down —
//! is a function of the [`RoleRecords`] it read, the time, and the
//! [`Timing`]. Keeping the rules free of I/O lets unit tests and the model
//! check drive them directly, and keeps the background task in
//! [`crate::leadership`] a thin loop around them.
//!
//! # The line
//!
//! A member's place in the line is the offset of its latest registration.
//! A member stands in the line only while that registration is newer than
//! every lease it has held: the holder has left the line by taking the role,
//! and a member that lost the role, or crashed and came back, must register
//! again — which puts it at the tail. That is the whole of "no failback": a
//! recovered member never jumps ahead of members who waited, and it never
//! challenges a live lease, because nobody does.
//!
//! # When to challenge
//!
//! The member of rank `n` (0 for the head of the line) challenges at
//! `deadline + n * stagger`, where `deadline` is the deadline of the latest
//! lease. When the role has never been held, the base is the registration
//! time of the head of the line, so the head challenges at once and the
//! others follow at their stagger. Clocks only decide liveness: if two members
//! challenge at once, the later epoch fences the earlier one at the broker.

use std::{collections::HashMap, time::Duration};

use crate::{
    error::CoordinationError,
    record::{CoordinationRecord, FencingToken, Lease, MemberId},
    transport::RoleRecords,
};

/// The timing of a role's leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a grant lasts; also the transaction timeout of the role's
    /// producer.
    pub lease: Duration,
    /// The gap between the challenges of consecutive ranks.
    pub stagger: Duration,
    /// How long after a grant the holder renews it; shorter than `lease`.
    pub renew_after: Duration,
}

impl Default for Timing {
    /// A 10 s lease renewed every 3 s, with a 2 s stagger between ranks.
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(10),
            stagger: Duration::from_secs(2),
            renew_after: Duration::from_secs(3),
        }
    }
}

impl Timing {
    /// Checks that the timing can work.
    ///
    /// # Errors
    ///
    /// Returns [`CoordinationError::Invalid`] when the lease or the stagger is
    /// zero, when `renew_after` is zero or not shorter than the lease, or when
    /// a duration does not fit in an `i32` of milliseconds (Kafka's
    /// `transaction.timeout.ms` width).
    pub fn validate(&self) -> Result<(), CoordinationError> {
        let invalid = |what, value: Duration, reason| CoordinationError::Invalid {
            what,
            value: format!("{value:?}"),
            reason,
        };
        for (what, value) in [
            ("lease", self.lease),
            ("stagger", self.stagger),
            ("renew interval", self.renew_after),
        ] {
            if value.is_zero() {
                return Err(invalid(what, value, "must not be zero"));
            }
            if i32::try_from(value.as_millis()).is_err() {
                return Err(invalid(what, value, "must fit in an i32 of milliseconds"));
            }
        }
        if self.renew_after >= self.lease {
            return Err(invalid(
                "renew interval",
                self.renew_after,
                "must be shorter than the lease",
            ));
        }
        Ok(())
    }

    /// The lease in milliseconds.
    #[must_use]
    pub fn lease_ms(&self) -> i64 {
        millis(self.lease)
    }

    /// The stagger in milliseconds.
    #[must_use]
    pub fn stagger_ms(&self) -> i64 {
        millis(self.stagger)
    }

    /// The renew interval in milliseconds.
    #[must_use]
    pub fn renew_after_ms(&self) -> i64 {
        millis(self.renew_after)
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A member waiting in the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The member.
    pub member: MemberId,
    /// The offset of its latest registration: its join sequence.
    pub offset: i64,
    /// When it registered (ms, its own clock).
    pub registered_at: i64,
}

/// The latest lease of the role and the offset it was written at.
#[must_use]
pub fn current_lease(records: &RoleRecords) -> Option<(i64, &Lease)> {
    records
        .iter()
        .filter_map(|(offset, _, record)| match record {
            CoordinationRecord::Lease(lease) => Some((*offset, lease)),
            CoordinationRecord::Registration(_) => None,
        })
        .max_by_key(|(offset, _)| *offset)
}

/// The latest lease if it is still live at `now` (its deadline is later).
#[must_use]
pub fn live_lease(records: &RoleRecords, now: i64) -> Option<&Lease> {
    current_lease(records)
        .map(|(_, lease)| lease)
        .filter(|lease| lease.deadline > now)
}

/// The members standing in the line, head first.
///
/// A member stands in the line when its latest registration is newer than
/// the latest lease it held; the line is ordered by that registration's
/// offset.
#[must_use]
pub fn line(records: &RoleRecords) -> Vec<Candidate> {
    let mut registered: HashMap<&MemberId, (i64, i64)> = HashMap::new();
    let mut held: HashMap<&MemberId, i64> = HashMap::new();
    for (offset, _, record) in records {
        match record {
            CoordinationRecord::Registration(registration) => {
                let entry = registered
                    .entry(&registration.member)
                    .or_insert((*offset, registration.registered_at));
                if *offset >= entry.0 {
                    *entry = (*offset, registration.registered_at);
                }
            }
            CoordinationRecord::Lease(lease) => {
                let entry = held.entry(&lease.member).or_insert(*offset);
                *entry = (*entry).max(*offset);
            }
        }
    }
    let mut line: Vec<Candidate> = registered
        .into_iter()
        .filter(|(member, (offset, _))| held.get(member).is_none_or(|held| offset > held))
        .map(|(member, (offset, registered_at))| Candidate {
            member: member.clone(),
            offset,
            registered_at,
        })
        .collect();
    line.sort_by_key(|candidate| candidate.offset);
    line
}

/// The rank of `member` in the line (0 for the head), or `None` when it does
/// not stand in the line.
#[must_use]
pub fn rank(records: &RoleRecords, member: &MemberId) -> Option<usize> {
    line(records)
        .iter()
        .position(|candidate| candidate.member == *member)
}

/// When `member` may challenge: `deadline + rank * stagger`, or `None` when
/// it does not stand in the line.
///
/// With no lease yet, the base is the registration time of the head of the
/// line.
#[must_use]
pub fn challenge_at(records: &RoleRecords, member: &MemberId, timing: &Timing) -> Option<i64> {
    let line = line(records);
    let rank = line.iter().position(|c| c.member == *member)?;
    let base = match current_lease(records) {
        Some((_, lease)) => lease.deadline,
        None => line.first().map_or(0, |head| head.registered_at),
    };
    let rank = i64::try_from(rank).unwrap_or(i64::MAX);
    Some(base.saturating_add(rank.saturating_mul(timing.stagger_ms())))
}

/// Drops every record that no rule looks at, keeping the rules' answers.
///
/// The rules read the latest registration of each member, the latest lease
/// each member held, and the latest lease of the role; everything older is
/// history. A reader that keeps the role's records between reads prunes them
/// with this, so its memory stays bounded by the number of members.
#[must_use]
pub fn retain_decisive(records: RoleRecords) -> RoleRecords {
    let mut latest_registration: HashMap<MemberId, i64> = HashMap::new();
    let mut latest_held: HashMap<MemberId, i64> = HashMap::new();
    for (offset, _, record) in &records {
        let slot = match record {
            CoordinationRecord::Registration(r) => latest_registration.entry(r.member.clone()),
            CoordinationRecord::Lease(l) => latest_held.entry(l.member.clone()),
        };
        let entry = slot.or_insert(*offset);
        *entry = (*entry).max(*offset);
    }
    records
        .into_iter()
        .filter(|(offset, _, record)| match record {
            CoordinationRecord::Registration(r) => {
                latest_registration.get(&r.member) == Some(offset)
            }
            CoordinationRecord::Lease(l) => latest_held.get(&l.member) == Some(offset),
        })
        .collect()
}

/// What a member that does not hold the role does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandbyStep {
    /// The member does not stand in the line: append a registration.
    Register,
    /// Read the records again no later than `until` (ms).
    Wait {
        /// The member's challenge time.
        until: i64,
    },
    /// Mint a new epoch for the role and write a lease under it.
    Challenge,
}

/// The next step of a standby at `now`.
#[must_use]
pub fn standby_step(
    records: &RoleRecords,
    member: &MemberId,
    now: i64,
    timing: &Timing,
) -> StandbyStep {
    match challenge_at(records, member, timing) {
        None => StandbyStep::Register,
        Some(at) if now >= at => StandbyStep::Challenge,
        Some(until) => StandbyStep::Wait { until },
    }
}

/// What the holder of the role does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderStep {
    /// Nothing to do before `until` (ms).
    Wait {
        /// When the lease is due for renewal.
        until: i64,
    },
    /// Write a fresh lease under the same token.
    Renew,
}

/// The next step of the holder of `lease` at `now`.
///
/// The holder renews `renew_after` after each grant, which is before the
/// deadline because [`Timing::validate`] keeps `renew_after` shorter than the
/// lease. A holder that wakes after its deadline (a paused process) still
/// renews rather than giving up: if nobody took the role meanwhile the epoch
/// is still current and the renewal keeps the role without a failover; if
/// somebody did, the broker fences the write and the holder steps down.
#[must_use]
pub fn holder_step(lease: &Lease, now: i64, timing: &Timing) -> HolderStep {
    let due = lease.granted_at.saturating_add(timing.renew_after_ms());
    if now >= due {
        HolderStep::Renew
    } else {
        HolderStep::Wait { until: due }
    }
}

/// What the holder does after a lease write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The broker fenced the epoch (or the transport lost it): another member
    /// holds the role, stop acting as the holder at once.
    Deposed,
    /// Renewals kept failing for reasons that say nothing about authority
    /// and the deadline has passed: the lease is gone, step down.
    Expired,
    /// The failure says nothing about authority and the lease is still live:
    /// retry.
    Retry,
}

/// The holder's reaction at `now` to a failed write of its `lease`: it steps
/// down on the first fence, and retries every other failure until the
/// deadline.
#[must_use]
pub fn after_write_failure(error: &CoordinationError, lease: &Lease, now: i64) -> AfterFailure {
    match error {
        CoordinationError::Fenced { .. } | CoordinationError::NotHeld { .. } => {
            AfterFailure::Deposed
        }
        _ if now >= lease.deadline => AfterFailure::Expired,
        _ => AfterFailure::Retry,
    }
}

/// The lease `member` writes at `now` under `token`.
#[must_use]
pub fn grant(member: &MemberId, token: FencingToken, now: i64, timing: &Timing) -> Lease {
    Lease {
        member: member.clone(),
        token,
        granted_at: now,
        deadline: now.saturating_add(timing.lease_ms()),
    }
}

/// The lease a holder writes when it resigns at `now`: its deadline is now,
/// so the head of the line challenges at once.
#[must_use]
pub fn release(lease: &Lease, now: i64) -> Lease {
    Lease {
        member: lease.member.clone(),
        token: lease.token,
        granted_at: now,
        deadline: now,
    }
}

#[cfg(test)]
mod tests {
    use assert2::check;

    use super::*;
    use crate::record::{CoordinationKey, Registration, Role};

    fn role() -> Role {
        Role::new("controller").unwrap()
    }

    fn m(name: &str) -> MemberId {
        MemberId::new(name).unwrap()
    }

    fn timing() -> Timing {
        Timing {
            lease: Duration::from_millis(1_000),
            stagger: Duration::from_millis(100),
            renew_after: Duration::from_millis(300),
        }
    }

    fn reg(offset: i64, member: &str, at: i64) -> (i64, CoordinationKey, CoordinationRecord) {
        (
            offset,
            CoordinationKey::registration(role(), m(member)),
            CoordinationRecord::Registration(Registration {
                member: m(member),
                registered_at: at,
            }),
        )
    }

    fn lease(
        offset: i64,
        member: &str,
        epoch: i16,
        granted_at: i64,
    ) -> (i64, CoordinationKey, CoordinationRecord) {
        (
            offset,
            CoordinationKey::lease(role()),
            CoordinationRecord::Lease(grant(
                &m(member),
                FencingToken::new(1, epoch).unwrap(),
                granted_at,
                &timing(),
            )),
        )
    }

    fn names(records: &RoleRecords) -> Vec<String> {
        line(records)
            .into_iter()
            .map(|c| c.member.to_string())
            .collect()
    }

    #[test]
    fn rank_follows_registration_offsets() {
        let records = vec![reg(0, "b", 10), reg(1, "a", 11), reg(2, "c", 12)];
        check!(names(&records) == ["b", "a", "c"]);
        check!(rank(&records, &m("b")) == Some(0));
        check!(rank(&records, &m("c")) == Some(2));
        check!(rank(&records, &m("z")) == None);
    }

    #[test]
    fn a_member_is_ranked_by_its_latest_registration() {
        let records = vec![reg(0, "a", 10), reg(1, "b", 11), reg(2, "a", 12)];
        check!(names(&records) == ["b", "a"]);
    }

    #[test]
    fn the_head_challenges_at_once_when_the_role_was_never_held() {
        let records = vec![reg(0, "a", 10), reg(1, "b", 11), reg(2, "c", 12)];
        check!(standby_step(&records, &m("a"), 10, &timing()) == StandbyStep::Challenge);
        check!(standby_step(&records, &m("b"), 10, &timing()) == StandbyStep::Wait { until: 110 });
        check!(standby_step(&records, &m("c"), 10, &timing()) == StandbyStep::Wait { until: 210 });
        check!(standby_step(&records, &m("z"), 10, &timing()) == StandbyStep::Register);
    }

    #[test]
    fn rank_n_challenges_at_deadline_plus_n_staggers() {
        // a holds the role until 1_500; b and c wait in the line.
        let records = vec![
            reg(0, "a", 0),
            reg(1, "b", 1),
            reg(2, "c", 2),
            lease(3, "a", 0, 500),
        ];
        check!(names(&records) == ["b", "c"]);
        check!(challenge_at(&records, &m("b"), &timing()) == Some(1_500));
        check!(challenge_at(&records, &m("c"), &timing()) == Some(1_600));
        check!(challenge_at(&records, &m("a"), &timing()) == None);
        check!(
            standby_step(&records, &m("b"), 1_499, &timing()) == StandbyStep::Wait { until: 1_500 }
        );
        check!(standby_step(&records, &m("b"), 1_500, &timing()) == StandbyStep::Challenge);
        check!(
            standby_step(&records, &m("c"), 1_550, &timing()) == StandbyStep::Wait { until: 1_600 }
        );
        check!(live_lease(&records, 1_499).map(|l| l.member.as_str()) == Some("a"));
        check!(live_lease(&records, 1_500) == None);
    }

    #[test]
    fn the_holder_leaves_the_line_and_a_deposed_holder_must_register_again() {
        // b took over from a; a is out of the line until it registers again.
        let mut records = vec![
            reg(0, "a", 0),
            reg(1, "b", 1),
            lease(2, "a", 0, 0),
            lease(3, "b", 1, 2_000),
        ];
        check!(names(&records).is_empty());
        check!(standby_step(&records, &m("a"), 2_100, &timing()) == StandbyStep::Register);
        records.push(reg(4, "a", 2_100));
        check!(names(&records) == ["a"]);
        // a waits for b's lease like everybody else: no failback.
        check!(
            standby_step(&records, &m("a"), 2_100, &timing()) == StandbyStep::Wait { until: 3_000 }
        );
    }

    #[test]
    fn a_recovered_member_joins_at_the_tail() {
        // a held the role, crashed; b took over; c waits; a recovers.
        let records = vec![
            reg(0, "a", 0),
            reg(1, "b", 1),
            reg(2, "c", 2),
            lease(3, "a", 0, 0),
            lease(4, "b", 1, 2_000),
            reg(5, "a", 2_500),
        ];
        check!(names(&records) == ["c", "a"]);
        check!(challenge_at(&records, &m("c"), &timing()) == Some(3_000));
        check!(challenge_at(&records, &m("a"), &timing()) == Some(3_100));
    }

    #[test]
    fn a_resigned_lease_lets_the_head_challenge_at_once() {
        let records = vec![reg(0, "a", 0), reg(1, "b", 1), lease(2, "a", 0, 0)];
        let (_, held) = current_lease(&records).unwrap();
        let released = release(held, 400);
        check!(released.deadline == 400);
        let mut records = records;
        records.push((
            3,
            CoordinationKey::lease(role()),
            CoordinationRecord::Lease(released),
        ));
        check!(standby_step(&records, &m("b"), 400, &timing()) == StandbyStep::Challenge);
    }

    #[test]
    fn the_holder_renews_before_the_deadline() {
        let held = grant(&m("a"), FencingToken::new(1, 0).unwrap(), 1_000, &timing());
        check!(held.deadline == 2_000);
        check!(holder_step(&held, 1_000, &timing()) == HolderStep::Wait { until: 1_300 });
        check!(holder_step(&held, 1_300, &timing()) == HolderStep::Renew);
        // A holder that was paused past its deadline still tries: the broker decides.
        check!(holder_step(&held, 5_000, &timing()) == HolderStep::Renew);
    }

    #[test]
    fn the_holder_steps_down_on_the_first_fence_and_retries_the_rest_until_the_deadline() {
        let held = grant(&m("a"), FencingToken::new(1, 0).unwrap(), 1_000, &timing());
        let fenced = CoordinationError::Fenced { role: role() };
        let not_held = CoordinationError::NotHeld {
            role: role(),
            token: FencingToken::new(1, 0).unwrap(),
        };
        let transient = CoordinationError::Client("connection reset".into());
        check!(after_write_failure(&fenced, &held, 1_300) == AfterFailure::Deposed);
        check!(after_write_failure(&not_held, &held, 1_300) == AfterFailure::Deposed);
        check!(after_write_failure(&transient, &held, 1_300) == AfterFailure::Retry);
        check!(after_write_failure(&transient, &held, 2_000) == AfterFailure::Expired);
    }

    fn arbitrary_records() -> impl proptest::strategy::Strategy<Value = RoleRecords> {
        use proptest::prelude::*;
        proptest::collection::vec((any::<bool>(), 0..4_usize, 0..3_i16, 0..3_000_i64), 0..24)
            .prop_map(|entries| {
                entries
                    .into_iter()
                    .enumerate()
                    .map(|(offset, (is_lease, who, epoch, at))| {
                        let offset = i64::try_from(offset).unwrap();
                        let name = ["a", "b", "c", "d"][who];
                        if is_lease {
                            lease(offset, name, epoch, at)
                        } else {
                            reg(offset, name, at)
                        }
                    })
                    .collect()
            })
    }

    proptest::proptest! {
        #[test]
        fn pruning_keeps_every_answer_of_the_rules(records in arbitrary_records(), now in 0..5_000_i64) {
            let pruned = retain_decisive(records.clone());
            proptest::prop_assert!(pruned.len() <= 8);
            proptest::prop_assert_eq!(line(&pruned), line(&records));
            proptest::prop_assert_eq!(current_lease(&pruned), current_lease(&records));
            for name in ["a", "b", "c", "d"] {
                proptest::prop_assert_eq!(
                    standby_step(&pruned, &m(name), now, &timing()),
                    standby_step(&records, &m(name), now, &timing())
                );
            }
        }
    }

    #[test]
    fn timing_is_validated() {
        check!(Timing::default().validate().is_ok());
        check!(timing().validate().is_ok());
        let zero_stagger = Timing {
            stagger: Duration::ZERO,
            ..timing()
        };
        check!(zero_stagger.validate().is_err());
        let late_renewal = Timing {
            renew_after: Duration::from_millis(1_000),
            ..timing()
        };
        check!(late_renewal.validate().is_err());
        let huge = Timing {
            lease: Duration::from_secs(u64::from(u32::MAX)),
            ..timing()
        };
        check!(huge.validate().is_err());
    }
}
