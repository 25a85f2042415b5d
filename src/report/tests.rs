//! Golden-file tests of every artifact format, from a fixed set of records built in memory (no
//! network, fixed clock), so the expected files in `tests/golden/reports/` change only when a
//! format does. `UPDATE_GOLDEN=1 cargo test --lib golden` rewrites them; review the diff.
//! The crate version is written as `<version>` in the expected files.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::*;
use crate::metrics::{Aggregate, LoadMeta, RunMeta, Slo, SloMetric, Summary, TimeoutKind};
use crate::record::{ChunkGap, FailureKind, Outcome, Phase, RequestRecord, TokenSource};
use crate::schedule::DispatchStats;
use crate::scrape::acceptance::{evaluate, AcceptanceOptions, EndpointWindow, Snapshot};
use crate::scrape::families::Collected;
use crate::scrape::{prom, AlPoint, EndpointStatus, PageFormat, ScrapeReport, ScrapeStatus};
use crate::timefmt::{compact_date, iso8601};

pub(super) const START_UNIX_S: f64 = 1_796_000_000.0;
pub(super) const EPOCH_NS: u64 = 1_796_000_000_000_000_000;
const MS: u64 = 1_000_000;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports")
}

/// A streamed success: TTFT `ttft` ms, then `steps` chunks every `gap` ms carrying `per` tokens
/// each (per-chunk usage), plus the first chunk's `per` tokens.
fn success(id: u64, sent_ms: u64, ttft: u64, gap: u64, steps: u64, per: u32) -> RequestRecord {
    let mut r = RequestRecord::started(id, id as usize % 3, sent_ms * MS, sent_ms * MS + 100_000);
    let sent = r.sent_ns;
    r.outcome = Outcome::Success;
    r.http_status = Some(200);
    r.headers_ns = Some(sent + MS);
    let first = sent + ttft * MS;
    r.first_token_ns = Some(first);
    r.first_output_token_ns = Some(first);
    r.second_token_ns = Some(first + gap * MS);
    // Gaps alternate around `gap` so per-request spreads are not degenerate.
    let mut t = first;
    for i in 0..steps {
        let g = gap * MS + if i % 2 == 0 { 250_000 } else { 0 };
        t += g;
        r.chunk_gaps.push(ChunkGap {
            gap_ns: g,
            tokens: per,
        });
    }
    r.last_token_ns = Some(t);
    r.end_ns = t + 200_000;
    r.prompt_tokens = Some(100 + id * 7);
    r.completion_tokens = Some(u64::from(per) * (steps + 1));
    r.reasoning_tokens = (id == 1).then_some(3);
    r.token_source = TokenSource::UsagePerChunk;
    r.first_chunk_tokens = Some(u64::from(per));
    r.content_events = steps as u32 + 1;
    r.events = steps as u32 + 4;
    r.reads = steps as u32 + 2;
    r.finish_reason = Some("length".into());
    r.total_tokens = Some(r.prompt_tokens.unwrap() + r.completion_tokens.unwrap());
    // Asked for 12: some answers are shorter, some longer (AIPerf's OSL mismatch).
    r.requested_osl = Some(12);
    r.http = Some(crate::record::HttpTrace {
        // The first request of the run opened its connection; the others reused one.
        connection_reused: id != 100,
        bytes_sent: 2048 + id * 100,
        bytes_received: 512 * (steps + 1),
        frames_received: r.reads,
        first_frame_ns: Some(first - 50_000),
        last_frame_ns: Some(t + 100_000),
    });
    r
}

pub(super) fn records() -> Vec<RequestRecord> {
    let mut warm = success(100, 0, 40, 10, 3, 2);
    warm.phase = Phase::Warmup;
    let mut http = RequestRecord::started(4, 1, 30 * MS, 30 * MS + 50_000);
    http.outcome = Outcome::Failed(FailureKind::HttpStatus);
    http.http_status = Some(503);
    http.headers_ns = Some(32 * MS);
    http.end_ns = 33 * MS;
    http.error = Some("HTTP 503: server overloaded".into());
    let mut ttft = RequestRecord::started(5, 2, 40 * MS, 40 * MS + 70_000);
    ttft.outcome = Outcome::Failed(FailureKind::TtftTimeout);
    ttft.end_ns = 640 * MS;
    ttft.error = Some("no first token within 0.6 s".into());
    let mut cancelled = RequestRecord::started(6, 0, 50 * MS, 50 * MS + 20_000);
    cancelled.end_ns = 700 * MS;
    vec![
        warm,
        success(0, 100, 50, 10, 4, 2),
        success(1, 101, 120, 12, 5, 3),
        success(2, 102, 60, 9, 6, 1),
        success(3, 160, 210, 20, 3, 2),
        http,
        ttft,
        cancelled,
    ]
}

fn meta() -> RunMeta {
    RunMeta {
        url: "http://127.0.0.1:8000".into(),
        model: "deepseek-ai/DeepSeek-V4-Pro".into(),
        endpoint: "/v1/chat/completions".into(),
        endpoint_type: crate::render::EndpointType::Chat,
        osl: Some(256),
        cli_command: Some("specperf replay --url http://127.0.0.1:8000 --concurrency 4".into()),
        streaming: true,
        concurrency: Some(4),
        request_count: 7,
        samples: 3,
        dataset_reused: true,
        input: "bundled datasets/qualitative.jsonl".into(),
        dataset_format: Some("speed_bench_qualitative".into()),
        start_unix_s: START_UNIX_S,
        stopped_by: None,
        load: LoadMeta {
            grace_period_s: Some(30.0),
            dispatch: DispatchStats {
                issued: 7,
                late: 0,
                max_lag_ms: 0.0,
                not_issued: 0,
            },
            ..LoadMeta::default()
        },
        timeouts_s: [
            (TimeoutKind::FirstToken, 0.6),
            (TimeoutKind::Request, 21600.0),
        ]
        .into_iter()
        .collect(),
    }
}

fn fixture(name: &str) -> Snapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/prometheus")
        .join(name);
    let text = std::fs::read_to_string(path).expect("fixture exists");
    Snapshot::from_page(&prom::parse(&text, prom::Format::Text).expect("fixture parses"))
}

/// The collection of a 1.25 s window: the baseline page just before it, the final page at its
/// end, as the scrape task feeds them.
fn collected(url: &str) -> Collected {
    let page = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/prometheus")
            .join(name);
        let text = std::fs::read_to_string(path).expect("fixture exists");
        let page = prom::parse(&text, prom::Format::Text).expect("fixture parses");
        (text, page)
    };
    let t0 = (START_UNIX_S * 1e9) as u64;
    let mut c = Collected::new(&[url.to_owned()], 1_000_000_000);
    let (text, p) = page("vllm_2engines_before.prom");
    c.page(0, t0 - 2_000_000, 2_000_000, &text, &p);
    c.start(t0);
    let (text, p) = page("vllm_2engines_after.prom");
    c.page(0, t0 + 1_248_000_000, 2_000_000, &text, &p);
    c.end(t0 + 1_250_000_000);
    c
}

fn scrape_report() -> ScrapeReport {
    let url = "http://127.0.0.1:8000/metrics".to_owned();
    let acceptance = evaluate(
        &[EndpointWindow {
            url: url.clone(),
            before: Ok(fixture("vllm_2engines_before.prom")),
            after: Ok(fixture("vllm_2engines_after.prom")),
            iterations: None,
        }],
        AcceptanceOptions::default(),
    );
    ScrapeReport {
        acceptance,
        endpoints: vec![EndpointStatus {
            url,
            before: ScrapeStatus::Ok,
            after: ScrapeStatus::Ok,
            format: Some(PageFormat::Prometheus),
            failed_live_scrapes: 0,
        }],
        timeline: vec![AlPoint {
            t_s: 0.5,
            acceptance_length: Some(2.45),
            drafts: 40000.0,
        }],
        settle_s: 0.0,
        window_s: 1.25,
        counters_settled: true,
        collected: Some(collected("http://127.0.0.1:8000/metrics")),
    }
}

pub(super) fn summary() -> Summary {
    let mut agg = Aggregate::with_goodput(vec![
        Slo {
            metric: SloMetric::TimeToFirstToken,
            threshold: 100.0,
        },
        Slo {
            metric: SloMetric::InterTokenLatency,
            threshold: 6.0,
        },
    ]);
    for r in records() {
        agg.add(&r);
    }
    let mut s = agg.summary(meta());
    s.acceptance = Some(scrape_report());
    // As the engine finishes a run: the counters are in, so the stream estimate is set beside them.
    s.settle_spec(Some("category".into()));
    s
}

