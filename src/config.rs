//! Raw flags -> validated, typed configuration. Every check that can fail before the run happens
//! here, with a message naming the flag, the bad value and the fix.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::{ReplayArgs, ScrapeArgs, SimArgs, Ui};
use crate::client::{build_headers, ClientOptions, Timeouts};
use crate::dataset::{DatasetKind, SpeedBenchSelect};
use crate::metrics::{Slo, SloMetric};
use crate::render::{EndpointType, RenderOptions};
use crate::schedule::{ArrivalPattern, Shard};
use crate::scrape::acceptance::AcceptanceOptions;
use crate::sim::{Acceptance, SimConfig, TlsFiles};

/// What `--insecure` costs, said before the run and in the summary.
const INSECURE_WARNING: &str = "TLS certificate verification is OFF (--insecure): the server's \
     identity is not checked, so anyone on the network path can read and alter the traffic, API \
     key included";

/// A configuration error (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(m.into()))
}

/// Where requests go.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// A server at this base URL.
    Url(String),
    /// The built-in simulator, started in-process on loopback.
    Embedded(Box<SimConfig>),
}

impl Target {
    /// True for the embedded simulator.
    pub(crate) fn is_embedded(&self) -> bool {
        matches!(self, Target::Embedded(_))
    }
}

/// Where samples come from.
#[derive(Clone, Debug)]
pub(crate) enum DatasetSource {
    /// The collection bundled into the binary.
    Bundled,
    /// A file of the given format.
    File {
        /// The file.
        path: PathBuf,
        /// Its format.
        kind: DatasetKind,
    },
    /// Generated prompts of exact token lengths.
    Synthetic(SyntheticSpec),
}

/// `--synthetic` settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyntheticSpec {
    pub(crate) isl: u32,
    pub(crate) isl_stddev: f64,
    pub(crate) osl: Option<u32>,
    pub(crate) osl_stddev: f64,
    pub(crate) entries: usize,
    pub(crate) seed: u64,
}

/// `--encoder`, validated (the template itself is loaded with the collection).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EncoderSpec {
    None,
    Dsv4,
    Dsv41,
    Template(PathBuf),
}

impl EncoderSpec {
    pub(crate) fn parse(s: &str) -> Result<EncoderSpec, ConfigError> {
        Ok(match s {
            "none" | "" => EncoderSpec::None,
            "dsv4" | "deepseek_v4" => EncoderSpec::Dsv4,
            "dsv41" | "deepseek_v41" => EncoderSpec::Dsv41,
            t => match t.strip_prefix("template:") {
                Some(p) if !p.is_empty() => {
                    let path = PathBuf::from(p);
                    if !path.exists() {
                        return err(format!(
                            "--encoder {t}: {p} does not exist (give a model directory, a tokenizer_config.json or a .jinja file)"
                        ));
                    }
                    EncoderSpec::Template(path)
                }
                _ => {
                    return err(format!(
                        "--encoder {t:?}: expected dsv4, dsv41, template:PATH or none"
                    ))
                }
            },
        })
    }
}

/// Sampling fields, only those given.
fn sampling(a: &ReplayArgs) -> Result<Map<String, Value>, ConfigError> {
    let mut m = Map::new();
    let floats = [
        ("temperature", a.temperature),
        ("top_p", a.top_p),
        ("min_p", a.min_p),
        ("presence_penalty", a.presence_penalty),
        ("frequency_penalty", a.frequency_penalty),
        ("repetition_penalty", a.repetition_penalty),
    ];
    for (k, v) in floats {
        if let Some(v) = v {
            if !v.is_finite() {
                return err(format!(
                    "--{} {v} must be a finite number",
                    k.replace('_', "-")
                ));
            }
            m.insert(k.into(), serde_json::json!(v));
        }
    }
    if let Some(k) = a.top_k {
        m.insert("top_k".into(), serde_json::json!(k));
    }
    Ok(m)
}

impl DatasetSource {
    pub(crate) fn describe(&self) -> String {
        match self {
            DatasetSource::Bundled => "bundled datasets/qualitative.jsonl".into(),
            DatasetSource::File { path, .. } => path.display().to_string(),
            DatasetSource::Synthetic(s) => format!(
                "synthetic: {} prompts of {} ± {} tokens",
                s.entries, s.isl, s.isl_stddev
            ),
        }
    }
}

