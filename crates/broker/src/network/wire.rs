//! Bounded reads and plain writes of the Kafka wire types, for the request
//! versions `kafka-protocol` 0.18 cannot read: the legacy codecs (the
//! non-flexible forms Kafka 4 removed, [`super::legacy`]) and the newer
//! ones (flexible forms of Kafka 4.1+, [`super::newer`]).
//!
//! Every read checks that its bytes are there first, and an array's element
//! count is checked against the bytes left (each element takes at least a
//! known number of bytes) before anything is reserved, so no allocation is
//! ever sized from a count a client sent.

use {
    bytes::{Buf, BufMut, Bytes, BytesMut},
    kafka_protocol::{
        messages::ApiKey,
        protocol::{Encodable, StrBytes},
    },
};

/// Why a response cannot be written at a hand-coded version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The API or version has no hand-written encoder, or the response is
    /// not of the API's type (a bug: the API table and the codecs disagree).
    #[error("no hand-written encoder of {api:?} v{version} for this response")]
    NoEncoder {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
    },
    /// `kafka-protocol` refused the body at the version whose wire form the
    /// hand-coded version shares.
    #[error("{0}")]
    Protocol(String),
}

/// Writes `body` at `version`, the `kafka-protocol` version whose wire form
/// a hand-coded version shares.
///
/// # Errors
///
/// [`EncodeError::Protocol`] if `kafka-protocol` refuses it.
pub fn encode_as<R: Encodable>(
    body: &R,
    version: i16,
    buf: &mut BytesMut,
) -> Result<(), EncodeError> {
    body.encode(buf, version)
        .map_err(|e| EncodeError::Protocol(e.to_string()))
}

/// A decoder's error as the API table's decoders report it.
#[must_use]
pub fn reason(e: WireError) -> String {
    e.to_string()
}

/// Why a legacy request body does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes left than the next field needs.
    #[error("{needed} bytes needed, {left} left")]
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the body.
        left: usize,
    },
    /// A negative length where null is not allowed.
    #[error("invalid length {0}")]
    Length(i32),
    /// More array elements than the bytes left can hold.
    #[error("array of {count} elements cannot fit in {left} bytes")]
    Count {
        /// The count on the wire.
        count: i32,
        /// Bytes left in the body.
        left: usize,
    },
    /// A string that is not UTF-8.
    #[error("string is not UTF-8")]
    Utf8,
    /// An unsigned varint longer than 5 bytes.
    #[error("unsigned varint too long")]
    Varint,
}

/// Reads the fields of one body in order.
pub struct Reader<'a> {
    buf: &'a mut Bytes,
}

impl<'a> Reader<'a> {
    /// Reads from the start of `buf`, consuming what it reads.
    pub fn new(buf: &'a mut Bytes) -> Self {
        Self { buf }
    }

    fn need(&self, needed: usize) -> Result<(), WireError> {
        let left = self.buf.remaining();
        if left < needed {
            return Err(WireError::Truncated { needed, left });
        }
        Ok(())
    }

