//! The format of a diskless object: the batches as producers sent them,
//! then a footer that lets anyone verify the object without the batch
//! coordinator.
//!
//! ```text
//! batch 0 | batch 1 | ... | batch n-1 | entry 0 | ... | entry n-1 | trailer
//! entry   = topic id (16) | partition (i32) | position (u64) | size (u32) | crc32c (u32)
//! trailer = entry count (u32) | crc32c of entries and count (u32) | version (u16) | magic (8)
//! ```
//!
//! All integers are big-endian, as in Kafka's own formats. Each entry's
//! CRC-32C covers the whole batch as stored (including the base offset the
//! client sent, which a reader later rewrites), so a flipped byte anywhere
//! is found; the batch's own Kafka CRC still covers what clients check.
//! Reading starts from the trailer: every count and range in the footer is
//! checked against the bytes actually present before anything is
//! allocated from it.

use {
    super::types::DisklessPartition,
    crate::RemoteStorageError,
    bytes::{BufMut, Bytes},
    uuid::Uuid,
};

/// The last eight bytes of every diskless object.
pub const OBJECT_MAGIC: [u8; 8] = *b"KRBKDLS\x01";
/// The footer layout version this code writes and reads.
pub const OBJECT_FORMAT_VERSION: u16 = 1;

const ENTRY_SIZE: usize = 16 + 4 + 8 + 4 + 4;
const TRAILER_SIZE: usize = 4 + 4 + 2 + OBJECT_MAGIC.len();
/// The offset of the base offset field in a v2 record batch, and its size.
const BASE_OFFSET_FIELD: std::ops::Range<usize> = 0..8;

/// Where one batch lies in an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectBatch {
    /// Its partition.
    pub partition: DisklessPartition,
    /// Byte position in the object.
    pub position: u64,
    /// Size in bytes.
    pub size: u32,
    /// CRC-32C of the batch bytes as stored.
    pub crc: u32,
}

/// Gathers batches into one object.
#[derive(Debug, Default)]
pub struct ObjectBuilder {
    data: Vec<u8>,
    batches: Vec<ObjectBatch>,
}

impl ObjectBuilder {
    /// An empty object.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty object built in `buffer` (its contents are dropped, its
    /// room kept): a writer that knows how large its objects grow hands in
    /// room for a whole one, so the object is never moved as it grows, and
    /// memory already used once (see `BufferPool`).
    #[must_use]
    pub fn with_buffer(mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        Self {
            data: buffer,
            batches: Vec::new(),
        }
    }

    /// Appends one batch for `partition`; returns where it lies.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::InvalidRange`] for a batch of 4 GiB or more
    /// (Kafka batches are bounded far below that by `message.max.bytes`).
    pub fn push(
        &mut self,
        partition: DisklessPartition,
        batch: &[u8],
    ) -> Result<ObjectBatch, RemoteStorageError> {
        self.push_patched(partition, batch, |_| {})
    }

    /// [`ObjectBuilder::push`], with `patch` applied to the batch's copy in
    /// the object before its CRC is taken: a caller's rewrites of header
    /// fields (which keep the length) cost no copy of their own.
    ///
    /// # Errors
    ///
    /// As [`ObjectBuilder::push`].
    pub fn push_patched(
        &mut self,
        partition: DisklessPartition,
        batch: &[u8],
        patch: impl FnOnce(&mut [u8]),
    ) -> Result<ObjectBatch, RemoteStorageError> {
        let size = u32::try_from(batch.len()).map_err(|_| RemoteStorageError::InvalidRange {
            start: 0,
            end: Some(batch.len() as u64),
            size: u64::from(u32::MAX),
        })?;
        let position = self.data.len();
        self.data.extend_from_slice(batch);
        let stored = &mut self.data[position..];
        patch(stored);
        let placed = ObjectBatch {
            partition,
            position: position as u64,
            size,
            crc: crc32c::crc32c(stored),
        };
        self.batches.push(placed);
        Ok(placed)
    }

    /// Bytes of batches gathered so far.
    #[must_use]
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Whether no batch was pushed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The batches pushed so far, in order.
    #[must_use]
    pub fn batches(&self) -> &[ObjectBatch] {
        &self.batches
    }

    /// The finished object: the batches, then the footer.
    #[must_use]
    pub fn finish(self) -> Bytes {
        Bytes::from(self.finish_vec())
    }

    /// [`ObjectBuilder::finish`] into the builder's own buffer, room and all.
    #[must_use]
    pub fn finish_vec(self) -> Vec<u8> {
        let Self { mut data, batches } = self;
        let footer_start = data.len();
        data.reserve(batches.len() * ENTRY_SIZE + TRAILER_SIZE);
        for b in &batches {
            data.put_slice(b.partition.topic_id.as_bytes());
            data.put_i32(b.partition.partition);
            data.put_u64(b.position);
            data.put_u32(b.size);
            data.put_u32(b.crc);
        }
        data.put_u32(u32::try_from(batches.len()).unwrap_or(u32::MAX));
        let crc = crc32c::crc32c(data.get(footer_start..).unwrap_or_default());
        data.put_u32(crc);
        data.put_u16(OBJECT_FORMAT_VERSION);
        data.put_slice(&OBJECT_MAGIC);
        data
    }
}

