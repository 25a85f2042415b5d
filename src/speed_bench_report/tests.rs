//! The matrix's reading rules and text formats on small hand-written run directories; the
//! comparison with AIPerf's own command on simulator runs is the integration test
//! `speed_bench_report`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::runs::{self, ServerMetrics};
use super::speedup::{self, Cell, Speedup};
use super::table::{self, Matrix};
use super::*;

fn args(paths: &[&Path], out: &Path, metric: SpeedBenchMetric) -> SpeedBenchReportArgs {
    SpeedBenchReportArgs {
        paths: paths.iter().map(|p| p.to_path_buf()).collect(),
        output: out.to_path_buf(),
        format: SpeedBenchFormat::Both,
        metric,
        baseline: None,
    }
}

/// A run directory: a profile with `format`, `model`, throughput and ITL, and when given, the
/// server metrics and specperf's summary.
fn run_dir(
    dir: &Path,
    format: &str,
    model: &str,
    server: Option<Value>,
    summary: Option<Value>,
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let profile = json!({
        "input_config": {
            "models": {"items": [{"name": model}]},
            "datasets": [{"name": "main", "type": "file", "format": format}],
            "phases": [{"name": "profiling", "kind": "profiling", "concurrency": 4}],
        },
        "output_token_throughput": {"unit": "tokens/sec", "avg": 1234.5},
        "inter_token_latency": {"unit": "ms", "avg": 2.0},
    });
    std::fs::write(dir.join(runs::PROFILE_JSON), profile.to_string()).unwrap();
    if let Some(s) = server {
        std::fs::write(dir.join(runs::SERVER_METRICS_JSON), s.to_string()).unwrap();
    }
    if let Some(s) = summary {
        std::fs::write(dir.join("summary.json"), s.to_string()).unwrap();
    }
    dir.to_path_buf()
}

/// vLLM's counters over a run: `accepted` tokens of `proposed` over `drafts` steps.
fn vllm_counters(accepted: f64, drafts: f64, proposed: f64) -> Value {
    let c = |t: f64| json!({"type": "counter", "series": [{"stats": {"total": t}}]});
    json!({"metrics": {
        "vllm:spec_decode_num_accepted_tokens": c(accepted),
        "vllm:spec_decode_num_drafts": c(drafts),
        "vllm:spec_decode_num_draft_tokens": c(proposed),
    }})
}

fn collect_notes(
    a: &SpeedBenchReportArgs,
) -> (Result<ReportOutcome, MatrixError>, Vec<String>, Vec<usize>) {
    let (mut warnings, mut found) = (Vec::new(), Vec::new());
    let r = speed_bench_report(a, &mut |n| match n {
        Note::Warning(w) => warnings.push(w),
        Note::Found(n) => found.push(n),
    });
    (r, warnings, found)
}

#[test]
fn category_comes_from_format_else_dataset_with_the_prefix_removed() {
    let p = |datasets: Value| json!({"input_config": {"datasets": datasets}});
    assert_eq!(
        runs::category(&p(json!([{"format": "speed_bench_coding"}]))).as_deref(),
        Some("coding")
    );
    // An empty format falls back to `dataset`; a non-string selector is passed over.
    assert_eq!(
        runs::category(&p(json!([
            {"format": 7},
            {"format": "", "dataset": "spec_al_gsm8k"}
        ])))
        .as_deref(),
        Some("gsm8k")
    );
    // The first entry with a known prefix wins; others are not categories.
    assert_eq!(
        runs::category(&p(json!([
            {"format": "single_turn"},
            {"format": "speed_bench_throughput_8k_mixed"},
            {"format": "speed_bench_math"}
        ])))
        .as_deref(),
        Some("throughput_8k_mixed")
    );
    assert_eq!(runs::category(&p(json!([{"format": "single_turn"}]))), None);
    assert_eq!(
        runs::category(&p(json!({"format": "speed_bench_qa"}))),
        None
    );
    assert_eq!(runs::category(&json!({"input_config": "x"})), None);
}

