//! `specperf sim` flags -> a validated [`SimConfig`] for the standalone simulator.

use std::time::Duration;

use super::ConfigError;
use crate::cli::SimArgs;
use crate::sim::{Acceptance, SimConfig, TlsFiles};

/// Validates `sim` flags.
pub fn sim_config(a: &SimArgs) -> Result<SimConfig, ConfigError> {
    let ms = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v / 1e3)
            .map_err(|_| ConfigError(format!("--{flag} {v} must be a non-negative number of ms")))
    };
    let cfg = SimConfig {
        model: a.model.clone(),
        host: a.host,
        port: a.port,
        servers: a.servers,
        engines: a.engines,
        ttft: ms("ttft-ms", a.ttft_ms)?,
        itl: ms("itl-ms", a.itl_ms)?,
        jitter: a.jitter,
        seed: a.seed,
        k: a.k,
        acceptance: match a.target_al {
            Some(al) => Acceptance::MeanAl(al),
            None => Acceptance::Probability(a.acceptance_prob),
        },
        default_max_tokens: a.default_max_tokens.max(1),
        eos_probability: a.eos_prob,
        split_steps: a.split_steps,
        reasoning_tokens: a.reasoning_tokens,
        reasoning_field: a.reasoning_field,
        fault_rates: a.faults.clone(),
        fault_sequence: a.fault_sequence.clone(),
        slow_headers: ms("slow-headers-ms", a.slow_headers_ms)?,
        stall_limit: Duration::from_secs(600),
        oversized_bytes: a.oversized_bytes,
        tls: match (&a.tls_cert, &a.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        record_requests: 0,
        ignore_continuous_usage: a.ignore_continuous_usage,
    };
    cfg.validate().map_err(|e| ConfigError(e.to_string()))?;
    Ok(cfg)
}
