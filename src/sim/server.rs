//! Listeners, routing and the streaming body of the simulator.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::{Method, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::model::{plan, request_rng, Emission, EngineCounters, Plan, PlanParams};
use super::timer::PreciseTimer;
use super::{Fault, ReasoningField, SimConfig, SimError, FAULT_HEADER};
use crate::scrape::prom::{Format, Writer};

/// Lateness of emissions against their schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatenessStats {
    /// Emissions measured.
    pub count: u64,
    /// Median lateness, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
}

struct Shared {
    cfg: SimConfig,
    p: f64,
    timer: PreciseTimer,
    engines: Vec<EngineCounters>,
    seq: AtomicU64,
    lateness: Mutex<(Histogram<u64>, u64)>,
    created: f64,
    model_json: String,
    /// Completion requests served over HTTP/2 (the rest were HTTP/1.x).
    http2_requests: AtomicU64,
    /// The first `record_requests` request bodies, for tests that check what was sent.
    requests: Mutex<Vec<Value>>,
}

impl Shared {
    fn record_lateness(&self, late: Duration) {
        let ns = late.as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut g = self.lateness.lock().unwrap_or_else(|e| e.into_inner());
        g.0.saturating_record(ns.max(1));
        g.1 += ns;
    }
}

struct ServerCtx {
    shared: Arc<Shared>,
    engines: Range<usize>,
    rr: AtomicU64,
}

/// A bound (not yet serving) simulator.
pub struct Simulator {
    shared: Arc<Shared>,
    listeners: Vec<(TcpListener, Range<usize>)>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Simulator {
    /// Validates `cfg` and binds every listener.
    pub async fn bind(cfg: SimConfig) -> Result<Simulator, SimError> {
        cfg.validate()?;
        // Each client connection is a descriptor here: take what the hard limit allows, so
        // thousands of streams do not fail to accept at the usual soft limit of 1024.
        let _ = crate::fdlimit::ensure(None, 1);
        let tls = cfg.tls.as_ref().map(tls_acceptor).transpose()?;
        let timer = PreciseTimer::start().map_err(SimError::Start)?;
        let total = (cfg.servers * cfg.engines) as usize;
        let engines = (0..total as u32)
            .map(|r| EngineCounters::new(r, cfg.k))
            .collect();
        let mut listeners = Vec::new();
        for i in 0..cfg.servers {
            let port = if cfg.port == 0 {
                0
            } else {
                cfg.port + i as u16
            };
            let addr = SocketAddr::new(cfg.host, port);
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| SimError::Bind {
                    addr: addr.to_string(),
                    source,
                })?;
            let first = (i * cfg.engines) as usize;
            listeners.push((l, first..first + cfg.engines as usize));
        }
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let hist = Histogram::new_with_bounds(1, 600_000_000_000, 3)
            .map_err(|e| SimError::Config(e.to_string()))?;
        let shared = Arc::new(Shared {
            p: cfg.acceptance.probability(cfg.k),
            model_json: serde_json::to_string(&cfg.model).unwrap_or_else(|_| "\"\"".into()),
            cfg,
            timer,
            engines,
            seq: AtomicU64::new(0),
            lateness: Mutex::new((hist, 0)),
            created,
            http2_requests: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
        });
        Ok(Simulator {
            shared,
            listeners,
            tls,
        })
    }

