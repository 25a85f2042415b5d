//! `specperf bench-serving`: InferenceX's and sa-bench's argv against the simulator, as the
//! callers run it (the binary, its stdout, its result file, its exit code), checked against
//! shared/spec/bench-serving.md: the F8/F9 datasets' lengths, upstream's key order, the console
//! lines scripts grep, the >5 % rule, sa-bench's initial test, and a TPOT that is the server's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{fast, sim};

fn bench_serving(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_specperf"))
        .arg("bench-serving")
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("specperf runs")
}

fn tok() -> String {
    crate::common::tokenizer_path().display().to_string()
}

/// The result file's keys in order (serde_json here keeps insertion order).
fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The drop-in's argv for the simulator at `url`: the random dataset at `isl`/`osl`, `n` prompts,
/// the result file in `result_dir`, no progress.
fn sim_argv(url: &str, isl: u32, osl: u32, n: u32, result_dir: &Path) -> Vec<String> {
    [
        "--model",
        "specperf-sim",
        "--tokenizer",
        &tok(),
        "--base-url",
        url,
        "--dataset-name",
        "random",
        "--random-input-len",
        &isl.to_string(),
        "--random-output-len",
        &osl.to_string(),
        "--num-prompts",
        &n.to_string(),
        "--save-result",
        "--result-dir",
        &result_dir.display().to_string(),
        "--disable-tqdm",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// InferenceX's `run_benchmark_serving` argv (F8's first dataset: seed 0, ISL 32, OSL 8, r 0.8,
/// 4 prompts, serial padding) with warmups, a cap and the result file: the same lengths as
/// upstream, upstream's keys in upstream's order, only the result file in the directory.
#[test]
fn inferencexs_argv_gives_upstreams_lengths_keys_and_console() {
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("results");
    let tok = tok();
    let out = bench_serving(&[
        "--model",
        "specperf-sim",
        "--tokenizer",
        &tok,
        "--backend",
        "vllm",
        "--base-url",
        &s.url(),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--random-range-ratio",
        "0.8",
        "--num-prompts",
        "4",
        "--max-concurrency",
        "2",
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--num-warmups",
        "4",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--result-dir",
        dir.to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--random-num-workers",
        "1",
        "--disable-tqdm",
        "--metadata",
        "a=1",
        "b=2=3",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(files_in(&dir), ["r.json"]);
    let text = std::fs::read_to_string(dir.join("r.json")).unwrap();
    assert!(
        !text.ends_with('\n') && text.starts_with(r#"{"date": ""#),
        "{text}"
    );
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["input_lens"], serde_json::json!([29, 32, 30, 25]), "F8");
    assert_eq!(
        r["output_lens"],
        serde_json::json!([7, 7, 8, 6]),
        "F8 with ignore_eos"
    );
    assert_eq!(r["completed"], 4);
    assert_eq!(r["total_input_tokens"], 116);
    assert_eq!(r["a"], "1");
    assert_eq!(r["b"], "2");
    assert_eq!(r["max_concurrency"], 2);
    assert_eq!(r["request_rate"], "inf");
    assert!(r["request_goodput:"].is_null());
    let mut expected: Vec<&str> = vec![
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "best_of",
        "num_prompts",
        "a",
        "b",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "benchmark_start_time_unix",
        "benchmark_end_time_unix",
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput:",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
    ];
    for m in ["ttft", "tpot", "itl", "e2el"] {
        for s in ["mean", "median", "std", "p90", "p99", "p99.9"] {
            expected.push(Box::leak(format!("{s}_{m}_ms").into_boxed_str()));
        }
    }
    assert_eq!(keys(&r), expected);
    let (start, end, dur) = (
        r["benchmark_start_time_unix"].as_f64().unwrap(),
        r["benchmark_end_time_unix"].as_f64().unwrap(),
        r["duration"].as_f64().unwrap(),
    );
    assert!(
        end > start && (dur - (end - start)).abs() <= 0.5,
        "{start} {end} {dur}"
    );

    // The console in upstream's order, the lines scripts grep.
    let order = [
        "-------------------  Input/Output Length Statistics  -------------------",
        " input_lens : min=25    max=32    mean=29.00    avg_token_mismatch=",
        "Starting initial single prompt test run...",
        "Warming up with 4 requests...",
        "Warmup completed.",
        "Traffic request rate: inf",
        "Burstiness factor: 1.0 (Poisson process)",
        "Maximum request concurrency: 2",
        "Starting main benchmark run...",
        "============ Serving Benchmark Result ============",
        "Successful requests:                     4         ",
        "---------------Time to First Token----------------",
        "P99.9 E2EL (ms):",
        "==================================================",
    ];
    let mut at = 0;
    for line in order {
        let found = stdout[at..]
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} missing or out of order in:\n{stdout}"));
        at += found + line.len();
    }
}

/// sa-bench's argv (the Dynamo backend, one connection pool, a Poisson rate): the initial test
/// run first, sa-bench's keys (no colon on `request_goodput`, the peak rate, the per-request
/// lists always, `reuse_http_connections` last).
#[test]
fn sa_benchs_argv_gives_its_own_keys_and_initial_test() {
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let tok = tok();
    let url = s.url();
    let port = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let out = bench_serving(&[
        "--flavor",
        "sa-bench",
        "--model",
        "specperf-sim",
        "--tokenizer",
        &tok,
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--backend",
        "dynamo",
        "--endpoint",
        "/v1/completions",
        "--disable-tqdm",
        "--dataset-name",
        "random",
        "--num-prompts",
        "6",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--random-range-ratio",
        "0.8",
        "--random-num-workers",
        "0",
        "--ignore-eos",
        "--request-rate",
        "200",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--max-concurrency",
        "3",
        "--trust-remote-code",
        "--reuse-http-connections",
        "--save-result",
        "--result-dir",
        tmp.path().to_str().unwrap(),
        "--result-filename",
        "results_concurrency_3_gpus_8.json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Initial test run completed. Starting main benchmark run...")
            && stdout.contains("Peak output token throughput (tok/s):")
            && stdout.contains("Traffic request rate: 200.0")
            && !stdout.contains("Input/Output Length Statistics"),
        "{stdout}"
    );
    let r: Value = crate::common::read_json(&tmp.path().join("results_concurrency_3_gpus_8.json"));
    let k = keys(&r);
    // F9 without chat: the same lengths as F8's first dataset, here 6 prompts' targets.
    assert_eq!(r["input_lens"].as_array().unwrap().len(), 6);
    assert_eq!(k.last().map(String::as_str), Some("reuse_http_connections"));
    assert_eq!(r["reuse_http_connections"], true);
    let pos = |name: &str| {
        k.iter()
            .position(|x| x == name)
            .unwrap_or_else(|| panic!("{name}: {k:?}"))
    };
    assert!(pos("duration") < pos("benchmark_start_time_unix"));
    assert!(pos("output_throughput") < pos("peak_output_tokens_per_s"));
    assert!(pos("peak_output_tokens_per_s") < pos("total_token_throughput"));
    assert!(pos("errors") < pos("mean_ttft_ms"));
    assert!(r["request_goodput"].is_null() && r.get("request_goodput:").is_none());
    assert!(r["peak_output_tokens_per_s"].as_f64().unwrap() > 0.0);
    let texts = r["generated_texts"].as_array().unwrap();
    assert!(
        texts.iter().all(|t| !t.as_str().unwrap().is_empty()),
        "{texts:?}"
    );
    assert!(r["errors"].as_array().unwrap().iter().all(|e| e == ""));
}

/// Where upstream's own clock is the bottleneck the figures here are still the server's: the
/// simulator paces 20 ms per step (one chunk of up to k + 1 = 2 tokens), and that is the ITL the
/// result reports, with TPOT between 20 ms / 2 and 20 ms. The step is long enough that a loaded
/// machine only delays a chunk, never makes the simulator catch up in a burst (its schedule is
/// anchored at the request's start), so the bounds hold under load too.
#[test]
fn tpot_and_itl_are_the_servers_pacing() {
    let _machine = crate::common::exclusive();
    let s = sim(specperf::sim::SimConfig {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(20),
        k: 1,
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let tok = tok();
    let out = bench_serving(&[
        "--model",
        "specperf-sim",
        "--tokenizer",
        &tok,
        "--base-url",
        &s.url(),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "12",
        "--num-prompts",
        "16",
        "--max-concurrency",
        "8",
        "--ignore-eos",
        "--save-result",
        "--result-dir",
        tmp.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = crate::common::read_json(&tmp.path().join("r.json"));
    let itl = r["median_itl_ms"].as_f64().unwrap();
    assert!(
        (17.0..40.0).contains(&itl),
        "ITL {itl} (the server paced 20 ms)"
    );
    let tpot = r["median_tpot_ms"].as_f64().unwrap();
    assert!(
        (9.0..40.0).contains(&tpot),
        "TPOT {tpot} (20 ms per step of 1 or 2 tokens)"
    );
    let ttft = r["median_ttft_ms"].as_f64().unwrap();
    assert!(ttft >= 29.0, "TTFT {ttft} below the server's 30 ms");
}

/// Nothing listening: InferenceX's flavor writes its result with every request failed and exits
/// 1 with upstream's FAIL line; sa-bench's stops at its initial test (exit 1, upstream's message).
#[test]
fn failures_follow_upstreams_exit_codes() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let tmp = tempfile::tempdir().unwrap();
    let tok = tok();
    let out = bench_serving(&[
        "--model",
        "m",
        "--tokenizer",
        &tok,
        "--base-url",
        &dead,
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        "3",
        "--save-result",
        "--result-dir",
        tmp.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("FAIL: request failure rate 100.0% exceeds 5% threshold (0/3 completed)"),
        "{stderr}"
    );
    let r = crate::common::read_json(&tmp.path().join("r.json"));
    assert_eq!(r["completed"], 0);
    assert_eq!(r["output_lens"], serde_json::json!([0, 0, 0]));

    let out = bench_serving(&[
        "--flavor",
        "sa-bench",
        "--model",
        "m",
        "--tokenizer",
        &tok,
        "--base-url",
        &dead,
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--num-prompts",
        "3",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: "), "{stderr}");
}

/// Usage and configuration errors exit 2 naming the flag or the file, before any request.
#[test]
fn what_cannot_be_honoured_exits_2_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = tok();
    let empty = tmp.path().to_str().unwrap();
    // A file where the artifact directory should be.
    let a_file = tmp.path().join("a-file");
    std::fs::write(&a_file, "").unwrap();
    let a_file = a_file.display().to_string();
    // The argv with a tokenizer and the random dataset, plus each case's own words.
    let with = |extra: &[&'static str]| {
        let mut v: Vec<String> = [
            "--model",
            "m",
            "--tokenizer",
            &tok,
            "--dataset-name",
            "random",
        ]
        .map(str::to_owned)
        .to_vec();
        v.extend(extra.iter().map(|w| w.to_string()));
        v
    };
    let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let mut a_dir = with(&["--artifact-dir"]);
    a_dir.push(a_file);
    for (args, needle) in [
        (with(&["--bogus"]), "unrecognized arguments: --bogus"),
        (
            words(&["--model", "m", "--tokenizer", &tok]),
            "Unknown dataset: sharegpt",
        ),
        (
            words(&[
                "--model",
                "m",
                "--tokenizer",
                empty,
                "--dataset-name",
                "random",
            ]),
            "tokenizer.json",
        ),
        (
            words(&["--model", "nobody/nothing", "--dataset-name", "random"]),
            "hf download nobody/nothing",
        ),
        (with(&["--use-chat-template"]), "no chat template"),
        (with(&["--random-range-ratio", "1.5"]), "--random-input-len"),
        (a_dir, "--artifact-dir"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
            .arg("bench-serving")
            .args(&args)
            .env("HF_HUB_CACHE", tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let out = bench_serving(&["--flavor", "sa-bench", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        help.contains("--custom-tokenizer") && !help.contains("--dsv4"),
        "{help}"
    );
}

/// The upstream script under `$VAR/<rel>` (a checkout or snapshot; CI cannot reach GitHub), or
/// why the side-by-side check is skipped.
pub(crate) fn upstream(var: &str, rel: &str, what: &str) -> Option<std::path::PathBuf> {
    let Some(root) = std::env::var_os(var).map(std::path::PathBuf::from) else {
        eprintln!(
            "SKIPPED: {what} side by side: {var} is not set (point it at a checkout or snapshot; \
             CI cannot reach GitHub)"
        );
        return None;
    };
    let script = root.join(rel);
    assert!(script.is_file(), "{var}={}: no {rel}", root.display());
    Some(script)
}

/// InferenceX's script and sa-bench's, each where its snapshot is given (named in the skip
/// message as `{before}<the script>{after}`).
fn upstreams(before: &str, after: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let ix = upstream(
        "SPECPERF_INFERENCEX_DIR",
        "utils/bench_serving/benchmark_serving.py",
        &format!("{before}InferenceX's benchmark_serving.py{after}"),
    );
    let sa = upstream(
        "SPECPERF_SRT_SLURM_DIR",
        "src/srtctl/benchmarks/scripts/sa-bench/benchmark_serving.py",
        &format!("{before}srt-slurm's sa-bench{after}"),
    );
    (ix, sa)
}

/// One run of upstream's script (the AIPerf venv's Python has numpy, transformers and aiohttp)
/// and one of the drop-in, same argv, each with its own result directory.
fn side_by_side(
    tmp: &Path,
    script: &Path,
    flavor: &[&str],
    argv: &[&str],
    name: &str,
) -> [(Output, Value, std::path::PathBuf); 2] {
    let run = |mut cmd: Command, dir: &str| {
        let dir = tmp.join(dir).join(name.trim_end_matches(".json"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = cmd
            .args(argv)
            .args(["--save-result", "--result-dir", dir.to_str().unwrap()])
            .args(["--result-filename", name])
            .env_remove("OPENAI_API_KEY")
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let r = crate::common::read_json(&dir.join(name));
        assert_eq!(files_in(&dir), [name], "{stderr}");
        (out, r, dir)
    };
    let mut up = Command::new(crate::conformance::venv_python());
    up.arg(script).current_dir(script.parent().unwrap());
    let mut ours = Command::new(env!("CARGO_BIN_EXE_specperf"));
    ours.arg("bench-serving").args(flavor);
    [run(up, "upstream"), run(ours, "specperf")]
}

/// What must agree (spec §14): exit code, keys and their order, value types, the per-request
/// lengths and errors, token totals; the console's lines with the figures masked.
fn agree(up: &(Output, Value, PathBuf), ours: &(Output, Value, PathBuf), extra_keys: &[&str]) {
    let (uo, ur, _) = up;
    let (oo, or, _) = ours;
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        uo.status.code(),
        oo.status.code(),
        "upstream:\n{}\n{}\nspecperf:\n{}\n{}",
        text(uo),
        String::from_utf8_lossy(&uo.stderr),
        text(oo),
        String::from_utf8_lossy(&oo.stderr)
    );
    let ours_keys: Vec<String> = keys(or)
        .into_iter()
        .filter(|k| !extra_keys.contains(&k.as_str()))
        .collect();
    assert_eq!(keys(ur), ours_keys);
    for (k, v) in ur.as_object().unwrap() {
        let w = &or[k];
        let kind = |v: &Value| match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => "int",
            Value::Number(_) => "float",
            Value::String(_) => "str",
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Array(_) => "list",
            Value::Object(_) => "dict",
        };
        assert_eq!(kind(v), kind(w), "{k}: {v} vs {w}");
    }
    for k in [
        "input_lens",
        "output_lens",
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "model_id",
        "tokenizer_id",
        "backend",
    ] {
        assert_eq!(ur[k], or[k], "{k}");
    }
    if let Some(e) = ur.get("errors") {
        assert_eq!(e, &or["errors"]);
    }
    // Figures masked: a row's label and layout, every other line exactly.
    let mask = |s: String| -> Vec<String> {
        s.lines()
            .filter(|l| {
                !l.starts_with("Namespace(") && !l.starts_with("Prompt generation completed")
            })
            .map(|l| {
                if l.len() > 41 && l.as_bytes()[40] == b' ' && l[41..].trim().parse::<f64>().is_ok()
                {
                    l[..41].to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect()
    };
    assert_eq!(mask(text(uo)), mask(text(oo)));
}

/// Spec §14 with upstream itself: InferenceX's benchmark_serving.py (`$SPECPERF_INFERENCEX_DIR`)
/// and sa-bench's (`$SPECPERF_SRT_SLURM_DIR`) beside the drop-in, same argv and simulator.
#[test]
fn upstream_and_the_drop_in_agree_side_by_side() {
    let (ix, sa) = upstreams("", "");
    if ix.is_none() && sa.is_none() {
        return;
    }
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let tok = crate::common::aiperf_tokenizer_dir(tmp.path());
    let tok = tok.to_str().unwrap();
    let url = s.url().replace("127.0.0.1", "0.0.0.0");
    if let Some(script) = &ix {
        // The default call (warmups, a cap, all at once), then DeepSeek-V4's template with a
        // gamma-rate load, goodput, detailed lists and a prefix.
        let base = [
            "--model",
            "specperf-sim",
            "--tokenizer",
            tok,
            "--backend",
            "vllm",
            "--base-url",
            &url,
            "--dataset-name",
            "random",
            "--random-range-ratio",
            "0.8",
            "--ignore-eos",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
        ];
        let mut a = base.to_vec();
        a.extend([
            "--random-input-len",
            "64",
            "--random-output-len",
            "8",
            "--num-prompts",
            "16",
            "--max-concurrency",
            "4",
            "--request-rate",
            "inf",
            "--num-warmups",
            "8",
            "--seed",
            "3",
        ]);
        let [up, ours] = side_by_side(tmp.path(), script, &[], &a, "ix.json");
        agree(&up, &ours, &[]);
        process_result(script, &ours.2, "ix", false);
        run_benchmark_serving(script, &s.url(), "specperf-sim", tok, tmp.path());
        let mut a = base.to_vec();
        a.extend([
            "--random-input-len",
            "256",
            "--random-output-len",
            "16",
            "--num-prompts",
            "8",
            "--request-rate",
            "40",
            "--burstiness",
            "0.5",
            "--use-chat-template",
            "--dsv4",
            "--goodput",
            "ttft:1000",
            "tpot:50",
            "--save-detailed",
            "--random-prefix-len",
            "8",
            "--metadata",
            "k=v",
            "--metric-percentiles",
            "50,99",
        ]);
        let [up, ours] = side_by_side(tmp.path(), script, &[], &a, "ix-dsv4.json");
        agree(&up, &ours, &[]);
    }
    if let Some(script) = &sa {
        let port = s
            .url()
            .rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let a = [
            "--model",
            "specperf-sim",
            "--tokenizer",
            tok,
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--backend",
            "dynamo",
            "--endpoint",
            "/v1/completions",
            "--disable-tqdm",
            "--dataset-name",
            "random",
            "--num-prompts",
            "12",
            "--random-input-len",
            "64",
            "--random-output-len",
            "8",
            "--random-range-ratio",
            "0.8",
            "--random-num-workers",
            "0",
            "--ignore-eos",
            "--request-rate",
            "100",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--max-concurrency",
            "4",
            "--trust-remote-code",
            "--reuse-http-connections",
        ];
        let [up, ours] = side_by_side(
            tmp.path(),
            script,
            &["--flavor", "sa-bench"],
            &a,
            "results_concurrency_4_gpus_8.json",
        );
        agree(
            &up,
            &ours,
            &["benchmark_start_time_unix", "benchmark_end_time_unix"],
        );
    }
}

/// InferenceX's own reader of the result, `utils/process_result.py` (single node, power best
/// effort unless required), on specperf's file: it runs and converts every latency and TPOT
/// key.
fn process_result(script: &Path, dir: &Path, stem: &str, require_power: bool) {
    let utils = script.parent().unwrap().parent().unwrap();
    let out = Command::new(crate::conformance::venv_python())
        .arg(utils.join("process_result.py"))
        .current_dir(dir)
        .env("PYTHONPATH", utils)
        .envs([
            ("RUNNER_TYPE", "h200"),
            ("FRAMEWORK", "vllm"),
            ("PRECISION", "fp8"),
            ("SPEC_DECODING", "none"),
            ("RESULT_FILENAME", stem),
            ("ISL", "64"),
            ("OSL", "8"),
            ("DISAGG", "false"),
            ("MODEL_PREFIX", "sim"),
            ("IMAGE", "specperf"),
            ("TP", "1"),
            ("EP_SIZE", "1"),
            ("DP_ATTENTION", "false"),
            ("REQUIRE_POWER", if require_power { "1" } else { "0" }),
            ("GPU_METRICS_CSV", "gpu_metrics.csv"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "process_result.py: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let agg = crate::common::read_json(&dir.join(format!("agg_{stem}.json")));
    assert_eq!(agg["conc"], 4);
    assert!(agg["median_intvty"].as_f64().unwrap() > 0.0, "{agg}");
    assert!(agg["p99_e2el"].as_f64().unwrap() > 0.0, "{agg}");
}

/// InferenceX's own caller, `run_benchmark_serving` of `benchmarks/benchmark_lib.sh`, with its
/// one change (`python3 …/benchmark_serving.py` → `specperf bench-serving`), between its
/// `start_gpu_monitor` and `stop_gpu_monitor` (the stage harness's stand-in `nvidia-smi` writes
/// synthetic power rows), then its `process_result.py` with power required: its
/// `aggregate_power.py` joins the rows to the result's window and accepts it.
pub(crate) fn run_benchmark_serving(script: &Path, url: &str, model: &str, tok: &str, tmp: &Path) {
    let root = script.ancestors().nth(3).unwrap();
    let lib = std::fs::read_to_string(root.join("benchmarks/benchmark_lib.sh")).unwrap();
    let call = r#"python3 "$workspace_dir/utils/bench_serving/benchmark_serving.py""#;
    assert_eq!(
        lib.matches(call).count(),
        1,
        "benchmark_lib.sh no longer calls {call}"
    );
    let lib = lib.replace(call, r#""$SPECPERF_BIN" bench-serving"#);
    let dir = tmp.join("run_benchmark_serving");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("benchmark_lib.sh"), lib).unwrap();
    let port = url.rsplit(':').next().unwrap().trim_end_matches('/');
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -e; source ./benchmark_lib.sh; start_gpu_monitor --output gpu_metrics.csv; \
             sleep 1.5; run_benchmark_serving --model {model} \
             --port {port} --backend vllm --input-len 64 --output-len 8 \
             --random-range-ratio 0.8 --num-prompts 12 --max-concurrency 4 \
             --result-filename ix_lib --result-dir . --tokenizer {tok}; sleep 1.5; \
             stop_gpu_monitor"
        ))
        .current_dir(&dir)
        .env("PATH", stand_in_path())
        .env("SPECPERF_BIN", env!("CARGO_BIN_EXE_specperf"))
        .env("PYTHONPYCACHEPREFIX", dir.join("pycache"))
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run_benchmark_serving: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Warming up with 8 requests..."), "{stdout}");
    process_result(script, &dir, "ix_lib", true);
    let agg = crate::common::read_json(&dir.join("agg_ix_lib.json"));
    assert_eq!(
        agg["power_valid"], 1,
        "aggregate_power.py rejected the window: {agg}"
    );
}

/// PATH with the stage harness's stand-in `nvidia-smi` first.
fn stand_in_path() -> String {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/inferencex-stage/bin");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Opt-in, what upstream cannot do: `--server-metrics` reads the simulator's speculative counters
/// over the measured window and appends `vllm bench serve`'s `spec_decode_*` keys after the last
/// upstream key; the console says the acceptance length after the result block.
#[test]
fn server_metrics_append_the_windows_acceptance_after_upstreams_keys() {
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    let tok = tok();
    let metrics = format!("{}/metrics", s.url());
    let out = bench_serving(&[
        "--model",
        "specperf-sim",
        "--tokenizer",
        &tok,
        "--base-url",
        &s.url(),
        "--dataset-name",
        "random",
        "--random-input-len",
        "32",
        "--random-output-len",
        "32",
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
        "--ignore-eos",
        "--save-result",
        "--result-dir",
        tmp.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--disable-tqdm",
        "--server-metrics",
        &metrics,
        "--server-metrics-settle-seconds",
        "0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = crate::common::read_json(&tmp.path().join("r.json"));
    let k = keys(&r);
    let first = k
        .iter()
        .position(|x| x.starts_with("spec_decode_"))
        .expect("spec_decode keys");
    assert_eq!(k[first - 1], "p99.9_e2el_ms", "{k:?}");
    assert!(
        k[first..].iter().all(|x| x.starts_with("spec_decode_")),
        "{k:?}"
    );
    let al = r["spec_decode_acceptance_length"].as_f64().unwrap();
    assert!(al > 1.0 && al <= 4.0, "AL {al} (k = 3)");
    let drafts = r["spec_decode_num_drafts"].as_u64().unwrap();
    let accepted = r["spec_decode_accepted_tokens"].as_u64().unwrap();
    assert!((al - (1.0 + accepted as f64 / drafts as f64)).abs() < 1e-9);
    assert!(
        stdout.contains("Acceptance length (server counters): "),
        "{stdout}"
    );
}

/// srt-slurm's own caller, sa-bench's `bench.sh` (`$SPECPERF_SRT_SLURM_DIR`), with its one change
/// (`python3 -u …/benchmark_serving.py` → `specperf bench-serving --flavor sa-bench`, both
/// calls) and its container's `/logs` moved into a temporary directory: the warmup run and the
/// measured run per concurrency, one result file per concurrency under its name pattern, and
/// nothing else beside them.
#[test]
fn srt_slurms_bench_sh_runs_the_drop_in_per_concurrency() {
    let Some(script) = upstream(
        "SPECPERF_SRT_SLURM_DIR",
        "src/srtctl/benchmarks/scripts/sa-bench/bench.sh",
        "srt-slurm's sa-bench bench.sh",
    ) else {
        return;
    };
    let s = sim(fast());
    let tmp = tempfile::tempdir().unwrap();
    bench_sh(&script, &s.url(), "specperf-sim", tmp.path());
}

/// Runs sa-bench's `bench.sh` with its one change against `url` (concurrencies 2 and 4, 3
/// prompts per slot, 2 warmup prompts per slot, one pool) and checks what it left.
pub(crate) fn bench_sh(script: &Path, url: &str, model: &str, tmp: &Path) {
    let scripts = tmp.join("scripts");
    let bench_dir = scripts.join("sa-bench");
    std::fs::create_dir_all(&bench_dir).unwrap();
    let lib = script.parent().unwrap().parent().unwrap().join("lib");
    std::fs::create_dir_all(scripts.join("lib")).unwrap();
    for f in std::fs::read_dir(&lib).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, scripts.join("lib").join(f.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(script).unwrap();
    let call = r#"python3 -u "${WORK_DIR}/benchmark_serving.py""#;
    assert_eq!(
        text.matches(call).count(),
        2,
        "bench.sh no longer calls {call} twice"
    );
    let logs = tmp.join("logs");
    let text = text
        .replace(call, r#""$SPECPERF_BIN" bench-serving --flavor sa-bench"#)
        .replace("\"/logs/", "\"$SPECPERF_TEST_LOGS/");
    std::fs::write(bench_dir.join("bench.sh"), text).unwrap();
    let tok = crate::common::aiperf_tokenizer_dir(tmp);
    // python3 is the AIPerf venv's: bench.sh's dependency check imports what sa-bench needs and
    // would pip-install into a venv otherwise.
    let venv_bin = crate::conformance::venv_python()
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(bench_dir.join("bench.sh"))
        .args([
            url,
            "64",
            "8",
            "2x4",
            "inf",
            tok.to_str().unwrap(),
            model,
            "false",
            "8",
            "0",
            "0",
            "0.8",
            "3",
            "2",
            "",
            "false",
            "random",
            "",
            "true",
        ])
        .env("SPECPERF_BIN", env!("CARGO_BIN_EXE_specperf"))
        .env("SPECPERF_TEST_LOGS", &logs)
        .env("PATH", path)
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench.sh: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = logs.join("sa-bench_isl_64_osl_8");
    assert_eq!(
        files_in(&dir),
        [
            "results_concurrency_2_gpus_8.json",
            "results_concurrency_4_gpus_8.json"
        ]
    );
    for c in [2u64, 4] {
        let r = crate::common::read_json(&dir.join(format!("results_concurrency_{c}_gpus_8.json")));
        assert_eq!(r["completed"], c * 3);
        assert_eq!(r["max_concurrency"], c);
        assert_eq!(r["reuse_http_connections"], true);
    }
    // The warmup runs (rate 250, no result) came first, one per concurrency.
    assert_eq!(
        stdout.matches("Traffic request rate: 250.0").count(),
        2,
        "{stdout}"
    );
}

/// A completions server on 127.0.0.1:0 that records every request body in arrival order and
/// answers each with two token chunks (chat deltas on a chat path), a usage chunk and `[DONE]`,
/// closing the connection.
struct Recorder {
    url: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    /// How to answer the request at each index of the current run (past the end: `Fault::Ok`).
    faults: std::sync::Arc<std::sync::Mutex<Vec<Fault>>>,
}

/// How the recorder answers one request.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Ok,
    /// HTTP 500 with an OpenAI error body.
    Status500,
    /// The connection closed before any response.
    Close,
    /// A chunked stream cut after its first chunk, with no terminating chunk.
    Cut,
    /// A close-delimited stream of two text chunks, with no `finish_reason`, usage or `[DONE]`.
    NoDone,
    /// The usual stream, every chunk's text empty.
    BlankText,
    /// The usual stream after a keep-alive comment line (upstream's `json.loads` fails on it,
    /// except under sa-bench's `dynamo` backend).
    Comment,
    /// The usual stream with an `error` object between its chunks (upstream passes over it).
    ErrorEvent,
    /// A non-streaming answer: one JSON line with a length (completions count it; chat has no
    /// `delta` and fails).
    Whole,
}

impl Recorder {
    fn start() -> Recorder {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let faults = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, plan) = (bodies.clone(), faults.clone());
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(mut sock) = sock else { return };
                let (log, plan) = (log.clone(), plan.clone());
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 65536];
                    let head_end = loop {
                        if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p + 4;
                        }
                        match sock.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => got.extend_from_slice(&buf[..k]),
                        }
                    };
                    let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while got.len() < head_end + len {
                        match sock.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => got.extend_from_slice(&buf[..k]),
                        }
                    }
                    let body = String::from_utf8_lossy(&got[head_end..head_end + len]).into_owned();
                    let chat = path.contains("chat");
                    let fault = {
                        let mut log = log.lock().unwrap();
                        log.push((path, body));
                        let plan = plan.lock().unwrap();
                        plan.get(log.len() - 1).copied().unwrap_or(Fault::Ok)
                    };
                    let blank = fault == Fault::BlankText;
                    let piece = |t: &str| {
                        let t = if blank { "" } else { t };
                        if chat {
                            format!("\"delta\":{{\"content\":\"{t}\"}}")
                        } else {
                            format!("\"text\":\"{t}\"")
                        }
                    };
                    let sse = format!(
                        "data: {{\"choices\":[{{\"index\":0,{},\"finish_reason\":null}}]}}\n\n\
                         data: {{\"choices\":[{{\"index\":0,{},\"finish_reason\":\"length\"}}]}}\n\n\
                         data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}}}\n\n\
                         data: [DONE]\n\n",
                        piece("x"),
                        piece("y")
                    );
                    let first = format!(
                        "data: {{\"choices\":[{{\"index\":0,{},\"finish_reason\":null}}]}}\n\n",
                        piece("x")
                    );
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
                    let reply = match fault {
                        Fault::Ok | Fault::BlankText => {
                            format!("{head}Connection: close\r\n\r\n{sse}")
                        }
                        Fault::Comment => {
                            format!("{head}Connection: close\r\n\r\n: ping\n\n{sse}")
                        }
                        Fault::ErrorEvent => format!(
                            "{head}Connection: close\r\n\r\n{first}data: {{\"error\":{{\"message\":\"late\"}}}}\n\n{}",
                            &sse[first.len()..]
                        ),
                        Fault::Whole => {
                            let choice = if chat {
                                "\"message\":{\"role\":\"assistant\",\"content\":\"xy\"}"
                            } else {
                                "\"text\":\"xy\""
                            };
                            let b = format!(
                                "{{\"choices\":[{{\"index\":0,{choice},\"finish_reason\":\"length\"}}],\
                                 \"usage\":{{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}}}"
                            );
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{b}",
                                b.len()
                            )
                        }
                        Fault::Status500 => {
                            let b = r#"{"object":"error","message":"boom","type":"InternalServerError","code":500}"#;
                            format!(
                                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
                                 Content-Length: {}\r\nConnection: close\r\n\r\n{b}",
                                b.len()
                            )
                        }
                        Fault::Close => String::new(),
                        Fault::Cut => format!(
                            "{head}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{first}\r\n",
                            first.len()
                        ),
                        Fault::NoDone => format!(
                            "{head}Connection: close\r\n\r\n{first}{}",
                            first.replace("\"x\"", "\"y\"")
                        ),
                    };
                    let _ = sock.write_all(reply.as_bytes());
                    let _ = sock.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Recorder {
            url,
            bodies,
            faults,
        }
    }

    /// Takes the requests recorded so far: the next request is index 0 of `faults` again.
    fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.bodies.lock().unwrap())
    }

    /// The faults of the next run, by request index (warmups and sa-bench's initial test count).
    fn plan(&self, faults: &[(usize, Fault)]) {
        let mut plan = vec![Fault::Ok; faults.iter().map(|f| f.0 + 1).max().unwrap_or(0)];
        for &(i, f) in faults {
            plan[i] = f;
        }
        *self.faults.lock().unwrap() = plan;
    }
}

/// Spec §14, the requests themselves: upstream and the drop-in send byte-identical bodies in the
/// same order (one slot, so the order is the dataset's, warmups or the initial test first), to
/// the same paths, for InferenceX's plain and `--dsv4` calls and sa-bench's.
#[test]
fn upstream_and_the_drop_in_send_the_same_bodies_in_the_same_order() {
    let (ix, sa) = upstreams("the bodies of ", "");
    let tmp = tempfile::tempdir().unwrap();
    let tok = crate::common::aiperf_tokenizer_dir(tmp.path());
    let tok = tok.to_str().unwrap();
    // The same tokenizer.json in a directory `name` with `config` as its tokenizer_config.json.
    let with_config = |name: &str, config: &str| -> String {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(crate::common::tokenizer_path(), dir.join("tokenizer.json")).unwrap();
        std::fs::write(dir.join("tokenizer_config.json"), config).unwrap();
        dir.to_str().unwrap().to_owned()
    };
    // A Hugging Face chat template of its own.
    let jinja = with_config(
        "jinja",
        r#"{"tokenizer_class":"PreTrainedTokenizerFast","bos_token":"<｜begin▁of▁sentence｜>","chat_template":"{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"}"#,
    );
    let jinja = jinja.as_str();
    // A ChatML template borrowed from another model: its `<|im_end|>` is not in this
    // tokenizer.json, and transformers adds it (one token, not six).
    let chatml = with_config(
        "chatml",
        r#"{"tokenizer_class":"PreTrainedTokenizerFast","bos_token":null,"eos_token":"<|im_end|>","chat_template":"{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}"#,
    );
    let chatml = chatml.as_str();
    let rec = Recorder::start();
    // (script, argv, environment): later flags override `common`'s (argparse's last wins).
    type Env<'a> = Vec<(&'a str, &'a str)>;
    let mut cases: Vec<(&Path, Vec<&str>, Env)> = Vec::new();
    let common = [
        "--model",
        "m",
        "--tokenizer",
        tok,
        "--base-url",
        &rec.url,
        "--dataset-name",
        "random",
        "--random-range-ratio",
        "0.5",
        "--max-concurrency",
        "1",
        "--seed",
        "11",
    ];
    if let Some(script) = &ix {
        let mut a = common.to_vec();
        a.extend([
            "--random-input-len",
            "48",
            "--random-output-len",
            "5",
            "--num-prompts",
            "6",
        ]);
        a.extend([
            "--num-warmups",
            "2",
            "--ignore-eos",
            "--served-model-name",
            "served",
        ]);
        cases.push((script, a, vec![]));
        let mut a = common.to_vec();
        a.extend([
            "--random-input-len",
            "300",
            "--random-output-len",
            "9",
            "--num-prompts",
            "5",
        ]);
        a.extend([
            "--use-chat-template",
            "--dsv4",
            "--random-prefix-len",
            "3",
            "--logprobs",
            "2",
        ]);
        cases.push((script, a, vec![]));
        // Seeds at both ends, the shortest lengths, a zero range, the padding streams of three
        // workers, a long prompt with a long prefix, gamma arrivals after warmups, and a chat
        // template of the tokenizer's own through the chat backend.
        for extra in [
            "--seed 4294967295 --random-input-len 17 --random-output-len 4 --random-range-ratio 0.8 --num-prompts 7",
            "--seed 0 --random-input-len 1 --random-output-len 1 --random-range-ratio 0 --num-prompts 3",
            "--seed 22 --random-input-len 32 --random-output-len 8 --random-range-ratio 0.8 --num-prompts 8 --random-num-workers 3",
            "--seed 17 --random-input-len 2000 --random-output-len 3 --random-range-ratio 0.9 --num-prompts 2 --random-prefix-len 100",
            "--seed 19 --random-input-len 10 --random-output-len 3 --num-prompts 4 --num-warmups 2 --request-rate 200 --burstiness 2.5",
            // An input length under the template's with a ratio of 1: numpy draws it negative,
            // and each prompt is the template around the prefix cut from its end.
            "--seed 9 --random-input-len 1 --random-output-len 2 --random-range-ratio 1.0 --num-prompts 4 --random-prefix-len 3 --use-chat-template --dsv4",
        ] {
            let mut a = common.to_vec();
            a.extend(extra.split(' '));
            cases.push((script, a, vec![]));
        }
        let mut a = common.to_vec();
        a.extend(["--tokenizer", jinja]);
        a.extend(
            "--random-input-len 30 --random-output-len 5 --num-prompts 4 --use-chat-template \
             --backend openai-chat --endpoint /v1/chat/completions"
                .split_whitespace(),
        );
        cases.push((script, a, vec![]));
        let mut a = common.to_vec();
        a.extend(["--tokenizer", chatml]);
        a.extend(
            "--seed 1 --random-input-len 100 --random-output-len 3 --random-range-ratio 1.0 \
             --num-prompts 2 --use-chat-template"
                .split_whitespace(),
        );
        cases.push((script, a, vec![]));
    }
    if let Some(script) = &sa {
        let mut a = common.to_vec();
        a.extend([
            "--random-input-len",
            "40",
            "--random-output-len",
            "6",
            "--num-prompts",
            "5",
        ]);
        a.extend(["--backend", "dynamo", "--ignore-eos", "--best-of", "2"]);
        cases.push((script, a, vec![]));
        // The SGLang DeepSeek-V4 template with thinking and effort from the environment, and a
        // chat template of the tokenizer's own through the chat backend.
        let mut a = common.to_vec();
        a.extend(
            "--seed 3 --random-input-len 120 --random-output-len 5 --random-range-ratio 0.8 \
             --num-prompts 4 --use-chat-template --custom-tokenizer \
             sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer"
                .split_whitespace(),
        );
        cases.push((
            script,
            a,
            vec![
                ("SGLANG_DEFAULT_THINKING", " True "),
                ("SGLANG_DSV4_REASONING_EFFORT", "max"),
            ],
        ));
        let mut a = common.to_vec();
        a.extend(["--tokenizer", jinja]);
        a.extend(
            "--seed 12 --random-input-len 50 --random-output-len 5 --num-prompts 3 \
             --use-chat-template --backend openai-chat --endpoint /v1/chat/completions --ignore-eos"
                .split_whitespace(),
        );
        cases.push((script, a, vec![]));
        let mut a = common.to_vec();
        a.extend(["--tokenizer", chatml]);
        a.extend(
            "--seed 2 --random-input-len 90 --random-output-len 3 --num-prompts 3 \
             --use-chat-template"
                .split_whitespace(),
        );
        cases.push((script, a, vec![]));
    }
    for (script, argv, env) in cases {
        let flavor: &[&str] = if sa.as_deref() == Some(script) {
            &["--flavor", "sa-bench"]
        } else {
            &[]
        };
        let up = Command::new(crate::conformance::venv_python())
            .arg(script)
            .args(&argv)
            .current_dir(script.parent().unwrap())
            .env("OPENAI_API_KEY", "k")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            up.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&up.stderr)
        );
        let theirs = rec.take();
        let ours = Command::new(env!("CARGO_BIN_EXE_specperf"))
            .arg("bench-serving")
            .args(flavor)
            .args(&argv)
            .env("OPENAI_API_KEY", "k")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            ours.status.success(),
            "{}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let mine = rec.take();
        assert!(!theirs.is_empty());
        assert_eq!(theirs.len(), mine.len(), "{argv:?}");
        for (i, (t, m)) in theirs.iter().zip(&mine).enumerate() {
            assert_eq!(t, m, "{argv:?}: request {i} differs");
        }
    }
}

/// Spec §8.1 and §10 with failures mixed in: against a server that answers some requests with a
/// 500, a dropped connection, a cut chunked stream, a stream without `[DONE]`, a stream of empty
/// texts, a keep-alive comment, an error object inside the stream or a whole JSON body, upstream
/// and the drop-in count the same requests as completed, the same tokens, the same failed
/// indices, and exit alike.
#[test]
fn failure_mixes_are_counted_as_upstream_counts_them() {
    let (ix, sa) = upstreams("", " with failures");
    use Fault::{BlankText, Close, Comment, Cut, ErrorEvent, NoDone, Status500, Whole};
    let tmp = tempfile::tempdir().unwrap();
    let tok = crate::common::aiperf_tokenizer_dir(tmp.path());
    let rec = Recorder::start();
    // (script, flavor, extra argv, faults by request index; sa-bench's initial test is index 0).
    type Case<'a> = (&'a Path, &'a [&'a str], &'a [&'a str], Vec<(usize, Fault)>);
    let mut cases: Vec<Case> = Vec::new();
    if let Some(script) = &ix {
        let faults = vec![
            (2, Status500),
            (5, Close),
            (8, Cut),
            (11, NoDone),
            (14, BlankText),
        ];
        cases.push((script, &[], &["--save-detailed"], faults));
        // Under 5 % failed: exit 0 in both.
        cases.push((
            script,
            &[],
            &["--num-prompts", "40"],
            vec![(3, NoDone), (9, Cut)],
        ));
        let chat: &[&str] = &[
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
        ];
        cases.push((
            script,
            &[],
            chat,
            vec![
                (1, BlankText),
                (4, NoDone),
                (6, Cut),
                (9, Whole),
                (12, ErrorEvent),
            ],
        ));
        // Bodies the SSE reading would judge otherwise: a comment fails, an error object and a
        // whole JSON body count.
        cases.push((
            script,
            &[],
            &[],
            vec![(2, Comment), (5, ErrorEvent), (8, Whole)],
        ));
    }
    if let Some(script) = &sa {
        let faults = vec![
            (0, NoDone),
            (3, Status500),
            (6, BlankText),
            (9, Cut),
            (12, Close),
        ];
        cases.push((script, &["--flavor", "sa-bench"], &[], faults));
        // `dynamo` skips comment lines and reads usage from any line.
        cases.push((
            script,
            &["--flavor", "sa-bench"],
            &["--backend", "dynamo"],
            vec![(2, Comment), (4, Whole), (7, ErrorEvent), (10, NoDone)],
        ));
    }
    for (i, (script, flavor, extra, faults)) in cases.into_iter().enumerate() {
        let mut argv: Vec<String> = [
            "--model",
            "m",
            "--tokenizer",
            tok.to_str().unwrap(),
            "--base-url",
            &rec.url,
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            "4",
            "--num-prompts",
            "20",
            "--max-concurrency",
            "1",
            "--seed",
            "1",
            "--save-result",
            "--result-filename",
            "r.json",
        ]
        .map(str::to_owned)
        .to_vec();
        argv.extend(extra.iter().map(|s| s.to_string()));
        let run = |mut cmd: Command, dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            rec.take();
            rec.plan(&faults);
            let out = cmd
                .args(&argv)
                .arg("--result-dir")
                .arg(dir)
                .env("OPENAI_API_KEY", "k")
                .env("HF_HUB_OFFLINE", "1")
                .output()
                .unwrap();
            let result = crate::common::read_json(&dir.join("r.json"));
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let line = |key: &str| {
                stdout
                    .lines()
                    .find(|l| l.starts_with(key))
                    .map(str::to_owned)
            };
            (
                out.status.code(),
                result,
                line("Successful requests:"),
                rec.take().len(),
            )
        };
        let mut up = Command::new(crate::conformance::venv_python());
        up.arg(script).current_dir(script.parent().unwrap());
        let up = run(up, &tmp.path().join(format!("up{i}")));
        let mut ours = Command::new(env!("CARGO_BIN_EXE_specperf"));
        ours.arg("bench-serving").args(flavor);
        let ours = run(ours, &tmp.path().join(format!("ours{i}")));
        let what = format!("case {i}: {extra:?} with {faults:?}");
        assert_eq!((up.0, &up.2, up.3), (ours.0, &ours.2, ours.3), "{what}");
        for key in [
            "completed",
            "total_input_tokens",
            "total_output_tokens",
            "input_lens",
            "output_lens",
        ] {
            assert_eq!(up.1[key], ours.1[key], "{what}: {key}");
        }
        let failed = |r: &Value| -> Option<Vec<bool>> {
            let e = r.get("errors")?.as_array()?;
            Some(e.iter().map(|e| e != "").collect())
        };
        assert_eq!(
            failed(&up.1),
            failed(&ours.1),
            "{what}: which requests failed"
        );
    }
}

/// specperf's own run deadline (`--timeout-seconds`) against a server that never answers in
/// time: exit 124, and the result file is still written, every request counted as failed.
#[test]
fn the_deadline_ends_the_run_with_124_and_the_result_written() {
    let s = sim(specperf::sim::SimConfig {
        ttft: Duration::from_secs(60),
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let mut args = sim_argv(&s.url(), 16, 4, 3, tmp.path());
    args.extend(["--result-filename", "r.json", "--timeout-seconds", "1"].map(str::to_owned));
    let out = bench_serving(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the deadline did not stop the run"
    );
    assert!(stderr.contains("stopped (deadline)"), "{stderr}");
    let r = crate::common::read_json(&tmp.path().join("r.json"));
    assert_eq!(r["completed"], 0);
    assert_eq!(r["input_lens"].as_array().unwrap().len(), 3);
}

/// The specperf-only outputs: `--artifact-dir` gets `replay`'s artifacts of the measured
/// requests (AIPerf 0.13's readers accept them; `server_metrics_export.json` because
/// `--server-metrics` is given), `--gpu-telemetry` the energy of the window
/// (a line after upstream's block, `summary.json`'s `energy`), and `--result-dir` still holds
/// upstream's one file with the same figures.
#[test]
fn artifact_dir_and_gpu_telemetry_add_specperfs_files_and_energy() {
    use specperf::sim::{GpuSim, SimConfig};
    let s = sim(SimConfig {
        gpus: Some(GpuSim {
            count: 2,
            ..GpuSim::default()
        }),
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let (res, art) = (tmp.path().join("res"), tmp.path().join("art"));
    let dcgm = s.dcgm_url().expect("the simulator serves a DCGM page");
    let metrics = format!("{}/metrics", s.url());
    let mut args = sim_argv(&s.url(), 32, 24, 12, &res);
    args.extend(
        [
            "--result-filename",
            "r.json",
            "--max-concurrency",
            "4",
            "--num-warmups",
            "2",
            "--ignore-eos",
            "--artifact-dir",
            art.to_str().unwrap(),
            "--gpu-telemetry",
            &dcgm,
            "--gpus",
            "2",
            "--server-metrics",
            &metrics,
            "--server-metrics-settle-seconds",
            "0",
        ]
        .map(str::to_owned),
    );
    let out = bench_serving(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(files_in(&res), ["r.json"]);
    let r = crate::common::read_json(&res.join("r.json"));
    assert!(
        !keys(&r).iter().any(|k| k.contains("energy")),
        "upstream's keys only: {r}"
    );
    let s = crate::common::read_json(&art.join("summary.json"));
    // The measured requests only (no warmup), the result file's figures.
    assert_eq!(s["counts"]["success"], r["completed"], "{s:#}");
    assert_eq!(s["total_completion_tokens"], r["total_output_tokens"]);
    let records = std::fs::read_to_string(art.join("records.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 12);
    for f in [
        "profile_export.jsonl",
        "profile_export_aiperf.json",
        "inputs.json",
        "gpu_metrics.csv",
        "console.txt",
    ] {
        assert!(art.join(f).is_file(), "{f} in {:?}", files_in(&art));
    }
    let e = &s["energy"];
    assert_eq!(e["observed_gpus"], 2, "{e:#}");
    let (total, per_token) = (
        e["total_energy_j"].as_f64().unwrap(),
        e["joules_per_output_token"].as_f64().unwrap(),
    );
    let tokens = r["total_output_tokens"].as_f64().unwrap();
    assert!(
        total > 0.0 && (per_token - total / tokens).abs() < 1e-9 * total,
        "{e:#}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("GPU energy: "))
        .unwrap_or_else(|| panic!("no energy line:\n{stdout}"));
    assert!(line.contains("over 2 GPU(s)"), "{line}");
    // After upstream's block, whose last line is the rule of '='.
    let block_end = stdout.rfind(&"=".repeat(50)).unwrap();
    assert!(stdout.find(line).unwrap() > block_end, "{stdout}");
    let python = crate::conformance::venv_python();
    crate::conformance::conformance(&python, tmp.path(), &[art.into_os_string()]);
}

/// `--require-gpu-telemetry` with no source answering ends the run before any request (exit 2,
/// naming the flag), and the telemetry flags need `--gpu-telemetry`.
/// A telemetry task that panics mid-run is a named warning; with `--require-gpu-telemetry` the
/// run fails (exit 1) after writing upstream's result all the same.
#[test]
fn a_panicking_telemetry_task_is_named_and_fails_required_telemetry() {
    let s = sim(specperf::sim::SimConfig {
        gpus: Some(specperf::sim::GpuSim {
            count: 1,
            ..specperf::sim::GpuSim::default()
        }),
        ..fast()
    });
    let dcgm = s.dcgm_url().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (required, code) in [(false, 0), (true, 1)] {
        let dir = tmp
            .path()
            .join(if required { "required" } else { "warned" });
        std::fs::create_dir(&dir).unwrap();
        let mut args = sim_argv(&s.url(), 16, 4, 4, &dir);
        args.extend(["--gpu-telemetry".to_owned(), dcgm.clone()]);
        if required {
            args.push("--require-gpu-telemetry".to_owned());
        }
        let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
            .arg("bench-serving")
            .args(&args)
            .env_remove("OPENAI_API_KEY")
            .env("HF_HUB_OFFLINE", "1")
            .env("SPECPERF_PANIC_IN", "telemetry")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(
            stderr.contains(
                "WARNING: the GPU telemetry task panicked: SPECPERF_PANIC_IN=telemetry asked"
            ),
            "{stderr}"
        );
        assert_eq!(
            files_in(&dir).len(),
            1,
            "upstream's result: {:?}",
            files_in(&dir)
        );
    }
}

#[test]
fn required_gpu_telemetry_that_does_not_answer_stops_before_any_request() {
    let s = sim(specperf::sim::SimConfig {
        record_requests: 16,
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let base = sim_argv(&s.url(), 16, 4, 4, tmp.path());
    // A port that was just free: nothing answers there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dcgm = format!("http://127.0.0.1:{closed}/metrics");
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend(["--gpu-telemetry", &dcgm, "--require-gpu-telemetry"]);
    let out = bench_serving(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--require-gpu-telemetry"), "{stderr}");
    assert!(
        files_in(tmp.path()).is_empty(),
        "{:?}",
        files_in(tmp.path())
    );
    assert_eq!(
        s.requests().len(),
        0,
        "nothing is sent before the telemetry is there"
    );
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.push("--require-gpu-telemetry");
    let out = bench_serving(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--require-gpu-telemetry needs --gpu-telemetry"),
        "{stderr}"
    );
}
