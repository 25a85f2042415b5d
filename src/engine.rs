//! The replay engine: wires the pipeline stages together for one run.
//!
//! dataset -> render -> schedule -> client workers -> (bounded channel) -> the one aggregator ->
//! summary and artifacts. A single [`Stopper`] (deadline, stall watchdog, Ctrl-C, SIGTERM) cancels
//! everything; in-flight requests then end as `cancelled` records and the summary is still written.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Uri;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::client::{BodyCap, Client, ClientError, Clock, Fetched, Prepared};
use crate::config::{DatasetSource, EncoderSpec, RunConfig, Target};
use crate::dataset::{self, DatasetError, Sample};
use crate::metrics::{self, LoadMeta, Progress, RunMeta, Summary};
use crate::record::{FailureKind, Outcome, Phase, RequestRecord};
use crate::render::{self, RenderOptions};
use crate::schedule::{self, arrivals, DispatchStats, Issued, Plan, Tickets};
use crate::scrape::{ScrapeSettings, Scraper};
use crate::sim::{SimError, SimHandle, Simulator};
use crate::stop::{StopReason, Stopper};
use tokenizer_encoders::{ChatTemplate, EncodeError, Encoder, Tokenizer};

/// The collection bundled into the binary (`datasets/qualitative.jsonl`).
pub const BUNDLED_COLLECTION: &str = include_str!("../datasets/qualitative.jsonl");

