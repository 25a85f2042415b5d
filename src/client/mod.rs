//! One HTTP request -> one [`RequestRecord`]: pooled hyper connections (HTTP/1.1, h2c, TLS with
//! ALPN via rustls/ring), every phase bounded in time, one timestamp per SSE event.
//!
//! The client never returns an error for a request: whatever happens (refused connection, timeout,
//! HTTP 500, cut stream, cancellation) becomes the record's [`Outcome`].

pub mod sse;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE,
};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;

use crate::record::{ChunkGap, FailureKind, Outcome, RequestRecord, TokenSource};
use sse::{classify, Event, SseParser};

/// Which HTTP versions to speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTP/1.1 on `http://`; ALPN (h2 preferred, else HTTP/1.1) on `https://`.
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only: h2c with prior knowledge on `http://`, ALPN h2 on `https://`.
    Http2,
}

/// Per-request time limits. Each is documented with its flag in `cli.rs`.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Timeouts {
    /// TCP connect plus TLS handshake.
    pub connect: Duration,
    /// Request sent -> first content or reasoning event.
    pub first_token: Duration,
    /// Longest silence between SSE events once the first token arrived.
    pub idle: Duration,
    /// Request sent -> request finished.
    pub total: Duration,
}

/// Everything the client needs, already validated.
#[derive(Clone, Debug)]
pub(crate) struct ClientOptions {
    pub(crate) http: HttpVersion,
    pub(crate) timeouts: Timeouts,
    /// Custom headers and the bearer key; credentials among them are marked sensitive.
    pub(crate) headers: HeaderMap,
    /// `scheme://authority` of the target: the headers go to it and nowhere else (a metrics
    /// endpoint on another host never sees the API key). `None`: every request gets them.
    pub(crate) origin: Option<String>,
    /// Skip certificate verification (`--insecure`).
    pub(crate) insecure: bool,
    pub(crate) ca_file: Option<std::path::PathBuf>,
    pub(crate) max_event_bytes: usize,
    pub(crate) max_body_bytes: usize,
}

/// Errors building the client (bad CA file, TLS setup).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CA bundle could not be read or holds no certificate.
    #[error(
        "cannot use CA file {path}: {reason} (pass a PEM file with at least one CERTIFICATE block)"
    )]
    CaFile {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS setup failed: {0}")]
    Tls(#[from] rustls::Error),
}

type Connector = TimeoutConnector<hyper_rustls::HttpsConnector<HttpConnector>>;

/// A pooled HTTP client shared by all workers of a run.
#[derive(Clone)]
pub(crate) struct Client {
    inner: HyperClient<Connector, Full<Bytes>>,
    opts: Arc<ClientOptions>,
    /// Values of the sensitive headers, scrubbed from every error text the client hands out (a
    /// server that echoes the request's headers in its error body must not put the key in
    /// records.jsonl or on the console).
    secrets: Arc<[String]>,
}

/// The monotonic origin all record times are measured from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }
    pub(crate) fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }
    pub(crate) fn now_ns(&self) -> u64 {
        self.ns(Instant::now())
    }
}

/// A GET answer: status, lower-cased `Content-Type`, and the body (gzip already undone).
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Bytes,
}

/// A size cap on a `GET` body, and the name errors give it, so a refusal says which cap fired.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyCap {
    pub(crate) bytes: usize,
    pub(crate) name: &'static str,
}

impl BodyCap {
    fn exceeded(self, what: String) -> FetchError {
        FetchError::OverCap {
            what,
            cap_name: self.name,
            cap_bytes: self.bytes,
        }
    }
}

/// Why a bounded `GET` ([`Client::get`]) brought back no body. Texts taken from the server or
/// the transport have the run's credentials scrubbed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    /// The request could not be built (a header the URL's origin refuses, say).
    #[error("{0}")]
    Request(String),
    /// Connecting, sending or reading failed; the cause chain, joined.
    #[error("{0}")]
    Transport(String),
    /// The announced, read or inflated body is larger than the cap.
    #[error("{what} over the {cap_name} ({cap_bytes} bytes)")]
    OverCap {
        /// What was over: the announced length, the body, the inflated body.
        what: String,
        /// The cap's name, as errors and the README give it.
        cap_name: &'static str,
        /// The cap, bytes.
        cap_bytes: usize,
    },
    /// The body says gzip but does not inflate.
    #[error("gzip body does not inflate: {0}")]
    Gzip(std::io::Error),
    /// Nothing (or not all of it) came back within the limit.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

