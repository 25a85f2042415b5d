//! `--gpu-telemetry` and its settings: which source to read, how often, whether its absence is an
//! error, and how many GPUs the deployment should show (`--gpus`). Feeds `telemetry`.

use std::time::Duration;

use super::{err, ConfigError};
use crate::cli::TelemetryArgs;
use crate::telemetry::{task::Ask, SourceKind};

/// Validated GPU telemetry settings.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TelemetryConfig {
    /// What to read; `None`: no GPU telemetry.
    pub(crate) ask: Option<Ask>,
    /// No source answering fails the run before it starts.
    pub(crate) require: bool,
    /// Time between reads.
    pub(crate) interval: Duration,
    /// GPUs the deployment should show.
    pub(crate) expected_gpus: Option<u32>,
}

impl TelemetryConfig {
    pub(crate) fn from_args(a: &TelemetryArgs, gpus: Option<u32>) -> Result<Self, ConfigError> {
        let interval = a.gpu_telemetry_interval;
        if !(interval.is_finite() && (0.01..=300.0).contains(&interval)) {
            return err(format!(
                "--gpu-telemetry-interval {interval} must be between 0.01 and 300 seconds"
            ));
        }
        if gpus == Some(0) {
            return err(
                "--gpus 0: give the number of GPUs serving the model (TP x PP x DP), at least 1",
            );
        }
        Ok(TelemetryConfig {
            ask: a.gpu_telemetry.as_deref().map(ask).transpose()?,
            require: a.require_gpu_telemetry,
            interval: Duration::from_secs_f64(interval),
            expected_gpus: gpus,
        })
    }
}

/// AIPerf's forms: nothing (defaults), `dashboard` (a display mode, ignored), `pynvml`/`nvml`,
/// `amdsmi`/`amd-smi`, `nvidia-smi`, DCGM URLs or host:port, comma-separated or repeated.
fn ask(values: &[String]) -> Result<Ask, ConfigError> {
    let items: Vec<&str> = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("dashboard"))
        .collect();
    let local = |v: &str| match v.to_ascii_lowercase().as_str() {
        "nvml" | "pynvml" => Some(Ask::Nvml),
        "nvidia-smi" | "nvidiasmi" => Some(Ask::Smi(SourceKind::NvidiaSmi)),
        "amd-smi" | "amdsmi" => Some(Ask::Smi(SourceKind::AmdSmi)),
        _ => None,
    };
    if items.is_empty() {
        return Ok(Ask::Auto);
    }
    if let Some(l) = items.iter().find_map(|v| local(v)) {
        if items.len() > 1 {
            return err(format!(
                "--gpu-telemetry {}: a local source (nvml, nvidia-smi, amd-smi) is read alone; give either it or DCGM URLs",
                items.join(" ")
            ));
        }
        return Ok(l);
    }
    let mut urls = Vec::new();
    for v in items {
        if v.ends_with(".csv") {
            return err(format!(
                "--gpu-telemetry {v}: AIPerf's custom-metrics CSV is not supported; specperf reads a fixed set of DCGM fields (power, energy, utilisation, memory, clocks, temperatures, violations, XID); drop the file"
            ));
        }
        let u = crate::telemetry::dcgm::normalize(v).map_err(|e| {
            ConfigError(format!(
                "--gpu-telemetry {e}: give DCGM exporter URLs (http://HOST:9400/metrics or HOST:9400), nvml, nvidia-smi or amd-smi"
            ))
        })?;
        if !urls.contains(&u) {
            urls.push(u);
        }
    }
    Ok(Ask::Dcgm(urls))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Result<Ask, ConfigError> {
        ask(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn aiperf_forms_are_accepted() {
        assert_eq!(a(&[]).unwrap(), Ask::Auto);
        assert_eq!(a(&["dashboard"]).unwrap(), Ask::Auto);
        assert_eq!(a(&["pynvml"]).unwrap(), Ask::Nvml);
        assert_eq!(a(&["amdsmi"]).unwrap(), Ask::Smi(SourceKind::AmdSmi));
        assert_eq!(
            a(&[
                "dashboard",
                "node1:9400",
                "http://node2:9401/metrics,node1:9400"
            ])
            .unwrap(),
            Ask::Dcgm(vec![
                "http://node1:9400/metrics".into(),
                "http://node2:9401/metrics".into()
            ])
        );
    }

    #[test]
    fn mixed_or_unsupported_forms_name_the_fix() {
        assert!(a(&["nvml", "node1:9400"])
            .unwrap_err()
            .0
            .contains("read alone"));
        assert!(a(&["custom_gpu_metrics.csv"])
            .unwrap_err()
            .0
            .contains("drop the file"));
        assert!(a(&["ftp://x/y"])
            .unwrap_err()
            .0
            .contains("DCGM exporter URLs"));
        let args = TelemetryArgs {
            gpu_telemetry: Some(vec![]),
            require_gpu_telemetry: false,
            gpu_telemetry_interval: 0.0,
        };
        assert!(TelemetryConfig::from_args(&args, None)
            .unwrap_err()
            .0
            .contains("between 0.01 and 300"));
    }
}
