//! The one aggregator: every [`RequestRecord`] passes through here exactly once.
//!
//! It appends the record to the JSONL artifact (flushed per record, so a killed run keeps every
//! finished request), keeps exact per-request values for numpy-compatible percentiles, folds
//! per-chunk gaps into HDR histograms, and publishes a live [`Progress`] snapshot.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::merge::{one_of, StaticName};
use crate::record::{FailureKind, Outcome, Phase, RequestRecord, TokenSource};
use crate::schedule::{ArrivalPattern, DispatchStats, Shard};
use crate::scrape::ScrapeReport;

/// Statistics of one metric. Percentiles use numpy's default linear interpolation over all
/// values; `std` is the population standard deviation.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stat {
    /// Number of values.
    pub count: u64,
    /// Mean.
    pub avg: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Sum.
    pub sum: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Percentiles keyed `p1`…`p99`, `p99.9`.
    #[serde(flatten)]
    pub percentiles: BTreeMap<String, f64>,
}

/// The percentiles every stat reports.
pub(crate) const PERCENTILES: [f64; 11] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0,
];

fn pct_key(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("p{p:.0}")
    } else {
        format!("p{p}")
    }
}

/// numpy `percentile(x, p)` (linear) on sorted values.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

impl Stat {
    /// Exact statistics of `values` (NaN values are dropped).
    pub fn of(values: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let sum: f64 = v.iter().sum();
        let avg = sum / n;
        let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n;
        let percentiles = PERCENTILES
            .iter()
            .filter(|&&p| p < 100.0)
            .map(|&p| (pct_key(p), percentile_sorted(&v, p)))
            .collect();
        Some(Stat {
            count: v.len() as u64,
            avg,
            min: v[0],
            max: v[v.len() - 1],
            sum,
            std: var.sqrt(),
            percentiles,
        })
    }

    fn of_hist(h: &Histogram<u64>, scale: f64) -> Option<Stat> {
        if h.is_empty() {
            return None;
        }
        let percentiles = PERCENTILES
            .iter()
            .filter(|&&p| p < 100.0)
            .map(|&p| (pct_key(p), h.value_at_quantile(p / 100.0) as f64 / scale))
            .collect();
        Some(Stat {
            count: h.len(),
            avg: h.mean() / scale,
            min: h.min() as f64 / scale,
            max: h.max() as f64 / scale,
            sum: h.mean() * h.len() as f64 / scale,
            std: h.stdev() / scale,
            percentiles,
        })
    }

    /// A percentile by its key (`"p99"`).
    pub fn p(&self, key: &str) -> f64 {
        self.percentiles.get(key).copied().unwrap_or(f64::NAN)
    }
}

/// Live counters, updated per record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Records received.
    pub done: u64,
    /// Successful records.
    pub ok: u64,
    /// Failed records.
    pub failed: u64,
    /// Cancelled records.
    pub cancelled: u64,
    /// Completion tokens of successful records.
    pub output_tokens: u64,
    /// Live acceptance length (baseline scrape to the latest one), when known.
    pub acceptance_length: Option<f64>,
    /// Warmup records received.
    pub warmup: u64,
    /// Profiling requests planned (`None` when the run is bounded by time instead).
    pub planned: Option<u64>,
    /// Issue limit of the profiling phase (`--benchmark-duration`), seconds.
    pub duration_s: Option<f64>,
    /// When the profiling phase began (after warmup), for rates and ETA.
    pub profiling_started: Option<std::time::Instant>,
}

/// Request counts by outcome.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    /// Every record.
    pub total: u64,
    /// Successful.
    pub success: u64,
    /// Failed (any kind).
    pub failed: u64,
    /// Cancelled by the run (deadline or signal).
    pub cancelled: u64,
    /// Failed, by kind.
    pub failed_by_kind: BTreeMap<&'static str, u64>,
    /// Failed with an HTTP status, by status.
    pub http_status: BTreeMap<u16, u64>,
    /// Warmup requests (any outcome; in no other count or statistic).
    pub warmup: u64,
}

