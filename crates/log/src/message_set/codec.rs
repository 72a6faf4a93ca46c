//! Inflating the value of a compressed v0/v1 message, into at most a given
//! number of bytes.
//!
//! The codecs are read directly (not through `kafka-protocol`'s
//! decompressors, which inflate without a bound) because the input is a
//! client's: a few kilobytes of gzip can claim gigabytes. Two quirks of the
//! old formats are kept: snappy came either raw or in snappy-java's framing,
//! and LZ4 in magic 0 carried a frame-descriptor checksum computed over the
//! wrong bytes (KAFKA-3160), which Kafka ignored for magic 0 and so must we.

use {
    super::{MAGIC_V0, MessageSetError},
    bytes::Bytes,
    std::io::Read,
};

/// snappy-java's stream header: magic, then format version and minimum
/// compatible version (i32 each).
const XERIAL_MAGIC: &[u8] = &[0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// The LZ4 frame magic (little-endian on the wire).
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];

/// Inflates `data` compressed with message-format codec `codec` (1 gzip,
/// 2 snappy, 3 lz4) into at most `limit` bytes.
///
/// # Errors
///
/// [`MessageSetError::TooLarge`] past `limit`, [`MessageSetError::Codec`]
/// for another codec, [`MessageSetError::Decompress`] for bad input.
pub(super) fn inflate(
    codec: i8,
    magic: i8,
    data: &[u8],
    limit: usize,
) -> Result<Bytes, MessageSetError> {
    match codec {
        1 => read_bounded("gzip", flate2::read::MultiGzDecoder::new(data), limit),
        2 => snappy(data, limit),
        3 => {
            let mut frame = data.to_vec();
            if magic == MAGIC_V0 {
                fix_lz4_header_checksum(&mut frame);
            }
            let decoder = lz4::Decoder::new(frame.as_slice()).map_err(|e| lz4_error(&e))?;
            read_bounded("lz4", decoder, limit)
        }
        other => Err(MessageSetError::Codec(other)),
    }
}

fn lz4_error(e: &std::io::Error) -> MessageSetError {
    MessageSetError::Decompress {
        codec: "lz4",
        reason: e.to_string(),
    }
}

/// Reads `reader` to its end, refusing more than `limit` bytes.
fn read_bounded(
    codec: &'static str,
    reader: impl Read,
    limit: usize,
) -> Result<Bytes, MessageSetError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| MessageSetError::Decompress {
            codec,
            reason: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(MessageSetError::TooLarge(limit));
    }
    Ok(Bytes::from(out))
}

/// Snappy as Kafka's clients wrote it: snappy-java's framing (blocks each
/// prefixed by their i32 length), or one raw block (sarama, older
/// librdkafka), which snappy-java also accepted.
fn snappy(data: &[u8], limit: usize) -> Result<Bytes, MessageSetError> {
    let mut out = Vec::new();
    if data.len() >= XERIAL_HEADER && data.starts_with(XERIAL_MAGIC) {
        let mut rest = &data[XERIAL_HEADER..];
        while !rest.is_empty() {
            let (len, tail) = rest
                .split_at_checked(4)
                .ok_or_else(|| snappy_error("cut-off block length"))?;
            let len = usize::try_from(u32::from_be_bytes([len[0], len[1], len[2], len[3]]))
                .unwrap_or(usize::MAX);
            let (block, tail) = tail
                .split_at_checked(len)
                .ok_or_else(|| snappy_error("cut-off block"))?;
            raw_snappy(block, &mut out, limit)?;
            rest = tail;
        }
    } else {
        raw_snappy(data, &mut out, limit)?;
    }
    Ok(Bytes::from(out))
}

fn snappy_error(reason: &str) -> MessageSetError {
    MessageSetError::Decompress {
        codec: "snappy",
        reason: reason.to_owned(),
    }
}

/// Appends one raw snappy block to `out`; its declared length is checked
/// against what `limit` leaves before anything is allocated.
fn raw_snappy(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), MessageSetError> {
    let len = snap::raw::decompress_len(block).map_err(|e| snappy_error(&e.to_string()))?;
    if out.len().saturating_add(len) > limit {
        return Err(MessageSetError::TooLarge(limit));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| snappy_error(&e.to_string()))?;
    Ok(())
}

/// Rewrites the frame descriptor's checksum byte of an LZ4 frame to the
/// correct one: Kafka 0.8–0.9 clients hashed the frame magic too.
fn fix_lz4_header_checksum(frame: &mut [u8]) {
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
    let Some(bytes) = frame.get(4..at) else {
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

    #[test]
    fn xxh32_matches_the_reference_vectors() {
        check!(xxh32(b"", 0) == 0x02cc_5d05);
        check!(xxh32(b"a", 0) == 0x550d_7456);
        check!(xxh32(b"abc", 0) == 0x32d1_53ff);
        check!(xxh32(b"Nobody inspects the spammish repetition", 0) == 0xe229_3b2f);
    }

    #[test]
    fn lz4_with_the_old_broken_header_checksum_inflates_for_magic_0() {
        let mut frame = Vec::new();
        let mut encoder = lz4::EncoderBuilder::new().build(&mut frame).unwrap();
        std::io::Write::write_all(&mut encoder, b"hello hello hello").unwrap();
        encoder.finish().1.unwrap();
        // Kafka 0.8's checksum: over the magic and the descriptor.
        let flags = frame[4];
        let descriptor = 2 + if flags & 0x08 != 0 { 8 } else { 0 };
        frame[4 + descriptor] = ((xxh32(&frame[..4 + descriptor], 0) >> 8) & 0xff) as u8;
        check!(inflate(3, 0, &frame, 1024).unwrap() == Bytes::from_static(b"hello hello hello"));
        check!(inflate(3, 1, &frame, 1024).is_err());
    }

    #[test]
    fn inflating_stops_at_the_limit() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &[0u8; 100_000]).unwrap();
        let gz = gz.finish().unwrap();
        check!(inflate(1, 1, &gz, 1000) == Err(MessageSetError::TooLarge(1000)));
        check!(inflate(1, 1, &gz, 100_000).unwrap().len() == 100_000);
        let raw = snap::raw::Encoder::new()
            .compress_vec(&[0u8; 100_000])
            .unwrap();
        check!(inflate(2, 1, &raw, 1000) == Err(MessageSetError::TooLarge(1000)));
        check!(inflate(2, 1, &raw, 100_000).unwrap().len() == 100_000);
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
        check!(inflate(2, 1, &framed, 1024).unwrap() == Bytes::from_static(b"first second"));
        check!(inflate(2, 1, &framed[..framed.len() - 1], 1024).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        for codec in 0..8 {
            for data in [
                &b""[..],
                b"\x04\x22\x4d\x18",
                b"\x82SNAPPY\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff",
                b"\x1f\x8b\x08",
            ] {
                let _ = inflate(codec, 0, data, 1024);
            }
        }
    }
}
