//! One successful request's metrics, computed once from its record and read by both the
//! aggregator and the per-request AIPerf export.

use super::{ms, secs, MetricKey};
use crate::record::{HttpTrace, RequestRecord};

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
    /// `usage.total_tokens`, when the server reported it.
    pub(crate) usage_total: Option<u64>,
    /// (OSL − requested) / requested · 100, when the request asked for a length.
    pub(crate) osl_mismatch_pct: Option<f64>,
    /// The OSL missed the requested one by more than AIPerf's threshold
    /// ([`OSL_MISMATCH_PCT`] of it, at most [`OSL_MISMATCH_MAX_TOKENS`] tokens).
    pub(crate) osl_mismatch: bool,
    /// What the HTTP exchange measured, once headers arrived.
    pub(crate) http: Option<HttpMetrics>,
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

/// AIPerf's OSL mismatch threshold (`AIPERF_METRICS_OSL_MISMATCH_PCT_THRESHOLD`'s default): a
/// response whose length is off by more than this percentage of the requested one...
pub(crate) const OSL_MISMATCH_PCT: f64 = 5.0;
/// ...or by more than this many tokens, whichever is fewer, counts in `osl_mismatch_count`.
pub(crate) const OSL_MISMATCH_MAX_TOKENS: f64 = 50.0;

/// One request's HTTP figures, in AIPerf's `http_req_*` units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct HttpMetrics {
    /// 1 on a reused connection, else 0.
    pub(crate) connection_reused: u64,
    /// Request body frames (the body goes out as one).
    pub(crate) chunks_sent: u64,
    /// Response body frames.
    pub(crate) chunks_received: u64,
    /// Request body, KB of 1024 bytes.
    pub(crate) data_sent_kb: f64,
    /// Response body, KB of 1024 bytes.
    pub(crate) data_received_kb: f64,
    /// First to last response body frame, ms (`None` without a body).
    pub(crate) receiving_ms: Option<f64>,
}

impl HttpMetrics {
    fn of(h: &HttpTrace) -> HttpMetrics {
        HttpMetrics {
            connection_reused: u64::from(h.connection_reused),
            chunks_sent: u64::from(h.bytes_sent > 0),
            chunks_received: u64::from(h.frames_received),
            data_sent_kb: h.bytes_sent as f64 / 1024.0,
            data_received_kb: h.bytes_received as f64 / 1024.0,
            receiving_ms: h.receiving_ns().map(ms),
        }
    }

    /// Each figure under its metric key.
    pub(crate) fn values(&self) -> impl Iterator<Item = (MetricKey, f64)> {
        [
            (
                MetricKey::HttpChunksReceived,
                Some(self.chunks_received as f64),
            ),
            (MetricKey::HttpChunksSent, Some(self.chunks_sent as f64)),
            (
                MetricKey::HttpConnectionReused,
                Some(self.connection_reused as f64),
            ),
            (MetricKey::HttpDataReceived, Some(self.data_received_kb)),
            (MetricKey::HttpDataSent, Some(self.data_sent_kb)),
            (MetricKey::HttpReceiving, self.receiving_ms),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
    }
}

impl RecordMetrics {
    /// The metrics of `r`, read as a successful request.
    pub(crate) fn of(r: &RequestRecord) -> RecordMetrics {
        let osl = r.completion_tokens.unwrap_or(0);
        let isl = r.prompt_tokens;
        let latency = r.latency_ns();
        let requested = r.requested_osl.filter(|&n| n > 0).map(|n| n as f64);
        let mut m = RecordMetrics {
            latency_ms: ms(latency),
            isl,
            osl,
            reasoning: r.reasoning_tokens,
            usage_total: r.total_tokens,
            osl_mismatch_pct: requested.map(|n| (osl as f64 - n) / n * 100.0),
            osl_mismatch: requested.is_some_and(|n| {
                (osl as f64 - n).abs() > (n * OSL_MISMATCH_PCT / 100.0).min(OSL_MISMATCH_MAX_TOKENS)
            }),
            http: r.http.as_ref().map(HttpMetrics::of),
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
