//! `krabka acl list|create|delete`: ACLs over DescribeAcls, CreateAcls and
//! DeleteAcls, with the options of Kafka's `kafka-acls.sh`
//! (`--allow-principal`, `--deny-principal`, `--operation`, `--topic`,
//! `--group`, `--cluster`, `--transactional-id`, `--resource-pattern-type`,
//! `--allow-host`, `--deny-host`), so an operator's muscle memory carries
//! over. `create` makes every combination of principal, host, operation and
//! resource given, as `kafka-acls.sh --add` does; `delete` removes what
//! matches the filter the options describe.
//!
//! The ACL vocabulary (types, operations, permissions and their wire codes)
//! is the broker's own, from [`krabka_broker::security::acl`].

use {
    super::{CliError, Common, Format, Table, print_json},
    clap::{Args, Subcommand},
    kafka_protocol::{
        messages::{
            CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
            create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter,
        },
        protocol::StrBytes,
    },
    krabka_broker::security::acl::binding::{Operation, PatternType, Permission, ResourceType},
    krabka_client::ClientError,
    serde::Serialize,
};

/// `krabka acl ...`.
#[derive(Debug, Args)]
pub struct AclArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: AclCommand,
}

#[derive(Debug, Subcommand)]
enum AclCommand {
    /// List the ACLs that match the options (every ACL without options).
    List(AclOptions),
    /// Create ACLs: every combination of principal, host, operation and resource given.
    Create(AclOptions),
    /// Delete the ACLs that match the options.
    Delete(AclOptions),
}

/// The options of `kafka-acls.sh`.
#[derive(Debug, Args)]
struct AclOptions {
    /// Principal to allow (`User:alice`); repeatable.
    #[arg(long, value_name = "PRINCIPAL")]
    allow_principal: Vec<String>,
    /// Principal to deny; repeatable.
    #[arg(long, value_name = "PRINCIPAL")]
    deny_principal: Vec<String>,
    /// Principal to list ACLs of (list only; `--allow-principal` and
    /// `--deny-principal` filter too).
    #[arg(long, value_name = "PRINCIPAL")]
    principal: Vec<String>,
    /// Host the allow entries apply to (default `*` on create); repeatable.
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,
    /// Host the deny entries apply to (default `*` on create); repeatable.
    #[arg(long, value_name = "HOST")]
    deny_host: Vec<String>,
    /// Operation (Read, Write, Create, Delete, Alter, Describe,
    /// ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite,
    /// CreateTokens, DescribeTokens, All); repeatable. Default: All on
    /// create, any on list and delete.
    #[arg(long, value_name = "OPERATION")]
    operation: Vec<String>,
    /// Topic (`*` for all); repeatable.
    #[arg(long, value_name = "TOPIC")]
    topic: Vec<String>,
    /// Consumer group (`*` for all); repeatable.
    #[arg(long, value_name = "GROUP")]
    group: Vec<String>,
    /// The cluster resource.
    #[arg(long)]
    cluster: bool,
    /// Transactional id (`*` for all); repeatable.
    #[arg(long, value_name = "ID")]
    transactional_id: Vec<String>,
    /// How resource names match: literal (default) or prefixed on create;
    /// also any or match on list and delete.
    #[arg(long, value_name = "TYPE")]
    resource_pattern_type: Option<String>,
}

/// One ACL as printed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct AclView {
    resource_type: String,
    name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

/// Kafka's operation names in `kafka-acls.sh` spelling (`DescribeConfigs`)
/// or the wire name (`DESCRIBE_CONFIGS`), case-insensitively.
fn parse_operation(text: &str) -> Result<Operation, CliError> {
    let wanted = text.replace(['_', '-'], "").to_ascii_lowercase();
    (2..=14)
        .map(Operation::from_code)
        .find(|op| op.name().replace('_', "").to_ascii_lowercase() == wanted)
        .ok_or_else(|| CliError::Usage(format!("unknown operation {text:?}")))
}

