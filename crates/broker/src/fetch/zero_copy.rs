//! A Fetch response whose records stay in their segment files: encoded as
//! [`Part`]s, byte runs around [`FileSlice`]s, for the connection to send
//! the records from the page cache (`sendfile` on plain TCP, chunks through
//! TLS; see [`crate::network::writer`]).
//!
//! `kafka-protocol` encodes a whole response into one buffer, records
//! included; here the response is encoded by hand, field by field in the
//! layout of Fetch v4–v18 (flexible from v12, topic ids from v13), with
//! each partition's records written as a length and then a part of their
//! own. A unit test holds the two encoders byte-identical across versions.
//! What this encoder does not write (tagged fields: a diverging epoch, a
//! current leader, a snapshot id, node endpoints, unknown tags; none of
//! which Krabka sets) makes [`encode`] hand the slices back, and the
//! response goes the buffered way.

use {
    crate::network::writer::Part,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        ApiKey, FetchResponse,
        fetch_response::{EpochEndOffset, LeaderIdAndEpoch, PartitionData, SnapshotId},
    },
    krabka_log::FileSlice,
};

/// The records of one partition of a response, left in a segment file.
#[derive(Debug)]
pub struct FileRecords {
    /// Position of its topic in `FetchResponse::responses`.
    pub topic: usize,
    /// Position of its partition in that topic's `partitions`.
    pub partition: usize,
    /// The partition's index (to check it is still the one there).
    pub index: i32,
    /// Where the records lie.
    pub slice: FileSlice,
}

impl FileRecords {
    /// Whether the partition at this place still answers with these
    /// records: an authorization fixup may have replaced it by an error.
    #[must_use]
    pub fn applies_to(&self, response: &FetchResponse) -> bool {
        self.place(response)
            .is_some_and(|p| p.partition_index == self.index && p.error_code == 0)
    }

    fn place<'r>(&self, response: &'r FetchResponse) -> Option<&'r PartitionData> {
        response
            .responses
            .get(self.topic)
            .and_then(|t| t.partitions.get(self.partition))
    }
}

/// Pieces of the frame being built: byte runs are patched (the size
/// prefix) before they are frozen.
enum Piece {
    Run(BytesMut),
    Bytes(Bytes),
    File(FileSlice),
}

struct Encoder {
    pieces: Vec<Piece>,
    run: BytesMut,
    flexible: bool,
}

impl Encoder {
    fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.run.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.run.put_u8(v as u8);
    }

    /// An array or bytes length; `None` is null.
    fn length(&mut self, len: Option<usize>) -> Option<()> {
        if self.flexible {
            self.uvarint(len.map_or(Some(0), |n| (n as u64).checked_add(1))?);
        } else {
            self.run.put_i32(match len {
                Some(n) => i32::try_from(n).ok()?,
                None => -1,
            });
        }
        Some(())
    }

    fn no_tags(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }

    fn records(&mut self, records: Option<&Bytes>, file: Option<FileSlice>) -> Option<()> {
        if let Some(slice) = file {
            self.length(Some(usize::try_from(slice.len()).ok()?))?;
            if !slice.is_empty() {
                self.cut();
                self.pieces.push(Piece::File(slice));
            }
            return Some(());
        }
        self.length(records.map(Bytes::len))?;
        if let Some(bytes) = records.filter(|b| !b.is_empty()) {
            self.cut();
            self.pieces.push(Piece::Bytes(bytes.clone()));
        }
        Some(())
    }

    /// Ends the current byte run.
    fn cut(&mut self) {
        if !self.run.is_empty() {
            self.pieces.push(Piece::Run(std::mem::take(&mut self.run)));
        }
    }

    /// The parts, with the frame's size written in front.
    fn finish(mut self) -> Option<Vec<Part>> {
        self.cut();
        let total: u64 = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Run(b) => b.len() as u64,
                Piece::Bytes(b) => b.len() as u64,
                Piece::File(f) => f.len(),
            })
            .sum();
        let size = i32::try_from(total.checked_sub(4)?).ok()?;
        let mut parts = Vec::with_capacity(self.pieces.len());
        for (i, piece) in self.pieces.into_iter().enumerate() {
            parts.push(match piece {
                Piece::Run(mut run) => {
                    if i == 0 {
                        run.get_mut(..4)?.copy_from_slice(&size.to_be_bytes());
                    }
                    Part::Bytes(run.freeze())
                }
                Piece::Bytes(b) => Part::Bytes(b),
                Piece::File(f) => Part::File(f),
            });
        }
        Some(parts)
    }
}

