//! The state the simulator's parts share, at its three scopes: the whole simulator ([`Shared`]:
//! settings, engines with their counters and schedulers, the timer, the lateness histogram), one
//! server ([`ServerCtx`]: its range of engines) and one connection ([`ConnState`]). `server`
//! builds it, `http` and `stream` read and move it, `metrics_page` writes it out; it imports only
//! the parts below it (`model`'s counters, `sched`, `timer`, `gpu`'s fleet).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::Value;
use tokio::sync::Notify;

use super::gpu_fleet::GpuFleet;
use super::model::EngineCounters;
use super::sched::EngineSched;
use super::timer::PreciseTimer;
use super::SimConfig;

/// Lateness of emissions against their schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatenessStats {
    /// Emissions measured.
    pub count: u64,
    /// Median lateness, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
}

/// How one request got onto its engine (kept for the first `record_requests` requests, for tests
/// that check the cache and the queue without timing anything).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Admission {
    /// Engine (global rank) it ran on.
    pub engine: u32,
    /// Prompt tokens, as counted by the simulator.
    pub prompt_tokens: u64,
    /// Of those, tokens found in the prefix cache.
    pub cached_tokens: u64,
    /// The time to first token the simulator planned: its base TTFT plus the uncached tokens'
    /// prefill (before jitter).
    pub planned_ttft: Duration,
    /// Time spent waiting for a running slot and KV blocks.
    pub waited: Duration,
}

/// What every connection of every server shares.
pub(super) struct Shared {
    pub(super) cfg: SimConfig,
    /// Per-draft-token acceptance probability.
    pub(super) p: f64,
    pub(super) timer: PreciseTimer,
    pub(super) engines: Vec<EngineCounters>,
    /// Each engine's scheduler and KV cache, beside its counters.
    pub(super) sched: Vec<EngineSched>,
    /// How the first `record_requests` admitted requests were admitted, in admission order.
    pub(super) admissions: Mutex<Vec<Admission>>,
    /// Arrival counter: request ids, per-request seeds and the fault sequence.
    pub(super) seq: AtomicU64,
    /// Lateness histogram (ns) and its sum.
    pub(super) lateness: Mutex<(Histogram<u64>, u64)>,
    /// Start time, Unix seconds (the `_created` series and the `created` field).
    pub(super) created: f64,
    /// The model name as a JSON string.
    pub(super) model_json: String,
    /// Completion requests served over HTTP/2 (the rest were HTTP/1.x).
    pub(super) http2_requests: AtomicU64,
    /// Completion requests received (a soak checks one record per request against it).
    pub(super) received: AtomicU64,
    /// When the simulator started (`SimConfig::faults_after` counts from it).
    pub(super) started: std::time::Instant,
    /// The first `record_requests` request bodies, for tests that check what was sent.
    pub(super) requests: Mutex<Vec<Value>>,
    /// The admission limit's bucket (`SimConfig::rate_limit`).
    pub(super) limiter: Option<governor::DefaultDirectRateLimiter>,
    /// Completion requests refused 429 by the admission limit.
    pub(super) rate_limited: AtomicU64,
    /// The simulated GPUs (`SimConfig::gpus`), ticked by `server`, written out by `dcgm_page`.
    pub(super) gpus: Option<GpuFleet>,
}

impl Shared {
    pub(super) fn record_lateness(&self, late: Duration) {
        let ns = late.as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut g = self.lateness.lock().unwrap_or_else(|e| e.into_inner());
        g.0.saturating_record(ns.max(1));
        g.1 += ns;
    }

    /// Requests admitted and not finished, per engine (global rank): the GPUs' load.
    pub(super) fn running_per_engine(&self) -> Vec<u64> {
        self.engines
            .iter()
            .map(|e| e.running.load(Relaxed))
            .collect()
    }
}

/// One server (listener): the shared state and the engines it spreads requests over.
pub(super) struct ServerCtx {
    pub(super) shared: Arc<Shared>,
    /// Indices into `Shared::engines`.
    pub(super) engines: Range<usize>,
    /// Round-robin position over `engines`.
    pub(super) rr: AtomicU64,
}

/// The lateness histogram's count, median, 99th percentile and worst.
pub(super) fn lateness_stats(shared: &Shared) -> LatenessStats {
    let g = shared.lateness.lock().unwrap_or_else(|e| e.into_inner());
    let h = &g.0;
    let ms = |ns: u64| ns as f64 / 1e6;
    LatenessStats {
        count: h.len(),
        p50_ms: ms(h.value_at_quantile(0.5)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
    }
}

/// One connection's state, shared by the requests on it: whether a `close-after-done` response
/// has doomed it.
#[derive(Default)]
pub(super) struct ConnState {
    pub(super) doomed: AtomicBool,
    /// Notified once when the connection is doomed.
    pub(super) doomed_now: Notify,
    /// Notified when a request arrives on a doomed connection.
    pub(super) next_request: Notify,
}

impl ConnState {
    /// Called by a `close-after-done` response as its last frame goes out.
    pub(super) fn doom(&self) {
        if !self.doomed.swap(true, Relaxed) {
            self.doomed_now.notify_one();
        }
    }
}
