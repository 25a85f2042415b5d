//! Reports end to end: a real replay against the simulator writes every artifact; summary.json
//! follows the committed JSON Schema; InferenceX's aggregation runs on our raw JSON; `specperf
//! plot` renders the run (SVG parses, PNG has its signature and size, and the HTML page loads in
//! headless Chromium where Chromium is installed).

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use crate::common::{
    browser_dom, fast, output_ok, read_json, records, replay_process, sim, Replay, Replayed,
};
use specperf::sim::SimConfig;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

fn schema_errors(v: &Value) -> Vec<String> {
    crate::common::schema_errors("summary.v1.json", v)
}

#[test]
fn golden_summary_follows_the_committed_schema_and_the_schema_catches_drift() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports/summary.json");
    let mut v = read_json(&golden);
    assert_eq!(schema_errors(&v), Vec::<String>::new());
    // The schema is strict enough to notice a renamed, retyped or missing field.
    v["unexpected_field"] = Value::from(1);
    v["counts"]["success"] = Value::from("4");
    v["meta"].as_object_mut().unwrap().remove("model");
    let errors = schema_errors(&v);
    assert_eq!(errors.len(), 3, "{errors:#?}");
}

/// InferenceX's `process_result` (`inferencex-contract.md` §8.3), single node, as far as it reads
/// the raw JSON: per-GPU throughputs from `total_token_throughput` / `output_throughput`, every
/// key ending in `ms` to seconds without `_ms`, every key containing `tpot` to interactivity
/// `1000 / value` (which raises on zero).
fn inferencex_agg(raw: &Map<String, Value>, tp: f64, pp: f64, pcp: f64) -> Map<String, Value> {
    let gpus = tp * pp * pcp;
    let f = |k: &str| {
        raw[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number"))
    };
    let mut agg = Map::new();
    agg.insert(
        "conc".into(),
        Value::from(raw["max_concurrency"].as_u64().expect("int")),
    );
    agg.insert("model".into(), raw["model_id"].clone());
    let total = f("total_token_throughput");
    let output = f("output_throughput");
    agg.insert("tput_per_gpu".into(), Value::from(total / gpus));
    agg.insert("output_tput_per_gpu".into(), Value::from(output / gpus));
    agg.insert(
        "input_tput_per_gpu".into(),
        Value::from((total - output) / gpus),
    );
    for (k, v) in raw {
        if let Some(stem) = k.strip_suffix("_ms") {
            agg.insert(stem.into(), Value::from(v.as_f64().unwrap() / 1000.0));
        }
        if k.contains("tpot") {
            let x = v.as_f64().unwrap();
            assert!(x != 0.0, "{k} = 0: InferenceX would divide by zero");
            agg.insert(
                k.replace("tpot", "intvty").replace("_ms", ""),
                Value::from(1000.0 / x),
            );
        }
    }
    agg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_writes_every_artifact_and_inferencex_aggregates_the_raw_json() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().join("results");
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .args("--concurrency 8 --request-count 60 --osl 64 --goodput")
        .arg("ttft:1000 tpot:1000")
        .args("--result-filename")
        .arg("dsv4_fp4_vllm_tp8-pp1-dcp1-pcp1-ep8-dpa1_disagg-false_spec-mtp_conc8_h200")
        .arg("--result-dir")
        .arg(&result_dir)
        .run()
        .await;
    assert!(out.artifact_error.is_none(), "{:?}", out.artifact_error);
    assert_eq!(out.summary.counts.success, 60);
    let g = out.summary.goodput.as_ref().expect("goodput reported");
    assert_eq!(
        g.good_request_count, 60,
        "generous SLOs: every request is good"
    );

    // summary.json follows the schema.
    let summary = d.summary();
    assert_eq!(schema_errors(&summary), Vec::<String>::new());

    // profile_export.jsonl: one AIPerf record per request, epoch timestamps, metrics with units.
    let recs = d.profile_export();
    assert_eq!(recs.len(), records(&d).len());
    let r = &recs[0];
    assert!(r["metadata"]["request_start_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
    assert_eq!(r["metadata"]["benchmark_phase"], "profiling");
    assert_eq!(r["metrics"]["time_to_first_token"]["unit"], "ms");
    assert_eq!(r["metrics"]["output_sequence_length"]["value"], 64);
    assert!(r["error"].is_null());

    // profile_export_aiperf.json / .csv agree with summary.json.
    let a = d.aiperf();
    assert_eq!(a["schema_version"], "1.4");
    assert!(a["aiperf_version"]
        .as_str()
        .unwrap()
        .starts_with("specperf-"));
    assert_eq!(a["request_count"]["avg"], 60.0);
    assert_eq!(
        a["time_to_first_token"]["p99"],
        summary["metrics"]["time_to_first_token_ms"]["p99"]
    );
    assert_eq!(a["good_request_count"]["avg"], 60.0);
    assert!(a["specperf"]["acceptance_length"].as_f64().unwrap() > 1.0);
    let csv = d.text("profile_export_aiperf.csv");
    assert!(csv.starts_with("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n"));
    assert!(csv.contains("\n\nMetric,Value\n") && csv.contains("\nRequest Count,60\n"));
    let sm = d.server_metrics();
    let drafts: f64 = sm["metrics"]["vllm:spec_decode_num_drafts"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stats"]["total"].as_f64().unwrap())
        .sum();
    assert_eq!(
        drafts,
        s.totals().drafts as f64,
        "series sum to the simulator's drafts"
    );
    let inputs = read_json(&d.join("inputs.json"));
    assert_eq!(inputs["data"].as_array().unwrap().len(), 88);

    // The raw JSON landed in --result-dir, and InferenceX's aggregation runs on it.
    let raw_path = result_dir
        .join("dsv4_fp4_vllm_tp8-pp1-dcp1-pcp1-ep8-dpa1_disagg-false_spec-mtp_conc8_h200.json");
    let raw = read_json(&raw_path);
    let raw = raw.as_object().unwrap();
    let keys: Vec<&str> = raw.keys().map(String::as_str).collect();
    let pos = |k: &str| {
        keys.iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("no {k}"))
    };
    assert!(pos("date") < pos("max_concurrency") && pos("max_concurrency") < pos("duration"));
    assert!(pos("request_goodput:") < pos("output_throughput"));
    assert!(pos("output_lens") < pos("mean_ttft_ms") && pos("mean_e2el_ms") < pos("p99.9_e2el_ms"));
    assert_eq!(raw["completed"], 60);
    assert_eq!(raw["request_rate"], "inf");
    assert_eq!(raw["output_lens"].as_array().unwrap().len(), 60);
    let agg = inferencex_agg(raw, 8.0, 1.0, 1.0);
    assert_eq!(agg["conc"], 8);
    let tput = raw["total_token_throughput"].as_f64().unwrap();
    assert!((agg["tput_per_gpu"].as_f64().unwrap() - tput / 8.0).abs() < 1e-9);
    let p99_ttft_s = agg["p99_ttft"].as_f64().unwrap();
    let want = summary["metrics"]["time_to_first_token_ms"]["p99"]
        .as_f64()
        .unwrap()
        / 1000.0;
    assert!((p99_ttft_s - want).abs() < 1e-12);
    for k in [
        "mean_intvty",
        "median_intvty",
        "std_intvty",
        "p90_intvty",
        "p99_intvty",
        "p99.9_intvty",
    ] {
        assert!(agg[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let mean_tpot = raw["mean_tpot_ms"].as_f64().unwrap();
    assert!((agg["mean_intvty"].as_f64().unwrap() - 1000.0 / mean_tpot).abs() < 1e-9);
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

/// Issue 19 item 18: a real non-streaming run has no per-token times, so `plot` draws no TTFT or
/// ITL CDF (the ITL one was a vertical line at 0) and the page says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plot_of_a_non_streaming_run_leaves_out_what_was_not_measured() {
    let Replayed { out, dir: d } = Replay::sim(fast())
        .args("--streaming false --request-count 8 --osl 16")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 8);
    let status = Command::new(BIN)
        .arg("plot")
        .arg(&d)
        .args(["--png", "false"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let plots = d.join("plots");
    assert!(!plots.join("itl_cdf.svg").exists() && !plots.join("ttft_cdf.svg").exists());
    assert!(plots.join("throughput.svg").exists());
    let html = std::fs::read_to_string(plots.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg ").count(), 4);
    assert!(html.contains("not measured"), "the page says why");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plot_renders_a_real_run_as_svg_png_and_one_html_page() {
    // Live scrapes every 0.1 s over a ~1 s run give the AL chart a timeline.
    let Replayed { out, dir: d } = Replay::sim(fast())
        .args("--concurrency 4 --request-count 48 --osl 128 --metrics-interval-seconds 0.1")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 48);
    let status = Command::new(BIN)
        .arg("plot")
        .arg(&d)
        .args(["--golden-al", "2.49"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let plots = d.join("plots");
    for stem in [
        "ttft_cdf",
        "itl_cdf",
        "throughput",
        "requests",
        "in_flight",
        "acceptance_length",
    ] {
        let svg = std::fs::read_to_string(plots.join(format!("{stem}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{stem}.svg: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            doc.descendants().any(|n| n.has_tag_name("path")),
            "{stem}.svg draws a line"
        );
        let png = std::fs::read(plots.join(format!("{stem}.png"))).unwrap();
        assert_eq!(png_size(&png), (800, 450), "{stem}.png");
    }
    let al = std::fs::read_to_string(plots.join("acceptance_length.svg")).unwrap();
    assert!(al.contains("golden AL 2.49") && al.contains("final AL"));
    // The bundled collection's categories and the stream estimate: AL per request and per
    // category, beside the counters.
    for stem in ["al_per_request", "al_by_group"] {
        let svg = std::fs::read_to_string(plots.join(format!("{stem}.svg"))).unwrap();
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{stem}.svg: {e}"));
    }
    let html = std::fs::read_to_string(plots.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg ").count(), 8, "every chart inline");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "self-contained"
    );

    // Open the page in a real browser where one is installed.
    let Some(dom) = browser_dom(&plots.join("report.html")) else {
        return;
    };
    assert_eq!(
        dom.matches("<svg ").count(),
        8,
        "the browser parsed every chart: {dom:.500}"
    );
    assert!(dom.contains("id=\"summary\"") && dom.contains("Acceptance length"));
}

#[test]
fn bad_goodput_and_result_filename_are_usage_errors() {
    for (args, says) in [
        (&["--goodput", "ttft=5"][..], "expected TAG:VALUE"),
        (&["--goodput", "latency:5"][..], "unknown metric"),
        (&["--result-filename", "../escape"][..], "plain file name"),
    ] {
        let out = replay_process(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn progress_is_a_bar_on_a_terminal_lines_on_a_pipe_and_nothing_with_ui_none() {
    let s = sim(crate::common::fast());
    let dir = tempfile::tempdir().unwrap();
    let args = |ui: &str, d: &str| {
        format!(
            "replay --url {} --concurrency 2 --request-count 40 --osl 400 --progress-interval 0.1 \
             --metrics-settle-seconds 0 --ui {ui} --artifact-dir {d}",
            s.url()
        )
    };
    let piped = |ui: &str, sub: &str| {
        let d = dir.path().join(sub);
        let out = Command::new(BIN)
            .args(args(ui, d.to_str().unwrap()).split_whitespace())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let plain = piped("simple", "a");
    assert!(
        plain.contains("] done ") && !plain.contains('\r'),
        "{plain}"
    );
    assert_eq!(piped("none", "b"), "");
    assert!(
        piped("dashboard", "c").contains("] done "),
        "dashboard means simple"
    );

    // A terminal: util-linux `script` gives the process a pseudo-terminal.
    if !Path::new("/usr/bin/script").exists() {
        eprintln!("SKIPPED: progress bar on a terminal: no /usr/bin/script (util-linux)");
        return;
    }
    let d = dir.path().join("tty");
    let cmd = format!("{BIN} {}", args("simple", d.to_str().unwrap()));
    let out = Command::new("/usr/bin/script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(
        tty.contains("\r\x1b[2K["),
        "bar redrawn in place: {tty:.400}"
    );
    assert!(tty.contains("/40 req") && tty.contains("ETA"), "{tty:.400}");
}

#[test]
fn result_filename_and_dir_come_from_the_inferencex_environment() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    output_ok(
        Command::new(BIN)
            .args(["replay", "--url", &s.url(), "--concurrency", "2"])
            .args(["--request-count", "6", "--osl", "16", "--ui", "none"])
            .args(["--metrics-settle-seconds", "0", "--artifact-dir"])
            .arg(dir.path().join("run"))
            .env("RESULT_FILENAME", "glm5.2_fp8_vllm_tp8_conc2_b200")
            .env("RESULT_DIR", &results),
    );
    let raw = read_json(&results.join("glm5.2_fp8_vllm_tp8_conc2_b200.json"));
    assert_eq!(raw["completed"], 6);
    assert_eq!(raw["max_concurrency"], 2);
    assert!(!dir
        .path()
        .join("run/glm5.2_fp8_vllm_tp8_conc2_b200.json")
        .exists());
}

/// Issue 15: `profile_export_aiperf.json` carries AIPerf 0.13's `input_config` (its
/// `BenchmarkConfig` dump: `models.items[].name`, `datasets[].format`, `phases[]`,
/// `endpoint.urls`), which `aiperf speed-bench-report` reads the model and the SPEED-Bench
/// category from, and `telemetry_data` as the object AIPerf writes without GPUs, not `null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_export_aiperf_json_has_aiperf_0_13_input_config() {
    let s = sim(fast());
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .args("--category coding --request-count 6 --warmup-request-count 2 --concurrency 3")
        .args("--osl 16")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 6);
    let a = d.aiperf();
    let ic = &a["input_config"];
    assert_eq!(ic["models"]["items"][0]["name"], out.summary.meta.model);
    assert_eq!(ic["endpoint"]["urls"][0], s.url());
    assert_eq!(ic["endpoint"]["streaming"], true);
    assert_eq!(ic["datasets"][0]["format"], "speed_bench_coding");
    assert_eq!(ic["datasets"][0]["osl"]["mean"], 16.0);
    let phases = ic["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{phases:?}");
    assert_eq!(phases[0]["kind"], "warmup");
    assert_eq!(phases[0]["requests"], 2);
    assert_eq!(phases[1]["kind"], "profiling");
    assert_eq!(phases[1]["type"], "concurrency");
    assert_eq!(phases[1]["concurrency"], 3);
    assert_eq!(phases[1]["requests"], 6);
    assert!(
        phases[1].get("grace_period").is_none(),
        "only after a duration"
    );
    for legacy in ["input", "loadgen", "cli_command"] {
        assert!(ic.get(legacy).is_none(), "legacy input_config.{legacy}");
    }
    assert_eq!(a["warmup_metrics"]["request_count"]["avg"], 2.0);
    // AIPerf's token-count record metrics: no reasoning here, so output tokens = OSL, all from usage.
    assert_eq!(a["output_token_count"], a["output_sequence_length"]);
    assert_eq!(a["usage_completion_tokens"], a["output_sequence_length"]);
    assert_eq!(a["usage_completion_tokens"]["count"], 6);
    let t = &a["telemetry_data"];
    assert!(t["summary"]["start_time"].is_string(), "{t}");
    assert_eq!(t["endpoints"], Value::Object(Map::new()));
    assert_eq!(t["error_summary"], Value::Array(vec![]));
}

/// Issue 15: `profile_export.jsonl` metadata as AIPerf 0.13 writes it: `phase_index` is the
/// phase's place in the phases list (warmup 0, then profiling), `profiling_index` the place among
/// profiling phases (not a request number), `root_correlation_id` equals `x_correlation_id` for a
/// root session, and `turn_index` is the turn of a multi-turn session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_export_jsonl_metadata_is_aiperfs() {
    let sessions = "{\"session_id\": \"a\", \"turns\": [{\"text\": \"Hello there\"}, {\"text\": \"And then?\"}]}\n\
         {\"session_id\": \"b\", \"turns\": [{\"text\": \"Name a colour\"}, {\"text\": \"Another\"}]}\n";
    let Replayed { out, dir: d } = Replay::sim(fast())
        .input_file("sessions.jsonl", sessions)
        .args("--custom-dataset-type multi_turn --warmup-request-count 1 --concurrency 2 --osl 8")
        .run()
        .await;
    assert!(out.summary.counts.success >= 4, "{:?}", out.summary.counts);
    let ours = d.records();
    let recs = d.profile_export();
    assert_eq!(recs.len(), ours.len());
    let mut later_turns = 0;
    for (r, o) in recs.iter().zip(&ours) {
        let m = &r["metadata"];
        assert_eq!(m["root_correlation_id"], m["x_correlation_id"], "{m}");
        assert_eq!(m["turn_index"], o["turn"], "{m}");
        later_turns += usize::from(o["turn"].as_u64().unwrap() > 0);
        match m["benchmark_phase"].as_str().unwrap() {
            "warmup" => {
                assert_eq!(m["phase_index"], 0, "{m}");
                assert!(m["profiling_index"].is_null(), "{m}");
            }
            _ => {
                assert_eq!(m["phase_index"], 1, "{m}");
                assert_eq!(m["profiling_index"], 0, "{m}");
            }
        }
    }
    assert!(later_turns >= 2, "second turns were sent and recorded");
}

/// Issue 14 defect 6: a non-streaming run has no token timing (the whole answer arrives at once),
/// so no report may show TTFT = latency or an ITL of 0: the streaming-only metrics (TTFT, TTST,
/// TTFO, ITL, inter-chunk gaps, decode, TPOT, per-user token rates) are left out of the console
/// table, summary.json, profile_export.jsonl and profile_export_aiperf.json/.csv, as AIPerf leaves
/// out its STREAMING_TOKENS_ONLY metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_streaming_run_reports_no_streaming_only_metric() {
    let Replayed { out, dir: d } = Replay::sim(fast())
        .args("--streaming false --request-count 6 --osl 16")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 6);
    let streaming_only = [
        "time_to_first_token",
        "time_to_second_token",
        "time_to_first_output_token",
        "inter_token_latency",
        "inter_chunk_latency",
        "decode_duration",
        "time_per_output_token",
        "output_token_throughput_per_user",
        "prefill_throughput_per_user",
    ];
    let summary = d.summary();
    let metrics = summary["metrics"].as_object().unwrap();
    assert!(metrics.contains_key("request_latency_ms"), "{metrics:?}");
    for k in metrics.keys() {
        assert!(
            !streaming_only.iter().any(|s| k.starts_with(s)),
            "summary.json has {k}"
        );
    }
    let a = d.aiperf();
    assert!(a["request_latency"]["avg"].as_f64().unwrap() > 0.0);
    for k in streaming_only {
        assert!(a.get(k).is_none(), "profile_export_aiperf.json has {k}");
    }
    for r in d.profile_export() {
        for k in streaming_only {
            assert!(
                r["metrics"].get(k).is_none(),
                "profile_export.jsonl has {k}"
            );
        }
    }
    let csv = d.text("profile_export_aiperf.csv");
    let console = d.text("console.txt");
    for label in [
        "Time to First Token",
        "Inter Token Latency",
        "Decode Duration",
        "Per User",
    ] {
        assert!(!csv.contains(label), "CSV has {label}:\n{csv}");
    }
    assert!(csv.contains("Request Latency (ms)"), "{csv}");
    for label in [
        "Time to first token",
        "Inter-token latency",
        "first output token",
    ] {
        assert!(!console.contains(label), "console has {label}:\n{console}");
    }
    assert!(console.contains("Request latency"), "{console}");
}

/// Issue 15: the raw InferenceX JSON's shape, new `vllm bench serve` keys included, is committed as
/// `schemas/inferencex_raw_result.v1.json`; the golden file follows it and the schema notices a
/// retyped or missing key.
#[test]
fn golden_raw_result_follows_the_committed_schema() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports/raw_result.json");
    let mut v = read_json(&golden);
    let errors = |v: &Value| crate::common::schema_errors("inferencex_raw_result.v1.json", v);
    assert_eq!(errors(&v), Vec::<String>::new());
    assert!(v.get("spec_decode_acceptance_length").is_some());
    v["spec_decode_acceptance_rate"] = Value::from(150.0);
    v["failed"] = Value::from("3");
    v.as_object_mut().unwrap().remove("max_concurrent_requests");
    assert_eq!(errors(&v).len(), 3, "{:#?}", errors(&v));
}

/// Probe: `plot` of a directory that is not a replay's artifact directory (missing, empty) is a
/// usage error (exit 2) that says what to pass, not exit 1 with a bare "No such file"; so is an
/// `--output` that is a file ("/dev/null: File exists" before).
#[test]
fn plot_of_a_non_artifact_directory_is_a_usage_error_saying_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    for d in [dir.path().join("missing"), dir.path().to_owned()] {
        let out = Command::new(BIN).arg("plot").arg(&d).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&d.display().to_string()) && err.contains("--artifact-dir"),
            "{err}"
        );
    }
    std::fs::write(dir.path().join("records.jsonl"), "").unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = Command::new(BIN)
        .arg("plot")
        .arg(dir.path())
        .arg("--output")
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--output") && err.contains("a-file"), "{err}");
}

/// Issue 15: AIPerf's `output_token_count` is a request's completion tokens minus its reasoning
/// tokens and `usage_prompt_tokens` the prompt tokens of the server's `usage`. Both are written per
/// request in `profile_export.jsonl` and as statistics in `profile_export_aiperf.json`, also when
/// the server reports reasoning tokens (the simulator's first 5 output tokens here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperf_token_counts_split_reasoning_from_output() {
    let Replayed { out, dir: d } = Replay::sim(SimConfig {
        reasoning_tokens: 5,
        ..fast()
    })
    .args("--request-count 4 --concurrency 2 --osl 16")
    .run()
    .await;
    assert_eq!(out.summary.counts.success, 4);
    assert_eq!(out.summary.total_reasoning_tokens, 4 * 5);
    let lines = d.profile_export();
    assert_eq!(lines.len(), 4);
    for r in &lines {
        let m = &r["metrics"];
        assert_eq!(m["output_token_count"]["value"], 16 - 5, "{m}");
        assert_eq!(m["reasoning_token_count"]["value"], 5, "{m}");
        assert!(
            m["usage_prompt_tokens"]["value"].as_u64().unwrap() > 0,
            "{m}"
        );
        assert_eq!(
            m["usage_prompt_tokens"]["value"], m["input_sequence_length"]["value"],
            "{m}"
        );
        assert_eq!(m["usage_prompt_tokens"]["unit"], "tokens");
    }
    let a = d.aiperf();
    let otc = &a["output_token_count"];
    assert_eq!(otc["unit"], "tokens", "{a}");
    assert_eq!(otc["avg"], 11.0);
    assert_eq!(otc["count"], 4);
    assert_eq!(otc["sum"], 44.0);
    assert_eq!(a["usage_prompt_tokens"], a["input_sequence_length"]);
    assert_eq!(a["usage_prompt_tokens"]["count"], 4);
}
