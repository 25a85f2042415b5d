//! What real servers do that the simulator does not: a connection closed between requests while
//! keep-alive was advertised (llama-server after a stream), and an answer that ends at once
//! (usage counts a token, the text is empty). A scripted OpenAI server on loopback plays both.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{records, replay_at};

/// How the scripted server behaves.
#[derive(Clone, Copy)]
enum Script {
    /// Answers the first request of each connection with a stream (keep-alive advertised), then
    /// closes the connection without a byte when a second request arrives on it.
    OneRequestPerConnection,
    /// Streams an answer with no content: a stop chunk and usage saying one completion token.
    EmptyAnswer,
    /// Like `OneRequestPerConnection` for every request, the metrics page's GETs included.
    OneOfAnyPerConnection,
    /// Streams the answer of `OneRequestPerConnection` on every request, its response head
    /// padded by a header of this many bytes.
    PaddedHead(usize),
}

struct Server {
    url: String,
    /// Chat requests that reached the application (answered).
    answered: Arc<AtomicUsize>,
    /// Requests read on a connection that had already answered one, and dropped unanswered.
    dropped: Arc<AtomicUsize>,
}

async fn scripted(script: Script) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answered = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (a, d) = (answered.clone(), dropped.clone());
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(connection(sock, script, a.clone(), d.clone()));
        }
    });
    Server {
        url,
        answered,
        dropped,
    }
}

