//! Compressed record data: the one place the broker inflates it, always into
//! at most a given number of bytes, and the compression of message-format
//! v0/v1 wrappers.
//!
//! A compressed batch is a client's claim: a few kilobytes of gzip, LZ4 or
//! zstd can inflate to gigabytes, and a raw snappy block declares its own
//! length. `kafka-protocol`'s decompressors inflate without a bound, so the
//! codecs are driven here directly: output grows in steps that never pass
//! the bound, and a snappy block's declared length is checked before
//! anything is allocated.
//!
//! The formats are the ones Kafka's clients write: gzip (several members
//! allowed), snappy either in snappy-java's framing or as one raw block
//! (sarama, older librdkafka), Kafka's LZ4 frame, and zstd frames.
//!
//! Two bounds exist. A client's batch is bounded by the broker setting
//! `krabka.decompressed.batch.max.bytes` ([`LogConfig::decompressed_batch_max_bytes`](crate::LogConfig::decompressed_batch_max_bytes)).
//! The broker's own stored batches are read with
//! [`STORED_BATCH_INFLATE_LIMIT`], which is never below any value the setting
//! can take, so no stored batch the produce path admitted is ever refused.

use {
    crate::LogError,
    bytes::Bytes,
    kafka_protocol::records::Compression,
    std::io::{Read, Write},
};

/// Default of `krabka.decompressed.batch.max.bytes`: 64 MiB.
pub const DEFAULT_DECOMPRESSED_BATCH_MAX_BYTES: usize = 64 << 20;

/// Smallest value `krabka.decompressed.batch.max.bytes` takes: 1 MiB, about
/// Kafka's default `message.max.bytes`.
pub const MIN_DECOMPRESSED_BATCH_MAX_BYTES: usize = 1 << 20;

/// Largest value `krabka.decompressed.batch.max.bytes` takes: 1 GiB.
pub const MAX_DECOMPRESSED_BATCH_MAX_BYTES: usize = 1 << 30;

/// The bound for inflating a batch the log already holds (compaction,
/// recovery, ListOffsets by timestamp, down-conversion, tiered reads,
/// coordinator state).
///
/// It is the largest value the setting accepts rather than the setting in
/// force: the setting may have been higher when a batch was appended (it is
/// read at startup), and a batch the log once admitted must stay readable,
/// or compaction would stall and down-conversion would drop data. Any value
/// of the setting admitted at most this much, and the allocation stays
/// bounded. (Batches the produce path does not open — same codec, no key or
/// timestamp checks — are stored unchecked; one past this bound is reported
/// as too large where it is read instead of being inflated.)
pub const STORED_BATCH_INFLATE_LIMIT: usize = MAX_DECOMPRESSED_BATCH_MAX_BYTES;