/// [`summary`] without per-request speculative figures (a server that reports none, a
/// non-streamed run).
fn summary_without_spec() -> Summary {
    let mut s = summary();
    s.spec_decode = None;
    s
}

/// Compares `actual` with the golden file `name` (version normalised), or rewrites it.
fn check(name: &str, actual: &[u8]) {
    let v = env!("CARGO_PKG_VERSION");
    let text = String::from_utf8(actual.to_vec())
        .expect("artifacts are UTF-8")
        .replace(&format!("specperf-{v}"), "specperf-<version>")
        .replace(&format!("\"{v}\""), "\"<version>\"")
        .replace(&format!("specperf {v} "), "specperf <version> ");
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    if want != text {
        let line = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(text.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}:\n  want: {:?}\n  got:  {:?}\n\
             (if the change is intended: UPDATE_GOLDEN=1 cargo test --lib golden, review the diff)",
            line + 1,
            want.lines().nth(line),
            text.lines().nth(line)
        );
    }
}

#[test]
fn golden_summary_json_and_console() {
    let s = summary();
    let dir = tempfile::tempdir().unwrap();
    write_artifacts(dir.path(), &s).unwrap();
    for name in [
        "summary.json",
        "console.txt",
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
        "server_metrics_export.json",
        "server_metrics_export.csv",
    ] {
        check(name, &std::fs::read(dir.path().join(name)).unwrap());
    }
}

#[test]
fn golden_profile_export_jsonl() {
    let mut out = Vec::new();
    let mut line = Vec::new();
    for r in records() {
        line.clear();
        aiperf::write_record(&mut line, &r, EPOCH_NS, false).unwrap();
        out.extend_from_slice(&line);
        out.push(b'\n');
    }
    check("profile_export.jsonl", &out);
}

#[test]
fn golden_inferencex_raw_result() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        inferencex::write_raw_result(dir.path(), "dsv4_fp4_vllm_tp8-pp1_conc4_test", &summary())
            .unwrap();
    assert_eq!(
        path,
        dir.path().join("dsv4_fp4_vllm_tp8-pp1_conc4_test.json")
    );
    check("raw_result.json", &std::fs::read(path).unwrap());
}

#[test]
fn golden_inputs_json() {
    let dir = tempfile::tempdir().unwrap();
    let bodies = [
        Bytes::from_static(
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#,
        ),
        Bytes::from_static(br#"{"model":"m","prompt":"<s>x","stream":true}"#),
    ];
    write_inputs(dir.path(), &bodies).unwrap();
    let bytes = std::fs::read(dir.path().join("inputs.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("inputs.json is JSON");
    assert_eq!(v["data"][1]["session_id"], "sample-1");
    assert_eq!(v["data"][1]["payloads"][0]["prompt"], "<s>x");
    check("inputs.json", &bytes);
}

#[test]
fn goodput_counts_only_requests_meeting_every_slo() {
    let s = summary();
    let g = s.goodput.as_ref().unwrap();
    // TTFT ≤ 100 ms and ITL ≤ 6 ms: records 0 (50 ms, ~5 ms/token) and 2 (60 ms, ~9.4 ms/token
    // at one token per chunk -> fails ITL); record 1 fails TTFT, record 3 both.
    assert_eq!(g.good_request_count, 1);
    assert!((g.good_request_fraction - 1.0 / 7.0).abs() < 1e-12);
    assert!((g.goodput_rps - 1.0 / s.duration_s).abs() < 1e-9);
}

#[test]
fn raw_result_refuses_zero_tpot() {
    let mut agg = Aggregate::new();
    let mut r = success(0, 0, 10, 0, 4, 1);
    r.last_token_ns = r.first_token_ns;
    agg.add(&r);
    let dir = tempfile::tempdir().unwrap();
    let e = inferencex::write_raw_result(dir.path(), "x", &agg.summary(meta())).unwrap_err();
    assert!(
        matches!(e, ReportError::ZeroTpot { ref key, .. } if key == "mean_tpot_ms"),
        "{e}"
    );
    assert!(!dir.path().join("x.json").exists());
}

#[test]
fn dates_are_utc_civil_time() {
    assert_eq!(iso8601(0.0), "1970-01-01T00:00:00.000000+00:00");
    assert_eq!(iso8601(951_782_400.5), "2000-02-29T00:00:00.500000+00:00");
    assert_eq!(compact_date(START_UNIX_S), "20261130-005320");
}

#[test]
fn progress_line_shows_counts_rates_al_and_eta() {
    let start = Instant::now();
    let p = Progress {
        done: 50,
        ok: 48,
        failed: 1,
        cancelled: 1,
        output_tokens: 48 * 256,
        acceptance_length: Some(2.5),
        planned: Some(100),
        profiling_started: Some(start),
        ..Progress::default()
    };
    let now = start + std::time::Duration::from_secs(10);
    let bar = progress_line(&p, now, true, 120);
    assert!(
        bar.starts_with('[') && bar.contains(" 50% 50/100 req"),
        "{bar}"
    );
    assert!(
        bar.contains("4.8 req/s") && bar.contains("1229 tok/s") && bar.contains("2 err"),
        "{bar}"
    );
    assert!(
        bar.contains("AL 2.500") && bar.contains("ETA 0:10"),
        "{bar}"
    );
    assert!(bar.chars().count() <= 120, "{bar}");
    let plain = progress_line(&p, now, false, 0);
    assert!(
        plain.contains("done 50/100 (ok 48, failed 1, cancelled 1)"),
        "{plain}"
    );
}

#[test]
fn progress_line_says_the_al_waits_for_a_finished_request() {
    let start = Instant::now();
    let p = Progress {
        done: 2,
        planned: Some(10),
        profiling_started: Some(start),
        acceptance_waiting: true,
        ..Progress::default()
    };
    let now = start + std::time::Duration::from_secs(1);
    let plain = progress_line(&p, now, false, 0);
    assert!(
        plain.contains("AL waiting for the first finished request"),
        "{plain}"
    );
    let known = Progress {
        acceptance_length: Some(2.0),
        ..p
    };
    assert!(!progress_line(&known, now, false, 0).contains("waiting"));
}

#[test]
fn every_listed_metric_has_its_names_in_the_one_table() {
    for k in ROWS {
        assert!(k.console_label().is_some(), "{k:?} has no console label");
    }
    for k in aiperf::RECORD_METRICS {
        assert!(
            k.aiperf_tag().is_some() && k.aiperf_header().is_some(),
            "{k:?} has no AIPerf name"
        );
    }
    for k in inferencex::METRICS {
        assert!(k.vllm_name().is_some(), "{k:?} has no vLLM name");
    }
}

/// Issue 15: InferenceX's `collect_sweep_results.py` reads `profile_export_aiperf.csv` by AIPerf's
/// labels (it read 0 requests from `Request Count (requests)`): the header row, labels and row
/// order are AIPerf 0.13's, as listed in `tests/fixtures/aiperf/csv_labels.txt` (derived from
/// AIPerf's CSV exporter; see its comment). The acceptance-length row is specperf's one addition,
/// last, where a reader looking up AIPerf's labels never meets it.
#[test]
fn csv_labels_equal_aiperf_0_13s() {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aiperf/csv_labels.txt"),
    )
    .unwrap();
    let want: Vec<&str> = fixture.lines().filter(|l| !l.starts_with('#')).collect();
    let csv = aiperf::summary_csv(&summary());
    let mut got: Vec<&str> = csv
        .lines()
        .map(|l| match l {
            "" => "",
            l if l.starts_with("Metric,") => l,
            // The label: up to the first comma after the last ')' or the first comma.
            l => {
                &l[..l
                    .rfind("),")
                    .map_or_else(|| l.find(',').unwrap(), |i| i + 1)]
            }
        })
        .collect();
    assert_eq!(got.pop(), Some("Acceptance Length (tokens/step)"));
    assert_eq!(got, want);
}

/// Issue 15: the raw InferenceX JSON carries upstream `vllm bench serve`'s newer keys: `failed`,
/// `request_goodput` (beside the legacy `"request_goodput:"`), `max_concurrent_requests` (peak of
/// successful requests in flight) and the `spec_decode_*` keys from the server's counters (rate
/// in percent, per-position rates as fractions).
#[test]
fn raw_result_carries_vllm_bench_serve_keys() {
    let s = summary();
    let bytes = super::json::python_compact(&inferencex::raw_result(&s).unwrap());
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["failed"], 3);
    assert_eq!(v["request_goodput"], v["request_goodput:"]);
    assert!(v["request_goodput"].as_f64().unwrap() > 0.0);
    // Requests sent at 100, 101, 102 and 160 ms are all still running at 160 ms.
    assert_eq!(v["max_concurrent_requests"], 4);
    let n = &s.acceptance.as_ref().unwrap().acceptance.numbers;
    assert_eq!(
        v["spec_decode_acceptance_length"].as_f64(),
        n.acceptance_length
    );
    assert_eq!(
        v["spec_decode_acceptance_rate"].as_f64(),
        n.acceptance_rate.map(|r| r * 100.0)
    );
    assert_eq!(v["spec_decode_num_drafts"], n.drafts as u64);
    assert_eq!(
        v["spec_decode_draft_tokens"],
        n.draft_tokens.unwrap() as u64
    );
    assert_eq!(v["spec_decode_accepted_tokens"], n.accepted_tokens as u64);
    assert_eq!(
        v["spec_decode_per_position_acceptance_rates"],
        serde_json::json!(n.per_position_acceptance)
    );
    // A run without speculative counters leaves the spec_decode keys out (absent, not zero).
    let mut plain = summary();
    plain.acceptance = None;
    let j = super::json::python_compact(&inferencex::raw_result(&plain).unwrap());
    let j = String::from_utf8(j).unwrap();
    assert!(!j.contains("spec_decode"), "{j}");
}

/// Issue 15: AIPerf 0.13's time-weighted metrics (`effective_*`, `active_*`, `tokens_in_flight`,
/// from sweep lines over the requests' times) are in `profile_export_aiperf.json` in its
/// `JsonMetricResult` shape (unit, avg, the percentiles it computes, min, max, std; no count or
/// sum) and in the CSV's table with statistics, the columns it has no value for empty. The
/// averages are checked against identities that need no sweep: the integral of concurrency is the
/// requests' total time in flight (failed and cancelled ones too), that of decode throughput the
/// successes' tokens after the first.
#[test]
fn aiperf_summary_has_time_weighted_metrics() {
    let s = summary();
    let j: serde_json::Value =
        serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(&s))).unwrap();
    let profiled: Vec<RequestRecord> = records()
        .into_iter()
        .filter(|r| r.phase == Phase::Profiling)
        .collect();
    let t0 = profiled.iter().map(|r| r.sent_ns).min().unwrap();
    let t1 = profiled.iter().map(|r| r.end_ns).max().unwrap();
    let window_s = (t1 - t0) as f64 / 1e9;
    let busy_s: f64 = profiled
        .iter()
        .map(|r| (r.end_ns - r.sent_ns) as f64 / 1e9)
        .sum();
    let decoded: u64 = profiled
        .iter()
        .filter(|r| r.outcome.is_success())
        .map(|r| r.completion_tokens.unwrap() - 1)
        .sum();
    let close = |got: &serde_json::Value, want: f64| {
        let got = got.as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want.abs(), "{got} vs {want}");
    };
    let conc = &j["effective_concurrency"];
    let mut keys: Vec<&str> = conc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["avg", "max", "min", "p50", "p90", "p95", "p99", "std", "unit"]
    );
    assert_eq!(conc["unit"], "requests");
    close(&conc["avg"], busy_s / window_s);
    assert_eq!(j["effective_decode_throughput"]["unit"], "tokens/sec");
    close(
        &j["effective_decode_throughput"]["avg"],
        decoded as f64 / window_s,
    );
    for tag in [
        "effective_prefill_throughput",
        "effective_decode_concurrency",
        "effective_prefill_concurrency",
        "effective_total_throughput",
        "effective_decode_throughput_per_user",
        "effective_prefill_throughput_per_user",
        "tokens_in_flight",
        "active_decode_throughput",
        "active_prefill_throughput",
        "active_decode_throughput_per_user",
        "active_prefill_throughput_per_user",
        "active_total_throughput",
    ] {
        assert!(j[tag]["avg"].as_f64().unwrap() > 0.0, "{tag}: {}", j[tag]);
    }
    let csv = aiperf::summary_csv(&s);
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("Effective Concurrency,"))
        .unwrap_or_else(|| panic!("no Effective Concurrency row in\n{csv}"))
        .split(',')
        .collect();
    // Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std
    assert_eq!(row.len(), 15, "{row:?}");
    assert_eq!(row[1], format!("{:.2}", busy_s / window_s));
    for empty in [4, 5, 6, 7, 8, 10] {
        assert_eq!(row[empty], "", "{row:?}");
    }
    assert!(
        csv.contains("\nEffective Decode Throughput (tokens/sec),"),
        "{csv}"
    );
}

