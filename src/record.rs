//! What one request became: the [`RequestRecord`] every client call returns, whatever happened.
//!
//! Records flow from the client to the one aggregator (`metrics`), which writes each to the JSONL
//! artifact as it arrives and folds it into the statistics. Failures are values here, never strings:
//! [`FailureKind`] is a `Copy` enum so counts per kind are exact and cheap.

use serde::{Deserialize, Serialize};

/// Why a request did not succeed. Stable snake_case names appear in records and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// TCP connect or TLS handshake failed (refused, reset, certificate rejected).
    Connect,
    /// TCP connect plus TLS handshake took longer than the connect timeout.
    ConnectTimeout,
    /// No first token (content or reasoning) within the first-token timeout.
    TtftTimeout,
    /// No SSE event (or body bytes) for longer than the idle timeout once streaming began.
    IdleTimeout,
    /// The whole request took longer than the request timeout.
    TotalTimeout,
    /// The server answered with a non-2xx HTTP status.
    HttpStatus,
    /// The server sent an `error` object inside the stream (or an `error`/`abort` finish reason).
    StreamError,
    /// An SSE event or JSON body that does not parse as an OpenAI response.
    Malformed,
    /// One SSE event or a response body exceeded the client's size cap.
    Oversized,
    /// The connection closed before the stream finished (`[DONE]` or a complete body).
    ConnectionClosed,
    /// `usage` was requested but the server never sent it, so tokens cannot be counted.
    MissingUsage,
    /// The request ended without producing any output token: a `bench-serving` completions body
    /// without a chunk holding a choice (upstream's "Never received a valid chunk"), or a record
    /// of an earlier version (elsewhere a well-formed response with usage and no text is a
    /// success flagged `empty_output`, and one without usage is `missing_usage`).
    NoOutput,
    /// Any other transport error (I/O, protocol violation).
    Transport,
    /// Still in flight when --benchmark-grace-period ran out after --benchmark-duration;
    /// cancelled and counted as failed.
    GracePeriodExpired,
}

impl FailureKind {
    /// Every kind, in report order.
    pub const ALL: [FailureKind; 14] = [
        FailureKind::Connect,
        FailureKind::ConnectTimeout,
        FailureKind::TtftTimeout,
        FailureKind::IdleTimeout,
        FailureKind::TotalTimeout,
        FailureKind::HttpStatus,
        FailureKind::StreamError,
        FailureKind::Malformed,
        FailureKind::Oversized,
        FailureKind::ConnectionClosed,
        FailureKind::MissingUsage,
        FailureKind::NoOutput,
        FailureKind::Transport,
        FailureKind::GracePeriodExpired,
    ];

    /// The stable name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::ConnectTimeout => "connect_timeout",
            FailureKind::TtftTimeout => "ttft_timeout",
            FailureKind::IdleTimeout => "idle_timeout",
            FailureKind::TotalTimeout => "total_timeout",
            FailureKind::HttpStatus => "http_status",
            FailureKind::StreamError => "stream_error",
            FailureKind::Malformed => "malformed",
            FailureKind::Oversized => "oversized",
            FailureKind::ConnectionClosed => "connection_closed",
            FailureKind::MissingUsage => "missing_usage",
            FailureKind::NoOutput => "no_output",
            FailureKind::Transport => "transport",
            FailureKind::GracePeriodExpired => "grace_period_expired",
        }
    }

    /// True for the four timeout kinds.
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            FailureKind::ConnectTimeout
                | FailureKind::TtftTimeout
                | FailureKind::IdleTimeout
                | FailureKind::TotalTimeout
        )
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "kind")]
pub enum Outcome {
    /// Completed with usage-counted output.
    Success,
    /// Failed for the given reason.
    Failed(FailureKind),
    /// Cut short by the run's cancellation (deadline, Ctrl-C, SIGTERM).
    Cancelled,
}

impl Outcome {
    /// True for [`Outcome::Success`].
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Success)
    }
}

/// Where a record's token counts came from. Declared in the order of the names, so a map keyed by
/// it (`tokens_counted_by`) serializes its keys sorted, as every map in the summary is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server sent no usage; no token counts.
    None,
    /// One final `usage` object (streaming usage chunk or non-streaming body).
    UsageFinal,
    /// Cumulative `usage` on every chunk (`continuous_usage_stats`): per-chunk counts are exact.
    UsagePerChunk,
}

