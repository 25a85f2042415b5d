//! Where and how often the side task scrapes Prometheus metrics: endpoint normalisation and the
//! InferenceX environment (`inferencex-contract.md` §9), intervals and the acceptance options.
//! Feeds `scrape`.

use std::time::Duration;

use super::target::has_userinfo;
use super::{err, ConfigError};
use crate::cli::ScrapeArgs;
use crate::scrape::acceptance::AcceptanceOptions;

/// Normalises one metrics endpoint (`inferencex-contract.md` §9.2): one trailing `,` then one
/// trailing `/` stripped; `8000` and `:8000` -> `http://0.0.0.0:8000/metrics`; no scheme ->
/// `http://`; no metrics path -> `/metrics` appended. `None` for an empty item.
pub(crate) fn metrics_url(raw: &str) -> Result<Option<String>, ConfigError> {
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
pub(crate) fn metrics_endpoints(
    flags: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, ConfigError> {
    let (items, source) = endpoint_items(flags, env)?;
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

/// The raw endpoint items and the source they came from (named in errors): the flags, else the
/// first non-empty variable in the contract's order. The TensorRT-LLM JSON endpoints join
/// whichever source won.
fn endpoint_items(
    flags: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Vec<String>, &'static str), ConfigError> {
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
    Ok((items, source))
}

/// Validated scrape settings; endpoints resolved against the target at run time.
#[derive(Clone, Debug)]
pub(crate) struct ScrapeConfig {
    /// Explicit endpoints (empty: the target's own /metrics).
    pub(crate) endpoints: Vec<String>,
    pub(crate) enabled: bool,
    pub(crate) interval: Duration,
    /// Timeslice length of the server-metrics export.
    pub(crate) slice: Duration,
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
            slice: positive("slice-duration", a.slice_duration)?,
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