#[test]
fn model_is_the_first_named_item_else_unknown() {
    let p = |items: Value| json!({"input_config": {"models": {"items": items}}});
    assert_eq!(
        runs::model(&p(json!([{"name": ""}, 3, {"name": "m2"}]))),
        "m2"
    );
    assert_eq!(runs::model(&p(json!([{"name": null}]))), "unknown");
    assert_eq!(runs::model(&json!({})), "unknown");
}

#[test]
fn accept_length_prefers_gauges_then_vllm_counters_then_the_first_fuzzy_name() {
    let gauge = |v: f64| json!({"type": "gauge", "series": [{"stats": {"avg": v}}]});
    // SGLang's gauge outranks vLLM's even when listed later in the file.
    let sm = ServerMetrics::from_json(
        &json!({"metrics": {
            "vllm:spec_decode_mean_accepted_length": gauge(2.5),
            "sglang:spec_accept_length": gauge(3.5),
            "vllm:spec_decode_num_accepted_tokens": {"series": [{"stats": {"total": 10.0}}]},
            "vllm:spec_decode_num_drafts": {"series": [{"stats": {"total": 5.0}}]},
        }})
        .to_string(),
    );
    assert_eq!(sm.accept_length(), Some(3.5));
    // Counters: 1 + accepted / drafts.
    let sm = ServerMetrics::from_json(&vllm_counters(30.0, 12.0, 36.0).to_string());
    assert_eq!(sm.accept_length(), Some(1.0 + 30.0 / 12.0));
    assert_eq!(sm.accept_rate(), Some(30.0 / 36.0));
    // No drafts: the fuzzy fallback, first in file order (not name order), and only names
    // with all of spec, accept and length.
    let sm = ServerMetrics::from_json(
        r#"{"metrics": {
            "request_acceptance_total_length": {"series": [{"stats": {"avg": 9.0}}]},
            "vllm:spec_decode_num_accepted_tokens": {"series": [{"stats": {"total": 4.0}}]},
            "vllm:spec_decode_num_drafts": {"series": [{"stats": {"total": 0.0}}]},
            "z_engine:Spec_Accept_Length": {"series": [{"stats": {"avg": 2.25}}]},
            "a_engine:spec_accept_length": {"series": [{"stats": {"avg": 1.75}}]}
        }}"#,
    );
    assert_eq!(sm.accept_length(), Some(2.25));
    // The rate has no fuzzy fallback.
    assert_eq!(sm.accept_rate(), None);
}

#[test]
fn columns_follow_the_known_set_present_else_sorted() {
    let m = |cats: &[&str]| -> Matrix {
        let mut m = Matrix::new();
        for (i, c) in cats.iter().enumerate() {
            m.entry(format!("m{}", i % 2))
                .or_default()
                .insert((*c).to_owned(), Some(1.0));
        }
        m
    };
    assert_eq!(
        table::columns(&m(&["writing", "coding", "stem"])),
        ["coding", "stem", "writing"]
    );
    assert_eq!(
        table::columns(&m(&["high_entropy", "low_entropy", "mixed"])),
        ["low_entropy", "mixed", "high_entropy"]
    );
    assert_eq!(
        table::columns(&m(&["mbpp", "gsm8k", "mtbench"])),
        ["gsm8k", "mtbench", "mbpp"]
    );
    // One category outside the set: plain sorted order for all.
    assert_eq!(
        table::columns(&m(&["writing", "coding", "mixed"])),
        ["coding", "mixed", "writing"]
    );
}

#[test]
fn csv_is_pythons_csv_writer_and_overall_is_the_mean_of_present_cells() {
    let mut m = Matrix::new();
    m.entry("b,model".into())
        .or_default()
        .extend([("coding".to_owned(), Some(2.0)), ("math".to_owned(), None)]);
    m.entry("a\"q".into()).or_default().extend([
        ("coding".to_owned(), Some(3.0)),
        ("math".to_owned(), Some(2.125)),
    ]);
    let cols = table::columns(&m);
    assert_eq!(
        table::matrix_csv(&m, &cols),
        "Model,coding,math,Overall\r\n\"a\"\"q\",3.00,2.12,2.56\r\n\"b,model\",2.00,,2.00\r\n"
    );
    let t = table::matrix_table(&m, &cols, "Acceptance Length Report");
    assert_eq!(
        t,
        "Acceptance Length Report\n\
         \x20  Model    coding      math   Overall\n\
         --------  --------  --------  --------\n\
         \x20    a\"q      3.00      2.12      2.56\n\
         \x20b,model      2.00         -      2.00\n"
    );
}

