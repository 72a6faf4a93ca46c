//! TLS for SSL and SASL_SSL listeners, with rustls on aws-lc-rs, configured
//! with Kafka's names:
//!
//! - the keystore as PEM (KIP-651: `ssl.keystore.certificate.chain` and
//!   `ssl.keystore.key` inline, or `ssl.keystore.location` naming a PEM
//!   file holding both; an `ENCRYPTED PRIVATE KEY` is decrypted with
//!   `ssl.key.password`) or as PKCS#12 (`ssl.keystore.type=PKCS12`,
//!   `ssl.keystore.password`);
//! - the truststore the same ways (`ssl.truststore.*`), for client
//!   certificates when `ssl.client.auth` is `requested` or `required`;
//! - `ssl.enabled.protocols` (TLSv1.2, TLSv1.3).
//!
//! A listener's [`TlsEndpoint`] holds its current `ServerConfig` behind a
//! lock that is taken only to clone an `Arc` at accept: replacing it (a
//! dynamic keystore update) affects new connections only, never the
//! established ones.

use {
    super::principal::{KafkaPrincipal, PrincipalMapper},
    rustls::{
        ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject},
        server::WebPkiClientVerifier,
    },
    std::sync::{Arc, PoisonError, RwLock},
};

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is `User:ANONYMOUS`.
    Requested,
    /// Required.
    Required,
}

/// The TLS settings of one listener, as given.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// `ssl.keystore.type`.
    pub keystore_type: Option<String>,
    /// `ssl.keystore.location`.
    pub keystore_location: Option<String>,
    /// `ssl.keystore.password`.
    pub keystore_password: Option<String>,
    /// `ssl.key.password`.
    pub key_password: Option<String>,
    /// `ssl.keystore.certificate.chain`.
    pub keystore_certificate_chain: Option<String>,
    /// `ssl.keystore.key`.
    pub keystore_key: Option<String>,
    /// `ssl.truststore.type`.
    pub truststore_type: Option<String>,
    /// `ssl.truststore.location`.
    pub truststore_location: Option<String>,
    /// `ssl.truststore.password`.
    pub truststore_password: Option<String>,
    /// `ssl.truststore.certificates`.
    pub truststore_certificates: Option<String>,
    /// `ssl.client.auth`.
    pub client_auth: Option<String>,
    /// `ssl.enabled.protocols`.
    pub enabled_protocols: Option<String>,
}

impl TlsSettings {
    /// `ssl.client.auth` parsed.
    ///
    /// # Errors
    ///
    /// A reason for a value other than none, requested or required.
    pub fn client_auth(&self) -> Result<ClientAuth, String> {
        match self
            .client_auth
            .as_deref()
            .unwrap_or("none")
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(format!(
                "ssl.client.auth {other:?} is not none, requested or required"
            )),
        }
    }
}

/// The certificates and key a listener presents.
struct Keystore {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

fn read_file(what: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} {path}: {e}"))
}

fn is_pem(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'-')
}

/// The type a store is read as: as given, else PEM for PEM text, else PKCS12.
fn store_type(given: Option<&str>, bytes: &[u8], setting: &str) -> Result<bool, String> {
    match given.map(|t| t.trim().to_ascii_uppercase()) {
        None => Ok(is_pem(bytes)),
        Some(t) if t == "PEM" => Ok(true),
        Some(t) if t == "PKCS12" => Ok(false),
        Some(t) => Err(format!(
            "{setting} {t} is not supported (use PEM or PKCS12; convert a JKS store with keytool -importkeystore -deststoretype PKCS12)"
        )),
    }
}

/// PEM text with every block rewritten on lines of 64 characters: Kafka
/// accepts a PEM value written on one line (`ssl.keystore.key` in a
/// properties file or on a command line), which PEM parsers do not.
fn normalize_pem(pem: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(pem);
    let mut out = String::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(stop) = body_start.find(&end_marker) else {
            break;
        };
        // Header lines such as `Proc-Type:` are kept by encrypted PKCS#1
        // keys only, which are not supported; the body is base64 alone.
        let body: String = body_start[..stop].split_whitespace().collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for chunk in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_start[stop + end_marker.len()..];
    }
    out.into_bytes()
}

