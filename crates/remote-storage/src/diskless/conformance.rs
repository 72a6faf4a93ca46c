//! The test bodies every [`BatchCoordinator`] must pass.
//!
//! They are library code, not `#[cfg(test)]`, so that each implementation
//! — the in-memory reference here, the PostgreSQL coordinator in
//! `krabka-cluster` — runs the very same cases: [`run_all`] takes a factory
//! of fresh coordinators and panics, naming the case, on the first broken
//! guarantee. Every case works on topic ids of its own, so several cases
//! may share one database.

use {
    super::{
        coordinator::BatchCoordinator,
        types::{
            BatchError, CommitBatch, Committed, Consolidate, Consolidated, DeleteRecords,
            DisklessPartition, FindBatches, ListOffsetsQuery, ObjectCommit, ObjectKey,
            OffsetAnswer, OffsetQuery, PartitionError, ProducerBatch, ProducerInfo,
            RetentionPolicy,
        },
    },
    krabka_ids::{BrokerId, ProducerEpoch, ProducerId},
    std::{future::Future, sync::Arc},
    uuid::Uuid,
};

/// Each case, by name.
type Case = fn(Arc<dyn BatchCoordinator>) -> futures_util::future::BoxFuture<'static, ()>;

/// Runs every case, each on a coordinator from `fresh`.
///
/// # Panics
///
/// On the first guarantee an implementation breaks, naming the case.
pub async fn run_all<F, Fut>(mut fresh: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn BatchCoordinator>>,
{
    let cases: &[(&str, Case)] = &[
        ("offsets_are_dense_in_commit_order", |c| {
            Box::pin(offsets_are_dense_in_commit_order(c))
        }),
        ("a_refused_batch_does_not_refuse_the_others", |c| {
            Box::pin(a_refused_batch_does_not_refuse_the_others(c))
        }),
        ("idempotent_retries_get_their_original_offsets", |c| {
            Box::pin(idempotent_retries_get_their_original_offsets(c))
        }),
        ("sequences_and_epochs_are_checked", |c| {
            Box::pin(sequences_and_epochs_are_checked(c))
        }),
        ("fetches_respect_bytes_but_return_one_batch", |c| {
            Box::pin(fetches_respect_bytes_but_return_one_batch(c))
        }),
        ("list_offsets_answers", |c| {
            Box::pin(list_offsets_answers(c))
        }),
        ("delete_records_moves_the_log_start", |c| {
            Box::pin(delete_records_moves_the_log_start(c))
        }),
        ("consolidation_moves_the_batch_start_once", |c| {
            Box::pin(consolidation_moves_the_batch_start_once(c))
        }),
        ("retention_by_time_and_bytes", |c| {
            Box::pin(retention_by_time_and_bytes(c))
        }),
        ("dead_objects_wait_for_their_grace_period", |c| {
            Box::pin(dead_objects_wait_for_their_grace_period(c))
        }),
        ("a_deleted_topic_is_gone", |c| {
            Box::pin(a_deleted_topic_is_gone(c))
        }),
        ("an_abandoned_object_is_dead_unless_it_was_committed", |c| {
            Box::pin(an_abandoned_object_is_dead_unless_it_was_committed(c))
        }),
        ("producers_are_described_by_their_last_batch", |c| {
            Box::pin(producers_are_described_by_their_last_batch(c))
        }),
        ("idle_producers_expire_and_may_start_again", |c| {
            Box::pin(idle_producers_expire_and_may_start_again(c))
        }),
    ];
    for (name, case) in cases {
        let coordinator = fresh().await;
        let run = tokio::spawn(case(coordinator));
        if let Err(e) = run.await {
            panic!("batch coordinator conformance case {name} failed: {e}");
        }
    }
}

/// Fresh partitions on a topic id no other case uses.
fn partitions(n: i32) -> Vec<DisklessPartition> {
    let topic = Uuid::new_v4();
    (0..n).map(|i| DisklessPartition::new(topic, i)).collect()
}

/// A commit of object `key` with one batch of `count` offsets per entry,
/// laid out back to back, 100 bytes each, timestamps 1000, 2000, ...
#[must_use]
pub fn commit_of(key: &str, batches: &[(DisklessPartition, u32)]) -> ObjectCommit {
    ObjectCommit {
        key: ObjectKey(format!("{key}-{}", Uuid::new_v4())),
        uploader: BrokerId(1),
        size: 100 * batches.len() as u64 + 18,
        batches: batches
            .iter()
            .zip(0u64..)
            .map(|(&(partition, offset_count), i)| CommitBatch {
                partition,
                position: 100 * i,
                size: 100,
                offset_count,
                max_timestamp: 1000 * (i as i64 + 1),
                producer: None,
            })
            .collect(),
    }
}

fn idempotent(mut commit: ObjectCommit, producer: ProducerBatch) -> ObjectCommit {
    for b in &mut commit.batches {
        b.producer = Some(producer);
    }
    commit
}

async fn commit(
    c: &Arc<dyn BatchCoordinator>,
    commit: &ObjectCommit,
) -> Vec<Result<Committed, BatchError>> {
    c.commit_object(commit).await.expect("commit")
}

async fn abandon(c: &Arc<dyn BatchCoordinator>, object: &ObjectCommit) -> bool {
    c.abandon_object(&object.key, object.uploader, object.size)
        .await
        .expect("abandon")
}

fn base(answer: &Result<Committed, BatchError>) -> i64 {
    answer.as_ref().expect("accepted").base_offset
}

async fn offsets_are_dense_in_commit_order(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    c.create_partitions(&p).await.unwrap();
    c.create_partitions(&p).await.unwrap(); // idempotent
    let a = commit(&c, &commit_of("a", &[(p[0], 3), (p[1], 1), (p[0], 2)])).await;
    assert_eq!(a.iter().map(base).collect::<Vec<_>>(), [0, 0, 3]);
    let b = commit(&c, &commit_of("b", &[(p[0], 5)])).await;
    assert_eq!(base(&b[0]), 5);
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().high_watermark, 10);
    assert_eq!(info[1].as_ref().unwrap().high_watermark, 1);
    assert_eq!(info[0].as_ref().unwrap().byte_size, 300);
    let found = c
        .find_batches(&[FindBatches {
            partition: p[0],
            offset: 4,
            max_bytes: u32::MAX,
        }])
        .await
        .unwrap();
    let found = found[0].as_ref().unwrap();
    let ranges: Vec<_> = found
        .batches
        .iter()
        .map(|b| (b.base_offset, b.last_offset, b.position))
        .collect();
    assert_eq!(ranges, [(3, 4, 200), (5, 9, 0)]);
}

