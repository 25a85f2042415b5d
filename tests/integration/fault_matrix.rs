//! The fault matrix: every simulator fault mode, mixed with healthy requests in one run, for each
//! of streaming/non-streaming × chat/completions × HTTP/1.1/HTTP/2 (h2c). Each run uses the
//! simulator's fault sequence (faults by arrival order), so the mix is exact: every record must
//! show the failure its fault calls for, within its timeout, healthy requests must be untouched,
//! and the counts, the summary and `records.jsonl` must agree to the request.
//!
//! Beside the matrix, the targets that misbehave below HTTP: a server killed mid-run, nothing
//! listening, a name that does not resolve, a certificate for another name, and metrics endpoints
//! that answer garbage, hang, or announce a page past the cap.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{fast, kind, records, sim, Replay, Replayed};
use specperf::sim::{Fault, SimConfig, TlsFiles};

/// Healthy requests between the faults, so every fault runs beside a healthy neighbour.
fn sequence() -> Vec<Option<Fault>> {
    let faults = [
        Fault::Http429,
        Fault::Http500,
        Fault::Http503,
        Fault::CloseMidStream,
        Fault::Stall,
        Fault::StallMidStream,
        Fault::SlowHeaders,
        Fault::MalformedChunk,
        Fault::ErrorMidStream,
        Fault::OversizedChunk,
    ];
    faults.iter().flat_map(|f| [None, Some(*f)]).collect()
}

const REPEATS: usize = 2;
const OSL: u64 = 8;
/// Every wall-clock bound below is multiplied by `SPECPERF_TEST_TIME_SCALE` (default 1): the
/// aarch64 CI leg runs this under qemu, where a healthy request can wait over 400 ms for headers.
fn scaled(ms: u64) -> Duration {
    crate::common::scaled(Duration::from_millis(ms))
}
fn ttft_timeout() -> Duration {
    scaled(800)
}
fn idle_timeout() -> Duration {
    scaled(300)
}
/// Longer than any healthy request's wait for headers, shorter than the first-token timeout.
fn slow_headers() -> Duration {
    scaled(400)
}
/// Slack for scheduling on a loaded two-core machine when checking a timeout fired on time.
fn slack() -> Duration {
    scaled(2000)
}

fn ns(r: &Value, field: &str) -> Option<u64> {
    r[field].as_u64()
}

/// The fault a record shows, from its outcome alone. Every fault maps to a distinct signature:
/// HTTP statuses by code, a stall before headers has no `headers_ns`, a stall after them is an
/// idle timeout (streaming) or a first-token timeout with headers (non-streaming, where the first
/// token is the whole body), slow headers succeed with headers at least `slow_headers()` late.
fn shown_fault(r: &Value) -> &'static str {
    let sent = ns(r, "sent_ns").expect("sent_ns");
    let headers = ns(r, "headers_ns");
    match (r["outcome"]["status"].as_str(), kind(r)) {
        (Some("success"), _) => match headers {
            Some(h) if Duration::from_nanos(h - sent) >= slow_headers() => "slow-headers",
            _ => "none",
        },
        (_, Some("http_status")) => match r["http_status"].as_u64() {
            Some(429) => "http429",
            Some(500) => "http500",
            Some(503) => "http503",
            other => panic!("unexpected status {other:?}: {r}"),
        },
        (_, Some("ttft_timeout")) if headers.is_none() => "stall",
        (_, Some("ttft_timeout" | "idle_timeout")) => "stall-mid-stream",
        (_, Some("connection_closed")) => "close-mid-stream",
        (_, Some("malformed")) => "malformed-chunk",
        (_, Some("stream_error")) => "error-mid-stream",
        (_, Some("oversized")) => "oversized-chunk",
        _ => panic!("record matches no fault: {r}"),
    }
}