fn pem_certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = normalize_pem(pem);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: no certificate"));
    }
    Ok(certs)
}

/// The DER contents of every `-----BEGIN <label>-----` block.
fn pem_blocks(pem: &[u8], label: &str) -> Result<Vec<Vec<u8>>, String> {
    use base64::{Engine, engine::general_purpose::STANDARD};
    let text = String::from_utf8_lossy(pem);
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find(&begin) {
        let after = &rest[start + begin.len()..];
        let stop = after
            .find(&end)
            .ok_or_else(|| format!("unterminated {label} block"))?;
        let body: String = after[..stop].split_whitespace().collect();
        out.push(
            STANDARD
                .decode(body)
                .map_err(|_| format!("the {label} block is not base64"))?,
        );
        rest = &after[stop + end.len()..];
    }
    Ok(out)
}

/// The private key of PEM text: an unencrypted key of any PEM kind, or an
/// `ENCRYPTED PRIVATE KEY` (PKCS#8, PBES2) decrypted with `password`.
fn pem_key(
    pem: &[u8],
    password: Option<&str>,
    what: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    let pem = &normalize_pem(pem)[..];
    let encrypted = pem_blocks(pem, "ENCRYPTED PRIVATE KEY").map_err(|e| format!("{what}: {e}"))?;
    if let Some(der) = encrypted.first() {
        let password = password
            .ok_or_else(|| format!("{what}: the private key is encrypted; set ssl.key.password"))?;
        let info = pkcs8::EncryptedPrivateKeyInfoRef::try_from(der.as_slice())
            .map_err(|e| format!("{what}: encrypted private key: {e}"))?;
        let plain = info.decrypt(password).map_err(|_| {
            format!("{what}: cannot decrypt the private key (wrong ssl.key.password?)")
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("{what}: no private key ({e})"))
}

fn pkcs12(bytes: &[u8], password: &str, what: &str) -> Result<p12_keystore::KeyStore, String> {
    p12_keystore::KeyStore::from_pkcs12(bytes, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| format!("{what}: cannot read the PKCS#12 store (wrong password?): {e}"))
}

fn keystore(s: &TlsSettings) -> Result<Keystore, String> {
    if let (Some(chain), Some(key)) = (&s.keystore_certificate_chain, &s.keystore_key) {
        return Ok(Keystore {
            chain: pem_certificates(chain.as_bytes(), "ssl.keystore.certificate.chain")?,
            key: pem_key(
                key.as_bytes(),
                s.key_password.as_deref(),
                "ssl.keystore.key",
            )?,
        });
    }
    if s.keystore_certificate_chain.is_some() || s.keystore_key.is_some() {
        return Err(
            "ssl.keystore.certificate.chain and ssl.keystore.key must be set together".into(),
        );
    }
    let location = s.keystore_location.as_deref().ok_or(
        "a TLS listener needs ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key)",
    )?;
    let bytes = read_file("ssl.keystore.location", location)?;
    if store_type(s.keystore_type.as_deref(), &bytes, "ssl.keystore.type")? {
        let what = format!("ssl.keystore.location {location}");
        return Ok(Keystore {
            chain: pem_certificates(&bytes, &what)?,
            key: pem_key(&bytes, s.key_password.as_deref(), &what)?,
        });
    }
    let password = s
        .keystore_password
        .as_deref()
        .or(s.key_password.as_deref())
        .unwrap_or("");
    let what = format!("ssl.keystore.location {location}");
    let store = pkcs12(&bytes, password, &what)?;
    let (_, chain) = store
        .private_key_chain()
        .ok_or_else(|| format!("{what}: no private key entry"))?;
    let certs: Vec<CertificateDer<'static>> = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    if certs.is_empty() {
        return Err(format!("{what}: the private key has no certificate"));
    }
    Ok(Keystore {
        chain: certs,
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec())),
    })
}