/// The aggregator's state: feed it every record with [`Aggregate::add`], then build the
/// [`Summary`]. The engine runs one per run; it is public for benches and offline summaries.
pub struct Aggregate {
    pub(crate) counts: Counts,
    values: BTreeMap<&'static str, Vec<f64>>,
    chunk_gap_ns: Histogram<u64>,
    token_itl_ns: Histogram<u64>,
    pub(crate) first_sent_ns: Option<u64>,
    pub(crate) last_end_ns: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) reasoning_tokens: u64,
    pub(crate) token_sources: BTreeMap<&'static str, u64>,
    reads: u64,
    content_events: u64,
    zero_gaps: u64,
    gaps: u64,
    slos: Vec<Slo>,
    good: u64,
    pub(crate) write_error: Option<String>,
    /// Client-side input token counts per sample (`--tokenizer`), for first turns.
    pub(crate) client_isl: Option<Arc<[u64]>>,
}

// Per-chunk histograms: 1 ns to 1 hour at 3 significant digits; longer gaps saturate at the top
// bucket. `histograms.json` records these bounds so a merge only adds like to like.
const HIST_LOW_NS: u64 = 1;
const HIST_HIGH_NS: u64 = 3_600_000_000_000;
const HIST_DIGITS: u8 = 3;

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_DIGITS).expect("valid HDR bounds")
}

/// Version of the `histograms.json` layout.
pub(crate) const HISTOGRAMS_SCHEMA: &str = "specperf.histograms.v1";

/// The per-chunk HDR histograms, as written to `histograms.json`: each recorded bucket as
/// `[value_ns, count]`, where the value is the bucket's highest equivalent value, so recording
/// the pairs again into a histogram with the same bounds rebuilds it bucket for bucket. This is
/// what lets `specperf merge` add shards' per-chunk gaps, which `records.jsonl` does not carry.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Histograms {
    pub(crate) schema_version: String,
    pub(crate) lowest_ns: u64,
    pub(crate) highest_ns: u64,
    pub(crate) significant_digits: u8,
    /// Gaps between consecutive content events (`inter_chunk_latency_ms`).
    pub(crate) inter_chunk_gap_ns: Vec<[u64; 2]>,
    /// Each token of a chunk at gap / tokens (`inter_token_latency_token_weighted_ms`).
    pub(crate) token_itl_ns: Vec<[u64; 2]>,
}

fn buckets(h: &Histogram<u64>) -> Vec<[u64; 2]> {
    h.iter_recorded()
        .map(|v| [v.value_iterated_to(), v.count_at_value()])
        .collect()
}

impl Default for Aggregate {
    fn default() -> Self {
        Aggregate::new()
    }
}

impl Aggregate {
    /// An empty aggregator without goodput objectives.
    pub fn new() -> Self {
        Aggregate {
            counts: Counts::default(),
            values: BTreeMap::new(),
            chunk_gap_ns: hist(),
            token_itl_ns: hist(),
            first_sent_ns: None,
            last_end_ns: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
            token_sources: BTreeMap::new(),
            reads: 0,
            content_events: 0,
            zero_gaps: 0,
            gaps: 0,
            slos: Vec::new(),
            good: 0,
            write_error: None,
            client_isl: None,
        }
    }

    /// An aggregator that also counts requests meeting every one of `slos` (goodput).
    pub fn with_goodput(slos: Vec<Slo>) -> Self {
        Aggregate {
            slos,
            ..Aggregate::new()
        }
    }

    fn push(&mut self, key: &'static str, v: f64) {
        self.values.entry(key).or_default().push(v);
    }

    /// The per-chunk histograms, for `histograms.json`.
    pub(crate) fn histograms(&self) -> Histograms {
        Histograms {
            schema_version: HISTOGRAMS_SCHEMA.to_owned(),
            lowest_ns: HIST_LOW_NS,
            highest_ns: HIST_HIGH_NS,
            significant_digits: HIST_DIGITS,
            inter_chunk_gap_ns: buckets(&self.chunk_gap_ns),
            token_itl_ns: buckets(&self.token_itl_ns),
        }
    }

