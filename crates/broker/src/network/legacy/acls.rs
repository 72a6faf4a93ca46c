//! DescribeAcls, CreateAcls and DeleteAcls v0 (Kafka 0.11–3.9): v1 before
//! resource patterns (KIP-290), so every ACL they name or find is a
//! LITERAL one, as Kafka 3.9 read them.
//!
//! Each v0 form is v1's without its pattern type: DescribeAcls' and
//! DeleteAcls' filters lack `pattern_type_filter` (after the resource name
//! filter), CreateAcls' creations lack `resource_pattern_type`, and the
//! DescribeAcls and DeleteAcls responses lack each resource's
//! `pattern_type`. CreateAcls' response is v1's. A LITERAL filter finds
//! only LITERAL ACLs, so no answer has a pattern v0 cannot say.

use {
    super::{
        reason,
        wire::{Reader, WireError, Writer},
    },
    crate::{network::codec::Request, security::admin::SecurityRequest},
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::messages::{
        CreateAclsRequest, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
        DescribeAclsResponse, create_acls_request::AclCreation,
        delete_acls_request::DeleteAclsFilter,
    },
};

/// Kafka's `PatternType.LITERAL`, the only pattern of v0.
pub const LITERAL: i8 = 3;

/// The version whose response form CreateAcls v0 shares.
pub const CREATE_RESPONSE_AS: i16 = 1;

/// A v0 filter's fields: resource type and name, principal, host,
/// operation and permission type.
type Filter = (
    i8,
    Option<kafka_protocol::protocol::StrBytes>,
    Option<kafka_protocol::protocol::StrBytes>,
    Option<kafka_protocol::protocol::StrBytes>,
    i8,
    i8,
);

fn filter(r: &mut Reader<'_>) -> Result<Filter, WireError> {
    Ok((
        r.i8()?,
        r.nullable_string()?,
        r.nullable_string()?,
        r.nullable_string()?,
        r.i8()?,
        r.i8()?,
    ))
}

/// Decodes a DescribeAcls v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode_describe(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let (resource_type, name, principal, host, operation, permission) =
        filter(&mut Reader::new(buf)).map_err(reason)?;
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = resource_type;
    request.resource_name_filter = name;
    request.pattern_type_filter = LITERAL;
    request.principal_filter = principal;
    request.host_filter = host;
    request.operation = operation;
    request.permission_type = permission;
    Ok(Request::Security(SecurityRequest::DescribeAcls(request)))
}

/// Decodes a CreateAcls v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode_create(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let creations = r
        .array(11, |r| {
            let mut c = AclCreation::default();
            c.resource_type = r.i8()?;
            c.resource_name = r.string()?;
            c.resource_pattern_type = LITERAL;
            c.principal = r.string()?;
            c.host = r.string()?;
            c.operation = r.i8()?;
            c.permission_type = r.i8()?;
            Ok(c)
        })
        .map_err(reason)?;
    let mut request = CreateAclsRequest::default();
    request.creations = creations;
    Ok(Request::Security(SecurityRequest::CreateAcls(request)))
}

/// Decodes a DeleteAcls v0 body.
///
/// # Errors
///
/// The reason the body does not parse.
pub fn decode_delete(buf: &mut Bytes, _version: i16) -> Result<Request, String> {
    let mut r = Reader::new(buf);
    let filters = r
        .array(9, |r| {
            let (resource_type, name, principal, host, operation, permission) = filter(r)?;
            let mut f = DeleteAclsFilter::default();
            f.resource_type_filter = resource_type;
            f.resource_name_filter = name;
            f.pattern_type_filter = LITERAL;
            f.principal_filter = principal;
            f.host_filter = host;
            f.operation = operation;
            f.permission_type = permission;
            Ok(f)
        })
        .map_err(reason)?;
    let mut request = DeleteAclsRequest::default();
    request.filters = filters;
    Ok(Request::Security(SecurityRequest::DeleteAcls(request)))
}

/// Writes a DescribeAcls response at v0.
pub fn encode_describe(response: &DescribeAclsResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_i16(response.error_code);
    buf.put_string(response.error_message.as_deref());
    buf.put_count(response.resources.len());
    for resource in &response.resources {
        buf.put_i8(resource.resource_type);
        buf.put_string(Some(&resource.resource_name));
        buf.put_count(resource.acls.len());
        for acl in &resource.acls {
            buf.put_string(Some(&acl.principal));
            buf.put_string(Some(&acl.host));
            buf.put_i8(acl.operation);
            buf.put_i8(acl.permission_type);
        }
    }
}

/// Writes a DeleteAcls response at v0.
pub fn encode_delete(response: &DeleteAclsResponse, buf: &mut BytesMut) {
    buf.put_i32(response.throttle_time_ms);
    buf.put_count(response.filter_results.len());
    for result in &response.filter_results {
        buf.put_i16(result.error_code);
        buf.put_string(result.error_message.as_deref());
        buf.put_count(result.matching_acls.len());
        for acl in &result.matching_acls {
            buf.put_i16(acl.error_code);
            buf.put_string(acl.error_message.as_deref());
            buf.put_i8(acl.resource_type);
            buf.put_string(Some(&acl.resource_name));
            buf.put_string(Some(&acl.principal));
            buf.put_string(Some(&acl.host));
            buf.put_i8(acl.operation);
            buf.put_i8(acl.permission_type);
        }
    }
}