impl FetchError {
    /// The error with every secret scrubbed from the texts it carries.
    fn redacted(self, secrets: &[String]) -> FetchError {
        match self {
            FetchError::Request(m) => FetchError::Request(redact(m, secrets)),
            FetchError::Transport(m) => FetchError::Transport(redact(m, secrets)),
            FetchError::OverCap {
                what,
                cap_name,
                cap_bytes,
            } => FetchError::OverCap {
                what: redact(what, secrets),
                cap_name,
                cap_bytes,
            },
            other => other,
        }
    }
}

/// Callers that keep the reason as text (the readiness probe's error, the scrape's failure
/// record) take it whole.
impl From<FetchError> for String {
    fn from(e: FetchError) -> String {
        e.to_string()
    }
}

/// Inflates a gzip body, refusing to grow past the cap (a zip bomb must not exhaust memory).
fn gunzip(body: &[u8], cap: BodyCap) -> Result<Bytes, FetchError> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(cap.bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(FetchError::Gzip)?;
    if out.len() > cap.bytes {
        return Err(cap.exceeded("gzip body inflates".into()));
    }
    Ok(Bytes::from(out))
}

/// One request ready to send.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub(crate) uri: Uri,
    pub(crate) body: Bytes,
    pub(crate) streaming: bool,
    /// Keep the response text (multi-turn sessions thread it into the next turn).
    pub(crate) capture_text: bool,
}

impl Client {
    pub(crate) fn new(opts: ClientOptions) -> Result<Self, ClientError> {
        let tls = tls_config(opts.ca_file.as_deref(), opts.insecure)?;
        let secrets = secrets(&opts.headers);
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let https = match opts.http {
            HttpVersion::Auto => builder.enable_all_versions().wrap_connector(http),
            HttpVersion::Http1 => builder.enable_http1().wrap_connector(http),
            HttpVersion::Http2 => builder.enable_http2().wrap_connector(http),
        };
        let connector = TimeoutConnector {
            inner: https,
            timeout: opts.timeouts.connect,
        };
        let mut b = HyperClient::builder(TokioExecutor::new());
        b.pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(usize::MAX);
        if opts.http == HttpVersion::Http2 {
            b.http2_only(true);
        }
        Ok(Client {
            inner: b.build(connector),
            opts: Arc::new(opts),
            secrets,
        })
    }

    /// The configured headers, when `uri` is on the target's origin.
    fn headers_for(&self, uri: &Uri) -> Option<&HeaderMap> {
        match &self.opts.origin {
            Some(origin) if !same_origin(uri, origin) => None,
            _ => Some(&self.opts.headers),
        }
    }

