//! Against the serving stack InferenceX's multi-node AgentX stage runs on: NVIDIA Dynamo 1.6.1's
//! OpenAI frontend and router in front of its mocker engine (simulated vLLM timing, a real
//! tokenizer), CPU only, started by `scripts/dynamo.sh up` (venv at `target/dynamo-venv` or
//! `$SPECPERF_DYNAMO_VENV`, which `scripts/dynamo.sh --setup` installs from PyPI) and stopped by
//! its `down` when the test's guard drops. Every figure is checked against Dynamo's own counters
//! or its own request trace; nothing of the deployment may listen or connect off loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use specperf::scrape::prom::{self, Format};
use specperf::{Progress, RunOutcome, Stopper};

use crate::common::{config, http, read_json, scaled, tokenizer_path, wait_exit, Backlog};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// Requests per replay (four replays per deployment in the reconciliation test).
const REQUESTS: u64 = 16;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Dynamo venv, or a failure that says how to make it.
fn venv() -> PathBuf {
    crate::tools::Tool::Dynamo.path()
}

/// A Dynamo deployment on loopback, taken down on drop (its `--owner-pid` watcher takes it down
/// too if this process dies without dropping it).
struct Dynamo {
    _one: crate::common::Exclusive,
    state: tempfile::TempDir,
    url: String,
    model: String,
    /// Every worker's /metrics, prefill first.
    workers: Vec<String>,
    decode: Vec<String>,
    prefill: Vec<String>,
    frontend: String,
    trace: PathBuf,
    /// The process groups of the deployment (relay, workers, frontend).
    groups: Vec<u32>,
}

impl Dynamo {
    /// `scripts/dynamo.sh up` with `args`, bounded by its own 120 s readiness wait.
    fn up(args: &[&str]) -> Dynamo {
        // The script finds the venv as venv() did ($SPECPERF_DYNAMO_VENV, else its own link).
        venv();
        // One server at a time, never beside a timing-bound test: the stack takes both cores.
        let one = crate::common::exclusive();
        let state = tempfile::tempdir().unwrap();
        let out = Command::new(root().join("scripts/dynamo.sh"))
            .arg("up")
            .arg(state.path())
            .args(args)
            .args(["--owner-pid", &std::process::id().to_string()])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/dynamo.sh up {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(state.path().join("env")).unwrap();
        let env: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k, v.trim_matches('\'')))
            .collect();
        let list = |k: &str| -> Vec<String> {
            env[k]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let d = Dynamo {
            _one: one,
            url: env["DYNAMO_URL"].to_owned(),
            model: env["DYNAMO_MODEL"].to_owned(),
            workers: list("DYNAMO_WORKER_METRICS_URLS"),
            decode: list("DYNAMO_DECODE_METRICS_URLS"),
            prefill: list("DYNAMO_PREFILL_METRICS_URLS"),
            frontend: env["DYNAMO_FRONTEND_METRICS_URL"].to_owned(),
            trace: PathBuf::from(env["DYNAMO_REQUEST_TRACE"]),
            groups: list("DYNAMO_PIDS")
                .iter()
                .map(|p| p.parse().unwrap())
                .collect(),
            state,
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            d.url,
            "up prints the frontend's URL"
        );
        assert!(d.url.starts_with("http://127.0.0.1:"), "{}", d.url);
        d
    }

    /// The frontend's page.
    fn front(&self) -> Samples {
        page(&self.frontend)
    }

    /// Dynamo's request trace: one `request_end` event per request the frontend finished.
    fn trace(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["event"].clone())
            .filter(|e| e["event_type"] == "request_end")
            .collect()
    }

    /// Waits (up to 10 s) until the frontend has finished `n` more requests than `before` shows
    /// and its trace has caught up: the counters are then final for the run.
    fn settle(&self, before: &Samples, n: f64) -> Samples {
        let until = Instant::now() + scaled(Duration::from_secs(10));
        loop {
            let now = self.front();
            if now.delta(before, "dynamo_frontend_requests_total") >= n {
                return now;
            }
            assert!(
                Instant::now() < until,
                "the frontend counted {} of {n} requests",
                now.delta(before, "dynamo_frontend_requests_total")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Dynamo {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/dynamo.sh"))
            .arg("down")
            .arg(self.state.path())
            .stdin(Stdio::null())
            .status();
    }
}

/// One /metrics page: each sample as `name{labels}` (labels sorted) with its value.
struct Samples(BTreeMap<String, f64>);

impl Samples {
    /// Sum of a family over every label set whose labels contain all of `with`.
    fn sum_where(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
            .filter(|(k, _)| {
                with.iter()
                    .all(|(l, v)| k.contains(&format!("{l}=\"{v}\"")))
            })
            .map(|(_, v)| v)
            .sum()
    }

    fn sum(&self, name: &str) -> f64 {
        self.sum_where(name, &[])
    }

    fn delta(&self, before: &Samples, name: &str) -> f64 {
        self.sum(name) - before.sum(name)
    }

    /// The distinct metric names on the page.
    fn names(&self) -> BTreeSet<String> {
        self.0
            .keys()
            .map(|k| k.split('{').next().unwrap().to_owned())
            .collect()
    }
}

fn page(url: &str) -> Samples {
    let (status, body) = http(url, "GET", None).unwrap_or_else(|| panic!("GET {url}"));
    assert_eq!(status, 200, "GET {url}: {body}");
    let p = prom::parse(&body, Format::Text).unwrap_or_else(|e| panic!("{url}: {e:?}"));
    Samples(
        p.samples
            .into_iter()
            .map(|s| {
                let labels: Vec<String> = s
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{v}\""))
                    .collect();
                let key = if labels.is_empty() {
                    s.name
                } else {
                    format!("{}{{{}}}", s.name, labels.join(","))
                };
                (key, s.value)
            })
            .collect(),
    )
}

/// A streaming chat request (through the shared [`crate::common::held_stream`]; Dynamo ignores
/// its simulator fault header) that keeps a slot of the deployment busy (4,000 tokens at the
/// mocker's ~6 ms each) until the returned socket is dropped; read up to its first token.
fn held_stream(d: &Dynamo) -> TcpStream {
    let body = serde_json::json!({"model": d.model, "stream": true, "max_tokens": 4000,
        "messages": [{"role": "user", "content": "Count from one to one thousand in words."}]});
    crate::common::held_stream(&d.url, &body)
}

// ---- Loopback: every socket of the deployment, from /proc ----

/// One socket a process of the deployment holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Socket {
    proto: &'static str,
    local: SocketAddr,
    remote: SocketAddr,
    /// The kernel's state code (TCP: 0A listen, 01 established).
    state: String,
}

impl Socket {
    fn listening(&self) -> bool {
        self.proto.starts_with("tcp") && self.state == "0A"
    }

    fn established(&self) -> bool {
        self.proto.starts_with("tcp") && self.state == "01"
    }

