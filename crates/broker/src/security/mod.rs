//! Kafka's security model: listeners with security protocols, TLS,
//! SASL authentication and ACL authorization.
//!
//! The pieces, each with its own tests:
//!
//! - [`tls`]: rustls server configurations from Kafka's `ssl.*` settings,
//!   reloadable per listener; [`certs`] generates a CA and certificates;
//! - [`principal`]: `KafkaPrincipal` and `ssl.principal.mapping.rules`;
//! - [`sasl`]: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER exchanges;
//!   [`credentials`] keeps SCRAM users durably;
//! - [`session`]: a connection's authentication (SaslHandshake,
//!   SaslAuthenticate, KIP-368 re-authentication) and the [`Session`] that
//!   carries its principal to the handlers;
//! - [`acl`]: the authorizer (`StandardAuthorizer` semantics) and its store;
//! - [`authorize`]: what each API checks, in one place, called by the
//!   dispatcher;
//! - [`admin`]: the ACL and SCRAM-credential APIs.
//!
//! [`Security`] is built once at startup from the broker configuration
//! (static settings, then the dynamic broker configs the registry holds)
//! and lives on the broker.
//!
//! [`Session`]: session::Session

pub mod acl;
pub mod admin;
pub mod authorize;
pub mod certs;
pub mod credentials;
pub mod principal;
pub mod sasl;
pub mod session;
pub mod tls;

use {
    crate::{
        config::{BrokerConfig, ListenerSpec, defs},
        error::BrokerError,
        topics::TopicRegistry,
    },
    sasl::{Mechanism, jaas, oauthbearer},
    std::{
        collections::{BTreeMap, HashMap},
        sync::{
            Arc,
            atomic::{AtomicU16, Ordering},
        },
        time::Duration,
    },
};

/// Kafka's OAUTHBEARER validators, by class name.
const SECURED_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
const UNSECURED_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerUnsecuredValidatorCallbackHandler";

/// Kafka's `sasl.server.max.receive.size` default (512 KiB).
const DEFAULT_SASL_MAX_RECEIVE_SIZE: usize = 512 * 1024;

/// The TLS and SASL a broker uses on its own connections to other brokers.
#[derive(Debug, Clone)]
pub struct InterBrokerClient {
    /// TLS, for an SSL or SASL_SSL inter-broker listener.
    pub tls: Option<krabka_client::TlsConfig>,
    /// SASL, for a SASL_PLAINTEXT or SASL_SSL one.
    pub sasl: Option<krabka_client::SaslConfig>,
}

/// The SASL side of one listener.
#[derive(Debug)]
pub struct SaslEndpoint {
    /// `sasl.enabled.mechanisms`, in order.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users (`user_<name>` of the JAAS config).
    pub plain_users: HashMap<String, String>,
    /// OAUTHBEARER's validator, when OAUTHBEARER is enabled.
    pub oauth: Option<oauthbearer::Validator>,
    /// `connections.max.reauth.ms` per mechanism (0: sessions do not expire).
    pub max_reauth_ms: HashMap<Mechanism, i64>,
    /// `sasl.server.max.receive.size`: the largest frame a client may send
    /// before it has authenticated.
    pub max_receive_size: usize,
}

/// One listener: its settings, bound port, TLS and SASL.
#[derive(Debug)]
pub struct Endpoint {
    /// Name, protocol and addresses.
    pub spec: ListenerSpec,
    bound_port: AtomicU16,
    /// TLS, for SSL and SASL_SSL.
    pub tls: Option<tls::TlsEndpoint>,
    /// SASL, for SASL_PLAINTEXT and SASL_SSL.
    pub sasl: Option<SaslEndpoint>,
}

impl Endpoint {
    /// Records the port it bound (differs from the configured one when that is 0).
    pub fn set_bound_port(&self, port: u16) {
        self.bound_port.store(port, Ordering::Relaxed);
    }

    /// `(host, port)` that clients of this listener are told.
    #[must_use]
    pub fn advertised(&self) -> (String, i32) {
        let advertised = &self.spec.advertised;
        let port = if advertised.port == 0 {
            self.bound_port.load(Ordering::Relaxed)
        } else {
            advertised.port
        };
        (advertised.host.clone(), i32::from(port))
    }
}

