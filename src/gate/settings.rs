//! The gate's inputs, typed: `specperf gate` flags and their InferenceX environment variables
//! (declared with clap `env` in `cli::GateArgs`) -> [`Settings`].
//!
//! The numeric flags arrive as text on purpose: a bad value must become an `error` result
//! (`config_invalid`) with the file written, never a usage failure. The settings are read in the
//! contract's order (§5.3 step 1), and each one the result file reports is recorded as soon as it
//! is known, so a later failure still writes what was learned.

use std::time::Duration;

use crate::cli::GateArgs;
use crate::golden::{parse_draft_len, Framework, ThinkingMode};
use crate::scrape::acceptance::SpecEngine;

use super::record::{GateRecord, Reason, Stop};

/// What the gate was asked to check, validated.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Speculative method (`mtp`, `eagle`, ...), never `none`.
    pub(crate) method: String,
    /// Wait after the last response before the after-scrape.
    pub(crate) settle: Duration,
    /// Requests in flight.
    pub(crate) concurrency: u32,
    /// Decode engines the metrics must cover (the Dynamo vLLM leader-only check).
    pub(crate) expected_engines: Option<usize>,
    /// Thinking mode of the curve cell.
    pub(crate) thinking: ThinkingMode,
    /// Model prefix of the curve, e.g. `dsv4`.
    pub(crate) model_prefix: String,
    /// Metrics family of the framework.
    pub(crate) engine: SpecEngine,
    /// Served through Dynamo (`dynamo-<x>`): changes the metric source name and the hints.
    pub(crate) dynamo: bool,
    /// Draft tokens per step.
    pub(crate) k: u32,
}

/// A configuration error.
fn invalid(message: impl Into<String>) -> Stop {
    Stop::new(Reason::ConfigInvalid, message)
}

/// A set, non-blank environment variable.
pub(crate) fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// The whole gate's budget, `AL_GATE_TIMEOUT_S` (default 1800 s); read first, as it bounds the
/// rest.
pub(crate) fn budget(a: &GateArgs) -> Result<Duration, Stop> {
    match a.timeout_seconds.as_deref().map(str::trim) {
        None | Some("") => Ok(Duration::from_secs(1800)),
        Some(t) => t
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                invalid(format!(
                    "AL_GATE_TIMEOUT_S={t:?} must be a positive number of seconds"
                ))
            }),
    }
}

/// The metrics family of a configured framework (§9.3), and whether it is served by Dynamo.
/// `dynamo` plus `DYNAMO_BACKEND_FRAMEWORK` reads as `dynamo-<backend>`.
pub(crate) fn classify_framework(
    framework: &str,
    backend: Option<&str>,
) -> Result<(SpecEngine, bool), Stop> {
    let mut fw = framework.trim().to_ascii_lowercase();
    if fw == "dynamo" {
        if let Some(b) = backend.filter(|b| !b.trim().is_empty()) {
            fw = format!("dynamo-{}", b.trim().to_ascii_lowercase());
        }
    }
    let engine = match Framework::from_alias(&fw) {
        Some(Framework::Vllm) => SpecEngine::Vllm,
        Some(Framework::Sglang) => SpecEngine::Sglang,
        Some(Framework::Trtllm) => SpecEngine::Trtllm,
        Some(Framework::Atom) => SpecEngine::Atom,
        Some(Framework::Llamacpp) => SpecEngine::Llamacpp,
        Some(Framework::Tilert) => {
            return Err(Stop::new(
                Reason::Tilert,
                "TileRT exposes no speculative counters",
            ))
        }
        None => {
            return Err(Stop::new(
                Reason::UnsupportedFramework,
                format!("Unsupported speculative metrics framework: {fw}"),
            ))
        }
    };
    Ok((engine, fw.starts_with("dynamo")))
}

