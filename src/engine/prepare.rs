//! Everything a run does before its first request: the collection and the plan, the open-file
//! limit, the embedded simulator, the client, the model (probed or discovered), the rendered
//! bodies and the artifact files. Errors here are [`EngineError`]s; nothing has been measured yet.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use tokio::sync::watch;

use super::contact::{check_session_control, discover_model, probe, resolve_once, warm_pool};
use super::{EngineError, BUNDLED_COLLECTION};
use crate::client::Client;
use crate::config::{DatasetSource, EncoderSpec, RunConfig, Target};
use crate::dataset::{self, Sample};
use crate::progress::{Progress, StartStep};
use crate::render::{self, RenderOptions};
use crate::schedule::{arrivals, Plan, Tickets};
use crate::scrape::ScrapeSettings;
use crate::sim::{SimHandle, Simulator};
use crate::stop::Stopper;
use tokenizer_encoders::{ChatTemplate, Encoder, Tokenizer};

/// A run ready to send its first request.
pub(super) struct Ready {
    pub(super) cfg: RunConfig,
    pub(super) samples: Arc<[Sample]>,
    /// The profiling phase's tickets.
    pub(super) plan: Plan,
    /// The embedded simulator, kept alive until the run is finished.
    pub(super) sim: Option<SimHandle>,
    pub(super) base_url: String,
    pub(super) client: Client,
    pub(super) scrape_settings: Option<ScrapeSettings>,
    pub(super) model: String,
    pub(super) render: Arc<RenderOptions>,
    pub(super) bodies: Vec<Bytes>,
    /// Client-side token counts per sample (`--tokenizer`).
    pub(super) client_isl: Option<Vec<u64>>,
    pub(super) uri: Uri,
    /// The artifact directory (created).
    pub(super) dir: PathBuf,
    /// What preparing did that the reader should know (an earlier run moved aside).
    pub(super) notes: Vec<String>,
    /// The AgentX replay's traces and prompts, when the run is one (`RunConfig::agentx`).
    pub(super) agentx: Option<AgentxReady>,
    /// Cancelled once the connection warm-up ([`warm_pool`]) ended; the clock waits for it.
    pub(super) pool_warm: tokio_util::sync::CancellationToken,
    /// The GPU telemetry source, opened and read once (`--gpu-telemetry`); taken by the run.
    pub(super) telemetry: Option<(crate::telemetry::task::Source, Vec<crate::telemetry::Frame>)>,
}

/// The most the `nvext.session_control` check waits for its one-token answer.
const SESSION_CONTROL_CHECK_LIMIT: Duration = Duration::from_secs(60);

/// What the AgentX lane scheduler replays: the loaded traces and their prompt synthesizer.
pub(super) struct AgentxReady {
    pub(super) traces: Vec<Arc<crate::agentx::Trace>>,
    pub(super) messages: Arc<dyn super::agentx::TurnMessages>,
}

/// Loads the AgentX traces (their unknown-key warning goes to `notes`), the tokenizer and the
/// prompt synthesizer, instead of a collection.
fn prepare_agentx(
    s: &crate::config::AgentxSettings,
    notes: &mut Vec<String>,
) -> Result<AgentxReady, EngineError> {
    let corpus = crate::agentx::load(&s.input, &s.load)?;
    notes.extend(corpus.warning());
    // A trace whose prompts cannot be made fails here, naming it, not as a failed request an
    // hour into the run (AIPerf refuses such a trace while loading too).
    for t in &corpus.traces {
        crate::agentx::prompt::PromptSynth::check(t)
            .map_err(|e| EngineError::Load(format!("{} ({}): {e}", s.input.display(), t.origin)))?;
    }
    let tokenizer = Tokenizer::from_path(&s.tokenizer).map_err(|e| {
        EngineError::Tokenizer(format!("--tokenizer {}: {e}", s.tokenizer.display()))
    })?;
    let synth = crate::agentx::prompt::PromptSynth::new(Arc::new(tokenizer), s.seed)
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
    Ok(AgentxReady {
        traces: corpus.traces.into_iter().map(Arc::new).collect(),
        messages: Arc::new(super::agentx::SynthMessages(Arc::new(synth))),
    })
}

/// The JSONL files the aggregator appends to, opened before the first request so that an
/// unwritable directory stops the run before it starts.
pub(super) struct Files {
    pub(super) records: Box<dyn Write + Send>,
    pub(super) profile_export: Box<dyn Write + Send>,
}