async fn a_refused_batch_does_not_refuse_the_others(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let unknown = partitions(1)[0];
    let a = commit(&c, &commit_of("a", &[(p[0], 1), (unknown, 1), (p[0], 1)])).await;
    assert_eq!(a[1], Err(BatchError::UnknownTopicOrPartition));
    assert_eq!(base(&a[0]), 0);
    assert_eq!(base(&a[2]), 1);
    // An object cannot be committed twice.
    let again = commit_of("b", &[(p[0], 1)]);
    commit(&c, &again).await;
    assert!(c.commit_object(&again).await.is_err());
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().high_watermark, 3);
}

async fn idempotent_retries_get_their_original_offsets(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let producer = |base, last| ProducerBatch {
        producer_id: 42,
        producer_epoch: 0,
        base_sequence: base,
        last_sequence: last,
    };
    commit(&c, &commit_of("x", &[(p[0], 7)])).await; // another client first
    let first = commit(
        &c,
        &idempotent(commit_of("a", &[(p[0], 3)]), producer(0, 2)),
    )
    .await;
    assert_eq!(base(&first[0]), 7);
    let second = commit(
        &c,
        &idempotent(commit_of("b", &[(p[0], 2)]), producer(3, 4)),
    )
    .await;
    assert_eq!(base(&second[0]), 10);
    // The first batch retried (its answer was lost): same offsets, nothing added.
    let retry = commit(
        &c,
        &idempotent(commit_of("c", &[(p[0], 3)]), producer(0, 2)),
    )
    .await;
    let retry = retry[0].as_ref().unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, 7);
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().high_watermark, 12);
    // The object holding only the duplicate is dead at once.
    let dead = c.objects_to_delete(i64::MAX).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].0.starts_with("c-"));
}

