//! [`DbMetadataEventLog`]: the remote log metadata manager's
//! [`MetadataEventLog`] in cluster mode, over the cluster database's event
//! logs (`krabka_cluster::events`).
//!
//! A single broker serves `__remote_log_metadata` on its own partitions
//! (`crate::remote::metadata_log`), but in a cluster an internal topic is
//! no broker's: the segments of a user partition must stay findable when
//! another broker reads them, and each broker tiers the partitions it
//! leads into the same metadata partitions. So each metadata partition is
//! an event log in the database, with dense offsets handed out in the
//! appending transaction, and every broker reads the same records.
//!
//! * **Writes** are fenced by this broker's registration: a broker whose
//!   lease lapsed appends nothing (the manager sees a transport error and
//!   retries later, as with an unreachable topic). A group of records is
//!   one transaction.
//! * **Subscriptions** are one task each that reads its assigned partitions
//!   from their positions, a bounded page per partition per round trip,
//!   hands the records to the stream through a bounded channel (a slow
//!   consumer holds back the reading) and, when it has caught up, waits for
//!   an append: this broker's own at once, other brokers' through the
//!   database's `NOTIFY`, with a short poll as the fallback for a
//!   notification lost while reconnecting. The stream drops the records of
//!   a partition whose assignment was removed.
//! * **Range reads** page through one partition and stop with an error
//!   when it ends short of the range.
//! * **Read-only views** ([`DbMetadataEventLog::read_only`]) are for the
//!   operator commands (`krabka remote-metadata dump --database-url`),
//!   which read the log while no broker, or every broker, is up, and write
//!   nothing.
//!
//! The partition count is fixed in the database by the first broker that
//! opens the log (its `remote.log.metadata.topic.num.partitions`), as a
//! Kafka topic keeps the count it was created with: a user partition hashes
//! to a metadata partition by it, so every broker must use the same.

use {
    super::ClusterNode,
    crate::remote::metadata_log::{Subscription, subscription},
    async_trait::async_trait,
    bytes::Bytes,
    krabka_cluster::{
        Cluster, ClusterError, Fence,
        events::{Event, NewEvent},
    },
    krabka_remote_storage_topic::{
        AssignmentHandle, KeyedEvent, MetadataEventLog, MetadataEventRecord, MetadataEventStream,
        MetadataLogError, PartitionStart, REMOTE_LOG_METADATA_TOPIC, RangeVisitor,
    },
    std::{collections::HashMap, sync::Arc, time::Duration},
    tokio::{
        runtime::Handle,
        sync::{mpsc, watch},
        task::JoinHandle,
    },
};

/// Records one read takes from each partition.
const PAGE: i64 = 500;
/// How long a caught-up subscription waits before it reads again without a
/// wake-up (a notification lost while the listener reconnected), and
/// before it retries after a failed read.
const POLL: Duration = Duration::from_millis(500);

/// `__remote_log_metadata` in the cluster database.
#[derive(Clone)]
pub struct DbMetadataEventLog {
    shared: Arc<Shared>,
}

struct Shared {
    cluster: Cluster,
    /// The broker whose registration fences appends; `None` in a read-only
    /// view, which refuses them.
    writer: Option<Arc<ClusterNode>>,
    partition_count: i32,
    runtime: Handle,
    /// Bumped by every append this broker makes or hears of.
    appended: Arc<watch::Sender<u64>>,
    /// Listens for other brokers' appends.
    watcher: JoinHandle<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl std::fmt::Debug for DbMetadataEventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbMetadataEventLog")
            .field("partition_count", &self.shared.partition_count)
            .finish_non_exhaustive()
    }
}

fn transport(e: &ClusterError) -> MetadataLogError {
    MetadataLogError::Transport(e.to_string())
}

fn record(partition: i32, event: Event) -> MetadataEventRecord {
    MetadataEventRecord {
        partition,
        offset: event.offset,
        key: event.key.map(Bytes::from),
        tombstone: event.value.is_none(),
        payload: event.value.map(Bytes::from).unwrap_or_default(),
    }
}

impl DbMetadataEventLog {
    /// The metadata log of the cluster `node` belongs to, with `partitions`
    /// partitions unless the cluster fixed another count before; starts
    /// listening for other brokers' appends. Subscriptions run on the
    /// current runtime.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Other`] outside a tokio runtime,
    /// [`MetadataLogError::Transport`] when the database refuses the count
    /// (below 1) or cannot be reached.
    pub async fn open(node: Arc<ClusterNode>, partitions: i32) -> Result<Self, MetadataLogError> {
        let runtime = Handle::try_current().map_err(|_| {
            MetadataLogError::Other("the metadata log needs a tokio runtime".into())
        })?;
        let cluster = node.cluster().clone();
        let fixed = cluster
            .event_log_partitions(REMOTE_LOG_METADATA_TOPIC, partitions)
            .await
            .map_err(|e| transport(&e))?;
        if fixed != partitions {
            tracing::warn!(
                configured = partitions,
                cluster = fixed,
                "remote.log.metadata.topic.num.partitions differs from the count the cluster \
                 fixed; using the cluster's"
            );
        }
        Ok(Self::over(cluster, Some(node), fixed, runtime))
    }