    /// The bound addresses, one per server.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|(l, _)| l.local_addr().ok())
            .collect()
    }

    /// Serves until `cancel` fires; open connections are dropped then.
    pub async fn run(self, cancel: CancellationToken) {
        let mut tasks = tokio::task::JoinSet::new();
        for (listener, engines) in self.listeners {
            let ctx = Arc::new(ServerCtx {
                shared: self.shared.clone(),
                engines,
                rr: AtomicU64::new(0),
            });
            tasks.spawn(accept_loop(listener, ctx, self.tls.clone(), cancel.clone()));
        }
        cancel.cancelled().await;
        tasks.shutdown().await;
    }

    /// Serves until `stop` fires (used by `specperf sim`).
    pub async fn run_until(self, stop: &crate::stop::Stopper) {
        self.run(stop.token().clone()).await
    }

    /// Binds and serves on a dedicated thread with its own runtime, so its timing does not depend
    /// on the caller's runtime. Stops when the handle is dropped.
    pub fn spawn(cfg: SimConfig) -> Result<SimHandle, SimError> {
        type Ready = Result<(Vec<SocketAddr>, Arc<Shared>, &'static str), SimError>;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Ready>();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        // Binding happens on the simulator's own thread: the caller may itself be inside a runtime.
        let thread = std::thread::Builder::new()
            .name("specperf-sim-main".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("specperf-sim")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(SimError::Start(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Simulator::bind(cfg).await {
                        Ok(sim) => {
                            let scheme = if sim.tls.is_some() { "https" } else { "http" };
                            let _ = ready_tx.send(Ok((sim.addrs(), sim.shared.clone(), scheme)));
                            sim.run(c).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(SimError::Start)?;
        let (addrs, shared, scheme) = ready_rx.recv().map_err(|_| {
            SimError::Start(std::io::Error::other(
                "simulator thread exited during start",
            ))
        })??;
        Ok(SimHandle {
            addrs,
            scheme,
            shared,
            cancel,
            thread: Some(thread),
        })
    }
}

/// A simulator running on its own thread.
pub struct SimHandle {
    addrs: Vec<SocketAddr>,
    scheme: &'static str,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimHandle {
    /// Base URL of server 0, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        self.urls().remove(0)
    }

    /// Base URLs of every server.
    pub fn urls(&self) -> Vec<String> {
        self.addrs
            .iter()
            .map(|a| format!("{}://{a}", self.scheme))
            .collect()
    }

    /// The served model name.
    pub fn model(&self) -> &str {
        &self.shared.cfg.model
    }

    /// Totals over every engine: (drafts, draft tokens, accepted, generation tokens).
    pub fn totals(&self) -> SimTotals {
        let sum = |f: fn(&EngineCounters) -> &AtomicU64| {
            self.shared.engines.iter().map(|e| f(e).load(Relaxed)).sum()
        };
        SimTotals {
            drafts: sum(|e| &e.drafts),
            draft_tokens: sum(|e| &e.draft_tokens),
            accepted: sum(|e| &e.accepted),
            generation_tokens: sum(|e| &e.generation_tokens),
            prompt_tokens: sum(|e| &e.prompt_tokens),
            requests_success: sum(|e| &e.requests_success),
        }
    }

    /// The request bodies kept (`SimConfig::record_requests`), in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Completion requests that arrived over HTTP/2.
    pub fn http2_requests(&self) -> u64 {
        self.shared.http2_requests.load(Relaxed)
    }

    /// Emission lateness so far.
    pub fn lateness(&self) -> LatenessStats {
        lateness_stats(&self.shared)
    }
}

/// Counter totals across every engine of a simulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimTotals {
    /// `vllm:spec_decode_num_drafts_total`.
    pub drafts: u64,
    /// `vllm:spec_decode_num_draft_tokens_total`.
    pub draft_tokens: u64,
    /// `vllm:spec_decode_num_accepted_tokens_total`.
    pub accepted: u64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: u64,
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: u64,
    /// `vllm:request_success_total`.
    pub requests_success: u64,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lateness_stats(shared: &Shared) -> LatenessStats {
    let g = shared.lateness.lock().unwrap_or_else(|e| e.into_inner());
    let h = &g.0;
    let ms = |ns: u64| ns as f64 / 1e6;
    LatenessStats {
        count: h.len(),
        p50_ms: ms(h.value_at_quantile(0.5)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
    }
}

fn tls_acceptor(files: &super::TlsFiles) -> Result<tokio_rustls::TlsAcceptor, SimError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| SimError::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

async fn accept_loop(
    listener: TcpListener,
    ctx: Arc<ServerCtx>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    cancel: CancellationToken,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => a,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let Ok((stream, _)) = accepted else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let tls = tls.clone();
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(ctx.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            match tls {
                None => {
                    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                }
                Some(acceptor) => {
                    if let Ok(Ok(s)) =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
                    {
                        let _ = builder.serve_connection(TokioIo::new(s), svc).await;
                    }
                }
            }
        });
    }
    conns.shutdown().await;
}

/// Response body: a fixed buffer or a timed stream.
enum SimBody {
    Full(Option<Bytes>),
    Stream(Box<SimStream>),
}

impl http_body::Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Stream(s) => s.poll_next(cx),
        }
    }
}

