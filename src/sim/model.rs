//! The simulator's speculative-decoding model and its vLLM-style counters (per engine, and per
//! `--acceptance-group` slot: the truth per group). The bottom of the simulator's files: it
//! imports none of them; `spec` reports from its emissions, `stream` moves its counters,
//! `metrics_page` writes them out.
//!
//! A request is planned up front from a seeded RNG: one prefill emission (1 token) after the
//! time to first token, then decode steps one inter-token latency apart. Each step proposes `k`
//! draft tokens, accepts them one by one with probability `p` until the first rejection, and emits
//! `accepted + 1` tokens. The counters are bumped when a step is actually emitted, so at any moment
//! `Σ completion_tokens streamed = requests_started_decoding + drafts + accepted`, exactly.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Probability of accepting each draft token in turn, or a target mean acceptance length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Acceptance {
    /// Per-position acceptance probability, conditional on the previous position being accepted.
    Probability(f64),
    /// Target mean AL (1 ≤ AL ≤ k + 1); converted to the probability that yields it.
    MeanAl(f64),
}

impl Acceptance {
    /// The per-position probability for `k` draft tokens.
    pub fn probability(self, k: u32) -> f64 {
        match self {
            Acceptance::Probability(p) => p.clamp(0.0, 1.0),
            Acceptance::MeanAl(al) => probability_for_al(al, k),
        }
    }
}

/// Expected AL with per-position probability `p` and `k` drafts: `1 + Σ_{i=1..k} p^i`.
pub fn expected_al(p: f64, k: u32) -> f64 {
    (1..=k)
        .fold((1.0, 1.0), |(sum, pow), _| (sum + pow * p, pow * p))
        .0
}

fn probability_for_al(al: f64, k: u32) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if expected_al(mid, k) < al {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Per-request plan inputs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanParams {
    pub(crate) max_tokens: u32,
    pub(crate) ignore_eos: bool,
    pub(crate) eos_probability: f64,
    pub(crate) k: u32,
    pub(crate) p: f64,
    pub(crate) ttft: Duration,
    pub(crate) itl: Duration,
    pub(crate) jitter: f64,
}

/// One emission: when (offset from the request's start), how many tokens, and for decode steps
/// how many drafts were accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Emission {
    pub(crate) at: Duration,
    pub(crate) tokens: u32,
    pub(crate) accepted: Option<u32>,
}

/// The full plan of one response.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) emissions: Vec<Emission>,
    pub(crate) finish_reason: &'static str,
}

impl Plan {
    pub(crate) fn total_tokens(&self) -> u32 {
        self.emissions.iter().map(|e| e.tokens).sum()
    }
}

/// A seeded RNG for request number `n`, so a run is reproducible whatever the interleaving.
pub(crate) fn request_rng(seed: u64, n: u64) -> SmallRng {
    SmallRng::seed_from_u64(splitmix(seed ^ splitmix(n)))
}

pub(super) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

pub(crate) fn plan(params: &PlanParams, rng: &mut SmallRng) -> Plan {
    let mut n = params.max_tokens.max(1);
    let mut finish_reason = "length";
    if !params.ignore_eos && params.eos_probability > 0.0 {
        // EOS may end the output after any token; the EOS token itself is not streamed.
        if let Some(i) = (1..n).find(|_| rng.random::<f64>() < params.eos_probability) {
            n = i;
            finish_reason = "stop";
        }
    }
    let jittered = |rng: &mut SmallRng, d: Duration| -> Duration {
        if params.jitter <= 0.0 {
            return d;
        }
        let f = 1.0 + params.jitter * (rng.random::<f64>() * 2.0 - 1.0);
        d.mul_f64(f.max(0.0))
    };
    let mut emissions = Vec::with_capacity((n as usize / 2).max(2));
    let mut at = jittered(rng, params.ttft);
    emissions.push(Emission {
        at,
        tokens: 1,
        accepted: None,
    });
    let mut left = n - 1;
    while left > 0 {
        let mut a = 0u32;
        while a < params.k && rng.random::<f64>() < params.p {
            a += 1;
        }
        // The last step may not emit more than the output has left.
        let a = a.min(left - 1);
        at += jittered(rng, params.itl);
        emissions.push(Emission {
            at,
            tokens: a + 1,
            accepted: Some(a),
        });
        left -= a + 1;
    }
    Plan {
        emissions,
        finish_reason,
    }
}

