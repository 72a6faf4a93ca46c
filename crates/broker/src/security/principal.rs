//! Who a connection is: Kafka's `KafkaPrincipal` (`User:alice`), and how an
//! mTLS client's certificate subject becomes one through
//! `ssl.principal.mapping.rules`.
//!
//! The subject is written as Java's `X500Principal.getName()` writes it
//! (RFC 2253: most specific attribute first, `,` between, RFC 2253
//! escaping), because that is the text Kafka's mapping rules are written
//! against. A rule is `RULE:pattern/replacement/[LU]` or `DEFAULT`; the
//! first rule whose pattern matches the whole subject gives the name, as in
//! Kafka's `SslPrincipalMapper`.

use std::fmt;

/// A principal: a type (`User`) and a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    /// `User` for every principal Krabka builds.
    pub principal_type: String,
    /// The name.
    pub name: String,
}

impl KafkaPrincipal {
    /// The type of user principals.
    pub const USER_TYPE: &'static str = "User";

    /// `User:<name>`.
    #[must_use]
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            principal_type: Self::USER_TYPE.to_owned(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`, the principal of an unauthenticated connection.
    #[must_use]
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// Parses `Type:name` (the name may contain `:`); `None` without a type.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (principal_type, name) = text.split_once(':')?;
        if principal_type.is_empty() {
            return None;
        }
        Some(Self {
            principal_type: principal_type.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// Why `ssl.principal.mapping.rules` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ssl.principal.mapping.rules: {0}")]
pub struct InvalidRules(pub String);

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Pattern {
        whole: regex::Regex,
        search: regex::Regex,
        replacement: String,
        case: Option<bool>,
    },
}

/// Kafka's `SslPrincipalMapper`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        Self {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses `ssl.principal.mapping.rules`: rules separated by commas, each
    /// `DEFAULT` or `RULE:pattern/replacement/` with an optional `L` or `U`
    /// (lower- or upper-case the result); `\` escapes a `/` or `\` in the
    /// pattern or replacement.
    ///
    /// # Errors
    ///
    /// [`InvalidRules`] for text that is not a list of rules, or a pattern
    /// that is not a regular expression.
    pub fn parse(text: &str) -> Result<Self, InvalidRules> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after).ok_or_else(|| {
                    InvalidRules(format!("`{rest}`: missing `/` after the pattern"))
                })?;
                let (replacement, after) = until_slash(after).ok_or_else(|| {
                    InvalidRules(format!("`{rest}`: missing `/` after the replacement"))
                })?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Some(false), &after[1..]),
                    Some('U') => (Some(true), &after[1..]),
                    _ => (None, after),
                };
                let compile = |p: &str| {
                    regex::Regex::new(p).map_err(|e| InvalidRules(format!("`{pattern}`: {e}")))
                };
                let groups = compile(pattern)?.captures_len() - 1;
                rules.push(Rule::Pattern {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    search: compile(pattern)?,
                    replacement: java_replacement(replacement, groups),
                    case,
                });
                rest = after;
            } else {
                return Err(InvalidRules(format!("`{rest}` is not a rule")));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(InvalidRules(format!("unexpected `{rest}` after a rule"))),
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(Self { rules })
    }

    /// The principal name for a certificate subject, or `None` when no rule
    /// applies (Kafka then refuses the connection).
    #[must_use]
    pub fn name(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(subject.to_owned()),
            Rule::Pattern {
                whole,
                search,
                replacement,
                case,
            } => {
                if !whole.is_match(subject) {
                    return None;
                }
                let name = search
                    .replace_all(subject, replacement.as_str())
                    .into_owned();
                Some(match case {
                    Some(false) => name.to_lowercase(),
                    Some(true) => name.to_uppercase(),
                    None => name,
                })
            }
        })
    }
}

/// The text up to the first `/` not escaped by `\` (escapes kept), and what
/// follows that `/`.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '/' if !escaped => return Some((&text[..i], &text[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

/// A Java `replaceAll` replacement (`$1`, `\$` for a literal `$`) in the
/// `regex` crate's syntax (`${1}`, `$$`). As Kafka does, a group number
/// larger than the pattern has is read as fewer digits, and `$n` beyond any
/// group is literal text.
fn java_replacement(java: &str, groups: usize) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    let candidate = format!("{digits}{d}");
                    let fits = candidate.parse::<usize>().is_ok_and(|n| n <= groups);
                    if !digits.is_empty() && !fits {
                        break;
                    }
                    digits = candidate;
                    chars.next();
                }
                match digits.parse::<usize>() {
                    Ok(n) if n <= groups => out.push_str(&format!("${{{n}}}")),
                    Ok(_) => {
                        out.push_str("$$");
                        out.push_str(&digits);
                    }
                    Err(_) => out.push_str("$$"),
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The subject of a DER certificate as Java's `X500Principal.getName()`
/// writes it (RFC 2253).
///
/// # Errors
///
/// The parser's message when the certificate does not parse.
pub fn certificate_subject(der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    Ok(rfc2253(cert.subject()))
}

fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    use x509_parser::der_parser::oid;
    let mut rdns = Vec::new();
    for rdn in name.iter() {
        let attributes: Vec<String> = rdn
            .iter()
            .map(|attr| {
                let oid = attr.attr_type();
                let keyword = [
                    (oid!(2.5.4.3), "CN"),
                    (oid!(2.5.4.6), "C"),
                    (oid!(2.5.4.7), "L"),
                    (oid!(2.5.4.8), "ST"),
                    (oid!(2.5.4.10), "O"),
                    (oid!(2.5.4.11), "OU"),
                    (oid!(2.5.4.9), "STREET"),
                    (oid!(0.9.2342.19200300.100.1.25), "DC"),
                    (oid!(0.9.2342.19200300.100.1.1), "UID"),
                ]
                .into_iter()
                .find(|(known, _)| known == oid)
                .map(|(_, k)| k);
                match (keyword, attr.as_str()) {
                    (Some(k), Ok(value)) => format!("{k}={}", escape(value)),
                    _ => {
                        // Unknown attribute or non-string value: the OID and
                        // the value's DER encoding in hex, as Java writes it.
                        let value = attr.attr_value();
                        let mut der = Vec::new();
                        der.push(value.header.tag().0 as u8);
                        let content = value.data;
                        push_der_length(&mut der, content.len());
                        der.extend_from_slice(content);
                        format!("{oid}=#{}", hex::encode(der))
                    }
                }
            })
            .collect();
        rdns.push(attributes.join("+"));
    }
    rdns.reverse();
    rdns.join(",")
}

fn push_der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let first = bytes
            .iter()
            .position(|b| *b != 0)
            .unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - first) as u8);
        out.extend_from_slice(&bytes[first..]);
    }
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    #[test]
    fn principals_parse_and_print() {
        check!(KafkaPrincipal::parse("User:alice") == Some(KafkaPrincipal::user("alice")));
        check!(KafkaPrincipal::parse("User:a:b").unwrap().name == "a:b");
        check!(KafkaPrincipal::parse("alice").is_none());
        check!(KafkaPrincipal::parse(":alice").is_none());
        check!(KafkaPrincipal::anonymous().to_string() == "User:ANONYMOUS");
    }

    /// The examples of Kafka's documentation ("Customizing SSL User Name")
    /// and of its `SslPrincipalMapperTest`.
    #[test]
    fn mapping_rules_follow_kafkas_examples() {
        let rules = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\
             DEFAULT",
        )
        .unwrap();
        let cases = [
            (
                "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "serviceuser",
            ),
            (
                "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "adminuser@admin",
            ),
            ("CN=AdminUser,OU=Admin,O=Unknown", "adminuser"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ];
        for (subject, name) in cases {
            check!(rules.name(subject).as_deref() == Some(name), "{subject}");
        }
        let upper = PrincipalMapper::parse("RULE:^CN=(.*?),OU=(.*?)$/$1/U").unwrap();
        check!(upper.name("CN=alice,OU=x").as_deref() == Some("ALICE"));
        check!(upper.name("O=nobody").is_none());
        let default = PrincipalMapper::parse("DEFAULT").unwrap();
        check!(default.name("CN=a,O=b").as_deref() == Some("CN=a,O=b"));
        // An escaped slash belongs to the pattern; `$2` beyond the groups is literal.
        let escaped = PrincipalMapper::parse(r"RULE:^CN=(.*?)\/x$/$1$2/").unwrap();
        check!(escaped.name("CN=a/x").as_deref() == Some("a$2"));
        for bad in [
            "RULE:^CN=(.*?)$",
            "NOPE",
            "RULE:^CN=(.*?)$/$1/ junk",
            "RULE:(/$1/",
        ] {
            check!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn subjects_are_written_as_java_writes_them() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "Ops");
        dn.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        check!(certificate_subject(cert.der()).unwrap() == r"CN=alice,OU=Ops,O=Acme\, Inc.,C=US");
        check!(escape(" #a ") == r"\ #a\ ");
    }
}
