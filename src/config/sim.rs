//! `specperf sim` flags -> a validated [`SimConfig`] for the standalone simulator.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::ConfigError;
use crate::cli::{EmbeddedSimArgs, SimArgs};
use crate::sim::{Acceptance, GpuSim, RateLimit, SimConfig, TlsFiles};

/// Loads `--tokenizer` / `--sim-tokenizer`.
fn tokenizer(
    flag: &str,
    path: Option<&Path>,
) -> Result<Option<Arc<tokenizer_encoders::Tokenizer>>, ConfigError> {
    path.map(|p| {
        tokenizer_encoders::Tokenizer::from_path(p)
            .map(Arc::new)
            .map_err(|e| {
                ConfigError(format!(
                    "--{flag} {}: {e} (give a tokenizer.json or a model directory holding one)",
                    p.display()
                ))
            })
    })
    .transpose()
}

/// The embedded simulator's KV, queue, context, tokenizer, per-request acceptance and GPU flags
/// (`--sim-*`) onto `cfg`.
pub(crate) fn embedded_kv(a: &EmbeddedSimArgs, cfg: SimConfig) -> Result<SimConfig, ConfigError> {
    Ok(SimConfig {
        kv_block_tokens: a.kv_block_tokens,
        kv_blocks: a.kv_blocks,
        max_running: a.max_running,
        prefill_tokens_per_s: a.prefill_tokens_per_s,
        max_model_len: a.max_model_len,
        tokenizer: tokenizer("sim-tokenizer", a.sim_tokenizer.as_deref())?,
        per_request_spec: a.per_request_spec,
        acceptance_groups: a.acceptance_groups.clone(),
        gpus: a.sim_gpus.map(|count| GpuSim {
            count,
            ..GpuSim::default()
        }),
        ..cfg
    })
}

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
        faults_after: Duration::try_from_secs_f64(a.fault_after_seconds).map_err(|_| {
            ConfigError(format!(
                "--fault-after-seconds {} must be a non-negative number of seconds",
                a.fault_after_seconds
            ))
        })?,
        slow_headers: ms("slow-headers-ms", a.slow_headers_ms)?,
        stall_limit: Duration::from_secs(600),
        oversized_bytes: a.oversized_bytes,
        metrics_flavor: a.metrics_flavor,
        rate_limit: a.rate_limit.as_deref().map(rate_limit).transpose()?,
        tls: match (&a.tls_cert, &a.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        record_requests: 0,
        ignore_continuous_usage: a.ignore_continuous_usage,
        kv_block_tokens: a.kv_block_tokens,
        kv_blocks: a.kv_blocks,
        max_running: a.max_running,
        prefill_tokens_per_s: a.prefill_tokens_per_s,
        max_model_len: a.max_model_len,
        tokenizer: tokenizer("tokenizer", a.tokenizer.as_deref())?,
        per_request_spec: a.per_request_spec_decode_metrics,
        acceptance_groups: a.acceptance_groups.clone(),
        gpus: gpus(a)?,
    };
    cfg.validate().map_err(|e| ConfigError(e.to_string()))?;
    Ok(cfg)
}

/// `--gpus N` and the `--gpu-*` flags (clap lets those only with `--gpus`).
fn gpus(a: &SimArgs) -> Result<Option<GpuSim>, ConfigError> {
    let Some(count) = a.gpus else {
        return Ok(None);
    };
    let secs = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v).map_err(|_| {
            ConfigError(format!(
                "--{flag} {v} must be a non-negative number of seconds"
            ))
        })
    };
    let drop_gpu = match a.gpu_drop.as_deref() {
        None => None,
        Some(v) => {
            let bad = || {
                ConfigError(format!(
                    "--gpu-drop {v:?}: expected GPU@SECS, a GPU index and the seconds after the                      start it disappears, e.g. `--gpu-drop 3@30`"
                ))
            };
            let (gpu, at) = v.split_once('@').ok_or_else(bad)?;
            let gpu: u32 = gpu.trim().parse().map_err(|_| bad())?;
            let at: f64 = at.trim().parse().map_err(|_| bad())?;
            Some((gpu, secs("gpu-drop", at)?))
        }
    };
    Ok(Some(GpuSim {
        count,
        idle_w: a.gpu_idle_w,
        per_active_w: a.gpu_per_active_w,
        add_field_at: a
            .gpu_add_field_after
            .map(|v| secs("gpu-add-field-after", v))
            .transpose()?,
        drop_gpu,
        ..GpuSim::default()
    }))
}