/// Checks one run of the matrix; returns a label for messages.
fn check_run(label: &str, out: &specperf::RunOutcome, recs: &[Value]) {
    let n = sequence().len() * REPEATS;
    let c = &out.summary.counts;
    // Counts add up, and the JSONL holds every request exactly once.
    assert_eq!(recs.len(), n, "{label}: one record per request");
    assert_eq!(c.total, n as u64, "{label}");
    assert_eq!(c.success + c.failed, c.total, "{label}: nothing cancelled");
    let mut ids: Vec<u64> = recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n as u64).collect::<Vec<_>>(), "{label}: ids");

    // Every fault shows up exactly as often as the sequence holds it.
    let mut want: BTreeMap<&str, usize> = BTreeMap::new();
    for f in sequence() {
        *want.entry(f.map_or("none", Fault::name)).or_default() += REPEATS;
    }
    let mut got: BTreeMap<&str, usize> = BTreeMap::new();
    for r in recs {
        *got.entry(shown_fault(r)).or_default() += 1;
    }
    // A healthy request on a loaded machine can be as late as a slow-headers one: every
    // slow-headers request must show as slow, and the two together must add up.
    let slow = |m: &BTreeMap<&str, usize>| m.get("slow-headers").copied().unwrap_or(0);
    let fine = |m: &BTreeMap<&str, usize>| m.get("none").copied().unwrap_or(0);
    assert!(
        slow(&got) >= slow(&want),
        "{label}: slow headers shown: {got:?}"
    );
    assert_eq!(
        slow(&got) + fine(&got),
        slow(&want) + fine(&want),
        "{label}: successes"
    );
    for m in [&mut got, &mut want] {
        m.remove("slow-headers");
        m.remove("none");
    }
    assert_eq!(got, want, "{label}: faults shown by the records");

    // The summary counts the same kinds as the records.
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for r in recs {
        if let Some(k) = kind(r) {
            *by_kind.entry(k).or_default() += 1;
        }
    }
    let summary_kinds: BTreeMap<&str, u64> = c
        .failed_by_kind
        .iter()
        .map(|(k, v)| (*k, *v))
        .filter(|(_, v)| *v > 0)
        .collect();
    assert_eq!(summary_kinds, by_kind, "{label}: summary failed_by_kind");
    for (status, count) in [(429u16, REPEATS), (500, REPEATS), (503, REPEATS)] {
        assert_eq!(
            c.http_status[&status], count as u64,
            "{label}: HTTP {status}"
        );
    }

    for r in recs {
        let took = Duration::from_nanos(ns(r, "end_ns").unwrap() - ns(r, "sent_ns").unwrap());
        match shown_fault(r) {
            "none" | "slow-headers" => {
                // Healthy requests are untouched by their faulty neighbours.
                assert_eq!(r["completion_tokens"].as_u64(), Some(OSL), "{label}: {r}");
                assert!(r["error"].is_null(), "{label}: {r}");
                assert_eq!(r["finish_reason"], "length", "{label}: {r}");
            }
            fault => {
                assert!(
                    r["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{label}: {fault} record names its error: {r}"
                );
                // Each failure ends within its own bound, never at the request timeout.
                let bound = match kind(r) {
                    Some("ttft_timeout") => {
                        assert!(took >= ttft_timeout(), "{label}: fired early: {r}");
                        ttft_timeout() + slack()
                    }
                    Some("idle_timeout") => {
                        assert!(took >= idle_timeout(), "{label}: fired early: {r}");
                        idle_timeout() + slack()
                    }
                    _ => slack(),
                };
                assert!(took <= bound, "{label}: {fault} took {took:?}: {r}");
            }
        }
    }
    assert_eq!(
        out.summary.total_completion_tokens,
        c.success * OSL,
        "{label}: only successful requests count tokens"
    );
    assert_eq!(
        specperf::exit_code(out, 0.05),
        1,
        "{label}: failures exit 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_mixed_with_healthy_requests_for_every_mode_and_protocol() {
    let _machine = crate::common::exclusive();
    let started = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    for streaming in [true, false] {
        for endpoint in ["chat", "completions"] {
            for http in ["http1", "http2"] {
                runs.spawn(async move {
                    // One simulator per run: the sequence counts arrivals per simulator.
                    let s = sim(SimConfig {
                        fault_sequence: sequence(),
                        slow_headers: slow_headers(),
                        stall_limit: Duration::from_secs(10),
                        oversized_bytes: 256 << 10,
                        ..fast()
                    });
                    // Eight replays at once on a two-core machine: scrape once a second (the
                    // default before AIPerf's 0.333 s cadence), so the healthy requests' header
                    // times measure the faults, not eight scrapers' load. Faults go by arrival
                    // order, and a request retried after a reused connection closed (a reset
                    // can reach a slow client before the bytes it follows) would take a second
                    // slot: no reuse here; the retry has its own tests (reuse.rs).
                    let args = format!(
                        "--model {} --endpoint-type {endpoint} --streaming {streaming} --http {http} \
                         --concurrency 8 --request-count {} --osl {OSL} --max-event-bytes 65536 \
                         --ttft-timeout-seconds {} --idle-timeout-seconds {} \
                         --request-timeout-seconds 30 --metrics-interval-seconds 1 \
                         --connection-reuse-strategy never",
                        s.model(),
                        sequence().len() * REPEATS,
                        ttft_timeout().as_secs_f64(),
                        idle_timeout().as_secs_f64(),
                    );
                    let Replayed { out, dir } = Replay::at(&s.url()).args(&args).run().await;
                    let label = format!("streaming={streaming} {endpoint} {http}");
                    check_run(&label, &out, &records(dir.path()));
                    if http == "http2" {
                        assert!(s.http2_requests() > 0, "{label}: spoke HTTP/2");
                    } else {
                        assert_eq!(s.http2_requests(), 0, "{label}: spoke HTTP/1.1");
                    }
                    label
                });
            }
        }
    }
    let mut done = Vec::new();
    while let Some(r) = runs.join_next().await {
        done.push(r.expect("matrix run panicked"));
    }
    assert_eq!(done.len(), 8);
    assert!(
        started.elapsed() < scaled(30_000),
        "matrix took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_mid_run_fails_the_rest_fast_and_loses_no_record() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(5),
        ..fast()
    });
    let (url, model) = (s.url(), s.model().to_owned());
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let replay = tokio::spawn(
        Replay::at(&url)
            .dir(dir.path())
            .args(&format!(
                "--model {model} --concurrency 4 --request-count 60 --osl 64"
            ))
            .args("--connect-timeout-seconds 2")
            .run(),
    );
    let path = dir.path().join("records.jsonl");
    while std::fs::read_to_string(&path).map_or(0, |t| t.lines().count()) < 40 {
        assert!(started.elapsed() < Duration::from_secs(20), "no records");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Dropping the handle stops the simulator and closes every connection it holds.
    tokio::task::spawn_blocking(move || drop(s)).await.unwrap();
    let out = replay.await.unwrap().out;
    let c = &out.summary.counts;
    assert_eq!(c.total, 60);
    assert_eq!(
        records(dir.path()).len(),
        60,
        "every request has its record"
    );
    assert!(c.success >= 40, "{c:?}");
    let allowed = ["connect", "connection_closed"];
    assert!(
        c.failed_by_kind
            .iter()
            .all(|(k, v)| *v == 0 || allowed.contains(k)),
        "{c:?}"
    );
    assert!(
        c.failed_by_kind.get("connect").copied().unwrap_or(0) > 0,
        "{c:?}"
    );
    assert_eq!(c.success + c.failed, 60);
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_gives_a_trickle_of_connect_records_not_a_flood() {
    // Found by the soak: with its server gone, a closed loop reissued connect failures as fast as
    // the kernel refused them (about 17,000 records a second). Each now holds its slot for a
    // backoff (at most 250 ms), so 16 slots for 1 s leave about a hundred records.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let Replayed { out, dir } = Replay::at(&format!("http://127.0.0.1:{port}"))
        .args("--model m --concurrency 16 --benchmark-duration 1 --benchmark-grace-period 1")
        .run()
        .await;
    let c = &out.summary.counts;
    assert_eq!(c.failed_by_kind["connect"], c.total, "{c:?}");
    assert!(c.total >= 16 && c.total < 400, "{c:?}");
    assert_eq!(records(dir.path()).len() as u64, c.total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_and_a_name_that_does_not_resolve_are_connect_records() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t = Instant::now();
    let out = Replay::at(&format!("http://127.0.0.1:{port}"))
        .args("--model m --request-count 5 --connect-timeout-seconds 2")
        .run()
        .await
        .out;
    assert_eq!(out.summary.counts.failed_by_kind["connect"], 5);
    assert!(t.elapsed() < Duration::from_secs(5));

    // `.invalid` never resolves (RFC 2606). The host is looked up once before anything else
    // (issue 19 item 11), so the run fails at once with that error instead of leaving a
    // connect record per request; a slow resolver is bounded by the connect timeout.
    let t = Instant::now();
    let r = Replay::at("http://specperf-fault-matrix.invalid:8000")
        .args("--model m --concurrency 1 --request-count 3 --connect-timeout-seconds 2");
    let e = crate::common::replay_err(r.config(), "an unresolvable host stops the run").await;
    assert!(matches!(e, specperf::EngineError::Resolve { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_for_another_name_is_refused_even_from_a_trusted_ca() {
    let dir = tempfile::tempdir().unwrap();
    // A certificate valid only for other.example, trusted through --ca-file.
    let ck = rcgen::generate_simple_self_signed(vec!["other.example".into()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let s = sim(SimConfig {
        tls: Some(TlsFiles {
            cert: cert.clone(),
            key,
        }),
        ..fast()
    });
    let url = s.url().replace("127.0.0.1", "localhost");
    let Replayed { out, dir: art } = Replay::at(&url)
        .args(&format!("--model {} --ca-file", s.model()))
        .arg(&cert)
        .args("--request-count 3")
        .run()
        .await;
    assert_eq!(out.summary.counts.failed_by_kind["connect"], 3);
    for r in records(&art) {
        let e = r["error"].as_str().unwrap().to_lowercase();
        assert!(e.contains("certificate"), "{r}");
    }
}

/// A raw TCP server on loopback: answers every connection with `reply` (after reading the
/// request head), or with `None` holds each connection open in silence, for `secs` seconds.
fn raw_server(reply: Option<Vec<u8>>, secs: u64) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let t = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(secs);
        let mut held = Vec::new();
        while Instant::now() < until {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            if let Some(reply) = &reply {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let _ = s.write_all(reply);
            } else {
                held.push(s);
            }
        }
    });
    (port, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoints_that_answer_garbage_hang_or_oversize_cannot_hold_up_the_run() {
    let garbage = b"this is { not a prometheus page\n";
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        garbage.len()
    )
    .into_bytes();
    reply.extend_from_slice(garbage);
    let (garbage_port, g) = raw_server(Some(reply), 4);
    let (hang_port, h) = raw_server(None, 4);
    // Announces a page far past the cap, then sends nothing: refused from the header alone.
    let huge =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1099511627776\r\n\r\n";
    let (huge_port, u) = raw_server(Some(huge.to_vec()), 4);

    let s = sim(fast());
    let t = Instant::now();
    let out = Replay::at(&s.url())
        .args(&format!(
            "--request-count 20 --osl 8 --metrics-timeout-seconds 0.5 \
             --server-metrics {}/metrics --server-metrics 127.0.0.1:{garbage_port} \
             --server-metrics 127.0.0.1:{hang_port} --server-metrics 127.0.0.1:{huge_port}",
            s.url()
        ))
        .run()
        .await
        .out;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(out.summary.counts.success, 20, "requests are unaffected");
    assert_eq!(specperf::exit_code(&out, 0.05), 0);
    let report = out.summary.acceptance.as_ref().expect("acceptance report");
    let ep = |port: u16| {
        report
            .endpoints
            .iter()
            .find(|e| e.url.contains(&format!(":{port}/")))
            .unwrap()
    };
    assert!(
        ep(garbage_port).before.as_str().contains("malformed page"),
        "{:?}",
        ep(garbage_port)
    );
    assert!(
        ep(hang_port).before.as_str().contains("no answer within"),
        "{:?}",
        ep(hang_port)
    );
    assert!(
        ep(huge_port).before.as_str().contains("cap"),
        "{:?}",
        ep(huge_port)
    );
    // The healthy simulator endpoint still measures: the AL is there, marked partial.
    assert!(report.acceptance.partial);
    assert!(report.acceptance.numbers.acceptance_length.is_some());
    for t in [g, h, u] {
        t.join().unwrap();
    }
}

/// Issue 14, defect 1: llama-server closes the socket right after the terminal chunk of a
/// streamed response while advertising keep-alive, and the next request on the pooled connection
/// failed with `connection closed before message completed` (1-5 of 20 against llama-server). The
/// `close-after-done` fault on every response makes every reuse hit that close. Such a request
/// never reached the server's application, so the client retries it once on a fresh connection:
/// no request may fail, and the retries are reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_closing_kept_alive_connections_after_done_loses_no_stream() {
    let fault = Fault::from_name("close-after-done").expect("the close-after-done fault exists");
    let s = sim(SimConfig {
        fault_rates: vec![(fault, 1.0)],
        ..fast()
    });
    for concurrency in [1, 2] {
        let Replayed { out, dir } = Replay::at(&s.url())
            .args(&format!(
                "--model {} --http http1 --streaming true --concurrency {concurrency} \
                 --request-count 20 --osl {OSL}",
                s.model()
            ))
            .run()
            .await;
        let c = &out.summary.counts;
        let recs = records(dir.path());
        assert_eq!(recs.len(), 20, "concurrency {concurrency}: one record each");
        assert_eq!(
            (c.total, c.success, c.failed),
            (20, 20, 0),
            "concurrency {concurrency}: no stream lost to a closed kept-alive connection: {:?}",
            c.failed_by_kind
        );
        assert_eq!(out.summary.total_completion_tokens, 20 * OSL);
        assert_eq!(specperf::exit_code(&out, 0.05), 0);
        // Every response closes its connection, so every request that found one pooled went
        // again on a fresh one, and said so.
        assert!(
            c.retried > 0,
            "concurrency {concurrency}: no retry reported"
        );
        let retried = recs.iter().filter(|r| r["retries"] == 1).count() as u64;
        assert_eq!(retried, c.retried);
    }
}

/// Issue 14, defect 7: a rate-limited gateway. The simulator's admission limit (a token bucket,
/// `specperf sim --rate-limit RPS[,BURST]`) admits a full bucket at once and answers the rest 429
/// with `Retry-After` and an OpenAI error body. The client records each as `http_status` 429 and
/// does not retry it (the simulator saw exactly one request per record), the failure report names
/// the status and the Retry-After, and the counts reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_gateway_admits_its_burst_and_answers_the_rest_429_with_retry_after() {
    use specperf::sim::RateLimit;
    // One request per 100 s after a burst of 3: both runs fit well inside the first refill, so
    // exactly the burst is admitted however slow the machine (qemu included).
    let s = sim(SimConfig {
        rate_limit: Some(RateLimit {
            per_second: 0.01,
            burst: 3,
        }),
        ..fast()
    });
    for streaming in [true, false] {
        let before = s.rate_limited();
        let Replayed { out, dir } = Replay::at(&s.url())
            .args(&format!(
                "--model {} --streaming {streaming} --concurrency 10 --request-count 10 \
                 --osl {OSL}",
                s.model()
            ))
            .run()
            .await;
        let label = format!("streaming={streaming}");
        let c = &out.summary.counts;
        let recs = records(dir.path());
        // Sent = succeeded + failed, and one record each.
        assert_eq!(recs.len(), 10, "{label}");
        assert_eq!(
            (c.total, c.success + c.failed, c.cancelled),
            (10, 10, 0),
            "{label}"
        );
        // The first run takes the burst; the second finds the bucket still empty.
        let admitted = if streaming { 3 } else { 0 };
        assert_eq!(c.success, admitted, "{label}: {c:?}");
        assert_eq!(c.failed_by_kind["http_status"], 10 - admitted, "{label}");
        assert_eq!(c.http_status[&429], 10 - admitted, "{label}");
        // Not retried: every refusal the simulator gave is one failed record.
        assert_eq!(
            s.rate_limited() - before,
            10 - admitted,
            "{label}: no retries"
        );
        for r in recs.iter().filter(|r| kind(r).is_some()) {
            assert_eq!(r["http_status"], 429, "{label}: {r}");
            let e = r["error"].as_str().unwrap();
            let secs: u64 = e
                .split_once("Retry-After: ")
                .and_then(|(_, rest)| rest.split(|ch: char| !ch.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{label}: the record names the Retry-After: {e}"));
            assert!(
                (1..=100).contains(&secs),
                "{label}: Retry-After {secs} s: {e}"
            );
            assert!(
                e.contains("rate limit"),
                "{label}: the server's message is kept: {e}"
            );
        }
        assert_eq!(
            out.summary.total_completion_tokens,
            admitted * OSL,
            "{label}"
        );
        let report = specperf::failure_report(&out.summary).expect("failures are explained");
        assert!(report.contains("HTTP 429"), "{label}: {report}");
        assert!(report.contains("Retry-After"), "{label}: {report}");
        assert_eq!(
            specperf::exit_code(&out, 0.05),
            1,
            "{label}: failures exit 1"
        );
    }
}

/// Issue 14, defect 7: a 429 is retried only when asked. With `--rate-limit-retries`, a request
/// answered 429 waits the Retry-After and goes again: every request ends ok, each refusal the
/// gateway gave is one retry in the records, and the waits are in the latencies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_retries_wait_the_retry_after_and_go_again_when_asked() {
    use specperf::sim::RateLimit;
    let s = sim(SimConfig {
        rate_limit: Some(RateLimit {
            per_second: 4.0,
            burst: 1,
        }),
        ..fast()
    });
    let Replayed { out, dir } = Replay::at(&s.url())
        .args(&format!(
            "--model {} --concurrency 3 --request-count 3 --osl {OSL} --rate-limit-retries 20",
            s.model()
        ))
        .run()
        .await;
    let c = &out.summary.counts;
    assert_eq!((c.success, c.failed), (3, 0), "{:?}", c.failed_by_kind);
    let recs = records(dir.path());
    let retries: u64 = recs
        .iter()
        .map(|r| r["retries"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        retries >= 2,
        "two of three found the bucket empty: {retries}"
    );
    assert_eq!(s.rate_limited(), retries, "one retry per refusal");
    let retried = recs.iter().filter(|r| r.get("retries").is_some()).count() as u64;
    assert_eq!(c.retried, retried);
    assert!(retried >= 2, "{retried}");
    // Retry-After is at least 1 s: a retried request waited it.
    let slowest = out.summary.metrics["request_latency_ms"].max;
    assert!(slowest >= 1000.0, "latency includes the wait: {slowest} ms");
}

/// Issue 38's soak: the simulator's random faults can wait (`--fault-after-seconds`) so that an
/// AgentX warmup, which stops the run on a failed request as AIPerf does, goes through clean; and
/// its own count of requests received (`specperf_sim_requests_received_total`, faults included)
/// is what one record per request is checked against.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_faults_wait_for_their_start_and_every_request_received_is_counted() {
    let received = |url: &str| -> u64 {
        let page = get_page(&format!("{url}/metrics"));
        page.lines()
            .find_map(|l| l.strip_prefix("specperf_sim_requests_received_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no specperf_sim_requests_received_total in\n{page}"))
    };
    for (after, ok) in [(Duration::from_secs(3600), 6), (Duration::ZERO, 0)] {
        let s = sim(SimConfig {
            fault_rates: vec![(Fault::Http500, 1.0)],
            faults_after: after,
            ..fast()
        });
        let Replayed { out, .. } = Replay::at(&s.url())
            .args(&format!(
                "--model {} --concurrency 2 --request-count 6 --osl {OSL}",
                s.model()
            ))
            .run()
            .await;
        let c = &out.summary.counts;
        assert_eq!((c.total, c.success), (6, ok), "faults after {after:?}");
        assert_eq!(received(&s.url()), 6, "faults after {after:?}");
    }
}

/// A plain HTTP/1.1 GET over loopback (the test needs no client library for one page).
fn get_page(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_once('/').map_or((rest, "/"), |(h, p)| (h, p));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}
