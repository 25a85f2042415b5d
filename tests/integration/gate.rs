//! `specperf gate` end to end: the binary against the simulator, one test per verdict and
//! reason, each checking the result file and exit code 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use specperf::sim::{Acceptance, SimConfig, SimHandle};

use crate::common::{
    fake_metrics, fast, output_ok, read_json, schema, schema_errors, sim, terminate, text,
};

/// Environment the gate reads; cleared so the host's variables never leak into a test.
const GATE_ENV: &[&str] = &[
    "MODEL_NAME",
    "MODEL",
    "AL_GATE_GOLDEN",
    "AL_GATE_COLLECTION_METADATA",
    "MODEL_PREFIX",
    "SPEC_DECODING",
    "DRAFT_MODEL",
    "DRAFT_SAMPLE_METHOD",
    "THINKING_MODE",
    "NUM_SPEC_TOKENS",
    "FRAMEWORK",
    "DYNAMO_BACKEND_FRAMEWORK",
    "RESULT_FILENAME",
    "RESULT_DIR",
    "AL_GATE_TIMEOUT_S",
    "AL_GATE_SETTLE_S",
    "AL_GATE_CONCURRENCY",
    "AL_GATE_EXPECTED_ENGINES",
    "SPEEDBENCH_DIR",
    "PORT",
    "SPEEDBENCH_DECODE_METRICS_URLS",
    "SPEEDBENCH_METRICS_URLS",
    "AIPERF_SERVER_METRICS_URLS",
    "SPEEDBENCH_METRICS_PORTS",
    "SPEEDBENCH_TRTLLM_JSON_METRICS_URLS",
];

