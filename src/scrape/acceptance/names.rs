//! Engine families and the metric names each one exports: which sample names carry the
//! speculative-decoding counters, for vLLM, SGLang, TensorRT-LLM, ATOM (`speculative-metrics.md`
//! §2) and llama.cpp's llama-server, and what each counter means to the formulas.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Which engine's counters to read; `auto` detects it from the page.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SpecEngine {
    /// Detect from the metric families present.
    #[default]
    Auto,
    /// vLLM v1 (also Dynamo vLLM workers and llm-d pods).
    Vllm,
    /// SGLang (also Dynamo SGLang workers).
    Sglang,
    /// TensorRT-LLM (`/prometheus/metrics` counters or `/metrics` JSON iteration stats).
    Trtllm,
    /// ATOM (ROCm).
    Atom,
    /// llama.cpp's llama-server (`--metrics`): vLLM's counters under `llamacpp:`, added to only
    /// when a request finishes.
    Llamacpp,
}

impl SpecEngine {
    pub(crate) fn name(self) -> &'static str {
        match self {
            SpecEngine::Auto => "auto",
            SpecEngine::Vllm => "vllm",
            SpecEngine::Sglang => "sglang",
            SpecEngine::Trtllm => "trtllm",
            SpecEngine::Atom => "atom",
            SpecEngine::Llamacpp => "llamacpp",
        }
    }
}

/// The counters and gauges acceptance is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Metric {
    VllmDrafts,
    VllmDraftTokens,
    VllmAccepted,
    VllmAcceptedPerPos,
    SglGeneration,
    SglVerify,
    SglRequests,
    SglAlGauge,
    TrtDraftTokens,
    TrtAccepted,
    TrtDraftedPerPos,
    TrtAcceptedPerPos,
    TrtAlGauge,
    AtomDraftTokens,
    AtomAccepted,
    AtomSteps,
    LlamaDrafts,
    LlamaDraftTokens,
    LlamaAccepted,
    LlamaAcceptedPerPos,
}

impl Metric {
    pub(crate) fn engine(self) -> SpecEngine {
        use Metric::*;
        match self {
            VllmDrafts | VllmDraftTokens | VllmAccepted | VllmAcceptedPerPos => SpecEngine::Vllm,
            SglGeneration | SglVerify | SglRequests | SglAlGauge => SpecEngine::Sglang,
            TrtDraftTokens | TrtAccepted | TrtDraftedPerPos | TrtAcceptedPerPos | TrtAlGauge => {
                SpecEngine::Trtllm
            }
            AtomDraftTokens | AtomAccepted | AtomSteps => SpecEngine::Atom,
            LlamaDrafts | LlamaDraftTokens | LlamaAccepted | LlamaAcceptedPerPos => {
                SpecEngine::Llamacpp
            }
        }
    }

    pub(crate) fn is_gauge(self) -> bool {
        matches!(self, Metric::SglAlGauge | Metric::TrtAlGauge)
    }

    /// Counters that only make sense with an engine's spec decoding on (SGLang's generation and
    /// request counters exist without it, so they do not identify a speculative server).
    pub(crate) fn marks_spec(self) -> bool {
        !matches!(self, Metric::SglGeneration | Metric::SglRequests)
    }

    /// The label that splits a counter by draft position, if any.
    pub(crate) fn position_label(self) -> Option<&'static str> {
        match self {
            Metric::VllmAcceptedPerPos | Metric::LlamaAcceptedPerPos => Some("position"),
            Metric::TrtDraftedPerPos | Metric::TrtAcceptedPerPos => Some("token_position"),
            Metric::AtomSteps => Some("accepted_tokens"),
            _ => None,
        }
    }
}

