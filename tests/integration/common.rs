//! Helpers shared by the topic modules.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use serde_json::{Map, Value};
use specperf::sim::{SimConfig, SimHandle, Simulator};
use specperf::{Cli, Command, Progress, RunConfig, RunOutcome, Stopper};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A simulator on 127.0.0.1:0 with `cfg` (host and port forced to loopback / ephemeral).
pub(crate) fn sim(cfg: SimConfig) -> SimHandle {
    Simulator::spawn(SimConfig {
        port: 0,
        host: [127, 0, 0, 1].into(),
        ..cfg
    })
    .expect("simulator starts")
}

/// A fast simulator: 1 ms TTFT, 0.2 ms per step.
pub(crate) fn fast() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(1),
        itl: Duration::from_micros(200),
        ..SimConfig::default()
    }
}

/// Parses `specperf replay <args>` into a validated config.
pub(crate) fn config(args: &[&str]) -> RunConfig {
    // The simulator's counters are exact at once: no settle wait before the final scrape.
    let mut argv = vec![
        "specperf",
        "replay",
        "--progress-interval",
        "0",
        "--metrics-settle-seconds",
        "0",
    ];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("flags parse: {e}"));
    let Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    RunConfig::from_args(&a).unwrap_or_else(|e| panic!("config valid: {e}"))
}

