//! The security APIs in the broker's request dispatch: SaslHandshake and
//! SaslAuthenticate (answered by the connection's
//! [`Authenticator`](super::session::Authenticator), never by a handler),
//! CreateAcls, DescribeAcls, DeleteAcls, DescribeUserScramCredentials and
//! AlterUserScramCredentials.
//!
//! As on Kafka, the ACL APIs answer SECURITY_DISABLED when no authorizer is
//! configured; changing ACLs or credentials needs ALTER on the cluster and
//! reading them DESCRIBE.

use {
    super::{
        acl::binding::{
            AccessControlEntry, AclBinding, AclBindingFilter, Operation, PatternType, Permission,
            ResourcePattern, ResourceType,
        },
        authorize::{Checker, whole_answer},
        credentials::Upsertion,
    },
    crate::{broker::Broker, handlers::Reply, network::codec::encode_response},
    bytes::Bytes,
    kafka_protocol::{
        error::ResponseError,
        messages::{
            AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
            CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
            DescribeAclsRequest, DescribeAclsResponse, DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse, SaslAuthenticateRequest, SaslHandshakeRequest,
            alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
            create_acls_response::AclCreationResult,
            delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl},
            describe_acls_response::{AclDescription, DescribeAclsResource},
            describe_user_scram_credentials_response::{
                CredentialInfo, DescribeUserScramCredentialsResult,
            },
        },
        protocol::StrBytes,
    },
    std::{collections::BTreeMap, sync::Arc},
};

/// A decoded request of one of the security APIs (the API table,
/// [`crate::api_versions::APIS`], decodes each into its variant).
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum SecurityRequest {
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
    CreateAcls(CreateAclsRequest),
    DescribeAcls(DescribeAclsRequest),
    DeleteAcls(DeleteAclsRequest),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
}

const CLUSTER_DENIED: i16 = 31;

/// The whole answer when the session may not make this request, else `None`.
pub(crate) fn authorize(
    checker: &Checker<'_>,
    api: ApiKey,
    version: i16,
    id: i32,
    request: &SecurityRequest,
) -> Option<Reply> {
    let denied = |op: Operation| !checker.cluster(op);
    match request {
        SecurityRequest::SaslHandshake(_) | SecurityRequest::SaslAuthenticate(_) => None,
        SecurityRequest::CreateAcls(r) if denied(Operation::Alter) => {
            let mut response = CreateAclsResponse::default();
            response.results = r
                .creations
                .iter()
                .map(|_| {
                    let mut result = AclCreationResult::default();
                    result.error_code = CLUSTER_DENIED;
                    result
                })
                .collect();
            Some(whole_answer(api, version, id, &response))
        }
        SecurityRequest::DeleteAcls(r) if denied(Operation::Alter) => {
            let mut response = DeleteAclsResponse::default();
            response.filter_results = r
                .filters
                .iter()
                .map(|_| {
                    let mut result = DeleteAclsFilterResult::default();
                    result.error_code = CLUSTER_DENIED;
                    result
                })
                .collect();
            Some(whole_answer(api, version, id, &response))
        }
        SecurityRequest::DescribeAcls(_) if denied(Operation::Describe) => {
            let mut response = DescribeAclsResponse::default();
            response.error_code = CLUSTER_DENIED;
            Some(whole_answer(api, version, id, &response))
        }
        SecurityRequest::DescribeUserScramCredentials(_) if denied(Operation::Describe) => {
            let mut response = DescribeUserScramCredentialsResponse::default();
            response.error_code = CLUSTER_DENIED;
            Some(whole_answer(api, version, id, &response))
        }
        SecurityRequest::AlterUserScramCredentials(r) if denied(Operation::Alter) => {
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = r
                .deletions
                .iter()
                .map(|d| d.name.clone())
                .chain(r.upsertions.iter().map(|u| u.name.clone()))
                .map(|user| {
                    let mut result = AlterUserScramCredentialsResult::default();
                    result.user = user;
                    result.error_code = CLUSTER_DENIED;
                    result
                })
                .collect();
            Some(whole_answer(api, version, id, &response))
        }
        _ => None,
    }
}

fn security_disabled() -> (i16, Option<StrBytes>) {
    (
        ResponseError::SecurityDisabled.code(),
        Some(StrBytes::from_static_str("No Authorizer is configured.")),
    )
}

fn filter_of(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::from_code(resource_type),
        name: name.map(ToString::to_string),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation: Operation::from_code(operation),
        permission: Permission::from_code(permission),
    }
}

