//! What specperf leaks and trusts: TLS verification unless `--insecure` (which says so loudly),
//! credentials that never reach a file, the console or `--help`, and never a host other than the
//! target, and artifact paths a hostile model name cannot move.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{fast, records, replay_err, self_signed, sim, Replay, Replayed};
use specperf::sim::SimConfig;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_verified_by_default_and_insecure_is_explicit_and_loud() {
    let dir = tempfile::tempdir().unwrap();
    let s = sim(SimConfig {
        tls: Some(self_signed(dir.path(), &["localhost"])),
        ..fast()
    });
    let url = s.url().replace("127.0.0.1", "localhost");

    // Default: the self-signed certificate is refused, no request is sent.
    let r = Replay::at(&url).args("--request-count 1");
    let err = replay_err(r.config(), "self-signed certificate refused by default").await;
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );

    // --insecure: the run works, and the summary says what was given up.
    let Replayed { out, dir: art } = Replay::at(&url)
        .args("--insecure --request-count 4 --osl 8")
        .run()
        .await;
    assert_eq!(out.summary.counts.success, 4);
    assert!(
        out.summary.warnings[0].contains("--insecure"),
        "{:?}",
        out.summary.warnings
    );
    let summary = art.text("summary.json");
    assert!(summary.contains("TLS certificate verification is OFF"));
    assert!(std::fs::read_to_string(art.join("console.txt"))
        .unwrap()
        .contains("TLS certificate verification is OFF"));

    // The binary warns on stderr before anything else.
    let o = Command::new(BIN)
        .args([
            "replay",
            "--url",
            &url,
            "--insecure",
            "--request-count",
            "2",
        ])
        .args([
            "--osl",
            "8",
            "--progress-interval",
            "0",
            "--metrics-settle-seconds",
            "0",
        ])
        .arg("--artifact-dir")
        .arg(dir.path().join("b"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).starts_with("WARNING: TLS certificate verification is OFF"),
        "{}",
        text(&o.stderr)
    );
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A loopback HTTP/1.1 server that answers every request `401` with the request head echoed in
/// the error message (as some gateways do), and keeps every head it received. It serves until
/// `stop` is set (or 30 s pass).
fn echo_server(
    stop: Arc<AtomicBool>,
) -> (u16, Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    let t = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            seen.lock().unwrap().push(head.clone());
            let body = serde_json::json!({"error": {"message": format!("unauthorized: {head}")}})
                .to_string();
            let _ = write!(
                s,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, heads, t)
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn assert_clean(what: &str, haystack: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(
            !haystack.contains(s),
            "{what} holds secret {s:?}:\n{haystack}"
        );
    }
}

#[test]
fn credentials_never_reach_files_the_console_help_or_another_host() {
    const KEY: &str = "sk-specperf-test-key-4b1d";
    const HEADER_KEY: &str = "hdr-secret-9f3e";
    const BEARER: &str = "bearer-secret-77a0";
    let secrets = [KEY, HEADER_KEY, BEARER];
    let stop = Arc::new(AtomicBool::new(false));
    let (target, target_heads, t1) = echo_server(stop.clone());
    // A metrics endpoint on another origin: it must never see a credential.
    let (metrics, metrics_heads, t2) = echo_server(stop.clone());
    let dir = tempfile::tempdir().unwrap();
    // `requests` requests with `header`, artifacts in `art`, `OPENAI_API_KEY` set to `key`.
    let run = |requests: &str, header: &str, art: &str, key: Option<&str>| -> Output {
        let mut c = Command::new(BIN);
        c.args(["replay", "--url", &format!("http://127.0.0.1:{target}")])
            .args([
                "--model",
                "m",
                "--request-count",
                requests,
                "--concurrency",
                "1",
            ])
            .args([
                "--progress-interval",
                "0.05",
                "--metrics-timeout-seconds",
                "1",
            ])
            .args(["--server-metrics", &format!("127.0.0.1:{metrics}")])
            .args(["-H", header])
            .arg("--artifact-dir")
            .arg(dir.path().join(art))
            .env_remove("OPENAI_API_KEY");
        if let Some(key) = key {
            c.env("OPENAI_API_KEY", key);
        }
        c.output().unwrap()
    };
    // The key from the environment plus a custom key header; then a custom Authorization.
    let a = run("3", &format!("X-Api-Key: {HEADER_KEY}"), "a", Some(KEY));
    let b = run("2", &format!("Authorization: Bearer {BEARER}"), "b", None);
    for o in [&a, &b] {
        assert_eq!(
            o.status.code(),
            Some(1),
            "all requests failed: {}",
            text(&o.stderr)
        );
        assert_clean("stdout", &text(&o.stdout), &secrets);
        assert_clean("stderr", &text(&o.stderr), &secrets);
    }
    for f in files(dir.path()) {
        let body = text(&std::fs::read(&f).unwrap());
        assert_clean(&f.display().to_string(), &body, &secrets);
    }
    // The credentials were really sent to the target, and scrubbed from what it echoed back.
    let heads = target_heads.lock().unwrap().join("\n");
    assert!(heads.contains(KEY) && heads.contains(HEADER_KEY) && heads.contains(BEARER));
    let recs = records(&dir.path().join("a"));
    assert!(
        recs.iter()
            .all(|r| r["error"].as_str().unwrap().contains("[redacted]")),
        "{recs:?}"
    );
    // ...and never to the metrics endpoint on another origin.
    let m = metrics_heads.lock().unwrap();
    assert!(!m.is_empty(), "the metrics endpoint was scraped");
    assert_clean("metrics request", &m.join("\n"), &secrets);

    let help = Command::new(BIN)
        .args(["replay", "--help"])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(text(&help.stdout).contains("--api-key"));
    assert_clean("--help", &text(&help.stdout), &secrets);
    stop.store(true, Ordering::Relaxed);
    t1.join().unwrap();
    t2.join().unwrap();
}

#[test]
fn a_hostile_model_name_cannot_move_the_artifacts_out_of_their_directory() {
    // The model name comes from the server's /v1/models when --model is not given.
    let s = sim(SimConfig {
        model: "../../escaped/../x".into(),
        ..fast()
    });
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().join("a").join("b");
    std::fs::create_dir_all(&cwd).unwrap();
    let o = Command::new(BIN)
        .args([
            "replay",
            "--url",
            &s.url(),
            "--request-count",
            "2",
            "--osl",
            "4",
        ])
        .args(["--progress-interval", "0", "--metrics-settle-seconds", "0"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let made: Vec<_> = std::fs::read_dir(cwd.join("artifacts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(made, [".._.._escaped_.._x-chat-concurrency64"]);
    // Nothing was created beside or above the working directory.
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(root.path().join("a")).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 1);
    let summary =
        std::fs::read_to_string(cwd.join("artifacts").join(&made[0]).join("summary.json")).unwrap();
    assert!(
        summary.contains("../../escaped/../x"),
        "the name itself is kept as data"
    );
}