    /// Adds another run's per-chunk histograms (its records must be added with [`Self::add`]
    /// too; their `chunk_gaps` are not serialized, so `add` leaves the histograms alone for them).
    pub(crate) fn add_histograms(&mut self, h: &Histograms) -> Result<(), String> {
        if h.schema_version != HISTOGRAMS_SCHEMA {
            return Err(format!(
                "schema {:?}, this specperf reads {HISTOGRAMS_SCHEMA:?}",
                h.schema_version
            ));
        }
        if (h.lowest_ns, h.highest_ns, h.significant_digits)
            != (HIST_LOW_NS, HIST_HIGH_NS, HIST_DIGITS)
        {
            return Err(format!(
                "histogram bounds {}..{} ns at {} digits differ from this specperf's \
                 {HIST_LOW_NS}..{HIST_HIGH_NS} ns at {HIST_DIGITS}",
                h.lowest_ns, h.highest_ns, h.significant_digits
            ));
        }
        for &[v, n] in &h.inter_chunk_gap_ns {
            self.chunk_gap_ns.saturating_record_n(v, n);
            self.gaps += n;
            // Value 0 has a bucket of its own, so this is the exact count of zero gaps.
            if v == 0 {
                self.zero_gaps += n;
            }
        }
        for &[v, n] in &h.token_itl_ns {
            self.token_itl_ns.saturating_record_n(v, n);
        }
        Ok(())
    }

    /// Folds one record in.
    pub fn add(&mut self, r: &RequestRecord) {
        if r.phase == Phase::Warmup {
            self.counts.warmup += 1;
            return;
        }
        self.first_sent_ns = Some(self.first_sent_ns.map_or(r.sent_ns, |f| f.min(r.sent_ns)));
        self.last_end_ns = self.last_end_ns.max(r.end_ns);
        self.push(
            "dispatch_lag_ms",
            ms(r.sent_ns.saturating_sub(r.intended_ns)),
        );
        let c = &mut self.counts;
        c.total += 1;
        match r.outcome {
            Outcome::Success => c.success += 1,
            Outcome::Cancelled => {
                c.cancelled += 1;
                return;
            }
            Outcome::Failed(kind) => {
                c.failed += 1;
                *c.failed_by_kind.entry(kind.as_str()).or_default() += 1;
                if kind == FailureKind::HttpStatus {
                    if let Some(s) = r.http_status {
                        *c.http_status.entry(s).or_default() += 1;
                    }
                }
                return;
            }
        }
        let source = match r.token_source {
            TokenSource::UsagePerChunk => "usage_per_chunk",
            TokenSource::UsageFinal => "usage_final",
            TokenSource::None => "none",
        };
        *self.token_sources.entry(source).or_default() += 1;
        self.reads += u64::from(r.reads);
        self.content_events += u64::from(r.content_events);
        let m = RecordMetrics::of(r);
        self.prompt_tokens += m.isl.unwrap_or(0);
        self.completion_tokens += m.osl;
        self.reasoning_tokens += m.reasoning.unwrap_or(0);
        if !self.slos.is_empty() && self.slos.iter().all(|s| s.met(&m)) {
            self.good += 1;
        }
        self.push("request_latency_ms", m.latency_ms);
        // From the intended start: what a user arriving on schedule saw (coordinated omission).
        self.push("effective_latency_ms", m.effective_latency_ms);
        self.push("output_sequence_length", m.osl as f64);
        if let Some(n) = self
            .client_isl
            .as_ref()
            .filter(|_| r.turn == 0)
            .and_then(|c| c.get(r.sample_index))
        {
            self.push("client_input_sequence_length", *n as f64);
        }
        let optional = [
            ("input_sequence_length", m.isl.map(|v| v as f64)),
            ("time_to_first_token_ms", m.ttft_ms),
            ("effective_time_to_first_token_ms", m.effective_ttft_ms),
            ("prefill_throughput_per_user_tps", m.prefill_tps),
            ("time_to_second_token_ms", m.ttst_ms),
            ("time_to_first_output_token_ms", m.ttfo_ms),
            ("decode_duration_ms", m.decode_ms),
            ("inter_token_latency_ms", m.itl_ms),
            ("time_per_output_token_ms", m.tpot_ms),
            ("output_token_throughput_per_user_tps", m.otps_user),
            ("e2e_output_token_throughput_tps", m.e2e_tps),
        ];
        for (key, v) in optional {
            if let Some(v) = v {
                self.push(key, v);
            }
        }
        for g in &r.chunk_gaps {
            self.gaps += 1;
            if g.gap_ns == 0 {
                self.zero_gaps += 1;
            }
            self.chunk_gap_ns.saturating_record(g.gap_ns);
            if g.tokens > 0 {
                // Token-weighted: each token of the chunk saw gap / tokens.
                self.token_itl_ns
                    .saturating_record_n(g.gap_ns / u64::from(g.tokens), u64::from(g.tokens));
            }
        }
    }

