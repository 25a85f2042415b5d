//! One HTTP request -> one [`RequestRecord`]: pooled connections, every phase bounded in time,
//! one timestamp per SSE event. Plain `http://` with HTTP/1.1 (every benchmark request there
//! unless `--http http2`) goes through `h1`, read by the request's own task; TLS (ALPN via
//! rustls/ring) and HTTP/2 through hyper.
//!
//! The client never returns an error for a request: whatever happens (refused connection, timeout,
//! HTTP 500, cut stream, cancellation) becomes the record's [`Outcome`](crate::record::Outcome).
//!
//! This file holds the client and one request's life (`follow`); `body` the request body as
//! shared slices, `connect` the TLS setup and the connect time limit, `credentials` the header
//! map and its scrubbing, `stream` the response body through the SSE parser (`sse`) into the
//! record, `fetch` the bounded `GET`s beside the load (on hyper), `h1` the HTTP/1.1 path.

mod body;
mod connect;
mod credentials;
mod fetch;
mod h1;
pub(crate) mod lines;
mod spec;
pub mod sse;
mod stream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::{capture_connection, HttpConnector};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;

use crate::record::{FailureKind, HttpTrace, RequestRecord};
use connect::{tls_config, ConnectTimedOut, Served, TimeoutConnector};
use credentials::{redact, same_origin, secrets};
use stream::{cancelled, fail, StreamState};

use body::Sending;
pub(crate) use body::{Body, Payload};
pub(crate) use credentials::{build_headers, origin_of};
pub(crate) use fetch::{BodyCap, Fetched};

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

/// Connection reuse across requests (AIPerf's `--connection-reuse-strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionReuse {
    /// Keep connections open and reuse them for later requests.
    #[default]
    Pooled,
    /// A fresh connection for every request, closed after its response.
    Never,
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
    pub(crate) reuse: ConnectionReuse,
    /// Times a 429 answer is retried after its `Retry-After` (0: never).
    pub(crate) rate_limit_retries: u32,
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
    inner: HyperClient<Connector, Sending>,
    /// Same connector, no pool: the one retry after a reused connection closed goes out on a
    /// connection of its own (any other idle one may be just as stale).
    fresh: HyperClient<Connector, Sending>,
    /// HTTP/1.1 on plain `http://` (every request there unless `--http http2`): read by the
    /// request's own task, no hyper.
    h1: Arc<h1::Pool>,
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

/// The most an HTTP/1 connection reads at once: dozens of SSE events. `h1` and hyper also cap a
/// response head at this size (a larger one fails the request, `connection_closed`, naming it);
/// aiohttp, under AIPerf and `vllm bench serve`, refuses a header line over 8 KiB.
const READ_CHUNK: usize = 16 << 10;

