//! The binary as a process: SIGTERM mid-run, usage errors, the embedded default.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{fast, read_json, sim, terminate, wait_exit};
use specperf::sim::SimConfig;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

#[test]
fn sigterm_mid_run_cancels_in_flight_and_writes_records_and_summary() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(20),
        ..fast()
    });
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args([
            "replay",
            "--url",
            &s.url(),
            "--concurrency",
            "8",
            "--request-count",
            "1000",
            "--osl",
            "40",
            "--progress-interval",
            "0",
        ])
        .arg("--artifact-dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let records = dir.path().join("records.jsonl");
    let until = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&records)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 8
    {
        assert!(Instant::now() < until, "no records within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = terminate(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(143));
    let summary: serde_json::Value = read_json(&dir.path().join("summary.json"));
    assert_eq!(summary["meta"]["stopped_by"], "terminated");
    assert_eq!(
        summary["counts"]["cancelled"], 8,
        "every in-flight request became a cancelled record"
    );
    let text = std::fs::read_to_string(&records).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len() as u64,
        summary["counts"]["total"].as_u64().unwrap()
    );
    assert!(lines.len() < 1000);
}

#[test]
fn bad_flags_exit_2_with_a_message_naming_the_flag() {
    let out = Command::new(BIN)
        .args(["replay", "--concurrency", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--concurrency"));
    let out = Command::new(BIN)
        .args([
            "replay",
            "--input-file",
            "/nonexistent/x.jsonl",
            "--progress-interval",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.jsonl"));
    let out = Command::new(BIN)
        .args(["replay", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn embedded_default_prints_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "replay",
            "--progress-interval",
            "0",
            "--sim-ttft-ms",
            "2",
            "--sim-itl-ms",
            "0.5",
        ])
        .arg("--artifact-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Time to first token (ms)") && text.contains("88 ok, 0 failed"),
        "{text}"
    );
}

#[test]
fn sim_subcommand_serves_until_terminated() {
    let mut child = Command::new(BIN)
        .args(["sim", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("listening on http://127.0.0.1:"), "{line}");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(st.code(), Some(0));
}

#[test]
fn concurrency_above_the_open_file_limit_exits_2_naming_ulimit() {
    // A hard limit of 512 cannot be raised by an unprivileged process: 1000 streams do not fit.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256 && ulimit -Hn 512 && exec {BIN} replay --url http://127.0.0.1:9 \
             --model m --concurrency 1000 --request-count 1000 --progress-interval 0 \
             --artifact-dir {}",
            dir.path().display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("1000 requests in flight need about 1128 open files")
            && stderr.contains("hard limit 512")
            && stderr.contains("ulimit -n 1128"),
        "{stderr}"
    );
    // Under the hard limit, the soft limit is raised and the run goes ahead: 300 streams of
    // 100 ms, all open at once, would not fit the soft limit of 256 as it was.
    let s = sim(SimConfig {
        itl: Duration::from_millis(5),
        k: 1,
        acceptance: specperf::sim::Acceptance::Probability(0.0),
        ..fast()
    });
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256 && ulimit -Hn 512 && exec {BIN} replay --url {} --concurrency 300 \
             --request-count 300 --osl 20 --progress-interval 0 --no-server-metrics \
             --artifact-dir {}",
            s.url(),
            dir.path().display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("300 ok, 0 failed"), "{stdout}");
}