/// Prepares `cfg` for its first request, saying each wait on the server on `progress`.
pub(super) async fn prepare(
    cfg: RunConfig,
    stop: &Stopper,
    progress: &watch::Sender<Progress>,
) -> Result<(Ready, Files), EngineError> {
    let mut agentx_notes = Vec::new();
    let agentx = cfg
        .agentx
        .as_deref()
        .map(|s| prepare_agentx(s, &mut agentx_notes))
        .transpose()?;
    let collection = match agentx {
        // The AgentX replay makes its prompts per turn; there is no collection.
        Some(_) => Collection {
            samples: Vec::new(),
            encoder: Arc::new(Encoder::None),
            tokenizer: None,
            warnings: Vec::new(),
        },
        None => load_collection(&cfg)?,
    };
    let samples: Arc<[Sample]> = collection.samples.clone().into();
    let plan = match agentx {
        // Lanes, bounded by --benchmark-duration (or the trees draining), not a ticket count.
        Some(_) => Plan {
            tickets: Tickets::Closed { count: u64::MAX },
            samples: 0,
            slots: Some(cfg.concurrency),
            ramp: None,
            duration: cfg.load.duration,
            shard: cfg.load.shard,
        },
        None => profiling_plan(&cfg, &samples)?,
    };
    // Before any socket opens: the simulator's ends count too when it runs in this process.
    // Never more in flight than the plan has requests: `--concurrency 100000 --request-count 1`
    // needs two descriptors, not 200,000.
    let in_flight = plan.slots.map(|s| {
        let warmup = cfg.load.warmup.map_or(0, |w| {
            let c = cfg.load.shard.part(w.concurrency as u64);
            match (w.count, w.duration) {
                (Some(n), None) => c.min(n),
                _ => c,
            }
        });
        (s as u64).min(plan.len().unwrap_or(u64::MAX)).max(warmup)
    });
    // AgentX: subagents do not take lanes, so streams in flight may exceed --concurrency.
    let in_flight = match agentx {
        Some(_) => Some(cfg.concurrency as u64 * 2),
        None => in_flight,
    };
    crate::fdlimit::ensure(in_flight, if cfg.target.is_embedded() { 2 } else { 1 })?;
    check_output_dirs(&cfg)?;
    let (sim, base_url): (Option<SimHandle>, String) = match &cfg.target {
        Target::Url(u) => (None, u.clone()),
        Target::Embedded(sc) => {
            let h = Simulator::spawn((**sc).clone())?;
            let url = h.url();
            (Some(h), url)
        }
        Target::Unbound => return Err(EngineError::Unbound),
    };
    let mut client_opts = cfg.client.clone();
    // Credentials go to the target only, not to metrics endpoints on other hosts.
    client_opts.origin = base_url
        .parse::<Uri>()
        .ok()
        .map(|u| crate::client::origin_of(&u));
    let client = Client::new(client_opts)?;
    progress.send_modify(|p| p.start_step(StartStep::Resolving));
    // The embedded simulator's URL is an address already: its lookup is immediate.
    let addr = resolve_once(&base_url, cfg.client.timeouts.connect).await?;
    progress.send_modify(|p| {
        if let Some(s) = p.starting.as_mut() {
            s.addr = addr;
        }
    });
    let scrape_settings = scrape_settings(&cfg, sim.as_ref(), &base_url);
    // Like AIPerf, a given model and no --wait-for-model-timeout means no readiness wait: an
    // unreachable server then shows up as failed records. Without a model, one is discovered.
    let model = match &cfg.model {
        Some(m) if cfg.wait_for_model.is_zero() => m.clone(),
        Some(m) => {
            progress.send_modify(|p| p.start_step(StartStep::ModelList));
            probe(&client, &base_url, cfg.wait_for_model, stop).await?;
            m.clone()
        }
        None => {
            progress.send_modify(|p| p.start_step(StartStep::ModelList));
            discover_model(&client, &base_url, cfg.wait_for_model, stop).await?
        }
    };
    // No more connections than requests: a 4-request run against a server that accepts slowly
    // opened 64 and waited on all of them.
    let pool = match (&agentx, plan.len()) {
        (None, Some(n)) => cfg.concurrency.min(n as usize),
        _ => cfg.concurrency,
    };
    // Beside the AL baseline (phase), not before it: against a server that accepts and never
    // answers, the two waits used to add up before the first request. Neither waits longer than
    // a request may take.
    let pool_warm = tokio_util::sync::CancellationToken::new();
    tokio::spawn(warm_pool(
        client.clone(),
        base_url.clone(),
        pool,
        cfg.client.timeouts.connect.min(cfg.client.timeouts.total),
        progress.clone(),
        pool_warm.clone(),
    ));

    let (telemetry, telemetry_note) = open_telemetry(&cfg, sim.as_ref(), &client).await?;
    let render = Arc::new(cfg.render_options(model.clone(), collection.encoder.clone()));
    let (bodies, client_isl) = render_bodies(&samples, &render, collection.tokenizer.as_ref())?;
    let uri: Uri = format!("{}{}", base_url.trim_end_matches('/'), cfg.endpoint_path)
        .parse()
        .map_err(|e: http::uri::InvalidUri| EngineError::Url {
            url: base_url.clone(),
            reason: e.to_string(),
        })?;

    if let Some(s) = cfg.agentx.as_deref() {
        if s.routing.nvext_session_timeout_s.is_some() {
            let mut wire = super::agentx::Wire::of_run(&cfg, &s.routing, model.clone());
            wire.streaming = false;
            let check = [crate::agentx::prompt::Message {
                role: crate::agentx::prompt::Role::User,
                content: "specperf: does this server take nvext.session_control?".into(),
            }];
            let body = wire.body(&check, 1, Some("specperf-session-control-check"));
            let limit = cfg.client.timeouts.total.min(SESSION_CONTROL_CHECK_LIMIT);
            check_session_control(&client, &uri, body.to_bytes(), limit).await?;
        }
    }
    let dir = cfg
        .artifact_dir
        .clone()
        .unwrap_or_else(|| default_artifact_dir(&model, &cfg));
    let mut notes: Vec<String> = move_earlier_run_aside(&dir)?.into_iter().collect();
    notes.extend(agentx_notes);
    notes.extend(collection.warnings.iter().cloned());
    notes.extend(telemetry_note);
    std::fs::create_dir_all(&dir).map_err(|source| EngineError::Artifacts {
        path: dir.display().to_string(),
        source,
    })?;
    let create = |name: &str| -> Result<Box<dyn Write + Send>, EngineError> {
        let path = dir.join(name);
        let file = std::fs::File::create(&path).map_err(|source| EngineError::Artifacts {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Box::new(std::io::BufWriter::new(file)))
    };
    let files = Files {
        records: create("records.jsonl")?,
        profile_export: create("profile_export.jsonl")?,
    };
    // The AgentX replay makes each prompt when its turn is due (a trace set holds ~100k
    // requests of up to ~1M tokens of context): there are no bodies to list up front, so no
    // inputs.json (InferenceX leaves it out of its uploads for these runs too).
    if agentx.is_none() {
        crate::report::write_inputs(&dir, &bodies).map_err(|source| EngineError::Artifacts {
            path: dir.join("inputs.json").display().to_string(),
            source,
        })?;
    }
    let ready = Ready {
        cfg,
        samples,
        plan,
        sim,
        base_url,
        client,
        scrape_settings,
        model,
        render,
        bodies,
        client_isl,
        uri,
        dir,
        notes,
        agentx,
        pool_warm,
        telemetry,
    };
    Ok((ready, files))
}

/// Opens the `--gpu-telemetry` source and takes its first read. With nothing named, a run on the
/// embedded simulator with GPUs (`--sim-gpus`) reads the simulator's DCGM page. A source that
/// does not answer is a note and a run without GPU telemetry, or with `--require-gpu-telemetry`
/// an error before any request.
async fn open_telemetry(
    cfg: &RunConfig,
    sim: Option<&SimHandle>,
    client: &Client,
) -> Result<
    (
        Option<(crate::telemetry::task::Source, Vec<crate::telemetry::Frame>)>,
        Option<String>,
    ),
    EngineError,
> {
    use crate::telemetry::task::{open, Ask};
    let t = &cfg.telemetry;
    // One shard reads the GPUs, as one scrapes the counters.
    let Some(ask) = t
        .ask
        .as_ref()
        .filter(|_| cfg.load.shard.index == cfg.load.metrics_shard)
    else {
        return Ok((None, None));
    };
    let ask = match (ask, sim.and_then(SimHandle::dcgm_url)) {
        (Ask::Auto, Some(url)) => Ask::Dcgm(vec![url]),
        _ => ask.clone(),
    };
    let timeout = cfg.scrape.timeout.min(crate::scrape::BASELINE_TIMEOUT);
    match open(&ask, client, timeout).await {
        Ok(opened) => Ok((Some(opened), None)),
        Err(e) if t.require => Err(EngineError::Telemetry(e.to_string())),
        Err(e) => Ok((
            None,
            Some(format!("{e}; the run goes on without GPU telemetry")),
        )),
    }
}

/// An artifact directory holding an earlier run is moved aside ([`crate::fsutil::move_earlier_run_aside`]);
/// a directory that cannot be is an `--artifact-dir` error.
fn move_earlier_run_aside(dir: &Path) -> Result<Option<String>, EngineError> {
    crate::fsutil::move_earlier_run_aside(dir).map_err(|source| EngineError::OutputDir {
        flag: "--artifact-dir",
        path: dir.display().to_string(),
        source,
    })
}

/// Every output location named on the command line must be writable before the first request
/// (the default artifact directory, named from the model, is created just after discovery).
fn check_output_dirs(cfg: &RunConfig) -> Result<(), EngineError> {
    let result_dir = cfg.result_file.as_ref().and_then(|(d, _)| d.as_deref());
    let dirs = [
        ("--artifact-dir", cfg.artifact_dir.as_deref()),
        ("--result-dir / RESULT_DIR", result_dir),
    ];
    for (flag, dir) in dirs {
        if let Some(d) = dir {
            crate::fsutil::ensure_writable_dir(d).map_err(|source| EngineError::OutputDir {
                flag,
                path: d.display().to_string(),
                source,
            })?;
        }
    }
    Ok(())
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
                // `--request-rate inf`: every arrival at once (config refused a duration).
                (c, _) if rate.is_infinite() => vec![Duration::ZERO; c.unwrap_or(n) as usize],
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
        // A scrape never waits longer than a request may (`--request-timeout-seconds 2`
        // against a hung server: the baseline took the full 3 s metrics timeout).
        timeout: sc.timeout.min(cfg.client.timeouts.total),
        settle,
        require_stable: sc.require_stable,
        stable_max: Duration::from_secs(30),
        acceptance: sc.acceptance,
        save_dir: None,
        slice: sc.slice,
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
    /// What the file says that must be said ([`dataset::Loaded::warnings`]).
    pub(crate) warnings: Vec<String>,
}

/// The samples of the configured collection in replay order, loaded as a run would (for
/// `--category all` and `collect`'s prompt count).
pub(crate) fn collection_samples(cfg: &RunConfig) -> Result<Vec<Sample>, EngineError> {
    Ok(load_collection(cfg)?.samples)
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
    let mut warnings = Vec::new();
    let samples = match &cfg.dataset {
        DatasetSource::Bundled => bundled()?.samples,
        DatasetSource::File { path, kind } => {
            let loaded = dataset::load_file(path, *kind, &cfg.select)?;
            warnings = loaded.warnings;
            loaded.samples
        }
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
            .samples
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
        warnings,
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

/// `artifacts/<model>-<endpoint>-concurrency<N>` (open loop: `-rate<R>[-concurrency<N>]`). The
/// model name may come from the server
/// (`/v1/models`), so it is reduced to one short path component: `/`, `\` and everything else
/// outside `[A-Za-z0-9._-]` become `_`, and it is cut to 100 characters (file names stop at
/// 255 bytes). The suffix keeps it from ever being `.` or `..`.
pub(super) fn default_artifact_dir(model: &str, cfg: &RunConfig) -> PathBuf {
    let safe = crate::fsutil::safe_name(model);
    let kind = match cfg.endpoint_type {
        render::EndpointType::Chat => "chat",
        render::EndpointType::Completions => "completions",
    };
    // The load actually used: an open loop is named by its rate, plus its cap when it has one.
    let load = match (cfg.load.rate, cfg.load.cap) {
        (Some((r, ..)), None) => format!("rate{r}"),
        (Some((r, ..)), Some(c)) => format!("rate{r}-concurrency{c}"),
        (None, _) => format!("concurrency{}", cfg.concurrency),
    };
    Path::new("artifacts").join(format!("{safe}-{kind}-{load}"))
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
