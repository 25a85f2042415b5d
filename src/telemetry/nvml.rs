//! NVML on this node, loaded at run time (`nvml-wrapper` opens `libnvidia-ml.so.1` with
//! `dlopen`): no link-time dependency, so the binary runs on a machine without a driver and
//! cross-builds for aarch64.
//!
//! One [`Nvml::read`] asks every device for its values in canonical units. A value the device
//! does not offer (NVML's `NotSupported`, a permission the container lacks, a symbol an old driver
//! lacks) is left out of that GPU's values; the task turns fields that come and go into events.
//! Any other failure skips the device for that read (its values could not be trusted), and the
//! read fails only when every device failed.

use std::path::Path;

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

use super::{local_hostname, Field, GpuId, TelemetryError, Values};

/// The source name in the artifacts (AIPerf's `pynvml://localhost` is its own).
pub(crate) const SOURCE: &str = "nvml://localhost";

/// Names another NVML library to load (a path or a name `dlopen` searches for), for unusual
/// installs and tests; unset or empty: `libnvidia-ml.so.1`.
pub(crate) const LIBRARY_ENV: &str = "SPECPERF_NVML_LIBRARY";

/// What NVML is loaded as when [`LIBRARY_ENV`] is not set (nvml-wrapper's default on Linux).
const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// An opened NVML. `Send + Sync` (nvml-wrapper asserts it for its handle), so one `Arc` of it can
/// be read from `spawn_blocking`; dropping it shuts NVML down.
pub(crate) struct Nvml {
    nvml: nvml_wrapper::Nvml,
    /// This machine's name, read once at open.
    hostname: String,
}

impl Nvml {
    /// Loads and initialises NVML: the library [`LIBRARY_ENV`] names, else `libnvidia-ml.so.1`.
    pub(crate) fn open() -> Result<Nvml, TelemetryError> {
        let lib = std::env::var_os(LIBRARY_ENV).filter(|v| !v.is_empty());
        Nvml::open_at(lib.as_deref().map(Path::new))
    }

    /// [`Nvml::open`] with the library given, so tests need not set the environment.
    fn open_at(lib: Option<&Path>) -> Result<Nvml, TelemetryError> {
        let mut builder = nvml_wrapper::Nvml::builder();
        if let Some(lib) = lib {
            builder.lib_path(lib.as_os_str());
        }
        let nvml = builder.init().map_err(|e| {
            let shown = lib.map_or(DEFAULT_LIBRARY.into(), |p| p.display().to_string());
            TelemetryError::NvmlLoad(match e {
                // dlopen's own message names the file and why (missing, not an ELF file, ...).
                NvmlError::LibloadingError(_) => e.to_string(),
                _ => format!("{shown}: {e}"),
            })
        })?;
        if nvml
            .device_count()
            .map_err(|e| call_error("device_count", e))?
            == 0
        {
            return Err(TelemetryError::NoGpus);
        }
        Ok(Nvml {
            nvml,
            hostname: local_hostname(),
        })
    }

    /// Reads every GPU (blocking; milliseconds).
    pub(crate) fn read(&self) -> Result<Vec<(GpuId, Values)>, TelemetryError> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| call_error("device_count", e))?;
        let mut gpus = Vec::new();
        let mut failed = None;
        for index in 0..count {
            match self.device(index) {
                Ok(gpu) => gpus.push(gpu),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) if gpus.is_empty() => Err(e),
            _ if gpus.is_empty() => Err(TelemetryError::NoGpus),
            _ => Ok(gpus),
        }
    }

    /// One device's name and values.
    fn device(&self, index: u32) -> Result<(GpuId, Values), TelemetryError> {
        let d = self
            .nvml
            .device_by_index(index)
            .map_err(|e| call_error("device_by_index", e))?;
        let id = GpuId {
            source: SOURCE.into(),
            hostname: self.hostname.clone(),
            index,
            uuid: offered("uuid", d.uuid())?.unwrap_or_default(),
            model: offered("name", d.name())?.unwrap_or_default(),
        };
        let mut v = Values::new();
        if let Some(mw) = offered("power_usage", d.power_usage())? {
            v.insert(Field::Power, f64::from(mw) / 1e3);
        }
        if let Some(mj) = offered("total_energy_consumption", d.total_energy_consumption())? {
            v.insert(Field::Energy, mj as f64 / 1e3);
        }
        if let Some(u) = offered("utilization_rates", d.utilization_rates())? {
            v.insert(Field::GpuUtil, f64::from(u.gpu));
            v.insert(Field::MemUtil, f64::from(u.memory));
        }
        if let Some(m) = offered("memory_info", d.memory_info())? {
            const MIB: f64 = 1024.0 * 1024.0;
            v.insert(Field::MemUsed, m.used as f64 / MIB);
            v.insert(Field::MemFree, m.free as f64 / MIB);
        }
        if let Some(mhz) = offered("clock_info(SM)", d.clock_info(Clock::SM))? {
            v.insert(Field::SmClock, f64::from(mhz));
        }
        if let Some(mhz) = offered("clock_info(Memory)", d.clock_info(Clock::Memory))? {
            v.insert(Field::MemClock, f64::from(mhz));
        }
        if let Some(c) = offered("temperature(Gpu)", d.temperature(TemperatureSensor::Gpu))? {
            v.insert(Field::Temperature, f64::from(c));
        }
        if let Some(u) = offered("encoder_utilization", d.encoder_utilization())? {
            v.insert(Field::EncoderUtil, f64::from(u.utilization));
        }
        if let Some(u) = offered("decoder_utilization", d.decoder_utilization())? {
            v.insert(Field::DecoderUtil, f64::from(u.utilization));
        }
        Ok((id, v))
    }
}