#[test]
fn plain_table_widens_the_model_column_and_lets_a_long_cell_overflow() {
    let h = ["Model", "c"].map(String::from);
    let rows = vec![["a-very-long-model".to_owned(), "123456789.00".to_owned()].to_vec()];
    let t = table::plain_table("T", &h, &rows);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[1], "            Model         c");
    assert_eq!(lines[2], "-----------------  --------");
    assert_eq!(lines[3], "a-very-long-model  123456789.00");
}

#[test]
fn mean_is_compensated() {
    // A naive sum loses the 1.0 to the large terms.
    assert_eq!(table::mean(&[1e16, 1.0, -1e16]), Some(1.0 / 3.0));
    assert_eq!(table::mean(&[]), None);
}

#[test]
fn nan_cells_become_missing() {
    let mut m = Matrix::new();
    m.entry("m".into()).or_default().extend([
        ("a".to_owned(), Some(f64::NAN)),
        ("b".to_owned(), Some(1.0)),
    ]);
    drop_nan(&mut m);
    assert_eq!(m["m"]["a"], None);
    assert_eq!(m["m"]["b"], Some(1.0));
}

#[test]
fn a_run_over_several_categories_gives_one_column_per_group() {
    let tmp = tempfile::tempdir().unwrap();
    let g = |al: f64, rate: f64| {
        json!({"requests": 3, "reported": {
            "token_weighted_acceptance_length": al, "acceptance_rate": rate,
            "mean_acceptance_length": al + 1.0}})
    };
    let summary = json!({"spec_decode": {"group_field": "category", "by_group": {
        "math": g(2.0, 0.25), "coding": g(3.0, 0.5)}}});
    let d = run_dir(
        &tmp.path().join("all"),
        "speed_bench_qualitative",
        "m",
        Some(vllm_counters(30.0, 12.0, 36.0)),
        Some(summary),
    );
    let out = tmp.path().join("r.csv");
    let (r, w, found) = collect_notes(&args(&[&d], &out, SpeedBenchMetric::AcceptLength));
    r.unwrap();
    assert_eq!(found, [1]);
    assert!(w.is_empty(), "{w:?}");
    // Token-weighted AL per group, not the run's counters (3.5) in a `qualitative` column.
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "Model,coding,math,Overall\r\nm,3.00,2.00,2.50\r\n"
    );
    let (r, _, _) = collect_notes(&args(&[&d], &out, SpeedBenchMetric::AcceptRate));
    r.unwrap();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "Model,coding,math,Overall\r\nm,0.50,0.25,0.38\r\n"
    );
    // Throughput per group is not defined: one note for two such runs, then no value at all.
    let summary2 = std::fs::read_to_string(d.join("summary.json")).unwrap();
    run_dir(
        &tmp.path().join("all2"),
        "speed_bench_qualitative",
        "m2",
        None,
        Some(serde_json::from_str(&summary2).unwrap()),
    );
    let (r, w, _) = collect_notes(&args(&[tmp.path()], &out, SpeedBenchMetric::Throughput));
    assert!(matches!(r, Err(MatrixError::NoResults { .. })), "{r:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("no output throughput belongs to one category"),
        "{w:?}"
    );
}

#[test]
fn a_mixed_run_without_per_request_figures_is_read_as_aiperf_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = json!({"spec_decode": {"by_group": {"math": {"requests": 3}}}});
    let d = run_dir(
        &tmp.path().join("all"),
        "speed_bench_qualitative",
        "m",
        Some(vllm_counters(30.0, 12.0, 36.0)),
        Some(summary),
    );
    let out = tmp.path().join("r.csv");
    let (r, w, _) = collect_notes(&args(&[&d], &out, SpeedBenchMetric::AcceptLength));
    r.unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("reported no acceptance per request"), "{w:?}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "Model,qualitative,Overall\r\nm,3.50,3.50\r\n"
    );
}

