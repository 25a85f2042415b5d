//! AgentX replay settings (`specperf profile --scenario inferencex-agentx-mvp ...` or
//! `specperf replay --scenario agentx ...`): the part of a run that only the AgentX lane
//! scheduler reads. The common settings (URL, model, `--concurrency`, `--benchmark-duration`,
//! grace, streaming, extra inputs, server metrics, artifact directory) stay in [`RunConfig`].
//!
//! [`RunConfig`]: super::RunConfig

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{err, seconds, ConfigError};
use crate::agentx::{LoadOptions, StartRatios};
use crate::cli::{AgentxArgs, Scenario};
pub(crate) use crate::metrics::Provenance;

/// Validated AgentX settings.
#[derive(Clone, Debug)]
pub(crate) struct AgentxSettings {
    /// A `traces.jsonl` or a directory of `*.json` traces (resolved from `--public-dataset`
    /// through the Hugging Face hub cache, or `--input-file`).
    pub(crate) input: PathBuf,
    /// Where the traces came from, for `metadata.dataset` of `profile_export_aiperf.json`.
    pub(crate) provenance: Provenance,
    /// `--num-dataset-entries`, `--max-context-length`, `--synthesis-max-osl`.
    pub(crate) load: LoadOptions,
    /// `--trajectory-start-min-ratio` / `--trajectory-start-max-ratio`.
    pub(crate) ratios: StartRatios,
    /// `--random-seed` (t* draws, prompt blocks).
    pub(crate) seed: u64,
    /// The tokenizer prompts are cut with (`tokenizer.json` or a directory holding one).
    pub(crate) tokenizer: PathBuf,
    /// `--warmup-requests-per-lane` (0: primers only).
    pub(crate) warmup_requests_per_lane: u32,
    /// `--warmup-grace-period`: the longest the warmup may take to drain; then what is left of
    /// it is cancelled and profiling starts.
    pub(crate) warmup_grace: Duration,
    /// `--trace-idle-gap-cap-seconds`: a tree idle this long has its pending timers advanced.
    pub(crate) trace_idle_cap: Option<Duration>,
    /// The whole-system idle cap (10 s, locked by the scenario).
    pub(crate) system_idle_cap: Duration,
    /// `--stats-interval`: the realtime stats block on stderr (`None`: off).
    pub(crate) stats_interval: Option<Duration>,
    /// Live `--failed-request-threshold`: above this failed fraction of profiling records
    /// (armed at `max(concurrency, 10)` records) the run stops and exits non-zero.
    pub(crate) live_failed_threshold: Option<f64>,
    /// Session routing headers and body fields.
    pub(crate) routing: SessionRouting,
    /// Error-body substrings that mean "prompt over the context" (case-insensitive).
    pub(crate) context_overflow_substrings: Vec<String>,
    /// Above this share of context-overflow responses the result is not a valid submission
    /// (`AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT`, default 0.01; strictly greater fails).
    pub(crate) context_overflow_rate_limit: f64,
    /// `AIPERF_DAG_FAIL_FAST`: a failed child fails its join instead of counting as finished.
    pub(crate) dag_fail_fast: bool,
    /// `inferencex-agentx-mvp` when run under AIPerf's scenario name.
    pub(crate) scenario: Option<String>,
    /// Why the run is not a valid submission (e.g. `--unsafe-override`), for
    /// `metadata.submission_invalid_reasons`.
    pub(crate) submission_invalid_reasons: Vec<String>,
}

/// How a request names its session to a router (spec §2.7, §3.7).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SessionRouting {
    /// `X-Dynamo-Session-ID` (= correlation id) and `X-Dynamo-Parent-Session-ID` on children
    /// (`AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID`).
    pub(crate) dynamo_headers: bool,
    /// `X-Session-ID` (= correlation id) (`AIPERF_HTTP_X_SESSION_ID_FROM_CORRELATION_ID`).
    pub(crate) session_id_header: bool,
    /// `X-Session-Affinity` (= correlation id): on unless
    /// `AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID` is false (AIPerf 0.13's default).
    pub(crate) session_affinity_header: bool,
    /// `X-SMG-Routing-Key` (= correlation id) (`AIPERF_HTTP_X_SMG_ROUTING_KEY_FROM_CORRELATION_ID`).
    pub(crate) smg_routing_key: bool,
    /// `--use-dynamo-conv-aware-routing`: `nvext.session_control` with this timeout, seconds.
    pub(crate) nvext_session_timeout_s: Option<u64>,
}