/// A gate workspace: 80 coding prompts, a golden directory with one curve (golden AL 2.5 at
/// thinking_on k = 3, with a collection block; thinking_off without kwargs) and a result dir.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let rows: String = (0..80)
            .map(|i| {
                format!(
                    "{{\"question_id\": \"q{i}\", \"category\": \"coding\", \"messages\": [{{\"role\": \"user\", \"content\": \"Write function number {i}.\"}}]}}\n"
                )
            })
            .chain(std::iter::once(
                "{\"question_id\": \"m0\", \"category\": \"math\", \"messages\": [{\"role\": \"user\", \"content\": \"1+1\"}]}\n".to_owned(),
            ))
            .collect();
        std::fs::write(dir.path().join("qualitative.jsonl"), rows).unwrap();
        std::fs::create_dir(dir.path().join("golden")).unwrap();
        std::fs::write(
            dir.path().join("golden/testm_mtp.yaml"),
            "test-model:\n  thinking_on:\n    3: 2.5\n  thinking_off:\n    3: 2.9\n\
             collection:\n  dataset: speed_bench\n  category: coding\n  num_prompts: 80\n\
             \x20 endpoint: completions\n  renderer: deepseek_v4\n  output_len: 128\n\
             \x20 sampling:\n    temperature: 1.0\n  chat_template_kwargs:\n    thinking_on: {\"thinking\": true}\n\
             \x20 concurrency: 64\n  seed: 0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("golden/plain_mtp.yaml"),
            "plain-model:\n  thinking_on:\n    3: 2.5\n",
        )
        .unwrap();
        Setup { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `specperf gate` with the standard inputs plus `extra` (flag/value pairs that replace a
    /// default or add a flag; an empty value removes the flag) and `envs`, run in the workspace.
    fn command(&self, url: &str, extra: &[&str], envs: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_specperf"));
        cmd.current_dir(self.dir.path());
        for k in GATE_ENV {
            cmd.env_remove(k);
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut args: Vec<(String, String)> = [
            ("--url", url),
            ("--model", "specperf-sim"),
            ("--golden", self.path("golden").to_str().unwrap()),
            ("--model-prefix", "testm"),
            ("--spec-method", "mtp"),
            ("--thinking-mode", "thinking_on"),
            ("--num-spec-tokens", "3"),
            ("--framework", "vllm"),
            ("--result-filename", "case"),
            ("--result-dir", self.path("results").to_str().unwrap()),
            (
                "--input-file",
                self.path("qualitative.jsonl").to_str().unwrap(),
            ),
            ("--settle-seconds", "0"),
            ("--timeout-seconds", "60"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for pair in extra.chunks(2) {
            match args.iter_mut().find(|(k, _)| k == pair[0]) {
                Some(slot) => slot.1 = pair[1].to_owned(),
                None => args.push((pair[0].to_owned(), pair[1].to_owned())),
            }
        }
        cmd.arg("gate");
        for (k, v) in args.into_iter().filter(|(_, v)| !v.is_empty()) {
            cmd.arg(k).arg(v);
        }
        cmd
    }

    /// Runs `specperf gate` (see [`Setup::command`]); returns the output, the result file
    /// (parsed) and the wall time.
    fn gate(&self, url: &str, extra: &[&str]) -> (Output, Value, Duration) {
        let t = Instant::now();
        let out = self.command(url, extra, &[]).output().unwrap();
        let elapsed = t.elapsed();
        (out, self.result(), elapsed)
    }

    fn result(&self) -> Value {
        let p = self.path("results/al_gate_case.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(text.ends_with("}\n"), "trailing newline");
        serde_json::from_str(&text).unwrap()
    }
}

fn sim_at(al: f64) -> SimHandle {
    sim(sim_at_config(al))
}

fn sim_at_config(al: f64) -> SimConfig {
    SimConfig {
        k: 3,
        acceptance: Acceptance::MeanAl(al),
        ..fast()
    }
}

/// [`sim_at`] 2.5 with 50 ms steps: a long stream outlasts a short gate budget.
fn slow_sim() -> SimHandle {
    sim(SimConfig {
        itl: Duration::from_millis(50),
        ..sim_at_config(2.5)
    })
}

fn assert_verdict(out: &Output, r: &Value, verdict: &str, reason: Option<&str>) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "report-only: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["verdict"], verdict, "{r:#}");
    assert_eq!(r["reason"].as_str(), reason, "{r:#}");
    assert_eq!(r["passed"], verdict == "pass");
    assert_eq!(r["speedbench_al_eval_version"], 1);
    assert_eq!(r["task"], "speedbench_al");
    // One line per verdict: its name, the measured AL, the band, and for a skip or an error
    // the reason code with its text.
    let first = stdout.lines().next().unwrap_or("");
    let status = format!("{}: SpeedBench AL ", verdict.to_uppercase());
    assert!(first.starts_with(&status), "{first}");
    assert!(!first.contains("None"), "{first}");
    if let Some(al) = r["acceptance_length"].as_f64() {
        assert!(first.contains(&format!("{al:.4}")), "{first}");
    }
    if let (Some(lo), Some(hi)) = (
        r["min_acceptance_length"].as_f64(),
        r["max_acceptance_length"].as_f64(),
    ) {
        assert!(first.contains(&format!("[{lo:.4}, {hi:.4}]")), "{first}");
    }
    if let Some(code) = reason {
        let text = r["error"].as_str().expect("error text");
        assert!(first.contains(&format!("{code}: {text}")), "{first}");
    }
    assert_schema(r);
}

/// The committed JSON Schema accepts the file: required keys present, declared types match,
/// no undeclared keys.
fn assert_schema(r: &Value) {
    assert_eq!(schema_errors("al_gate.v1.json", r), Vec::<String>::new());
}

#[test]
fn pass_within_the_band_with_the_m1_fields() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    let (out, r, _) = setup.gate(&s.url(), &[]);
    assert_verdict(&out, &r, "pass", None);
    // Progress of the replay on stderr, ending with every prompt done.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("AL gate replay: ") && l.contains(" done 80/80 ")),
        "{stderr}"
    );
    let al = r["acceptance_length"].as_f64().unwrap();
    assert!((2.375..=2.625).contains(&al));
    let t = s.totals();
    // Exactly the simulator's counters over the window, rounded to 4 decimals.
    let exact = 1.0 + t.accepted as f64 / t.drafts as f64;
    assert_eq!(al, format!("{exact:.4}").parse::<f64>().unwrap());
    assert_eq!(r["verify_steps"], t.drafts);
    assert_eq!(r["draft_tokens"], t.drafts);
    assert_eq!(r["accepted_tokens"], t.accepted);
    assert_eq!(r["proposed_draft_tokens"], t.draft_tokens);
    assert_eq!(
        (
            r["min_acceptance_length"].as_f64(),
            r["max_acceptance_length"].as_f64()
        ),
        (Some(2.375), Some(2.625))
    );
    assert_eq!(r["reference_acceptance_length"], 2.5);
    assert_eq!(r["metric_source"], "vllm-prometheus-counters-endpoints1");
    assert_eq!(
        (
            r["prompts_expected"].as_u64(),
            r["prompts_completed"].as_u64()
        ),
        (Some(80), Some(80))
    );
    assert_eq!(r["endpoint_kind"], "completions");
    assert_eq!(r["per_position_acceptance"].as_array().unwrap().len(), 3);
    // What was sent: the V4 wrapper's rendering with the block's kwargs, its sampling, max_tokens.
    assert_eq!(t.requests_success, 80);
}

#[test]
fn below_and_above_the_band() {
    let setup = Setup::new();
    let low = sim_at(2.0);
    let (out, r, _) = setup.gate(&low.url(), &[]);
    assert_verdict(&out, &r, "below", None);
    assert!(r["acceptance_length"].as_f64().unwrap() < 2.375);
    let high = sim_at(3.0);
    let (out, r, _) = setup.gate(&high.url(), &[]);
    assert_verdict(&out, &r, "above", None);
    assert!(r["acceptance_length"].as_f64().unwrap() > 2.625);
}

/// Probe: a gate skipped because no speculative method is set says which setting did it (with
/// the server down, "speculative decoding disabled" alone read as a verdict on the server).
#[test]
fn a_disabled_spec_method_names_the_setting_that_skipped_the_gate() {
    let setup = Setup::new();
    for method in ["none", ""] {
        let (out, r, _) = setup.gate("http://127.0.0.1:1", &["--spec-method", method]);
        assert_verdict(&out, &r, "skipped", Some("spec_decoding_disabled"));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains("--spec-method") && said.contains("SPEC_DECODING"),
            "{method:?}: {said}"
        );
    }
}

#[test]
fn skipped_reasons_need_no_replay() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    let (out, r, _) = setup.gate(&s.url(), &["--spec-method", "none"]);
    assert_verdict(&out, &r, "skipped", Some("spec_decoding_disabled"));
    let (out, r, _) = setup.gate(&s.url(), &["--framework", "tilert"]);
    assert_verdict(&out, &r, "skipped", Some("tilert"));
    assert!(r["acceptance_length"].is_null());
    let (out, r, _) = setup.gate(
        &s.url(),
        &["--input-file", setup.path("absent.jsonl").to_str().unwrap()],
    );
    assert_verdict(&out, &r, "skipped", Some("no_prompts"));
    let (out, r, _) = setup.gate(&s.url(), &["--model-prefix", "plain"]);
    assert_verdict(
        &out,
        &r,
        "skipped",
        Some("curve_without_collection_metadata"),
    );
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("plain_mtp/thinking_on"));
    // A mode without recorded kwargs is unknowable too (contract OQ-2).
    let (out, r, _) = setup.gate(&s.url(), &["--thinking-mode", "thinking_off"]);
    assert_verdict(
        &out,
        &r,
        "skipped",
        Some("curve_without_collection_metadata"),
    );
    assert_eq!(
        s.totals().requests_success,
        0,
        "no request was sent for a skip"
    );
}

