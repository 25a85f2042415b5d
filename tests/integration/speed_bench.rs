//! SPEED-Bench's six splits: AIPerf 0.13's dataset names select and order rows as AIPerf's own
//! loader does on the same files (checked against AIPerf run on them), and a Throughput file
//! whose prompts are not the split's length is warned about.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{fast, output_ok, Replay};

/// The splits' groups, as the prepared files carry them.
const CATEGORIES: [&str; 11] = [
    "coding",
    "humanities",
    "math",
    "multilingual",
    "qa",
    "rag",
    "reasoning",
    "roleplay",
    "stem",
    "summarization",
    "writing",
];
const TIERS: [&str; 3] = ["low_entropy", "mixed", "high_entropy"];

/// A prepared-file row in the preparer's column order; `turns` user turns.
fn row(n: usize, category: &str, turns: &[String]) -> String {
    json!({
        "question_id": format!("{n:032x}"),
        "category": category,
        "sub_category": "fixture",
        "source": "specperf-fixture",
        "src_id": n.to_string(),
        "difficulty": "",
        "multiturn": turns.len() > 1,
        "messages": turns.iter().map(|t| json!({"role": "user", "content": t})).collect::<Vec<_>>(),
    })
    .to_string()
}

/// A small file of `groups` shape: `per` rows a group, interleaved (so a filter and an order
/// both show), every fourth row with a second user turn; `prompt(group, n)` writes each first
/// turn.
fn split_file(groups: &[&str], per: usize, prompt: impl Fn(&str, usize) -> String) -> String {
    let mut lines = Vec::new();
    for i in 0..per * groups.len() {
        let g = groups[(i * 7) % groups.len()];
        let mut turns = vec![prompt(g, i)];
        if i % 4 == 1 {
            turns.push(format!("follow-up {i}"));
        }
        lines.push(row(i, g, &turns));
    }
    lines.join("\n") + "\n"
}

/// AIPerf 0.13's conversations for each (file, name): (first turn, turns) in its order. One
/// Python process for all (AIPerf's imports take seconds).
fn aiperf_selects(python: &Path, cases: &[(PathBuf, String)]) -> Vec<Vec<(String, usize)>> {
    let mut cmd = Command::new(python);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/speed_bench_aiperf_select.py"));
    for (file, name) in cases {
        cmd.arg(file).arg(name);
    }
    let out = output_ok(&mut cmd);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let turns = c["turns"].as_array().unwrap();
                    (turns[0].as_str().unwrap().to_owned(), turns.len())
                })
                .collect()
        })
        .collect()
}