    /// Bound to loopback, and connected (if at all) to loopback.
    fn on_loopback(&self) -> bool {
        let lo = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => v4.is_loopback(),
            IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback())
            }
        };
        let unconnected = self.remote.ip().is_unspecified() && self.remote.port() == 0;
        lo(self.local.ip()) && (unconnected || lo(self.remote.ip()))
    }
}

/// `/proc/net/tcp`'s `0100007F:1F90`: the address in the kernel's byte order, the port in hex.
fn proc_addr(s: &str) -> SocketAddr {
    let (ip, port) = s.split_once(':').unwrap();
    let port = u16::from_str_radix(port, 16).unwrap();
    let word = |i: usize| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).unwrap();
    let ip = if ip.len() == 8 {
        IpAddr::V4(Ipv4Addr::from(word(0).to_le_bytes()))
    } else {
        let mut b = [0u8; 16];
        for i in 0..4 {
            b[i * 4..i * 4 + 4].copy_from_slice(&word(i).to_le_bytes());
        }
        IpAddr::V6(Ipv6Addr::from(b))
    };
    SocketAddr::new(ip, port)
}

/// Every process in the deployment's process groups (children included).
fn group_members(groups: &[u32]) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name (which may hold spaces): state, ppid, pgrp.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let pgrp: u32 = rest.split(' ').nth(2).unwrap().parse().unwrap();
        if groups.contains(&pgrp) {
            pids.push(pid);
        }
    }
    pids
}

/// The sockets the deployment's processes hold right now.
fn deployment_sockets(groups: &[u32]) -> Vec<Socket> {
    let mut inodes = BTreeSet::new();
    for pid in group_members(groups) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(l) = std::fs::read_link(fd.path()) {
                if let Some(i) = l.to_str().and_then(|s| s.strip_prefix("socket:[")) {
                    inodes.insert(i.trim_end_matches(']').to_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    for proto in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/net/{proto}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && inodes.contains(f[9]) {
                out.push(Socket {
                    proto,
                    local: proc_addr(f[1]),
                    remote: proc_addr(f[2]),
                    state: f[3].to_owned(),
                });
            }
        }
    }
    out
}

/// Samples the deployment's sockets every 50 ms until dropped, keeping every one seen.
struct LoopbackWatch {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeSet<Socket>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoopbackWatch {
    fn start(d: &Dynamo) -> LoopbackWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let groups = d.groups.clone();
        let thread = std::thread::spawn({
            let (stop, seen) = (stop.clone(), seen.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let now = deployment_sockets(&groups);
                    seen.lock().unwrap().extend(now);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        });
        LoopbackWatch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Stops sampling; fails loudly on any socket off loopback, and unless the samples show the
    /// frontend listening and connections in flight between the deployment's processes (the
    /// check saw the deployment at work, not an empty table).
    fn assert_loopback_only(mut self, d: &Dynamo, label: &str) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let seen = self.seen.lock().unwrap().clone();
        let off: Vec<&Socket> = seen.iter().filter(|s| !s.on_loopback()).collect();
        assert!(
            off.is_empty(),
            "{label}: Dynamo listens or connects off loopback (a Dynamo upgrade added a listener \
             or dropped a *_HOST setting; see scripts/dynamo.sh): {off:#?}"
        );
        let http: u16 = d.url.rsplit(':').next().unwrap().parse().unwrap();
        assert!(
            seen.iter().any(|s| s.listening() && s.local.port() == http),
            "{label}: the frontend's listener on {http} was never seen: {seen:#?}"
        );
        let internal = seen
            .iter()
            .filter(|s| s.established() && s.local.port() != http && s.remote.port() != http)
            .count();
        assert!(
            internal >= 2,
            "{label}: no connection between the deployment's processes was seen: {seen:#?}"
        );
        eprintln!(
            "{label}: {} sockets of the deployment seen, all on loopback ({} listening, {} \
             established between its processes)",
            seen.len(),
            seen.iter().filter(|s| s.listening()).count(),
            internal
        );
    }
}

impl Drop for LoopbackWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---- Runs ----

/// `specperf replay` in this process against `d` (bounded), with `extra` flags.
async fn replay(d: &Dynamo, dir: &Path, extra: &str) -> RunOutcome {
    let args = format!(
        "--url {} --model {} --artifact-dir {} {extra}",
        d.url,
        d.model,
        dir.display()
    );
    let argv: Vec<&str> = args.split_whitespace().collect();
    let (tx, _rx) = tokio::sync::watch::channel(Progress::default());
    tokio::time::timeout(
        scaled(Duration::from_secs(120)),
        specperf::replay(config(&argv), Stopper::new(), tx),
    )
    .await
    .expect("the replay ends within 120 s")
    .expect("the replay starts")
}

/// No request lost, and the run's token totals are the frontend's counters over the run.
fn assert_reconciles(label: &str, o: &RunOutcome, before: &Samples, after: &Samples) {
    let s = &o.summary;
    assert_eq!(
        (s.counts.success, s.counts.failed, s.counts.cancelled),
        (REQUESTS, 0, 0),
        "{label}: {:?}",
        s.counts.failed_by_kind
    );
    assert_eq!(
        s.total_prompt_tokens as f64,
        after.delta(before, "dynamo_frontend_input_sequence_tokens_sum"),
        "{label}: prompt tokens vs the frontend's dynamo_frontend_input_sequence_tokens"
    );
    assert_eq!(
        s.total_completion_tokens as f64,
        after.delta(before, "dynamo_frontend_output_sequence_tokens_sum"),
        "{label}: completion tokens vs the frontend's dynamo_frontend_output_sequence_tokens"
    );
}

/// Aggregated mocker (2 workers, MTP timing): chat and completions, streaming and not, each run
/// reconciles exactly with the frontend's token counters; no AL is reported (the mocker exports
/// no speculative counters) and the run says why; nothing leaves loopback meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_reconcile_with_the_frontends_token_counters() {
    let d = Dynamo::up(&["--workers", "2", "--mtp"]);
    let tmp = tempfile::tempdir().unwrap();
    let metrics = d.workers.join(" ");
    let watch = LoopbackWatch::start(&d);
    for endpoint in ["chat", "completions"] {
        for streaming in [true, false] {
            let label = format!("{endpoint} streaming={streaming}");
            let before = d.front();
            let o = replay(
                &d,
                &tmp.path().join(format!("{endpoint}-{streaming}")),
                &format!(
                    "--endpoint-type {endpoint} --streaming {streaming} --request-count \
                     {REQUESTS} --concurrency 4 --osl 24 --server-metrics {metrics}"
                ),
            )
            .await;
            let after = d.settle(&before, REQUESTS as f64);
            assert_reconciles(&label, &o, &before, &after);
            // MTP timing, but no speculative counters anywhere: no AL, and the reason.
            let a = &o.summary.acceptance.as_ref().expect("scraped").acceptance;
            assert_eq!(a.numbers.acceptance_length, None, "{label}");
            assert_eq!(
                serde_json::to_value(a.status).unwrap(),
                "no_counters",
                "{label}: {:?}",
                a.reason
            );
            assert!(
                o.summary.spec_decode.is_none(),
                "{label}: no per-request figures"
            );
        }
    }
    watch.assert_loopback_only(&d, "replays");

    // What the console says about it.
    let out = Command::new(BIN)
        .args(["replay", "--url", &d.url, "--model", &d.model])
        .args(["--request-count", "4", "--concurrency", "2", "--osl", "8"])
        .args(["--progress-interval", "0", "--metrics-settle-seconds", "0"])
        .arg("--artifact-dir")
        .arg(tmp.path().join("console"))
        .arg("--server-metrics")
        .args(&d.workers)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "Acceptance length: not measured (no_counters: no speculative-decoding counters on \
             the metrics pages"
        ),
        "{stdout}"
    );
}

