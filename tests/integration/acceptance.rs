//! Live acceptance length: the scraper beside a real replay, against the simulator's counters and
//! against scripted metrics servers (resets, failures, formats).

use std::sync::atomic::Ordering;
use std::time::Duration;

use specperf::scrape::acceptance::{AcceptanceStatus, SpecEngine};
use specperf::scrape::{PageFormat, ScrapeReport};
use specperf::sim::{expected_al, Acceptance, SimConfig};

use crate::common::{fake_metrics, fast, sim, text, Page, Replay};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/prometheus")
            .join(name),
    )
    .unwrap()
}

/// A short replay against a fast simulator, scraping `metrics` instead of the simulator.
async fn replay_scraping(metrics: &[&str], extra: &str) -> ScrapeReport {
    let mut flags = format!(
        "--request-count 8 --osl 20 --concurrency 4 \
         --metrics-interval-seconds 60 --metrics-timeout-seconds 1 {extra}"
    );
    for m in metrics {
        flags.push_str(&format!(" --server-metrics {m}"));
    }
    let out = Replay::sim(fast()).args(&flags).run().await.out;
    assert_eq!(
        out.summary.counts.success, 8,
        "the replay itself is unaffected"
    );
    out.summary.acceptance.expect("scraped")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_al_equals_the_simulators_counters_and_its_expectation() {
    let (p, k) = (0.6, 4);
    let s = sim(SimConfig {
        k,
        acceptance: Acceptance::Probability(p),
        ..fast()
    });
    let (requests, osl) = (60u64, 200u64);
    let out = Replay::at(&s.url())
        .args(&format!(
            "--request-count {requests} --osl {osl} --concurrency 16"
        ))
        .run()
        .await
        .out;
    let t = s.totals();
    let a = out.summary.acceptance.unwrap().acceptance;
    assert_eq!(a.status, AcceptanceStatus::Ok);
    assert_eq!(a.engine, SpecEngine::Vllm);
    let al = a.numbers.acceptance_length.unwrap();
    assert_eq!(al, 1.0 + t.accepted as f64 / t.drafts as f64);
    assert_eq!(a.numbers.draft_tokens, Some(t.draft_tokens as f64));
    assert_eq!(a.num_speculative_tokens, Some(k));
    // Statistical bound: accepted per step has mean Σ p^i and variance Σ(2i-1)p^i - mean²; steps
    // are independent, so 5 standard errors, plus the last step of each request, which the
    // simulator may cut short (at most k tokens per request).
    let mean = expected_al(p, k) - 1.0;
    let second: f64 = (1..=k).map(|i| (2 * i - 1) as f64 * p.powi(i as i32)).sum();
    let n = t.drafts as f64;
    let bound = 5.0 * ((second - mean * mean) / n).sqrt() + k as f64 * requests as f64 / n;
    assert!(
        (al - expected_al(p, k)).abs() <= bound,
        "AL {al} vs expected {} ± {bound}",
        expected_al(p, k)
    );
    // Per-position rates are the simulator's p^(i+1), within the same kind of bound.
    for (i, pi) in a.numbers.per_position_acceptance.iter().enumerate() {
        let want = p.powi(i as i32 + 1);
        assert!((pi - want).abs() <= 5.0 * (want * (1.0 - want) / n).sqrt() + bound);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_run_is_flagged_and_counted_as_increase_does() {
    let (url, _) = fake_metrics(vec![
        text(fixture("vllm_2engines_before.prom")),
        text(fixture("vllm_2engines_after_restart.prom")),
    ])
    .await;
    let r = replay_scraping(&[&url], "").await;
    let a = r.acceptance;
    assert_eq!(a.status, AcceptanceStatus::Ok);
    assert!(!a.resets.is_empty());
    assert_eq!(a.numbers.drafts, 48_900.0);
    assert!((a.numbers.acceptance_length.unwrap() - 2.490389).abs() < 5e-7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_endpoint_down_one_slow_and_one_garbage_leave_a_partial_total() {
    let (good, _) = fake_metrics(vec![
        text(fixture("vllm_2engines_before.prom")),
        text(fixture("vllm_2engines_after.prom")),
    ])
    .await;
    let (slow, _) = fake_metrics(vec![
        text(fixture("vllm_2engines_before.prom")),
        Page {
            delay: Duration::from_secs(5),
            ..text(fixture("vllm_2engines_after.prom"))
        },
    ])
    .await;
    let (garbage, _) = fake_metrics(vec![text("vllm:x{ 1\n<html>".into())]).await;
    // Nothing listens on a freshly closed port.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/metrics", l.local_addr().unwrap())
    };
    let r = replay_scraping(&[&good, &slow, &garbage, &down], "").await;
    let a = &r.acceptance;
    assert_eq!(a.status, AcceptanceStatus::Ok);
    assert!(
        a.partial,
        "an AL from a subset of endpoints is marked partial"
    );
    assert_eq!(a.numbers.drafts, 93_600.0, "only the good endpoint counts");
    let failed: Vec<&str> = a
        .endpoints
        .iter()
        .filter_map(|e| e.error.as_deref())
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    let status = |u: &str| r.endpoints.iter().find(|e| e.url == u).unwrap();
    assert!(status(&slow).after.as_str().contains("no answer within"));
    assert!(status(&garbage)
        .before
        .as_str()
        .contains("malformed page: line 1"));
    assert!(!status(&down).before.as_str().is_empty() && !status(&down).before.is_ok());
    assert!(status(&good).after.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openmetrics_and_text_pages_agree() {
    let om = |name: &str| Page {
        content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ..text(fixture(name))
    };
    let (a_url, _) = fake_metrics(vec![
        om("vllm_2engines_before.openmetrics.txt"),
        om("vllm_2engines_after.openmetrics-underscores.txt"),
    ])
    .await;
    let r = replay_scraping(&[&a_url], "").await;
    assert_eq!(r.endpoints[0].format, Some(PageFormat::OpenMetrics));
    assert!(r.acceptance.name_normalised);
    assert!((r.acceptance.numbers.acceptance_length.unwrap() - 2.49).abs() < 1e-12);
    // A truncated OpenMetrics page (no `# EOF`) is an error, not a smaller number.
    let cut = fixture("vllm_2engines_after.openmetrics.txt").replace("# EOF", "");
    let (b_url, _) = fake_metrics(vec![
        om("vllm_2engines_before.openmetrics.txt"),
        Page {
            body: cut,
            ..om("vllm_2engines_before.openmetrics.txt")
        },
    ])
    .await;
    let r = replay_scraping(&[&b_url], "").await;
    assert_eq!(r.acceptance.status, AcceptanceStatus::Unavailable);
    assert!(r.endpoints[0].after.as_str().contains("EOF"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_with_gauges_only_is_approximate() {
    let strip = |t: String| -> String {
        t.lines()
            .filter(|l| !l.starts_with("sglang:spec_verify_calls_total"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let (url, _) = fake_metrics(vec![
        text(strip(fixture("sglang_before.prom"))),
        text(strip(fixture("sglang_after.prom"))),
    ])
    .await;
    let r = replay_scraping(&[&url], "").await;
    let a = r.acceptance;
    assert_eq!(a.engine, SpecEngine::Sglang);
    assert!(a.approximate);
    assert!(a.metric_source.contains("gauge"));
    assert!((a.numbers.acceptance_length.unwrap() - 2.49).abs() < 1e-12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trtllm_json_stats_are_drained_at_baseline_and_summed_after() {
    let json = |body: String| Page {
        content_type: "application/json",
        body,
        delay: Duration::ZERO,
    };
    // The baseline poll drains what was queued before the run; it must not count.
    let stale = r#"[{"iter": 1, "specDecodingStats": {"numDraftTokens": 300, "numAcceptedTokens": 300, "numRequestsWithDraftTokens": 100}}]"#;
    let (url, hits) = fake_metrics(vec![
        json(stale.into()),
        json(fixture("trtllm_iteration_stats.json")),
        json("[]".into()),
    ])
    .await;
    let r = replay_scraping(&[&url], "--num-spec-tokens 3").await;
    let a = r.acceptance;
    assert_eq!(r.endpoints[0].format, Some(PageFormat::TrtllmJson));
    assert_eq!(a.metric_source, "trtllm-json-iteration-stats-endpoints1");
    assert!((a.numbers.acceptance_length.unwrap() - 83.0 / 31.0).abs() < 1e-12);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "one poller: baseline and final"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_speculative_counters_says_so() {
    let (url, _) = fake_metrics(vec![text(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n".into(),
    )])
    .await;
    let r = replay_scraping(&[&url], "").await;
    assert_eq!(r.acceptance.status, AcceptanceStatus::NoCounters);
    assert!(r.acceptance.reason.unwrap().contains("decode workers"));
}

/// `GET /metrics` from `base`, the body.
fn get_metrics(base: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        sock,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    sock.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .expect("a response")
        .1
        .to_owned()
}

/// The value of the unlabelled sample `name` in a page (chunked framing lines are skipped).
fn sample(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {page}"))
}

/// Issue 14: the simulator can serve llama-server's page (`specperf sim --metrics-flavor
/// llamacpp`). Once the requests have ended, its end-of-request counters hold exactly what was
/// streamed: the same totals the vLLM-timed counters reached step by step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llamacpp_flavored_page_counts_every_finished_request() {
    let s = sim(SimConfig {
        metrics_flavor: specperf::sim::MetricsFlavor::Llamacpp,
        ..fast()
    });
    let out = Replay::at(&s.url())
        .args(&format!(
            "--model {} --concurrency 2 --request-count 6 --osl 16 --no-server-metrics",
            s.model()
        ))
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.success, 6);
    let page = get_metrics(&s.url());
    assert!(!page.contains("vllm:"), "{page}");
    let t = s.totals();
    assert_eq!(sample(&page, "llamacpp:tokens_predicted_total"), 6 * 16);
    assert_eq!(
        sample(&page, "llamacpp:tokens_predicted_total"),
        t.generation_tokens
    );
    assert_eq!(
        sample(&page, "llamacpp:prompt_tokens_total"),
        t.prompt_tokens
    );
    assert_eq!(
        sample(&page, "llamacpp:spec_decode_num_drafts_total"),
        t.drafts
    );
    assert_eq!(
        sample(&page, "llamacpp:spec_decode_num_draft_tokens_total"),
        t.draft_tokens
    );
    assert_eq!(
        sample(&page, "llamacpp:spec_decode_num_accepted_tokens_total"),
        t.accepted
    );
    assert!(t.drafts > 0, "{t:?}");
}
