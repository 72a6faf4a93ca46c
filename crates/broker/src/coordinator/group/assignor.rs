//! Server-side assignors of the KIP-848 consumer protocol: `uniform` and `range`.
//!
//! Both take the members' subscriptions and the partition counts of the
//! subscribed topics and return each member's target assignment. `uniform`
//! balances partition counts across members and is sticky: a partition stays
//! with its current owner while that owner is subscribed and under its
//! quota. `range` gives each member a contiguous range of every topic it
//! subscribes to, in member-id order, the first members one extra when the
//! count does not divide.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// A member's target: partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignorMember {
    /// The member id.
    pub id: String,
    /// Subscribed topics that exist, as (topic id, partition count).
    pub topics: Vec<(Uuid, i32)>,
    /// The member's current target (for stickiness).
    pub current: Assignment,
}

/// The assignor names this coordinator knows; the first is the default.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// Runs assignor `name` (unknown names fall back to `uniform`).
pub fn assign(name: &str, members: &[AssignorMember]) -> BTreeMap<String, Assignment> {
    match name {
        "range" => range(members),
        _ => uniform(members),
    }
}

fn range(members: &[AssignorMember]) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.clone(), Assignment::new()))
        .collect();
    let mut topics: BTreeMap<Uuid, i32> = BTreeMap::new();
    for m in members {
        for (t, n) in &m.topics {
            topics.insert(*t, *n);
        }
    }
    for (topic, count) in topics {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.iter().any(|(t, _)| *t == topic))
            .map(|m| m.id.as_str())
            .collect();
        subscribers.sort_unstable();
        let n = subscribers.len() as i32;
        if n == 0 || count <= 0 {
            continue;
        }
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, id) in subscribers.iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0
                && let Some(a) = out.get_mut(*id)
            {
                a.entry(topic).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

fn uniform(members: &[AssignorMember]) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.clone(), Assignment::new()))
        .collect();
    let mut count: BTreeMap<&str, usize> = members.iter().map(|m| (m.id.as_str(), 0)).collect();
    let mut all: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for m in members {
        for (t, n) in &m.topics {
            all.extend((0..*n).map(|p| (*t, p)));
        }
    }
    if members.is_empty() {
        return out;
    }
    let quota = all.len().div_ceil(members.len());
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Stickiness: keep what each member already has, up to the quota.
    for m in members {
        for (topic, partitions) in &m.current {
            let Some(&(_, n)) = m.topics.iter().find(|(t, _)| t == topic) else {
                continue;
            };
            for &p in partitions {
                let c = count.get(m.id.as_str()).copied().unwrap_or(0);
                if p < n && c < quota && taken.insert((*topic, p)) {
                    if let Some(a) = out.get_mut(&m.id) {
                        a.entry(*topic).or_default().insert(p);
                    }
                    count.insert(m.id.as_str(), c + 1);
                }
            }
        }
    }
    // The rest go to the least-loaded subscriber, topics with the fewest
    // subscribers first so members with narrow subscriptions fill up first.
    let subscribers = |topic: &Uuid| {
        members
            .iter()
            .filter(|m| m.topics.iter().any(|(t, _)| t == topic))
            .count()
    };
    let mut rest: Vec<(Uuid, i32)> = all.difference(&taken).copied().collect();
    rest.sort_by_key(|(t, p)| (subscribers(t), *t, *p));
    for (topic, p) in &rest {
        let best = members
            .iter()
            .filter(|m| m.topics.iter().any(|(t, _)| t == topic))
            .min_by_key(|m| (count.get(m.id.as_str()).copied().unwrap_or(0), m.id.clone()));
        if let Some(m) = best {
            if let Some(a) = out.get_mut(&m.id) {
                a.entry(*topic).or_default().insert(*p);
            }
            *count.entry(m.id.as_str()).or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[(Uuid, i32)]) -> AssignorMember {
        AssignorMember {
            id: id.into(),
            topics: topics.to_vec(),
            current: Assignment::new(),
        }
    }

    fn flat(a: &BTreeMap<String, Assignment>) -> Vec<(Uuid, i32)> {
        let mut v: Vec<_> = a
            .values()
            .flat_map(|x| {
                x.iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn range_splits_each_topic_into_contiguous_ranges() {
        let t = Uuid::from_u128(1);
        let out = range(&[
            member("b", &[(t, 7)]),
            member("a", &[(t, 7)]),
            member("c", &[(t, 7)]),
        ]);
        assert_eq!(out["a"][&t], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&t], BTreeSet::from([3, 4]));
        assert_eq!(out["c"][&t], BTreeSet::from([5, 6]));
    }

    #[test]
    fn uniform_covers_everything_once_balanced_and_sticky() {
        let (t, u) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let members = [
            member("a", &[(t, 8), (u, 3)]),
            member("b", &[(t, 8), (u, 3)]),
            member("c", &[(t, 8)]),
        ];
        let out = uniform(&members);
        let all = flat(&out);
        let mut expected: Vec<_> = (0..8)
            .map(|p| (t, p))
            .chain((0..3).map(|p| (u, p)))
            .collect();
        expected.sort();
        assert_eq!(all, expected);
        let sizes: Vec<usize> = out
            .values()
            .map(|a| a.values().map(BTreeSet::len).sum())
            .collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        // c leaves: a and b keep what they had.
        let mut again: Vec<AssignorMember> = members[..2].to_vec();
        for m in &mut again {
            m.current = out[&m.id].clone();
        }
        let next = uniform(&again);
        for m in &again {
            for (topic, ps) in &m.current {
                assert!(ps.is_subset(&next[&m.id][topic]), "sticky");
            }
        }
        assert_eq!(flat(&next).len(), 11);
    }
}