    /// A bounded `GET` (readiness probe, model discovery, pool warm-up). Returns status and body.
    pub(crate) async fn get(
        &self,
        uri: Uri,
        limit: Duration,
        accept: &str,
        cap: BodyCap,
    ) -> Result<Fetched, FetchError> {
        let mut req = Request::builder().method(Method::GET).uri(uri.clone());
        for (k, v) in self.headers_for(&uri).into_iter().flatten() {
            req = req.header(k, v);
        }
        req = req.header(ACCEPT, accept);
        req = req.header(ACCEPT_ENCODING, "gzip, identity");
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| FetchError::Request(e.to_string()))?;
        let fut = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| FetchError::Transport(describe(&e)))?;
            let status = resp.status().as_u16();
            let header = |name| {
                resp.headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_ascii_lowercase)
            };
            let content_type = header(CONTENT_TYPE);
            let gzip = header(CONTENT_ENCODING).is_some_and(|e| e.contains("gzip"));
            // A Content-Length past the cap is refused before a byte of the body is read.
            let announced = http_body::Body::size_hint(resp.body()).lower();
            if announced > cap.bytes as u64 {
                return Err(cap.exceeded(format!("Content-Length {announced}")));
            }
            let body = http_body_util::Limited::new(resp.into_body(), cap.bytes)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        cap.exceeded("body".into())
                    } else {
                        FetchError::Transport(describe(&*e))
                    }
                })?
                .to_bytes();
            let body = if gzip { gunzip(&body, cap)? } else { body };
            Ok(Fetched {
                status,
                content_type,
                body,
            })
        };
        tokio::time::timeout(limit, fut)
            .await
            .map_err(|_| FetchError::TimedOut(limit))?
            .map_err(|e| e.redacted(&self.secrets))
    }

    /// Sends one request and follows it to the end. Never fails: the outcome is in the record.
    pub(crate) async fn execute(
        &self,
        req: &Prepared,
        rec: RequestRecord,
        clock: &Clock,
        cancel: &CancellationToken,
    ) -> RequestRecord {
        let mut rec = self.follow(req, rec, clock, cancel).await;
        rec.error = rec.error.map(|e| redact(e, &self.secrets));
        rec
    }

    async fn follow(
        &self,
        req: &Prepared,
        mut rec: RequestRecord,
        clock: &Clock,
        cancel: &CancellationToken,
    ) -> RequestRecord {
        let t = self.opts.timeouts;
        let mut builder = Request::builder().method(Method::POST).uri(req.uri.clone());
        for (k, v) in self.headers_for(&req.uri).into_iter().flatten() {
            builder = builder.header(k, v);
        }
        builder = builder.header(CONTENT_TYPE, "application/json");
        if req.streaming {
            builder = builder.header(ACCEPT, "text/event-stream");
        }
        let http_req = match builder.body(Full::new(req.body.clone())) {
            Ok(r) => r,
            Err(e) => return fail(rec, clock, FailureKind::Transport, e.to_string()),
        };
        let sent = Instant::now();
        rec.sent_ns = clock.ns(sent);
        let total_deadline = sent + t.total;
        let first_deadline = (sent + t.first_token).min(total_deadline);
        let first_kind = if sent + t.first_token <= total_deadline {
            FailureKind::TtftTimeout
        } else {
            FailureKind::TotalTimeout
        };

        let resp = tokio::select! {
            biased;
            _ = cancel.cancelled() => return cancelled(rec, clock),
            r = self.inner.request(http_req) => r,
            _ = tokio::time::sleep_until(first_deadline.into()) => {
                return fail(rec, clock, first_kind, format!("no response headers within {:?}", first_deadline - sent));
            }
        };
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                let kind = classify_transport(&e);
                return fail(rec, clock, kind, describe(&e));
            }
        };
        rec.headers_ns = Some(clock.now_ns());
        let status = resp.status();
        rec.http_status = Some(status.as_u16());
        let mut body = resp.into_body();

        let mut state = StreamState::new(
            self.opts.max_event_bytes,
            self.opts.max_body_bytes,
            req.streaming,
        );
        if req.capture_text {
            state.text = Some(String::new());
        }
        // One timer for the whole stream, re-armed lazily: it fires at the earliest deadline that
        // could apply and is pushed forward when events moved the real deadline.
        let sleep = tokio::time::sleep_until(first_deadline.into());
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return cancelled(rec, clock),
                frame = body.frame() => match frame {
                    None => break,
                    Some(Err(e)) => {
                        if state.done {
                            break; // the stream already ended; a close afterwards costs nothing
                        }
                        let kind = if e.is_timeout() { FailureKind::Transport } else { FailureKind::ConnectionClosed };
                        let msg = describe(&e);
                        return state.finish_failed(rec, clock, kind, msg);
                    }
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else { continue };
                        if !status.is_success() {
                            if state.body.len() < 64 * 1024 {
                                state.body.extend_from_slice(&data);
                            }
                            continue;
                        }
                        let now = Instant::now();
                        let had_token = state.first_token.is_some();
                        if let Err((kind, msg)) = state.on_data(&data, now, clock, &mut rec) {
                            return state.finish_failed(rec, clock, kind, msg);
                        }
                        if !had_token && state.first_token.is_some() {
                            // The idle deadline may be earlier than the first-token one the timer
                            // is armed for; the lazy re-arm only ever moves it later.
                            sleep.as_mut().reset((now + t.idle).min(total_deadline).into());
                        }
                        if state.done && !req.streaming {
                            break;
                        }
                    }
                },
                () = &mut sleep => {
                    let now = Instant::now();
                    let (deadline, kind) = if now >= total_deadline {
                        (total_deadline, FailureKind::TotalTimeout)
                    } else if state.first_token.is_none() {
                        (first_deadline, first_kind)
                    } else {
                        ((state.last_event + t.idle).min(total_deadline), FailureKind::IdleTimeout)
                    };
                    if now >= deadline {
                        let msg = format!("{} after {:?}", kind.as_str(), now - sent);
                        return state.finish_failed(rec, clock, kind, msg);
                    }
                    sleep.as_mut().reset(deadline.into());
                }
            }
        }
        if !status.is_success() {
            let msg = format!(
                "HTTP {}: {}",
                status.as_u16(),
                sse::error_message(&String::from_utf8_lossy(&state.body))
            );
            return fail(rec, clock, FailureKind::HttpStatus, msg);
        }
        state.finish(rec, clock, req.streaming)
    }
}