/// An AgentX record: a success of `success(...)` with the session metadata of `conv` turn
/// `turn` and theoretical cache blocks `hit`/`total`.
fn agentx_record(id: u64, conv: &str, depth: u32, hit: u64, total: u64) -> RequestRecord {
    let mut r = success(id, 10 * id, 20, 5, 3, 2);
    r.turn = 2;
    let trace = conv.split("::").next().unwrap_or(conv).to_owned();
    r.session = Some(Box::new(crate::record::SessionMeta {
        conversation_id: conv.to_owned(),
        x_request_id: format!("req-{id}"),
        x_correlation_id: format!("corr-{conv}"),
        root_correlation_id: "corr-root".into(),
        parent_correlation_id: (depth > 0).then(|| "corr-root".to_owned()),
        agent_depth: depth,
        source_trace_id: trace,
        source_outer_idx: 4,
        source_inner_idx: (depth > 0).then_some(1),
        source_kind: if depth > 0 {
            "weka_subagent"
        } else {
            "weka_main"
        }
        .into(),
        lane: 0,
        session_num: id,
        cache_hit_blocks: hit,
        cache_total_blocks: total,
        context_overflow: false,
    }));
    r
}

pub(super) fn export_line(r: &RequestRecord) -> Vec<u8> {
    let mut line = Vec::new();
    aiperf::write_record(&mut line, r, EPOCH_NS, true).unwrap();
    line
}

#[test]
fn agentx_records_carry_their_session_and_overflows_are_left_out() {
    let child = agentx_record(7, "fx-sub-002::sa:explore_001", 1, 3, 5);
    let v: serde_json::Value = serde_json::from_slice(&export_line(&child)).unwrap();
    let md = &v["metadata"];
    for (key, want) in [
        (
            "conversation_id",
            serde_json::json!("fx-sub-002::sa:explore_001"),
        ),
        ("turn_index", serde_json::json!(2)),
        ("x_request_id", serde_json::json!("req-7")),
        (
            "x_correlation_id",
            serde_json::json!("corr-fx-sub-002::sa:explore_001"),
        ),
        ("root_correlation_id", serde_json::json!("corr-root")),
        ("parent_correlation_id", serde_json::json!("corr-root")),
        ("agent_depth", serde_json::json!(1)),
        ("source_trace_id", serde_json::json!("fx-sub-002")),
        ("source_outer_idx", serde_json::json!(4)),
        ("source_inner_idx", serde_json::json!(1)),
        ("source_kind", serde_json::json!("weka_subagent")),
        ("benchmark_phase", serde_json::json!("profiling")),
        ("was_cancelled", serde_json::json!(false)),
    ] {
        assert_eq!(md[key], want, "{key}: {md}");
    }
    let root = agentx_record(8, "fx-sub-002", 0, 0, 3);
    let v: serde_json::Value = serde_json::from_slice(&export_line(&root)).unwrap();
    assert!(v["metadata"]["parent_correlation_id"].is_null());
    assert!(v["metadata"].get("source_inner_idx").is_none());
    // Cancelled at the end of the grace period: flagged, with the time.
    let mut cancelled = agentx_record(9, "fx-sub-002", 0, 0, 3);
    cancelled.outcome = Outcome::Cancelled;
    let v: serde_json::Value = serde_json::from_slice(&export_line(&cancelled)).unwrap();
    assert_eq!(v["metadata"]["was_cancelled"], true);
    assert_eq!(
        v["metadata"]["cancellation_time_ns"],
        EPOCH_NS + cancelled.end_ns
    );
    // A context overflow is not written at all.
    let mut overflow = agentx_record(10, "fx-sub-002", 0, 0, 3);
    overflow.session.as_mut().unwrap().context_overflow = true;
    overflow.outcome = Outcome::Failed(FailureKind::HttpStatus);
    assert!(export_line(&overflow).is_empty());
}

