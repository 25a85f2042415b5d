//! The model × category matrix as text: AIPerf 0.13's column order, its 2-decimal cells, its
//! CSV (Python's `csv` module: `\r\n`, minimal quoting) and its plain-text table. Pure functions
//! of the matrix; the same writers serve the speedup tables.

use std::collections::{BTreeMap, BTreeSet};

// SPEED-Bench's qualitative categories and the throughput split's tiers, in AIPerf's column
// order: the dataset's own lists.
use crate::dataset::{QUALITATIVE_CATEGORIES as QUALITATIVE, THROUGHPUT_TIERS};

/// Model -> category -> value (`None`: the run is there but gave no value).
pub(super) type Matrix = BTreeMap<String, BTreeMap<String, Option<f64>>>;

/// The `spec_al_*` benchmarks, math, then chat, then code.
const SPEC_AL: [&str; 5] = ["gsm8k", "math500", "mtbench", "humaneval", "mbpp"];

/// The columns: when every category present belongs to one known set, that set's order
/// (restricted to what is present); otherwise every category sorted.
pub(super) fn columns(m: &Matrix) -> Vec<String> {
    let present: BTreeSet<&str> = m
        .values()
        .flat_map(|r| r.keys())
        .map(String::as_str)
        .collect();
    for known in [&QUALITATIVE[..], &THROUGHPUT_TIERS[..], &SPEC_AL[..]] {
        if present.iter().all(|c| known.contains(c)) {
            return known
                .iter()
                .filter(|c| present.contains(*c))
                .map(|c| (*c).to_owned())
                .collect();
        }
    }
    present.into_iter().map(str::to_owned).collect()
}

/// A cell: two decimals, or `missing` when there is no value.
pub(super) fn cell(v: Option<f64>, missing: &str) -> String {
    v.map_or_else(|| missing.to_owned(), |v| format!("{v:.2}"))
}

/// The mean of the values present, `None` when there is none. Summed with compensation so the
/// result is the correctly rounded mean in all but pathological cases (AIPerf's
/// `statistics.mean` is exact); a last-bit difference could only show at a 2-decimal tie.
pub(super) fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    for &v in values {
        let t = sum + v;
        comp += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
    }
    Some((sum + comp) / values.len() as f64)
}

/// Each model's row: its name, one cell per column, then `Overall` (the mean of the cells that
/// have a value).
fn rows(m: &Matrix, columns: &[String], missing: &str) -> Vec<Vec<String>> {
    m.iter()
        .map(|(model, data)| {
            let vals: Vec<Option<f64>> = columns
                .iter()
                .map(|c| data.get(c).copied().flatten())
                .collect();
            let present: Vec<f64> = vals.iter().flatten().copied().collect();
            let mut row = vec![model.clone()];
            row.extend(vals.iter().map(|v| cell(*v, missing)));
            row.push(cell(mean(&present), missing));
            row
        })
        .collect()
}

/// The header of the matrix.
fn header(columns: &[String]) -> Vec<String> {
    let mut h = vec!["Model".to_owned()];
    h.extend(columns.iter().cloned());
    h.push("Overall".to_owned());
    h
}

/// The matrix as AIPerf writes its CSV: empty cells where a value is missing.
pub(super) fn matrix_csv(m: &Matrix, columns: &[String]) -> String {
    let mut all = vec![header(columns)];
    all.extend(rows(m, columns, ""));
    csv(&all)
}

/// The matrix as a plain-text table under `title`: `-` where a value is missing.
pub(super) fn matrix_table(m: &Matrix, columns: &[String], title: &str) -> String {
    plain_table(title, &header(columns), &rows(m, columns, "-"))
}

/// Rows as Python's `csv.writer` writes them: fields joined by commas, a field quoted (quotes
/// doubled) when it holds a comma, a quote or a line break, every line ended by `\r\n`.
pub(super) fn csv(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&crate::csv::row(row));
        out.push_str("\r\n");
    }
    out
}

/// AIPerf's plain-text table: every column right-justified to the wider of its header and 8
/// characters (the first column also to its longest cell), two spaces between columns, a dashed
/// rule under the header; `title` on the line above. A longer cell overflows its column, as
/// there.
pub(super) fn plain_table(title: &str, header: &[String], rows: &[Vec<String>]) -> String {
    let len = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| len(h).max(8)).collect();
    if let Some(w) = widths.first_mut() {
        *w = (*w).max(rows.iter().map(|r| len(&r[0])).max().unwrap_or(8));
    }
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{}{c}", " ".repeat(w.saturating_sub(len(c)))))
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = format!("{title}\n{}\n", line(header));
    out.push_str(
        &widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  "),
    );
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}
