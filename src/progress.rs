//! The live view of a run: counters the aggregator updates per record and the scrape side task
//! updates with the live acceptance length, read by the console (progress bar or plain lines)
//! and the gate. It sits below both writers so neither imports the other.

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
    /// Prompt tokens (`usage.prompt_tokens`) of successful records.
    pub input_tokens: u64,
    /// Median TTFT of the run's successful records so far, ms, within 0.1 % (a histogram's;
    /// refreshed about once a second).
    pub ttft_p50_ms: Option<f64>,
    /// Median ITL of the run's successful records so far, ms (refreshed with the TTFT).
    pub itl_p50_ms: Option<f64>,
    /// Profiling requests handed to a connection, for the requests in flight (`sent - done`).
    /// Set by a dispatcher that reports it (the AgentX lane scheduler); 0 otherwise.
    pub sent: u64,
    /// Live acceptance length (baseline scrape to the latest one), when known.
    pub acceptance_length: Option<f64>,
    /// No AL yet because the engine counts drafts only when a request finishes (llama.cpp).
    pub acceptance_waiting: bool,
    /// Warmup records received.
    pub warmup: u64,
    /// Profiling requests planned (`None` when the run is bounded by time instead).
    pub planned: Option<u64>,
    /// Issue limit of the profiling phase (`--benchmark-duration`), seconds.
    pub duration_s: Option<f64>,
    /// When the profiling phase began (after warmup), for rates and ETA.
    pub profiling_started: Option<std::time::Instant>,
    /// Set once the last response is in and the final scrape waits for the engines' counters
    /// to settle: when that wait ends.
    pub settling_until: Option<std::time::Instant>,
    /// Before the first measured request: what the run is waiting for (cleared when profiling
    /// starts), so a slow server never shows as a frozen `done 0`.
    pub starting: Option<Starting>,
}

/// A start-up step the live line shows until profiling starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartStep {
    /// Looking up the target's host name.
    Resolving,
    /// Waiting for `GET /v1/models` to answer (model discovery or the readiness wait).
    ModelList,
    /// Opening keep-alive connections before the clock starts.
    Warming {
        /// Warm-up requests answered (or failed) so far.
        done: u32,
        /// Connections being opened.
        of: u32,
    },
    /// The warmup phase's requests (`--warmup-request-count`); the count is [`Progress::warmup`].
    Warmup,
    /// The baseline scrape of the metrics endpoints.
    Baseline,
}

/// The current start-up step, since when, and the address the target's host resolved to.
#[derive(Clone, Copy, Debug)]
pub struct Starting {
    /// The step.
    pub step: StartStep,
    /// When the step began.
    pub since: std::time::Instant,
    /// The target's address, once resolved.
    pub addr: Option<std::net::SocketAddr>,
}

impl Progress {
    /// Enters start-up step `step` now, keeping the resolved address.
    pub(crate) fn start_step(&mut self, step: StartStep) {
        self.starting = Some(Starting {
            step,
            since: std::time::Instant::now(),
            addr: self.starting.and_then(|s| s.addr),
        });
    }
}
