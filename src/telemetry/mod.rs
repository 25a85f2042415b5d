//! GPU telemetry: the second side task beside the engine (after `scrape`), and energy per token
//! over exactly the profiling window.
//!
//! ```text
//!  source (dcgm pages | nvml | nvidia-smi / amd-smi) ──> Frame per read ──> task (one series per
//!  GPU, events for fields and GPUs that come and go) ──> TelemetryRun ──> energy (counter delta
//!  and InferenceX's trapezoid over the window) ──> Energy in the summary; the run's series to the
//!  artifacts (AIPerf's gpu_telemetry_export.jsonl, InferenceX's gpu_metrics.csv, report.html)
//! ```
//!
//! Every reading is stamped with the wall clock (Unix ns, the midpoint of the read), the clock the
//! benchmark window is on. Nothing here fails a run: a source that stops answering, a field that
//! appears or disappears, a GPU that vanishes are events in the run's record.

pub(crate) mod dcgm;
pub mod energy;
pub(crate) mod nvml;
pub(crate) mod smi;
pub(crate) use smi::memory_used;
pub(crate) mod task;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub(crate) use crate::scrape::unix_ns;

pub use energy::{Energy, EnergyInputs, GpuEnergy, IntegrationCheck};

/// One GPU as its source names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GpuId {
    /// Where it was read: the DCGM endpoint URL, `nvml://localhost`, `nvidia-smi://localhost` or
    /// `amd-smi://localhost`.
    pub source: String,
    /// Host name (DCGM's `Hostname` label; this machine's name for local sources).
    pub hostname: String,
    /// Index on its host (DCGM's `gpu` label, NVML's index).
    pub index: u32,
    /// UUID, empty when the source gives none.
    pub uuid: String,
    /// Model name, empty when the source gives none.
    pub model: String,
}

impl GpuId {
    /// Short display name: `host:index` (the index alone when every GPU is on one host).
    pub fn label(&self, one_host: bool) -> String {
        if one_host {
            self.index.to_string()
        } else {
            format!("{}:{}", self.hostname, self.index)
        }
    }
}

/// What is read per GPU, in canonical units (see [`Field::unit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Board power draw, W (`DCGM_FI_DEV_POWER_USAGE`, nvidia-smi `power.draw`).
    Power,
    /// Energy since the driver loaded, J, a counter (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` in
    /// mJ, NVML `nvmlDeviceGetTotalEnergyConsumption` in mJ).
    Energy,
    /// GPU utilisation, % (`DCGM_FI_DEV_GPU_UTIL`, `utilization.gpu`).
    GpuUtil,
    /// Memory (copy engine) utilisation, % (`DCGM_FI_DEV_MEM_COPY_UTIL`, `utilization.memory`).
    MemUtil,
    /// Frame buffer used, MiB (`DCGM_FI_DEV_FB_USED`, `memory.used`).
    MemUsed,
    /// Frame buffer free, MiB (`DCGM_FI_DEV_FB_FREE`, `memory.free`).
    MemFree,
    /// SM clock, MHz (`DCGM_FI_DEV_SM_CLOCK`, `clocks.current.sm`).
    SmClock,
    /// Memory clock, MHz (`DCGM_FI_DEV_MEM_CLOCK`, `clocks.current.memory`).
    MemClock,
    /// GPU temperature, °C (`DCGM_FI_DEV_GPU_TEMP`, `temperature.gpu`).
    Temperature,
    /// Memory temperature, °C (`DCGM_FI_DEV_MEMORY_TEMP`).
    MemTemperature,
    /// SMs active, % (`DCGM_FI_PROF_SM_ACTIVE`, a ratio there).
    SmActive,
    /// Encoder utilisation, % (`DCGM_FI_DEV_ENC_UTIL`).
    EncoderUtil,
    /// Decoder utilisation, % (`DCGM_FI_DEV_DEC_UTIL`).
    DecoderUtil,
    /// Last XID error (`DCGM_FI_DEV_XID_ERRORS`, a gauge of the last error's code).
    XidErrors,
    /// Time throttled by the power limit, µs, a counter (`DCGM_FI_DEV_POWER_VIOLATION`).
    PowerViolation,
}