    /// Builds the final summary.
    pub fn summary(&self, meta: RunMeta) -> Summary {
        let duration_ns = self
            .first_sent_ns
            .map_or(0, |f| self.last_end_ns.saturating_sub(f));
        let d = secs(duration_ns);
        let per_s = |x: f64| if d > 0.0 { x / d } else { 0.0 };
        let mut metrics: BTreeMap<String, Stat> = self
            .values
            .iter()
            .filter_map(|(k, v)| Stat::of(v).map(|s| ((*k).to_string(), s)))
            .collect();
        if let Some(s) = Stat::of_hist(&self.chunk_gap_ns, 1e6) {
            metrics.insert("inter_chunk_latency_ms".into(), s);
        }
        if let Some(s) = Stat::of_hist(&self.token_itl_ns, 1e6) {
            metrics.insert("inter_token_latency_token_weighted_ms".into(), s);
        }
        let mut warnings = Vec::new();
        let zero_gap_fraction = if self.gaps > 0 {
            self.zero_gaps as f64 / self.gaps as f64
        } else {
            0.0
        };
        if zero_gap_fraction > 0.10 {
            warnings.push(format!(
                "{:.0}% of gaps between content events are 0: the server batches several events per write (--stream-interval?), so per-chunk gaps understate ITL",
                zero_gap_fraction * 100.0
            ));
        }
        if self.counts.success > 0 && self.token_sources.get("none").copied().unwrap_or(0) > 0 {
            warnings.push(
                "some successful responses carried no usage; their tokens are not counted".into(),
            );
        }
        let total = self.counts.total;
        let goodput = (!self.slos.is_empty()).then(|| Goodput {
            slos: self.slos.clone(),
            good_request_count: self.good,
            goodput_rps: per_s(self.good as f64),
            good_request_fraction: if total > 0 {
                self.good as f64 / total as f64
            } else {
                0.0
            },
        });
        let first_sent_s = self.first_sent_ns.map_or(0.0, secs);
        let lens = |k: &str| -> Vec<u64> {
            self.values
                .get(k)
                .map(|v| v.iter().map(|x| *x as u64).collect())
                .unwrap_or_default()
        };
        Summary {
            benchmark_start_unix_s: meta.start_unix_s + first_sent_s,
            benchmark_end_unix_s: meta.start_unix_s + first_sent_s + d,
            goodput,
            per_request: PerRequest {
                input_lens: lens("input_sequence_length"),
                output_lens: lens("output_sequence_length"),
            },
            schema_version: SUMMARY_SCHEMA,
            specperf_version: env!("CARGO_PKG_VERSION"),
            meta,
            percentile_method: "numpy linear interpolation over exact per-request values; per-chunk metrics from HDR histograms (3 significant digits); std is population",
            counts: self.counts.clone(),
            duration_s: d,
            request_throughput_rps: per_s(self.counts.success as f64),
            output_token_throughput_tps: per_s(self.completion_tokens as f64),
            input_token_throughput_tps: per_s(self.prompt_tokens as f64),
            total_token_throughput_tps: per_s((self.prompt_tokens + self.completion_tokens) as f64),
            total_prompt_tokens: self.prompt_tokens,
            total_completion_tokens: self.completion_tokens,
            total_reasoning_tokens: self.reasoning_tokens,
            tokens_counted_by: self.token_sources.clone(),
            content_events_per_read: if self.reads > 0 { self.content_events as f64 / self.reads as f64 } else { 0.0 },
            zero_gap_fraction,
            metrics,
            warnings,
            acceptance: None,
        }
    }
}

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
        m
    }
}