fn json_response(status: StatusCode, body: String) -> Response<SimBody> {
    let mut r = Response::new(SimBody::Full(Some(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response<SimBody> {
    let body = serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}});
    json_response(status, body.to_string())
}

async fn handle(
    ctx: Arc<ServerCtx>,
    req: http::Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let path = req.uri().path().to_owned();
    let resp = match (req.method().clone(), path.as_str()) {
        (Method::GET, "/health") => Response::new(SimBody::Full(None)),
        (Method::GET, "/v1/models") => {
            let body = serde_json::json!({"object": "list", "data": [{"id": ctx.shared.cfg.model, "object": "model", "owned_by": "specperf", "max_model_len": 131072}]});
            json_response(StatusCode::OK, body.to_string())
        }
        (Method::GET, "/metrics") => {
            let mut r = Response::new(SimBody::Full(Some(Bytes::from(metrics_page(&ctx)))));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        (Method::POST, "/v1/chat/completions") => completion(ctx, req, true).await,
        (Method::POST, "/v1/completions") => completion(ctx, req, false).await,
        (_, p) => error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route {p}"),
        ),
    };
    Ok(resp)
}

/// What the request asked for.
struct Ask {
    stream: bool,
    include_usage: bool,
    continuous: bool,
    max_tokens: u32,
    ignore_eos: bool,
    prompt_tokens: u64,
}

fn parse_ask(v: &Value, chat: bool, default_max: u32) -> Result<Ask, String> {
    let obj = v.as_object().ok_or("request body must be a JSON object")?;
    let prompt_chars = if chat {
        let msgs = obj
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("`messages` must be a non-empty array")?;
        if msgs.is_empty() {
            return Err("`messages` must be a non-empty array".into());
        }
        msgs.iter()
            .map(|m| text_len(m.get("content").unwrap_or(&Value::Null)) + 16)
            .sum::<usize>()
    } else {
        match obj.get("prompt") {
            Some(p @ (Value::String(_) | Value::Array(_))) => text_len(p),
            _ => return Err("`prompt` must be a string or an array".into()),
        }
    };
    let num = |k: &str| obj.get(k).and_then(Value::as_u64);
    let max_tokens = if chat {
        num("max_completion_tokens").or_else(|| num("max_tokens"))
    } else {
        num("max_tokens")
    };
    let max_tokens = match max_tokens {
        Some(0) => return Err("max_tokens must be at least 1".into()),
        Some(n) => n.min(u64::from(u32::MAX)) as u32,
        None => default_max,
    };
    let flag = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
    let opts = obj.get("stream_options");
    Ok(Ask {
        stream: flag(obj.get("stream")),
        include_usage: flag(opts.and_then(|o| o.get("include_usage"))),
        continuous: flag(opts.and_then(|o| o.get("continuous_usage_stats"))),
        max_tokens,
        ignore_eos: flag(obj.get("ignore_eos")),
        // A stand-in tokenizer: about four characters per token, at least one.
        prompt_tokens: (prompt_chars as u64).div_ceil(4).max(1),
    })
}

fn text_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.chars().count(),
        Value::Array(a) => a.iter().map(text_len).sum(),
        Value::Object(o) => o.get("text").map(text_len).unwrap_or(0),
        _ => 0,
    }
}