#[test]
fn the_committed_collection_metadata_makes_old_curves_runnable() {
    let s = sim_at(2.49);
    let setup = Setup::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // dsv4_mtp has no block; collections/dsv4_mtp.yaml supplies the §3 settings (4096 tokens,
    // 80 coding prompts, the V4 encoder).
    let (out, r, _) = setup.gate(
        &s.url(),
        &[
            "--golden",
            root.join("tests/fixtures/golden").to_str().unwrap(),
            "--collection-metadata",
            root.join("collections").to_str().unwrap(),
            "--model-prefix",
            "dsv4",
        ],
    );
    assert_verdict(&out, &r, "pass", None);
    assert_eq!(r["curve"], "dsv4_mtp");
    assert_eq!(r["output_len"], 4096);
    assert_eq!(r["collection_concurrency"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_counters_and_leader_only_dp_metrics_are_skips() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    let (plain, _) = fake_metrics(vec![text(
        "# TYPE dynamo_frontend_requests_total counter\ndynamo_frontend_requests_total 3\n".into(),
    )])
    .await;
    let url = s.url();
    let (out, r) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let (o, r, _) = setup.gate(&url, &["--server-metrics", &plain]);
            (o, r, setup)
        }
    })
    .await
    .map(|(o, r, _)| (o, r))
    .unwrap();
    assert_verdict(&out, &r, "skipped", Some("no_counters"));
    // One server with two engines is not the four engines the deployment has.
    let dp = sim(SimConfig {
        engines: 2,
        k: 3,
        acceptance: Acceptance::MeanAl(2.5),
        ..fast()
    });
    let setup = Setup::new();
    let (out, r) = tokio::task::spawn_blocking(move || {
        let (o, r, _) = setup.gate(
            &dp.url(),
            &[
                "--framework",
                "dynamo",
                "--dynamo-backend",
                "vllm",
                "--expected-engines",
                "4",
            ],
        );
        (o, r)
    })
    .await
    .unwrap();
    assert_verdict(&out, &r, "skipped", Some("leader_only_dp_metrics"));
    assert!(r["error"].as_str().unwrap().contains("(2/4 engines)"));
}

