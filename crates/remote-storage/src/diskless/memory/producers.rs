//! The idempotent producers of one partition of the in-memory coordinator:
//! a [`ProducerState`] per producer id, which holds Kafka's rules.

use {
    super::super::{
        producer_state::{ProducerCheck, ProducerState},
        types::ProducerBatch,
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
    pub(super) fn record(&mut self, batch: &ProducerBatch, base_offset: i64) {
        self.by_id
            .entry(batch.producer_id)
            .or_default()
            .record(batch, base_offset);
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn batch(epoch: i16, base: i32, last: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: 9,
            producer_epoch: epoch,
            base_sequence: base,
            last_sequence: last,
        }
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut p = Producers::default();
        p.record(&batch(0, i32::MAX - 1, i32::MAX), 0);
        check!(p.check(&batch(0, 0, 3)) == ProducerCheck::Accept);
        check!(matches!(
            p.check(&batch(0, 1, 3)),
            ProducerCheck::Refused(_)
        ));
    }

    #[test]
    fn only_the_last_five_batches_are_recognised_as_retries() {
        let mut p = Producers::default();
        for i in 0..6 {
            p.record(&batch(0, i * 10, i * 10 + 9), i64::from(i) * 10);
        }
        check!(p.check(&batch(0, 10, 19)) == ProducerCheck::Duplicate(10));
        // The first batch is forgotten: its retry is out of order now.
        check!(matches!(
            p.check(&batch(0, 0, 9)),
            ProducerCheck::Refused(_)
        ));
    }
}