async fn completion(
    ctx: Arc<ServerCtx>,
    req: http::Request<Incoming>,
    chat: bool,
) -> Response<SimBody> {
    let shared = ctx.shared.clone();
    let cfg = &shared.cfg;
    if req.version() == http::Version::HTTP_2 {
        shared.http2_requests.fetch_add(1, Relaxed);
    }
    let header_fault = match req.headers().get(FAULT_HEADER).map(|v| v.to_str().unwrap_or("")) {
        None => None,
        Some(name) => match Fault::from_name(name) {
            Some(f) => Some(f),
            None => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "BadRequestError",
                    &format!("unknown {FAULT_HEADER} value {name:?}; see `specperf sim --help` for fault names"),
                )
            }
        },
    };
    let body = match http_body_util::Limited::new(req.into_body(), 64 << 20)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("cannot read body: {e}"),
            )
        }
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("invalid JSON: {e}"),
            )
        }
    };
    if cfg.record_requests > 0 {
        let mut kept = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < cfg.record_requests {
            kept.push(v.clone());
        }
    }
    let ask = match parse_ask(&v, chat, cfg.default_max_tokens) {
        Ok(a) => a,
        Err(m) => return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &m),
    };
    let model = v.get("model").and_then(Value::as_str).unwrap_or("");
    if !cfg.model.is_empty() && model != cfg.model {
        return error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("The model `{model}` does not exist."),
        );
    }
    let n = shared.seq.fetch_add(1, Relaxed);
    let mut rng = request_rng(cfg.seed, n);
    let fault = header_fault.or_else(|| {
        let seq = &cfg.fault_sequence;
        if !seq.is_empty() {
            return seq[(n % seq.len() as u64) as usize];
        }
        let mut x: f64 = rng.random();
        for (f, r) in &cfg.fault_rates {
            if x < *r {
                return Some(*f);
            }
            x -= r;
        }
        None
    });
    match fault {
        Some(Fault::Http429) => {
            let mut r = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "RateLimitError",
                "simulated rate limit",
            );
            r.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            return r;
        }
        Some(Fault::Http500) => {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                "simulated server error",
            )
        }
        Some(Fault::Http503) => {
            return error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailableError",
                "simulated overload",
            )
        }
        Some(Fault::Stall) => {
            tokio::time::sleep(cfg.stall_limit).await;
            return error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                "simulated stall ended",
            );
        }
        Some(Fault::SlowHeaders) => tokio::time::sleep(cfg.slow_headers).await,
        _ => {}
    }
    let params = PlanParams {
        max_tokens: ask.max_tokens,
        ignore_eos: ask.ignore_eos,
        eos_probability: cfg.eos_probability,
        k: cfg.k,
        p: shared.p,
        ttft: cfg.ttft,
        itl: cfg.itl,
        jitter: cfg.jitter,
    };
    let plan = plan(&params, &mut rng);
    let span = ctx.engines.end - ctx.engines.start;
    let engine = ctx.engines.start + (ctx.rr.fetch_add(1, Relaxed) as usize % span);
    let counters = &shared.engines[engine];
    counters.prompt_tokens.fetch_add(ask.prompt_tokens, Relaxed);
    counters.running.fetch_add(1, Relaxed);
    let total = plan.total_tokens();
    let stream = SimStream {
        shared: shared.clone(),
        engine,
        t0: Instant::now(),
        idx: 0,
        emitted: 0,
        fault_at: if fault.is_some_and(Fault::mid_stream) {
            (total / 2).max(1)
        } else {
            u32::MAX
        },
        fault: fault.filter(|f| f.mid_stream()),
        chat,
        id: n,
        created: shared.created as u64,
        prompt_tokens: ask.prompt_tokens,
        stream: ask.stream,
        include_usage: ask.include_usage,
        continuous: ask.continuous,
        text: String::new(),
        reasoning: String::new(),
        plan,
        rng,
        state: StreamPhase::Emitting,
    };
    let mut r = Response::new(SimBody::Stream(Box::new(stream)));
    let ct = if ask.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(ct),
    );
    r
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StreamPhase {
    Emitting,
    Done,
    Stalled,
    Closing,
}

struct SimStream {
    shared: Arc<Shared>,
    engine: usize,
    t0: Instant,
    idx: usize,
    emitted: u32,
    fault_at: u32,
    fault: Option<Fault>,
    chat: bool,
    id: u64,
    created: u64,
    prompt_tokens: u64,
    stream: bool,
    include_usage: bool,
    continuous: bool,
    text: String,
    reasoning: String,
    plan: Plan,
    rng: SmallRng,
    state: StreamPhase,
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.shared.engines[self.engine]
            .running
            .fetch_sub(1, Relaxed);
    }
}

const WORDS: [&str; 16] = [
    " the",
    " model",
    " token",
    " draft",
    " verify",
    " accept",
    " fast",
    " speculative",
    " decode",
    " step",
    " and",
    " of",
    " to",
    " code",
    " value",
    " return",
];

