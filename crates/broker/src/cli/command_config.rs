//! `--command-config FILE`: the client security settings of every
//! subcommand, in a properties file with Kafka's client property names (as
//! `kafka-topics.sh --command-config` takes them), plus librdkafka's names
//! for the same things, so one file serves the CLI, the Java tools and kcat.
//!
//! Only what the CLI implements is accepted: any other property is a usage
//! error naming it, rather than a setting silently ignored (a security
//! setting quietly dropped is how a tool ends up talking plaintext).

use {
    super::CliError,
    krabka_broker::security::sasl::jaas,
    krabka_client::{ConnectionConfig, SaslConfig, SaslMechanism, TlsConfig, TlsOptions},
    std::{collections::BTreeMap, path::Path},
};

/// What a command-config file sets up on every connection.
#[derive(Debug, Clone, Default)]
pub struct ClientSecurity {
    /// TLS, for SSL and SASL_SSL.
    pub tls: Option<TlsConfig>,
    /// SASL, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslConfig>,
    /// `client.id`, when set.
    pub client_id: Option<String>,
}

impl ClientSecurity {
    /// Sets these settings on a client's connection settings.
    pub fn apply(&self, connection: &mut ConnectionConfig) {
        connection.tls.clone_from(&self.tls);
        connection.sasl.clone_from(&self.sasl);
        if let Some(id) = &self.client_id {
            connection.client_id.clone_from(id);
        }
    }

    /// The settings of `--command-config FILE`, none without one.
    ///
    /// # Errors
    ///
    /// As [`load`].
    pub fn from_option(path: Option<&Path>) -> Result<Self, CliError> {
        path.map_or_else(|| Ok(Self::default()), load)
    }
}

/// The properties understood, with Kafka's (or librdkafka's) names.
const KNOWN: [&str; 14] = [
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.ca.location",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
    "client.id",
];

fn usage(file: &str, text: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("--command-config {file}: {text}"))
}

/// Parses properties text: `name=value` or `name: value` lines, `#`/`!` comments.
fn parse_properties(text: &str, file: &str) -> Result<BTreeMap<String, String>, CliError> {
    let mut out = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line
            .find(['=', ':'])
            .ok_or_else(|| usage(file, format!("line {}: expected name=value", number + 1)))?;
        let (name, value) = line.split_at(split);
        out.insert(name.trim().to_owned(), value[1..].trim().to_owned());
    }
    Ok(out)
}

/// Reads and checks a command-config file.
///
/// # Errors
///
/// [`CliError::Usage`] for an unreadable file, an unknown or unsupported
/// property or value, missing credentials, or certificates that do not load.
pub fn load(path: &Path) -> Result<ClientSecurity, CliError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| usage(&file, e))?;
    from_properties(&parse_properties(&text, &file)?, &file)
}

/// The security of parsed properties; `file` names them in errors.
///
/// # Errors
///
/// As [`load`].
pub fn from_properties(
    props: &BTreeMap<String, String>,
    file: &str,
) -> Result<ClientSecurity, CliError> {
    if let Some(unknown) = props.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(usage(
            file,
            format!(
                "unknown or unsupported property {unknown:?} (supported: {})",
                KNOWN.join(", ")
            ),
        ));
    }
    let get = |name: &str| props.get(name).map(String::as_str);
    let protocol = get("security.protocol")
        .unwrap_or("PLAINTEXT")
        .to_ascii_uppercase();
    let (tls, sasl) = match protocol.as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(usage(
                file,
                format!(
                    "security.protocol={other} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
                ),
            ));
        }
    };
    Ok(ClientSecurity {
        tls: if tls {
            Some(tls_config(&get, file)?)
        } else {
            None
        },
        sasl: if sasl {
            Some(sasl_config(&get, file)?)
        } else {
            None
        },
        client_id: get("client.id").map(str::to_owned),
    })
}

fn read(file: &str, property: &str, path: &str) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| usage(file, format!("{property}={path}: {e}")))
}

