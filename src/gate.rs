//! The AL gate: golden curve + a replay of its collection on the eval's own server -> verdict.
//!
//! ```text
//!  flags/env ─> curve (golden::select) ─> collection block ─> prompts ─> metrics preflight
//!          ─> engine::replay (stable before/after scrapes, settle) ─> acceptance ─> verdict
//!          ─> al_gate_<RESULT_FILENAME>.json (atomic) + console line
//! ```
//!
//! Report-only and bounded: every path ends in a [`GateResult`] (pass, below, above, skipped with
//! a reason, error with a reason), the whole gate is bounded by `AL_GATE_TIMEOUT_S`, and a signal
//! becomes an `error`/`terminated` result at once (`inferencex-contract.md` §5, §6).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::cli::{Cli, Command, GateArgs};
use crate::client::Client;
use crate::config::{metrics_endpoints, RunConfig};
use crate::engine::replay;
use crate::golden::{
    parse_draft_len, Collection, CollectionEndpoint, CurveQuery, GoldenSource, Renderer,
    ThinkingMode, Turns,
};
use crate::metrics::Progress;
use crate::scrape::acceptance::{AcceptanceStatus, SpecEngine};
use crate::scrape::{self, ScrapeReport};
use crate::stop::{StopReason, Stopper};
use crate::timefmt::rfc3339_now;

/// Version of the gate's extension fields.
pub const GATE_VERSION: u32 = 1;

/// The outcome class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within ±5 % of the golden AL (inclusive).
    Pass,
    /// Below the band.
    Below,
    /// Above the band.
    Above,
    /// Not measured, for a reason that is not a failure of the server.
    Skipped,
    /// Could not measure.
    Error,
}

impl Verdict {
    /// The file's `verdict` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Below => "below",
            Verdict::Above => "above",
            Verdict::Skipped => "skipped",
            Verdict::Error => "error",
        }
    }
}

/// A finished gate: the result file's content and where it went.
#[derive(Clone, Debug)]
pub struct GateResult {
    /// The verdict.
    pub verdict: Verdict,
    /// The skip or error code (`None` for pass/below/above).
    pub reason: Option<String>,
    /// Every field of the result file (sorted on write).
    pub fields: BTreeMap<String, Value>,
    /// Where the file was written, or why it could not be.
    pub written: Result<PathBuf, String>,
}

impl GateResult {
    /// The M1 console line (`inferencex-contract.md` §5.6).
    pub fn console_line(&self) -> String {
        let num = |k: &str, digits: usize| match self.fields.get(k).and_then(Value::as_f64) {
            Some(x) => format!("{x:.digits$}"),
            None => "None".into(),
        };
        let status = if self.verdict == Verdict::Pass {
            "PASS"
        } else {
            "FAIL"
        };
        let mode = self
            .fields
            .get("thinking_mode")
            .and_then(Value::as_str)
            .unwrap_or("None");
        let k = self
            .fields
            .get("num_speculative_tokens")
            .and_then(Value::as_u64)
            .map_or("None".into(), |k| k.to_string());
        let mut line = format!(
            "{status}: SpeedBench AL {} (range [{}, {}], mode {mode}, mtp {k})",
            num("acceptance_length", 4),
            num("min_acceptance_length", 4),
            num("max_acceptance_length", 4),
        );
        if matches!(self.verdict, Verdict::Skipped | Verdict::Error) {
            line.push_str(&format!(
                " [{}: {}]",
                self.verdict.as_str(),
                self.reason.as_deref().unwrap_or("")
            ));
        }
        line
    }
}

/// A non-pass outcome found on the way: verdict, code and message.
struct Stop {
    verdict: Verdict,
    code: &'static str,
    message: String,
}

fn skip(code: &'static str, message: impl Into<String>) -> Stop {
    Stop {
        verdict: Verdict::Skipped,
        code,
        message: message.into(),
    }
}

fn error(code: &'static str, message: impl Into<String>) -> Stop {
    Stop {
        verdict: Verdict::Error,
        code,
        message: message.into(),
    }
}

/// Rounds to `digits` decimals the way `printf "%.Nf"` does (from the exact binary value).
fn round_to(x: f64, digits: usize) -> f64 {
    format!("{x:.digits$}").parse().unwrap_or(x)
}

/// The band and verdict for a measured AL against the golden AL (§5.3 steps 8–9): the comparison
/// uses the 4-decimal value written to the file.
pub fn verdict(al: f64, golden: f64) -> (f64, f64, f64, Verdict) {
    let al4 = round_to(al, 4);
    let min = round_to(golden * 0.95, 10);
    let max = round_to(golden * 1.05, 10);
    let v = if al4 < min {
        Verdict::Below
    } else if al4 > max {
        Verdict::Above
    } else {
        Verdict::Pass
    };
    (al4, min, max, v)
}

