//! The run's output contract: [`Summary`] (written as `summary.json`, schema
//! [`SUMMARY_SCHEMA`]) with the run description [`RunMeta`] that `specperf merge` reads back.
//! Closed sets are enums, serialized under the names the schema lists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Counts, Goodput, MetricKey, Stat};
use crate::record::{FailureKind, TokenSource};
use crate::render::EndpointType;
use crate::schedule::{ArrivalPattern, DispatchStats, LoadMode, Shard};
use crate::scrape::ScrapeReport;
use crate::stop::StopReason;

/// Version of the summary JSON layout; additive changes keep it.
pub const SUMMARY_SCHEMA: &str = "specperf.summary.v1";

/// What was run, recorded next to the numbers (read back by `specperf merge`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunMeta {
    /// Target base URL (or `embedded-simulator`).
    pub url: String,
    /// Model name sent.
    pub model: String,
    /// Endpoint path requested, e.g. `/v1/chat/completions`.
    pub endpoint: String,
    /// `chat` or `completions`.
    pub endpoint_type: EndpointType,
    /// Output tokens asked for per request (`None`: the server decides).
    pub osl: Option<u32>,
    /// The command line, when the binary recorded it.
    pub cli_command: Option<String>,
    /// Streaming on.
    pub streaming: bool,
    /// Requests in flight: the closed loop's concurrency, or the open loop's / trace's cap
    /// (`None`: an open loop or trace without `--concurrency`, which has no cap).
    pub concurrency: Option<usize>,
    /// Requests planned.
    pub request_count: u64,
    /// Samples in the collection.
    pub samples: usize,
    /// Whether samples were sent more than once (request count above the collection size).
    pub dataset_reused: bool,
    /// Input file, or the bundled collection.
    pub input: String,
    /// The collection's format as AIPerf 0.13 names it (`speed_bench_coding`, `single_turn`,
    /// ...); `None` where AIPerf has none (ShareGPT, synthetic prompts).
    #[serde(default)]
    pub dataset_format: Option<String>,
    /// Run start, Unix seconds.
    pub start_unix_s: f64,
    /// Why the run ended early, if it did (`deadline`, `interrupted`, `terminated`, `stalled`).
    pub stopped_by: Option<StopReason>,
    /// Load shape and what the dispatcher did.
    pub load: LoadMeta,
    /// The per-request timeouts used.
    pub timeouts_s: BTreeMap<TimeoutKind, f64>,
}

/// Which timeout a `meta.timeouts_s` entry is. Declared in the order of the names, so the map
/// serializes sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutKind {
    /// TCP and TLS connect.
    Connect,
    /// Request sent to the first token.
    FirstToken,
    /// Between two events of a stream.
    Idle,
    /// One whole request.
    Request,
    /// The whole run.
    Run,
}

/// How the load was shaped, and what the dispatcher did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadMeta {
    /// `closed` (fixed concurrency), `open` (request rate) or `trace` (timestamps).
    pub mode: LoadMode,
    /// Open loop: requests per second (this shard's share is every N-th arrival).
    pub request_rate: Option<f64>,
    /// Open loop: arrival distribution.
    pub arrival_pattern: Option<ArrivalPattern>,
    /// Open loop, gamma: shape.
    pub arrival_smoothness: Option<f64>,
    /// Open loop: cap on requests in flight.
    pub concurrency_cap: Option<usize>,
    /// Arrival schedule seed.
    pub random_seed: u64,
    /// Concurrency or rate ramp, seconds.
    pub ramp_s: Option<f64>,
    /// Issue limit, seconds.
    pub benchmark_duration_s: Option<f64>,
    /// Grace after the issue limit, seconds (`null`: unbounded).
    pub grace_period_s: Option<f64>,
    /// Lag above which an open-loop arrival counts as late, ms.
    pub schedule_lag_tolerance_ms: f64,
    /// This process's shard (`0/1` for a single process and for a merged report).
    pub shard: Shard,
    /// Set by `specperf merge`: how many shard runs this report combines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards_merged: Option<u32>,
    /// Profiling phase dispatch.
    pub dispatch: DispatchStats,
    /// Warmup phase dispatch, when there was one.
    pub warmup: Option<DispatchStats>,
}

impl Default for LoadMeta {
    /// A closed-loop, single-process run with the default lag tolerance and nothing dispatched.
    fn default() -> Self {
        LoadMeta {
            mode: LoadMode::Closed,
            request_rate: None,
            arrival_pattern: None,
            arrival_smoothness: None,
            concurrency_cap: None,
            random_seed: 0,
            ramp_s: None,
            benchmark_duration_s: None,
            grace_period_s: None,
            schedule_lag_tolerance_ms: 5.0,
            shard: Shard::SINGLE,
            shards_merged: None,
            dispatch: DispatchStats::default(),
            warmup: None,
        }
    }
}

