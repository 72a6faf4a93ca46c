//! Test support: one request through the broker's dispatcher, in process,
//! and its answer decoded — what every handler-level test needs.

use {
    super::{Reply, handle},
    crate::{
        broker::Broker,
        network::codec::{DecodedRequest, Request},
        security::session::Session,
    },
    kafka_protocol::{
        messages::{ApiKey, RequestHeader, ResponseHeader},
        protocol::Decodable,
    },
    std::sync::Arc,
};

/// Sends `body` as `api` v`version` from 127.0.0.1, with `session` when the
/// request should be authorized as its principal; panics on anything but
/// a decodable answer.
pub(crate) async fn call_as<R: Decodable>(
    broker: &Arc<Broker>,
    session: Option<&Arc<Session>>,
    api: ApiKey,
    version: i16,
    body: Request,
) -> R {
    let mut body = call_raw(broker, session, api, version, body).await;
    R::decode(&mut body, version).unwrap()
}

/// [`call_as`], answering the response body undecoded (for versions
/// `kafka-protocol` cannot read).
pub(crate) async fn call_raw(
    broker: &Arc<Broker>,
    session: Option<&Arc<Session>>,
    api: ApiKey,
    version: i16,
    body: Request,
) -> bytes::Bytes {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = 1;
    let request = DecodedRequest {
        api_key: api,
        version,
        header,
        body,
        peer: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 40_000))),
        session: session.cloned(),
        zero_copy: false,
    };
    match handle(broker, request).await {
        Reply::Frame(frame) => {
            let mut frame = frame.slice(4..);
            ResponseHeader::decode(&mut frame, api.response_header_version(version)).unwrap();
            frame
        }
        other => panic!("{api:?} v{version}: {other:?}"),
    }
}

/// [`call_as`] without a session (no authorization).
pub(crate) async fn call<R: Decodable>(
    broker: &Arc<Broker>,
    api: ApiKey,
    version: i16,
    body: Request,
) -> R {
    call_as(broker, None, api, version, body).await
}

/// The topics of a response that names them by id (OffsetCommit v10,
/// TxnOffsetCommit v6), read from `r` after its throttle time: each id with
/// its partitions' (index, error code).
pub(crate) fn topics_by_id(
    r: &mut crate::network::wire::Reader<'_>,
) -> Vec<(uuid::Uuid, Vec<(i32, i16)>)> {
    r.compact_array(17, |r| {
        let id = r.uuid()?;
        let partitions = r.compact_array(6, |r| {
            let p = (r.i32()?, r.i16()?);
            r.skip_tagged_fields()?;
            Ok(p)
        })?;
        r.skip_tagged_fields()?;
        Ok((id, partitions))
    })
    .unwrap()
}
