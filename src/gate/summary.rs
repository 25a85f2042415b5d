//! `specperf gate-summary`: many `al_gate_*.json` results rolled up into the collect-evals style
//! markdown table and a JSON summary (§7).
//!
//! ```text
//!  paths (files, directories searched recursively) ─> al_gate_*.json ─> rows sorted by
//!  (model prefix, thinking mode, k, file) ─> markdown table + {results, counts, all_passed, files}
//!  a file that is not a readable gate result ─> listed as unreadable, the rest still summarised
//! ```
//!
//! It reads result files as JSON values, not as `GateRecord`s: files written by other versions
//! of the gate (or by M1) must still summarise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Why no summary could be made.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    /// A path could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A path names nothing.
    #[error("{}: no such file or directory", path.display())]
    Missing {
        /// The path given.
        path: PathBuf,
    },
    /// No result file under the paths.
    #[error("no al_gate_*.json files found")]
    NoFiles,
    /// A result file is not JSON.
    #[error("{}: not a gate result: {source}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// A JSON file without the M1 version key.
    #[error("{}: not a gate result (no speedbench_al_eval_version)", path.display())]
    NotGateResult {
        /// The file.
        path: PathBuf,
    },
}

/// Finds `al_gate_*.json` files under `paths` (directories searched recursively); a file named
/// in `paths` itself is taken whatever its name (it was asked for). A directory that cannot be
/// listed goes to `unreadable`.
fn result_files(
    paths: &[PathBuf],
    unreadable: &mut Vec<SummaryError>,
) -> Result<Vec<PathBuf>, SummaryError> {
    let mut out = Vec::new();
    // (path, named on the command line)
    let mut stack: Vec<(PathBuf, bool)> = paths.iter().map(|p| (p.clone(), true)).collect();
    while let Some((p, named)) = stack.pop() {
        if p.is_dir() {
            match std::fs::read_dir(&p) {
                Ok(rd) => stack.extend(rd.flatten().map(|e| (e.path(), false))),
                Err(source) => unreadable.push(SummaryError::Read { path: p, source }),
            }
        } else if p.is_file() {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if named || (name.starts_with("al_gate") && name.ends_with(".json")) {
                out.push(p);
            }
        } else {
            return Err(SummaryError::Missing { path: p });
        }
    }
    out.sort();
    Ok(out)
}