/// `scheme://authority` of a URI, lower-cased: what the credentials are bound to.
pub(crate) fn origin_of(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
    .to_ascii_lowercase()
}

fn same_origin(uri: &Uri, origin: &str) -> bool {
    origin_of(uri) == origin
}

/// Header names whose values are credentials: never shown, never sent off the target's origin.
fn is_credential(name: &HeaderName) -> bool {
    let n = name.as_str();
    matches!(n, "authorization" | "proxy-authorization" | "cookie")
        || ["key", "token", "secret", "auth", "password", "session"]
            .iter()
            .any(|w| n.contains(w))
}

/// The strings to scrub: each sensitive value, and its credential part after a scheme
/// (`Bearer <token>`). Very short values are left alone, they would scrub ordinary words.
fn secrets(headers: &HeaderMap) -> Arc<[String]> {
    let mut out: Vec<String> = Vec::new();
    for v in headers.values().filter(|v| v.is_sensitive()) {
        let Ok(v) = v.to_str() else { continue };
        let parts = std::iter::once(v).chain(v.split_once(' ').map(|(_, t)| t.trim()));
        for p in parts.filter(|p| p.len() >= 4) {
            if !out.iter().any(|o| o == p) {
                out.push(p.to_owned());
            }
        }
    }
    // Longest first, so a value is scrubbed whole before its token part.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.into()
}

fn redact(mut text: String, secrets: &[String]) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "[redacted]");
        }
    }
    text
}

/// Accepts any certificate (`--insecure`), but still checks that the handshake is signed by the
/// key of the certificate presented, with the provider's algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config(
    ca_file: Option<&std::path::Path>,
    insecure: bool,
) -> Result<rustls::ClientConfig, ClientError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let err = |reason: String| ClientError::CaFile {
            path: path.display().to_string(),
            reason,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| err(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| err(e.to_string()))?;
        if certs.is_empty() {
            return Err(err("no certificate found".into()));
        }
        for c in certs {
            roots.add(c).map_err(|e| err(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    Ok(if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        // Verification on: web roots plus --ca-file, names checked against the URL's host.
        builder.with_root_certificates(roots).with_no_client_auth()
    })
}

/// A `--header` or `--api-key` that cannot go in an HTTP header. The value stays out of the
/// message: it may be a credential.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeaderError {
    /// Not a valid header name.
    #[error("invalid header name {0:?}")]
    Name(String),
    /// The value holds characters a header may not carry.
    #[error("invalid value for header {0:?}")]
    Value(String),
    /// The API key holds characters a header may not carry.
    #[error("the API key holds characters not allowed in a header")]
    ApiKey,
}

/// Builds the header map: custom headers, then the bearer key (which wins over a custom one).
pub(crate) fn build_headers(
    custom: &[(String, String)],
    api_key: Option<&str>,
) -> Result<HeaderMap, HeaderError> {
    let mut map = HeaderMap::new();
    for (k, v) in custom {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| HeaderError::Name(k.clone()))?;
        let mut value = HeaderValue::from_str(v).map_err(|_| HeaderError::Value(k.clone()))?;
        value.set_sensitive(is_credential(&name));
        map.append(name, value);
    }
    if let Some(key) = api_key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| HeaderError::ApiKey)?;
        value.set_sensitive(true);
        map.insert(AUTHORIZATION, value);
    }
    Ok(map)
}