/// Errors that prevent a run from starting. Anything after the first request is a record instead.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The collection could not be loaded.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The embedded simulator did not start.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server did not answer the readiness probe in time.
    #[error("server at {url} not ready: {reason} (is it running? raise --wait-for-model-timeout to wait for start-up)")]
    NotReady {
        /// The base URL.
        url: String,
        /// Last probe error.
        reason: String,
    },
    /// No `--model` and none could be discovered.
    #[error("no model name: {0}; pass --model")]
    NoModel(String),
    /// The URL does not parse.
    #[error("invalid URL {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A sample could not be rendered by the encoder.
    #[error("cannot render sample {sample}: {source}")]
    Render {
        /// The sample's id.
        sample: String,
        /// What the encoder rejected.
        source: EncodeError,
    },
    /// The tokenizer or chat template could not be loaded or used.
    #[error("{0}")]
    Tokenizer(String),
    /// The load settings do not fit the collection.
    #[error("{0}")]
    Load(String),
    /// The open-file limit is too low for the requests in flight.
    #[error(transparent)]
    OpenFiles(#[from] crate::fdlimit::FdLimitError),
    /// The artifact directory or a file in it could not be created.
    #[error("cannot write artifacts in {path}: {source} (pass a writable --artifact-dir)")]
    Artifacts {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl EngineError {
    /// True when the server was unreachable (exit code 3).
    pub fn is_not_ready(&self) -> bool {
        matches!(self, EngineError::NotReady { .. })
    }
}

/// What a finished run hands back.
pub struct RunOutcome {
    /// The summary (also in `summary.json`).
    pub summary: Summary,
    /// Where artifacts were written.
    pub artifact_dir: PathBuf,
    /// Set when the records file could not be written completely.
    pub artifact_error: Option<String>,
    /// Set when the run was stopped early.
    pub stopped_by: Option<StopReason>,
}

/// Replays the configured collection and returns its summary.
pub async fn replay(
    cfg: RunConfig,
    stop: Stopper,
    progress: watch::Sender<Progress>,
) -> Result<RunOutcome, EngineError> {
    let collection = load_collection(&cfg)?;
    let samples: Arc<[Sample]> = collection.samples.clone().into();
    let plan = profiling_plan(&cfg, &samples)?;
    // Before any socket opens: the simulator's ends count too when it runs in this process.
    let in_flight = plan.slots.map(|s| {
        let warmup = cfg
            .load
            .warmup
            .map_or(0, |w| cfg.load.shard.part(w.concurrency as u64));
        (s as u64).max(warmup)
    });
    crate::fdlimit::ensure(in_flight, if cfg.target.is_embedded() { 2 } else { 1 })?;
    // Keep the embedded simulator alive for the whole run.
    let (sim, base_url): (Option<SimHandle>, String) = match &cfg.target {
        Target::Url(u) => (None, u.clone()),
        Target::Embedded(sc) => {
            let h = Simulator::spawn((**sc).clone())?;
            let url = h.url();
            (Some(h), url)
        }
    };
    let mut client_opts = cfg.client.clone();
    // Credentials go to the target only, not to metrics endpoints on other hosts.
    client_opts.origin = base_url
        .parse::<Uri>()
        .ok()
        .map(|u| crate::client::origin_of(&u));
    let client = Client::new(client_opts)?;
    let scrape_settings = scrape_settings(&cfg, sim.as_ref(), &base_url);
    // Like AIPerf, a given model and no --wait-for-model-timeout means no readiness wait: an
    // unreachable server then shows up as failed records. Without a model, one is discovered.
    let model = match &cfg.model {
        Some(m) if cfg.wait_for_model.is_zero() => m.clone(),
        Some(m) => {
            probe(&client, &base_url, cfg.wait_for_model, &stop).await?;
            m.clone()
        }
        None => discover_model(&client, &base_url, cfg.wait_for_model, &stop).await?,
    };
    warm_pool(
        &client,
        &base_url,
        cfg.concurrency,
        cfg.client.timeouts.connect,
    )
    .await;

    let render_opts = Arc::new(cfg.render_options(model.clone(), collection.encoder.clone()));
    let (bodies, client_isl) =
        render_bodies(&samples, &render_opts, collection.tokenizer.as_ref())?;
    let uri: Uri = format!("{}{}", base_url.trim_end_matches('/'), cfg.endpoint_path)
        .parse()
        .map_err(|e: http::uri::InvalidUri| EngineError::Url {
            url: base_url.clone(),
            reason: e.to_string(),
        })?;
    let shard = cfg.load.shard;
    let request_count = plan.len().unwrap_or(0);

    let dir = cfg
        .artifact_dir
        .clone()
        .unwrap_or_else(|| default_artifact_dir(&model, &cfg));
    std::fs::create_dir_all(&dir).map_err(|source| EngineError::Artifacts {
        path: dir.display().to_string(),
        source,
    })?;
    let create = |name: &str| -> Result<Box<dyn std::io::Write + Send>, EngineError> {
        let path = dir.join(name);
        let file = std::fs::File::create(&path).map_err(|source| EngineError::Artifacts {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Box::new(std::io::BufWriter::new(file)))
    };
    let records = create("records.jsonl")?;
    let profile_export = create("profile_export.jsonl")?;
    crate::report::write_inputs(&dir, &bodies).map_err(|source| EngineError::Artifacts {
        path: dir.join("inputs.json").display().to_string(),
        source,
    })?;

    let progress = Arc::new(progress);
    let start_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let start_unix_s = start_unix.as_secs_f64();
    let clock = Clock::new();
    let (tx, rx) = mpsc::channel::<RequestRecord>(1024);
    let progress_rx = progress.subscribe();
    let sinks = metrics::Sinks {
        records: Some(records),
        profile_export: Some(profile_export),
        epoch_ns: start_unix.as_nanos() as u64,
    };
    let aggregator = tokio::spawn(metrics::aggregate(
        rx,
        sinks,
        progress.clone(),
        cfg.goodput.clone(),
        client_isl.map(Into::into),
    ));
    let issued = Arc::new(Issued::default());
    let guards = spawn_guards(&cfg, &stop, progress_rx, issued.clone());
    let ctx = Arc::new(Launch {
        client: client.clone(),
        bodies: bodies.into(),
        samples: samples.clone(),
        render: render_opts,
        uri,
        streaming: cfg.streaming,
        clock,
        tx,
        unreachable: Unreachable::default(),
    });

    // Warmup: its own closed-loop phase, finished before the AL baseline and the profiling clock.
    let mut warmup_stats = None;
    if let Some(w) = cfg.load.warmup {
        let plan = Plan {
            tickets: Tickets::Closed {
                count: w.count.unwrap_or(u64::MAX),
            },
            samples: samples.len(),
            slots: Some(shard.part(w.concurrency as u64).max(1) as usize),
            ramp: None,
            duration: w.duration,
            shard,
        };
        warmup_stats =
            Some(run_phase(&ctx, &plan, Phase::Warmup, &cfg, &stop, &issued, None).await);
    }

    let scraper = match scrape_settings.filter(|_| shard.index == cfg.load.metrics_shard) {
        Some(mut settings) => {
            settings.save_dir = Some(dir.clone());
            let s = Scraper::baseline(client.clone(), settings, stop.token()).await;
            Some(s.spawn(stop.token().clone(), Some(progress.clone())))
        }
        None => None,
    };
    progress.send_modify(|p| {
        p.planned = plan.len();
        p.duration_s = cfg.load.duration.map(|d| d.as_secs_f64());
        p.profiling_started = Some(Instant::now());
    });
    let dispatch_stats = run_phase(
        &ctx,
        &plan,
        Phase::Profiling,
        &cfg,
        &stop,
        &issued,
        cfg.load.grace,
    )
    .await;
    drop(ctx);
    for g in guards {
        g.abort();
    }
    let agg = aggregator
        .await
        .unwrap_or_else(|_| metrics::Aggregate::with_goodput(cfg.goodput.clone()));
    let acceptance = match scraper {
        Some(task) => task.finish(Instant::now()).await,
        None => None,
    };
    drop(sim);

    let stopped_by = stop.reason();
    let t = cfg.client.timeouts;
    let meta = RunMeta {
        url: if cfg.target.is_embedded() {
            format!("embedded-simulator ({base_url})")
        } else {
            base_url.clone()
        },
        model,
        endpoint: cfg.endpoint_path.clone(),
        endpoint_type: match cfg.endpoint_type {
            render::EndpointType::Chat => "chat",
            render::EndpointType::Completions => "completions",
        },
        osl: cfg.osl,
        cli_command: cfg.cli_command.clone(),
        streaming: cfg.streaming,
        concurrency: cfg.concurrency,
        request_count,
        samples: samples.len(),
        dataset_reused: dispatch_stats.issued > samples.len() as u64,
        load: load_meta(&cfg, &plan, dispatch_stats, warmup_stats),
        input: cfg.dataset.describe(),
        start_unix_s,
        stopped_by: stopped_by.map(|r| r.as_str().to_owned()),
        timeouts_s: [
            ("connect", t.connect.as_secs_f64()),
            ("first_token", t.first_token.as_secs_f64()),
            ("idle", t.idle.as_secs_f64()),
            ("request", t.total.as_secs_f64()),
            ("run", cfg.run_timeout.as_secs_f64()),
        ]
        .into_iter()
        .collect(),
    };
    let mut summary = agg.summary(meta);
    summary.acceptance = acceptance;
    summary.warnings.splice(0..0, cfg.warnings.iter().cloned());
    let mut artifact_error = agg.write_error.clone();
    // Before summary.json, whose presence tells `specperf merge` the shard finished.
    if let Err(e) = crate::merge::write_histograms(&dir, &agg.histograms()) {
        artifact_error.get_or_insert(e.to_string());
    }
    if let Err(e) = crate::report::write_artifacts(&dir, &summary) {
        artifact_error.get_or_insert(e.to_string());
    }
    if let Some((result_dir, name)) = &cfg.result_file {
        let result_dir = result_dir.as_deref().unwrap_or(&dir);
        if let Err(e) = crate::report::inferencex::write_raw_result(result_dir, name, &summary) {
            artifact_error.get_or_insert(e.to_string());
        }
    }
    Ok(RunOutcome {
        summary,
        artifact_dir: dir,
        artifact_error,
        stopped_by,
    })
}

/// What every request task of a run shares.
struct Launch {
    client: Client,
    bodies: Arc<[Bytes]>,
    samples: Arc<[Sample]>,
    render: Arc<RenderOptions>,
    uri: Uri,
    streaming: bool,
    clock: Clock,
    tx: mpsc::Sender<RequestRecord>,
    unreachable: Unreachable,
}

/// Backoff while the server cannot be reached. A closed loop reissues a failed request at once,
/// and a connect failure takes microseconds: a server that dies mid-run turned a 64-slot loop
/// into some 17,000 failure records a second (a gigabyte of JSONL in under two minutes). A
/// request that never reached the server (`connect`, `connect_timeout`) now holds its slot for
/// 10 ms, doubling per consecutive such failure up to 250 ms; any request that reaches the
/// server resets it. Requests that did reach the server are never delayed.
#[derive(Default)]
struct Unreachable {
    streak: std::sync::atomic::AtomicU32,
}

impl Unreachable {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_millis(250);

    /// How long the slot of a request that ended with `outcome` waits before it is reused.
    fn backoff(&self, outcome: Outcome) -> Option<Duration> {
        use std::sync::atomic::Ordering::Relaxed;
        match outcome {
            Outcome::Failed(FailureKind::Connect | FailureKind::ConnectTimeout) => {
                let n = self.streak.fetch_add(1, Relaxed).min(5);
                Some((Self::FIRST * (1 << n)).min(Self::MAX))
            }
            Outcome::Cancelled => None,
            _ => {
                self.streak.store(0, Relaxed);
                None
            }
        }
    }
}

/// Dispatches one phase's plan and waits for its requests. After a duration limit, requests still
/// in flight get `grace` (`None`: unbounded), then are cancelled and recorded as failed.
async fn run_phase(
    ctx: &Arc<Launch>,
    plan: &Plan,
    phase: Phase,
    cfg: &RunConfig,
    stop: &Stopper,
    issued: &Issued,
    grace: Option<Duration>,
) -> DispatchStats {
    let tracker = tokio_util::task::TaskTracker::new();
    // Grace expiry cancels only the requests; a stop cancels them through the parent.
    let requests = stop.token().child_token();
    let start = tokio::time::Instant::now();
    let start_ns = ctx.clock.now_ns();
    let stats = schedule::dispatch(
        plan,
        start,
        stop.token(),
        cfg.load.lag_tolerance,
        issued,
        |r| {
            let (ctx, requests, stopped) = (ctx.clone(), requests.clone(), stop.token().clone());
            tracker.spawn(async move {
                run_session(
                    &ctx,
                    r.ticket.id,
                    r.ticket.sample,
                    start_ns + r.intended.as_nanos() as u64,
                    phase,
                    &requests,
                    &stopped,
                )
                .await;
                drop(r.permit);
            });
        },
    )
    .await;
    tracker.close();
    match (plan.duration, grace) {
        (Some(_), Some(g)) => {
            if tokio::time::timeout(g, tracker.wait()).await.is_err() {
                requests.cancel();
                tracker.wait().await;
            }
        }
        _ => tracker.wait().await,
    }
    stats
}

/// Trace rows to replay: `(sample, offset)` inside the window, shifted and sped up; `None` when
/// the samples carry no timestamps (and --fixed-schedule was not asked for).
fn trace_rows(
    cfg: &RunConfig,
    samples: &[Sample],
) -> Result<Option<Vec<(usize, Duration)>>, EngineError> {
    let t = cfg.load.trace;
    let timed = samples.iter().all(|s| s.timestamp_ms.is_some());
    if !timed {
        if t.forced {
            return Err(EngineError::Load(
                "--fixed-schedule needs a `timestamp` (ms) on every row of the input file".into(),
            ));
        }
        return Ok(None);
    }
    if cfg.load.rate.is_some() {
        return Ok(None);
    }
    let kept: Vec<(usize, f64)> = samples
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.timestamp_ms.map(|ts| (i, ts)))
        .filter(|(_, ts)| t.start_ms.is_none_or(|a| *ts >= a) && t.end_ms.is_none_or(|b| *ts <= b))
        .collect();
    if kept.is_empty() {
        return Err(EngineError::Load(
            "no trace rows inside --fixed-schedule-start-offset/--fixed-schedule-end-offset".into(),
        ));
    }
    let base = if t.auto_offset {
        kept[0].1
    } else {
        t.start_ms.unwrap_or(0.0)
    };
    let mut rows: Vec<(usize, Duration)> = kept
        .into_iter()
        .map(|(i, ts)| {
            (
                i,
                Duration::from_secs_f64(((ts - base) / t.speedup).max(0.0) / 1e3),
            )
        })
        .collect();
    if let Some(c) = cfg.request_count {
        rows.truncate(c as usize);
    }
    Ok(Some(rows))
}

/// Sends one ticket: a single request, or every turn of a multi-turn session in order (each
/// later turn carries the conversation so far, the server's replies included, after its delay).
/// A failed or cancelled turn ends the session.
async fn run_session(
    ctx: &Launch,
    id: u64,
    sample_index: usize,
    intended_ns: u64,
    phase: Phase,
    requests: &CancellationToken,
    stopped: &CancellationToken,
) {
    let sample = &ctx.samples[sample_index];
    let session = !sample.turns.is_empty();
    let mut history = if session {
        render::first_messages(sample)
    } else {
        Vec::new()
    };
    let mut body = ctx.bodies[sample_index].clone();
    let mut intended = intended_ns;
    for turn in 0..=sample.turns.len() {
        if turn > 0 {
            let next = &sample.turns[turn - 1];
            if let Some(ms) = next.delay_ms {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(ms / 1e3)) => {}
                    _ = requests.cancelled() => return,
                }
            }
            history.push(serde_json::json!({"role": "user", "content": next.text}));
            intended = ctx.clock.now_ns();
            match render::body(&history, next.max_tokens, &ctx.render) {
                Ok(b) => body = b,
                Err(e) => {
                    let mut rec = RequestRecord::started(id, sample_index, intended, intended);
                    rec.phase = phase;
                    rec.turn = turn as u32;
                    rec.outcome = Outcome::Failed(FailureKind::Transport);
                    rec.error = Some(format!("cannot render turn {turn}: {e}"));
                    let _ = ctx.tx.send(rec).await;
                    return;
                }
            }
        }
        let req = Prepared {
            uri: ctx.uri.clone(),
            body: body.clone(),
            streaming: ctx.streaming,
            capture_text: turn < sample.turns.len(),
        };
        let mut rec = RequestRecord::started(id, sample_index, intended, ctx.clock.now_ns());
        rec.phase = phase;
        rec.turn = turn as u32;
        let mut rec = ctx.client.execute(&req, rec, &ctx.clock, requests).await;
        if rec.outcome == Outcome::Cancelled && !stopped.is_cancelled() {
            rec.outcome = Outcome::Failed(FailureKind::GracePeriodExpired);
            rec.error = Some("still in flight when --benchmark-grace-period ran out".to_owned());
        }
        let ok = rec.outcome == Outcome::Success;
        if session {
            let reply = rec.response_text.take().unwrap_or_default();
            history.push(serde_json::json!({"role": "assistant", "content": reply}));
        }
        let backoff = ctx.unreachable.backoff(rec.outcome);
        let sent = ctx.tx.send(rec).await.is_ok();
        // A server that cannot be reached must not turn the loop into a flood of records: the
        // slot waits a little (the permit is held by the caller until this returns).
        if let Some(wait) = backoff {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = requests.cancelled() => {}
            }
        }
        if !sent || !ok {
            return;
        }
    }
}

