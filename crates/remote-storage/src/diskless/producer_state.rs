//! Idempotent producers on one diskless partition, with Kafka's rules
//! (`ProducerStateManager`): the last five batches of each producer are
//! remembered so a retry is recognised and answered with its original
//! offsets; a batch from a stale epoch is refused; a new epoch starts at
//! sequence 0; otherwise sequences follow one another, wrapping at
//! `i32::MAX`. A producer the partition does not know (new, or forgotten)
//! may start at any sequence, as on Kafka.
//!
//! Every batch coordinator applies the same rules to its own storage of
//! this state (the in-memory one in its journal, the PostgreSQL one in a
//! table), so they live here once — and so does what DescribeProducers
//! reports of a producer and when `producer.id.expiration.ms` forgets it:
//! as Kafka's `ProducerStateManager`, by the largest timestamp of the
//! producer's last batch.

use {
    super::types::{BatchError, ProducerBatch, ProducerInfo},
    krabka_ids::{ProducerEpoch, ProducerId},
    serde::{Deserialize, Serialize},
    std::collections::VecDeque,
};

/// Batches of one producer remembered for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, the idempotent producer's in-flight limit).
pub const BATCHES_TO_RETAIN: usize = 5;

/// One remembered batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentBatch {
    /// Its first sequence number.
    pub base_sequence: i32,
    /// Its last sequence number.
    pub last_sequence: i32,
    /// The offset it was committed at.
    pub base_offset: i64,
    /// Its largest timestamp. State journaled before this was kept reads
    /// as 0: such a producer counts as idle at the next expiry pass.
    #[serde(default)]
    pub max_timestamp: i64,
}

/// One producer on one partition; no recent batch means unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerState {
    /// Its current epoch.
    pub epoch: i16,
    /// Oldest first, at most [`BATCHES_TO_RETAIN`].
    pub recent: VecDeque<RecentBatch>,
}

/// What [`ProducerState::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProducerCheck {
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

impl ProducerState {
    /// Checks `batch` against what the producer sent before.
    pub fn check(&self, batch: &ProducerBatch) -> ProducerCheck {
        let Some(last) = self.recent.back() else {
            return ProducerCheck::Accept;
        };
        if batch.producer_epoch < self.epoch {
            return ProducerCheck::Refused(BatchError::InvalidProducerEpoch {
                epoch: batch.producer_epoch,
                current: self.epoch,
            });
        }
        if batch.producer_epoch > self.epoch {
            return if batch.base_sequence == 0 {
                ProducerCheck::Accept
            } else {
                ProducerCheck::Refused(BatchError::OutOfOrderSequence {
                    sequence: batch.base_sequence,
                    expected: 0,
                })
            };
        }
        if let Some(dup) = self.recent.iter().find(|r| {
            r.base_sequence == batch.base_sequence && r.last_sequence == batch.last_sequence
        }) {
            return ProducerCheck::Duplicate(dup.base_offset);
        }
        let expected = next_sequence(last.last_sequence);
        if batch.base_sequence == expected {
            ProducerCheck::Accept
        } else {
            ProducerCheck::Refused(BatchError::OutOfOrderSequence {
                sequence: batch.base_sequence,
                expected,
            })
        }
    }

    /// Remembers an accepted batch at `base_offset` whose largest
    /// timestamp is `max_timestamp`.
    pub fn record(&mut self, batch: &ProducerBatch, base_offset: i64, max_timestamp: i64) {
        if self.epoch != batch.producer_epoch {
            self.epoch = batch.producer_epoch;
            self.recent.clear();
        }
        if self.recent.len() >= BATCHES_TO_RETAIN {
            self.recent.pop_front();
        }
        self.recent.push_back(RecentBatch {
            base_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence,
            base_offset,
            max_timestamp,
        });
    }

    /// What DescribeProducers reports of this producer; `None` for an
    /// unknown one.
    #[must_use]
    pub fn info(&self, producer_id: i64) -> Option<ProducerInfo> {
        let last = self.recent.back()?;
        Some(ProducerInfo {
            producer_id: ProducerId(producer_id),
            producer_epoch: ProducerEpoch(self.epoch),
            last_sequence: last.last_sequence,
            last_timestamp: last.max_timestamp,
        })
    }

    /// Whether `producer.id.expiration.ms` forgets this producer: its last
    /// batch's timestamp is below `idle_before_ms` (now minus the
    /// expiration, as the classic log's `remove_expired` takes it).
    #[must_use]
    pub fn is_idle(&self, idle_before_ms: i64) -> bool {
        self.recent
            .back()
            .is_none_or(|last| last.max_timestamp < idle_before_ms)
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
        let mut p = ProducerState::default();
        p.record(&batch(0, i32::MAX - 1, i32::MAX), 0, 0);
        check!(p.check(&batch(0, 0, 3)) == ProducerCheck::Accept);
        check!(matches!(
            p.check(&batch(0, 1, 3)),
            ProducerCheck::Refused(_)
        ));
    }

    #[test]
    fn only_the_last_five_batches_are_recognised_as_retries() {
        let mut p = ProducerState::default();
        for i in 0..6 {
            p.record(&batch(0, i * 10, i * 10 + 9), i64::from(i) * 10, 0);
        }
        check!(p.recent.len() == BATCHES_TO_RETAIN);
        check!(p.check(&batch(0, 10, 19)) == ProducerCheck::Duplicate(10));
        check!(matches!(
            p.check(&batch(0, 0, 9)),
            ProducerCheck::Refused(_)
        ));
    }

    #[test]
    fn a_new_epoch_forgets_the_old_batches() {
        let mut p = ProducerState::default();
        p.record(&batch(0, 0, 4), 0, 0);
        check!(p.check(&batch(1, 0, 0)) == ProducerCheck::Accept);
        p.record(&batch(1, 0, 0), 5, 0);
        check!(p.recent.len() == 1);
        check!(matches!(
            p.check(&batch(0, 5, 5)),
            ProducerCheck::Refused(BatchError::InvalidProducerEpoch { .. })
        ));
    }

    #[test]
    fn the_last_batch_is_what_describe_and_expiry_go_by() {
        let mut p = ProducerState::default();
        check!(p.info(9).is_none());
        check!(
            p.is_idle(i64::MIN),
            "an unknown producer has nothing to keep"
        );
        p.record(&batch(2, 0, 4), 100, 5_000);
        // An older timestamp on the later batch: Kafka keeps the last one.
        p.record(&batch(2, 5, 7), 105, 4_000);
        let info = p.info(9).unwrap();
        check!(info.producer_id == ProducerId(9));
        check!(info.producer_epoch == ProducerEpoch(2));
        check!(info.last_sequence == 7);
        check!(info.last_timestamp == 4_000);
        check!(!p.is_idle(4_000), "idle only below the horizon");
        check!(p.is_idle(4_001));
    }
}