impl Settings {
    /// Reads the settings that need no file or server (§5.3 step 1), recording the reported
    /// ones in `rec` as they are known.
    pub(crate) fn read(a: &GateArgs, rec: &mut GateRecord) -> Result<Settings, Stop> {
        let method = a.spec_method.clone().unwrap_or_default();
        if method.trim().is_empty() || method.trim().eq_ignore_ascii_case("none") {
            return Err(Stop::new(
                Reason::SpecDecodingDisabled,
                "speculative decoding disabled (--spec-method / SPEC_DECODING is unset or none; \
                 set the method, e.g. mtp, to run the gate)",
            ));
        }
        let settle = match a.settle_seconds.as_deref().map(str::trim) {
            None | Some("") => Duration::from_secs_f64(10.0),
            Some(t) => t
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    invalid(format!("AL_GATE_SETTLE_S={t:?} is not a number of seconds"))
                })?,
        };
        let concurrency: u32 = match a.concurrency.as_deref().map(str::trim) {
            None | Some("") => 64,
            Some(c) => c.parse().ok().filter(|c| *c > 0).ok_or_else(|| {
                invalid(format!(
                    "AL_GATE_CONCURRENCY={c:?} is not a positive integer"
                ))
            })?,
        };
        let expected_engines = match a.expected_engines.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(e) => Some(e.parse::<usize>().map_err(|_| {
                invalid(format!("AL_GATE_EXPECTED_ENGINES={e:?} is not an integer"))
            })?),
        };
        let thinking: ThinkingMode = match &a.thinking_mode {
            None => {
                return Err(invalid(
                    "THINKING_MODE is required (thinking_on or thinking_off)",
                ))
            }
            Some(t) => t
                .parse()
                .map_err(|e: crate::golden::GoldenError| invalid(e.to_string()))?,
        };
        rec.thinking_mode = Some(thinking.as_str().to_owned());
        let Some(model_prefix) = a.model_prefix.clone().filter(|p| !p.trim().is_empty()) else {
            return Err(invalid("MODEL_PREFIX is required (e.g. dsv4)"));
        };
        rec.model_prefix = Some(model_prefix.clone());
        let framework = a.framework.clone().unwrap_or_else(|| "vllm".into());
        rec.framework = Some(framework.clone());
        let (engine, dynamo) = classify_framework(&framework, a.dynamo_backend.as_deref())?;
        let k = match a.num_spec_tokens.as_deref() {
            None => return Err(invalid("NUM_SPEC_TOKENS is required")),
            Some(k) => {
                parse_draft_len(k).map_err(|e| Stop::new(Reason::NoGoldenCurve, e.to_string()))?
            }
        };
        rec.num_speculative_tokens = Some(k);
        Ok(Settings {
            method,
            settle,
            concurrency,
            expected_engines,
            thinking,
            model_prefix,
            engine,
            dynamo,
            k,
        })
    }

    /// Whether the deployment is Dynamo vLLM, whose data-parallel metrics may cover the leader
    /// ranks only (§5.5).
    pub(crate) fn is_dynamo_vllm(&self) -> bool {
        self.dynamo && self.engine == SpecEngine::Vllm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frameworks_classify_as_the_contract_says() {
        let e = |f: &str, b: Option<&str>| {
            classify_framework(f, b)
                .map(|x| x.0)
                .map_err(|s| s.reason.as_str())
        };
        assert_eq!(e("vllm", None), Ok(SpecEngine::Vllm));
        assert_eq!(e("dynamo", Some("sglang")), Ok(SpecEngine::Sglang));
        assert_eq!(e("TensorRT-LLM", None), Ok(SpecEngine::Trtllm));
        assert_eq!(e("tilert", None), Err("tilert"));
        assert_eq!(e("mystery", None), Err("unsupported_framework"));
    }

    #[test]
    fn result_names_cannot_escape_the_directory() {
        use crate::gate::record::result_name;
        use clap::Parser;
        let name = |n: Option<&str>| {
            let mut argv = vec!["specperf", "gate"];
            argv.extend(n.map(|n| ["--result-filename", n]).into_iter().flatten());
            let crate::cli::Command::Gate(a) =
                crate::cli::Cli::try_parse_from(argv).unwrap().command
            else {
                unreachable!()
            };
            result_name(&a).map(str::to_owned).map_err(|s| s.reason)
        };
        for bad in ["../x", "a/b", "..", "", "../../escaped", " x"] {
            assert_eq!(name(Some(bad)), Err(Reason::ConfigInvalid), "{bad}");
        }
        assert_eq!(name(None), Err(Reason::ConfigInvalid));
        assert_eq!(name(Some("dsv4_b300_c64")), Ok("dsv4_b300_c64".to_owned()));
    }
}