impl AgentxSettings {
    /// What the AIPerf summary's `metadata` reports about this run.
    pub(crate) fn run_meta(&self) -> crate::metrics::AgentxRunMeta {
        crate::metrics::AgentxRunMeta {
            dataset: self.provenance.clone(),
            scenario: self.scenario.clone(),
            invalid_reasons: self.submission_invalid_reasons.clone(),
            overflow_rate_limit: self.context_overflow_rate_limit,
            settings: crate::metrics::AgentxInputs {
                traces: self.input.display().to_string(),
                tokenizer: self.tokenizer.display().to_string(),
                // The override is recorded once it let a violation through (the only time it
                // changes anything; AIPerf records the flag as given).
                unsafe_override: self
                    .submission_invalid_reasons
                    .iter()
                    .any(|r| r == "unsafe_override"),
                trace_idle_gap_cap_s: self.trace_idle_cap.map(|d| d.as_secs_f64()),
                system_idle_gap_cap_s: self.system_idle_cap.as_secs_f64(),
                trajectory_start_ratios: (self.ratios.min(), self.ratios.max()),
            },
        }
    }
}

impl SessionRouting {
    /// The `AIPERF_HTTP_X_*_FROM_CORRELATION_ID` knobs (AIPerf 0.13 `_HTTPSettings`) and
    /// `--use-dynamo-conv-aware-routing`.
    fn from_env(
        a: &AgentxArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SessionRouting, ConfigError> {
        Ok(SessionRouting {
            dynamo_headers: env_bool(
                env,
                "AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID",
                false,
            )?,
            session_id_header: env_bool(
                env,
                "AIPERF_HTTP_X_SESSION_ID_FROM_CORRELATION_ID",
                false,
            )?,
            session_affinity_header: env_bool(
                env,
                "AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID",
                true,
            )?,
            smg_routing_key: env_bool(
                env,
                "AIPERF_HTTP_X_SMG_ROUTING_KEY_FROM_CORRELATION_ID",
                false,
            )?,
            nvext_session_timeout_s: a
                .use_dynamo_conv_aware_routing
                .then_some(a.dynamo_session_timeout_seconds),
        })
    }
}

/// A boolean environment knob read as pydantic reads one (`1/0`, `true/false`, `yes/no`,
/// `on/off`, `t/f`, `y/n`, any case); unset or empty is `default`.
fn env_bool(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: bool,
) -> Result<bool, ConfigError> {
    let Some(v) = env(name).map(|v| v.trim().to_ascii_lowercase()) else {
        return Ok(default);
    };
    if v.is_empty() {
        return Ok(default);
    }
    match crate::agentx::pydantic_bool(&v) {
        Some(b) => Ok(b),
        None => err(format!(
            "{name}={v:?} is not a boolean: set it to true or false (1 or 0)"
        )),
    }
}

/// AIPerf 0.13's context-overflow vocabulary (`_AgentXSettings.CONTEXT_OVERFLOW_SUBSTRINGS`).
const DEFAULT_OVERFLOW_SUBSTRINGS: [&str; 4] = [
    "context length",
    "maximum context",
    "context_length_exceeded",
    "prompt is too long",
];

/// `AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS`: a JSON list of strings, as pydantic-settings
/// reads a list (`[]` turns detection off); unset: AIPerf's four.
fn overflow_substrings(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, ConfigError> {
    const NAME: &str = "AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS";
    match env(NAME).filter(|v| !v.trim().is_empty()) {
        None => Ok(DEFAULT_OVERFLOW_SUBSTRINGS.map(str::to_owned).to_vec()),
        Some(v) => serde_json::from_str::<Vec<String>>(&v).map_err(|e| {
            ConfigError(format!(
                "{NAME}={v:?} is not a JSON list of strings ({e}); write it as \
                 '[\"context length\", \"maximum context\"]' ('[]' turns detection off)"
            ))
        }),
    }
}

/// `AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT`: above this share of context-overflow responses
/// the result is not a valid submission (default 0.01).
fn overflow_rate_limit(env: &dyn Fn(&str) -> Option<String>) -> Result<f64, ConfigError> {
    const NAME: &str = "AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT";
    match env(NAME).filter(|v| !v.trim().is_empty()) {
        None => Ok(0.01),
        Some(v) => match v.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
            _ => err(format!(
                "{NAME}={v:?} must be a fraction within [0, 1] (default 0.01)"
            )),
        },
    }
}

/// What an AgentX replay takes from the common replay flags (so `profile` and
/// `replay --scenario` share one validation).
pub(crate) struct Common<'a> {
    pub(crate) input_file: Option<&'a Path>,
    pub(crate) tokenizer: Option<&'a Path>,
    pub(crate) num_dataset_entries: Option<usize>,
    pub(crate) seed: u64,
    pub(crate) failed_request_threshold: f64,
    pub(crate) benchmark_duration: Option<f64>,
    pub(crate) streaming: bool,
    pub(crate) extra_inputs: &'a Map<String, Value>,
    /// Replay flags given that have no meaning in an AgentX replay (`--request-rate`, ...).
    pub(crate) unused_flags: Vec<&'static str>,
}