/// The metrics family of a configured framework (§9.3): `(engine, source prefix)`.
fn classify_framework(
    framework: &str,
    backend: Option<&str>,
) -> Result<(SpecEngine, String), Stop> {
    let mut fw = framework.trim().to_ascii_lowercase();
    if fw == "dynamo" {
        if let Some(b) = backend.filter(|b| !b.trim().is_empty()) {
            fw = format!("dynamo-{}", b.trim().to_ascii_lowercase());
        }
    }
    let engine = match fw.as_str() {
        "vllm" | "dynamo-vllm" => SpecEngine::Vllm,
        "sglang" | "dynamo-sglang" => SpecEngine::Sglang,
        "trt"
        | "trtllm"
        | "tensorrt-llm"
        | "tensorrt_llm"
        | "dynamo-trt"
        | "dynamo-trtllm"
        | "dynamo-tensorrt-llm"
        | "dynamo-tensorrt_llm" => SpecEngine::Trtllm,
        "atom" => SpecEngine::Atom,
        "tilert" => return Err(skip("tilert", "TileRT exposes no speculative counters")),
        _ => {
            return Err(error(
                "unsupported_framework",
                format!("Unsupported speculative metrics framework: {fw}"),
            ))
        }
    };
    Ok((engine, fw))
}