/// The broker's security: listeners, authorizer, SCRAM users.
#[derive(Debug)]
pub struct Security {
    endpoints: Vec<Arc<Endpoint>>,
    inter_broker: usize,
    /// The authorizer, when `authorizer.class.name` is set.
    pub authorizer: Option<acl::Authorizer>,
    /// The SCRAM users.
    pub scram: credentials::ScramUsers,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_auth_delay: Duration,
    /// How this broker connects to other brokers (its inter-broker
    /// listener's TLS and SASL), or why it cannot.
    inter_broker_client: Result<InterBrokerClient, String>,
}

/// A setting's value for one listener: the listener-prefixed name first,
/// then the plain one; each from the dynamic per-broker configs, the
/// dynamic cluster defaults, the static settings, then the default.
struct Lookup<'a> {
    config: &'a BrokerConfig,
    dynamic: [&'a BTreeMap<String, String>; 2],
}

impl Lookup<'_> {
    fn raw(&self, name: &str) -> Option<String> {
        self.dynamic
            .iter()
            .find_map(|d| d.get(name))
            .or_else(|| self.config.explicit.get(name))
            .cloned()
    }

    fn listener(&self, spec: &ListenerSpec, name: &str) -> Option<String> {
        self.raw(&format!("{}{name}", spec.config_prefix()))
            .or_else(|| self.raw(name))
            .or_else(|| {
                defs::broker_setting(name)
                    .and_then(|s| s.default)
                    .map(str::to_owned)
            })
    }

    fn mechanism(&self, spec: &ListenerSpec, mechanism: Mechanism, name: &str) -> Option<String> {
        let lower = mechanism.name().to_ascii_lowercase();
        self.raw(&format!("{}{lower}.{name}", spec.config_prefix()))
            .or_else(|| self.listener(spec, name))
    }

    fn tls(&self, spec: &ListenerSpec) -> tls::TlsSettings {
        let get = |n: &str| self.listener(spec, n).filter(|v| !v.trim().is_empty());
        tls::TlsSettings {
            keystore_type: get("ssl.keystore.type"),
            keystore_location: get("ssl.keystore.location"),
            keystore_password: get("ssl.keystore.password"),
            key_password: get("ssl.key.password"),
            keystore_certificate_chain: get("ssl.keystore.certificate.chain"),
            keystore_key: get("ssl.keystore.key"),
            truststore_type: get("ssl.truststore.type"),
            truststore_location: get("ssl.truststore.location"),
            truststore_password: get("ssl.truststore.password"),
            truststore_certificates: get("ssl.truststore.certificates"),
            client_auth: get("ssl.client.auth"),
            enabled_protocols: get("ssl.enabled.protocols"),
        }
    }
}

fn config_error(listener: &ListenerSpec, reason: impl std::fmt::Display) -> BrokerError {
    BrokerError::Config(format!("listeners: {}: {reason}", listener.name))
}

impl Security {
    /// Builds the listeners' TLS and SASL, the authorizer and the SCRAM
    /// users (blocking: reads key stores and the ACL and credential files).
    ///
    /// # Errors
    ///
    /// [`BrokerError::Config`] naming the listener and setting at fault, or
    /// the file that cannot be read.
    pub fn from_config(
        config: &BrokerConfig,
        registry: &TopicRegistry,
    ) -> Result<Self, BrokerError> {
        let per_broker = registry.broker_configs(&config.node_id.to_string());
        let defaults = registry.broker_configs("");
        let lookup = Lookup {
            config,
            dynamic: [&per_broker, &defaults],
        };
        let mut endpoints = Vec::new();
        for spec in &config.listeners {
            endpoints.push(Arc::new(Self::endpoint(&lookup, spec)?));
        }
        let inter_broker = config
            .listeners
            .iter()
            .position(|l| l.bind == config.listener && l.advertised == config.advertised_listener)
            .unwrap_or(0);
        let class = lookup.raw("authorizer.class.name").unwrap_or_default();
        let authorizer = if class.trim().is_empty() {
            None
        } else {
            if !acl::AUTHORIZER_CLASS_NAMES.contains(&class.trim()) {
                return Err(BrokerError::Config(format!(
                    "authorizer.class.name {class} is not supported (use {})",
                    acl::AUTHORIZER_CLASS_NAMES[0]
                )));
            }
            let store = acl::store::FileAclStore::open(&config.log_dir)
                .map_err(|e| BrokerError::Config(e.to_string()))?;
            Some(
                acl::Authorizer::new(
                    Arc::new(store),
                    &lookup.raw("super.users").unwrap_or_default(),
                    lookup
                        .raw("allow.everyone.if.no.acl.found")
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
                )
                .map_err(|e| BrokerError::Config(e.to_string()))?,
            )
        };
        let store = credentials::FileScramStore::open(&config.log_dir)
            .map_err(|e| BrokerError::Config(e.to_string()))?;
        let bootstrap = lookup
            .raw("krabka.sasl.scram.bootstrap.file")
            .filter(|p| !p.trim().is_empty())
            .map(std::path::PathBuf::from);
        let scram = credentials::ScramUsers::open(Arc::new(store), bootstrap.as_deref())
            .map_err(BrokerError::Config)?;
        let delay_ms: u64 = lookup
            .raw("connection.failed.authentication.delay.ms")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(100);
        let inter_broker_client = config
            .listeners
            .get(inter_broker)
            .ok_or_else(|| "no inter-broker listener".to_owned())
            .and_then(|spec| Self::own_client(&lookup, spec));
        Ok(Self {
            endpoints,
            inter_broker,
            authorizer,
            scram,
            failed_auth_delay: Duration::from_millis(delay_ms),
            inter_broker_client,
        })
    }

