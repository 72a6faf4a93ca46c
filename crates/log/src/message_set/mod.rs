//! Kafka's message formats v0 and v1 (the message sets of Kafka before
//! 0.11), converted to and from v2 record batches.
//!
//! The log stores v2 batches only, as Kafka 4 does (KIP-724). Clients of
//! Produce v0–v2 send message sets and clients of Fetch v0–v3 read them, so
//! a broker that serves those versions converts at its edge, as Kafka 3.9
//! did: a produced message set becomes one v2 batch ([`to_batch`], Kafka's
//! up-conversion in `LogValidator`), and the batches a fetch reads become
//! messages of the fetch version's magic ([`from_batches`], Kafka's
//! down-conversion).
//!
//! A message set is `[offset i64, size i32, message]*`, a message
//! `crc u32, magic i8, attributes i8, [timestamp i64 (magic 1)], key bytes,
//! value bytes`, its CRC-32 (IEEE) covering everything after the CRC. A
//! compressed message is a wrapper whose value is a compressed message set.
//!
//! Everything here reads client bytes: every length is checked against the
//! bytes actually there, nothing is allocated from a length on the wire,
//! and a wrapper is inflated into at most a caller-given number of bytes.

mod codec;
mod down;
mod up;

pub use {down::from_batches, up::to_batch};

use bytes::{Buf, Bytes};

/// The magic of message format v0 (Kafka 0.8–0.9: no timestamps).
pub const MAGIC_V0: i8 = 0;
/// The magic of message format v1 (Kafka 0.10: a timestamp per message).
pub const MAGIC_V1: i8 = 1;

/// Attribute bits 0–2: the compression codec.
const CODEC_MASK: i8 = 0x07;
/// Attribute bit 3 (magic 1): the timestamp is the log append time.
const LOG_APPEND_TIME_BIT: i8 = 0x08;
/// Offset and size before each message.
const LOG_OVERHEAD: usize = 12;
/// CRC, magic and attributes.
const MESSAGE_HEADER_V0: usize = 6;

/// Why a message set cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageSetError {
    /// A message's declared size runs past the bytes there.
    #[error("message at byte {at} is cut off")]
    Truncated {
        /// Where the message starts.
        at: usize,
    },
    /// A message's CRC-32 does not match its bytes.
    #[error("message at byte {at} has CRC {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// Where the message starts.
        at: usize,
        /// The CRC the message carries.
        stored: u32,
        /// The CRC of its bytes.
        computed: u32,
    },
    /// Not magic 0 or 1 (a v2 batch or garbage).
    #[error("message at byte {at} has magic {magic}, not 0 or 1")]
    Magic {
        /// Where the message starts.
        at: usize,
        /// The magic it has.
        magic: i8,
    },
    /// A codec message formats v0/v1 do not have (zstd came with v2).
    #[error("compression codec {0} is not one of message formats v0/v1")]
    Codec(i8),
    /// Inflating the compressed messages would pass the bound.
    #[error("compressed messages inflate past {0} bytes")]
    TooLarge(usize),
    /// The compressed bytes do not decompress.
    #[error("cannot decompress {codec} messages: {reason}")]
    Decompress {
        /// The codec's name.
        codec: &'static str,
        /// What the decompressor said.
        reason: String,
    },
    /// A compressed message inside a compressed message.
    #[error("a compressed message nests another compressed message")]
    Nested,
    /// No message at all.
    #[error("the message set holds no message")]
    Empty,
    /// The v2 batch could not be written.
    #[error("cannot encode the converted batch: {0}")]
    Encode(String),
}

/// One message of a message set, its key and value sharing the set's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    /// Where it starts in its set (for errors).
    at: usize,
    offset: i64,
    magic: i8,
    attributes: i8,
    /// -1 for magic 0.
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
}

impl Message {
    fn codec(&self) -> i8 {
        self.attributes & CODEC_MASK
    }
}

/// The messages of one level of a message set. `set` is consumed; a
/// message cut off at its end is an error (a producer sends whole messages).
fn parse(mut set: Bytes) -> Result<Vec<Message>, MessageSetError> {
    let total = set.len();
    let mut messages = Vec::new();
    while set.has_remaining() {
        let at = total - set.remaining();
        if set.remaining() < LOG_OVERHEAD {
            return Err(MessageSetError::Truncated { at });
        }
        let offset = set.get_i64();
        let size = usize::try_from(set.get_i32()).map_err(|_| MessageSetError::Truncated { at })?;
        if size < MESSAGE_HEADER_V0 || size > set.remaining() {
            return Err(MessageSetError::Truncated { at });
        }
        let mut body = set.split_to(size);
        let stored = body.get_u32();
        let computed = crc32fast::hash(&body);
        if stored != computed {
            return Err(MessageSetError::Crc {
                at,
                stored,
                computed,
            });
        }
        let magic = body.get_i8();
        let attributes = body.get_i8();
        let timestamp = match magic {
            MAGIC_V0 => -1,
            MAGIC_V1 if body.remaining() >= 8 => body.get_i64(),
            MAGIC_V1 => return Err(MessageSetError::Truncated { at }),
            magic => return Err(MessageSetError::Magic { at, magic }),
        };
        let key = read_bytes(&mut body).ok_or(MessageSetError::Truncated { at })?;
        let value = read_bytes(&mut body).ok_or(MessageSetError::Truncated { at })?;
        messages.push(Message {
            at,
            offset,
            magic,
            attributes,
            timestamp,
            key,
            value,
        });
    }
    Ok(messages)
}

/// A length-prefixed byte string (-1: null); `None` if it is cut off.
fn read_bytes(buf: &mut Bytes) -> Option<Option<Bytes>> {
    if buf.remaining() < 4 {
        return None;
    }
    let len = buf.get_i32();
    if len < 0 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    (len <= buf.remaining()).then(|| Some(buf.split_to(len)))
}

/// Appends one message (and its offset and size) to `out`.
fn write_message(
    out: &mut Vec<u8>,
    offset: i64,
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let field = |b: Option<&[u8]>| 4 + b.map_or(0, <[u8]>::len);
    let size =
        MESSAGE_HEADER_V0 + if magic == MAGIC_V1 { 8 } else { 0 } + field(key) + field(value);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&i32::try_from(size).unwrap_or(i32::MAX).to_be_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic.to_be_bytes()[0]);
    out.push(attributes.to_be_bytes()[0]);
    if magic == MAGIC_V1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for b in [key, value] {
        match b {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&i32::try_from(b.len()).unwrap_or(i32::MAX).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    let crc = crc32fast::hash(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests;