#[test]
fn unreachable_server_and_metrics_are_errors() {
    let setup = Setup::new();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (out, r, _) = setup.gate(&closed, &[]);
    assert_verdict(&out, &r, "error", Some("metrics_unreachable"));
    // Metrics fine, inference server gone: the requests fail.
    let s = sim_at(2.5);
    let (out, r, _) = setup.gate(
        &closed,
        &["--server-metrics", &format!("{}/metrics", s.url())],
    );
    assert_verdict(&out, &r, "error", Some("client_failed"));
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("of 80 SPEED-Bench requests failed"));
}

/// The counters are the gate's point: a scrape task that panics is an error result naming it,
/// not a "no scrape report".
#[test]
fn a_panicking_scrape_is_an_error_naming_the_panic() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    let out = setup
        .command(&s.url(), &[], &[("SPECPERF_PANIC_IN", "scrape")])
        .output()
        .unwrap();
    let r = setup.result();
    assert_verdict(&out, &r, "error", Some("internal"));
    let error = r["error"].as_str().unwrap();
    assert!(
        error.starts_with("the /metrics scrape task panicked: SPECPERF_PANIC_IN=scrape"),
        "{error}"
    );
}

#[test]
fn bad_configuration_is_an_error_result_not_a_crash() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    let (out, r, _) = setup.gate(&s.url(), &["--timeout-seconds", "soon"]);
    assert_verdict(&out, &r, "error", Some("config_invalid"));
    let (out, r, _) = setup.gate(&s.url(), &["--num-spec-tokens", "9"]);
    assert_verdict(&out, &r, "error", Some("no_golden_curve"));
}

#[test]
fn the_deadline_ends_the_gate_with_a_timeout_result() {
    // 4096-token streams at 50 ms per step never finish inside a 2 s budget.
    let s = slow_sim();
    let setup = Setup::new();
    let (out, r, elapsed) = setup.gate(&s.url(), &["--timeout-seconds", "2"]);
    assert_verdict(&out, &r, "error", Some("timeout"));
    // 2 s of budget plus 2 s of start-up and write-out (times the time scale under emulation).
    assert!(
        elapsed < Duration::from_secs(2) + crate::common::scaled(Duration::from_secs(2)),
        "within 2 s of the deadline: {elapsed:?}"
    );
}

