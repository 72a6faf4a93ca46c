//! Deciding one action against the ACLs, with the semantics of Kafka's
//! `StandardAuthorizer`:
//!
//! - the bindings that apply to a resource are its LITERAL name, the
//!   LITERAL wildcard `*`, and every PREFIXED pattern the name starts with;
//! - a binding applies to the session when its principal is the session's
//!   or `User:*`, and its host is the client's address or `*`;
//! - any applicable DENY wins; otherwise any applicable ALLOW allows;
//! - an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an
//!   ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (never a DENY);
//! - when no binding at all names the resource (for anyone), the answer is
//!   `allow.everyone.if.no.acl.found`.
//!
//! Super users are decided before this index is consulted
//! ([`super::Authorizer`]). The index is rebuilt whole on every change and
//! swapped in, so a decision never waits for a writer.

use {
    super::binding::{
        AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD,
        WILDCARD_PRINCIPAL,
    },
    std::collections::HashMap,
};

/// The bindings of one resource type, by name.
#[derive(Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Vec<AccessControlEntry>>,
    prefixed: HashMap<String, Vec<AccessControlEntry>>,
}

/// Every binding, indexed for [`AclIndex::decide`].
#[derive(Debug, Default)]
pub struct AclIndex {
    by_type: HashMap<ResourceType, TypeIndex>,
    count: usize,
}

/// The outcome of matching one action against the bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A DENY binding applies.
    Denied,
    /// An ALLOW binding applies and no DENY does.
    Allowed,
    /// Bindings name the resource, but none applies to this action.
    NoMatch,
    /// No binding names the resource at all.
    NoAcls,
}

impl AclIndex {
    /// Indexes `bindings`.
    #[must_use]
    pub fn new<'a>(bindings: impl IntoIterator<Item = &'a AclBinding>) -> Self {
        let mut index = Self::default();
        for b in bindings {
            let by_type = index.by_type.entry(b.pattern.resource_type).or_default();
            let map = match b.pattern.pattern_type {
                PatternType::Prefixed => &mut by_type.prefixed,
                _ => &mut by_type.literal,
            };
            map.entry(b.pattern.name.clone())
                .or_default()
                .push(b.entry.clone());
            index.count += 1;
        }
        index
    }

    /// How many bindings there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Matches `operation` by `principal` (`Type:name`) from `host` on the
    /// resource `resource_type`/`name` against the bindings.
    #[must_use]
    pub fn decide(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision {
        let Some(index) = self.by_type.get(&resource_type) else {
            return Decision::NoAcls;
        };
        let literal = [name, WILDCARD]
            .into_iter()
            .filter_map(|n| index.literal.get(n));
        let prefixed = name
            .char_indices()
            .map(|(i, c)| i + c.len_utf8())
            .filter_map(|end| index.prefixed.get(&name[..end]));
        let mut named = false;
        let mut allowed = false;
        for entries in literal.chain(prefixed) {
            named = true;
            for entry in entries {
                match applies(entry, principal, host, operation) {
                    Some(Permission::Deny) => return Decision::Denied,
                    Some(Permission::Allow) => allowed = true,
                    _ => {}
                }
            }
        }
        if allowed {
            Decision::Allowed
        } else if named {
            Decision::NoMatch
        } else {
            Decision::NoAcls
        }
    }

    /// Whether some binding lets `principal` do `operation` on at least one
    /// resource of `resource_type` that no DENY covers (Kafka's
    /// `authorizeByResourceType`, used for idempotent produce, KIP-679).
    #[must_use]
    pub fn allows_some(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(index) = self.by_type.get(&resource_type) else {
            return false;
        };
        let denies = |entry: &AccessControlEntry| {
            entry.permission == Permission::Deny
                && (entry.operation == operation || entry.operation == Operation::All)
                && principal_matches(&entry.principal, principal)
                && (entry.host == WILDCARD || entry.host == host)
        };
        let denied_prefix = |name: &str| {
            name.char_indices()
                .map(|(i, c)| i + c.len_utf8())
                .filter_map(|end| index.prefixed.get(&name[..end]))
                .flatten()
                .any(denies)
        };
        let wildcard_denied = index
            .literal
            .get(WILDCARD)
            .is_some_and(|e| e.iter().any(denies));
        if wildcard_denied {
            return false;
        }
        let grants = |entry: &AccessControlEntry| {
            entry.permission == Permission::Allow
                && (entry.operation == operation || entry.operation == Operation::All)
                && principal_matches(&entry.principal, principal)
                && (entry.host == WILDCARD || entry.host == host)
        };
        let literal = index.literal.iter().any(|(name, entries)| {
            entries.iter().any(grants)
                && !entries.iter().any(denies)
                && (name == WILDCARD || !denied_prefix(name))
        });
        literal
            || index
                .prefixed
                .iter()
                .any(|(name, entries)| entries.iter().any(grants) && !denied_prefix(name))
    }

    /// Whether any binding exists for `resource_type`.
    #[must_use]
    pub fn has_type(&self, resource_type: ResourceType) -> bool {
        self.by_type.contains_key(&resource_type)
    }
}

