//! Bounded reads and plain writes of the non-flexible Kafka wire types, for
//! the hand-written legacy codecs.
//!
//! Every read checks that its bytes are there first, and an array's element
//! count is checked against the bytes left (each element takes at least a
//! known number of bytes) before anything is reserved, so no allocation is
//! ever sized from a count a client sent.

use {
    bytes::{Buf, BufMut, Bytes, BytesMut},
    kafka_protocol::protocol::StrBytes,
};

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
}