/// Disaggregated, 1 prefill + 2 decode workers, every worker's /metrics scraped: the run
/// reconciles with the frontend, the server-metrics export carries the frontend's and the
/// workers' families, AIPerf 0.13's models accept the artifacts, and the drain wait sees the
/// frontend's and the decode workers' gauges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disaggregated_deployment_exports_every_workers_metrics() {
    let d = Dynamo::up(&["--disagg", "1:2"]);
    assert_eq!((d.prefill.len(), d.decode.len()), (1, 2));
    // The families the suite reads, on Dynamo 1.6.1's pages.
    let names = d.front().names();
    for n in [
        "dynamo_frontend_input_sequence_tokens_sum",
        "dynamo_frontend_output_sequence_tokens_sum",
        "dynamo_frontend_requests_total",
        "dynamo_frontend_requests_started_total",
        "dynamo_frontend_active_requests",
        "dynamo_frontend_inflight_requests",
        "dynamo_frontend_queued_requests",
        "dynamo_frontend_cached_tokens_sum",
    ] {
        assert!(
            names.contains(n),
            "the frontend's page lacks {n}: {names:?}"
        );
    }
    for w in &d.workers {
        let names = page(w).names();
        for n in [
            "dynamo_component_requests_total",
            "dynamo_component_inflight_requests",
        ] {
            assert!(names.contains(n), "{w} lacks {n}: {names:?}");
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("disagg");
    let before = d.front();
    let pre_before = page(&d.prefill[0]);
    let watch = LoopbackWatch::start(&d);
    let o = replay(
        &d,
        &dir,
        &format!(
            "--streaming true --request-count {REQUESTS} --concurrency 4 --osl 24 \
             --server-metrics {} {}",
            d.frontend,
            d.workers.join(" ")
        ),
    )
    .await;
    watch.assert_loopback_only(&d, "disaggregated");
    let after = d.settle(&before, REQUESTS as f64);
    assert_reconciles("disaggregated", &o, &before, &after);
    // Every request went through the prefill worker and one of the decode workers.
    let generate = [("dynamo_endpoint", "generate")];
    let prefilled = page(&d.prefill[0]).sum_where("dynamo_component_requests_total", &generate)
        - pre_before.sum_where("dynamo_component_requests_total", &generate);
    assert_eq!(prefilled, REQUESTS as f64, "the prefill worker's own count");

    // The workers' families and every worker's endpoint in the export.
    let sm = read_json(&dir.join("server_metrics_export.json"));
    let families: BTreeSet<String> = sm["metrics"].as_object().unwrap().keys().cloned().collect();
    for f in [
        "dynamo_component_requests",
        "dynamo_component_inflight_requests",
        "vllm:num_requests_running",
    ] {
        assert!(families.contains(f), "{f} in the export: {families:?}");
    }
    let endpoints: Vec<String> = sm["summary"]["endpoint_info"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let listed = |u: &str| {
        endpoints
            .iter()
            .any(|k| u.contains(k.as_str()) || k.contains(u))
    };
    for w in &d.workers {
        assert!(listed(w), "{w} in summary.endpoint_info: {endpoints:?}");
    }

    // The drain wait over the frontend and the decode workers: Dynamo's and vLLM's gauges.
    let out = tmp.path().join("drain.json");
    let mut cmd = Command::new(BIN);
    cmd.args(["drain", "--url", &d.url, "--poll-interval-seconds", "0.1"])
        .args(["--idle-polls", "3", "--max-wait-seconds", "30", "--output"])
        .arg(&out)
        .arg("--server-metrics")
        .args(&d.decode);
    let st = cmd.status().unwrap();
    let drain = read_json(&out);
    assert_eq!(st.code(), Some(0), "{drain:#}");
    for e in drain["endpoints"].as_array().unwrap() {
        let gauges: Vec<&str> = e["gauges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap())
            .collect();
        let want = if e["url"] == d.frontend.as_str() {
            "dynamo_frontend_active_requests"
        } else {
            "vllm:num_requests_running"
        };
        assert!(gauges.contains(&want), "{}: {gauges:?}", e["url"]);
    }

    // AIPerf 0.13's own models and plots on the artifacts.
    crate::tools::Tool::Aiperf.path();
    let log = tmp.path().join("conformance.log");
    // The script finds the venv as this test did (given no SPECPERF_AIPERF_VENV, its own link).
    let mut child = Command::new(root().join("scripts/aiperf-conformance.sh"))
        .arg(&dir)
        .env("COLUMNS", "250")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
        .spawn()
        .unwrap();
    let st = wait_exit(&mut child, scaled(Duration::from_secs(600)));
    let stdout = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        st.success() && stdout.contains("every artifact accepted"),
        "AIPerf 0.13 rejects the Dynamo run's artifacts ({st}):\n{stdout}\n{}",
        std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
    );
    frontend_in_export(&d, &families, &endpoints);
}

/// The frontend's page, named beside the workers' (`replay --server-metrics` scrapes exactly the
/// endpoints given; `profile`, AIPerf's argv, adds the --url's own as AIPerf does, spec §1.5): the
/// export carries the frontend's families too.
fn frontend_in_export(d: &Dynamo, families: &BTreeSet<String>, endpoints: &[String]) {
    for f in [
        "dynamo_frontend_input_sequence_tokens",
        "dynamo_frontend_active_requests",
    ] {
        assert!(
            families.contains(f),
            "{f} missing from server_metrics_export.json: the frontend's page ({}) was not \
             scraped: {families:?}",
            d.frontend
        );
    }
    assert!(
        endpoints
            .iter()
            .any(|k| d.frontend.contains(k.as_str()) || k.contains(&d.frontend)),
        "{} in summary.endpoint_info: {endpoints:?}",
        d.frontend
    );
}

/// `specperf drain` and a 2-point concurrency sweep wait on Dynamo's own gauges: a request
/// another client left running keeps the wait going until it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_and_a_sweep_wait_on_dynamos_gauges() {
    let d = Dynamo::up(&["--workers", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    // Both workers serve a request first: the mocker registers its vllm:* gauges on a
    // worker's page only once that worker has had one.
    let warm = replay(
        &d,
        &tmp.path().join("warm"),
        "--request-count 4 --concurrency 2 --osl 4",
    )
    .await;
    assert_eq!(warm.summary.counts.success, 4);

    // The standalone wait, with a request in flight that goes away after a second.
    let held = held_stream(&d);
    let out = tmp.path().join("drain.json");
    let mut child = Command::new(BIN)
        .args(["drain", "--url", &d.url, "--poll-interval-seconds", "0.1"])
        .args(["--idle-polls", "3", "--max-wait-seconds", "60", "--output"])
        .arg(&out)
        .arg("--server-metrics")
        .args(&d.workers)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    drop(held);
    let st = wait_exit(&mut child, scaled(Duration::from_secs(90)));
    let drain = read_json(&out);
    assert_eq!(st.code(), Some(0), "{drain:#}");
    assert_eq!(drain["reason"], "drained", "{drain:#}");
    // Frontend and worker both counted the held request (2 at once), and the wait outlasted it.
    assert!(drain["max_queue"].as_u64().unwrap() >= 2, "{drain:#}");
    assert!(drain["waited_s"].as_f64().unwrap() >= 0.8, "{drain:#}");
    let front = drain["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["url"] == d.frontend.as_str())
        .expect("the frontend polled");
    for g in [
        "dynamo_frontend_active_requests",
        "dynamo_frontend_queued_requests",
    ] {
        assert!(
            front["gauges"].as_array().unwrap().iter().any(|x| x == g),
            "{g} read off the frontend's page: {front}"
        );
    }

    // The sweep: the wait before the second point reads the same gauges and holds the point
    // back while another client's request runs.
    let sweep_dir = tmp.path().join("sweep");
    let mut argv = vec!["--url", &d.url, "--model", &d.model, "--concurrency", "2,4"];
    argv.extend(["--request-count", "8", "--osl", "16"]);
    argv.extend(["--drain-max-wait-seconds", "60", "--artifact-dir"]);
    argv.push(sweep_dir.to_str().unwrap());
    argv.push("--server-metrics");
    argv.extend(d.workers.iter().map(String::as_str));
    let cfg = crate::sweep::sweep_config(&argv);
    let mut backlog = Backlog::new(2);
    let o = crate::sweep::sweep_with(cfg, |ev| match ev {
        specperf::sweep::Event::RunDone { .. } if backlog.not_started() => {
            backlog.hold(held_stream(&d));
        }
        specperf::sweep::Event::DrainPoll(p) => backlog.on_poll(p),
        _ => {}
    })
    .await;
    assert_eq!(o.exit_code, 0);
    assert!(
        backlog.busy_polls >= 2,
        "the wait saw the left-over request"
    );
    let points = &o.index.points;
    assert_eq!(points.len(), 2);
    assert!(
        points[0].drain_before.is_none(),
        "nothing to wait for before the first point"
    );
    let wait = points[1]
        .drain_before
        .as_ref()
        .expect("a drain wait before point 2");
    assert!(wait.drained && wait.max_queue >= 1, "{wait:?}");
    assert!(!points[1].started_undrained);
    let gauges: BTreeSet<&str> = wait
        .endpoints
        .iter()
        .flat_map(|e| e.gauges.iter().map(|g| g.name()))
        .collect();
    assert!(
        gauges.contains("dynamo_frontend_active_requests")
            && gauges.contains("vllm:num_requests_running"),
        "{gauges:?}"
    );
    for p in points {
        assert_eq!(p.mean("request_count"), Some(8.0), "{}", p.name);
    }
}

/// `specperf gate` with `FRAMEWORK=dynamo-vllm` on the mocker (MTP timing, no speculative
/// counters): a report-only skip, `no_counters`, exit 0, before any replay.
#[test]
fn the_gate_on_the_mocker_skips_with_no_counters() {
    let d = Dynamo::up(&["--disagg", "1:2", "--mtp"]);
    let ws = tempfile::tempdir().unwrap();
    let rows: String = (0..4)
        .map(|i| {
            format!(
                "{{\"question_id\": \"q{i}\", \"category\": \"coding\", \"messages\": [{{\"role\": \
                 \"user\", \"content\": \"Write function number {i}.\"}}]}}\n"
            )
        })
        .collect();
    std::fs::write(ws.path().join("qualitative.jsonl"), rows).unwrap();
    std::fs::create_dir(ws.path().join("golden")).unwrap();
    std::fs::write(
        ws.path().join("golden/mock_mtp.yaml"),
        format!(
            "{}:\n  thinking_off:\n    3: 2.4\n\
             collection:\n  dataset: speed_bench\n  category: coding\n  num_prompts: 4\n\
             \x20 endpoint: chat\n  renderer: server_template\n  output_len: 16\n\
             \x20 sampling:\n    temperature: 0.0\n  chat_template_kwargs:\n    thinking_off: {{}}\n\
             \x20 concurrency: 2\n  seed: 0\n",
            d.model
        ),
    )
    .unwrap();
    let gate = |name: &str, envs: &[(&str, String)]| -> (Output, Value) {
        let p = |s: &str| ws.path().join(s);
        let out = Command::new(BIN)
            .current_dir(ws.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("FRAMEWORK", "dynamo-vllm")
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .args(["gate", "--url", &d.url, "--model", &d.model])
            .arg("--golden")
            .arg(p("golden"))
            .args(["--model-prefix", "mock", "--spec-method", "mtp"])
            .args(["--thinking-mode", "thinking_off", "--num-spec-tokens", "3"])
            .args(["--result-filename", name, "--timeout-seconds", "120"])
            .arg("--result-dir")
            .arg(p("results"))
            .arg("--input-file")
            .arg(p("qualitative.jsonl"))
            .output()
            .unwrap();
        let r = read_json(&p(&format!("results/al_gate_{name}.json")));
        (out, r)
    };
    let front = d.front();
    // The frontend's page only (the gate's default): the skip names where the counters live.
    let (out, r) = gate("frontend", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "report-only: {stdout}");
    assert_eq!(
        (r["verdict"].as_str(), r["reason"].as_str()),
        (Some("skipped"), Some("no_counters")),
        "{r:#}"
    );
    let msg = r["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("SPEEDBENCH_DECODE_METRICS_URLS") && msg.contains("decode-worker /metrics"),
        "the hint names the decode workers' endpoints: {r:#}"
    );
    assert!(stdout.starts_with("SKIPPED: SpeedBench AL "), "{stdout}");
    // The decode workers named, as the hint says: still no counters (the mocker has none).
    let (out, r) = gate(
        "decode",
        &[("SPEEDBENCH_DECODE_METRICS_URLS", d.decode.join(","))],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        (r["verdict"].as_str(), r["reason"].as_str()),
        (Some("skipped"), Some("no_counters")),
        "{r:#}"
    );
    let probed: Vec<&str> = r["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        probed,
        d.decode.iter().map(String::as_str).collect::<Vec<_>>(),
        "{r:#}"
    );
    // Skipped at the preflight: not one request reached the frontend.
    assert_eq!(
        d.front()
            .delta(&front, "dynamo_frontend_requests_started_total"),
        0.0
    );
}

// ---- AgentX ----

/// InferenceX's AgentX argv ([`crate::common::agentx_argv`], 10 s) against `d`, with the
/// deployment's model name and every worker's page as --server-metrics.
fn agentx_argv(d: &Dynamo, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec!["profile".to_string()];
    a.extend(crate::common::agentx_argv(
        &d.url,
        out,
        10,
        &tokenizer_path(),
    ));
    if let Some(i) = a.iter().position(|x| x == "--model") {
        a[i + 1].clone_from(&d.model);
    }
    a.push("--server-metrics".into());
    a.extend(d.workers.iter().cloned());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Runs `specperf profile` with `envs`, bounded; its output.
fn profile(args: &[String], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID")
        .env_remove("AIPERF_USE_DYNAMO_CONV_AWARE_ROUTING")
        .env_remove("FRAMEWORK")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let _ = wait_exit(&mut child, scaled(Duration::from_secs(240)));
    child.wait_with_output().unwrap()
}

/// One AgentX run's placement as Dynamo's own records show it.
struct Placement {
    /// Requests per session id (the header's value) per worker.
    sessions: BTreeMap<String, BTreeMap<u64, u64>>,
    /// Requests per first KV block (the per-tree marker opens every prompt) per worker.
    trees: BTreeMap<u64, BTreeSet<u64>>,
    /// Requests the trace holds for the run.
    requests: usize,
    /// Σ cached / Σ prompt tokens over the profiling requests, from the trace, %.
    measured_hit: f64,
    /// The same over the whole run (warmup too), from the frontend's counters, %.
    counted_hit: f64,
}

/// Runs one AgentX profile against `d`; the run's requests, from Dynamo's trace and counters.
fn agentx_run(d: &Dynamo, dir: &Path, envs: &[(&str, &str)]) -> (Placement, Value) {
    // The run's requests in the trace: those received from now on (the trace is flushed every
    // 100 ms, so a count taken now could still miss `up`'s own probe request).
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let before = d.front();
    let workers_before: Vec<Samples> = d.workers.iter().map(|w| page(w)).collect();
    let watch = LoopbackWatch::start(d);
    let o = profile(&agentx_argv(d, dir, &[]), envs);
    watch.assert_loopback_only(d, "agentx");
    assert!(
        o.status.success(),
        "specperf profile: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<Value> = std::fs::read_to_string(dir.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter().all(|r| r["error"].is_null()),
        "no failed request"
    );
    let after = d.settle(&before, rows.len() as f64);
    // Every request the run sent reached the frontend and came back: Dynamo's count.
    assert_eq!(
        after.delta(&before, "dynamo_frontend_requests_total"),
        rows.len() as f64
    );
    let until = Instant::now() + Duration::from_secs(5);
    let trace = loop {
        let t: Vec<Value> = d
            .trace()
            .into_iter()
            .filter(|e| e["request"]["request_received_ms"].as_u64() >= Some(since_ms))
            .collect();
        if t.len() >= rows.len() || Instant::now() > until {
            break t;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(trace.len(), rows.len(), "one trace record per request");

    // The workers' own counters agree with where the trace says each request went.
    let mut by_worker: BTreeMap<u64, u64> = BTreeMap::new();
    for e in &trace {
        *by_worker
            .entry(e["request"]["worker"]["decode_worker_id"].as_u64().unwrap())
            .or_default() += 1;
    }
    let generate = [("dynamo_endpoint", "generate")];
    for (w, b) in d.workers.iter().zip(&workers_before) {
        let p = page(w);
        let id =
            p.0.keys()
                .find_map(|k| {
                    let rest = k.split("worker_id=\"").nth(1)?;
                    u64::from_str_radix(&rest[..rest.find('"')?], 16).ok()
                })
                .expect("worker_id label");
        let served = p.sum_where("dynamo_component_requests_total", &generate)
            - b.sum_where("dynamo_component_requests_total", &generate);
        assert_eq!(
            served,
            by_worker.get(&id).copied().unwrap_or(0) as f64,
            "{w}: its own request count vs the router's trace"
        );
    }

    let mut p = Placement {
        sessions: BTreeMap::new(),
        trees: BTreeMap::new(),
        requests: trace.len(),
        measured_hit: 0.0,
        counted_hit: 100.0 * after.delta(&before, "dynamo_frontend_cached_tokens_sum")
            / after
                .delta(&before, "dynamo_frontend_input_sequence_tokens_sum")
                .max(1.0),
    };
    let first_profiling_ms = rows
        .iter()
        .filter(|r| r["metadata"]["benchmark_phase"] == "profiling")
        .filter_map(|r| r["metadata"]["request_start_ns"].as_u64())
        .min()
        .expect("profiling requests")
        / 1_000_000;
    let (mut cached, mut prompt) = (0u64, 0u64);
    for e in &trace {
        let r = &e["request"];
        let w = r["worker"]["decode_worker_id"].as_u64().unwrap();
        if let Some(s) = e["agent_context"]["session_id"].as_str() {
            *p.sessions
                .entry(s.to_owned())
                .or_default()
                .entry(w)
                .or_default() += 1;
        }
        if let Some(h) = r["replay"]["input_sequence_hashes"][0].as_u64() {
            p.trees.entry(h).or_default().insert(w);
        }
        if r["request_received_ms"].as_u64().unwrap() + 5 >= first_profiling_ms {
            cached += r["cached_tokens"].as_u64().unwrap_or(0);
            prompt += r["input_tokens"].as_u64().unwrap();
        }
    }
    p.measured_hit = 100.0 * cached as f64 / prompt.max(1) as f64;
    (p, read_json(&dir.join("profile_export_aiperf.json")))
}

/// AgentX with `AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID=true` against two workers
/// behind the KV router with session affinity: Dynamo's request trace shows every request of a
/// session on one worker (the workers' own counters agree with the trace); the measured prefix
/// cache hit rate is printed beside the traces' theoretical one, and the same run without the
/// header for comparison.
#[test]
fn agentx_sessions_stay_on_one_worker_with_the_dynamo_session_header() {
    let d = Dynamo::up(&[
        "--workers",
        "2",
        "--router",
        "kv",
        "--session-affinity-ttl",
        "600",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let (with, summary) = agentx_run(
        &d,
        &tmp.path().join("header"),
        &[(
            "AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID",
            "true",
        )],
    );
    let theoretical = summary["theoretical_prefix_cache_hit"]["avg"]
        .as_f64()
        .expect("theoretical_prefix_cache_hit");
    let tagged: u64 = with.sessions.values().flat_map(|w| w.values()).sum();
    assert_eq!(
        tagged as usize, with.requests,
        "every request carried its session id to the router"
    );
    assert!(with.sessions.len() >= 3, "sessions: {:?}", with.sessions);
    // Pinning shows only on sessions with more than one request.
    let sizes: Vec<u64> = with.sessions.values().map(|w| w.values().sum()).collect();
    assert!(
        sizes.iter().filter(|&&n| n >= 2).count() >= 2,
        "too few multi-request sessions to show placement: {sizes:?}"
    );
    let split: Vec<_> = with.sessions.iter().filter(|(_, w)| w.len() > 1).collect();
    assert!(
        split.is_empty(),
        "sessions served by more than one worker despite X-Dynamo-Session-ID: {split:?}"
    );
    let workers_used: BTreeSet<u64> = with
        .sessions
        .values()
        .flat_map(|w| w.keys().copied())
        .collect();
    assert!(
        with.measured_hit > 0.0,
        "the replay's shared prefixes hit the mocker's prefix cache"
    );

    // The same run without the header: no session reaches the router.
    let (without, _) = agentx_run(&d, &tmp.path().join("no-header"), &[]);
    assert!(without.sessions.is_empty(), "{:?}", without.sessions);
    let spread = |p: &Placement| p.trees.values().filter(|w| w.len() > 1).count();
    eprintln!(
        "agentx on Dynamo (2 workers, KV router, session affinity 600 s), prefix-cache hit as \
         Dynamo measures it (cached / prompt tokens: profiling window from its request trace; \
         whole run from dynamo_frontend_cached_tokens_sum / _input_sequence_tokens_sum) beside \
         the traces' theoretical {theoretical:.1}% (profiling):\n  with X-Dynamo-Session-ID: {} \
         requests in {} sessions (sizes {sizes:?}), each session on one worker, {} workers \
         used; first-block groups on >1 worker {}/{}; hit {:.1}% (whole run {:.1}%)\n  \
         without: {} requests, no session id reaches the router; first-block groups on >1 \
         worker {}/{}; hit {:.1}% (whole run {:.1}%)",
        with.requests,
        with.sessions.len(),
        workers_used.len(),
        spread(&with),
        with.trees.len(),
        with.measured_hit,
        with.counted_hit,
        without.requests,
        spread(&without),
        without.trees.len(),
        without.measured_hit,
        without.counted_hit
    );
}

/// `--use-dynamo-conv-aware-routing` against a Dynamo that refuses `nvext.session_control`
/// (HTTP 400, unknown field): the run stops before profiling with an error that names the cause
/// and the fix (the header variable), exits non-zero, and sends next to nothing.
#[test]
fn conv_aware_routing_against_dynamo_stops_before_profiling_naming_the_header() {
    let d = Dynamo::up(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let before = d.front();
    let o = profile(
        &agentx_argv(
            &d,
            &tmp.path().join("conv-aware"),
            &[
                "--use-dynamo-conv-aware-routing",
                "--dynamo-session-timeout-seconds",
                "3600",
            ],
        ),
        &[("FRAMEWORK", "dynamo-vllm")],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("session_control")
            && stderr.contains("AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID"),
        "the error names the cause and the fix: {stderr}"
    );
    // Requests that reached the frontend: started (handled) plus refused at parsing (400s are
    // counted only in dynamo_frontend_failures_total).
    let after = d.front();
    let sent = after.delta(&before, "dynamo_frontend_requests_started_total")
        + after.delta(&before, "dynamo_frontend_failures_total");
    assert!(
        sent <= 2.0,
        "{sent} requests sent at a Dynamo that refuses them"
    );
}

/// InferenceX's fixed ISL/OSL point through its own `run_benchmark_serving` (one word changed:
/// `specperf bench-serving` for its Python client) against the deployment InferenceX's
/// multi-node stage runs on: two mocker workers behind the KV router. Then its
/// `process_result.py` and `aggregate_power.py` (power required, the stand-in `nvidia-smi`)
/// accept the result, and every request the frontend saw is one of the run's.
#[test]
fn inferencexs_run_benchmark_serving_runs_the_drop_in_against_dynamo() {
    let Some(script) = crate::bench_serving::upstream(
        "SPECPERF_INFERENCEX_DIR",
        "utils/bench_serving/benchmark_serving.py",
        "InferenceX's run_benchmark_serving against Dynamo",
    ) else {
        return;
    };
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let tmp = tempfile::tempdir().unwrap();
    let tok = crate::common::aiperf_tokenizer_dir(tmp.path());
    let before = d.front();
    crate::bench_serving::run_benchmark_serving(
        &script,
        &d.url,
        &d.model,
        tok.to_str().unwrap(),
        tmp.path(),
    );
    // 12 measured requests and 8 warmups (2 × the concurrency), and nothing else.
    let after = d.settle(&before, 20.0);
    assert_eq!(
        after.delta(&before, "dynamo_frontend_requests_total"),
        20.0,
        "the frontend saw requests the drop-in did not send"
    );
}

/// srt-slurm's sa-bench `bench.sh` (one change: `specperf bench-serving --flavor sa-bench` for
/// its Python client) against the same deployment: the Dynamo backend's stream framing, one
/// connection pool per run, the warmup and measured runs per concurrency.
#[test]
fn srt_slurms_bench_sh_runs_the_drop_in_against_dynamo() {
    let Some(script) = crate::bench_serving::upstream(
        "SPECPERF_SRT_SLURM_DIR",
        "src/srtctl/benchmarks/scripts/sa-bench/bench.sh",
        "srt-slurm's bench.sh against Dynamo",
    ) else {
        return;
    };
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let tmp = tempfile::tempdir().unwrap();
    let before = d.front();
    crate::bench_serving::bench_sh(&script, &d.url, &d.model, tmp.path());
    // Per concurrency C of 2 and 4: one initial request and 2C warmups in the warmup run, one
    // initial request and 3C in the measured run; plus bench.sh's own endpoint check.
    let sent = (1 + 2 * 2 + 1 + 3 * 2) + (1 + 2 * 4 + 1 + 3 * 4) + 1;
    let after = d.settle(&before, f64::from(sent));
    assert_eq!(
        after.delta(&before, "dynamo_frontend_requests_total"),
        f64::from(sent)
    );
}

// ---- Faults ----

/// Runs `specperf` with `args` and does `act` once `ready` holds for a line the run printed
/// (progress goes to stderr); returns the output and when `act` began (Unix seconds). Bounded
/// like [`profile`].
fn run_and_act(args: &[String], ready: impl Fn(&str) -> bool, act: impl FnOnce()) -> (Output, f64) {
    use std::io::BufRead;
    let mut child = Command::new(BIN)
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID")
        .env_remove("AIPERF_USE_DYNAMO_CONV_AWARE_ROUTING")
        .env_remove("FRAMEWORK")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut s).unwrap();
        s
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let err = child.stderr.take().unwrap();
    let err_t = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in std::io::BufReader::new(err).lines() {
            let line = line.unwrap();
            let _ = tx.send(line.clone());
            all.extend_from_slice(line.as_bytes());
            all.push(b'\n');
        }
        all
    });
    let until = Instant::now() + scaled(Duration::from_secs(120));
    let mut act = Some(act);
    let mut acted_at = None;
    while acted_at.is_none() && Instant::now() < until {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if ready(&line) => {
                acted_at = Some(unix_now());
                (act.take().unwrap())();
            }
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = wait_exit(&mut child, scaled(Duration::from_secs(240)));
    let o = Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    };
    let Some(at) = acted_at else {
        panic!(
            "the run never got to the point of the fault:\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    (o, at)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `scripts/dynamo.sh stop|start STATE NAME [args]` on `d`, which must succeed.
fn dynamo_sh(d: &Dynamo, verb: &str, name: &str, args: &[&str]) {
    let out = Command::new(root().join("scripts/dynamo.sh"))
        .arg(verb)
        .arg(d.state.path())
        .arg(name)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dynamo.sh {verb} {name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`agentx_argv`] with 8 lanes for `duration` s, a live failure threshold, and `extra`.
fn fault_argv(
    d: &Dynamo,
    dir: &Path,
    duration: u32,
    threshold: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args = agentx_argv(d, dir, extra);
    let duration = duration.to_string();
    for (flag, value) in [
        ("--concurrency", "8"),
        ("--benchmark-duration", duration.as_str()),
        ("--failed-request-threshold", threshold),
    ] {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = value.into();
    }
    args
}

/// A run's stdout and stderr, for failure messages.
fn console_of(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Profiling progress with at least `n` requests done (`[   4.0s] done 12 (ok …`).
fn profiled(line: &str, n: u64) -> bool {
    let Some(rest) = line.split("] done ").nth(1) else {
        return false;
    };
    !line.starts_with("[starting]")
        && rest
            .split_whitespace()
            .next()
            .and_then(|d| d.parse::<u64>().ok())
            .is_some_and(|d| d >= n)
}

/// The second of two aggregated workers, by the name `scripts/dynamo.sh` gives it.
const SECOND_WORKER: &str = "worker1-agg";

/// What every fault run must show: one record per request (unique, dense ids; the profiling
/// ones are the summary's count and profile_export's rows), failures only around and after the
/// kill and each with a kind and the server's or the transport's words, requests answered
/// after it (the survivor took them), and the console naming the kinds and when they happened.
fn assert_survived(o: &Output, dir: &Path, killed_at: f64, resumed_at: f64) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let recs: Vec<Value> = std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: BTreeSet<u64> = recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), recs.len(), "one record per request id");
    assert_eq!(
        ids.iter().copied().collect::<Vec<_>>(),
        (0..recs.len() as u64).collect::<Vec<_>>(),
        "ids are dense: no request left without its record"
    );
    let summary = read_json(&dir.join("summary.json"));
    let profiling: Vec<&Value> = recs.iter().filter(|r| r["phase"] == "profiling").collect();
    assert_eq!(
        summary["counts"]["total"].as_u64().unwrap(),
        profiling.len() as u64,
        "summary.json counts every profiling record"
    );
    let start = summary["meta"]["start_unix_s"].as_f64().unwrap();
    let at = |r: &Value, k: &str| start + r[k].as_u64().unwrap_or(0) as f64 / 1e9;
    let failed: Vec<&&Value> = profiling
        .iter()
        .filter(|r| r["outcome"]["status"] == "failed")
        .collect();
    assert!(
        !failed.is_empty(),
        "the killed worker's requests failed\n{stdout}\n{stderr}"
    );
    for r in &failed {
        let kind = r["outcome"]["kind"].as_str().unwrap();
        let error = r["error"].as_str().unwrap_or_default();
        assert!(!error.is_empty(), "a failure names its cause: {r}");
        assert!(
            at(r, "end_ns") >= killed_at - 0.5,
            "{kind} ({error}) ended before the kill: {r}"
        );
    }
    let after = profiling
        .iter()
        .filter(|r| r["outcome"]["status"] == "success" && at(r, "sent_ns") > resumed_at)
        .count();
    assert!(
        after >= 3,
        "requests sent once the deployment could serve again were answered ({after})\n\
         {stdout}\n{stderr}"
    );
    // The console: each kind with its count and its window on the wall clock.
    let console = format!("{stdout}{stderr}");
    assert!(
        console.contains(&format!("{} of ", failed.len())) && console.contains("requests failed:"),
        "{console}"
    );
    for r in &failed {
        assert!(
            console.contains(r["outcome"]["kind"].as_str().unwrap()),
            "{console}"
        );
    }
    assert!(
        console.contains(" UTC (+") && console.contains(" s into the run)"),
        "the console says when: {console}"
    );
    recs
}

/// InferenceX's own post-run validator on the artifacts, when `$SPECPERF_INFERENCEX_DIR` is set,
/// as the stage script runs it (default threshold 10 %): its verdict must be the one the failure
/// rate of the profiling records calls for.
fn assert_inferencex_verdict(dir: &Path, recs: &[Value]) {
    let Some(infx) = std::env::var_os("SPECPERF_INFERENCEX_DIR").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: InferenceX's validate_agentic_result on the fault run's artifacts: \
             SPECPERF_INFERENCEX_DIR is not set"
        );
        return;
    };
    let o = Command::new("python3")
        .args(["-m", "utils.agentic.validation.validate_agentic_result"])
        .arg(dir)
        .args(["--failed-request-threshold", "0.10"])
        .current_dir(&infx)
        .output()
        .unwrap();
    let said = console_of(&o);
    let profiling: Vec<&Value> = recs.iter().filter(|r| r["phase"] == "profiling").collect();
    let failed = profiling
        .iter()
        .filter(|r| r["outcome"]["status"] == "failed")
        .count();
    let rate = failed as f64 / profiling.len() as f64;
    assert_eq!(
        o.status.success(),
        rate <= 0.10,
        "InferenceX's validator at 10 %: {said}"
    );
    eprintln!("InferenceX validate_agentic_result: {}", said.trim());
}

/// Issue 38: one of two workers behind the KV router is SIGKILLed during AgentX profiling. Its
/// in-flight requests end as failures that name the cause (Dynamo ends their streams with an
/// error event), the router's next picks of the dead worker are refused with 503 until it drops
/// it, every other request reaches the survivor, and the run ends on time with every artifact.
/// Every request has one record; Dynamo's own trace holds every one it routed. AgentX session
/// state after a failure follows AIPerf 0.13: a failed turn still advances its conversation
/// (the next turn is sent on schedule; the failure is counted, never retried).
#[test]
fn a_worker_killed_during_agentx_fails_its_requests_by_name_and_the_run_goes_on() {
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let dir = tempfile::tempdir().unwrap();
    // The share that fails depends on how many streams the dead worker held when it died (27 % in
    // one run on a loaded machine): the live abort is not what this test is about.
    let args = fault_argv(&d, dir.path(), 20, "0.95", &[]);
    let (recs, console) = kill_the_second_worker_during(&d, &args, dir.path());
    for f in [
        "profile_export_aiperf.json",
        "profile_export_aiperf.csv",
        "profile_export.jsonl",
        "console.txt",
    ] {
        assert!(dir.path().join(f).is_file(), "{f} written\n{console}");
    }
    assert_inferencex_verdict(dir.path(), &recs);
}

/// Runs `specperf ARGS` against `d`, SIGKILLs its second worker once 8 requests are done, and
/// checks what every kill run must show ([`assert_survived`], exit 0), then that every record is
/// accounted for by Dynamo: a request that reached a worker is in its trace (those cut by the
/// kill too), the rest are the frontend's own 503 refusals. The records and the console.
fn kill_the_second_worker_during(d: &Dynamo, args: &[String], dir: &Path) -> (Vec<Value>, String) {
    // The run's requests in the trace: those received from now on (`up`'s own probe may still
    // be unflushed).
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (o, killed_at) = run_and_act(
        args,
        |l| profiled(l, 8),
        || dynamo_sh(d, "stop", SECOND_WORKER, &["--signal", "KILL"]),
    );
    let console = console_of(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the run goes on to its end\n{console}"
    );
    let recs = assert_survived(&o, dir, killed_at, killed_at + 3.0);
    std::thread::sleep(Duration::from_millis(500));
    let refused = recs.iter().filter(|r| r["http_status"] == 503).count();
    let routed = d
        .trace()
        .iter()
        .filter(|e| e["request"]["request_received_ms"].as_u64() >= Some(since_ms))
        .count();
    assert_eq!(
        routed + refused,
        recs.len(),
        "records = Dynamo's routed requests ({routed}) + its 503s ({refused})\n{console}"
    );
    (recs, console)
}

/// Issue 38, the same kill during a `replay` (the bundled collection, closed loop, 8 streams):
/// the dead worker's streams and the router's next picks of it fail by name, the rest reach the
/// survivor, and every request has one record, which Dynamo's own trace accounts for.
#[test]
fn a_worker_killed_during_a_replay_fails_its_requests_by_name_and_the_run_goes_on() {
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["replay", "--url", &d.url, "--model", &d.model]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(
        [
            "--concurrency",
            "8",
            "--benchmark-duration",
            "20",
            "--osl",
            "64",
            "--failed-request-threshold",
            "0.95",
            "--progress-interval",
            "0.5",
            "--metrics-settle-seconds",
            "0",
            "--artifact-dir",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args.push(dir.path().display().to_string());
    args.push("--server-metrics".into());
    args.extend(d.workers.iter().cloned());
    kill_the_second_worker_during(&d, &args, dir.path());
}

/// Issue 38: a worker that stops answering (SIGSTOP: its sockets stay open, nothing comes back).
/// Each request it holds ends at the request timeout as a `total_timeout` failure that says so,
/// the others keep going on the second worker, every request has one record, and the run ends
/// on time: its duration plus one request timeout (the grace period is longer and stays unused).
#[test]
fn a_worker_that_stops_answering_during_agentx_costs_one_request_timeout_per_request() {
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let dir = tempfile::tempdir().unwrap();
    // Under Dynamo's own 5 s deadline for a request no worker started (it answers 504), so every
    // stalled request ends at this client's timeout.
    let timeout = 4.0;
    // A live abort is not what this test is about (0.95): every request must run to its end.
    let args = fault_argv(
        &d,
        dir.path(),
        15,
        "0.95",
        &["--request-timeout-seconds", &format!("{timeout}")],
    );
    let started = Instant::now();
    let (o, stopped_at) = run_and_act(
        &args,
        |l| profiled(l, 8),
        || dynamo_sh(&d, "stop", SECOND_WORKER, &["--signal", "STOP"]),
    );
    let took = started.elapsed();
    dynamo_sh(&d, "stop", SECOND_WORKER, &["--signal", "CONT"]);
    let console = console_of(&o);
    assert!(o.status.success(), "{console}");
    let recs = assert_survived(&o, dir.path(), stopped_at, stopped_at + 3.0);
    for r in recs.iter().filter(|r| r["outcome"]["status"] == "failed") {
        assert_eq!(r["outcome"]["kind"], "total_timeout", "{r}\n{console}");
        let held = (r["end_ns"].as_u64().unwrap() - r["sent_ns"].as_u64().unwrap()) as f64 / 1e9;
        assert!(
            (timeout..timeout + 1.0).contains(&held),
            "ended at the request timeout ({held:.2} s): {r}"
        );
    }
    // Warmup (~15 s here) + 15 s + one timeout, with room for a loaded machine.
    assert!(
        took < scaled(Duration::from_secs(75)),
        "the run ended on time: {took:?}\n{console}"
    );
    assert_inferencex_verdict(dir.path(), &recs);
}

/// Issue 38: the frontend is killed during AgentX profiling and started again 3 s later. While it
/// is down every request fails at once (connection refused: a `connect` failure, no wait for a
/// timeout), the streams it was carrying end as cut connections, and once it serves again the
/// lanes' requests are answered; every request has one record and the run ends on time.
#[test]
fn a_frontend_restarted_during_agentx_fails_requests_fast_and_the_run_resumes() {
    let d = Dynamo::up(&["--workers", "2", "--router", "kv"]);
    let dir = tempfile::tempdir().unwrap();
    // Lanes whose turns fail at once move on at once: the share of failures is not the point.
    let args = fault_argv(
        &d,
        dir.path(),
        25,
        "0.95",
        &["--request-timeout-seconds", "30"],
    );
    let back = Mutex::new(0.0);
    let (o, down_at) = run_and_act(
        &args,
        |l| profiled(l, 8),
        || {
            dynamo_sh(&d, "stop", "frontend", &["--signal", "KILL"]);
            std::thread::sleep(Duration::from_secs(3));
            dynamo_sh(&d, "start", "frontend", &[]);
            *back.lock().unwrap() = unix_now();
        },
    );
    let back = *back.lock().unwrap();
    let console = console_of(&o);
    assert!(o.status.success(), "{console}");
    let recs = assert_survived(&o, dir.path(), down_at, back);
    let start = read_json(&dir.path().join("summary.json"))["meta"]["start_unix_s"]
        .as_f64()
        .unwrap();
    let at = |r: &Value, k: &str| start + r[k].as_u64().unwrap_or(0) as f64 / 1e9;
    let refused: Vec<&Value> = recs
        .iter()
        .filter(|r| r["outcome"]["kind"] == "connect")
        .collect();
    assert!(
        !refused.is_empty(),
        "requests sent while the frontend was down were refused\n{console}"
    );
    for r in &refused {
        let held = at(r, "end_ns") - at(r, "sent_ns");
        assert!(
            held < 1.0,
            "a refused connect fails at once ({held:.2} s): {r}"
        );
        assert!(
            at(r, "sent_ns") >= down_at - 0.5 && at(r, "end_ns") <= back + 1.0,
            "refused only while the frontend was down: {r}"
        );
    }
    assert_inferencex_verdict(dir.path(), &recs);
}