/// A verified object: its footer decoded and every batch's CRC checked.
#[derive(Debug, Clone)]
pub struct ObjectFile<'a> {
    bytes: &'a [u8],
    batches: Vec<ObjectBatch>,
}

fn corrupt(reason: impl Into<String>) -> RemoteStorageError {
    RemoteStorageError::CorruptLog {
        position: 0,
        reason: format!("diskless object: {}", reason.into()),
    }
}

fn be<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

impl<'a> ObjectFile<'a> {
    /// Decodes and verifies a whole object.
    ///
    /// # Errors
    ///
    /// [`RemoteStorageError::CorruptLog`] when the trailer, the footer or
    /// any batch does not check out: wrong magic or version, a footer CRC
    /// mismatch, a count larger than the bytes present, batches that
    /// overlap, leave gaps or run into the footer, a batch CRC mismatch.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RemoteStorageError> {
        let batches = parse_footer(bytes)?;
        for b in &batches {
            let data = slice(bytes, b);
            let crc = crc32c::crc32c(data);
            if crc != b.crc {
                return Err(RemoteStorageError::CorruptLog {
                    position: b.position,
                    reason: format!(
                        "diskless object: batch CRC-32C {crc:#010x}, footer says {:#010x}",
                        b.crc
                    ),
                });
            }
        }
        Ok(Self { bytes, batches })
    }

    /// The batches, in object order.
    #[must_use]
    pub fn batches(&self) -> &[ObjectBatch] {
        &self.batches
    }

    /// The bytes of one of this object's batches.
    #[must_use]
    pub fn batch_bytes(&self, batch: &ObjectBatch) -> &'a [u8] {
        slice(self.bytes, batch)
    }
}

fn slice<'a>(bytes: &'a [u8], b: &ObjectBatch) -> &'a [u8] {
    // parse_footer checked every range against the data region.
    let start = usize::try_from(b.position).unwrap_or(usize::MAX);
    &bytes[start..start + b.size as usize]
}

/// Decodes the footer of `bytes`, checking every range against the data
/// region (batch CRCs are not checked here).
fn parse_footer(bytes: &[u8]) -> Result<Vec<ObjectBatch>, RemoteStorageError> {
    let len = bytes.len();
    if len < TRAILER_SIZE {
        return Err(corrupt(format!("{len} bytes is too short for the trailer")));
    }
    let trailer = len - TRAILER_SIZE;
    if bytes[len - OBJECT_MAGIC.len()..] != OBJECT_MAGIC {
        return Err(corrupt("bad magic"));
    }
    let version = u16::from_be_bytes(be(bytes, trailer + 8));
    if version != OBJECT_FORMAT_VERSION {
        return Err(corrupt(format!("unknown format version {version}")));
    }
    let count = u32::from_be_bytes(be(bytes, trailer)) as usize;
    if count > trailer / ENTRY_SIZE {
        return Err(corrupt(format!(
            "footer claims {count} batches but only {trailer} bytes precede the trailer"
        )));
    }
    let footer_start = trailer - count * ENTRY_SIZE;
    let stored_crc = u32::from_be_bytes(be(bytes, trailer + 4));
    let crc = crc32c::crc32c(&bytes[footer_start..trailer + 4]);
    if crc != stored_crc {
        return Err(corrupt(format!(
            "footer CRC-32C {crc:#010x}, stored {stored_crc:#010x}"
        )));
    }
    let mut batches = Vec::with_capacity(count);
    let mut expected_position = 0u64;
    for i in 0..count {
        let at = footer_start + i * ENTRY_SIZE;
        let b = ObjectBatch {
            partition: DisklessPartition::new(
                Uuid::from_bytes(be(bytes, at)),
                i32::from_be_bytes(be(bytes, at + 16)),
            ),
            position: u64::from_be_bytes(be(bytes, at + 20)),
            size: u32::from_be_bytes(be(bytes, at + 28)),
            crc: u32::from_be_bytes(be(bytes, at + 32)),
        };
        if b.position != expected_position {
            return Err(corrupt(format!(
                "batch {i} starts at {} instead of {expected_position}",
                b.position
            )));
        }
        expected_position = b.position + u64::from(b.size);
        batches.push(b);
    }
    if expected_position != footer_start as u64 {
        return Err(corrupt(format!(
            "batches end at {expected_position} but the footer starts at {footer_start}"
        )));
    }
    Ok(batches)
}