impl SimStream {
    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        loop {
            match self.state {
                StreamPhase::Done => return Poll::Ready(None),
                StreamPhase::Stalled => return Poll::Pending,
                StreamPhase::Closing => {
                    self.state = StreamPhase::Done;
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "simulated connection close",
                    ))));
                }
                StreamPhase::Emitting => {}
            }
            let e = self.plan.emissions[self.idx];
            let at = self.t0 + e.at;
            let now = Instant::now();
            if now < at {
                self.shared.timer.wake_at(at, cx.waker().clone());
                return Poll::Pending;
            }
            self.shared.record_lateness(now - at);
            self.shared.engines[self.engine].on_emission(&e, self.shared.cfg.k);
            self.idx += 1;
            let out = self.emit(&e);
            if self.idx == self.plan.emissions.len() && self.state == StreamPhase::Emitting {
                self.shared.engines[self.engine]
                    .requests_success
                    .fetch_add(1, Relaxed);
                self.state = StreamPhase::Done;
            }
            if let Some(bytes) = out {
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
        }
    }

    /// Produces the bytes of one emission (None for a non-streaming response still in progress).
    fn emit(&mut self, e: &Emission) -> Option<Bytes> {
        let mut out = String::new();
        let first = self.emitted == 0;
        let last = self.idx == self.plan.emissions.len();
        let cfg = &self.shared.cfg;
        if self.stream && self.chat && first {
            self.chunk(
                &mut out,
                r#""role":"assistant","content":"""#,
                "",
                None,
                None,
            );
        }
        let pieces = if self.stream && cfg.split_steps {
            e.tokens
        } else {
            1
        };
        for piece in 0..pieces {
            let n = if pieces == 1 { e.tokens } else { 1 };
            let (mut reasoning, mut content) = (String::new(), String::new());
            for _ in 0..n {
                let w = WORDS[self.rng.random_range(0..WORDS.len())];
                if self.emitted < cfg.reasoning_tokens {
                    reasoning.push_str(w);
                } else {
                    content.push_str(w);
                }
                self.emitted += 1;
            }
            let finish = (last && piece + 1 == pieces).then_some(self.plan.finish_reason);
            if self.stream {
                let usage = self.continuous.then_some(self.emitted);
                // A step that crosses the reasoning/content boundary is sent as two chunks.
                if !reasoning.is_empty() {
                    let f = if content.is_empty() { finish } else { None };
                    self.delta_chunk(&mut out, &reasoning, true, f, usage);
                }
                if !content.is_empty() {
                    self.delta_chunk(&mut out, &content, false, finish, usage);
                }
            } else {
                self.reasoning.push_str(&reasoning);
                self.text.push_str(&content);
            }
        }
        if self.emitted >= self.fault_at {
            self.fault_at = u32::MAX;
            if let Some(fault) = self.fault {
                return Some(self.inject(fault, out));
            }
        }
        if !last {
            return self.stream.then(|| Bytes::from(out));
        }
        if self.stream {
            if self.include_usage {
                out.push_str("data: ");
                self.head(&mut out);
                out.push_str("\"choices\":[],\"usage\":");
                self.usage(&mut out, self.emitted);
                out.push_str("}\n\n");
            }
            out.push_str("data: [DONE]\n\n");
        } else {
            self.full_body(&mut out);
        }
        Some(Bytes::from(out))
    }

    fn inject(&mut self, fault: Fault, mut out: String) -> Bytes {
        let cfg = &self.shared.cfg;
        if !self.stream {
            // Non-streaming: the fault replaces the body.
            out.clear();
            match fault {
                Fault::CloseMidStream => {
                    out.push_str("{\"id\":\"cmpl-");
                    self.state = StreamPhase::Closing;
                }
                Fault::StallMidStream => self.state = StreamPhase::Stalled,
                Fault::MalformedChunk => {
                    out.push_str("{\"choices\":[{\"message\":");
                    self.state = StreamPhase::Done;
                }
                Fault::ErrorMidStream => {
                    out.push_str(r#"{"error":{"message":"simulated engine failure","type":"InternalServerError","code":500}}"#);
                    self.state = StreamPhase::Done;
                }
                Fault::OversizedChunk => {
                    self.text.push_str(&"x".repeat(cfg.oversized_bytes));
                    self.idx = self.plan.emissions.len();
                    self.full_body(&mut out);
                    self.state = StreamPhase::Done;
                }
                _ => {}
            }
            return Bytes::from(out);
        }
        match fault {
            Fault::CloseMidStream => self.state = StreamPhase::Closing,
            Fault::StallMidStream => self.state = StreamPhase::Stalled,
            Fault::MalformedChunk => {
                out.push_str("data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n")
            }
            Fault::ErrorMidStream => {
                out.push_str("data: {\"error\":{\"message\":\"simulated engine failure\",\"type\":\"InternalServerError\",\"code\":500}}\n\ndata: [DONE]\n\n");
                self.state = StreamPhase::Done;
            }
            Fault::OversizedChunk => {
                let big = "x".repeat(cfg.oversized_bytes);
                self.delta_chunk(&mut out, &big, false, None, None);
            }
            _ => {}
        }
        Bytes::from(out)
    }

    fn head(&self, out: &mut String) {
        let (prefix, object) = if self.chat {
            (
                "chatcmpl",
                if self.stream {
                    "chat.completion.chunk"
                } else {
                    "chat.completion"
                },
            )
        } else {
            ("cmpl", "text_completion")
        };
        let _ = write!(
            out,
            "{{\"id\":\"{prefix}-{}\",\"object\":\"{object}\",\"created\":{},\"model\":{},",
            self.id, self.created, self.shared.model_json
        );
    }

    fn usage(&self, out: &mut String, completion: u32) {
        let _ = write!(
            out,
            "{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{}",
            self.prompt_tokens,
            self.prompt_tokens + u64::from(completion),
            completion
        );
        let reasoning = self.shared.cfg.reasoning_tokens.min(completion);
        if reasoning > 0 {
            let _ = write!(
                out,
                ",\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoning}}}"
            );
        }
        out.push('}');
    }

    /// One streaming chunk. `members` are the raw JSON members of the chat `delta`; completions
    /// carry `text` instead.
    fn chunk(
        &self,
        out: &mut String,
        members: &str,
        text: &str,
        finish: Option<&str>,
        usage: Option<u32>,
    ) {
        out.push_str("data: ");
        self.head(out);
        out.push_str("\"choices\":[{\"index\":0,");
        if self.chat {
            let _ = write!(out, "\"delta\":{{{members}}}");
        } else {
            let _ = write!(out, "\"text\":\"{text}\"");
        }
        out.push_str(",\"logprobs\":null,\"finish_reason\":");
        push_opt_str(out, finish);
        out.push_str("}]");
        if let Some(c) = usage {
            out.push_str(",\"usage\":");
            self.usage(out, c);
        }
        out.push_str("}\n\n");
    }

    /// A chunk carrying `text` as content or reasoning (completions have no reasoning field, so
    /// reasoning text streams as text there). Words are plain ASCII: no JSON escaping needed.
    fn delta_chunk(
        &self,
        out: &mut String,
        text: &str,
        reasoning: bool,
        finish: Option<&str>,
        usage: Option<u32>,
    ) {
        let field = match (reasoning, self.shared.cfg.reasoning_field) {
            (false, _) => "content",
            (true, ReasoningField::ReasoningContent) => "reasoning_content",
            (true, ReasoningField::Reasoning) => "reasoning",
        };
        let members = if self.chat {
            format!("\"{field}\":\"{text}\"")
        } else {
            String::new()
        };
        self.chunk(out, &members, text, finish, usage);
    }

    fn full_body(&self, out: &mut String) {
        self.head(out);
        out.push_str("\"choices\":[{\"index\":0,");
        let text = serde_json::to_string(&self.text).unwrap_or_default();
        if self.chat {
            let _ = write!(
                out,
                "\"message\":{{\"role\":\"assistant\",\"content\":{text}"
            );
            if !self.reasoning.is_empty() {
                let field = match self.shared.cfg.reasoning_field {
                    ReasoningField::ReasoningContent => "reasoning_content",
                    ReasoningField::Reasoning => "reasoning",
                };
                let _ = write!(
                    out,
                    ",\"{field}\":{}",
                    serde_json::to_string(&self.reasoning).unwrap_or_default()
                );
            }
            out.push('}');
        } else {
            let mut all = self.reasoning.clone();
            all.push_str(&self.text);
            let _ = write!(
                out,
                "\"text\":{}",
                serde_json::to_string(&all).unwrap_or_default()
            );
        }
        out.push_str(",\"logprobs\":null,\"finish_reason\":");
        push_opt_str(out, Some(self.plan.finish_reason));
        out.push_str("}],\"usage\":");
        self.usage(out, self.emitted);
        out.push('}');
    }
}

