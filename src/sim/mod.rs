//! The built-in OpenAI-compatible simulator: the embedded default target, and the fixture for every
//! test and bench.
//!
//! It serves `/v1/chat/completions` and `/v1/completions` (streaming and not), `/v1/models`,
//! `/health` and a vLLM-style `/metrics` whose speculative-decoding counters are exactly consistent
//! with what was streamed (`model`). Emissions are timed by its own precise timer (`timer`) and
//! their lateness is exported. Faults can be asked for per request (header `x-specperf-fault`),
//! drawn at a rate, or given by arrival order (an exact, repeatable mix), to exercise every failure
//! path of the client.
//!
//! `server` binds and runs it (in-process or on its own thread), `http` accepts connections and
//! routes requests, `stream` is the timed response body with its mid-stream faults, and
//! `metrics_page` writes the counters (vLLM's page, or llama.cpp's with its end-of-request
//! timing); what they share (the simulator's settings, engines and timer, a server's engines, a
//! connection's state) is `state`. An optional admission limit (a token bucket) answers 429 as a
//! rate-limited gateway would.
//!
//! `spec` writes the per-request speculative-decoding reports real servers give (vLLM's
//! `metrics.speculative_decoding`, llama.cpp's `timings`, SGLang's `sglext`) from the emissions the
//! counters counted, and keeps the acceptance rules per prompt group (their truth counters are
//! `model`'s).
//!
//! Each engine has a KV cache (`kv`: prompt tokens in hashed blocks, an LRU of cached blocks, a
//! capacity) and a scheduler (`sched`: running slots, a first-come-first-served waiting queue), so
//! shared prefixes hit the cache and shorten prefill, and load beyond capacity queues, as on vLLM.
//!
//! With `gpus` set, simulated GPUs (`gpu`) draw power from their engines' running requests, and
//! every server serves them as NVIDIA dcgm-exporter's page at `/dcgm/metrics` (`dcgm_page`),
//! with an energy counter that is the exact integral of that power; [`SimHandle::gpu_energy_j`]
//! gives the truth over any window.
//!
//! The files import one way, in the order a request flows: `server` -> `http` -> (`stream`,
//! `metrics_page`, `dcgm_page`) -> `state` -> `sched` -> `kv` -> `model`. `gpu` (the fleet `state`
//! holds, `server` ticks and `dcgm_page` writes out) sits below `state` and reads only `model`'s
//! seed mixer. `spec` (the reports `http` and `stream` ask for) reads `model`'s emissions; `timer`
//! imports none of them. This file holds the settings and the public surface.

mod dcgm_page;
mod gpu_fleet;
mod http;
mod kv;
mod metrics_page;
mod model;
mod sched;
mod server;
mod spec;
mod state;
mod stream;
#[cfg(test)]
mod tests;
mod timer;

pub use gpu_fleet::GpuSim;
pub use model::{expected_al, Acceptance};
pub use server::{GroupTotals, SimHandle, SimTotals, Simulator};
pub use spec::{AcceptanceGroup, GroupRuleError, PerRequestSpec};
pub use state::{Admission, LatenessStats};

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Response header of `/dcgm/metrics`: the instant the page was computed at, Unix ns (the wall
/// clock of [`SimHandle::gpu_energy_j`]), so its samples can be held against the truth at that
/// very instant. The real exporter sends nothing like it.
pub const DCGM_AT_HEADER: &str = "x-specperf-sim-at-ns";

/// Request header that selects a fault for that request.
pub const FAULT_HEADER: &str = "x-specperf-fault";

/// A failure the simulator can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Fault {
    /// HTTP 429 with `Retry-After` before any streaming.
    Http429,
    /// HTTP 500 with an OpenAI error body.
    Http500,
    /// HTTP 503 with an OpenAI error body.
    Http503,
    /// Stream half the tokens, then reset the connection.
    CloseMidStream,
    /// Accept the request and send nothing at all (no headers).
    Stall,
    /// Stream half the tokens, then go silent (connection stays open).
    StallMidStream,
    /// Hold the response headers back for the configured delay, then stream normally.
    SlowHeaders,
    /// Insert one SSE event whose JSON does not parse.
    MalformedChunk,
    /// Send an `{"error": …}` event mid-stream, then `[DONE]` (as vLLM and SGLang do).
    ErrorMidStream,
    /// Insert one event larger than the configured oversize.
    OversizedChunk,
    /// End the response normally (`[DONE]`, terminal chunk, keep-alive still advertised: HTTP/1.1
    /// without `Connection: close`), then close the connection when the next request arrives on
    /// it, unanswered (or after 2 s idle). llama-server closes this way after a streamed response
    /// (issue 14); a client reusing the connection sees it closed before any response byte.
    CloseAfterDone,
}