async fn sequences_and_epochs_are_checked(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let batch = |epoch, base, last| ProducerBatch {
        producer_id: 7,
        producer_epoch: epoch,
        base_sequence: base,
        last_sequence: last,
    };
    let p0 = p[0];
    let send = |epoch, base, last| {
        let c = Arc::clone(&c);
        async move {
            commit(
                &c,
                &idempotent(commit_of("s", &[(p0, 1)]), batch(epoch, base, last)),
            )
            .await
            .remove(0)
        }
    };
    // An unknown producer may start anywhere (its state may have expired).
    assert!(send(3, 10, 10).await.is_ok());
    assert!(send(3, 11, 11).await.is_ok());
    assert_eq!(
        send(3, 13, 13).await,
        Err(BatchError::OutOfOrderSequence {
            sequence: 13,
            expected: 12
        })
    );
    assert_eq!(
        send(2, 12, 12).await,
        Err(BatchError::InvalidProducerEpoch {
            epoch: 2,
            current: 3
        })
    );
    assert_eq!(
        send(4, 5, 5).await,
        Err(BatchError::OutOfOrderSequence {
            sequence: 5,
            expected: 0
        })
    );
    assert!(send(4, 0, 0).await.is_ok());
    assert!(send(4, 1, 1).await.is_ok());
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().high_watermark, 4);
    assert_eq!(
        BatchError::InvalidProducerEpoch {
            epoch: 0,
            current: 1
        }
        .kafka_code(),
        47
    );
    assert_eq!(
        BatchError::OutOfOrderSequence {
            sequence: 0,
            expected: 1
        }
        .kafka_code(),
        45
    );
}

async fn fetches_respect_bytes_but_return_one_batch(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    commit(&c, &commit_of("a", &[(p[0], 1), (p[0], 1), (p[0], 1)])).await;
    let find = |offset, max_bytes| FindBatches {
        partition: p[0],
        offset,
        max_bytes,
    };
    let found = c
        .find_batches(&[find(0, 10), find(0, 250), find(3, 1000), find(4, 1000)])
        .await
        .unwrap();
    assert_eq!(
        found[0].as_ref().unwrap().batches.len(),
        1,
        "at least one batch"
    );
    assert_eq!(found[1].as_ref().unwrap().batches.len(), 2);
    assert!(
        found[2].as_ref().unwrap().batches.is_empty(),
        "at the high watermark"
    );
    assert_eq!(found[2].as_ref().unwrap().info.high_watermark, 3);
    assert_eq!(
        found[3],
        Err(PartitionError::OffsetOutOfRange {
            offset: 4,
            log_start_offset: 0,
            high_watermark: 3
        })
    );
    assert_eq!(found[3].as_ref().unwrap_err().kafka_code(), 1);

    // Many batches of 100 bytes: a budget takes as many as fit, in order,
    // however many that is.
    let many = vec![(p[0], 2); 60];
    commit(&c, &commit_of("many", &many)).await;
    let found = c
        .find_batches(&[find(3, 100_000), find(3, 4_050), find(41, 100_000)])
        .await
        .unwrap();
    let offsets = |i: usize| -> Vec<i64> {
        found[i]
            .as_ref()
            .unwrap()
            .batches
            .iter()
            .map(|b| b.base_offset)
            .collect()
    };
    assert_eq!(offsets(0), (0..60).map(|b| 3 + 2 * b).collect::<Vec<_>>());
    assert_eq!(offsets(1), (0..40).map(|b| 3 + 2 * b).collect::<Vec<_>>());
    assert_eq!(
        offsets(2),
        (0..60)
            .map(|b| 3 + 2 * b)
            .filter(|o| o + 1 >= 41)
            .collect::<Vec<_>>(),
        "from the batch holding offset 41"
    );
    let unknown = c
        .find_batches(&[FindBatches {
            partition: partitions(1)[0],
            offset: 0,
            max_bytes: 1,
        }])
        .await
        .unwrap();
    assert_eq!(unknown[0], Err(PartitionError::UnknownTopicOrPartition));
}