/// One result file as a JSON value.
fn read_result(f: &Path) -> Result<Value, SummaryError> {
    let text = std::fs::read_to_string(f).map_err(|source| SummaryError::Read {
        path: f.to_owned(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|source| SummaryError::NotJson {
        path: f.to_owned(),
        source,
    })?;
    if v.get("speedbench_al_eval_version").is_none() {
        return Err(SummaryError::NotGateResult { path: f.to_owned() });
    }
    Ok(v)
}

/// A roll-up of many gate results.
#[derive(Debug)]
pub struct GateSummary {
    /// The collect-evals style markdown table, then the unreadable files, if any.
    pub markdown: String,
    /// The JSON roll-up (`unreadable` present only when some file was).
    pub json: Value,
    /// Files (or directories) that could not be read as gate results; left out of the table.
    pub unreadable: Vec<SummaryError>,
}

/// The collect-evals style table and JSON roll-up of many gate results (§7). A file that cannot
/// be read as a gate result is listed as unreadable and the others are still summarised; only a
/// path that names nothing, or no result file at all, is an error.
pub fn summarize(paths: &[PathBuf]) -> Result<GateSummary, SummaryError> {
    let mut unreadable = Vec::new();
    let files = result_files(paths, &mut unreadable)?;
    if files.is_empty() && unreadable.is_empty() {
        return Err(SummaryError::NoFiles);
    }
    let mut rows: Vec<(String, Value)> = Vec::new();
    for f in &files {
        let v = match read_result(f) {
            Ok(v) => v,
            Err(e) => {
                unreadable.push(e);
                continue;
            }
        };
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        rows.push((name, v));
    }
    let key = |v: &Value| {
        (
            v["model_prefix"].as_str().unwrap_or("").to_owned(),
            v["thinking_mode"].as_str().unwrap_or("").to_owned(),
            v["num_speculative_tokens"].as_u64().unwrap_or(0),
        )
    };
    rows.sort_by(|a, b| key(&a.1).cmp(&key(&b.1)).then(a.0.cmp(&b.0)));
    let mut md = String::from("### SpeedBench AL Gate Results\n\n");
    md.push_str("| Model Prefix | Framework | Thinking | MTP | Score | Metric Source | Result |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    let mut json_rows = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (name, v) in &rows {
        let verdict =
            v["verdict"]
                .as_str()
                .unwrap_or(if v["passed"] == true { "pass" } else { "below" });
        *counts.entry(verdict.to_owned()).or_default() += 1;
        let score = v["acceptance_length"].as_f64();
        let (min, max) = (
            v["min_acceptance_length"].as_f64(),
            v["max_acceptance_length"].as_f64(),
        );
        let pf = if v["passed"] == true { "PASS" } else { "FAIL" };
        let reason = v["reason"].as_str().unwrap_or("");
        let cell = match (verdict, score, min, max) {
            ("skipped", ..) => format!("SKIPPED ({reason})"),
            ("error", ..) => format!("ERROR ({reason})"),
            (_, Some(s), Some(lo), Some(hi)) => format!("{s:.2} in [{lo:.2}, {hi:.2}] ({pf})"),
            (_, Some(s), ..) => format!("{s:.2} ({pf})"),
            (_, None, ..) => "FAIL".to_owned(),
        };
        let text = |k: &str| match &v[k] {
            Value::Null => "N/A".to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {cell} | {} | {name} |\n",
            text("model_prefix"),
            text("framework").to_uppercase(),
            text("thinking_mode"),
            text("num_speculative_tokens"),
            text("metric_source"),
        ));
        let mut row = serde_json::Map::new();
        row.insert(
            "task".into(),
            json!(format!(
                "speedbench_al/{}/mtp{}",
                text("thinking_mode"),
                text("num_speculative_tokens")
            )),
        );
        row.insert("score".into(), json!(score));
        row.insert("score_name".into(), json!("acceptance_length"));
        row.insert("verdict".into(), json!(verdict));
        row.insert("file".into(), json!(name));
        for k in [
            "reference_acceptance_length",
            "min_acceptance_length",
            "max_acceptance_length",
            "threshold_ratio",
            "max_threshold_ratio",
            "thinking_mode",
            "num_speculative_tokens",
            "framework",
            "metric_source",
            "accepted_tokens",
            "proposed_draft_tokens",
            "passed",
            "error",
        ] {
            row.insert(
                format!("speedbench_{k}"),
                v.get(k).cloned().unwrap_or(Value::Null),
            );
        }
        let verify = v
            .get("verify_steps")
            .filter(|x| !x.is_null())
            .or_else(|| v.get("draft_tokens"));
        row.insert(
            "speedbench_verify_steps".into(),
            verify.cloned().unwrap_or(Value::Null),
        );
        row.insert("model_prefix".into(), v["model_prefix"].clone());
        json_rows.push(Value::Object(row));
    }
    // An unreadable result is not a pass.
    let all_passed = unreadable.is_empty() && counts.keys().all(|k| k == "pass");
    let mut roll = json!({
        "results": json_rows,
        "counts": counts,
        "all_passed": all_passed,
        "files": rows.len(),
    });
    if !unreadable.is_empty() {
        md.push_str("\nUnreadable (left out of the table):\n\n");
        for e in &unreadable {
            md.push_str(&format!("- {e}\n"));
        }
        roll["unreadable"] = json!(unreadable.iter().map(|e| e.to_string()).collect::<Vec<_>>());
    }
    Ok(GateSummary {
        markdown: md,
        json: sort_keys(&roll),
        unreadable,
    })
}

/// Sorts object keys at every depth: the roll-up is built in insertion order, and serde_json
/// keeps that order in this workspace.
fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}
