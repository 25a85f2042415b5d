//! Aggregator unit tests: numpy percentile vectors, AIPerf metric vectors, failure counting.
use super::*;
use crate::record::{RequestRecord, TokenSource};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn percentiles_match_numpy_vectors() {
    let s = Stat::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert!(
        close(s.p("p1"), 1.03)
            && close(s.p("p50"), 2.5)
            && close(s.p("p90"), 3.7)
            && close(s.p("p99"), 3.97)
    );
    assert!(close(s.std, 1.118_034_0));
    let s = Stat::of(&[12.0, 15.5, 9.25, 30.0, 11.0]).unwrap();
    let want = [
        ("p1", 9.32),
        ("p5", 9.6),
        ("p10", 9.95),
        ("p25", 11.0),
        ("p50", 12.0),
        ("p75", 15.5),
        ("p90", 24.2),
        ("p95", 27.1),
        ("p99", 29.42),
    ];
    for (k, v) in want {
        assert!(close(s.p(k), v), "{k}: {} != {v}", s.p(k));
    }
    assert!(close(s.avg, 15.55) && close(s.std, 7.507_329_8));
}

#[test]
fn aiperf_metric_vector() {
    // Start 0; content at 100, 150, 200, 260 ms; completion_tokens 10.
    let mut r = RequestRecord::started(0, 0, 0, 0);
    r.outcome = Outcome::Success;
    r.first_token_ns = Some(100_000_000);
    r.second_token_ns = Some(150_000_000);
    r.last_token_ns = Some(260_000_000);
    r.end_ns = 261_000_000;
    r.completion_tokens = Some(10);
    r.token_source = TokenSource::UsageFinal;
    let mut a = Aggregate::new();
    a.add(&r);
    let v = |k: MetricKey| a.store.get(k).unwrap()[0];
    assert!(close(v(MetricKey::TimeToFirstToken), 100.0));
    assert!(close(v(MetricKey::TimeToSecondToken), 50.0));
    assert!(close(v(MetricKey::RequestLatency), 260.0));
    assert!(close(v(MetricKey::InterTokenLatency), 17.777_777_8));
    assert!(close(v(MetricKey::OutputTokenThroughputPerUser), 56.25));
    assert!(close(v(MetricKey::E2eOutputTokenThroughput), 38.461_538_5));
}

#[test]
fn failures_are_counted_by_kind_and_status_and_excluded_from_latency() {
    let mut a = Aggregate::new();
    let mut r = RequestRecord::started(0, 0, 0, 0);
    r.outcome = Outcome::Failed(FailureKind::HttpStatus);
    r.http_status = Some(503);
    a.add(&r);
    let mut r = RequestRecord::started(1, 0, 0, 0);
    r.outcome = Outcome::Failed(FailureKind::IdleTimeout);
    a.add(&r);
    a.add(&RequestRecord::started(2, 0, 0, 0));
    assert_eq!(
        (
            a.counts.total,
            a.counts.failed,
            a.counts.cancelled,
            a.counts.success
        ),
        (3, 2, 1, 0)
    );
    assert_eq!(a.counts.failed_by_kind["http_status"], 1);
    assert_eq!(a.counts.http_status[&503], 1);
    assert!(!a.store.contains_key(MetricKey::RequestLatency));
}

/// A writer whose bytes the test can read after the sink took it.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_record_its_format_leaves_out_writes_no_line() {
    let out = Shared::default();
    // Writes the id, except for odd ids (as the AIPerf format skips context overflows).
    let mut sink = RecordSink::new(
        Box::new(out.clone()),
        Box::new(|l: &mut Vec<u8>, r: &RequestRecord| {
            if r.id % 2 == 0 {
                l.extend_from_slice(r.id.to_string().as_bytes());
            }
            Ok(())
        }),
    );
    let mut line = Vec::new();
    for id in 0..4 {
        sink.append(&mut line, &RequestRecord::started(id, 0, 0, 0))
            .unwrap();
    }
    assert_eq!(
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap(),
        "0\n2\n"
    );
}

