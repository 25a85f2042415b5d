//! The drain wait against the simulator's queue on loopback: it waits while requests run or
//! queue and ends once they are gone; `specperf drain` times out with 124, refuses a page without
//! queue gauges with 4, and stops at once on SIGTERM with 143, writing its outcome each time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specperf::scrape::{wait_for_drain, DrainReason, DrainSettings};
use specperf::sim::{SimConfig, SimHandle};
use specperf::Stopper;

use crate::common::{fake_metrics, fast, read_json, scaled, sim, terminate, text, wait_exit};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// `specperf drain` with the environment that could add endpoints or change its timing removed.
fn drain_cmd() -> Command {
    let mut c = Command::new(BIN);
    c.arg("drain");
    for var in [
        "SPEEDBENCH_DECODE_METRICS_URLS",
        "SPEEDBENCH_METRICS_URLS",
        "AIPERF_SERVER_METRICS_URLS",
        "SPEEDBENCH_METRICS_PORTS",
        "SPEEDBENCH_TRTLLM_JSON_METRICS_URLS",
        "AIPERF_DRAIN_POLL_SECONDS",
        "AIPERF_DRAIN_TIMEOUT_SECONDS",
    ] {
        c.env_remove(var);
    }
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// A simulator that runs one request at a time, so the next ones queue.
fn one_at_a_time() -> SimHandle {
    sim(SimConfig {
        max_running: Some(1),
        itl: Duration::from_millis(2),
        ..fast()
    })
}

fn request(addr: &str, body: &Value, extra: &str) -> String {
    let body = body.to_string();
    format!(
        "POST /v1/chat/completions HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A streamed request that stalls after its first tokens and stays running until the returned
/// socket is dropped.
fn held(url: &str) -> TcpStream {
    let body = json!({"model": "specperf-sim", "stream": true, "max_tokens": 64,
                      "messages": [{"role": "user", "content": "hold"}]});
    crate::common::held_stream(url, &body)
}

/// Waits for the command to exit (bounded) and returns its status and what it wrote on stderr.
fn exit_and_stderr(child: &mut std::process::Child) -> (std::process::ExitStatus, String) {
    let st = wait_exit(child, scaled(Duration::from_secs(15)));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (st, err)
}

/// `n` short requests on threads of their own (they queue behind a held one); each returns its
/// HTTP status.
fn queued(url: &str, n: usize) -> Vec<JoinHandle<u16>> {
    (0..n)
        .map(|i| {
            let addr = url.strip_prefix("http://").unwrap().to_owned();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let body = json!({"model": "specperf-sim", "max_tokens": 4, "ignore_eos": true,
                                  "messages": [{"role": "user", "content": format!("q{i}")}]});
                s.write_all(request(&addr, &body, "").as_bytes()).unwrap();
                let mut out = Vec::new();
                s.read_to_end(&mut out).unwrap();
                let text = String::from_utf8_lossy(&out).into_owned();
                text.split_whitespace().nth(1).unwrap().parse().unwrap()
            })
        })
        .collect()
}

/// Waits (bounded) until the simulator shows `waiting` queued requests.
fn until_waiting(s: &SimHandle, waiting: u64) {
    let until = Instant::now() + scaled(Duration::from_secs(10));
    while s.totals().waiting < waiting {
        assert!(Instant::now() < until, "{waiting} requests never queued");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_lasts_while_requests_run_or_queue_and_ends_once_they_are_gone() {
    let s = one_at_a_time();
    let hold = held(&s.url());
    let waiting = queued(&s.url(), 3);
    until_waiting(&s, 3);
    let settings = DrainSettings {
        endpoints: vec![format!("{}/metrics", s.url())],
        poll_interval: Duration::from_millis(50),
        idle_polls: 3,
        max_wait: scaled(Duration::from_secs(30)),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        wait_for_drain(&settings, &Stopper::new(), |p| {
            let _ = tx.send(p.to_string());
        })
        .await
    });
    // Several polls see the backlog and the wait goes on.
    let mut lines = Vec::new();
    while lines.len() < 5 {
        lines.push(rx.recv().await.expect("a poll line"));
    }
    assert!(!task.is_finished(), "ended with the queue full: {lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("running 1, waiting 3 (1 endpoint), idle 0/3")),
        "{lines:?}"
    );
    // The stalled request goes away; the queue runs and the wait ends after three idle polls.
    drop(hold);
    let released = Instant::now();
    let o = tokio::time::timeout(scaled(Duration::from_secs(20)), task)
        .await
        .expect("the wait ends once the servers are idle")
        .unwrap()
        .unwrap();
    assert_eq!(o.reason, DrainReason::Drained, "{o:?}");
    assert!(o.drained);
    assert_eq!(o.max_queue, 4, "1 running + 3 waiting at the peak");
    assert!(o.polls >= 5 + 3, "{o:?}");
    assert!(
        released.elapsed() >= Duration::from_millis(100),
        "3 idle polls, 50 ms apart"
    );
    let t = s.totals();
    assert_eq!(
        (t.running, t.waiting, t.requests_success),
        (0, 0, 3),
        "drained means every queued request finished"
    );
    assert_eq!(o.endpoints[0].running, Some(0));
    assert_eq!(o.endpoints[0].waiting, Some(0));
    for w in waiting {
        assert_eq!(w.join().unwrap(), 200);
    }
}

#[test]
fn the_command_exits_124_when_the_backlog_outlasts_max_wait() {
    let s = one_at_a_time();
    let hold = held(&s.url());
    let waiting = queued(&s.url(), 2);
    until_waiting(&s, 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drain.json");
    let mut child = drain_cmd()
        .args(["--url", &s.url(), "--poll-interval-seconds", "0.05"])
        .args(["--max-wait-seconds", "0.3", "--output"])
        .arg(&out)
        .spawn()
        .unwrap();
    let (st, err) = exit_and_stderr(&mut child);
    assert_eq!(st.code(), Some(124), "{err}");
    assert!(err.contains("not drained within 0.3 s"), "{err}");
    let o = read_json(&out);
    assert_eq!(o["reason"], "timeout");
    assert_eq!(o["drained"], false);
    assert_eq!(o["max_queue"], 3);
    assert_eq!(
        o["endpoints"][0]["url"],
        format!("{}/metrics", s.url()),
        "--url polls the frontend's /metrics"
    );
    drop(hold);
    for w in waiting {
        assert_eq!(w.join().unwrap(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_queue_gauges_exits_4_instead_of_counting_as_idle() {
    let (url, hits) = fake_metrics(vec![text("process_cpu_seconds_total 1\nup 1\n".into())]).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drain.json");
    let mut child = drain_cmd()
        .args(["--server-metrics", &url, "--poll-interval-seconds", "0.05"])
        .args(["--max-wait-seconds", "30", "--output"])
        .arg(&out)
        .spawn()
        .unwrap();
    let st = tokio::task::spawn_blocking(move || exit_and_stderr(&mut child));
    let (st, err) = st.await.unwrap();
    assert_eq!(st.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("{url} carries none of the known queue gauges")),
        "{err}"
    );
    let o = read_json(&out);
    assert_eq!(o["reason"], "no_queue_gauges");
    assert_eq!(o["drained"], false);
    assert_eq!(o["polls"], 3, "as many polls as idle ones would take");
    assert_eq!(o["endpoints"][0]["gauges"], json!([]));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn sigterm_ends_the_wait_at_once_and_the_outcome_is_written() {
    let s = one_at_a_time();
    let hold = held(&s.url());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drain.json");
    // A poll every 60 s: only the cancellation path can end the wait within the bound below.
    let mut child = drain_cmd()
        .args([
            "--server-metrics",
            &s.url(),
            "--poll-interval-seconds",
            "60",
        ])
        .arg("--output")
        .arg(&out)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(
        first.starts_with("drain: poll 1, running 1, waiting 0"),
        "{first}"
    );
    let asked = Instant::now();
    let st = terminate(&mut child, scaled(Duration::from_secs(10)));
    assert_eq!(st.code(), Some(143));
    assert!(asked.elapsed() < scaled(Duration::from_secs(5)));
    let o = read_json(&out);
    assert_eq!(o["reason"], "cancelled");
    assert_eq!(o["stopped_by"], "terminated");
    assert_eq!(o["endpoints"][0]["running"], 1);
    drop(hold);
}
