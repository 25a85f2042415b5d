//! A side task that panics (the `/metrics` scrape, GPU telemetry, the aggregator) is a named
//! warning on stderr and in `summary.json`, and a failed run where its figures are required
//! (`--require-gpu-telemetry`, the aggregator's always); the run still writes what it measured.
//! `SPECPERF_PANIC_IN` makes the binary's side task panic. `-v` prints each lifecycle step; a
//! run without it prints none.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use specperf::sim::{GpuSim, SimConfig};

use crate::common::{fast, output_within, read_json, sim};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// A fast simulator with one GPU on its DCGM page.
fn gpu_sim() -> specperf::sim::SimHandle {
    sim(SimConfig {
        gpus: Some(GpuSim {
            count: 1,
            ..GpuSim::default()
        }),
        ..fast()
    })
}

/// `specperf replay` with `args` against `url` (4 requests of 8 tokens, artifacts in `dir`),
/// `SPECPERF_PANIC_IN` set to `panic_in` when given; bounded at 60 s. Returns (exit code,
/// stdout, stderr).
fn replay(
    panic_in: Option<&str>,
    url: &str,
    dir: &Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut c = Command::new(BIN);
    c.env_remove("SPECPERF_PANIC_IN");
    if let Some(p) = panic_in {
        c.env("SPECPERF_PANIC_IN", p);
    }
    c.arg("replay")
        .args(["--url", url, "--request-count", "4", "--osl", "8"])
        .args(["--progress-interval", "0", "--metrics-settle-seconds", "0"])
        .arg("--artifact-dir")
        .arg(dir)
        .args(args);
    output_within(&mut c, Duration::from_secs(60))
}

fn warnings(dir: &Path) -> Vec<String> {
    let s = read_json(&dir.join("summary.json"));
    s["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_panicking_telemetry_task_is_named_and_fails_a_run_that_requires_it() {
    let s = gpu_sim();
    let dcgm = s.dcgm_url().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let named = "the GPU telemetry task panicked: SPECPERF_PANIC_IN=telemetry asked the GPU \
                 telemetry task to panic; this run has no GPU telemetry and no energy";

    let dir = tmp.path().join("warned");
    let (code, _, err) = replay(
        Some("telemetry"),
        &s.url(),
        &dir,
        &["--gpu-telemetry", &dcgm],
    );
    assert_eq!(
        code,
        Some(0),
        "the figures it lacks are not the point: {err}"
    );
    assert!(err.contains(&format!("WARNING: {named}")), "{err}");
    assert!(
        warnings(&dir).iter().any(|w| w.contains(named)),
        "{:?}",
        warnings(&dir)
    );
    let summary = read_json(&dir.join("summary.json"));
    assert_eq!(summary["counts"]["success"], 4);
    assert!(summary["energy"].is_null(), "{summary:#}");

    let dir = tmp.path().join("required");
    let (code, _, err) = replay(
        Some("telemetry"),
        &s.url(),
        &dir,
        &["--gpu-telemetry", &dcgm, "--require-gpu-telemetry"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("error: --require-gpu-telemetry: {named}")),
        "{err}"
    );
    // What was measured is written all the same.
    assert_eq!(read_json(&dir.join("summary.json"))["counts"]["success"], 4);
    assert!(warnings(&dir).iter().any(|w| w.contains(named)));
}

#[test]
fn a_panicking_scrape_is_named_and_the_run_keeps_its_requests() {
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let (code, _, err) = replay(Some("scrape"), &s.url(), &dir, &[]);
    assert_eq!(code, Some(0), "{err}");
    let named = "the /metrics scrape task panicked: SPECPERF_PANIC_IN=scrape asked the /metrics \
                 scrape task to panic; this run has no server metrics and no acceptance length";
    assert!(err.contains(&format!("WARNING: {named}")), "{err}");
    assert!(
        warnings(&dir).iter().any(|w| w.contains(named)),
        "{:?}",
        warnings(&dir)
    );
    assert_eq!(read_json(&dir.join("summary.json"))["counts"]["success"], 4);
}

#[test]
fn a_panicking_aggregator_fails_the_run_naming_it() {
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let (code, _, err) = replay(Some("aggregator"), &s.url(), &dir, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("error: the aggregator task panicked: SPECPERF_PANIC_IN=aggregator"),
        "{err}"
    );
    assert!(warnings(&dir)
        .iter()
        .any(|w| w.contains("the aggregator task panicked")));
}

#[test]
fn verbose_prints_each_lifecycle_step_and_a_quiet_run_none() {
    let s = gpu_sim();
    let dcgm = s.dcgm_url().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = replay(
        None,
        &s.url(),
        &tmp.path().join("v"),
        &["-v", "--gpu-telemetry", &dcgm],
    );
    assert_eq!(code, Some(0), "{err}");
    let debug: Vec<&str> = err.lines().filter(|l| l.contains("] debug: ")).collect();
    let host = s.url().trim_start_matches("http://").to_owned();
    for step in [
        format!("debug: connect {host}: open in "),
        format!("debug: scrape {}/metrics: HTTP 200, ", s.url()),
        "debug: telemetry read (dcgm): 1 frame(s), 1 GPU(s) in ".to_owned(),
        // The end of the run, step by step, with the memory after each.
        "debug: finish: summary in ".to_owned(),
        "debug: finish: timeslices in ".to_owned(),
    ] {
        assert!(
            debug.iter().any(|l| l.contains(&step)),
            "no {step:?} in {debug:#?}"
        );
    }
    let finish: Vec<&&str> = debug
        .iter()
        .filter(|l| l.contains("debug: finish: "))
        .collect();
    assert!(
        finish.len() >= 4
            && finish
                .iter()
                .all(|l| l.contains(" MiB, peak ") && l.ends_with(" MiB)")),
        "{finish:#?}"
    );
    // Each line starts with the time since the process started.
    assert!(debug
        .iter()
        .all(|l| l.starts_with('[') && l.contains("s] debug: ")));

    // AIPerf's spelling, before the subcommand, turns the same channel on.
    let out = Command::new(BIN)
        .args(["--log-level", "DEBUG", "drain", "--url", &s.url()])
        .args([
            "--poll-interval-seconds",
            "0.05",
            "--max-wait-seconds",
            "10",
            "--output",
        ])
        .arg(tmp.path().join("drain.json"))
        .env_remove("SPEEDBENCH_METRICS_URLS")
        .env_remove("SPEEDBENCH_DECODE_METRICS_URLS")
        .env_remove("AIPERF_SERVER_METRICS_URLS")
        .env_remove("SPEEDBENCH_METRICS_PORTS")
        .output()
        .unwrap();
    let drain_err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{drain_err}");
    assert!(
        drain_err.contains("] debug: drain poll 1: 0 running, 0 waiting over 1 endpoint(s)"),
        "{drain_err}"
    );

    let (code, _, err) = replay(
        None,
        &s.url(),
        &tmp.path().join("q"),
        &["--gpu-telemetry", &dcgm],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !err.contains("debug:"),
        "a run without -v prints no debug line: {err}"
    );
}