fn push_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        None => out.push_str("null"),
    }
}

/// Lateness histogram buckets, seconds.
const LATENESS_BUCKETS: [f64; 11] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
];

fn metrics_page(ctx: &ServerCtx) -> String {
    let shared = &ctx.shared;
    let engines = &shared.engines[ctx.engines.clone()];
    let model = shared.cfg.model.as_str();
    let mut w = Writer::with_capacity(8192);
    let ranks: Vec<String> = engines.iter().map(|e| e.rank.to_string()).collect();
    let labels = |i: usize| [("engine", ranks[i].as_str()), ("model_name", model)];
    type Get = fn(&EngineCounters) -> u64;
    let families: [(&str, &str, &str, Get); 5] = [
        (
            "vllm:prompt_tokens",
            "counter",
            "Number of prefill tokens processed.",
            |e| e.prompt_tokens.load(Relaxed),
        ),
        (
            "vllm:generation_tokens",
            "counter",
            "Number of generation tokens processed.",
            |e| e.generation_tokens.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_drafts",
            "counter",
            "Number of spec decoding drafts.",
            |e| e.drafts.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_draft_tokens",
            "counter",
            "Number of draft tokens.",
            |e| e.draft_tokens.load(Relaxed),
        ),
        (
            "vllm:spec_decode_num_accepted_tokens",
            "counter",
            "Number of accepted tokens.",
            |e| e.accepted.load(Relaxed),
        ),
    ];
    // vLLM writes integral counters and gauges as floats (`3.0`); the page copies that.
    let running = "vllm:num_requests_running";
    w.family(
        running,
        "gauge",
        "Number of requests in model execution batches.",
    );
    for (i, e) in engines.iter().enumerate() {
        w.sample(
            running,
            &labels(i),
            format_args!("{}.0", e.running.load(Relaxed)),
        );
    }
    for (name, kind, help, get) in families {
        let total = format!("{name}_total");
        w.family(&total, kind, help);
        for (i, e) in engines.iter().enumerate() {
            w.sample(&total, &labels(i), format_args!("{}.0", get(e)));
        }
        let created = format!("{name}_created");
        w.family(&created, "gauge", help);
        for i in 0..engines.len() {
            w.sample(&created, &labels(i), format_args!("{:e}", shared.created));
        }
    }
    let per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    w.family(per_pos, "counter", "Accepted tokens per draft position.");
    for (i, e) in engines.iter().enumerate() {
        let [engine, model_name] = labels(i);
        for (p, c) in e.per_pos.iter().enumerate() {
            let position = p.to_string();
            w.sample(
                per_pos,
                &[engine, model_name, ("position", position.as_str())],
                format_args!("{}.0", c.load(Relaxed)),
            );
        }
    }
    let success = "vllm:request_success_total";
    w.family(
        success,
        "counter",
        "Count of successfully processed requests.",
    );
    for (i, e) in engines.iter().enumerate() {
        let [engine, model_name] = labels(i);
        w.sample(
            success,
            &[engine, model_name, ("finished_reason", "length")],
            format_args!("{}.0", e.requests_success.load(Relaxed)),
        );
    }
    let (buckets, count, sum_ns) = {
        let g = shared.lateness.lock().unwrap_or_else(|e| e.into_inner());
        let b: Vec<u64> = LATENESS_BUCKETS
            .iter()
            .map(|s| g.0.count_between(0, (s * 1e9) as u64))
            .collect();
        (b, g.0.len(), g.1)
    };
    let h = "specperf_sim_emission_lateness_seconds";
    w.family(
        h,
        "histogram",
        "Actual minus scheduled emission time of streamed chunks.",
    );
    let bucket = format!("{h}_bucket");
    for (le, c) in LATENESS_BUCKETS.iter().zip(&buckets) {
        w.sample(&bucket, &[("le", le.to_string())], c);
    }
    w.sample(&bucket, &[("le", "+Inf")], count);
    w.sample::<&str, &str>(&format!("{h}_sum"), &[], sum_ns as f64 / 1e9);
    w.sample::<&str, &str>(&format!("{h}_count"), &[], count);
    let stats = lateness_stats(shared);
    let q = "specperf_sim_emission_lateness_quantile_seconds";
    w.family(q, "gauge", "Emission lateness quantiles since start.");
    for (k, v) in [
        ("0.5", stats.p50_ms),
        ("0.99", stats.p99_ms),
        ("1", stats.max_ms),
    ] {
        w.sample(q, &[("quantile", k)], v / 1e3);
    }
    w.finish(Format::Text)
}