fn agentx_summary(
    records: &[RequestRecord],
    run: crate::metrics::AgentxRunMeta,
    stopped: bool,
) -> serde_json::Value {
    let mut agg = Aggregate::new();
    for r in records {
        agg.add(r);
    }
    let mut m = meta();
    m.stopped_by = stopped.then_some(crate::stop::StopReason::Interrupted);
    let mut s = agg.summary(m);
    s.agentx_run = Some(run);
    serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(&s))).unwrap()
}

fn scenario_run(reasons: &[&str]) -> crate::metrics::AgentxRunMeta {
    crate::metrics::AgentxRunMeta {
        dataset: crate::metrics::Provenance {
            source_type: "public_dataset".into(),
            loader: Some("semianalysis_cc_traces_weka_062126".into()),
            hf_dataset_name: Some("semianalysisai/cc-traces-weka-062126".into()),
            hf_split: Some("train".into()),
            num_dataset_entries: Some(393),
        },
        scenario: Some("inferencex-agentx-mvp".into()),
        invalid_reasons: reasons.iter().map(|r| r.to_string()).collect(),
        overflow_rate_limit: 0.01,
        settings: crate::metrics::AgentxInputs {
            traces: "/hub/datasets--semianalysisai--cc-traces-weka-062126/traces.jsonl".into(),
            tokenizer: "/models/dsv4/tokenizer.json".into(),
            unsafe_override: reasons.contains(&"unsafe_override"),
            trace_idle_gap_cap_s: Some(300.0),
            system_idle_gap_cap_s: 10.0,
            trajectory_start_ratios: (0.25, 0.75),
        },
    }
}

#[test]
fn agentx_summary_counts_cache_blocks_overflows_and_grace_cancels() {
    let mut recs = vec![
        agentx_record(0, "t1", 0, 3, 5),
        agentx_record(1, "t1::sa:a_001", 1, 5, 7),
        // A hit count above the blocks is clamped (AIPerf's guard).
        agentx_record(2, "t2", 0, 9, 4),
    ];
    let mut warm = agentx_record(3, "t2", 0, 4, 4);
    warm.phase = Phase::Warmup;
    let mut failed = agentx_record(4, "t2", 0, 1, 9);
    failed.outcome = Outcome::Failed(FailureKind::HttpStatus);
    failed.http_status = Some(500);
    let mut at_grace = agentx_record(5, "t1", 0, 1, 9);
    at_grace.outcome = Outcome::Cancelled;
    let mut overflow = agentx_record(6, "t3", 0, 1, 9);
    overflow.outcome = Outcome::Failed(FailureKind::HttpStatus);
    overflow.session.as_mut().unwrap().context_overflow = true;
    recs.extend([warm, failed, at_grace, overflow]);
    let v = agentx_summary(&recs, scenario_run(&[]), false);
    assert_eq!(v["request_count"]["avg"], 3.0);
    assert_eq!(
        v["error_request_count"]["avg"], 1.0,
        "grace cancels are not errors"
    );
    assert_eq!(v["completed_request_count"]["avg"], 4.0);
    assert_eq!(v["cancelled_at_grace_request_count"]["avg"], 1.0);
    let cache = &v["theoretical_prefix_cache_hit"];
    assert_eq!(
        (cache["sum"].as_u64(), cache["count"].as_u64()),
        (Some(12), Some(16))
    );
    assert_eq!(cache["unit"], "%");
    assert!(
        (cache["avg"].as_f64().unwrap() - 75.0).abs() < 1e-9,
        "{cache}"
    );
    assert_eq!(v["context_overflow_count"]["avg"], 1.0);
    let mut agg = Aggregate::new();
    for r in &recs {
        agg.add(r);
    }
    let console = console_table(&agg.summary(meta()));
    assert!(
        console.contains("AgentX: 1 cancelled at the end of the grace period")
            && console.contains("1 context overflows")
            && console.contains("75.00% (12 of 16 blocks)"),
        "{console}"
    );
    let md = &v["metadata"];
    assert_eq!(
        md["dataset"]["loader"],
        "semianalysis_cc_traces_weka_062126"
    );
    assert_eq!(md["dataset"]["hf_split"], "train");
    assert_eq!(md["dataset"]["num_dataset_entries"], 393);
    assert_eq!(md["scenario"], "inferencex-agentx-mvp");
    // 1 overflow in 5 profiling responses is over the 1% limit.
    assert_eq!(md["submission_valid"], false);
    assert_eq!(
        md["submission_invalid_reasons"],
        serde_json::json!(["context_overflow_rate_exceeded"])
    );
    // Naive local time, as AIPerf's `datetime.fromtimestamp` writes it.
    let start = v["start_time"].as_str().unwrap();
    assert!(!start.contains('+') && !start.ends_with('Z'), "{start}");
    assert_eq!(start.len(), "2026-11-30T12:00:00.000000".len(), "{start}");
}

#[test]
fn agentx_submission_validity_follows_override_and_cancellation() {
    let recs = [agentx_record(0, "t1", 0, 3, 5)];
    let v = agentx_summary(&recs, scenario_run(&[]), false);
    assert_eq!(v["metadata"]["submission_valid"], true);
    assert!(v["metadata"].get("submission_invalid_reasons").is_none());
    let v = agentx_summary(&recs, scenario_run(&["unsafe_override"]), true);
    assert_eq!(v["metadata"]["submission_valid"], false);
    assert_eq!(
        v["metadata"]["submission_invalid_reasons"],
        serde_json::json!(["unsafe_override", "run_cancelled"])
    );
    // Without AIPerf's scenario: provenance only, no submission fields.
    let mut plain = scenario_run(&[]);
    plain.scenario = None;
    let v = agentx_summary(&recs, plain, false);
    assert!(v["metadata"].get("submission_valid").is_none());
    assert_eq!(v["metadata"]["dataset"]["source_type"], "public_dataset");
    // Records without session metadata keep the old shape: no AgentX keys.
    let mut agg = Aggregate::new();
    agg.add(&success(0, 0, 20, 5, 3, 2));
    let s = agg.summary(meta());
    assert!(s.agentx.is_none());
    let v: serde_json::Value =
        serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(&s))).unwrap();
    assert!(v.get("theoretical_prefix_cache_hit").is_none() && v.get("metadata").is_none());
    assert!(v["start_time"].as_str().unwrap().ends_with("+00:00"));
}

#[test]
fn the_realtime_stats_block_shows_interval_rates_medians_and_al() {
    let start = std::time::Instant::now();
    let prev = Progress {
        done: 10,
        ok: 10,
        output_tokens: 1_000,
        input_tokens: 50_000,
        ..Progress::default()
    };
    let p = Progress {
        done: 70,
        ok: 66,
        failed: 3,
        cancelled: 1,
        warmup: 8,
        output_tokens: 7_000,
        input_tokens: 350_000,
        sent: 82,
        ttft_p50_ms: Some(123.45),
        itl_p50_ms: Some(9.87),
        acceptance_length: Some(2.5),
        profiling_started: Some(start),
        ..Progress::default()
    };
    let b = stats_block(&p, &prev, 30.0, start + std::time::Duration::from_secs(90));
    for want in [
        "70 done (+60), 12 in flight, 66 ok, 3 failed, 1 cancelled (5.71% not ok), 8 warmup",
        "1.87 req/s, 200.0 output tok/s, 10000.0 input tok/s",
        "TTFT 123.5 ms, ITL 9.9 ms",
        "acceptance length (live): 2.500",
    ] {
        assert!(b.contains(want), "{want:?} missing from:\n{b}");
    }
    // Nothing measured yet: no in-flight count without a dispatcher's, medians n/a.
    let empty = stats_block(&Progress::default(), &Progress::default(), 30.0, start);
    assert!(
        !empty.contains("in flight") && empty.contains("TTFT n/a"),
        "{empty}"
    );
}

