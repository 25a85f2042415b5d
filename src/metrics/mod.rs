//! The one aggregator: every [`RequestRecord`] passes through here exactly once.
//!
//! It appends the record to the JSONL artifact (flushed per record, so a killed run keeps every
//! finished request), keeps exact per-request values for numpy-compatible percentiles, folds
//! per-chunk gaps into HDR histograms, and publishes a live [`Progress`] snapshot.

//!
//! Split by concern: [`stat`] (exact statistics), [`request`] (one request's metrics),
//! [`goodput`] (SLOs), [`key`] (the one table of metric names), [`summary`] (the output contract),
//! [`sweep`] (AIPerf's time-weighted metrics over the requests' times).

mod agentx;
mod goodput;
mod isl;
mod key;
pub(crate) mod numpy;
mod request;
mod spec;
mod stat;
mod store;
mod summary;
#[cfg(test)]
mod tests;
mod time_weighted;
mod view;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

pub use agentx::AgentxCounts;
pub(crate) use agentx::{AgentxInputs, AgentxRunMeta, BranchStats, Provenance};
pub use goodput::{Goodput, Slo, SloMetric};
pub(crate) use isl::IslByGroup;
pub use isl::{GroupIsl, IslCheck};
pub(crate) use key::MetricKey;
pub(crate) use request::RecordMetrics;
pub(crate) use spec::{
    spec_metrics, GroupSpec, SpecSummary, VsCounters, AL_BIN_WIDTH, RELIABLE_WITHIN_PCT,
};
#[cfg(test)]
pub(crate) use spec::{AlBin, SpecTotals, StreamEstimate};
pub(crate) use stat::percentile_sorted;
pub use stat::Stat;
pub(crate) use summary::PerRequest;
pub use summary::{LoadMeta, RunMeta, Summary, TimeoutKind, SUMMARY_SCHEMA};
pub(crate) use time_weighted::SweepMetric;
pub(crate) use view::{SpecTotalsView, SummaryView, ViewError};

use crate::progress::Progress;
use crate::record::{FailureKind, Outcome, Phase, RequestRecord, TokenSource};
use time_weighted::{Done, Span};

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
    /// Successes whose response had usage but no text (counted in the token totals).
    #[serde(skip_serializing_if = "is_zero")]
    pub empty_output: u64,
    /// Requests sent again: on a fresh connection after a reused one closed before any response
    /// byte, or after a 429 with `--rate-limit-retries` (each counted once, whatever its outcome).
    #[serde(skip_serializing_if = "is_zero")]
    pub retried: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The aggregator's state: feed it every record with [`Aggregate::add`], then build the
/// [`Summary`]. The engine runs one per run; it is public for benches and offline summaries.
pub struct Aggregate {
    pub(crate) counts: Counts,
    /// AgentX counts, from the first record carrying session metadata.
    agentx: Option<AgentxCounts>,
    /// Every request's metric values and span, exact and in arrival order; the older ones in a
    /// temporary file once many are held (`store`).
    store: store::Store,
    chunk_gap_ns: Histogram<u64>,
    token_itl_ns: Histogram<u64>,
    pub(crate) first_sent_ns: Option<u64>,
    pub(crate) last_end_ns: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) reasoning_tokens: u64,
    pub(crate) token_sources: BTreeMap<TokenSource, u64>,
    reads: u64,
    content_events: u64,
    zero_gaps: u64,
    gaps: u64,
    slos: Vec<Slo>,
    good: u64,
    pub(crate) write_error: Option<String>,
    /// Client-side input token counts per sample (`--tokenizer`), for first turns.
    pub(crate) client_isl: Option<Arc<[u64]>>,
    /// Successful first turns' prompt tokens per group (usage, else the client's count), for
    /// SPEED-Bench's prompt-length check; `None` unless the run replays a Throughput file.
    pub(crate) isl_by_group: Option<IslByGroup>,
    /// The first failure of each kind, to explain a failed run.
    first_failures: BTreeMap<FailureKind, FirstFailure>,
    /// Speculative decoding per request (reported figures, stream estimate, groups).
    spec: spec::SpecAgg,
    /// Successful requests whose output length missed the requested one (AIPerf's
    /// `osl_mismatch_count`).
    osl_mismatch: u64,
    /// The warmup records, folded exactly as profiling ones are (AIPerf's `warmup_metrics`);
    /// `None` until the first warmup record.
    warmup: Option<Box<Aggregate>>,
    /// The realtime stats block's TTFT and ITL medians; kept only by the run's aggregator task
    /// ([`aggregate`]), not by the summary's other aggregates.
    live: Option<Box<LiveMedians>>,
}

