//! A bounded cache of diskless object bytes, in two parts with budgets of
//! their own.
//!
//! Consumers that keep up read what producers just wrote, so the objects a
//! broker uploads are kept whole in the *written* part: those fetches never
//! reach the object store. Ranges read back from the store (other brokers'
//! objects, lagging consumers) go to the *read* part. Each part evicts its
//! least recently used entries when over budget, so a consumer replaying a
//! topic from the start churns only the read part and never evicts the
//! hot tail.

use {
    super::types::ObjectKey,
    bytes::Bytes,
    std::{
        collections::{BTreeMap, HashMap},
        ops::Range,
        sync::{Mutex, PoisonError},
    },
};

#[derive(Debug, Default)]
struct Part {
    budget: u64,
    bytes: u64,
    tick: u64,
    /// Entries per object: (first byte, bytes, last use).
    entries: HashMap<ObjectKey, Vec<(u64, Bytes, u64)>>,
    /// Last use → entry, for eviction.
    by_use: BTreeMap<u64, (ObjectKey, u64)>,
}

impl Part {
    fn new(budget: u64) -> Self {
        Self {
            budget,
            ..Self::default()
        }
    }

    fn get(&mut self, key: &ObjectKey, range: &Range<u64>) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        let entries = self.entries.get_mut(key)?;
        let entry = entries.iter_mut().find(|(start, bytes, _)| {
            *start <= range.start && range.end <= start + bytes.len() as u64
        })?;
        self.by_use.remove(&entry.2);
        entry.2 = tick;
        self.by_use.insert(tick, (key.clone(), entry.0));
        let from = usize::try_from(range.start - entry.0).ok()?;
        let to = usize::try_from(range.end - entry.0).ok()?;
        Some(entry.1.slice(from..to))
    }

    fn insert(&mut self, key: &ObjectKey, start: u64, bytes: Bytes) {
        let len = bytes.len() as u64;
        if len > self.budget {
            return;
        }
        self.tick += 1;
        let entries = self.entries.entry(key.clone()).or_default();
        if entries
            .iter()
            .any(|(s, b, _)| *s == start && b.len() as u64 >= len)
        {
            return;
        }
        entries.push((start, bytes, self.tick));
        self.by_use.insert(self.tick, (key.clone(), start));
        self.bytes += len;
        while self.bytes > self.budget {
            let Some((_, (key, start))) = self.by_use.pop_first() else {
                break;
            };
            self.drop_entry(&key, start);
        }
    }

    fn drop_entry(&mut self, key: &ObjectKey, start: u64) {
        if let Some(entries) = self.entries.get_mut(key) {
            if let Some(i) = entries.iter().position(|(s, _, _)| *s == start) {
                let (_, bytes, _) = entries.swap_remove(i);
                self.bytes -= bytes.len() as u64;
            }
            if entries.is_empty() {
                self.entries.remove(key);
            }
        }
    }

    fn remove(&mut self, key: &ObjectKey) {
        if let Some(entries) = self.entries.remove(key) {
            for (_, bytes, tick) in entries {
                self.bytes -= bytes.len() as u64;
                self.by_use.remove(&tick);
            }
        }
    }
}

/// The cache of one broker's diskless reads.
#[derive(Debug)]
pub struct ObjectCache {
    written: Mutex<Part>,
    read: Mutex<Part>,
}

fn lock(part: &Mutex<Part>) -> std::sync::MutexGuard<'_, Part> {
    part.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ObjectCache {
    /// A cache holding up to `written_bytes` of objects this broker wrote
    /// and `read_bytes` of ranges read from the store (0 disables a part).
    #[must_use]
    pub fn new(written_bytes: u64, read_bytes: u64) -> Self {
        Self {
            written: Mutex::new(Part::new(written_bytes)),
            read: Mutex::new(Part::new(read_bytes)),
        }
    }

    /// The bytes of `range` of `key`, if cached.
    #[must_use]
    pub fn get(&self, key: &ObjectKey, range: Range<u64>) -> Option<Bytes> {
        lock(&self.written)
            .get(key, &range)
            .or_else(|| lock(&self.read).get(key, &range))
    }

    /// Caches a whole object this broker just wrote.
    pub fn insert_written(&self, key: &ObjectKey, bytes: Bytes) {
        lock(&self.written).insert(key, 0, bytes);
    }

    /// Caches a range read from the store, starting at byte `start`.
    pub fn insert_read(&self, key: &ObjectKey, start: u64, bytes: Bytes) {
        lock(&self.read).insert(key, start, bytes);
    }

    /// Forgets an object (it was deleted).
    pub fn remove(&self, key: &ObjectKey) {
        lock(&self.written).remove(key);
        lock(&self.read).remove(key);
    }

    /// Bytes held: `(written part, read part)`.
    #[must_use]
    pub fn usage(&self) -> (u64, u64) {
        (lock(&self.written).bytes, lock(&self.read).bytes)
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn key(n: u32) -> ObjectKey {
        ObjectKey(format!("o{n}"))
    }

    #[test]
    fn lagging_reads_never_evict_written_objects() {
        let cache = ObjectCache::new(100, 50);
        cache.insert_written(&key(1), Bytes::from(vec![1; 60]));
        for n in 2..100 {
            cache.insert_read(&key(n), 0, Bytes::from(vec![2; 30]));
        }
        check!(cache.get(&key(1), 10..20) == Some(Bytes::from(vec![1; 10])));
        check!(cache.usage().0 == 60);
        check!(cache.usage().1 <= 50);
        check!(
            cache.get(&key(99), 0..30).is_some(),
            "the newest read stays"
        );
        check!(cache.get(&key(2), 0..30).is_none(), "the oldest read went");
    }

    #[test]
    fn the_least_recently_used_object_goes_first() {
        let cache = ObjectCache::new(100, 0);
        cache.insert_written(&key(1), Bytes::from(vec![1; 40]));
        cache.insert_written(&key(2), Bytes::from(vec![2; 40]));
        check!(cache.get(&key(1), 0..1).is_some());
        cache.insert_written(&key(3), Bytes::from(vec![3; 40]));
        check!(cache.get(&key(1), 0..1).is_some());
        check!(cache.get(&key(2), 0..1).is_none());
        check!(cache.usage().0 == 80);
        cache.remove(&key(1));
        check!(cache.usage().0 == 40);
        // Larger than the whole budget: not cached at all.
        cache.insert_written(&key(4), Bytes::from(vec![4; 101]));
        check!(cache.get(&key(4), 0..1).is_none());
    }

    #[test]
    fn a_range_is_served_only_from_an_entry_that_covers_it() {
        let cache = ObjectCache::new(0, 100);
        cache.insert_read(&key(1), 10, Bytes::from_static(b"abcdef"));
        check!(cache.get(&key(1), 11..13) == Some(Bytes::from_static(b"bc")));
        check!(cache.get(&key(1), 9..12).is_none());
        check!(cache.get(&key(1), 14..17).is_none());
    }
}