/// Reads one request (head and Content-Length body); `None` at EOF.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return Some(head);
            }
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn connection(
    mut sock: TcpStream,
    script: Script,
    answered: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    let mut served = 0;
    while let Some(head) = read_request(&mut sock, &mut buf).await {
        if matches!(script, Script::OneOfAnyPerConnection) && served > 0 {
            dropped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        if head.starts_with("GET /metrics") {
            let n = answered.load(Ordering::SeqCst) * 4;
            let body = format!(
                "# TYPE vllm:spec_decode_num_drafts_total counter\n\
                 vllm:spec_decode_num_drafts_total {n}\n\
                 # TYPE vllm:spec_decode_num_accepted_tokens_total counter\n\
                 vllm:spec_decode_num_accepted_tokens_total {}\n",
                n * 3 / 2
            );
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            served += 1;
            continue;
        }
        if head.starts_with("GET ") {
            // /v1/models, or the warm-up's /health.
            let body = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            served += 1;
            continue;
        }
        if matches!(script, Script::OneRequestPerConnection) && served > 0 {
            dropped.fetch_add(1, Ordering::SeqCst);
            return; // closed before any response byte
        }
        served += 1;
        answered.fetch_add(1, Ordering::SeqCst);
        let events: Vec<String> = match script {
            Script::OneRequestPerConnection
            | Script::OneOfAnyPerConnection
            | Script::PaddedHead(_) => vec![
                r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#.into(),
                r#"{"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"length"}]}"#
                    .into(),
                r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#
                    .into(),
            ],
            Script::EmptyAnswer => vec![
                r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#.into(),
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into(),
                r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#
                    .into(),
            ],
        };
        let mut body = String::new();
        for e in events {
            body.push_str(&format!("data: {e}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        let padding = match script {
            Script::PaddedHead(n) => format!("X-Padding: {}\r\n", "p".repeat(n)),
            _ => String::new(),
        };
        // Keep-alive is HTTP/1.1's default and nothing here says otherwise.
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{padding}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if sock.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn run_args(extra: &str) -> String {
    format!("--model m --request-count 12 --concurrency 1 --osl 2 --no-server-metrics {extra}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_connection_closed_before_any_byte_is_retried_once_on_a_fresh_one() {
    let s = scripted(Script::OneRequestPerConnection).await;
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(&s.url, dir.path().to_str().unwrap(), &run_args("")).await;
    let c = &out.summary.counts;
    let errors: Vec<_> = records(dir.path())
        .into_iter()
        .filter_map(|r| r.get("error").cloned())
        .collect();
    assert_eq!((c.success, c.failed), (12, 0), "{errors:?}");
    // Every request after the first found its pooled connection dead and went again, once.
    assert!(c.retried >= 1, "retried {}", c.retried);
    assert_eq!(s.dropped.load(Ordering::SeqCst) as u64, c.retried);
    // Nothing counted twice: each success reached the server exactly once.
    assert_eq!(s.answered.load(Ordering::SeqCst), 12);
    assert_eq!(out.summary.total_completion_tokens, 24);
    let recs = records(dir.path());
    let retried = recs.iter().filter(|r| r["retries"] == 1).count() as u64;
    assert_eq!(retried, c.retried);
    assert!(recs
        .iter()
        .all(|r| r.get("retries").is_none() || r["retries"] == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_reuse_never_opens_one_connection_per_request() {
    let s = scripted(Script::OneRequestPerConnection).await;
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(
        &s.url,
        dir.path().to_str().unwrap(),
        &run_args("--connection-reuse-strategy never"),
    )
    .await;
    let c = &out.summary.counts;
    assert_eq!((c.success, c.failed, c.retried), (12, 0, 0));
    assert_eq!(s.dropped.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_ends_at_once_is_a_success_and_its_tokens_count() {
    let s = scripted(Script::EmptyAnswer).await;
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(&s.url, dir.path().to_str().unwrap(), &run_args("")).await;
    let c = &out.summary.counts;
    assert_eq!((c.success, c.failed, c.empty_output), (12, 0, 12));
    // The totals equal what the server counted: 12 × 1 completion token, 12 × 5 prompt tokens.
    assert_eq!(out.summary.total_completion_tokens, 12);
    assert_eq!(out.summary.total_prompt_tokens, 60);
    assert!(records(dir.path())
        .iter()
        .all(|r| r["empty_output"] == true));
    let console = specperf::console_table(&out.summary);
    assert!(console.contains("Empty answers: 12"), "{console}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_scrape_on_a_connection_the_server_closed_goes_once_more() {
    let s = scripted(Script::OneOfAnyPerConnection).await;
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(
        &s.url,
        dir.path().to_str().unwrap(),
        &format!(
            "--model m --request-count 12 --concurrency 1 --osl 2 --server-metrics {}/metrics \
             --metrics-interval-seconds 0.05",
            s.url
        ),
    )
    .await;
    assert_eq!(out.summary.counts.failed, 0);
    let scrape = out.summary.acceptance.as_ref().expect("scraped");
    // Both ends of the window were read although every reused connection was dropped: each
    // request answered adds 4 drafts and 6 accepted tokens, AL 2.5.
    assert_eq!(
        scrape.acceptance.numbers.acceptance_length,
        Some(2.5),
        "{:?}: {:?}",
        scrape.acceptance.status,
        scrape.acceptance.reason
    );
    assert_eq!(scrape.acceptance.numbers.drafts, 48.0);
}

/// A connection reads at most 16 KiB at once (hyper's adaptive buffer grew to 64 KiB per stream
/// and stayed there), which also caps a response head: a 12 KiB head is read, a 20 KiB one
/// fails each request by name, and nothing waits for a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_head_up_to_16_kib_is_read_and_a_larger_one_fails_by_name() {
    let s = scripted(Script::PaddedHead(12 << 10)).await;
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(&s.url, dir.path().to_str().unwrap(), &run_args("")).await;
    assert_eq!(
        (out.summary.counts.success, out.summary.counts.failed),
        (12, 0)
    );

    let s = scripted(Script::PaddedHead(20 << 10)).await;
    let dir = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let out = replay_at(&s.url, dir.path().to_str().unwrap(), &run_args("")).await;
    assert_eq!(out.summary.counts.failed, 12);
    assert_eq!(out.summary.counts.failed_by_kind["connection_closed"], 12);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
    for r in records(dir.path()) {
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("too large"), "{r}");
    }
}
