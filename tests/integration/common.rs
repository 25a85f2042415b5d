//! Helpers shared by the topic modules.

use std::path::Path;
use std::time::Duration;

use clap::Parser;
use serde_json::Value;
use specperf::sim::{SimConfig, SimHandle, Simulator};
use specperf::{Cli, Command, Progress, RunConfig, RunOutcome, Stopper};

/// A simulator on 127.0.0.1:0 with `cfg` (host and port forced to loopback / ephemeral).
pub(crate) fn sim(cfg: SimConfig) -> SimHandle {
    Simulator::spawn(SimConfig {
        port: 0,
        host: [127, 0, 0, 1].into(),
        ..cfg
    })
    .expect("simulator starts")
}

/// A fast simulator: 1 ms TTFT, 0.2 ms per step.
pub(crate) fn fast() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(1),
        itl: Duration::from_micros(200),
        ..SimConfig::default()
    }
}

/// Parses `specperf replay <args>` into a validated config.
pub(crate) fn config(args: &[&str]) -> RunConfig {
    // The simulator's counters are exact at once: no settle wait before the final scrape.
    let mut argv = vec![
        "specperf",
        "replay",
        "--progress-interval",
        "0",
        "--metrics-settle-seconds",
        "0",
    ];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("flags parse: {e}"));
    let Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    RunConfig::from_args(&a).unwrap_or_else(|e| panic!("config valid: {e}"))
}

/// Runs a replay, bounded by 60 s of wall clock.
pub(crate) async fn run(cfg: RunConfig) -> RunOutcome {
    run_with(cfg, Stopper::new()).await
}

/// Runs a replay with a given stopper.
pub(crate) async fn run_with(cfg: RunConfig, stop: Stopper) -> RunOutcome {
    let (tx, _rx) = tokio::sync::watch::channel(Progress::default());
    tokio::time::timeout(Duration::from_secs(60), specperf::replay(cfg, stop, tx))
        .await
        .expect("run finishes within 60 s")
        .expect("run starts")
}

/// Every line of `records.jsonl`, parsed (fails the test on a bad line).
pub(crate) fn records(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("records.jsonl")).expect("records.jsonl exists");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("every record line parses"))
        .collect()
}

/// The failure kind of a record (`None` for success / cancelled).
pub(crate) fn kind(r: &Value) -> Option<&str> {
    r["outcome"]["kind"].as_str()
}

/// Replays against `url` with artifacts in `dir`; `args` are further flags, whitespace-separated.
pub(crate) async fn replay_at(url: &str, dir: &str, args: &str) -> RunOutcome {
    let mut argv = vec!["--url", url, "--artifact-dir", dir];
    argv.extend(args.split_whitespace());
    run(config(&argv)).await
}