fn parse_pattern(text: Option<&str>, filter: bool) -> Result<PatternType, CliError> {
    let pattern = match text.map(str::to_ascii_lowercase).as_deref() {
        None | Some("literal") => PatternType::Literal,
        Some("prefixed") => PatternType::Prefixed,
        Some("any") if filter => PatternType::Any,
        Some("match") if filter => PatternType::Match,
        Some(other) => {
            return Err(CliError::Usage(format!(
                "--resource-pattern-type {other} is not {}",
                if filter {
                    "literal, prefixed, any or match"
                } else {
                    "literal or prefixed (create)"
                }
            )));
        }
    };
    Ok(pattern)
}

impl AclOptions {
    /// The resources named, as (type, name).
    fn resources(&self) -> Vec<(ResourceType, String)> {
        let mut out = Vec::new();
        out.extend(self.topic.iter().map(|t| (ResourceType::Topic, t.clone())));
        out.extend(self.group.iter().map(|g| (ResourceType::Group, g.clone())));
        if self.cluster {
            out.push((ResourceType::Cluster, "kafka-cluster".to_owned()));
        }
        out.extend(
            self.transactional_id
                .iter()
                .map(|t| (ResourceType::TransactionalId, t.clone())),
        );
        out
    }

    fn operations(&self, default: Operation) -> Result<Vec<Operation>, CliError> {
        if self.operation.is_empty() {
            return Ok(vec![default]);
        }
        self.operation.iter().map(|o| parse_operation(o)).collect()
    }

    /// (permission, principal, hosts) groups named.
    fn entries(
        &self,
        default_host: Option<&str>,
    ) -> Vec<(Permission, String, Vec<Option<String>>)> {
        let hosts = |given: &[String]| -> Vec<Option<String>> {
            if given.is_empty() {
                vec![default_host.map(str::to_owned)]
            } else {
                given.iter().cloned().map(Some).collect()
            }
        };
        let mut out = Vec::new();
        for p in &self.allow_principal {
            out.push((Permission::Allow, p.clone(), hosts(&self.allow_host)));
        }
        for p in &self.deny_principal {
            out.push((Permission::Deny, p.clone(), hosts(&self.deny_host)));
        }
        out
    }
}

fn text(s: Option<&str>) -> Option<StrBytes> {
    s.map(|s| StrBytes::from_string(s.to_owned()))
}

fn check(code: i16, message: Option<&StrBytes>, what: &str) -> Result<(), CliError> {
    ClientError::check(code, message.map(|m| m.as_str()), || what.to_owned())
        .map_err(CliError::from)
}

/// Runs `krabka acl ...`.
///
/// # Errors
///
/// [`CliError`] with the exit code of the failure.
pub async fn run(args: AclArgs) -> Result<(), CliError> {
    let common = args.common;
    match args.command {
        AclCommand::List(options) => list(&common, &options).await,
        AclCommand::Create(options) => create(&common, &options).await,
        AclCommand::Delete(options) => delete(&common, &options).await,
    }
}