/// One request ready to send.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub(crate) uri: Uri,
    pub(crate) body: Payload,
    pub(crate) streaming: bool,
    /// Read the streamed body line by line as `benchmark_serving.py` does (`bench-serving`);
    /// `None`: as SSE events, the house's reading.
    pub(crate) lines: Option<lines::Api>,
    /// Keep the response text (multi-turn sessions thread it into the next turn).
    pub(crate) capture_text: bool,
    /// Headers of this request only (AgentX: `X-Request-ID`, `X-Correlation-ID`, session
    /// routing), sent after the configured ones; empty for every other workload.
    pub(crate) headers: HeaderMap,
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
        let builder = |max_idle: usize| {
            let mut b = HyperClient::builder(TokioExecutor::new());
            // Reads of at most READ_CHUNK: hyper's adaptive buffer doubles to 64 KiB and more
            // whenever a read fills it (a stream's events queued while the client was busy),
            // and keeps that size per connection; at 1,536 AgentX streams the buffers came to
            // ~100 MB of the run's ~300 MB heap.
            b.pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(max_idle)
                .http1_read_buf_exact_size(READ_CHUNK);
            if opts.http == HttpVersion::Http2 {
                b.http2_only(true);
            }
            b
        };
        let max_idle = match opts.reuse {
            ConnectionReuse::Pooled => usize::MAX,
            ConnectionReuse::Never => 0,
        };
        Ok(Client {
            inner: builder(max_idle).build(connector.clone()),
            fresh: builder(0).build(connector),
            h1: Arc::new(h1::Pool::new(
                opts.reuse == ConnectionReuse::Pooled,
                opts.timeouts.connect,
            )),
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

    /// Sends one request and follows it to the end. Never fails: the outcome is in the record.
    /// The request is consumed: its body is freed once the response head is in, since nothing
    /// is sent again after it (at 16,384 streams of 8k-token prompts, the bodies were most of
    /// what the client held).
    pub(crate) fn execute<'a>(
        &'a self,
        req: Prepared,
        rec: RequestRecord,
        clock: &'a Clock,
        cancel: &'a CancellationToken,
    ) -> impl std::future::Future<Output = RequestRecord> + 'a {
        // Not an `async fn`, and `follow` boxed: an `async fn`'s arguments, and an async block's
        // captured future, stay in its state for the whole stream beside the copy being polled
        // (the task of one stream was 4 KB, half of it copies). The request is on the heap too,
        // freed once written.
        let follow = Box::pin(self.follow(Box::new(req), rec, clock, cancel));
        async move {
            let mut rec = follow.await;
            rec.error = rec.error.map(|e| redact(e, &self.secrets));
            rec
        }
    }

    async fn follow(
        &self,
        req: Box<Prepared>,
        mut rec: RequestRecord,
        clock: &Clock,
        cancel: &CancellationToken,
    ) -> RequestRecord {
        let t = self.opts.timeouts;
        let sent = Instant::now();
        rec.sent_ns = clock.ns(sent);
        let total_deadline = sent + t.total;
        let first_deadline = (sent + t.first_token).min(total_deadline);
        let first_kind = if sent + t.first_token <= total_deadline {
            FailureKind::TtftTimeout
        } else {
            FailureKind::TotalTimeout
        };

        // The times stay those of the first send: a retry is part of what the user waited for.
        let (mut fresh, mut limited) = (false, 0u32);
        let resp = loop {
            let answer = tokio::select! {
                biased;
                _ = cancel.cancelled() => return cancelled(rec, clock),
                r = self.send_one(&req, fresh) => r,
                _ = tokio::time::sleep_until(first_deadline.into()) => {
                    return fail(rec, clock, first_kind, format!("no response headers within {:?}", first_deadline - sent));
                }
            };
            match answer {
                Ok(a)
                    if a.status == StatusCode::TOO_MANY_REQUESTS
                        && limited < self.opts.rate_limit_retries =>
                {
                    // Asked for (--rate-limit-retries): come back when the server said, if
                    // that is still before the first-token deadline.
                    let wait = retry_after(&a.headers);
                    if Instant::now() + wait >= first_deadline {
                        break a;
                    }
                    drop(a);
                    limited += 1;
                    rec.retries += 1;
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => return cancelled(rec, clock),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                Ok(a) => break a,
                Err(e) if !fresh && e.closed_after_reuse => {
                    fresh = true;
                    rec.retries += 1;
                }
                Err(e) => return fail(rec, clock, e.kind, e.msg),
            }
        };
        rec.headers_ns = Some(clock.now_ns());
        // A resend (a reused connection closed under it, a 429 retried) happens only before the
        // head: what made the body goes now, not when the stream ends.
        let (streaming, capture_text, lines) = (req.streaming, req.capture_text, req.lines);
        drop(req);
        rec.http = Some(HttpTrace {
            connection_reused: resp.reused,
            bytes_sent: resp.bytes_sent,
            ..HttpTrace::default()
        });
        let status = resp.status;
        rec.http_status = Some(status.as_u16());
        // Kept for the failure message: a rate limiter's 429 says when to come back.
        let retry_after = resp
            .headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(|v| format!(" (Retry-After: {v})"))
            .unwrap_or_default();
        let mut body = resp.body;

        let mut state = StreamState::new(
            self.opts.max_event_bytes,
            self.opts.max_body_bytes,
            streaming,
        );
        if let Some(api) = lines {
            state.read_lines(api);
        }
        if capture_text {
            state.text = Some(String::new());
        }
        // One timer for the whole stream, re-armed lazily: it fires at the earliest deadline that
        // could apply and is pushed forward when events moved the real deadline.
        let sleep = tokio::time::sleep_until(first_deadline.into());
        tokio::pin!(sleep);
        // Registered with the token once for the stream, not once per event.
        let stop = cancel.cancelled();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => return cancelled(rec, clock),
                more = body.next() => match more {
                    Ok(false) => break,
                    Err((kind, msg)) => {
                        if state.done {
                            break; // the stream already ended; a close afterwards costs nothing
                        }
                        return state.finish_failed(rec, clock, kind, msg);
                    }
                    Ok(true) => {
                        let now = Instant::now();
                        let mut i = 0;
                        while let Some(data) = body.span(i) {
                            i += 1;
                            if let Some(h) = rec.http.as_mut() {
                                let at = clock.ns(now);
                                h.bytes_received += data.len() as u64;
                                h.frames_received = h.frames_received.saturating_add(1);
                                h.first_frame_ns.get_or_insert(at);
                                h.last_frame_ns = Some(at);
                            }
                            if !status.is_success() {
                                if state.body.len() < 64 * 1024 {
                                    state.body.extend_from_slice(data);
                                }
                                continue;
                            }
                            let had_token = state.first_token.is_some();
                            if let Err((kind, msg)) = state.on_data(data, now, clock, &mut rec) {
                                return state.finish_failed(rec, clock, kind, msg);
                            }
                            if !had_token && state.first_token.is_some() {
                                // The idle deadline may be earlier than the first-token one the
                                // timer is armed for; the lazy re-arm only ever moves it later.
                                sleep.as_mut().reset((now + t.idle).min(total_deadline).into());
                            }
                        }
                        if state.done && !streaming {
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
                "HTTP {}{retry_after}: {}",
                status.as_u16(),
                sse::error_message(&String::from_utf8_lossy(&state.body))
            );
            return fail(rec, clock, FailureKind::HttpStatus, msg);
        }
        state.finish(rec, clock, streaming)
    }
}

/// A response whose head arrived, on either path.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    /// The request body's length, as written.
    bytes_sent: u64,
    /// It came on a kept-alive connection that had served a response before.
    reused: bool,
    body: Incoming,
}