fn spec_record(group: &str, hist: &[u64], events: u32, osl: u64) -> RequestRecord {
    use crate::record::{SpecDecode, SpecSource};
    let mut r = RequestRecord::started(0, 0, 0, 0);
    r.outcome = Outcome::Success;
    r.first_token_ns = Some(10);
    r.second_token_ns = Some(20);
    r.last_token_ns = Some(100);
    r.end_ns = 100;
    r.completion_tokens = Some(osl);
    r.content_events = events;
    r.token_source = TokenSource::UsageFinal;
    r.group = Some(group.to_owned());
    let steps: u64 = hist.iter().sum();
    let accepted: u64 = hist.iter().enumerate().map(|(j, n)| j as u64 * n).sum();
    r.spec = Some(Box::new(SpecDecode {
        source: SpecSource::Vllm,
        steps: Some(steps),
        draft_tokens: Some(3 * steps),
        accepted_tokens: Some(accepted),
        histogram: hist.to_vec(),
        num_spec_tokens: Some(3),
        reported_acceptance_length: Some(1.0 + accepted as f64 / steps as f64),
        per_step_accepted: None,
        per_step_drafted: None,
    }));
    r
}

#[test]
fn spec_figures_fold_into_totals_groups_positions_and_the_stream_estimate() {
    let mut a = Aggregate::new();
    // coding: 4 steps accepting 0,1,3,3 -> 7 accepted; stream: 1 + 11 tokens over 1 + 4 events.
    a.add(&spec_record("coding", &[1, 1, 0, 2], 5, 12));
    // math: 2 steps accepting 1,1 -> 2 accepted; 1 + 4 tokens over 1 + 2 events.
    a.add(&spec_record("math", &[0, 2, 0, 0], 3, 5));
    let s = a.summary(tests_meta()).spec_decode.unwrap();
    let r = s.reported.as_ref().unwrap();
    assert_eq!(
        (r.requests, r.steps, r.accepted_tokens, r.draft_tokens),
        (2, 6, 9, 18)
    );
    assert_eq!(r.token_weighted_acceptance_length, Some(2.5));
    // Per request 2.75 and 2.0: the plain mean differs from the token-weighted figure.
    assert_eq!(r.mean_acceptance_length, Some(2.375));
    assert_eq!(r.histogram, [1, 3, 0, 2]);
    // Position 1 accepted in 5 of 6 steps, 2 and 3 in the two full steps.
    assert_eq!(
        r.per_position_acceptance_rates,
        [5.0 / 6.0, 2.0 / 6.0, 2.0 / 6.0]
    );
    let coding = &s.by_group["coding"];
    assert_eq!(coding.requests, 1);
    assert_eq!(
        coding
            .reported
            .as_ref()
            .unwrap()
            .token_weighted_acceptance_length,
        Some(2.75)
    );
    let e = s.stream_estimate.as_ref().unwrap();
    assert_eq!((e.decode_tokens, e.decode_events), (15, 6));
    assert_eq!(e.token_weighted_acceptance_length, Some(2.5));
    // Per request 11/4 and 4/2 after the first event; each group's values are its own.
    assert_eq!(e.requests, 2);
    assert_eq!(e.mean_acceptance_length, Some(2.375));
    assert_eq!(
        e.acceptance_length.as_ref().map(|st| (st.min, st.max)),
        Some((2.0, 2.75))
    );
    let math = s.by_group["math"].stream_estimate.as_ref().unwrap();
    assert_eq!(math.mean_acceptance_length, Some(2.0));
    let coding_al = coding.reported.as_ref().unwrap().acceptance_length.as_ref();
    assert_eq!(coding_al.map(|st| (st.min, st.max)), Some((2.75, 2.75)));
    assert_eq!(
        s.by_group["math"]
            .stream_estimate
            .as_ref()
            .unwrap()
            .token_weighted_acceptance_length,
        Some(2.0)
    );
    // 2.0 and 2.75 land in the bins starting at 2.0 and 2.75.
    let bins: Vec<(f64, u64)> = s.al_histogram.iter().map(|b| (b.lo, b.requests)).collect();
    assert_eq!(
        bins,
        [
            (1.0, 0),
            (1.25, 0),
            (1.5, 0),
            (1.75, 0),
            (2.0, 1),
            (2.25, 0),
            (2.5, 0),
            (2.75, 1)
        ]
    );
    // Against counters of 2.5: both exact and reliable; against 2.6 the estimate is 3.8% off.
    let (same, w) = s.clone().against_counters(Some(2.5));
    let same = same.unwrap();
    assert!(w.is_empty());
    assert!(same.reported.unwrap().vs_counters.unwrap().reliable);
    let (off, w) = s.against_counters(Some(2.6));
    let off = off.unwrap().stream_estimate.unwrap().vs_counters.unwrap();
    assert!(
        !off.reliable && (off.difference_pct + 3.846).abs() < 1e-3,
        "{off:?}"
    );
    assert_eq!(w.len(), 2, "{w:?}");
}

