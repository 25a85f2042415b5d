//! AIPerf's artifact shapes (`aiperf-compat.md` §5), so scripts written for AIPerf 0.13 read ours:
//! the per-request `profile_export.jsonl` record (written live by the aggregator) and the summary
//! `profile_export_aiperf.json` / `.csv`. Tags, units and formulas are AIPerf's; the numbers are
//! ours (per-event timestamps, tokens from `usage`). `aiperf_version` says `specperf-<version>`
//! and a `specperf` object carries what AIPerf has no field for (AL, dispatch and schedule lag).

use std::fmt::Write as _;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::json::{Obj, J};
use crate::metrics::{MetricKey, RecordMetrics, Stat, Summary, SUMMARY_SCHEMA};
use crate::record::{FailureKind, Outcome, Phase, RequestRecord};
use crate::schedule::LoadMode;
use crate::stop::StopReason;

/// The AIPerf summary schema we follow.
pub(crate) const SCHEMA_VERSION: &str = "1.4";

/// `specperf-<version>`, in place of AIPerf's version.
pub(crate) fn tool_version() -> String {
    format!("specperf-{}", env!("CARGO_PKG_VERSION"))
}

/// Session id of sample `i` (inputs.json `session_id`, records' `conversation_id`).
pub(crate) fn session_id(i: usize) -> String {
    format!("sample-{i}")
}

/// The record metrics AIPerf exports, in its order (tags, headers and units from [`MetricKey`]).
pub(super) const RECORD_METRICS: [MetricKey; 14] = [
    MetricKey::TimeToFirstToken,
    MetricKey::TimeToSecondToken,
    MetricKey::TimeToFirstOutputToken,
    MetricKey::RequestLatency,
    MetricKey::DecodeDuration,
    MetricKey::InterTokenLatency,
    MetricKey::InterChunkLatency,
    MetricKey::OutputTokenThroughputPerUser,
    MetricKey::E2eOutputTokenThroughput,
    MetricKey::PrefillThroughputPerUser,
    MetricKey::InputSequenceLength,
    MetricKey::OutputSequenceLength,
    MetricKey::EffectiveLatency,
    MetricKey::DispatchLag,
];

/// AIPerf's tag of a metric AIPerf has (every [`RECORD_METRICS`] entry; a test checks).
fn tag(k: MetricKey) -> &'static str {
    k.aiperf_tag().unwrap_or(k.as_str())
}

/// The percentiles AIPerf reports, in its order.
const PCTS: [&str; 9] = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"];

/// AIPerf's error class for a failure kind, and the code it carries (`aiperf-compat.md` §5: HTTP
/// status, 499 cancelled, 502 for errors inside the stream, else none).
fn error_class(kind: Option<FailureKind>, status: Option<u16>) -> (&'static str, Option<u16>) {
    let Some(kind) = kind else {
        return ("RequestCancellationError", Some(499));
    };
    match kind {
        FailureKind::Connect => ("ConnectionError", None),
        FailureKind::ConnectTimeout => ("ConnectTimeout", None),
        FailureKind::TtftTimeout => ("TTFTTimeout", None),
        FailureKind::IdleTimeout => ("IdleTimeout", None),
        FailureKind::TotalTimeout => ("RequestTimeout", None),
        FailureKind::HttpStatus => ("HTTPError", status),
        FailureKind::StreamError => ("SSEResponseError", Some(502)),
        FailureKind::Malformed => ("MalformedResponse", status),
        FailureKind::Oversized => ("OversizedResponse", status),
        FailureKind::ConnectionClosed => ("ConnectionClosed", status),
        FailureKind::MissingUsage => ("MissingUsage", status),
        FailureKind::NoOutput => ("NoOutput", status),
        FailureKind::Transport => ("TransportError", None),
        FailureKind::GracePeriodExpired => ("RequestCancellationError", Some(499)),
    }
}

