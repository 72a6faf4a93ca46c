//! A read-only view of every committed offset, for the broker's consumer
//! lag gauges (`krabka_consumer_group_lag`), which Kafka operators otherwise
//! get from an external exporter polling OffsetFetch.

use super::{GroupCoordinator, state::GroupState};

/// One group's committed offset for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedPosition {
    /// The group id.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset.
    pub offset: i64,
}

impl GroupCoordinator {
    /// Every committed offset of every live group, sorted by group, topic
    /// and partition. Takes the state lock once, briefly.
    #[must_use]
    pub fn committed_positions(&self) -> Vec<CommittedPosition> {
        let state = self.lock();
        let mut out: Vec<CommittedPosition> = state
            .groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .flat_map(|g| {
                g.offsets
                    .iter()
                    .map(|((topic, partition), committed)| CommittedPosition {
                        group: g.id.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                        offset: committed.offset,
                    })
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition))
        });
        out
    }
}