/// Why a send got no response head.
struct SendFailure {
    kind: FailureKind,
    msg: String,
    /// A kept-alive connection closed before any byte of the answer (see `closed_after_reuse`).
    closed_after_reuse: bool,
}

/// A response body: hyper's frames, or the reader of [`h1`].
enum Incoming {
    Hyper {
        body: hyper::body::Incoming,
        data: bytes::Bytes,
    },
    H1(h1::Response),
}

impl Incoming {
    /// Waits for the next bytes (`Ok(true)`, then [`Self::span`]) or the end (`Ok(false)`).
    /// Cancel-safe on both paths.
    async fn next(&mut self) -> Result<bool, (FailureKind, String)> {
        match self {
            Incoming::Hyper { body, data } => loop {
                match body.frame().await {
                    None => return Ok(false),
                    Some(Err(e)) => {
                        let kind = if e.is_timeout() {
                            FailureKind::Transport
                        } else {
                            FailureKind::ConnectionClosed
                        };
                        return Err((kind, describe(&e)));
                    }
                    Some(Ok(frame)) => {
                        if let Ok(d) = frame.into_data() {
                            *data = d;
                            return Ok(true);
                        }
                    }
                }
            },
            Incoming::H1(r) => r
                .next()
                .await
                .map_err(|b| (FailureKind::ConnectionClosed, b.0)),
        }
    }

    /// The `i`-th span of data the last [`Self::next`] brought.
    fn span(&self, i: usize) -> Option<&[u8]> {
        match self {
            Incoming::Hyper { data, .. } => (i == 0).then_some(&data[..]),
            Incoming::H1(r) => r.span(i),
        }
    }
}

impl Client {
    /// Whether requests to `uri` go through [`h1`]: plain `http://` unless `--http http2`.
    fn plain_h1(&self, uri: &Uri) -> bool {
        uri.scheme_str() == Some("http") && self.opts.http != HttpVersion::Http2
    }

    /// Opens one kept-alive connection to the target before the clock starts, by a `GET` of
    /// `uri` (the server's `/health`) within `limit`, in the pool the run's requests take theirs
    /// from. Best effort: any failure leaves the first request to connect itself.
    pub(crate) async fn warm(&self, uri: Uri, limit: Duration) {
        if !self.plain_h1(&uri) {
            let cap = BodyCap {
                bytes: 64 << 10,
                name: "health body size cap",
            };
            let _ = self.get(uri, limit, "*/*", cap).await;
            return;
        }
        let headers: Vec<&HeaderMap> = self.headers_for(&uri).into_iter().collect();
        let answer = async {
            let mut r = h1::send(&self.h1, &uri, &headers, h1::Ask::Get, false)
                .await
                .ok()?;
            // Read to the end, so the connection goes back to the pool; a body past 64 KiB is
            // not a health answer, and the connection goes with it.
            let mut read = 0;
            while r.next().await.ok()? {
                read += (0..)
                    .map_while(|i| r.span(i))
                    .map(<[u8]>::len)
                    .sum::<usize>();
                if read > 64 << 10 {
                    return None;
                }
            }
            Some(())
        };
        let _ = tokio::time::timeout(limit, answer).await;
    }