/// Parses `--rate-limit RPS[,BURST]`; the burst defaults to one second's worth, at least 1.
fn rate_limit(v: &str) -> Result<RateLimit, ConfigError> {
    let bad = |why: &str| {
        ConfigError(format!(
            "--rate-limit {v:?}: {why}; expected RPS[,BURST], e.g. `--rate-limit 10` or \
             `--rate-limit 0.5,4` (requests per second, then how many may arrive at once)"
        ))
    };
    let (rps, burst) = match v.split_once(',') {
        Some((rps, burst)) => (rps, Some(burst)),
        None => (v, None),
    };
    let per_second: f64 = rps
        .trim()
        .parse()
        .map_err(|_| bad("the rate is not a number"))?;
    if !(per_second > 0.0 && per_second <= RateLimit::MAX_PER_SECOND) {
        return Err(bad(&format!(
            "the rate must be above 0 and at most {} requests per second",
            RateLimit::MAX_PER_SECOND
        )));
    }
    let burst = match burst {
        None => (per_second.ceil() as u32).max(1),
        Some(b) => match b.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(bad(
                    "the burst must be a whole number of requests, at least 1",
                ))
            }
        },
    };
    Ok(RateLimit { per_second, burst })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(argv: &[&str]) -> Command {
        Cli::try_parse_from(argv).expect("parses").command
    }

    #[test]
    fn simulator_tokenizer_flags_load_the_file_or_name_it_and_the_fix() {
        let Command::Sim(a) = parse(&["specperf", "sim", "--tokenizer", "/nonexistent/tok.json"])
        else {
            panic!("not sim")
        };
        let e = sim_config(&a).unwrap_err().to_string();
        assert!(
            e.contains("--tokenizer /nonexistent/tok.json") && e.contains("tokenizer.json"),
            "{e}"
        );
        let Command::Replay(r) = parse(&["specperf", "replay", "--sim-tokenizer", "/nope"]) else {
            panic!("not replay")
        };
        let e = embedded_kv(&r.sim, SimConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--sim-tokenizer /nope"), "{e}");
        let Command::Sim(a) = parse(&["specperf", "sim"]) else {
            panic!("not sim")
        };
        assert!(
            sim_config(&a).unwrap().tokenizer.is_none(),
            "stand-in by default"
        );
    }

    #[test]
    fn per_request_spec_and_acceptance_group_flags_reach_the_config_or_name_the_bad_rule() {
        use crate::sim::{AcceptanceGroup, PerRequestSpec};
        let Command::Sim(a) = parse(&[
            "specperf",
            "sim",
            "--per-request-spec-decode-metrics",
            "detailed",
            "--acceptance-group",
            "coding=0.9",
            "--acceptance-group",
            "math=0.2",
        ]) else {
            panic!("not sim")
        };
        let cfg = sim_config(&a).unwrap();
        assert_eq!(cfg.per_request_spec, PerRequestSpec::Detailed);
        let rule = |text: &str, probability| AcceptanceGroup {
            text: text.into(),
            probability,
        };
        assert_eq!(
            cfg.acceptance_groups,
            [rule("coding", 0.9), rule("math", 0.2)]
        );
        let Command::Sim(a) = parse(&["specperf", "sim"]) else {
            panic!("not sim")
        };
        assert_eq!(
            sim_config(&a).unwrap().per_request_spec,
            PerRequestSpec::None
        );

        let e = Cli::try_parse_from(["specperf", "sim", "--acceptance-group", "coding"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"coding\"") && e.contains("TEXT=P"), "{e}");
        let Command::Sim(a) = parse(&[
            "specperf",
            "sim",
            "--acceptance-group",
            "x=0.1",
            "--acceptance-group",
            "x=0.3",
        ]) else {
            panic!("not sim")
        };
        let e = sim_config(&a).unwrap_err().to_string();
        assert!(e.contains("\"x=0.3\"") && e.contains("earlier rule"), "{e}");

        let Command::Replay(r) = parse(&[
            "specperf",
            "replay",
            "--sim-per-request-spec-decode-metrics",
            "summary",
            "--sim-acceptance-group",
            "story=0.4",
        ]) else {
            panic!("not replay")
        };
        let cfg = embedded_kv(&r.sim, SimConfig::default()).unwrap();
        assert_eq!(cfg.per_request_spec, PerRequestSpec::Summary);
        assert_eq!(cfg.acceptance_groups, [rule("story", 0.4)]);
    }

    /// `specperf sim ARGS` as a simulator config, or the error's text.
    fn sim_cfg(args: &[&str]) -> Result<SimConfig, String> {
        let mut argv = vec!["specperf", "sim"];
        argv.extend_from_slice(args);
        let Command::Sim(a) = parse(&argv) else {
            panic!("not sim")
        };
        sim_config(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn gpu_flags_reach_the_config_or_name_the_bad_value() {
        let cfg = sim_cfg;
        assert_eq!(cfg(&[]).unwrap().gpus, None, "no GPUs by default");
        let g = cfg(&[
            "--gpus",
            "4",
            "--gpu-idle-w",
            "80",
            "--gpu-per-active-w",
            "30.5",
            "--gpu-add-field-after",
            "2.5",
            "--gpu-drop",
            "3@1.5",
        ])
        .unwrap()
        .gpus
        .unwrap();
        assert_eq!(
            g,
            GpuSim {
                count: 4,
                idle_w: 80.0,
                per_active_w: 30.5,
                add_field_at: Some(Duration::from_millis(2500)),
                drop_gpu: Some((3, Duration::from_millis(1500))),
                ..GpuSim::default()
            }
        );
        let e = cfg(&["--gpus", "2", "--gpu-drop", "2@1"]).unwrap_err();
        assert!(e.contains("--gpu-drop 2@") && e.contains("0..1"), "{e}");
        let e = cfg(&["--gpus", "2", "--gpu-drop", "1"]).unwrap_err();
        assert!(e.contains("GPU@SECS"), "{e}");
        let e = cfg(&["--gpus", "2", "--gpu-add-field-after", "-1"]).unwrap_err();
        assert!(e.contains("--gpu-add-field-after -1"), "{e}");
        let e = cfg(&["--gpus", "0"]).unwrap_err();
        assert!(e.contains("--gpus"), "{e}");
        assert!(
            Cli::try_parse_from(["specperf", "sim", "--gpu-idle-w", "80"]).is_err(),
            "--gpu-* flags need --gpus"
        );

        let Command::Replay(r) = parse(&["specperf", "replay", "--sim-gpus", "8"]) else {
            panic!("not replay")
        };
        let g = embedded_kv(&r.sim, SimConfig::default()).unwrap().gpus;
        assert_eq!(g.map(|g| g.count), Some(8));
    }

    #[test]
    fn max_model_len_must_fit_the_kv_cache_and_caps_the_context() {
        let cfg = sim_cfg;
        let ok = cfg(&["--max-model-len", "4096"]).unwrap();
        assert_eq!(ok.context_limit(), 4096);
        assert_eq!(cfg(&[]).unwrap().context_limit(), 131_072 * 16);
        let e = cfg(&["--max-model-len", "100", "--kv-blocks", "2"]).unwrap_err();
        assert!(
            e.contains("--max-model-len") && e.contains("32 tokens") && e.contains("--kv-blocks"),
            "{e}"
        );
    }
}