impl Field {
    /// Every field, in report order.
    pub const ALL: [Field; 15] = [
        Field::Power,
        Field::Energy,
        Field::GpuUtil,
        Field::MemUtil,
        Field::MemUsed,
        Field::MemFree,
        Field::SmClock,
        Field::MemClock,
        Field::Temperature,
        Field::MemTemperature,
        Field::SmActive,
        Field::EncoderUtil,
        Field::DecoderUtil,
        Field::XidErrors,
        Field::PowerViolation,
    ];

    /// The name in `summary.json` and the events.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Power => "power",
            Field::Energy => "energy",
            Field::GpuUtil => "gpu_util",
            Field::MemUtil => "mem_util",
            Field::MemUsed => "mem_used",
            Field::MemFree => "mem_free",
            Field::SmClock => "sm_clock",
            Field::MemClock => "mem_clock",
            Field::Temperature => "temperature",
            Field::MemTemperature => "mem_temperature",
            Field::SmActive => "sm_active",
            Field::EncoderUtil => "encoder_util",
            Field::DecoderUtil => "decoder_util",
            Field::XidErrors => "xid_errors",
            Field::PowerViolation => "power_violation",
        }
    }

    /// Canonical unit of the values kept.
    pub fn unit(self) -> &'static str {
        match self {
            Field::Power => "W",
            Field::Energy => "J",
            Field::GpuUtil
            | Field::MemUtil
            | Field::SmActive
            | Field::EncoderUtil
            | Field::DecoderUtil => "%",
            Field::MemUsed | Field::MemFree => "MiB",
            Field::SmClock | Field::MemClock => "MHz",
            Field::Temperature | Field::MemTemperature => "C",
            Field::XidErrors => "count",
            Field::PowerViolation => "us",
        }
    }

    /// Whether the value only grows (a delta is meaningful, a drop is a reset).
    pub fn is_counter(self) -> bool {
        matches!(self, Field::Energy | Field::PowerViolation)
    }

    /// The DCGM exporter's metric name and the factor to canonical units.
    pub fn dcgm(self) -> (&'static str, f64) {
        match self {
            Field::Power => ("DCGM_FI_DEV_POWER_USAGE", 1.0),
            Field::Energy => ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1e-3),
            Field::GpuUtil => ("DCGM_FI_DEV_GPU_UTIL", 1.0),
            Field::MemUtil => ("DCGM_FI_DEV_MEM_COPY_UTIL", 1.0),
            Field::MemUsed => ("DCGM_FI_DEV_FB_USED", 1.0),
            Field::MemFree => ("DCGM_FI_DEV_FB_FREE", 1.0),
            Field::SmClock => ("DCGM_FI_DEV_SM_CLOCK", 1.0),
            Field::MemClock => ("DCGM_FI_DEV_MEM_CLOCK", 1.0),
            Field::Temperature => ("DCGM_FI_DEV_GPU_TEMP", 1.0),
            Field::MemTemperature => ("DCGM_FI_DEV_MEMORY_TEMP", 1.0),
            Field::SmActive => ("DCGM_FI_PROF_SM_ACTIVE", 100.0),
            Field::EncoderUtil => ("DCGM_FI_DEV_ENC_UTIL", 1.0),
            Field::DecoderUtil => ("DCGM_FI_DEV_DEC_UTIL", 1.0),
            Field::XidErrors => ("DCGM_FI_DEV_XID_ERRORS", 1.0),
            Field::PowerViolation => ("DCGM_FI_DEV_POWER_VIOLATION", 1.0),
        }
    }

    /// The field a DCGM metric name carries, with its factor.
    pub fn of_dcgm(name: &str) -> Option<(Field, f64)> {
        Field::ALL.into_iter().find_map(|f| {
            let (n, k) = f.dcgm();
            (n == name).then_some((f, k))
        })
    }
}

/// One GPU's values at one read.
pub type Values = BTreeMap<Field, f64>;

/// One read of one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Wall clock, Unix ns: the midpoint of the read.
    pub t_ns: u64,
    /// What the read gave, canonical units.
    pub values: Values,
}

/// Everything read from one GPU, in time order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSeries {
    /// The GPU.
    pub id: GpuId,
    /// Its reads.
    pub readings: Vec<Reading>,
}

