//! One finished run directory, read the way AIPerf 0.13's `speed-bench-report` reads it: which
//! directories are runs, the category and model from `profile_export_aiperf.json`'s
//! `input_config`, the acceptance from `server_metrics_export.json`, the throughput and TPOT
//! from the profile's summary metrics; plus what only specperf writes, the per-group acceptance
//! in `summary.json`. Nothing here prints: every problem comes back as a warning text.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::metrics::SummaryView;

/// The file that makes a directory a run directory.
pub(super) const PROFILE_JSON: &str = "profile_export_aiperf.json";
/// Where the servers' counters over the run are.
pub(super) const SERVER_METRICS_JSON: &str = "server_metrics_export.json";

/// The category AIPerf files a run under when its dataset format is `speed_bench_qualitative`:
/// a specperf run over several categories at once (no `--category`).
pub(super) const MIXED_CATEGORY: &str = "qualitative";

/// Dataset selectors that mark an acceptance-length benchmark; the category is what follows.
const CATEGORY_PREFIXES: [&str; 2] = ["speed_bench_", "spec_al_"];

/// Gauges holding the acceptance length, most trusted first (each engine has its own name).
const ACCEPT_LENGTH_GAUGES: [&str; 3] = [
    "sglang:spec_accept_length",
    "vllm:spec_decode_mean_accepted_length",
    "trtllm:spec_accept_length",
];

/// Gauges holding the acceptance rate, most trusted first.
const ACCEPT_RATE_GAUGES: [&str; 3] = [
    "sglang:spec_accept_rate",
    "vllm:spec_decode_draft_acceptance_rate",
    "trtllm:spec_accept_rate",
];

/// `p` as Python's `pathlib` prints it (`./runs//a/` is `runs/a`), so that the paths in
/// messages read as AIPerf's do: no `.` components, no repeated or trailing slash.
pub(super) fn pathlib(p: &Path) -> PathBuf {
    let out: PathBuf = p
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// Run directories among `paths`: each path that holds [`PROFILE_JSON`], else its immediate
/// subdirectories that do, in name order. A path that is not a directory is skipped with a
/// warning (AIPerf's rule, so both tools see the same runs).
pub(super) fn find_run_dirs(paths: &[PathBuf], warn: &mut dyn FnMut(String)) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            warn(format!("{} is not a directory, skipping", p.display()));
            continue;
        }
        if p.join(PROFILE_JSON).exists() {
            out.push(p.clone());
            continue;
        }
        let mut children: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        children.sort();
        out.extend(
            children
                .into_iter()
                .filter(|c| c.is_dir() && c.join(PROFILE_JSON).exists()),
        );
    }
    out
}

/// A JSON file of the run: `Ok(None)` when it does not exist, `Err` (the warning text) when it
/// cannot be read or parsed.
fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read(path).map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| format!("failed to read {}: {e}", path.display()))
}

/// `profile_export_aiperf.json` of `dir`, if present and readable (a failure is warned about).
pub(super) fn profile(dir: &Path, warn: &mut dyn FnMut(String)) -> Option<Value> {
    read(&dir.join(PROFILE_JSON)).unwrap_or_else(|w| {
        warn(w);
        None
    })
}

/// Python's truthiness of a JSON value (`x or y` picks `y` when `x` is falsy).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The benchmark category of a run: the first `input_config.datasets[]` entry whose `format`
/// (else `dataset`) starts with a known prefix, without the prefix (`speed_bench_coding` ->
/// `coding`, `spec_al_gsm8k` -> `gsm8k`). May be empty (`speed_bench_`), which names nothing.
pub(super) fn category(profile: &Value) -> Option<String> {
    let datasets = profile.get("input_config")?.get("datasets")?.as_array()?;
    for entry in datasets.iter().filter(|e| e.is_object()) {
        let name = entry
            .get("format")
            .filter(|f| truthy(f))
            .or_else(|| entry.get("dataset"))
            .and_then(Value::as_str);
        let Some(name) = name else { continue };
        if let Some(c) = CATEGORY_PREFIXES.iter().find_map(|p| name.strip_prefix(p)) {
            return Some(c.to_owned());
        }
    }
    None
}

/// The served model: the first non-empty `input_config.models.items[].name`, else `unknown`.
pub(super) fn model(profile: &Value) -> String {
    profile
        .pointer("/input_config/models/items")
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .filter_map(|i| i.get("name").and_then(Value::as_str))
                .find(|n| !n.is_empty())
        })
        .unwrap_or("unknown")
        .to_owned()
}

/// The profile's `output_token_throughput.avg`, tokens/s.
pub(super) fn throughput(profile: &Value) -> Option<f64> {
    profile
        .get("output_token_throughput")
        .filter(|o| truthy(o))?
        .get("avg")?
        .as_f64()
}

/// Mean time per output token after the first, ms: the profile's `inter_token_latency.avg`
/// (what specperf and AIPerf write), else `time_per_output_token.avg`, in the unit it states.
pub(super) fn tpot_ms(profile: &Value) -> Option<f64> {
    let m = ["inter_token_latency", "time_per_output_token"]
        .iter()
        .find_map(|k| profile.get(*k).filter(|m| m.get("avg").is_some()))?;
    let avg = m.get("avg")?.as_f64()?;
    let per_ms = match m.get("unit").and_then(Value::as_str).unwrap_or("ms") {
        "s" | "sec" => 1e3,
        "us" => 1e-3,
        "ns" => 1e-6,
        _ => 1.0,
    };
    Some(avg * per_ms)
}

