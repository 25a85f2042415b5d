//! Raw flags -> validated, typed configuration. Every check that can fail before the run happens
//! here, with a message naming the flag, the bad value and the fix.
//!
//! One file per concern, each turning its flags into the typed settings of one pipeline stage:
//! `target` (URL, headers, TLS, timeouts: the client), `input` (collection, encoder, body fields:
//! dataset and render), `load` (load shape and shard: schedule), `scrape` (metrics endpoints:
//! scrape), `output` (goodput, result file: metrics and report) and `sim` (the `sim` command).
//! Checks run in one fixed order, so with several bad flags the same one is always reported.

mod agentx;
mod drain;
pub(crate) mod hub;
mod input;
mod load;
mod output;
mod profile;
pub(crate) mod scrape;
mod sim;
mod target;
mod telemetry;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::cli::{ReplayArgs, Ui};
use crate::client::ClientOptions;
use crate::dataset::{DatasetKind, SpeedBenchSelect};
use crate::metrics::Slo;
use crate::render::{EndpointType, RenderOptions};

pub(crate) use agentx::{AgentxSettings, Provenance, SessionRouting};
pub(crate) use drain::{bind_frontend, drain_config_bound_later};
pub use drain::{drain_config, DrainConfig};
pub(crate) use input::parse_extra_inputs;
pub(crate) use input::{DatasetSource, EncoderSpec};
pub(crate) use load::LoadConfig;
pub(crate) use output::parse_goodput;
pub(crate) use output::result_file_name;
pub(crate) use scrape::metrics_endpoints;
pub(crate) use scrape::ScrapeConfig;
pub use sim::sim_config;
pub(crate) use target::Target;
pub(crate) use telemetry::TelemetryConfig;

/// A configuration error (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl ConfigError {
    /// An error with this message (for the commands above `config` that validate their own
    /// flags, as the sweep does).
    pub(crate) fn msg(m: impl Into<String>) -> ConfigError {
        ConfigError(m.into())
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(m.into()))
}

/// A positive number of seconds given as `--flag`.
fn seconds(flag: &str, v: f64) -> Result<Duration, ConfigError> {
    if !v.is_finite() || v <= 0.0 {
        return err(format!(
            "--{flag} must be a positive number of seconds, got {v}"
        ));
    }
    Duration::try_from_secs_f64(v).map_err(|_| ConfigError(format!("--{flag} {v} is too large")))
}

/// A validated `replay` configuration.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub(crate) target: Target,
    pub(crate) model: Option<String>,
    pub(crate) endpoint_type: EndpointType,
    pub(crate) endpoint_path: String,
    pub(crate) streaming: bool,
    /// Closed-loop concurrency, or the open loop's in-flight cap (64 when not given).
    pub(crate) concurrency: usize,
    pub(crate) load: LoadConfig,
    pub(crate) request_count: Option<u64>,
    pub(crate) dataset: DatasetSource,
    pub(crate) select: SpeedBenchSelect,
    pub(crate) osl: Option<u32>,
    pub(crate) encoder: EncoderSpec,
    pub(crate) chat_template_kwargs: Map<String, Value>,
    pub(crate) sampling: Map<String, Value>,
    pub(crate) tokenizer: Option<PathBuf>,
    pub(crate) legacy_max_tokens: bool,
    pub(crate) per_chunk_usage: bool,
    pub(crate) extra_inputs: Map<String, Value>,
    pub(crate) client: ClientOptions,
    pub(crate) run_timeout: Duration,
    pub(crate) stall_timeout: Duration,
    pub(crate) wait_for_model: Duration,
    /// Failed fraction above which the run exits 1.
    pub failed_request_threshold: f64,
    pub(crate) artifact_dir: Option<PathBuf>,
    pub(crate) scrape: ScrapeConfig,
    pub(crate) telemetry: telemetry::TelemetryConfig,
    /// Progress line period (None: no progress line).
    pub progress_interval: Option<Duration>,
    /// The live display.
    pub ui: Ui,
    pub(crate) goodput: Vec<Slo>,
    /// InferenceX raw throughput JSON: (directory or `None` for the artifact dir, file stem).
    pub(crate) result_file: Option<(Option<PathBuf>, String)>,
    pub(crate) cli_command: Option<String>,
    /// Settings that weaken the run (`--insecure`): printed by the binary before the run and
    /// kept in `summary.json` warnings.
    pub warnings: Vec<String>,
    /// Set for an AgentX replay: the lane scheduler replaces the plan.
    pub(crate) agentx: Option<Box<AgentxSettings>>,
}

