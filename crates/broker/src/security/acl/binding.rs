//! ACL bindings and binding filters, as Kafka's `AclBinding` and
//! `AclBindingFilter`: a resource pattern (type, name, LITERAL or PREFIXED)
//! and an access control entry (principal, host, operation, permission).
//!
//! The enums carry Kafka's wire codes (the `i8` fields of CreateAcls,
//! DescribeAcls and DeleteAcls) and Kafka's names, which are also how the
//! store writes them to disk, so a file is readable and stable across
//! versions.

use serde::{Deserialize, Serialize};

/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name and host that match any.
pub const WILDCARD: &str = "*";
/// The principal that matches any user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal => $text:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant),*
        }

        impl $name {
            /// Kafka's wire code.
            #[must_use]
            pub fn code(self) -> i8 {
                match self { $(Self::$variant => $code),* }
            }

            /// The value of a wire code (UNKNOWN for a code Kafka does not define).
            #[must_use]
            pub fn from_code(code: i8) -> Self {
                match code { $($code => Self::$variant,)* _ => Self::Unknown }
            }

            /// Kafka's name (`TOPIC`, `LITERAL`, `READ`, `ALLOW`, ...).
            #[must_use]
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => $text),* }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        /// Not a known type.
        Unknown = 0 => "UNKNOWN",
        /// Any type (filters only).
        Any = 1 => "ANY",
        /// A topic.
        Topic = 2 => "TOPIC",
        /// A consumer group.
        Group = 3 => "GROUP",
        /// The cluster.
        Cluster = 4 => "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        /// A delegation token.
        DelegationToken = 6 => "DELEGATION_TOKEN",
        /// A user.
        User = 7 => "USER",
    }
}

kafka_enum! {
    /// Kafka's `PatternType`.
    PatternType {
        /// Not a known type.
        Unknown = 0 => "UNKNOWN",
        /// Any pattern type with the given name (filters only).
        Any = 1 => "ANY",
        /// Every binding that applies to the given name (filters only).
        Match = 2 => "MATCH",
        /// The name itself, or every name when it is `*`.
        Literal = 3 => "LITERAL",
        /// Every name that starts with the given one.
        Prefixed = 4 => "PREFIXED",
    }
}

kafka_enum! {
    /// Kafka's `AclOperation`.
    Operation {
        /// Not a known operation.
        Unknown = 0 => "UNKNOWN",
        /// Any operation (filters only).
        Any = 1 => "ANY",
        /// Every operation.
        All = 2 => "ALL",
        /// Read.
        Read = 3 => "READ",
        /// Write.
        Write = 4 => "WRITE",
        /// Create.
        Create = 5 => "CREATE",
        /// Delete.
        Delete = 6 => "DELETE",
        /// Alter.
        Alter = 7 => "ALTER",
        /// Describe.
        Describe = 8 => "DESCRIBE",
        /// Inter-broker actions.
        ClusterAction = 9 => "CLUSTER_ACTION",
        /// Describe configs.
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        /// Alter configs.
        AlterConfigs = 11 => "ALTER_CONFIGS",
        /// Idempotent produce.
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        /// Create delegation tokens.
        CreateTokens = 13 => "CREATE_TOKENS",
        /// Describe delegation tokens.
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
    }
}

kafka_enum! {
    /// Kafka's `AclPermissionType`.
    Permission {
        /// Not a known permission.
        Unknown = 0 => "UNKNOWN",
        /// Any permission (filters only).
        Any = 1 => "ANY",
        /// Deny.
        Deny = 2 => "DENY",
        /// Allow.
        Allow = 3 => "ALLOW",
    }
}

impl Operation {
    /// The operations a resource of `resource_type` supports, as Kafka lists
    /// them for KIP-430's authorized-operations fields.
    #[must_use]
    pub fn supported_by(resource_type: ResourceType) -> &'static [Operation] {
        use Operation::*;
        match resource_type {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            _ => &[],
        }
    }
}

/// A resource pattern of a binding: a concrete type and a LITERAL or
/// PREFIXED name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The name (or prefix, or `*`).
    pub name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
}

