//! Sweeps, repeated runs and the SLA search against the simulator: point directories and raw
//! JSON per point, the drain wait between points held up by a backlog the test makes, the
//! table and the Pareto page in a browser, an overlay of two sweeps, confidence intervals over
//! three runs, a search that finds a known saturation, and SIGTERM then `--resume`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use serde_json::{json, Value};
use specperf::sim::{SimConfig, SimHandle};
use specperf::sweep::{
    run_sweep, Event, PointEntry, PointStatus, SweepConfig, SweepIndex, SweepOutcome,
};
use specperf::{Cli, Command as Cmd, Progress, Stopper};

use crate::common::{
    browser_dom, fast, held_stream, read_json, records, replay_process, scaled, schema_errors, sim,
    terminate, tokenizer_path, wait_exit, Backlog, Replay,
};

const BIN: &str = env!("CARGO_BIN_EXE_specperf");

/// Flags every sweep here shares: quiet runs, no settle wait, quick drain polls.
const QUIET: [&str; 8] = [
    "--progress-interval",
    "0",
    "--metrics-settle-seconds",
    "0",
    "--drain-poll-interval-seconds",
    "0.05",
    "--drain-idle-polls",
    "3",
];

pub(crate) fn sweep_config(args: &[&str]) -> SweepConfig {
    let mut argv = vec!["specperf", "replay"];
    argv.extend_from_slice(&QUIET);
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("flags parse: {e}"));
    let Cmd::Replay(a) = cli.command else {
        panic!("not replay")
    };
    assert!(specperf::sweep::wanted(&a), "a sweep");
    SweepConfig::from_replay(&a).unwrap_or_else(|e| panic!("sweep valid: {e}"))
}