/// The certificates `ssl.truststore.*` names, `None` when none is set.
fn trusted_certificates(s: &TlsSettings) -> Result<Option<Vec<CertificateDer<'static>>>, String> {
    let certs = if let Some(pem) = &s.truststore_certificates {
        pem_certificates(pem.as_bytes(), "ssl.truststore.certificates")?
    } else if let Some(location) = &s.truststore_location {
        let bytes = read_file("ssl.truststore.location", location)?;
        let what = format!("ssl.truststore.location {location}");
        if store_type(s.truststore_type.as_deref(), &bytes, "ssl.truststore.type")? {
            pem_certificates(&bytes, &what)?
        } else {
            let store = pkcs12(
                &bytes,
                s.truststore_password.as_deref().unwrap_or(""),
                &what,
            )?;
            let certs: Vec<CertificateDer<'static>> = store
                .entries()
                .filter_map(|(_, e)| match e {
                    p12_keystore::KeyStoreEntry::Certificate(c) => {
                        Some(CertificateDer::from(c.as_der().to_vec()))
                    }
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!("{what}: no trusted certificate"));
            }
            certs
        }
    } else {
        return Ok(None);
    };
    Ok(Some(certs))
}

fn truststore(s: &TlsSettings) -> Result<Option<rustls::RootCertStore>, String> {
    let Some(certs) = trusted_certificates(s)? else {
        return Ok(None);
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("ssl.truststore: unusable certificate: {e}"))?;
    }
    Ok(Some(roots))
}

/// `der` as a PEM block labelled `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The TLS this broker connects to other brokers with, as Kafka's broker
/// does on its inter-broker listener: it trusts `ssl.truststore.*` (the
/// system's roots when none is set) and presents its keystore, for peers
/// that ask for a client certificate; `verify_hostname` is
/// `ssl.endpoint.identification.algorithm=https`.
///
/// # Errors
///
/// A reason naming the setting at fault (never a password).
pub fn client_config(
    s: &TlsSettings,
    verify_hostname: bool,
) -> Result<krabka_client::TlsConfig, String> {
    let ca_pem = trusted_certificates(s)?.map(|certs| {
        certs
            .iter()
            .map(|c| pem("CERTIFICATE", c))
            .collect::<String>()
            .into_bytes()
    });
    let own = keystore(s)?;
    let certificate_pem = own
        .chain
        .iter()
        .map(|c| pem("CERTIFICATE", c))
        .collect::<String>()
        .into_bytes();
    let key_label = match &own.key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    let key_pem = pem(key_label, own.key.secret_der()).into_bytes();
    krabka_client::TlsConfig::new(&krabka_client::TlsOptions {
        ca_pem,
        certificate_pem: Some(certificate_pem),
        key_pem: Some(key_pem),
        verify_hostname,
    })
    .map_err(|e| format!("the broker's own TLS client: {e}"))
}

