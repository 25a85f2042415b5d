//! What a sweep keeps of each run: a flat map of numbers named `<AIPerf tag>_<stat>` (AIPerf's
//! aggregate names: `time_to_first_token_p99`, `request_throughput`), read from the run's
//! [`Summary`] once it ends, and the SLA objectives judged on them.
//!
//! The map is what `sweep.json` stores per run, what repeated runs aggregate (one value per run
//! and key) and what the table, the Pareto plot and a resumed sweep read back; no run's records
//! are read again.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::metrics::{MetricKey, Summary};

/// One run's numbers, `<tag>_<stat>` -> value (absent when the run had no such value).
pub type Values = BTreeMap<String, f64>;

/// The per-request metrics kept: (AIPerf tag, key).
pub(crate) const LATENCIES: [(&str, MetricKey); 4] = [
    ("time_to_first_token", MetricKey::TimeToFirstToken),
    ("inter_token_latency", MetricKey::InterTokenLatency),
    ("time_per_output_token", MetricKey::TimePerOutputToken),
    ("request_latency", MetricKey::RequestLatency),
];

/// The statistics kept of each per-request metric.
pub(crate) const STATS: [&str; 7] = ["avg", "std", "p50", "p90", "p95", "p99", "max"];

/// Tags with one value per run (no statistic in the key).
pub(crate) const SCALARS: [&str; 17] = [
    "request_throughput",
    "output_token_throughput",
    "input_token_throughput",
    "total_token_throughput",
    "total_token_throughput_per_gpu",
    "output_token_throughput_per_gpu",
    "interactivity",
    "goodput",
    "good_request_fraction",
    "request_count",
    "error_request_count",
    "error_rate",
    "acceptance_length",
    "benchmark_duration",
    "joules_per_output_token",
    "joules_per_total_token",
    "avg_gpu_power_w",
];

/// The numbers of one finished run. `gpus` divides the throughputs for the per-GPU keys.
pub(crate) fn of(s: &Summary, gpus: Option<u32>) -> Values {
    let mut v = Values::new();
    let mut put = |k: &str, x: f64| {
        if x.is_finite() {
            v.insert(k.to_string(), x);
        }
    };
    put("request_throughput", s.request_throughput_rps);
    put("output_token_throughput", s.output_token_throughput_tps);
    put("input_token_throughput", s.input_token_throughput_tps);
    put("total_token_throughput", s.total_token_throughput_tps);
    if let Some(g) = gpus.filter(|&g| g > 0) {
        put(
            "total_token_throughput_per_gpu",
            s.total_token_throughput_tps / f64::from(g),
        );
        put(
            "output_token_throughput_per_gpu",
            s.output_token_throughput_tps / f64::from(g),
        );
    }
    for (tag, key) in LATENCIES {
        let Some(st) = s.metric(key).filter(|st| st.count > 0) else {
            continue;
        };
        put(&format!("{tag}_avg"), st.avg);
        put(&format!("{tag}_std"), st.std);
        put(&format!("{tag}_max"), st.max);
        for p in ["p50", "p90", "p95", "p99"] {
            put(&format!("{tag}_{p}"), st.p(p));
        }
    }
    // InferenceX's x axis: tokens per second a user sees, 1000 / median TPOT (ms).
    if let Some(tpot) = s
        .metric(MetricKey::TimePerOutputToken)
        .filter(|st| st.count > 0)
        .map(|st| st.p("p50"))
        .filter(|t| *t > 0.0)
    {
        put("interactivity", 1000.0 / tpot);
    }
    if let Some(g) = &s.goodput {
        put("goodput", g.goodput_rps);
        put("good_request_fraction", g.good_request_fraction);
    }
    let c = &s.counts;
    let errors = c.failed + c.cancelled;
    put("request_count", c.success as f64);
    put("error_request_count", errors as f64);
    if c.success + errors > 0 {
        put("error_rate", errors as f64 / (c.success + errors) as f64);
    }
    let counters = s
        .acceptance
        .as_ref()
        .and_then(|r| r.acceptance.numbers.acceptance_length);
    let reported = s
        .spec_decode
        .as_ref()
        .and_then(|d| d.reported.as_ref())
        .and_then(|t| t.token_weighted_acceptance_length);
    if let Some(al) = counters.or(reported) {
        put("acceptance_length", al);
    }
    put("benchmark_duration", s.duration_s);
    if let Some(e) = &s.energy {
        for (k, x) in [
            ("joules_per_output_token", e.joules_per_output_token),
            ("joules_per_total_token", e.joules_per_total_token),
            ("avg_gpu_power_w", e.avg_power_w),
        ] {
            if let Some(x) = x {
                put(k, x);
            }
        }
    }
    v
}