async fn list_offsets_answers(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let q = |query| ListOffsetsQuery {
        partition: p[0],
        query,
    };
    let empty = c
        .list_offsets(&[q(OffsetQuery::MaxTimestamp), q(OffsetQuery::Latest)])
        .await
        .unwrap();
    assert_eq!(empty[0], Ok(OffsetAnswer::NotFound));
    assert_eq!(empty[1], Ok(OffsetAnswer::Offset(0)));
    // Timestamps 1000, 2000, 3000 on batches at offsets 0, 2, 4.
    let mut commit_ = commit_of("a", &[(p[0], 2), (p[0], 2), (p[0], 2)]);
    commit_.batches[1].max_timestamp = 5000; // the max, in the middle
    commit(&c, &commit_).await;
    let answers = c
        .list_offsets(&[
            q(OffsetQuery::Earliest),
            q(OffsetQuery::Latest),
            q(OffsetQuery::MaxTimestamp),
            q(OffsetQuery::Timestamp(1500)),
            q(OffsetQuery::Timestamp(6000)),
        ])
        .await
        .unwrap();
    assert_eq!(answers[0], Ok(OffsetAnswer::Offset(0)));
    assert_eq!(answers[1], Ok(OffsetAnswer::Offset(6)));
    let batch_base = |a: &Result<OffsetAnswer, PartitionError>| match a {
        Ok(OffsetAnswer::Batch(b)) => b.base_offset,
        other => panic!("expected a batch, got {other:?}"),
    };
    assert_eq!(batch_base(&answers[2]), 2);
    assert_eq!(batch_base(&answers[3]), 2);
    assert_eq!(answers[4], Ok(OffsetAnswer::NotFound));
}

async fn delete_records_moves_the_log_start(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let a = commit_of("a", &[(p[0], 2)]);
    commit(&c, &a).await;
    commit(&c, &commit_of("b", &[(p[0], 2), (p[0], 2)])).await;
    let del = |offset| DeleteRecords {
        partition: p[0],
        offset,
    };
    // Inside the second batch: the first batch goes, so does object a.
    assert_eq!(c.delete_records(&[del(3)]).await.unwrap()[0], Ok(3));
    assert_eq!(
        c.delete_records(&[del(1)]).await.unwrap()[0],
        Ok(3),
        "never back"
    );
    assert!(matches!(
        c.delete_records(&[del(7)]).await.unwrap()[0],
        Err(PartitionError::OffsetOutOfRange { .. })
    ));
    let found = c
        .find_batches(&[FindBatches {
            partition: p[0],
            offset: 2,
            max_bytes: 1000,
        }])
        .await
        .unwrap();
    assert!(matches!(
        found[0],
        Err(PartitionError::OffsetOutOfRange { .. })
    ));
    let found = c
        .find_batches(&[FindBatches {
            partition: p[0],
            offset: 3,
            max_bytes: 1000,
        }])
        .await
        .unwrap();
    let found = found[0].as_ref().unwrap();
    assert_eq!(
        found.batches[0].base_offset, 2,
        "the batch holding offset 3"
    );
    assert_eq!(found.info.log_start_offset, 3);
    assert_eq!(c.objects_to_delete(i64::MAX).await.unwrap(), [a.key]);
    // -1: up to the high watermark; everything goes.
    assert_eq!(c.delete_records(&[del(-1)]).await.unwrap()[0], Ok(6));
    assert_eq!(c.objects_to_delete(i64::MAX).await.unwrap().len(), 2);
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().byte_size, 0);
}