/// Which phase of the run a request belongs to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before profiling; never in statistics.
    Warmup,
    /// The measured phase.
    #[default]
    Profiling,
}

/// One request, start to end. Times are nanoseconds since the run's monotonic start.
/// Read back by `specperf merge` (`Deserialize`), which rebuilds the statistics from these lines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Dispatch order, 0-based.
    pub id: u64,
    /// `warmup` (excluded from every statistic) or `profiling`.
    pub phase: Phase,
    /// Turn of a multi-turn session (0 for single-turn requests); `id` is the session's.
    pub turn: u32,
    /// Index of the sample in the loaded collection.
    pub sample_index: usize,
    /// How the request ended.
    pub outcome: Outcome,
    /// HTTP status, when headers arrived.
    pub http_status: Option<u16>,
    /// Short error text for failed requests (server message or transport error).
    pub error: Option<String>,
    /// When the scheduler meant the request to start.
    pub intended_ns: u64,
    /// When the request was handed to the connection.
    pub sent_ns: u64,
    /// Response headers received.
    pub headers_ns: Option<u64>,
    /// First event with content or reasoning.
    pub first_token_ns: Option<u64>,
    /// Second such event.
    pub second_token_ns: Option<u64>,
    /// Last such event.
    pub last_token_ns: Option<u64>,
    /// First event with non-reasoning content.
    pub first_output_token_ns: Option<u64>,
    /// Request finished (stream end, error or cancel).
    pub end_ns: u64,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens` (reasoning included).
    pub completion_tokens: Option<u64>,
    /// `usage.completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: Option<u64>,
    /// `usage.total_tokens`, as the server reported it (AIPerf's `usage_total_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// The output length the request asked for (`max_tokens` / `max_completion_tokens`), when
    /// its body set one: AIPerf's requested OSL, which `osl_mismatch_diff_pct` compares against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_osl: Option<u64>,
    /// How the token counts were obtained.
    pub token_source: TokenSource,
    /// Events carrying content or reasoning.
    pub content_events: u32,
    /// Body reads (HTTP data frames) that delivered the stream.
    pub reads: u32,
    /// SSE events parsed (all kinds, `[DONE]` included).
    pub events: u32,
    /// Tokens in the first content event, from per-chunk usage (AIPerf ITL correction).
    pub first_chunk_tokens: Option<u64>,
    /// `finish_reason` of the last choice that had one.
    pub finish_reason: Option<String>,
    /// A success whose response carried usage but no text (an answer that ended at once, e.g.
    /// `finish_reason: stop` with one completion token that decodes to nothing). Its tokens count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_output: bool,
    /// Times the request was sent again: on a fresh connection because a reused one closed before
    /// any response byte (the server never saw it: nothing is counted twice), or after a 429 when
    /// `--rate-limit-retries` asks for it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Gaps between consecutive content events, with the tokens each later event carried
    /// (0 when per-chunk usage is unavailable). Not serialized: it feeds the histograms.
    #[serde(skip)]
    pub chunk_gaps: Vec<ChunkGap>,
    /// The response text, kept only for multi-turn sessions (the next turn's history) and
    /// `bench-serving`'s generated texts.
    #[serde(skip)]
    pub response_text: Option<String>,
    /// With `response_text`: where each content event's text ends in it (bytes), so that one
    /// event's text can be told apart (`bench-serving`'s peak output rate tokenizes each).
    #[serde(skip)]
    pub chunk_text_ends: Vec<u32>,
    /// Where an AgentX request sits in its session tree (`None` for every other workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<SessionMeta>>,
    /// The speculative decoding this request's response reported (vLLM, SGLang, llama.cpp,
    /// TensorRT-LLM), checked before it is kept; `None` when the response carried none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Box<SpecDecode>>,
    /// Why the response's speculative-decoding figures were left out (a malformed payload,
    /// named); the request itself still counts everywhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_warning: Option<String>,
    /// The sample's group: the collection field named by `--group-by` (SPEED-Bench's
    /// `category` by default), for the per-group acceptance breakdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What the HTTP exchange itself measured, once response headers arrived (`None` before
    /// that, and in records of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTrace>,
}

