//! A connection's authentication, as Kafka's `SaslServerAuthenticator`
//! runs it, and the [`Session`] that carries the result to the handlers.
//!
//! On a SASL listener a connection may first send ApiVersions, then must
//! send SaslHandshake (v0: raw SASL tokens follow in plain size-prefixed
//! frames; v1: SaslAuthenticate requests carry them) and complete the
//! exchange; any other request before that closes it, as on Kafka. A
//! failed exchange is answered SASL_AUTHENTICATION_FAILED with Kafka's
//! message after `connection.failed.authentication.delay.ms`, and the
//! connection is closed. With `connections.max.reauth.ms` (or an OAuth
//! token's expiry) the session has a lifetime (KIP-368): the client is told
//! it, may re-authenticate with the same mechanism and principal at any
//! time, and a request other than SaslHandshake after it ends closes the
//! connection.
//!
//! On PLAINTEXT and SSL listeners the session exists from the start (its
//! principal `User:ANONYMOUS`, or the mTLS certificate's).

use {
    super::{
        Endpoint, Security,
        acl::{
            DecisionCache,
            binding::{Operation, ResourceType},
        },
        admin::SecurityRequest,
        principal::KafkaPrincipal,
        sasl::{Failure, Mechanism, Step, oauthbearer::OAuthServer, scram::ScramServer},
    },
    crate::{
        broker::Broker,
        handlers::Reply,
        network::codec::{DecodedRequest, Request, encode_response},
    },
    bytes::{BufMut, Bytes, BytesMut},
    kafka_protocol::{
        error::ResponseError,
        messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse},
        protocol::StrBytes,
    },
    std::{
        net::SocketAddr,
        sync::{Arc, Mutex, PoisonError},
        time::{Duration, Instant, SystemTime, UNIX_EPOCH},
    },
};

/// Who a connection is, for the authorizer; shared by the connection's
/// requests.
#[derive(Debug)]
pub struct Session {
    /// The authenticated principal.
    pub principal: KafkaPrincipal,
    principal_text: String,
    /// The client's address, as the authorizer matches hosts.
    pub host: String,
    /// The listener the client connected to.
    pub listener: Arc<Endpoint>,
    cache: Mutex<DecisionCache>,
}

impl Session {
    /// A session of `principal` from `peer` on `listener`.
    #[must_use]
    pub fn new(principal: KafkaPrincipal, peer: SocketAddr, listener: Arc<Endpoint>) -> Self {
        Self {
            principal_text: principal.to_string(),
            principal,
            host: peer.ip().to_string(),
            listener,
            cache: Mutex::new(DecisionCache::default()),
        }
    }

    /// Whether this session may do `operation` on `resource_type`/`name`
    /// (always, without an authorizer). Decisions are cached until the ACLs
    /// change.
    #[must_use]
    pub fn authorize(
        &self,
        security: &Security,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let Some(authorizer) = &security.authorizer else {
            return true;
        };
        let generation = authorizer.generation();
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or(generation, operation, resource_type, name, || {
                let allowed = authorizer.authorize(
                    &self.principal_text,
                    &self.host,
                    operation,
                    resource_type,
                    name,
                );
                if !allowed {
                    crate::metrics::authorization_denied(operation.name(), resource_type.name());
                    tracing::info!(
                        target: "krabka::authorizer",
                        principal = %self.principal_text,
                        host = %self.host,
                        operation = operation.name(),
                        resource = %format!("{resource_type}:{name}"),
                        "denied"
                    );
                }
                allowed
            })
    }

    /// Whether this session may do `operation` on some resource of
    /// `resource_type` (KIP-679's check for idempotent produce).
    #[must_use]
    pub fn authorize_any(
        &self,
        security: &Security,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        security.authorizer.as_ref().is_none_or(|a| {
            a.authorize_any(&self.principal_text, &self.host, operation, resource_type)
        })
    }

    /// The principal as `Type:name`.
    #[must_use]
    pub fn principal_text(&self) -> &str {
        &self.principal_text
    }
}

/// The exchange in progress.
#[derive(Debug)]
enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
    OAuth(OAuthServer),
}