/// One engine's (data-parallel rank's) counters, exported vLLM-style with `engine="<rank>"`.
#[derive(Debug)]
pub(crate) struct EngineCounters {
    pub(crate) rank: u32,
    pub(crate) drafts: AtomicU64,
    pub(crate) draft_tokens: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) per_pos: Vec<AtomicU64>,
    pub(crate) generation_tokens: AtomicU64,
    pub(crate) prompt_tokens: AtomicU64,
    pub(crate) requests_success: AtomicU64,
    pub(crate) running: AtomicU64,
    /// Prompt tokens looked up in the prefix cache (`vllm:prefix_cache_queries`).
    pub(crate) prefix_cache_queries: AtomicU64,
    /// Of those, tokens found cached (`vllm:prefix_cache_hits`).
    pub(crate) prefix_cache_hits: AtomicU64,
    /// The same generation and speculative counts, added only when a request ends (llama.cpp's
    /// timing: its `/metrics` moves them as a request finishes, never per step).
    pub(crate) at_finish: FinishedCounters,
    /// The speculative counters again, per `--acceptance-group` rule then the unmatched slot
    /// (empty without rules): the truth per group.
    pub(crate) groups: Vec<GroupCounters>,
    /// vLLM's request latencies, timed when each emission goes out: what the simulator actually
    /// sent, which a client's figures can be held against when it cannot keep its schedule.
    pub(crate) latency: LatencyHistograms,
}

/// vLLM's latency histograms, as its engine observes them: the time to first token and the gap
/// before every later step, as they happen; the request's mean time per output token
/// (`(last − first) / (tokens − 1)`) and its end-to-end latency, as it ends.
#[derive(Debug)]
pub(crate) struct LatencyHistograms {
    pub(crate) ttft: LatencyHistogram,
    pub(crate) itl: LatencyHistogram,
    pub(crate) request_tpot: LatencyHistogram,
    pub(crate) e2e: LatencyHistogram,
}

/// vLLM's buckets (`vllm/v1/metrics/loggers.py`), seconds: the time to first token's.
pub(crate) const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// The inter-token latency's and the request time per output token's.
pub(crate) const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// The end-to-end request latency's.
pub(crate) const REQUEST_LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// One Prometheus histogram: a count per bucket (not cumulative; the last is above every bound)
/// and the sum in nanoseconds, so that sums of whole nanoseconds add up exactly.
#[derive(Debug)]
pub(crate) struct LatencyHistogram {
    pub(crate) bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_ns: AtomicU64,
}

/// A histogram read out: cumulative counts per bound then `+Inf` (the count), and the sum.
#[derive(Debug, PartialEq)]
pub(crate) struct HistogramReading {
    pub(crate) cumulative: Vec<u64>,
    pub(crate) sum_secs: f64,
}

