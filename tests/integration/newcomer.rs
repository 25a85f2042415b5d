//! What a newcomer trips over in `replay` (issue 19, items 7 to 14): what the reports say about
//! the load, failures explained, flags the tool owns, output locations checked up front.

use crate::common::{fast, read_json, replay_at, sim};

/// Item 7: an open loop without --concurrency has no cap; every report says so instead of 64.
#[tokio::test]
async fn an_uncapped_open_loop_reports_no_concurrency_cap() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = replay_at(
        &s.url(),
        d,
        "--request-rate 200 --request-count 8 --osl 4 --result-filename raw",
    )
    .await;
    let header = specperf::console_table(&out.summary);
    let first = header.lines().next().unwrap();
    assert!(first.contains("concurrency uncapped"), "{first}");
    let summary = read_json(&dir.path().join("summary.json"));
    assert!(
        summary["meta"]["concurrency"].is_null(),
        "{}",
        summary["meta"]
    );
    let aiperf = read_json(&dir.path().join("profile_export_aiperf.json"));
    assert!(
        aiperf["input_config"]["loadgen"]["concurrency"].is_null(),
        "{}",
        aiperf["input_config"]
    );
    let raw = read_json(&dir.path().join("raw.json"));
    assert!(raw["max_concurrency"].is_null(), "{raw}");
}

/// Item 7: a capped open loop and a closed loop still report their number.
#[tokio::test]
async fn a_capped_open_loop_reports_its_cap() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    replay_at(
        &s.url(),
        d,
        "--request-rate 200 --concurrency 3 --request-count 6 --osl 4 --result-filename raw",
    )
    .await;
    let summary = read_json(&dir.path().join("summary.json"));
    assert_eq!(summary["meta"]["concurrency"], 3);
    let raw = read_json(&dir.path().join("raw.json"));
    assert_eq!(raw["max_concurrency"], 3);
}

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// Runs the binary's `replay` with `args` (artifacts in a fresh directory), bounded at 60 s;
/// returns (exit code, stdout, stderr).
fn replay_bin(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["--progress-interval", "0"];
    all.extend_from_slice(args);
    replay_bin_showing_progress(&all)
}

/// [`replay_bin`] without its `--progress-interval 0`: the live lines are left to `args`.
fn replay_bin_showing_progress(args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    crate::common::output_within(
        std::process::Command::new(BIN)
            .arg("replay")
            .args(["--metrics-settle-seconds", "0"])
            .arg("--artifact-dir")
            .arg(dir.path().join("a"))
            .args(args),
        std::time::Duration::from_secs(60),
    )
}