/// The profiling phase's tickets: closed loop, open-loop arrivals computed up front, or a trace.
fn profiling_plan(cfg: &RunConfig, samples: &[Sample]) -> Result<Plan, EngineError> {
    let l = &cfg.load;
    let n = samples.len() as u64;
    let shard = l.shard;
    let (tickets, slots, ramp) = match (trace_rows(cfg, samples)?, l.rate) {
        (Some(rows), _) => (
            Tickets::Trace { rows },
            l.cap.map(|c| shard.part(c as u64).max(1) as usize),
            None,
        ),
        (None, None) => (
            Tickets::Closed {
                count: cfg
                    .request_count
                    .unwrap_or(if l.duration.is_some() { u64::MAX } else { n }),
            },
            Some(shard.part(cfg.concurrency as u64).max(1) as usize),
            l.ramp,
        ),
        (None, Some((rate, pattern, shape))) => {
            let arrivals = match (cfg.request_count, l.duration) {
                (Some(c), _) => arrivals(rate, pattern, shape, c as usize, l.seed, l.ramp),
                (None, Some(d)) => {
                    // Arrivals are prefix-stable in the count: grow until past the duration.
                    let mut k = (rate * d.as_secs_f64() * 1.2) as usize + 100;
                    loop {
                        let mut a = arrivals(rate, pattern, shape, k, l.seed, l.ramp);
                        if a.last().is_some_and(|t| *t >= d) {
                            a.retain(|t| *t < d);
                            break a;
                        }
                        k *= 2;
                    }
                }
                (None, None) => arrivals(rate, pattern, shape, n as usize, l.seed, l.ramp),
            };
            (
                Tickets::Open { arrivals },
                l.cap.map(|c| shard.part(c as u64).max(1) as usize),
                None,
            )
        }
    };
    Ok(Plan {
        tickets,
        samples: samples.len(),
        slots,
        ramp,
        duration: l.duration,
        shard,
    })
}

