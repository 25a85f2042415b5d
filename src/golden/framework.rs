//! The `FRAMEWORK` alias table shared by the AL gate and `inject`.

/// The serving framework families of InferenceX's `FRAMEWORK` values (§9.3, §10): the one alias
/// table behind both the gate (which metrics family to read) and `inject` (which recipe backend
/// writes the synthetic knob), so the two cannot disagree on what `dynamo-trt` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// vLLM and Dynamo vLLM workers.
    Vllm,
    /// SGLang and Dynamo SGLang workers.
    Sglang,
    /// TensorRT-LLM and Dynamo TensorRT-LLM workers.
    Trtllm,
    /// ATOM (ROCm).
    Atom,
    /// TileRT: known, but with neither speculative counters nor a synthetic-acceptance knob.
    Tilert,
    /// llama.cpp's llama-server: speculative counters, but no recipe format to inject into.
    Llamacpp,
}

/// Every lower-case `FRAMEWORK` spelling, grouped by family in the order messages list them.
const FRAMEWORK_ALIASES: &[(&str, Framework)] = &[
    ("vllm", Framework::Vllm),
    ("dynamo-vllm", Framework::Vllm),
    ("sglang", Framework::Sglang),
    ("dynamo-sglang", Framework::Sglang),
    ("trt", Framework::Trtllm),
    ("trtllm", Framework::Trtllm),
    ("tensorrt-llm", Framework::Trtllm),
    ("tensorrt_llm", Framework::Trtllm),
    ("dynamo-trt", Framework::Trtllm),
    ("dynamo-trtllm", Framework::Trtllm),
    ("dynamo-tensorrt-llm", Framework::Trtllm),
    ("dynamo-tensorrt_llm", Framework::Trtllm),
    ("atom", Framework::Atom),
    ("tilert", Framework::Tilert),
    ("llamacpp", Framework::Llamacpp),
    ("llama.cpp", Framework::Llamacpp),
    ("llama-cpp", Framework::Llamacpp),
];

impl Framework {
    /// The family of an exact lower-case spelling (callers trim and lower-case first: the gate
    /// and `inject` normalise differently, and each keeps its own rule).
    pub(crate) fn from_alias(name: &str) -> Option<Framework> {
        FRAMEWORK_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name)
            .map(|(_, f)| *f)
    }

    /// The spellings of this family, in table order.
    pub(crate) fn aliases(self) -> impl Iterator<Item = &'static str> {
        FRAMEWORK_ALIASES
            .iter()
            .filter(move |(_, f)| *f == self)
            .map(|(alias, _)| *alias)
    }
}