/// Whether a partition has fields this encoder does not write.
fn has_tagged_fields(p: &PartitionData) -> bool {
    p.diverging_epoch != EpochEndOffset::default()
        || p.current_leader != LeaderIdAndEpoch::default()
        || p.snapshot_id != SnapshotId::default()
        || !p.unknown_tagged_fields.is_empty()
        || p.aborted_transactions
            .iter()
            .flatten()
            .any(|a| !a.unknown_tagged_fields.is_empty())
}

/// Encodes `response` (Fetch `version`, with its response header) as parts
/// whose records at the places of `files` are those file slices.
///
/// # Errors
///
/// `files`, handed back, when the response has something this encoder
/// does not write (see the module docs): encode it the buffered way.
pub fn encode(
    version: i16,
    correlation_id: i32,
    response: &FetchResponse,
    files: Vec<FileRecords>,
) -> Result<Vec<Part>, Vec<FileRecords>> {
    let mut slots: Vec<Vec<Option<FileSlice>>> = response
        .responses
        .iter()
        .map(|t| vec![None; t.partitions.len()])
        .collect();
    let mut kept = Vec::new();
    for f in files {
        if f.applies_to(response) {
            kept.push((f.topic, f.partition, f.index));
            if let Some(slot) = slots.get_mut(f.topic).and_then(|t| t.get_mut(f.partition)) {
                *slot = Some(f.slice);
            }
        }
    }
    match encode_parts(version, correlation_id, response, &mut slots) {
        Some(parts) => Ok(parts),
        None => Err(kept
            .into_iter()
            .filter_map(|(topic, partition, index)| {
                let slice = slots.get_mut(topic)?.get_mut(partition)?.take()?;
                Some(FileRecords {
                    topic,
                    partition,
                    index,
                    slice,
                })
            })
            .collect()),
    }
}