/// Everything resolved before the replay.
struct Plan {
    fields: BTreeMap<String, Value>,
    golden_al: f64,
    k: u32,
    framework: String,
    argv: Vec<String>,
    endpoints: Vec<String>,
    expected_engines: Option<usize>,
    prompts_expected: u32,
    settle: Duration,
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

fn set(fields: &mut BTreeMap<String, Value>, k: &str, v: impl Into<Value>) {
    fields.insert(k.to_owned(), v.into());
}

/// Steps that need no server: configuration, curve, collection, prompts (§5.3 steps 1–3).
fn resolve(a: &GateArgs, fields: &mut BTreeMap<String, Value>) -> Result<Plan, Stop> {
    let method = a.spec_method.clone().unwrap_or_default();
    if method.trim().is_empty() || method.trim().eq_ignore_ascii_case("none") {
        return Err(skip(
            "spec_decoding_disabled",
            "speculative decoding disabled",
        ));
    }
    let secs = |name: &str, v: &Option<String>, default: f64| -> Result<Duration, Stop> {
        let Some(t) = v.as_deref().map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Duration::from_secs_f64(default));
        };
        t.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                error(
                    "config_invalid",
                    format!("{name}={t:?} is not a number of seconds"),
                )
            })
    };
    let settle = secs("AL_GATE_SETTLE_S", &a.settle_seconds, 10.0)?;
    let concurrency: u32 = match a.concurrency.as_deref().map(str::trim) {
        None | Some("") => 64,
        Some(c) => c.parse().ok().filter(|c| *c > 0).ok_or_else(|| {
            error(
                "config_invalid",
                format!("AL_GATE_CONCURRENCY={c:?} is not a positive integer"),
            )
        })?,
    };
    let expected_engines = match a.expected_engines.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(e) => Some(e.parse::<usize>().map_err(|_| {
            error(
                "config_invalid",
                format!("AL_GATE_EXPECTED_ENGINES={e:?} is not an integer"),
            )
        })?),
    };
    let thinking: ThinkingMode = match &a.thinking_mode {
        None => {
            return Err(error(
                "config_invalid",
                "THINKING_MODE is required (thinking_on or thinking_off)",
            ))
        }
        Some(t) => t
            .parse()
            .map_err(|e: crate::golden::GoldenError| error("config_invalid", e.to_string()))?,
    };
    set(fields, "thinking_mode", thinking.as_str());
    let Some(prefix) = a.model_prefix.clone().filter(|p| !p.trim().is_empty()) else {
        return Err(error(
            "config_invalid",
            "MODEL_PREFIX is required (e.g. dsv4)",
        ));
    };
    set(fields, "model_prefix", prefix.clone());
    let framework = a.framework.clone().unwrap_or_else(|| "vllm".into());
    set(fields, "framework", framework.clone());
    let (engine, fw) = classify_framework(&framework, a.dynamo_backend.as_deref())?;
    let k = match a.num_spec_tokens.as_deref() {
        None => return Err(error("config_invalid", "NUM_SPEC_TOKENS is required")),
        Some(k) => parse_draft_len(k).map_err(|e| error("no_golden_curve", e.to_string()))?,
    };
    set(fields, "num_speculative_tokens", k);

    // Curve and golden value (§2).
    let golden_path = a.golden.clone().ok_or_else(|| {
        error(
            "no_golden_curve",
            "no golden curves given: pass --golden DIR",
        )
    })?;
    let source =
        GoldenSource::open(&golden_path).map_err(|e| error("no_golden_curve", e.to_string()))?;
    let q = CurveQuery {
        model_prefix: &prefix,
        method: &method,
        draft_model: a.draft_model.as_deref(),
        draft_sample_method: a.draft_sample_method.as_deref(),
    };
    let g = source.select(&q, thinking, k).map_err(|e| {
        if e.is_invalid_golden() {
            error("invalid_golden", e.to_string())
        } else {
            error("no_golden_curve", e.to_string())
        }
    })?;
    set(fields, "curve", g.curve.name.clone());
    set(fields, "golden_file", g.curve.file.display().to_string());
    set(fields, "model_key", g.curve.model_key.clone());
    set(fields, "reference_acceptance_length", g.al);
    set(fields, "min_acceptance_length", round_to(g.al * 0.95, 10));
    set(fields, "max_acceptance_length", round_to(g.al * 1.05, 10));

    // Collection block or override (§4).
    let (collection, base_dir) = match &a.collection_metadata {
        Some(p) => {
            let file = if p.is_dir() {
                p.join(format!("{}.yaml", g.curve.name))
            } else {
                p.clone()
            };
            if file.is_file() {
                let c =
                    Collection::load(&file).map_err(|e| error("invalid_golden", e.to_string()))?;
                (Some(c), file.parent().map(Path::to_path_buf))
            } else {
                (
                    g.curve.collection.clone(),
                    g.curve.file.parent().map(Path::to_path_buf),
                )
            }
        }
        None => (
            g.curve.collection.clone(),
            g.curve.file.parent().map(Path::to_path_buf),
        ),
    };
    let no_meta = || {
        skip(
            "curve_without_collection_metadata",
            format!(
                "golden curve {}/{} has no collection metadata",
                g.curve.name,
                thinking.as_str()
            ),
        )
    };
    let Some(c) = collection else {
        return Err(no_meta());
    };
    let kwargs = c
        .chat_template_kwargs
        .get(thinking)
        .cloned()
        .ok_or_else(no_meta)?;
    let sampling = c.sampling.for_mode(thinking);
    set(fields, "category", c.category.clone());
    set(fields, "output_len", c.output_len);
    set(
        fields,
        "temperature",
        sampling.temperature.map_or(Value::Null, Value::from),
    );
    set(
        fields,
        "collection_concurrency",
        c.concurrency.map_or(Value::Null, Value::from),
    );
    set(fields, "concurrency", concurrency);
    set(fields, "prompts_expected", c.num_prompts);

    // Prompts (§5.3 step 3).
    let prompts = match (&a.input_file, &a.speedbench_dir) {
        (Some(f), _) => f.clone(),
        (None, Some(d)) => d.join("qualitative.jsonl"),
        (None, None) => return Err(skip("no_prompts", "no SPEED-Bench prompts available")),
    };
    if !prompts.is_file() {
        return Err(skip(
            "no_prompts",
            format!(
                "no SPEED-Bench prompts available ({} not found)",
                prompts.display()
            ),
        ));
    }
    let (endpoint, encoder, render) = match &c.renderer {
        Renderer::DeepseekV4 => ("completions", "dsv4".to_owned(), "client"),
        Renderer::DeepseekV41 => ("completions", "dsv41".to_owned(), "client"),
        Renderer::ServerTemplate => ("chat", "none".to_owned(), "server"),
        Renderer::Template(f) => {
            let p = base_dir.clone().unwrap_or_default().join(f);
            ("completions", format!("template:{}", p.display()), "client")
        }
    };
    let endpoint = match (c.endpoint, endpoint) {
        (CollectionEndpoint::Chat, _) => "chat",
        (CollectionEndpoint::Completions, e) => e,
    };
    set(fields, "endpoint_kind", endpoint);
    set(fields, "prompt_render", render);

    // Endpoints (§9): flags, the env chain, else the server's port.
    let port = a.port.clone().unwrap_or_else(|| "8000".into());
    let url = a
        .url
        .clone()
        .unwrap_or_else(|| format!("http://localhost:{port}"));
    let mut endpoints = metrics_endpoints(&a.server_metrics, &env)
        .map_err(|e| error("config_invalid", e.to_string()))?;
    let default_endpoints = endpoints.is_empty();
    if default_endpoints {
        let path = if engine == SpecEngine::Trtllm {
            "/prometheus/metrics"
        } else {
            "/metrics"
        };
        endpoints.push(match &a.port {
            Some(p) => format!("http://0.0.0.0:{p}{path}"),
            None => format!("{}{path}", url.trim_end_matches('/')),
        });
    }
    set(fields, "endpoints", endpoints.clone());
    if fw.starts_with("dynamo") && default_endpoints {
        fields.insert("dynamo_default_endpoints".into(), Value::Bool(true));
    }

    let mut argv: Vec<String> = ["specperf", "replay", "--url", &url, "--input-file"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(prompts.display().to_string());
    for (f, v) in [
        ("--custom-dataset-type", "speed_bench".to_owned()),
        ("--category", c.category.clone()),
        ("--seed", c.seed.unwrap_or(0).to_string()),
        ("--endpoint-type", endpoint.to_owned()),
        ("--encoder", encoder),
        ("--osl", c.output_len.to_string()),
        ("--concurrency", concurrency.to_string()),
        ("--spec-engine", format!("{engine:?}").to_ascii_lowercase()),
        ("--num-spec-tokens", k.to_string()),
        ("--progress-interval", "0".to_owned()),
        ("--failed-request-threshold", "0".to_owned()),
        ("--metrics-settle-seconds", settle.as_secs_f64().to_string()),
    ] {
        argv.push(f.into());
        argv.push(v);
    }
    if !kwargs.is_empty() {
        argv.push("--chat-template-kwargs".into());
        argv.push(Value::Object(kwargs).to_string());
    }
    if c.turns == Turns::All {
        argv.push("--all-turns".into());
    }
    let floats = [
        ("--temperature", sampling.temperature),
        ("--top-p", sampling.top_p),
        ("--presence-penalty", sampling.presence_penalty),
        ("--repetition-penalty", sampling.repetition_penalty),
    ];
    for (f, v) in floats {
        if let Some(v) = v {
            argv.push(f.into());
            argv.push(v.to_string());
        }
    }
    if let Some(tk) = sampling.top_k {
        argv.push(format!("--top-k={tk}"));
    }
    if let Some(seed) = sampling.seed {
        argv.push("--extra-inputs".into());
        argv.push(format!("seed:{seed}"));
    }
    if let Some(m) = a.model.clone().or_else(|| env("MODEL")) {
        argv.push("--model".into());
        argv.push(m);
    }
    for e in &endpoints {
        argv.push("--server-metrics".into());
        argv.push(e.clone());
    }
    Ok(Plan {
        fields: std::mem::take(fields),
        golden_al: g.al,
        k,
        framework: fw,
        argv,
        endpoints,
        expected_engines,
        prompts_expected: c.num_prompts,
        settle,
    })
}