/// A validated `replay` configuration.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub(crate) target: Target,
    pub(crate) model: Option<String>,
    pub(crate) endpoint_type: EndpointType,
    pub(crate) endpoint_path: String,
    pub(crate) streaming: bool,
    /// Closed-loop concurrency, or the open loop's in-flight cap (64 when not given).
    pub(crate) concurrency: usize,
    pub(crate) load: LoadConfig,
    pub(crate) request_count: Option<u64>,
    pub(crate) dataset: DatasetSource,
    pub(crate) select: SpeedBenchSelect,
    pub(crate) osl: Option<u32>,
    pub(crate) encoder: EncoderSpec,
    pub(crate) chat_template_kwargs: Map<String, Value>,
    pub(crate) sampling: Map<String, Value>,
    pub(crate) tokenizer: Option<PathBuf>,
    pub(crate) legacy_max_tokens: bool,
    pub(crate) per_chunk_usage: bool,
    pub(crate) extra_inputs: Map<String, Value>,
    pub(crate) client: ClientOptions,
    pub(crate) run_timeout: Duration,
    pub(crate) stall_timeout: Duration,
    pub(crate) wait_for_model: Duration,
    /// Failed fraction above which the run exits 1.
    pub failed_request_threshold: f64,
    pub(crate) artifact_dir: Option<PathBuf>,
    pub(crate) scrape: ScrapeConfig,
    /// Progress line period (None: no progress line).
    pub progress_interval: Option<Duration>,
    /// The live display.
    pub ui: Ui,
    pub(crate) goodput: Vec<Slo>,
    /// InferenceX raw throughput JSON: (directory or `None` for the artifact dir, file stem).
    pub(crate) result_file: Option<(Option<PathBuf>, String)>,
    pub(crate) cli_command: Option<String>,
    /// Settings that weaken the run (`--insecure`): printed by the binary before the run and
    /// kept in `summary.json` warnings.
    pub warnings: Vec<String>,
}

impl RunConfig {
    pub(crate) fn render_options(
        &self,
        model: String,
        encoder: std::sync::Arc<tokenizer_encoders::Encoder>,
    ) -> RenderOptions {
        RenderOptions {
            endpoint: self.endpoint_type,
            model,
            streaming: self.streaming,
            per_chunk_usage: self.per_chunk_usage,
            osl: self.osl,
            legacy_max_tokens: self.legacy_max_tokens,
            extra_inputs: self.extra_inputs.clone(),
            encoder,
            chat_template_kwargs: self.chat_template_kwargs.clone(),
            sampling: self.sampling.clone(),
        }
    }

    /// True when replaying against the embedded simulator.
    pub fn is_embedded(&self) -> bool {
        self.target.is_embedded()
    }

    /// Records the command line in the AIPerf summary's `run_info.cli_command`.
    pub fn set_cli_command(&mut self, command: String) {
        self.cli_command = Some(command);
    }
}

/// Parses `--goodput` items: `TAG:VALUE` pairs, several per item separated by whitespace
/// (AIPerf passes one quoted string, vLLM separate arguments). Each tag at most once.
pub fn parse_goodput(items: &[String]) -> Result<Vec<Slo>, ConfigError> {
    let mut out: Vec<Slo> = Vec::new();
    for pair in items.iter().flat_map(|i| i.split_whitespace()) {
        let Some((tag, value)) = pair.split_once(':') else {
            return err(format!(
                "--goodput {pair:?}: expected TAG:VALUE, e.g. --goodput \"ttft:200 tpot:20 e2el:5000\""
            ));
        };
        let Some(metric) = SloMetric::from_tag(tag) else {
            return err(format!(
                "--goodput {pair:?}: unknown metric {tag:?}; use ttft, tpot, e2el (or \
                 time_to_first_token, inter_token_latency, request_latency, \
                 output_token_throughput_per_user)"
            ));
        };
        let threshold: f64 = match value.parse() {
            Ok(v) if f64::is_finite(v) && v > 0.0 => v,
            _ => {
                return err(format!(
                    "--goodput {pair:?}: {value:?} is not a positive number ({})",
                    metric.unit()
                ))
            }
        };
        if out.iter().any(|s| s.metric == metric) {
            return err(format!(
                "--goodput {pair:?}: {} is given twice",
                metric.tag()
            ));
        }
        out.push(Slo { metric, threshold });
    }
    Ok(out)
}

/// Checks `RESULT_FILENAME`: a plain file name (the `.json` is appended), so the raw result can
/// only land in its directory.
pub fn result_file_name(name: &str) -> Result<String, ConfigError> {
    let bad = name.is_empty()
        || name.contains(['/', '\\', '\0'])
        || name.contains("..")
        || name.trim() != name;
    if bad {
        return err(format!(
            "--result-filename / RESULT_FILENAME {name:?} must be a plain file name (no path \
             separators, no \"..\", no surrounding spaces); put the directory in --result-dir / \
             RESULT_DIR"
        ));
    }
    Ok(name.to_owned())
}

fn seconds(flag: &str, v: f64) -> Result<Duration, ConfigError> {
    if !v.is_finite() || v <= 0.0 {
        return err(format!(
            "--{flag} must be a positive number of seconds, got {v}"
        ));
    }
    Duration::try_from_secs_f64(v).map_err(|_| ConfigError(format!("--{flag} {v} is too large")))
}

fn has_userinfo(uri: &http::Uri) -> bool {
    uri.authority().is_some_and(|a| a.as_str().contains('@'))
}

