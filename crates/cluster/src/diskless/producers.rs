//! Idempotent producers on a diskless partition, with Kafka's rules and the
//! in-memory coordinator's answers: the last five batches of each producer
//! are remembered so a retry gets its original offsets; a stale epoch is
//! refused; a new epoch starts at sequence 0; otherwise sequences follow
//! one another, wrapping at `i32::MAX`; a producer the partition does not
//! know may start anywhere.
//!
//! The state of the producers a commit touches is read from
//! `diskless_producer_batches` after the commit has locked their partitions
//! (so no other broker changes it meanwhile), checked and updated here in
//! memory, and written back in the same transaction.

use krabka_remote_storage::diskless::{BatchError, ProducerBatch};

/// Batches of one producer remembered for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, the idempotent producer's in-flight limit).
pub(super) const BATCHES_TO_RETAIN: usize = 5;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recent {
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: i64,
}

/// One producer on one partition; no recent batch means unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Producer {
    pub epoch: i16,
    /// Oldest first, at most [`BATCHES_TO_RETAIN`].
    pub recent: Vec<Recent>,
}

/// What [`Producer::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Check {
    /// Append it.
    Accept,
    /// A retry of the batch committed at this base offset.
    Duplicate(i64),
    /// Refuse it.
    Refused(BatchError),
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl Producer {
    /// Checks `batch` against what the producer sent before.
    pub(super) fn check(&self, batch: &ProducerBatch) -> Check {
        let Some(last) = self.recent.last() else {
            return Check::Accept;
        };
        if batch.producer_epoch < self.epoch {
            return Check::Refused(BatchError::InvalidProducerEpoch {
                epoch: batch.producer_epoch,
                current: self.epoch,
            });
        }
        if batch.producer_epoch > self.epoch {
            return if batch.base_sequence == 0 {
                Check::Accept
            } else {
                Check::Refused(BatchError::OutOfOrderSequence {
                    sequence: batch.base_sequence,
                    expected: 0,
                })
            };
        }
        if let Some(dup) = self.recent.iter().find(|r| {
            r.base_sequence == batch.base_sequence && r.last_sequence == batch.last_sequence
        }) {
            return Check::Duplicate(dup.base_offset);
        }
        let expected = next_sequence(last.last_sequence);
        if batch.base_sequence == expected {
            Check::Accept
        } else {
            Check::Refused(BatchError::OutOfOrderSequence {
                sequence: batch.base_sequence,
                expected,
            })
        }
    }

    /// Remembers an accepted batch at `base_offset`.
    pub(super) fn record(&mut self, batch: &ProducerBatch, base_offset: i64) {
        if self.epoch != batch.producer_epoch {
            self.epoch = batch.producer_epoch;
            self.recent.clear();
        }
        if self.recent.len() >= BATCHES_TO_RETAIN {
            self.recent.remove(0);
        }
        self.recent.push(Recent {
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
        let mut p = Producer::default();
        p.record(&batch(0, i32::MAX - 1, i32::MAX), 0);
        check!(p.check(&batch(0, 0, 3)) == Check::Accept);
        check!(matches!(p.check(&batch(0, 1, 3)), Check::Refused(_)));
    }

    #[test]
    fn only_the_last_five_batches_are_recognised_as_retries() {
        let mut p = Producer::default();
        for i in 0..6 {
            p.record(&batch(0, i * 10, i * 10 + 9), i64::from(i) * 10);
        }
        check!(p.recent.len() == BATCHES_TO_RETAIN);
        check!(p.check(&batch(0, 10, 19)) == Check::Duplicate(10));
        check!(matches!(p.check(&batch(0, 0, 9)), Check::Refused(_)));
    }

    #[test]
    fn a_new_epoch_forgets_the_old_batches() {
        let mut p = Producer::default();
        p.record(&batch(0, 0, 4), 0);
        check!(p.check(&batch(1, 0, 0)) == Check::Accept);
        p.record(&batch(1, 0, 0), 5);
        check!(p.recent.len() == 1);
        check!(matches!(
            p.check(&batch(0, 5, 5)),
            Check::Refused(BatchError::InvalidProducerEpoch { .. })
        ));
    }
}
