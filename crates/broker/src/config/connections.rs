//! The connection and request budgets, resolved once from their settings.
//!
//! Kafka bounds what one client can make a broker hold: connections
//! (`max.connections`, `max.connections.per.ip` and its overrides), idle
//! connections (`connections.max.idle.ms`) and request bytes read but not
//! yet answered (`queued.max.request.bytes`). Kafka has no bound on a
//! request that arrives slowly; Krabka adds one
//! (`krabka.request.read.timeout.ms`, `krabka.request.read.min.bytes.per.sec`)
//! so a client that announces a large request and trickles its bytes is
//! dropped. Each connection's socket buffers follow
//! `socket.send.buffer.bytes` (Kafka's 100 KiB by default) and
//! `socket.receive.buffer.bytes` (by default the OS's, autotuned: Kafka's
//! 100 KiB slowed produce). The network layer receives these typed values
//! and never reads the settings itself.

use {crate::error::BrokerError, std::time::Duration};

/// The typed connection and request budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// `queued.max.request.bytes`; `None` is unbounded (-1).
    pub queued_max_request_bytes: Option<usize>,
    /// `max.connections`.
    pub max_connections: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`: (IP address or host name, limit),
    /// in the order given; host names are resolved when the broker starts.
    pub max_connections_per_ip_overrides: Vec<(String, usize)>,
    /// `connections.max.idle.ms`.
    pub connections_max_idle: Duration,
    /// `krabka.request.read.timeout.ms`.
    pub request_read_timeout: Duration,
    /// `krabka.request.read.min.bytes.per.sec`.
    pub request_read_min_bytes_per_sec: u64,
    /// `socket.send.buffer.bytes`; `None` keeps the OS default (-1).
    pub send_buffer_bytes: Option<usize>,
    /// `socket.receive.buffer.bytes`; `None` keeps the OS default (-1).
    pub receive_buffer_bytes: Option<usize>,
}

impl ConnectionSettings {
    /// Builds the budgets from the (already type-checked) setting values;
    /// `value` returns a setting's effective text.
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] when `queued.max.request.bytes` is 0 or
    /// smaller than `socket.request.max.bytes` (a request that large could
    /// never be read), or an override is not `host:count`.
    pub fn from_values(
        value: impl Fn(&str) -> String,
        socket_request_max_bytes: usize,
    ) -> Result<Self, BrokerError> {
        let number = |name: &str| -> Result<i64, BrokerError> {
            value(name)
                .trim()
                .parse()
                .map_err(|_| BrokerError::Config(format!("setting {name} must be a number")))
        };
        let count = |name: &str| -> Result<usize, BrokerError> {
            usize::try_from(number(name)?)
                .map_err(|_| BrokerError::Config(format!("setting {name} must not be negative")))
        };
        let millis = |name: &str| -> Result<Duration, BrokerError> {
            Ok(Duration::from_millis(
                u64::try_from(number(name)?).map_err(|_| {
                    BrokerError::Config(format!("setting {name} must not be negative"))
                })?,
            ))
        };
        let queued = number("queued.max.request.bytes")?;
        let queued_max_request_bytes = match queued {
            -1 => None,
            n => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if n == 0 || n < socket_request_max_bytes {
                    return Err(BrokerError::Config(format!(
                        "queued.max.request.bytes ({queued}) must be -1 (unbounded) or at least socket.request.max.bytes ({socket_request_max_bytes})"
                    )));
                }
                Some(n)
            }
        };
        Ok(Self {
            queued_max_request_bytes,
            max_connections: count("max.connections")?,
            max_connections_per_ip: count("max.connections.per.ip")?,
            max_connections_per_ip_overrides: parse_overrides(&value(
                "max.connections.per.ip.overrides",
            ))?,
            connections_max_idle: millis("connections.max.idle.ms")?,
            request_read_timeout: millis("krabka.request.read.timeout.ms")?,
            request_read_min_bytes_per_sec: u64::try_from(number(
                "krabka.request.read.min.bytes.per.sec",
            )?)
            .unwrap_or(1)
            .max(1),
            send_buffer_bytes: usize::try_from(number("socket.send.buffer.bytes")?).ok(),
            receive_buffer_bytes: usize::try_from(number("socket.receive.buffer.bytes")?).ok(),
        })
    }
}

/// Parses `host:count,host:count` (an IPv6 address keeps its colons: the
/// count is after the last one).
fn parse_overrides(text: &str) -> Result<Vec<(String, usize)>, BrokerError> {
    let bad = |entry: &str| {
        BrokerError::Config(format!(
            "invalid entry {entry:?} in max.connections.per.ip.overrides: expected host:count"
        ))
    };
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (host, limit) = entry.rsplit_once(':').ok_or_else(|| bad(entry))?;
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            let limit: usize = limit.trim().parse().map_err(|_| bad(entry))?;
            if host.is_empty() || i32::try_from(limit).is_err() {
                return Err(bad(entry));
            }
            Ok((host.to_owned(), limit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use {super::*, crate::config::defs, assert2::check, std::collections::HashMap};

    fn build(pairs: &[(&str, &str)], socket_max: usize) -> Result<ConnectionSettings, BrokerError> {
        let given: HashMap<&str, &str> = pairs.iter().copied().collect();
        ConnectionSettings::from_values(
            |name| {
                given.get(name).map_or_else(
                    || {
                        defs::broker_setting(name)
                            .and_then(|s| s.default)
                            .unwrap_or_default()
                            .to_owned()
                    },
                    |v| (*v).to_owned(),
                )
            },
            socket_max,
        )
    }

    #[test]
    fn defaults_are_kafkas_except_the_request_bytes_and_the_receive_buffer() {
        let s = build(&[], 104_857_600).unwrap();
        check!(s.queued_max_request_bytes == Some(256 << 20));
        check!(s.max_connections == 2_147_483_647);
        check!(s.max_connections_per_ip == 2_147_483_647);
        check!(s.max_connections_per_ip_overrides.is_empty());
        check!(s.connections_max_idle == Duration::from_secs(600));
        check!(s.request_read_timeout == Duration::from_secs(30));
        check!(s.request_read_min_bytes_per_sec == 65_536);
        check!(s.send_buffer_bytes == Some(102_400));
        check!(s.receive_buffer_bytes == None);
    }

    #[test]
    fn socket_buffers_are_sizes_or_the_os_default() {
        let s = build(
            &[
                ("socket.send.buffer.bytes", "-1"),
                ("socket.receive.buffer.bytes", "65536"),
            ],
            100,
        )
        .unwrap();
        check!(s.send_buffer_bytes == None);
        check!(s.receive_buffer_bytes == Some(65_536));
    }

    #[test]
    fn queued_bytes_must_hold_the_largest_request() {
        check!(
            build(&[("queued.max.request.bytes", "-1")], 100)
                .unwrap()
                .queued_max_request_bytes
                == None
        );
        let err = build(&[("queued.max.request.bytes", "99")], 100).unwrap_err();
        check!(err.to_string().contains("socket.request.max.bytes"));
        check!(build(&[("queued.max.request.bytes", "0")], 100).is_err());
        check!(build(&[("queued.max.request.bytes", "100")], 100).is_ok());
    }

    #[test]
    fn overrides_take_hosts_and_ip_addresses() {
        let s = build(
            &[(
                "max.connections.per.ip.overrides",
                "127.0.0.1:5, localhost:7,::1:9,[fe80::1]:2",
            )],
            100,
        )
        .unwrap();
        check!(
            s.max_connections_per_ip_overrides
                == vec![
                    ("127.0.0.1".to_owned(), 5),
                    ("localhost".to_owned(), 7),
                    ("::1".to_owned(), 9),
                    ("fe80::1".to_owned(), 2)
                ]
        );
        for bad in ["127.0.0.1", "h:x", ":3", "h:-1", "h:99999999999"] {
            let err = build(&[("max.connections.per.ip.overrides", bad)], 100).unwrap_err();
            check!(
                err.to_string().contains("max.connections.per.ip.overrides"),
                "{bad}"
            );
        }
    }
}