/// The run's TTFT and ITL so far, for the realtime stats block's medians: one HDR histogram per
/// metric (1 ns to 1 hour, 3 significant digits), so a median costs a walk over its buckets
/// rather than a read of every value of the run. Reading the run's values back once a second
/// made each read larger than the last: over an hour's soak that cost CPU growing with the
/// run and left the allocator's heap fragmented by ever larger buffers (issue 38). The
/// summary's statistics stay exact; these are within 0.1 %.
struct LiveMedians {
    ttft_ns: Histogram<u64>,
    itl_ns: Histogram<u64>,
}

impl LiveMedians {
    fn record(&mut self, key: MetricKey, ms: f64) {
        let h = match key {
            MetricKey::TimeToFirstToken => &mut self.ttft_ns,
            MetricKey::InterTokenLatency => &mut self.itl_ns,
            _ => return,
        };
        if ms.is_finite() {
            h.saturating_record((ms * 1e6).round().max(1.0) as u64);
        }
    }

    /// The median as numpy takes it (the mean of the two middle values of an even count), each
    /// middle value read as the middle of its bucket; ms.
    fn median_ms(h: &Histogram<u64>) -> Option<f64> {
        let n = h.len();
        if n == 0 {
            return None;
        }
        // 1-based ranks of the middle values.
        let (lo_rank, hi_rank) = if n % 2 == 0 {
            (n / 2, n / 2 + 1)
        } else {
            (n / 2 + 1, n / 2 + 1)
        };
        let (mut seen, mut lo) = (0, None);
        for v in h.iter_recorded() {
            seen += v.count_at_value();
            let x = h.median_equivalent(v.value_iterated_to()) as f64;
            if lo.is_none() && seen >= lo_rank {
                lo = Some(x);
            }
            if seen >= hi_rank {
                return Some((lo.unwrap_or(x) + x) / 2.0 / 1e6);
            }
        }
        None
    }
}

/// The first failed request of one kind: what the server (or the transport) said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FirstFailure {
    /// HTTP status, when headers arrived.
    pub(crate) http_status: Option<u16>,
    /// The error text of the record (already redacted by the client).
    pub(crate) message: String,
    /// When the first failure of this kind ended, ns on the run's clock.
    pub(crate) first_ns: u64,
    /// When the latest one ended: with `first_ns`, the window in which this kind happened (a
    /// worker that died, a frontend that restarted).
    pub(crate) last_ns: u64,
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

