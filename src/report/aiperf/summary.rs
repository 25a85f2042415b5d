//! The end-of-run `profile_export_aiperf.json` and `profile_export_aiperf.csv`.

use std::fmt::Write as _;

use super::super::json::{Obj, J};
use super::telemetry;
use super::{benchmark_id, error_class, tag, tool_version, PCTS, RECORD_METRICS, SCHEMA_VERSION};
use crate::metrics::{MetricKey, Stat, Summary, SweepMetric, SUMMARY_SCHEMA};
use crate::record::{FailureKind, SpecSource};
use crate::schedule::{ArrivalPattern, LoadMode};
use crate::stop::StopReason;

/// A record metric's statistics as AIPerf writes them.
fn stat_obj(unit: &str, st: &Stat) -> Obj {
    let mut o = Obj::new();
    o.put("unit", unit).put("avg", st.avg);
    for p in PCTS {
        o.put(p, st.p(p));
    }
    o.put("min", st.min)
        .put("max", st.max)
        .put("std", st.std)
        .put("count", st.count)
        .put("sum", st.sum);
    o
}

/// A time-weighted metric as AIPerf writes it: the statistics its sweep lines have, no count or
/// sum (AIPerf leaves the others unset and drops them).
fn sweep_obj(m: &SweepMetric) -> Obj {
    let t = &m.stat;
    let mut o = Obj::new();
    o.put("unit", m.unit)
        .put("avg", t.avg)
        .put("p50", t.p50)
        .put("p90", t.p90)
        .put("p95", t.p95)
        .put("p99", t.p99)
        .put("min", t.min)
        .put("max", t.max)
        .put("std", t.std);
    o
}

/// Scalar (derived) metrics: (tag, CSV header, unit, value).
fn derived(s: &Summary) -> Vec<(&'static str, &'static str, &'static str, Option<f64>)> {
    let c = &s.counts;
    // AgentX: requests cancelled when the grace period ran out are counted apart, not as
    // errors (the replay's decision; InferenceX's 10% error gate reads this count).
    let at_grace = s.agentx.as_ref().map_or(0, |a| a.cancelled_at_grace);
    let errors = (c.failed + c.cancelled).saturating_sub(at_grace);
    let done = c.success + errors;
    let g = s.goodput.as_ref();
    vec![
        (
            "request_throughput",
            "Request Throughput",
            "requests/sec",
            Some(s.request_throughput_rps),
        ),
        (
            "output_token_throughput",
            "Output Token Throughput",
            "tokens/sec",
            Some(s.output_token_throughput_tps),
        ),
        (
            "input_token_throughput",
            "Input Token Throughput",
            "tokens/sec",
            Some(s.input_token_throughput_tps),
        ),
        (
            "total_token_throughput",
            "Total Token Throughput",
            "tokens/sec",
            Some(s.total_token_throughput_tps),
        ),
        (
            "request_count",
            "Request Count",
            "requests",
            Some(c.success as f64),
        ),
        (
            "error_request_count",
            "Error Request Count",
            "requests",
            Some(errors as f64),
        ),
        (
            "completed_request_count",
            "Completed Requests (Success + Error)",
            "requests",
            Some(done as f64),
        ),
        (
            "request_error_rate",
            "Request Error Rate",
            "%",
            Some(if done > 0 {
                errors as f64 / done as f64 * 100.0
            } else {
                0.0
            }),
        ),
        (
            "benchmark_duration",
            "Benchmark Duration",
            "sec",
            Some(s.duration_s),
        ),
        (
            "total_isl",
            "Total Input Sequence Length",
            "tokens",
            Some(s.total_prompt_tokens as f64),
        ),
        (
            "total_osl",
            "Total Output Sequence Length",
            "tokens",
            Some(s.total_completion_tokens as f64),
        ),
        (
            "total_output_tokens",
            "Total Output Tokens",
            "tokens",
            Some(
                s.total_completion_tokens
                    .saturating_sub(s.total_reasoning_tokens) as f64,
            ),
        ),
        (
            "total_reasoning_tokens",
            "Total Reasoning Tokens",
            "tokens",
            Some(s.total_reasoning_tokens as f64),
        ),
        (
            "good_request_count",
            "Good Request Count",
            "requests",
            g.map(|g| g.good_request_count as f64),
        ),
        (
            "goodput",
            "Goodput",
            "requests/sec",
            g.map(|g| g.goodput_rps),
        ),
        (
            "good_request_fraction",
            "GoodRequestFraction",
            "ratio",
            g.map(|g| g.good_request_fraction),
        ),
    ]
}

