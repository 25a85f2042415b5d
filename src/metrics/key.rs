//! The one table of per-request metric names. Every place that names a metric (the aggregator,
//! the console table, AIPerf's JSON and CSV, the InferenceX raw JSON) goes through [`MetricKey`],
//! so a name is written once and a typo is a compile error, not a silently missing row.

/// A per-request (or per-chunk) metric of the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum MetricKey {
    /// Tokens of what was sent, counted by the client's tokenizer (`--tokenizer`).
    ClientInputSequenceLength,
    /// Latency − TTFT.
    DecodeDuration,
    /// Sent − intended start.
    DispatchLag,
    /// OSL / latency.
    E2eOutputTokenThroughput,
    /// End − intended start (coordinated omission).
    EffectiveLatency,
    /// First token − intended start.
    EffectiveTimeToFirstToken,
    /// Response body frames received (AIPerf `http_req_chunks_received`).
    HttpChunksReceived,
    /// Request body frames sent: the client hands the body over as one frame.
    HttpChunksSent,
    /// 1 when the request reused a kept-alive connection, else 0.
    HttpConnectionReused,
    /// Response body bytes, in AIPerf's KB (1024 bytes).
    HttpDataReceived,
    /// Request body bytes, in AIPerf's KB (1024 bytes).
    HttpDataSent,
    /// First to last response body frame (0 for one frame).
    HttpReceiving,
    /// `usage.prompt_tokens`.
    InputSequenceLength,
    /// Every gap between content events (HDR).
    InterChunkLatency,
    /// AIPerf ITL: (latency − TTFT) / (OSL − tokens of the first chunk).
    InterTokenLatency,
    /// Each token of a chunk at gap / tokens (HDR).
    InterTokenLatencyTokenWeighted,
    /// (OSL − requested OSL) / requested OSL, percent (requests that set `max_tokens`).
    OslMismatchDiffPct,
    /// `usage.completion_tokens`.
    OutputSequenceLength,
    /// `usage.completion_tokens` − reasoning tokens (AIPerf's output token count).
    OutputTokenCount,
    /// 1 / ITL.
    OutputTokenThroughputPerUser,
    /// ISL / TTFT.
    PrefillThroughputPerUser,
    /// Last content event − start.
    RequestLatency,
    /// 1 + accepted / steps of one response's reported speculative decoding.
    SpecDecodeAcceptanceLength,
    /// Draft tokens accepted in one response.
    SpecDecodeAcceptedDraftTokens,
    /// (accepted + steps) / (drafts + steps) of one response (AIPerf).
    SpecDecodeAcceptedPerVerified,
    /// Accepted / drafted of one response, percent.
    SpecDecodeDraftAcceptanceRate,
    /// Draft tokens proposed in one response.
    SpecDecodeDraftTokens,
    /// Verify steps of one response.
    SpecDecodeSteps,
    /// Decode tokens / decode events of one stream (the stream estimate of its AL).
    StreamAcceptanceLengthEstimate,
    /// vLLM TPOT: (latency − TTFT) / (OSL − 1).
    TimePerOutputToken,
    /// First non-reasoning content − start.
    TimeToFirstOutputToken,
    /// First content event − start.
    TimeToFirstToken,
    /// Second content event − first.
    TimeToSecondToken,
    /// `usage.total_tokens`, where the server reported it.
    UsageTotalTokens,
}

/// The names of one metric: its `summary.json` key, unit, AIPerf tag and CSV header (where
/// AIPerf has the metric), the console label (where the console shows it) and vLLM's name (where
/// benchmark_serving reports it).
struct Names {
    key: &'static str,
    unit: &'static str,
    aiperf: Option<(&'static str, &'static str)>,
    console: Option<&'static str>,
    vllm: Option<&'static str>,
}

/// AIPerf tags and CSV headers under which AIPerf writes the very same per-request value again:
/// specperf's ISL and OSL are the server's `usage`, so AIPerf's `usage_*` twins of them are the
/// same numbers.
const ISL_TWINS: &[(&str, &str)] = &[("usage_prompt_tokens", "Usage Prompt Tokens")];
const OSL_TWINS: &[(&str, &str)] = &[("usage_completion_tokens", "Usage Completion Tokens")];