#[test]
fn live_medians_follow_numpy() {
    let mut agg = Aggregate::new();
    agg.keep_live_medians();
    assert_eq!(agg.live_medians(), (None, None));
    for (i, ttft) in [40u64, 10, 30, 20].into_iter().enumerate() {
        agg.add(&success(i as u64, 0, ttft, 5, 3, 2));
    }
    // Even count: the mean of the two middle values (within the histogram's 0.1 %).
    let m = agg.live_medians().0.unwrap();
    assert!((m - 25.0).abs() < 0.025, "{m}");
    agg.add(&success(9, 0, 90, 5, 3, 2));
    let m = agg.live_medians().0.unwrap();
    assert!((m - 30.0).abs() < 0.03, "{m}");
    assert!(agg.live_medians().1.is_some());
    // A summary's other aggregates keep none.
    let mut other = Aggregate::new();
    other.add(&success(0, 0, 10, 5, 3, 2));
    assert_eq!(other.live_medians(), (None, None));
}

#[test]
fn live_medians_stay_within_a_tenth_of_a_percent_of_numpy_on_many_values() {
    let mut agg = Aggregate::new();
    agg.keep_live_medians();
    let mut ttfts = Vec::new();
    let mut x = 12_345u64;
    for i in 0..2_001u64 {
        // A spread from 1 ms to ~10 s, in whole ms as the test records carry them.
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let ttft = 1 + (x >> 33) % 10_000;
        ttfts.push(ttft as f64);
        agg.add(&success(i, 0, ttft, 5, 3, 2));
    }
    ttfts.sort_by(f64::total_cmp);
    let want = ttfts[ttfts.len() / 2];
    let got = agg.live_medians().0.unwrap();
    assert!(
        (got - want).abs() <= want * 1e-3,
        "{got} against numpy's {want}"
    );
}

// ---- Issue 17: per-request speculative decoding in every artifact ----

/// vLLM's documented example payload (`acceptance_metrics.md`): 43 steps, 10 of 129 drafts
/// accepted, histogram [39, 1, 0, 3] for k = 3.
fn vllm_spec() -> crate::record::SpecDecode {
    crate::record::SpecDecode {
        source: crate::record::SpecSource::Vllm,
        steps: Some(43),
        draft_tokens: Some(129),
        accepted_tokens: Some(10),
        histogram: vec![39, 1, 0, 3],
        num_spec_tokens: Some(3),
        reported_acceptance_length: Some(1.232_558_139_534_883_7),
        per_step_accepted: None,
        per_step_drafted: None,
    }
}

/// llama.cpp's `timings`: drafts and accepted, no steps.
fn llamacpp_spec() -> crate::record::SpecDecode {
    crate::record::SpecDecode {
        source: crate::record::SpecSource::Llamacpp,
        steps: None,
        draft_tokens: Some(50),
        accepted_tokens: Some(30),
        histogram: Vec::new(),
        num_spec_tokens: None,
        reported_acceptance_length: None,
        per_step_accepted: None,
        per_step_drafted: None,
    }
}

fn with_spec(id: u64, spec: crate::record::SpecDecode) -> RequestRecord {
    let mut r = success(id, 100, 50, 10, 4, 2);
    r.spec = Some(Box::new(spec));
    r
}

fn spec_tags(v: &serde_json::Value) -> Vec<&str> {
    let mut tags: Vec<&str> = v["metrics"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("spec_decode_"))
        .collect();
    tags.sort_unstable();
    tags
}

