//! The pure decisions of the remote log manager: which copied local
//! segments local retention may delete, and which remote segments total
//! retention deletes. (Which local segments may be copied is the log's to
//! say: `krabka_log::Log::tierable_segments`.)
//!
//! They are plain functions over plain numbers so they can be tested without
//! a log, a tier or a clock, and so the manager's I/O code holds no policy.

use krabka_log::LogConfig;

/// Tiered topics: the log itself must never delete a segment by retention,
/// because a segment may only leave local disk after its copy finished. The
/// remote log manager applies local and total retention instead.
pub fn hand_retention_to_remote_log_manager(log: &mut LogConfig) {
    log.retention_ms = None;
    log.retention_bytes = None;
}

/// The retention limits of a tiered topic, `None` meaning unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// `retention.ms` (whole log, local plus remote).
    pub total_ms: Option<i64>,
    /// `retention.bytes` (whole log).
    pub total_bytes: Option<i64>,
    /// `local.retention.ms`, already resolved (-2 became `retention.ms`).
    pub local_ms: Option<i64>,
    /// `local.retention.bytes`, already resolved.
    pub local_bytes: Option<i64>,
}

impl Retention {
    /// Resolves Kafka's raw values: negative (-1) is unlimited, and a local
    /// value of -2 takes the total value.
    #[must_use]
    pub fn from_raw(total_ms: i64, total_bytes: i64, local_ms: i64, local_bytes: i64) -> Self {
        let limit = |v: i64| (v >= 0 && v != i64::MAX).then_some(v);
        let local = |v: i64, total: i64| if v == -2 { limit(total) } else { limit(v) };
        Self {
            total_ms: limit(total_ms),
            total_bytes: limit(total_bytes),
            local_ms: local(local_ms, total_ms),
            local_bytes: local(local_bytes, total_bytes),
        }
    }
}

/// What the decisions need to know about a local segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalSegment {
    /// Base offset.
    pub base_offset: i64,
    /// Offset after its last batch.
    pub end_offset: i64,
    /// `.log` bytes.
    pub size_bytes: u64,
    /// Largest timestamp, -1 if none.
    pub max_timestamp: i64,
    /// Whether it is the active segment.
    pub active: bool,
}

/// What the decisions need to know about a remote segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteSegment {
    /// First offset.
    pub start_offset: i64,
    /// Last offset (inclusive, as in Kafka's metadata).
    pub end_offset: i64,
    /// `.log` bytes.
    pub size_bytes: u64,
    /// Largest timestamp.
    pub max_timestamp: i64,
}

impl RemoteSegment {
    /// What the decisions need of a segment's remote metadata.
    #[must_use]
    pub fn of(m: &krabka_remote_storage::RemoteLogSegmentMetadata) -> Self {
        Self {
            start_offset: m.start_offset(),
            end_offset: m.end_offset(),
            size_bytes: u64::try_from(m.segment_size_in_bytes()).unwrap_or(0),
            max_timestamp: m.max_timestamp_ms(),
        }
    }
}

/// How many of the oldest local segments local retention deletes: only
/// closed segments whose every offset is in the remote tier (`end_offset <=
/// next_to_copy`), oldest first, while the local log stays at or above
/// `local.retention.bytes` without it or its largest timestamp is older than
/// `local.retention.ms`.
#[must_use]
pub fn local_segments_to_delete(
    segments: &[LocalSegment],
    next_to_copy: i64,
    retention: Retention,
    now_ms: i64,
) -> usize {
    let mut excess = retention.local_bytes.map(|limit| {
        i128::from(segments.iter().map(|s| s.size_bytes).sum::<u64>()) - i128::from(limit)
    });
    let mut count = 0;
    for s in segments {
        if s.active || s.end_offset > next_to_copy {
            break;
        }
        let by_time = retention
            .local_ms
            .is_some_and(|ms| s.max_timestamp >= 0 && now_ms.saturating_sub(s.max_timestamp) > ms);
        let size = i128::from(s.size_bytes);
        let by_size = excess.is_some_and(|e| e - size >= 0);
        if !(by_time || by_size) {
            break;
        }
        if let Some(e) = excess.as_mut() {
            *e -= size;
        }
        count += 1;
    }
    count
}

