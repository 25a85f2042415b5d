//! Drop-in for AIPerf: the artifacts of a simulator replay, of a SPEED-Bench replay and of sweeps
//! (single and repeated runs), read by AIPerf 0.13's own code (`scripts/aiperf_conformance.py`:
//! its pydantic models, `aiperf plot` and its run finder, `aiperf speed-bench-report`). Needs the venv `scripts/aiperf-conformance.sh --setup` installs;
//! without it the test fails and says so (the README's test command runs the setup first).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{fast, replay_at, scaled, sim, wait_exit};
use crate::tools::Tool;

/// The Python of the venv holding aiperf 0.13.0 (a missing venv fails with its set-up command).
pub(crate) fn venv_python() -> PathBuf {
    Tool::Aiperf.path().join("bin/python")
}

/// Runs `scripts/aiperf_conformance.py ARGS` with the venv's Python; panics with its output unless
/// every artifact is accepted.
pub(crate) fn conformance(python: &Path, tmp: &Path, args: &[std::ffi::OsString]) {
    let log = tmp.join("conformance.log");
    let err = tmp.join("conformance.err");
    let mut child = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/aiperf_conformance.py"))
        .args(args)
        .env("COLUMNS", "250")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", python.display()));
    // About a minute on 2 loaded cores (AIPerf's imports and its plots dominate).
    let status = wait_exit(&mut child, scaled(Duration::from_secs(600)));
    let stdout = std::fs::read_to_string(&log).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(
        status.success(),
        "AIPerf 0.13 rejects specperf's artifacts ({status}):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("every artifact accepted"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperf_0_13_reads_a_sweep_and_the_aggregates_of_repeated_runs() {
    let _machine = crate::common::exclusive();
    let python = venv_python();
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("sweep");
    let repeated = tmp.path().join("sweep-repeated");
    let single = tmp.path().join("repeated-single-run");
    let url = s.url();
    let flags = |dir: &Path, extra: &[&str]| {
        let mut a = vec![
            "--url",
            url.as_str(),
            "--request-count",
            "6",
            "--osl",
            "16",
            "--no-drain",
            "--artifact-dir",
        ];
        a.push(dir.to_str().unwrap());
        a.extend_from_slice(extra);
        crate::sweep::sweep_config(&a)
    };
    for (dir, extra) in [
        (&plain, &["--concurrency", "1,2,4"][..]),
        (
            &repeated,
            &["--concurrency", "1,3", "--num-profile-runs", "2"][..],
        ),
        (
            &single,
            &["--concurrency", "2", "--num-profile-runs", "3"][..],
        ),
    ] {
        let o = crate::sweep::sweep_with(flags(dir, extra), |_| {}).await;
        assert_eq!(o.exit_code, 0, "{}", dir.display());
    }
    // AIPerf's layout: a point's trials under it, a single point's runs as run_NNNN.
    assert!(repeated
        .join("concurrency_3/profile_runs/trial_0002/profile_export_aiperf.json")
        .is_file());
    assert!(repeated
        .join("concurrency_3/aggregate/profile_export_aiperf_aggregate.json")
        .is_file());
    assert!(single
        .join("profile_runs/run_0003/profile_export_aiperf.json")
        .is_file());
    assert!(single
        .join("aggregate/profile_export_aiperf_aggregate.csv")
        .is_file());
    let mut args = Vec::new();
    for d in [&plain, &repeated, &single] {
        args.push("--sweep".into());
        args.push(d.as_os_str().to_owned());
    }
    conformance(&python, tmp.path(), &args);
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

    conformance(
        &python,
        tmp.path(),
        &[
            plain.into_os_string(),
            "--speed-bench".into(),
            format!("{}=coding", speed.display()).into(),
        ],
    );
}

/// Issue 27 §3.2–3.4: an AgentX replay by specperf beside AIPerf 0.13's own replay of the same
/// traces, argv and simulator. AIPerf's models read specperf's files, and everything AIPerf
/// writes for that run specperf writes too (`--agentx`: per-record tags and metadata, summary
/// and warmup metrics with their units, `branch_stats`, the replay's `input_config`), with
/// AIPerf's labels; only the HTTP timings specperf's client does not measure are left out. The
/// trace idle cap, which AIPerf 0.13's scenario forbids, is named in specperf's warnings.
#[test]
fn an_agentx_replay_writes_what_aiperf_0_13_writes_for_the_same_run() {
    let _machine = crate::common::exclusive();
    let python = venv_python();
    let s = sim(specperf::sim::SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(2),
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let a_out = tmp.path().join("aiperf");
    let s_out = tmp.path().join("specperf");
    let with_cap = |mut v: Vec<String>| {
        v.extend(["--trace-idle-gap-cap-seconds".into(), "300".into()]);
        v
    };
    let tok = crate::common::aiperf_tokenizer_dir(tmp.path());
    // Not HF_HUB_OFFLINE: AIPerf 0.13 then reads a local tokenizer path as a hub id and fails.
    let mut child = Command::new(python.with_file_name("aiperf"))
        .arg("profile")
        .args(with_cap(crate::common::agentx_argv(
            &s.url(),
            &a_out,
            12,
            &tok,
        )))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let st = wait_exit(&mut child, scaled(Duration::from_secs(240)));
    assert!(st.success(), "aiperf profile exited {st}");

    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .arg("profile")
        .args(with_cap(crate::common::agentx_argv(
            &s.url(),
            &s_out,
            12,
            &crate::common::tokenizer_path(),
        )))
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "specperf profile: {stderr}");
    assert!(
        stderr.contains("--trace-idle-gap-cap-seconds 300: AIPerf 0.13's scenario forbids it"),
        "{stderr}"
    );

    conformance(
        &python,
        tmp.path(),
        &[
            "--agentx".into(),
            format!("{}={}", s_out.display(), a_out.display()).into(),
        ],
    );
}

/// GPU telemetry of a real run (the simulator's DCGM page, a field appearing mid-run): AIPerf
/// 0.13's `TelemetryRecord` reads every `gpu_telemetry_export.jsonl` line back to the same bytes,
/// its export model and statistics the `telemetry_data` section, its analyzer the efficiency
/// metrics, its CSV writer the GPU table, and `aiperf plot` draws the GPU plot
/// (`scripts/aiperf_telemetry_check.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_telemetry_of_a_real_run_is_read_and_drawn_by_aiperf() {
    let _machine = crate::common::exclusive();
    let python = venv_python();
    let s = sim(specperf::sim::SimConfig {
        gpus: Some(specperf::sim::GpuSim {
            count: 2,
            add_field_at: Some(Duration::from_millis(300)),
            ..Default::default()
        }),
        ..fast()
    });
    let dcgm = s.dcgm_url().unwrap();
    let crate::common::Replayed { out, dir } = crate::common::Replay::at(&s.url())
        .args("--concurrency 4 --request-count 200 --osl 64 --gpus 2")
        .args(&format!(
            "--gpu-telemetry {dcgm} --gpu-telemetry-interval 0.05"
        ))
        .run()
        .await;
    assert!(out.summary.energy.is_some());
    let run = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/aiperf_telemetry_check.py"))
        .arg(dir.path())
        .env("COLUMNS", "250")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "AIPerf 0.13 rejects:\n{text}");
    assert!(text.contains("every check passed"), "{text}");
}