    /// Kafka's client side of the inter-broker listener: TLS from the
    /// listener's keystore and truststore, SASL with
    /// `sasl.mechanism.inter.broker.protocol` (the listener's one mechanism
    /// when unset) and the `username` / `password` of that mechanism's JAAS
    /// config, as Kafka's broker logs in to its peers.
    fn own_client(lookup: &Lookup<'_>, spec: &ListenerSpec) -> Result<InterBrokerClient, String> {
        let tls = if spec.protocol.tls() {
            let verify = lookup
                .listener(spec, "ssl.endpoint.identification.algorithm")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
            Some(tls::client_config(&lookup.tls(spec), verify)?)
        } else {
            None
        };
        let sasl = if spec.protocol.sasl() {
            let enabled = lookup
                .listener(spec, "sasl.enabled.mechanisms")
                .unwrap_or_default();
            let enabled: Vec<&str> = enabled
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect();
            let name = match lookup.raw("sasl.mechanism.inter.broker.protocol") {
                Some(name) => name.trim().to_owned(),
                None if enabled.len() == 1 => enabled[0].to_owned(),
                None => {
                    return Err(
                        "set sasl.mechanism.inter.broker.protocol (the listener enables several mechanisms)"
                            .to_owned(),
                    );
                }
            };
            let client = krabka_client::SaslMechanism::parse(&name).ok_or_else(|| {
                format!("sasl.mechanism.inter.broker.protocol {name}: only PLAIN and SCRAM are supported")
            })?;
            let server = Mechanism::parse(&name)
                .ok_or_else(|| format!("SASL mechanism {name} is not supported"))?;
            let text = lookup
                .mechanism(spec, server, "sasl.jaas.config")
                .ok_or_else(|| {
                    format!("{name} has no sasl.jaas.config on the inter-broker listener")
                })?;
            let modules = jaas::parse(&text).map_err(|e| format!("sasl.jaas.config: {e}"))?;
            let option = |key: &str| modules.iter().find_map(|m| m.options.get(key).cloned());
            match (option("username"), option("password")) {
                (Some(username), Some(password)) => Some(krabka_client::SaslConfig {
                    mechanism: client,
                    username,
                    password,
                }),
                _ => {
                    return Err(format!(
                        "the {name} JAAS config of the inter-broker listener needs username and password for the broker's own connections"
                    ));
                }
            }
        } else {
            None
        };
        Ok(InterBrokerClient { tls, sasl })
    }

    /// How to connect to another broker's inter-broker listener.
    ///
    /// # Errors
    ///
    /// Why this broker cannot (a setting missing or unusable).
    pub fn inter_broker_client(&self) -> Result<InterBrokerClient, String> {
        self.inter_broker_client.clone()
    }

    fn endpoint(lookup: &Lookup<'_>, spec: &ListenerSpec) -> Result<Endpoint, BrokerError> {
        let tls = if spec.protocol.tls() {
            let config =
                tls::server_config(&lookup.tls(spec)).map_err(|e| config_error(spec, e))?;
            let rules = lookup
                .listener(spec, "ssl.principal.mapping.rules")
                .unwrap_or_else(|| "DEFAULT".into());
            let mapper =
                principal::PrincipalMapper::parse(&rules).map_err(|e| config_error(spec, e))?;
            Some(tls::TlsEndpoint::new(config, mapper))
        } else {
            None
        };
        let sasl = if spec.protocol.sasl() {
            Some(Self::sasl(lookup, spec)?)
        } else {
            None
        };
        Ok(Endpoint {
            bound_port: AtomicU16::new(spec.advertised.port),
            spec: spec.clone(),
            tls,
            sasl,
        })
    }

