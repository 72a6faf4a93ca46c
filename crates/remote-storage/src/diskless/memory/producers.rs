//! The idempotent producers of one partition of the in-memory coordinator:
//! a [`ProducerState`] per producer id, which holds Kafka's rules, what
//! DescribeProducers reports and when a producer expires.

use {
    super::super::{
        producer_state::{ProducerCheck, ProducerState},
        types::{ProducerBatch, ProducerInfo},
    },
    serde::{Deserialize, Serialize},
    std::collections::HashMap,
};

/// The producers of one partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Producers {
    by_id: HashMap<i64, ProducerState>,
}

impl Producers {
    /// Checks `batch` against what its producer sent before.
    pub(super) fn check(&self, batch: &ProducerBatch) -> ProducerCheck {
        self.by_id
            .get(&batch.producer_id)
            .map_or(ProducerCheck::Accept, |p| p.check(batch))
    }

    /// Remembers an accepted batch at `base_offset`.
    pub(super) fn record(&mut self, batch: &ProducerBatch, base_offset: i64, max_timestamp: i64) {
        self.by_id
            .entry(batch.producer_id)
            .or_default()
            .record(batch, base_offset, max_timestamp);
    }

    /// Every known producer, by producer id.
    pub(super) fn describe(&self) -> Vec<ProducerInfo> {
        let mut all: Vec<_> = self
            .by_id
            .iter()
            .filter_map(|(id, p)| p.info(*id))
            .collect();
        all.sort_by_key(|p| p.producer_id);
        all
    }

    /// How many producers [`Producers::expire`] would forget.
    pub(super) fn idle(&self, idle_before_ms: i64) -> usize {
        self.by_id
            .values()
            .filter(|p| p.is_idle(idle_before_ms))
            .count()
    }

    /// Forgets the producers idle since before `idle_before_ms`; answers
    /// how many.
    pub(super) fn expire(&mut self, idle_before_ms: i64) -> usize {
        let before = self.by_id.len();
        self.by_id.retain(|_, p| !p.is_idle(idle_before_ms));
        before - self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    //! Kafka's rules themselves are tested with [`ProducerState`]; here,
    //! that each producer id keeps its own state.
    use {super::*, assert2::check};

    fn batch(producer_id: i64, base: i32, last: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id,
            producer_epoch: 0,
            base_sequence: base,
            last_sequence: last,
        }
    }

    #[test]
    fn each_producer_id_keeps_its_own_sequences_and_retries() {
        let mut p = Producers::default();
        check!(p.check(&batch(9, 0, 4)) == ProducerCheck::Accept);
        p.record(&batch(9, 0, 4), 100, 0);
        // The same sequences from another producer are its first batch.
        check!(p.check(&batch(10, 0, 4)) == ProducerCheck::Accept);
        p.record(&batch(10, 0, 4), 200, 0);
        check!(p.check(&batch(9, 0, 4)) == ProducerCheck::Duplicate(100));
        check!(p.check(&batch(10, 0, 4)) == ProducerCheck::Duplicate(200));
        check!(p.check(&batch(9, 5, 9)) == ProducerCheck::Accept);
        check!(matches!(
            p.check(&batch(10, 9, 9)),
            ProducerCheck::Refused(_)
        ));
    }
}