/// The run's summary (also written as `summary.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// [`SUMMARY_SCHEMA`].
    pub schema_version: &'static str,
    /// This binary's version.
    pub specperf_version: &'static str,
    /// Run description.
    pub meta: RunMeta,
    /// How percentiles are computed.
    pub percentile_method: &'static str,
    /// Counts by outcome.
    pub counts: Counts,
    /// First send to last end, seconds.
    pub duration_s: f64,
    /// Successful requests per second.
    pub request_throughput_rps: f64,
    /// Completion tokens (reasoning included) per second.
    pub output_token_throughput_tps: f64,
    /// Prompt tokens per second.
    pub input_token_throughput_tps: f64,
    /// Prompt plus completion tokens per second.
    pub total_token_throughput_tps: f64,
    /// Σ `usage.prompt_tokens` of successful requests.
    pub total_prompt_tokens: u64,
    /// Σ `usage.completion_tokens` of successful requests.
    pub total_completion_tokens: u64,
    /// Σ reasoning tokens of successful requests.
    pub total_reasoning_tokens: u64,
    /// Successful requests by token source (`usage_per_chunk`, `usage_final`, `none`).
    pub tokens_counted_by: BTreeMap<TokenSource, u64>,
    /// Content events per body read (1.0 = every event arrived in its own read).
    pub content_events_per_read: f64,
    /// Fraction of inter-chunk gaps that were 0 ns.
    pub zero_gap_fraction: f64,
    /// Per-request and per-chunk metrics; units in the names.
    pub metrics: BTreeMap<String, Stat>,
    /// Things the reader should know about these numbers.
    pub warnings: Vec<String>,
    /// Acceptance length from the servers' counters, with the scrape outcomes (absent when no
    /// metrics endpoint was scraped).
    pub acceptance: Option<ScrapeReport>,
    /// GPU energy and power over the benchmark window (absent without `--gpu-telemetry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::telemetry::Energy>,
    /// Every GPU read of the run, for the artifacts (not in `summary.json`).
    #[serde(skip)]
    pub telemetry: Option<crate::telemetry::TelemetryRun>,
    /// Speculative decoding per request: what the responses reported, the stream estimate and
    /// the per-group breakdown (absent when no response carried figures and no stream could
    /// be estimated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<super::SpecSummary>,
    /// SPEED-Bench Throughput splits: each tier's prompt tokens against the split's nominal
    /// length (absent for other collections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed_bench_isl: Option<super::IslCheck>,
    /// First send, Unix seconds.
    pub benchmark_start_unix_s: f64,
    /// Last end, Unix seconds.
    pub benchmark_end_unix_s: f64,
    /// Requests that met every `--goodput` objective (absent without `--goodput`).
    pub goodput: Option<Goodput>,
    /// AgentX replay counts (absent for every other workload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agentx: Option<super::AgentxCounts>,
    /// The AgentX run's provenance and known submission problems, for the AIPerf summary's
    /// `metadata` (set by the engine from the configuration; not in `summary.json`).
    #[serde(skip)]
    pub(crate) agentx_run: Option<super::AgentxRunMeta>,
    /// Per-request token counts for the InferenceX raw JSON (not in `summary.json`).
    #[serde(skip)]
    pub(crate) per_request: PerRequest,
    /// The first failure of each kind (not in `summary.json`; `records.jsonl` has them all),
    /// for the explanation printed after a run with failures.
    #[serde(skip)]
    pub(crate) first_failures: BTreeMap<FailureKind, super::FirstFailure>,
    /// AIPerf's time-weighted metrics (`effective_*`, `active_*`, `tokens_in_flight`) for
    /// `profile_export_aiperf.json` / `.csv` (not in `summary.json`); empty without requests.
    #[serde(skip)]
    pub(crate) time_weighted: Vec<super::SweepMetric>,
    /// The AgentX replay's spawn and join counts over profiling (set by the engine; not in
    /// `summary.json`).
    #[serde(skip)]
    pub(crate) branch_stats: Option<super::BranchStats>,
    /// Successful requests whose output length missed the requested one by more than AIPerf's
    /// threshold (`osl_mismatch_count`; not in `summary.json`); `None` when no request asked
    /// for a length.
    #[serde(skip)]
    pub(crate) osl_mismatch_count: Option<u64>,
    /// The warmup phase summarized alone, by the same aggregation (AIPerf's `warmup_metrics`;
    /// not in `summary.json`, whose `counts.warmup` counts them); `None` without warmup records.
    #[serde(skip)]
    pub(crate) warmup: Option<Box<Summary>>,
}

impl Summary {
    /// Finishes `spec_decode` once the counters are in: names the group field (when there are
    /// groups), sets the run's figures beside the counters' AL of the same window, drops the
    /// section when nothing was reported and the counters saw no drafting, and adds the
    /// warnings that comparison raised.
    pub(crate) fn settle_spec(&mut self, group_field: Option<String>) {
        let Some(mut spec) = self.spec_decode.take() else {
            return;
        };
        if !spec.by_group.is_empty() {
            spec.group_field = group_field;
        }
        // Only an AL from exact counters (not a gauge's last window) is a reference.
        let counter_al = self
            .acceptance
            .as_ref()
            .map(|r| &r.acceptance)
            .filter(|a| !a.approximate)
            .and_then(|a| a.numbers.acceptance_length);
        let (spec, warnings) = spec.against_counters(counter_al);
        self.spec_decode = spec;
        self.warnings.extend(warnings);
    }

    /// The statistics of one metric, when any request had it.
    pub(crate) fn metric(&self, key: MetricKey) -> Option<&Stat> {
        self.metrics.get(key.as_str())
    }
}

/// Per-request values that only the InferenceX raw JSON lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerRequest {
    /// `usage.prompt_tokens` of each successful request that reported it, in completion order.
    pub(crate) input_lens: Vec<u64>,
    /// `usage.completion_tokens` of each successful request, in completion order.
    pub(crate) output_lens: Vec<u64>,
    /// The most successful requests in flight at once.
    pub(crate) max_concurrent_requests: u64,
}