/// Builds a listener's rustls configuration.
///
/// # Errors
///
/// A reason naming the setting at fault (never a password).
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for v in s
        .enabled_protocols
        .as_deref()
        .unwrap_or("TLSv1.2,TLSv1.3")
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
    {
        versions.push(match v {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            other => {
                return Err(format!(
                    "ssl.enabled.protocols: {other} is not supported (TLSv1.2, TLSv1.3)"
                ));
            }
        });
    }
    if versions.is_empty() {
        return Err("ssl.enabled.protocols is empty".into());
    }
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let keystore = keystore(s)?;
    let client_auth = s.client_auth()?;
    let builder = match (client_auth, truststore(s)?) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err(
                "ssl.client.auth requested or required needs a truststore (ssl.truststore.location or ssl.truststore.certificates)"
                    .into(),
            );
        }
        (auth, Some(roots)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("ssl.truststore: {e}"))?,
            )
        }
    };
    let config = builder
        .with_single_cert(keystore.chain, keystore.key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// A listener's TLS: the current configuration, replaceable, and the
/// principal mapping of client certificates.
#[derive(Debug)]
pub struct TlsEndpoint {
    config: RwLock<Arc<ServerConfig>>,
    mapper: PrincipalMapper,
}

impl TlsEndpoint {
    /// A TLS endpoint serving `config`.
    #[must_use]
    pub fn new(config: Arc<ServerConfig>, mapper: PrincipalMapper) -> Self {
        Self {
            config: RwLock::new(config),
            mapper,
        }
    }

    /// The acceptor for the next connection.
    #[must_use]
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(Arc::clone(
            &self.config.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Serves `config` to connections accepted from now on.
    pub fn replace(&self, config: Arc<ServerConfig>) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    /// The principal of a connection that presented `certificates` (none:
    /// `User:ANONYMOUS`).
    ///
    /// # Errors
    ///
    /// Why the certificate gives no principal (no mapping rule applies, or
    /// it does not parse); Kafka then closes the connection.
    pub fn principal(
        &self,
        certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<KafkaPrincipal, String> {
        let Some(leaf) = certificates.and_then(<[_]>::first) else {
            return Ok(KafkaPrincipal::anonymous());
        };
        let subject = super::principal::certificate_subject(leaf)?;
        self.mapper
            .name(&subject)
            .map(KafkaPrincipal::user)
            .ok_or_else(|| format!("no ssl.principal.mapping.rules rule applies to {subject}"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use {super::*, assert2::check};

    /// A CA, and a leaf it signed for `name` (server and client use).
    pub(crate) fn ca_and_leaf(name: &str) -> (String, String, String) {
        let ca = crate::security::certs::Authority::generate("Test CA").unwrap();
        let leaf = ca
            .issue(name, &["localhost".into(), "127.0.0.1".into()])
            .unwrap();
        (ca.certificate_pem(), leaf.certificate_pem, leaf.key_pem)
    }

    #[test]
    fn pem_keystores_inline_and_from_a_file() {
        let (ca, cert, key) = ca_and_leaf("broker");
        let inline = TlsSettings {
            keystore_certificate_chain: Some(cert.clone()),
            keystore_key: Some(key.clone()),
            ..TlsSettings::default()
        };
        check!(server_config(&inline).is_ok());
        // Written on one line, as in a properties file.
        let one_line = TlsSettings {
            keystore_certificate_chain: Some(cert.replace('\n', " ")),
            keystore_key: Some(key.replace('\n', " ")),
            ..TlsSettings::default()
        };
        check!(server_config(&one_line).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broker.pem");
        std::fs::write(&file, format!("{key}{cert}")).unwrap();
        let from_file = TlsSettings {
            keystore_location: Some(file.display().to_string()),
            truststore_certificates: Some(ca),
            client_auth: Some("required".into()),
            enabled_protocols: Some("TLSv1.3".into()),
            ..TlsSettings::default()
        };
        check!(server_config(&from_file).is_ok());
        let err = server_config(&TlsSettings {
            client_auth: Some("required".into()),
            ..inline.clone()
        })
        .unwrap_err();
        check!(err.contains("truststore"));
        let err = server_config(&TlsSettings {
            enabled_protocols: Some("TLSv1.1".into()),
            ..inline.clone()
        })
        .unwrap_err();
        check!(err.contains("TLSv1.1"));
        check!(
            server_config(&TlsSettings::default())
                .unwrap_err()
                .contains("ssl.keystore.location")
        );
        let err = server_config(&TlsSettings {
            keystore_type: Some("JKS".into()),
            keystore_location: Some(file.display().to_string()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        check!(err.contains("JKS"));
    }

    #[test]
    fn encrypted_pem_keys_need_the_right_password() {
        let (_, cert, key) = ca_and_leaf("broker");
        let encrypted = crate::security::certs::encrypt_key(&key, "s3cret").unwrap();
        let settings = |password: Option<&str>| TlsSettings {
            keystore_certificate_chain: Some(cert.clone()),
            keystore_key: Some(encrypted.to_string()),
            key_password: password.map(str::to_owned),
            ..TlsSettings::default()
        };
        check!(server_config(&settings(Some("s3cret"))).is_ok());
        check!(
            server_config(&settings(Some("wrong")))
                .unwrap_err()
                .contains("ssl.key.password")
        );
        check!(
            server_config(&settings(None))
                .unwrap_err()
                .contains("ssl.key.password")
        );
    }
}