/// Most SSE events one response may carry: about 16 times the longest output any server streams
/// today (one token per event), small enough that a hostile endless stream cannot grow a record's
/// per-event gaps without bound.
const MAX_EVENTS: u32 = 1 << 22;

/// Progress of one response body through the SSE parser.
struct StreamState {
    parser: SseParser,
    streaming: bool,
    done: bool,
    first_token: Option<Instant>,
    /// Events of the current read, each stamped when its blank line was parsed; reused per read.
    parsed: Vec<(Instant, Result<Event, sse::Malformed>)>,
    last_event: Instant,
    prev_completion_tokens: u64,
    per_chunk_usage: bool,
    final_usage: Option<sse::Usage>,
    stream_error: Option<String>,
    malformed: Option<String>,
    body: Vec<u8>,
    body_bytes: usize,
    max_body: usize,
    /// The response text, when the caller asked for it.
    text: Option<String>,
    max_events: u32,
}

impl StreamState {
    fn new(max_event: usize, max_body: usize, streaming: bool) -> Self {
        StreamState {
            parser: SseParser::new(max_event),
            streaming,
            done: false,
            first_token: None,
            parsed: Vec::new(),
            last_event: Instant::now(),
            prev_completion_tokens: 0,
            per_chunk_usage: false,
            final_usage: None,
            stream_error: None,
            malformed: None,
            body: Vec::new(),
            body_bytes: 0,
            max_body,
            text: None,
            max_events: MAX_EVENTS,
        }
    }

    fn on_data(
        &mut self,
        data: &[u8],
        now: Instant,
        clock: &Clock,
        rec: &mut RequestRecord,
    ) -> Result<(), (FailureKind, String)> {
        // A server may dribble keep-alive bytes for hours: counters saturate, never wrap.
        rec.reads = rec.reads.saturating_add(1);
        self.last_event = now;
        if !self.streaming {
            // Buffer the whole JSON body (capped), parse at the end.
            self.body_bytes += data.len();
            if self.body_bytes > self.max_body {
                return Err((
                    FailureKind::Oversized,
                    format!(
                        "response body exceeds the {}-byte body size cap (raise --max-event-bytes \
                         if the server really sends such bodies)",
                        self.max_body
                    ),
                ));
            }
            self.body.extend_from_slice(data);
            return Ok(());
        }
        let mut parsed = std::mem::take(&mut self.parsed);
        let text = &mut self.text;
        self.parser
            .push(data, |ev| {
                parsed.push((Instant::now(), classify(ev)));
                if let Some(t) = text.as_mut() {
                    sse::append_text(ev, t);
                }
            })
            .map_err(|e| (FailureKind::Oversized, e.to_string()))?;
        for (at, ev) in parsed.drain(..) {
            rec.events += 1;
            match ev {
                Err(m) => {
                    self.malformed.get_or_insert(m.0);
                }
                Ok(Event::Done) => self.done = true,
                Ok(Event::Error(m)) => {
                    self.stream_error.get_or_insert(m);
                }
                Ok(Event::Chunk(c)) => self.on_chunk(c, at, clock, rec),
            }
        }
        self.parsed = parsed;
        if let Some(m) = self.malformed.take() {
            return Err((FailureKind::Malformed, m));
        }
        if rec.events > self.max_events {
            // Each content event keeps a gap for the histograms: bound them per request.
            return Err((
                FailureKind::Oversized,
                format!(
                    "response exceeds the events-per-response cap ({} SSE events)",
                    self.max_events
                ),
            ));
        }
        Ok(())
    }