#[derive(Serialize)]
struct ExportRecord<'a> {
    metadata: Metadata<'a>,
    metrics: Metrics<'a>,
    trace_data: (),
    spec_decode_acceptance: (),
    error: Option<ErrorDetails<'a>>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    session_num: u64,
    x_request_id: String,
    x_correlation_id: String,
    conversation_id: String,
    turn_index: u32,
    credit_issued_ns: u64,
    request_start_ns: u64,
    request_ack_ns: Option<u64>,
    request_end_ns: u64,
    worker_id: &'a str,
    record_processor_id: &'a str,
    benchmark_phase: &'a str,
    phase_index: Option<u32>,
    profiling_index: Option<u64>,
    phase_name: &'a str,
    phase_kind: &'a str,
    was_cancelled: bool,
    cancellation_time_ns: Option<u64>,
    context_overflow_skip: bool,
    agent_depth: u32,
    parent_correlation_id: (),
    root_correlation_id: (),
}

#[derive(Serialize)]
struct ErrorDetails<'a> {
    code: Option<u16>,
    #[serde(rename = "type")]
    kind: &'a str,
    message: &'a str,
    cause: (),
    cause_chain: [(); 0],
    details: Obj,
}

/// `{tag: {"value", "unit"}}` of a successful record; empty for failures (AIPerf puts the
/// client-counted `error_isl` there; we count tokens only from `usage`, which failures lack).
struct Metrics<'a>(Option<(RecordMetrics, &'a RequestRecord)>);

#[derive(Serialize)]
struct Value<T> {
    value: T,
    unit: &'static str,
}

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let Some((m, r)) = &self.0 else {
            return map.end();
        };
        let ms = |v: f64| Value {
            value: v,
            unit: "ms",
        };
        let tps = |v: f64| Value {
            value: v,
            unit: "tokens/sec/user",
        };
        if let Some(isl) = m.isl {
            map.serialize_entry(
                tag(MetricKey::InputSequenceLength),
                &Value {
                    value: isl,
                    unit: "tokens",
                },
            )?;
        }
        if let Some(v) = m.ttft_ms {
            map.serialize_entry(tag(MetricKey::TimeToFirstToken), &ms(v))?;
        }
        if let Some(v) = m.ttst_ms {
            map.serialize_entry(tag(MetricKey::TimeToSecondToken), &ms(v))?;
        }
        if let Some(v) = m.ttfo_ms {
            map.serialize_entry(tag(MetricKey::TimeToFirstOutputToken), &ms(v))?;
        }
        map.serialize_entry(tag(MetricKey::RequestLatency), &ms(m.latency_ms))?;
        if let Some(v) = m.decode_ms {
            map.serialize_entry(tag(MetricKey::DecodeDuration), &ms(v))?;
        }
        if !r.chunk_gaps.is_empty() {
            let gaps: Vec<f64> = r.chunk_gaps.iter().map(|g| g.gap_ns as f64 / 1e6).collect();
            map.serialize_entry(
                tag(MetricKey::InterChunkLatency),
                &Value {
                    value: gaps,
                    unit: "ms",
                },
            )?;
        }
        let reasoning = m.reasoning.unwrap_or(0);
        map.serialize_entry(
            "output_token_count",
            &Value {
                value: m.osl.saturating_sub(reasoning),
                unit: "tokens",
            },
        )?;
        if m.reasoning.is_some() {
            map.serialize_entry(
                "reasoning_token_count",
                &Value {
                    value: reasoning,
                    unit: "tokens",
                },
            )?;
        }
        map.serialize_entry(
            tag(MetricKey::OutputSequenceLength),
            &Value {
                value: m.osl,
                unit: "tokens",
            },
        )?;
        if let Some(v) = m.itl_ms {
            map.serialize_entry(tag(MetricKey::InterTokenLatency), &ms(v))?;
        }
        if let Some(v) = m.otps_user {
            map.serialize_entry(tag(MetricKey::OutputTokenThroughputPerUser), &tps(v))?;
        }
        if let Some(v) = m.e2e_tps {
            map.serialize_entry(tag(MetricKey::E2eOutputTokenThroughput), &tps(v))?;
        }
        if let Some(v) = m.prefill_tps {
            map.serialize_entry(tag(MetricKey::PrefillThroughputPerUser), &tps(v))?;
        }
        map.serialize_entry(
            tag(MetricKey::EffectiveLatency),
            &ms(m.effective_latency_ms),
        )?;
        map.serialize_entry(tag(MetricKey::DispatchLag), &ms(m.dispatch_lag_ms))?;
        map.end()
    }
}