/// AIPerf's scenario name, written to `metadata.scenario`.
pub(crate) const AGENTX_SCENARIO: &str = "inferencex-agentx-mvp";
/// The scenario's shortest `--benchmark-duration`.
const MIN_SCENARIO_DURATION_S: f64 = 900.0;
/// The scenario's `--benchmark-duration` when none is given.
pub(crate) const DEFAULT_SCENARIO_DURATION_S: f64 = 1800.0;
/// The warmup grace when none is given (InferenceX's `AGENTIC_WARMUP_GRACE_PERIOD`).
const DEFAULT_WARMUP_GRACE_S: f64 = 1800.0;

impl AgentxSettings {
    /// Validates the AgentX flags (`None` without `--scenario`). Under
    /// `inferencex-agentx-mvp` the scenario's locks are checked: a violation is an error
    /// unless `--unsafe-override`, which records `unsafe_override` in
    /// `submission_invalid_reasons` and a warning per violation in `warnings`.
    pub(crate) fn from_args(
        a: &AgentxArgs,
        c: &Common<'_>,
        env: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Box<AgentxSettings>>, ConfigError> {
        let Some(scenario) = a.scenario else {
            return Ok(None);
        };
        if let Some(flag) = c.unused_flags.first() {
            return err(format!(
                "--{flag} has no meaning in the AgentX replay (the traces set the load: one \
                 session tree per --concurrency lane, recorded timing, per-turn max_tokens); \
                 drop it, or drop --scenario to replay a collection"
            ));
        }
        let locked = scenario == Scenario::InferencexAgentxMvp;
        let mut violations: Vec<String> = Vec::new();
        let (input, provenance) = match (&a.public_dataset, c.input_file) {
            (Some(alias), _) => super::hub::public_dataset(alias, c.num_dataset_entries, env)?,
            (None, Some(path)) => {
                if locked {
                    violations.push(format!(
                        "a local trace set (--input-file {}) cannot be pinned to a published \
                         corpus; use --public-dataset ALIAS for a valid submission",
                        path.display()
                    ));
                }
                let prov = Provenance {
                    source_type: "file".to_owned(),
                    num_dataset_entries: c.num_dataset_entries,
                    ..Provenance::default()
                };
                (path.to_path_buf(), prov)
            }
            (None, None) => {
                return err(
                    "the AgentX replay needs traces: --public-dataset ALIAS (from the Hugging \
                     Face hub cache) or --input-file PATH (a traces.jsonl or a directory of \
                     *.json traces)",
                )
            }
        };
        let Some(tok) = c.tokenizer else {
            return err(
                "the AgentX replay needs --tokenizer (a tokenizer.json, a model directory, or a \
                 hub model id in the cache): prompts are cut to the traces' exact token counts",
            );
        };
        let tokenizer = super::hub::tokenizer(tok, env)?;
        if locked {
            match c.benchmark_duration {
                Some(d) if d < MIN_SCENARIO_DURATION_S => violations.push(format!(
                    "--benchmark-duration {d} is under the scenario's minimum of \
                     {MIN_SCENARIO_DURATION_S} s"
                )),
                _ => {}
            }
            if let Some(v) = a
                .system_idle_gap_cap_seconds
                .filter(|v| *v != SYSTEM_IDLE_CAP.as_secs_f64())
            {
                violations.push(format!(
                    "--system-idle-gap-cap-seconds {v}: the scenario locks it at {} s",
                    SYSTEM_IDLE_CAP.as_secs_f64()
                ));
            }
            if !c.streaming {
                violations.push(
                    "--streaming false: the scenario needs streaming (TTFT and ITL are core \
                     metrics)"
                        .to_owned(),
                );
            }
            if let Some(v) = a.trace_idle_gap_cap_seconds {
                // AIPerf 0.13's scenario forbids the cap (a violation: an error, or a warning and
                // submission_valid false under --unsafe-override). InferenceX passes it on every
                // run, because the AIPerf fork it pins allows it as a runtime per-tree cap, which
                // is what specperf implements: refusing it would break InferenceX's stage, so
                // without --unsafe-override the run goes on and says how it departs.
                let why = format!(
                    "--trace-idle-gap-cap-seconds {v}: AIPerf 0.13's scenario forbids it (it keeps \
                     every trace's recorded request timing; the cap advances a tree idle for {v} s)"
                );
                if a.unsafe_override {
                    violations.push(why);
                } else {
                    warnings.push(format!(
                        "{why}; AIPerf 0.13 would refuse to run without --unsafe-override. \
                         specperf runs it as InferenceX's AIPerf fork does, so idle gaps over \
                         {v} s are shortened and this replay's timing departs from the traces"
                    ));
                }
            }
            if c.extra_inputs.get("ignore_eos").is_some_and(is_falsy) {
                violations.push(
                    "--extra-inputs ignore_eos is false: the scenario sends ignore_eos true so \
                     every answer is as long as recorded"
                        .to_owned(),
                );
            }
        }
        let mut submission_invalid_reasons = Vec::new();
        if !violations.is_empty() {
            if !a.unsafe_override {
                return err(format!(
                    "--scenario {AGENTX_SCENARIO} forbids: {}; fix it, or pass \
                     --unsafe-override to run anyway (the result is then marked \
                     submission_valid: false)",
                    violations.join("; ")
                ));
            }
            submission_invalid_reasons.push("unsafe_override".to_owned());
            for v in &violations {
                warnings.push(format!(
                    "scenario violation (--unsafe-override, submission_valid false): {v}"
                ));
            }
        }
        if env_bool(env, "AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES", false)? {
            return err(
                "AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES=1 (live assistant history) is not \
                 supported: specperf replays the pre-canned assistant turns, as InferenceX does \
                 (it exports 0); unset it or set it to 0",
            );
        }
        let ratios = StartRatios::new(
            a.trajectory_start_min_ratio.unwrap_or(0.0),
            a.trajectory_start_max_ratio.unwrap_or(1.0),
        )
        .map_err(|e| {
            ConfigError(format!(
                "--trajectory-start-min-ratio / --trajectory-start-max-ratio: {e}"
            ))
        })?;
        let grace_flag = if a.agentic_warmup_grace_period.is_some() {
            "agentic-warmup-grace-period"
        } else {
            "warmup-grace-period"
        };
        let warmup_grace = seconds(
            grace_flag,
            a.agentic_warmup_grace_period
                .or(a.warmup_grace_period)
                .unwrap_or(DEFAULT_WARMUP_GRACE_S),
        )?;
        let trace_idle_cap = a
            .trace_idle_gap_cap_seconds
            .map(|s| seconds("trace-idle-gap-cap-seconds", s))
            .transpose()?;
        let stats_interval = a
            .stats_interval
            .map(|s| seconds("stats-interval", s))
            .transpose()?;
        if a.max_context_length == Some(0) || a.synthesis_max_osl == Some(0) {
            return err("--max-context-length and --synthesis-max-osl must be at least 1");
        }
        if c.num_dataset_entries == Some(0) {
            return err("--num-dataset-entries must be at least 1");
        }
        let load = LoadOptions {
            num_dataset_entries: c.num_dataset_entries,
            max_context_length: a.max_context_length,
            synthesis_max_osl: a.synthesis_max_osl,
            // The `AIPERF_DATASET_WEKA_*` chain-splitting knobs.
            split: crate::agentx::SplitOptions::from_env(env)
                .map_err(|e| ConfigError(e.to_string()))?,
        };
        Ok(Some(Box::new(AgentxSettings {
            input,
            provenance,
            load,
            ratios,
            seed: c.seed,
            tokenizer,
            warmup_requests_per_lane: a.warmup_requests_per_lane,
            warmup_grace,
            trace_idle_cap,
            system_idle_cap: a
                .system_idle_gap_cap_seconds
                .map(|s| seconds("system-idle-gap-cap-seconds", s))
                .transpose()?
                .unwrap_or(SYSTEM_IDLE_CAP),
            stats_interval,
            // 1 (every request failed) can never be exceeded: no live check.
            live_failed_threshold: (c.failed_request_threshold < 1.0)
                .then_some(c.failed_request_threshold),
            routing: SessionRouting::from_env(a, env)?,
            context_overflow_substrings: overflow_substrings(env)?,
            context_overflow_rate_limit: overflow_rate_limit(env)?,
            dag_fail_fast: env_bool(env, "AIPERF_DAG_FAIL_FAST", false)?,
            scenario: locked.then(|| AGENTX_SCENARIO.to_owned()),
            submission_invalid_reasons,
        })))
    }
}

/// The whole-system idle cap the scenario locks (spec §3.4).
const SYSTEM_IDLE_CAP: Duration = Duration::from_secs(10);

/// An `--extra-inputs` value that turns a flag off (`false`, `0`, `"false"`, `"0"`, `"no"`).
fn is_falsy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => matches!(
            s.to_ascii_lowercase().as_str(),
            "false" | "0" | "no" | "off"
        ),
        Value::Null => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agentx/traces");

