//! `specperf speed-bench-report` on simulator runs of a small SPEED-Bench collection
//! (`tests/fixtures/speed_bench/three_categories.jsonl`, each category's prompts marked so the
//! simulator gives it its own acceptance): the CSVs against AIPerf 0.13's own
//! `aiperf speed-bench-report` on the same directories, a run over every category read per
//! group, and the speedup over a baseline sweep.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use specperf::sim::{AcceptanceGroup, PerRequestSpec, SimConfig, SimHandle};

use crate::common::{fast, read_json, scaled, sim, wait_exit, Replay};

/// (category, the marker its prompts start with, per-position acceptance probability).
const CATEGORIES: [(&str, &str, f64); 3] = [
    ("coding", "[coding]", 0.9),
    ("math", "[math]", 0.35),
    ("writing", "[writing]", 0.65),
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/speed_bench/three_categories.jsonl")
}

/// A simulator that accepts each category's drafts with its own probability.
fn grouped_sim(extra: SimConfig) -> SimHandle {
    sim(SimConfig {
        k: 3,
        acceptance_groups: CATEGORIES
            .iter()
            .map(|(_, marker, p)| AcceptanceGroup {
                text: (*marker).to_owned(),
                probability: *p,
            })
            .collect(),
        ..extra
    })
}

/// `program args`, run to its end (bounded), stdout and stderr captured.
fn bounded(program: &Path, args: &[&std::ffi::OsStr], dir: &Path) -> Output {
    let (out, err) = (dir.join("cmd.out"), dir.join("cmd.err"));
    let mut child = Command::new(program)
        .args(args)
        .env("COLUMNS", "200")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", program.display()));
    let status = wait_exit(&mut child, scaled(Duration::from_secs(120)));
    Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    }
}

/// `specperf speed-bench-report ARGS`.
fn ours(args: &[&std::ffi::OsStr], dir: &Path) -> Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["speed-bench-report".as_ref()];
    a.extend_from_slice(args);
    bounded(Path::new(env!("CARGO_BIN_EXE_specperf")), &a, dir)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One replay per category into `root/<category>` against a fresh simulator each, plus