impl Fault {
    /// Parses the `x-specperf-fault` header value (the same names as the CLI).
    pub fn from_name(s: &str) -> Option<Fault> {
        <Fault as clap::ValueEnum>::from_str(s.trim(), true).ok()
    }

    /// The CLI / header name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Http429 => "http429",
            Fault::Http500 => "http500",
            Fault::Http503 => "http503",
            Fault::CloseMidStream => "close-mid-stream",
            Fault::Stall => "stall",
            Fault::StallMidStream => "stall-mid-stream",
            Fault::SlowHeaders => "slow-headers",
            Fault::MalformedChunk => "malformed-chunk",
            Fault::ErrorMidStream => "error-mid-stream",
            Fault::OversizedChunk => "oversized-chunk",
            Fault::CloseAfterDone => "close-after-done",
        }
    }

    fn mid_stream(self) -> bool {
        matches!(
            self,
            Fault::CloseMidStream
                | Fault::StallMidStream
                | Fault::MalformedChunk
                | Fault::ErrorMidStream
                | Fault::OversizedChunk
        )
    }
}

/// Which server's `/metrics` page the simulator serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsFlavor {
    /// vLLM's: `vllm:` counters per engine (`engine` label), moving every decode step.
    #[default]
    Vllm,
    /// llama.cpp's `llama-server --metrics`: `llamacpp:` counters without labels (summed over
    /// the server's engines); tokens predicted and the speculative counters move only when a
    /// request ends.
    Llamacpp,
}

/// Which delta field carries reasoning text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReasoningField {
    /// `delta.reasoning_content` (SGLang, DeepSeek API, older vLLM).
    ReasoningContent,
    /// `delta.reasoning` (vLLM since late 2025).
    Reasoning,
}

/// The simulator's admission limit, as a rate-limited gateway in front of every server together:
/// a token bucket holding `burst` requests, refilled at `per_second`. A completion request that
/// finds it empty is answered 429 with `Retry-After` (whole seconds until a request would be
/// admitted) and an OpenAI error body, and never reaches an engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained admissions per second (at most [`RateLimit::MAX_PER_SECOND`]).
    pub per_second: f64,
    /// Admissions at once from a full bucket (at least 1).
    pub burst: u32,
}

impl RateLimit {
    /// The highest rate: one admission per microsecond.
    pub const MAX_PER_SECOND: f64 = 1e6;
}

/// Certificate and key (PEM) for serving HTTPS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
}