    fn settings(
        pairs: &[(&str, &str)],
        args: AgentxArgs,
    ) -> Result<(AgentxSettings, Vec<String>), String> {
        let env = |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        let extra = Map::new();
        let common = Common {
            input_file: Some(Path::new(FIXTURES)),
            tokenizer: Some(Path::new(FIXTURES)),
            num_dataset_entries: None,
            seed: 7,
            failed_request_threshold: 0.1,
            benchmark_duration: None,
            streaming: true,
            extra_inputs: &extra,
            unused_flags: Vec::new(),
        };
        let mut warnings = Vec::new();
        let s = AgentxSettings::from_args(&args, &common, &env, &mut warnings)
            .map_err(|e| e.to_string())?
            .expect("--scenario given");
        Ok((*s, warnings))
    }

    /// AIPerf 0.13's scenario counts `--trace-idle-gap-cap-seconds` as a violation: with
    /// `--unsafe-override` it is listed with the others; without, the run goes on (InferenceX's
    /// fork allows the cap) and a warning says how it departs. Outside the scenario: silent.
    #[test]
    fn a_trace_idle_cap_under_the_locked_scenario_is_named() {
        let locked = |unsafe_override| AgentxArgs {
            scenario: Some(Scenario::InferencexAgentxMvp),
            trace_idle_gap_cap_seconds: Some(300.0),
            unsafe_override,
            ..agentx()
        };
        let (s, warnings) = settings(&[], locked(true)).unwrap();
        let named: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("--trace-idle-gap-cap-seconds 300"))
            .collect();
        assert_eq!(named.len(), 1, "{warnings:?}");
        assert!(named[0].starts_with("scenario violation (--unsafe-override"));
        assert!(named[0].contains("forbids"), "{}", named[0]);
        assert_eq!(s.submission_invalid_reasons, ["unsafe_override"]);