fn close(a: &serde_json::Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn vllm_record_carries_aiperfs_six_tags_and_the_acceptance_record() {
    let v: serde_json::Value =
        serde_json::from_slice(&export_line(&with_spec(1, vllm_spec()))).unwrap();
    assert_eq!(
        spec_tags(&v),
        [
            "spec_decode_acceptance_length",
            "spec_decode_accepted_draft_tokens",
            "spec_decode_accepted_per_verified",
            "spec_decode_draft_acceptance_rate",
            "spec_decode_draft_tokens",
            "spec_decode_steps",
        ]
    );
    let m = &v["metrics"];
    assert!(close(
        &m["spec_decode_acceptance_length"]["value"],
        1.0 + 10.0 / 43.0
    ));
    assert_eq!(m["spec_decode_acceptance_length"]["unit"], "ratio");
    // AIPerf's rate is a percentage.
    assert!(close(
        &m["spec_decode_draft_acceptance_rate"]["value"],
        1000.0 / 129.0
    ));
    assert_eq!(m["spec_decode_draft_acceptance_rate"]["unit"], "%");
    assert!(close(
        &m["spec_decode_accepted_per_verified"]["value"],
        53.0 / 172.0
    ));
    assert_eq!(m["spec_decode_accepted_per_verified"]["unit"], "ratio");
    // Counts are integers, as AIPerf writes them.
    assert_eq!(
        m["spec_decode_steps"],
        serde_json::json!({"value": 43, "unit": "count"})
    );
    assert_eq!(
        m["spec_decode_accepted_draft_tokens"],
        serde_json::json!({"value": 10, "unit": "tokens"})
    );
    assert_eq!(
        m["spec_decode_draft_tokens"],
        serde_json::json!({"value": 129, "unit": "tokens"})
    );
    let a = &v["spec_decode_acceptance"];
    assert_eq!(a["engine"], "vllm");
    assert!(close(&a["mean_acceptance_length"], 1.0 + 10.0 / 43.0));
    assert!(
        close(&a["draft_acceptance_rate"], 10.0 / 129.0),
        "a fraction: {a}"
    );
    // Sparse, zero counts dropped, keys as strings.
    assert_eq!(
        a["acceptance_histogram"],
        serde_json::json!({"0": 39, "1": 1, "3": 3})
    );
    for (key, want) in [
        ("num_accepted_draft_tokens", serde_json::json!(10)),
        ("num_draft_tokens", serde_json::json!(129)),
        ("num_spec_steps", serde_json::json!(43)),
        ("num_spec_tokens", serde_json::json!(3)),
        ("completion_tokens", serde_json::json!(10)),
        ("per_step_accepted", serde_json::Value::Null),
        ("per_step_drafted", serde_json::Value::Null),
    ] {
        assert_eq!(a[key], want, "{key}: {a}");
    }
}

#[test]
fn vllm_detailed_per_step_arrays_are_written_when_they_reconcile() {
    let mut d = vllm_spec();
    d.steps = Some(3);
    d.draft_tokens = Some(9);
    d.accepted_tokens = Some(4);
    d.histogram = vec![1, 1, 0, 1];
    d.per_step_accepted = Some(vec![0, 1, 3]);
    d.per_step_drafted = Some(vec![3, 3, 3]);
    let v: serde_json::Value =
        serde_json::from_slice(&export_line(&with_spec(2, d.clone()))).unwrap();
    let a = &v["spec_decode_acceptance"];
    assert_eq!(a["per_step_accepted"], serde_json::json!([0, 1, 3]));
    assert_eq!(a["per_step_drafted"], serde_json::json!([3, 3, 3]));
    // A step accepting more than it drafted: AIPerf's model would refuse the record.
    d.per_step_drafted = Some(vec![3, 0, 6]);
    let v: serde_json::Value = serde_json::from_slice(&export_line(&with_spec(2, d))).unwrap();
    assert!(v["spec_decode_acceptance"].is_null(), "{v}");
}

#[test]
fn llamacpp_record_has_only_the_rate_and_token_counts() {
    let v: serde_json::Value =
        serde_json::from_slice(&export_line(&with_spec(3, llamacpp_spec()))).unwrap();
    assert_eq!(
        spec_tags(&v),
        [
            "spec_decode_accepted_draft_tokens",
            "spec_decode_draft_acceptance_rate",
            "spec_decode_draft_tokens",
        ]
    );
    assert!(close(
        &v["metrics"]["spec_decode_draft_acceptance_rate"]["value"],
        60.0
    ));
    // No steps, no histogram: no AIPerf acceptance record.
    assert!(v["spec_decode_acceptance"].is_null());
}

#[test]
fn an_inconsistent_histogram_or_a_failure_writes_no_acceptance_record() {
    // Σ counts (42) ≠ steps (43): AIPerf's validator would reject it.
    let mut d = vllm_spec();
    d.histogram = vec![38, 1, 0, 3];
    let v: serde_json::Value = serde_json::from_slice(&export_line(&with_spec(4, d))).unwrap();
    assert!(v["spec_decode_acceptance"].is_null());
    assert_eq!(spec_tags(&v).len(), 6, "the per-request figures stay");
    // A failed request has no metrics at all.
    let mut failed = with_spec(5, vllm_spec());
    failed.outcome = Outcome::Failed(FailureKind::IdleTimeout);
    let v: serde_json::Value = serde_json::from_slice(&export_line(&failed)).unwrap();
    assert!(spec_tags(&v).is_empty() && v["spec_decode_acceptance"].is_null());
    // Without figures, nothing is added.
    let v: serde_json::Value =
        serde_json::from_slice(&export_line(&success(6, 0, 5, 5, 2, 1))).unwrap();
    assert!(spec_tags(&v).is_empty() && v["spec_decode_acceptance"].is_null());
}

fn spec_totals(al: f64, rate: f64) -> crate::metrics::SpecTotals {
    crate::metrics::SpecTotals {
        requests: 2,
        steps: 86,
        requests_with_steps: 2,
        draft_tokens: 258,
        accepted_tokens: 20,
        token_weighted_acceptance_length: Some(al),
        token_weighted_standard_error: Some(0.05),
        mean_acceptance_length: Some(al + 0.01),
        acceptance_length: crate::metrics::Stat::of(&[al - 0.1, al + 0.12]),
        acceptance_rate: Some(rate),
        server_reported_acceptance_length: None,
        histogram: vec![78, 2, 0, 6],
        per_position_acceptance_rates: vec![0.09, 0.07, 0.07],
        vs_counters: None,
    }
}

fn stream_estimate(al: f64, counters: Option<f64>) -> crate::metrics::StreamEstimate {
    crate::metrics::StreamEstimate {
        requests: 2,
        decode_tokens: (al * 100.0).round() as u64,
        decode_events: 100,
        token_weighted_acceptance_length: Some(al),
        token_weighted_standard_error: None,
        mean_acceptance_length: Some(al),
        acceptance_length: None,
        vs_counters: counters.map(|c| {
            let difference_pct = (al - c) / c * 100.0;
            crate::metrics::VsCounters {
                counter_acceptance_length: c,
                difference_pct,
                reliable: difference_pct.abs() <= crate::metrics::RELIABLE_WITHIN_PCT,
            }
        }),
    }
}

/// The golden summary with what the aggregator would add for two vLLM requests of
/// [`vllm_spec`] in two SPEED-Bench categories; `stream_al` sets the stream estimate against
/// the counters' AL 1.2326.
fn spec_summary(stream_al: f64) -> Summary {
    let mut s = summary_without_spec();
    s.warnings.clear();
    let per_request = [1.0 + 10.0 / 43.0, 1.0 + 10.0 / 43.0];
    for (key, values) in [
        (MetricKey::SpecDecodeAcceptanceLength, per_request.to_vec()),
        (MetricKey::SpecDecodeDraftAcceptanceRate, vec![7.75, 7.75]),
        (MetricKey::SpecDecodeAcceptedPerVerified, vec![0.31, 0.31]),
        (MetricKey::SpecDecodeSteps, vec![43.0, 43.0]),
        (MetricKey::SpecDecodeAcceptedDraftTokens, vec![10.0, 10.0]),
        (MetricKey::SpecDecodeDraftTokens, vec![129.0, 129.0]),
    ] {
        s.metrics.insert(
            key.as_str().to_owned(),
            crate::metrics::Stat::of(&values).unwrap(),
        );
    }
    let al = 1.0 + 20.0 / 86.0;
    let group = |stream| crate::metrics::GroupSpec {
        requests: 1,
        reported: Some(spec_totals(al, 20.0 / 258.0)),
        stream_estimate: Some(stream_estimate(stream, None)),
    };
    s.spec_decode = Some(crate::metrics::SpecSummary {
        requests_by_source: [(crate::record::SpecSource::Vllm, 2)].into_iter().collect(),
        malformed: 1,
        reported: Some(spec_totals(al, 20.0 / 258.0)),
        stream_estimate: Some(stream_estimate(stream_al, Some(1.2326))),
        group_field: Some("category".into()),
        by_group: [
            ("coding".to_owned(), group(stream_al)),
            ("qa".to_owned(), group(stream_al + 0.1)),
        ]
        .into_iter()
        .collect(),
        al_histogram: vec![
            crate::metrics::AlBin {
                lo: 1.0,
                requests: 2,
            },
            crate::metrics::AlBin {
                lo: 1.25,
                requests: 0,
            },
        ],
    });
    s
}

#[test]
fn aiperf_summary_json_has_the_spec_record_metrics_totals_and_pooled_histogram() {
    let v: serde_json::Value =
        serde_json::from_slice(&json::pretty(&aiperf::summary_json(&spec_summary(1.24)))).unwrap();
    // Record metrics: AIPerf's full statistics.
    for (tag, unit) in [
        ("spec_decode_acceptance_length", "ratio"),
        ("spec_decode_draft_acceptance_rate", "%"),
        ("spec_decode_accepted_per_verified", "ratio"),
        ("spec_decode_steps", "count"),
        ("spec_decode_accepted_draft_tokens", "tokens"),
        ("spec_decode_draft_tokens", "tokens"),
    ] {
        let m = &v[tag];
        assert_eq!(m["unit"], unit, "{tag}: {m}");
        for k in ["avg", "p50", "p99", "min", "max", "std", "count", "sum"] {
            assert!(m[k].is_number(), "{tag}.{k}: {m}");
        }
    }
    assert_eq!(v["spec_decode_steps"]["sum"], 86.0);
    // Derived: {unit, avg} only.
    for (tag, unit, avg) in [
        ("total_spec_decode_steps", "count", 86.0),
        ("total_accepted_draft_tokens", "tokens", 20.0),
        ("total_draft_tokens", "tokens", 258.0),
        (
            "spec_decode_token_weighted_acceptance_length",
            "ratio",
            1.0 + 20.0 / 86.0,
        ),
        (
            "spec_decode_overall_draft_acceptance_rate",
            "%",
            2000.0 / 258.0,
        ),
    ] {
        let m = v[tag]
            .as_object()
            .unwrap_or_else(|| panic!("{tag} missing"));
        assert_eq!(m.len(), 2, "{tag}: {m:?}");
        assert_eq!(m["unit"], unit);
        assert!(close(&m["avg"], avg), "{tag}: {m:?}");
    }
    assert_eq!(
        v["pooled_spec_decode_acceptance_histogram"],
        serde_json::json!({"0": 78, "1": 2, "3": 6})
    );
    // A run without figures writes none of them, and a null histogram.
    let plain = aiperf::summary_json(&summary());
    let plain: serde_json::Value = serde_json::from_slice(&json::pretty(&plain)).unwrap();
    assert!(plain.get("total_draft_tokens").is_none());
    assert!(plain.get("spec_decode_acceptance_length").is_none());
    assert!(plain["pooled_spec_decode_acceptance_histogram"].is_null());
}

#[test]
fn aiperf_csv_has_the_spec_rows_with_aiperfs_labels() {
    let csv = aiperf::summary_csv(&spec_summary(1.24));
    let (stats, scalars) = csv.split_once("\n\n").unwrap();
    for label in [
        "Acceptance Length (ratio),",
        "Draft Acceptance Rate (%),",
        "Accepted per Verified (ratio),",
        // AIPerf omits the unit `count` from the label.
        "Spec Decode Steps,",
        "Accepted Draft Tokens (tokens),",
        "Draft Tokens (tokens),",
    ] {
        assert!(
            stats.lines().any(|l| l.starts_with(label)),
            "{label} in the statistics table:\n{stats}"
        );
    }
    for row in [
        "Total Spec Decode Steps,86",
        "Total Accepted Draft Tokens (tokens),20",
        "Total Draft Tokens (tokens),258",
        "Token-Weighted Acceptance Length (ratio),1.23",
        "Overall Draft Acceptance Rate (%),7.75",
    ] {
        assert!(
            scalars.lines().any(|l| l == row),
            "{row} in the Metric,Value table:\n{scalars}"
        );
    }
    // The statistics rows stay sorted by tag, as AIPerf's.
    let steps = stats.find("Spec Decode Steps,").unwrap();
    let rate = stats.find("Draft Acceptance Rate (%),").unwrap();
    assert!(rate < steps);
}

#[test]
fn console_says_whether_the_stream_estimate_is_reliable() {
    let ok = console_table(&spec_summary(1.24));
    let line = ok
        .lines()
        .find(|l| l.contains("stream estimate"))
        .unwrap_or_else(|| panic!("no stream estimate line:\n{ok}"));
    assert!(line.contains("1.2400") && line.contains("+0.60%"), "{line}");
    assert!(line.ends_with(": reliable"), "{line}");
    assert!(
        ok.contains("figures from vllm 2; 1 malformed, left out"),
        "{ok}"
    );
    let reported = ok.lines().find(|l| l.contains("reported:")).unwrap();
    assert!(
        reported.contains("token-weighted AL 1.2326")
            && reported.contains("acceptance rate 0.0775"),
        "{reported}"
    );
    // The per-group table, aligned.
    let header = ok
        .lines()
        .find(|l| l.trim_start().starts_with("category"))
        .unwrap();
    let coding = ok
        .lines()
        .find(|l| l.trim_start().starts_with("coding"))
        .unwrap();
    let qa = ok
        .lines()
        .find(|l| l.trim_start().starts_with("qa "))
        .unwrap();
    assert_eq!(header.len(), coding.len(), "{header}\n{coding}");
    assert_eq!(coding.len(), qa.len());
    assert!(qa.ends_with("1.3400"), "{qa}");
    let bad = console_table(&spec_summary(1.30));
    let line = bad.lines().find(|l| l.contains("stream estimate")).unwrap();
    assert!(
        line.contains("UNRELIABLE (>2% from the counters)"),
        "{line}"
    );
    // Nothing without figures.
    assert!(!console_table(&summary_without_spec()).contains("Spec decode"));
}

/// Writes `records.jsonl` and `summary.json` for `plot`.
fn plot_dir(records: &[RequestRecord], s: &Summary) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for r in records {
        lines.push_str(&serde_json::to_string(r).unwrap());
        lines.push('\n');
    }
    std::fs::write(dir.path().join("records.jsonl"), lines).unwrap();
    std::fs::write(
        dir.path().join("summary.json"),
        serde_json::to_vec(s).unwrap(),
    )
    .unwrap();
    dir
}