/// A metric a goodput SLO can bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    /// `time_to_first_token` (vLLM `ttft`), ms; smaller is better.
    TimeToFirstToken,
    /// `inter_token_latency` (vLLM `tpot`), ms; smaller is better.
    InterTokenLatency,
    /// `request_latency` (vLLM `e2el`), ms; smaller is better.
    RequestLatency,
    /// `output_token_throughput_per_user`, tokens/s; larger is better.
    OutputTokenThroughputPerUser,
}

impl SloMetric {
    /// Parses a vLLM (`ttft`, `tpot`, `e2el`) or AIPerf tag name.
    pub fn from_tag(tag: &str) -> Option<SloMetric> {
        Some(match tag {
            "ttft" | "time_to_first_token" => SloMetric::TimeToFirstToken,
            "tpot" | "itl" | "inter_token_latency" => SloMetric::InterTokenLatency,
            "e2el" | "request_latency" => SloMetric::RequestLatency,
            "output_token_throughput_per_user" => SloMetric::OutputTokenThroughputPerUser,
            _ => return None,
        })
    }

    /// AIPerf's tag.
    pub fn tag(self) -> &'static str {
        match self {
            SloMetric::TimeToFirstToken => "time_to_first_token",
            SloMetric::InterTokenLatency => "inter_token_latency",
            SloMetric::RequestLatency => "request_latency",
            SloMetric::OutputTokenThroughputPerUser => "output_token_throughput_per_user",
        }
    }

    /// The threshold's unit.
    pub fn unit(self) -> &'static str {
        match self {
            SloMetric::OutputTokenThroughputPerUser => "tokens/sec/user",
            _ => "ms",
        }
    }

    /// True when a value must be at least the threshold (throughputs), not at most.
    pub fn larger_is_better(self) -> bool {
        self == SloMetric::OutputTokenThroughputPerUser
    }
}

/// One goodput service-level objective: a metric and its bound.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Slo {
    /// The bounded metric.
    pub metric: SloMetric,
    /// The bound (ms for latencies, tokens/s for throughputs).
    pub threshold: f64,
}

impl Slo {
    /// Whether a successful request met this objective; a metric the request lacks (ITL of a
    /// one-token answer, TTFT of a non-streamed one) fails it, as in AIPerf.
    pub(crate) fn met(&self, m: &RecordMetrics) -> bool {
        let v = match self.metric {
            SloMetric::TimeToFirstToken => m.ttft_ms,
            SloMetric::InterTokenLatency => m.itl_ms,
            SloMetric::RequestLatency => Some(m.latency_ms),
            SloMetric::OutputTokenThroughputPerUser => m.otps_user,
        };
        match v {
            Some(v) if self.metric.larger_is_better() => v >= self.threshold,
            Some(v) => v <= self.threshold,
            None => false,
        }
    }
}

/// Goodput: requests that met every SLO.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Goodput {
    /// The objectives, as given to `--goodput`.
    pub slos: Vec<Slo>,
    /// Successful requests that met every objective.
    pub good_request_count: u64,
    /// Good requests per second of the benchmark duration.
    pub goodput_rps: f64,
    /// Good requests over every profiling request (failed and cancelled ones are never good).
    pub good_request_fraction: f64,
}

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
    #[serde(deserialize_with = "endpoint_type_name")]
    pub endpoint_type: StaticName,
    /// Output tokens asked for per request (`None`: the server decides).
    pub osl: Option<u32>,
    /// The command line, when the binary recorded it.
    pub cli_command: Option<String>,
    /// Streaming on.
    pub streaming: bool,
    /// Closed-loop concurrency.
    pub concurrency: usize,
    /// Requests planned.
    pub request_count: u64,
    /// Samples in the collection.
    pub samples: usize,
    /// Whether samples were sent more than once (request count above the collection size).
    pub dataset_reused: bool,
    /// Input file, or the bundled collection.
    pub input: String,
    /// Run start, Unix seconds.
    pub start_unix_s: f64,
    /// Why the run ended early, if it did (`deadline`, `interrupted`, `terminated`, `stalled`).
    pub stopped_by: Option<String>,
    /// Load shape and what the dispatcher did.
    pub load: LoadMeta,
    /// The per-request timeouts used.
    #[serde(deserialize_with = "timeout_names")]
    pub timeouts_s: BTreeMap<&'static str, f64>,
}