/// Runs the gate. Never fails: every outcome is a result (and its file).
pub async fn run_gate(a: &GateArgs, stop: Stopper) -> GateResult {
    let started = Instant::now();
    let started_at = rfc3339_now();
    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    let budget = match a.timeout_seconds.as_deref().map(str::trim) {
        None | Some("") => Ok(Duration::from_secs(1800)),
        Some(t) => t
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                error(
                    "config_invalid",
                    format!("AL_GATE_TIMEOUT_S={t:?} must be a positive number of seconds"),
                )
            }),
    };
    let outcome = match budget {
        Err(e) => Err(e),
        Ok(budget) => {
            set(&mut fields, "timeout_s", budget.as_secs_f64());
            let deadline = tokio::time::sleep(budget);
            tokio::select! {
                r = gate_inner(a, &stop, budget, &mut fields) => r,
                _ = deadline => {
                    stop.stop(StopReason::Deadline);
                    Err(error("timeout", format!("AL gate exceeded AL_GATE_TIMEOUT_S={}", budget.as_secs_f64())))
                }
                _ = stop.token().cancelled() => Err(terminated(&stop)),
            }
        }
    };
    // A signal that arrived while the replay was finishing still makes this an error.
    let outcome = match outcome {
        Ok(v)
            if matches!(
                stop.reason(),
                Some(StopReason::Terminated | StopReason::Interrupted)
            ) =>
        {
            let _ = v;
            Err(terminated(&stop))
        }
        other => other,
    };
    finish(a, fields, outcome, started, started_at)
}

fn terminated(stop: &Stopper) -> Stop {
    let sig = match stop.reason() {
        Some(StopReason::Interrupted) => "SIGINT",
        _ => "SIGTERM",
    };
    error("terminated", format!("AL gate terminated by {sig}"))
}

/// Measured numbers: (AL, verdict).
type Measured = (f64, Verdict);

