//! End-to-end replays: exact counts and token totals, streaming and not, both endpoints.

use crate::common::{config, fast, read_json, records, run, sim, Replay, Replayed};
use specperf::sim::SimConfig;
use specperf::{LoadMode, TokenSource};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_streams_at_concurrency_64_are_exact() {
    let s = sim(fast());
    let Replayed { out, dir } = Replay::at(&s.url())
        .args("--concurrency 64 --request-count 2000 --osl 256")
        .run()
        .await;
    let c = &out.summary.counts;
    assert_eq!(
        (c.total, c.success, c.failed, c.cancelled),
        (2000, 2000, 0, 0)
    );
    let totals = s.totals();
    assert_eq!(out.summary.total_completion_tokens, 2000 * 256);
    assert_eq!(
        totals.generation_tokens,
        2000 * 256,
        "simulator streamed what the client counted"
    );
    assert_eq!(out.summary.total_prompt_tokens, totals.prompt_tokens);
    // Every token is the prefill token, a draft verification or an accepted draft.
    assert_eq!(
        totals.generation_tokens,
        2000 + totals.drafts + totals.accepted
    );
    assert_eq!(totals.draft_tokens, 3 * totals.drafts);
    assert_eq!(out.summary.metrics["output_sequence_length"].min, 256.0);
    assert!(out.summary.meta.dataset_reused);
    let recs = records(dir.path());
    assert_eq!(recs.len(), 2000);
    let mut ids: Vec<u64> = recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..2000).collect::<Vec<_>>());
    assert_eq!(specperf::exit_code(&out, 0.05), 0);
    let summary = dir.summary();
    assert_eq!(summary["schema_version"], specperf::SUMMARY_SCHEMA);
    assert_eq!(summary["counts"]["success"], 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_default_replays_the_bundled_collection() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(config(&[
        "--sim-ttft-ms",
        "1",
        "--sim-itl-ms",
        "0.2",
        "--artifact-dir",
        dir.path().to_str().unwrap(),
    ]))
    .await;
    assert_eq!(out.summary.counts.success, 88, "every bundled prompt once");
    assert!(!out.summary.meta.dataset_reused);
    assert!(out.summary.meta.url.starts_with("embedded-simulator"));
    assert_eq!(out.summary.total_completion_tokens, 88 * 256);
    let text = specperf::console_table(&out.summary);
    assert!(
        text.contains("Time to first token (ms)") && text.contains("88 ok"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_non_streaming_and_per_chunk_usage() {
    let s = sim(SimConfig {
        reasoning_tokens: 5,
        ..fast()
    });
    let out = Replay::at(&s.url())
        .args("--endpoint-type completions --streaming false --request-count 20 --osl 32")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 20);
    assert_eq!(out.summary.total_completion_tokens, 20 * 32);
    assert_eq!(out.summary.tokens_counted_by[&TokenSource::UsageFinal], 20);

    let out = Replay::at(&s.url())
        .args("--per-chunk-usage --request-count 20 --osl 64")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 20);
    assert_eq!(
        out.summary.tokens_counted_by[&TokenSource::UsagePerChunk],
        20
    );
    assert_eq!(out.summary.total_reasoning_tokens, 20 * 5);
    let weighted = &out.summary.metrics["inter_token_latency_token_weighted_ms"];
    // 64 tokens: the first chunk carries 1 token, the other 63 are spread over the decode chunks.
    assert_eq!(weighted.count, 20 * 63);
    assert!(out
        .summary
        .metrics
        .contains_key("time_to_first_output_token_ms"));
}

/// Issue 14 defect 5: a server that ignores `continuous_usage_stats` (llama.cpp) turns
/// `--per-chunk-usage` into final-usage counting; the run says so once, on stderr and in
/// `summary.json`, and says nothing when the server honours it.
#[test]
fn per_chunk_usage_ignored_by_the_server_is_warned_once() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    for ignore in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_specperf"));
        cmd.arg("replay")
            .args(["--progress-interval", "0", "--metrics-settle-seconds", "0"])
            .args(["--sim-ttft-ms", "1", "--sim-itl-ms", "0.2"])
            .args(["--per-chunk-usage", "--request-count", "6", "--osl", "16"])
            .arg("--artifact-dir")
            .arg(dir.path().join("a"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if ignore {
            cmd.arg("--sim-ignore-continuous-usage");
        }
        let mut child = cmd.spawn().unwrap();
        let mut err = child.stderr.take().unwrap();
        let e = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let status = crate::common::wait_exit(&mut child, Duration::from_secs(60));
        let err = e.join().unwrap();
        assert_eq!(status.code(), Some(0), "{err}");
        let said =
            |t: &str| t.contains("--per-chunk-usage") && t.contains("continuous_usage_stats");
        let on_stderr = err.lines().filter(|l| said(l)).count();
        let summary = read_json(&dir.path().join("a/summary.json"));
        let in_summary = summary["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| said(w.as_str().unwrap()))
            .count();
        let want = usize::from(ignore);
        assert_eq!(
            (on_stderr, in_summary),
            (want, want),
            "ignore={ignore}: {err}"
        );
        let by = if ignore {
            "usage_final"
        } else {
            "usage_per_chunk"
        };
        assert_eq!(summary["tokens_counted_by"][by], 6, "{summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_times_track_the_simulator_schedule() {
    let _machine = crate::common::exclusive();
    let s = sim(SimConfig {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(5),
        k: 1,
        acceptance: specperf::sim::Acceptance::Probability(0.0),
        ..SimConfig::default()
    });
    let out = Replay::at(&s.url())
        .args("--concurrency 4 --request-count 8 --osl 11")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 8);
    let ttft = &out.summary.metrics["time_to_first_token_ms"];
    assert!(
        ttft.min >= 30.0,
        "TTFT never below the simulator's 30 ms: {}",
        ttft.min
    );
    // p = 0: one token per step, ten steps of 5 ms after the first token, on the simulator's
    // absolute schedule (emission i at 30 + 5·i ms after arrival): the last token can be late
    // but never early, so latency is at least 80 ms. A late first token (a loaded machine)
    // shortens the mean gap and a starved client lengthens it, so the ITL bound (a tenth to
    // four times the step) only catches gross errors such as a unit or a count mistaken.
    let latency = &out.summary.metrics["request_latency_ms"];
    assert!(
        latency.min >= 80.0,
        "latency never below the schedule: {}",
        latency.min
    );
    let itl = &out.summary.metrics["inter_token_latency_ms"];
    let scale = f64::from(crate::common::time_scale());
    assert!(
        (0.5 / scale..20.0 * scale).contains(&itl.p("p50")),
        "ITL p50 near the 5 ms step: {}",
        itl.p("p50")
    );
    assert_eq!(out.summary.metrics["inter_chunk_latency_ms"].count, 8 * 10);
}

/// Sum of one vLLM counter family over every series of a saved page.
fn counter_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pages_of_two_servers_with_two_engines_each_match_the_stream() {
    let s = sim(SimConfig {
        servers: 2,
        engines: 2,
        ..fast()
    });
    let urls = s.urls();
    assert_eq!(urls.len(), 2);
    let (m0, m1) = (
        format!("{}/metrics", urls[0]),
        urls[1].trim_start_matches("http://").to_owned(),
    );
    let Replayed { out, dir } = Replay::at(&urls[0])
        .args("--request-count 40 --osl 50 --concurrency 8")
        .args(&format!("--server-metrics {m0} --server-metrics {m1}"))
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 40);
    let page = |i: usize, when: &str| {
        std::fs::read_to_string(
            dir.path()
                .join(format!("server_metrics/endpoint{i}_{when}.txt")),
        )
        .unwrap()
    };
    let (p0, p1) = (page(0, "after"), page(1, "after"));
    // Server 0 owns engines 0 and 1 and took every request; server 1 (engines 2, 3) took none.
    assert!(
        p0.contains("engine=\"1\"") && p1.contains("engine=\"3\"") && !p0.contains("engine=\"2\"")
    );
    let t = s.totals();
    let drafts = counter_sum(&p0, "vllm:spec_decode_num_drafts_total")
        + counter_sum(&p1, "vllm:spec_decode_num_drafts_total");
    let accepted = counter_sum(&p0, "vllm:spec_decode_num_accepted_tokens_total");
    let per_pos = counter_sum(&p0, "vllm:spec_decode_num_accepted_tokens_per_pos_total");
    assert_eq!(drafts as u64, t.drafts);
    assert_eq!(accepted as u64, t.accepted);
    assert_eq!(per_pos, accepted, "per-position counts add up to accepted");
    assert_eq!(counter_sum(&p1, "vllm:spec_decode_num_drafts_total"), 0.0);
    assert_eq!(
        40 * 50,
        40 + t.drafts + t.accepted,
        "tokens = prefill + drafts + accepted"
    );
    assert_eq!(
        counter_sum(&page(0, "before"), "vllm:spec_decode_num_drafts_total"),
        0.0
    );
    let report = out.summary.acceptance.expect("metrics were scraped");
    assert!(report
        .endpoints
        .iter()
        .all(|e| e.before.is_ok() && e.after.is_ok()));
    let a = report.acceptance;
    // Exactly the simulator's own counters over the same window.
    assert_eq!(a.numbers.drafts, t.drafts as f64);
    assert_eq!(a.numbers.accepted_tokens, t.accepted as f64);
    assert_eq!(
        a.numbers.acceptance_length,
        Some(1.0 + t.accepted as f64 / t.drafts as f64)
    );
    assert_eq!(a.metric_source, "vllm-prometheus-counters-endpoints2");
    assert!(!a.partial && a.resets.is_empty());
    // Four engines over two ports, each its own series; only server 0's took requests.
    let engines: Vec<(&str, bool)> = a
        .engines
        .iter()
        .map(|e| (e.engine.as_str(), e.numbers.drafts > 0.0))
        .collect();
    assert_eq!(
        engines,
        [("0", true), ("1", true), ("2", false), ("3", false)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_requests_carry_their_precomputed_arrival_times() {
    let s = sim(fast());
    let Replayed { out, dir } = Replay::at(&s.url())
        .args("--request-rate 400 --arrival-pattern poisson --random-seed 5")
        .args("--request-count 40 --osl 8")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 40);
    let load = &out.summary.meta.load;
    assert_eq!((load.mode, load.dispatch.issued), (LoadMode::Open, 40));
    let want = specperf::arrivals(400.0, specperf::ArrivalPattern::Poisson, 1.0, 40, 5, None);
    let mut recs = records(dir.path());
    recs.sort_by_key(|r| r["id"].as_u64().unwrap());
    let t0 = recs[0]["intended_ns"].as_u64().unwrap();
    for (r, w) in recs.iter().zip(&want) {
        let offset = r["intended_ns"].as_u64().unwrap() - t0;
        assert_eq!(
            offset,
            w.as_nanos() as u64,
            "intended time is the schedule's"
        );
        assert!(r["sent_ns"].as_u64().unwrap() >= r["intended_ns"].as_u64().unwrap());
    }
    assert!(out.summary.metrics.contains_key("effective_latency_ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_open_loop_against_a_slow_server_reports_lag_and_late_arrivals() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(10),
        ..fast()
    });
    // 100/s offered, at most 2 in flight, ~100 ms each: the server manages ~20/s.
    let out = Replay::at(&s.url())
        .args("--request-rate 100 --arrival-pattern constant --concurrency 2")
        .args("--request-count 20 --osl 30")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 20, "nothing silently dropped");
    let d = out.summary.meta.load.dispatch;
    assert!(d.late >= 15, "{d:?}");
    assert!(d.max_lag_ms > 500.0, "{d:?}");
    let lat = out.summary.metrics["request_latency_ms"].p("p50");
    let eff = out.summary.metrics["effective_latency_ms"].p("p50");
    assert!(
        eff > 3.0 * lat,
        "latency from the intended time shows the queue: {eff} vs {lat}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_is_recorded_but_excluded_from_statistics() {
    let s = sim(fast());
    let Replayed { out, dir } = Replay::at(&s.url())
        .args("--warmup-request-count 6 --warmup-concurrency 2 --request-count 10 --osl 8")
        .run()
        .await;
    let c = &out.summary.counts;
    assert_eq!((c.warmup, c.total, c.success), (6, 10, 10));
    let recs = records(dir.path());
    assert_eq!(recs.iter().filter(|r| r["phase"] == "warmup").count(), 6);
    assert_eq!(out.summary.metrics["request_latency_ms"].count, 10);
    // The AL window starts after warmup: the simulator counted more drafts than the report.
    let a = out.summary.acceptance.unwrap().acceptance;
    assert!(a.numbers.drafts < s.totals().drafts as f64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_limit_then_grace_cancels_stragglers_as_failures() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(20),
        ..fast()
    });
    let Replayed { out, dir } = Replay::at(&s.url())
        .args("--concurrency 3 --osl 1000 --benchmark-duration 0.3 --benchmark-grace-period 0.2")
        .run()
        .await;
    let c = &out.summary.counts;
    assert_eq!(c.total, 3, "three started before the limit, none after");
    assert_eq!(c.failed_by_kind.get("grace_period_expired"), Some(&3));
    assert_eq!(out.stopped_by, None);
    assert_eq!(records(dir.path()).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mooncake_trace_replays_at_its_timestamps_within_the_window() {
    let s = sim(fast());
    let rows: String = [1000, 1100, 1250, 1600, 1700, 5000]
        .iter()
        .enumerate()
        .map(|(i, ts)| {
            format!(
                "{{\"timestamp\": {ts}, \"input_length\": 600, \"output_length\": {}, \"hash_ids\": [1, {}]}}\n",
                4 + i,
                10 + i
            )
        })
        .collect();
    let Replayed { out, dir: d } = Replay::at(&s.url())
        .input_file("trace.jsonl", &rows)
        .args("--custom-dataset-type mooncake_trace --fixed-schedule-auto-offset")
        .args("--fixed-schedule-end-offset 2000 --trace-speedup 10")
        .run()
        .await;
    assert_eq!(
        out.summary.counts.success, 5,
        "the 5000 ms row is outside the window"
    );
    assert_eq!(out.summary.meta.load.mode, LoadMode::Trace);
    let mut recs = d.records();
    recs.sort_by_key(|r| r["id"].as_u64().unwrap());
    let t0 = recs[0]["intended_ns"].as_u64().unwrap();
    let offsets: Vec<u64> = recs
        .iter()
        .map(|r| (r["intended_ns"].as_u64().unwrap() - t0) / 1_000_000)
        .collect();
    // (ts - 1000 ms) / 10.
    assert_eq!(offsets, [0, 10, 25, 60, 70]);
    // Output lengths come from the trace rows.
    let osl: Vec<u64> = recs
        .iter()
        .map(|r| r["completion_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(osl, [4, 5, 6, 7, 8]);
}

/// Probe: a concurrency far above the request count asked for open files for every slot
/// (`--concurrency 100000 --request-count 1` was refused for want of 200,128 descriptors);
/// no more requests than the plan holds are ever in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_above_the_request_count_needs_no_more_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = specperf::replay(
        config(&[
            "--artifact-dir",
            dir.path().to_str().unwrap(),
            "--concurrency",
            "1000000000",
            "--request-count",
            "2",
            "--warmup-request-count",
            "1",
            "--osl",
            "2",
            "--sim-ttft-ms",
            "1",
        ]),
        specperf::Stopper::new(),
        tokio::sync::watch::channel(specperf::Progress::default()).0,
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(out.summary.counts.success, 2);
}