    /// An `int8`.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn i8(&mut self) -> Result<i8, WireError> {
        self.need(1)?;
        Ok(self.buf.get_i8())
    }

    /// An `int16`.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn i16(&mut self) -> Result<i16, WireError> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }

    /// An `int32`.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn i32(&mut self) -> Result<i32, WireError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    /// An `int64`.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn i64(&mut self) -> Result<i64, WireError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    /// A `boolean`.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn bool(&mut self) -> Result<bool, WireError> {
        Ok(self.i8()? != 0)
    }

    /// A `nullable_string` (`int16` length, -1 for null).
    ///
    /// # Errors
    ///
    /// [`WireError`] for a cut-off or non-UTF-8 string.
    pub fn nullable_string(&mut self) -> Result<Option<StrBytes>, WireError> {
        let len = self.i16()?;
        let Ok(len) = usize::try_from(len) else {
            return Ok(None);
        };
        self.need(len)?;
        StrBytes::from_utf8(self.buf.split_to(len))
            .map(Some)
            .map_err(|_| WireError::Utf8)
    }

    /// A `string` (not null).
    ///
    /// # Errors
    ///
    /// [`WireError`] for a cut-off, null or non-UTF-8 string.
    pub fn string(&mut self) -> Result<StrBytes, WireError> {
        self.nullable_string()?.ok_or(WireError::Length(-1))
    }

    /// `nullable_bytes` (`int32` length, -1 for null).
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn nullable_bytes(&mut self) -> Result<Option<Bytes>, WireError> {
        let len = self.i32()?;
        let Ok(len) = usize::try_from(len) else {
            return Ok(None);
        };
        self.need(len)?;
        Ok(Some(self.buf.split_to(len)))
    }

    /// A nullable array (`int32` count, -1 for null) whose elements take at
    /// least `min_element` bytes each, read by `element`.
    ///
    /// # Errors
    ///
    /// [`WireError::Count`] for a count the bytes left cannot hold, or the
    /// first error of `element`.
    pub fn nullable_array<T>(
        &mut self,
        min_element: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Option<Vec<T>>, WireError> {
        let count = self.i32()?;
        let Ok(n) = usize::try_from(count) else {
            return Ok(None);
        };
        let left = self.buf.remaining();
        if n.saturating_mul(min_element.max(1)) > left {
            return Err(WireError::Count { count, left });
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(Some(out))
    }

    /// An array (a null one reads as empty, as Kafka's old parsers did).
    ///
    /// # Errors
    ///
    /// As [`Reader::nullable_array`].
    pub fn array<T>(
        &mut self,
        min_element: usize,
        element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        Ok(self
            .nullable_array(min_element, element)?
            .unwrap_or_default())
    }

    /// An unsigned varint of at most 32 bits.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`] or [`WireError::Varint`].
    pub fn uvarint(&mut self) -> Result<u32, WireError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.u8()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::Varint)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    /// A `uuid` (16 bytes).
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`].
    pub fn uuid(&mut self) -> Result<uuid::Uuid, WireError> {
        self.need(16)?;
        Ok(uuid::Uuid::from_u128(self.buf.get_u128()))
    }

    /// A `compact_nullable_string` (varint length + 1, 0 for null).
    ///
    /// # Errors
    ///
    /// [`WireError`] for a cut-off or non-UTF-8 string.
    pub fn compact_nullable_string(&mut self) -> Result<Option<StrBytes>, WireError> {
        let Some(len) = self.uvarint()?.checked_sub(1) else {
            return Ok(None);
        };
        let len = usize::try_from(len).map_err(|_| WireError::Varint)?;
        self.need(len)?;
        StrBytes::from_utf8(self.buf.split_to(len))
            .map(Some)
            .map_err(|_| WireError::Utf8)
    }

    /// A `compact_string` (not null).
    ///
    /// # Errors
    ///
    /// [`WireError`] for a cut-off, null or non-UTF-8 string.
    pub fn compact_string(&mut self) -> Result<StrBytes, WireError> {
        self.compact_nullable_string()?.ok_or(WireError::Length(-1))
    }

    /// A compact array (varint count + 1; a null one reads as empty) whose
    /// elements take at least `min_element` bytes each, read by `element`.
    ///
    /// # Errors
    ///
    /// [`WireError::Count`] for a count the bytes left cannot hold, or the
    /// first error of `element`.
    pub fn compact_array<T>(
        &mut self,
        min_element: usize,
        element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        Ok(self
            .compact_nullable_array(min_element, element)?
            .unwrap_or_default())
    }

    /// A compact nullable array (varint count + 1, 0 for null).
    ///
    /// # Errors
    ///
    /// As [`Reader::compact_array`].
    pub fn compact_nullable_array<T>(
        &mut self,
        min_element: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Option<Vec<T>>, WireError> {
        let Some(count) = self.uvarint()?.checked_sub(1) else {
            return Ok(None);
        };
        let n = usize::try_from(count).map_err(|_| WireError::Varint)?;
        let left = self.buf.remaining();
        if n.saturating_mul(min_element.max(1)) > left {
            return Err(WireError::Count {
                count: i32::try_from(count).unwrap_or(i32::MAX),
                left,
            });
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(Some(out))
    }

    /// A tagged-field section, skipped: every tagged field of the versions
    /// read here is one Krabka ignores.
    ///
    /// # Errors
    ///
    /// [`WireError::Truncated`] when a field's bytes are not there.
    pub fn skip_tagged_fields(&mut self) -> Result<(), WireError> {
        let fields = self.uvarint()?;
        for _ in 0..fields {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| WireError::Varint)?;
            self.need(size)?;
            self.buf.advance(size);
        }
        Ok(())
    }
}

/// Writes the non-flexible wire types.
pub trait Writer {
    /// A `string` or `nullable_string`.
    fn put_string(&mut self, s: Option<&str>);
    /// `nullable_bytes`.
    fn put_nullable_bytes(&mut self, b: Option<&[u8]>);
    /// An array's count.
    fn put_count(&mut self, n: usize);
}

impl Writer for BytesMut {
    fn put_string(&mut self, s: Option<&str>) {
        match s {
            None => self.put_i16(-1),
            Some(s) => {
                self.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
                self.put_slice(s.as_bytes());
            }
        }
    }

    fn put_nullable_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.put_i32(-1),
            Some(b) => {
                self.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
                self.put_slice(b);
            }
        }
    }

    fn put_count(&mut self, n: usize) {
        self.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
    }
}

/// Writes the flexible (compact) wire types.
pub trait CompactWriter {
    /// An unsigned varint.
    fn put_uvarint(&mut self, value: u32);
    /// A `compact_string` or `compact_nullable_string`.
    fn put_compact_string(&mut self, s: Option<&str>);
    /// A compact array's count.
    fn put_compact_count(&mut self, n: usize);
    /// A `uuid`.
    fn put_uuid(&mut self, id: uuid::Uuid);
    /// An empty tagged-field section.
    fn put_no_tags(&mut self);
}

impl CompactWriter for BytesMut {
    fn put_uvarint(&mut self, mut value: u32) {
        while value >= 0x80 {
            // Seven bits at a time, the low ones first.
            self.put_u8(u8::try_from(value & 0x7f).unwrap_or(0) | 0x80);
            value >>= 7;
        }
        self.put_u8(u8::try_from(value).unwrap_or(0));
    }

    fn put_compact_string(&mut self, s: Option<&str>) {
        match s {
            None => self.put_uvarint(0),
            Some(s) => {
                self.put_uvarint(u32::try_from(s.len() + 1).unwrap_or(u32::MAX));
                self.put_slice(s.as_bytes());
            }
        }
    }

    fn put_compact_count(&mut self, n: usize) {
        self.put_uvarint(u32::try_from(n + 1).unwrap_or(u32::MAX));
    }

    fn put_uuid(&mut self, id: uuid::Uuid) {
        self.put_u128(id.as_u128());
    }

    fn put_no_tags(&mut self) {
        self.put_uvarint(0);
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn reads_are_bounded() {
        let mut b = Bytes::from_static(&[0, 3, b'a', b'b']);
        check!(Reader::new(&mut b).string() == Err(WireError::Truncated { needed: 3, left: 2 }));
        let mut b = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]);
        check!(matches!(
            Reader::new(&mut b).array(4, Reader::i32),
            Err(WireError::Count { .. })
        ));
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
        check!(Reader::new(&mut b).nullable_bytes() == Ok(None));
        let mut b = Bytes::from_static(&[0, 1, 0xff]);
        check!(Reader::new(&mut b).string() == Err(WireError::Utf8));
        let mut b = Bytes::from_static(&[0xff, 0xff]);
        check!(Reader::new(&mut b).string() == Err(WireError::Length(-1)));
    }

    #[test]
    fn writes_round_trip() {
        let mut out = BytesMut::new();
        out.put_string(Some("topic"));
        out.put_string(None);
        out.put_nullable_bytes(Some(b"xy"));
        out.put_nullable_bytes(None);
        out.put_count(2);
        let mut b = out.freeze();
        let mut r = Reader::new(&mut b);
        check!(r.string().unwrap().as_str() == "topic");
        check!(r.nullable_string() == Ok(None));
        check!(r.nullable_bytes().unwrap().as_deref() == Some(&b"xy"[..]));
        check!(r.nullable_bytes() == Ok(None));
        check!(r.i32() == Ok(2));
    }

    #[test]
    fn compact_writes_round_trip() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let long = "x".repeat(300);
        let mut out = BytesMut::new();
        out.put_compact_string(Some(&long));
        out.put_compact_string(None);
        out.put_uuid(id);
        out.put_compact_count(2);
        out.put_i32(7);
        out.put_i32(8);
        out.put_no_tags();
        out.put_uvarint(u32::MAX);
        let mut b = out.freeze();
        let mut r = Reader::new(&mut b);
        check!(r.compact_string().unwrap().as_str() == long);
        check!(r.compact_nullable_string() == Ok(None));
        check!(r.uuid() == Ok(id));
        check!(r.compact_array(4, Reader::i32) == Ok(vec![7, 8]));
        check!(r.skip_tagged_fields() == Ok(()));
        check!(r.uvarint() == Ok(u32::MAX));
    }

    #[test]
    fn compact_reads_are_bounded() {
        // A count of 2^28 elements in three bytes.
        let mut b = Bytes::from_static(&[0x80, 0x80, 0x80, 0x01, 0]);
        check!(matches!(
            Reader::new(&mut b).compact_array(1, Reader::i8),
            Err(WireError::Count { .. })
        ));
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        check!(Reader::new(&mut b).uvarint() == Err(WireError::Varint));
        // One tagged field claiming 100 bytes, 1 there.
        let mut b = Bytes::from_static(&[1, 0, 100, 0]);
        check!(matches!(
            Reader::new(&mut b).skip_tagged_fields(),
            Err(WireError::Truncated { .. })
        ));
        let mut b = Bytes::from_static(&[0]);
        check!(Reader::new(&mut b).compact_string() == Err(WireError::Length(-1)));
    }
}