async fn gate_inner(
    a: &GateArgs,
    stop: &Stopper,
    budget: Duration,
    fields: &mut BTreeMap<String, Value>,
) -> Result<Measured, Stop> {
    let started = Instant::now();
    let plan = resolve(a, fields);
    let mut plan = match plan {
        Ok(p) => p,
        Err(e) => return Err(e),
    };
    fields.append(&mut plan.fields);
    // Parse the replay exactly as `specperf replay` would.
    let cli = Cli::try_parse_from(&plan.argv)
        .map_err(|e| error("config_invalid", format!("replay flags: {e}")))?;
    let Command::Replay(ra) = cli.command else {
        return Err(error("internal", "replay flags did not parse as replay"));
    };
    let mut cfg = RunConfig::from_args(&ra).map_err(|e| error("config_invalid", e.to_string()))?;
    cfg.scrape.require_stable = true;
    cfg.artifact_dir = Some(result_dir(a).join(format!(
        "al_gate_{}_artifacts",
        a.result_filename.as_deref().unwrap_or("run")
    )));
    // The replay's own deadline: whatever budget is left.
    cfg.run_timeout = budget
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));

    // Preflight: every endpoint must answer and parse; a page set without counters is a skip.
    let client = Client::new(cfg.client.clone()).map_err(|e| error("internal", e.to_string()))?;
    let probes = scrape::probe(&client, &plan.endpoints, cfg.scrape.timeout).await;
    for (u, p) in plan.endpoints.iter().zip(&probes) {
        if let Err(e) = p {
            return Err(error(
                "metrics_unreachable",
                format!("metrics endpoint {u}: {e}"),
            ));
        }
    }
    if !probes.iter().any(|p| matches!(p, Ok(true))) {
        let mut msg = "Could not collect speculative acceptance metrics from server".to_owned();
        if fields.contains_key("dynamo_default_endpoints") {
            msg.push_str("; for Dynamo/disagg set SPEEDBENCH_DECODE_METRICS_URLS or SPEEDBENCH_METRICS_PORTS to decode-worker /metrics endpoints");
        }
        return Err(skip("no_counters", msg));
    }
    fields.remove("dynamo_default_endpoints");

    let (ptx, _prx) = watch::channel(Progress::default());
    let outcome = replay(cfg, stop.clone(), ptx).await.map_err(|e| {
        if e.is_not_ready() {
            error("client_failed", e.to_string())
        } else {
            match e {
                crate::engine::EngineError::Dataset(d) => error("dataset_invalid", d.to_string()),
                other => error("internal", other.to_string()),
            }
        }
    })?;
    if let Some(r) = outcome.stopped_by {
        return Err(match r {
            StopReason::Deadline => error(
                "timeout",
                format!(
                    "AL gate exceeded AL_GATE_TIMEOUT_S={}",
                    budget.as_secs_f64()
                ),
            ),
            StopReason::Terminated | StopReason::Interrupted => terminated(stop),
            StopReason::Stalled => {
                error("client_failed", "the replay stalled (no request finished)")
            }
        });
    }
    let c = &outcome.summary.counts;
    set(fields, "prompts_completed", c.success);
    set(fields, "prompts_failed", c.failed + c.cancelled);
    set(fields, "settle_s", plan.settle.as_secs_f64());
    set(
        fields,
        "artifact_dir",
        outcome.artifact_dir.display().to_string(),
    );
    if outcome.summary.meta.samples as u32 != plan.prompts_expected {
        return Err(error(
            "dataset_invalid",
            format!(
                "the collection selects {} prompts, the curve was collected on {}",
                outcome.summary.meta.samples, plan.prompts_expected
            ),
        ));
    }
    if c.failed + c.cancelled > 0 || c.success < u64::from(plan.prompts_expected) {
        return Err(error(
            "client_failed",
            format!(
                "{} of {} SPEED-Bench requests failed",
                c.failed + c.cancelled,
                c.total
            ),
        ));
    }
    let Some(report) = outcome.summary.acceptance else {
        return Err(error("internal", "no scrape report"));
    };
    analyse(&report, &plan, fields)
}