/// AIPerf's run-level spec-decode metrics from what the responses reported: the three sums
/// (each only when some record had the metric it sums, as AIPerf's derived sums) and the two
/// ratios (only when defined). (tag, CSV header, unit, value); empty without figures.
fn spec_derived(s: &Summary) -> Vec<(&'static str, &'static str, &'static str, f64)> {
    let Some(spec) = &s.spec_decode else {
        return Vec::new();
    };
    let Some(t) = &spec.reported else {
        return Vec::new();
    };
    // TensorRT-LLM reports tokens per iteration only: no drafts or accepted tokens to sum.
    let with_drafts = spec
        .requests_by_source
        .iter()
        .any(|(&src, &n)| src != SpecSource::Trtllm && n > 0);
    let mut out = Vec::new();
    if t.requests_with_steps > 0 {
        out.push((
            "total_spec_decode_steps",
            "Total Spec Decode Steps",
            "count",
            t.steps as f64,
        ));
    }
    if with_drafts {
        out.push((
            "total_accepted_draft_tokens",
            "Total Accepted Draft Tokens",
            "tokens",
            t.accepted_tokens as f64,
        ));
        out.push((
            "total_draft_tokens",
            "Total Draft Tokens",
            "tokens",
            t.draft_tokens as f64,
        ));
    }
    if let Some(al) = t.token_weighted_acceptance_length {
        out.push((
            "spec_decode_token_weighted_acceptance_length",
            "Token-Weighted Acceptance Length",
            "ratio",
            al,
        ));
    }
    if let Some(rate) = t.acceptance_rate {
        out.push((
            "spec_decode_overall_draft_acceptance_rate",
            "Overall Draft Acceptance Rate",
            "%",
            rate * 100.0,
        ));
    }
    out
}

/// AIPerf's energy-efficiency metrics (with GPU telemetry), from the summary's own figures for
/// the AIPerf metrics its analyzer reads.
fn energy_efficiency(s: &Summary) -> Vec<telemetry::Scalar> {
    let scalars = derived(s);
    // The derived scalars are this file's own table (`derived`), named by AIPerf's tags.
    let tag = |t: &str| scalars.iter().find(|d| d.0 == t).and_then(|d| d.3);
    let inputs = telemetry::EfficiencyInputs {
        total_osl: tag("total_osl"),
        total_isl: tag("total_isl"),
        request_count: tag("request_count"),
        request_latency_ms: s.metric(MetricKey::RequestLatency).map(|st| st.avg),
        request_throughput: tag("request_throughput"),
        output_token_throughput: tag("output_token_throughput"),
        goodput: tag("goodput"),
    };
    telemetry::efficiency(s, &inputs)
}

/// AIPerf's `pooled_spec_decode_acceptance_histogram`: `{j: steps that accepted exactly j
/// drafts}` summed over the requests, zero counts absent (AIPerf pools the sparse per-request
/// maps); `null` when no response reported a histogram.
fn pooled_histogram(s: &Summary) -> J {
    let hist = s
        .spec_decode
        .as_ref()
        .and_then(|d| d.reported.as_ref())
        .map(|t| &t.histogram[..])
        .unwrap_or_default();
    if hist.is_empty() {
        return J::from(None::<f64>);
    }
    let mut o = Obj::new();
    for (j, &n) in hist.iter().enumerate().filter(|(_, &n)| n > 0) {
        o.put(j.to_string(), n);
    }
    J::O(o)
}