/// Appends `r` as one AIPerf `profile_export.jsonl` record (no newline). `epoch_ns` is the Unix
/// time of the run clock's zero: AIPerf's `*_ns` fields are epoch nanoseconds.
pub(crate) fn write_record(
    out: &mut Vec<u8>,
    r: &RequestRecord,
    epoch_ns: u64,
) -> serde_json::Result<()> {
    let phase = match r.phase {
        Phase::Warmup => "warmup",
        Phase::Profiling => "profiling",
    };
    let cancelled = matches!(
        r.outcome,
        Outcome::Cancelled | Outcome::Failed(FailureKind::GracePeriodExpired)
    );
    let kind = match r.outcome {
        Outcome::Failed(k) => Some(k),
        _ => None,
    };
    let (class, code) = error_class(kind, r.http_status);
    let message = r.error.as_deref().unwrap_or(match r.outcome {
        Outcome::Cancelled => "cancelled by the run (deadline or signal)",
        _ => "",
    });
    let error = (!r.outcome.is_success()).then(|| ErrorDetails {
        code,
        kind: class,
        message,
        cause: (),
        cause_chain: [],
        details: Obj::new().with(
            "specperf_outcome",
            kind.map_or("cancelled", FailureKind::as_str),
        ),
    });
    let request_id = format!("specperf-{}", r.id);
    let rec = ExportRecord {
        metadata: Metadata {
            session_num: r.id,
            x_correlation_id: request_id.clone(),
            x_request_id: request_id,
            conversation_id: session_id(r.sample_index),
            turn_index: 0,
            credit_issued_ns: epoch_ns + r.intended_ns,
            request_start_ns: epoch_ns + r.sent_ns,
            request_ack_ns: r.headers_ns.map(|t| epoch_ns + t),
            request_end_ns: epoch_ns + r.end_ns,
            worker_id: "specperf",
            record_processor_id: "specperf-aggregator",
            benchmark_phase: phase,
            phase_index: None,
            profiling_index: (r.phase == Phase::Profiling).then_some(r.id),
            phase_name: phase,
            phase_kind: phase,
            was_cancelled: cancelled,
            cancellation_time_ns: cancelled.then_some(epoch_ns + r.end_ns),
            context_overflow_skip: false,
            agent_depth: 0,
            parent_correlation_id: (),
            root_correlation_id: (),
        },
        metrics: Metrics(r.outcome.is_success().then(|| (RecordMetrics::of(r), r))),
        trace_data: (),
        spec_decode_acceptance: (),
        error,
    };
    serde_json::to_writer(out, &rec)
}

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

