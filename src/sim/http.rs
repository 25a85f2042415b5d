//! HTTP: connection handling (plain or TLS, HTTP/1.1 and HTTP/2 through hyper's auto builder),
//! routing, and the completion handler that parses a request, draws its fault, admits it to an
//! engine (`sched`) and hands a planned stream to the body (`stream`). `server` hands it the
//! listeners; it answers `/metrics` with `metrics_page` and `/dcgm/metrics` with `dcgm_page`.

use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use governor::clock::{Clock, DefaultClock};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::Rng;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::dcgm_page::dcgm_page;
use super::kv::{BlockHasher, PromptBlocks, StandIn};
use super::metrics_page::metrics_page;
use super::model::{plan, request_rng, PlanParams};
use super::sched;
use super::spec::pick_group;
use super::state::{Admission, ConnState, ServerCtx, Shared};
use super::stream::{SimBody, SimStream, StreamPhase};
use super::{Fault, DCGM_AT_HEADER, FAULT_HEADER};

/// Accepts connections until `cancel` fires; each is served by hyper (HTTP/1.1 or HTTP/2).
pub(super) async fn accept_loop(
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
            let conn = Arc::new(ConnState::default());
            let state = conn.clone();
            let svc =
                hyper::service::service_fn(move |req| handle(ctx.clone(), state.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            match tls {
                None => serve(builder.serve_connection(TokioIo::new(stream), svc), &conn).await,
                Some(acceptor) => {
                    if let Ok(Ok(s)) =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
                    {
                        serve(builder.serve_connection(TokioIo::new(s), svc), &conn).await;
                    }
                }
            }
        });
    }
    conns.shutdown().await;
}

/// How long a connection doomed by `close-after-done` waits for the next request before closing.
const CLOSE_AFTER_DONE_LINGER: Duration = Duration::from_secs(2);

/// Serves one connection until it ends, or, once a `close-after-done` response doomed it, until
/// the next request arrives on it (or the linger passes): dropping it then closes the socket
/// without a byte of answer, while hyper had kept the connection alive (llama-server's close).
async fn serve<C: std::future::Future>(conn: C, state: &ConnState) {
    tokio::pin!(conn);
    tokio::select! {
        _ = &mut conn => return,
        () = state.doomed_now.notified() => {}
    }
    // The doomed response's last bytes (`[DONE]`, the terminal chunk) still need polling out.
    let _ = tokio::time::timeout(CLOSE_AFTER_DONE_LINGER, async {
        tokio::select! {
            _ = &mut conn => {}
            () = state.next_request.notified() => {}
        }
    })
    .await;
}

