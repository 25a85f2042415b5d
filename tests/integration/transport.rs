//! HTTP/2 (h2c), TLS with a local certificate (ALPN h1 and h2), connect timeouts, unreachable servers.

use std::time::Duration;

use crate::common::{
    config, fast, records, replay_at, replay_err, self_signed, sim, Replay, Replayed,
};
use specperf::sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_prior_knowledge_multiplexes_streams() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(
        &s.url(),
        dir.path().to_str().unwrap(),
        "--http http2 --concurrency 16 --request-count 100 --osl 32",
    )
    .await;
    assert_eq!(out.summary.counts.success, 100);
    assert_eq!(s.http2_requests(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_local_ca_over_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let tls = self_signed(dir.path(), &["localhost", "127.0.0.1"]);
    let ca = tls.cert.to_str().unwrap().to_owned();
    let s = sim(SimConfig {
        tls: Some(tls),
        ..fast()
    });
    let url = s.url().replace("127.0.0.1", "localhost");
    assert!(url.starts_with("https://"));
    let art = dir.path().join("a");
    let a = art.to_str().unwrap();
    let out = replay_at(
        &url,
        a,
        &format!("--ca-file {ca} --http http1 --request-count 10 --osl 16"),
    )
    .await;
    assert_eq!(out.summary.counts.success, 10);
    assert_eq!(s.http2_requests(), 0);
    let out = replay_at(
        &url,
        a,
        &format!("--ca-file {ca} --request-count 10 --osl 16"),
    )
    .await;
    assert_eq!(out.summary.counts.success, 10);
    assert_eq!(s.http2_requests(), 10, "ALPN picked h2 in auto mode");

    // Without the CA the certificate is rejected: the server is unreachable, nothing is sent.
    let err = replay_err(
        config(&["--url", &url, "--request-count", "1", "--artifact-dir", a]),
        "untrusted certificate refused",
    )
    .await;
    assert!(err.is_not_ready(), "{err}");
    assert!(
        format!("{err}").to_lowercase().contains("certificate"),
        "{err}"
    );
}

/// Accepts TCP connections for `secs` seconds and never says a word (a TLS handshake hangs).
fn silent_listener(secs: u64) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut socks = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if let Ok((s, _)) = listener.accept() {
                socks.push(s);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    (port, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_that_never_completes_is_a_connect_timeout_record() {
    let (port, held) = silent_listener(4);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let t = std::time::Instant::now();
    let out = replay_at(
        &url,
        dir.path().to_str().unwrap(),
        "--model m --concurrency 2 --request-count 3 --connect-timeout-seconds 0.3",
    )
    .await;
    assert_eq!(out.summary.counts.failed_by_kind["connect_timeout"], 3);
    assert!(t.elapsed() < Duration::from_secs(4));
    assert!(records(dir.path())
        .iter()
        .all(|r| r["error"].as_str().unwrap().contains("timed out")));
    held.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_without_a_model_is_not_ready_and_with_one_is_connect_records() {
    let s = sim(fast());
    let url = s.url();
    drop(s);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let err = replay_err(
        config(&["--url", &url, "--artifact-dir", d]),
        "nothing to discover the model from",
    )
    .await;
    assert!(err.is_not_ready(), "{err}");
    assert!(
        !dir.path().join("records.jsonl").exists(),
        "a run that never started writes no records"
    );
    let out = replay_at(&url, d, "--model m --request-count 5").await;
    assert_eq!(out.summary.counts.failed_by_kind["connect"], 5);
    assert_eq!(specperf::exit_code(&out, 0.05), 1);
}

/// Issue 27 §3.3: what the HTTP exchange measured goes in each record and, under AIPerf 0.13's
/// `http_req_*` tags and units, in `profile_export.jsonl`, beside the server's `usage.total_tokens`
/// and the output length asked for (its `usage_*` and `osl_mismatch_diff_pct`). One lane: each
/// request goes out on the kept-alive connection once it is back in the pool (the first on the
/// model discovery's). hyper hands a finished connection back from a task of its own, so on a
/// loaded machine a request can race it and open another (CI runs saw it for the first request
/// and for the second): the record says which, and keep-alive must show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_record_carries_its_http_exchange_and_the_servers_usage() {
    let Replayed { out, dir } = Replay::sim(fast())
        .args("--concurrency 1 --request-count 6 --osl 16")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 6);
    let mut recs = dir.records();
    recs.sort_by_key(|r| r["id"].as_u64());
    let reused = |r: &serde_json::Value| r["http"]["connection_reused"].as_bool().unwrap();
    assert!(
        recs.iter().filter(|r| reused(r)).count() >= 2,
        "requests go out on the kept-alive connection: {:?}",
        recs.iter().map(|r| &r["http"]).collect::<Vec<_>>()
    );
    for r in &recs {
        let h = &r["http"];
        assert!(h["bytes_sent"].as_u64().unwrap() > 100, "{h}");
        assert_eq!(h["frames_received"], r["reads"], "one frame per body read");
        assert!(h["bytes_received"].as_u64() >= h["frames_received"].as_u64());
        assert!(h["first_frame_ns"].as_u64() <= h["last_frame_ns"].as_u64());
        assert!(h["first_frame_ns"].as_u64() >= r["headers_ns"].as_u64());
        let (p, c) = (r["prompt_tokens"].as_u64(), r["completion_tokens"].as_u64());
        assert_eq!(r["total_tokens"].as_u64(), Some(p.unwrap() + c.unwrap()));
        assert_eq!(r["requested_osl"], 16);
    }
    let lines = dir.profile_export();
    assert_eq!(lines.len(), 6);
    for (rec, line) in recs.iter().zip(lines.iter().map(|l| &l["metrics"])) {
        let h = &rec["http"];
        let m = |tag: &str| {
            let v = &line[tag];
            (v["value"].as_f64().unwrap(), v["unit"].as_str().unwrap())
        };
        let f = |v: &serde_json::Value| v.as_f64().unwrap();
        assert_eq!(
            m("http_req_chunks_received"),
            (f(&h["frames_received"]), "count")
        );
        assert_eq!(m("http_req_chunks_sent"), (1.0, "count"));
        let reused = f64::from(u8::from(h["connection_reused"] == true));
        assert_eq!(m("http_req_connection_reused"), (reused, "ratio"));
        assert_eq!(
            m("http_req_data_sent"),
            (f(&h["bytes_sent"]) / 1024.0, "KB")
        );
        assert_eq!(
            m("http_req_data_received"),
            (f(&h["bytes_received"]) / 1024.0, "KB")
        );
        let span = f(&h["last_frame_ns"]) - f(&h["first_frame_ns"]);
        assert_eq!(m("http_req_receiving"), (span / 1e6, "ms"));
        let osl = f(&rec["completion_tokens"]);
        assert_eq!(m("usage_completion_tokens"), (osl, "tokens"));
        assert_eq!(m("usage_total_tokens"), (f(&rec["total_tokens"]), "tokens"));
        assert_eq!(
            m("osl_mismatch_diff_pct"),
            ((osl - 16.0) / 16.0 * 100.0, "%")
        );
        // Not measured by specperf's client, so not written (AIPerf writes none either without
        // its aiohttp trace): pool wait, DNS, connect, send and first-byte times.
        for tag in [
            "http_req_blocked",
            "http_req_dns_lookup",
            "http_req_connecting",
            "http_req_sending",
            "http_req_waiting",
            "http_req_duration",
            "http_req_total",
            "http_req_connection_overhead",
        ] {
            assert!(line.get(tag).is_none(), "{tag} is not measured");
        }
    }
}
