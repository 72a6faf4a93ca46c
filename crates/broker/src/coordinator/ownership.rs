//! Which partitions of its internal topic a coordinator serves, and how it
//! refuses the others.
//!
//! A single node serves every partition of `__consumer_offsets` and
//! `__transaction_state`, except one that could not be read at start
//! (refused `COORDINATOR_NOT_AVAILABLE` rather than served from a state
//! missing what it holds). In cluster mode a partition is a shard that
//! moves between brokers by lease: a coordinator serves only the shards it
//! has taken and loaded, answers `COORDINATOR_LOAD_IN_PROGRESS` while it
//! loads one and `NOT_COORDINATOR` for the rest, as Kafka's coordinators do
//! around a leadership change. It also stops serving every shard once its
//! lease's local deadline passes, without waiting for the renewal loop to
//! notice, so a broker cut off from the database falls silent before
//! anyone else can take over.

use {
    kafka_protocol::ResponseError,
    std::{
        collections::HashMap,
        sync::{Mutex, RwLock},
        time::Instant,
    },
};

/// Why a coordinator does not serve a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another broker owns it (or nobody does yet).
    NotCoordinator,
    /// This broker is loading it.
    LoadInProgress,
    /// Its stored state could not be read (the reason says why).
    Unavailable(String),
}

impl Refusal {
    /// The Kafka error code clients get.
    #[must_use]
    pub fn code(&self) -> i16 {
        match self {
            Self::NotCoordinator => ResponseError::NotCoordinator.code(),
            Self::LoadInProgress => ResponseError::CoordinatorLoadInProgress.code(),
            Self::Unavailable(_) => ResponseError::CoordinatorNotAvailable.code(),
        }
    }

    /// A message for the answer's error message field and the logs.
    #[must_use]
    pub fn reason(&self) -> String {
        match self {
            Self::NotCoordinator => "this broker is not the coordinator".to_owned(),
            Self::LoadInProgress => "the coordinator is loading".to_owned(),
            Self::Unavailable(reason) => reason.clone(),
        }
    }
}

/// What a coordinator knows of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PartitionState {
    Loading,
    Owned,
    Unavailable(String),
}

/// The partitions a coordinator serves.
#[derive(Debug)]
pub struct Ownership {
    /// Cluster mode: only partitions marked owned are served, and only
    /// until `valid_until`.
    tracked: bool,
    partitions: RwLock<HashMap<i32, PartitionState>>,
    valid_until: Mutex<Option<Instant>>,
}

impl Ownership {
    /// A single node: every partition is served unless marked unavailable.
    #[must_use]
    pub fn every_partition() -> Self {
        Self {
            tracked: false,
            partitions: RwLock::default(),
            valid_until: Mutex::new(None),
        }
    }

    /// Cluster mode: nothing is served until taken
    /// ([`Ownership::loading`], then [`Ownership::owned`]) and the lease
    /// deadline is set ([`Ownership::valid_until`]).
    #[must_use]
    pub fn by_lease() -> Self {
        Self {
            tracked: true,
            partitions: RwLock::default(),
            valid_until: Mutex::new(None),
        }
    }

    /// Whether partitions come and go by lease (cluster mode).
    #[must_use]
    pub fn is_by_lease(&self) -> bool {
        self.tracked
    }

    /// Why `partition` is not served now, or `None` when it is.
    #[must_use]
    pub fn refusal(&self, partition: i32) -> Option<Refusal> {
        let state = self.read().get(&partition).cloned();
        match state {
            Some(PartitionState::Unavailable(reason)) => Some(Refusal::Unavailable(reason)),
            Some(PartitionState::Loading) => Some(Refusal::LoadInProgress),
            Some(PartitionState::Owned) if self.lease_valid() => None,
            None if !self.tracked => None,
            _ => Some(Refusal::NotCoordinator),
        }
    }

    /// Marks `partition` as being loaded.
    pub fn loading(&self, partition: i32) {
        self.write().insert(partition, PartitionState::Loading);
    }

    /// Marks `partition` as served.
    pub fn owned(&self, partition: i32) {
        if self.tracked {
            self.write().insert(partition, PartitionState::Owned);
        } else {
            self.write().remove(&partition);
        }
    }

    /// Marks `partition` as refused for `reason` (its state cannot be read).
    pub fn unavailable(&self, partition: i32, reason: String) {
        self.write()
            .insert(partition, PartitionState::Unavailable(reason));
    }

    /// Forgets `partition` (cluster mode: it is someone else's now).
    pub fn released(&self, partition: i32) {
        self.write().remove(&partition);
    }

    /// The partitions served or loading, in order.
    #[must_use]
    pub fn held(&self) -> Vec<i32> {
        let mut held: Vec<i32> = self
            .read()
            .iter()
            .filter(|(_, s)| !matches!(s, PartitionState::Unavailable(_)))
            .map(|(p, _)| *p)
            .collect();
        held.sort_unstable();
        held
    }

    /// Cluster mode: serve owned partitions until `deadline` (the local
    /// deadline of the last lease renewal).
    pub fn valid_until(&self, deadline: Instant) {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(deadline);
    }

    fn lease_valid(&self) -> bool {
        if !self.tracked {
            return true;
        }
        self.valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|deadline| Instant::now() < deadline)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<i32, PartitionState>> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<i32, PartitionState>> {
        self.partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use {
        super::{Ownership, Refusal},
        std::time::{Duration, Instant},
    };

    #[test]
    fn a_single_node_serves_every_partition_but_an_unreadable_one() {
        let own = Ownership::every_partition();
        assert_eq!(own.refusal(7), None);
        own.unavailable(7, "bad batch".into());
        assert_eq!(
            own.refusal(7),
            Some(Refusal::Unavailable("bad batch".into()))
        );
        assert_eq!(own.refusal(8), None);
    }

    #[test]
    fn a_leased_partition_is_served_only_once_loaded_and_while_the_lease_holds() {
        let own = Ownership::by_lease();
        assert_eq!(own.refusal(3), Some(Refusal::NotCoordinator));
        own.valid_until(Instant::now() + Duration::from_secs(60));
        own.loading(3);
        assert_eq!(own.refusal(3), Some(Refusal::LoadInProgress));
        own.owned(3);
        assert_eq!(own.refusal(3), None);
        assert_eq!(own.held(), vec![3]);
        own.valid_until(Instant::now() - Duration::from_millis(1));
        assert_eq!(own.refusal(3), Some(Refusal::NotCoordinator));
        own.valid_until(Instant::now() + Duration::from_secs(60));
        own.released(3);
        assert_eq!(own.refusal(3), Some(Refusal::NotCoordinator));
        assert!(own.held().is_empty());
    }
}
