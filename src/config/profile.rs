//! `specperf profile` (AIPerf's argv for InferenceX's AgentX benchmark) -> the `replay` flags of
//! the same meaning -> one [`RunConfig`], so `profile` and `replay --scenario` validate alike.
//!
//! The replay flags start from their defaults (clap's, read once from an empty `replay`
//! command line, so a default lives in one place) and each AIPerf flag overwrites its field.

use clap::{Args, FromArgMatches};

use super::{agentx, err, ConfigError, RunConfig};
use crate::cli::{ProfileArgs, ReplayArgs};

/// Slack on top of warmup grace + duration + benchmark grace for the run deadline: loading the
/// corpus, the primers' spread, the cancel drain and the final scrapes.
const DEADLINE_SLACK_S: f64 = 900.0;

/// `replay`'s flags at their defaults (environment-backed ones read from the environment, as
/// `replay` would).
fn replay_defaults() -> Result<ReplayArgs, ConfigError> {
    let cmd = ReplayArgs::augment_args(clap::Command::new("replay"));
    let matches = cmd
        .try_get_matches_from(["replay"])
        .map_err(|e| ConfigError(format!("the replay defaults do not parse: {e}")))?;
    ReplayArgs::from_arg_matches(&matches)
        .map_err(|e| ConfigError(format!("the replay defaults do not parse: {e}")))
}

/// `--server-metrics` adds endpoints in AIPerf (the `--url`'s own `/metrics` is always scraped);
/// replay's flag replaces the default, so the URL's endpoint is listed first unless given.
fn server_metrics(p: &ProfileArgs) -> Result<Vec<String>, ConfigError> {
    let (Some(url), false) = (&p.url, p.server_metrics.is_empty()) else {
        return Ok(p.server_metrics.clone());
    };
    let own = format!("{}/metrics", super::target::normalize_url(url)?);
    let mut given = Vec::new();
    for u in &p.server_metrics {
        given.extend(super::scrape::metrics_url(u)?);
    }
    let mut out = p.server_metrics.clone();
    if !given.contains(&own) {
        out.insert(0, own);
    }
    Ok(out)
}