    fn sasl(lookup: &Lookup<'_>, spec: &ListenerSpec) -> Result<SaslEndpoint, BrokerError> {
        let names = lookup.listener(spec, "sasl.enabled.mechanisms").ok_or_else(|| {
            config_error(
                spec,
                "a SASL listener needs sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; Kafka's default GSSAPI is not supported)",
            )
        })?;
        let mut mechanisms = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mechanism = Mechanism::parse(name).ok_or_else(|| {
                config_error(spec, format!("SASL mechanism {name} is not supported"))
            })?;
            if !mechanisms.contains(&mechanism) {
                mechanisms.push(mechanism);
            }
        }
        if mechanisms.is_empty() {
            return Err(config_error(spec, "sasl.enabled.mechanisms is empty"));
        }
        let jaas = |mechanism: Mechanism| -> Result<Option<Vec<jaas::LoginModule>>, BrokerError> {
            lookup
                .mechanism(spec, mechanism, "sasl.jaas.config")
                .map(|text| {
                    jaas::parse(&text).map_err(|e| {
                        config_error(
                            spec,
                            format!(
                                "{} sasl.jaas.config: {e}",
                                mechanism.name().to_ascii_lowercase()
                            ),
                        )
                    })
                })
                .transpose()
        };
        let mut plain_users = HashMap::new();
        let mut oauth = None;
        let mut max_reauth_ms = HashMap::new();
        for &mechanism in &mechanisms {
            let reauth = lookup
                .mechanism(spec, mechanism, "connections.max.reauth.ms")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(0)
                .max(0);
            max_reauth_ms.insert(mechanism, reauth);
            match mechanism {
                Mechanism::Plain => {
                    let modules = jaas(mechanism)?.unwrap_or_default();
                    plain_users = jaas::plain_users(&modules);
                    if plain_users.is_empty() {
                        return Err(config_error(
                            spec,
                            format!(
                                "PLAIN needs users: set {}plain.sasl.jaas.config to {} required user_<name>=\"<password>\" ...;",
                                spec.config_prefix(),
                                jaas::PLAIN_MODULE
                            ),
                        ));
                    }
                }
                Mechanism::Scram(_) => {}
                Mechanism::OAuthBearer => {
                    oauth = Some(Self::oauth(lookup, spec, jaas(mechanism)?)?);
                }
            }
        }
        let max_receive_size = lookup
            .listener(spec, "sasl.server.max.receive.size")
            .map_or(Ok(DEFAULT_SASL_MAX_RECEIVE_SIZE), |v| {
                v.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        config_error(
                            spec,
                            format!(
                                "sasl.server.max.receive.size must be a positive number, got {v:?}"
                            ),
                        )
                    })
            })?;
        Ok(SaslEndpoint {
            mechanisms,
            plain_users,
            oauth,
            max_reauth_ms,
            max_receive_size,
        })
    }

    fn oauth(
        lookup: &Lookup<'_>,
        spec: &ListenerSpec,
        modules: Option<Vec<jaas::LoginModule>>,
    ) -> Result<oauthbearer::Validator, BrokerError> {
        let m = Mechanism::OAuthBearer;
        let handler = lookup.mechanism(spec, m, "sasl.server.callback.handler.class");
        let jwks = lookup
            .listener(spec, "sasl.oauthbearer.jwks.endpoint.url")
            .filter(|u| !u.trim().is_empty());
        let module = modules
            .unwrap_or_default()
            .into_iter()
            .find(|module| module.class == jaas::OAUTHBEARER_MODULE);
        let secured = match handler.as_deref().map(str::trim) {
            None => jwks.is_some(),
            Some(SECURED_VALIDATOR) => true,
            Some(UNSECURED_VALIDATOR) => false,
            Some(other) => {
                return Err(config_error(
                    spec,
                    format!(
                        "sasl.server.callback.handler.class {other} is not supported ({SECURED_VALIDATOR} or {UNSECURED_VALIDATOR})"
                    ),
                ));
            }
        };
        if secured {
            let url = jwks.ok_or_else(|| {
                config_error(
                    spec,
                    "OAUTHBEARER's validator needs sasl.oauthbearer.jwks.endpoint.url",
                )
            })?;
            let get = |n: &str| lookup.listener(spec, n).unwrap_or_default();
            let settings = oauthbearer::JwksSettings {
                path: oauthbearer::jwks_path(url.trim()).map_err(|e| config_error(spec, e))?,
                sub_claim: get("sasl.oauthbearer.sub.claim.name"),
                expected_audience: get("sasl.oauthbearer.expected.audience")
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect(),
                expected_issuer: lookup
                    .listener(spec, "sasl.oauthbearer.expected.issuer")
                    .filter(|i| !i.trim().is_empty()),
                clock_skew_seconds: get("sasl.oauthbearer.clock.skew.seconds")
                    .parse()
                    .unwrap_or(30),
                refresh: Duration::from_millis(
                    get("sasl.oauthbearer.jwks.endpoint.refresh.ms")
                        .parse()
                        .unwrap_or(3_600_000),
                ),
            };
            let validator =
                oauthbearer::JwksValidator::new(settings).map_err(|e| config_error(spec, e))?;
            return Ok(oauthbearer::Validator::Jwks(validator));
        }
        // Kafka's default server callback is the unsecured validator; Krabka
        // uses it only when named, or when an OAuthBearerLoginModule is
        // configured for the listener (Kafka's test setup).
        if handler.is_none() && module.is_none() {
            return Err(config_error(
                spec,
                format!(
                    "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (a file: URL), or the unsecured validator configured explicitly ({}oauthbearer.sasl.server.callback.handler.class={UNSECURED_VALIDATOR})",
                    spec.config_prefix()
                ),
            ));
        }
        let options = module.map(|m| m.options).unwrap_or_default();
        let options = oauthbearer::UnsecuredOptions::from_jaas(&options)
            .map_err(|e| config_error(spec, e))?;
        tracing::warn!(
            listener = %spec.name,
            "OAUTHBEARER accepts unsigned tokens (Kafka's unsecured validator): for tests only"
        );
        Ok(oauthbearer::Validator::Unsecured(options))
    }

    /// Every listener, in configuration order.
    #[must_use]
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// The listener the broker's own clients use.
    #[must_use]
    pub fn inter_broker(&self) -> &Arc<Endpoint> {
        &self.endpoints[self.inter_broker]
    }

    /// Whether going from the dynamic broker configs `current` to `next`
    /// changes a TLS setting (a keystore or truststore to load again).
    #[must_use]
    pub fn tls_changed(
        current: &BTreeMap<String, String>,
        next: &BTreeMap<String, String>,
    ) -> bool {
        current
            .keys()
            .chain(next.keys())
            .filter(|k| current.get(*k) != next.get(*k))
            .any(|k| {
                crate::config::defs::broker_setting(k).is_some_and(|s| s.name.starts_with("ssl."))
            })
    }

    /// Checks that the TLS listeners can serve with the dynamic broker
    /// configs `per_broker` and `defaults`, and returns the configurations
    /// to install with [`Security::install_tls`] once they are stored.
    ///
    /// # Errors
    ///
    /// A reason naming the listener, as Kafka's "Validation of dynamic
    /// config update of SSLFactory failed".
    pub fn prepare_tls(
        &self,
        config: &BrokerConfig,
        per_broker: &BTreeMap<String, String>,
        defaults: &BTreeMap<String, String>,
    ) -> Result<Vec<(usize, Arc<rustls::ServerConfig>)>, String> {
        let lookup = Lookup {
            config,
            dynamic: [per_broker, defaults],
        };
        let mut prepared = Vec::new();
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            if endpoint.tls.is_none() {
                continue;
            }
            let server = tls::server_config(&lookup.tls(&endpoint.spec)).map_err(|e| {
                format!(
                    "Validation of dynamic config update of SSLFactory failed for listener {}: {e}",
                    endpoint.spec.name
                )
            })?;
            prepared.push((i, server));
        }
        Ok(prepared)
    }

    /// Serves the configurations [`Security::prepare_tls`] built to new
    /// connections; established connections keep theirs.
    pub fn install_tls(&self, prepared: Vec<(usize, Arc<rustls::ServerConfig>)>) {
        for (i, server) in prepared {
            if let Some(tls) = self.endpoints.get(i).and_then(|e| e.tls.as_ref()) {
                tls.replace(server);
                tracing::info!(listener = %self.endpoints[i].spec.name, "TLS keystore and truststore reloaded");
            }
        }
    }
}

#[cfg(test)]
mod tests;