/// Adds `http://` when the URL has no scheme and checks it parses.
pub fn normalize_url(raw: &str) -> Result<String, ConfigError> {
    let raw = raw.trim();
    let url = if raw.contains("://") {
        raw.to_owned()
    } else {
        format!("http://{raw}")
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ConfigError(format!("--url {raw:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        other => {
            return err(format!(
                "--url {raw:?}: scheme {other:?} is not http or https"
            ))
        }
    }
    if uri.host().is_none() {
        return err(format!("--url {raw:?} has no host"));
    }
    if has_userinfo(&uri) {
        // Credentials in the URL would land in summary.json, the console and error messages.
        return err(
            "--url carries credentials (user:password@); pass --api-key (or OPENAI_API_KEY) or \
             -H Authorization:... instead, which are never written anywhere",
        );
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// Normalises one metrics endpoint (`inferencex-contract.md` §9.2): one trailing `,` then one
/// trailing `/` stripped; `8000` and `:8000` -> `http://0.0.0.0:8000/metrics`; no scheme ->
/// `http://`; no metrics path -> `/metrics` appended. `None` for an empty item.
pub fn metrics_url(raw: &str) -> Result<Option<String>, ConfigError> {
    let t = raw.trim();
    let t = t.strip_suffix(',').unwrap_or(t);
    let t = t.strip_suffix('/').unwrap_or(t);
    if t.is_empty() {
        return Ok(None);
    }
    if t.contains(char::is_whitespace) {
        return err(format!(
            "metrics endpoint {raw:?} must be a URL without spaces"
        ));
    }
    let port = t.strip_prefix(':').unwrap_or(t);
    let mut url = if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        format!("http://0.0.0.0:{port}")
    } else if t.contains("://") {
        t.to_owned()
    } else {
        format!("http://{t}")
    };
    if !(url.ends_with("/metrics") || url.contains("/metrics?")) {
        url = format!("{url}/metrics");
    }
    let uri = url
        .parse::<http::Uri>()
        .map_err(|e| ConfigError(format!("metrics endpoint {raw:?} is not a URL: {e}")))?;
    if has_userinfo(&uri) {
        return err(
            "a metrics endpoint carries credentials (user:password@); they would be \
             written to summary.json: remove them",
        );
    }
    Ok(Some(url))
}

/// Metrics endpoints from flags, else the InferenceX environment (`inferencex-contract.md` §9.1,
/// first non-empty source wins), normalised; duplicates are an error (they would double count).
/// Empty means "the target's own /metrics".
pub fn metrics_endpoints(
    flags: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, ConfigError> {
    let split_loose = |v: &str| -> Vec<String> {
        v.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut items: Vec<String> = flags.to_vec();
    let mut source = "--server-metrics";
    for var in ["SPEEDBENCH_DECODE_METRICS_URLS", "SPEEDBENCH_METRICS_URLS"] {
        if items.is_empty() {
            items = env(var).map(|v| split_loose(&v)).unwrap_or_default();
            source = var;
        }
    }
    if items.is_empty() {
        if let Some(v) = env("AIPERF_SERVER_METRICS_URLS").filter(|v| !v.trim().is_empty()) {
            let parts: Vec<&str> = v.trim().split(',').collect();
            if parts
                .iter()
                .any(|p| p.is_empty() || p.contains(char::is_whitespace))
            {
                return err(
                    "AIPERF_SERVER_METRICS_URLS must be a comma-separated list of non-empty URLs",
                );
            }
            items = parts.into_iter().map(str::to_owned).collect();
            source = "AIPERF_SERVER_METRICS_URLS";
        }
    }
    if items.is_empty() {
        items = env("SPEEDBENCH_METRICS_PORTS")
            .map(|v| split_loose(&v))
            .unwrap_or_default();
        source = "SPEEDBENCH_METRICS_PORTS";
    }
    if !items.is_empty() {
        items.extend(
            env("SPEEDBENCH_TRTLLM_JSON_METRICS_URLS")
                .map(|v| split_loose(&v))
                .unwrap_or_default(),
        );
    }
    let mut out: Vec<String> = Vec::new();
    for item in &items {
        let Some(url) = metrics_url(item).map_err(|e| ConfigError(format!("{source}: {e}")))?
        else {
            continue;
        };
        if out.contains(&url) {
            return err(format!(
                "{source}: metrics endpoint {url} listed twice (its counters would be counted \
                 twice); list each worker once"
            ));
        }
        out.push(url);
    }
    Ok(out)
}

/// Validated load shape.
#[derive(Clone, Debug)]
pub(crate) struct LoadConfig {
    /// Open loop: (rate, pattern, gamma shape).
    pub(crate) rate: Option<(f64, ArrivalPattern, f64)>,
    /// Open loop: in-flight cap (only when --concurrency was given).
    pub(crate) cap: Option<usize>,
    pub(crate) seed: u64,
    pub(crate) duration: Option<Duration>,
    /// `None`: wait for every request after the duration.
    pub(crate) grace: Option<Duration>,
    pub(crate) warmup: Option<WarmupConfig>,
    /// Concurrency ramp (closed loop) or rate ramp (open loop).
    pub(crate) ramp: Option<Duration>,
    pub(crate) lag_tolerance: Duration,
    pub(crate) shard: Shard,
    pub(crate) metrics_shard: u32,
    pub(crate) trace: TraceConfig,
}

/// Validated trace-replay settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TraceConfig {
    /// `--fixed-schedule` given (else automatic when every row has a timestamp).
    pub(crate) forced: bool,
    pub(crate) auto_offset: bool,
    pub(crate) start_ms: Option<f64>,
    pub(crate) end_ms: Option<f64>,
    pub(crate) speedup: f64,
}

/// Validated warmup phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WarmupConfig {
    pub(crate) count: Option<u64>,
    pub(crate) duration: Option<Duration>,
    pub(crate) concurrency: usize,
}

/// The shard this process runs: `--shard i/N`, else Slurm (`SLURM_PROCID`/`SLURM_NTASKS`), else a
/// Kubernetes Indexed Job (`JOB_COMPLETION_INDEX` with `--shard-count`), else the whole run.
pub fn resolve_shard(
    flag: Option<&str>,
    count: Option<u32>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Shard, ConfigError> {
    let make = |index: u32, count: u32, from: &str| {
        if count == 0 || index >= count {
            return err(format!(
                "{from}: shard {index} of {count} is out of range (want 0 <= i < N)"
            ));
        }
        Ok(Shard { index, count })
    };
    let num = |v: &str, what: &str| -> Result<u32, ConfigError> {
        v.trim()
            .parse()
            .map_err(|_| ConfigError(format!("{what} {v:?} is not a non-negative integer")))
    };
    if let Some(f) = flag {
        let (i, n) = f
            .split_once('/')
            .ok_or_else(|| ConfigError(format!("--shard {f:?}: expected i/N, e.g. 0/4")))?;
        return make(
            num(i, "--shard index")?,
            num(n, "--shard count")?,
            "--shard",
        );
    }
    if let (Some(i), Some(n)) = (env("SLURM_PROCID"), env("SLURM_NTASKS")) {
        return make(
            num(&i, "SLURM_PROCID")?,
            num(&n, "SLURM_NTASKS")?,
            "SLURM_PROCID/SLURM_NTASKS",
        );
    }
    if let Some(i) = env("JOB_COMPLETION_INDEX") {
        let Some(n) = count else {
            return err(
                "JOB_COMPLETION_INDEX is set but the total is unknown: pass --shard-count N \
                 (or SPECPERF_SHARD_COUNT) with the Job's completions",
            );
        };
        return make(num(&i, "JOB_COMPLETION_INDEX")?, n, "JOB_COMPLETION_INDEX");
    }
    Ok(Shard::SINGLE)
}

impl LoadConfig {
    fn from_args(
        a: &ReplayArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadConfig, ConfigError> {
        let l = &a.load;
        let opt_secs = |flag: &str, v: Option<f64>| v.map(|v| seconds(flag, v)).transpose();
        let rate = match l.request_rate {
            None => None,
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return err(format!(
                    "--request-rate {r} must be a positive number of requests per second"
                ))
            }
            Some(r) => {
                if !(l.arrival_smoothness.is_finite() && l.arrival_smoothness > 0.0) {
                    return err(format!(
                        "--arrival-smoothness {} must be positive (1 = Poisson)",
                        l.arrival_smoothness
                    ));
                }
                let pattern = if l.arrival_smoothness != 1.0
                    && l.arrival_pattern == ArrivalPattern::Poisson
                {
                    ArrivalPattern::Gamma
                } else {
                    l.arrival_pattern
                };
                Some((r, pattern, l.arrival_smoothness))
            }
        };
        if l.fixed_schedule && rate.is_some() {
            return err("--fixed-schedule replays the trace's timestamps; drop --request-rate");
        }
        if let (Some(a), Some(b)) = (l.fixed_schedule_start_offset, l.fixed_schedule_end_offset) {
            if a > b {
                return err(format!(
                    "--fixed-schedule-start-offset {a} is after --fixed-schedule-end-offset {b}"
                ));
            }
        }
        if rate.is_none() && l.request_rate_ramp_duration.is_some() {
            return err("--request-rate-ramp-duration needs --request-rate");
        }
        if rate.is_some() && l.concurrency_ramp_duration.is_some() {
            return err("--concurrency-ramp-duration is for closed loop; with --request-rate use --request-rate-ramp-duration");
        }
        let grace = if l.benchmark_grace_period.is_infinite() && l.benchmark_grace_period > 0.0 {
            None
        } else {
            Some(
                Duration::try_from_secs_f64(l.benchmark_grace_period).map_err(|_| {
                    ConfigError(format!(
                        "--benchmark-grace-period {} must be zero, positive or inf",
                        l.benchmark_grace_period
                    ))
                })?,
            )
        };
        let warmup = if l.warmup_request_count.is_some() || l.warmup_duration.is_some() {
            if l.warmup_request_count == Some(0) {
                return err("--warmup-request-count must be at least 1");
            }
            Some(WarmupConfig {
                count: l.warmup_request_count,
                duration: opt_secs("warmup-duration", l.warmup_duration)?,
                concurrency: match l.warmup_concurrency {
                    Some(0) => return err("--warmup-concurrency must be at least 1"),
                    Some(c) => c,
                    None => a.concurrency.unwrap_or(64),
                },
            })
        } else {
            None
        };
        let tol = l.schedule_lag_tolerance_ms;
        let shard = resolve_shard(l.shard.as_deref(), l.shard_count, env)?;
        if l.metrics_shard >= shard.count {
            return err(format!(
                "--metrics-shard {} is not a shard of this run ({} shards)",
                l.metrics_shard, shard.count
            ));
        }
        if let Some(c) = a.concurrency {
            if (c as u64) < u64::from(shard.count) && rate.is_none() {
                return err(format!(
                    "--concurrency {c} cannot be split over {} shards (each needs at least 1)",
                    shard.count
                ));
            }
        }
        Ok(LoadConfig {
            rate,
            // Open loops and traces: --concurrency is a cap on requests in flight.
            cap: a.concurrency,
            seed: l.random_seed,
            duration: opt_secs("benchmark-duration", l.benchmark_duration)?,
            grace,
            warmup,
            ramp: opt_secs(
                "concurrency-ramp-duration",
                l.concurrency_ramp_duration.or(l.request_rate_ramp_duration),
            )?,
            lag_tolerance: Duration::try_from_secs_f64(tol / 1e3).map_err(|_| {
                ConfigError(format!(
                    "--schedule-lag-tolerance-ms {tol} must be a non-negative number"
                ))
            })?,
            shard,
            metrics_shard: l.metrics_shard,
            trace: TraceConfig {
                forced: l.fixed_schedule,
                auto_offset: l.fixed_schedule_auto_offset,
                start_ms: l.fixed_schedule_start_offset,
                end_ms: l.fixed_schedule_end_offset,
                speedup: if l.trace_speedup.is_finite() && l.trace_speedup > 0.0 {
                    l.trace_speedup
                } else {
                    return err(format!(
                        "--trace-speedup {} must be a positive number",
                        l.trace_speedup
                    ));
                },
            },
        })
    }
}

/// Validated scrape settings; endpoints resolved against the target at run time.
#[derive(Clone, Debug)]
pub(crate) struct ScrapeConfig {
    /// Explicit endpoints (empty: the target's own /metrics).
    pub(crate) endpoints: Vec<String>,
    pub(crate) enabled: bool,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    pub(crate) settle: Option<Duration>,
    pub(crate) acceptance: AcceptanceOptions,
    /// Baseline and final scrapes wait for two identical consecutive scrapes (the AL gate).
    pub(crate) require_stable: bool,
}

impl ScrapeConfig {
    pub(crate) fn from_args(
        a: &ScrapeArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ScrapeConfig, ConfigError> {
        let positive = |flag: &str, v: f64| {
            Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| ConfigError(format!("--{flag} {v} must be a positive number")))
        };
        if a.num_spec_tokens == Some(0) {
            return err("--num-spec-tokens must be at least 1");
        }
        Ok(ScrapeConfig {
            endpoints: if a.no_server_metrics {
                Vec::new()
            } else {
                metrics_endpoints(&a.server_metrics, env)?
            },
            enabled: !a.no_server_metrics,
            interval: positive("metrics-interval-seconds", a.metrics_interval_seconds)?,
            timeout: positive("metrics-timeout-seconds", a.metrics_timeout_seconds)?,
            settle: a
                .metrics_settle_seconds
                .map(|v| {
                    Duration::try_from_secs_f64(v).map_err(|_| {
                        ConfigError(format!(
                            "--metrics-settle-seconds {v} must be zero or a positive number"
                        ))
                    })
                })
                .transpose()?,
            acceptance: AcceptanceOptions {
                engine: a.spec_engine,
                num_spec_tokens: a.num_spec_tokens,
            },
            require_stable: false,
        })
    }
}

/// Parses `--extra-inputs`: `key:value` pairs (JSON value when it parses) or JSON objects.
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ConfigError> {
    let mut map = Map::new();
    for item in items {
        let t = item.trim();
        if t.starts_with('{') {
            match serde_json::from_str::<Value>(t) {
                Ok(Value::Object(o)) => map.extend(o),
                _ => return err(format!("--extra-inputs {t:?} is not a JSON object")),
            }
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return err(format!(
                "--extra-inputs {t:?}: expected key:value or a JSON object"
            ));
        };
        if k.is_empty() {
            return err(format!("--extra-inputs {t:?}: empty key"));
        }
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        map.insert(k.to_owned(), value);
    }
    Ok(map)
}

fn parse_headers(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for h in items {
        let t = h.trim();
        if t.starts_with('{') {
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(t) else {
                return err(format!("--header {t:?} is not a JSON object"));
            };
            for (k, v) in o {
                let v = v
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string());
                out.push((k, v));
            }
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return err(format!("--header {t:?}: expected Name:Value"));
        };
        out.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(out)
}

impl RunConfig {
    /// Validates `replay` flags.
    pub fn from_args(a: &ReplayArgs) -> Result<RunConfig, ConfigError> {
        if a.concurrency == Some(0) {
            return err("--concurrency must be at least 1");
        }
        if a.request_count == Some(0) {
            return err("--request-count must be at least 1");
        }
        if a.osl == Some(0) {
            return err("--osl must be at least 1");
        }
        if !(0.0..=1.0).contains(&a.failed_request_threshold) {
            return err(format!(
                "--failed-request-threshold {} must be within [0, 1]",
                a.failed_request_threshold
            ));
        }
        if a.max_event_bytes < 1024 {
            return err("--max-event-bytes must be at least 1024");
        }
        let endpoint_path = match &a.endpoint {
            Some(p) if p.starts_with('/') => p.clone(),
            Some(p) => return err(format!("--endpoint {p:?} must start with '/'")),
            None => a.endpoint_type.path().to_owned(),
        };
        let (target, osl) = match &a.url {
            Some(u) => (Target::Url(normalize_url(u)?), a.osl),
            None => {
                let s = &a.sim;
                let sim = SimConfig {
                    ttft: Duration::try_from_secs_f64(s.ttft_ms / 1e3).map_err(|_| {
                        ConfigError(format!("--sim-ttft-ms {} is invalid", s.ttft_ms))
                    })?,
                    itl: Duration::try_from_secs_f64(s.itl_ms / 1e3).map_err(|_| {
                        ConfigError(format!("--sim-itl-ms {} is invalid", s.itl_ms))
                    })?,
                    k: s.k,
                    acceptance: Acceptance::Probability(s.acceptance_prob),
                    ..SimConfig::default()
                };
                sim.validate().map_err(|e| ConfigError(e.to_string()))?;
                (Target::Embedded(Box::new(sim)), Some(a.osl.unwrap_or(256)))
            }
        };
        let dataset = match &a.input_file {
            Some(p) => DatasetSource::File {
                path: p.clone(),
                kind: a.custom_dataset_type,
            },
            None if a.synthetic => {
                if a.tokenizer.is_none() {
                    return err(
                        "--synthetic needs --tokenizer PATH to make prompts of exact token lengths",
                    );
                }
                if a.isl == 0 || a.num_dataset_entries == 0 {
                    return err("--isl and --num-dataset-entries must be at least 1");
                }
                for (flag, v) in [("isl-stddev", a.isl_stddev), ("osl-stddev", a.osl_stddev)] {
                    if !(v.is_finite() && v >= 0.0) {
                        return err(format!("--{flag} {v} must be a non-negative number"));
                    }
                }
                DatasetSource::Synthetic(SyntheticSpec {
                    isl: a.isl,
                    isl_stddev: a.isl_stddev,
                    osl: a.osl,
                    osl_stddev: a.osl_stddev,
                    entries: a.num_dataset_entries,
                    seed: a.load.random_seed,
                })
            }
            None => DatasetSource::Bundled,
        };
        let headers = build_headers(
            &parse_headers(&a.headers)?,
            a.api_key.as_deref().filter(|k| !k.is_empty()),
        )
        .map_err(|m| ConfigError(format!("--header/--api-key: {m}")))?;
        let timeouts = Timeouts {
            connect: seconds("connect-timeout-seconds", a.connect_timeout_seconds)?,
            first_token: seconds("ttft-timeout-seconds", a.ttft_timeout_seconds)?,
            idle: seconds("idle-timeout-seconds", a.idle_timeout_seconds)?,
            total: seconds("request-timeout-seconds", a.request_timeout_seconds)?,
        };
        if let Some(ca) = &a.ca_file {
            if !ca.is_file() {
                return err(format!("--ca-file {}: no such file", ca.display()));
            }
        }
        let wait_for_model = if a.wait_for_model_timeout == 0.0 {
            Duration::ZERO
        } else {
            seconds("wait-for-model-timeout", a.wait_for_model_timeout)?
        };
        Ok(RunConfig {
            target,
            model: a.model.clone().filter(|m| !m.is_empty()),
            endpoint_type: a.endpoint_type,
            endpoint_path,
            streaming: a.streaming,
            concurrency: a.concurrency.unwrap_or(64),
            load: LoadConfig::from_args(a, &|k| std::env::var(k).ok())?,
            request_count: a.request_count,
            dataset,
            select: SpeedBenchSelect {
                category: a.category.clone(),
                shuffle_seed: (!a.no_shuffle).then_some(a.seed),
                all_turns: a.all_turns,
            },
            encoder: EncoderSpec::parse(&a.encoder)?,
            chat_template_kwargs: match &a.chat_template_kwargs {
                None => Map::new(),
                Some(t) => match serde_json::from_str::<Value>(t) {
                    Ok(Value::Object(m)) => m,
                    _ => {
                        return err(format!(
                            "--chat-template-kwargs {t:?} must be a JSON object, e.g. '{{\"thinking\": true}}'"
                        ))
                    }
                },
            },
            sampling: sampling(a)?,
            tokenizer: match &a.tokenizer {
                Some(p) if !p.exists() => {
                    return err(format!(
                        "--tokenizer {}: no such file or directory (pass a local tokenizer.json or a model directory; nothing is downloaded)",
                        p.display()
                    ))
                }
                other => other.clone(),
            },
            osl,
            legacy_max_tokens: a.use_legacy_max_tokens,
            per_chunk_usage: a.per_chunk_usage,
            extra_inputs: parse_extra_inputs(&a.extra_inputs)?,
            client: ClientOptions {
                http: a.http,
                timeouts,
                headers,
                origin: None,
                insecure: a.insecure,
                ca_file: a.ca_file.clone(),
                max_event_bytes: a.max_event_bytes,
                max_body_bytes: a.max_event_bytes,
            },
            run_timeout: seconds("timeout-seconds", a.timeout_seconds)?,
            stall_timeout: seconds("stall-timeout-seconds", a.stall_timeout_seconds)?,
            wait_for_model,
            failed_request_threshold: a.failed_request_threshold,
            artifact_dir: a.artifact_dir.clone(),
            scrape: ScrapeConfig::from_args(&a.scrape, &|k| std::env::var(k).ok())?,
            progress_interval: (a.progress_interval > 0.0)
                .then(|| Duration::try_from_secs_f64(a.progress_interval).ok())
                .flatten(),
            ui: a.ui,
            goodput: parse_goodput(&a.goodput)?,
            result_file: match a.result_filename.as_deref().filter(|n| !n.is_empty()) {
                Some(n) => Some((a.result_dir.clone(), result_file_name(n)?)),
                None => None,
            },
            cli_command: None,
            warnings: if a.insecure {
                vec![INSECURE_WARNING.to_owned()]
            } else {
                Vec::new()
            },
        })
    }
}

/// Validates `sim` flags.
pub fn sim_config(a: &SimArgs) -> Result<SimConfig, ConfigError> {
    let ms = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v / 1e3)
            .map_err(|_| ConfigError(format!("--{flag} {v} must be a non-negative number of ms")))
    };
    let cfg = SimConfig {
        model: a.model.clone(),
        host: a.host,
        port: a.port,
        servers: a.servers,
        engines: a.engines,
        ttft: ms("ttft-ms", a.ttft_ms)?,
        itl: ms("itl-ms", a.itl_ms)?,
        jitter: a.jitter,
        seed: a.seed,
        k: a.k,
        acceptance: match a.target_al {
            Some(al) => Acceptance::MeanAl(al),
            None => Acceptance::Probability(a.acceptance_prob),
        },
        default_max_tokens: a.default_max_tokens.max(1),
        eos_probability: a.eos_prob,
        split_steps: a.split_steps,
        reasoning_tokens: a.reasoning_tokens,
        reasoning_field: a.reasoning_field,
        fault_rates: a.faults.clone(),
        fault_sequence: a.fault_sequence.clone(),
        slow_headers: ms("slow-headers-ms", a.slow_headers_ms)?,
        stall_limit: Duration::from_secs(600),
        oversized_bytes: a.oversized_bytes,
        tls: match (&a.tls_cert, &a.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        record_requests: 0,
    };
    cfg.validate().map_err(|e| ConfigError(e.to_string()))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn urls_get_a_scheme_and_bad_ones_are_named() {
        assert_eq!(
            normalize_url("localhost:8000/").unwrap(),
            "http://localhost:8000"
        );
        assert_eq!(normalize_url("https://h:1").unwrap(), "https://h:1");
        assert!(normalize_url("ftp://h")
            .unwrap_err()
            .to_string()
            .contains("ftp"));
    }

    #[test]
    fn credentials_in_urls_are_refused_and_insecure_is_a_warning() {
        let e = normalize_url("https://user:hunter2@h:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--api-key") && !e.contains("hunter2"), "{e}");
        let e = metrics_url("http://u:hunter2@h:1").unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        use clap::Parser;
        let parse = |args: &[&str]| {
            let mut argv = vec!["specperf", "replay", "--url", "https://h:1"];
            argv.extend_from_slice(args);
            let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
            let crate::cli::Command::Replay(a) = cli.command else {
                panic!("not replay")
            };
            RunConfig::from_args(&a).unwrap()
        };
        assert!(parse(&[]).warnings.is_empty() && !parse(&[]).client.insecure);
        let insecure = parse(&["--insecure"]);
        assert!(insecure.client.insecure);
        assert!(insecure.warnings[0].contains("--insecure"));
    }

    #[test]
    fn metrics_urls_follow_the_inferencex_normalisation() {
        let cases = [
            ("http://10.0.0.5:8081/", "http://10.0.0.5:8081/metrics"),
            (
                "http://h:8000/prometheus/metrics",
                "http://h:8000/prometheus/metrics",
            ),
            ("node3:8081,", "http://node3:8081/metrics"),
            ("8000", "http://0.0.0.0:8000/metrics"),
            (":8000", "http://0.0.0.0:8000/metrics"),
            ("h:1/metrics?x=1", "http://h:1/metrics?x=1"),
        ];
        for (raw, want) in cases {
            assert_eq!(metrics_url(raw).unwrap().as_deref(), Some(want), "{raw}");
        }
        assert!(metrics_url("a b").is_err());
        assert_eq!(metrics_url(" ,").unwrap(), None);
    }

    #[test]
    fn metrics_endpoints_take_the_first_non_empty_source_and_refuse_duplicates() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = env(&[
            ("SPEEDBENCH_DECODE_METRICS_URLS", "a:1, b:2\nc:3"),
            ("SPEEDBENCH_METRICS_URLS", "z:9"),
        ]);
        assert_eq!(
            metrics_endpoints(&[], &both).unwrap(),
            [
                "http://a:1/metrics",
                "http://b:2/metrics",
                "http://c:3/metrics"
            ]
        );
        // Flags win over the environment.
        assert_eq!(
            metrics_endpoints(&["8000".into()], &both).unwrap(),
            ["http://0.0.0.0:8000/metrics"]
        );
        let ports = env(&[
            ("SPEEDBENCH_METRICS_PORTS", "8081 node2:8082"),
            (
                "SPEEDBENCH_TRTLLM_JSON_METRICS_URLS",
                "http://t:8000/metrics",
            ),
        ]);
        assert_eq!(
            metrics_endpoints(&[], &ports).unwrap(),
            [
                "http://0.0.0.0:8081/metrics",
                "http://node2:8082/metrics",
                "http://t:8000/metrics"
            ]
        );
        let aiperf = env(&[("AIPERF_SERVER_METRICS_URLS", "http://a:1,,http://b:2")]);
        let e = metrics_endpoints(&[], &aiperf).unwrap_err().to_string();
        assert!(e.contains("comma-separated list of non-empty URLs"), "{e}");
        let dup = metrics_endpoints(&["h:1".into(), "http://h:1/".into()], &|_| None);
        assert!(dup.unwrap_err().to_string().contains("listed twice"));
        assert!(metrics_endpoints(&[], &|_| None).unwrap().is_empty());
    }

    fn sim_args(args: &[&str]) -> Result<SimConfig, String> {
        use clap::Parser;
        let mut argv = vec!["specperf", "sim"];
        argv.extend_from_slice(args);
        let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let crate::cli::Command::Sim(a) = cli.command else {
            panic!("not sim")
        };
        sim_config(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn fault_sequence_parses_names_and_none_and_excludes_fault_rates() {
        use crate::sim::Fault;
        let cfg = sim_args(&["--fault-sequence", "none,http500,Stall"]).unwrap();
        assert_eq!(
            cfg.fault_sequence,
            [None, Some(Fault::Http500), Some(Fault::Stall)]
        );
        let e = sim_args(&["--fault-sequence", "none,boom"]).unwrap_err();
        assert!(e.contains("boom"), "{e}");
        let e = sim_args(&["--fault-sequence", "http500", "--fault", "stall=0.1"]).unwrap_err();
        assert!(e.contains("--fault-sequence"), "{e}");
    }

    #[test]
    fn the_simulator_binds_loopback_unless_told_otherwise() {
        // `specperf sim` without --host, the library default, and the embedded target of a
        // replay without --url: none of them may listen beyond this machine.
        assert!(sim_args(&[]).unwrap().host.is_loopback());
        assert!(SimConfig::default().host.is_loopback());
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["specperf", "replay"]).unwrap();
        let crate::cli::Command::Replay(a) = cli.command else {
            panic!("not replay")
        };
        match RunConfig::from_args(&a).unwrap().target {
            Target::Embedded(sim) => assert!(sim.host.is_loopback()),
            Target::Url(u) => panic!("no --url, yet a target {u}"),
        }
    }

    #[test]
    fn goodput_takes_vllm_and_aiperf_tags_and_names_bad_input() {
        let slos =
            parse_goodput(&["ttft:200 tpot:20".into(), "request_latency:5000".into()]).unwrap();
        let tags: Vec<(&str, f64)> = slos.iter().map(|s| (s.metric.tag(), s.threshold)).collect();
        assert_eq!(
            tags,
            [
                ("time_to_first_token", 200.0),
                ("inter_token_latency", 20.0),
                ("request_latency", 5000.0)
            ]
        );
        for (bad, says) in [
            ("ttft=200", "expected TAG:VALUE"),
            ("foo:1", "unknown metric \"foo\""),
            ("ttft:-1", "not a positive number"),
            ("ttft:abc", "not a positive number"),
            ("ttft:1 time_to_first_token:2", "given twice"),
        ] {
            let e = parse_goodput(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn result_file_names_cannot_escape_their_directory() {
        assert_eq!(
            result_file_name("dsv4_fp4_vllm_tp8-pp1_conc64_b200").unwrap(),
            "dsv4_fp4_vllm_tp8-pp1_conc64_b200"
        );
        for bad in ["", "../x", "a/b", "a\\b", "..", "x..y", " x"] {
            assert!(result_file_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn extra_inputs_parse_json_scalars_and_objects() {
        let m = parse_extra_inputs(&[
            "temperature:0.6".into(),
            "ignore_eos:true".into(),
            "tag:abc".into(),
            r#"{"top_k": 20}"#.into(),
        ])
        .unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"temperature": 0.6, "ignore_eos": true, "tag": "abc", "top_k": 20})
        );
        assert!(parse_extra_inputs(&["novalue".into()]).is_err());
    }
}
