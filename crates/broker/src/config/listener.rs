//! `listeners`, `advertised.listeners`, `listener.security.protocol.map`
//! and `inter.broker.listener.name`, as Kafka writes and checks them.
//!
//! A listener is `NAME://host:port`; its name gives its security protocol
//! through the protocol map (by default each protocol name maps to itself).
//! Every advertised listener must be one of the listeners; a listener that
//! is not advertised is advertised as it is bound. Names are compared
//! without regard to case, as Kafka does.

use std::collections::BTreeMap;

/// One listener endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Host name or address (empty means all interfaces, as in Kafka).
    pub host: String,
    /// TCP port (0 lets the OS pick one, for tests).
    pub port: u16,
}

/// Kafka's `SecurityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// No TLS, no authentication.
    Plaintext,
    /// TLS; mTLS when client certificates are asked for.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Parses Kafka's protocol name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections are TLS.
    #[must_use]
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    #[must_use]
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// One named listener, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// The listener name, upper case (`SASL_SSL`, `INTERNAL`).
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// Where it binds.
    pub bind: Listener,
    /// What clients that connect to it are told.
    pub advertised: Listener,
}

impl ListenerSpec {
    /// The prefix of its per-listener settings: `listener.name.<name>.`
    /// (lower case).
    #[must_use]
    pub fn config_prefix(&self) -> String {
        format!("listener.name.{}.", self.name.to_ascii_lowercase())
    }
}