fn plotted(dir: &Path) -> (Vec<String>, String) {
    let out = dir.join("plots");
    let files = plot::plot(dir, &out, None, false).unwrap().files;
    let names = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    (
        names,
        std::fs::read_to_string(out.join("report.html")).unwrap(),
    )
}

#[test]
fn plot_draws_the_spec_charts_only_when_there_are_spec_figures() {
    // Records with reported figures and no summary histogram or groups: the per-request chart.
    let recs = vec![with_spec(1, vllm_spec()), with_spec(2, llamacpp_spec())];
    let mut s = summary();
    s.spec_decode = None;
    let dir = plot_dir(&recs, &s);
    let (names, html) = plotted(dir.path());
    assert!(
        names.contains(&"al_per_request.svg".to_owned()),
        "{names:?}"
    );
    assert!(!names.contains(&"al_by_group.svg".to_owned()), "{names:?}");
    assert!(html.contains("<figure id=\"al_per_request\">"));
    // The summary's histogram and groups: both charts, the counters' AL as a line.
    let dir = plot_dir(&recs, &spec_summary(1.24));
    let (names, html) = plotted(dir.path());
    assert!(names.contains(&"al_by_group.svg".to_owned()), "{names:?}");
    let svg = std::fs::read_to_string(dir.path().join("plots/al_by_group.svg")).unwrap();
    assert!(
        svg.contains(">coding<") && svg.contains(">qa<"),
        "categories on the x axis"
    );
    assert!(svg.contains("counters&#39; AL"), "the counters' line");
    assert!(svg.contains("stream estimate"));
    assert!(html.contains("<figure id=\"al_by_group\">"));
    // No figures anywhere: neither chart.
    let dir = plot_dir(&records(), &summary_without_spec());
    let (names, html) = plotted(dir.path());
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("al_per_request") || n.starts_with("al_by_group")),
        "{names:?}"
    );
    assert!(!html.contains("al_per_request"));
}

/// Issue 27 §3.2: AgentX records carry AIPerf 0.13's labels: the synthesized warmup is
/// `agentic.warmup` with no phase index (it is not among the declared phases), profiling is phase
/// 0, and `session_num` is the request's number within its phase.
#[test]
fn agentx_records_name_aiperfs_synthesized_warmup_and_number_requests_per_phase() {
    let line = |r: &RequestRecord| {
        let mut out = Vec::new();
        aiperf::write_record(&mut out, r, EPOCH_NS, true).unwrap();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()["metadata"].clone()
    };
    let mut warm = agentx_record(7, "t1", 0, 1, 2);
    warm.phase = Phase::Warmup;
    warm.session.as_mut().unwrap().session_num = 3;
    let w = line(&warm);
    assert_eq!(w["phase_name"], "agentic.warmup");
    assert_eq!(w["phase_kind"], "warmup");
    assert!(
        w["phase_index"].is_null() && w["profiling_index"].is_null(),
        "{w}"
    );
    assert_eq!(w["session_num"], 3);
    let mut prof = agentx_record(12, "t1::fa:000", 1, 1, 2);
    prof.session.as_mut().unwrap().session_num = 0;
    let p = line(&prof);
    assert_eq!(
        (&p["phase_name"], &p["phase_index"], &p["profiling_index"]),
        (
            &serde_json::json!("profiling"),
            &serde_json::json!(0),
            &serde_json::json!(0)
        )
    );
    assert_eq!(p["session_num"], 0, "counted again from 0 for profiling");
    // A plain replay keeps its warmup as a declared phase.
    let mut plain = success(9, 0, 40, 10, 3, 2);
    plain.phase = Phase::Warmup;
    let w = line(&plain);
    assert_eq!(
        (&w["phase_name"], &w["phase_index"]),
        (&serde_json::json!("warmup"), &serde_json::json!(0))
    );
}

/// Issue 27 §3.3: `warmup_metrics` holds the warmup records' own statistics, aggregated and
/// written exactly as profiling ones are: the warmup summary of some records equals the profiling
/// summary of the same records sent as profiling.
#[test]
fn warmup_metrics_are_the_warmup_records_summarized_as_profiling_ones_are() {
    let mut warm: Vec<RequestRecord> = records().into_iter().skip(1).collect();
    let mut as_warmup = Aggregate::new();
    let mut as_profiling = Aggregate::new();
    for r in &warm {
        as_profiling.add(r);
    }
    for r in &mut warm {
        r.phase = Phase::Warmup;
        as_warmup.add(r);
    }
    let json = |s: &Summary| -> serde_json::Value {
        serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(s))).unwrap()
    };
    let w = json(&as_warmup.summary(meta()));
    let p = json(&as_profiling.summary(meta()));
    let wm = w["warmup_metrics"].as_object().expect("warmup metrics");
    assert!(wm.len() > 40, "every metric, not a count: {}", wm.len());
    for (tag, v) in wm {
        assert_eq!(v, &p[tag], "{tag}");
    }
    // ... and every metric object of the profiling summary is there (goodput unset: none).
    let objects = p
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("unit").is_some())
        .count();
    assert_eq!(wm.len(), objects);
    assert_eq!(
        w["request_count"],
        serde_json::json!({"unit": "requests", "avg": 0.0})
    );
    assert!(p["warmup_metrics"].is_null());
}

