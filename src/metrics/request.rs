//! One successful request's metrics, computed once from its record and read by both the
//! aggregator and the per-request AIPerf export.

use super::{ms, secs};
use crate::record::RequestRecord;

/// One successful request's metrics, AIPerf's definitions (`aiperf-compat.md` §3). The aggregator
/// and the per-request export both read them from here, so the two can never disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RecordMetrics {
    /// First content response − request start.
    pub(crate) ttft_ms: Option<f64>,
    /// Second content response − first.
    pub(crate) ttst_ms: Option<f64>,
    /// First non-reasoning content − start.
    pub(crate) ttfo_ms: Option<f64>,
    /// Last content response − start.
    pub(crate) latency_ms: f64,
    /// Latency − TTFT.
    pub(crate) decode_ms: Option<f64>,
    /// AIPerf ITL: (latency − TTFT) / (OSL − tokens of the first chunk).
    pub(crate) itl_ms: Option<f64>,
    /// vLLM TPOT: (latency − TTFT) / (OSL − 1).
    pub(crate) tpot_ms: Option<f64>,
    /// 1 / ITL, tokens per second.
    pub(crate) otps_user: Option<f64>,
    /// OSL / latency, tokens per second.
    pub(crate) e2e_tps: Option<f64>,
    /// ISL / TTFT, tokens per second.
    pub(crate) prefill_tps: Option<f64>,
    /// `usage.prompt_tokens`.
    pub(crate) isl: Option<u64>,
    /// `usage.completion_tokens` (reasoning included; 0 without usage).
    pub(crate) osl: u64,
    /// Reasoning tokens, when the server split them out.
    pub(crate) reasoning: Option<u64>,
    /// End − intended start (coordinated omission).
    pub(crate) effective_latency_ms: f64,
    /// First token − intended start.
    pub(crate) effective_ttft_ms: Option<f64>,
    /// Sent − intended start.
    pub(crate) dispatch_lag_ms: f64,
    /// Gaps between consecutive content responses.
    pub(crate) chunk_gaps: usize,
    /// The stream estimate's inputs: tokens after the first content event and the content
    /// events after it (a decode step that accepted `a` drafts delivers `a + 1` tokens in one
    /// event). The first event's tokens come from per-chunk usage, else are taken as 1 (the
    /// prefill token), as the ITL does. `None` without a stream or a decode event.
    pub(crate) decode_tokens_events: Option<(u64, u64)>,
}

impl RecordMetrics {
    /// The metrics of `r`, read as a successful request.
    pub(crate) fn of(r: &RequestRecord) -> RecordMetrics {
        let osl = r.completion_tokens.unwrap_or(0);
        let isl = r.prompt_tokens;
        let latency = r.latency_ns();
        let mut m = RecordMetrics {
            latency_ms: ms(latency),
            isl,
            osl,
            reasoning: r.reasoning_tokens,
            effective_latency_ms: ms(r.end_ns.saturating_sub(r.intended_ns)),
            dispatch_lag_ms: ms(r.sent_ns.saturating_sub(r.intended_ns)),
            chunk_gaps: r.chunk_gaps.len(),
            ..RecordMetrics::default()
        };
        if latency > 0 {
            m.e2e_tps = Some(osl as f64 / secs(latency));
        }
        let Some(ttft) = r.ttft_ns() else {
            return m;
        };
        m.ttft_ms = Some(ms(ttft));
        m.effective_ttft_ms = r
            .first_token_ns
            .map(|t| ms(t.saturating_sub(r.intended_ns)));
        let isl = isl.unwrap_or(0);
        if isl > 0 && ttft > 0 {
            m.prefill_tps = Some(isl as f64 / secs(ttft));
        }
        if let (Some(t2), Some(t1)) = (r.second_token_ns, r.first_token_ns) {
            m.ttst_ms = Some(ms(t2.saturating_sub(t1)));
        }
        m.ttfo_ms = r
            .first_output_token_ns
            .map(|t| ms(t.saturating_sub(r.sent_ns)));
        let decode = latency.saturating_sub(ttft);
        m.decode_ms = Some(ms(decode));
        let first = r.first_chunk_tokens.unwrap_or(1).max(1);
        if osl > first {
            let itl = decode as f64 / (osl - first) as f64;
            m.itl_ms = Some(itl / 1e6);
            if itl > 0.0 {
                m.otps_user = Some(1e9 / itl);
            }
        }
        if osl > 1 {
            m.tpot_ms = Some(decode as f64 / (osl - 1) as f64 / 1e6);
        }
        let events = u64::from(r.content_events.saturating_sub(1));
        if events > 0 && osl > first {
            m.decode_tokens_events = Some((osl - first, events));
        }
        m
    }
}