/// A call's value, `None` when this device, driver or container does not offer it, or the
/// error naming the call.
fn offered<T>(call: &'static str, r: Result<T, NvmlError>) -> Result<Option<T>, TelemetryError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(
            NvmlError::NotSupported
            | NvmlError::NoPermission
            | NvmlError::FunctionNotFound
            | NvmlError::FailedToLoadSymbol(_),
        ) => Ok(None),
        Err(e) => Err(call_error(call, e)),
    }
}

fn call_error(call: &'static str, e: NvmlError) -> TelemetryError {
    TelemetryError::NvmlCall {
        call,
        error: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller shares one `Nvml` across `spawn_blocking` reads.
    #[test]
    fn nvml_is_send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Nvml>();
    }

    /// Without a driver the error is a load error whose message names the fix; with one (a GPU
    /// machine), every GPU reads with its name and the fields every NVIDIA GPU offers.
    #[test]
    fn open_without_a_driver_says_what_to_use_instead() {
        match Nvml::open_at(None) {
            Err(e @ TelemetryError::NvmlLoad(_)) => {
                let msg = e.to_string();
                assert!(msg.contains(DEFAULT_LIBRARY), "{msg}");
                assert!(msg.contains("--gpu-telemetry nvidia-smi"), "{msg}");
            }
            Err(TelemetryError::NoGpus) => {}
            Err(e) => panic!("{e:?}"),
            Ok(nvml) => {
                let gpus = nvml.read().unwrap();
                assert!(!gpus.is_empty());
                for (i, (id, v)) in gpus.iter().enumerate() {
                    assert_eq!(id.source, SOURCE);
                    assert_eq!(id.index as usize, i, "{id:?}");
                    assert!(id.uuid.starts_with("GPU-"), "{id:?}");
                    assert!(!id.model.is_empty() && !id.hostname.is_empty(), "{id:?}");
                    for f in [Field::MemUsed, Field::MemFree, Field::Temperature] {
                        assert!(v.contains_key(&f), "{id:?} lacks {f:?}: {v:?}");
                    }
                    assert!(v.values().all(|x| x.is_finite() && *x >= 0.0), "{v:?}");
                }
            }
        }
    }

    #[test]
    fn a_missing_library_is_a_load_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("no-such-libnvidia-ml.so.1");
        match Nvml::open_at(Some(&lib)) {
            Err(TelemetryError::NvmlLoad(m)) => {
                assert!(m.contains("no-such-libnvidia-ml.so.1"), "{m}");
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_error() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnvidia-ml.so.1");
        std::fs::write(&lib, b"not an ELF file, only junk\n").unwrap();
        match Nvml::open_at(Some(&lib)) {
            Err(TelemetryError::NvmlLoad(m)) => assert!(m.contains("libnvidia-ml.so.1"), "{m}"),
            other => panic!("{:?}", other.err()),
        }
    }

    /// A real shared library without NVML's symbols fails on the missing `nvmlInit_v2`.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_library_that_is_not_nvml_is_a_load_error() {
        match Nvml::open_at(Some(Path::new("libc.so.6"))) {
            Err(TelemetryError::NvmlLoad(m)) => {
                assert!(m.starts_with("libc.so.6: "), "{m}");
                assert!(m.contains("nvmlInit_v2"), "{m}");
            }
            other => panic!("{:?}", other.err()),
        }
    }
}
