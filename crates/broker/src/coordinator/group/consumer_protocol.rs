//! Reading the `consumer` protocol's subscription metadata.
//!
//! The coordinator treats member metadata as opaque bytes except in one
//! place: offset expiry and OffsetDelete must know which topics a Stable
//! `consumer` group subscribes to (Kafka's `ClassicGroup.computeSubscribedTopics`).
//! The metadata is a version `int16` followed by a `ConsumerProtocolSubscription`.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;

/// The topics in a `consumer` protocol subscription, `None` when the bytes do
/// not parse.
pub fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    // Newer versions only add fields; read them with the newest known layout.
    let version = version.clamp(0, 3);
    let sub = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(sub.topics.iter().map(|t| t.as_str().to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn parses_a_v1_subscription() {
        let sub = ConsumerProtocolSubscription::default().with_topics(vec![
            StrBytes::from_static_str("a"),
            StrBytes::from_static_str("b"),
        ]);
        let mut buf = BytesMut::new();
        buf.put_i16(1);
        sub.encode(&mut buf, 1).unwrap();
        assert_eq!(
            subscription_topics(&buf.freeze()),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(subscription_topics(&Bytes::from_static(&[0, 1, 0])), None);
        assert_eq!(subscription_topics(&Bytes::new()), None);
    }
}