/// The HTTP exchange of one request, as the client measured it: AIPerf's `http_req_*` metrics
/// that specperf can state. What hyper does not report (pool wait, DNS, TCP and TLS times, when
/// the last request byte was written) is not here: nothing is estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpTrace {
    /// The request went out on a connection that had already served a response (keep-alive).
    pub connection_reused: bool,
    /// Request body bytes handed to the connection (one frame; headers not counted, as AIPerf's
    /// aiohttp trace counts body chunks).
    pub bytes_sent: u64,
    /// Response body bytes received (headers not counted).
    pub bytes_received: u64,
    /// Response body frames received (each read of the body, as AIPerf counts chunks).
    pub frames_received: u32,
    /// First response body frame, ns since the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_frame_ns: Option<u64>,
    /// Last response body frame, ns since the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_frame_ns: Option<u64>,
}

impl HttpTrace {
    /// First to last response body frame (AIPerf's `http_req_receiving`): 0 for a one-frame
    /// body, `None` without one.
    pub fn receiving_ns(&self) -> Option<u64> {
        match (self.first_frame_ns, self.last_frame_ns) {
            _ if self.frames_received == 1 => Some(0),
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        }
    }
}

/// Which response field a request's speculative-decoding figures came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecSource {
    /// vLLM's `metrics.speculative_decoding` (`--per-request-spec-decode-metrics`): steps,
    /// drafts, accepted and the acceptance histogram.
    Vllm,
    /// SGLang's `sglext.spec_tokens_details` (the request's `return_spec_tokens_details`):
    /// verify steps, proposed and correct drafts, histogram.
    Sglang,
    /// llama.cpp's `timings.draft_n` / `draft_n_accepted`: drafts and accepted, no steps.
    Llamacpp,
    /// TensorRT-LLM's `choices[].avg_decoded_tokens_per_iter`: tokens per iteration only.
    Trtllm,
}

impl SpecSource {
    /// The stable name used in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecSource::Vllm => "vllm",
            SpecSource::Sglang => "sglang",
            SpecSource::Llamacpp => "llamacpp",
            SpecSource::Trtllm => "trtllm",
        }
    }
}

/// One request's speculative decoding as its response reported it. The client keeps it only
/// when it is consistent (histogram length k + 1, integer counts, sums matching the steps and
/// accepted tokens); otherwise the record carries a named `spec_warning` instead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecDecode {
    /// Where the figures came from.
    pub source: SpecSource,
    /// Verify steps that had drafts (vLLM `num_spec_steps`, SGLang `spec_verify_ct`); `None`
    /// where the server does not report them (llama.cpp, TensorRT-LLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Draft tokens proposed (vLLM `num_draft_tokens`, SGLang `spec_num_proposed_drafts`,
    /// llama.cpp `draft_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    /// Draft tokens accepted, the bonus token excluded (vLLM `num_accepted_draft_tokens`,
    /// SGLang `spec_num_correct_drafts`, llama.cpp `draft_n_accepted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_tokens: Option<u64>,
    /// Index j: steps that accepted exactly j drafts (length k + 1); empty when not sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<u64>,
    /// Draft tokens per step as configured (vLLM `num_spec_tokens`), when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_spec_tokens: Option<u32>,
    /// The server's own per-request figure, as sent: vLLM `mean_acceptance_length`
    /// (1 + accepted / steps), SGLang `spec_accept_length` (completion tokens / verify steps,
    /// the prefill token included), TensorRT-LLM `avg_decoded_tokens_per_iter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_acceptance_length: Option<f64>,
    /// vLLM `detailed`: drafts accepted at each verify step, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_step_accepted: Option<Vec<u32>>,
    /// vLLM `detailed`: drafts proposed at each verify step, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_step_drafted: Option<Vec<u32>>,
}

impl SpecDecode {
    /// `1 + accepted / steps` (vLLM's definition, the counters' AL), when both are known and
    /// there was at least one step.
    pub fn acceptance_length(&self) -> Option<f64> {
        match (self.accepted_tokens, self.steps) {
            (Some(a), Some(s)) if s > 0 => Some(1.0 + a as f64 / s as f64),
            _ => None,
        }
    }