/// How many of the oldest remote segments total retention deletes:
/// oldest first, while their largest timestamp is older than `retention.ms`
/// or the whole log (remote segments plus the local bytes not yet in the
/// remote tier) stays at or above `retention.bytes` without them.
#[must_use]
pub fn remote_segments_to_delete(
    remote: &[RemoteSegment],
    local_only_bytes: u64,
    retention: Retention,
    now_ms: i64,
) -> usize {
    let total: u64 = remote.iter().map(|s| s.size_bytes).sum::<u64>() + local_only_bytes;
    let mut excess = retention
        .total_bytes
        .map(|limit| i128::from(total) - i128::from(limit));
    let mut count = 0;
    for s in remote {
        let by_time = retention
            .total_ms
            .is_some_and(|ms| now_ms.saturating_sub(s.max_timestamp) > ms);
        let size = i128::from(s.size_bytes);
        let by_size = excess.is_some_and(|e| e - size >= 0);
        if !(by_time || by_size) {
            break;
        }
        if let Some(e) = excess.as_mut() {
            *e -= size;
        }
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn local(base: i64, end: i64, size: u64, ts: i64, active: bool) -> LocalSegment {
        LocalSegment {
            base_offset: base,
            end_offset: end,
            size_bytes: size,
            max_timestamp: ts,
            active,
        }
    }

    fn log() -> Vec<LocalSegment> {
        vec![
            local(0, 100, 1000, 10, false),
            local(100, 200, 1000, 20, false),
            local(200, 300, 1000, 30, false),
            local(300, 350, 500, 40, true),
        ]
    }

    #[test]
    fn local_retention_deletes_only_copied_segments() {
        let segs = log();
        let by_bytes = Retention::from_raw(-1, -1, -2, 1000);
        // Nothing copied: nothing deleted, however far over local retention.
        check!(local_segments_to_delete(&segs, 0, by_bytes, 0) == 0);
        // Two copied: both go (3500 bytes, limit 1000), the third waits for its copy.
        check!(local_segments_to_delete(&segs, 200, by_bytes, 0) == 2);
        // Fully copied, the byte limit decides: 1500 bytes stay (>= 1000).
        check!(local_segments_to_delete(&segs, 300, by_bytes, 0) == 2);
        let tight = Retention::from_raw(-1, -1, -2, 500);
        check!(local_segments_to_delete(&segs, 300, tight, 0) == 3);
        check!(local_segments_to_delete(&segs, 200, tight, 0) == 2);
        // Within local retention: kept although copied.
        let roomy = Retention::from_raw(-1, -1, -2, 10_000);
        check!(local_segments_to_delete(&segs, 300, roomy, 0) == 0);
        // Local time retention.
        let by_time = Retention::from_raw(-1, -1, 15, -2);
        check!(local_segments_to_delete(&segs, 300, by_time, 30) == 1);
    }

    #[test]
    fn minus_two_falls_back_to_total_retention() {
        let r = Retention::from_raw(1000, -1, -2, -2);
        check!(r.local_ms == Some(1000));
        check!(r.local_bytes.is_none());
        let r = Retention::from_raw(1000, 5000, 10, 20);
        check!(
            r == Retention {
                total_ms: Some(1000),
                total_bytes: Some(5000),
                local_ms: Some(10),
                local_bytes: Some(20)
            }
        );
    }

    #[test]
    fn total_retention_deletes_oldest_remote_segments() {
        let remote = vec![
            RemoteSegment {
                start_offset: 0,
                end_offset: 99,
                size_bytes: 1000,
                max_timestamp: 10,
            },
            RemoteSegment {
                start_offset: 100,
                end_offset: 199,
                size_bytes: 1000,
                max_timestamp: 20,
            },
            RemoteSegment {
                start_offset: 200,
                end_offset: 299,
                size_bytes: 1000,
                max_timestamp: 30,
            },
        ];
        check!(remote_segments_to_delete(&remote, 500, Retention::default(), 100) == 0);
        check!(
            remote_segments_to_delete(&remote, 500, Retention::from_raw(-1, 2500, -2, -2), 0) == 1
        );
        check!(
            remote_segments_to_delete(&remote, 500, Retention::from_raw(-1, 500, -2, -2), 0) == 3
        );
        check!(remote_segments_to_delete(&remote, 0, Retention::from_raw(15, -1, -2, -2), 40) == 2);
    }
}