fn load_meta(
    cfg: &RunConfig,
    plan: &Plan,
    dispatch: DispatchStats,
    warmup: Option<DispatchStats>,
) -> LoadMeta {
    let l = &cfg.load;
    let secs = |d: Duration| d.as_secs_f64();
    LoadMeta {
        mode: match plan.tickets {
            Tickets::Closed { .. } => "closed",
            Tickets::Open { .. } => "open",
            Tickets::Trace { .. } => "trace",
        },
        request_rate: l.rate.map(|r| r.0),
        arrival_pattern: l.rate.map(|r| r.1),
        arrival_smoothness: l.rate.map(|r| r.2),
        concurrency_cap: l.cap,
        random_seed: l.seed,
        ramp_s: l.ramp.map(secs),
        benchmark_duration_s: l.duration.map(secs),
        grace_period_s: l.grace.map(secs),
        schedule_lag_tolerance_ms: l.lag_tolerance.as_secs_f64() * 1e3,
        shard: l.shard,
        shards_merged: None,
        dispatch,
        warmup,
    }
}

/// Where to scrape: the configured endpoints, else the target's own `/metrics` (every listener
/// of the embedded simulator). `None` with `--no-server-metrics`.
fn scrape_settings(cfg: &RunConfig, sim: Option<&SimHandle>, base: &str) -> Option<ScrapeSettings> {
    let sc = &cfg.scrape;
    if !sc.enabled {
        return None;
    }
    let endpoints = if !sc.endpoints.is_empty() {
        sc.endpoints.clone()
    } else if let Some(h) = sim {
        h.urls().iter().map(|u| format!("{u}/metrics")).collect()
    } else {
        vec![format!("{}/metrics", base.trim_end_matches('/'))]
    };
    // The simulator's counters are exact the moment a response ends; real engines lag.
    let settle = sc.settle.unwrap_or(if sim.is_some() {
        Duration::ZERO
    } else {
        Duration::from_secs(10)
    });
    Some(ScrapeSettings {
        endpoints,
        interval: sc.interval,
        timeout: sc.timeout,
        settle,
        require_stable: sc.require_stable,
        stable_max: Duration::from_secs(30),
        acceptance: sc.acceptance,
        save_dir: None,
    })
}

