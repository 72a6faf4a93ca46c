//! DescribeConfigs v0 (sarama's and kafka-python's admin of Kafka 0.11–1.x).
//!
//! Request v0: `[resource_type i8, resource_name string, config_names
//! nullable [string]]` (v1 adds `include_synonyms`). Response v0:
//! `throttle_time_ms i32, [error_code i16, error_message nullable_string,
//! resource_type i8, resource_name string, [name string, value
//! nullable_string, read_only bool, is_default bool, is_sensitive bool]]`:
//! v1 replaced `is_default` by `config_source` and added synonyms, so a
//! value is "default" here when its source is Kafka's DEFAULT_CONFIG (5).

use {
    super::{
        reason,
        wire::{Reader, Writer},
    },
    crate::network::codec::Request,
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        DescribeConfigsRequest, DescribeConfigsResponse,
        describe_configs_request::DescribeConfigsResource,
    },
};

/// `config_source` of a value nobody set.
const DEFAULT_CONFIG: i8 = 5;

/// Decodes a DescribeConfigs v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let mut request = DescribeConfigsRequest::default();
    request.resources = r
        .array(7, |r| {
            let mut res = DescribeConfigsResource::default();
            res.resource_type = r.i8()?;
            res.resource_name = r.string()?;
            res.configuration_keys = r.nullable_array(2, Reader::string)?;
            Ok(res)
        })
        .map_err(reason)?;
    Ok(Request::DescribeConfigs(request))
}

/// Writes a DescribeConfigs response at v0.
pub fn encode(response: &DescribeConfigsResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_count(response.results.len());
    for res in &response.results {
        buf.put_i16(res.error_code);
        buf.put_string(res.error_message.as_deref());
        buf.put_i8(res.resource_type);
        buf.put_string(Some(res.resource_name.as_str()));
        buf.put_count(res.configs.len());
        for c in &res.configs {
            buf.put_string(Some(c.name.as_str()));
            buf.put_string(c.value.as_deref());
            buf.put_u8(u8::from(c.read_only));
            buf.put_u8(u8::from(c.config_source == DEFAULT_CONFIG));
            buf.put_u8(u8::from(c.is_sensitive));
        }
    }
}
