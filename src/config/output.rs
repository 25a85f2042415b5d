//! What the run reports beyond the timings: goodput objectives and the InferenceX raw result
//! file's name. Feeds `metrics` and `report`.

use std::path::PathBuf;

use super::{err, ConfigError};
use crate::cli::ReplayArgs;
use crate::metrics::{Slo, SloMetric};

/// Parses `--goodput` items: `TAG:VALUE` pairs, several per item separated by whitespace
/// (AIPerf passes one quoted string, vLLM separate arguments). Each tag at most once.
pub(crate) fn parse_goodput(items: &[String]) -> Result<Vec<Slo>, ConfigError> {
    let mut out: Vec<Slo> = Vec::new();
    for pair in items.iter().flat_map(|i| i.split_whitespace()) {
        let Some((tag, value)) = pair.split_once(':') else {
            return err(format!(
                "--goodput {pair:?}: expected TAG:VALUE, e.g. --goodput \"ttft:200 tpot:20 e2el:5000\""
            ));
        };
        let Some(metric) = SloMetric::from_tag(tag) else {
            return err(format!(
                "--goodput {pair:?}: unknown metric {tag:?}; use ttft, tpot, e2el (or \
                 time_to_first_token, inter_token_latency, request_latency, \
                 output_token_throughput_per_user)"
            ));
        };
        let threshold: f64 = match value.parse() {
            Ok(v) if f64::is_finite(v) && v > 0.0 => v,
            _ => {
                return err(format!(
                    "--goodput {pair:?}: {value:?} is not a positive number ({})",
                    metric.unit()
                ))
            }
        };
        if out.iter().any(|s| s.metric == metric) {
            return err(format!(
                "--goodput {pair:?}: {} is given twice",
                metric.tag()
            ));
        }
        out.push(Slo { metric, threshold });
    }
    Ok(out)
}

/// Checks `RESULT_FILENAME`: a plain file name (the `.json` is appended), so the raw result can
/// only land in its directory.
pub(crate) fn result_file_name(name: &str) -> Result<String, ConfigError> {
    let bad = name.is_empty()
        || name.contains(['/', '\\', '\0'])
        || name.contains("..")
        || name.trim() != name;
    if bad {
        return err(format!(
            "--result-filename / RESULT_FILENAME {name:?} must be a plain file name (no path \
             separators, no \"..\", no surrounding spaces); put the directory in --result-dir / \
             RESULT_DIR"
        ));
    }
    Ok(name.to_owned())
}

/// `--result-filename` (or `RESULT_FILENAME`) with `--result-dir`: `None` when no name is given.
pub(super) fn result_file(
    a: &ReplayArgs,
) -> Result<Option<(Option<PathBuf>, String)>, ConfigError> {
    match a.result_filename.as_deref().filter(|n| !n.is_empty()) {
        // `.json` is appended when writing: `foo.json` names foo.json, not foo.json.json.
        Some(n) => Ok(Some((
            a.result_dir.clone(),
            result_file_name(n.strip_suffix(".json").unwrap_or(n))?,
        ))),
        None => Ok(None),
    }
}