/// Sample names per metric. TensorRT-LLM is seen with `trtllm_`, `trtllm:` (older Dynamo docs)
/// and no prefix (1.1.0rc5); each counter in 0.0.4 and OpenMetrics carries `_total`.
const NAMES: &[(&str, Metric)] = &[
    ("vllm:spec_decode_num_drafts_total", Metric::VllmDrafts),
    (
        "vllm:spec_decode_num_draft_tokens_total",
        Metric::VllmDraftTokens,
    ),
    (
        "vllm:spec_decode_num_accepted_tokens_total",
        Metric::VllmAccepted,
    ),
    (
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        Metric::VllmAcceptedPerPos,
    ),
    ("sglang:generation_tokens_total", Metric::SglGeneration),
    ("sglang:spec_verify_calls_total", Metric::SglVerify),
    ("sglang:num_requests_total", Metric::SglRequests),
    ("sglang:spec_accept_length", Metric::SglAlGauge),
    (
        "trtllm_spec_decode_num_draft_tokens_total",
        Metric::TrtDraftTokens,
    ),
    (
        "trtllm_spec_decode_num_accepted_tokens_total",
        Metric::TrtAccepted,
    ),
    (
        "trtllm_spec_decode_drafted_tokens_total",
        Metric::TrtDraftedPerPos,
    ),
    (
        "trtllm_spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("trtllm_spec_decode_acceptance_length", Metric::TrtAlGauge),
    (
        "trtllm:spec_decode_num_draft_tokens_total",
        Metric::TrtDraftTokens,
    ),
    (
        "trtllm:spec_decode_num_accepted_tokens_total",
        Metric::TrtAccepted,
    ),
    (
        "trtllm:spec_decode_drafted_tokens_total",
        Metric::TrtDraftedPerPos,
    ),
    (
        "trtllm:spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("trtllm:spec_decode_acceptance_length", Metric::TrtAlGauge),
    ("spec_decode_num_draft_tokens_total", Metric::TrtDraftTokens),
    ("spec_decode_num_accepted_tokens_total", Metric::TrtAccepted),
    ("spec_decode_drafted_tokens_total", Metric::TrtDraftedPerPos),
    (
        "spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("spec_decode_acceptance_length", Metric::TrtAlGauge),
    ("atom:mtp_draft_tokens_total", Metric::AtomDraftTokens),
    ("atom:mtp_accepted_tokens_total", Metric::AtomAccepted),
    ("atom:mtp_decode_steps_total", Metric::AtomSteps),
    ("llamacpp:spec_decode_num_drafts_total", Metric::LlamaDrafts),
    (
        "llamacpp:spec_decode_num_draft_tokens_total",
        Metric::LlamaDraftTokens,
    ),
    (
        "llamacpp:spec_decode_num_accepted_tokens_total",
        Metric::LlamaAccepted,
    ),
    (
        "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
        Metric::LlamaAcceptedPerPos,
    ),
];

/// The four counters of vLLM's shape (drafts, draft tokens, accepted, accepted per position), for
/// the engines that export it.
pub(crate) fn vllm_shape(engine: SpecEngine) -> Option<[Metric; 4]> {
    use Metric::*;
    match engine {
        SpecEngine::Vllm => Some([
            VllmDrafts,
            VllmDraftTokens,
            VllmAccepted,
            VllmAcceptedPerPos,
        ]),
        SpecEngine::Llamacpp => Some([
            LlamaDrafts,
            LlamaDraftTokens,
            LlamaAccepted,
            LlamaAcceptedPerPos,
        ]),
        _ => None,
    }
}

/// What a sample name means to us.
#[derive(Clone, Copy)]
pub(crate) enum Role {
    Value(Metric),
    Created(Metric),
}

pub(crate) struct NameTables {
    pub(crate) exact: HashMap<&'static str, Role>,
    /// Same with `:` written as `_` (prometheus_client's default OpenMetrics escaping).
    pub(crate) normalised: HashMap<String, Role>,
}

pub(crate) fn tables() -> &'static NameTables {
    static T: OnceLock<NameTables> = OnceLock::new();
    T.get_or_init(|| {
        let mut exact = HashMap::new();
        let mut normalised = HashMap::new();
        for &(name, m) in NAMES {
            exact.insert(name, Role::Value(m));
            normalised.insert(name.replace(':', "_"), Role::Value(m));
            if let Some(base) = name.strip_suffix("_total") {
                let created: &'static str = Box::leak(format!("{base}_created").into_boxed_str());
                exact.insert(created, Role::Created(m));
                normalised.insert(created.replace(':', "_"), Role::Created(m));
            }
        }
        NameTables { exact, normalised }
    })
}

/// How messages name an engine of vLLM's shape, and its drafts and draft-tokens counters.
pub(crate) fn vllm_shape_names(engine: SpecEngine) -> (&'static str, [&'static str; 2]) {
    match engine {
        SpecEngine::Llamacpp => (
            "llama.cpp",
            [
                "llamacpp:spec_decode_num_drafts_total",
                "llamacpp:spec_decode_num_draft_tokens_total",
            ],
        ),
        _ => (
            "vLLM",
            [
                "vllm:spec_decode_num_drafts_total",
                "vllm:spec_decode_num_draft_tokens_total",
            ],
        ),
    }
}