/// The per-request values of `tag` in a run's `profile_export.jsonl` (AIPerf's
/// `metrics.<tag>.value`), for the distribution convergence test. Empty when the file or the
/// metric is missing.
pub(crate) fn per_request(run_dir: &Path, tag: &str) -> Vec<f64> {
    /// The part of a line read here: each metric's value (a number, or a list for the
    /// per-chunk ones, which are skipped).
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(default)]
        metrics: BTreeMap<String, Metric>,
    }
    #[derive(serde::Deserialize)]
    struct Metric {
        value: serde_json::Value,
    }
    let mut out = Vec::new();
    let path = run_dir.join("profile_export.jsonl");
    let read = crate::fsutil::for_each_line(
        &path,
        |_| (),
        |_, l| {
            let v = serde_json::from_str::<Line>(l)
                .ok()
                .and_then(|mut l| l.metrics.remove(tag));
            out.extend(v.and_then(|m| m.value.as_f64()));
            Ok(())
        },
    );
    if read.is_err() {
        out.clear();
    }
    out
}

/// The key `--convergence-metric TAG` and `--convergence-stat STAT` compare across runs, or why
/// it names nothing a run reports.
pub(crate) fn convergence_key(tag: &str, stat: &str) -> Result<String, String> {
    if SCALARS.contains(&tag) {
        return Ok(tag.to_string());
    }
    if LATENCIES.iter().any(|(t, _)| *t == tag) {
        if !STATS.contains(&stat) {
            return Err(format!(
                "--convergence-stat {stat:?} is not kept; use one of {}",
                STATS.join(", ")
            ));
        }
        return Ok(format!("{tag}_{stat}"));
    }
    let known: Vec<&str> = LATENCIES
        .iter()
        .map(|(t, _)| *t)
        .chain(SCALARS.iter().copied())
        .collect();
    Err(format!(
        "--convergence-metric {tag:?} is not a metric a run reports; use one of {}",
        known.join(", ")
    ))
}

/// One SLA objective: `key` (a [`Values`] key) at most `limit` (at least, for `at_least`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    /// The flag that set it.
    pub flag: String,
    /// The value judged.
    pub key: String,
    /// The bound.
    pub limit: f64,
    /// The value must be at least the limit (a fraction of good requests), not at most.
    #[serde(default)]
    pub at_least: bool,
}

/// An objective judged on one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The objective.
    #[serde(flatten)]
    pub objective: Objective,
    /// The point's value (the mean over its runs); `None` when the runs did not report it.
    pub value: Option<f64>,
    /// Value within the limit.
    pub pass: bool,
}

/// Every objective judged on one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// All checks passed.
    pub pass: bool,
    /// Each objective.
    pub checks: Vec<Check>,
}

/// Judges `values` against every objective; a missing value fails its objective.
pub(crate) fn judge(values: &Values, objectives: &[Objective]) -> Verdict {
    let checks: Vec<Check> = objectives
        .iter()
        .map(|o| {
            let value = values.get(&o.key).copied();
            Check {
                objective: o.clone(),
                value,
                pass: value.is_some_and(|v| {
                    if o.at_least {
                        v >= o.limit
                    } else {
                        v <= o.limit
                    }
                }),
            }
        })
        .collect();
    Verdict {
        pass: checks.iter().all(|c| c.pass),
        checks,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn per_request_reads_one_metrics_value_per_line_and_skips_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("profile_export.jsonl"),
            concat!(
                r#"{"metadata":{"x_request_id":"a"},"metrics":{"request_latency":{"value":12.5,"unit":"ms"},"inter_chunk_latency":{"value":[1.0,2.0],"unit":"ms"}}}"#,
                "\n",
                r#"{"metadata":{"x_request_id":"b"},"metrics":{"time_to_first_token":{"value":3.0,"unit":"ms"}}}"#,
                "\n",
                "not json\n",
                r#"{"metadata":{"x_request_id":"c"},"metrics":{"request_latency":{"value":7,"unit":"ms"}}}"#,
                "\n",
            ),
        )
        .unwrap();
        assert_eq!(
            super::per_request(tmp.path(), "request_latency"),
            [12.5, 7.0]
        );
        assert!(super::per_request(tmp.path(), "inter_chunk_latency").is_empty());
        assert!(super::per_request(&tmp.path().join("none"), "request_latency").is_empty());
    }
}