#[test]
fn runs_left_out_are_named_and_nothing_found_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r.csv");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (r, w, found) = collect_notes(&args(
        &[&file, tmp.path()],
        &out,
        SpeedBenchMetric::AcceptLength,
    ));
    assert!(matches!(r, Err(MatrixError::NoRunDirs { .. })), "{r:?}");
    assert!(found.is_empty());
    assert_eq!(
        w,
        [format!("{} is not a directory, skipping", file.display())]
    );

    let plain = run_dir(&tmp.path().join("p"), "single_turn", "m", None, None);
    let coding = run_dir(&tmp.path().join("c"), "speed_bench_coding", "m", None, None);
    let (r, w, found) = collect_notes(&args(&[tmp.path()], &out, SpeedBenchMetric::AcceptLength));
    assert!(matches!(r, Err(MatrixError::NoResults { .. })), "{r:?}");
    assert_eq!(found, [2]);
    assert_eq!(
        w,
        [
            format!("no {} in {}", runs::SERVER_METRICS_JSON, coding.display()),
            format!(
                "cannot determine category from {}, skipping",
                plain.display()
            ),
        ]
    );
    // The same runs give a throughput matrix; the category-less run is still left out.
    let (r, _, _) = collect_notes(&args(&[tmp.path()], &out, SpeedBenchMetric::Throughput));
    assert_eq!(r.unwrap().written[0].path, out);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "Model,coding,Overall\r\nm,1234.50,1234.50\r\n"
    );
}

#[test]
fn the_isl_split_drops_the_entropy_tier_of_throughput_categories() {
    assert_eq!(speedup::split("throughput_8k_mixed"), "throughput_8k");
    assert_eq!(speedup::split("throughput_1k_low_entropy"), "throughput_1k");
    assert_eq!(
        speedup::split("throughput_32k_high_entropy"),
        "throughput_32k"
    );
    assert_eq!(speedup::split("coding"), "coding");
    assert_eq!(speedup::split("mixed"), "mixed");
}

#[test]
fn speedup_cells_match_on_model_category_and_concurrency_and_name_the_rest() {
    let cell = |t: f64, p: f64| Cell {
        dirs: vec![PathBuf::from(format!("d{t}"))],
        throughput: Some(t),
        tpot_ms: Some(p),
    };
    let key = |m: &str, c: &str, n: u64| (m.to_owned(), c.to_owned(), Some(n));
    let spec = [
        (key("m", "coding", 1), cell(300.0, 1.0)),
        (key("m", "coding", 2), cell(500.0, 2.0)),
    ]
    .into_iter()
    .collect();
    let base = [
        (key("m", "coding", 1), cell(100.0, 4.0)),
        (key("m", "math", 1), cell(100.0, 4.0)),
    ]
    .into_iter()
    .collect();
    let mut w = Vec::new();
    let got = speedup::matched(spec, base, &mut |s| w.push(s));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].throughput(), Some(3.0));
    assert_eq!(got[0].tpot(), Some(4.0));
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("no baseline run for model m, category coding, concurrency 2"));
    assert!(w[1].contains("baseline run for model m, category math, concurrency 1 (d100)"));
    let csv = speedup::csv(&got);
    assert_eq!(
        csv.lines().nth(1),
        Some("m,coding,coding,1,300.00,100.00,3.000,1.0000,4.0000,4.000")
    );
    // One concurrency: a bar per split (a line of one point would not show).
    let svg = speedup::chart(&got);
    assert!(
        svg.contains(">coding<") && svg.contains(">ISL split (concurrency 1)<"),
        "{svg}"
    );
    assert!(!svg.contains("<path"), "{svg}");
    let t = speedup::tables(&got);
    assert!(t.contains("Output-throughput speedup") && t.contains("3.00") && t.contains("4.00"));
}