/// Simulator settings. `Default` is the embedded default: 50 ms TTFT, 10 ms per decode step,
/// k = 3 drafts accepted with p = 0.7 (AL ≈ 2.53), 256 output tokens unless the request says.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Served model name; requests naming another model get 404 as from vLLM. Empty accepts any.
    pub model: String,
    /// Address to bind (loopback by default).
    pub host: IpAddr,
    /// First port (0 = ephemeral); server `i` binds `port + i` when non-zero.
    pub port: u16,
    /// Number of API servers (listeners), each with its own engines and `/metrics`.
    pub servers: u32,
    /// Data-parallel engines behind each server (`engine` label = global rank).
    pub engines: u32,
    /// Time to first token.
    pub ttft: Duration,
    /// Time per decode step.
    pub itl: Duration,
    /// Uniform jitter as a fraction of each delay (0.1 = ±10 %).
    pub jitter: f64,
    /// Seed of every random draw.
    pub seed: u64,
    /// Draft tokens per step (`num_speculative_tokens`).
    pub k: u32,
    /// How drafts are accepted.
    pub acceptance: Acceptance,
    /// Output length when the request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Chance per token of ending early with `stop` (ignored with `ignore_eos`).
    pub eos_probability: f64,
    /// Stream each token of a step as its own chunk instead of one chunk per step.
    pub split_steps: bool,
    /// The first N output tokens are reasoning.
    pub reasoning_tokens: u32,
    /// Field name for reasoning deltas.
    pub reasoning_field: ReasoningField,
    /// Faults drawn at random: (fault, probability per request).
    pub fault_rates: Vec<(Fault, f64)>,
    /// Faults by arrival order, for exact mixes: completion request `n` (0-based, counted by this
    /// simulator in the order requests arrive) gets entry `n % len`, `None` meaning healthy.
    /// Exclusive with `fault_rates`; a request's `x-specperf-fault` header still wins.
    pub fault_sequence: Vec<Option<Fault>>,
    /// `fault_rates` apply only to requests arriving this long after the simulator started (a
    /// soak lets a warmup through clean; AgentX stops on a failed warmup request, as AIPerf does).
    pub faults_after: Duration,
    /// Delay of `slow-headers`.
    pub slow_headers: Duration,
    /// Longest a `stall` keeps a request open before closing it.
    pub stall_limit: Duration,
    /// Size of the `oversized-chunk` event in bytes.
    pub oversized_bytes: usize,
    /// Which server's `/metrics` page to serve.
    pub metrics_flavor: MetricsFlavor,
    /// Admission limit on completion requests; `None` admits everything.
    pub rate_limit: Option<RateLimit>,
    /// Serve HTTPS (ALPN h2 and http/1.1) with these files.
    pub tls: Option<TlsFiles>,
    /// Keep the first this many request bodies ([`SimHandle::requests`]); 0 keeps none.
    pub record_requests: usize,
    /// Ignore `stream_options.continuous_usage_stats` (usage only on the final chunk), as
    /// llama.cpp's server does.
    pub ignore_continuous_usage: bool,
    /// Tokens per KV block (vLLM's `--block-size`, 16 by default).
    pub kv_block_tokens: u32,
    /// KV blocks per engine; with `kv_block_tokens` this bounds what runs at once and what stays
    /// cached.
    pub kv_blocks: u64,
    /// Requests running at once per engine (vLLM's `--max-num-seqs`); `None` = no limit but the
    /// KV blocks. More wait, first come first served.
    pub max_running: Option<u32>,
    /// Prefill speed: the time to first token is `ttft` plus the uncached prompt tokens at this
    /// rate, so a cached prefix shows in it. 0 = prefill takes no time.
    pub prefill_tokens_per_s: f64,
    /// Longest prompt + output (vLLM's `--max-model-len`); longer requests get HTTP 400 with
    /// vLLM's message. `None` = what the KV blocks of one engine hold.
    pub max_model_len: Option<u32>,
    /// Count prompt tokens with this tokenizer (Σ over messages of each `content`'s tokens, no
    /// chat template); `None` = a stand-in of 4 characters a token.
    pub tokenizer: Option<std::sync::Arc<tokenizer_encoders::Tokenizer>>,
    /// vLLM's `--per-request-spec-decode-metrics`: add `metrics.speculative_decoding` at the root
    /// of non-streamed bodies and of the final usage chunk of streams.
    pub per_request_spec: PerRequestSpec,
    /// Acceptance per prompt group: the first rule whose text occurs in a request's prompt sets
    /// its per-position probability; requests matching none use `acceptance`. With rules, the
    /// vLLM page adds the truth per group (`specperf_sim:group_spec_decode_*`).
    pub acceptance_groups: Vec<AcceptanceGroup>,
    /// Simulated GPUs behind the engines, served as a DCGM exporter's page at `/dcgm/metrics`;
    /// `None` (the default) serves 404 there.
    pub gpus: Option<GpuSim>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            model: "specperf-sim".into(),
            host: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            servers: 1,
            engines: 1,
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            jitter: 0.0,
            seed: 0,
            k: 3,
            acceptance: Acceptance::Probability(0.7),
            default_max_tokens: 256,
            eos_probability: 0.0,
            split_steps: false,
            reasoning_tokens: 0,
            reasoning_field: ReasoningField::ReasoningContent,
            fault_rates: Vec::new(),
            fault_sequence: Vec::new(),
            faults_after: Duration::ZERO,
            slow_headers: Duration::from_secs(2),
            stall_limit: Duration::from_secs(600),
            oversized_bytes: 8 << 20,
            metrics_flavor: MetricsFlavor::Vllm,
            rate_limit: None,
            tls: None,
            record_requests: 0,
            ignore_continuous_usage: false,
            kv_block_tokens: 16,
            kv_blocks: SimConfig::DEFAULT_KV_BLOCKS,
            max_running: None,
            prefill_tokens_per_s: SimConfig::DEFAULT_PREFILL_TOKENS_PER_S,
            max_model_len: None,
            tokenizer: None,
            per_request_spec: PerRequestSpec::None,
            acceptance_groups: Vec::new(),
            gpus: None,
        }
    }
}