/// The first `n` request bodies a replay of `cfg` would send, in replay order (no server needed;
/// the model is `--model` or `"<model>"`).
pub fn render_requests(cfg: &RunConfig, n: usize) -> Result<Vec<serde_json::Value>, EngineError> {
    let collection = load_collection(cfg)?;
    let model = cfg.model.clone().unwrap_or_else(|| "<model>".into());
    let opts = cfg.render_options(model, collection.encoder.clone());
    let plan = profiling_plan(cfg, &collection.samples)?;
    let mut out = Vec::new();
    for id in 0..plan.len().unwrap_or(n as u64).min(n as u64) {
        let Some(t) = plan.ticket_for(id) else { break };
        let s = &collection.samples[t];
        let body =
            render::body(&render::first_messages(s), s.max_tokens, &opts).map_err(|source| {
                EngineError::Render {
                    sample: s.id.clone(),
                    source,
                }
            })?;
        out.push(serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null));
    }
    Ok(out)
}

/// A collection ready to render: samples, the encoder and the optional tokenizer.
pub(crate) struct Collection {
    pub(crate) samples: Vec<Sample>,
    pub(crate) encoder: Arc<Encoder>,
    pub(crate) tokenizer: Option<Tokenizer>,
}

/// Loads the samples, the encoder (a chat template is read here) and the tokenizer.
pub(crate) fn load_collection(cfg: &RunConfig) -> Result<Collection, EngineError> {
    let tokenizer = cfg
        .tokenizer
        .as_deref()
        .map(Tokenizer::from_path)
        .transpose()
        .map_err(|e| EngineError::Tokenizer(format!("--tokenizer: {e}")))?;
    let encoder = match &cfg.encoder {
        EncoderSpec::None => Encoder::None,
        EncoderSpec::Dsv4 => Encoder::Dsv4,
        EncoderSpec::Dsv41 => Encoder::Dsv41,
        EncoderSpec::Template(p) => Encoder::Template(ChatTemplate::from_path(p).map_err(|e| {
            EngineError::Tokenizer(format!("--encoder template:{}: {e}", p.display()))
        })?),
    };
    let bundled = || {
        dataset::load_str(
            BUNDLED_COLLECTION,
            "bundled datasets/qualitative.jsonl",
            dataset::DatasetKind::SpeedBench,
            &cfg.select,
        )
    };
    let samples = match &cfg.dataset {
        DatasetSource::Bundled => bundled()?,
        DatasetSource::File { path, kind } => dataset::load_file(path, *kind, &cfg.select)?,
        DatasetSource::Synthetic(spec) => {
            let tok = tokenizer
                .as_ref()
                .ok_or_else(|| EngineError::Tokenizer("--synthetic needs --tokenizer".into()))?;
            let corpus: Vec<String> = dataset::load_str(
                BUNDLED_COLLECTION,
                "bundled datasets/qualitative.jsonl",
                dataset::DatasetKind::SpeedBench,
                &Default::default(),
            )?
            .into_iter()
            .map(|s| s.prompt)
            .collect();
            dataset::synthetic::generate(spec, tok, &corpus.join("\n\n"))
                .map_err(|e| EngineError::Tokenizer(format!("--synthetic: {e}")))?
        }
    };
    Ok(Collection {
        samples,
        encoder: Arc::new(encoder),
        tokenizer,
    })
}