impl RunConfig {
    /// Validates `profile` flags into the AgentX replay's configuration. Flags specperf does
    /// not need are named in a warning, never silently dropped.
    pub fn from_profile(p: &ProfileArgs) -> Result<RunConfig, ConfigError> {
        if p.agentx.scenario.is_none()
            && p.custom_dataset_type.is_none()
            && p.agentx.public_dataset.is_none()
        {
            return err(
                "specperf profile runs only the AgentX workload (InferenceX's agentic traces): \
                 pass --scenario inferencex-agentx-mvp with --public-dataset ALIAS (or \
                 --input-file DIR --custom-dataset-type weka_trace); `specperf replay` runs \
                 every other workload (SPEED-Bench, AIPerf files, synthetic, traces)",
            );
        }
        if p.input_file.is_some()
            && p.agentx.public_dataset.is_none()
            && p.custom_dataset_type.is_none()
        {
            return err(
                "--input-file needs --custom-dataset-type weka_trace in specperf profile (the \
                 only file format it replays); other formats run with `specperf replay`",
            );
        }
        if p.ignore_trace_delays {
            return err(
                "--ignore-trace-delays is not supported: the AgentX replay keeps the recorded \
                 timing (the scenario forbids dropping it, and specperf does not implement it \
                 even with --unsafe-override); drop the flag",
            );
        }
        let mut r = replay_defaults()?;
        r.url = p.url.clone();
        r.model = p.model.clone();
        r.endpoint_type = p.endpoint_type;
        r.endpoint = p.endpoint.clone();
        r.streaming = p.streaming;
        r.concurrency = p.concurrency.clone();
        r.tokenizer = p.tokenizer.clone();
        r.input_file = p.input_file.clone();
        r.num_dataset_entries = p.num_dataset_entries;
        r.extra_inputs = p.extra_inputs.clone();
        r.headers = p.headers.clone();
        r.api_key = p.api_key.clone();
        r.request_timeout_seconds = p.request_timeout_seconds;
        r.artifact_dir = p.output_artifact_dir.clone();
        r.load.benchmark_grace_period = p.benchmark_grace_period;
        r.load.random_seed = p.random_seed.unwrap_or(0);
        r.scrape.slice_duration = p.slice_duration;
        r.scrape.server_metrics = server_metrics(p)?;
        r.telemetry = p.telemetry.clone();
        // AIPerf has no post-run failure gate (InferenceX validates afterwards): without the
        // live threshold, failures alone do not fail the run.
        r.failed_request_threshold = p.failed_request_threshold.unwrap_or(1.0);
        r.agentx = p.agentx.clone();
        if r.agentx.scenario.is_none() {
            // `--custom-dataset-type weka_trace` or `--public-dataset` without `--scenario`:
            // AIPerf's plain agentic replay, no locks.
            r.agentx.scenario = Some(crate::cli::Scenario::Agentx);
        }
        let locked = r.agentx.scenario == Some(crate::cli::Scenario::InferencexAgentxMvp);
        let duration = p
            .benchmark_duration
            .or(locked.then_some(agentx::DEFAULT_SCENARIO_DURATION_S));
        r.load.benchmark_duration = duration;
        if let Some(d) = duration {
            let warmup = p
                .agentx
                .agentic_warmup_grace_period
                .or(p.agentx.warmup_grace_period)
                .unwrap_or(1800.0);
            let total = d + p.benchmark_grace_period + warmup + DEADLINE_SLACK_S;
            if total.is_finite() && total > 0.0 {
                r.timeout_seconds = r.timeout_seconds.max(total);
            }
        }
        let mut cfg = RunConfig::from_args(&r)?;
        let noted = [
            (
                "--no-gpu-telemetry",
                p.no_gpu_telemetry,
                "no GPU telemetry is collected (specperf's default without --gpu-telemetry)",
            ),
            (
                "--tokenizer-trust-remote-code",
                p.tokenizer_trust_remote_code,
                "the tokenizer is read from tokenizer.json, no code runs",
            ),
            (
                "--use-server-token-count",
                p.use_server_token_count,
                "token counts always come from the server's usage",
            ),
            (
                "--allow-dataset-wrap",
                p.agentx.allow_dataset_wrap,
                "lanes always wrap the corpus, each reuse with its own cache-bust marker",
            ),
        ]
        .into_iter()
        .filter(|(_, given, _)| *given);
        for (flag, _, why) in noted {
            cfg.warnings
                .push(format!("{flag} accepted and ignored: {why}"));
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agentx");

    fn profile(args: &[&str]) -> Result<RunConfig, String> {
        let mut argv = vec!["specperf", "profile"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Profile(p) = cli.command else {
            panic!("not profile")
        };
        RunConfig::from_profile(&p).map_err(|e| e.to_string())
    }

    /// InferenceX's `build_replay_cmd` argv (spec §1.5) on a local trace directory.
    fn inferencex_argv(traces: &str, duration: &str) -> Vec<String> {
        let tok = format!("{FIXTURES}/traces");
        [
            "--scenario",
            "inferencex-agentx-mvp",
            "--url",
            "http://localhost:8888",
            "--endpoint",
            "/v1/chat/completions",
            "--endpoint-type",
            "chat",
            "--streaming",
            "--model",
            "m",
            "--tokenizer",
            &tok,
            "--concurrency",
            "8",
            "--benchmark-duration",
            duration,
            "--stats-interval",
            "30",
            "--random-seed",
            "42",
            "--failed-request-threshold",
            "0.25",
            "--trajectory-start-min-ratio",
            "0.25",
            "--trajectory-start-max-ratio",
            "0.75",
            "--warmup-requests-per-lane",
            "10",
            "--trace-idle-gap-cap-seconds",
            "300",
            "--warmup-grace-period",
            "1800",
            "--use-server-token-count",
            "--extra-inputs",
            "thinking:true",
            "--no-gpu-telemetry",
            "--tokenizer-trust-remote-code",
            "--num-dataset-entries",
            "393",
            "--slice-duration",
            "1.0",
            "--server-metrics",
            "http://w1:9000/metrics",
            "http://w2:9000/metrics",
            "--output-artifact-dir",
            "/tmp/r/aiperf_artifacts",
            "--input-file",
            traces,
            "--custom-dataset-type",
            "weka_trace",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn the_inferencex_argv_builds_the_agentx_replay() {
        let traces = format!("{FIXTURES}/traces");
        let mut argv = inferencex_argv(&traces, "3600");
        argv.push("--unsafe-override".into());
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let cfg = profile(&argv).unwrap();
        let x = cfg.agentx.as_deref().expect("an AgentX replay");
        assert_eq!(x.scenario.as_deref(), Some("inferencex-agentx-mvp"));
        assert_eq!(x.input, std::path::PathBuf::from(&traces));
        assert_eq!(x.provenance.source_type, "file");
        assert_eq!(x.load.num_dataset_entries, Some(393));
        assert_eq!((x.ratios.min(), x.ratios.max()), (0.25, 0.75));
        assert_eq!(x.seed, 42);
        assert_eq!(x.warmup_requests_per_lane, 10);
        assert_eq!(x.warmup_grace, Duration::from_secs(1800));
        assert_eq!(x.trace_idle_cap, Some(Duration::from_secs(300)));
        assert_eq!(x.system_idle_cap, Duration::from_secs(10));
        assert_eq!(x.stats_interval, Some(Duration::from_secs(30)));
        assert_eq!(x.live_failed_threshold, Some(0.25));
        // A local corpus cannot be pinned: allowed under --unsafe-override, not a valid submission.
        assert_eq!(x.submission_invalid_reasons, ["unsafe_override"]);
        // The --url's own /metrics plus the --server-metrics ones, as AIPerf scrapes them.
        assert_eq!(
            cfg.scrape.endpoints,
            [
                "http://localhost:8888/metrics",
                "http://w1:9000/metrics",
                "http://w2:9000/metrics"
            ]
        );
        assert!(cfg.streaming && cfg.concurrency == 8);
        assert_eq!(cfg.load.duration, Some(Duration::from_secs(3600)));
        assert_eq!(cfg.load.grace, Some(Duration::from_secs(30)));
        assert!(cfg.run_timeout >= Duration::from_secs(3600 + 30 + 1800));
        assert_eq!(
            cfg.artifact_dir.as_deref(),
            Some(std::path::Path::new("/tmp/r/aiperf_artifacts"))
        );
        assert_eq!(
            cfg.extra_inputs.get("thinking"),
            Some(&serde_json::json!(true))
        );
        assert_eq!(cfg.osl, None, "turns carry their own max_tokens");
        assert_eq!(
            cfg.extra_inputs.get("ignore_eos"),
            Some(&serde_json::json!(true))
        );
        let w = cfg.warnings.join("\n");
        for noted in [
            "--no-gpu-telemetry",
            "--tokenizer-trust-remote-code",
            "--use-server-token-count",
            "scenario violation",
        ] {
            assert!(w.contains(noted), "{noted} not noted: {w}");
        }
    }

    #[test]
    fn scenario_locks_are_errors_unless_unsafe_override() {
        let traces = format!("{FIXTURES}/traces.jsonl");
        let argv = inferencex_argv(&traces, "300");
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let e = profile(&argv).unwrap_err();
        assert!(
            e.contains("--benchmark-duration 300")
                && e.contains("--input-file")
                && e.contains("--unsafe-override"),
            "{e}"
        );
        let mut off: Vec<&str> = argv
            .iter()
            .copied()
            .filter(|a| *a != "--streaming")
            .collect();
        off.extend(["--streaming", "false", "--extra-inputs", "ignore_eos:false"]);
        let e = profile(&off).unwrap_err();
        assert!(
            e.contains("--streaming false") && e.contains("ignore_eos"),
            "{e}"
        );
        off.push("--unsafe-override");
        let cfg = profile(&off).unwrap();
        assert!(!cfg.streaming);
        assert_eq!(
            cfg.extra_inputs.get("ignore_eos"),
            Some(&serde_json::json!(false))
        );
        assert_eq!(
            cfg.agentx.unwrap().submission_invalid_reasons,
            ["unsafe_override"]
        );
        let mut delays = argv.clone();
        delays.extend(["--ignore-trace-delays", "--unsafe-override"]);
        assert!(profile(&delays)
            .unwrap_err()
            .contains("--ignore-trace-delays"));
    }

    #[test]
    fn profile_without_agentx_traces_points_at_replay() {
        let e = profile(&["--url", "h:1", "--model", "m"]).unwrap_err();
        assert!(
            e.contains("only the AgentX workload") && e.contains("specperf replay"),
            "{e}"
        );
        let e = profile(&["--input-file", FIXTURES, "--scenario", "agentx"]).unwrap_err();
        assert!(e.contains("--custom-dataset-type weka_trace"), "{e}");
        // Unknown flags are clap's errors, never silently taken.
        assert!(profile(&["--scenario", "agentx", "--bogus-flag"]).is_err());
        // The scenario's defaults: 1800 s, ratios 0/1.
        let tok = format!("{FIXTURES}/traces");
        let cfg = profile(&[
            "--scenario",
            "inferencex-agentx-mvp",
            "--input-file",
            &tok,
            "--custom-dataset-type",
            "weka_trace",
            "--tokenizer",
            &tok,
            "--unsafe-override",
        ])
        .unwrap();
        assert_eq!(cfg.load.duration, Some(Duration::from_secs(1800)));
        let x = cfg.agentx.unwrap();
        assert_eq!((x.ratios.min(), x.ratios.max()), (0.0, 1.0));
        assert_eq!(x.live_failed_threshold, None);
        assert_eq!(x.stats_interval, None);
    }

    #[test]
    fn replay_scenario_agentx_takes_our_flags_and_refuses_load_shapes() {
        let replay = |args: &[&str]| -> Result<RunConfig, String> {
            let mut argv = vec!["specperf", "replay"];
            argv.extend_from_slice(args);
            let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
            let Command::Replay(r) = cli.command else {
                panic!("not replay")
            };
            RunConfig::from_args(&r).map_err(|e| e.to_string())
        };
        let tok = format!("{FIXTURES}/traces");
        let base = [
            "--scenario",
            "agentx",
            "--input-file",
            &tok,
            "--tokenizer",
            &tok,
        ];
        let cfg = replay(&base).unwrap();
        let x = cfg.agentx.as_deref().unwrap();
        assert_eq!(x.scenario, None, "our own replay is not AIPerf's scenario");
        assert!(x.submission_invalid_reasons.is_empty());
        assert_eq!(
            x.load.num_dataset_entries, None,
            "no synthetic default of 100"
        );
        assert_eq!(cfg.load.duration, None);
        let mut rate = base.to_vec();
        rate.extend(["--request-rate", "5"]);
        let e = replay(&rate).unwrap_err();
        assert!(e.contains("--request-rate") && e.contains("AgentX"), "{e}");
        let e = replay(&["--scenario", "agentx", "--input-file", &tok]).unwrap_err();
        assert!(e.contains("--tokenizer"), "{e}");
        let e = replay(&["--scenario", "agentx", "--tokenizer", &tok]).unwrap_err();
        assert!(
            e.contains("--public-dataset") && e.contains("--input-file"),
            "{e}"
        );
        // Without --scenario nothing changes.
        assert!(replay(&[]).unwrap().agentx.is_none());
    }
}