fn encode_parts(
    version: i16,
    correlation_id: i32,
    response: &FetchResponse,
    slots: &mut [Vec<Option<FileSlice>>],
) -> Option<Vec<Part>> {
    if !(4..=18).contains(&version)
        || !response.unknown_tagged_fields.is_empty()
        || !response.node_endpoints.is_empty()
        || (version < 7 && response.session_id != 0)
    {
        return None;
    }
    let flexible = version >= 12;
    // Check before writing: a refusal must leave every slice in `slots`.
    for t in &response.responses {
        if !t.unknown_tagged_fields.is_empty() || (version <= 12 && t.topic.0.len() > 0x7fff) {
            return None;
        }
        for p in &t.partitions {
            if has_tagged_fields(p) || (version < 11 && p.preferred_read_replica.0 != -1) {
                return None;
            }
        }
    }
    let mut e = Encoder {
        pieces: Vec::new(),
        run: BytesMut::with_capacity(256),
        flexible,
    };
    // Size (patched at the end) and response header.
    e.run.put_i32(0);
    e.run.put_i32(correlation_id);
    if ApiKey::Fetch.response_header_version(version) >= 1 {
        e.uvarint(0);
    }
    e.run.put_i32(response.throttle_time_ms);
    if version >= 7 {
        e.run.put_i16(response.error_code);
        e.run.put_i32(response.session_id);
    }
    e.length(Some(response.responses.len()))?;
    for (t, files) in response.responses.iter().zip(slots.iter_mut()) {
        if version <= 12 {
            let name = t.topic.0.as_bytes();
            if flexible {
                e.uvarint(name.len() as u64 + 1);
            } else {
                e.run.put_i16(i16::try_from(name.len()).ok()?);
            }
            e.run.put_slice(name);
        }
        if version >= 13 {
            e.run.put_slice(t.topic_id.as_bytes());
        }
        e.length(Some(t.partitions.len()))?;
        for (p, file) in t.partitions.iter().zip(files.iter_mut()) {
            e.run.put_i32(p.partition_index);
            e.run.put_i16(p.error_code);
            e.run.put_i64(p.high_watermark);
            e.run.put_i64(p.last_stable_offset);
            if version >= 5 {
                e.run.put_i64(p.log_start_offset);
            }
            e.length(p.aborted_transactions.as_ref().map(Vec::len))?;
            for a in p.aborted_transactions.iter().flatten() {
                e.run.put_i64(a.producer_id.0);
                e.run.put_i64(a.first_offset);
                e.no_tags();
            }
            if version >= 11 {
                e.run.put_i32(p.preferred_read_replica.0);
            }
            e.records(p.records.as_ref(), file.take())?;
            e.no_tags();
        }
        e.no_tags();
    }
    e.no_tags();
    e.finish()
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::network::codec::encode_response,
        assert2::check,
        kafka_protocol::{
            messages::{
                BrokerId, ProducerId, TopicName,
                fetch_response::{AbortedTransaction, FetchableTopicResponse},
            },
            protocol::StrBytes,
        },
        proptest::prelude::*,
        std::{io::Write, sync::Arc},
    };

    /// One partition: its fields, and whether its records come from a file.
    #[derive(Debug, Clone)]
    struct Spec {
        index: i32,
        error_code: i16,
        offsets: (i64, i64, i64),
        aborted: Option<Vec<(i64, i64)>>,
        records: Option<Vec<u8>>,
        from_file: bool,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            0i32..1000,
            prop_oneof![Just(0i16), Just(1), Just(6)],
            (any::<i64>(), any::<i64>(), any::<i64>()),
            prop::option::of(prop::collection::vec((any::<i64>(), any::<i64>()), 0..3)),
            prop::option::weighted(0.9, prop::collection::vec(any::<u8>(), 0..300)),
            any::<bool>(),
        )
            .prop_map(
                |(index, error_code, offsets, aborted, records, from_file)| Spec {
                    index,
                    error_code,
                    offsets,
                    aborted,
                    records,
                    from_file,
                },
            )
    }

    fn topics() -> impl Strategy<Value = Vec<(String, u128, Vec<Spec>)>> {
        prop::collection::vec(
            (
                "[a-z._-]{0,20}",
                any::<u128>(),
                prop::collection::vec(spec(), 0..4),
            ),
            0..4,
        )
    }

    /// The response with every record set in memory, the file slices for
    /// the partitions whose records come from a file, and the file.
    fn build(
        version: i16,
        session_id: i32,
        error_code: i16,
        topics: &[(String, u128, Vec<Spec>)],
        file: &Arc<std::fs::File>,
        path: &std::path::Path,
    ) -> (FetchResponse, FetchResponse, Vec<FileRecords>) {
        let mut full = FetchResponse::default();
        full.throttle_time_ms = 17;
        if version >= 7 {
            full.session_id = session_id;
            full.error_code = error_code;
        }
        let mut placed = full.clone();
        let mut files = Vec::new();
        let mut written = std::fs::metadata(path).unwrap().len();
        for (ti, (name, id, parts)) in topics.iter().enumerate() {
            let mut t = FetchableTopicResponse::default();
            t.topic = TopicName(StrBytes::from_string(name.clone()));
            t.topic_id = uuid::Uuid::from_u128(*id);
            let mut placed_t = t.clone();
            for (pi, s) in parts.iter().enumerate() {
                let mut p = PartitionData::default();
                p.partition_index = s.index;
                p.error_code = s.error_code;
                (p.high_watermark, p.last_stable_offset, p.log_start_offset) = s.offsets;
                if version < 5 {
                    p.log_start_offset = -1;
                }
                p.preferred_read_replica = BrokerId(-1);
                p.aborted_transactions = s.aborted.as_ref().map(|a| {
                    a.iter()
                        .map(|(pid, first)| {
                            let mut t = AbortedTransaction::default();
                            t.producer_id = ProducerId(*pid);
                            t.first_offset = *first;
                            t
                        })
                        .collect()
                });
                p.records = s.records.clone().map(Bytes::from);
                let mut placed_p = p.clone();
                if let (Some(records), true, 0) = (&s.records, s.from_file, s.error_code) {
                    // Some junk before, so positions are not all 0.
                    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                    f.write_all(b"junk").unwrap();
                    f.write_all(records).unwrap();
                    written += 4;
                    files.push(FileRecords {
                        topic: ti,
                        partition: pi,
                        index: s.index,
                        slice: FileSlice::new(Arc::clone(file), written, records.len() as u64),
                    });
                    written += records.len() as u64;
                    placed_p.records = Some(Bytes::new());
                }
                t.partitions.push(p);
                placed_t.partitions.push(placed_p);
            }
            full.responses.push(t);
            placed.responses.push(placed_t);
        }
        (full, placed, files)
    }

    fn materialize(parts: &[Part]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::File(f) => out.extend_from_slice(&f.read().unwrap()),
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn parts_are_byte_identical_to_kafka_protocols_encoding(
            topics in topics(),
            session_id in any::<i32>(),
            error_code in prop_oneof![Just(0i16), Just(71)],
            correlation_id in any::<i32>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("00000000000000000000.log");
            std::fs::write(&path, b"").unwrap();
            let file = Arc::new(std::fs::File::open(&path).unwrap());
            for version in 4..=18 {
                let (full, placed, files) = build(version, session_id, error_code, &topics, &file, &path);
                let want = encode_response(ApiKey::Fetch, version, correlation_id, &full).unwrap();
                let parts = encode(version, correlation_id, &placed, files).unwrap();
                prop_assert_eq!(materialize(&parts), want.to_vec(), "v{}", version);
            }
        }
    }

    /// A response of `version` with one partition (`index`) whose records
    /// come from a file; the directory holding the file comes back too.
    fn one_file_partition(
        version: i16,
        index: i32,
    ) -> (tempfile::TempDir, FetchResponse, Vec<FileRecords>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        std::fs::write(&path, b"").unwrap();
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        let spec = Spec {
            index,
            error_code: 0,
            offsets: (10, 10, 0),
            aborted: None,
            records: Some(b"records".to_vec()),
            from_file: true,
        };
        let topics = vec![("t".to_owned(), 1, vec![spec])];
        let (_, placed, files) = build(version, 0, 0, &topics, &file, &path);
        (dir, placed, files)
    }

    #[test]
    fn a_tagged_field_hands_the_slices_back() {
        let (_dir, mut placed, files) = one_file_partition(16, 3);
        check!(files.len() == 1);
        placed.responses[0].partitions[0].current_leader.leader_id = BrokerId(1);
        let back = encode(16, 1, &placed, files).unwrap_err();
        check!(back.len() == 1 && back[0].index == 3);
    }

    #[test]
    fn a_partition_replaced_by_an_error_drops_its_slice() {
        let (_dir, mut placed, files) = one_file_partition(12, 0);
        let denied = &mut placed.responses[0].partitions[0];
        denied.error_code = 29;
        denied.records = None;
        let parts = encode(12, 1, &placed, files).unwrap();
        check!(parts.iter().all(|p| matches!(p, Part::Bytes(_))));
        let want = encode_response(ApiKey::Fetch, 12, 1, &placed).unwrap();
        check!(materialize(&parts) == want.to_vec());
    }
}
