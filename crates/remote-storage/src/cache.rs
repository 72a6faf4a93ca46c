//! A size-bounded least-recently-used map, without I/O.
//!
//! [`RemoteIndexCache`](crate::RemoteIndexCache) keeps its bookkeeping here
//! and its bytes on disk; keeping the policy apart lets it be tested on its
//! own. Each entry has a weight (its size in bytes); inserting past the bound
//! evicts from the least recently used end until the total fits again.

use std::{
    collections::{BTreeMap, HashMap},
    hash::Hash,
};

#[derive(Debug)]
struct Slot<V> {
    value: V,
    weight: u64,
    tick: u64,
}

/// Entries of type `V` by key `K`, bounded by total weight.
#[derive(Debug)]
pub(crate) struct LruBySize<K, V> {
    max_weight: u64,
    total_weight: u64,
    next_tick: u64,
    slots: HashMap<K, Slot<V>>,
    /// Recency order: tick → key, oldest first.
    order: BTreeMap<u64, K>,
}

impl<K: Clone + Eq + Hash, V> LruBySize<K, V> {
    /// An empty map holding at most `max_weight` in total.
    pub(crate) fn new(max_weight: u64) -> Self {
        Self {
            max_weight,
            total_weight: 0,
            next_tick: 0,
            slots: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    /// The entry for `key`, marked most recently used.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let tick = self.tick();
        let slot = self.slots.get_mut(key)?;
        self.order.remove(&slot.tick);
        slot.tick = tick;
        self.order.insert(tick, key.clone());
        Some(&mut slot.value)
    }

    /// Whether `key` is present (recency unchanged).
    #[cfg(test)]
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.slots.contains_key(key)
    }

    /// Inserts (or replaces) `key` as most recently used and evicts least
    /// recently used entries until the total fits. Returns the evicted
    /// entries, oldest first; an entry heavier than the whole bound is
    /// returned at once without being kept.
    pub(crate) fn insert(&mut self, key: K, value: V, weight: u64) -> Vec<(K, V)> {
        let mut evicted = Vec::new();
        if let Some(old) = self.remove(&key) {
            evicted.push((key.clone(), old));
        }
        if weight > self.max_weight {
            evicted.push((key, value));
            return evicted;
        }
        let tick = self.tick();
        self.order.insert(tick, key.clone());
        self.slots.insert(
            key,
            Slot {
                value,
                weight,
                tick,
            },
        );
        self.total_weight += weight;
        while self.total_weight > self.max_weight {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(slot) = self.slots.remove(&oldest) {
                self.total_weight -= slot.weight;
                evicted.push((oldest, slot.value));
            }
        }
        evicted
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.slots.remove(key)?;
        self.order.remove(&slot.tick);
        self.total_weight -= slot.weight;
        Some(slot.value)
    }

    /// Keys matching `pred`.
    pub(crate) fn keys_where(&self, mut pred: impl FnMut(&K) -> bool) -> Vec<K> {
        self.slots.keys().filter(|k| pred(k)).cloned().collect()
    }

    /// The bound on the total weight.
    pub(crate) fn max_weight(&self) -> u64 {
        self.max_weight
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Total weight of the entries.
    pub(crate) fn total_weight(&self) -> u64 {
        self.total_weight
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn evicts_least_recently_used_first() {
        let mut lru = LruBySize::new(30);
        check!(lru.insert("a", 1, 10).is_empty());
        check!(lru.insert("b", 2, 10).is_empty());
        check!(lru.insert("c", 3, 10).is_empty());
        check!(lru.get_mut(&"a") == Some(&mut 1));
        let evicted = lru.insert("d", 4, 10);
        check!(evicted == [("b", 2)]);
        let evicted = lru.insert("e", 5, 15);
        check!(evicted == [("c", 3), ("a", 1)]);
        check!(lru.total_weight() == 25);
        check!(lru.len() == 2);
        check!(lru.insert("huge", 6, 31) == [("huge", 6)]);
        check!(!lru.contains(&"huge"));
        check!(lru.remove(&"d") == Some(4));
        check!(lru.total_weight() == 15);
    }

    proptest! {
        /// Against a model: a list in recency order, trimmed from the front.
        #[test]
        fn matches_a_list_model(ops in proptest::collection::vec((0u8..8, 1u64..20, any::<bool>()), 1..100)) {
            let max = 40;
            let mut lru = LruBySize::new(max);
            let mut model: Vec<(u8, u64)> = Vec::new();
            for (key, weight, is_get) in ops {
                if is_get {
                    let found = lru.get_mut(&key).is_some();
                    if let Some(at) = model.iter().position(|&(k, _)| k == key) {
                        let entry = model.remove(at);
                        model.push(entry);
                        prop_assert!(found);
                    } else {
                        prop_assert!(!found);
                    }
                } else {
                    lru.insert(key, (), weight);
                    model.retain(|&(k, _)| k != key);
                    model.push((key, weight));
                    while model.iter().map(|&(_, w)| w).sum::<u64>() > max {
                        model.remove(0);
                    }
                }
                prop_assert!(lru.total_weight() <= max);
                prop_assert_eq!(lru.total_weight(), model.iter().map(|&(_, w)| w).sum::<u64>());
                for &(k, _) in &model {
                    prop_assert!(lru.contains(&k));
                }
                prop_assert_eq!(lru.len(), model.len());
            }
        }
    }
}
