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
    let v = |k: MetricKey| a.values[&k][0];
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
    assert!(!a.values.contains_key(&MetricKey::RequestLatency));
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