/// Handles a security API request (not SaslHandshake / SaslAuthenticate,
/// which only the connection's authenticator answers).
///
/// # Errors
///
/// The encoder's message when the answer cannot be written.
pub async fn handle(
    broker: &Arc<Broker>,
    api: ApiKey,
    version: i16,
    id: i32,
    request: SecurityRequest,
) -> Result<Bytes, String> {
    match request {
        SecurityRequest::SaslHandshake(_) | SecurityRequest::SaslAuthenticate(_) => {
            Err(format!("{api:?} outside the connection's authentication"))
        }
        SecurityRequest::CreateAcls(r) => {
            let mut response = CreateAclsResponse::default();
            if broker.security.authorizer.is_none() {
                let (code, message) = security_disabled();
                response.results = r
                    .creations
                    .iter()
                    .map(|_| {
                        let mut result = AclCreationResult::default();
                        result.error_code = code;
                        result.error_message.clone_from(&message);
                        result
                    })
                    .collect();
                return encode_response(api, version, id, &response);
            }
            let bindings: Vec<AclBinding> = r
                .creations
                .iter()
                .map(|c| AclBinding {
                    pattern: ResourcePattern {
                        resource_type: ResourceType::from_code(c.resource_type),
                        name: c.resource_name.to_string(),
                        pattern_type: PatternType::from_code(c.resource_pattern_type),
                    },
                    entry: AccessControlEntry {
                        principal: c.principal.to_string(),
                        host: c.host.to_string(),
                        operation: Operation::from_code(c.operation),
                        permission: Permission::from_code(c.permission_type),
                    },
                })
                .collect();
            let b = Arc::clone(broker);
            let results = crate::blocking::run(move || match &b.security.authorizer {
                Some(authorizer) => authorizer.create(&bindings),
                None => Vec::new(),
            })
            .await
            .map_err(|e| format!("CreateAcls task failed: {e}"))?;
            response.results = results
                .into_iter()
                .map(|r| {
                    let mut result = AclCreationResult::default();
                    if let Err(refusal) = r {
                        result.error_code = refusal.code;
                        result.error_message = Some(StrBytes::from_string(refusal.message));
                    }
                    result
                })
                .collect();
            encode_response(api, version, id, &response)
        }
        SecurityRequest::DescribeAcls(r) => {
            let mut response = DescribeAclsResponse::default();
            let Some(authorizer) = &broker.security.authorizer else {
                let (code, message) = security_disabled();
                response.error_code = code;
                response.error_message = message;
                return encode_response(api, version, id, &response);
            };
            let filter = filter_of(
                r.resource_type_filter,
                r.resource_name_filter.as_ref(),
                r.pattern_type_filter,
                r.principal_filter.as_ref(),
                r.host_filter.as_ref(),
                r.operation,
                r.permission_type,
            );
            if let Some(reason) = filter.invalid_reason() {
                response.error_code = ResponseError::InvalidRequest.code();
                response.error_message = Some(StrBytes::from_string(reason));
                return encode_response(api, version, id, &response);
            }
            let mut grouped: BTreeMap<ResourcePattern, Vec<AclDescription>> = BTreeMap::new();
            for b in authorizer.describe(&filter) {
                let mut acl = AclDescription::default();
                acl.principal = StrBytes::from_string(b.entry.principal);
                acl.host = StrBytes::from_string(b.entry.host);
                acl.operation = b.entry.operation.code();
                acl.permission_type = b.entry.permission.code();
                grouped.entry(b.pattern).or_default().push(acl);
            }
            response.resources = grouped
                .into_iter()
                .map(|(pattern, acls)| {
                    let mut resource = DescribeAclsResource::default();
                    resource.resource_type = pattern.resource_type.code();
                    resource.resource_name = StrBytes::from_string(pattern.name);
                    resource.pattern_type = pattern.pattern_type.code();
                    resource.acls = acls;
                    resource
                })
                .collect();
            encode_response(api, version, id, &response)
        }
        SecurityRequest::DeleteAcls(r) => {
            let mut response = DeleteAclsResponse::default();
            if broker.security.authorizer.is_none() {
                let (code, message) = security_disabled();
                response.filter_results = r
                    .filters
                    .iter()
                    .map(|_| {
                        let mut result = DeleteAclsFilterResult::default();
                        result.error_code = code;
                        result.error_message.clone_from(&message);
                        result
                    })
                    .collect();
                return encode_response(api, version, id, &response);
            }
            let filters: Vec<AclBindingFilter> = r
                .filters
                .iter()
                .map(|f| {
                    filter_of(
                        f.resource_type_filter,
                        f.resource_name_filter.as_ref(),
                        f.pattern_type_filter,
                        f.principal_filter.as_ref(),
                        f.host_filter.as_ref(),
                        f.operation,
                        f.permission_type,
                    )
                })
                .collect();
            let invalid: Vec<Option<String>> = filters
                .iter()
                .map(AclBindingFilter::invalid_reason)
                .collect();
            let valid: Vec<AclBindingFilter> = filters
                .iter()
                .zip(&invalid)
                .filter(|(_, i)| i.is_none())
                .map(|(f, _)| f.clone())
                .collect();
            let b = Arc::clone(broker);
            let deleted = crate::blocking::run(move || match &b.security.authorizer {
                Some(authorizer) => authorizer.delete(&valid).map_err(|e| e.to_string()),
                None => Ok(Vec::new()),
            })
            .await
            .map_err(|e| format!("DeleteAcls task failed: {e}"))?;
            let mut matched = match deleted {
                Ok(m) => m.into_iter(),
                Err(reason) => {
                    tracing::error!(%reason, "cannot delete ACLs");
                    response.filter_results = filters
                        .iter()
                        .map(|_| {
                            let mut result = DeleteAclsFilterResult::default();
                            result.error_code = ResponseError::UnknownServerError.code();
                            result.error_message =
                                Some(StrBytes::from_static_str("The ACLs could not be stored"));
                            result
                        })
                        .collect();
                    return encode_response(api, version, id, &response);
                }
            };
            response.filter_results = invalid
                .into_iter()
                .map(|invalid| {
                    let mut result = DeleteAclsFilterResult::default();
                    if let Some(reason) = invalid {
                        result.error_code = ResponseError::InvalidRequest.code();
                        result.error_message = Some(StrBytes::from_string(reason));
                        return result;
                    }
                    result.matching_acls = matched
                        .next()
                        .unwrap_or_default()
                        .into_iter()
                        .map(|b| {
                            let mut acl = DeleteAclsMatchingAcl::default();
                            acl.resource_type = b.pattern.resource_type.code();
                            acl.resource_name = StrBytes::from_string(b.pattern.name);
                            acl.pattern_type = b.pattern.pattern_type.code();
                            acl.principal = StrBytes::from_string(b.entry.principal);
                            acl.host = StrBytes::from_string(b.entry.host);
                            acl.operation = b.entry.operation.code();
                            acl.permission_type = b.entry.permission.code();
                            acl
                        })
                        .collect();
                    result
                })
                .collect();
            encode_response(api, version, id, &response)
        }
        SecurityRequest::DescribeUserScramCredentials(r) => {
            let mut response = DescribeUserScramCredentialsResponse::default();
            let all = broker.security.scram.describe();
            let result = |user: &str| {
                let mut result = DescribeUserScramCredentialsResult::default();
                result.user = StrBytes::from_string(user.to_owned());
                match all.get(user) {
                    Some(infos) => {
                        result.credential_infos = infos
                            .iter()
                            .map(|(m, iterations)| {
                                let mut info = CredentialInfo::default();
                                info.mechanism = m.code();
                                info.iterations = i32::try_from(*iterations).unwrap_or(i32::MAX);
                                info
                            })
                            .collect();
                    }
                    None => {
                        result.error_code = ResponseError::ResourceNotFound.code();
                        result.error_message = Some(StrBytes::from_static_str(
                            "Attempt to describe a user credential that does not exist",
                        ));
                    }
                }
                result
            };
            response.results = match r.users.filter(|u| !u.is_empty()) {
                None => all.keys().map(|u| result(u)).collect(),
                Some(users) => {
                    let mut seen = std::collections::HashMap::new();
                    for u in &users {
                        *seen.entry(u.name.to_string()).or_insert(0) += 1;
                    }
                    let mut out = Vec::new();
                    let mut done = std::collections::HashSet::new();
                    for u in users {
                        let name = u.name.to_string();
                        if !done.insert(name.clone()) {
                            continue;
                        }
                        if seen[&name] > 1 {
                            let mut dup = DescribeUserScramCredentialsResult::default();
                            dup.user = u.name;
                            dup.error_code = ResponseError::DuplicateResource.code();
                            dup.error_message = Some(StrBytes::from_static_str(
                                "Cannot describe the same user more than once",
                            ));
                            out.push(dup);
                        } else {
                            out.push(result(&name));
                        }
                    }
                    out
                }
            };
            encode_response(api, version, id, &response)
        }
        SecurityRequest::AlterUserScramCredentials(r) => {
            let deletions: Vec<(String, i8)> = r
                .deletions
                .iter()
                .map(|d| (d.name.to_string(), d.mechanism))
                .collect();
            let upsertions: Vec<Upsertion> = r
                .upsertions
                .iter()
                .map(|u| Upsertion {
                    user: u.name.to_string(),
                    mechanism: u.mechanism,
                    iterations: u.iterations,
                    salt: u.salt.to_vec(),
                    salted_password: u.salted_password.to_vec(),
                })
                .collect();
            let b = Arc::clone(broker);
            let results =
                crate::blocking::run(move || b.security.scram.alter(&deletions, &upsertions))
                    .await
                    .map_err(|e| format!("AlterUserScramCredentials task failed: {e}"))?;
            let mut response = AlterUserScramCredentialsResponse::default();
            response.results = results
                .into_iter()
                .map(|r| {
                    let mut result = AlterUserScramCredentialsResult::default();
                    result.user = StrBytes::from_string(r.user);
                    result.error_code = r.code;
                    result.error_message = r.message.map(StrBytes::from_string);
                    result
                })
                .collect();
            encode_response(api, version, id, &response)
        }
    }
}