const MS: &str = "ms";
const TOKENS: &str = "tokens";
const TPS: &str = "tokens/sec/user";
const RATIO: &str = "ratio";
const PERCENT: &str = "%";
const COUNT: &str = "count";
const KB: &str = "KB";

impl MetricKey {
    fn names(self) -> Names {
        use MetricKey as K;
        let n = |key, unit, aiperf, console, vllm| Names {
            key,
            unit,
            aiperf,
            console,
            vllm,
        };
        match self {
            K::ClientInputSequenceLength => {
                n("client_input_sequence_length", TOKENS, None, None, None)
            }
            K::DecodeDuration => n(
                "decode_duration_ms",
                MS,
                Some(("decode_duration", "Decode Duration")),
                None,
                None,
            ),
            K::DispatchLag => n(
                "dispatch_lag_ms",
                MS,
                Some(("credit_to_start_latency", "Credit-to-Start Latency")),
                Some("Dispatch lag (ms)"),
                None,
            ),
            K::E2eOutputTokenThroughput => n(
                "e2e_output_token_throughput_tps",
                TPS,
                Some(("e2e_output_token_throughput", "E2E Output Token Throughput")),
                Some("E2E output tokens/s per request"),
                None,
            ),
            K::EffectiveLatency => n(
                "effective_latency_ms",
                MS,
                Some(("effective_latency", "Effective Latency (CO-aware)")),
                None,
                None,
            ),
            K::EffectiveTimeToFirstToken => {
                n("effective_time_to_first_token_ms", MS, None, None, None)
            }
            K::HttpChunksReceived => n(
                "http_req_chunks_received",
                COUNT,
                Some(("http_req_chunks_received", "HTTP Chunks Received")),
                None,
                None,
            ),
            K::HttpChunksSent => n(
                "http_req_chunks_sent",
                COUNT,
                Some(("http_req_chunks_sent", "HTTP Chunks Sent")),
                None,
                None,
            ),
            K::HttpConnectionReused => n(
                "http_req_connection_reused",
                RATIO,
                Some(("http_req_connection_reused", "HTTP Connection Reused")),
                None,
                None,
            ),
            K::HttpDataReceived => n(
                "http_req_data_received_kb",
                KB,
                Some(("http_req_data_received", "HTTP Data Received")),
                None,
                None,
            ),
            K::HttpDataSent => n(
                "http_req_data_sent_kb",
                KB,
                Some(("http_req_data_sent", "HTTP Data Sent")),
                None,
                None,
            ),
            K::HttpReceiving => n(
                "http_req_receiving_ms",
                MS,
                Some(("http_req_receiving", "HTTP Receiving")),
                None,
                None,
            ),
            K::InputSequenceLength => n(
                "input_sequence_length",
                TOKENS,
                Some(("input_sequence_length", "Input Sequence Length")),
                Some("Input sequence length (tokens)"),
                None,
            ),
            K::InterChunkLatency => n(
                "inter_chunk_latency_ms",
                MS,
                Some(("inter_chunk_latency", "Inter Chunk Latency")),
                Some("Inter-chunk latency (ms)"),
                Some("itl"),
            ),
            K::InterTokenLatency => n(
                "inter_token_latency_ms",
                MS,
                Some(("inter_token_latency", "Inter Token Latency")),
                Some("Inter-token latency (ms)"),
                None,
            ),
            K::InterTokenLatencyTokenWeighted => n(
                "inter_token_latency_token_weighted_ms",
                MS,
                None,
                Some("ITL per token, weighted (ms)"),
                None,
            ),
            K::OslMismatchDiffPct => n(
                "osl_mismatch_diff_pct",
                PERCENT,
                Some(("osl_mismatch_diff_pct", "OSL Mismatch Diff %")),
                None,
                None,
            ),
            K::OutputSequenceLength => n(
                "output_sequence_length",
                TOKENS,
                Some(("output_sequence_length", "Output Sequence Length")),
                Some("Output sequence length (tokens)"),
                None,
            ),
            K::OutputTokenCount => n(
                "output_token_count",
                TOKENS,
                Some(("output_token_count", "Output Token Count")),
                None,
                None,
            ),
            K::OutputTokenThroughputPerUser => n(
                "output_token_throughput_per_user_tps",
                TPS,
                Some((
                    "output_token_throughput_per_user",
                    "Output Token Throughput Per User",
                )),
                Some("Output tokens/s per user"),
                None,
            ),
            K::PrefillThroughputPerUser => n(
                "prefill_throughput_per_user_tps",
                TPS,
                Some(("prefill_throughput_per_user", "Prefill Throughput Per User")),
                None,
                None,
            ),
            K::RequestLatency => n(
                "request_latency_ms",
                MS,
                Some(("request_latency", "Request Latency")),
                Some("Request latency (ms)"),
                Some("e2el"),
            ),
            K::SpecDecodeAcceptanceLength => n(
                "spec_decode_acceptance_length",
                RATIO,
                Some(("spec_decode_acceptance_length", "Acceptance Length")),
                Some("Acceptance length per request"),
                None,
            ),
            K::SpecDecodeAcceptedDraftTokens => n(
                "spec_decode_accepted_draft_tokens",
                TOKENS,
                Some(("spec_decode_accepted_draft_tokens", "Accepted Draft Tokens")),
                None,
                None,
            ),
            K::SpecDecodeAcceptedPerVerified => n(
                "spec_decode_accepted_per_verified",
                RATIO,
                Some(("spec_decode_accepted_per_verified", "Accepted per Verified")),
                None,
                None,
            ),
            K::SpecDecodeDraftAcceptanceRate => n(
                "spec_decode_draft_acceptance_rate",
                PERCENT,
                Some(("spec_decode_draft_acceptance_rate", "Draft Acceptance Rate")),
                Some("Draft acceptance rate per request (%)"),
                None,
            ),
            K::SpecDecodeDraftTokens => n(
                "spec_decode_draft_tokens",
                TOKENS,
                Some(("spec_decode_draft_tokens", "Draft Tokens")),
                None,
                None,
            ),
            K::SpecDecodeSteps => n(
                "spec_decode_steps",
                COUNT,
                Some(("spec_decode_steps", "Spec Decode Steps")),
                None,
                None,
            ),
            K::StreamAcceptanceLengthEstimate => {
                n("stream_acceptance_length_estimate", RATIO, None, None, None)
            }
            K::TimePerOutputToken => n("time_per_output_token_ms", MS, None, None, Some("tpot")),
            K::TimeToFirstOutputToken => n(
                "time_to_first_output_token_ms",
                MS,
                Some(("time_to_first_output_token", "Time to First Output Token")),
                Some("Time to first output token (ms)"),
                None,
            ),
            K::TimeToFirstToken => n(
                "time_to_first_token_ms",
                MS,
                Some(("time_to_first_token", "Time to First Token")),
                Some("Time to first token (ms)"),
                Some("ttft"),
            ),
            K::TimeToSecondToken => n(
                "time_to_second_token_ms",
                MS,
                Some(("time_to_second_token", "Time to Second Token")),
                Some("Time to second token (ms)"),
                None,
            ),
            K::UsageTotalTokens => n(
                "usage_total_tokens",
                TOKENS,
                Some(("usage_total_tokens", "Usage Total Tokens")),
                None,
                None,
            ),
        }
    }

