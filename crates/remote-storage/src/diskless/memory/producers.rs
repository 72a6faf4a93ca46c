//! Idempotent producers' state per partition, with Kafka's rules
//! (`ProducerStateManager`): the last five batches of each producer are
//! remembered so a retry is recognised and answered with its original
//! offsets; a batch from a stale epoch is refused; a new epoch starts at
//! sequence 0; otherwise sequences follow one another, wrapping at
//! `i32::MAX`. A producer the partition does not know (new, or forgotten)
//! may start at any sequence, as on Kafka.

use {
    super::super::types::{BatchError, ProducerBatch},
    serde::{Deserialize, Serialize},
    std::collections::{HashMap, VecDeque},
};

/// Batches of one producer remembered for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, the idempotent producer's in-flight limit).
const BATCHES_TO_RETAIN: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Recent {
    base_sequence: i32,
    last_sequence: i32,
    base_offset: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Entry {
    epoch: i16,
    recent: VecDeque<Recent>,
}

/// What [`Producers::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Check {
    /// Append it.
    Accept,
    /// A retry of the batch committed at this base offset.
    Duplicate(i64),
    /// Refuse it.
    Refused(BatchError),
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Producers {
    by_id: HashMap<i64, Entry>,
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl Producers {
    /// Checks `batch` against what the producer sent before.
    pub(super) fn check(&self, batch: &ProducerBatch) -> Check {
        let Some(entry) = self.by_id.get(&batch.producer_id) else {
            return Check::Accept;
        };
        if batch.producer_epoch < entry.epoch {
            return Check::Refused(BatchError::InvalidProducerEpoch {
                epoch: batch.producer_epoch,
                current: entry.epoch,
            });
        }
        if batch.producer_epoch > entry.epoch {
            return if batch.base_sequence == 0 {
                Check::Accept
            } else {
                Check::Refused(BatchError::OutOfOrderSequence {
                    sequence: batch.base_sequence,
                    expected: 0,
                })
            };
        }
        if let Some(dup) = entry.recent.iter().find(|r| {
            r.base_sequence == batch.base_sequence && r.last_sequence == batch.last_sequence
        }) {
            return Check::Duplicate(dup.base_offset);
        }
        match entry.recent.back() {
            Some(last) if batch.base_sequence != next_sequence(last.last_sequence) => {
                Check::Refused(BatchError::OutOfOrderSequence {
                    sequence: batch.base_sequence,
                    expected: next_sequence(last.last_sequence),
                })
            }
            _ => Check::Accept,
        }
    }

    /// Remembers an accepted batch at `base_offset`.
    pub(super) fn record(&mut self, batch: &ProducerBatch, base_offset: i64) {
        let entry = self.by_id.entry(batch.producer_id).or_default();
        if entry.epoch != batch.producer_epoch {
            entry.epoch = batch.producer_epoch;
            entry.recent.clear();
        }
        if entry.recent.len() == BATCHES_TO_RETAIN {
            entry.recent.pop_front();
        }
        entry.recent.push_back(Recent {
            base_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence,
            base_offset,
        });
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
        check!(p.check(&batch(0, 0, 3)) == Check::Accept);
        check!(matches!(p.check(&batch(0, 1, 3)), Check::Refused(_)));
    }

    #[test]
    fn only_the_last_five_batches_are_recognised_as_retries() {
        let mut p = Producers::default();
        for i in 0..6 {
            p.record(&batch(0, i * 10, i * 10 + 9), i64::from(i) * 10);
        }
        check!(p.check(&batch(0, 10, 19)) == Check::Duplicate(10));
        // The first batch is forgotten: its retry is out of order now.
        check!(matches!(p.check(&batch(0, 0, 9)), Check::Refused(_)));
    }
}
