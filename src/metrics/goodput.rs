//! Goodput: the `--goodput` service-level objectives and the count of requests meeting all of
//! them.

use serde::Serialize;

use super::request::RecordMetrics;

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