fn principal_matches(acl_principal: &str, principal: &str) -> bool {
    acl_principal == principal || acl_principal == WILDCARD_PRINCIPAL
}

/// What `entry` says about the action, or `None` when it does not apply.
fn applies(
    entry: &AccessControlEntry,
    principal: &str,
    host: &str,
    operation: Operation,
) -> Option<Permission> {
    if !principal_matches(&entry.principal, principal) {
        return None;
    }
    if entry.host != WILDCARD && entry.host != host {
        return None;
    }
    if entry.operation != Operation::All {
        let implied = entry.permission == Permission::Allow
            && match operation {
                Operation::Describe => matches!(
                    entry.operation,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ),
                Operation::DescribeConfigs => entry.operation == Operation::AlterConfigs,
                _ => false,
            };
        if entry.operation != operation && !implied {
            return None;
        }
    }
    Some(entry.permission)
}

#[cfg(test)]
mod tests {
    use {
        super::*,
        crate::security::acl::binding::{AccessControlEntry, ResourcePattern},
        assert2::check,
    };

    fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        host: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: host.into(),
                operation: op,
                permission: perm,
            },
        }
    }

    use {
        Operation::*, PatternType::Literal, PatternType::Prefixed, Permission::Allow,
        Permission::Deny, ResourceType::Topic,
    };

    /// The cases of Kafka's `StandardAuthorizerTest` and its authorization
    /// documentation: one table of (bindings, action, expected decision).
    #[test]
    fn decides_like_kafkas_standard_authorizer() {
        let alice = "User:alice";
        let ip = "10.0.0.1";
        type Case = (
            &'static str,
            Vec<AclBinding>,
            (&'static str, &'static str, Operation, &'static str),
            Decision,
        );
        let cases: Vec<Case> = vec![
            (
                "no bindings",
                vec![],
                (alice, ip, Read, "t"),
                Decision::NoAcls,
            ),
            (
                "literal allow",
                vec![acl(Topic, "t", Literal, alice, "*", Read, Allow)],
                (alice, ip, Read, "t"),
                Decision::Allowed,
            ),
            (
                "a literal binding does not match a longer name",
                vec![acl(Topic, "t", Literal, alice, "*", Read, Allow)],
                (alice, ip, Read, "tt"),
                Decision::NoAcls,
            ),
            (
                "other operation on a named resource",
                vec![acl(Topic, "t", Literal, alice, "*", Read, Allow)],
                (alice, ip, Write, "t"),
                Decision::NoMatch,
            ),
            (
                "other principal on a named resource",
                vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)],
                (alice, ip, Read, "t"),
                Decision::NoMatch,
            ),
            (
                "wildcard principal",
                vec![acl(Topic, "t", Literal, "User:*", "*", Read, Allow)],
                (alice, ip, Read, "t"),
                Decision::Allowed,
            ),
            (
                "wildcard resource",
                vec![acl(Topic, "*", Literal, alice, "*", Write, Allow)],
                (alice, ip, Write, "anything"),
                Decision::Allowed,
            ),
            (
                "prefixed",
                vec![acl(Topic, "pay", Prefixed, alice, "*", Write, Allow)],
                (alice, ip, Write, "payments"),
                Decision::Allowed,
            ),
            (
                "prefixed does not match a shorter name",
                vec![acl(Topic, "payments", Prefixed, alice, "*", Write, Allow)],
                (alice, ip, Write, "pay"),
                Decision::NoAcls,
            ),
            (
                "host must match",
                vec![acl(Topic, "t", Literal, alice, "10.0.0.2", Read, Allow)],
                (alice, ip, Read, "t"),
                Decision::NoMatch,
            ),
            (
                "host matches",
                vec![acl(Topic, "t", Literal, alice, ip, Read, Allow)],
                (alice, ip, Read, "t"),
                Decision::Allowed,
            ),
            (
                "deny wins over allow",
                vec![
                    acl(Topic, "t", Literal, alice, "*", Read, Allow),
                    acl(Topic, "t", Literal, alice, "*", Read, Deny),
                ],
                (alice, ip, Read, "t"),
                Decision::Denied,
            ),
            (
                "a prefixed deny wins over a literal allow",
                vec![
                    acl(Topic, "payments", Literal, alice, "*", Write, Allow),
                    acl(Topic, "pay", Prefixed, alice, "*", Write, Deny),
                ],
                (alice, ip, Write, "payments"),
                Decision::Denied,
            ),
            (
                "a wildcard-principal deny wins",
                vec![
                    acl(Topic, "t", Literal, alice, "*", Read, Allow),
                    acl(Topic, "*", Literal, "User:*", "*", Read, Deny),
                ],
                (alice, ip, Read, "t"),
                Decision::Denied,
            ),
            (
                "ALL allows every operation",
                vec![acl(Topic, "t", Literal, alice, "*", All, Allow)],
                (alice, ip, AlterConfigs, "t"),
                Decision::Allowed,
            ),
            (
                "ALL denies every operation",
                vec![
                    acl(Topic, "t", Literal, alice, "*", Read, Allow),
                    acl(Topic, "t", Literal, alice, "*", All, Deny),
                ],
                (alice, ip, Read, "t"),
                Decision::Denied,
            ),
            (
                "READ implies DESCRIBE",
                vec![acl(Topic, "t", Literal, alice, "*", Read, Allow)],
                (alice, ip, Describe, "t"),
                Decision::Allowed,
            ),
            (
                "WRITE implies DESCRIBE",
                vec![acl(Topic, "t", Literal, alice, "*", Write, Allow)],
                (alice, ip, Describe, "t"),
                Decision::Allowed,
            ),
            (
                "DELETE implies DESCRIBE",
                vec![acl(Topic, "t", Literal, alice, "*", Delete, Allow)],
                (alice, ip, Describe, "t"),
                Decision::Allowed,
            ),
            (
                "ALTER implies DESCRIBE",
                vec![acl(Topic, "t", Literal, alice, "*", Alter, Allow)],
                (alice, ip, Describe, "t"),
                Decision::Allowed,
            ),
            (
                "CREATE does not imply DESCRIBE",
                vec![acl(Topic, "t", Literal, alice, "*", Create, Allow)],
                (alice, ip, Describe, "t"),
                Decision::NoMatch,
            ),
            (
                "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
                vec![acl(Topic, "t", Literal, alice, "*", AlterConfigs, Allow)],
                (alice, ip, DescribeConfigs, "t"),
                Decision::Allowed,
            ),
            (
                "a DENY of READ does not deny DESCRIBE",
                vec![
                    acl(Topic, "t", Literal, alice, "*", Describe, Allow),
                    acl(Topic, "t", Literal, alice, "*", Read, Deny),
                ],
                (alice, ip, Describe, "t"),
                Decision::Allowed,
            ),
            (
                "READ does not imply WRITE",
                vec![acl(Topic, "t", Literal, alice, "*", Read, Allow)],
                (alice, ip, Write, "t"),
                Decision::NoMatch,
            ),
            (
                "bindings of another resource type do not count",
                vec![acl(
                    ResourceType::Group,
                    "t",
                    Literal,
                    alice,
                    "*",
                    Read,
                    Allow,
                )],
                (alice, ip, Read, "t"),
                Decision::NoAcls,
            ),
        ];
        for (what, bindings, (principal, host, op, name), expected) in cases {
            let index = AclIndex::new(&bindings);
            check!(
                index.decide(principal, host, op, Topic, name) == expected,
                "{what}"
            );
        }
    }

    #[test]
    fn allows_some_follows_kip_679() {
        let alice = "User:alice";
        let index = AclIndex::new(&[acl(Topic, "t", Literal, alice, "*", Write, Allow)]);
        check!(index.allows_some(alice, "h", Write, Topic));
        check!(!index.allows_some("User:bob", "h", Write, Topic));
        check!(!index.allows_some(alice, "h", Read, Topic));
        let denied = AclIndex::new(&[
            acl(Topic, "t", Literal, alice, "*", Write, Allow),
            acl(Topic, "*", Literal, alice, "*", Write, Deny),
        ]);
        check!(!denied.allows_some(alice, "h", Write, Topic));
        let prefix_denied = AclIndex::new(&[
            acl(Topic, "payments", Literal, alice, "*", Write, Allow),
            acl(Topic, "pay", Prefixed, alice, "*", Write, Deny),
        ]);
        check!(!prefix_denied.allows_some(alice, "h", Write, Topic));
    }
}