/// A Prometheus text page (0.0.4).
fn text_page(page: String) -> Response<SimBody> {
    let mut r = Response::new(SimBody::Full(Some(Bytes::from(page))));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
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

/// vLLM's answer to a prompt plus output longer than the model's context: 400, its wording.
fn context_overflow(limit: u64, prompt: u64, output: u64) -> Response<SimBody> {
    let message = format!(
        "This model's maximum context length is {limit} tokens. However, you requested {output} \
         output tokens and your prompt contains at least {prompt} input tokens, for a total of at \
         least {} tokens. Please reduce the length of the input prompt or the number of requested \
         output tokens. (parameter=input_tokens, value={prompt})",
        prompt + output
    );
    let body = serde_json::json!({"error": {"message": message, "type": "BadRequestError", "param": "input_tokens", "code": 400}});
    json_response(StatusCode::BAD_REQUEST, body.to_string())
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response<SimBody> {
    let body = serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": status.as_u16()}});
    json_response(status, body.to_string())
}

async fn handle(
    ctx: Arc<ServerCtx>,
    conn: Arc<ConnState>,
    req: http::Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    if conn.doomed.load(Relaxed) {
        // Never answered and never counted: the connection closes under it.
        conn.next_request.notify_one();
        return std::future::pending().await;
    }
    let path = req.uri().path().to_owned();
    let resp = match (req.method().clone(), path.as_str()) {
        (Method::GET, "/health") => Response::new(SimBody::Full(None)),
        (Method::GET, "/v1/models") => {
            let body = serde_json::json!({"object": "list", "data": [{"id": ctx.shared.cfg.model, "object": "model", "owned_by": "specperf", "max_model_len": ctx.shared.cfg.context_limit()}]});
            json_response(StatusCode::OK, body.to_string())
        }
        (Method::GET, "/metrics") => text_page(metrics_page(&ctx)),
        (Method::GET, "/dcgm/metrics") => match dcgm_page(&ctx.shared) {
            Some((page, at_ns)) => {
                let mut r = text_page(page);
                r.headers_mut()
                    .insert(DCGM_AT_HEADER, http::HeaderValue::from(at_ns));
                r
            }
            None => error_response(
                StatusCode::NOT_FOUND,
                "NotFoundError",
                "this simulator has no GPUs, so no DCGM page: start it with `specperf sim \
                 --gpus N` (or `specperf replay --sim-gpus N`)",
            ),
        },
        (Method::POST, "/v1/chat/completions") => completion(ctx, conn, req, true).await,
        (Method::POST, "/v1/completions") => completion(ctx, conn, req, false).await,
        (_, p) => error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route {p}"),
        ),
    };
    Ok(resp)
}

/// The admission limit: `None` admits the request, else its 429 answer. Refused requests come
/// before everything else (a gateway's refusal): no arrival number, no fault, no engine.
fn admit(shared: &Shared) -> Option<Response<SimBody>> {
    let limiter = shared.limiter.as_ref()?;
    let not_until = limiter.check().err()?;
    shared.rate_limited.fetch_add(1, Relaxed);
    let wait = not_until.wait_time_from(DefaultClock::default().now());
    // Whole seconds, rounded up: a client waiting that long finds a request's worth in the bucket.
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let secs = secs.max(1);
    let limit = shared.cfg.rate_limit?;
    let mut r = error_response(
        StatusCode::TOO_MANY_REQUESTS,
        "RateLimitError",
        &format!(
            "rate limit reached: {} requests per second, bursts of {}; retry after {secs} s",
            limit.per_second, limit.burst
        ),
    );
    r.headers_mut()
        .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    Some(r)
}

/// What the request asked for.
struct Ask {
    stream: bool,
    include_usage: bool,
    continuous: bool,
    /// The output limit it set, if any.
    max_tokens: Option<u32>,
    ignore_eos: bool,
    /// `return_spec_tokens_details` (SGLang's per-request spec details in `sglext`).
    spec_details: bool,
}

/// A completion request the simulator refuses with 400, as vLLM would.
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("request body must be a JSON object")]
    NotAnObject,
    #[error("`messages` must be a non-empty array")]
    NoMessages,
    #[error("`prompt` must be a string or an array")]
    NoPrompt,
    #[error("max_tokens must be at least 1")]
    ZeroMaxTokens,
}

fn parse_ask(v: &Value, chat: bool) -> Result<Ask, AskError> {
    let obj = v.as_object().ok_or(AskError::NotAnObject)?;
    if chat {
        let msgs = obj.get("messages").and_then(Value::as_array);
        if msgs.is_none_or(|m| m.is_empty()) {
            return Err(AskError::NoMessages);
        }
    } else if !matches!(obj.get("prompt"), Some(Value::String(_) | Value::Array(_))) {
        return Err(AskError::NoPrompt);
    }
    let num = |k: &str| obj.get(k).and_then(Value::as_u64);
    let max_tokens = if chat {
        num("max_completion_tokens").or_else(|| num("max_tokens"))
    } else {
        num("max_tokens")
    };
    let max_tokens = match max_tokens {
        Some(0) => return Err(AskError::ZeroMaxTokens),
        Some(n) => Some(n.min(u64::from(u32::MAX)) as u32),
        None => None,
    };
    let flag = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
    let opts = obj.get("stream_options");
    Ok(Ask {
        stream: flag(obj.get("stream")),
        include_usage: flag(opts.and_then(|o| o.get("include_usage"))),
        continuous: flag(opts.and_then(|o| o.get("continuous_usage_stats"))),
        max_tokens,
        ignore_eos: flag(obj.get("ignore_eos")),
        spec_details: flag(obj.get("return_spec_tokens_details")),
    })
}