async fn consolidation_moves_the_batch_start_once(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    c.create_partitions(&p).await.unwrap();
    // p0: batches [0,2) [2,4) in object a, [4,6) in object b (shared with p1).
    let a = commit_of("a", &[(p[0], 2), (p[0], 2)]);
    commit(&c, &a).await;
    let b = commit_of("b", &[(p[0], 2), (p[1], 1)]);
    commit(&c, &b).await;
    let info = c.log_info(&p[..1]).await.unwrap()[0].clone().unwrap();
    assert_eq!((info.log_start_offset, info.batch_start_offset), (0, 0));
    let consolidate = |from, to| Consolidate {
        partition: p[0],
        from,
        to,
    };
    // Not a batch boundary, not from the batch start, beyond the end.
    for (from, to) in [(0, 3), (2, 4), (0, 7), (0, 0)] {
        assert_eq!(
            c.consolidate(&[consolidate(from, to)]).await.unwrap()[0],
            Ok(Consolidated::Refused {
                batch_start_offset: 0
            }),
            "[{from}, {to})"
        );
    }
    assert_eq!(
        c.consolidate(&[consolidate(0, 4)]).await.unwrap()[0],
        Ok(Consolidated::Applied)
    );
    // A second broker consolidating the same range is refused.
    assert_eq!(
        c.consolidate(&[consolidate(0, 4)]).await.unwrap()[0],
        Ok(Consolidated::Refused {
            batch_start_offset: 4
        })
    );
    let info = c.log_info(&p[..1]).await.unwrap()[0].clone().unwrap();
    assert_eq!(
        (
            info.log_start_offset,
            info.batch_start_offset,
            info.high_watermark,
            info.byte_size
        ),
        (0, 4, 6, 100),
        "the log start stays; the consolidated bytes leave"
    );
    // Object a held only consolidated batches: dead. Object b lives on.
    assert_eq!(
        c.objects_to_delete(i64::MAX).await.unwrap(),
        std::slice::from_ref(&a.key)
    );
    // A fetch below the batch start finds no batch (the tier holds it);
    // at the batch start, the next batch.
    let find = |offset| FindBatches {
        partition: p[0],
        offset,
        max_bytes: 1000,
    };
    let found = c.find_batches(&[find(1), find(4)]).await.unwrap();
    let below = found[0].as_ref().unwrap();
    assert!(below.batches.is_empty());
    assert_eq!(below.info.batch_start_offset, 4);
    assert_eq!(found[1].as_ref().unwrap().batches[0].base_offset, 4);
    // ListOffsets still answers the log start; DeleteRecords into the
    // consolidated range moves only the log start, past it the batch start too.
    let earliest = c
        .list_offsets(&[ListOffsetsQuery {
            partition: p[0],
            query: OffsetQuery::Earliest,
        }])
        .await
        .unwrap();
    assert_eq!(earliest[0], Ok(OffsetAnswer::Offset(0)));
    let del = |offset| DeleteRecords {
        partition: p[0],
        offset,
    };
    assert_eq!(c.delete_records(&[del(2)]).await.unwrap()[0], Ok(2));
    let info = c.log_info(&p[..1]).await.unwrap()[0].clone().unwrap();
    assert_eq!((info.log_start_offset, info.batch_start_offset), (2, 4));
    assert_eq!(c.delete_records(&[del(5)]).await.unwrap()[0], Ok(5));
    let info = c.log_info(&p[..1]).await.unwrap()[0].clone().unwrap();
    assert_eq!((info.log_start_offset, info.batch_start_offset), (5, 5));
    // Consolidating to the high watermark empties the partition's batches.
    assert_eq!(
        c.consolidate(&[consolidate(5, 6)]).await.unwrap()[0],
        Ok(Consolidated::Applied)
    );
    let info = c.log_info(&p[..1]).await.unwrap()[0].clone().unwrap();
    assert_eq!((info.batch_start_offset, info.byte_size), (6, 0));
    // Object b still holds p1's batch.
    assert_eq!(c.objects_to_delete(i64::MAX).await.unwrap(), [a.key]);
    // Other partitions are untouched.
    let other = c.log_info(&p[1..]).await.unwrap()[0].clone().unwrap();
    assert_eq!((other.batch_start_offset, other.byte_size), (0, 100));
}

