//! `server_metrics_export.{json,csv}` from a real replay against the simulator: AIPerf 0.13's
//! shape (the committed schema), the server's own family names and labels, integer nanosecond
//! fields, numbers where AIPerf requires them, timeslices, and counters that add up to the
//! simulator's own totals.

use serde_json::Value;

use crate::common::{fast, read_json, sim, Replay, Replayed};
use specperf::sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_metrics_export_has_aiperfs_shape_with_the_servers_names() {
    let s = sim(fast());
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .args("--concurrency 4 --request-count 40 --osl 64")
        .args("--metrics-interval-seconds 0.05 --slice-duration 0.1")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 40);
    let v = d.server_metrics();
    assert_eq!(
        crate::common::schema_errors("server_metrics_export.v1.json", &v),
        Vec::<String>::new()
    );
    let range = &v["summary"]["phase_time_ranges"]["profiling"];
    let (start, end) = (
        range["start_ns"].as_u64().expect("integer start_ns"),
        range["end_ns"].as_u64().expect("integer end_ns"),
    );
    assert!(start > 1_600_000_000_000_000_000 && end > start);
    let info = v["summary"]["endpoint_info"].as_object().unwrap();
    assert_eq!(info.len(), 1);
    let (url, e) = info.iter().next().unwrap();
    assert!(url.ends_with("/metrics"));
    assert!(e["total_fetches"].as_u64().unwrap() >= 2);
    assert!(e["first_update_ns"].as_u64().unwrap() <= start);
    assert!(e["avg_fetch_latency_ms"].as_f64().unwrap() > 0.0);

    let metrics = v["metrics"].as_object().unwrap();
    for name in metrics.keys() {
        assert!(
            !name.starts_with("specperf:"),
            "{name}: not the server's name"
        );
        assert!(
            !name.ends_with("_total") && !name.ends_with("_created"),
            "{name}: AIPerf writes family names"
        );
    }
    for (name, kind) in [
        ("vllm:spec_decode_num_drafts", "counter"),
        ("vllm:spec_decode_num_draft_tokens", "counter"),
        ("vllm:spec_decode_num_accepted_tokens", "counter"),
        ("vllm:spec_decode_num_accepted_tokens_per_pos", "counter"),
        ("vllm:generation_tokens", "counter"),
        ("vllm:prompt_tokens", "counter"),
        ("vllm:request_success", "counter"),
        ("vllm:num_requests_running", "gauge"),
        ("specperf_sim_emission_lateness_seconds", "histogram"),
    ] {
        let m = &metrics
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from {:?}", metrics.keys()));
        assert_eq!(m["type"], kind, "{name}");
        assert!(!m["description"].as_str().unwrap().is_empty(), "{name}");
        for series in m["series"].as_array().unwrap() {
            assert_eq!(&series["endpoint_url"], url.as_str());
            if name.starts_with("vllm:") {
                assert!(
                    series["labels"]["model_name"].is_string(),
                    "{name}: labels kept"
                );
                assert!(series["labels"]["engine"].is_string(), "{name}");
            }
            let ts = series["timeslices"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: no timeslices"));
            assert!(!ts.is_empty(), "{name}");
            assert!(ts.iter().all(|t| t["start_ns"].as_u64().unwrap() >= start
                && t["end_ns"].as_u64().unwrap() <= end));
        }
    }
    assert_eq!(
        metrics["specperf_sim_emission_lateness_seconds"]["series"][0]["stats"]["count"]
            .as_u64()
            .map(|c| c > 0),
        Some(true)
    );
    let per_pos = &metrics["vllm:spec_decode_num_accepted_tokens_per_pos"]["series"];
    assert!(per_pos
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["labels"]["position"].is_string()));
    let total = |name: &str| -> f64 {
        metrics[name]["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stats"]["total"].as_f64().unwrap())
            .sum()
    };
    let t = s.totals();
    assert_eq!(total("vllm:spec_decode_num_drafts"), t.drafts as f64);
    // Slices add up to the whole-window total.
    let sliced: f64 = metrics["vllm:spec_decode_num_drafts"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["timeslices"].as_array().unwrap())
        .map(|t| t["total"].as_f64().unwrap())
        .sum();
    assert_eq!(sliced, t.drafts as f64);

    // The profile timeslices `aiperf plot` reads: every request in one window, by its start.
    let ts = d.text("profile_export_aiperf_timeslices.csv");
    assert!(ts.starts_with("Timeslice,Start_NS,End_NS,Metric,Unit,Stat,Value\n"));
    assert!(ts.contains(",Time to First Token,ms,avg,"));
    assert!(ts.contains(",Inter Token Latency,ms,avg,"));
    let tj = read_json(&d.join("profile_export_aiperf_timeslices.json"));
    // AIPerf's TimesliceCollectionExportData: `input_config` is optional, and when present must
    // be its whole BenchmarkConfig, which is profile_export_aiperf.json's to write.
    let keys: Vec<&String> = tj.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["timeslices"]);
    let slices = tj["timeslices"].as_array().unwrap();
    assert!(!slices.is_empty());
    let counted: f64 = slices
        .iter()
        .map(|s| {
            assert!(s["start_ns"].as_u64().unwrap() < s["end_ns"].as_u64().unwrap());
            s["request_count"]["avg"].as_f64().unwrap()
        })
        .sum();
    assert_eq!(counted, 40.0);

    let csv = d.text("server_metrics_export.csv");
    assert!(csv.starts_with("# AIPerf Server Metrics Export (CSV)\n"));
    let header = |prefix: &str| {
        csv.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no section {prefix}:\n{csv}"))
            .to_owned()
    };
    assert!(header("Endpoint,Type,Metric,Unit,total,rate,rate_avg").ends_with(",Description"));
    assert!(header("Endpoint,Type,Metric,Unit,avg,min,max,std,p1").contains(",engine,"));
    assert!(header("Endpoint,Type,Metric,Unit,count,count_rate").ends_with(",Description,buckets"));
    assert!(csv
        .lines()
        .any(|l| l.contains(",counter,vllm:generation_tokens,tokens,")));
}