/// Turns the scrape report into the verdict (§5.3 steps 6–9, §5.5).
fn analyse(
    r: &ScrapeReport,
    plan: &Plan,
    fields: &mut BTreeMap<String, Value>,
) -> Result<Measured, Stop> {
    let a = &r.acceptance;
    set(fields, "metric_source", {
        let s = a.metric_source.clone();
        if plan.framework.starts_with("dynamo") && !s.is_empty() {
            format!("dynamo-{s}")
        } else {
            s
        }
    });
    for e in &r.endpoints {
        for (when, st) in [("before", &e.before), ("after", &e.after)] {
            if !st.is_ok() {
                return Err(error(
                    "metrics_unreachable",
                    format!("metrics endpoint {} ({when}): {st}", e.url),
                ));
            }
        }
    }
    if !r.counters_settled {
        return Err(error(
            "counters_not_settled",
            "spec counters still moving after settle",
        ));
    }
    if let Some(first) = a.resets.first() {
        return Err(error(
            "counter_reset",
            format!("counter reset on {} {}", first.endpoint, first.series),
        ));
    }
    match a.status {
        AcceptanceStatus::NoCounters => {
            return Err(skip(
                "no_counters",
                "Could not collect speculative acceptance metrics from server",
            ))
        }
        AcceptanceStatus::Unavailable => {
            return Err(error(
                "metrics_unreachable",
                a.reason.clone().unwrap_or_default(),
            ))
        }
        AcceptanceStatus::Invalid | AcceptanceStatus::NoData => {
            return Err(error(
                "invalid_deltas",
                format!(
                    "Invalid acceptance deltas or counter reset ({})",
                    a.reason.as_deref().unwrap_or("")
                ),
            ))
        }
        AcceptanceStatus::Ok => {}
    }
    if a.approximate {
        return Err(error(
            "invalid_deltas",
            "only a gauge was available (approximate); the gate needs counters",
        ));
    }
    // Leader-only Dynamo vLLM data-parallel metrics (§5.5).
    if plan.framework == "dynamo-vllm" {
        if let Some(want) = plan.expected_engines.filter(|w| *w > 1) {
            let seen = a.engines.len().max(a.endpoints.len());
            if seen < want {
                return Err(skip(
                    "leader_only_dp_metrics",
                    format!(
                        "Dynamo vLLM DP metrics cover leader ranks only ({seen}/{want} engines)"
                    ),
                ));
            }
        }
    }
    let n = &a.numbers;
    let Some(al) = n.acceptance_length else {
        return Err(error(
            "invalid_deltas",
            "Invalid acceptance deltas or counter reset",
        ));
    };
    if !(1.0..=f64::from(plan.k) + 1.0).contains(&al) {
        return Err(error(
            "invalid_deltas",
            format!("AL {al} outside 1..={}", plan.k + 1),
        ));
    }
    let (al4, _, _, v) = verdict(al, plan.golden_al);
    set(fields, "acceptance_length", al4);
    set(fields, "accepted_tokens", n.accepted_tokens as u64);
    set(fields, "verify_steps", n.drafts as u64);
    set(fields, "draft_tokens", n.drafts as u64);
    set(
        fields,
        "proposed_draft_tokens",
        n.draft_tokens
            .map_or(Value::Null, |t| Value::from(t as u64)),
    );
    set(
        fields,
        "acceptance_rate",
        n.acceptance_rate.map_or(Value::Null, Value::from),
    );
    set(
        fields,
        "per_position_acceptance",
        if n.per_position_acceptance.is_empty() {
            Value::Null
        } else {
            json!(n.per_position_acceptance)
        },
    );
    Ok((al4, v))
}

fn result_dir(a: &GateArgs) -> PathBuf {
    a.result_dir.clone().unwrap_or_else(|| PathBuf::from("."))
}

/// A result filename must name a file inside RESULT_DIR.
fn safe_name(name: &str) -> Result<&str, String> {
    if name.is_empty()
        || name.contains(['/', '\\', '\0'])
        || name == "."
        || name == ".."
        || name.starts_with("..")
    {
        return Err(format!(
            "RESULT_FILENAME {name:?} must be a plain file name (no path separators or ..)"
        ));
    }
    Ok(name)
}