async fn retention_by_time_and_bytes(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    c.create_partitions(&p).await.unwrap();
    // Each partition: 4 batches of 100 bytes at timestamps 1000..4000.
    for partition in &p {
        commit(&c, &commit_of("a", &[(*partition, 1); 4])).await;
    }
    let outcomes = c
        .enforce_retention(
            &[
                RetentionPolicy {
                    partition: p[0],
                    retention_ms: 1500,
                    retention_bytes: -1,
                },
                RetentionPolicy {
                    partition: p[1],
                    retention_ms: -1,
                    retention_bytes: 250,
                },
            ],
            4000,
        )
        .await
        .unwrap();
    // Older than 4000 - 1500 = 2500: timestamps 1000 and 2000.
    let by_time = outcomes[0].as_ref().unwrap();
    assert_eq!((by_time.batches_deleted, by_time.log_start_offset), (2, 2));
    // As Kafka, never below retention.bytes: of 400 bytes over a limit of
    // 250, one 100-byte batch goes (300 stay); a second would leave 200.
    let by_size = outcomes[1].as_ref().unwrap();
    assert_eq!((by_size.batches_deleted, by_size.bytes_deleted), (1, 100));
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[1].as_ref().unwrap().byte_size, 300);
    assert!(c.objects_to_delete(i64::MAX).await.unwrap().is_empty());
}

async fn dead_objects_wait_for_their_grace_period(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    let a = commit_of("a", &[(p[0], 1)]);
    commit(&c, &a).await;
    c.delete_records(&[DeleteRecords {
        partition: p[0],
        offset: 1,
    }])
    .await
    .unwrap();
    assert!(c.objects_to_delete(i64::MIN).await.unwrap().is_empty());
    let dead = c.objects_to_delete(i64::MAX).await.unwrap();
    assert_eq!(dead, std::slice::from_ref(&a.key));
    // A live object is never forgotten by mistake.
    let b = commit_of("b", &[(p[0], 1)]);
    commit(&c, &b).await;
    c.delete_objects(&[a.key.clone(), b.key.clone()])
        .await
        .unwrap();
    assert!(c.objects_to_delete(i64::MAX).await.unwrap().is_empty());
    let found = c
        .find_batches(&[FindBatches {
            partition: p[0],
            offset: 1,
            max_bytes: 1000,
        }])
        .await
        .unwrap();
    assert_eq!(found[0].as_ref().unwrap().batches[0].object, b.key);
}

async fn a_deleted_topic_is_gone(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    let other = partitions(1);
    c.create_partitions(&p).await.unwrap();
    c.create_partitions(&other).await.unwrap();
    let shared = commit_of("a", &[(p[0], 1), (other[0], 1)]);
    let only = commit_of("b", &[(p[1], 1)]);
    commit(&c, &shared).await;
    commit(&c, &only).await;
    c.delete_topics(&[p[0].topic_id]).await.unwrap();
    let info = c.log_info(&[p[0], p[1], other[0]]).await.unwrap();
    assert_eq!(info[0], Err(PartitionError::UnknownTopicOrPartition));
    assert_eq!(info[1], Err(PartitionError::UnknownTopicOrPartition));
    assert_eq!(info[2].as_ref().unwrap().high_watermark, 1);
    // The object shared with another topic stays; the other one is dead.
    assert_eq!(c.objects_to_delete(i64::MAX).await.unwrap(), [only.key]);
    let produce = commit(&c, &commit_of("c", &[(p[0], 1)])).await;
    assert_eq!(produce[0], Err(BatchError::UnknownTopicOrPartition));
}

