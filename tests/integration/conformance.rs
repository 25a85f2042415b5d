//! Drop-in for AIPerf: the artifacts of a simulator replay and of a SPEED-Bench replay, read by
//! AIPerf 0.13's own code (`scripts/aiperf_conformance.py`: its pydantic models, `aiperf plot`,
//! `aiperf speed-bench-report`). Needs the venv `scripts/aiperf-conformance.sh --setup` installs;
//! without it the test fails and says so (the README's test command runs the setup first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{fast, replay_at, scaled, sim, wait_exit};

/// The venv holding aiperf 0.13.0: `$SPECPERF_AIPERF_VENV`, else `target/aiperf-venv`.
fn venv_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = std::env::var_os("SPECPERF_AIPERF_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/aiperf-venv"));
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "no AIPerf venv at {} ({} missing): run `scripts/aiperf-conformance.sh --setup` \
         (installs aiperf==0.13.0 from PyPI, about 5 minutes once, then cached), \
         or point SPECPERF_AIPERF_VENV at one",
        venv.display(),
        python.display()
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperf_0_13_reads_every_aiperf_named_artifact() {
    let _machine = crate::common::exclusive();
    let python = venv_python();
    // vLLM's per-request payload on, so the records carry AIPerf's spec-decode tags and its
    // acceptance record, which AIPerf's own models then check.
    let s = sim(specperf::sim::SimConfig {
        per_request_spec: specperf::sim::PerRequestSpec::Summary,
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("sim-run");
    let speed = tmp.path().join("speed-bench-coding");
    let input =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance/single_turn.jsonl");
    let out = replay_at(
        &s.url(),
        plain.to_str().unwrap(),
        &format!(
            "--request-count 12 --osl 24 --concurrency 4 --custom-dataset-type single_turn \
             --input-file {}",
            input.display()
        ),
    )
    .await;
    assert_eq!(out.summary.counts.success, 12, "the simulator run succeeds");
    let out = replay_at(
        &s.url(),
        speed.to_str().unwrap(),
        "--category coding --request-count 8 --osl 24 --concurrency 4",
    )
    .await;
    assert_eq!(
        out.summary.counts.success, 8,
        "the SPEED-Bench run succeeds"
    );

    let log = tmp.path().join("conformance.log");
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/aiperf_conformance.py"))
        .arg(&plain)
        .arg("--speed-bench")
        .arg(format!("{}=coding", speed.display()))
        .env("COLUMNS", "250")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(tmp.path().join("conformance.err")).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", python.display()));
    // About a minute on 2 loaded cores (AIPerf's imports and its plots dominate).
    let status = wait_exit(&mut child, scaled(Duration::from_secs(600)));
    let stdout = std::fs::read_to_string(&log).unwrap_or_default();
    let stderr = std::fs::read_to_string(tmp.path().join("conformance.err")).unwrap_or_default();
    assert!(
        status.success(),
        "AIPerf 0.13 rejects specperf's artifacts ({status}):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("every artifact accepted"), "{stdout}");
}