/// Issue 27 §3.2/§3.3: an AgentX run's `input_config` is what AIPerf 0.13 writes for the same
/// argv: the weka traces as the dataset, the replay's knobs on its one profiling phase, the
/// tokenizer, the scenario and its override, and usage-counted tokens.
#[test]
fn agentx_input_config_is_aiperfs_for_the_same_argv() {
    let recs = vec![agentx_record(0, "t1", 0, 3, 5)];
    let v = agentx_summary(&recs, scenario_run(&["unsafe_override"]), false);
    let ic = &v["input_config"];
    assert_eq!(ic["scenario"], "inferencex-agentx-mvp");
    assert_eq!(ic["unsafe_override"], true);
    assert_eq!(ic["tokenizer"]["name"], "/models/dsv4/tokenizer.json");
    assert_eq!(ic["endpoint"]["use_server_token_count"], true);
    let d = &ic["datasets"][0];
    assert_eq!(
        (&d["type"], &d["dataset"], &d["entries"]),
        (
            &serde_json::json!("public"),
            &serde_json::json!("semianalysis_cc_traces_weka_062126"),
            &serde_json::json!(393)
        )
    );
    assert_eq!(d["trace_idle_gap_cap_seconds"], 300.0);
    let phases = ic["phases"].as_array().unwrap();
    assert_eq!(
        phases.len(),
        1,
        "the replay's warmup is not a declared phase"
    );
    let p = &phases[0];
    assert_eq!(p["timing_mode"], "agentic_replay");
    assert_eq!(
        (
            &p["trajectory_start_min_ratio"],
            &p["trajectory_start_max_ratio"]
        ),
        (&serde_json::json!(0.25), &serde_json::json!(0.75))
    );
    assert_eq!(p["system_idle_gap_cap_seconds"], 10.0);

    // A local trace directory is a `weka_trace` file dataset; no override, no key.
    let mut run = scenario_run(&[]);
    run.dataset = crate::metrics::Provenance {
        source_type: "file".into(),
        ..Default::default()
    };
    run.settings.traces = "/traces".into();
    run.settings.trace_idle_gap_cap_s = None;
    let mut s = {
        let mut agg = Aggregate::new();
        agg.add(&recs[0]);
        agg.summary(meta())
    };
    s.meta.dataset_format = Some("weka_trace".into());
    s.agentx_run = Some(run);
    let v: serde_json::Value =
        serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(&s))).unwrap();
    let d = &v["input_config"]["datasets"][0];
    assert_eq!(
        (&d["type"], &d["path"], &d["format"]),
        (
            &serde_json::json!("file"),
            &serde_json::json!("/traces"),
            &serde_json::json!("weka_trace")
        )
    );
    assert!(d.get("trace_idle_gap_cap_seconds").is_none());
    assert!(v["input_config"].get("unsafe_override").is_none());
}

/// Issue 27 §3.3: `branch_stats` is written as AIPerf names it when the engine counted it.
#[test]
fn branch_stats_are_written_under_aiperfs_names() {
    let mut agg = Aggregate::new();
    agg.add(&agentx_record(0, "t1", 0, 3, 5));
    let mut s = agg.summary(meta());
    let v = aiperf::summary_json(&s);
    let v: serde_json::Value = serde_json::from_slice(&super::json::pretty(&v)).unwrap();
    assert!(
        v.get("branch_stats").is_none(),
        "absent when nothing was counted"
    );
    s.branch_stats = Some(crate::metrics::BranchStats {
        children_spawned: 6,
        children_completed: 5,
        children_truncated: 1,
        children_delayed: 5,
        parents_suspended: 4,
        parents_resumed: 4,
        ..Default::default()
    });
    let v: serde_json::Value =
        serde_json::from_slice(&super::json::pretty(&aiperf::summary_json(&s))).unwrap();
    assert_eq!(
        v["branch_stats"],
        serde_json::json!({
            "children_spawned": 6, "children_completed": 5, "children_errored": 0,
            "children_truncated": 1, "children_delayed": 5, "parents_suspended": 4,
            "parents_resumed": 4, "parents_failed_due_to_child_error": 0,
            "joins_suppressed": 0, "graphs_admitted": 0, "graphs_completed_to_end": 0
        })
    );
}

/// What specperf's own readers (plot, the page, the GPU chart, speed-bench-report, collect) take
/// back from `summary.json` is what the run wrote: a field renamed on either side would leave
/// them with nothing, silently.
#[test]
fn the_summary_view_reads_back_what_summary_json_holds() {
    use crate::metrics::{AlBin, GroupSpec, SpecTotals};
    let mut s = summary();
    // Every per-request part the readers use, whatever the fixture's records reported.
    let totals = SpecTotals {
        token_weighted_acceptance_length: Some(2.5),
        token_weighted_standard_error: Some(0.01),
        mean_acceptance_length: Some(2.4),
        acceptance_rate: Some(0.5),
        ..SpecTotals::default()
    };
    let spec = s.spec_decode.get_or_insert_with(Default::default);
    spec.reported = Some(totals.clone());
    spec.group_field = Some("category".into());
    spec.by_group.insert(
        "coding".into(),
        GroupSpec {
            requests: 3,
            reported: Some(totals),
            stream_estimate: None,
        },
    );
    spec.al_histogram = vec![AlBin {
        lo: 1.0,
        requests: 3,
    }];
    let dir = tempfile::tempdir().unwrap();
    super::write_artifacts(dir.path(), &s).unwrap();
    let v = crate::metrics::SummaryView::read(&dir.path().join("summary.json")).unwrap();
    assert_eq!(
        v.schema_version.as_deref(),
        Some(crate::metrics::SUMMARY_SCHEMA)
    );
    assert_eq!(
        v.specperf_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(v.percentile_method.as_deref(), Some(s.percentile_method));
    assert_eq!(v.meta.url.as_deref(), Some(s.meta.url.as_str()));
    assert_eq!(v.meta.model.as_deref(), Some(s.meta.model.as_str()));
    assert_eq!(v.meta.streaming, Some(s.meta.streaming));
    assert_eq!(v.meta.concurrency, s.meta.concurrency.map(|c| c as f64));
    let c = &s.counts;
    assert_eq!(
        (v.counts.success, v.counts.failed, v.counts.cancelled),
        (c.success, c.failed, c.cancelled)
    );
    assert!(c.success > 0 && c.failed > 0, "the fixture has both");
    assert_eq!(v.duration_s, Some(s.duration_s));
    assert_eq!(v.request_throughput_rps, Some(s.request_throughput_rps));
    assert_eq!(
        v.output_token_throughput_tps,
        Some(s.output_token_throughput_tps)
    );
    let ttft = &s.metrics["time_to_first_token_ms"];
    let view = v.metrics["time_to_first_token_ms"];
    assert_eq!(
        (view.p50, view.p99),
        (
            ttft.percentiles.get("p50").copied(),
            ttft.percentiles.get("p99").copied()
        )
    );
    assert!(view.p50.is_some());
    let acc = s.acceptance.as_ref().unwrap();
    assert_eq!(v.counters_al(), acc.acceptance.numbers.acceptance_length);
    assert!(v.counters_al().is_some());
    let va = v.acceptance.as_ref().unwrap();
    let counters = va.acceptance.as_ref().unwrap();
    assert_eq!(counters.drafts, Some(acc.acceptance.numbers.drafts));
    assert_eq!(counters.status.as_deref(), Some("ok"));
    assert_eq!(va.window_s, Some(acc.window_s));
    assert_eq!(va.timeline.len(), acc.timeline.len());
    let spec = s.spec_decode.as_ref().unwrap();
    let vs = v.spec_decode.as_ref().unwrap();
    let totals = |t: Option<&crate::metrics::SpecTotalsView>| {
        t.map(|t| {
            (
                t.token_weighted_acceptance_length,
                t.token_weighted_standard_error,
                t.mean_acceptance_length,
                t.acceptance_length.is_some(),
            )
        })
    };
    assert_eq!(
        totals(vs.reported.as_ref()),
        spec.reported.as_ref().map(|r| (
            r.token_weighted_acceptance_length,
            r.token_weighted_standard_error,
            r.mean_acceptance_length,
            r.acceptance_length.is_some()
        ))
    );
    assert_eq!(
        totals(vs.stream_estimate.as_ref()),
        spec.stream_estimate.as_ref().map(|r| (
            r.token_weighted_acceptance_length,
            r.token_weighted_standard_error,
            r.mean_acceptance_length,
            r.acceptance_length.is_some()
        ))
    );
    assert!(totals(vs.reported.as_ref()).is_some_and(|t| t.0.is_some()));
    assert_eq!(vs.group_field, spec.group_field);
    assert_eq!(
        vs.by_group.keys().collect::<Vec<_>>(),
        spec.by_group.keys().collect::<Vec<_>>()
    );
    let coding = vs.by_group["coding"].reported.as_ref().unwrap();
    assert_eq!(
        (
            coding.token_weighted_acceptance_length,
            coding.acceptance_rate
        ),
        (Some(2.5), Some(0.5))
    );
    assert_eq!(
        (vs.al_histogram[0].lo, vs.al_histogram[0].requests),
        (Some(1.0), Some(3.0))
    );
    let g = s.goodput.as_ref().unwrap();
    let vg = v.goodput.unwrap();
    assert_eq!(
        (vg.goodput_rps, vg.good_request_fraction),
        (Some(g.goodput_rps), Some(g.good_request_fraction))
    );
}