/// Who may (or may not) do what from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AccessControlEntry {
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// What it applies to.
    pub pattern: ResourcePattern,
    /// Who, where, what and whether.
    pub entry: AccessControlEntry,
}

/// Why a binding cannot be created (Kafka's INVALID_REQUEST messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBinding(pub String);

impl AclBinding {
    /// Checks a binding as Kafka's controller does before creating it.
    ///
    /// # Errors
    ///
    /// [`InvalidBinding`] with Kafka's message for an unknown or filter-only
    /// value, an empty or malformed principal, an empty name, or a CLUSTER
    /// resource not named `kafka-cluster`.
    pub fn validate(&self) -> Result<(), InvalidBinding> {
        let bad = |m: String| Err(InvalidBinding(m));
        match self.pattern.resource_type {
            ResourceType::Unknown | ResourceType::Any => {
                return bad(format!(
                    "Invalid resourceType {}",
                    self.pattern.resource_type
                ));
            }
            _ => {}
        }
        if !matches!(
            self.pattern.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return bad(format!("Invalid patternType {}", self.pattern.pattern_type));
        }
        if matches!(self.entry.operation, Operation::Unknown | Operation::Any) {
            return bad(format!("Invalid operation {}", self.entry.operation));
        }
        if matches!(self.entry.permission, Permission::Unknown | Permission::Any) {
            return bad(format!("Invalid permissionType {}", self.entry.permission));
        }
        if self.pattern.name.is_empty() {
            return bad("Resource name should not be empty".into());
        }
        if self.pattern.resource_type == ResourceType::Cluster && self.pattern.name != CLUSTER_NAME
        {
            return bad(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if crate::security::principal::KafkaPrincipal::parse(&self.entry.principal).is_none() {
            return bad(format!(
                "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
                self.entry.principal
            ));
        }
        if self.entry.host.is_empty() {
            return bad("Invalid empty host".into());
        }
        Ok(())
    }
}

/// A filter over bindings (DescribeAcls, DeleteAcls): `None` and the ANY
/// values match everything; MATCH matches every pattern that applies to the
/// given name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// A type, or ANY.
    pub resource_type: ResourceType,
    /// A name, or `None` for any.
    pub name: Option<String>,
    /// LITERAL, PREFIXED, ANY or MATCH.
    pub pattern_type: PatternType,
    /// A principal, or `None` for any.
    pub principal: Option<String>,
    /// A host, or `None` for any.
    pub host: Option<String>,
    /// An operation, or ANY.
    pub operation: Operation,
    /// A permission, or ANY.
    pub permission: Permission,
}

impl AclBindingFilter {
    /// The filter that matches every binding.
    #[must_use]
    pub fn any() -> Self {
        Self {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// Why this filter cannot be used, if it cannot (an UNKNOWN value).
    #[must_use]
    pub fn invalid_reason(&self) -> Option<String> {
        if self.resource_type == ResourceType::Unknown {
            return Some("Invalid resource type UNKNOWN".into());
        }
        if self.pattern_type == PatternType::Unknown {
            return Some("Invalid pattern type UNKNOWN".into());
        }
        if self.operation == Operation::Unknown {
            return Some("Invalid operation UNKNOWN".into());
        }
        if self.permission == Permission::Unknown {
            return Some("Invalid permission type UNKNOWN".into());
        }
        None
    }

    /// Whether `binding` passes this filter.
    #[must_use]
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(&binding.pattern) && self.matches_entry(&binding.entry)
    }

    fn matches_pattern(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        match self.pattern_type {
            PatternType::Any => self.name.as_ref().is_none_or(|n| *n == pattern.name),
            PatternType::Match => match &self.name {
                None => true,
                Some(name) => match pattern.pattern_type {
                    PatternType::Literal => pattern.name == *name || pattern.name == WILDCARD,
                    PatternType::Prefixed => name.starts_with(&pattern.name),
                    _ => false,
                },
            },
            exact => {
                exact == pattern.pattern_type
                    && self.name.as_ref().is_none_or(|n| *n == pattern.name)
            }
        }
    }

    fn matches_entry(&self, entry: &AccessControlEntry) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == entry.principal)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
            && (self.operation == Operation::Any || self.operation == entry.operation)
            && (self.permission == Permission::Any || self.permission == entry.permission)
    }
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn binding(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_unknown() {
        for code in 0..=14 {
            check!(Operation::from_code(code).code() == code);
        }
        check!(Operation::from_code(99) == Operation::Unknown);
        check!(ResourceType::from_code(2) == ResourceType::Topic);
        check!(PatternType::from_code(4).name() == "PREFIXED");
        check!(Permission::from_code(3) == Permission::Allow);
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        check!(
            binding(ResourceType::Topic, "t", PatternType::Literal)
                .validate()
                .is_ok()
        );
        check!(
            binding(ResourceType::Any, "t", PatternType::Literal)
                .validate()
                .is_err()
        );
        check!(
            binding(ResourceType::Topic, "t", PatternType::Match)
                .validate()
                .is_err()
        );
        check!(
            binding(ResourceType::Topic, "", PatternType::Literal)
                .validate()
                .is_err()
        );
        let err = binding(ResourceType::Cluster, "c", PatternType::Literal)
            .validate()
            .unwrap_err();
        check!(err.0.contains("kafka-cluster"));
        let mut b = binding(ResourceType::Topic, "t", PatternType::Literal);
        b.entry.principal = "alice".into();
        check!(b.validate().is_err());
        b.entry.principal = "User:alice".into();
        b.entry.operation = Operation::Any;
        check!(b.validate().is_err());
    }

    /// Kafka's `ResourcePatternFilter.matches` cases.
    #[test]
    fn filters_match_as_kafka_documents() {
        let literal = binding(ResourceType::Topic, "payments", PatternType::Literal);
        let wildcard = binding(ResourceType::Topic, "*", PatternType::Literal);
        let prefixed = binding(ResourceType::Topic, "pay", PatternType::Prefixed);
        let group = binding(ResourceType::Group, "payments", PatternType::Literal);
        let filter = |rt, name: Option<&str>, pt| AclBindingFilter {
            resource_type: rt,
            name: name.map(str::to_owned),
            pattern_type: pt,
            ..AclBindingFilter::any()
        };
        let cases = [
            // (filter, binding, matches)
            (
                filter(ResourceType::Any, None, PatternType::Any),
                &literal,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Literal),
                &literal,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Literal),
                &wildcard,
                false,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Prefixed),
                &literal,
                false,
            ),
            (
                filter(ResourceType::Topic, Some("pay"), PatternType::Prefixed),
                &prefixed,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Any),
                &literal,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Any),
                &prefixed,
                false,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Match),
                &literal,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Match),
                &wildcard,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Match),
                &prefixed,
                true,
            ),
            (
                filter(ResourceType::Topic, Some("pa"), PatternType::Match),
                &prefixed,
                false,
            ),
            (
                filter(ResourceType::Topic, Some("payments"), PatternType::Match),
                &group,
                false,
            ),
            (
                filter(ResourceType::Any, Some("payments"), PatternType::Literal),
                &group,
                true,
            ),
            (
                filter(ResourceType::Topic, None, PatternType::Prefixed),
                &prefixed,
                true,
            ),
            (
                filter(ResourceType::Topic, None, PatternType::Prefixed),
                &literal,
                false,
            ),
        ];
        for (i, (f, b, expected)) in cases.iter().enumerate() {
            check!(f.matches(b) == *expected, "case {i}: {f:?} vs {b:?}");
        }
        let mut by_principal = AclBindingFilter::any();
        by_principal.principal = Some("User:bob".into());
        check!(!by_principal.matches(&literal));
        by_principal.principal = Some("User:alice".into());
        by_principal.operation = Operation::Write;
        check!(!by_principal.matches(&literal));
        by_principal.operation = Operation::Read;
        by_principal.permission = Permission::Allow;
        check!(by_principal.matches(&literal));
    }
}