/// Each sample's first request body, built before the clock starts; with a tokenizer, the
/// client-side input token count of what is sent (the rendered prompt, or the messages'
/// rendering by the encoder for chat).
pub(crate) fn render_bodies(
    samples: &[Sample],
    opts: &RenderOptions,
    tokenizer: Option<&Tokenizer>,
) -> Result<(Vec<Bytes>, Option<Vec<u64>>), EngineError> {
    let mut bodies = Vec::with_capacity(samples.len());
    let mut counts = tokenizer.map(|_| Vec::with_capacity(samples.len()));
    for s in samples {
        let messages = render::first_messages(s);
        let fail = |source| EngineError::Render {
            sample: s.id.clone(),
            source,
        };
        bodies.push(render::body(&messages, s.max_tokens, opts).map_err(fail)?);
        if let (Some(t), Some(c)) = (tokenizer, counts.as_mut()) {
            let text = render::prompt(&messages, opts).map_err(fail)?;
            let n = t
                .count(&text)
                .map_err(|e| EngineError::Tokenizer(format!("sample {}: {e}", s.id)))?;
            c.push(n as u64);
        }
    }
    Ok((bodies, counts))
}

/// Deadline and stall watchdog, both feeding the one stopper.
fn spawn_guards(
    cfg: &RunConfig,
    stop: &Stopper,
    mut progress: watch::Receiver<Progress>,
    issued: Arc<Issued>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let deadline = {
        let (stop, limit) = (stop.clone(), cfg.run_timeout);
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            stop.stop(StopReason::Deadline);
        })
    };
    let stall = {
        let (stop, limit) = (stop.clone(), cfg.stall_timeout);
        tokio::spawn(async move {
            loop {
                match tokio::time::timeout(limit, progress.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return,
                    Err(_) if issued.get() > 0 => {
                        stop.stop(StopReason::Stalled);
                        return;
                    }
                    Err(_) => continue,
                }
            }
        })
    };
    vec![deadline, stall]
}

