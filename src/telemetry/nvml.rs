//! NVML on this node, loaded at run time (`nvml-wrapper` opens `libnvidia-ml.so.1` with
//! `dlopen`): no link-time dependency, so the binary runs on a machine without a driver and
//! cross-builds for aarch64.

use super::{GpuId, TelemetryError, Values};

/// The source name in the artifacts (AIPerf's `pynvml://localhost` is its own).
pub(crate) const SOURCE: &str = "nvml://localhost";

/// An opened NVML.
pub(crate) struct Nvml {}

impl Nvml {
    /// Loads and initialises NVML.
    pub(crate) fn open() -> Result<Nvml, TelemetryError> {
        Err(TelemetryError::NvmlLoad("not written yet".into()))
    }

    /// Reads every GPU (blocking; milliseconds).
    pub(crate) fn read(&self) -> Result<Vec<(GpuId, Values)>, TelemetryError> {
        Err(TelemetryError::NoGpus)
    }
}