/// `root/other-coding`: the coding prompts served under a second model name, a row with cells
/// missing.
async fn per_category_runs(root: &Path) {
    for (c, _, _) in CATEGORIES {
        let s = grouped_sim(fast());
        let r = Replay::at(&s.url())
            .dir(root.join(c))
            .arg("--input-file")
            .arg(fixture())
            .args(&format!(
                "--category {c} --request-count 6 --osl 24 --concurrency 2"
            ))
            .run()
            .await;
        assert_eq!(r.out.summary.counts.success, 6, "{c}");
    }
    let s = grouped_sim(SimConfig {
        model: "a-second-model".into(),
        ..fast()
    });
    let r = Replay::at(&s.url())
        .dir(root.join("other-coding"))
        .arg("--input-file")
        .arg(fixture())
        .args("--model a-second-model --category coding --request-count 6 --osl 24")
        .run()
        .await;
    assert_eq!(r.out.summary.counts.success, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_is_byte_identical_to_aiperf_0_13_speed_bench_report_for_every_metric() {
    let _machine = crate::common::exclusive();
    let python = crate::conformance::venv_python();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    per_category_runs(&runs).await;

    for metric in ["accept_length", "accept_rate", "throughput"] {
        // Spelled with `.` and a trailing slash: both print the paths as pathlib does.
        let theirs = tmp.path().join(format!("./aiperf-{metric}.csv"));
        let mine = tmp.path().join(format!("./specperf-{metric}.csv"));
        let args = |out: &Path| -> Vec<std::ffi::OsString> {
            vec![
                format!("{}/./", runs.display()).into(),
                "--format".into(),
                "csv".into(),
                "--output".into(),
                out.into(),
                "--metric".into(),
                metric.into(),
            ]
        };
        let a = args(&theirs);
        let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
        let mut with_cmd = vec!["speed-bench-report".as_ref()];
        with_cmd.extend_from_slice(&a);
        let p = bounded(&python.with_file_name("aiperf"), &with_cmd, tmp.path());
        assert!(
            p.status.success(),
            "aiperf speed-bench-report --metric {metric}: {}{}",
            text(&p.stdout),
            text(&p.stderr)
        );
        let m = args(&mine);
        let m: Vec<&std::ffi::OsStr> = m.iter().map(|s| s.as_os_str()).collect();
        let o = ours(&m, tmp.path());
        assert!(o.status.success(), "{metric}: {}", text(&o.stderr));
        assert_eq!(
            text(&o.stderr),
            text(&p.stderr),
            "{metric}: the same warnings"
        );
        let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(
            text(&o.stdout),
            text(&p.stdout).replace(&name(&theirs), &name(&mine))
        );
        assert!(
            text(&o.stdout).contains(&format!(
                "written to {}\n",
                tmp.path().join(name(&mine)).display()
            )),
            "{}",
            text(&o.stdout)
        );
        let (t, s) = (
            std::fs::read(&theirs).unwrap(),
            std::fs::read(&mine).unwrap(),
        );
        assert_eq!(text(&s), text(&t), "{metric}");
        assert_eq!(s, t, "{metric}: byte for byte");
    }

    // The comparison can see a difference: the rows are the two models, the second with only
    // its coding cell, and the categories' acceptance is ordered as the simulator was told.
    let csv = std::fs::read_to_string(tmp.path().join("specperf-accept_length.csv")).unwrap();
    let lines: Vec<&str> = csv.split("\r\n").collect();
    assert_eq!(lines[0], "Model,coding,math,writing,Overall", "{csv}");
    assert!(
        lines[1].starts_with("a-second-model,") && lines[1].contains(",,,"),
        "{csv}"
    );
    let al: Vec<f64> = lines[2]
        .split(',')
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        al[0] > al[2] && al[2] > al[1],
        "coding > writing > math: {csv}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_every_category_gives_each_group_its_counters_acceptance() {
    let s = grouped_sim(SimConfig {
        per_request_spec: PerRequestSpec::Summary,
        ..fast()
    });
    let r = Replay::at(&s.url())
        .arg("--input-file")
        .arg(fixture())
        .args("--request-count 18 --osl 32 --concurrency 3")
        .run()
        .await;
    assert_eq!(r.out.summary.counts.success, 18);
    let run = r.dir.path();
    assert_eq!(
        r.dir.aiperf()["input_config"]["datasets"][0]["format"],
        "speed_bench_qualitative"
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("al.csv");
    let o = ours(
        &[run.as_ref(), "--output".as_ref(), out.as_ref()],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("Acceptance Length Report"),
        "{}",
        text(&o.stdout)
    );
    let csv = std::fs::read_to_string(&out).unwrap();
    // One column per category (not one `qualitative` column), each the simulator's truth for
    // that category's requests: 1 + accepted / steps, as a per-category run's counters give.
    let truth = s.group_totals();
    let mut want = vec!["specperf-sim".to_owned()];
    let mut vals = Vec::new();
    for (_, marker, _) in CATEGORIES {
        let t = truth.iter().find(|t| t.group == marker).unwrap();
        let al = t.acceptance_length().unwrap();
        vals.push(al);
        want.push(format!("{al:.2}"));
    }
    want.push(format!("{:.2}", vals.iter().sum::<f64>() / 3.0));
    assert_eq!(
        csv,
        format!(
            "Model,coding,math,writing,Overall\r\n{}\r\n",
            want.join(",")
        )
    );
    let rate = tmp.path().join("rate.csv");
    let o = ours(
        &[
            run.as_ref(),
            "--output".as_ref(),
            rate.as_ref(),
            "--metric".as_ref(),
            "accept_rate".as_ref(),
            "--format".as_ref(),
            "csv".as_ref(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let coding = truth.iter().find(|t| t.group == "[coding]").unwrap();
    let expect = coding.accepted as f64 / coding.draft_tokens as f64;
    let row = std::fs::read_to_string(&rate).unwrap();
    assert!(
        row.contains(&format!("specperf-sim,{expect:.2},")),
        "{row} (coding rate {expect})"
    );
    // Throughput has no per-category value inside a shared run: said once, then exit 1.
    let o = ours(
        &[
            run.as_ref(),
            "--metric".as_ref(),
            "throughput".as_ref(),
            "--output".as_ref(),
            tmp.path().join("tp.csv").as_ref(),
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert_eq!(
        err.matches("ran several categories at once").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("Error: no SPEED-Bench results extracted"),
        "{err}"
    );
}

/// A concurrency sweep (1, 2) of one category into `dir`, against `s`.
async fn sweep(s: &SimHandle, dir: &Path, category: &str) {
    let r = Replay::at(&s.url())
        .dir(dir)
        .arg("--input-file")
        .arg(fixture())
        .args(&format!(
            "--category {category} --request-count 4 --osl 32 --concurrency 1,2 --no-drain"
        ));
    let o = crate::sweep::sweep_with(crate::sweep::sweep_config(&r.argv()), |_| {}).await;
    assert_eq!(o.exit_code, 0, "{}", dir.display());
}

fn throughput_of(run: &Path) -> f64 {
    read_json(&run.join("profile_export_aiperf.json"))["output_token_throughput"]["avg"]
        .as_f64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baseline_sweep_gives_speedup_tables_csv_and_plot_per_concurrency() {
    // Decode steps long enough that accepting drafts shows in the throughput.
    let timing = SimConfig {
        ttft: Duration::from_millis(1),
        itl: Duration::from_millis(2),
        ..SimConfig::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let (spec, base) = (tmp.path().join("spec"), tmp.path().join("base"));
    let s = grouped_sim(timing.clone());
    // The baseline: the same prompts, no draft ever accepted (AL 1).
    let b = sim(SimConfig {
        acceptance: specperf::sim::Acceptance::Probability(0.0),
        ..timing
    });
    for c in ["coding", "math"] {
        sweep(&s, &spec.join(c), c).await;
        sweep(&b, &base.join(c), c).await;
    }
    // A baseline cell the speculative runs lack: named, not an error.
    sweep(&b, &base.join("writing"), "writing").await;

    let out = tmp.path().join("report/tp.csv");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = ours(
        &[
            spec.join("coding").as_ref(),
            spec.join("math").as_ref(),
            "--baseline".as_ref(),
            base.as_ref(),
            "--metric".as_ref(),
            "throughput".as_ref(),
            "--output".as_ref(),
            out.as_ref(),
        ],
        tmp.path(),
    );
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("Output-throughput speedup") && stdout.contains("TPOT speedup"),
        "{stdout}"
    );
    for w in [
        "category writing, concurrency 1",
        "category writing, concurrency 2",
    ] {
        assert!(
            stderr.contains(w),
            "unmatched baseline cell {w} named: {stderr}"
        );
    }
    let csv = std::fs::read_to_string(out.with_file_name("speed_bench_speedup.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 4, "2 categories × 2 concurrencies: {csv}");
    for r in &rows {
        let (c, n) = (r[1], r[3]);
        let point = format!("concurrency_{n}");
        let spec_t = throughput_of(&spec.join(c).join(&point));
        let base_t = throughput_of(&base.join(c).join(&point));
        // Each cell is the ratio of the two runs of that category and concurrency.
        assert_eq!(r[6], format!("{:.3}", spec_t / base_t), "{csv}");
        assert!(
            spec_t / base_t > 1.2,
            "drafts accepted raise throughput: {csv}"
        );
        let tpot: f64 = r[9].parse().unwrap();
        assert!(tpot > 1.2, "and shorten TPOT: {csv}");
    }
    let svg = std::fs::read_to_string(out.with_file_name("speed_bench_speedup.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    for c in ["coding", "math"] {
        assert!(svg.contains(&format!(">{c}<")), "a line for {c}: {svg}");
    }
    assert!(!svg.contains(">writing<"), "{svg}");
    // Two concurrencies: lines (one per split), not bars.
    assert_eq!(svg.matches("<path d=\"M").count(), 2, "{svg}");
}