/// `error_summary`: one entry per error class and code, with its count.
fn error_summary(s: &Summary) -> Vec<J> {
    let c = &s.counts;
    let mut out = Vec::new();
    let mut entry = |kind: Option<FailureKind>, status: Option<u16>, count: u64, what: String| {
        let (class, code) = error_class(kind, status);
        out.push(J::O(
            Obj::new()
                .with(
                    "error_details",
                    Obj::new()
                        .with("code", code.map(u64::from))
                        .with("type", class)
                        .with("message", what),
                )
                .with("count", count),
        ));
    };
    for kind in FailureKind::ALL {
        let Some(&n) = c.failed_by_kind.get(kind.as_str()) else {
            continue;
        };
        if kind == FailureKind::HttpStatus && !c.http_status.is_empty() {
            for (&status, &k) in &c.http_status {
                entry(Some(kind), Some(status), k, format!("HTTP {status}"));
            }
            continue;
        }
        entry(Some(kind), None, n, kind.as_str().replace('_', " "));
    }
    if c.cancelled > 0 {
        entry(
            None,
            None,
            c.cancelled,
            "cancelled by the run (deadline or signal)".into(),
        );
    }
    out
}

/// `profile_export_aiperf.json`.
pub(crate) fn summary_json(s: &Summary) -> J {
    let m = &s.meta;
    let mut o = Obj::new();
    o.put("schema_version", SCHEMA_VERSION)
        .put("aiperf_version", tool_version())
        .put("benchmark_id", benchmark_id(s));
    metric_entries(&mut o, s, true);
    // AIPerf's energy-efficiency analyzer adds its metrics after every other one, to the profiling
    // phase's only.
    for (tag, _, unit, v) in energy_efficiency(s) {
        o.put(tag, Obj::new().with("unit", unit).with("avg", v));
    }
    let l = &m.load;
    o.put("input_config", input_config(s));
    o.put(
        "run_info",
        Obj::new()
            .with("benchmark_id", benchmark_id(s))
            .with("sweep_id", None::<&str>)
            .with("random_seed", l.random_seed)
            .with("trial", None::<u64>)
            .with("run_label", None::<&str>)
            .with("cli_command", m.cli_command.as_deref()),
    );
    let stopped = m.stopped_by;
    o.put(
        "was_cancelled",
        matches!(
            stopped,
            Some(
                StopReason::Interrupted
                    | StopReason::Terminated
                    | StopReason::WarmupFailed
                    | StopReason::FailedThreshold
            )
        ),
    )
    .put("is_complete", stopped.is_none())
    .put("incomplete_reason", stopped.map(StopReason::as_str))
    .put("error_summary", error_summary(s))
    .put("start_time", run_time(s, s.benchmark_start_unix_s))
    .put("end_time", run_time(s, s.benchmark_end_unix_s))
    .put(
        "warmup_metrics",
        // AIPerf's `dict[str, JsonMetricResult]`: the warmup records' own statistics, from the
        // same aggregation and the same writer as the profiling ones above.
        match &s.warmup {
            Some(w) => {
                let mut wm = Obj::new();
                metric_entries(&mut wm, w, false);
                J::O(wm)
            }
            None => J::from(None::<f64>),
        },
    )
    .put("telemetry_data", telemetry::section(s))
    .put(
        "pooled_spec_decode_acceptance_histogram",
        pooled_histogram(s),
    );
    if let Some(stats) = &s.branch_stats {
        o.put(
            "branch_stats",
            serde_json::to_value(stats).unwrap_or_default(),
        );
    }
    if let Some(meta) = agentx_metadata(s) {
        o.put("metadata", meta);
    }
    o.put("specperf", specperf_block(s));
    J::O(o)
}

/// Every metric object of `s` as AIPerf writes them (`{tag: {"unit", "avg", ...}}`): the record
/// metrics and AIPerf's twins of them, the run-level scalars, the time-weighted metrics and the
/// AgentX counts. `with_unset` also writes the goodput scalars as `null` when no `--goodput` was
/// given (the top level); `warmup_metrics`, a map of metric objects, leaves them out.
fn metric_entries(o: &mut Obj, s: &Summary, with_unset: bool) {
    for key in RECORD_METRICS {
        if let Some(st) = s.metric(key) {
            let stat = stat_obj(key.unit(), st);
            for (twin, _) in key.aiperf_twins() {
                o.put(*twin, stat.clone());
            }
            o.put(tag(key), stat);
        }
    }
    for (tag, _, unit, v) in derived(s) {
        match v {
            Some(v) => {
                o.put(tag, Obj::new().with("unit", unit).with("avg", v));
            }
            None if with_unset => {
                o.put(tag, J::from(None::<f64>));
            }
            None => {}
        }
    }
    for (tag, _, unit, v) in spec_derived(s).into_iter().chain(run_totals(s)) {
        o.put(tag, Obj::new().with("unit", unit).with("avg", v));
    }
    for m in &s.time_weighted {
        o.put(m.tag, sweep_obj(m));
    }
    if let Some(a) = &s.agentx {
        agentx_metrics(o, a);
    }
}