impl RunConfig {
    pub(crate) fn render_options(
        &self,
        model: String,
        encoder: std::sync::Arc<tokenizer_encoders::Encoder>,
    ) -> RenderOptions {
        RenderOptions {
            endpoint: self.endpoint_type,
            model,
            streaming: self.streaming,
            per_chunk_usage: self.per_chunk_usage,
            osl: self.osl,
            legacy_max_tokens: self.legacy_max_tokens,
            extra_inputs: self.extra_inputs.clone(),
            encoder,
            chat_template_kwargs: self.chat_template_kwargs.clone(),
            sampling: self.sampling.clone(),
        }
    }

    /// The AgentX realtime stats block's period (`--stats-interval`), when asked for.
    pub fn stats_interval(&self) -> Option<Duration> {
        self.agentx.as_ref().and_then(|x| x.stats_interval)
    }

    /// True when replaying against the embedded simulator.
    pub fn is_embedded(&self) -> bool {
        self.target.is_embedded()
    }

    /// Records the command line in the AIPerf summary's `run_info.cli_command`.
    pub fn set_cli_command(&mut self, command: String) {
        self.cli_command = Some(command);
    }

    /// Points the run at `url`: a `--serve-cmd` cell's server, once it is up (its flags were
    /// validated without one).
    pub fn bind(&mut self, url: &str) -> Result<(), ConfigError> {
        self.target = Target::Url(target::normalize_url(url)?);
        if let Some(h) = target::v1_hint(url).filter(|h| !self.warnings.contains(h)) {
            self.warnings.push(h);
        }
        Ok(())
    }
}

impl RunConfig {
    /// A SPEED-Bench Throughput file's split and nominal prompt length, when this run replays
    /// one (the prompt-length check collects only then).
    pub(crate) fn speed_bench_nominal_isl(&self) -> Option<(crate::dataset::Split, u64)> {
        let file = matches!(
            self.dataset,
            DatasetSource::File {
                kind: DatasetKind::SpeedBench,
                ..
            }
        );
        let split = self
            .select
            .split
            .filter(|_| file && self.agentx.is_none())?;
        Some((split, split.nominal_isl()?))
    }