/// The profiling phase's concurrency (`input_config.phases[]`), absent for rate-driven runs.
pub(super) fn concurrency(profile: &Value) -> Option<u64> {
    let phases = profile.pointer("/input_config/phases")?.as_array()?;
    phases
        .iter()
        .find(|p| p.get("kind").and_then(Value::as_str).unwrap_or("profiling") == "profiling")?
        .get("concurrency")?
        .as_u64()
}

/// `server_metrics_export.json`'s `metrics`, in file order (the name-agnostic fallback takes the
/// first match, as AIPerf's dict iteration does).
#[derive(Default)]
pub(super) struct ServerMetrics(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for ServerMetrics {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ordered;
        impl<'de> Visitor<'de> for Ordered {
            type Value = ServerMetrics;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of metric families")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ServerMetrics, A::Error> {
                let mut out: Vec<(String, Value)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    // A repeated name keeps its first place and its last value, as a dict does.
                    match out.iter_mut().find(|(n, _)| *n == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                Ok(ServerMetrics(out))
            }
        }
        d.deserialize_map(Ordered)
    }
}

#[derive(Deserialize)]
struct ServerMetricsFile {
    #[serde(default)]
    metrics: ServerMetrics,
}

impl ServerMetrics {
    /// `server_metrics_export.json` of `dir`: `None` when absent or unreadable (warned about).
    pub(super) fn read(dir: &Path, warn: &mut dyn FnMut(String)) -> Option<ServerMetrics> {
        match read::<ServerMetricsFile>(&dir.join(SERVER_METRICS_JSON)) {
            Ok(f) => f.map(|f| f.metrics),
            Err(w) => {
                warn(w);
                None
            }
        }
    }

    #[cfg(test)]
    pub(super) fn from_json(text: &str) -> ServerMetrics {
        serde_json::from_str::<ServerMetricsFile>(text)
            .expect("server metrics JSON")
            .metrics
    }

    /// `stat` of the first series of the family `name`.
    fn stat(&self, name: &str, stat: &str) -> Option<f64> {
        let family = &self.0.iter().find(|(n, _)| n == name)?.1;
        first_series_stat(family, stat)
    }

    /// Acceptance length: a gauge by name, else `1 + accepted / drafts` from vLLM's counters
    /// over the run, else the first family whose name has `spec`, `accept` and `length`.
    pub(super) fn accept_length(&self) -> Option<f64> {
        if let Some(v) = ACCEPT_LENGTH_GAUGES
            .iter()
            .find_map(|g| self.stat(g, "avg"))
        {
            return Some(v);
        }
        let accepted = self.stat("vllm:spec_decode_num_accepted_tokens", "total");
        let drafts = self.stat("vllm:spec_decode_num_drafts", "total");
        if let (Some(a), Some(d)) = (accepted, drafts) {
            if d > 0.0 {
                return Some(a / d + 1.0);
            }
        }
        self.0.iter().find_map(|(name, family)| {
            let lower = name.to_lowercase();
            ["spec", "accept", "length"]
                .iter()
                .all(|w| lower.contains(w))
                .then(|| first_series_stat(family, "avg"))
                .flatten()
        })
    }

    /// Acceptance rate (accepted over proposed draft tokens): a gauge by name, else vLLM's
    /// counters over the run.
    pub(super) fn accept_rate(&self) -> Option<f64> {
        if let Some(v) = ACCEPT_RATE_GAUGES.iter().find_map(|g| self.stat(g, "avg")) {
            return Some(v);
        }
        let accepted = self.stat("vllm:spec_decode_num_accepted_tokens", "total")?;
        let proposed = self.stat("vllm:spec_decode_num_draft_tokens", "total")?;
        (proposed > 0.0).then(|| accepted / proposed)
    }
}

/// `family.series[0].stats[stat]`, when the family and its first series are there.
fn first_series_stat(family: &Value, stat: &str) -> Option<f64> {
    if !truthy(family) {
        return None;
    }
    family
        .get("series")?
        .as_array()?
        .first()?
        .get("stats")?
        .get(stat)?
        .as_f64()
}

/// One group's acceptance inside a run over several categories, from the per-request figures
/// the server reported (`summary.json` `spec_decode.by_group.<g>.reported`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct GroupAcceptance {
    /// `1 + Σ accepted / Σ steps`: the counters' definition, so it agrees with a per-category
    /// run's AL read from the counters.
    pub(super) accept_length: Option<f64>,
    /// `Σ accepted / Σ proposed`, a fraction.
    pub(super) accept_rate: Option<f64>,
}

/// The groups of a specperf run over several categories, keyed by group (category) name:
/// `None` when `summary.json` is absent (an AIPerf run), unreadable or has no groups; the
/// groups with empty figures when the responses reported none.
pub(super) fn groups(dir: &Path) -> Option<BTreeMap<String, GroupAcceptance>> {
    let Ok(Some(summary)) = read::<SummaryView>(&dir.join("summary.json")) else {
        return None;
    };
    let by_group = summary.spec_decode?.by_group;
    if by_group.is_empty() {
        return None;
    }
    let out: BTreeMap<String, GroupAcceptance> = by_group
        .into_iter()
        .map(|(g, v)| {
            let r = v.reported.unwrap_or_default();
            (
                g,
                GroupAcceptance {
                    accept_length: r.token_weighted_acceptance_length,
                    accept_rate: r.acceptance_rate,
                },
            )
        })
        .collect();
    Some(out)
}