/// Errors starting the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A listener could not bind.
    #[error("simulator cannot bind {addr}: {source} (pick another --port, or 0 for a free one)")]
    Bind {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A setting is out of range.
    #[error("invalid simulator setting: {0}")]
    Config(String),
    /// TLS files unusable.
    #[error("simulator TLS: {0}")]
    Tls(String),
    /// Thread or runtime start failed.
    #[error("simulator start failed: {0}")]
    Start(std::io::Error),
}

impl SimConfig {
    /// KV blocks per engine by default: 131,072 blocks of 16 tokens, 2,097,152 tokens, about
    /// what one H200 holds for a large model; enough that only deliberate tests queue on it.
    pub const DEFAULT_KV_BLOCKS: u64 = 131_072;
    /// Prefill speed by default, tokens per second: 50k uncached tokens add half a second.
    pub const DEFAULT_PREFILL_TOKENS_PER_S: f64 = 100_000.0;

    /// The longest prompt + output a request may ask for: `max_model_len`, else what one
    /// engine's KV blocks hold.
    pub fn context_limit(&self) -> u64 {
        let kv = self
            .kv_blocks
            .saturating_mul(u64::from(self.kv_block_tokens));
        self.max_model_len.map_or(kv, |m| u64::from(m).min(kv))
    }

    /// Checks ranges; called by `Simulator::bind`.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        if self.servers == 0 || self.engines == 0 {
            return bad("--servers and --engines must be at least 1".into());
        }
        if self.k == 0 {
            return bad("--k (draft tokens per step) must be at least 1".into());
        }
        match self.acceptance {
            Acceptance::Probability(p) if !(0.0..=1.0).contains(&p) => {
                return bad(format!("--acceptance-prob {p} is outside [0, 1]"))
            }
            Acceptance::MeanAl(al) if !(1.0..=f64::from(self.k) + 1.0).contains(&al) => {
                return bad(format!(
                    "--target-al {al} is outside [1, k + 1 = {}]",
                    self.k + 1
                ))
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&self.eos_probability) || !(0.0..=1.0).contains(&self.jitter) {
            return bad("--eos-prob and --jitter must be within [0, 1]".into());
        }
        for (f, r) in &self.fault_rates {
            if !(0.0..=1.0).contains(r) {
                return bad(format!("fault rate {r} for {} is outside [0, 1]", f.name()));
            }
        }
        if self.fault_rates.iter().map(|(_, r)| r).sum::<f64>() > 1.0 {
            return bad("fault rates add up to more than 1".into());
        }
        if let Some(RateLimit { per_second, burst }) = self.rate_limit {
            if !(per_second > 0.0 && per_second <= RateLimit::MAX_PER_SECOND) || burst == 0 {
                return bad(format!(
                    "--rate-limit {per_second},{burst}: the rate must be within (0, {}] \
                     requests per second and the burst at least 1",
                    RateLimit::MAX_PER_SECOND
                ));
            }
        }
        if self.kv_block_tokens == 0 || self.kv_blocks == 0 {
            return bad("--kv-block-tokens and --kv-blocks (--sim-kv-block-tokens, \
                 --sim-kv-blocks) must be at least 1"
                .into());
        }
        if self.max_running == Some(0) {
            return bad(
                "--max-running (--sim-max-running) must be at least 1; leave it out for no limit"
                    .into(),
            );
        }
        if !(self.prefill_tokens_per_s >= 0.0 && self.prefill_tokens_per_s.is_finite()) {
            return bad(format!(
                "--prefill-tokens-per-s (--sim-prefill-tokens-per-s) {} must be a non-negative \
                 number (0 = instant prefill)",
                self.prefill_tokens_per_s
            ));
        }
        if let Some(m) = self.max_model_len {
            let kv = self
                .kv_blocks
                .saturating_mul(u64::from(self.kv_block_tokens));
            if m == 0 || u64::from(m) > kv {
                return bad(format!(
                    "--max-model-len (--sim-max-model-len) {m} must be at least 1 and fit one \
                     engine's KV cache ({} blocks of {} tokens = {kv} tokens); raise --kv-blocks \
                     (--sim-kv-blocks) or lower it",
                    self.kv_blocks, self.kv_block_tokens
                ));
            }
        }
        spec::validate_groups(&self.acceptance_groups).map_err(SimError::Config)?;
        if let Some(g) = &self.gpus {
            gpu_fleet::validate(g).map_err(SimError::Config)?;
        }
        if !self.fault_rates.is_empty() && !self.fault_sequence.is_empty() {
            return bad(
                "--fault (random faults) and --fault-sequence (faults by arrival order) \
                 exclude each other; pick one"
                    .into(),
            );
        }
        Ok(())
    }
}
