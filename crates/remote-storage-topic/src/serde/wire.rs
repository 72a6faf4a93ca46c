//! The primitive types of Kafka's generated message code, in their flexible
//! ("compact") forms: big-endian fixed-width integers, unsigned varints,
//! compact strings, bytes and arrays (length + 1, zero for null), 16-byte
//! UUIDs and tagged-field sections.
//!
//! [`Reader`] checks every length against the bytes that are left before it
//! reads or allocates, so a record from the network or a disk can be
//! anything and still only ever yields an error.

use {
    crate::error::MetadataLogError,
    bytes::{BufMut, BytesMut},
    uuid::Uuid,
};

fn decode_error(what: impl Into<String>) -> MetadataLogError {
    MetadataLogError::Decode(what.into())
}

/// Appends Kafka's wire primitives to a buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: BytesMut,
}

impl Writer {
    pub(crate) fn into_inner(self) -> BytesMut {
        self.buf
    }

    pub(crate) fn i8(&mut self, value: i8) {
        self.buf.put_i8(value);
    }

    pub(crate) fn i16(&mut self, value: i16) {
        self.buf.put_i16(value);
    }

    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.put_slice(bytes);
    }

    pub(crate) fn i32(&mut self, value: i32) {
        self.buf.put_i32(value);
    }

    pub(crate) fn i64(&mut self, value: i64) {
        self.buf.put_i64(value);
    }

    pub(crate) fn uuid(&mut self, value: Uuid) {
        self.buf.put_slice(value.as_bytes());
    }

    pub(crate) fn unsigned_varint(&mut self, mut value: u32) {
        while value >= 0x80 {
            // The low seven bits, with the continuation bit set.
            self.buf.put_u8((value & 0x7f) as u8 | 0x80);
            value >>= 7;
        }
        self.buf.put_u8(value as u8);
    }

    /// A compact length: `len + 1`, as an unsigned varint.
    fn compact_len(&mut self, len: usize) {
        // Kafka caps every length at `i32::MAX`; ours come from in-memory
        // values far below that, so saturating never changes a real length.
        let len = u32::try_from(len).unwrap_or(u32::MAX - 1);
        self.unsigned_varint(len.saturating_add(1));
    }

    pub(crate) fn compact_string(&mut self, value: &str) {
        self.compact_len(value.len());
        self.buf.put_slice(value.as_bytes());
    }

    pub(crate) fn compact_nullable_bytes(&mut self, value: Option<&[u8]>) {
        match value {
            None => self.unsigned_varint(0),
            Some(bytes) => {
                self.compact_len(bytes.len());
                self.buf.put_slice(bytes);
            }
        }
    }

    pub(crate) fn compact_array_len(&mut self, len: usize) {
        self.compact_len(len);
    }

    /// An empty tagged-field section.
    pub(crate) fn no_tagged_fields(&mut self) {
        self.unsigned_varint(0);
    }
}