/// Runs a sweep in this process (bounded), handing every event to `on_event`.
pub(crate) async fn sweep_with(cfg: SweepConfig, on_event: impl FnMut(Event<'_>)) -> SweepOutcome {
    let (tx, _rx) = tokio::sync::watch::channel(Progress::default());
    tokio::time::timeout(
        scaled(Duration::from_secs(120)),
        run_sweep(cfg, Stopper::new(), tx, on_event),
    )
    .await
    .expect("the sweep ends in time")
    .expect("the sweep starts")
}

/// A request that stays running on the simulator until the socket is dropped.
fn held(s: &SimHandle) -> std::net::TcpStream {
    let body = json!({"model": "specperf-sim", "stream": true, "max_tokens": 64,
                      "messages": [{"role": "user", "content": "left over"}]});
    held_stream(&s.url(), &body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_sweep_waits_for_the_backlog_and_writes_points_table_and_pareto_page() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("before");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--concurrency 1,2,4,8 --request-count 16 --osl 16 --gpus 8")
            .args("--result-filename dsv4_tp8")
            .argv(),
    );
    // After the first point, a request of "another client" keeps the server busy: the wait
    // before the second point must poll it busy, and end once the test lets it go.
    let mut backlog = Backlog::new(3);
    let mut points_done = 0;
    let o = sweep_with(cfg, |ev| match ev {
        Event::RunDone { .. } => {
            points_done += 1;
            if points_done == 1 {
                backlog.hold(held(&s));
            }
        }
        Event::DrainPoll(p) => backlog.on_poll(p),
        _ => {}
    })
    .await;
    assert_eq!(o.exit_code, 0);
    assert_eq!(
        backlog.busy_polls, 3,
        "the wait saw the backlog three times, then it was dropped"
    );
    let idx = SweepIndex::read(&out).unwrap();
    assert_eq!(idx, o.index, "sweep.json is what the run returned");
    let errors = schema_errors("sweep.v1.json", &read_json(&out.join("sweep.json")));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(idx.status, "complete");
    let names: Vec<&str> = idx.points.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "concurrency_1",
            "concurrency_2",
            "concurrency_4",
            "concurrency_8"
        ]
    );
    for (p, c) in idx.points.iter().zip([1, 2, 4, 8]) {
        assert_eq!(p.status, PointStatus::Done);
        let run_dir = out.join(&p.name);
        assert!(run_dir.join("summary.json").is_file(), "{}", p.name);
        let raw = run_dir.join(format!("dsv4_tp8_conc{c}.json"));
        assert_eq!(p.runs[0].result_file.as_deref(), Some(raw.as_path()));
        assert_eq!(read_json(&raw)["max_concurrency"], json!(c));
        assert_eq!(p.mean("request_count"), Some(16.0));
        let tput = p.mean("total_token_throughput").unwrap();
        let per_gpu = p.mean("total_token_throughput_per_gpu").unwrap();
        assert!((per_gpu * 8.0 - tput).abs() < 1e-6 * tput);
        assert!(p.mean("interactivity").unwrap() > 0.0);
    }
    assert!(
        idx.points[0].drain_before.is_none(),
        "no wait before the first point"
    );
    let second = idx.points[1]
        .drain_before
        .as_ref()
        .expect("a wait before point 2");
    assert!(
        second.drained && second.max_queue >= 1 && second.polls >= 6,
        "{second:?}"
    );
    assert!(!idx.points[1].started_undrained);
    for p in &idx.points[2..] {
        let d = p.drain_before.as_ref().unwrap();
        assert!(d.drained && d.max_queue == 0 && d.polls == 3, "{d:?}");
    }
    assert!(!idx.pareto_optimal.is_empty());
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains("total_token_throughput_per_gpu"));
    let table = specperf::sweep::console(&idx);
    assert!(
        table.contains("tok/s/GPU") && table.contains("concurrency_8"),
        "{table}"
    );
    assert!(table.lines().any(|l| l.starts_with("* ")), "{table}");

    let page = out.join("sweep.html");
    if let Some(dom) = browser_dom(&page) {
        assert_eq!(
            dom.matches("<svg").count(),
            1,
            "the Pareto chart: {dom:.300}"
        );
        assert!(dom.contains("id=\"sweep\"") && dom.contains("concurrency_8"));
        assert!(dom.contains("class=\"frontier\""));
    }

    // A second sweep (another "configuration") overlays on the first.
    let after = dir.path().join("after");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&after)
            .args("--concurrency 2,6 --request-count 12 --osl 16 --gpus 8 --no-drain")
            .argv(),
    );
    let o = sweep_with(cfg, |_| {}).await;
    assert_eq!((o.exit_code, o.index.points.len()), (0, 2));
    assert!(o.index.points[1].drain_before.is_none(), "--no-drain");
    let cmp = dir.path().join("compare");
    let st = Command::new(BIN)
        .args(["plot", out.to_str().unwrap(), after.to_str().unwrap()])
        .args(["--output", cmp.to_str().unwrap()])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let svg = std::fs::read_to_string(cmp.join("pareto.svg")).unwrap();
    assert!(
        svg.contains("before") && svg.contains("after"),
        "both series named"
    );
    if let Some(dom) = browser_dom(&cmp.join("sweeps.html")) {
        assert_eq!(dom.matches("<svg").count(), 1);
        assert!(dom.contains("concurrency_6") && dom.contains("concurrency_1"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_runs_report_t_intervals_and_convergence_stops_early() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("repeat");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--concurrency 2 --request-count 8 --osl 16 --num-profile-runs 3")
            .argv(),
    );
    let o = sweep_with(cfg, |_| {}).await;
    assert_eq!(o.exit_code, 0);
    let p = &o.index.points[0];
    assert_eq!(p.runs.len(), 3);
    // AIPerf's layout for repeated runs of one point, and its confidence aggregate beside them.
    for r in 1..=3 {
        let d = out.join(format!("profile_runs/run_000{r}"));
        assert!(d.join("summary.json").is_file(), "{}", d.display());
    }
    let agg = read_json(&out.join("aggregate/profile_export_aiperf_aggregate.json"));
    assert_eq!(agg["metadata"]["num_successful_runs"], json!(3));
    assert_eq!(
        agg["metadata"]["run_labels"],
        json!(["run_0001", "run_0002", "run_0003"])
    );
    let i = &p.aggregate["request_throughput"];
    assert_eq!(i.n, 3);
    assert!((i.t_critical - 4.302_652_7).abs() < 1e-6, "t(0.975, 2)");
    let runs: Vec<f64> = p
        .runs
        .iter()
        .map(|r| r.values["request_throughput"])
        .collect();
    let mean = runs.iter().sum::<f64>() / 3.0;
    assert!((i.mean - mean).abs() < 1e-9 * mean);
    let sd = (runs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    assert!((i.half_width() - i.t_critical * sd / 3f64.sqrt()).abs() < 1e-9 * mean);
    // The same interval in AIPerf's file, from the runs' own profile_export_aiperf.json.
    let a = &agg["metrics"]["request_throughput_avg"];
    assert_eq!(a["unit"], "requests/sec");
    for (k, v) in [
        ("mean", i.mean),
        ("std", i.std),
        ("ci_low", i.ci_low),
        ("ci_high", i.ci_high),
        ("t_critical", i.t_critical),
    ] {
        let got = a[k].as_f64().unwrap();
        assert!(
            (got - v).abs() <= 1e-9 * v.abs().max(1.0),
            "{k}: {got} vs {v}"
        );
    }
    assert!(i.ci_low <= i.mean && i.mean <= i.ci_high);
    let table = specperf::sweep::console(&o.index);
    assert!(
        table.contains('±') && table.contains("up to 3 runs"),
        "{table}"
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.contains("request_throughput_ci_low"), "{csv}");
    let errors = schema_errors("sweep.v1.json", &read_json(&out.join("sweep.json")));
    assert!(errors.is_empty(), "{errors:?}");

    // A loose CV target is met after the two runs every check needs.
    let (p, said) = converging(
        &s.url(),
        &dir.path().join("converge"),
        "--num-profile-runs 5 --convergence-metric request_throughput --convergence-mode cv \
         --convergence-threshold 10",
    )
    .await;
    assert_eq!(p.runs.len(), 2, "{said:?}");
    assert!(p.convergence.as_ref().unwrap().converged);
    assert!(said.last().unwrap().contains("converged"), "{said:?}");
}

/// A sweep of one point of 8 requests at concurrency 2 against `url`, repeated as `flags` ask:
/// the point and what each convergence check said.
async fn converging(url: &str, out: &Path, flags: &str) -> (PointEntry, Vec<String>) {
    let cfg = sweep_config(
        &Replay::at(url)
            .dir(out)
            .args("--concurrency 2 --request-count 8 --osl 16")
            .args(flags)
            .argv(),
    );
    let mut said = Vec::new();
    let o = sweep_with(cfg, |ev| {
        if let Event::Convergence { explain, .. } = ev {
            said.push(explain.to_string());
        }
    })
    .await;
    (o.index.points[0].clone(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distribution_convergence_compares_the_newest_runs_requests_with_the_earlier_runs() {
    let s = sim(SimConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let (p, said) = converging(
        &s.url(),
        &dir.path().join("ks"),
        "--num-profile-runs 3 --convergence-metric request_latency --convergence-mode \
         distribution --convergence-threshold 1e-9",
    )
    .await;
    // The smallest p-value of 8 requests against 8 is far above 1e-9: run 2 converges.
    assert_eq!(p.runs.len(), 2, "{said:?}");
    let c = p.convergence.as_ref().expect("a KS check was recorded");
    assert!(c.converged, "{c:?}");
    assert!(
        said.last()
            .unwrap()
            .contains("KS test of run 2 against the earlier runs"),
        "{said:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sla_search_finds_the_concurrency_where_requests_start_to_queue() {
    // Six requests run at once; a seventh waits for one to finish (a request lasts about 160 ms),
    // so the p95 TTFT jumps from a few ms to about 100 ms past concurrency 6. The SLA (40 ms)
    // leaves tens of ms of margin on both sides for a loaded machine.
    let s = sim(SimConfig {
        max_running: Some(6),
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(10),
        ..SimConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("search");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--request-count 24 --osl 40 --warmup-request-count 2")
            .args("--search-recipe max-concurrency-under-sla --search-style monotonic")
            .args("--ttft-sla-ms 40 --search-max 64")
            .argv(),
    );
    let o = sweep_with(cfg, |_| {}).await;
    let search = o.index.search.as_ref().expect("the search is on record");
    let probes: Vec<(f64, bool)> = search
        .state
        .history
        .iter()
        .map(|p| (p.value, p.pass))
        .collect();
    let best = search.best.expect("a load met the SLA");
    assert!(
        (best - 6.0).abs() <= 1.0,
        "within one bisection step of 6: {probes:?}"
    );
    assert_eq!(search.first_failure, Some(best + 1.0), "{probes:?}");
    assert_eq!(
        probes.iter().map(|p| p.0).take(4).collect::<Vec<_>>(),
        [1.0, 2.0, 4.0, 8.0],
        "doubling first"
    );
    assert_eq!(o.index.points.len(), probes.len(), "every probe is a point");
    let errors = schema_errors("sweep.v1.json", &read_json(&out.join("sweep.json")));
    assert!(errors.is_empty(), "{errors:?}");
    let hist: Value = read_json(&out.join("search_history.json"));
    assert_eq!(hist["recipe"], "max-concurrency-under-sla");
    assert_eq!(hist["best"], json!(best));
    let table = specperf::sweep::console(&o.index);
    assert!(table.contains(&format!("best {best}")), "{table}");

    // max-goodput-under-slo judges each request (the run's goodput) against the same TTFT:
    // past 6, most requests wait, so fewer than 95% are good.
    let out = dir.path().join("goodput");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--request-count 24 --osl 40 --warmup-request-count 2")
            .args("--search-recipe max-goodput-under-slo --ttft-sla-ms 40")
            .args("--search-min 4 --search-max 16")
            .argv(),
    );
    let o = sweep_with(cfg, |_| {}).await;
    let search = o.index.search.as_ref().unwrap();
    let best = search.best.expect("a load met the SLO");
    assert!((best - 6.0).abs() <= 1.0, "{:?}", search.state.history);
    let at_best = o
        .index
        .points
        .iter()
        .find(|p| p.params.values().any(|v| *v == best));
    let good = at_best.unwrap().mean("good_request_fraction").unwrap();
    assert!(good >= 0.95, "{good}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pareto_sweep_runs_each_shape_at_each_concurrency_and_writes_aiperfs_frontier() {
    // The simulator counts prompt tokens with the tokenizer the synthetic prompts are cut with,
    // so each point's ISL is exactly its shape's.
    let tok = tokenizer_path();
    let s = sim(SimConfig {
        tokenizer: Some(std::sync::Arc::new(
            tokenizer_encoders::Tokenizer::from_path(&tok).unwrap(),
        )),
        ..fast()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pareto");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--search-recipe pareto-sweep --isl-osl-pairs")
            .arg("96/24, 300/8")
            .args("--concurrency 1,3 --synthetic --tokenizer")
            .arg(&tok)
            .args("--endpoint-type completions --request-count 6 --no-drain")
            .argv(),
    );
    let o = sweep_with(cfg, |_| {}).await;
    assert_eq!(o.exit_code, 0);
    let idx = &o.index;
    assert_eq!(idx.sweep_type, "pareto-sweep");
    let names: Vec<&str> = idx.points.iter().map(|p| p.name.as_str()).collect();
    // The shapes outside, concurrency inside (AIPerf's order); the pairs stay paired.
    assert_eq!(
        names,
        [
            "concurrency_1__isl_96__osl_24",
            "concurrency_3__isl_96__osl_24",
            "concurrency_1__isl_300__osl_8",
            "concurrency_3__isl_300__osl_8",
        ]
    );
    for (p, (isl, osl)) in idx
        .points
        .iter()
        .zip([(96, 24), (96, 24), (300, 8), (300, 8)])
    {
        let recs = records(&out.join(&p.name));
        assert_eq!(recs.len(), 6, "{}", p.name);
        for r in &recs {
            assert_eq!(
                (r["prompt_tokens"].as_u64(), r["completion_tokens"].as_u64()),
                (Some(isl), Some(osl)),
                "{}",
                p.name
            );
        }
    }
    let errors = schema_errors("sweep.v1.json", &read_json(&out.join("sweep.json")));
    assert!(errors.is_empty(), "{errors:?}");
    // AIPerf's pareto_sweep.json: every cell, x = p95 TTFT, y = output token throughput, and
    // the optimal ones are exactly those no other cell dominates.
    let ps = read_json(&out.join("sweep_aggregate/pareto_sweep.json"));
    assert_eq!(
        (
            &ps["x_metric"],
            &ps["x_stat"],
            &ps["y_metric"],
            &ps["y_stat"]
        ),
        (
            &json!("time_to_first_token"),
            &json!("p95"),
            &json!("output_token_throughput"),
            &json!("avg")
        )
    );
    let cells = ps["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let xy: Vec<(f64, f64)> = cells
        .iter()
        .map(|c| (c["x"].as_f64().unwrap(), c["y"].as_f64().unwrap()))
        .collect();
    for (i, (c, p)) in cells.iter().zip(&idx.points).enumerate() {
        let conc = *p.params.values().next().unwrap();
        assert_eq!(c["concurrency"].as_f64(), Some(conc));
        assert_eq!(c["x"].as_f64(), p.mean("time_to_first_token_p95"));
        assert_eq!(c["y"].as_f64(), p.mean("output_token_throughput"));
        let dominated = xy
            .iter()
            .any(|&(x, y)| x <= xy[i].0 && y >= xy[i].1 && (x < xy[i].0 || y > xy[i].1));
        assert_eq!(c["pareto_optimal"], json!(!dominated), "{c}");
    }
    assert!(cells.iter().any(|c| c["pareto_optimal"] == json!(true)));
    // InferenceX's chart: one series and one frontier per shape, never one across shapes.
    let svg = std::fs::read_to_string(out.join("pareto.svg")).unwrap();
    assert!(
        svg.contains("isl 96 / osl 24") && svg.contains("isl 300 / osl 8"),
        "a series per shape"
    );
    for shape in ["isl_96__osl_24", "isl_300__osl_8"] {
        assert!(
            idx.pareto_optimal.iter().any(|n| n.ends_with(shape)),
            "{shape} has its own frontier: {:?}",
            idx.pareto_optimal
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_that_starts_on_a_busy_server_says_so() {
    let s = sim(fast());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("busy");
    let cfg = sweep_config(
        &Replay::at(&s.url())
            .dir(&out)
            .args("--concurrency 1,2 --request-count 4 --osl 8 --drain-max-wait-seconds 0.3")
            .argv(),
    );
    let mut backlog = None;
    let o = sweep_with(cfg, |ev| {
        if let Event::RunDone { .. } = ev {
            backlog.get_or_insert_with(|| held(&s));
        }
    })
    .await;
    drop(backlog);
    let p = &o.index.points[1];
    assert!(p.started_undrained, "{:?}", p.drain_before);
    let d = p.drain_before.as_ref().unwrap();
    assert!(!d.drained && d.max_queue >= 1, "{d:?}");
    let summary = read_json(&out.join("concurrency_2/summary.json"));
    let warned = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("had not drained"));
    assert!(warned, "{}", summary["warnings"]);
    assert!(specperf::sweep::console(&o.index).contains("UNDRAINED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_after_the_server_is_gone_fail_on_record_and_the_finished_one_is_kept() {
    let mut server = Some(sim(fast()));
    let url = server.as_ref().unwrap().url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gone");
    let cfg = sweep_config(
        &Replay::at(&url)
            .dir(&out)
            .args("--model specperf-sim --concurrency 1,2,3 --request-count 4 --osl 8 --no-drain")
            .argv(),
    );
    let o = sweep_with(cfg, |ev| {
        if let Event::RunDone { .. } = ev {
            // The server goes away after the first point.
            server = None;
        }
    })
    .await;
    let idx = SweepIndex::read(&out).unwrap();
    assert_eq!(idx.status, "complete", "the sweep went on to the end");
    assert_eq!(idx.points.len(), 3, "every point is on record");
    let first = &idx.points[0];
    assert_eq!(
        (first.status, first.runs[0].exit_code),
        (PointStatus::Done, 0)
    );
    assert_eq!(first.mean("request_count"), Some(4.0));
    assert!(out.join("concurrency_1/summary.json").is_file());
    for p in &idx.points[1..] {
        let failed = p.status == PointStatus::Failed && p.error.is_some()
            || p.runs.iter().all(|r| r.exit_code != 0);
        assert!(failed, "{}: {:?} {:?}", p.name, p.status, p.error);
    }
    assert_ne!(o.exit_code, 0, "the exit code says a point failed");
    assert!(specperf::sweep::console(&idx).contains("concurrency_1"));
}

fn count_done(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("sweep.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| {
            v["points"]
                .as_array()
                .map(|a| a.iter().filter(|p| p["status"] == "done").count())
        })
        .unwrap_or(0)
}

#[test]
fn sigterm_stops_the_sweep_with_finished_points_kept_and_resume_runs_the_rest() {
    let s = sim(SimConfig {
        itl: Duration::from_millis(4),
        ..fast()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let args = |resume: bool| {
        let mut c = Command::new(BIN);
        c.arg("replay")
            .args(QUIET)
            .args([
                "--url",
                &s.url(),
                "--concurrency",
                "1,2,3",
                "--request-count",
                "12",
            ])
            .args(["--osl", "40", "--ui", "none", "--artifact-dir"])
            .arg(&out);
        if resume {
            c.arg("--resume");
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    };
    let mut child = args(false).spawn().unwrap();
    let until = std::time::Instant::now() + scaled(Duration::from_secs(60));
    while count_done(&out) < 1 {
        assert!(
            std::time::Instant::now() < until,
            "the first point never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = terminate(&mut child, scaled(Duration::from_secs(20)));
    assert_eq!(st.code(), Some(143));
    let idx = SweepIndex::read(&out).unwrap();
    assert_eq!(idx.status, "stopped");
    assert_eq!(idx.points[0].status, PointStatus::Done);
    let done_before = count_done(&out);
    assert!(done_before < 3, "stopped before the end");
    let first = std::fs::metadata(out.join("concurrency_1/summary.json"))
        .unwrap()
        .modified()
        .unwrap();

    let mut child = args(true).spawn().unwrap();
    let st = wait_exit(&mut child, scaled(Duration::from_secs(60)));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(st.code(), Some(0), "{err}");
    assert!(
        err.contains("concurrency_1: finished in the earlier sweep"),
        "{err}"
    );
    let idx = SweepIndex::read(&out).unwrap();
    assert_eq!(idx.status, "complete");
    let names: Vec<&str> = idx.points.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["concurrency_1", "concurrency_2", "concurrency_3"]);
    assert!(idx.points.iter().all(|p| p.status == PointStatus::Done));
    let again = std::fs::metadata(out.join("concurrency_1/summary.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(first, again, "the finished point was not run again");
}

#[test]
fn bad_sweep_flags_are_usage_errors_naming_the_flag() {
    for (args, says) in [
        (&["--concurrency", "2,4,2"][..], "lists 2 twice"),
        (
            &["--isl", "10,20", "--osl", "1,2,3", "--sweep-type", "zip"][..],
            "zip",
        ),
        (&["--ttft-sla-ms", "100"][..], "--search-recipe"),
        (
            &["--search-recipe", "max-concurrency-under-sla"][..],
            "at least one objective",
        ),
        (
            &[
                "--concurrency",
                "4",
                "--search-recipe",
                "max-concurrency-under-sla",
                "--ttft-sla-ms",
                "5",
            ][..],
            "drop --concurrency",
        ),
        (
            &["--convergence-metric", "request_throughput"][..],
            "--num-profile-runs",
        ),
        (
            &["--num-profile-runs", "3", "--convergence-metric", "nope"][..],
            "not a metric",
        ),
        (&["--resume"][..], "--artifact-dir"),
        // A sweep over --isl without synthetic prompts would run one collection N times.
        (&["--isl", "100,200"][..], "--synthetic --tokenizer"),
        (
            &["--search-recipe", "pareto-sweep", "--concurrency", "1,2"][..],
            "--isl-osl-pairs 128/128",
        ),
        (
            &[
                "--search-recipe",
                "pareto-sweep",
                "--isl-osl-pairs",
                "128/128",
            ][..],
            "--synthetic --tokenizer",
        ),
        (
            &[
                "--search-recipe",
                "pareto-sweep",
                "--isl-osl-pairs",
                "128/128",
                "--ttft-sla-ms",
                "50",
            ][..],
            "judges none",
        ),
        (&["--isl-osl-pairs", "128/128,64/64"][..], "pareto-sweep"),
        (
            &[
                "--search-recipe",
                "max-concurrency-under-sla",
                "--ttft-sla-ms",
                "50",
                "--search-style",
                "smooth_isotonic",
            ][..],
            "--search-style smooth_isotonic is AIPerf's model-based search",
        ),
        (&["--search-style", "monotonic"][..], "add --search-recipe"),
        (
            &[
                "--search-recipe",
                "pareto-sweep",
                "--isl-osl-pairs",
                "128/0",
            ][..],
            "two positive integers",
        ),
        (
            &[
                "--search-recipe",
                "pareto-sweep",
                "--isl-osl-pairs",
                "8/8,8/8",
            ][..],
            "given twice",
        ),
        (
            &[
                "--search-recipe",
                "pareto-sweep",
                "--isl-osl-pairs",
                "8/8",
                "--concurrency",
                "4",
            ][..],
            "single run",
        ),
        (
            &[
                "--concurrency",
                "1,2",
                "--num-profile-runs",
                "2",
                "--parameter-sweep-mode",
                "repeated",
            ][..],
            "--parameter-sweep-mode independent",
        ),
        (&["--concurrency", "1,0"][..], "at least 1"),
    ] {
        let out = replay_process(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Sweep-only flags on a single run are named, not silently dropped.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "replay",
            "--request-count",
            "2",
            "--gpus",
            "8",
            "--ui",
            "none",
        ])
        .arg("--artifact-dir")
        .arg(dir.path().join("one"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("ignored: --gpus only apply to a sweep"),
        "{err}"
    );
}