#[cfg(unix)]
#[test]
fn sigterm_writes_a_terminated_result_within_a_second() {
    let s = slow_sim();
    let setup = Setup::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_specperf"));
    for k in GATE_ENV {
        cmd.env_remove(k);
    }
    let mut child = cmd
        .arg("gate")
        .args([
            "--url",
            &s.url(),
            "--model",
            "specperf-sim",
            "--golden",
            setup.path("golden").to_str().unwrap(),
            "--model-prefix",
            "testm",
            "--spec-method",
            "mtp",
            "--thinking-mode",
            "thinking_on",
            "--num-spec-tokens",
            "3",
            "--result-filename",
            "case",
            "--result-dir",
            setup.path("results").to_str().unwrap(),
            "--input-file",
            setup.path("qualitative.jsonl").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until requests are in flight.
    let t = Instant::now();
    while s.totals().generation_tokens == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    let status = terminate(&mut child, Duration::from_secs(20));
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    let r = setup.result();
    assert_eq!(r["verdict"], "error");
    assert_eq!(r["reason"], "terminated");
    assert_eq!(r["error"], "AL gate terminated by SIGTERM");
}

/// Nothing was sent to the simulator.
fn assert_no_request(s: &SimHandle) {
    let t = s.totals();
    assert_eq!(
        (t.requests_success, t.prompt_tokens),
        (0, 0),
        "a request was sent"
    );
}

#[test]
fn an_escaping_result_filename_is_refused_before_any_request_in_both_forms() {
    let s = sim_at(2.5);
    for form in ["flag", "env"] {
        let setup = Setup::new();
        let name = "../../escaped";
        let (extra, envs): (Vec<&str>, Vec<(&str, &str)>) = match form {
            "flag" => (vec!["--result-filename", name], vec![]),
            _ => (
                vec!["--result-filename", ""],
                vec![("RESULT_FILENAME", name)],
            ),
        };
        let out = setup.command(&s.url(), &extra, &envs).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{form}");
        let r = read_json(&setup.path("results/al_gate.json"));
        assert_eq!(
            (r["verdict"].as_str(), r["reason"].as_str()),
            (Some("error"), Some("config_invalid")),
            "{form}: {r:#}"
        );
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains("RESULT_FILENAME") && error.contains(name),
            "{form}: {error}"
        );
        assert_no_request(&s);
        assert!(
            !setup.path("escaped_artifacts").exists() && !setup.path("results/al_gate_..").exists(),
            "{form}: artifacts escaped RESULT_DIR"
        );
    }
}

#[test]
fn the_internal_replay_leaves_no_raw_result_under_the_benchmarks_name() {
    // As in the InferenceX benchmark stage: RESULT_FILENAME and RESULT_DIR come from the
    // environment, and the benchmark itself writes <RESULT_FILENAME>.json there later.
    let s = sim_at(2.5);
    let setup = Setup::new();
    let results = setup.path("results");
    let out = setup
        .command(
            &s.url(),
            &["--result-filename", "", "--result-dir", ""],
            &[
                ("RESULT_FILENAME", "case"),
                ("RESULT_DIR", results.to_str().unwrap()),
            ],
        )
        .output()
        .unwrap();
    let r = setup.result();
    assert_verdict(&out, &r, "pass", None);
    let mut names: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["al_gate_case.json", "al_gate_case_artifacts"]);
    assert!(!setup.path("case.json").exists());
}

#[test]
fn what_can_be_known_before_the_replay_is_checked_before_it() {
    let s = sim_at(2.5);
    let setup = Setup::new();
    // 8 coding prompts for a collection of 80.
    let few: String = (0..8)
        .map(|i| {
            format!(
                "{{\"question_id\": \"q{i}\", \"category\": \"coding\", \"messages\": [{{\"role\": \"user\", \"content\": \"Write {i}.\"}}]}}\n"
            )
        })
        .collect();
    std::fs::write(setup.path("few.jsonl"), few).unwrap();
    let (out, r, _) = setup.gate(
        &s.url(),
        &["--input-file", setup.path("few.jsonl").to_str().unwrap()],
    );
    assert_verdict(&out, &r, "error", Some("dataset_invalid"));
    assert!(r["error"].as_str().unwrap().contains("80"), "{r:#}");
    assert_no_request(&s);
    // The server exports vLLM counters; SGLang's cannot appear.
    let (out, r, _) = setup.gate(&s.url(), &["--framework", "sglang"]);
    assert_verdict(&out, &r, "error", Some("config_invalid"));
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("sglang") && error.contains("vllm"),
        "{error}"
    );
    assert_no_request(&s);
    // A result directory that cannot be created: the console line is the only report.
    std::fs::write(setup.path("blocked"), "").unwrap();
    let out = setup
        .command(
            &s.url(),
            &[
                "--result-dir",
                setup.path("blocked/results").to_str().unwrap(),
            ],
            &[],
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("ERROR: SpeedBench AL ")
            && stdout.contains("config_invalid: RESULT_DIR"),
        "{stdout}"
    );
    assert_no_request(&s);
}