/// Calls `f` on every text of a message content or prompt: a string, the strings of an array,
/// the `text` of content parts.
fn for_each_text<'v>(v: &'v Value, f: &mut impl FnMut(&'v str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| for_each_text(x, f)),
        Value::Object(o) => {
            if let Some(t) = o.get("text") {
                for_each_text(t, f)
            }
        }
        _ => {}
    }
}

/// The request's acceptance-group slot: the first `--acceptance-group` rule whose text occurs in
/// one of its message contents (chat) or its prompt (completions), else the unmatched slot.
fn group_of(v: &Value, chat: bool, groups: &[super::AcceptanceGroup]) -> usize {
    if groups.is_empty() {
        return 0;
    }
    let mut texts = Vec::new();
    if chat {
        for m in v
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(c) = m.get("content") {
                for_each_text(c, &mut |t| texts.push(t));
            }
        }
    } else if let Some(p) = v.get("prompt") {
        for_each_text(p, &mut |t| texts.push(t));
    }
    pick_group(groups, texts.iter().copied())
}

/// Characters of the message header the stand-in counts per chat message (role and framing).
const STAND_IN_MESSAGE_CHARS: usize = 16;

/// The prompt's tokens as KV blocks. With a tokenizer: Σ over the messages of each content's
/// tokens (no chat template), or the prompt's (a token-id array is taken as it is). Without: the
/// stand-in, 4 characters a token over each message's 16-character header (its role) and its
/// content, so `ceil((Σ chars + 16 per message) / 4)` tokens as before.
fn prompt_blocks(
    v: &Value,
    chat: bool,
    cfg: &super::SimConfig,
) -> Result<PromptBlocks, tokenizer_encoders::TokenizeError> {
    let pieces: Vec<(Option<&str>, &Value)> = if chat {
        v.get("messages")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .map(|m| {
                        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
                        (Some(role), m.get("content").unwrap_or(&Value::Null))
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        vec![(None, v.get("prompt").unwrap_or(&Value::Null))]
    };
    match &cfg.tokenizer {
        Some(tok) => {
            let mut h = BlockHasher::new(cfg.kv_block_tokens);
            for (_, content) in pieces {
                if let Value::Array(ids) = content {
                    if !ids.is_empty() && ids.iter().all(Value::is_u64) {
                        ids.iter()
                            .filter_map(Value::as_u64)
                            .for_each(|id| h.push(id));
                        continue;
                    }
                }
                let mut err = None;
                for_each_text(content, &mut |t| match tok.ids(t) {
                    Ok(ids) => ids.into_iter().for_each(|id| h.push(u64::from(id))),
                    Err(e) => err = Some(e),
                });
                if let Some(e) = err {
                    return Err(e);
                }
            }
            Ok(h.finish())
        }
        None => {
            let mut s = StandIn::new(cfg.kv_block_tokens);
            for (role, content) in pieces {
                if let Some(role) = role {
                    let head = role.chars().chain(std::iter::repeat('\0'));
                    head.take(STAND_IN_MESSAGE_CHARS)
                        .for_each(|c| s.push_char(c));
                }
                for_each_text(content, &mut |t| t.chars().for_each(|c| s.push_char(c)));
            }
            Ok(s.finish())
        }
    }
}

async fn completion(
    ctx: Arc<ServerCtx>,
    conn: Arc<ConnState>,
    req: http::Request<Incoming>,
    chat: bool,
) -> Response<SimBody> {
    let arrived = Instant::now();
    let shared = ctx.shared.clone();
    let cfg = &shared.cfg;
    shared.received.fetch_add(1, Relaxed);
    if req.version() == http::Version::HTTP_2 {
        shared.http2_requests.fetch_add(1, Relaxed);
    }
    if let Some(refused) = admit(&shared) {
        return refused;
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
    let ask = match parse_ask(&v, chat) {
        Ok(a) => a,
        Err(e) => {
            return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &e.to_string())
        }
    };
    let model = v.get("model").and_then(Value::as_str).unwrap_or("");
    if !cfg.model.is_empty() && model != cfg.model {
        return error_response(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("The model `{model}` does not exist."),
        );
    }
    let group = group_of(&v, chat, &cfg.acceptance_groups);
    let blocks = if cfg.tokenizer.is_some() {
        // A long prompt takes the tokenizer milliseconds: off the thread that times emissions.
        let s2 = shared.clone();
        match tokio::task::spawn_blocking(move || prompt_blocks(&v, chat, &s2.cfg)).await {
            Ok(b) => b.map_err(|e| e.to_string()),
            Err(e) => Err(format!("tokenizer task failed: {e}")),
        }
    } else {
        prompt_blocks(&v, chat, cfg).map_err(|e| e.to_string())
    };
    let blocks = match blocks {
        Ok(b) => b,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, "BadRequestError", &e),
    };
    let limit = cfg.context_limit();
    let max_tokens = match ask.max_tokens {
        Some(m) => u64::from(m),
        // vLLM fills what the context leaves; the simulator's own default is shorter.
        None => u64::from(cfg.default_max_tokens).min(limit.saturating_sub(blocks.tokens)),
    };
    if blocks.tokens + max_tokens > limit || blocks.tokens >= limit {
        return context_overflow(limit, blocks.tokens, max_tokens);
    }
    let n = shared.seq.fetch_add(1, Relaxed);
    let mut rng = request_rng(cfg.seed, n);
    let fault = header_fault.or_else(|| {
        let seq = &cfg.fault_sequence;
        if !seq.is_empty() {
            return seq[(n % seq.len() as u64) as usize];
        }
        let mut x: f64 = rng.random();
        if shared.started.elapsed() < cfg.faults_after {
            return None;
        }
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
    let span = ctx.engines.end - ctx.engines.start;
    let engine = ctx.engines.start + (ctx.rr.fetch_add(1, Relaxed) as usize % span);
    let prompt_tokens = blocks.tokens;
    let (queue, counters) = (&shared.sched[engine], &shared.engines[engine]);
    let admitted = sched::admit(queue, counters, blocks, max_tokens).await;
    let cached_tokens = admitted.lease.hit_tokens;
    let uncached = prompt_tokens - cached_tokens;
    let prefill = if cfg.prefill_tokens_per_s > 0.0 {
        Duration::from_secs_f64(uncached as f64 / cfg.prefill_tokens_per_s)
    } else {
        Duration::ZERO
    };
    if cfg.record_requests > 0 {
        let mut kept = shared.admissions.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < cfg.record_requests {
            kept.push(Admission {
                engine: shared.engines[engine].rank,
                prompt_tokens,
                cached_tokens: admitted.lease.hit_tokens,
                planned_ttft: cfg.ttft + prefill,
                waited: admitted.waited,
            });
        }
    }
    let params = PlanParams {
        max_tokens: max_tokens as u32,
        ignore_eos: ask.ignore_eos,
        eos_probability: cfg.eos_probability,
        k: cfg.k,
        p: cfg
            .acceptance_groups
            .get(group)
            .map_or(shared.p, |g| g.probability),
        ttft: cfg.ttft + prefill,
        itl: cfg.itl,
        jitter: cfg.jitter,
    };
    let plan = plan(&params, &mut rng);
    let total = plan.total_tokens();
    let stream = SimStream {
        shared: shared.clone(),
        engine,
        arrived,
        sent: None,
        t0: Instant::now(),
        idx: 0,
        emitted: 0,
        fault_at: if fault.is_some_and(Fault::mid_stream) {
            (total / 2).max(1)
        } else {
            u32::MAX
        },
        fault: fault.filter(|f| f.mid_stream()),
        close_after: (fault == Some(Fault::CloseAfterDone)).then_some(conn),
        chat,
        id: n,
        created: shared.created as u64,
        prompt_tokens,
        stream: ask.stream,
        include_usage: ask.include_usage,
        continuous: ask.continuous && !cfg.ignore_continuous_usage,
        text: String::new(),
        reasoning: String::new(),
        plan,
        rng,
        state: StreamPhase::Emitting,
        counted: 0,
        finished: false,
        lease: Some(admitted.lease),
        group,
        cached_tokens,
        sglext: ask.spec_details,
        finish_extra: None,
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
