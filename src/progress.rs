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
}