    fn on_chunk(
        &mut self,
        c: sse::ChunkInfo,
        now: Instant,
        clock: &Clock,
        rec: &mut RequestRecord,
    ) {
        let now_ns = clock.ns(now);
        let has_token = c.content || c.reasoning;
        let mut chunk_tokens = 0u64;
        if let Some(u) = c.usage {
            if let Some(ct) = u.completion_tokens {
                if has_token {
                    self.per_chunk_usage = true;
                    chunk_tokens = ct.saturating_sub(self.prev_completion_tokens);
                }
                self.prev_completion_tokens = ct;
            }
            self.final_usage = Some(u);
        }
        if let Some(r) = c.finish_reason {
            rec.finish_reason = Some(r);
        }
        if !has_token {
            return;
        }
        rec.content_events += 1;
        match rec.content_events {
            1 => {
                rec.first_token_ns = Some(now_ns);
                self.first_token = Some(now);
                if self.per_chunk_usage {
                    rec.first_chunk_tokens = Some(chunk_tokens);
                }
            }
            2 => rec.second_token_ns = Some(now_ns),
            _ => {}
        }
        if c.content && rec.first_output_token_ns.is_none() {
            rec.first_output_token_ns = Some(now_ns);
        }
        if let Some(prev) = rec.last_token_ns {
            rec.chunk_gaps.push(ChunkGap {
                gap_ns: now_ns.saturating_sub(prev),
                tokens: chunk_tokens as u32,
            });
        }
        rec.last_token_ns = Some(now_ns);
    }

    fn finish_failed(
        self,
        rec: RequestRecord,
        clock: &Clock,
        kind: FailureKind,
        msg: String,
    ) -> RequestRecord {
        let mut rec = fail(rec, clock, kind, msg);
        self.apply_usage(&mut rec);
        rec
    }

    fn apply_usage(&self, rec: &mut RequestRecord) {
        if let Some(u) = self.final_usage {
            rec.prompt_tokens = u.prompt_tokens;
            rec.completion_tokens = u.completion_tokens;
            rec.reasoning_tokens = u.reasoning_tokens;
            rec.token_source = if self.per_chunk_usage {
                TokenSource::UsagePerChunk
            } else {
                TokenSource::UsageFinal
            };
        }
    }

    fn finish(mut self, mut rec: RequestRecord, clock: &Clock, streaming: bool) -> RequestRecord {
        if !streaming {
            let body = std::mem::take(&mut self.body);
            if let Some(t) = self.text.as_mut() {
                sse::append_text(&body, t);
            }
            match classify(&body) {
                Ok(Event::Chunk(c)) => {
                    self.on_chunk(c, Instant::now(), clock, &mut rec);
                    // One body, one usage: not a per-chunk count.
                    self.per_chunk_usage = false;
                    rec.first_chunk_tokens = None;
                }
                Ok(Event::Error(m)) => self.stream_error = Some(m),
                Ok(Event::Done) => {
                    self.malformed = Some("body was [DONE], not a completion".into())
                }
                Err(m) => self.malformed = Some(m.0),
            }
            self.done = true;
        }
        self.apply_usage(&mut rec);
        let (kind, msg) = if let Some(m) = self.stream_error.take() {
            (FailureKind::StreamError, m)
        } else if let Some(m) = self.malformed.take() {
            (FailureKind::Malformed, m)
        } else if !self.done && (self.parser.has_pending() || rec.finish_reason.is_none()) {
            (
                FailureKind::ConnectionClosed,
                "stream ended before [DONE]".to_string(),
            )
        } else if matches!(rec.finish_reason.as_deref(), Some("abort" | "error")) {
            (
                FailureKind::StreamError,
                format!(
                    "finish_reason {}",
                    rec.finish_reason.as_deref().unwrap_or_default()
                ),
            )
        } else if self.final_usage.and_then(|u| u.completion_tokens).is_none() {
            (FailureKind::MissingUsage, "no usage.completion_tokens in the response (is stream_options.include_usage honoured?)".to_string())
        } else if rec.content_events == 0 || rec.completion_tokens == Some(0) {
            (
                FailureKind::NoOutput,
                "response carried no output token".to_string(),
            )
        } else {
            rec.end_ns = clock.now_ns();
            rec.outcome = Outcome::Success;
            rec.response_text = self.text.take();
            return rec;
        };
        fail(rec, clock, kind, msg)
    }
}

fn fail(mut rec: RequestRecord, clock: &Clock, kind: FailureKind, msg: String) -> RequestRecord {
    rec.end_ns = clock.now_ns();
    rec.outcome = Outcome::Failed(kind);
    rec.error = Some(msg);
    rec
}

fn cancelled(mut rec: RequestRecord, clock: &Clock) -> RequestRecord {
    rec.end_ns = clock.now_ns();
    rec.outcome = Outcome::Cancelled;
    rec.error = Some("cancelled".into());
    rec
}