/// What specperf sends for `name`: the first turns in replay order (`render`) and each
/// session's number of turns (a replay at concurrency 1 against the simulator).
async fn specperf_selects(file: &Path, name: &str) -> Vec<(String, usize)> {
    let out = output_ok(
        Command::new(env!("CARGO_BIN_EXE_specperf"))
            .args(["render", "--count", "10000", "--custom-dataset-type", name])
            .arg("--input-file")
            .arg(file),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let firsts: Vec<String> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(|b| {
            b.unwrap()["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let run = Replay::sim(fast())
        .args("--concurrency 1 --osl 4 --custom-dataset-type")
        .arg(name)
        .arg("--input-file")
        .arg(file)
        .run()
        .await;
    assert_eq!(run.out.summary.counts.failed, 0);
    let mut turns = vec![0usize; firsts.len()];
    for r in run.dir.records() {
        turns[r["sample_index"].as_u64().unwrap() as usize] += 1;
    }
    firsts.into_iter().zip(turns).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperf_names_select_and_order_every_split_as_aiperf_0_13_does() {
    let python = crate::conformance::venv_python();
    let tmp = tempfile::tempdir().unwrap();
    let qualitative = tmp.path().join("qualitative.jsonl");
    std::fs::write(
        &qualitative,
        split_file(&CATEGORIES, 3, |g, i| format!("{g} question {i}")),
    )
    .unwrap();
    let mut cases: Vec<(PathBuf, String)> = vec![
        (qualitative.clone(), "speed_bench_qualitative".into()),
        (qualitative.clone(), "speed_bench_coding".into()),
        (qualitative.clone(), "speed_bench_writing".into()),
    ];
    for split in ["1k", "2k", "8k", "16k", "32k"] {
        let file = tmp.path().join(format!("throughput_{split}.jsonl"));
        std::fs::write(
            &file,
            split_file(&TIERS, 3, |g, i| format!("{split} {g} text {i}")),
        )
        .unwrap();
        cases.push((file.clone(), format!("speed_bench_throughput_{split}")));
        for tier in TIERS {
            cases.push((
                file.clone(),
                format!("speed_bench_throughput_{split}_{tier}"),
            ));
        }
    }
    let aiperf = aiperf_selects(&python, &cases);
    assert_eq!(aiperf.len(), cases.len());
    for ((file, name), theirs) in cases.iter().zip(aiperf) {
        let ours = specperf_selects(file, name).await;
        assert!(!theirs.is_empty(), "{name}: AIPerf selected nothing");
        assert_eq!(ours, theirs, "{name} on {}", file.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throughput_tier_whose_prompts_miss_the_split_length_is_warned_about() {
    // The simulator counts ceil((chars + 16) / 4) prompt tokens per chat message: 3,984
    // characters make the split's 1,000; the `mixed` rows were cut to about 600.
    let text = split_file(&TIERS, 4, |g, i| {
        let chars = if g == "mixed" { 2_384 } else { 3_984 };
        let head = format!("{g} {i} ");
        head.clone() + &"x".repeat(chars - head.len())
    });
    let run = Replay::sim(fast())
        .args("--osl 4 --custom-dataset-type speed_bench_throughput_1k")
        .input_file("throughput_1k.jsonl", &text)
        .run()
        .await;
    let s = run.dir.summary();
    let errors = crate::common::schema_errors("summary.v1.json", &s);
    assert!(errors.is_empty(), "{errors:?}");
    let check = &s["speed_bench_isl"];
    assert_eq!(check["split"], "throughput_1k", "{check}");
    assert_eq!(check["nominal_isl"], 1000);
    assert_eq!(
        check["by_group"]["low_entropy"]["median"], 1000.0,
        "{check}"
    );
    assert_eq!(check["by_group"]["low_entropy"]["ok"], true);
    assert_eq!(check["by_group"]["mixed"]["median"], 600.0, "{check}");
    assert_eq!(check["by_group"]["mixed"]["ok"], false);
    let warned: Vec<&String> = run
        .out
        .run_warnings
        .iter()
        .filter(|w| w.contains("throughput_1k"))
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", run.out.run_warnings);
    assert!(
        warned[0].contains("mixed") && warned[0].contains("-40%"),
        "{}",
        warned[0]
    );
    // The run is AIPerf's `speed_bench_throughput_1k`; with --category the file's name gives
    // the split: `speed_bench_throughput_1k_mixed`.
    let format = |a: &Value| a["input_config"]["datasets"][0]["format"].clone();
    assert_eq!(format(&run.dir.aiperf()), "speed_bench_throughput_1k");
    let tier = Replay::sim(fast())
        .args("--osl 4 --custom-dataset-type speed_bench --category mixed")
        .input_file("throughput_1k.jsonl", &text)
        .run()
        .await;
    assert_eq!(
        format(&tier.dir.aiperf()),
        "speed_bench_throughput_1k_mixed"
    );
    assert_eq!(tier.out.summary.counts.success, 4);
}

#[test]
fn an_aiperf_name_that_selects_nothing_names_what_the_file_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("throughput_8k.jsonl");
    std::fs::write(
        &file,
        split_file(&["low_entropy", "high_entropy"], 2, |g, i| {
            format!("{g} {i}")
        }),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .args([
            "render",
            "--custom-dataset-type",
            "speed_bench_throughput_8k_mixed",
            "--input-file",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"mixed\"") && err.contains("high_entropy, low_entropy"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .args(["render", "--custom-dataset-type", "speed_bench_code"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("speed_bench_<category>"),
        "{err}"
    );
}

/// The simulator's truth for one acceptance group: 1 + accepted / drafts from its
/// `specperf_sim:group_spec_decode_*` counters.
fn group_truth(page: &str, group: &str) -> f64 {
    let value = |name: &str| -> f64 {
        let key = format!("specperf_sim:group_spec_decode_{name}_total{{group=\"{group}\"");
        page.lines()
            .find(|l| l.starts_with(&key))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} not on the page"))
    };
    1.0 + value("num_accepted_tokens") / value("num_drafts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_invocation_runs_every_category_and_takes_the_counters_al_of_each() {
    use specperf::sim::{AcceptanceGroup, SimConfig};
    // Three categories the simulator accepts differently; it reports nothing per request, so
    // only one run per category can tell them apart.
    let groups = [("coding", 0.9), ("math", 0.3), ("writing", 0.6)];
    let s = crate::common::sim(SimConfig {
        k: 3,
        acceptance_groups: groups
            .iter()
            .map(|(g, p)| AcceptanceGroup {
                text: format!("<{g}>"),
                probability: *p,
            })
            .collect(),
        ..fast()
    });
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("qualitative.jsonl");
    let names: Vec<&str> = groups.iter().map(|g| g.0).collect();
    std::fs::write(
        &file,
        split_file(&names, 6, |g, i| format!("<{g}> question {i}")),
    )
    .unwrap();
    let out_dir = tmp.path().join("matrix");
    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .args([
            "replay",
            "--url",
            &s.url(),
            "--osl",
            "48",
            "--progress-interval",
            "0",
        ])
        .args([
            "--metrics-settle-seconds",
            "0",
            "--category",
            "all",
            "--input-file",
        ])
        .arg(&file)
        .args([
            "--drain-poll-interval-seconds",
            "0.1",
            "--drain-idle-polls",
            "2",
        ])
        .arg("--artifact-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The drain wait ran between the runs (two of them), not before the first.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("drain: drained after").count(),
        2,
        "{stderr}"
    );
    let page = crate::common::http(&format!("{}/metrics", s.url()), "GET", None)
        .unwrap()
        .1;
    for (g, _) in groups {
        let dir = out_dir.join(format!("category_{g}"));
        let summary = crate::common::read_json(&dir.join("summary.json"));
        assert_eq!(summary["counts"]["success"], 6, "{g}");
        let al = summary["acceptance"]["acceptance"]["acceptance_length"]
            .as_f64()
            .unwrap_or_else(|| panic!("{g}: no counters' AL"));
        let truth = group_truth(&page, &format!("<{g}>"));
        assert!(
            (al - truth).abs() < 1e-9,
            "{g}: {al} vs the simulator's {truth}"
        );
        let format = &crate::common::read_json(&dir.join("profile_export_aiperf.json"))
            ["input_config"]["datasets"][0]["format"];
        assert_eq!(format, &format!("speed_bench_{g}"));
        // The console's matrix has the category's row with its AL.
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(g) && l.contains(&format!("{al:.2}"))),
            "{stdout}"
        );
    }
    // A listed category the file lacks is refused before anything runs, naming what it holds.
    let out = Command::new(env!("CARGO_BIN_EXE_specperf"))
        .args([
            "replay",
            "--url",
            &s.url(),
            "--category",
            "coding,rag",
            "--input-file",
        ])
        .arg(&file)
        .arg("--artifact-dir")
        .arg(tmp.path().join("none"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("rag not in the collection") && err.contains("coding, math, writing"),
        "{err}"
    );
    assert!(!tmp.path().join("none").exists());
}

#[test]
fn each_server_cell_runs_every_category_when_both_are_asked_for() {
    // `--serve-cmd` with `--category coding,math` used to run the categories against the
    // embedded simulator and start no server at all.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("qualitative.jsonl");
    std::fs::write(
        &file,
        split_file(&["coding", "math"], 4, |g, i| format!("{g} question {i}")),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_specperf");
    let out_dir = tmp.path().join("cells");
    let out = Command::new(bin)
        .arg("replay")
        .arg("--serve-cmd")
        .arg(format!(
            "{bin} sim --port {{port}} --k {{k}} --ttft-ms 1 --itl-ms 1 --acceptance-prob 0.7"
        ))
        .args(["--serve-param", "k=1,3", "--category", "coding,math"])
        .args(["--metrics-settle-seconds", "0", "--progress-interval", "0"])
        .args([
            "--drain-poll-interval-seconds",
            "0.1",
            "--drain-idle-polls",
            "2",
        ])
        .arg("--input-file")
        .arg(&file)
        .arg("--artifact-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let index = crate::common::read_json(&out_dir.join("cells.json"));
    assert_eq!(index["runs"], "categories");
    let errors = crate::common::schema_errors("cells.v1.json", &index);
    assert!(errors.is_empty(), "{errors:?}");
    for (k, truth) in [(1, 1.7), (3, 1.0 + 0.7 + 0.49 + 0.343)] {
        for c in ["coding", "math"] {
            let s =
                crate::common::read_json(&out_dir.join(format!("k_{k}/category_{c}/summary.json")));
            assert_eq!(s["counts"]["success"], 4);
            let al = s["acceptance"]["acceptance"]["acceptance_length"]
                .as_f64()
                .unwrap();
            // The cell's own server: its k bounds the AL (k = 1 cannot pass 2).
            assert!((al - truth).abs() < 0.3, "k {k} {c}: {al} vs {truth}");
        }
    }
}