    /// A view of `cluster`'s metadata log that reads and never writes, for
    /// the operator commands: `None` when no broker ever opened the log (so
    /// nothing was ever tiered). Subscriptions run on the current runtime.
    ///
    /// # Errors
    ///
    /// [`MetadataLogError::Other`] outside a tokio runtime,
    /// [`MetadataLogError::Transport`] when the database cannot be read.
    pub async fn read_only(cluster: Cluster) -> Result<Option<Self>, MetadataLogError> {
        let runtime = Handle::try_current().map_err(|_| {
            MetadataLogError::Other("the metadata log needs a tokio runtime".into())
        })?;
        let count = cluster
            .event_log_partition_count(REMOTE_LOG_METADATA_TOPIC)
            .await
            .map_err(|e| transport(&e))?;
        Ok(count.map(|count| Self::over(cluster, None, count, runtime)))
    }

    /// The log of `partitions` partitions, listening for appends.
    fn over(
        cluster: Cluster,
        writer: Option<Arc<ClusterNode>>,
        partitions: i32,
        runtime: Handle,
    ) -> Self {
        let appended = Arc::new(watch::Sender::new(0_u64));
        let waking = Arc::clone(&appended);
        let watcher = {
            let _entered = runtime.enter();
            cluster.watch_event_appends(Arc::new(move |_shards| {
                waking.send_modify(|n| *n = n.wrapping_add(1));
            }))
        };
        Self {
            shared: Arc::new(Shared {
                cluster,
                writer,
                partition_count: partitions,
                runtime,
                appended,
                watcher,
            }),
        }
    }
}

impl Shared {
    fn check(&self, partition: i32) -> Result<(), MetadataLogError> {
        if (0..self.partition_count).contains(&partition) {
            Ok(())
        } else {
            Err(MetadataLogError::PartitionOutOfRange {
                partition,
                partition_count: self.partition_count,
            })
        }
    }

    async fn append(&self, events: Vec<(i32, NewEvent)>) -> Result<Vec<i64>, MetadataLogError> {
        for (partition, _) in &events {
            self.check(*partition)?;
        }
        let writer = self.writer.as_ref().ok_or_else(|| {
            MetadataLogError::Other("a read-only view of the remote log metadata".into())
        })?;
        let lease = writer.broker_lease().ok_or_else(|| {
            MetadataLogError::Transport(
                "this broker's cluster registration has lapsed; not writing remote log metadata"
                    .into(),
            )
        })?;
        let offsets = self
            .cluster
            .append_event_group(&Fence::Broker(lease), &events)
            .await
            .map_err(|e| transport(&e))?;
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
        Ok(offsets)
    }

    async fn append_one(
        &self,
        partition: i32,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        let event = NewEvent {
            key: key.map(Vec::from),
            value: value.map(Vec::from),
        };
        self.append(vec![(partition, event)])
            .await?
            .first()
            .copied()
            .ok_or_else(|| MetadataLogError::Other("an append returned no offset".into()))
    }
}

#[async_trait]
impl MetadataEventLog for DbMetadataEventLog {
    fn partition_count(&self) -> i32 {
        self.shared.partition_count
    }

    async fn publish(&self, partition: i32, event: Bytes) -> Result<i64, MetadataLogError> {
        self.shared.append_one(partition, None, Some(event)).await
    }

    async fn publish_keyed(
        &self,
        partition: i32,
        key: Bytes,
        event: Option<Bytes>,
    ) -> Result<i64, MetadataLogError> {
        self.shared.append_one(partition, Some(key), event).await
    }

    /// One transaction for the whole group: all of it is appended or none.
    async fn publish_keyed_group(
        &self,
        events: Vec<KeyedEvent>,
    ) -> Result<Vec<i64>, MetadataLogError> {
        let events = events
            .into_iter()
            .map(|e| {
                let event = NewEvent {
                    key: Some(Vec::from(e.key)),
                    value: e.event.map(Vec::from),
                };
                (e.partition, event)
            })
            .collect();
        self.shared.append(events).await
    }