fn join(base: &str, path: &str) -> Result<Uri, EngineError> {
    format!("{}{}", base.trim_end_matches('/'), path)
        .parse()
        .map_err(|e: http::uri::InvalidUri| EngineError::Url {
            url: base.to_owned(),
            reason: e.to_string(),
        })
}

/// Polls `GET /v1/models` until it answers (any HTTP status counts as alive) or `wait` passes.
async fn probe(
    client: &Client,
    base: &str,
    wait: Duration,
    stop: &Stopper,
) -> Result<Fetched, EngineError> {
    let uri = join(base, "/v1/models")?;
    let until = Instant::now() + wait;
    loop {
        let attempt = client
            .get(
                uri.clone(),
                Duration::from_secs(10),
                "application/json",
                BodyCap {
                    bytes: 1 << 20,
                    name: "model list size cap",
                },
            )
            .await;
        match attempt {
            Ok(ok) => return Ok(ok),
            Err(reason) if Instant::now() >= until || stop.token().is_cancelled() => {
                return Err(EngineError::NotReady {
                    url: base.to_owned(),
                    reason: reason.into(),
                })
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn discover_model(
    client: &Client,
    base: &str,
    wait: Duration,
    stop: &Stopper,
) -> Result<String, EngineError> {
    let Fetched { status, body, .. } = probe(client, base, wait, stop).await?;
    if status != 200 {
        return Err(EngineError::NoModel(format!(
            "GET {base}/v1/models answered HTTP {status}"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| EngineError::NoModel(format!("GET {base}/v1/models is not JSON: {e}")))?;
    v.pointer("/data/0/id")
        .and_then(|x| x.as_str())
        .map(str::to_owned)
        .ok_or_else(|| EngineError::NoModel(format!("GET {base}/v1/models lists no model")))
}

/// Opens up to `n` keep-alive connections before the clock starts, so the first requests do not
/// pay for TCP and TLS set-up inside their TTFT.
async fn warm_pool(client: &Client, base: &str, n: usize, limit: Duration) {
    let Ok(uri) = join(base, "/health") else {
        return;
    };
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n.min(1024) {
        let (c, u) = (client.clone(), uri.clone());
        set.spawn(async move {
            let cap = BodyCap {
                bytes: 64 << 10,
                name: "health body size cap",
            };
            let _ = c.get(u, limit, "*/*", cap).await;
        });
    }
    while set.join_next().await.is_some() {}
}

/// `artifacts/<model>-<endpoint>-concurrency<N>`. The model name may come from the server
/// (`/v1/models`), so it is reduced to one short path component: `/`, `\` and everything else
/// outside `[A-Za-z0-9._-]` become `_`, and it is cut to 100 characters (file names stop at
/// 255 bytes). The suffix keeps it from ever being `.` or `..`.
fn default_artifact_dir(model: &str, cfg: &RunConfig) -> PathBuf {
    let safe: String = model
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let kind = match cfg.endpoint_type {
        render::EndpointType::Chat => "chat",
        render::EndpointType::Completions => "completions",
    };
    Path::new("artifacts").join(format!("{safe}-{kind}-concurrency{}", cfg.concurrency))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_never_reached_the_server_back_off() {
        let u = Unreachable::default();
        let connect = Outcome::Failed(FailureKind::Connect);
        let waits: Vec<u128> = (0..8)
            .map(|_| u.backoff(connect).unwrap().as_millis())
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 250, 250, 250]);
        assert_eq!(u.backoff(Outcome::Failed(FailureKind::HttpStatus)), None);
        assert_eq!(u.backoff(connect), Some(Duration::from_millis(10)), "reset");
        assert_eq!(u.backoff(Outcome::Success), None);
    }

    #[test]
    fn hostile_model_names_stay_one_short_component_under_artifacts() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["specperf", "replay"]).unwrap();
        let crate::cli::Command::Replay(a) = cli.command else {
            panic!("not replay")
        };
        let cfg = RunConfig::from_args(&a).unwrap();
        let long = "x".repeat(10_000);
        for model in [
            "../../etc/passwd",
            "/abs/path",
            "..",
            ".",
            "",
            "a\\..\\b",
            "C:\\x",
            "~/.ssh",
            "名前/../..",
            long.as_str(),
        ] {
            let dir = default_artifact_dir(model, &cfg);
            let parts: Vec<_> = dir.components().collect();
            assert_eq!(parts.len(), 2, "{model:?} -> {}", dir.display());
            assert_eq!(parts[0].as_os_str(), "artifacts");
            let std::path::Component::Normal(name) = parts[1] else {
                panic!("{model:?} -> {}", dir.display())
            };
            let name = name.to_str().unwrap();
            assert!(name.len() <= 255 && !name.contains(['/', '\\']), "{name}");
            assert!(name.ends_with("-chat-concurrency64"), "{name}");
        }
    }
}