/// AIPerf's sums of the server's usage over the requests (`total_usage_*`, each where some
/// request had the metric) and `osl_mismatch_count` (where some request asked for a length).
/// (tag, CSV header, unit, value).
fn run_totals(s: &Summary) -> Vec<(&'static str, &'static str, &'static str, f64)> {
    let mut out: Vec<_> = [
        MetricKey::InputSequenceLength,
        MetricKey::OutputSequenceLength,
        MetricKey::UsageTotalTokens,
    ]
    .into_iter()
    .filter_map(|key| {
        let (tag, header) = key.aiperf_usage_total()?;
        s.metric(key).map(|st| (tag, header, key.unit(), st.sum))
    })
    .collect();
    if let Some(n) = s.osl_mismatch_count {
        out.push((
            "osl_mismatch_count",
            "OSL Mismatch Count",
            "requests",
            n as f64,
        ));
    }
    out
}

/// `start_time` / `end_time`: AgentX runs write AIPerf's naive local time
/// (`datetime.fromtimestamp`, no offset), which InferenceX's power adapter pairs with the
/// `date +%z` it captured; other runs keep the explicit UTC offset.
fn run_time(s: &Summary, unix_s: f64) -> String {
    if s.agentx.is_none() && s.agentx_run.is_none() {
        return crate::timefmt::iso8601(unix_s);
    }
    let us = (unix_s.max(0.0) * 1e6).round() as i64;
    chrono::DateTime::from_timestamp_micros(us)
        .unwrap_or_default()
        .with_timezone(&chrono::Local)
        .naive_local()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

/// The AgentX metrics AIPerf writes: `theoretical_prefix_cache_hit` (`sum` hit blocks, `count`
/// total blocks, `avg` their percentage) and, when any, the context-overflow counts.
fn agentx_metrics(o: &mut Obj, a: &crate::metrics::AgentxCounts) {
    if a.theoretical_cache_total_blocks > 0 {
        let pct =
            100.0 * a.theoretical_cache_hit_blocks as f64 / a.theoretical_cache_total_blocks as f64;
        o.put(
            "theoretical_prefix_cache_hit",
            Obj::new()
                .with("unit", "%")
                .with("avg", pct)
                .with("sum", a.theoretical_cache_hit_blocks)
                .with("count", a.theoretical_cache_total_blocks),
        );
    }
    if a.context_overflow > 0 {
        for tag in ["context_overflow_count", "skipped_context_overflow_count"] {
            o.put(
                tag,
                Obj::new()
                    .with("unit", "requests")
                    .with("avg", a.context_overflow as f64),
            );
        }
    }
    if a.cancelled_at_grace > 0 {
        o.put(
            "cancelled_at_grace_request_count",
            Obj::new()
                .with("unit", "requests")
                .with("avg", a.cancelled_at_grace as f64),
        );
    }
}

/// `metadata`: the dataset's provenance, and under AIPerf's scenario its name and whether the
/// result is a valid submission (invalid with `--unsafe-override` violations, an early stop, or
/// a context-overflow rate above the limit).
fn agentx_metadata(s: &Summary) -> Option<Obj> {
    let run = s.agentx_run.as_ref()?;
    let mut md = Obj::new();
    md.put(
        "dataset",
        serde_json::to_value(&run.dataset).unwrap_or_default(),
    );
    if let Some(name) = &run.scenario {
        let counts = s.agentx.clone().unwrap_or_default();
        let reasons = run.invalid_reasons(&counts, s.meta.stopped_by.is_some());
        md.put("scenario", name.as_str())
            .put("submission_valid", reasons.is_empty());
        if !reasons.is_empty() {
            md.put(
                "submission_invalid_reasons",
                reasons.into_iter().map(J::from).collect::<Vec<J>>(),
            );
        }
    }
    Some(md)
}

/// `input_config` as AIPerf 0.13 writes it: the set fields of its `BenchmarkConfig` (models,
/// endpoint, one dataset, the warmup and profiling phases), which `aiperf speed-bench-report`
/// reads the model (`models.items[0].name`) and the SPEED-Bench category
/// (`datasets[0].format`, `speed_bench_<category>`) from. The command line is in `run_info`.
fn input_config(s: &Summary) -> Obj {
    let m = &s.meta;
    let l = &m.load;
    // The embedded simulator's URL is written `embedded-simulator (<url>)` for people; AIPerf
    // wants the URL.
    let url = m
        .url
        .strip_prefix("embedded-simulator (")
        .and_then(|u| u.strip_suffix(')'))
        .unwrap_or(&m.url);
    let endpoint = Obj::new()
        .with("urls", vec![J::from(url)])
        .with("type", m.endpoint_type.as_str())
        .with("path", m.endpoint.as_str())
        .with("streaming", m.streaming)
        // Token counts always come from the server's usage (`--use-server-token-count` on).
        .with("use_server_token_count", true);
    if let Some(run) = &s.agentx_run {
        return agentx_input_config(s, run, endpoint);
    }
    let mut dataset = Obj::new().with("name", "main");
    match &m.dataset_format {
        Some(format) => {
            dataset
                .put("type", "file")
                .put("path", m.input.as_str())
                .put("format", format.as_str());
        }
        // ShareGPT files have no AIPerf format (AIPerf detects a file's format when none is
        // given); synthetic prompts are AIPerf's `synthetic` dataset.
        None if m.input.starts_with("synthetic") => {
            dataset.put("type", "synthetic");
        }
        None => {
            dataset.put("type", "file").put("path", m.input.as_str());
        }
    }
    if m.request_count > 0 {
        dataset.put("entries", m.request_count);
    }
    dataset.put("random_seed", l.random_seed);
    if let Some(osl) = m.osl {
        dataset.put("osl", Obj::new().with("mean", f64::from(osl)));
    }
    let mut phases = Vec::new();
    if let Some(w) = l.warmup {
        let mut p = Obj::new()
            .with("name", "warmup")
            .with("kind", "warmup")
            .with("type", "concurrency")
            .with("exclude_from_results", true)
            .with("requests", w.issued);
        if let Some(c) = m.concurrency {
            p.put("concurrency", c as u64);
        }
        phases.push(J::O(p));
    }
    let mut p = Obj::new()
        .with("name", "profiling")
        .with("kind", "profiling");
    match l.mode {
        LoadMode::Closed => p.put("type", "concurrency"),
        LoadMode::Trace => p.put("type", "fixed_schedule"),
        LoadMode::Open => p.put(
            "type",
            match l.arrival_pattern.unwrap_or_default() {
                ArrivalPattern::Constant => "constant",
                ArrivalPattern::Poisson => "poisson",
                ArrivalPattern::Gamma => "gamma",
            },
        ),
    };
    match l.benchmark_duration_s {
        Some(d) => {
            p.put("duration", d);
            // AIPerf allows a grace period only after a duration.
            if let Some(g) = l.grace_period_s {
                p.put("grace_period", g);
            }
        }
        None => {
            p.put("requests", m.request_count);
        }
    }
    if let Some(c) = m.concurrency {
        p.put("concurrency", c as u64);
    }
    if let Some(r) = l.request_rate.filter(|r| r.is_finite() && *r > 0.0) {
        p.put("rate", r);
    }
    if l.arrival_pattern == Some(ArrivalPattern::Gamma) {
        if let Some(k) = l.arrival_smoothness {
            p.put("smoothness", k);
        }
    }
    if let Some(ramp) = l.ramp_s {
        let key = if l.mode == LoadMode::Open {
            "rate_ramp"
        } else {
            "concurrency_ramp"
        };
        p.put(key, Obj::new().with("duration", ramp));
    }
    phases.push(J::O(p));
    config_core(&m.model, endpoint, dataset, phases)
}

/// What every `input_config` holds: the one model, the endpoint, the dataset and the phases.
fn config_core(model: &str, endpoint: Obj, dataset: Obj, phases: Vec<J>) -> Obj {
    Obj::new()
        .with(
            "models",
            Obj::new().with("items", vec![J::O(Obj::new().with("name", model))]),
        )
        .with("endpoint", endpoint)
        .with("datasets", vec![J::O(dataset)])
        .with("phases", phases)
}

/// `input_config` of an AgentX replay, as AIPerf 0.13 writes it for the same argv: the weka
/// traces as the dataset (a `weka_trace` file, or the `--public-dataset` alias), the replay's
/// knobs on the one profiling phase (its warmup is synthesized, not a declared phase), the
/// tokenizer, and the scenario with its override.
fn agentx_input_config(s: &Summary, run: &crate::metrics::AgentxRunMeta, endpoint: Obj) -> Obj {
    let m = &s.meta;
    let l = &m.load;
    let x = &run.settings;
    let mut dataset = Obj::new().with("name", "main");
    match &run.dataset.loader {
        Some(alias) => dataset.put("type", "public").put("dataset", alias.as_str()),
        None => dataset
            .put("type", "file")
            .put("path", x.traces.as_str())
            .put(
                "format",
                m.dataset_format.as_deref().unwrap_or("weka_trace"),
            ),
    };
    if let Some(n) = run.dataset.num_dataset_entries {
        dataset.put("entries", n as u64);
    }
    dataset.put("random_seed", l.random_seed);
    if let Some(cap) = x.trace_idle_gap_cap_s {
        dataset.put("trace_idle_gap_cap_seconds", cap);
    }
    let mut p = Obj::new()
        .with("name", "profiling")
        .with("kind", "profiling")
        .with("type", "concurrency");
    if let Some(d) = l.benchmark_duration_s {
        p.put("duration", d);
    }
    if let Some(c) = m.concurrency {
        p.put("concurrency", c as u64);
    }
    if let Some(g) = l
        .grace_period_s
        .filter(|_| l.benchmark_duration_s.is_some())
    {
        p.put("grace_period", g);
    }
    p.put("timing_mode", "agentic_replay")
        .put("trajectory_start_min_ratio", x.trajectory_start_ratios.0)
        .put("trajectory_start_max_ratio", x.trajectory_start_ratios.1)
        .put("system_idle_gap_cap_seconds", x.system_idle_gap_cap_s);
    let mut o = config_core(&m.model, endpoint, dataset, vec![J::O(p)])
        .with("tokenizer", Obj::new().with("name", x.tokenizer.as_str()));
    if let Some(name) = &run.scenario {
        o.put("scenario", name.as_str());
    }
    if x.unsafe_override {
        o.put("unsafe_override", true);
    }
    o
}

/// What AIPerf has no field for.
fn specperf_block(s: &Summary) -> Obj {
    let mut o = Obj::new()
        .with("version", env!("CARGO_PKG_VERSION"))
        .with("summary_schema", SUMMARY_SCHEMA)
        .with("percentile_method", s.percentile_method);
    match &s.acceptance {
        Some(r) => {
            let a = &r.acceptance;
            o.put(
                "acceptance_status",
                serde_json::to_value(a.status).unwrap_or_default(),
            )
            .put("acceptance_length", a.numbers.acceptance_length)
            .put("acceptance_rate", a.numbers.acceptance_rate)
            .put(
                "per_position_acceptance",
                a.numbers
                    .per_position_acceptance
                    .iter()
                    .map(|&p| J::from(p))
                    .collect::<Vec<J>>(),
            )
            .put("num_speculative_tokens", a.num_speculative_tokens)
            .put("metric_source", a.metric_source.as_str())
            .put("drafts", a.numbers.drafts)
            .put("accepted_tokens", a.numbers.accepted_tokens);
        }
        None => {
            o.put("acceptance_status", "not_scraped");
        }
    }
    if let Some(st) = s.metric(MetricKey::DispatchLag) {
        o.put(
            MetricKey::DispatchLag.as_str(),
            stat_obj(MetricKey::DispatchLag.unit(), st),
        );
    }
    let d = &s.meta.load.dispatch;
    o.put(
        "schedule",
        Obj::new()
            .with("mode", s.meta.load.mode.as_str())
            .with("issued", d.issued)
            .with("late", d.late)
            .with("max_lag_ms", d.max_lag_ms)
            .with("lag_tolerance_ms", s.meta.load.schedule_lag_tolerance_ms)
            .with("not_issued", d.not_issued),
    );
    o.put(
        "warnings",
        s.warnings
            .iter()
            .map(|w| J::from(w.as_str()))
            .collect::<Vec<J>>(),
    );
    o
}

/// `profile_export_aiperf.csv` as AIPerf 0.13's exporter writes it: record metrics with statistics,
/// a blank line, then scalars; each section's rows sorted by AIPerf tag, labelled
/// `Header (unit)` except where the unit is `requests` or `count`; two decimals, whole counts as integers.
/// Readers look rows up by these labels (InferenceX's `collect_sweep_results.py`). With GPU
/// telemetry, AIPerf's GPU table follows.
pub(crate) fn summary_csv(s: &Summary) -> String {
    let label = |header: &str, unit: &str| {
        if matches!(unit, "requests" | "count") {
            header.to_owned()
        } else {
            format!("{header} ({unit})")
        }
    };
    let mut o = String::new();
    o.push_str("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n");
    // (tag, row): record metrics and AIPerf's time-weighted ones share the table, by tag.
    let mut rows: Vec<(&str, String)> = RECORD_METRICS
        .iter()
        .filter_map(|&key| s.metric(key).map(|st| (key, st)))
        .flat_map(|(key, st)| {
            let own = (tag(key), key.aiperf_header().unwrap_or(key.as_str()));
            std::iter::once(own)
                .chain(key.aiperf_twins().iter().copied())
                .map(move |(tag, header)| {
                    let mut row = format!(
                        "{},{:.2},{:.2},{:.2},{:.2}",
                        label(header, key.unit()),
                        st.avg,
                        st.min,
                        st.max,
                        st.sum
                    );
                    for p in PCTS {
                        let _ = write!(row, ",{:.2}", st.p(p));
                    }
                    let _ = write!(row, ",{:.2}", st.std);
                    (tag, row)
                })
        })
        .collect();
    for m in &s.time_weighted {
        let t = &m.stat;
        // No sum, p1, p5, p10, p25 or p75: AIPerf leaves those cells empty.
        let row = format!(
            "{},{:.2},{:.2},{:.2},,,,,,{:.2},,{:.2},{:.2},{:.2},{:.2}",
            label(m.header, m.unit),
            t.avg,
            t.min,
            t.max,
            t.p50,
            t.p90,
            t.p95,
            t.p99,
            t.std
        );
        rows.push((m.tag, row));
    }
    rows.sort_by(|a, b| a.0.cmp(b.0));
    for (_, row) in rows {
        o.push_str(&row);
        o.push('\n');
    }
    o.push_str("\nMetric,Value\n");
    let mut scalars: Vec<_> = derived(s)
        .into_iter()
        .filter_map(|(tag, header, unit, v)| v.map(|v| (tag, header, unit, v)))
        .chain(spec_derived(s))
        .chain(run_totals(s))
        .chain(energy_efficiency(s))
        .collect();
    scalars.sort_by_key(|&(tag, ..)| tag);
    for (_, header, unit, v) in scalars {
        // AIPerf prints integer values (counts, token totals) without decimals.
        if matches!(unit, "requests" | "tokens" | "count") && v.fract() == 0.0 && v.abs() < 1e15 {
            let _ = writeln!(o, "{},{}", label(header, unit), v as i64);
        } else {
            let _ = writeln!(o, "{},{v:.2}", label(header, unit));
        }
    }
    // specperf's one addition, last: AIPerf has no acceptance length of the server's counters.
    if let Some(al) = s
        .acceptance
        .as_ref()
        .and_then(|r| r.acceptance.numbers.acceptance_length)
    {
        let _ = writeln!(o, "Acceptance Length (tokens/step),{al:.2}");
    }
    o.push_str(&telemetry::csv(s));
    o
}