async fn list(common: &Common, options: &AclOptions) -> Result<(), CliError> {
    let pattern = parse_pattern(options.resource_pattern_type.as_deref(), true)?;
    let mut filters: Vec<(ResourceType, Option<String>, PatternType)> = options
        .resources()
        .into_iter()
        .map(|(t, n)| (t, Some(n), pattern))
        .collect();
    if filters.is_empty() {
        // No resource: every ACL (of the pattern type, when one is given).
        let pattern = options
            .resource_pattern_type
            .as_ref()
            .map_or(PatternType::Any, |_| pattern);
        filters.push((ResourceType::Any, None, pattern));
    }
    let mut principals: Vec<Option<String>> = options
        .principal
        .iter()
        .chain(&options.allow_principal)
        .chain(&options.deny_principal)
        .cloned()
        .map(Some)
        .collect();
    if principals.is_empty() {
        principals.push(None);
    }
    let client = common.connect().await?;
    let mut acls = Vec::new();
    for (resource_type, name, pattern) in &filters {
        for principal in &principals {
            let mut request = DescribeAclsRequest::default();
            request.resource_type_filter = resource_type.code();
            request.resource_name_filter = text(name.as_deref());
            request.pattern_type_filter = pattern.code();
            request.principal_filter = text(principal.as_deref());
            request.host_filter = None;
            request.operation = Operation::Any.code();
            request.permission_type = Permission::Any.code();
            let response = client.send_any(&request).await?;
            check(
                response.error_code,
                response.error_message.as_ref(),
                "DescribeAcls",
            )?;
            for resource in response.resources {
                for acl in resource.acls {
                    acls.push(AclView {
                        resource_type: ResourceType::from_code(resource.resource_type)
                            .name()
                            .to_owned(),
                        name: resource.resource_name.to_string(),
                        pattern_type: PatternType::from_code(resource.pattern_type)
                            .name()
                            .to_owned(),
                        principal: acl.principal.to_string(),
                        host: acl.host.to_string(),
                        operation: Operation::from_code(acl.operation).name().to_owned(),
                        permission: Permission::from_code(acl.permission_type).name().to_owned(),
                    });
                }
            }
        }
    }
    acls.sort();
    acls.dedup();
    print_acls(common, &acls, "No ACLs match.")
}

fn print_acls(common: &Common, acls: &[AclView], empty: &str) -> Result<(), CliError> {
    match common.format {
        Format::Json => print_json(&acls),
        Format::Text => {
            if acls.is_empty() {
                println!("{empty}");
                return Ok(());
            }
            let mut table = Table::new(&[
                "RESOURCE",
                "NAME",
                "PATTERN",
                "PRINCIPAL",
                "HOST",
                "OPERATION",
                "PERMISSION",
            ]);
            for a in acls {
                table.row(vec![
                    a.resource_type.clone(),
                    a.name.clone(),
                    a.pattern_type.clone(),
                    a.principal.clone(),
                    a.host.clone(),
                    a.operation.clone(),
                    a.permission.clone(),
                ]);
            }
            table.print()
        }
    }
}

async fn create(common: &Common, options: &AclOptions) -> Result<(), CliError> {
    let pattern = parse_pattern(options.resource_pattern_type.as_deref(), false)?;
    let resources = options.resources();
    if resources.is_empty() {
        return Err(CliError::Usage(
            "name a resource: --topic, --group, --cluster or --transactional-id".into(),
        ));
    }
    let entries = options.entries(Some("*"));
    if entries.is_empty() {
        return Err(CliError::Usage(
            "name a principal: --allow-principal or --deny-principal".into(),
        ));
    }
    let operations = options.operations(Operation::All)?;
    let mut acls = Vec::new();
    let mut request = CreateAclsRequest::default();
    for (resource_type, name) in &resources {
        for (permission, principal, hosts) in &entries {
            for host in hosts {
                let host = host.clone().unwrap_or_else(|| "*".into());
                for operation in &operations {
                    let mut creation = AclCreation::default();
                    creation.resource_type = resource_type.code();
                    creation.resource_name = StrBytes::from_string(name.clone());
                    creation.resource_pattern_type = pattern.code();
                    creation.principal = StrBytes::from_string(principal.clone());
                    creation.host = StrBytes::from_string(host.clone());
                    creation.operation = operation.code();
                    creation.permission_type = permission.code();
                    request.creations.push(creation);
                    acls.push(AclView {
                        resource_type: resource_type.name().to_owned(),
                        name: name.clone(),
                        pattern_type: pattern.name().to_owned(),
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: operation.name().to_owned(),
                        permission: permission.name().to_owned(),
                    });
                }
            }
        }
    }
    let client = common.connect().await?;
    let response = client.send_any(&request).await?;
    for (result, acl) in response.results.iter().zip(&acls) {
        check(
            result.error_code,
            result.error_message.as_ref(),
            &format!(
                "CreateAcls {} {} {} on {} {}",
                acl.permission, acl.principal, acl.operation, acl.resource_type, acl.name
            ),
        )?;
    }
    if response.results.len() != acls.len() {
        return Err(CliError::Failed(format!(
            "CreateAcls: {} results for {} ACLs",
            response.results.len(),
            acls.len()
        )));
    }
    match common.format {
        Format::Json => print_json(&acls),
        Format::Text => {
            println!("Created {} ACL(s):", acls.len());
            print_acls(common, &acls, "")
        }
    }
}