/// The factor every wall-clock bound in these tests is multiplied by: `SPECPERF_TEST_TIME_SCALE`,
/// 1 unless set. The aarch64 CI leg runs the suite under qemu user-mode emulation, several times
/// slower than native, and sets it to 4: the same bounded assertions, scaled, rather than skips.
pub(crate) fn time_scale() -> u32 {
    std::env::var("SPECPERF_TEST_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

/// `d` times [`time_scale`].
pub(crate) fn scaled(d: Duration) -> Duration {
    d * time_scale()
}

/// Runs a replay, bounded by 60 s of wall clock (times the time scale).
pub(crate) async fn run(cfg: RunConfig) -> RunOutcome {
    run_with(cfg, Stopper::new()).await
}

/// Runs a replay with a given stopper.
pub(crate) async fn run_with(cfg: RunConfig, stop: Stopper) -> RunOutcome {
    let (tx, _rx) = tokio::sync::watch::channel(Progress::default());
    tokio::time::timeout(
        scaled(Duration::from_secs(60)),
        specperf::replay(cfg, stop, tx),
    )
    .await
    .expect("run finishes within 60 s (times SPECPERF_TEST_TIME_SCALE)")
    .expect("run starts")
}

/// Every line of `records.jsonl`, parsed (fails the test on a bad line).
pub(crate) fn records(dir: &Path) -> Vec<Value> {
    jsonl(&dir.join("records.jsonl"))
}

/// The failure kind of a record (`None` for success / cancelled).
pub(crate) fn kind(r: &Value) -> Option<&str> {
    r["outcome"]["kind"].as_str()
}

/// Replays against `url` with artifacts in `dir`; `args` are further flags, whitespace-separated.
pub(crate) async fn replay_at(url: &str, dir: &str, args: &str) -> RunOutcome {
    Replay::at(url).dir(dir).args(args).run().await.out
}

/// A replay's command line: `--url` a server (a fresh simulator with [`Replay::sim`]),
/// `--artifact-dir` `run/` in a fresh temporary directory unless [`Replay::dir`] names one, then
/// the flags. The temporary directory (inputs, artifacts) lives as long as the replay's
/// [`Artifacts`].
///
/// ```ignore
/// let Replayed { out, dir } = Replay::sim(fast()).args("--request-count 8").run().await;
/// assert_eq!(out.summary.counts.success, 8);
/// let summary = dir.summary();
/// ```
pub(crate) struct Replay {
    url: String,
    _sim: Option<SimHandle>,
    dir: Artifacts,
    args: Vec<String>,
}

impl Replay {
    /// Against a fresh simulator with `cfg` (on loopback, as [`sim`]), which ends with the run.
    pub(crate) fn sim(cfg: SimConfig) -> Replay {
        let s = sim(cfg);
        let r = Replay::at(&s.url());
        Replay { _sim: Some(s), ..r }
    }

    /// Against the server at `url`.
    pub(crate) fn at(url: &str) -> Replay {
        let tmp = tempfile::tempdir().unwrap();
        Replay {
            url: url.to_owned(),
            _sim: None,
            dir: Artifacts {
                path: tmp.path().join("run"),
                tmp,
            },
            args: Vec::new(),
        }
    }

    /// Artifacts in `dir` instead of the temporary `run/`.
    pub(crate) fn dir(mut self, dir: impl Into<PathBuf>) -> Replay {
        self.dir.path = dir.into();
        self
    }

    /// `--input-file`: `text` written as `name` in the temporary directory.
    pub(crate) fn input_file(self, name: &str, text: &str) -> Replay {
        let path = self.dir.tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        self.arg("--input-file").arg(path)
    }

    /// Further flags, whitespace-separated.
    pub(crate) fn args(mut self, flags: &str) -> Replay {
        self.args
            .extend(flags.split_whitespace().map(str::to_owned));
        self
    }

    /// One more argument, kept whole (a path, a value with spaces).
    pub(crate) fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Replay {
        let arg = arg.as_ref().to_str().expect("a UTF-8 argument");
        self.args.push(arg.to_owned());
        self
    }

    /// The flags after `specperf replay`.
    pub(crate) fn argv(&self) -> Vec<&str> {
        let dir = self.dir.to_str().expect("a UTF-8 artifact dir");
        let mut argv = vec!["--url", &self.url, "--artifact-dir", dir];
        argv.extend(self.args.iter().map(String::as_str));
        argv
    }

    /// The validated config (as [`config`]); a temporary artifact dir lives as long as `self`.
    pub(crate) fn config(&self) -> RunConfig {
        config(&self.argv())
    }

    /// Runs the replay (as [`run`]).
    pub(crate) async fn run(self) -> Replayed {
        let out = run(self.config()).await;
        Replayed { out, dir: self.dir }
    }
}

/// What a [`Replay`] ran: its outcome and its artifacts.
pub(crate) struct Replayed {
    pub(crate) out: RunOutcome,
    pub(crate) dir: Artifacts,
}

/// An artifact directory (a `Path`, kept while this lives), with readers of the files a replay
/// writes there; each fails the test naming the file.
pub(crate) struct Artifacts {
    path: PathBuf,
    tmp: tempfile::TempDir,
}

impl std::ops::Deref for Artifacts {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Artifacts {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl Artifacts {
    /// The directory (as `TempDir::path`).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `records.jsonl`.
    pub(crate) fn records(&self) -> Vec<Value> {
        records(self)
    }

    /// `profile_export.jsonl`: AIPerf's record per request.
    pub(crate) fn profile_export(&self) -> Vec<Value> {
        jsonl(&self.join("profile_export.jsonl"))
    }

    /// `summary.json`.
    pub(crate) fn summary(&self) -> Value {
        read_json(&self.join("summary.json"))
    }

    /// `profile_export_aiperf.json`.
    pub(crate) fn aiperf(&self) -> Value {
        read_json(&self.join("profile_export_aiperf.json"))
    }

    /// `server_metrics_export.json`.
    pub(crate) fn server_metrics(&self) -> Value {
        read_json(&self.join("server_metrics_export.json"))
    }

    /// Any file of the directory, as text.
    pub(crate) fn text(&self, name: &str) -> String {
        let path = self.join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// `specperf replay <args>` as a process, run to its end (stdout discarded).
pub(crate) fn replay_process(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_specperf"))
        .arg("replay")
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `cmd` run to its end; fails the test, showing its stderr, unless it succeeded.
pub(crate) fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every line of a JSON Lines file, parsed.
pub(crate) fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// One scripted answer of a fake metrics endpoint.
#[derive(Clone)]
pub(crate) struct Page {
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
    pub(crate) delay: Duration,
}

pub(crate) fn text(body: String) -> Page {
    Page {
        content_type: "text/plain; version=0.0.4; charset=utf-8",
        body,
        delay: Duration::ZERO,
    }
}

/// A metrics endpoint on 127.0.0.1:0 that answers its n-th GET with `pages[n]` (the last page
/// repeats). Returns its URL and the number of GETs served.
pub(crate) async fn fake_metrics(pages: Vec<Page>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let page = pages[n.min(pages.len() - 1)].clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => got.extend_from_slice(&buf[..k]),
                    }
                }
                tokio::time::sleep(page.delay).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.content_type,
                    page.body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(page.body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (url, hits)
}

/// Waits for a child process, killing it and failing the test after `limit`.
pub(crate) fn wait_exit(
    child: &mut std::process::Child,
    limit: Duration,
) -> std::process::ExitStatus {
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` with stdout and stderr piped (each read on its own thread, so neither pipe fills),
/// killing it and failing the test after `limit`; returns (exit code, stdout, stderr).
pub(crate) fn output_within(
    cmd: &mut std::process::Command,
    limit: Duration,
) -> (Option<i32>, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let o = read(Box::new(child.stdout.take().unwrap()));
    let e = read(Box::new(child.stderr.take().unwrap()));
    let status = wait_exit(&mut child, limit);
    (status.code(), o.join().unwrap(), e.join().unwrap())
}

/// A self-signed certificate for `names`, written as PEM files into `dir`.
pub(crate) fn self_signed(dir: &Path, names: &[&str]) -> specperf::sim::TlsFiles {
    let ck =
        rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    specperf::sim::TlsFiles { cert, key }
}

/// A JSON file, parsed (fails the test naming the file).
pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A committed schema, `schemas/<name>`.
pub(crate) fn schema(name: &str) -> Value {
    read_json(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("schemas")
            .join(name),
    )
}

/// Where `v` departs from the committed schema `schemas/<name>` (empty: it conforms).
pub(crate) fn schema_errors(name: &str, v: &Value) -> Vec<String> {
    let schema = schema(name);
    let mut errors = Vec::new();
    validate(&schema, &schema, v, "", &mut errors);
    errors
}

/// A validator for the subset of JSON Schema (2020-12) that the committed schemas use. Unknown
/// keywords fail, so a schema cannot drift outside what is checked here.
fn validate(root: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        return errors.push(format!("{at}: schema is not an object"));
    };
    for (k, want) in s {
        match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            // An annotation in 2020-12 unless a vocabulary asserts it; the gate's timestamps are
            // checked by their own tests.
            "format" => {}
            "$ref" => {
                let name = want.as_str().unwrap().trim_start_matches("#/$defs/");
                validate(root, &root["$defs"][name], v, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match want {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(a) => a.iter().map(|t| t.as_str().unwrap()).collect(),
                    _ => panic!("bad type keyword at {at}"),
                };
                let ok = types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "number" => v.is_number(),
                    "integer" => v.is_u64() || v.is_i64(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    other => panic!("unknown type {other}"),
                });
                if !ok {
                    errors.push(format!("{at}: {v} is not of type {want}"));
                }
            }
            "const" if v != want => errors.push(format!("{at}: {v} != {want}")),
            "const" => {}
            "enum" => {
                if !want.as_array().unwrap().contains(v) {
                    errors.push(format!("{at}: {v} not in {want}"));
                }
            }
            "minimum" => {
                if v.as_f64().is_some_and(|x| x < want.as_f64().unwrap()) {
                    errors.push(format!("{at}: {v} < {want}"));
                }
            }
            "maximum" => {
                if v.as_f64().is_some_and(|x| x > want.as_f64().unwrap()) {
                    errors.push(format!("{at}: {v} > {want}"));
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for r in want.as_array().unwrap() {
                        if !o.contains_key(r.as_str().unwrap()) {
                            errors.push(format!("{at}: missing {r}"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (name, sub) in want.as_object().unwrap() {
                        if let Some(x) = o.get(name) {
                            validate(root, sub, x, &format!("{at}/{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                let known: Map<String, Value> = s
                    .get("properties")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if let Some(o) = v.as_object() {
                    for (name, x) in o.iter().filter(|(n, _)| !known.contains_key(*n)) {
                        match want {
                            Value::Bool(false) => {
                                errors.push(format!("{at}: unexpected property {name}"))
                            }
                            Value::Bool(true) => {}
                            sub => validate(root, sub, x, &format!("{at}/{name}"), errors),
                        }
                    }
                }
            }
            "propertyNames" => {
                if let Some(o) = v.as_object() {
                    for name in o.keys() {
                        validate(root, want, &Value::from(name.as_str()), at, errors);
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    for (i, x) in a.iter().enumerate() {
                        validate(root, want, x, &format!("{at}/{i}"), errors);
                    }
                }
            }
            "anyOf" => {
                let ok = want.as_array().unwrap().iter().any(|sub| {
                    let mut e = Vec::new();
                    validate(root, sub, v, at, &mut e);
                    e.is_empty()
                });
                if !ok {
                    errors.push(format!("{at}: matches no anyOf branch"));
                }
            }
            other => panic!("schema keyword {other} at {at} is outside the validated subset"),
        }
    }
}

/// Sends SIGTERM to `child` and waits for it to exit (failing the test after `limit`).
pub(crate) fn terminate(
    child: &mut std::process::Child,
    limit: Duration,
) -> std::process::ExitStatus {
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_exit(child, limit)
}

/// Runs a replay that must fail before its first request; returns the error. `expect` says why
/// it must fail (the test's message when it does not).
pub(crate) async fn replay_err(cfg: RunConfig, expect: &str) -> specperf::EngineError {
    let (tx, _rx) = tokio::sync::watch::channel(Progress::default());
    specperf::replay(cfg, Stopper::new(), tx)
        .await
        .err()
        .expect(expect)
}

/// The machine to one of the tests that either load it heavily (the AIPerf conformance check's
/// Python and browser, a real llama-server) or bound wall-clock times tightly (the fault matrix,
/// the schedule check): they never run beside each other. Hold the guard for the whole test
/// (each test has its own runtime, so waiting blocks only its own thread).
pub(crate) fn exclusive() -> Exclusive {
    let (busy, freed) = &EXCLUSIVE;
    let mut b = busy.lock().unwrap_or_else(|e| e.into_inner());
    while *b {
        b = freed.wait(b).unwrap_or_else(|e| e.into_inner());
    }
    *b = true;
    Exclusive
}

static EXCLUSIVE: (std::sync::Mutex<bool>, std::sync::Condvar) =
    (std::sync::Mutex::new(false), std::sync::Condvar::new());

/// Held by the test that has the machine; released on drop (also when the test panics).
pub(crate) struct Exclusive;

impl Drop for Exclusive {
    fn drop(&mut self) {
        let (busy, freed) = &EXCLUSIVE;
        *busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        freed.notify_one();
    }
}

/// Opens a streaming chat request (`body`) that the simulator at `url` stalls halfway
/// (`stall-mid-stream`) and reads until its first token: it holds its running slot until the
/// returned socket is dropped.
pub(crate) fn held_stream(url: &str, body: &Value) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let addr = url.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(scaled(Duration::from_secs(30))))
        .unwrap();
    let body = body.to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         x-specperf-fault: stall-mid-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the first token");
        seen.extend_from_slice(&buf[..n]);
    }
    s
}

/// The DOM of the local page `page` as headless Chromium builds it (`--dump-dom`, bounded by
/// 60 s), or `None`, after a SKIPPED line on stderr, where no `/usr/bin/chromium` (or
/// `chromium-browser`) is installed.
pub(crate) fn browser_dom(page: &Path) -> Option<String> {
    use std::process::Stdio;
    let Some(chromium) = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!(
            "SKIPPED: headless Chromium check of {}: no /usr/bin/chromium \
             (apt-get install -y chromium to run it)",
            page.file_name()
                .unwrap_or(page.as_os_str())
                .to_string_lossy()
        );
        return None;
    };
    let profile = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!(
            "file://{}",
            std::path::absolute(page).unwrap().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = child.wait_with_output().unwrap().stdout;
    Some(String::from_utf8_lossy(&dom).into_owned())
}

/// The DeepSeek-V4 `tokenizer.json` (a missing one fails with its set-up command).
pub(crate) fn tokenizer_path() -> std::path::PathBuf {
    crate::tools::Tool::Dsv4Tokenizer.path()
}

/// "Another client's" request held open on a server while a sweep's drain wait polls it: counts
/// the polls that saw a request running and lets the request go on the `release_after`-th.
pub(crate) struct Backlog {
    held: Option<std::net::TcpStream>,
    /// Polls that saw a request running.
    pub(crate) busy_polls: u32,
    release_after: u32,
}

impl Backlog {
    pub(crate) fn new(release_after: u32) -> Backlog {
        Backlog {
            held: None,
            busy_polls: 0,
            release_after,
        }
    }

    /// Holds `stream` (the request, started) until the wait has seen it enough.
    pub(crate) fn hold(&mut self, stream: std::net::TcpStream) {
        self.held = Some(stream);
    }

    /// Neither held nor yet seen: the first point is still running.
    pub(crate) fn not_started(&self) -> bool {
        self.held.is_none() && self.busy_polls == 0
    }

    /// One drain poll: counts it when something was running, and drops the request once the
    /// wait has seen it `release_after` times.
    pub(crate) fn on_poll(&mut self, p: &specperf::scrape::DrainPoll) {
        let running: u64 = p.endpoints.iter().filter_map(|e| e.running).sum();
        if running > 0 {
            self.busy_polls += 1;
            if self.busy_polls == self.release_after {
                self.held = None;
            }
        }
    }
}

/// InferenceX's AgentX argv (`benchmark_lib.sh build_replay_cmd`, spec §1.5) against `url` on
/// the fixture traces, a `duration`-second run with t* pinned to the middle of every trace
/// (equal start ratios) and a 3 s system idle cap (hence `--unsafe-override`): the same argv
/// for `specperf profile` and `aiperf profile` (AIPerf wants [`aiperf_tokenizer_dir`]).
pub(crate) fn agentx_argv(url: &str, out: &Path, duration: u32, tokenizer: &Path) -> Vec<String> {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentx/traces");
    let mut v: Vec<String> = [
        "--scenario",
        "inferencex-agentx-mvp",
        "--url",
        url,
        "--endpoint",
        "/v1/chat/completions",
        "--endpoint-type",
        "chat",
        "--streaming",
        "--model",
        "specperf-sim",
        "--concurrency",
        "3",
        "--stats-interval",
        "30",
        "--random-seed",
        "42",
        "--failed-request-threshold",
        "0.25",
        "--trajectory-start-min-ratio",
        "0.5",
        "--trajectory-start-max-ratio",
        "0.5",
        "--warmup-grace-period",
        "120",
        "--use-server-token-count",
        "--no-gpu-telemetry",
        "--tokenizer-trust-remote-code",
        "--slice-duration",
        "1.0",
        "--unsafe-override",
        "--system-idle-gap-cap-seconds",
        "3",
        "--custom-dataset-type",
        "weka_trace",
    ]
    .map(String::from)
    .to_vec();
    v.extend([
        "--benchmark-duration".into(),
        duration.to_string(),
        "--output-artifact-dir".into(),
        out.display().to_string(),
        "--input-file".into(),
        traces.display().to_string(),
        "--tokenizer".into(),
        tokenizer.display().to_string(),
    ]);
    v
}

/// The fixture tokenizer as the Hugging Face directory AIPerf 0.13 reads, under `dir`.
pub(crate) fn aiperf_tokenizer_dir(dir: &Path) -> std::path::PathBuf {
    let tok = dir.join("tok");
    std::fs::create_dir_all(&tok).unwrap();
    std::fs::copy(tokenizer_path(), tok.join("tokenizer.json")).unwrap();
    std::fs::write(
        tok.join("tokenizer_config.json"),
        r#"{"tokenizer_class":"PreTrainedTokenizerFast"}"#,
    )
    .unwrap();
    tok
}

/// A bare HTTP/1.0 exchange with a loopback URL: status and body.
pub(crate) fn http(url: &str, method: &str, body: Option<&str>) -> Option<(u16, String)> {
    let rest = url.strip_prefix("http://")?;
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    use std::io::{Read, Write};
    s.write_all(req.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((
        head.split_whitespace().nth(1)?.parse().ok()?,
        body.to_owned(),
    ))
}
