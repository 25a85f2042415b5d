//! `specperf collect` end to end with the binary's own simulator as the served command: the
//! collected curve is the simulator's expected AL per k within 3 standard errors, `specperf
//! gate` passes on it, a cell whose server fails is `N/A` with its log's tail, and the flags a
//! curve cannot be collected with are refused before any server starts.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::read_json;

const BIN: &str = env!("CARGO_BIN_EXE_specperf");
/// The simulator's per-position acceptance probability.
const P: f64 = 0.6;

/// A prepared-file shape: `n` coding prompts and two of another category.
fn prompts(dir: &Path, n: usize) -> std::path::PathBuf {
    let rows: String = (0..n + 2)
        .map(|i| {
            let cat = if i < n { "coding" } else { "math" };
            format!(
                "{{\"question_id\": \"{i:032x}\", \"category\": \"{cat}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Write function {i}.\"}}]}}\n"
            )
        })
        .collect();
    let p = dir.join("qualitative.jsonl");
    std::fs::write(&p, rows).unwrap();
    p
}

/// `specperf collect` with the simulator template and `extra` flags, run to its end.
fn collect(dir: &Path, template: &str, extra: &[&str]) -> Output {
    let input = prompts(dir, 32);
    Command::new(BIN)
        .arg("collect")
        .args(["--model-key", "test-model", "--serve-cmd", template])
        .args(["--input-file", input.to_str().unwrap()])
        .args([
            "--osl",
            "192",
            "--concurrency",
            "8",
            "--metrics-settle-seconds",
            "0",
        ])
        .arg("--output")
        .arg(dir.join("golden/testm_mtp.yaml"))
        .arg("--artifact-dir")
        .arg(dir.join("cells"))
        .args(extra)
        .output()
        .unwrap()
}

fn sim_template(extra: &str) -> String {
    format!(
        "{BIN} sim --port {{port}} --k {{k}} --acceptance-prob {P} --ttft-ms 1 --itl-ms 1{extra}"
    )
}

/// The curve's values: (mode, k) -> text as written.
fn values(yaml: &str) -> Vec<(String, u32, String)> {
    let mut mode = String::new();
    let mut out = Vec::new();
    for line in yaml.lines() {
        if let Some(m) = line.strip_prefix("  thinking_") {
            mode = format!("thinking_{}", m.trim_end_matches(':'));
        } else if let Some(rest) = line.strip_prefix("    ") {
            let (k, v) = rest.split_once(':').unwrap();
            let v = v.split('#').next().unwrap().trim().to_owned();
            out.push((mode.clone(), k.parse().unwrap(), v));
        }
    }
    out
}