#[test]
fn malformed_figures_are_counted_and_named_and_a_plain_server_has_no_section() {
    let mut a = Aggregate::new();
    let mut r = spec_record("coding", &[1], 3, 3);
    r.spec = None;
    r.spec_warning = Some("malformed vLLM spec-decode payload: histogram".into());
    a.add(&r);
    let mut s = a.summary(tests_meta());
    assert!(s
        .warnings
        .iter()
        .any(|w| w.contains("1 response(s)") && w.contains("histogram")));
    s.settle_spec(Some("category".into()));
    assert_eq!(s.spec_decode.as_ref().unwrap().malformed, 1);
    // A stream estimate alone, with no counters that saw drafts, says nothing: no section.
    let mut a = Aggregate::new();
    let mut r = spec_record("coding", &[1], 3, 3);
    r.spec = None;
    a.add(&r);
    let mut s = a.summary(tests_meta());
    assert!(s.spec_decode.is_some());
    s.settle_spec(None);
    assert!(s.spec_decode.is_none());
}

fn tests_meta() -> RunMeta {
    RunMeta {
        url: "http://127.0.0.1:8000".into(),
        model: "m".into(),
        endpoint: "/v1/chat/completions".into(),
        endpoint_type: crate::render::EndpointType::Chat,
        osl: None,
        cli_command: None,
        streaming: true,
        concurrency: Some(1),
        request_count: 2,
        samples: 2,
        dataset_reused: false,
        input: "t".into(),
        dataset_format: None,
        start_unix_s: 0.0,
        stopped_by: None,
        load: LoadMeta::default(),
        timeouts_s: BTreeMap::new(),
    }
}

/// Issue 27 §3.3: AIPerf's OSL mismatch: the signed difference in percent of the requested
/// length, and a mismatch beyond min(5 % of it, 50 tokens).
#[test]
fn osl_mismatch_is_aiperfs_percentage_and_threshold() {
    let of = |requested: Option<u64>, got: u64| {
        let mut r = crate::record::RequestRecord::started(0, 0, 0, 0);
        r.outcome = crate::record::Outcome::Success;
        r.completion_tokens = Some(got);
        r.requested_osl = requested;
        let m = RecordMetrics::of(&r);
        (m.osl_mismatch_pct, m.osl_mismatch)
    };
    assert_eq!(of(Some(100), 50), (Some(-50.0), true));
    assert_eq!(
        of(Some(100), 95),
        (Some(-5.0), false),
        "5 tokens: at the threshold"
    );
    assert_eq!(of(Some(100), 94), (Some(-6.0), true));
    assert_eq!(
        of(Some(2000), 1960),
        (Some(-2.0), false),
        "50 tokens caps 5 %"
    );
    assert_eq!(of(Some(2000), 1949), (Some(-2.55), true));
    assert_eq!(of(Some(100), 120), (Some(20.0), true));
    assert_eq!(
        of(None, 120),
        (None, false),
        "no length asked for: no metric"
    );
    assert_eq!(of(Some(0), 120), (None, false));
    let mut agg = Aggregate::new();
    for (req, got) in [(100, 50), (100, 100), (2000, 1960)] {
        let mut r = crate::record::RequestRecord::started(0, 0, 0, 1);
        r.outcome = crate::record::Outcome::Success;
        r.completion_tokens = Some(got);
        r.requested_osl = Some(req);
        agg.add(&r);
    }
    let s = agg.summary(tests_meta());
    assert_eq!(s.osl_mismatch_count, Some(1));
    assert_eq!(s.metric(MetricKey::OslMismatchDiffPct).unwrap().count, 3);
}
