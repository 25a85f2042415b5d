//! `specperf profile` / `replay --scenario agentx` through the binary, for what fails before any
//! request: every error exits 2 with a message naming the input and the fix. (The config layer's
//! successful mappings are unit-tested in `src/config/profile.rs`; a whole run needs the lane
//! scheduler.) No server is started: the errors come before the first connection.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");
const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agentx/traces");

/// Runs the binary with an empty hub cache (and no AIPerf knobs leaking in from the caller).
fn run(cache: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("HF_HUB_CACHE", cache)
        .env_remove("HF_HOME")
        .env_remove("AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES")
        .env_remove("AIPERF_DAG_FAIL_FAST");
    cmd.output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const SCENARIO: [&str; 6] = [
    "profile",
    "--scenario",
    "inferencex-agentx-mvp",
    "--url",
    "http://127.0.0.1:9",
    "--streaming",
];

#[test]
fn a_public_dataset_missing_from_the_hub_cache_names_the_path_and_the_download() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = SCENARIO.to_vec();
    args.extend([
        "--tokenizer",
        TRACES,
        "--public-dataset",
        "semianalysis_cc_traces_weka_062126",
    ]);
    let o = run(cache.path(), &args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("datasets--semianalysisai--cc-traces-weka-062126")
            && e.contains("hf download --repo-type dataset semianalysisai/cc-traces-weka-062126"),
        "{e}"
    );
}

#[test]
fn an_unknown_alias_lists_the_known_ones() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = SCENARIO.to_vec();
    args.extend(["--tokenizer", TRACES, "--public-dataset", "sharegpt"]);
    let o = run(cache.path(), &args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--public-dataset sharegpt")
            && e.contains("semianalysis_cc_traces_weka_062126_256k"),
        "{e}"
    );
}

#[test]
fn a_forbidden_value_needs_unsafe_override() {
    let cache = tempfile::tempdir().unwrap();
    let mut args = SCENARIO.to_vec();
    args.extend([
        "--tokenizer",
        TRACES,
        "--input-file",
        TRACES,
        "--custom-dataset-type",
        "weka_trace",
        "--benchmark-duration",
        "60",
    ]);
    let o = run(cache.path(), &args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--benchmark-duration 60")
            && e.contains("minimum of 900")
            && e.contains("--unsafe-override"),
        "{e}"
    );
    // A hub id not in the cache is named with its download command.
    let mut hub = SCENARIO.to_vec();
    hub.extend([
        "--tokenizer",
        "org/model",
        "--public-dataset",
        "semianalysis_cc_traces_weka_062126",
    ]);
    let cache_dir = cache
        .path()
        .join("datasets--semianalysisai--cc-traces-weka-062126/snapshots/r1");
    std::fs::create_dir_all(&cache_dir).unwrap();
    std::fs::write(cache_dir.join("traces.jsonl"), "").unwrap();
    let o = run(cache.path(), &hub);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--tokenizer org/model") && e.contains("hf download org/model"),
        "{e}"
    );
}

#[test]
fn profile_is_only_the_agentx_workload() {
    let cache = tempfile::tempdir().unwrap();
    let o = run(
        cache.path(),
        &["profile", "--url", "http://127.0.0.1:9", "--model", "m"],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("only the AgentX workload") && e.contains("specperf replay"),
        "{e}"
    );
    // An AIPerf flag specperf does not know is a usage error, never silently dropped.
    let mut args = SCENARIO.to_vec();
    args.push("--gpu-telemetry-mode");
    let o = run(cache.path(), &args);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--gpu-telemetry-mode"),
        "{}",
        stderr(&o)
    );
    // Live assistant responses are refused by name.
    let mut live = Command::new(BIN);
    live.args([
        "replay",
        "--scenario",
        "agentx",
        "--input-file",
        TRACES,
        "--tokenizer",
        TRACES,
    ])
    .env("AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES", "1");
    let o = live.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("AIPERF_DATASET_WEKA_LIVE_ASSISTANT_RESPONSES=1"),
        "{}",
        stderr(&o)
    );
}