#[test]
fn a_curve_collected_from_the_simulator_is_its_truth_and_the_gate_passes_on_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = collect(tmp.path(), &sim_template(""), &["--serve-param", "k=1,2,3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = std::fs::read_to_string(tmp.path().join("golden/testm_mtp.yaml")).unwrap();
    assert!(
        yaml.starts_with("# Acceptance Length (AL) reference values measured with SPEED-Bench.\n# dataset: coding | temperature: 1.0 | output_len: 192\n# thinking_on chat_template_kwargs: {\"thinking\": true}\n"),
        "{yaml}"
    );
    let record = read_json(&tmp.path().join("cells/collect.json"));
    let errors = crate::common::schema_errors("collect.v1.json", &record);
    assert!(errors.is_empty(), "{errors:?}");
    let cells = record["cells"].as_array().unwrap();
    // thinking_on first (as the collector writes it), then off; k as given.
    let order: Vec<(String, u32)> = values(&yaml).into_iter().map(|(m, k, _)| (m, k)).collect();
    let want: Vec<(String, u32)> = ["thinking_on", "thinking_off"]
        .iter()
        .flat_map(|m| (1..=3).map(move |k| (m.to_string(), k)))
        .collect();
    assert_eq!(order, want);
    for c in cells {
        let k = c["k"].as_u64().unwrap() as i32;
        // Per-position acceptance P until the first rejection: 1 + P + P² + ... + P^k.
        let truth = 1.0 + (1..=k).map(|i| P.powi(i)).sum::<f64>();
        let al = c["acceptance_length"].as_f64().unwrap();
        let se = c["standard_error"].as_f64().unwrap();
        assert!(se > 0.0 && se < 0.1, "{c}");
        assert!(
            (al - truth).abs() < 3.0 * se + 0.01,
            "k {k}: collected {al} vs the simulator's {truth} (SE {se})"
        );
        assert_eq!(c["requests"], 32, "{c}");
        let written = values(&yaml)
            .into_iter()
            .find(|(m, kk, _)| m == c["thinking"].as_str().unwrap() && *kk as i32 == k)
            .unwrap()
            .2;
        assert_eq!(written, format!("{al:.2}"));
    }
    // Each value carries its noise where it is read.
    assert!(
        yaml.contains("(1 SE), 32 requests, per-request AL p10 "),
        "{yaml}"
    );

    // The gate reads the curve and its block and passes on a server of the same acceptance.
    let sim = crate::common::sim(specperf::sim::SimConfig {
        k: 2,
        acceptance: specperf::sim::Acceptance::Probability(P),
        ..crate::common::fast()
    });
    let gate = Command::new(BIN)
        .current_dir(tmp.path())
        .env_remove("AL_GATE_GOLDEN")
        .env_remove("RESULT_FILENAME")
        .env_remove("MODEL_NAME")
        .args(["gate", "--url", &sim.url(), "--model", "specperf-sim"])
        .args([
            "--golden",
            "golden",
            "--model-prefix",
            "testm",
            "--spec-method",
            "mtp",
        ])
        .args(["--thinking-mode", "thinking_on", "--num-spec-tokens", "2"])
        .args([
            "--framework",
            "vllm",
            "--result-filename",
            "case",
            "--result-dir",
            "results",
        ])
        .args(["--input-file", "qualitative.jsonl", "--settle-seconds", "0"])
        .output()
        .unwrap();
    let r = read_json(&tmp.path().join("results/al_gate_case.json"));
    assert_eq!(
        r["verdict"],
        "pass",
        "{r:#}\n{}",
        String::from_utf8_lossy(&gate.stdout)
    );
    assert_eq!(r["prompts_expected"], 32);
}

#[test]
fn a_cell_whose_server_fails_is_na_with_its_log_tail_and_the_others_are_measured() {
    let tmp = tempfile::tempdir().unwrap();
    // k = 2 never starts; k = 1 does.
    let template = format!(
        "if [ {{k}} = 2 ]; then echo 'boom: no memory for k={{k}}' >&2; exit 3; fi; exec {}",
        sim_template("")
    );
    let out = collect(
        tmp.path(),
        &template,
        &["--serve-param", "k=1,2", "--thinking-modes", "on"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = std::fs::read_to_string(tmp.path().join("golden/testm_mtp.yaml")).unwrap();
    let v = values(&yaml);
    assert_eq!(v.len(), 2, "{yaml}");
    assert_ne!(v[0].2, "N/A");
    assert_eq!(v[1].2, "N/A", "{yaml}");
    assert!(!yaml.contains("thinking_off"), "{yaml}");
    let record = read_json(&tmp.path().join("cells/collect.json"));
    let errors = crate::common::schema_errors("collect.v1.json", &record);
    assert!(errors.is_empty(), "{errors:?}");
    let failed = &record["cells"][1];
    assert_eq!(failed["status"], "failed");
    let tail: Vec<&str> = failed["log_tail"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tail.iter().any(|l| l.contains("boom: no memory for k=2")),
        "{tail:?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("thinking_on   2       -"), "{stdout}");
}

#[test]
fn flags_a_curve_cannot_be_collected_with_are_refused_before_any_server_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("started");
    let template = format!("touch {} && exec {}", marker.display(), sim_template(""));
    for (extra, want) in [
        (
            vec!["--serve-param", "tp=1,2"],
            "--draft-param k names no --serve-param",
        ),
        (
            vec!["--serve-param", "k=1,x"],
            "\"x\" is not a draft length",
        ),
        (
            vec!["--serve-param", "k=1,2", "--num-prompts", "80"],
            "category coding of",
        ),
        (
            vec!["--serve-param", "k=1", "--encoder", "dsv4"],
            "chat requests are rendered by the server",
        ),
    ] {
        let out = collect(tmp.path(), &template, &extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    assert!(!marker.exists(), "a server was started");
}