#[derive(Debug)]
enum State {
    /// Authenticated (or nothing to authenticate).
    Ready,
    /// A SASL listener before SaslHandshake.
    Handshake,
    /// Between SaslHandshake and the end of the exchange.
    Authenticating {
        mechanism: Mechanism,
        exchange: Exchange,
        /// SaslHandshake v0: tokens come as raw frames.
        raw: bool,
        /// Re-authentication with another mechanism: refused at the first token.
        bad_mechanism: Option<String>,
    },
}

/// What the connection does with a request after [`Authenticator::request`].
#[derive(Debug)]
pub enum Outcome {
    /// Hand it to the handlers (it carries the session).
    Handle(Box<DecodedRequest>),
    /// Answered here: send these in order.
    Reply(Vec<Reply>),
}

/// A connection's authentication state.
#[derive(Debug)]
pub struct Authenticator {
    endpoint: Arc<Endpoint>,
    peer: SocketAddr,
    state: State,
    session: Arc<Session>,
    authenticated: Option<Mechanism>,
    expires: Option<Instant>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn frame<
    R: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion + 'static,
>(
    api: ApiKey,
    request: &DecodedRequest,
    body: &R,
) -> Reply {
    match encode_response(api, request.version, request.header.correlation_id, body) {
        Ok(frame) => Reply::Frame(frame),
        Err(reason) => Reply::Close(format!("cannot encode {api:?} response: {reason}")),
    }
}

fn raw_frame(token: &[u8]) -> Reply {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.put_u32(u32::try_from(token.len()).unwrap_or(u32::MAX));
    out.put_slice(token);
    Reply::Frame(out.freeze())
}

impl Authenticator {
    /// The state of a new connection on `endpoint` from `peer`; `principal`
    /// is the TLS client certificate's (or anonymous).
    #[must_use]
    pub fn new(endpoint: Arc<Endpoint>, peer: SocketAddr, principal: KafkaPrincipal) -> Self {
        let state = if endpoint.sasl.is_some() {
            State::Handshake
        } else {
            State::Ready
        };
        Self {
            session: Arc::new(Session::new(principal, peer, Arc::clone(&endpoint))),
            endpoint,
            peer,
            state,
            authenticated: None,
            expires: None,
        }
    }

    /// The session requests run under.
    #[must_use]
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The bound on the next frame's size while a SASL client has not
    /// authenticated yet (`sasl.server.max.receive.size`, as Kafka's
    /// authenticator applies it); `None` once it has, or without SASL.
    #[must_use]
    pub fn frame_limit(&self) -> Option<usize> {
        match (&self.endpoint.sasl, self.authenticated) {
            (Some(sasl), None) => Some(sasl.max_receive_size),
            _ => None,
        }
    }