async fn an_abandoned_object_is_dead_unless_it_was_committed(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(1);
    c.create_partitions(&p).await.unwrap();
    // Committed, but its uploader never heard so: abandoning it changes
    // nothing, its batch stays readable.
    let committed = commit_of("a", &[(p[0], 2)]);
    let lost = commit_of("b", &[(p[0], 3)]);
    let both = [committed.key.clone(), lost.key.clone()];
    assert_eq!(c.unknown_objects(&both).await.unwrap(), both);
    commit(&c, &committed).await;
    assert_eq!(
        c.unknown_objects(&both).await.unwrap(),
        std::slice::from_ref(&lost.key)
    );
    assert!(!abandon(&c, &committed).await);
    assert!(c.objects_to_delete(i64::MAX).await.unwrap().is_empty());
    let found = c
        .find_batches(&[FindBatches {
            partition: p[0],
            offset: 0,
            max_bytes: 1000,
        }])
        .await
        .unwrap();
    assert_eq!(found[0].as_ref().unwrap().batches[0].object, committed.key);

    // Never committed: dead from now on, and its commit, should it still
    // arrive, fails whole.
    assert!(abandon(&c, &lost).await);
    assert!(c.unknown_objects(&both).await.unwrap().is_empty());
    assert!(!abandon(&c, &lost).await, "recorded once");
    assert!(
        c.objects_to_delete(i64::MIN).await.unwrap().is_empty(),
        "after the grace period"
    );
    assert!(c.commit_object(&lost).await.is_err());
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(
        info[0].as_ref().unwrap().high_watermark,
        2,
        "nothing of it is visible"
    );
    assert_eq!(
        c.objects_to_delete(i64::MAX).await.unwrap(),
        std::slice::from_ref(&lost.key)
    );
    c.delete_objects(std::slice::from_ref(&lost.key))
        .await
        .unwrap();
    assert!(c.objects_to_delete(i64::MAX).await.unwrap().is_empty());
    assert_eq!(
        c.unknown_objects(&both).await.unwrap(),
        std::slice::from_ref(&lost.key),
        "forgotten once the cleaner removed it"
    );
}

/// A commit of one batch of `count` offsets from `producer` (epoch,
/// first and last sequence) to `p`, with largest timestamp `timestamp`.
fn produced(
    p: DisklessPartition,
    producer: (i64, i16, i32, i32),
    count: u32,
    timestamp: i64,
) -> ObjectCommit {
    let (producer_id, producer_epoch, base_sequence, last_sequence) = producer;
    let mut commit = idempotent(
        commit_of("p", &[(p, count)]),
        ProducerBatch {
            producer_id,
            producer_epoch,
            base_sequence,
            last_sequence,
        },
    );
    commit.batches[0].max_timestamp = timestamp;
    commit
}

fn described(id: i64, epoch: i16, last_sequence: i32, last_timestamp: i64) -> ProducerInfo {
    ProducerInfo {
        producer_id: ProducerId(id),
        producer_epoch: ProducerEpoch(epoch),
        last_sequence,
        last_timestamp,
    }
}

