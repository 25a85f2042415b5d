//! AIPerf's artifact shapes (`aiperf-compat.md` §5), so scripts written for AIPerf 0.13 read ours:
//! the per-request `profile_export.jsonl` record (written live by the aggregator) and the summary
//! `profile_export_aiperf.json` / `.csv`. Tags, units and formulas are AIPerf's; the numbers are
//! ours (per-event timestamps, tokens from `usage`). `aiperf_version` says `specperf-<version>`
//! and a `specperf` object carries what AIPerf has no field for (AL, dispatch and schedule lag).
//! Per-request speculative decoding (a record's `spec`) becomes AIPerf 0.13's six
//! `spec_decode_*` record metrics and its `SpecDecodeAcceptanceRecord`, and in the summary their
//! statistics, the run totals and ratios and the pooled acceptance histogram.
//!
//! [`record`] writes the per-request line, [`summary`] the end-of-run JSON and CSV, [`telemetry`]
//! the GPU telemetry: its JSONL and what the summary carries of it; the names and classes they
//! need are here.

mod record;
mod summary;
mod telemetry;

pub(crate) use record::write_record;
pub(crate) use summary::{summary_csv, summary_json};
pub(crate) use telemetry::{jsonl as gpu_telemetry_jsonl, JSONL as GPU_TELEMETRY_JSONL};

use crate::metrics::{MetricKey, Summary};
use crate::record::FailureKind;

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
pub(in crate::report) const RECORD_METRICS: [MetricKey; 29] = [
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
    MetricKey::OutputTokenCount,
    MetricKey::UsageTotalTokens,
    MetricKey::OslMismatchDiffPct,
    MetricKey::EffectiveLatency,
    MetricKey::DispatchLag,
    MetricKey::HttpChunksReceived,
    MetricKey::HttpChunksSent,
    MetricKey::HttpConnectionReused,
    MetricKey::HttpDataReceived,
    MetricKey::HttpDataSent,
    MetricKey::HttpReceiving,
    MetricKey::SpecDecodeAcceptanceLength,
    MetricKey::SpecDecodeDraftAcceptanceRate,
    MetricKey::SpecDecodeAcceptedPerVerified,
    MetricKey::SpecDecodeSteps,
    MetricKey::SpecDecodeAcceptedDraftTokens,
    MetricKey::SpecDecodeDraftTokens,
];

/// AIPerf's tag of a metric AIPerf has (every [`RECORD_METRICS`] entry; a test checks).
pub(super) fn tag(k: MetricKey) -> &'static str {
    k.aiperf_tag().unwrap_or(k.as_str())
}

/// The percentiles AIPerf reports, in its order.
pub(super) const PCTS: [&str; 9] = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"];

/// AIPerf's error class for a failure kind, and the code it carries (`aiperf-compat.md` §5: HTTP
/// status, 499 cancelled, 502 for errors inside the stream, else none).
pub(super) fn error_class(
    kind: Option<FailureKind>,
    status: Option<u16>,
) -> (&'static str, Option<u16>) {
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

/// A stable id for the run: the start time in microseconds (AIPerf uses a UUID; we have no
/// randomness to spare and the start time already names the run).
pub(crate) fn benchmark_id(s: &Summary) -> String {
    benchmark_id_at(s.meta.start_unix_s)
}

/// [`benchmark_id`] of a run started at `start_unix_s` (the AgentX cache-bust markers use it, so
/// every run has its own marker keyspace, as with AIPerf's fresh UUID).
pub(crate) fn benchmark_id_at(start_unix_s: f64) -> String {
    format!("specperf-{}", (start_unix_s * 1e6).round() as u64)
}