        // Without the override, on a published corpus (nothing else violated): the run is
        // allowed, still a valid submission, and the cap is named in a warning.
        let cache = tempfile::tempdir().unwrap();
        let snap = cache
            .path()
            .join("datasets--semianalysisai--cc-traces-weka-062126/snapshots/r1");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("traces.jsonl"), "").unwrap();
        let hub = cache.path().display().to_string();
        let published = AgentxArgs {
            public_dataset: Some("semianalysis_cc_traces_weka_062126".into()),
            ..locked(false)
        };
        let (s, warnings) = settings(&[("HF_HUB_CACHE", hub.as_str())], published).unwrap();
        assert!(s.submission_invalid_reasons.is_empty(), "{warnings:?}");
        let w = warnings.join("\n");
        assert!(
            w.contains("--trace-idle-gap-cap-seconds 300")
                && w.contains("AIPerf 0.13")
                && !w.contains("scenario violation"),
            "{w}"
        );

        let (_, warnings) = settings(
            &[],
            AgentxArgs {
                trace_idle_gap_cap_seconds: Some(300.0),
                ..agentx()
            },
        )
        .unwrap();
        assert!(
            warnings.iter().all(|w| !w.contains("idle-gap")),
            "outside the scenario the cap is an ordinary flag: {warnings:?}"
        );
    }

    fn agentx() -> AgentxArgs {
        AgentxArgs {
            scenario: Some(Scenario::Agentx),
            dynamo_session_timeout_seconds: 3600,
            ..AgentxArgs::default()
        }
    }

    #[test]
    fn aiperf_environment_knobs_change_routing_overflow_and_joins() {
        let (s, _) = settings(&[], agentx()).unwrap();
        assert_eq!(
            s.routing,
            SessionRouting {
                session_affinity_header: true,
                ..SessionRouting::default()
            }
        );
        assert_eq!(s.context_overflow_substrings, DEFAULT_OVERFLOW_SUBSTRINGS);
        assert_eq!(s.context_overflow_rate_limit, 0.01);
        assert!(!s.dag_fail_fast);
        let (s, _) = settings(
            &[
                (
                    "AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID",
                    "true",
                ),
                ("AIPERF_HTTP_X_SESSION_ID_FROM_CORRELATION_ID", "1"),
                (
                    "AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID",
                    "False",
                ),
                ("AIPERF_HTTP_X_SMG_ROUTING_KEY_FROM_CORRELATION_ID", "yes"),
                (
                    "AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS",
                    r#"["too many tokens"]"#,
                ),
                ("AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT", "0.05"),
                ("AIPERF_DAG_FAIL_FAST", "1"),
                ("AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES", "0"),
            ],
            AgentxArgs {
                use_dynamo_conv_aware_routing: true,
                dynamo_session_timeout_seconds: 600,
                ..agentx()
            },
        )
        .unwrap();
        assert_eq!(
            s.routing,
            SessionRouting {
                dynamo_headers: true,
                session_id_header: true,
                session_affinity_header: false,
                smg_routing_key: true,
                nvext_session_timeout_s: Some(600),
            }
        );
        assert_eq!(s.context_overflow_substrings, ["too many tokens"]);
        assert_eq!(s.context_overflow_rate_limit, 0.05);
        assert!(s.dag_fail_fast);
        // `[]` turns detection off.
        let (s, _) = settings(
            &[("AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS", "[]")],
            agentx(),
        )
        .unwrap();
        assert!(s.context_overflow_substrings.is_empty());
    }

    #[test]
    fn unsupported_or_malformed_knobs_are_errors_naming_the_variable() {
        for (name, value, says) in [
            (
                "AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES",
                "1",
                "not supported",
            ),
            ("AIPERF_DAG_FAIL_FAST", "maybe", "not a boolean"),
            (
                "AIPERF_AGENTX_CONTEXT_OVERFLOW_SUBSTRINGS",
                "context length",
                "JSON list",
            ),
            (
                "AIPERF_AGENTX_CONTEXT_OVERFLOW_RATE_LIMIT",
                "2",
                "within [0, 1]",
            ),
        ] {
            let e = settings(&[(name, value)], agentx()).unwrap_err();
            assert!(e.contains(name) && e.contains(says), "{name}={value}: {e}");
        }
    }

    #[test]
    fn grace_caps_and_ratios_are_checked() {
        let (s, _) = settings(
            &[],
            AgentxArgs {
                warmup_grace_period: Some(60.0),
                agentic_warmup_grace_period: Some(90.0),
                ..agentx()
            },
        )
        .unwrap();
        assert_eq!(
            s.warmup_grace,
            Duration::from_secs(90),
            "AIPerf's own name wins"
        );
        let e = settings(
            &[],
            AgentxArgs {
                trajectory_start_min_ratio: Some(0.8),
                trajectory_start_max_ratio: Some(0.2),
                ..agentx()
            },
        )
        .unwrap_err();
        assert!(e.contains("--trajectory-start-min-ratio"), "{e}");
        let e = settings(
            &[],
            AgentxArgs {
                trace_idle_gap_cap_seconds: Some(-1.0),
                ..agentx()
            },
        )
        .unwrap_err();
        assert!(e.contains("--trace-idle-gap-cap-seconds"), "{e}");
    }
}