    /// `accepted / draft tokens` as a fraction, when drafts were proposed.
    pub fn acceptance_rate(&self) -> Option<f64> {
        match (self.accepted_tokens, self.draft_tokens) {
            (Some(a), Some(d)) if d > 0 => Some(a as f64 / d as f64),
            _ => None,
        }
    }

    /// AIPerf's accepted per verified: `(accepted + steps) / (drafts + steps)`.
    pub fn accepted_per_verified(&self) -> Option<f64> {
        let (a, d, s) = (self.accepted_tokens?, self.draft_tokens?, self.steps?);
        (d + s > 0).then(|| (a + s) as f64 / (d + s) as f64)
    }
}

/// An AgentX request's place in its session tree: what AIPerf writes in a record's metadata and
/// InferenceX's aggregator reads (`conversation_id`, `turn_index`, the correlation ids).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// `<trace>` for a root turn, `<trace>::sa:<agent_id>` (and split chains) for a child.
    pub conversation_id: String,
    /// `X-Request-ID` sent (a fresh UUID per request).
    pub x_request_id: String,
    /// `X-Correlation-ID` sent: the conversation's UUID.
    pub x_correlation_id: String,
    /// The tree's root correlation id.
    pub root_correlation_id: String,
    /// The spawning conversation's correlation id, for a child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_correlation_id: Option<String>,
    /// 0 for the root, 1 for a subagent.
    pub agent_depth: u32,
    /// The trace id (text before `::`).
    pub source_trace_id: String,
    /// Index in the trace's `requests`.
    pub source_outer_idx: usize,
    /// Index inside a subagent entry's `requests`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_inner_idx: Option<usize>,
    /// `weka_main` or `weka_subagent`.
    pub source_kind: String,
    /// The lane (0..concurrency) whose tree sent it.
    pub lane: usize,
    /// The request's place among its phase's requests, in send order from 0 (AIPerf's
    /// `session_num`: its credit number, counted again from 0 for profiling).
    #[serde(default)]
    pub session_num: u64,
    /// Theoretical prefix-cache hit blocks of this turn (trace order, see `agentx`).
    pub cache_hit_blocks: u64,
    /// `hash_ids.len()` of this turn.
    pub cache_total_blocks: u64,
    /// The server rejected the prompt as over its context; the session ended there. Such records
    /// are counted toward completion but left out of metrics and `profile_export.jsonl`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub context_overflow: bool,
}

/// Time between two content events and the tokens the later one carried (0 = unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkGap {
    /// Gap in nanoseconds.
    pub gap_ns: u64,
    /// Tokens in the later event, from per-chunk usage; 0 when unknown.
    pub tokens: u32,
}

impl RequestRecord {
    /// A record for a request that has only been dispatched so far.
    pub(crate) fn started(id: u64, sample_index: usize, intended_ns: u64, sent_ns: u64) -> Self {
        RequestRecord {
            id,
            phase: Phase::Profiling,
            turn: 0,
            sample_index,
            outcome: Outcome::Cancelled,
            http_status: None,
            error: None,
            intended_ns,
            sent_ns,
            headers_ns: None,
            first_token_ns: None,
            second_token_ns: None,
            last_token_ns: None,
            first_output_token_ns: None,
            end_ns: sent_ns,
            prompt_tokens: None,
            completion_tokens: None,
            reasoning_tokens: None,
            total_tokens: None,
            requested_osl: None,
            token_source: TokenSource::None,
            content_events: 0,
            reads: 0,
            events: 0,
            first_chunk_tokens: None,
            finish_reason: None,
            empty_output: false,
            retries: 0,
            chunk_gaps: Vec::new(),
            response_text: None,
            chunk_text_ends: Vec::new(),
            session: None,
            spec: None,
            spec_warning: None,
            group: None,
            http: None,
        }
    }

    /// Time to first token in nanoseconds.
    pub fn ttft_ns(&self) -> Option<u64> {
        self.first_token_ns.map(|t| t.saturating_sub(self.sent_ns))
    }

    /// Latency to the last content event (AIPerf `request_latency`), falling back to the end.
    pub fn latency_ns(&self) -> u64 {
        self.last_token_ns
            .unwrap_or(self.end_ns)
            .saturating_sub(self.sent_ns)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