fn finish(
    a: &GateArgs,
    mut fields: BTreeMap<String, Value>,
    outcome: Result<Measured, Stop>,
    started: Instant,
    started_at: String,
) -> GateResult {
    let (verdict, reason, message) = match outcome {
        Ok((_, v)) => (v, None, None),
        Err(s) => (s.verdict, Some(s.code.to_owned()), Some(s.message)),
    };
    // Which file: al_gate_<RESULT_FILENAME>.json, or al_gate.json with config_invalid.
    let (name, verdict, reason, message) = match a.result_filename.as_deref().map(safe_name) {
        Some(Ok(n)) => (format!("al_gate_{n}.json"), verdict, reason, message),
        Some(Err(e)) => (
            "al_gate.json".to_owned(),
            Verdict::Error,
            Some("config_invalid".to_owned()),
            Some(e),
        ),
        None => (
            "al_gate.json".to_owned(),
            Verdict::Error,
            Some("config_invalid".to_owned()),
            Some("RESULT_FILENAME is required".to_owned()),
        ),
    };
    fields.remove("dynamo_default_endpoints");
    let passed = verdict == Verdict::Pass;
    if verdict == Verdict::Skipped {
        // Skipped carries no number (§5.4); an error may keep one it measured.
        fields.remove("acceptance_length");
    }
    let m1_defaults: [(&str, Value); 20] = [
        ("speedbench_al_eval_version", json!(1)),
        ("task", json!("speedbench_al")),
        ("model", json!(a.model.clone().or_else(|| env("MODEL")))),
        ("model_key", Value::Null),
        ("model_prefix", json!(a.model_prefix)),
        ("thinking_mode", json!(a.thinking_mode)),
        ("num_speculative_tokens", Value::Null),
        ("category", Value::Null),
        ("output_len", Value::Null),
        ("temperature", Value::Null),
        (
            "framework",
            json!(a.framework.clone().unwrap_or_else(|| "vllm".into())),
        ),
        ("metric_source", Value::Null),
        ("acceptance_length", Value::Null),
        ("accepted_tokens", Value::Null),
        ("verify_steps", Value::Null),
        ("draft_tokens", Value::Null),
        ("proposed_draft_tokens", Value::Null),
        ("reference_acceptance_length", Value::Null),
        ("min_acceptance_length", Value::Null),
        ("max_acceptance_length", Value::Null),
    ];
    for (k, v) in m1_defaults {
        fields.entry(k.to_owned()).or_insert(v);
    }
    set(&mut fields, "threshold_ratio", 0.95);
    set(&mut fields, "max_threshold_ratio", 1.05);
    set(&mut fields, "passed", passed);
    set(&mut fields, "verdict", verdict.as_str());
    set(
        &mut fields,
        "reason",
        reason.clone().map_or(Value::Null, Value::from),
    );
    if let Some(m) = &message {
        set(&mut fields, "error", m.clone());
    }
    set(&mut fields, "al_gate_version", GATE_VERSION);
    set(
        &mut fields,
        "result_filename",
        a.result_filename.clone().map_or(Value::Null, Value::from),
    );
    set(&mut fields, "specperf_version", env!("CARGO_PKG_VERSION"));
    set(&mut fields, "started_at", started_at);
    set(&mut fields, "finished_at", rfc3339_now());
    set(
        &mut fields,
        "duration_s",
        round_to(started.elapsed().as_secs_f64(), 3),
    );
    for k in [
        "endpoints",
        "prompts_expected",
        "prompts_completed",
        "prompts_failed",
        "concurrency",
        "collection_concurrency",
        "endpoint_kind",
        "prompt_render",
        "acceptance_rate",
        "per_position_acceptance",
        "settle_s",
        "curve",
        "golden_file",
    ] {
        fields.entry(k.to_owned()).or_insert(Value::Null);
    }
    let path = result_dir(a).join(&name);
    let written = write_atomic(&path, &fields).map(|()| path);
    GateResult {
        verdict,
        reason,
        fields,
        written,
    }
}

