//! TLS for client connections (`security.protocol` SSL and SASL_SSL), on
//! rustls with the aws-lc-rs provider the broker's listeners use.
//!
//! A [`TlsConfig`] is built once from PEM bytes (the trusted CAs and an
//! optional client certificate for mTLS) and shared by every connection.
//! Without CAs the system's trust store is used, as Kafka's clients fall
//! back to the JVM's. Hostname checking can be turned off
//! (`ssl.endpoint.identification.algorithm` empty): the chain is then still
//! verified against the CAs, only the name is not compared.

use {
    crate::ClientError,
    rustls::{
        CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
        client::{
            WebPkiServerVerifier,
            danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        },
        pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
    },
    std::sync::Arc,
    tokio::net::TcpStream,
    tokio_rustls::{TlsConnector, client::TlsStream},
};

/// What a [`TlsConfig`] is built from.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// PEM certificates of the CAs to trust; `None` for the system's trust store.
    pub ca_pem: Option<Vec<u8>>,
    /// PEM certificate chain of the client, for mTLS.
    pub certificate_pem: Option<Vec<u8>>,
    /// PEM private key of the client (unencrypted PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Option<Vec<u8>>,
    /// Whether the broker's certificate must name the host connected to
    /// (Kafka's `ssl.endpoint.identification.algorithm=https`, the default).
    pub verify_hostname: bool,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_pem", &self.ca_pem.is_some())
            .field("certificate_pem", &self.certificate_pem.is_some())
            .field("verify_hostname", &self.verify_hostname)
            .finish_non_exhaustive()
    }
}

/// A built TLS client configuration, cheap to clone.
#[derive(Clone)]
pub struct TlsConfig {
    connector: TlsConnector,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsConfig")
    }
}

fn invalid(reason: String) -> ClientError {
    ClientError::InvalidArgument(reason)
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!("{what}: no PEM certificate found")));
    }
    Ok(certs)
}

impl TlsConfig {
    /// Builds the configuration.
    ///
    /// # Errors
    ///
    /// [`ClientError::InvalidArgument`] when a PEM holds no certificate or
    /// key, a certificate is not usable as a CA, or only one of the client
    /// certificate and key is given.
    pub fn new(options: &TlsOptions) -> Result<Self, ClientError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = RootCertStore::empty();
        match &options.ca_pem {
            Some(pem) => {
                for cert in certificates(pem, "trusted CA certificates")? {
                    roots
                        .add(cert)
                        .map_err(|e| invalid(format!("trusted CA certificate: {e}")))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(invalid(
                        "no trusted CA given and the system trust store is empty".into(),
                    ));
                }
            }
        }
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| invalid(format!("trusted CA certificates: {e}")))?;
        let verifier: Arc<dyn ServerCertVerifier> = if options.verify_hostname {
            verifier
        } else {
            Arc::new(AnyHostname(verifier))
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&options.certificate_pem, &options.key_pem) {
            (Some(chain), Some(key)) => {
                let chain = certificates(chain, "client certificate")?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| invalid(format!("client key: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid(format!("client certificate and key: {e}")))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(invalid(
                    "a client certificate needs both the certificate and its key".into(),
                ));
            }
        };
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Runs the TLS handshake over `stream` to the broker at `addr` (`host:port`).
    ///
    /// # Errors
    ///
    /// [`ClientError::Connection`] when the handshake fails (an untrusted or
    /// misnamed certificate, a refused client certificate).
    pub async fn connect(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> Result<TlsStream<TcpStream>, ClientError> {
        let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned()).map_err(|e| ClientError::Connection {
            broker: addr.to_owned(),
            reason: format!("{host} is not a TLS server name: {e}"),
        })?;
        self.connector
            .connect(name, stream)
            .await
            .map_err(|e| ClientError::Connection {
                broker: addr.to_owned(),
                reason: format!("TLS handshake failed: {e}"),
            })
    }
}

/// Verifies the chain like WebPKI but accepts any name in it
/// (`ssl.endpoint.identification.algorithm=`).
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