    /// AIPerf's run total of this metric's usage value (`total_usage_*`, the sum over the
    /// requests) as (tag, CSV header), where AIPerf writes one.
    pub(crate) fn aiperf_usage_total(self) -> Option<(&'static str, &'static str)> {
        match self {
            MetricKey::InputSequenceLength => {
                Some(("total_usage_prompt_tokens", "Total Usage Prompt Tokens"))
            }
            MetricKey::OutputSequenceLength => Some((
                "total_usage_completion_tokens",
                "Total Usage Completion Tokens",
            )),
            MetricKey::UsageTotalTokens => {
                Some(("total_usage_total_tokens", "Total Usage Total Tokens"))
            }
            _ => None,
        }
    }

    /// AIPerf's other (tag, CSV header) pairs for this very value ([`ISL_TWINS`]); empty for most.
    pub(crate) fn aiperf_twins(self) -> &'static [(&'static str, &'static str)] {
        match self {
            MetricKey::InputSequenceLength => ISL_TWINS,
            MetricKey::OutputSequenceLength => OSL_TWINS,
            _ => &[],
        }
    }

    /// The `summary.json` key (unit in the name).
    pub(crate) fn as_str(self) -> &'static str {
        self.names().key
    }

    /// The unit AIPerf writes beside the value.
    pub(crate) fn unit(self) -> &'static str {
        self.names().unit
    }

    /// AIPerf's tag (`time_to_first_token`), where AIPerf has this metric.
    pub(crate) fn aiperf_tag(self) -> Option<&'static str> {
        self.names().aiperf.map(|(tag, _)| tag)
    }

    /// AIPerf's CSV header (`Time to First Token`), where AIPerf has this metric.
    pub(crate) fn aiperf_header(self) -> Option<&'static str> {
        self.names().aiperf.map(|(_, header)| header)
    }

    /// The console table's label, where the console shows this metric.
    pub(crate) fn console_label(self) -> Option<&'static str> {
        self.names().console
    }

    /// benchmark_serving's name (`ttft`, `tpot`, `itl`, `e2el`), where it reports this metric.
    pub(crate) fn vllm_name(self) -> Option<&'static str> {
        self.names().vllm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [MetricKey; 34] = [
        MetricKey::ClientInputSequenceLength,
        MetricKey::DecodeDuration,
        MetricKey::DispatchLag,
        MetricKey::E2eOutputTokenThroughput,
        MetricKey::EffectiveLatency,
        MetricKey::EffectiveTimeToFirstToken,
        MetricKey::HttpChunksReceived,
        MetricKey::HttpChunksSent,
        MetricKey::HttpConnectionReused,
        MetricKey::HttpDataReceived,
        MetricKey::HttpDataSent,
        MetricKey::HttpReceiving,
        MetricKey::InputSequenceLength,
        MetricKey::InterChunkLatency,
        MetricKey::InterTokenLatency,
        MetricKey::InterTokenLatencyTokenWeighted,
        MetricKey::OslMismatchDiffPct,
        MetricKey::OutputSequenceLength,
        MetricKey::OutputTokenCount,
        MetricKey::OutputTokenThroughputPerUser,
        MetricKey::PrefillThroughputPerUser,
        MetricKey::RequestLatency,
        MetricKey::SpecDecodeAcceptanceLength,
        MetricKey::SpecDecodeAcceptedDraftTokens,
        MetricKey::SpecDecodeAcceptedPerVerified,
        MetricKey::SpecDecodeDraftAcceptanceRate,
        MetricKey::SpecDecodeDraftTokens,
        MetricKey::SpecDecodeSteps,
        MetricKey::StreamAcceptanceLengthEstimate,
        MetricKey::TimePerOutputToken,
        MetricKey::TimeToFirstOutputToken,
        MetricKey::TimeToFirstToken,
        MetricKey::TimeToSecondToken,
        MetricKey::UsageTotalTokens,
    ];

    #[test]
    fn keys_are_unique_and_declared_in_name_order() {
        // Declared in the order of the summary keys, so ordering by the enum orders by name.
        let keys: Vec<&str> = ALL.iter().map(|k| k.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(keys, sorted);
        assert!(ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn units_match_the_key_suffix() {
        for k in ALL {
            let want = match k.as_str() {
                s if s.ends_with("_ms") => MS,
                s if s.ends_with("_tps") => TPS,
                s if s.ends_with("acceptance_length") || s.ends_with("_estimate") => RATIO,
                s if s.ends_with("_per_verified") => RATIO,
                s if s.ends_with("_rate") => PERCENT,
                s if s.ends_with("_steps") => COUNT,
                s if s.ends_with("_pct") => PERCENT,
                s if s.ends_with("_kb") => KB,
                s if s.ends_with("_reused") => RATIO,
                s if s.contains("_chunks_") => COUNT,
                _ => TOKENS,
            };
            assert_eq!(k.unit(), want, "{k:?}");
        }
    }
}