/// Reads Kafka's wire primitives from a byte slice, refusing anything that
/// runs past its end.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], MetadataLogError> {
        if self.rest.len() < len {
            return Err(decode_error(format!(
                "truncated {what}: needs {len} bytes, {} left",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], MetadataLogError> {
        let bytes = self.take(N, what)?;
        bytes
            .try_into()
            .map_err(|_| decode_error(format!("truncated {what}")))
    }

    pub(crate) fn i8(&mut self, what: &str) -> Result<i8, MetadataLogError> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn i16(&mut self, what: &str) -> Result<i16, MetadataLogError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn raw(&mut self, len: usize, what: &str) -> Result<&'a [u8], MetadataLogError> {
        self.take(len, what)
    }

    pub(crate) fn bool(&mut self, what: &str) -> Result<bool, MetadataLogError> {
        Ok(self.i8(what)? != 0)
    }

    pub(crate) fn i32(&mut self, what: &str) -> Result<i32, MetadataLogError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn i64(&mut self, what: &str) -> Result<i64, MetadataLogError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn uuid(&mut self, what: &str) -> Result<Uuid, MetadataLogError> {
        Ok(Uuid::from_bytes(self.array(what)?))
    }

    /// Kafka's `readUnsignedVarint`: at most five bytes.
    pub(crate) fn unsigned_varint(&mut self, what: &str) -> Result<u32, MetadataLogError> {
        let mut value: u32 = 0;
        for index in 0..5 {
            let [byte] = self.array::<1>(what)?;
            value |= u32::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(decode_error(format!(
            "{what}: varint longer than five bytes"
        )))
    }

    /// A compact length: `None` for null (a stored zero), else `stored - 1`,
    /// which must not exceed what is left when each element takes at least
    /// `min_element_size` bytes.
    fn compact_len(
        &mut self,
        what: &str,
        min_element_size: usize,
    ) -> Result<Option<usize>, MetadataLogError> {
        let stored = self.unsigned_varint(what)?;
        let Some(len) = stored.checked_sub(1) else {
            return Ok(None);
        };
        let len =
            usize::try_from(len).map_err(|_| decode_error(format!("{what}: length {len}")))?;
        if len.saturating_mul(min_element_size.max(1)) > self.rest.len() {
            return Err(decode_error(format!(
                "truncated {what}: length {len} with {} bytes left",
                self.rest.len()
            )));
        }
        Ok(Some(len))
    }

    pub(crate) fn compact_string(&mut self, what: &str) -> Result<String, MetadataLogError> {
        let len = self
            .compact_len(what, 1)?
            .ok_or_else(|| decode_error(format!("{what}: null in a non-nullable string")))?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| decode_error(format!("{what}: not valid UTF-8")))
    }

    pub(crate) fn compact_nullable_bytes(
        &mut self,
        what: &str,
    ) -> Result<Option<&'a [u8]>, MetadataLogError> {
        match self.compact_len(what, 1)? {
            None => Ok(None),
            Some(len) => self.take(len, what).map(Some),
        }
    }

    /// The element count of a non-nullable compact array whose elements take
    /// at least `min_element_size` bytes each.
    pub(crate) fn compact_array_len(
        &mut self,
        what: &str,
        min_element_size: usize,
    ) -> Result<usize, MetadataLogError> {
        self.compact_len(what, min_element_size)?
            .ok_or_else(|| decode_error(format!("{what}: null in a non-nullable array")))
    }

    /// Reads a tagged-field section, handing each field's tag and data to
    /// `known`; a field it does not claim (returns `Ok(false)`) is skipped,
    /// as Kafka keeps unknown tagged fields aside.
    pub(crate) fn tagged_fields(
        &mut self,
        what: &str,
        mut known: impl FnMut(u32, &mut Reader<'a>) -> Result<bool, MetadataLogError>,
    ) -> Result<(), MetadataLogError> {
        let count = self.unsigned_varint(what)?;
        for _ in 0..count {
            let tag = self.unsigned_varint(what)?;
            let size = self.unsigned_varint(what)?;
            let size = usize::try_from(size)
                .map_err(|_| decode_error(format!("{what}: tagged field size {size}")))?;
            let data = self.take(size, what)?;
            let mut field = Reader::new(data);
            if known(tag, &mut field)? && field.remaining() != 0 {
                return Err(decode_error(format!(
                    "{what}: tagged field {tag} has {} unread bytes",
                    field.remaining()
                )));
            }
        }
        Ok(())
    }

    /// A section that must be read completely.
    pub(crate) fn finish(&self, what: &str) -> Result<(), MetadataLogError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(decode_error(format!(
                "{what}: {} trailing bytes",
                self.rest.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check, proptest::prelude::*};

    #[test]
    fn varints_use_seven_bits_per_byte() {
        let mut writer = Writer::default();
        writer.unsigned_varint(0);
        writer.unsigned_varint(127);
        writer.unsigned_varint(128);
        writer.unsigned_varint(300);
        writer.unsigned_varint(u32::MAX);
        let bytes = writer.into_inner();
        check!(
            bytes.as_ref()
                == [
                    0x00, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f
                ]
        );
        let mut reader = Reader::new(&bytes);
        for expected in [0, 127, 128, 300, u32::MAX] {
            check!(reader.unsigned_varint("v").unwrap() == expected);
        }
        check!(reader.finish("v").is_ok());
    }

    #[test]
    fn an_overlong_varint_is_refused() {
        let mut reader = Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        check!(reader.unsigned_varint("v").is_err());
    }

    #[test]
    fn lengths_past_the_end_are_refused_before_allocating() {
        // A string claiming 0x0fff_fffe bytes with three left.
        let mut reader = Reader::new(&[0xff, 0xff, 0xff, 0x7f, b'a', b'b', b'c']);
        check!(reader.compact_string("s").is_err());
        let mut reader = Reader::new(&[0x00]);
        check!(reader.compact_string("s").is_err());
        let mut reader = Reader::new(&[0x00]);
        check!(reader.compact_nullable_bytes("b").unwrap().is_none());
        // Three elements of at least 13 bytes cannot fit in 20.
        let mut bytes = vec![0x04];
        bytes.extend([0_u8; 20]);
        check!(Reader::new(&bytes).compact_array_len("a", 13).is_err());
    }

    proptest! {
        #[test]
        fn varints_round_trip(value in any::<u32>()) {
            let mut writer = Writer::default();
            writer.unsigned_varint(value);
            let bytes = writer.into_inner();
            let mut reader = Reader::new(&bytes);
            prop_assert_eq!(reader.unsigned_varint("v").unwrap(), value);
            prop_assert_eq!(reader.remaining(), 0);
        }
    }
}
