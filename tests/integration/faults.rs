//! Every simulator fault mode and every timeout kind ends as a record with the right failure kind,
//! within its bound, and counts add up.

use std::time::{Duration, Instant};

use crate::common::{fast, kind, records, run_with, sim, Replay, Replayed};
use specperf::sim::SimConfig;
use specperf::{StopReason, Stopper};

/// Replays `n` requests all carrying `fault`, returns the records.
async fn with_fault(
    s: &specperf::sim::SimHandle,
    fault: &str,
    n: usize,
    extra: &str,
) -> (specperf::RunOutcome, Vec<serde_json::Value>) {
    let args =
        format!("--concurrency 2 --request-count {n} --osl 16 -H x-specperf-fault:{fault} {extra}");
    let Replayed { out, dir } = Replay::at(&s.url()).args(&args).run().await;
    let recs = records(dir.path());
    assert_eq!(
        recs.len() as u64,
        out.summary.counts.total,
        "{fault}: every record written"
    );
    (out, recs)
}

fn all_kind(recs: &[serde_json::Value], want: &str) {
    assert!(!recs.is_empty());
    for r in recs {
        assert_eq!(kind(r), Some(want), "record {r}");
        assert!(
            r["error"].as_str().is_some_and(|e| !e.is_empty()),
            "failed record carries an error message: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_error_statuses_are_counted_by_status() {
    let s = sim(fast());
    for (fault, status) in [("http429", 429u16), ("http500", 500), ("http503", 503)] {
        let (out, recs) = with_fault(&s, fault, 4, "").await;
        all_kind(&recs, "http_status");
        assert_eq!(out.summary.counts.http_status[&status], 4, "{fault}");
        assert_eq!(specperf::exit_code(&out, 0.05), 1, "all failed -> exit 1");
        assert!(
            recs[0]["error"].as_str().unwrap().contains("simulated"),
            "server message kept: {}",
            recs[0]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_stream_faults_have_their_own_kinds_streaming_and_not() {
    let s = sim(SimConfig {
        oversized_bytes: 2 << 20,
        ..fast()
    });
    for streaming in ["true", "false"] {
        for (fault, want) in [
            ("close-mid-stream", "connection_closed"),
            ("malformed-chunk", "malformed"),
            ("error-mid-stream", "stream_error"),
            ("oversized-chunk", "oversized"),
        ] {
            let (_, recs) = with_fault(
                &s,
                fault,
                3,
                &format!("--streaming {streaming} --max-event-bytes 1048576"),
            )
            .await;
            assert!(
                recs.iter().all(|r| kind(r) == Some(want)),
                "{fault} streaming={streaming}: {recs:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_before_headers_is_a_ttft_timeout() {
    let s = sim(fast());
    let t = Instant::now();
    let (_, recs) = with_fault(&s, "stall", 2, "--ttft-timeout-seconds 0.3").await;
    all_kind(&recs, "ttft_timeout");
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_mid_stream_is_an_idle_timeout() {
    let s = sim(fast());
    let (_, recs) = with_fault(&s, "stall-mid-stream", 2, "--idle-timeout-seconds 0.3").await;
    all_kind(&recs, "idle_timeout");
    assert!(
        recs.iter().all(|r| r["first_token_ns"].is_u64()),
        "tokens flowed before the stall"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_count_in_ttft_and_can_time_out() {
    let s = sim(SimConfig {
        slow_headers: Duration::from_millis(300),
        ..fast()
    });
    let (out, _) = with_fault(&s, "slow-headers", 2, "").await;
    assert_eq!(out.summary.counts.success, 2);
    assert!(out.summary.metrics["time_to_first_token_ms"].min >= 300.0);
    let (_, recs) = with_fault(&s, "slow-headers", 2, "--ttft-timeout-seconds 0.1").await;
    all_kind(&recs, "ttft_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_stream_hits_the_total_timeout() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(50),
        ..fast()
    });
    let out = Replay::at(&s.url())
        .args("--concurrency 2 --request-count 2 --osl 200 --request-timeout-seconds 0.3")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.failed_by_kind["total_timeout"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_at_a_rate_mix_with_healthy_requests_and_counts_add_up() {
    let s = sim(SimConfig {
        fault_rates: vec![
            (specperf::sim::Fault::Http500, 0.2),
            (specperf::sim::Fault::ErrorMidStream, 0.1),
        ],
        ..fast()
    });
    let out = Replay::at(&s.url())
        .args("--concurrency 8 --request-count 300 --osl 16")
        .run()
        .await
        .out;
    let c = &out.summary.counts;
    assert_eq!(c.total, 300);
    assert_eq!(c.success + c.failed, 300);
    assert!(
        c.failed_by_kind["http_status"] > 20 && c.failed_by_kind["stream_error"] > 5,
        "{c:?}"
    );
    assert_eq!(out.summary.total_completion_tokens, c.success * 16);
    assert_eq!(
        specperf::exit_code(&out, 0.05),
        1,
        "failures above the 5% threshold"
    );
    assert_eq!(specperf::exit_code(&out, 0.9), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_deadline_cancels_in_flight_requests_and_still_writes_the_summary() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(20),
        ..fast()
    });
    let t = Instant::now();
    let Replayed { out, dir } = Replay::at(&s.url())
        .args("--concurrency 4 --request-count 100 --osl 500 --timeout-seconds 0.5")
        .run()
        .await;
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(out.stopped_by, Some(StopReason::Deadline));
    assert_eq!(
        out.summary.counts.cancelled, 4,
        "the four in-flight requests"
    );
    assert_eq!(specperf::exit_code(&out, 0.05), 124);
    assert!(dir.path().join("summary.json").is_file());
    assert_eq!(records(dir.path()).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_stop_is_the_same_cancellation_path() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(20),
        ..fast()
    });
    let r = Replay::at(&s.url()).args("--concurrency 3 --request-count 50 --osl 500");
    let stop = Stopper::new();
    // Stop once the requests are streaming (start-up is slow on a loaded machine); all three
    // are dispatched together, and each streams for seconds.
    let stopper = async {
        let t = Instant::now();
        while s.totals().generation_tokens == 0 && t.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.stop(StopReason::Terminated);
    };
    let (out, ()) = tokio::join!(run_with(r.config(), stop.clone()), stopper,);
    assert_eq!(out.stopped_by, Some(StopReason::Terminated));
    assert_eq!(out.summary.counts.cancelled, 3);
    assert_eq!(specperf::exit_code(&out, 0.05), 143);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fault_header_is_a_400_naming_the_value() {
    let s = sim(fast());
    let (out, recs) = with_fault(&s, "no-such-fault", 1, "").await;
    assert_eq!(out.summary.counts.http_status[&400], 1);
    assert!(recs[0]["error"].as_str().unwrap().contains("no-such-fault"));
}

/// Issue 19 item 15: a hung frontend (accepts connections, never answers) with a 2 s request
/// timeout took 81 s: the connection warm-up waited 30 s for `/health`, the baseline scrape of
/// its `/metrics` 10 s before the first request, and the live and final scrapes their full
/// timeouts after the last. The whole process must end soon after its requests, the endpoint
/// reported as failed. Bound generously (it takes about 7 s; it took 81).
#[test]
fn a_hung_server_and_its_metrics_endpoint_do_not_hold_the_run() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accept and hold every connection without reading or answering.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_specperf"))
        .args(["replay", "--url", &url, "--model", "m", "--artifact-dir"])
        .arg(dir.path())
        .args([
            "--request-count",
            "4",
            "--concurrency",
            "4",
            "--osl",
            "8",
            "--request-timeout-seconds",
            "2",
            "--ui",
            "none",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    crate::common::wait_exit(&mut child, Duration::from_secs(120));
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "the run took {took:?} against a hung server with a 2 s request timeout"
    );
    let s = crate::common::read_json(&dir.path().join("summary.json"));
    assert_eq!(s["counts"]["failed"], 4, "{}", s["counts"]);
    let ep = &s["acceptance"]["endpoints"][0];
    assert_ne!(
        ep["before"], "ok",
        "the hung endpoint is reported failed: {ep}"
    );
}

/// Reads one HTTP/1.1 response with a chunked body from `sock`: (head, body up to the terminal
/// chunk). Fails the test on EOF or a read timeout before the terminal chunk.
fn read_chunked_response(sock: &mut std::net::TcpStream) -> (String, String) {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(5).any(|w| w == b"0\r\n\r\n") {
        let n = sock
            .read(&mut buf)
            .expect("response arrives within the read timeout");
        assert!(
            n > 0,
            "EOF before the terminal chunk: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    (head.to_owned(), body.to_owned())
}

/// Issue 14, defect 1: llama-server ends a streamed response properly (terminal chunk, keep-alive
/// advertised by HTTP/1.1 and no `Connection: close`), then closes the socket. The
/// `close-after-done` fault does the same, deterministically: the next request sent on that
/// connection gets no byte of answer, only the close.
#[test]
fn close_after_done_ends_the_response_then_closes_the_kept_alive_connection() {
    use std::io::{Read, Write};
    let s = sim(fast());
    let addr = s.url().trim_start_matches("http://").to_owned();
    let mut sock = std::net::TcpStream::connect(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = |fault: &str| {
        let body = format!(
            r#"{{"model":"{}","messages":[{{"role":"user","content":"hi"}}],"max_tokens":4,"stream":true}}"#,
            s.model()
        );
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             {fault}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    sock.write_all(request("x-specperf-fault: close-after-done\r\n").as_bytes())
        .unwrap();
    let (head, body) = read_chunked_response(&mut sock);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "keep-alive stays advertised: {head}"
    );
    assert!(
        body.contains("data: [DONE]"),
        "the stream is complete: {body}"
    );

    // The connection looks reusable; the next request on it is never answered.
    sock.write_all(request("").as_bytes()).unwrap();
    let mut rest = Vec::new();
    match sock.read_to_end(&mut rest) {
        Ok(_) => assert!(
            rest.is_empty(),
            "no byte of answer: {:?}",
            String::from_utf8_lossy(&rest)
        ),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    // A fresh connection is served as usual.
    let mut fresh = std::net::TcpStream::connect(&addr).unwrap();
    fresh
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    fresh.write_all(request("").as_bytes()).unwrap();
    let (head, body) = read_chunked_response(&mut fresh);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("data: [DONE]"), "{body}");
}