async fn producers_are_described_by_their_last_batch(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    c.create_partitions(&p).await.unwrap();
    let none = c.describe_producers(&p).await.unwrap();
    assert_eq!(none, [Ok(Vec::new()), Ok(Vec::new())]);
    commit(&c, &commit_of("plain", &[(p[0], 4)])).await; // no producer id
    commit(&c, &produced(p[0], (20, 0, 0, 2), 3, 7_000)).await;
    commit(&c, &produced(p[0], (10, 3, 0, 0), 1, 9_000)).await;
    // Producer 20's later batch carries an older timestamp: Kafka reports
    // the last batch's, not the largest ever.
    commit(&c, &produced(p[0], (20, 0, 3, 4), 2, 6_000)).await;
    // A retry adds nothing and changes nothing.
    let retry = commit(&c, &produced(p[0], (20, 0, 0, 2), 3, 8_000)).await;
    assert!(retry[0].as_ref().unwrap().duplicate);
    // A refused batch neither.
    let refused = commit(&c, &produced(p[0], (10, 2, 1, 1), 1, 9_500)).await;
    assert!(matches!(
        refused[0],
        Err(BatchError::InvalidProducerEpoch { .. })
    ));
    // Producer 10 bumps its epoch on the other partition only.
    commit(&c, &produced(p[1], (10, 4, 0, 9), 10, 11_000)).await;
    let unknown = partitions(1)[0];
    let answers = c.describe_producers(&[p[0], unknown, p[1]]).await.unwrap();
    assert_eq!(
        answers[0],
        Ok(vec![described(10, 3, 0, 9_000), described(20, 0, 4, 6_000)])
    );
    assert_eq!(answers[1], Err(PartitionError::UnknownTopicOrPartition));
    assert_eq!(answers[2], Ok(vec![described(10, 4, 9, 11_000)]));
    // A deleted topic's producers are gone with it.
    let gone = partitions(1);
    c.create_partitions(&gone).await.unwrap();
    commit(&c, &produced(gone[0], (10, 3, 1, 1), 1, 9_000)).await;
    c.delete_topics(&[gone[0].topic_id]).await.unwrap();
    assert_eq!(
        c.describe_producers(&gone).await.unwrap()[0],
        Err(PartitionError::UnknownTopicOrPartition)
    );
    c.create_partitions(&gone).await.unwrap();
    assert_eq!(
        c.describe_producers(&gone).await.unwrap()[0],
        Ok(Vec::new()),
        "created again, it starts with no producer"
    );
}

async fn idle_producers_expire_and_may_start_again(c: Arc<dyn BatchCoordinator>) {
    let p = partitions(2);
    c.create_partitions(&p).await.unwrap();
    commit(&c, &produced(p[0], (1, 0, 0, 0), 1, 1_000)).await;
    commit(&c, &produced(p[0], (1, 0, 1, 1), 1, 2_000)).await;
    commit(&c, &produced(p[0], (2, 0, 0, 0), 1, 5_000)).await;
    // The same producer id on another partition is another state.
    commit(&c, &produced(p[1], (1, 0, 0, 0), 1, 3_000)).await;
    assert_eq!(c.expire_producers(2_000).await.unwrap(), 0, "not below");
    assert_eq!(c.expire_producers(3_000).await.unwrap(), 1);
    let left = c.describe_producers(&p).await.unwrap();
    assert_eq!(left[0], Ok(vec![described(2, 0, 0, 5_000)]));
    assert_eq!(left[1], Ok(vec![described(1, 0, 0, 3_000)]));
    // The forgotten producer may start anywhere, and is checked again
    // from there; its retry of a batch from before is no longer known.
    let again = commit(&c, &produced(p[0], (1, 0, 0, 0), 1, 6_000)).await;
    let again = again[0].as_ref().unwrap();
    assert!(!again.duplicate, "a forgotten producer's batch is new");
    assert_eq!(again.base_offset, 3);
    assert_eq!(
        commit(&c, &produced(p[0], (1, 0, 5, 5), 1, 6_000)).await[0],
        Err(BatchError::OutOfOrderSequence {
            sequence: 5,
            expected: 1
        })
    );
    // Producers still known keep their sequences.
    assert!(matches!(
        commit(&c, &produced(p[0], (2, 0, 7, 7), 1, 6_000)).await[0],
        Err(BatchError::OutOfOrderSequence { .. })
    ));
    assert_eq!(c.expire_producers(i64::MAX).await.unwrap(), 3);
    assert_eq!(
        c.describe_producers(&p).await.unwrap(),
        [Ok(Vec::new()), Ok(Vec::new())]
    );
    // Expiry forgets producers, never data.
    let info = c.log_info(&p).await.unwrap();
    assert_eq!(info[0].as_ref().unwrap().high_watermark, 4);
    assert_eq!(info[1].as_ref().unwrap().high_watermark, 1);
}