/// snappy-java's stream header: magic, then format version and minimum
/// compatible version (i32 each).
const XERIAL_MAGIC: &[u8] = &[0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// snappy-java's block size (`SnappyOutputStream`'s default).
const XERIAL_BLOCK: usize = 32 * 1024;
/// The LZ4 frame magic (little-endian on the wire).
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// Output is read in pieces of this size, so growth is checked often.
const CHUNK: usize = 32 * 1024;
/// zstd's default window limit (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`): 128 MiB.
const ZSTD_WINDOW_LOG_DEFAULT: u32 = 27;

/// The name of a codec in messages.
#[must_use]
pub fn codec_name(codec: Compression) -> &'static str {
    match codec {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

/// Inflates `data`, compressed with `codec` (message format v1 or v2), into
/// at most `limit` bytes; uncompressed data is returned as it is.
///
/// # Errors
///
/// [`LogError::DecompressedTooLarge`] when the data inflates (or declares
/// that it inflates) past `limit`, [`LogError::CorruptRecord`] when it does
/// not decompress.
pub fn inflate(codec: Compression, data: &[u8], limit: usize) -> Result<Bytes, LogError> {
    match codec {
        Compression::None => Ok(Bytes::copy_from_slice(data)),
        Compression::Gzip => read_bounded(codec, flate2::read::MultiGzDecoder::new(data), limit),
        Compression::Snappy => snappy(data, limit),
        Compression::Lz4 => lz4(data, limit),
        Compression::Zstd => zstd(data, limit),
    }
}

/// [`inflate`] for an LZ4 wrapper of message format v0, whose frame
/// descriptor checksum Kafka 0.8–0.9 computed over the wrong bytes
/// (KAFKA-3160); Kafka ignored it for magic 0, and so must we.
///
/// # Errors
///
/// As [`inflate`].
pub(crate) fn inflate_magic_0_lz4(data: &[u8], limit: usize) -> Result<Bytes, LogError> {
    let mut frame = data.to_vec();
    set_lz4_header_checksum(&mut frame, false);
    lz4(&frame, limit)
}

/// Compresses `raw` as Kafka 3.9 compresses the value of a message-format
/// v0/v1 wrapper (`MemoryRecordsBuilder` through `Compression.wrapForOutput`):
/// gzip, snappy-java's framing, or Kafka's LZ4 frame (independent 64 KiB
/// blocks, no checksums) whose descriptor checksum is the broken one for
/// magic 0.
///
/// # Errors
///
/// [`LogError::InvalidRecord`] for zstd or no codec (the old formats have
/// no zstd wrapper) or a failing encoder.
pub(crate) fn deflate_wrapper(
    codec: Compression,
    magic: i8,
    raw: &[u8],
) -> Result<Vec<u8>, LogError> {
    let failed = |e: std::io::Error| {
        LogError::invalid(format!("compressing {} messages: {e}", codec_name(codec)))
    };
    match codec {
        Compression::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(raw).map_err(failed)?;
            gz.finish().map_err(failed)
        }
        Compression::Snappy => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for block in raw.chunks(XERIAL_BLOCK) {
                let compressed = encoder
                    .compress_vec(block)
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                let len = u32::try_from(compressed.len())
                    .map_err(|e| failed(std::io::Error::other(e)))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .block_checksum(lz4::liblz4::BlockChecksum::NoBlockChecksum)
                .build(Vec::new())
                .map_err(failed)?;
            encoder.write_all(raw).map_err(failed)?;
            let (mut frame, result) = encoder.finish();
            result.map_err(failed)?;
            if magic == crate::message_set::MAGIC_V0 {
                set_lz4_header_checksum(&mut frame, true);
            }
            Ok(frame)
        }
        Compression::None | Compression::Zstd => Err(LogError::invalid(format!(
            "message formats v0/v1 have no {} wrapper",
            codec_name(codec)
        ))),
    }
}

fn too_large(codec: Compression, limit: usize) -> LogError {
    LogError::DecompressedTooLarge {
        codec: codec_name(codec),
        limit,
    }
}

fn undecodable(codec: Compression, reason: impl std::fmt::Display) -> LogError {
    LogError::corrupt(format!(
        "cannot decompress {} records: {reason}",
        codec_name(codec)
    ))
}

/// Reads `reader` to its end into at most `limit` bytes. The buffer grows
/// by doubling but never past `limit`, so a refused stream cost at most
/// `limit` bytes of output.
fn read_bounded(
    codec: Compression,
    mut reader: impl Read,
    limit: usize,
) -> Result<Bytes, LogError> {
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(stream_error(codec, &e, limit)),
        };
        if n > limit - out.len() {
            return Err(too_large(codec, limit));
        }
        if out.capacity() - out.len() < n {
            let target = out
                .capacity()
                .saturating_mul(2)
                .max(out.len() + n)
                .max(CHUNK)
                .min(limit);
            out.reserve_exact(target - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(Bytes::from(out))
}

/// A decoder's error; zstd refusing a frame's window for the bound is the
/// bound's refusal.
fn stream_error(codec: Compression, e: &std::io::Error, limit: usize) -> LogError {
    if codec == Compression::Zstd && e.to_string().contains("too much memory") {
        too_large(codec, limit)
    } else {
        undecodable(codec, e)
    }
}

fn lz4(frame: &[u8], limit: usize) -> Result<Bytes, LogError> {
    let codec = Compression::Lz4;
    let mut decoder = lz4::Decoder::new(frame).map_err(|e| undecodable(codec, e))?;
    let out = read_bounded(codec, &mut decoder, limit)?;
    // The decoder reports a frame cut short as its end.
    decoder
        .finish()
        .1
        .map_err(|_| undecodable(codec, "the frame is cut off"))?;
    Ok(out)
}

fn zstd(data: &[u8], limit: usize) -> Result<Bytes, LogError> {
    let codec = Compression::Zstd;
    let mut decoder =
        zstd::stream::read::Decoder::with_buffer(data).map_err(|e| undecodable(codec, e))?;
    // The window is reserved as the frame asks, up to zstd's own default
    // limit (128 MiB: what level-22 producers declare, and what was always
    // accepted) or the power of two holding the bound if that is larger.
    // Only the part the output fills is ever written, so the memory used
    // stays within the bound.
    let bound_log = usize::BITS - limit.saturating_sub(1).leading_zeros();
    decoder
        .window_log_max(bound_log.clamp(ZSTD_WINDOW_LOG_DEFAULT, 31))
        .map_err(|e| undecodable(codec, e))?;
    read_bounded(codec, decoder, limit)
}

/// Snappy as Kafka's clients wrote it: snappy-java's framing (blocks each
/// prefixed by their i32 length), or one raw block, which snappy-java also
/// accepted.
fn snappy(data: &[u8], limit: usize) -> Result<Bytes, LogError> {
    let mut out = Vec::new();
    if data.len() >= XERIAL_HEADER && data.starts_with(XERIAL_MAGIC) {
        let mut rest = &data[XERIAL_HEADER..];
        while !rest.is_empty() {
            let (len, tail) = rest
                .split_at_checked(4)
                .ok_or_else(|| undecodable(Compression::Snappy, "cut-off block length"))?;
            let len = usize::try_from(u32::from_be_bytes([len[0], len[1], len[2], len[3]]))
                .unwrap_or(usize::MAX);
            let (block, tail) = tail
                .split_at_checked(len)
                .ok_or_else(|| undecodable(Compression::Snappy, "cut-off block"))?;
            raw_snappy(block, &mut out, limit)?;
            rest = tail;
        }
    } else {
        raw_snappy(data, &mut out, limit)?;
    }
    Ok(Bytes::from(out))
}

/// Appends one raw snappy block to `out`; its declared length is checked
/// against what `limit` leaves before anything is allocated.
fn raw_snappy(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), LogError> {
    let codec = Compression::Snappy;
    let len = snap::raw::decompress_len(block).map_err(|e| undecodable(codec, e))?;
    if len > limit - out.len() {
        return Err(too_large(codec, limit));
    }
    let start = out.len();
    if out.capacity() - start < len {
        // Doubling, capped by the bound, as `read_bounded` grows.
        let target = out.capacity().saturating_mul(2).max(start + len).min(limit);
        out.reserve_exact(target - start);
    }
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| undecodable(codec, e))?;
    Ok(())
}

/// Rewrites the frame descriptor checksum byte of an LZ4 frame: the
/// correct one (xxh32 of the descriptor), or with `broken` Kafka 0.8–0.9's
/// (xxh32 of the frame magic and the descriptor), which magic 0 carries.
fn set_lz4_header_checksum(frame: &mut [u8], broken: bool) {
    if !frame.starts_with(&LZ4_MAGIC) {
        return;
    }
    let Some(&flags) = frame.get(4) else {
        return;
    };
    // FLG and BD, then the content size (FLG bit 3) and dictionary id (bit 0).
    let mut descriptor = 2;
    if flags & 0x08 != 0 {
        descriptor += 8;
    }
    if flags & 0x01 != 0 {
        descriptor += 4;
    }
    let at = 4 + descriptor;
    let Some(bytes) = frame.get(if broken { 0 } else { 4 }..at) else {
        return;
    };
    let checksum = ((xxh32(bytes, 0) >> 8) & 0xff) as u8;
    if let Some(byte) = frame.get_mut(at) {
        *byte = checksum;
    }
}

/// XXH32 (the LZ4 frame format's checksum).
fn xxh32(data: &[u8], seed: u32) -> u32 {
    const P1: u32 = 2_654_435_761;
    const P2: u32 = 2_246_822_519;
    const P3: u32 = 3_266_489_917;
    const P4: u32 = 668_265_263;
    const P5: u32 = 374_761_393;
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let round = |acc: u32, input: u32| {
        acc.wrapping_add(input.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let mut rest = data;
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 16 {
            for (i, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, word(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(u32::try_from(data.len()).unwrap_or(u32::MAX));
    while rest.len() >= 4 {
        h = h
            .wrapping_add(word(rest).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
        rest = &rest[4..];
    }
    for &b in rest {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    const CODECS: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// `raw` compressed as clients do (kafka-protocol's encoders).
    fn compress(codec: Compression, raw: &[u8]) -> Vec<u8> {
        use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
        let mut out = bytes::BytesMut::new();
        let fill = |tmp: &mut bytes::BytesMut| {
            tmp.extend_from_slice(raw);
            Ok(())
        };
        match codec {
            Compression::Gzip => Gzip::compress(&mut out, fill),
            Compression::Snappy => Snappy::compress(&mut out, fill),
            Compression::Lz4 => Lz4::compress(&mut out, fill),
            Compression::Zstd => Zstd::compress(&mut out, fill),
            Compression::None => fill(&mut out),
        }
        .unwrap();
        out.to_vec()
    }

    fn is_too_large(result: &Result<Bytes, LogError>, limit: usize) -> bool {
        matches!(result, Err(e @ LogError::DecompressedTooLarge { limit: l, .. })
            if *l == limit && e.kafka_error_code() == 10)
    }

    #[test]
    fn xxh32_matches_the_reference_vectors() {
        check!(xxh32(b"", 0) == 0x02cc_5d05);
        check!(xxh32(b"a", 0) == 0x550d_7456);
        check!(xxh32(b"abc", 0) == 0x32d1_53ff);
        check!(xxh32(b"Nobody inspects the spammish repetition", 0) == 0xe229_3b2f);
    }

    #[test]
    fn every_codec_inflates_up_to_exactly_the_bound() {
        let raw: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for codec in CODECS {
            let packed = compress(codec, &raw);
            check!(
                inflate(codec, &packed, raw.len()).unwrap() == raw,
                "{codec:?}"
            );
            check!(
                is_too_large(&inflate(codec, &packed, raw.len() - 1), raw.len() - 1),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn old_lz4_header_checksum_is_accepted_only_for_magic_0() {
        let frame = deflate_wrapper(Compression::Lz4, 0, b"hello hello hello").unwrap();
        check!(
            inflate_magic_0_lz4(&frame, 1024).unwrap() == Bytes::from_static(b"hello hello hello")
        );
        check!(inflate(Compression::Lz4, &frame, 1024).is_err());
        let frame = deflate_wrapper(Compression::Lz4, 1, b"hello").unwrap();
        check!(inflate(Compression::Lz4, &frame, 1024).unwrap() == Bytes::from_static(b"hello"));
        // Kafka's frame: independent 64 KiB blocks, no checksums.
        check!(frame[4..6] == [0x60, 0x40]);
    }

    #[test]
    fn wrappers_deflate_in_the_formats_clients_read() {
        let raw: Vec<u8> = (0..70_000u32).map(|i| (i % 7) as u8).collect();
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let packed = deflate_wrapper(codec, 1, &raw).unwrap();
            check!(
                inflate(codec, &packed, raw.len()).unwrap() == raw,
                "{codec:?}"
            );
        }
        let framed = deflate_wrapper(Compression::Snappy, 1, b"x").unwrap();
        check!(framed[..16] == *b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01");
        check!(deflate_wrapper(Compression::Zstd, 1, b"x").is_err());
    }

    #[test]
    fn a_raw_snappy_block_is_refused_by_its_declared_length() {
        // Varint 1 GiB, then a little data: refused before any allocation.
        let mut block = vec![0x80, 0x80, 0x80, 0x80, 0x04];
        block.extend_from_slice(&[0; 16]);
        check!(is_too_large(
            &inflate(Compression::Snappy, &block, 1 << 20),
            1 << 20
        ));
    }

    #[test]
    fn snappy_in_snappy_java_framing_inflates() {
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&1i32.to_be_bytes());
        framed.extend_from_slice(&1i32.to_be_bytes());
        for part in [&b"first "[..], b"second"] {
            let block = snap::raw::Encoder::new().compress_vec(part).unwrap();
            framed.extend_from_slice(&u32::try_from(block.len()).unwrap().to_be_bytes());
            framed.extend_from_slice(&block);
        }
        let snappy = Compression::Snappy;
        check!(inflate(snappy, &framed, 1024).unwrap() == Bytes::from_static(b"first second"));
        check!(inflate(snappy, &framed[..framed.len() - 1], 1024).is_err());
        check!(is_too_large(&inflate(snappy, &framed, 11), 11));
    }

    #[test]
    fn a_cut_off_lz4_frame_is_corrupt() {
        let packed = compress(Compression::Lz4, &[7u8; 10_000]);
        let cut = inflate(Compression::Lz4, &packed[..packed.len() - 3], 1 << 20);
        check!(matches!(cut, Err(LogError::CorruptRecord { .. })));
    }

    #[test]
    fn garbage_never_panics() {
        for codec in CODECS {
            for data in [
                &b""[..],
                b"\x04\x22\x4d\x18",
                b"\x04\x22\x4d\x18\x60\x40\x82\xff\xff\xff\x7f",
                b"\x82SNAPPY\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff",
                b"\x1f\x8b\x08",
                b"\x28\xb5\x2f\xfd\x00\x00",
            ] {
                let _ = inflate(codec, data, 1024);
                let _ = inflate_magic_0_lz4(data, 1024);
            }
        }
    }
}
