//! InferenceX's multi-node AgentX stage (`benchmarks/multi_node/agentic_srt.sh`) run unchanged
//! with specperf as its AIPerf, against a loopback Dynamo deployment: `scripts/inferencex-stage.sh`
//! on the InferenceX tree named by `$SPECPERF_INFERENCEX_DIR` (a checkout or snapshot; CI cannot
//! reach GitHub, so without it the test says why it is skipped and passes). It also needs the
//! Dynamo venv `scripts/dynamo.sh --setup` builds (`target/dynamo-venv` or `$SPECPERF_DYNAMO_VENV`).
//!
//! Two runs: the stage with every pass criterion met, and the same stage with the stand-in
//! `nvidia-smi` reporting two boards where the power adapter expects one, which the harness must
//! fail naming `power` (and nothing else): its checks can fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::read_json;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The InferenceX tree, or `None` after a SKIPPED line saying how to give it; the Dynamo venv
/// (scripts/test.sh sets it up; a missing one fails).
fn prerequisites() -> Option<PathBuf> {
    let Some(infx) = std::env::var_os("SPECPERF_INFERENCEX_DIR").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: InferenceX stage harness: SPECPERF_INFERENCEX_DIR is not set (point it at a \
             checkout or snapshot of SemiAnalysisAI/InferenceX; CI cannot reach GitHub)"
        );
        return None;
    };
    crate::tools::Tool::Dynamo.path();
    assert!(
        infx.join("benchmarks/multi_node/agentic_srt.sh").is_file(),
        "SPECPERF_INFERENCEX_DIR={} has no benchmarks/multi_node/agentic_srt.sh",
        infx.display()
    );
    Some(infx)
}

/// What one harness run returned.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the harness with this build's specperf, its work directory in `work`, bounded in time
/// (SIGTERM on overrun: the harness stops the stage and Dynamo on it).
fn harness(infx: &Path, work: &Path, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("scripts/inferencex-stage.sh"))
        .arg(infx)
        .env("SPECPERF_BIN", BIN)
        .env("SPECPERF_INFERENCEX_WORK", work)
        .env_remove("SPECPERF_NVIDIA_SMI_GPUS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Drain both pipes on threads so a chatty stage cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).unwrap();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).unwrap();
        s
    });
    let until = Instant::now() + Duration::from_secs(20 * 60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > until {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let st = crate::common::wait_exit(&mut child, Duration::from_secs(60));
            panic!(
                "scripts/inferencex-stage.sh ran over 20 minutes (stopped: {st}); log: {}",
                work.join("stage.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    Run {
        code: status.code(),
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn inferencex_agentic_srt_stage_passes_unchanged_with_specperf_as_aiperf() {
    let Some(infx) = prerequisites() else {
        return;
    };
    // Dynamo, the stage's Python and specperf take the machine for minutes.
    let _one = crate::common::exclusive();
    let work = tempfile::tempdir().unwrap();

    let run = harness(
        &infx,
        work.path(),
        &[("CONC_LIST", "2 4"), ("DURATION", "30")],
    );
    assert_eq!(
        run.code,
        Some(0),
        "the harness failed:\n{}",
        tail(&run.stderr, 80)
    );
    let results = work.path().join("results");
    assert_eq!(
        run.stdout.lines().last(),
        Some(results.to_str().unwrap()),
        "the last line is not the result directory"
    );
    for name in [
        "stage_exit",
        "aggregate",
        "validate",
        "power",
        "plots",
        "server_metric_prefix",
        "drain",
    ] {
        assert!(
            run.stderr.lines().any(|l| l == format!("PASS {name}")),
            "no PASS {name}:\n{}",
            tail(&run.stderr, 40)
        );
    }
    // The harness's verdicts, read again from the files InferenceX's scripts wrote.
    let stage_env = std::fs::read_to_string(work.path().join("stage.env")).unwrap();
    let rf = stage_env
        .lines()
        .find_map(|l| l.strip_prefix("RESULT_FILENAME="))
        .unwrap();
    for c in [2, 4] {
        let agg = read_json(&results.join(format!("{rf}_conc{c}.json")));
        assert_eq!(agg["conc"], c);
        assert_eq!(agg["power_valid"], 1, "conc {c}: {agg}");
        assert!(agg["num_requests_successful"].as_u64().unwrap() > 0);
        let point = results.join(format!("conc_{c}"));
        let cmd = std::fs::read_to_string(point.join("benchmark_command.txt")).unwrap();
        assert!(
            cmd.contains("/bin/aiperf profile --scenario inferencex-agentx-mvp"),
            "{cmd}"
        );
        assert!(point.join("metrics_plots.png").is_file());
        let aggregate = read_json(&point.join("aiperf_artifacts/profile_export_aiperf.json"));
        assert!(
            aggregate["aiperf_version"]
                .as_str()
                .unwrap()
                .starts_with("specperf-"),
            "the stage's aiperf was not specperf: {}",
            aggregate["aiperf_version"]
        );
    }
}

#[test]
fn inferencex_stage_harness_fails_naming_power_when_the_power_rows_do_not_match_the_topology() {
    let Some(infx) = prerequisites() else {
        return;
    };
    let _one = crate::common::exclusive();
    let work = tempfile::tempdir().unwrap();
    let run = harness(
        &infx,
        work.path(),
        &[
            ("CONC_LIST", "1 2"),
            ("DURATION", "15"),
            ("SPECPERF_NVIDIA_SMI_GPUS", "2"),
        ],
    );
    assert_eq!(
        run.code,
        Some(1),
        "expected a failed check:\n{}",
        tail(&run.stderr, 60)
    );
    let failed = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("inferencex-stage: FAILED: "))
        .unwrap_or_else(|| panic!("no FAILED line:\n{}", tail(&run.stderr, 60)));
    assert_eq!(failed, "power", "{}", tail(&run.stderr, 60));
    assert!(
        run.stderr.contains("expected_gpu_count_mismatch"),
        "{}",
        tail(&run.stderr, 60)
    );
    assert_eq!(
        run.stdout.lines().last(),
        Some(work.path().join("results").to_str().unwrap())
    );
}