impl LatencyHistogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Self {
        LatencyHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        // Prometheus' `le`: the first bound at or above the value.
        let i = self.bounds.partition_point(|&b| b < secs);
        self.counts[i].fetch_add(1, Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    pub(crate) fn read(&self) -> HistogramReading {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|c| {
                total += c.load(Relaxed);
                total
            })
            .collect();
        HistogramReading {
            cumulative,
            sum_secs: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

/// Counters that move once per request, when it ends (`EngineCounters::on_finished`).
#[derive(Debug)]
pub(crate) struct FinishedCounters {
    pub(crate) generation_tokens: AtomicU64,
    pub(crate) drafts: AtomicU64,
    pub(crate) draft_tokens: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) per_pos: Vec<AtomicU64>,
}

impl EngineCounters {
    /// An engine's zeroed counters; `groups` is the number of group slots (rules + 1, or 0).
    pub(crate) fn new(rank: u32, k: u32, groups: usize) -> Self {
        EngineCounters {
            rank,
            drafts: AtomicU64::new(0),
            draft_tokens: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            per_pos: (0..k).map(|_| AtomicU64::new(0)).collect(),
            generation_tokens: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            requests_success: AtomicU64::new(0),
            running: AtomicU64::new(0),
            prefix_cache_queries: AtomicU64::new(0),
            prefix_cache_hits: AtomicU64::new(0),
            at_finish: FinishedCounters {
                generation_tokens: AtomicU64::new(0),
                drafts: AtomicU64::new(0),
                draft_tokens: AtomicU64::new(0),
                accepted: AtomicU64::new(0),
                per_pos: (0..k).map(|_| AtomicU64::new(0)).collect(),
            },
            groups: (0..groups).map(|_| GroupCounters::default()).collect(),
            latency: LatencyHistograms {
                ttft: LatencyHistogram::new(TTFT_BUCKETS),
                itl: LatencyHistogram::new(ITL_BUCKETS),
                request_tpot: LatencyHistogram::new(ITL_BUCKETS),
                e2e: LatencyHistogram::new(REQUEST_LATENCY_BUCKETS),
            },
        }
    }

    /// Counts a request's emitted emissions at once, as it ends (the `at_finish` counters).
    pub(crate) fn on_finished(&self, emitted: &[Emission], k: u32) {
        let f = &self.at_finish;
        let (mut tokens, mut drafts, mut accepted) = (0u64, 0u64, 0u64);
        let mut per_pos = vec![0u64; f.per_pos.len()];
        for e in emitted {
            tokens += u64::from(e.tokens);
            if let Some(a) = e.accepted {
                drafts += 1;
                accepted += u64::from(a);
                for p in per_pos.iter_mut().take(a as usize) {
                    *p += 1;
                }
            }
        }
        f.generation_tokens.fetch_add(tokens, Relaxed);
        f.drafts.fetch_add(drafts, Relaxed);
        f.draft_tokens.fetch_add(drafts * u64::from(k), Relaxed);
        f.accepted.fetch_add(accepted, Relaxed);
        for (c, n) in f.per_pos.iter().zip(per_pos) {
            c.fetch_add(n, Relaxed);
        }
    }

    /// Counts one emitted emission, and in group slot `group` when there are groups.
    pub(crate) fn on_emission(&self, e: &Emission, k: u32, group: usize) {
        if let Some(g) = self.groups.get(group) {
            g.on_emission(e, k);
        }
        self.generation_tokens
            .fetch_add(u64::from(e.tokens), Relaxed);
        if let Some(a) = e.accepted {
            self.drafts.fetch_add(1, Relaxed);
            self.draft_tokens.fetch_add(u64::from(k), Relaxed);
            self.accepted.fetch_add(u64::from(a), Relaxed);
            for pos in self.per_pos.iter().take(a as usize) {
                pos.fetch_add(1, Relaxed);
            }
        }
    }
}

/// One group's truth: counted per emitted step exactly as the `vllm:spec_decode_*` counters.
#[derive(Debug, Default)]
pub(crate) struct GroupCounters {
    pub(crate) drafts: AtomicU64,
    pub(crate) draft_tokens: AtomicU64,
    pub(crate) accepted: AtomicU64,
}

impl GroupCounters {
    pub(crate) fn on_emission(&self, e: &Emission, k: u32) {
        if let Some(a) = e.accepted {
            self.drafts.fetch_add(1, Relaxed);
            self.draft_tokens.fetch_add(u64::from(k), Relaxed);
            self.accepted.fetch_add(u64::from(a), Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(max_tokens: u32, p: f64) -> PlanParams {
        PlanParams {
            max_tokens,
            ignore_eos: true,
            eos_probability: 0.0,
            k: 3,
            p,
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            jitter: 0.0,
        }
    }

    #[test]
    fn plan_emits_exactly_max_tokens_and_accepted_plus_one_per_step() {
        for seed in 0..50 {
            let plan = plan(&params(256, 0.7), &mut request_rng(7, seed));
            assert_eq!(plan.total_tokens(), 256);
            assert_eq!(
                plan.emissions[0],
                Emission {
                    at: Duration::from_millis(50),
                    tokens: 1,
                    accepted: None
                }
            );
            for (i, e) in plan.emissions.iter().enumerate().skip(1) {
                let a = e.accepted.unwrap();
                assert!(a <= 3);
                assert_eq!(e.tokens, a + 1);
                assert_eq!(e.at, Duration::from_millis(50 + 10 * i as u64));
            }
        }
    }

    #[test]
    fn certain_acceptance_gives_k_plus_one_tokens_per_step() {
        let plan = plan(&params(9, 1.0), &mut request_rng(1, 1));
        let tokens: Vec<u32> = plan.emissions.iter().map(|e| e.tokens).collect();
        assert_eq!(tokens, [1, 4, 4]);
    }

    #[test]
    fn mean_al_target_converts_to_probability() {
        let p = Acceptance::MeanAl(2.5).probability(3);
        assert!((expected_al(p, 3) - 2.5).abs() < 1e-9);
        assert!((expected_al(0.5, 3) - 1.875).abs() < 1e-12);
        assert!((Acceptance::MeanAl(4.0).probability(3) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn counters_match_emissions() {
        let c = EngineCounters::new(0, 3, 2);
        let plan = plan(&params(100, 0.6), &mut request_rng(3, 9));
        for e in &plan.emissions {
            c.on_emission(e, 3, 1);
        }
        let drafts = c.drafts.load(Relaxed);
        let accepted = c.accepted.load(Relaxed);
        assert_eq!(1 + drafts + accepted, 100);
        assert_eq!(c.draft_tokens.load(Relaxed), 3 * drafts);
        let per_pos: u64 = c.per_pos.iter().map(|x| x.load(Relaxed)).sum();
        assert_eq!(per_pos, accepted);
        assert!(c.per_pos[0].load(Relaxed) >= c.per_pos[1].load(Relaxed));
        // The group slot counted the same emissions; the other slot nothing.
        let g = &c.groups[1];
        assert_eq!(g.drafts.load(Relaxed), drafts);
        assert_eq!(g.draft_tokens.load(Relaxed), 3 * drafts);
        assert_eq!(g.accepted.load(Relaxed), accepted);
        assert_eq!(c.groups[0].drafts.load(Relaxed), 0);
    }
}