/// Item 8: a run whose every request fails says why on stderr: the kind, the count, the
/// server's own message and a hint.
#[test]
fn a_failed_run_names_the_server_message_and_a_hint() {
    let s = sim(fast());
    let (code, _, err) = replay_bin(&[
        "--url",
        &s.url(),
        "--model",
        "other",
        "--request-count",
        "3",
        "--concurrency",
        "1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("http_status") && err.contains("3"), "{err}");
    assert!(err.contains("The model `other` does not exist"), "{err}");
    assert!(err.contains("hint:") && err.contains("--model"), "{err}");
}

/// Item 8: a `--url` ending in `/v1` is named before the run and in the failure hint.
#[test]
fn a_url_with_a_v1_suffix_is_named() {
    let s = sim(fast());
    let url = format!("{}/v1", s.url());
    let (code, _, err) = replay_bin(&[
        "--url",
        &url,
        "--model",
        "specperf-sim",
        "--request-count",
        "2",
        "--concurrency",
        "1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ends in /v1"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}

/// Item 8: a 404 from `/v1/models` points at the URL, not at --model.
#[test]
fn a_404_from_the_model_list_points_at_the_url() {
    let s = sim(fast());
    let url = format!("{}/v1", s.url());
    let (code, _, err) = replay_bin(&["--url", &url, "--request-count", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--url"), "{err}");
    assert!(!err.contains("pass --model"), "{err}");
}

/// `specperf replay <args>` as the config error it gives (fails the test when it is valid).
fn config_error(args: &[&str]) -> String {
    use clap::Parser;
    let mut argv = vec!["specperf", "replay"];
    argv.extend_from_slice(args);
    let cli = specperf::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("flags parse: {e}"));
    let specperf::Command::Replay(a) = cli.command else {
        panic!("not replay")
    };
    match specperf::RunConfig::from_args(&a) {
        Ok(_) => panic!("{args:?} accepted"),
        Err(e) => e.to_string(),
    }
}

/// Item 9: body fields the tool owns cannot be overridden by --extra-inputs (they made every
/// request fail); the error names the flag to use instead.
#[test]
fn extra_inputs_cannot_take_fields_the_tool_owns() {
    for (item, flag) in [
        ("stream:false", "--streaming"),
        ("model:other", "--model"),
        (
            r#"{"stream_options": {"include_usage": false}}"#,
            "--per-chunk-usage",
        ),
        ("messages:[]", "--input-file"),
        ("prompt:x", "--input-file"),
    ] {
        let e = config_error(&["--extra-inputs", item]);
        assert!(
            e.contains("--extra-inputs") && e.contains(flag),
            "{item}: {e}"
        );
    }
    // Everything else still goes through.
    crate::common::config(&[
        "--extra-inputs",
        "ignore_eos:true",
        "--extra-inputs",
        "max_tokens:9",
    ]);
}

/// Item 10: an unusable --result-dir stops the run before its first request, naming the flag.
#[tokio::test]
async fn an_unwritable_result_dir_stops_the_run_before_it_starts() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let result_dir = blocker.join("results");
    let artifacts = dir.path().join("art");
    let cfg = crate::common::config(&[
        "--url",
        &s.url(),
        "--model",
        "specperf-sim",
        "--request-count",
        "2",
        "--artifact-dir",
        artifacts.to_str().unwrap(),
        "--result-filename",
        "raw",
        "--result-dir",
        result_dir.to_str().unwrap(),
    ]);
    let e = crate::common::replay_err(cfg, "result dir")
        .await
        .to_string();
    assert!(e.contains("--result-dir") && e.contains("results"), "{e}");
    assert!(
        !artifacts.join("records.jsonl").exists(),
        "no request was sent before the check"
    );
}

/// Item 14: the small ones.
#[test]
fn vllm_aliases_negative_numbers_and_json_suffixes_are_understood() {
    use clap::Parser;
    let parse = |args: &[&str]| {
        let mut argv = vec!["specperf", "replay"];
        argv.extend_from_slice(args);
        specperf::Cli::try_parse_from(argv)
    };
    // vLLM's names for the request count and the concurrency.
    assert!(parse(&["--num-prompts", "5", "--max-concurrency", "2"]).is_ok());
    // A negative number is a bad value of the flag, not an unknown argument.
    for flag in ["--concurrency", "--request-count", "--osl"] {
        let e = parse(&[flag, "-1"]).unwrap_err().to_string();
        assert!(
            e.contains(flag) && !e.contains("unexpected argument"),
            "{e}"
        );
    }
    for flag in [
        "--request-rate",
        "--benchmark-duration",
        "--timeout-seconds",
    ] {
        let e = config_error(&[flag, "-1"]);
        assert!(e.contains(flag), "{e}");
    }
    // `foo.json` names foo.json, not foo.json.json.
    let dir = tempfile::tempdir().unwrap();
    let s = sim(fast());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(replay_at(
        &s.url(),
        dir.path().to_str().unwrap(),
        "--request-count 2 --osl 4 --result-filename foo.json",
    ));
    assert!(dir.path().join("foo.json").exists());
    assert!(!dir.path().join("foo.json.json").exists());
    // --custom-dataset-type needs a file to apply to.
    let e = config_error(&["--custom-dataset-type", "single_turn"]);
    assert!(e.contains("--input-file"), "{e}");
}

/// Item 14: `--request-rate inf` (vLLM's default, and what our raw JSON writes) sends every
/// request at once.
#[tokio::test]
async fn request_rate_inf_sends_every_request_at_once() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(
        &s.url(),
        dir.path().to_str().unwrap(),
        "--request-rate inf --request-count 6 --osl 4 --result-filename raw",
    )
    .await;
    assert_eq!(out.summary.counts.success, 6);
    let raw = read_json(&dir.path().join("raw.json"));
    assert_eq!(raw["request_rate"], "inf");
}

/// Item 14: a duration-bounded run does not claim it planned 0 requests.
#[tokio::test]
async fn a_duration_bounded_run_does_not_say_planned_0() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = replay_at(
        &s.url(),
        dir.path().to_str().unwrap(),
        "--benchmark-duration 0.3 --concurrency 2 --osl 4",
    )
    .await;
    let table = specperf::console_table(&out.summary);
    assert!(!table.contains("(planned 0)"), "{table}");
}

/// Item 13: a reused --artifact-dir starts clean: the earlier run is moved aside, and the
/// summary says where.
#[tokio::test]
async fn a_reused_artifact_dir_moves_the_earlier_run_aside() {
    let s = sim(fast());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a");
    let d = dir.to_str().unwrap();
    replay_at(&s.url(), d, "--request-count 2 --osl 4").await;
    std::fs::create_dir_all(dir.join("server_metrics")).unwrap();
    std::fs::write(dir.join("server_metrics/endpoint0_before.txt"), "stale").unwrap();
    std::fs::write(dir.join("old_raw.json"), "{}").unwrap();
    let out = replay_at(&s.url(), d, "--request-count 2 --osl 4").await;
    assert!(
        !dir.join("old_raw.json").exists(),
        "stale file left beside the new run"
    );
    let page = std::fs::read_to_string(dir.join("server_metrics/endpoint0_before.txt"));
    assert!(
        page.map_or(true, |p| p != "stale"),
        "stale metrics page kept"
    );
    assert!(dir.join("summary.json").exists());
    let moved: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("a.prev-"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    let aside = root.path().join(&moved[0]);
    assert!(aside.join("old_raw.json").exists() && aside.join("records.jsonl").exists());
    let said = out.summary.warnings.join("\n");
    assert!(said.contains(&moved[0]), "{said}");
}

/// Item 12: during the settle wait the live line says what it waits for, instead of a bar
/// frozen at 100%.
#[test]
fn the_settle_wait_is_said_on_the_progress_line() {
    use std::time::{Duration, Instant};
    let now = Instant::now();
    let p = specperf::Progress {
        done: 8,
        ok: 8,
        planned: Some(8),
        profiling_started: Some(now - Duration::from_secs(3)),
        settling_until: Some(now + Duration::from_millis(6500)),
        ..Default::default()
    };
    for bar in [true, false] {
        let line = specperf::progress_line(&p, now, bar, 120);
        assert!(
            line.contains("waiting 7 s for the metrics to settle") && !line.contains("100%"),
            "{line}"
        );
    }
}

/// Item 11: an unresolvable host fails fast, once, naming the host, instead of every request
/// looking it up again.
#[test]
fn an_unresolvable_host_fails_fast_with_a_clear_error() {
    let started = std::time::Instant::now();
    let (code, _, err) = replay_bin(&[
        "--url",
        "http://no-such-host.invalid:8000",
        "--model",
        "m",
        "--request-count",
        "4",
        "--connect-timeout-seconds",
        "5",
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("cannot resolve") && err.contains("no-such-host.invalid"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// Item 11: before the first request the live line says what the run waits for and for how
/// long (the model list, then the connection warm-up), naming the resolved address; the counters
/// follow once it starts, and `--ui none` stays quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_waits_are_said_on_the_progress_line() {
    use crate::common::{fake_metrics, Page};
    use std::time::Duration;
    let slow = |body: &str, ms| Page {
        content_type: "application/json",
        body: body.into(),
        delay: Duration::from_millis(ms),
    };
    let models = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
    for quiet in [false, true] {
        // The n-th connection's answer: the model list late, two slow health checks, then
        // empty answers after 0.8 s (the requests fail; only the start matters here).
        let (url, _) = fake_metrics(vec![
            slow(models, 1500),
            slow("{}", 1500),
            slow("{}", 1500),
            slow("", 800),
        ])
        .await;
        let base = url.trim_end_matches("/metrics").to_owned();
        let addr = base.trim_start_matches("http://").to_owned();
        let ui = if quiet { "none" } else { "simple" };
        let args: Vec<String> = [
            "--url",
            &base,
            "--ui",
            ui,
            "--progress-interval",
            "0.2",
            "--no-server-metrics",
            "--request-count",
            "2",
            "--concurrency",
            "2",
            "--request-timeout-seconds",
            "5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (_, _, err) = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            replay_bin_showing_progress(&args)
        })
        .await
        .unwrap();
        let line_with = |what: &str| err.lines().position(|l| l.contains(what));
        let model_wait = line_with("waiting for the model list");
        let warming = line_with("warming 2 connections");
        let counting = line_with("done ");
        if quiet {
            assert_eq!((model_wait, warming, counting), (None, None, None), "{err}");
            continue;
        }
        let (Some(m), Some(w), Some(c)) = (model_wait, warming, counting) else {
            panic!("start-up lines missing: {err}");
        };
        assert!(m < w && w < c, "out of order: {err}");
        // Once the counters show, the start-up line is gone for good.
        let after: Vec<&str> = err.lines().skip(c).collect();
        assert!(
            !after
                .iter()
                .any(|l| l.contains("waiting for the model") || l.contains("warming")),
            "{err}"
        );
        let first = err.lines().nth(m).unwrap();
        assert!(first.contains(&addr) && first.contains(" s"), "{first}");
    }
}

/// Item 11: every start-up step has its own words, and the counters take over once profiling
/// starts.
#[test]
fn each_start_up_step_is_named_until_profiling_starts() {
    use specperf::{StartStep, Starting};
    use std::time::{Duration, Instant};
    let now = Instant::now();
    let at = |step| specperf::Progress {
        warmup: 3,
        starting: Some(Starting {
            step,
            since: now - Duration::from_millis(2500),
            addr: Some("10.0.0.5:8000".parse().unwrap()),
        }),
        ..Default::default()
    };
    let cases = [
        (StartStep::Resolving, "resolving the target's host name"),
        (
            StartStep::ModelList,
            "10.0.0.5:8000: waiting for the model list",
        ),
        (
            StartStep::Warming { done: 12, of: 64 },
            "warming 64 connections, 12/64 answered",
        ),
        (StartStep::Warmup, "warmup: 3 requests done"),
        (StartStep::Baseline, "reading the metrics baseline"),
    ];
    for (step, want) in cases {
        for bar in [true, false] {
            let line = specperf::progress_line(&at(step), now, bar, 120);
            assert!(line.contains(want) && line.ends_with("… 2 s"), "{line}");
        }
    }
    let started = specperf::Progress {
        profiling_started: Some(now),
        ..at(StartStep::Baseline)
    };
    let line = specperf::progress_line(&started, now, false, 0);
    assert!(
        line.contains("done 0") && !line.contains("starting"),
        "{line}"
    );
}

/// Item 14: a --category that matches nothing lists the categories present, and a file of
/// another format suggests --custom-dataset-type.
#[tokio::test]
async fn collection_errors_list_categories_and_suggest_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let speed = dir.path().join("speed.jsonl");
    let row = |id: &str, cat: &str| {
        format!(
            r#"{{"question_id":"{id}","category":"{cat}","messages":[{{"role":"user","content":"hi"}}]}}"#
        )
    };
    std::fs::write(
        &speed,
        format!("{}\n{}\n", row("a", "coding"), row("b", "math")),
    )
    .unwrap();
    let cfg = crate::common::config(&[
        "--input-file",
        speed.to_str().unwrap(),
        "--category",
        "Coding",
    ]);
    let e = crate::common::replay_err(cfg, "no row matches")
        .await
        .to_string();
    assert!(e.contains("coding, math"), "{e}");
    let single = dir.path().join("single.jsonl");
    std::fs::write(&single, "{\"text\": \"hello\"}\n").unwrap();
    let cfg = crate::common::config(&["--input-file", single.to_str().unwrap()]);
    let e = crate::common::replay_err(cfg, "not SPEED-Bench")
        .await
        .to_string();
    assert!(e.contains("--custom-dataset-type single_turn"), "{e}");
}

/// Item 14: `render --help` shows what changes the bodies, not every load flag.
#[test]
fn render_help_leaves_out_the_load_flags() {
    let out = std::process::Command::new(BIN)
        .args(["render", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--input-file") && help.contains("--count"),
        "{help}"
    );
    for flag in [
        "--request-rate",
        "--url",
        "--benchmark-duration",
        "--server-metrics",
    ] {
        assert!(!help.contains(flag), "{flag} in render --help");
    }
    // Still accepted, so a replay command line can be reused.
    let out = std::process::Command::new(BIN)
        .args([
            "render",
            "--count",
            "1",
            "--url",
            "http://h:1",
            "--request-rate",
            "5",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 14 (the rest of "negative numbers"): a negative value for any flag of any subcommand is
/// read as that flag's value, so the error names the flag, never clap's "unexpected argument
/// '-1'" (seen for the simulator, gate, plot, render and inject flags).
#[test]
fn a_negative_value_is_a_value_of_every_flag() {
    use clap::{CommandFactory, Parser};
    let cli = specperf::Cli::command();
    let mut checked = 0;
    for sub in cli.get_subcommands() {
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if !arg.get_action().takes_values() || long == "help" {
                continue;
            }
            let flag = format!("--{long}");
            let argv = ["specperf", sub.get_name(), flag.as_str(), "-1"];
            checked += 1;
            if let Err(e) = specperf::Cli::try_parse_from(argv) {
                let text = e.to_string();
                assert!(
                    !text.contains("unexpected argument '-1'"),
                    "{} {flag} -1: {text}",
                    sub.get_name()
                );
            }
        }
    }
    assert!(checked > 100, "only {checked} flags checked");
}

/// Issue 30 item 2: against a server that accepts and never answers, the start-up waits (the
/// connection warm-up and the AL baseline scrape, 3 s each) came on top of the requests' own
/// 2 s: the run took 8.1 s. They now overlap and never wait longer than a request may, so the
/// run ends within the request timeout plus one probe, every request counted.
#[test]
fn a_hung_server_costs_the_request_timeout_plus_one_probe() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let held = {
        let done = done.clone();
        std::thread::spawn(move || {
            // Accepts and holds every connection, never answering; bounded by the test.
            let mut conns = Vec::new();
            let until = Instant::now() + Duration::from_secs(60);
            while !done.load(Relaxed) && Instant::now() < until {
                match l.accept() {
                    Ok((c, _)) => conns.push(c),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
    };
    let t0 = Instant::now();
    let (code, out, err) = replay_bin(&[
        "--url",
        &url,
        "--model",
        "m",
        "--request-count",
        "64",
        "--request-timeout-seconds",
        "2",
    ]);
    let took = t0.elapsed();
    done.store(true, Relaxed);
    held.join().unwrap();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        out.contains("Requests: 0 ok, 64 failed") && out.contains("total_timeout 64"),
        "{out}"
    );
    // 2 s of requests + at most one 2 s probe; before: 3 s + 3 s + 2 s.
    assert!(
        took < Duration::from_millis(6_200),
        "the run took {took:?}:\n{out}\n{err}"
    );
}

/// The per-category acceptance table of the bundled collection, as the console prints it.
fn category_table(console: &str) -> Vec<&str> {
    console
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("category "))
        .take_while(|l| l.starts_with("  "))
        .collect()
}

/// Issue 39, item 4: against a server that sends no per-request figures (the embedded
/// simulator's default), the per-category table prints the columns that have values and says once
/// why the others are absent, instead of three columns of `n/a` on every row; with the figures,
/// every column is there.
#[tokio::test]
async fn the_category_table_leaves_out_columns_no_row_has() {
    use crate::common::Replay;
    use specperf::sim::PerRequestSpec;
    for per_request in [PerRequestSpec::None, PerRequestSpec::Summary] {
        let cfg = specperf::sim::SimConfig {
            per_request_spec: per_request,
            ..fast()
        };
        let run = Replay::sim(cfg)
            .args("--request-count 22 --concurrency 4 --osl 8")
            .run()
            .await;
        let console = specperf::console_table(&run.out.summary);
        let table = category_table(&console);
        assert!(table.len() > 2, "no category table:\n{console}");
        let header: Vec<&str> = table[0].split_whitespace().collect();
        let columns = header.len() - 1; // "category" is one word, the other headers two
        for row in &table[1..] {
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert!(!cells.contains(&"n/a"), "{per_request:?}: {row}\n{console}");
            assert!(cells.len() <= columns, "{row}");
        }
        let why = console.contains("left out: no response carried per-request speculative figures");
        if per_request == PerRequestSpec::None {
            assert_eq!(
                header,
                ["category", "requests", "stream", "AL"],
                "{console}"
            );
            assert!(why, "{console}");
        } else {
            assert!(
                header.contains(&"tok-w") && header.contains(&"rate"),
                "{console}"
            );
            assert!(!why, "{console}");
        }
    }
}