    /// Validates `replay` flags.
    pub fn from_args(a: &ReplayArgs) -> Result<RunConfig, ConfigError> {
        check_counts(a)?;
        let endpoint_path = target::endpoint_path(a)?;
        let (target, osl) = target::target(a)?;
        let dataset = DatasetSource::from_args(a)?;
        let client = target::client_options(a)?;
        let wait_for_model = if a.wait_for_model_timeout == 0.0 {
            Duration::ZERO
        } else {
            seconds("wait-for-model-timeout", a.wait_for_model_timeout)?
        };
        let env = |k: &str| std::env::var(k).ok();
        let mut load = LoadConfig::from_args(a, &env)?;
        let encoder = EncoderSpec::parse(&a.encoder)?;
        let chat_template_kwargs = input::chat_template_kwargs(a.chat_template_kwargs.as_deref())?;
        let sampling = input::sampling(a)?;
        let mut extra_inputs = parse_extra_inputs(&a.extra_inputs)?;
        let mut warnings = target::warnings(a);
        let select = input::select(a, &dataset, &mut warnings)?;
        let agentx = AgentxSettings::from_args(
            &a.agentx,
            &agentx::Common {
                input_file: a.input_file.as_deref(),
                tokenizer: a.tokenizer.as_deref(),
                num_dataset_entries: a.num_dataset_entries,
                seed: a.load.random_seed,
                failed_request_threshold: a.failed_request_threshold,
                benchmark_duration: a.load.benchmark_duration,
                streaming: a.streaming,
                extra_inputs: &extra_inputs,
                unused_flags: agentx_unused_flags(a),
            },
            &env,
            &mut warnings,
        )?;
        if agentx.is_some() {
            // Every AgentX answer is as long as recorded (AIPerf's scenario injects it into
            // the body when absent; an explicit value stays, checked by the scenario above).
            extra_inputs
                .entry("ignore_eos")
                .or_insert(Value::Bool(true));
        }
        let tokenizer = match &agentx {
            // A hub id resolved to its snapshot directory.
            Some(x) => Some(x.tokenizer.clone()),
            None => input::tokenizer(a.tokenizer.as_ref())?,
        };
        if agentx.as_ref().is_some_and(|x| x.scenario.is_some()) && load.duration.is_none() {
            load.duration = Some(Duration::from_secs_f64(agentx::DEFAULT_SCENARIO_DURATION_S));
        }
        let run_timeout = seconds("timeout-seconds", a.timeout_seconds)?;
        let stall_timeout = seconds("stall-timeout-seconds", a.stall_timeout_seconds)?;
        let scrape = ScrapeConfig::from_args(&a.scrape, &env)?;
        let telemetry = telemetry::TelemetryConfig::from_args(&a.telemetry, a.sweep.gpus)?;
        let goodput = parse_goodput(&a.goodput)?;
        let result_file = output::result_file(a)?;
        Ok(RunConfig {
            target,
            model: a.model.clone().filter(|m| !m.is_empty()),
            endpoint_type: a.endpoint_type,
            endpoint_path,
            streaming: a.streaming,
            concurrency: a.concurrency().unwrap_or(64),
            load,
            request_count: a.request_count(),
            dataset,
            select,
            encoder,
            chat_template_kwargs,
            sampling,
            tokenizer,
            // AgentX turns carry their own max_tokens (the embedded simulator's 256 is not sent).
            osl: if agentx.is_some() { None } else { osl },
            legacy_max_tokens: a.use_legacy_max_tokens,
            per_chunk_usage: a.per_chunk_usage,
            extra_inputs,
            client,
            run_timeout,
            stall_timeout,
            wait_for_model,
            failed_request_threshold: a.failed_request_threshold,
            artifact_dir: a.artifact_dir.clone(),
            scrape,
            telemetry,
            // 0 turns the lines off; a negative or NaN value is a slip, not "off".
            progress_interval: if a.progress_interval == 0.0 {
                None
            } else {
                Some(seconds("progress-interval", a.progress_interval)?)
            },
            ui: a.ui,
            goodput,
            result_file,
            cli_command: None,
            warnings,
            agentx,
        })
    }
}

