//! The primitive encodings of Kafka's coordinator record schemas, shared by
//! `__consumer_offsets` ([`group::records`](super::group::records)) and
//! `__transaction_state` ([`txn::records`](super::txn::records)).
//!
//! `kafka-protocol` ships the client/broker messages but not the
//! coordinators' internal records, so their keys and values are written by
//! hand from Kafka's JSON schemas. Both use the same building blocks as the
//! wire protocol: big-endian integers, `int16`-length strings and
//! `int32`-length arrays in the classic versions, and unsigned-varint
//! ("compact") lengths plus tagged fields in the flexible ones.
//!
//! Decoding never panics: every read is bounds-checked and a short or
//! garbled buffer is [`Malformed`]; each coordinator turns that into its own
//! error type.

use bytes::{BufMut, Bytes, BytesMut};

/// A record that does not decode: what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// Writes an unsigned varint.
pub fn put_uvarint(w: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        w.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    w.put_u8(v as u8);
}

/// Writes a (non-null) string, compact when `flexible`.
pub fn put_string(w: &mut BytesMut, s: &str, flexible: bool) {
    put_nullable_string(w, Some(s), flexible);
}

/// Writes a nullable string, compact when `flexible`.
pub fn put_nullable_string(w: &mut BytesMut, s: Option<&str>, flexible: bool) {
    match (s, flexible) {
        (None, true) => put_uvarint(w, 0),
        (None, false) => w.put_i16(-1),
        (Some(s), true) => {
            put_uvarint(w, s.len() as u64 + 1);
            w.put_slice(s.as_bytes());
        }
        (Some(s), false) => {
            // Kafka strings are at most i16::MAX bytes; the names written
            // here are validated far below that before they get here.
            let len = s.len().min(i16::MAX as usize);
            w.put_i16(len as i16);
            w.put_slice(s.as_bytes().get(..len).unwrap_or_default());
        }
    }
}

/// Writes a byte string, compact when `flexible`.
pub fn put_bytes(w: &mut BytesMut, b: &[u8], flexible: bool) {
    if flexible {
        put_uvarint(w, b.len() as u64 + 1);
    } else {
        w.put_i32(b.len() as i32);
    }
    w.put_slice(b);
}

/// Writes an array length, compact when `flexible`.
pub fn put_array_len(w: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(w, len as u64 + 1);
    } else {
        w.put_i32(len as i32);
    }
}

/// Writes the length of a null array, compact when `flexible`.
pub fn put_null_array(w: &mut BytesMut, flexible: bool) {
    if flexible {
        put_uvarint(w, 0);
    } else {
        w.put_i32(-1);
    }
}

/// Writes a tagged-field section: `(tag, encoded value)` in ascending tag
/// order, as Kafka's generated code does.
pub fn put_tagged_fields(w: &mut BytesMut, fields: &[(u64, Vec<u8>)]) {
    put_uvarint(w, fields.len() as u64);
    for (tag, value) in fields {
        put_uvarint(w, *tag);
        put_uvarint(w, value.len() as u64);
        w.put_slice(value);
    }
}