impl Listener {
    /// Parses one `NAME://host:port` (also `[v6]:port`) into its name and
    /// endpoint.
    ///
    /// # Errors
    ///
    /// A reason text when the value is not `NAME://host:port`.
    pub fn parse_named(text: &str) -> Result<(String, Self), String> {
        let text = text.trim();
        let (name, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?}: expected NAME://host:port"))?;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!("{text:?}: invalid listener name {name:?}"));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{text:?}: missing :port"))?;
        let port = port
            .parse()
            .map_err(|_| format!("{text:?}: port {port:?} is not a number 0-65535"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok((name.to_ascii_uppercase(), Self { host, port }))
    }

    /// Parses a single `PLAINTEXT://host:port` listener.
    ///
    /// # Errors
    ///
    /// A reason text when the value is not one PLAINTEXT listener.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, listener) = Self::parse_named(text)?;
        if name != "PLAINTEXT" || text.contains(',') {
            return Err(format!("{text:?}: expected one PLAINTEXT://host:port"));
        }
        Ok(listener)
    }

    /// The address to bind (`0.0.0.0` when the host is empty).
    #[must_use]
    pub fn bind_address(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        if host.contains(':') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Parses a comma-separated list of named listeners.
fn parse_list(text: &str, setting: &str) -> Result<Vec<(String, Listener)>, String> {
    let mut out: Vec<(String, Listener)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, listener) = Listener::parse_named(item)?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!(
                "{setting}: listener name {name} is used more than once"
            ));
        }
        out.push((name, listener));
    }
    if out.is_empty() {
        return Err(format!("{setting} is empty"));
    }
    Ok(out)
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
///
/// # Errors
///
/// A reason naming the entry that is not `NAME:PROTOCOL`.
pub fn parse_protocol_map(text: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut map = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, protocol) = item.split_once(':').ok_or_else(|| {
            format!("listener.security.protocol.map: {item:?} is not NAME:PROTOCOL")
        })?;
        let protocol = SecurityProtocol::parse(protocol.trim()).ok_or_else(|| {
            format!("listener.security.protocol.map: {protocol:?} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        })?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The listeners, resolved, and the index of the inter-broker one.
///
/// # Errors
///
/// A reason naming the setting at fault: a malformed list, a listener
/// without a protocol, an advertised listener that is not bound, an
/// advertised host clients cannot reach, an unknown inter-broker listener.
pub fn resolve(
    listeners: &str,
    advertised: Option<&str>,
    protocol_map: &str,
    inter_broker_name: Option<&str>,
    inter_broker_protocol: &str,
) -> Result<(Vec<ListenerSpec>, usize), String> {
    let map = parse_protocol_map(protocol_map)?;
    let bound = parse_list(listeners, "listeners")?;
    let advertised = match advertised {
        Some(text) => parse_list(text, "advertised.listeners")?,
        None => Vec::new(),
    };
    for (name, _) in &advertised {
        if !bound.iter().any(|(n, _)| n == name) {
            return Err(format!(
                "advertised.listeners: listener {name} is not one of listeners"
            ));
        }
    }
    let mut specs = Vec::new();
    for (name, bind) in bound {
        let protocol = *map.get(&name).ok_or_else(|| {
            format!(
                "listeners: no security protocol for listener {name} (add it to listener.security.protocol.map)"
            )
        })?;
        let advertised = advertised
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(|| bind.clone(), |(_, a)| a.clone());
        if advertised.host.is_empty() || advertised.host == "0.0.0.0" {
            return Err(format!(
                "advertised.listeners must name a host clients can reach for listener {name} (set it when listeners binds 0.0.0.0)"
            ));
        }
        specs.push(ListenerSpec {
            name,
            protocol,
            bind,
            advertised,
        });
    }
    let inter = match inter_broker_name {
        Some(name) => {
            let name = name.trim().to_ascii_uppercase();
            specs.iter().position(|s| s.name == name).ok_or_else(|| {
                format!("inter.broker.listener.name: {name} is not one of listeners")
            })?
        }
        // Kafka requires a listener of security.inter.broker.protocol; a
        // single-node Krabka falls back to the first listener.
        None => {
            let protocol = SecurityProtocol::parse(inter_broker_protocol);
            specs
                .iter()
                .position(|s| Some(s.protocol) == protocol)
                .unwrap_or(0)
        }
    };
    Ok((specs, inter))
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    const MAP: &str = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

    #[test]
    fn parses_kafka_listener_text() {
        check!(
            Listener::parse("PLAINTEXT://localhost:9093")
                == Ok(Listener {
                    host: "localhost".into(),
                    port: 9093
                })
        );
        check!(Listener::parse("PLAINTEXT://:9092").unwrap().bind_address() == "0.0.0.0:9092");
        check!(Listener::parse("PLAINTEXT://[::1]:9092").unwrap().host == "::1");
        check!(Listener::parse("h:1").is_err());
        check!(Listener::parse("PLAINTEXT://h:99999").is_err());
        check!(Listener::parse_named("sasl_ssl://h:1").unwrap().0 == "SASL_SSL");
    }

    #[test]
    fn resolves_several_named_listeners() {
        let (specs, inter) = resolve(
            "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093,internal://127.0.0.1:9094",
            Some("SASL_SSL://broker.example:19093"),
            &format!("{MAP},INTERNAL:SASL_PLAINTEXT"),
            Some("internal"),
            "PLAINTEXT",
        )
        .unwrap();
        check!(specs.len() == 3);
        check!(specs[1].protocol == SecurityProtocol::SaslSsl);
        check!(specs[1].advertised.host == "broker.example");
        check!(specs[1].advertised.port == 19093);
        check!(specs[0].advertised == specs[0].bind);
        check!(specs[2].protocol == SecurityProtocol::SaslPlaintext);
        check!(specs[2].config_prefix() == "listener.name.internal.");
        check!(inter == 2);
        let (_, inter) =
            resolve("SSL://h:1,PLAINTEXT://h:2", None, MAP, None, "PLAINTEXT").unwrap();
        check!(inter == 1);
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        for (listeners, advertised, map, inter) in [
            ("FOO://h:1", None, MAP, None),
            ("PLAINTEXT://h:1,PLAINTEXT://h:2", None, MAP, None),
            ("PLAINTEXT://h:1", Some("SSL://h:2"), MAP, None),
            ("PLAINTEXT://:1", None, MAP, None),
            ("PLAINTEXT://h:1", None, "PLAINTEXT:NOPE", None),
            ("PLAINTEXT://h:1", None, MAP, Some("SSL")),
            ("", None, MAP, None),
        ] {
            check!(
                resolve(listeners, advertised, map, inter, "PLAINTEXT").is_err(),
                "{listeners}"
            );
        }
    }
}
