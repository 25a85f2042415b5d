//! Energy over the benchmark window, two ways: the energy counters' delta (each GPU's counter at
//! the window's edges, from the reads nearest each edge and the power they carry), and InferenceX's
//! `aggregate_power.py` integration of the power samples (per GPU, trapezoidal, linear
//! interpolation at the edges, a 3 s maximum gap, the expected GPU count), with its validity
//! reasons. The per-token figures use the counters when every GPU has one, else the integration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Event, Field, GpuId, SourceKind, TelemetryRun};

/// InferenceX's largest gap between two power samples inside the window, s.
pub const MAX_SAMPLE_GAP_S: f64 = 3.0;

/// Counter and integration disagreeing by more than this fraction is a warning.
pub const DISAGREEMENT_WARNING: f64 = 0.02;

/// What the energy figures are divided by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyInputs {
    /// Window start, Unix s (the first request sent).
    pub start_unix_s: f64,
    /// Window end, Unix s (the last response).
    pub end_unix_s: f64,
    /// Successful requests in the window.
    pub successful_requests: u64,
    /// Their prompt tokens.
    pub input_tokens: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// GPUs the deployment should show (`--gpus`).
    pub expected_gpus: Option<u32>,
}

/// Which measurement the per-token figures use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyMethod {
    /// The energy counters' delta over the window.
    Counter,
    /// The power samples integrated over the window (InferenceX's method).
    Integrated,
}

/// Average, least and most of one field over the window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldStat {
    /// Mean of the reads in the window.
    pub avg: f64,
    /// Least.
    pub min: f64,
    /// Most.
    pub max: f64,
}

/// One GPU over the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuEnergy {
    /// The GPU.
    pub id: GpuId,
    /// Energy counter at the window's end minus at its start, J.
    pub counter_energy_j: Option<f64>,
    /// Power integrated over the window, J.
    pub integrated_energy_j: Option<f64>,
    /// Energy (counter, else integrated) over the window's duration, W.
    pub avg_power_w: Option<f64>,
    /// Power samples from one gap before the window to one gap after (InferenceX's count).
    pub power_samples: u64,
    /// Largest gap between power samples around the window, s.
    pub max_sample_gap_s: Option<f64>,
    /// Utilisation, memory, clocks, temperatures over the window, by [`Field::as_str`].
    pub fields: BTreeMap<Field, FieldStat>,
    /// Why its integration is not valid (InferenceX's reason codes).
    pub issues: Vec<String>,
}

/// InferenceX's verdict on the power samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntegrationCheck {
    /// Every GPU's power brackets the window with no gap over the limit, and the GPU count is
    /// the expected one (`aggregate_power.py`'s `power_valid`).
    pub power_valid: bool,
    /// Its reason codes when not valid, in discovery order.
    pub reasons: Vec<String>,
    /// The method, as InferenceX names it.
    pub method: String,
    /// Largest gap allowed, s.
    pub max_sample_gap_s: f64,
}

/// Energy and power over the benchmark window (`summary.json` `energy`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    /// Which kind of source.
    pub source: SourceKind,
    /// The sources read.
    pub sources: Vec<String>,
    /// Window start, Unix s.
    pub start_unix_s: f64,
    /// Window end, Unix s.
    pub end_unix_s: f64,
    /// GPUs expected (`--gpus`).
    pub expected_gpus: Option<u32>,
    /// GPUs seen.
    pub observed_gpus: u32,
    /// What the per-token figures use.
    pub method: Option<EnergyMethod>,
    /// All GPUs' energy over the window, J.
    pub total_energy_j: Option<f64>,
    /// Mean power per GPU, W.
    pub avg_power_w: Option<f64>,
    /// Mean power of all GPUs together, W.
    pub avg_total_power_w: Option<f64>,
    /// J per successful request.
    pub joules_per_request: Option<f64>,
    /// J per prompt token.
    pub joules_per_input_token: Option<f64>,
    /// J per output token.
    pub joules_per_output_token: Option<f64>,
    /// J per prompt and output token.
    pub joules_per_total_token: Option<f64>,
    /// Output tokens per second per kW of GPU power.
    pub output_tokens_per_s_per_kw: Option<f64>,
    /// The counters' total, J (every GPU with a counter at both edges).
    pub counter_energy_j: Option<f64>,
    /// The integration's total, J (every GPU whose power brackets the window).
    pub integrated_energy_j: Option<f64>,
    /// |counter − integrated| / counter.
    pub counter_integrated_difference: Option<f64>,
    /// InferenceX's validity check of the integration.
    pub integration: IntegrationCheck,
    /// Per GPU, in the order first seen.
    pub gpus: Vec<GpuEnergy>,
    /// What came and went during the run (fields, GPUs, failed reads).
    pub events: Vec<Event>,
    /// Warnings (also in the run's warnings).
    pub warnings: Vec<String>,
}

/// Computes the window's energy from what the task recorded.
pub fn energy(run: &TelemetryRun, inputs: &EnergyInputs) -> Energy {
    let _ = (run, inputs);
    unimplemented!("written next")
}