async fn delete(common: &Common, options: &AclOptions) -> Result<(), CliError> {
    let pattern = parse_pattern(options.resource_pattern_type.as_deref(), true)?;
    let resources = options.resources();
    if resources.is_empty() {
        return Err(CliError::Usage(
            "name a resource: --topic, --group, --cluster or --transactional-id".into(),
        ));
    }
    let mut entries: Vec<(Permission, Option<String>, Vec<Option<String>>)> = options
        .entries(None)
        .into_iter()
        .map(|(permission, principal, hosts)| (permission, Some(principal), hosts))
        .collect();
    if entries.is_empty() {
        entries.push((Permission::Any, None, vec![None]));
    }
    let operations = options.operations(Operation::Any)?;
    let mut request = DeleteAclsRequest::default();
    for (resource_type, name) in &resources {
        for (permission, principal, hosts) in &entries {
            for host in hosts {
                for operation in &operations {
                    let mut filter = DeleteAclsFilter::default();
                    filter.resource_type_filter = resource_type.code();
                    filter.resource_name_filter = text(Some(name));
                    filter.pattern_type_filter = pattern.code();
                    filter.principal_filter = text(principal.as_deref());
                    filter.host_filter = text(host.as_deref());
                    filter.operation = operation.code();
                    filter.permission_type = permission.code();
                    request.filters.push(filter);
                }
            }
        }
    }
    let client = common.connect().await?;
    let response = client.send_any(&request).await?;
    let mut deleted = Vec::new();
    for result in response.filter_results {
        check(
            result.error_code,
            result.error_message.as_ref(),
            "DeleteAcls",
        )?;
        for acl in result.matching_acls {
            check(acl.error_code, acl.error_message.as_ref(), "DeleteAcls")?;
            deleted.push(AclView {
                resource_type: ResourceType::from_code(acl.resource_type).name().to_owned(),
                name: acl.resource_name.to_string(),
                pattern_type: PatternType::from_code(acl.pattern_type).name().to_owned(),
                principal: acl.principal.to_string(),
                host: acl.host.to_string(),
                operation: Operation::from_code(acl.operation).name().to_owned(),
                permission: Permission::from_code(acl.permission_type).name().to_owned(),
            });
        }
    }
    deleted.sort();
    deleted.dedup();
    match common.format {
        Format::Json => print_json(&deleted),
        Format::Text => {
            println!("Deleted {} ACL(s).", deleted.len());
            print_acls(common, &deleted, "")
        }
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn operations_in_kafka_acls_spelling() {
        check!(parse_operation("Read").unwrap() == Operation::Read);
        check!(parse_operation("DescribeConfigs").unwrap() == Operation::DescribeConfigs);
        check!(parse_operation("IDEMPOTENT_WRITE").unwrap() == Operation::IdempotentWrite);
        check!(parse_operation("all").unwrap() == Operation::All);
        check!(parse_operation("Any").is_err());
        check!(parse_pattern(Some("PREFIXED"), false).unwrap() == PatternType::Prefixed);
        check!(parse_pattern(Some("match"), false).is_err());
        check!(parse_pattern(Some("match"), true).unwrap() == PatternType::Match);
    }
}