fn tls_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    file: &str,
) -> Result<TlsConfig, CliError> {
    for store in ["ssl.truststore.type", "ssl.keystore.type"] {
        if let Some(kind) = get(store).filter(|t| !t.eq_ignore_ascii_case("PEM")) {
            return Err(usage(
                file,
                format!("{store}={kind} is not supported: only PEM files"),
            ));
        }
    }
    let ca = match (get("ssl.truststore.location"), get("ssl.ca.location")) {
        (Some(_), Some(_)) => {
            return Err(usage(
                file,
                "set one of ssl.truststore.location and ssl.ca.location",
            ));
        }
        (Some(path), None) => Some(read(file, "ssl.truststore.location", path)?),
        (None, Some(path)) => Some(read(file, "ssl.ca.location", path)?),
        (None, None) => None,
    };
    let (certificate, key) = match (
        get("ssl.keystore.location"),
        get("ssl.certificate.location"),
        get("ssl.key.location"),
    ) {
        (None, None, None) => (None, None),
        // Kafka's PEM keystore file: the key and its certificate chain in one file.
        (Some(path), None, None) => {
            let both = read(file, "ssl.keystore.location", path)?;
            (Some(both.clone()), Some(both))
        }
        (None, Some(cert), Some(key)) => (
            Some(read(file, "ssl.certificate.location", cert)?),
            Some(read(file, "ssl.key.location", key)?),
        ),
        _ => {
            return Err(usage(
                file,
                "a client certificate is ssl.keystore.location (a PEM with key and chain) \
                 or both ssl.certificate.location and ssl.key.location",
            ));
        }
    };
    let verify_hostname = match get("ssl.endpoint.identification.algorithm") {
        None => true,
        Some(a) if a.eq_ignore_ascii_case("https") => true,
        Some("") => false,
        Some(other) => {
            return Err(usage(
                file,
                format!("ssl.endpoint.identification.algorithm={other} is not https or empty"),
            ));
        }
    };
    TlsConfig::new(&TlsOptions {
        ca_pem: ca,
        certificate_pem: certificate,
        key_pem: key,
        verify_hostname,
    })
    .map_err(|e| usage(file, e))
}

fn sasl_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    file: &str,
) -> Result<SaslConfig, CliError> {
    let name = get("sasl.mechanism").unwrap_or("GSSAPI");
    let mechanism = SaslMechanism::parse(name).ok_or_else(|| {
        usage(
            file,
            format!(
                "sasl.mechanism={name} is not supported: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
            ),
        )
    })?;
    let (username, password) = match get("sasl.jaas.config") {
        Some(text) => {
            let modules =
                jaas::parse(text).map_err(|e| usage(file, format!("sasl.jaas.config: {e}")))?;
            let expected = match mechanism {
                SaslMechanism::Plain => jaas::PLAIN_MODULE,
                SaslMechanism::Scram(_) => jaas::SCRAM_MODULE,
            };
            let module = modules
                .iter()
                .find(|m| m.class == expected)
                .ok_or_else(|| {
                    usage(
                        file,
                        format!("sasl.jaas.config has no {expected} for sasl.mechanism={name}"),
                    )
                })?;
            let option = |key: &str| {
                module.options.get(key).cloned().ok_or_else(|| {
                    usage(file, format!("sasl.jaas.config: {expected} has no {key}"))
                })
            };
            (option("username")?, option("password")?)
        }
        None => match (get("sasl.username"), get("sasl.password")) {
            (Some(user), Some(password)) => (user.to_owned(), password.to_owned()),
            _ => {
                return Err(usage(
                    file,
                    "SASL needs sasl.jaas.config, or sasl.username and sasl.password",
                ));
            }
        },
    };
    Ok(SaslConfig {
        mechanism,
        username,
        password,
    })
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    fn props(text: &str) -> Result<ClientSecurity, CliError> {
        from_properties(&parse_properties(text, "f").unwrap(), "f")
    }

    #[test]
    fn jaas_and_librdkafka_credentials() {
        let s = props(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"a=b\";\n",
        )
        .unwrap();
        let sasl = s.sasl.unwrap();
        check!(sasl.username == "alice");
        check!(sasl.password == "a=b");
        check!(sasl.mechanism.name() == "SCRAM-SHA-512");
        check!(s.tls.is_none());
        let s = props(
            "# librdkafka names\nsecurity.protocol: sasl_plaintext\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.password=pw\n",
        )
        .unwrap();
        check!(s.sasl.unwrap().username == "bob");
        check!(props("").unwrap().sasl.is_none());
    }

    #[test]
    fn unknown_and_unsupported_settings_are_usage_errors() {
        let e = props("security.protocol=SSL\nssl.truststore.password=x\n").unwrap_err();
        check!(e.to_string().contains("ssl.truststore.password"));
        check!(e.exit_code() == super::super::EXIT_USAGE);
        let e = props("security.protocol=SSL\nssl.truststore.type=JKS\n").unwrap_err();
        check!(e.to_string().contains("JKS"));
        let e = props("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n").unwrap_err();
        check!(e.to_string().contains("GSSAPI"));
        let e = props("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n").unwrap_err();
        check!(e.to_string().contains("sasl.username"));
        let e = props(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b\";\n",
        )
        .unwrap_err();
        check!(e.to_string().contains("PlainLoginModule"));
        check!(props("security.protocol=TLS\n").is_err());
    }
}