/// A bounds-checked cursor over a record's bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// The next `n` bytes.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when fewer are left.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed(format!(
                "needed {n} more bytes, {} left",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// An `int8`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the buffer is too short.
    pub fn i8(&mut self) -> Result<i8, Malformed> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    /// An `int16`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the buffer is too short.
    pub fn i16(&mut self) -> Result<i16, Malformed> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// An `int32`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the buffer is too short.
    pub fn i32(&mut self) -> Result<i32, Malformed> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// An `int64`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when the buffer is too short.
    pub fn i64(&mut self) -> Result<i64, Malformed> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off or longer than 10 bytes.
    pub fn uvarint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte] = self.array::<1>()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Malformed("varint longer than 10 bytes".into()))
    }

    /// Length of a nullable string/bytes/array; `None` for null.
    fn length(&mut self, flexible: bool, wide: bool) -> Result<Option<usize>, Malformed> {
        if flexible {
            let n = self.uvarint()?;
            if n == 0 {
                return Ok(None);
            }
            let n = usize::try_from(n - 1).map_err(|_| Malformed("length overflows".into()))?;
            return Ok(Some(n));
        }
        let n = if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(n as usize))
    }

    /// A nullable string, compact when `flexible`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off or not UTF-8.
    pub fn nullable_string(&mut self, flexible: bool) -> Result<Option<String>, Malformed> {
        let Some(len) = self.length(flexible, false)? else {
            return Ok(None);
        };
        let raw = self.take(len)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| Malformed("string is not UTF-8".into()))
    }

    /// A non-null string, compact when `flexible`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off, null or not UTF-8.
    pub fn string(&mut self, flexible: bool) -> Result<String, Malformed> {
        self.nullable_string(flexible)?
            .ok_or_else(|| Malformed("null in a non-nullable string".into()))
    }

    /// A non-null byte string, compact when `flexible`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off or null.
    pub fn bytes(&mut self, flexible: bool) -> Result<Bytes, Malformed> {
        let len = self
            .length(flexible, true)?
            .ok_or_else(|| Malformed("null in non-nullable bytes".into()))?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }

    /// The length of a nullable array (`None` for null), compact when
    /// `flexible`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off or when the count cannot fit in what is left.
    pub fn nullable_array_len(&mut self, flexible: bool) -> Result<Option<usize>, Malformed> {
        let Some(len) = self.length(flexible, true)? else {
            return Ok(None);
        };
        // Every element takes at least one byte: a larger count is garbage,
        // and refusing it early keeps allocation bounded.
        if len > self.buf.len() {
            return Err(Malformed(format!(
                "array of {len} elements in {} bytes",
                self.buf.len()
            )));
        }
        Ok(Some(len))
    }

    /// The length of a non-null array, compact when `flexible`.
    ///
    /// # Errors
    ///
    /// As [`Reader::nullable_array_len`], and for null.
    pub fn array_len(&mut self, flexible: bool) -> Result<usize, Malformed> {
        self.nullable_array_len(flexible)?
            .ok_or_else(|| Malformed("null in a non-nullable array".into()))
    }

    /// A tagged-field section: every `(tag, raw value)`.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off.
    pub fn tagged_fields(&mut self) -> Result<Vec<(u64, &'a [u8])>, Malformed> {
        let count = self.uvarint()?;
        let mut out = Vec::new();
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?)
                .map_err(|_| Malformed("tagged field size overflows".into()))?;
            out.push((tag, self.take(size)?));
        }
        Ok(out)
    }

    /// Skips a tagged-field section.
    ///
    /// # Errors
    ///
    /// [`Malformed`] when cut off.
    pub fn skip_tagged_fields(&mut self) -> Result<(), Malformed> {
        self.tagged_fields().map(drop)
    }

    /// Checks that nothing is left.
    ///
    /// # Errors
    ///
    /// [`Malformed`] naming the trailing bytes.
    pub fn finish(&self) -> Result<(), Malformed> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Malformed(format!("{} trailing bytes", self.buf.len())))
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn counts_and_lengths_larger_than_the_bytes_left_are_refused_before_allocating() {
        // An array claiming 2^31 - 1 elements in a 100-byte record.
        let mut classic = BytesMut::new();
        classic.put_i32(i32::MAX);
        classic.put_slice(&[0u8; 96]);
        check!(Reader::new(&classic).array_len(false).is_err());
        // The same as a compact (flexible) count.
        let mut compact = BytesMut::new();
        put_uvarint(&mut compact, u64::from(u32::MAX));
        compact.put_slice(&[0u8; 96]);
        check!(Reader::new(&compact).array_len(true).is_err());
        // A string and bytes longer than what is left.
        let mut string = BytesMut::new();
        string.put_i16(i16::MAX);
        string.put_slice(b"short");
        check!(Reader::new(&string).string(false).is_err());
        let mut bytes = BytesMut::new();
        bytes.put_i32(i32::MAX);
        check!(Reader::new(&bytes).bytes(false).is_err());
        // A tagged-field section claiming 2^63 fields ends at the bytes left.
        let mut tagged = BytesMut::new();
        put_uvarint(&mut tagged, 1 << 63);
        tagged.put_slice(&[1, 0, 2, 0]);
        check!(Reader::new(&tagged).tagged_fields().is_err());
        // Null and in-range counts still decode.
        let mut ok = BytesMut::new();
        ok.put_i32(-1);
        ok.put_i32(2);
        ok.put_slice(&[7, 8]);
        let mut r = Reader::new(&ok);
        check!(r.nullable_array_len(false).unwrap().is_none());
        check!(r.array_len(false).unwrap() == 2);
    }
}