    fn subscribe(
        &self,
        assignment: Vec<PartitionStart>,
    ) -> (MetadataEventStream, Arc<dyn AssignmentHandle>) {
        let shared = Arc::clone(&self.shared);
        subscription(
            &self.shared.runtime,
            self.shared.partition_count,
            assignment,
            |subscription, sender| follow(shared, subscription, sender),
        )
    }

    async fn high_water_marks(&self) -> Result<Vec<i64>, MetadataLogError> {
        self.shared
            .cluster
            .event_log_heads(self.shared.partition_count)
            .await
            .map_err(|e| transport(&e))
    }

    async fn visit_range(
        &self,
        partition: i32,
        start: i64,
        end: i64,
        visit: &mut RangeVisitor<'_>,
    ) -> Result<(), MetadataLogError> {
        self.shared.check(partition)?;
        let mut offset = start.max(0);
        while offset < end {
            let page = self
                .shared
                .cluster
                .read_event_pages(&[(partition, offset)], PAGE)
                .await
                .map_err(|e| transport(&e))?;
            if page.is_empty() {
                return Err(MetadataLogError::RangeShort {
                    partition,
                    reached: offset,
                    end,
                });
            }
            for (_, event) in page {
                if event.offset >= end {
                    return Ok(());
                }
                offset = event.offset + 1;
                visit(record(partition, event))?;
            }
        }
        Ok(())
    }
}