/// Scalar (derived) metrics: (tag, CSV header, unit, value).
fn derived(s: &Summary) -> Vec<(&'static str, &'static str, &'static str, Option<f64>)> {
    let c = &s.counts;
    let errors = c.failed + c.cancelled;
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
            "Completed Request Count",
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
            "Good Request Fraction",
            "ratio",
            g.map(|g| g.good_request_fraction),
        ),
    ]
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
    for key in RECORD_METRICS {
        if let Some(st) = s.metric(key) {
            o.put(tag(key), stat_obj(key.unit(), st));
        }
    }
    for (tag, _, unit, v) in derived(s) {
        match v {
            Some(v) => o.put(tag, Obj::new().with("unit", unit).with("avg", v)),
            None => o.put(tag, J::from(None::<f64>)),
        };
    }
    let l = &m.load;
    let loadgen = Obj::new()
        .with("concurrency", m.concurrency as u64)
        .with("request_count", m.request_count)
        .with("request_rate", l.request_rate)
        .with(
            "request_rate_mode",
            match l.mode {
                LoadMode::Closed => "concurrency_burst".to_owned(),
                mode => l
                    .arrival_pattern
                    .and_then(|p| serde_json::to_value(p).ok())
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| mode.as_str().to_owned()),
            },
        )
        .with("benchmark_duration", l.benchmark_duration_s)
        .with("benchmark_grace_period", l.grace_period_s);
    let input_config = Obj::new()
        .with(
            "endpoint",
            Obj::new()
                .with("model_names", vec![J::from(m.model.as_str())])
                .with("type", m.endpoint_type.as_str())
                .with("custom_endpoint", m.endpoint.as_str())
                .with("streaming", m.streaming)
                .with("url", m.url.as_str()),
        )
        .with(
            "input",
            Obj::new()
                .with("file", m.input.as_str())
                .with("random_seed", l.random_seed)
                .with(
                    "prompt",
                    Obj::new().with(
                        "output_tokens",
                        Obj::new().with("mean", m.osl.map(u64::from)),
                    ),
                ),
        )
        .with("loadgen", loadgen)
        .with("cli_command", m.cli_command.as_deref());
    o.put("input_config", input_config);
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
            Some(StopReason::Interrupted | StopReason::Terminated)
        ),
    )
    .put("is_complete", stopped.is_none())
    .put("incomplete_reason", stopped.map(StopReason::as_str))
    .put("error_summary", error_summary(s))
    .put("start_time", super::iso8601(s.benchmark_start_unix_s))
    .put("end_time", super::iso8601(s.benchmark_end_unix_s))
    .put(
        "warmup_metrics",
        if s.counts.warmup > 0 {
            Obj::new().with("request_count", s.counts.warmup).into()
        } else {
            J::from(None::<f64>)
        },
    )
    .put("telemetry_data", None::<f64>)
    .put("pooled_spec_decode_acceptance_histogram", None::<f64>);
    o.put("specperf", specperf_block(s));
    J::O(o)
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

/// A stable id for the run: the start time in microseconds (AIPerf uses a UUID; we have no
/// randomness to spare and the start time already names the run).
pub(crate) fn benchmark_id(s: &Summary) -> String {
    format!("specperf-{}", (s.meta.start_unix_s * 1e6).round() as u64)
}

/// `profile_export_aiperf.csv`: record metrics with statistics, a blank line, then scalars;
/// two decimals, `Metric` = `Header (unit)`.
pub(crate) fn summary_csv(s: &Summary) -> String {
    let mut o = String::new();
    o.push_str("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n");
    for key in RECORD_METRICS {
        let Some(st) = s.metric(key) else {
            continue;
        };
        let header = key.aiperf_header().unwrap_or(key.as_str());
        let _ = write!(
            o,
            "{header} ({}),{:.2},{:.2},{:.2},{:.2}",
            key.unit(),
            st.avg,
            st.min,
            st.max,
            st.sum
        );
        for p in PCTS {
            let _ = write!(o, ",{:.2}", st.p(p));
        }
        let _ = writeln!(o, ",{:.2}", st.std);
    }
    o.push_str("\nMetric,Value\n");
    for (_, header, unit, v) in derived(s) {
        if let Some(v) = v {
            let _ = writeln!(o, "{header} ({unit}),{v:.2}");
        }
    }
    if let Some(al) = s
        .acceptance
        .as_ref()
        .and_then(|r| r.acceptance.numbers.acceptance_length)
    {
        let _ = writeln!(o, "Acceptance Length (tokens/step),{al:.2}");
    }
    o
}