/// Writes `base_offset` into the base offset field of a v2 record batch.
/// Kafka's batch CRC covers the bytes from the attributes on, so the batch
/// stays valid; the coordinator's assigned offset replaces whatever the
/// producer sent.
///
/// # Errors
///
/// [`RemoteStorageError::CorruptLog`] if `batch` is shorter than the field.
pub fn rewrite_base_offset(batch: &mut [u8], base_offset: i64) -> Result<(), RemoteStorageError> {
    let field = batch
        .get_mut(BASE_OFFSET_FIELD)
        .ok_or_else(|| corrupt("batch shorter than its base offset field"))?;
    field.copy_from_slice(&base_offset.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, bytes::BytesMut, proptest::prelude::*};

    fn partition(n: u8) -> DisklessPartition {
        DisklessPartition::new(Uuid::from_u128(u128::from(n) << 64 | 1), i32::from(n % 4))
    }

    fn build(batches: &[(u8, Vec<u8>)]) -> (Bytes, Vec<ObjectBatch>) {
        let mut builder = ObjectBuilder::new();
        let placed = batches
            .iter()
            .map(|(p, data)| builder.push(partition(*p), data).unwrap())
            .collect();
        (builder.finish(), placed)
    }

    proptest! {
        #[test]
        fn any_object_round_trips(batches in prop::collection::vec((any::<u8>(), prop::collection::vec(any::<u8>(), 0..300)), 0..20)) {
            let (bytes, placed) = build(&batches);
            let object = ObjectFile::parse(&bytes).unwrap();
            prop_assert_eq!(object.batches(), &placed[..]);
            for (b, (_, data)) in object.batches().iter().zip(&batches) {
                prop_assert_eq!(object.batch_bytes(b), &data[..]);
            }
        }

        #[test]
        fn any_flipped_bit_is_detected(
            batches in prop::collection::vec((any::<u8>(), prop::collection::vec(any::<u8>(), 1..200)), 1..8),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let (bytes, _) = build(&batches);
            let mut damaged = bytes.to_vec();
            let i = at.index(damaged.len());
            damaged[i] ^= 1 << bit;
            prop_assert!(ObjectFile::parse(&damaged).is_err());
        }

        #[test]
        fn any_truncation_is_detected(
            batches in prop::collection::vec((any::<u8>(), prop::collection::vec(any::<u8>(), 1..200)), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let (bytes, _) = build(&batches);
            let keep = cut.index(bytes.len());
            prop_assert!(ObjectFile::parse(&bytes[..keep]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = ObjectFile::parse(&bytes);
        }
    }

    #[test]
    fn a_count_larger_than_the_bytes_present_is_refused_before_allocating() {
        let (bytes, _) = build(&[(1, vec![7; 10])]);
        let mut damaged = bytes.to_vec();
        let trailer = damaged.len() - TRAILER_SIZE;
        damaged[trailer..trailer + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let e = ObjectFile::parse(&damaged).unwrap_err();
        check!(e.to_string().contains("footer claims 4294967295 batches"));
    }

    #[test]
    fn an_empty_object_is_just_a_trailer() {
        let bytes = ObjectBuilder::new().finish();
        check!(bytes.len() == TRAILER_SIZE);
        check!(ObjectFile::parse(&bytes).unwrap().batches().is_empty());
    }

    #[test]
    fn a_patch_is_stored_and_covered_by_the_entry_crc() {
        let mut builder = ObjectBuilder::with_buffer(Vec::with_capacity(1 << 20));
        let p = partition(3);
        builder.push(p, b"kept as sent").unwrap();
        let placed = builder
            .push_patched(p, b"patch me", |b| b[..5].copy_from_slice(b"PATCH"))
            .unwrap();
        let bytes = builder.finish();
        let object = ObjectFile::parse(&bytes).unwrap();
        check!(object.batches()[1] == placed);
        check!(object.batch_bytes(&placed) == b"PATCH me");
        check!(object.batch_bytes(&object.batches()[0]) == b"kept as sent");
    }

    /// A v2 batch as kafka-protocol encodes it.
    fn kafka_batch(base_offset: i64) -> Vec<u8> {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let records: Vec<Record> = (0..3)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base_offset + i,
                // One batch needs offset - sequence constant; -1 first, as
                // a non-idempotent producer sends.
                sequence: i as i32 - 1,
                timestamp: 1_700_000_000_000 + i,
                key: None,
                value: Some(Bytes::from(format!("value-{i}"))),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        out.to_vec()
    }

    #[test]
    fn rewriting_the_base_offset_keeps_the_kafka_crc_valid() {
        use kafka_protocol::records::RecordBatchDecoder;
        let mut batch = kafka_batch(0);
        rewrite_base_offset(&mut batch, 1_000_000).unwrap();
        let mut bytes = Bytes::from(batch);
        let decoded = RecordBatchDecoder::decode(&mut bytes).unwrap();
        check!(
            decoded.records.len() == 3,
            "{:?}",
            decoded.records.iter().map(|r| r.offset).collect::<Vec<_>>()
        );
        check!(decoded.records[0].offset == 1_000_000);
        check!(decoded.records[2].offset == 1_000_002);
        check!(rewrite_base_offset(&mut [0; 7], 1).is_err());
    }
}