/// Replay flags that mean nothing to the AgentX replay (the traces set the load), given.
fn agentx_unused_flags(a: &ReplayArgs) -> Vec<&'static str> {
    let l = &a.load;
    [
        ("request-rate", l.request_rate.is_some()),
        ("fixed-schedule", l.fixed_schedule),
        ("warmup-request-count", l.warmup_request_count.is_some()),
        ("warmup-duration", l.warmup_duration.is_some()),
        ("warmup-concurrency", l.warmup_concurrency.is_some()),
        (
            "concurrency-ramp-duration",
            l.concurrency_ramp_duration.is_some(),
        ),
        (
            "request-rate-ramp-duration",
            l.request_rate_ramp_duration.is_some(),
        ),
        ("shard", l.shard.is_some()),
        ("request-count", a.request_count.is_some()),
        ("custom-dataset-type", a.custom_dataset_type.is_some()),
        ("synthetic", a.synthetic),
        ("osl", a.osl.is_some()),
        ("all-turns", a.all_turns),
        ("category", a.category.is_some()),
        ("group-by", a.group_by.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// Counts and limits that must be at least 1 (or within range) whatever the rest says.
fn check_counts(a: &ReplayArgs) -> Result<(), ConfigError> {
    let s = &a.serve;
    if s.serve_cmd.is_none() {
        let given = [
            ("--serve-param", !s.serve_params.is_empty()),
            ("--serve-ready-timeout", s.serve_ready_timeout.is_some()),
            ("--serve-stop-grace", s.serve_stop_grace.is_some()),
            (
                "--serve-gpu-release-timeout",
                s.serve_gpu_release_timeout.is_some(),
            ),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
            return err(format!(
                "{flag} shapes a sweep that starts the server itself: add --serve-cmd 'TEMPLATE' \
                 (the command that starts it), or drop {flag}"
            ));
        }
    }
    if a.concurrency.as_ref().is_some_and(|l| l.0.contains(&0)) {
        return err("--concurrency must be at least 1");
    }
    if a.request_count.as_ref().is_some_and(|l| l.0.contains(&0)) {
        return err("--request-count must be at least 1");
    }
    if a.osl.as_ref().is_some_and(|l| l.0.contains(&0)) {
        return err("--osl must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.failed_request_threshold) {
        return err(format!(
            "--failed-request-threshold {} must be within [0, 1]",
            a.failed_request_threshold
        ));
    }
    if a.max_event_bytes < 1024 {
        return err("--max-event-bytes must be at least 1024");
    }
    if a.group_by.as_deref().is_some_and(|f| f.trim().is_empty()) {
        return err("--group-by needs a field name, e.g. --group-by category");
    }
    if a.group_by.is_some()
        && matches!(
            a.custom_dataset_type.as_ref().map(|t| t.kind),
            Some(DatasetKind::MooncakeTrace | DatasetKind::Sharegpt)
        )
    {
        return err(
            "--group-by reads a field of SPEED-Bench, single_turn or multi_turn rows; mooncake \
             traces and ShareGPT conversations have no per-row field to group by",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::output::result_file_name;
    use super::scrape::metrics_url;
    use super::target::normalize_url;
    use super::*;
    use crate::sim::SimConfig;
    use serde_json::json;

    #[test]
    fn urls_get_a_scheme_and_bad_ones_are_named() {
        assert_eq!(
            normalize_url("localhost:8000/").unwrap(),
            "http://localhost:8000"
        );
        assert_eq!(normalize_url("https://h:1").unwrap(), "https://h:1");
        assert!(normalize_url("ftp://h")
            .unwrap_err()
            .to_string()
            .contains("ftp"));
    }

    #[test]
    fn credentials_in_urls_are_refused_and_insecure_is_a_warning() {
        let e = normalize_url("https://user:hunter2@h:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--api-key") && !e.contains("hunter2"), "{e}");
        let e = metrics_url("http://u:hunter2@h:1").unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        use clap::Parser;
        let parse = |args: &[&str]| {
            let mut argv = vec!["specperf", "replay", "--url", "https://h:1"];
            argv.extend_from_slice(args);
            let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
            let crate::cli::Command::Replay(a) = cli.command else {
                panic!("not replay")
            };
            RunConfig::from_args(&a).unwrap()
        };
        assert!(parse(&[]).warnings.is_empty() && !parse(&[]).client.insecure);
        let insecure = parse(&["--insecure"]);
        assert!(insecure.client.insecure);
        assert!(insecure.warnings[0].contains("--insecure"));
    }

    /// Probe: `--per-chunk-usage` without streaming asks for nothing (one body, one usage); it
    /// was dropped without a word.
    #[test]
    fn per_chunk_usage_without_streaming_is_warned_about() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let mut argv = vec!["specperf", "replay"];
            argv.extend_from_slice(args);
            let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
            let crate::cli::Command::Replay(a) = cli.command else {
                panic!("not replay")
            };
            RunConfig::from_args(&a).unwrap()
        };
        let w = parse(&["--per-chunk-usage", "--streaming", "false"]).warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("--per-chunk-usage") && w[0].contains("--streaming false"));
        assert!(parse(&["--per-chunk-usage"]).warnings.is_empty());
    }

    /// Probe: `--progress-interval -1` silently meant "no progress lines".
    #[test]
    fn a_negative_progress_interval_is_refused_and_zero_is_off() {
        use clap::Parser;
        let parse = |v: &str| {
            let cli =
                crate::cli::Cli::try_parse_from(["specperf", "replay", "--progress-interval", v])
                    .unwrap();
            let crate::cli::Command::Replay(a) = cli.command else {
                panic!("not replay")
            };
            RunConfig::from_args(&a)
        };
        let e = parse("-1").unwrap_err().to_string();
        assert!(e.contains("--progress-interval"), "{e}");
        assert!(parse("0").unwrap().progress_interval.is_none());
        assert_eq!(
            parse("0.5").unwrap().progress_interval,
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn metrics_urls_follow_the_inferencex_normalisation() {
        let cases = [
            ("http://10.0.0.5:8081/", "http://10.0.0.5:8081/metrics"),
            (
                "http://h:8000/prometheus/metrics",
                "http://h:8000/prometheus/metrics",
            ),
            ("node3:8081,", "http://node3:8081/metrics"),
            ("8000", "http://0.0.0.0:8000/metrics"),
            (":8000", "http://0.0.0.0:8000/metrics"),
            ("h:1/metrics?x=1", "http://h:1/metrics?x=1"),
        ];
        for (raw, want) in cases {
            assert_eq!(metrics_url(raw).unwrap().as_deref(), Some(want), "{raw}");
        }
        assert!(metrics_url("a b").is_err());
        assert_eq!(metrics_url(" ,").unwrap(), None);
    }

    #[test]
    fn metrics_endpoints_take_the_first_non_empty_source_and_refuse_duplicates() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = env(&[
            ("SPEEDBENCH_DECODE_METRICS_URLS", "a:1, b:2\nc:3"),
            ("SPEEDBENCH_METRICS_URLS", "z:9"),
        ]);
        assert_eq!(
            metrics_endpoints(&[], &both).unwrap(),
            [
                "http://a:1/metrics",
                "http://b:2/metrics",
                "http://c:3/metrics"
            ]
        );
        // Flags win over the environment.
        assert_eq!(
            metrics_endpoints(&["8000".into()], &both).unwrap(),
            ["http://0.0.0.0:8000/metrics"]
        );
        let ports = env(&[
            ("SPEEDBENCH_METRICS_PORTS", "8081 node2:8082"),
            (
                "SPEEDBENCH_TRTLLM_JSON_METRICS_URLS",
                "http://t:8000/metrics",
            ),
        ]);
        assert_eq!(
            metrics_endpoints(&[], &ports).unwrap(),
            [
                "http://0.0.0.0:8081/metrics",
                "http://node2:8082/metrics",
                "http://t:8000/metrics"
            ]
        );
        let aiperf = env(&[("AIPERF_SERVER_METRICS_URLS", "http://a:1,,http://b:2")]);
        let e = metrics_endpoints(&[], &aiperf).unwrap_err().to_string();
        assert!(e.contains("comma-separated list of non-empty URLs"), "{e}");
        let dup = metrics_endpoints(&["h:1".into(), "http://h:1/".into()], &|_| None);
        assert!(dup.unwrap_err().to_string().contains("listed twice"));
        assert!(metrics_endpoints(&[], &|_| None).unwrap().is_empty());
    }

    fn sim_args(args: &[&str]) -> Result<SimConfig, String> {
        use clap::Parser;
        let mut argv = vec!["specperf", "sim"];
        argv.extend_from_slice(args);
        let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let crate::cli::Command::Sim(a) = cli.command else {
            panic!("not sim")
        };
        sim_config(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn fault_sequence_parses_names_and_none_and_excludes_fault_rates() {
        use crate::sim::Fault;
        let cfg = sim_args(&["--fault-sequence", "none,http500,Stall"]).unwrap();
        assert_eq!(
            cfg.fault_sequence,
            [None, Some(Fault::Http500), Some(Fault::Stall)]
        );
        let e = sim_args(&["--fault-sequence", "none,boom"]).unwrap_err();
        assert!(e.contains("boom"), "{e}");
        let e = sim_args(&["--fault-sequence", "http500", "--fault", "stall=0.1"]).unwrap_err();
        assert!(e.contains("--fault-sequence"), "{e}");
    }

    #[test]
    fn sim_rate_limit_parses_rate_and_burst_and_bad_values_name_the_flag() {
        use crate::sim::RateLimit;
        assert_eq!(sim_args(&[]).unwrap().rate_limit, None, "off by default");
        let limit = |v: &str| sim_args(&["--rate-limit", v]).map(|c| c.rate_limit);
        // The burst defaults to one second's worth of requests, at least one.
        let want = |per_second, burst| Ok(Some(RateLimit { per_second, burst }));
        assert_eq!(limit("5"), want(5.0, 5));
        assert_eq!(limit("2.5"), want(2.5, 3));
        assert_eq!(limit("0.1"), want(0.1, 1));
        assert_eq!(limit("0.5,4"), want(0.5, 4));
        assert_eq!(limit(" 20 , 1 "), want(20.0, 1));
        for bad in [
            "", "0", "-1", "fast", "inf", "NaN", "1e10", "5,0", "5,-2", "5,x", "5,", "5,4,3",
            "5,1.5",
        ] {
            let e = limit(bad).unwrap_err();
            assert!(e.contains("--rate-limit"), "{bad:?} names the flag: {e}");
            assert!(e.contains("RPS[,BURST]"), "{bad:?} says the form: {e}");
        }
    }

    #[test]
    fn the_simulator_binds_loopback_unless_told_otherwise() {
        // `specperf sim` without --host, the library default, and the embedded target of a
        // replay without --url: none of them may listen beyond this machine.
        assert!(sim_args(&[]).unwrap().host.is_loopback());
        assert!(SimConfig::default().host.is_loopback());
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["specperf", "replay"]).unwrap();
        let crate::cli::Command::Replay(a) = cli.command else {
            panic!("not replay")
        };
        match RunConfig::from_args(&a).unwrap().target {
            Target::Embedded(sim) => assert!(sim.host.is_loopback()),
            Target::Url(u) => panic!("no --url, yet a target {u}"),
            Target::Unbound => panic!("no --serve-cmd cell, yet an unbound target"),
        }
    }

    #[test]
    fn a_cells_run_is_validated_without_a_url_and_bound_to_its_server_later() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["specperf", "replay", "--osl", "8"]).unwrap();
        let crate::cli::Command::Replay(mut a) = cli.command else {
            panic!("not replay")
        };
        a.url_bound_later = true;
        let mut c = RunConfig::from_args(&a).unwrap();
        assert!(matches!(c.target, Target::Unbound), "{:?}", c.target);
        assert!(!c.is_embedded());
        c.bind("127.0.0.1:4321/v1").unwrap();
        match &c.target {
            Target::Url(u) => assert_eq!(u, "http://127.0.0.1:4321/v1"),
            t => panic!("not bound: {t:?}"),
        }
        assert!(
            c.warnings.iter().any(|w| w.contains("/v1")),
            "the /v1 slip is still said: {:?}",
            c.warnings
        );
        let e = c.bind("ftp://x").unwrap_err();
        assert!(e.to_string().contains("ftp://x"), "{e}");
    }

    #[test]
    fn goodput_takes_vllm_and_aiperf_tags_and_names_bad_input() {
        let slos =
            parse_goodput(&["ttft:200 tpot:20".into(), "request_latency:5000".into()]).unwrap();
        let tags: Vec<(&str, f64)> = slos.iter().map(|s| (s.metric.tag(), s.threshold)).collect();
        assert_eq!(
            tags,
            [
                ("time_to_first_token", 200.0),
                ("inter_token_latency", 20.0),
                ("request_latency", 5000.0)
            ]
        );
        for (bad, says) in [
            ("ttft=200", "expected TAG:VALUE"),
            ("foo:1", "unknown metric \"foo\""),
            ("ttft:-1", "not a positive number"),
            ("ttft:abc", "not a positive number"),
            ("ttft:1 time_to_first_token:2", "given twice"),
        ] {
            let e = parse_goodput(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn result_file_names_cannot_escape_their_directory() {
        assert_eq!(
            result_file_name("dsv4_fp4_vllm_tp8-pp1_conc64_b200").unwrap(),
            "dsv4_fp4_vllm_tp8-pp1_conc64_b200"
        );
        for bad in ["", "../x", "a/b", "a\\b", "..", "x..y", " x"] {
            assert!(result_file_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn extra_inputs_parse_json_scalars_and_objects() {
        let m = parse_extra_inputs(&[
            "temperature:0.6".into(),
            "ignore_eos:true".into(),
            "tag:abc".into(),
            r#"{"top_k": 20}"#.into(),
        ])
        .unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"temperature": 0.6, "ignore_eos": true, "tag": "abc", "top_k": 20})
        );
        assert!(parse_extra_inputs(&["novalue".into()]).is_err());
    }
}