    /// Sends `req` once and waits for the response head: on plain `http://` with HTTP/1.1
    /// through [`h1`], else through hyper.
    async fn send_one(&self, req: &Prepared, fresh: bool) -> Result<Answer, SendFailure> {
        if self.plain_h1(&req.uri) {
            let configured = self.headers_for(&req.uri);
            let headers: Vec<&HeaderMap> = configured.into_iter().chain([&req.headers]).collect();
            return match h1::send(
                &self.h1,
                &req.uri,
                &headers,
                h1::Ask::Post {
                    body: &req.body,
                    streaming: req.streaming,
                },
                fresh,
            )
            .await
            {
                Ok(mut r) => Ok(Answer {
                    status: r.status,
                    headers: std::mem::take(&mut r.headers),
                    bytes_sent: r.bytes_sent,
                    reused: r.reused,
                    body: Incoming::H1(r),
                }),
                Err(e) => Err(SendFailure {
                    kind: e.kind,
                    msg: e.msg,
                    closed_after_reuse: e.closed_after_reuse,
                }),
            };
        }
        let body = req.body.body();
        let bytes_sent = body.len() as u64;
        let http_req = self.request(req, body).map_err(|e| SendFailure {
            kind: FailureKind::Transport,
            msg: e.to_string(),
            closed_after_reuse: false,
        })?;
        match self.send_traced(http_req, fresh).await {
            Ok((r, reused)) => {
                let (parts, body) = r.into_parts();
                Ok(Answer {
                    status: parts.status,
                    headers: parts.headers,
                    bytes_sent,
                    reused,
                    body: Incoming::Hyper {
                        body,
                        data: bytes::Bytes::new(),
                    },
                })
            }
            Err(e) => Err(SendFailure {
                kind: classify_transport(&e),
                msg: describe(&e),
                closed_after_reuse: closed_after_reuse(&e),
            }),
        }
    }

    /// Sends on a pooled connection (or a fresh one), and marks the connection as having served
    /// a response once its head arrives.
    async fn send(
        &self,
        req: Request<Sending>,
        fresh: bool,
    ) -> Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        self.send_traced(req, fresh).await.map(|(r, _)| r)
    }

    /// [`Self::send`], also saying whether the connection had served a response before (the
    /// request reused a kept-alive connection).
    async fn send_traced(
        &self,
        mut req: Request<Sending>,
        fresh: bool,
    ) -> Result<(http::Response<hyper::body::Incoming>, bool), hyper_util::client::legacy::Error>
    {
        let captured = capture_connection(&mut req);
        let client = if fresh { &self.fresh } else { &self.inner };
        let resp = client.request(req).await?;
        let mut reused = false;
        if let Some(served) = captured.connection_metadata().as_ref().and_then(Served::of) {
            reused = served.get();
            served.mark();
        }
        Ok((resp, reused))
    }

    /// The HTTP request for one send of `req`.
    fn request(&self, req: &Prepared, body: Body) -> Result<Request<Sending>, http::Error> {
        let mut builder = Request::builder().method(Method::POST).uri(req.uri.clone());
        for (k, v) in self.headers_for(&req.uri).into_iter().flatten() {
            builder = builder.header(k, v);
        }
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        builder = builder.header(CONTENT_TYPE, "application/json");
        if req.streaming {
            builder = builder.header(ACCEPT, "text/event-stream");
        }
        builder.body(body.sending())
    }
}

/// How long a 429 asks to wait: `Retry-After` in seconds (an HTTP date or nothing: 1 s), at
/// most a minute.
fn retry_after(h: &HeaderMap) -> Duration {
    let secs = h
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(1.0);
    Duration::from_secs_f64(secs.min(60.0))
}