/// Something that changed in what the sources gave: kept, never fatal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A field this GPU had not given before (or had stopped giving) is there.
    FieldAppeared {
        /// The field.
        field: Field,
    },
    /// A field this GPU gave is missing from a read.
    FieldDisappeared {
        /// The field.
        field: Field,
    },
    /// A GPU not seen before (after the first read) is there.
    GpuAppeared,
    /// A GPU its source gave before is missing from a successful read.
    GpuVanished,
    /// A counter went down (driver reload, GPU reset): the delta restarts from the new value.
    CounterReset {
        /// The counter.
        field: Field,
    },
    /// A read of a source failed (the GPUs it gives have a gap until it answers again).
    SourceFailed {
        /// Why.
        error: String,
    },
    /// A source that had failed answers again.
    SourceRecovered,
}

/// One event, stamped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Wall clock, Unix ns.
    pub t_ns: u64,
    /// The source (URL or `nvml://localhost`, ...).
    pub source: String,
    /// The GPU, when the event is about one.
    pub gpu: Option<GpuId>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Which kind of source the telemetry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// DCGM exporter pages.
    Dcgm,
    /// NVML, loaded at run time.
    Nvml,
    /// `nvidia-smi --query-gpu`.
    NvidiaSmi,
    /// `amd-smi metric`.
    AmdSmi,
}

impl SourceKind {
    /// The name in `summary.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Dcgm => "dcgm",
            SourceKind::Nvml => "nvml",
            SourceKind::NvidiaSmi => "nvidia-smi",
            SourceKind::AmdSmi => "amd-smi",
        }
    }
}

/// One read of one source: every GPU it gave, or why it gave none.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// The source (URL or `nvml://localhost`, ...).
    pub(crate) source: String,
    /// Wall clock, Unix ns: the midpoint of the read.
    pub(crate) t_ns: u64,
    /// The GPUs and their values, or the error.
    pub(crate) gpus: Result<Vec<(GpuId, Values)>, TelemetryError>,
}

/// Why a source could not be opened or read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TelemetryError {
    /// The NVML library could not be loaded (no driver on this machine).
    #[error("NVML could not be loaded ({0}): no NVIDIA driver on this machine? Use a DCGM exporter URL (--gpu-telemetry http://HOST:9400/metrics) or nvidia-smi (--gpu-telemetry nvidia-smi)")]
    NvmlLoad(String),
    /// An NVML call failed.
    #[error("NVML {call} failed: {error}")]
    NvmlCall {
        /// The call.
        call: &'static str,
        /// NVML's error.
        error: String,
    },
    /// The SMI program asked for (or either, when none was) is not on PATH.
    #[error("{0} is not on PATH")]
    SmiMissing(&'static str),
    /// The SMI command failed or timed out.
    #[error("{command} failed: {reason}")]
    SmiFailed {
        /// The command line.
        command: String,
        /// Exit status and stderr, or the timeout.
        reason: String,
    },
    /// The SMI output could not be read.
    #[error("{command} output line {line}: {reason}")]
    SmiParse {
        /// The command.
        command: String,
        /// 1-based line.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A DCGM page could not be fetched.
    #[error("{0}")]
    Fetch(String),
    /// A DCGM page answered a status other than 200.
    #[error("HTTP {0}")]
    Status(u16),
    /// A DCGM page did not parse.
    #[error("malformed page: {0}")]
    Malformed(String),
    /// The source answered without any GPU.
    #[error("no GPU in the answer")]
    NoGpus,
}

/// Everything the telemetry task recorded over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRun {
    /// Which kind of source.
    pub source: SourceKind,
    /// The sources read (URLs, `nvml://localhost`, ...).
    pub sources: Vec<String>,
    /// Time between reads, s.
    pub interval_s: f64,
    /// One series per GPU, in the order first seen.
    pub series: Vec<GpuSeries>,
    /// Fields and GPUs that came and went, failed reads.
    pub events: Vec<Event>,
}

/// This machine's name (`gethostname`), the [`GpuId::hostname`] of the local sources; `localhost`
/// when it cannot be read.
#[allow(unsafe_code)]
pub(crate) fn local_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which gethostname writes at most `len`
    // bytes of; a truncated name may lack its NUL, hence the search bounded by the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..end]) {
        name if rc == 0 && !name.is_empty() => name.into_owned(),
        _ => "localhost".into(),
    }
}