/// Why another run's `histograms.json` cannot be added to this aggregator.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistogramsError {
    /// Another layout version.
    #[error("schema {0:?}, this specperf reads {HISTOGRAMS_SCHEMA:?}")]
    Schema(String),
    /// Other bucket bounds: the buckets would not line up.
    #[error(
        "histogram bounds {lowest_ns}..{highest_ns} ns at {digits} digits differ from this \
         specperf's {HIST_LOW_NS}..{HIST_HIGH_NS} ns at {HIST_DIGITS}"
    )]
    Bounds {
        lowest_ns: u64,
        highest_ns: u64,
        digits: u8,
    },
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
            agentx: None,
            store: store::Store::default(),
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
            isl_by_group: None,
            first_failures: BTreeMap::new(),
            spec: spec::SpecAgg::default(),
            osl_mismatch: 0,
            warmup: None,
            live: None,
        }
    }

    /// An aggregator that also counts requests meeting every one of `slos` (goodput).
    pub fn with_goodput(slos: Vec<Slo>) -> Self {
        Aggregate {
            slos,
            ..Aggregate::new()
        }
    }

    /// Keeps the realtime stats block's medians ([`Aggregate::live_medians`]) from now on.
    pub(crate) fn keep_live_medians(&mut self) {
        self.live = Some(Box::new(LiveMedians {
            ttft_ns: hist(),
            itl_ns: hist(),
        }));
    }

    /// The medians of TTFT and ITL so far, ms (`None` before the first value, or when
    /// [`Aggregate::keep_live_medians`] was not called).
    pub(crate) fn live_medians(&self) -> (Option<f64>, Option<f64>) {
        self.live.as_ref().map_or((None, None), |l| {
            (
                LiveMedians::median_ms(&l.ttft_ns),
                LiveMedians::median_ms(&l.itl_ns),
            )
        })
    }

    fn push(&mut self, key: MetricKey, v: f64) {
        if let Some(l) = &mut self.live {
            l.record(key, v);
        }
        self.store.push(key, v);
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
    pub(crate) fn add_histograms(&mut self, h: &Histograms) -> Result<(), HistogramsError> {
        if h.schema_version != HISTOGRAMS_SCHEMA {
            return Err(HistogramsError::Schema(h.schema_version.clone()));
        }
        if (h.lowest_ns, h.highest_ns, h.significant_digits)
            != (HIST_LOW_NS, HIST_HIGH_NS, HIST_DIGITS)
        {
            return Err(HistogramsError::Bounds {
                lowest_ns: h.lowest_ns,
                highest_ns: h.highest_ns,
                digits: h.significant_digits,
            });
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
        if r.session.is_some() && self.agentx.get_or_insert_default().add(r) {
            // A context overflow ends its session; it is in no statistic (AIPerf's
            // `context_overflow_skip`).
            return;
        }
        if r.phase == Phase::Warmup {
            self.counts.warmup += 1;
            let w = self.warmup.get_or_insert_with(Box::default);
            if let Some(s) = r.session.as_deref() {
                w.agentx.get_or_insert_default().count(r, s);
            }
            w.fold(r);
            return;
        }
        self.fold(r);
    }

    /// Folds one record of the phase this aggregator measures into every statistic.
    fn fold(&mut self, r: &RequestRecord) {
        self.first_sent_ns = Some(self.first_sent_ns.map_or(r.sent_ns, |f| f.min(r.sent_ns)));
        self.last_end_ns = self.last_end_ns.max(r.end_ns);
        self.push(
            MetricKey::DispatchLag,
            ms(r.sent_ns.saturating_sub(r.intended_ns)),
        );
        if !r.outcome.is_success() {
            self.store.push_span(Span {
                sent_ns: r.sent_ns,
                end_ns: r.end_ns,
                done: None,
            });
        }
        let c = &mut self.counts;
        c.total += 1;
        c.retried += u64::from(r.retries > 0);
        match r.outcome {
            Outcome::Success => {
                c.success += 1;
                c.empty_output += u64::from(r.empty_output);
            }
            Outcome::Cancelled => {
                c.cancelled += 1;
                return;
            }
            Outcome::Failed(kind) => {
                let f = self
                    .first_failures
                    .entry(kind)
                    .or_insert_with(|| FirstFailure {
                        http_status: r.http_status,
                        message: r.error.clone().unwrap_or_default(),
                        first_ns: r.end_ns,
                        last_ns: r.end_ns,
                    });
                f.first_ns = f.first_ns.min(r.end_ns);
                f.last_ns = f.last_ns.max(r.end_ns);
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
        *self.token_sources.entry(r.token_source).or_default() += 1;
        self.reads += u64::from(r.reads);
        self.content_events += u64::from(r.content_events);
        let m = RecordMetrics::of(r);
        self.store.push_span(Span {
            sent_ns: r.sent_ns,
            end_ns: r.end_ns,
            done: Some(Done {
                // AIPerf's generation start is request start + TTFT: none without a TTFT.
                first_token_ns: r.first_token_ns.filter(|_| m.ttft_ms.is_some()),
                isl: m.isl,
                osl: m.osl,
            }),
        });
        self.prompt_tokens += m.isl.unwrap_or(0);
        self.completion_tokens += m.osl;
        self.reasoning_tokens += m.reasoning.unwrap_or(0);
        if !self.slos.is_empty() && self.slos.iter().all(|s| s.met(&m)) {
            self.good += 1;
        }
        self.push(MetricKey::RequestLatency, m.latency_ms);
        // From the intended start: what a user arriving on schedule saw (coordinated omission).
        self.push(MetricKey::EffectiveLatency, m.effective_latency_ms);
        self.push(MetricKey::OutputSequenceLength, m.osl as f64);
        // AIPerf has no output token count for a request without output tokens.
        let output = m.osl.saturating_sub(m.reasoning.unwrap_or(0));
        if output > 0 {
            self.push(MetricKey::OutputTokenCount, output as f64);
        }
        let client_isl = self
            .client_isl
            .as_ref()
            .filter(|_| r.turn == 0)
            .and_then(|c| c.get(r.sample_index))
            .copied();
        if let Some(n) = client_isl {
            self.push(MetricKey::ClientInputSequenceLength, n as f64);
        }
        if let (Some(isl), Some(g), Some(n), 0) = (
            self.isl_by_group.as_mut(),
            &r.group,
            m.isl.or(client_isl),
            r.turn,
        ) {
            isl.add(g, n);
        }
        let optional = [
            (MetricKey::InputSequenceLength, m.isl.map(|v| v as f64)),
            (MetricKey::TimeToFirstToken, m.ttft_ms),
            (MetricKey::EffectiveTimeToFirstToken, m.effective_ttft_ms),
            (MetricKey::PrefillThroughputPerUser, m.prefill_tps),
            (MetricKey::TimeToSecondToken, m.ttst_ms),
            (MetricKey::TimeToFirstOutputToken, m.ttfo_ms),
            (MetricKey::DecodeDuration, m.decode_ms),
            (MetricKey::InterTokenLatency, m.itl_ms),
            (MetricKey::TimePerOutputToken, m.tpot_ms),
            (MetricKey::OutputTokenThroughputPerUser, m.otps_user),
            (MetricKey::E2eOutputTokenThroughput, m.e2e_tps),
        ];
        for (key, v) in optional {
            if let Some(v) = v {
                self.push(key, v);
            }
        }
        if let Some(n) = m.usage_total {
            self.push(MetricKey::UsageTotalTokens, n as f64);
        }
        if let Some(pct) = m.osl_mismatch_pct {
            self.push(MetricKey::OslMismatchDiffPct, pct);
            self.osl_mismatch += u64::from(m.osl_mismatch);
        }
        for (key, v) in m.http.iter().flat_map(|h| h.values()) {
            self.push(key, v);
        }
        self.spec.add(r, m.decode_tokens_events);
        if let Some(s) = &r.spec {
            for (key, v) in spec::spec_metrics(s) {
                self.push(key, v.as_f64());
            }
        }
        if let Some((tokens, events)) = m.decode_tokens_events {
            self.push(
                MetricKey::StreamAcceptanceLengthEstimate,
                tokens as f64 / events as f64,
            );
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
        let warmup_meta = self.warmup.is_some().then(|| meta.clone());
        let duration_ns = self
            .first_sent_ns
            .map_or(0, |f| self.last_end_ns.saturating_sub(f));
        let d = secs(duration_ns);
        let per_s = |x: f64| if d > 0.0 { x / d } else { 0.0 };
        let mut metrics: BTreeMap<String, Stat> = self
            .store
            .keys()
            .filter_map(|k| {
                let v = self.store.get(k)?;
                Stat::of(&v).map(|s| (k.as_str().to_string(), s))
            })
            .collect();
        if let Some(s) = Stat::of_hist(&self.chunk_gap_ns, 1e6) {
            metrics.insert(MetricKey::InterChunkLatency.as_str().into(), s);
        }
        if let Some(s) = Stat::of_hist(&self.token_itl_ns, 1e6) {
            metrics.insert(MetricKey::InterTokenLatencyTokenWeighted.as_str().into(), s);
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
        if self.counts.success > 0
            && self
                .token_sources
                .get(&TokenSource::None)
                .copied()
                .unwrap_or(0)
                > 0
        {
            warnings.push(
                "some successful responses carried no usage; their tokens are not counted".into(),
            );
        }
        warnings.extend(self.spec.warning());
        warnings.extend(self.store.warning());
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
        let lens = |k: MetricKey| -> Vec<u64> {
            self.store
                .get(k)
                .map(|v| v.iter().map(|x| *x as u64).collect())
                .unwrap_or_default()
        };
        let spans = self.store.spans();
        Summary {
            benchmark_start_unix_s: meta.start_unix_s + first_sent_s,
            benchmark_end_unix_s: meta.start_unix_s + first_sent_s + d,
            goodput,
            per_request: PerRequest {
                input_lens: lens(MetricKey::InputSequenceLength),
                output_lens: lens(MetricKey::OutputSequenceLength),
                max_concurrent_requests: peak_in_flight(
                    spans
                        .iter()
                        .filter(|s| s.done.is_some())
                        .map(|s| (s.sent_ns, s.end_ns)),
                ),
            },
            time_weighted: time_weighted::sweep_metrics(&spans),
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
            energy: None,
            telemetry: None,
            spec_decode: self.spec.summary(
                &self.store.get(MetricKey::SpecDecodeAcceptanceLength).unwrap_or_default(),
                &self.store.get(MetricKey::StreamAcceptanceLengthEstimate).unwrap_or_default(),
            ),
            speed_bench_isl: None,
            agentx: self.agentx.clone(),
            agentx_run: None,
            first_failures: self.first_failures.clone(),
            branch_stats: None,
            osl_mismatch_count: self
                .store
                .contains_key(MetricKey::OslMismatchDiffPct)
                .then_some(self.osl_mismatch),
            warmup: self
                .warmup
                .as_deref()
                .zip(warmup_meta)
                .map(|(w, meta)| Box::new(w.summary(meta))),
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Encodes one record as one line (no newline) into the buffer. The aggregator does not know the
/// artifact formats: the engine hands it one encoder per sink (`report` owns the formats), so the
/// arrow runs from report down to metrics, never back.
pub(crate) type RecordEncoder =
    Box<dyn Fn(&mut Vec<u8>, &RequestRecord) -> serde_json::Result<()> + Send>;

/// One JSONL file the aggregator appends each record to as it arrives.
pub(crate) struct RecordSink {
    writer: Box<dyn Write + Send>,
    encode: RecordEncoder,
}

impl RecordSink {
    /// A sink writing `encode`'s line for each record to `writer`.
    pub(crate) fn new(writer: Box<dyn Write + Send>, encode: RecordEncoder) -> RecordSink {
        RecordSink { writer, encode }
    }

    /// Appends one record's line and flushes it, so a killed run keeps every finished request.
    fn append(&mut self, line: &mut Vec<u8>, rec: &RequestRecord) -> std::io::Result<()> {
        line.clear();
        (self.encode)(line, rec)?;
        if line.is_empty() {
            // The format leaves this record out (AIPerf's context-overflow records).
            return Ok(());
        }
        line.push(b'\n');
        self.writer.write_all(line)?;
        self.writer.flush()
    }
}

/// Runs the aggregator until every sender is dropped, writing each record to the sinks.
pub(crate) async fn aggregate(
    mut rx: mpsc::Receiver<RequestRecord>,
    mut sinks: Vec<RecordSink>,
    progress: Arc<watch::Sender<Progress>>,
    slos: Vec<Slo>,
    client_isl: Option<Arc<[u64]>>,
    isl_check: bool,
) -> Aggregate {
    let mut agg = Aggregate::with_goodput(slos);
    agg.client_isl = client_isl;
    agg.isl_by_group = isl_check.then(IslByGroup::default);
    agg.keep_live_medians();
    let mut line = Vec::with_capacity(1024);
    // The live medians cost a walk over two histograms' buckets: at most once a second.
    let mut medians_at: Option<std::time::Instant> = None;
    while let Some(rec) = rx.recv().await {
        // A sink that fails is dropped with its error recorded: measuring goes on, and the run
        // reports the artifact failure at the end.
        sinks.retain_mut(|sink| match sink.append(&mut line, &rec) {
            Ok(()) => true,
            Err(e) => {
                agg.write_error.get_or_insert(e.to_string());
                false
            }
        });
        agg.add(&rec);
        let now = std::time::Instant::now();
        let medians = (rec.outcome.is_success()
            && medians_at.is_none_or(|t| now.duration_since(t).as_secs() >= 1))
        .then(|| {
            medians_at = Some(now);
            agg.live_medians()
        });
        progress.send_modify(|p| {
            if let Some((ttft, itl)) = medians {
                p.ttft_p50_ms = ttft.or(p.ttft_p50_ms);
                p.itl_p50_ms = itl.or(p.itl_p50_ms);
            }
            if rec.phase == Phase::Warmup {
                p.warmup += 1;
                return;
            }
            p.done += 1;
            match rec.outcome {
                Outcome::Success => {
                    p.ok += 1;
                    p.output_tokens += rec.completion_tokens.unwrap_or(0);
                    p.input_tokens += rec.prompt_tokens.unwrap_or(0);
                }
                Outcome::Failed(_) => p.failed += 1,
                Outcome::Cancelled => p.cancelled += 1,
            }
        });
    }
    agg
}

/// The most successful requests in flight at once: a sweep over their `[sent, end)` intervals,
/// an end before a start at the same instant (`vllm bench serve`'s `max_concurrent_requests`).
fn peak_in_flight(busy: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut events: Vec<(u64, i64)> = busy
        .flat_map(|(start, end)| [(start, 1), (end, -1)])
        .collect();
    events.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    peak as u64
}