    /// Whether the next frame is a raw SASL token (after SaslHandshake v0)
    /// rather than a request.
    #[must_use]
    pub fn wants_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticating { raw: true, .. })
    }

    /// Handles a raw SASL token frame (SaslHandshake v0).
    pub async fn raw_token(&mut self, broker: &Broker, token: &[u8]) -> Vec<Reply> {
        match self.step(broker, token).await {
            Ok((response, _lifetime)) => vec![raw_frame(&response)],
            Err(failure) => {
                tokio::time::sleep(broker.security.failed_auth_delay).await;
                vec![Reply::Close(format!(
                    "SASL authentication failed: {}",
                    failure.reason
                ))]
            }
        }
    }

    /// Handles a decoded request: authentication requests are answered
    /// here, the rest go to the handlers with the session, or close the
    /// connection when they come before authentication or after the
    /// session expired.
    pub async fn request(&mut self, broker: &Broker, mut request: DecodedRequest) -> Outcome {
        request.session = Some(Arc::clone(&self.session));
        match (&self.state, &request.body) {
            (State::Ready, Request::Security(SecurityRequest::SaslHandshake(_)))
                if self.endpoint.sasl.is_some() =>
            {
                self.handshake(&request)
            }
            (
                State::Ready,
                Request::Security(SecurityRequest::SaslAuthenticate(_))
                | Request::Security(SecurityRequest::SaslHandshake(_)),
            ) => Outcome::Reply(vec![Reply::Close(format!(
                "unexpected {:?} request outside a SASL exchange",
                request.api_key
            ))]),
            (State::Ready, _) => {
                if self.expires.is_some_and(|at| Instant::now() >= at) {
                    return Outcome::Reply(vec![Reply::Close(
                        "the SASL session expired without re-authentication (connections.max.reauth.ms)"
                            .into(),
                    )]);
                }
                Outcome::Handle(Box::new(request))
            }
            (
                State::Handshake,
                Request::ApiVersions(_)
                | Request::ApiVersionsUnsupported
                | Request::ApiVersionsChecked(_),
            ) => Outcome::Handle(Box::new(request)),
            (State::Handshake, Request::Security(SecurityRequest::SaslHandshake(_))) => {
                self.handshake(&request)
            }
            (State::Handshake, _) => Outcome::Reply(vec![Reply::Close(format!(
                "Unexpected Kafka request of type {:?} during SASL handshake",
                request.api_key
            ))]),
            (
                State::Authenticating { raw: false, .. },
                Request::Security(SecurityRequest::SaslAuthenticate(r)),
            ) => {
                let token = r.auth_bytes.clone();
                self.authenticate(broker, &request, &token).await
            }
            (State::Authenticating { .. }, _) => Outcome::Reply(vec![Reply::Close(format!(
                "Unexpected Kafka request of type {:?} during SASL authentication",
                request.api_key
            ))]),
        }
    }

    fn handshake(&mut self, request: &DecodedRequest) -> Outcome {
        let Request::Security(SecurityRequest::SaslHandshake(r)) = &request.body else {
            return Outcome::Reply(vec![Reply::Close("not a SaslHandshake".into())]);
        };
        let Some(sasl) = &self.endpoint.sasl else {
            return Outcome::Reply(vec![Reply::Close(
                "SaslHandshake on a listener without SASL".into(),
            )]);
        };
        let mut response = SaslHandshakeResponse::default();
        response.mechanisms = sasl
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let requested = r.mechanism.as_str();
        let Some(mechanism) = Mechanism::parse(requested).filter(|m| sasl.mechanisms.contains(m))
        else {
            response.error_code = ResponseError::UnsupportedSaslMechanism.code();
            tracing::info!(peer = %self.peer, mechanism = %requested, "SASL mechanism not enabled on this listener");
            return Outcome::Reply(vec![
                frame(ApiKey::SaslHandshake, request, &response),
                Reply::Close(format!("Unsupported SASL mechanism {requested}")),
            ]);
        };
        let bad_mechanism = self.authenticated.filter(|m| *m != mechanism).map(|previous| {
            format!(
                "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                mechanism.name(),
                previous.name()
            )
        });
        let exchange = match mechanism {
            Mechanism::Plain => Exchange::Plain,
            Mechanism::Scram(m) => Exchange::Scram(Box::new(ScramServer::new(m))),
            Mechanism::OAuthBearer => Exchange::OAuth(OAuthServer::default()),
        };
        self.state = State::Authenticating {
            mechanism,
            exchange,
            raw: request.version == 0,
            bad_mechanism,
        };
        Outcome::Reply(vec![frame(ApiKey::SaslHandshake, request, &response)])
    }

    /// Runs one token through the exchange: the server's answer and, once
    /// authenticated, the session lifetime to report (ms, 0 for none).
    async fn step(&mut self, broker: &Broker, token: &[u8]) -> Result<(Vec<u8>, i64), Failure> {
        let State::Authenticating {
            mechanism,
            exchange,
            bad_mechanism,
            ..
        } = &mut self.state
        else {
            return Err(Failure::generic("no SASL exchange in progress"));
        };
        let mechanism = *mechanism;
        if let Some(message) = bad_mechanism.take() {
            return Err(Failure::told(message));
        }
        let Some(sasl) = &self.endpoint.sasl else {
            return Err(Failure::generic("SASL is not enabled"));
        };
        let step = match exchange {
            Exchange::Plain => super::sasl::plain::authenticate(token, &sasl.plain_users),
            Exchange::Scram(server) => {
                let m = match mechanism {
                    Mechanism::Scram(m) => m,
                    _ => return Err(Failure::generic("mechanism mismatch")),
                };
                server.step(token, |user| broker.security.scram.get(user, m))
            }
            Exchange::OAuth(server) => match &sasl.oauth {
                Some(validator) => server.step(token, validator, now_ms()),
                None => return Err(Failure::generic("OAUTHBEARER has no validator")),
            },
        };
        match step {
            Step::Continue(challenge) => Ok((challenge, 0)),
            Step::Failed(failure) => {
                crate::metrics::sasl_authentication(mechanism.name(), false);
                self.state = State::Ready;
                Err(failure)
            }
            Step::Done {
                response,
                principal,
                expires_at_ms,
            } => {
                if self.authenticated.is_some() && principal != self.session.principal {
                    crate::metrics::sasl_authentication(mechanism.name(), false);
                    self.state = State::Ready;
                    return Err(Failure::told(format!(
                        "Cannot change principals during re-authentication from {}.{}: {}.{}",
                        self.session.principal.principal_type,
                        self.session.principal.name,
                        principal.principal_type,
                        principal.name
                    )));
                }
                let max_reauth = sasl.max_reauth_ms.get(&mechanism).copied().unwrap_or(0);
                let now = now_ms();
                let lifetime = match (expires_at_ms, max_reauth > 0) {
                    (None, false) => None,
                    (None, true) => Some(max_reauth),
                    (Some(at), false) => Some((at - now).max(0)),
                    (Some(at), true) => Some((at - now).min(max_reauth).max(0)),
                };
                self.expires = lifetime.map(|ms| {
                    Instant::now() + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
                });
                if self.authenticated.is_none() {
                    self.session = Arc::new(Session::new(
                        principal.clone(),
                        self.peer,
                        Arc::clone(&self.endpoint),
                    ));
                    tracing::debug!(peer = %self.peer, principal = %principal, mechanism = mechanism.name(), "authenticated");
                } else {
                    tracing::debug!(peer = %self.peer, principal = %principal, "re-authenticated");
                }
                crate::metrics::sasl_authentication(mechanism.name(), true);
                self.authenticated = Some(mechanism);
                self.state = State::Ready;
                Ok((response, lifetime.unwrap_or(0)))
            }
        }
    }

    async fn authenticate(
        &mut self,
        broker: &Broker,
        request: &DecodedRequest,
        token: &Bytes,
    ) -> Outcome {
        let reauth = self.authenticated.is_some();
        let mechanism = match &self.state {
            State::Authenticating { mechanism, .. } => *mechanism,
            _ => return Outcome::Reply(vec![Reply::Close("no SASL exchange in progress".into())]),
        };
        match self.step(broker, token).await {
            Ok((bytes, lifetime)) => {
                let mut response = SaslAuthenticateResponse::default();
                response.auth_bytes = Bytes::from(bytes);
                response.session_lifetime_ms = lifetime;
                Outcome::Reply(vec![frame(ApiKey::SaslAuthenticate, request, &response)])
            }
            Err(failure) => {
                let text = if reauth {
                    "re-authentication"
                } else {
                    "authentication"
                };
                let message = failure.client_message.clone().unwrap_or_else(|| {
                    format!(
                        "Authentication failed during {text} due to invalid credentials with SASL mechanism {}",
                        mechanism.name()
                    )
                });
                tracing::info!(peer = %self.peer, mechanism = mechanism.name(), reason = %failure.reason, "SASL {text} failed");
                // Slows down password guessing; only this connection waits.
                tokio::time::sleep(broker.security.failed_auth_delay).await;
                let mut response = SaslAuthenticateResponse::default();
                response.error_code = ResponseError::SaslAuthenticationFailed.code();
                response.error_message = Some(StrBytes::from_string(message));
                Outcome::Reply(vec![
                    frame(ApiKey::SaslAuthenticate, request, &response),
                    Reply::Close(format!("SASL {text} failed: {}", failure.reason)),
                ])
            }
        }
    }
}