#[test]
fn a_zero_baseline_gives_no_speedup_rather_than_infinity() {
    let s = Speedup {
        model: "m".into(),
        category: "c".into(),
        concurrency: None,
        spec: Cell {
            dirs: Vec::new(),
            throughput: Some(1.0),
            tpot_ms: Some(0.0),
        },
        base: Cell {
            dirs: Vec::new(),
            throughput: Some(0.0),
            tpot_ms: Some(1.0),
        },
    };
    assert_eq!(s.throughput(), None);
    assert_eq!(s.tpot(), None);
}

#[test]
fn speedup_against_concurrency_is_one_line_per_isl_split() {
    let cell = |t: f64| Cell {
        dirs: Vec::new(),
        throughput: Some(t),
        tpot_ms: None,
    };
    let s = |category: &str, n: u64, spec: f64| Speedup {
        model: "m".into(),
        category: category.into(),
        concurrency: Some(n),
        spec: cell(spec),
        base: cell(100.0),
    };
    // Two tiers of the 8k split average into one line; the 1k split has its own.
    let cells = [
        s("throughput_8k_low_entropy", 1, 300.0),
        s("throughput_8k_high_entropy", 1, 200.0),
        s("throughput_8k_low_entropy", 8, 150.0),
        s("throughput_1k_mixed", 1, 250.0),
        s("throughput_1k_mixed", 8, 120.0),
    ];
    let svg = speedup::chart(&cells);
    assert_eq!(svg.matches("<path d=\"M").count(), 2, "{svg}");
    assert!(
        svg.contains(">throughput_8k<") && svg.contains(">throughput_1k<"),
        "{svg}"
    );
    assert!(!svg.contains(">throughput_8k_low_entropy<"), "{svg}");
}

#[test]
fn a_second_run_of_the_same_cell_replaces_the_first_and_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let a = run_dir(
        &tmp.path().join("a"),
        "speed_bench_math",
        "m",
        Some(vllm_counters(10.0, 10.0, 30.0)),
        None,
    );
    let b = run_dir(
        &tmp.path().join("b"),
        "speed_bench_math",
        "m",
        Some(vllm_counters(20.0, 10.0, 30.0)),
        None,
    );
    let out = tmp.path().join("r.csv");
    let (r, w, _) = collect_notes(&args(&[&a, &b], &out, SpeedBenchMetric::AcceptLength));
    r.unwrap();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "Model,math,Overall\r\nm,3.00,3.00\r\n"
    );
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with(&format!("{} and {} are both", a.display(), b.display())));
}

#[test]
fn paths_print_as_pathlib_prints_them() {
    assert_eq!(
        runs::pathlib(Path::new("./runs//a/./")),
        Path::new("runs/a")
    );
    assert_eq!(runs::pathlib(Path::new("/t/./r")).to_str(), Some("/t/r"));
    assert_eq!(runs::pathlib(Path::new("./")).to_str(), Some("."));
    assert_eq!(runs::pathlib(Path::new("../x")).to_str(), Some("../x"));
}

#[test]
fn a_baseline_without_runs_is_an_error_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let d = run_dir(
        &tmp.path().join("spec/math"),
        "speed_bench_math",
        "m",
        Some(vllm_counters(10.0, 10.0, 30.0)),
        None,
    );
    let empty = tmp.path().join("base");
    std::fs::create_dir_all(&empty).unwrap();
    let out = tmp.path().join("r.csv");
    let mut a = args(&[&d], &out, SpeedBenchMetric::Throughput);
    a.baseline = Some(empty.clone());
    let (r, _, _) = collect_notes(&a);
    match r {
        Err(MatrixError::NoBaseline { path }) => assert_eq!(path, empty),
        other => panic!("{other:?}"),
    }
    assert!(!out.exists());
    // The same run as its own baseline: every speedup is 1.
    a.baseline = Some(d.clone());
    let (r, w, _) = collect_notes(&a);
    let written: Vec<&str> = r.as_ref().unwrap().written.iter().map(|w| w.what).collect();
    assert_eq!(written, ["CSV", "Speedup CSV", "Speedup plot"], "{w:?}");
    let csv = std::fs::read_to_string(out.with_file_name("speed_bench_speedup.csv")).unwrap();
    assert!(csv.ends_with(",1.000,2.0000,2.0000,1.000\r\n"), "{csv}");
}