/// Reads the assigned partitions and forwards their records until the
/// stream is dropped; waits for an append (or the poll interval) when it
/// has caught up.
async fn follow(
    shared: Arc<Shared>,
    subscription: Arc<Subscription>,
    sender: mpsc::Sender<(u64, MetadataEventRecord)>,
) {
    let mut appended = shared.appended.subscribe();
    loop {
        // Listen before reading: a change during the read wakes the wait.
        let assignment_changed = subscription.changed().notified();
        tokio::pin!(assignment_changed);
        assignment_changed.as_mut().enable();
        appended.borrow_and_update();
        let positions = subscription.positions();
        if !positions.is_empty() {
            let from: Vec<(i32, i64)> = positions.iter().map(|&(p, _, o)| (p, o)).collect();
            let generations: HashMap<i32, u64> =
                positions.iter().map(|&(p, g, _)| (p, g)).collect();
            match shared.cluster.read_event_pages(&from, PAGE).await {
                Ok(page) if !page.is_empty() => {
                    let mut next: HashMap<i32, i64> = HashMap::new();
                    for (partition, event) in page {
                        let Some(&generation) = generations.get(&partition) else {
                            continue;
                        };
                        next.insert(partition, event.offset + 1);
                        if sender
                            .send((generation, record(partition, event)))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    for (partition, next) in next {
                        if let Some(&generation) = generations.get(&partition) {
                            subscription.advance(partition, generation, next);
                        }
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "reading remote log metadata from the cluster database failed");
                }
            }
        }
        tokio::select! {
            changed = appended.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(POLL).await;
                }
            }
            () = assignment_changed => {}
            () = tokio::time::sleep(POLL) => {}
            () = sender.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::cluster::ClusterSettings,
        assert2::check,
        futures_util::StreamExt,
        krabka_cluster::{DatabaseConfig, LeaseTiming},
        krabka_test_support::TestDatabase,
    };

    async fn join(db: &TestDatabase, node: i32) -> Arc<ClusterNode> {
        let settings = ClusterSettings {
            database: DatabaseConfig::new(db.url()),
            timing: LeaseTiming {
                duration: Duration::from_secs(600),
                renew_interval: Duration::from_secs(100),
                safety_margin: Duration::from_secs(10),
            },
            rack: None,
        };
        ClusterNode::join(
            settings,
            node,
            format!("PLAINTEXT://127.0.0.1:{}", 9000 + node),
        )
        .await
        .expect("join the cluster")
    }

    async fn next(stream: &mut MetadataEventStream) -> MetadataEventRecord {
        tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("a record within 30 s")
            .expect("the stream goes on")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn brokers_share_metadata_partitions_through_the_database() {
        let Some(db) = TestDatabase::create().await else {
            return;
        };
        let (one, two) = (join(&db, 1).await, join(&db, 2).await);
        let writer = DbMetadataEventLog::open(Arc::clone(&one), 3).await.unwrap();
        // The first broker fixed the count; a second configured otherwise
        // uses it too.
        let reader = DbMetadataEventLog::open(Arc::clone(&two), 7).await.unwrap();
        check!(reader.partition_count() == 3);
        check!(
            writer
                .publish(1, Bytes::from_static(b"first"))
                .await
                .unwrap()
                == 0
        );
        check!(
            reader
                .publish(1, Bytes::from_static(b"second"))
                .await
                .unwrap()
                == 1
        );
        check!(
            writer
                .publish_keyed(2, Bytes::from_static(b"k"), None)
                .await
                .unwrap()
                == 0
        );
        let group = vec![
            KeyedEvent {
                partition: 0,
                key: Bytes::from_static(b"a"),
                event: Some(Bytes::from_static(b"x")),
            },
            KeyedEvent {
                partition: 2,
                key: Bytes::from_static(b"b"),
                event: Some(Bytes::from_static(b"y")),
            },
        ];
        check!(writer.publish_keyed_group(group).await.unwrap() == vec![0, 1]);
        check!(reader.high_water_marks().await.unwrap() == vec![1, 2, 2]);
        check!(reader.low_water_marks().await.unwrap() == vec![0, 0, 0]);
        check!(matches!(
            writer.publish(3, Bytes::new()).await,
            Err(MetadataLogError::PartitionOutOfRange { .. })
        ));

        // Another broker's subscription replays from its start, then
        // follows the writer's appends.
        let (mut stream, assignment) = reader.subscribe(vec![PartitionStart::new(1, 1)]);
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.payload.as_ref()) == (1, 1, &b"second"[..]));
        assignment.add(PartitionStart::new(2, 0));
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.tombstone) == (2, 0, true));
        check!(r.key.as_deref() == Some(&b"k"[..]));
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.payload.as_ref()) == (2, 1, &b"y"[..]));
        writer
            .publish(1, Bytes::from_static(b"live"))
            .await
            .unwrap();
        let r = next(&mut stream).await;
        check!((r.partition, r.offset, r.payload.as_ref()) == (1, 2, &b"live"[..]));
        let mut assigned = assignment.assigned();
        assigned.sort_unstable();
        check!(assigned == vec![1, 2]);
        // A removed partition's records stop.
        assignment.remove(1);
        writer
            .publish(1, Bytes::from_static(b"gone"))
            .await
            .unwrap();
        writer
            .publish(2, Bytes::from_static(b"kept"))
            .await
            .unwrap();
        let r = next(&mut stream).await;
        check!((r.partition, r.payload.as_ref()) == (2, &b"kept"[..]));

        // Range reads, and a range past the end is short.
        let mut seen = Vec::new();
        reader
            .visit_range(1, 1, 3, &mut |r| {
                seen.push(r.offset);
                Ok(())
            })
            .await
            .unwrap();
        check!(seen == vec![1, 2]);
        let short = reader.visit_range(1, 0, 10, &mut |_| Ok(())).await;
        check!(matches!(
            short,
            Err(MetadataLogError::RangeShort { reached: 4, .. })
        ));

        // A broker whose registration lapsed in the database writes nothing.
        let conn = one.cluster().database().connection().await.unwrap();
        conn.execute(
            "UPDATE brokers SET lease_expires_at = clock_timestamp() - interval '1 millisecond'
             WHERE node_id = 1",
            &[],
        )
        .await
        .unwrap();
        let fenced = writer.publish(0, Bytes::from_static(b"late")).await;
        check!(matches!(fenced, Err(MetadataLogError::Transport(ref m)) if m.contains("fenced")));
        check!(reader.high_water_marks().await.unwrap()[0] == 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_only_view_reads_what_brokers_wrote_and_writes_nothing() {
        let Some(db) = TestDatabase::create().await else {
            return;
        };
        let cluster = || async {
            krabka_cluster::Cluster::connect(&DatabaseConfig::new(db.url()))
                .await
                .expect("connect")
        };
        // No broker opened the log: nothing was tiered, there is no view.
        check!(
            DbMetadataEventLog::read_only(cluster().await)
                .await
                .unwrap()
                .is_none()
        );
        let one = join(&db, 1).await;
        let writer = DbMetadataEventLog::open(Arc::clone(&one), 2).await.unwrap();
        writer
            .publish(1, Bytes::from_static(b"segment"))
            .await
            .unwrap();
        let view = DbMetadataEventLog::read_only(cluster().await)
            .await
            .unwrap()
            .expect("a view once a broker opened the log");
        check!(view.partition_count() == 2);
        check!(view.high_water_marks().await.unwrap() == vec![0, 1]);
        let mut seen = Vec::new();
        view.visit_range(1, 0, 1, &mut |r| {
            seen.push(r.payload);
            Ok(())
        })
        .await
        .unwrap();
        check!(seen == vec![Bytes::from_static(b"segment")]);
        let refused = view.publish(1, Bytes::from_static(b"no")).await;
        check!(matches!(refused, Err(MetadataLogError::Other(ref m)) if m.contains("read-only")));
        check!(view.high_water_marks().await.unwrap() == vec![0, 1]);
    }
}
