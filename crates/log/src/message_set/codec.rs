//! The codecs of message formats v0/v1: a wrapper's codec (attribute bits
//! 0–2) mapped to the crate's one bounded decompressor
//! ([`crate::compression`]), and its refusals to [`MessageSetError`].
//!
//! The old formats add one quirk: LZ4 in magic 0 carries a frame-descriptor
//! checksum computed over the wrong bytes (KAFKA-3160). Kafka 3.9 still
//! writes it so for magic 0 and ignores it when reading magic 0; so does
//! Krabka.

use {
    super::{MAGIC_V0, MessageSetError},
    crate::{LogError, compression},
    bytes::Bytes,
    kafka_protocol::records::Compression,
};

/// The codec a v0/v1 attribute value names (1 gzip, 2 snappy, 3 lz4).
///
/// # Errors
///
/// [`MessageSetError::Codec`] for any other value (zstd came with v2).
pub(super) fn wire_codec(codec: i8) -> Result<Compression, MessageSetError> {
    match codec {
        1 => Ok(Compression::Gzip),
        2 => Ok(Compression::Snappy),
        3 => Ok(Compression::Lz4),
        other => Err(MessageSetError::Codec(other)),
    }
}

/// The v0/v1 attribute value of `codec`; `None` for zstd, which the old
/// formats cannot carry.
pub(super) fn codec_id(codec: Compression) -> Option<i8> {
    match codec {
        Compression::None => Some(0),
        Compression::Gzip => Some(1),
        Compression::Snappy => Some(2),
        Compression::Lz4 => Some(3),
        Compression::Zstd => None,
    }
}

/// Inflates the value of a wrapper of magic `magic` compressed with codec
/// `codec` into at most `limit` bytes.
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
    let compression = wire_codec(codec)?;
    let inflated = if compression == Compression::Lz4 && magic == MAGIC_V0 {
        compression::inflate_magic_0_lz4(data, limit)
    } else {
        compression::inflate(compression, data, limit)
    };
    inflated.map_err(|e| match e {
        LogError::DecompressedTooLarge { limit, .. } => MessageSetError::TooLarge(limit),
        LogError::CorruptRecord { reason } => MessageSetError::Decompress {
            codec: compression::codec_name(compression),
            reason,
        },
        other => MessageSetError::Decompress {
            codec: compression::codec_name(compression),
            reason: other.to_string(),
        },
    })
}

/// Compresses the inner messages `raw` of a wrapper of magic `magic`, as
/// Kafka 3.9 does (see [`compression::deflate_wrapper`]).
///
/// # Errors
///
/// [`LogError::InvalidRecord`] for a codec the old formats lack or a
/// failing encoder.
pub(super) fn deflate(codec: Compression, magic: i8, raw: &[u8]) -> Result<Vec<u8>, LogError> {
    compression::deflate_wrapper(codec, magic, raw)
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn lz4_with_the_old_broken_header_checksum_inflates_for_magic_0() {
        let frame = deflate(Compression::Lz4, MAGIC_V0, b"hello hello hello").unwrap();
        check!(inflate(3, 0, &frame, 1024).unwrap() == Bytes::from_static(b"hello hello hello"));
        check!(inflate(3, 1, &frame, 1024).is_err());
    }

    #[test]
    fn inflating_stops_at_the_limit() {
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let id = codec_id(codec).unwrap();
            let packed = deflate(codec, 1, &[0u8; 100_000]).unwrap();
            check!(inflate(id, 1, &packed, 1000) == Err(MessageSetError::TooLarge(1000)));
            check!(inflate(id, 1, &packed, 100_000).unwrap().len() == 100_000);
        }
        let raw = snap::raw::Encoder::new()
            .compress_vec(&[0u8; 100_000])
            .unwrap();
        check!(inflate(2, 1, &raw, 1000) == Err(MessageSetError::TooLarge(1000)));
        check!(inflate(2, 1, &raw, 100_000).unwrap().len() == 100_000);
    }

    #[test]
    fn other_codecs_and_garbage_are_refused_without_panicking() {
        check!(inflate(4, 1, b"x", 1024) == Err(MessageSetError::Codec(4)));
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