#[test]
fn errors_name_the_gates_own_flags_and_the_right_file() {
    let setup = Setup::new();
    let s = sim_at(2.5);
    // A down server, its metrics elsewhere, no model to skip the readiness check.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (out, r, _) = setup.gate(
        &closed,
        &[
            "--model",
            "",
            "--server-metrics",
            &format!("{}/metrics", s.url()),
        ],
    );
    assert_verdict(&out, &r, "error", Some("client_failed"));
    let error = r["error"].as_str().unwrap();
    assert!(
        !error.contains("--wait-for-model-timeout") && error.contains("--url"),
        "{error}"
    );
    // Malformed collection metadata is named as such.
    std::fs::write(setup.path("badcoll.yaml"), "category: [unclosed\n").unwrap();
    let (out, r, _) = setup.gate(
        &s.url(),
        &[
            "--model-prefix",
            "plain",
            "--collection-metadata",
            setup.path("badcoll.yaml").to_str().unwrap(),
        ],
    );
    assert_verdict(&out, &r, "error", Some("invalid_golden"));
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("collection metadata") && !error.contains("golden curve"),
        "{error}"
    );
    // A malformed golden curve is invalid, not missing.
    std::fs::create_dir(setup.path("broken")).unwrap();
    std::fs::write(
        setup.path("broken/testm_mtp.yaml"),
        "test-model: [unclosed\n",
    )
    .unwrap();
    let (out, r, _) = setup.gate(
        &s.url(),
        &["--golden", setup.path("broken").to_str().unwrap()],
    );
    assert_verdict(&out, &r, "error", Some("invalid_golden"));
    assert_no_request(&s);
}

#[test]
fn gate_summary_lists_an_unreadable_file_and_goes_on() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root.join("results")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.path().join("al_gate_broken.json"), "{\"verdict\": ").unwrap();
    let summary = |strict: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_specperf"));
        cmd.arg("gate-summary").arg(dir.path());
        if strict {
            cmd.arg("--strict");
        }
        cmd.output().unwrap()
    };
    let out = summary(false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The table of the readable files is unchanged; the unreadable one is listed after it.
    let want = std::fs::read_to_string(root.join("summary.md")).unwrap();
    assert!(stdout.starts_with(&want), "{stdout}");
    assert!(
        stdout[want.len()..].contains("al_gate_broken.json"),
        "{stdout}"
    );
    let out = summary(true);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn gate_summary_matches_the_committed_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rollup.json");
    let out = output_ok(
        Command::new(env!("CARGO_BIN_EXE_specperf"))
            .arg("gate-summary")
            .arg(root.join("results"))
            .arg("--json")
            .arg(&json),
    );
    let want = std::fs::read_to_string(root.join("summary.md")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    let roll = read_json(&json);
    assert_eq!(roll["files"], 4);
    assert_eq!(roll["all_passed"], false);
    assert_eq!(roll["results"][0]["task"], "speedbench_al/thinking_on/mtp2");
}

#[test]
fn every_committed_collection_file_loads_and_fits_the_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema = schema("collection.v1.json");
    let declared: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut n = 0;
    for e in std::fs::read_dir(root.join("collections")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("yaml") {
            continue;
        }
        let c = specperf::golden::Collection::load(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!((c.num_prompts, c.output_len), (80, 4096), "{}", p.display());
        // Every top-level key of the file is declared by the schema.
        for line in std::fs::read_to_string(&p).unwrap().lines() {
            if let Some((k, _)) = line.split_once(':') {
                if !line.starts_with([' ', '#']) {
                    assert!(
                        declared.contains(&k),
                        "{}: {k} not in the schema",
                        p.display()
                    );
                }
            }
        }
        // Its curve exists among the committed fixtures.
        let curve = p.file_stem().unwrap().to_str().unwrap();
        assert!(
            root.join(format!("tests/fixtures/golden/{curve}.yaml"))
                .is_file(),
            "{curve}"
        );
        n += 1;
    }
    assert_eq!(n, 9, "one file per committed curve");
}

/// Probe: a file named on the command line is read whatever its name (only a directory's
/// contents are filtered to `al_gate_*.json`): a renamed result is summarised, and a file that
/// is no result is listed as unreadable, not "no al_gate_*.json files found".
#[test]
fn gate_summary_reads_a_file_named_explicitly_whatever_its_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate/results");
    let first = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("result.json");
    std::fs::copy(&first, &renamed).unwrap();
    let s = specperf::gate::summarize(std::slice::from_ref(&renamed)).unwrap();
    assert!(s.unreadable.is_empty(), "{:?}", s.unreadable);
    assert_eq!(s.json["files"], 1, "{}", s.json);
    let notes = dir.path().join("notes.json");
    std::fs::write(&notes, "{\"a\": 1").unwrap();
    let s = specperf::gate::summarize(&[notes]).unwrap();
    assert_eq!(s.unreadable.len(), 1);
    assert!(s.unreadable[0].to_string().contains("notes.json"));
}