fn endpoint_type_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::merge::one_of(d, &["chat", "completions"])
}

/// The keys of `timeouts_s`, as the engine writes them.
const TIMEOUT_NAMES: &[&str] = &["connect", "first_token", "idle", "request", "run"];

fn timeout_names<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<&'static str, f64>, D::Error> {
    use serde::de::Error;
    BTreeMap::<String, f64>::deserialize(d)?
        .into_iter()
        .map(|(k, v)| {
            let k = TIMEOUT_NAMES
                .iter()
                .find(|n| **n == k)
                .ok_or_else(|| D::Error::unknown_field(&k, TIMEOUT_NAMES))?;
            Ok((*k, v))
        })
        .collect()
}

fn load_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    one_of(d, &["closed", "open", "trace"])
}

/// How the load was shaped, and what the dispatcher did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadMeta {
    /// `closed` (fixed concurrency), `open` (request rate) or `trace` (timestamps).
    #[serde(deserialize_with = "load_mode")]
    pub mode: StaticName,
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
            mode: "closed",
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
    pub tokens_counted_by: BTreeMap<&'static str, u64>,
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
    /// First send, Unix seconds.
    pub benchmark_start_unix_s: f64,
    /// Last end, Unix seconds.
    pub benchmark_end_unix_s: f64,
    /// Requests that met every `--goodput` objective (absent without `--goodput`).
    pub goodput: Option<Goodput>,
    /// Per-request token counts for the InferenceX raw JSON (not in `summary.json`).
    #[serde(skip)]
    pub(crate) per_request: PerRequest,
}

/// Per-request values that only the InferenceX raw JSON lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerRequest {
    /// `usage.prompt_tokens` of each successful request that reported it, in completion order.
    pub(crate) input_lens: Vec<u64>,
    /// `usage.completion_tokens` of each successful request, in completion order.
    pub(crate) output_lens: Vec<u64>,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Where the aggregator writes each record as it arrives.
pub(crate) struct Sinks {
    /// `records.jsonl`: our own record shape.
    pub(crate) records: Option<Box<dyn Write + Send>>,
    /// `profile_export.jsonl`: AIPerf's record shape.
    pub(crate) profile_export: Option<Box<dyn Write + Send>>,
    /// Unix time of the run clock's zero, ns (AIPerf records carry epoch timestamps).
    pub(crate) epoch_ns: u64,
}

/// Appends one line made by `encode` to `sink` and flushes it; on failure records the error and
/// drops the sink (measuring goes on; the run reports the artifact failure at the end).
fn append(
    sink: &mut Option<Box<dyn Write + Send>>,
    line: &mut Vec<u8>,
    error: &mut Option<String>,
    encode: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) {
    let Some(w) = sink.as_mut() else { return };
    line.clear();
    let res = encode(line)
        .map_err(std::io::Error::from)
        .and_then(|()| {
            line.push(b'\n');
            w.write_all(line)
        })
        .and_then(|()| w.flush());
    if let Err(e) = res {
        error.get_or_insert(e.to_string());
        *sink = None;
    }
}

