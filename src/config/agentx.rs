//! AgentX replay settings (`specperf profile --scenario inferencex-agentx-mvp ...` or
//! `specperf replay --scenario agentx ...`): the part of a run that only the AgentX lane
//! scheduler reads. The common settings (URL, model, `--concurrency`, `--benchmark-duration`,
//! grace, streaming, extra inputs, server metrics, artifact directory) stay in [`RunConfig`].
//!
//! [`RunConfig`]: super::RunConfig

use std::path::PathBuf;
use std::time::Duration;

use crate::agentx::{LoadOptions, StartRatios};

/// Validated AgentX settings.
#[derive(Clone, Debug)]
pub(crate) struct AgentxSettings {
    /// A `traces.jsonl` or a directory of `*.json` traces (resolved from `--public-dataset`
    /// through the Hugging Face hub cache, or `--input-file`).
    pub(crate) input: PathBuf,
    /// Where the traces came from, for `metadata.dataset` of `profile_export_aiperf.json`.
    pub(crate) provenance: Provenance,
    /// `--num-dataset-entries`, `--max-context-length`, `--synthesis-max-osl`.
    pub(crate) load: LoadOptions,
    /// `--trajectory-start-min-ratio` / `--trajectory-start-max-ratio`.
    pub(crate) ratios: StartRatios,
    /// `--random-seed` (t* draws, prompt blocks).
    pub(crate) seed: u64,
    /// The tokenizer prompts are cut with (`tokenizer.json` or a directory holding one).
    pub(crate) tokenizer: PathBuf,
    /// `--warmup-requests-per-lane` (0: primers only).
    pub(crate) warmup_requests_per_lane: u32,
    /// `--warmup-grace-period`: the longest the warmup may take to drain; then what is left of
    /// it is cancelled and profiling starts.
    pub(crate) warmup_grace: Duration,
    /// `--trace-idle-gap-cap-seconds`: a tree idle this long has its pending timers advanced.
    pub(crate) trace_idle_cap: Option<Duration>,
    /// The whole-system idle cap (10 s, locked by the scenario).
    pub(crate) system_idle_cap: Duration,
    /// `--stats-interval`: the realtime stats block on stderr (`None`: off).
    pub(crate) stats_interval: Option<Duration>,
    /// Live `--failed-request-threshold`: above this failed fraction of profiling records
    /// (armed at `max(concurrency, 10)` records) the run stops and exits non-zero.
    pub(crate) live_failed_threshold: Option<f64>,
    /// Session routing headers and body fields.
    pub(crate) routing: SessionRouting,
    /// Error-body substrings that mean "prompt over the context" (case-insensitive).
    pub(crate) context_overflow_substrings: Vec<String>,
    /// `AIPERF_DAG_FAIL_FAST`: a failed child fails its join instead of counting as finished.
    pub(crate) dag_fail_fast: bool,
    /// `inferencex-agentx-mvp` when run under AIPerf's scenario name.
    pub(crate) scenario: Option<String>,
    /// Why the run is not a valid submission (e.g. `--unsafe-override`), for
    /// `metadata.submission_invalid_reasons`.
    pub(crate) submission_invalid_reasons: Vec<String>,
}

/// `metadata.dataset` of `profile_export_aiperf.json` (AIPerf's dataset provenance).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Provenance {
    /// `public_dataset` or `file`.
    pub(crate) source_type: String,
    /// The `--public-dataset` alias.
    pub(crate) loader: Option<String>,
    /// The Hugging Face dataset repo (`semianalysisai/cc-traces-weka-062126`).
    pub(crate) hf_dataset_name: Option<String>,
    /// `train`.
    pub(crate) hf_split: Option<String>,
    /// `--num-dataset-entries`, when given.
    pub(crate) num_dataset_entries: Option<usize>,
}

/// How a request names its session to a router (spec §2.7, §3.7).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SessionRouting {
    /// `X-Dynamo-Session-ID` (= correlation id) and `X-Dynamo-Parent-Session-ID` on children
    /// (`AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID`).
    pub(crate) dynamo_headers: bool,
    /// `X-Session-ID` (= correlation id) (`AIPERF_HTTP_X_SESSION_ID_FROM_CORRELATION_ID`).
    pub(crate) session_id_header: bool,
    /// `X-SMG-Routing-Key` (= correlation id) (`AIPERF_HTTP_X_SMG_ROUTING_KEY_FROM_CORRELATION_ID`).
    pub(crate) smg_routing_key: bool,
    /// `--use-dynamo-conv-aware-routing`: `nvext.session_control` with this timeout, seconds.
    pub(crate) nvext_session_timeout_s: Option<u64>,
}