/// Keys sorted, 2-space indent, trailing newline; temp file + rename.
fn write_atomic(path: &Path, fields: &BTreeMap<String, Value>) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // serde_json keeps insertion order here; a BTreeMap gives the sorted keys the format wants.
    let sorted: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.clone(), sort_keys(v)))
        .collect();
    let mut text =
        serde_json::to_string_pretty(&Value::Object(sorted)).map_err(|e| e.to_string())?;
    text.push('\n');
    crate::fsutil::write_atomic(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// Finds `al_gate_*.json` files under `paths` (files, or directories searched recursively).
fn result_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            let rd = std::fs::read_dir(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            for e in rd.flatten() {
                stack.push(e.path());
            }
        } else if p.is_file() {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("al_gate") && name.ends_with(".json") {
                out.push(p);
            }
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    out.sort();
    Ok(out)
}

/// The collect-evals style table and JSON roll-up of many gate results (§7).
pub fn summarize(paths: &[PathBuf]) -> Result<(String, Value), String> {
    let files = result_files(paths)?;
    if files.is_empty() {
        return Err("no al_gate_*.json files found".into());
    }
    let mut rows: Vec<(String, Value)> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a gate result: {e}", f.display()))?;
        if v.get("speedbench_al_eval_version").is_none() {
            return Err(format!(
                "{}: not a gate result (no speedbench_al_eval_version)",
                f.display()
            ));
        }
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        rows.push((name, v));
    }
    let key = |v: &Value| {
        (
            v["model_prefix"].as_str().unwrap_or("").to_owned(),
            v["thinking_mode"].as_str().unwrap_or("").to_owned(),
            v["num_speculative_tokens"].as_u64().unwrap_or(0),
        )
    };
    rows.sort_by(|a, b| key(&a.1).cmp(&key(&b.1)).then(a.0.cmp(&b.0)));
    let mut md = String::from("### SpeedBench AL Gate Results\n\n");
    md.push_str("| Model Prefix | Framework | Thinking | MTP | Score | Metric Source | Result |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    let mut json_rows = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (name, v) in &rows {
        let verdict =
            v["verdict"]
                .as_str()
                .unwrap_or(if v["passed"] == true { "pass" } else { "below" });
        *counts.entry(verdict.to_owned()).or_default() += 1;
        let score = v["acceptance_length"].as_f64();
        let (min, max) = (
            v["min_acceptance_length"].as_f64(),
            v["max_acceptance_length"].as_f64(),
        );
        let pf = if v["passed"] == true { "PASS" } else { "FAIL" };
        let reason = v["reason"].as_str().unwrap_or("");
        let cell = match (verdict, score, min, max) {
            ("skipped", ..) => format!("SKIPPED ({reason})"),
            ("error", ..) => format!("ERROR ({reason})"),
            (_, Some(s), Some(lo), Some(hi)) => format!("{s:.2} in [{lo:.2}, {hi:.2}] ({pf})"),
            (_, Some(s), ..) => format!("{s:.2} ({pf})"),
            (_, None, ..) => "FAIL".to_owned(),
        };
        let text = |k: &str| match &v[k] {
            Value::Null => "N/A".to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {cell} | {} | {name} |\n",
            text("model_prefix"),
            text("framework").to_uppercase(),
            text("thinking_mode"),
            text("num_speculative_tokens"),
            text("metric_source"),
        ));
        let mut row = serde_json::Map::new();
        row.insert(
            "task".into(),
            json!(format!(
                "speedbench_al/{}/mtp{}",
                text("thinking_mode"),
                text("num_speculative_tokens")
            )),
        );
        row.insert("score".into(), json!(score));
        row.insert("score_name".into(), json!("acceptance_length"));
        row.insert("verdict".into(), json!(verdict));
        row.insert("file".into(), json!(name));
        for k in [
            "reference_acceptance_length",
            "min_acceptance_length",
            "max_acceptance_length",
            "threshold_ratio",
            "max_threshold_ratio",
            "thinking_mode",
            "num_speculative_tokens",
            "framework",
            "metric_source",
            "accepted_tokens",
            "proposed_draft_tokens",
            "passed",
            "error",
        ] {
            row.insert(
                format!("speedbench_{k}"),
                v.get(k).cloned().unwrap_or(Value::Null),
            );
        }
        let verify = v
            .get("verify_steps")
            .filter(|x| !x.is_null())
            .or_else(|| v.get("draft_tokens"));
        row.insert(
            "speedbench_verify_steps".into(),
            verify.cloned().unwrap_or(Value::Null),
        );
        row.insert("model_prefix".into(), v["model_prefix"].clone());
        json_rows.push(Value::Object(row));
    }
    let all_passed = counts.keys().all(|k| k == "pass");
    let roll = json!({
        "results": json_rows,
        "counts": counts,
        "all_passed": all_passed,
        "files": rows.len(),
    });
    Ok((md, sort_keys(&roll)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_and_verdict_follow_the_contract() {
        assert_eq!(verdict(2.49, 2.49).3, Verdict::Pass);
        let (_, min, max, _) = verdict(2.49, 2.49);
        assert_eq!((min, max), (2.3655, 2.6145));
        assert_eq!(verdict(2.3655, 2.49).3, Verdict::Pass);
        assert_eq!(verdict(2.3654, 2.49).3, Verdict::Below);
        assert_eq!(
            verdict(2.61454, 2.49).3,
            Verdict::Pass,
            "compared at 4 decimals"
        );
        assert_eq!(verdict(2.6146, 2.49).3, Verdict::Above);
        for (g, lo, hi) in [
            (2.27, 2.1565, 2.3835),
            (3.77, 3.5815, 3.9585),
            (1.79, 1.7005, 1.8795),
        ] {
            let (_, min, max, _) = verdict(g, g);
            assert_eq!((min, max), (lo, hi));
        }
    }

    #[test]
    fn frameworks_classify_as_the_contract_says() {
        let e =
            |f: &str, b: Option<&str>| classify_framework(f, b).map(|x| x.0).map_err(|s| s.code);
        assert_eq!(e("vllm", None), Ok(SpecEngine::Vllm));
        assert_eq!(e("dynamo", Some("sglang")), Ok(SpecEngine::Sglang));
        assert_eq!(e("TensorRT-LLM", None), Ok(SpecEngine::Trtllm));
        assert_eq!(e("tilert", None), Err("tilert"));
        assert_eq!(e("mystery", None), Err("unsupported_framework"));
    }

    #[test]
    fn result_names_cannot_escape_the_directory() {
        for bad in ["../x", "a/b", "..", ""] {
            assert!(safe_name(bad).is_err(), "{bad}");
        }
        assert!(safe_name("dsv4_b300_c64").is_ok());
    }

    #[test]
    fn rfc3339_has_the_shape() {
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