/// Runs the aggregator until every sender is dropped, writing each record to the sinks.
pub(crate) async fn aggregate(
    mut rx: mpsc::Receiver<RequestRecord>,
    mut sinks: Sinks,
    progress: Arc<watch::Sender<Progress>>,
    slos: Vec<Slo>,
    client_isl: Option<Arc<[u64]>>,
) -> Aggregate {
    let mut agg = Aggregate::with_goodput(slos);
    agg.client_isl = client_isl;
    let mut line = Vec::with_capacity(1024);
    while let Some(rec) = rx.recv().await {
        append(&mut sinks.records, &mut line, &mut agg.write_error, |l| {
            serde_json::to_writer(l, &rec)
        });
        append(
            &mut sinks.profile_export,
            &mut line,
            &mut agg.write_error,
            |l| crate::report::aiperf::write_record(l, &rec, sinks.epoch_ns),
        );
        agg.add(&rec);
        progress.send_modify(|p| {
            if rec.phase == Phase::Warmup {
                p.warmup += 1;
                return;
            }
            p.done += 1;
            match rec.outcome {
                Outcome::Success => {
                    p.ok += 1;
                    p.output_tokens += rec.completion_tokens.unwrap_or(0);
                }
                Outcome::Failed(_) => p.failed += 1,
                Outcome::Cancelled => p.cancelled += 1,
            }
        });
    }
    agg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RequestRecord;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn percentiles_match_numpy_vectors() {
        let s = Stat::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(
            close(s.p("p1"), 1.03)
                && close(s.p("p50"), 2.5)
                && close(s.p("p90"), 3.7)
                && close(s.p("p99"), 3.97)
        );
        assert!(close(s.std, 1.118_034_0));
        let s = Stat::of(&[12.0, 15.5, 9.25, 30.0, 11.0]).unwrap();
        let want = [
            ("p1", 9.32),
            ("p5", 9.6),
            ("p10", 9.95),
            ("p25", 11.0),
            ("p50", 12.0),
            ("p75", 15.5),
            ("p90", 24.2),
            ("p95", 27.1),
            ("p99", 29.42),
        ];
        for (k, v) in want {
            assert!(close(s.p(k), v), "{k}: {} != {v}", s.p(k));
        }
        assert!(close(s.avg, 15.55) && close(s.std, 7.507_329_8));
    }

    #[test]
    fn aiperf_metric_vector() {
        // Start 0; content at 100, 150, 200, 260 ms; completion_tokens 10.
        let mut r = RequestRecord::started(0, 0, 0, 0);
        r.outcome = Outcome::Success;
        r.first_token_ns = Some(100_000_000);
        r.second_token_ns = Some(150_000_000);
        r.last_token_ns = Some(260_000_000);
        r.end_ns = 261_000_000;
        r.completion_tokens = Some(10);
        r.token_source = TokenSource::UsageFinal;
        let mut a = Aggregate::new();
        a.add(&r);
        let v = |k: &str| a.values[k][0];
        assert!(close(v("time_to_first_token_ms"), 100.0));
        assert!(close(v("time_to_second_token_ms"), 50.0));
        assert!(close(v("request_latency_ms"), 260.0));
        assert!(close(v("inter_token_latency_ms"), 17.777_777_8));
        assert!(close(v("output_token_throughput_per_user_tps"), 56.25));
        assert!(close(v("e2e_output_token_throughput_tps"), 38.461_538_5));
    }

    #[test]
    fn failures_are_counted_by_kind_and_status_and_excluded_from_latency() {
        let mut a = Aggregate::new();
        let mut r = RequestRecord::started(0, 0, 0, 0);
        r.outcome = Outcome::Failed(FailureKind::HttpStatus);
        r.http_status = Some(503);
        a.add(&r);
        let mut r = RequestRecord::started(1, 0, 0, 0);
        r.outcome = Outcome::Failed(FailureKind::IdleTimeout);
        a.add(&r);
        a.add(&RequestRecord::started(2, 0, 0, 0));
        assert_eq!(
            (
                a.counts.total,
                a.counts.failed,
                a.counts.cancelled,
                a.counts.success
            ),
            (3, 2, 1, 0)
        );
        assert_eq!(a.counts.failed_by_kind["http_status"], 1);
        assert_eq!(a.counts.http_status[&503], 1);
        assert!(!a.values.contains_key("request_latency_ms"));
    }
}