/// The schema is strict where AIPerf's reader is: the old shape (ISO strings for the phase
/// range, `null` where numbers are required, no `first_update_ns`) is refused.
#[test]
fn the_schema_refuses_the_shape_aiperf_rejected() {
    let mut v: Value = serde_json::json!({
        "schema_version": "1.1", "aiperf_version": "x", "benchmark_id": "x",
        "metrics_phase": "profiling", "metrics": {}, "input_config": {},
        "summary": {
            "endpoints_configured": [], "endpoints_successful": [],
            "start_time": "2026-11-30T00:00:00+00:00", "end_time": "2026-11-30T00:00:01+00:00",
            "endpoint_info": {"http://h/metrics": {
                "total_fetches": 2, "first_fetch_ns": 1, "last_fetch_ns": 2,
                "avg_fetch_latency_ms": 1.0, "unique_updates": 2, "first_update_ns": 1,
                "last_update_ns": 2, "duration_seconds": 0.0, "avg_update_interval_ms": 0.0}},
            "phase_time_ranges": {"profiling": {"start_ns": 1, "end_ns": 2}}
        }
    });
    let errors = |v: &Value| crate::common::schema_errors("server_metrics_export.v1.json", v);
    assert_eq!(errors(&v), Vec::<String>::new());
    v["summary"]["phase_time_ranges"]["profiling"] =
        serde_json::json!({"start_time": "2026-11-30T00:00:00+00:00"});
    let info = &mut v["summary"]["endpoint_info"]["http://h/metrics"];
    info["unique_updates"] = Value::Null;
    info.as_object_mut().unwrap().remove("first_update_ns");
    assert_eq!(errors(&v).len(), 5, "{:#?}", errors(&v));
}

#[test]
fn golden_server_metrics_export_follows_the_committed_schema() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/reports/server_metrics_export.json");
    assert_eq!(
        crate::common::schema_errors("server_metrics_export.v1.json", &read_json(&golden)),
        Vec::<String>::new()
    );
}

/// What InferenceX reads of the export (`agentx-replay.md` §4.4-§4.5): the agentic aggregator
/// picks the first backend whose prefix a family name has (a non-empty set with none is its hard
/// error, "Unsupported agentic server metrics backend"), takes a counter series' value from the
/// first of `stats.total, sum, max, avg`; the required-metrics check wants a literal `"vllm:` in
/// the JSON and a non-empty CSV; the plot script puts t0 at the least
/// `summary.endpoint_info.*.first_update_ns` and reads each series' `timeslices` by `start_ns`.
fn inferencex_backend(v: &Value) -> Result<&'static str, String> {
    let names: Vec<&String> = v["metrics"].as_object().unwrap().keys().collect();
    let any = |f: &dyn Fn(&str) -> bool| names.iter().any(|n| f(n));
    if any(&|n| n.starts_with("dynamo_")) {
        Ok("dynamo-vllm")
    } else if any(&|n| n.starts_with("atom:") || n.starts_with("atom_")) {
        Ok("atom")
    } else if any(&|n| n.starts_with("sglang:")) {
        Ok("sglang")
    } else if any(&|n| n.starts_with("vllm:")) {
        Ok("vllm")
    } else if names.is_empty() {
        Ok("none")
    } else {
        Err(format!(
            "Unsupported agentic server metrics backend: {names:?}"
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inferencex_readers_find_the_vllm_backend_and_the_plot_inputs() {
    // 10 ms steps: the run lasts about a second, so the gauges are sampled many times (a
    // millisecond run on a loaded machine could end between two scrapes).
    let s = sim(SimConfig {
        itl: std::time::Duration::from_millis(10),
        ..fast()
    });
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .args("--concurrency 4 --request-count 24 --osl 32")
        .args("--metrics-interval-seconds 0.05 --slice-duration 0.1")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 24);
    let text = d.text("server_metrics_export.json");
    assert!(text.contains("\"vllm:"));
    assert!(!std::fs::read(d.join("server_metrics_export.csv"))
        .unwrap()
        .is_empty());
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(inferencex_backend(&v), Ok("vllm"));
    let value = |series: &Value| {
        ["total", "sum", "max", "avg"]
            .iter()
            .find_map(|k| series["stats"][k].as_f64())
            .unwrap()
    };
    let generated: f64 = v["metrics"]["vllm:generation_tokens"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(value)
        .sum();
    assert_eq!(generated, s.totals().generation_tokens as f64);
    let t0 = v["summary"]["endpoint_info"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e["first_update_ns"].as_u64().unwrap())
        .min()
        .expect("an endpoint with updates");
    let running = &v["metrics"]["vllm:num_requests_running"]["series"][0]["timeslices"];
    let points: Vec<(u64, f64)> = running
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["start_ns"].as_u64().unwrap(), t["avg"].as_f64().unwrap()))
        .collect();
    assert!(!points.is_empty() && points.iter().all(|p| p.0 >= t0 && p.1 >= 0.0));
}