/// Connect failures split by whether our connect timeout fired.
fn classify_transport(e: &hyper_util::client::legacy::Error) -> FailureKind {
    if e.is_connect() {
        let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
        while let Some(s) = src {
            if s.is::<ConnectTimedOut>() {
                return FailureKind::ConnectTimeout;
            }
            src = s.source();
        }
        return FailureKind::Connect;
    }
    FailureKind::ConnectionClosed
}

/// An error and its causes on one line: `a: b: c`.
fn describe(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let cs = c.to_string();
        if !s.contains(&cs) {
            s.push_str(": ");
            s.push_str(&cs);
        }
        src = c.source();
    }
    s
}

/// The connect timeout fired (TCP connect + TLS handshake).
#[derive(Debug, thiserror::Error)]
#[error("connect timed out after {0:?}")]
struct ConnectTimedOut(Duration);

/// Bounds the whole connector (TCP and TLS) in time.
#[derive(Clone)]
struct TimeoutConnector<C> {
    inner: C,
    timeout: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<Uri> for TimeoutConnector<C>
where
    C: tower_service::Service<Uri> + Send,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let fut = self.inner.call(uri);
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, fut).await {
                Ok(r) => r.map_err(Into::into),
                Err(_) => Err(Box::new(ConnectTimedOut(timeout)) as BoxError),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(state: &mut StreamState, data: &[u8]) -> Result<(), (FailureKind, String)> {
        let clock = Clock::new();
        let mut rec = RequestRecord::started(0, 0, 0, 0);
        state.on_data(data, Instant::now(), &clock, &mut rec)
    }

    #[test]
    fn credentials_are_marked_scrubbed_and_kept_to_the_target_origin() {
        let h = build_headers(
            &[
                ("X-Api-Key".into(), "k-123456".into()),
                ("X-Trace".into(), "visible".into()),
            ],
            Some("sk-secret-token"),
        )
        .unwrap();
        assert!(h["x-api-key"].is_sensitive() && h[AUTHORIZATION].is_sensitive());
        assert!(!h["x-trace"].is_sensitive());
        let s = secrets(&h);
        let text = "echo: Bearer sk-secret-token and sk-secret-token, k-123456, visible".to_owned();
        assert_eq!(
            redact(text, &s),
            "echo: [redacted] and [redacted], [redacted], visible"
        );
        assert!(
            !format!("{h:?}").contains("sk-secret-token"),
            "Debug hides them"
        );
        let target: Uri = "https://Api.Example:8443/v1".parse().unwrap();
        let origin = origin_of(&target);
        assert!(same_origin(
            &"https://api.example:8443/metrics".parse().unwrap(),
            &origin
        ));
        assert!(!same_origin(
            &"https://decode0:8443/metrics".parse().unwrap(),
            &origin
        ));
        assert!(!same_origin(
            &"http://api.example:8443/metrics".parse().unwrap(),
            &origin
        ));
    }

    #[test]
    fn each_response_cap_fails_as_oversized_and_names_itself() {
        let mut body = StreamState::new(1024, 16, false);
        let (kind, msg) = on(&mut body, &[b'x'; 17]).unwrap_err();
        assert_eq!(kind, FailureKind::Oversized);
        assert!(msg.contains("body size cap"), "{msg}");

        let mut line = StreamState::new(16, 1024, true);
        let (kind, msg) = on(&mut line, &[b':'; 17]).unwrap_err();
        assert_eq!(kind, FailureKind::Oversized);
        assert!(msg.contains("event size cap"), "{msg}");

        let mut events = StreamState::new(1024, 1024, true);
        events.max_events = 3;
        let clock = Clock::new();
        let mut rec = RequestRecord::started(0, 0, 0, 0);
        let chunk = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        for _ in 0..3 {
            events
                .on_data(chunk, Instant::now(), &clock, &mut rec)
                .unwrap();
        }
        let (kind, msg) = events
            .on_data(chunk, Instant::now(), &clock, &mut rec)
            .unwrap_err();
        assert_eq!(kind, FailureKind::Oversized);
        assert!(msg.contains("events-per-response cap"), "{msg}");
    }
}