/// True when a request failed on a connection that had already served a response, because that
/// connection was closed or reset before any byte of this response: the server closed it between
/// requests (llama-server does so after a stream while advertising keep-alive), so the request
/// never reached the application and sending it again counts nothing twice. A parse error, a
/// timeout or a failure on a fresh connection is not this.
fn closed_after_reuse(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let reused = e
        .connect_info()
        .and_then(Served::of)
        .is_some_and(|s| s.get());
    if !reused {
        return false;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = src {
        if let Some(h) = c.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return true;
            }
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        src = c.source();
    }
    false
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::AUTHORIZATION;

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

    /// Sends one streamed request whose body's bytes report their drop, to a server that sends
    /// the head once the body is gone (`before_head`) or after the first event; the server holds
    /// its next step until it sees the body gone (at most 5 s, then it says so).
    async fn body_freed(deferred: bool, before_head: bool) -> bool {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        struct Owner(Vec<u8>, Arc<AtomicBool>);
        impl AsRef<[u8]> for Owner {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
        impl Drop for Owner {
            fn drop(&mut self) {
                self.1.store(true, SeqCst);
            }
        }
        let freed = Arc::new(AtomicBool::new(false));
        let json = br#"{"model":"m","prompt":"hello","stream":true}"#.to_vec();
        let body: Payload = if deferred {
            let (json, freed) = (json, freed.clone());
            Payload::Deferred(Arc::new(move || {
                bytes::Bytes::from_owner(Owner(json.clone(), freed.clone())).into()
            }))
        } else {
            bytes::Bytes::from_owner(Owner(json, freed.clone())).into()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = freed.clone();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = vec![0; 4096];
            let _ = sock.read(&mut req).await.unwrap();
            let event = |text: &str| {
                let e = format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\"}}]}}\n\n");
                format!("{:x}\r\n{e}\r\n", e.len())
            };
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            let wait_freed = || async {
                let deadline = Instant::now() + Duration::from_secs(5);
                while !seen.load(SeqCst) && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                seen.load(SeqCst)
            };
            let freed_in_time = if before_head {
                let freed = wait_freed().await;
                sock.write_all(format!("{head}{}", event("a")).as_bytes())
                    .await
                    .unwrap();
                freed
            } else {
                sock.write_all(format!("{head}{}", event("a")).as_bytes())
                    .await
                    .unwrap();
                wait_freed().await
            };
            let usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\
                         \"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n";
            let tail = format!("{}{:x}\r\n{usage}\r\n0\r\n\r\n", event("b"), usage.len());
            sock.write_all(tail.as_bytes()).await.unwrap();
            freed_in_time
        });
        let limit = Duration::from_secs(10);
        let client = Client::new(ClientOptions {
            http: HttpVersion::Auto,
            reuse: ConnectionReuse::Pooled,
            rate_limit_retries: 0,
            timeouts: Timeouts {
                connect: limit,
                first_token: limit,
                idle: limit,
                total: limit,
            },
            headers: HeaderMap::new(),
            origin: None,
            insecure: false,
            ca_file: None,
            max_event_bytes: 1 << 20,
            max_body_bytes: 1 << 20,
        })
        .unwrap();
        let req = Prepared {
            uri: format!("http://{addr}/v1/completions").parse().unwrap(),
            body,
            streaming: true,
            lines: None,
            capture_text: false,
            headers: HeaderMap::new(),
        };
        let rec = RequestRecord::started(0, 0, 0, 0);
        let rec = client
            .execute(req, rec, &Clock::new(), &CancellationToken::new())
            .await;
        assert_eq!(
            rec.outcome,
            crate::record::Outcome::Success,
            "{:?}",
            rec.error
        );
        assert_eq!(rec.content_events, 2);
        assert_eq!(rec.http.map(|h| h.bytes_sent), Some(44));
        server.await.unwrap()
    }

    /// A body handed over made is freed once the response head is in, while the answer still
    /// streams: a request no longer holds its prompt for the length of its answer.
    #[tokio::test]
    async fn a_ready_body_is_freed_once_the_head_is_in() {
        assert!(
            body_freed(false, false).await,
            "the body was still held while the answer streamed"
        );
    }

    /// A deferred body is made when the connection is ready and freed once written, before any
    /// answer: a request waiting for its head holds no body.
    #[tokio::test]
    async fn a_deferred_body_is_freed_once_written() {
        assert!(
            body_freed(true, true).await,
            "the body was still held while the head was awaited"
        );
    }
}
