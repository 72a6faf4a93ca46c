//! Framing helpers for the scripted peers that unit tests run on 127.0.0.1
//! where no real broker can play the part (a wrong correlation id, a second
//! broker that is the coordinator).

use {
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{messages::ResponseHeader, protocol::Encodable},
    tokio::{io::AsyncReadExt, net::TcpStream},
};

/// Reads one size-prefixed request frame; `None` once the client hangs up.
pub async fn read_frame(stream: &mut TcpStream) -> Option<Bytes> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).await.ok()?;
    let mut buf = BytesMut::zeroed(usize::try_from(i32::from_be_bytes(prefix)).ok()?);
    stream.read_exact(&mut buf).await.ok()?;
    Some(buf.freeze())
}

/// A size-prefixed response frame: header then body.
pub fn response_frame<R: Encodable>(
    correlation_id: i32,
    header_version: i16,
    body: &R,
    version: i16,
) -> Bytes {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, header_version).unwrap();
    body.encode(&mut buf, version).unwrap();
    let size = i32::try_from(buf.len() - 4).unwrap();
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}
