//! `listeners` / `advertised.listeners` values: `PLAINTEXT://host:port`, as
//! Kafka writes them. Only the PLAINTEXT security protocol is implemented, so
//! any other protocol (or more than one listener) is refused.

/// One listener endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Host name or address (empty means all interfaces, as in Kafka).
    pub host: String,
    /// TCP port (0 lets the OS pick one, for tests).
    pub port: u16,
}

impl Listener {
    /// Parses `PLAINTEXT://host:port` (also `[v6]:port`).
    ///
    /// # Errors
    ///
    /// A reason text when the value is not a single PLAINTEXT listener.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.contains(',') {
            return Err(format!("{text:?}: krabka supports one listener"));
        }
        let (protocol, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?}: expected PLAINTEXT://host:port"))?;
        if !protocol.eq_ignore_ascii_case("PLAINTEXT") {
            return Err(format!(
                "{text:?}: security protocol {protocol} is not supported (only PLAINTEXT)"
            ));
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
        Ok(Self { host, port })
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

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

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
        check!(Listener::parse("SASL_SSL://h:1").is_err());
        check!(Listener::parse("h:1").is_err());
        check!(Listener::parse("PLAINTEXT://h:99999").is_err());
        check!(Listener::parse("PLAINTEXT://a:1,PLAINTEXT://b:2").is_err());
    }
}
