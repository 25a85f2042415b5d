//! `specperf collect`: a golden acceptance-length curve, measured as InferenceX's collector
//! scripts measure one, in one command.
//!
//! ```text
//!  flags ──> Collection block (what every cell replays; the gate later repeats it exactly)
//!        ──> per thinking mode: gate::collection_replay (the mode's kwargs) + the --serve-cmd grid
//!        ──> sweep::run_cells (per cell: start the server, replay, stop the group, GPU wait)
//!        ──> each done cell's summary.json: the counters' AL over its window, and the
//!            per-request figures' distribution and standard error
//!        ──> yaml: the curve (model key → thinking mode → k → AL, N/A for a failed cell) plus
//!            the `collection:` block; collect.json with every cell's figures
//! ```
//!
//! Sits above `gate` (whose collection → replay translation it shares), `sweep` (the cells) and
//! `golden` (the block's types); nothing imports it. Each (mode, k) cell restarts the server, as
//! the collector scripts do, so a cell never inherits another's state.

mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::cli::{CollectArgs, CollectMode, ReplayArgs};
use crate::config::{ConfigError, RunConfig};
use crate::dataset::Split;
use crate::golden::{
    Collection, CollectionEndpoint, ModeKwargs, Renderer, Sampling, ThinkingMode, Turns,
};
use crate::metrics::{SpecTotalsView, SummaryView};
use crate::progress::Progress;
use crate::stop::{StopReason, Stopper};
use crate::sweep::{CellEvent, CellStatus, CellsConfig};

/// `collect.json`'s schema name.
pub const COLLECT_SCHEMA: &str = "specperf.collect.v1";

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::msg(m.into()))
}

/// The collection, validated before the first server starts.
pub struct CollectPlan {
    collection: Collection,
    model_key: String,
    output: PathBuf,
    dir: PathBuf,
    draft_param: String,
    note: Option<String>,
    serve_cmd: String,
    /// Per thinking mode, in the order asked: the cells of that mode.
    modes: Vec<(ThinkingMode, CellsConfig)>,
    /// Said once before the cells.
    pub warnings: Vec<String>,
}

/// One cell of the curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// `thinking_on` / `thinking_off`.
    pub thinking: ThinkingMode,
    /// The draft length.
    pub k: u32,
    /// What became of the cell.
    pub status: CellState,
    /// The counters' AL over the cell's window (the golden value).
    pub acceptance_length: Option<f64>,
    /// Its standard error, from the per-request figures (reported, else the stream estimate).
    pub standard_error: Option<f64>,
    /// Where the standard error and the distribution come from.
    pub per_request_source: Option<PerRequestSource>,
    /// Requests that succeeded.
    pub requests: Option<u64>,
    /// Per-request AL: count, mean, std, min, max, percentiles.
    pub per_request_al: Option<Value>,
    /// Why the cell has no value.
    pub error: Option<String>,
    /// The server log's last lines, for a failed cell.
    pub log_tail: Vec<String>,
    /// The cell's directory.
    pub dir: PathBuf,
}

/// What became of a cell (`status` in `collect.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    /// Its golden value was measured.
    Done,
    /// It has none (the error says why).
    Failed,
    /// A signal stopped the collection before it.
    NotRun,
}

impl CellState {
    /// The name in `collect.json` and on the console.
    pub fn as_str(self) -> &'static str {
        match self {
            CellState::Done => "done",
            CellState::Failed => "failed",
            CellState::NotRun => "not_run",
        }
    }
}

/// Which per-request figures gave a cell's standard error and distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerRequestSource {
    /// What the responses reported.
    Reported,
    /// The stream estimate (tokens per content event).
    StreamEstimate,
}

/// `collect.json`. Its keys have always been in this (alphabetical) order.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectRecord {
    /// Every cell, modes in the YAML's order, k ascending as given.
    pub cells: Vec<CellResult>,
    /// The curve's top-level key.
    pub model_key: String,
    /// The golden YAML (not written when `stopped_by` is set).
    pub output: PathBuf,
    /// [`COLLECT_SCHEMA`].
    pub schema: String,
    /// `--serve-cmd` as given.
    pub serve_cmd: String,
    /// The binary that wrote it.
    pub specperf_version: String,
    /// The signal that stopped the collection, if one did.
    pub stopped_by: Option<StopReason>,
}

impl CollectRecord {
    /// Reads `<dir>/collect.json`.
    pub fn read(dir: &Path) -> Result<CollectRecord, crate::sweep::IndexError> {
        crate::sweep::read_index(dir)
    }
}

impl crate::sweep::IndexFile for CollectRecord {
    const FILE: &'static str = "collect.json";
    const SCHEMA: &'static str = COLLECT_SCHEMA;
    fn schema(&self) -> &str {
        &self.schema
    }
}

/// What `collect` hands back.
pub struct CollectOutcome {
    /// Every cell, modes in the YAML's order (thinking_on first), k ascending as given.
    pub cells: Vec<CellResult>,
    /// The YAML, when written (not after a signal).
    pub output: Option<PathBuf>,
    /// The artifact directory.
    pub dir: PathBuf,
    /// A signal's exit code, else 1 when a cell failed, else 0.
    pub exit_code: i32,
}

/// What the cells tell the caller.
pub enum CollectEvent<'a> {
    /// A thinking mode's cells start.
    Mode(&'static str),
    /// A cell event.
    Cell(CellEvent<'a>),
}

impl CollectPlan {
    /// Validates the flags into the collection block and each mode's cells.
    pub fn from_args(a: &CollectArgs) -> Result<CollectPlan, ConfigError> {
        if a.model_key.trim().is_empty() || a.model_key.contains(':') {
            return err(format!(
                "--model-key {:?} must be a YAML key without ':' (e.g. deepseek-v4-pro)",
                a.model_key
            ));
        }
        let Some(serve_cmd) = a.serve.serve_cmd.clone() else {
            return err(
                "specperf collect starts the server for each cell: give --serve-cmd TEMPLATE \
                 with --serve-param k=1,2,3 (for a server you run yourself, measure one cell with \
                 `specperf replay` and write the YAML by hand)",
            );
        };
        let draft = draft_lengths(a)?;
        let modes = thinking_modes(a)?;
        let kwargs = |flag: &str, text: &str| -> Result<Map<String, Value>, ConfigError> {
            match serde_json::from_str(text) {
                Ok(Value::Object(m)) => Ok(m),
                _ => err(format!(
                    "--{flag} {text:?} must be a JSON object, e.g. '{{\"thinking\": true}}'"
                )),
            }
        };
        let on = kwargs("chat-template-kwargs-on", &a.chat_template_kwargs_on)?;
        let off = match &a.chat_template_kwargs_off {
            Some(t) => kwargs("chat-template-kwargs-off", t)?,
            None => Map::new(),
        };
        let renderer = renderer(a)?;
        let endpoint = match a.endpoint_type {
            crate::render::EndpointType::Chat => CollectionEndpoint::Chat,
            _ => CollectionEndpoint::Completions,
        };
        let mut collection = Collection {
            dataset: "speed_bench".into(),
            config: Split::of_file(&a.input_file).map(|s| s.name().to_owned()),
            category: a.category.clone(),
            num_prompts: 0,
            turns: Turns::First,
            endpoint,
            renderer,
            output_len: a.osl,
            sampling: Sampling {
                temperature: Some(a.temperature),
                top_p: a.top_p,
                top_k: a.top_k,
                ..Sampling::default()
            },
            chat_template_kwargs: ModeKwargs {
                thinking_on: modes.contains(&ThinkingMode::On).then(|| on.clone()),
                thinking_off: modes.contains(&ThinkingMode::Off).then(|| off.clone()),
            },
            concurrency: Some(a.concurrency),
            seed: Some(a.seed),
            source: None,
        };
        // Not beside the curve: a golden directory holds curves only.
        let dir = a.artifact_dir.clone().unwrap_or_else(|| {
            let stem = a
                .output
                .file_stem()
                .map_or_else(|| "curve".into(), |s| s.to_string_lossy().into_owned());
            Path::new("artifacts").join(format!("collect-{stem}"))
        });
        let mut warnings = Vec::new();
        let mut cells = Vec::new();
        for &mode in &modes {
            let kw = if mode == ThinkingMode::On { &on } else { &off };
            let mut r = crate::gate::collection_replay(
                &collection,
                mode,
                kw.clone(),
                None,
                a.input_file.clone(),
                String::new(),
            )
            .map_err(|e| ConfigError::msg(format!("replay flags: {e}")))?
            .replay;
            r.url = a.url.clone();
            r.model = a.model.clone();
            r.serve = a.serve.clone();
            r.scrape.server_metrics = a.server_metrics.clone();
            if a.metrics_settle_seconds.is_some() {
                r.scrape.metrics_settle_seconds = a.metrics_settle_seconds;
            }
            // A golden value is measured on every prompt: a failed request fails the cell.
            r.failed_request_threshold = 0.0;
            let mode_dir = dir.join(mode.as_str());
            r.sweep.resume = a.resume && mode_dir.join("cells.json").is_file();
            r.artifact_dir = Some(mode_dir);
            if collection.num_prompts == 0 {
                collection.num_prompts = prompt_count(a, &r)?;
            }
            let cfg = CellsConfig::from_replay(&r)?;
            for w in &cfg.warnings {
                if !warnings.contains(w) {
                    warnings.push(w.clone());
                }
            }
            cells.push((mode, cfg));
        }
        collection.source = Some(Value::String(format!(
            "specperf {} collect: {} cells of --serve-cmd {serve_cmd:?}",
            env!("CARGO_PKG_VERSION"),
            cells.len() * draft.values.len()
        )));
        Ok(CollectPlan {
            collection,
            model_key: a.model_key.clone(),
            output: a.output.clone(),
            dir,
            draft_param: a.draft_param.clone(),
            note: a.note.clone(),
            serve_cmd,
            modes: cells,
            warnings,
        })
    }
}

/// The `--draft-param` among the `--serve-param`s, each value a draft length; every other
/// parameter has one value (a curve has one value per draft length).
fn draft_lengths(a: &CollectArgs) -> Result<&crate::serve::ServeParam, ConfigError> {
    let params = &a.serve.serve_params;
    let draft = params
        .iter()
        .find(|p| p.name == a.draft_param)
        .ok_or_else(|| {
            ConfigError::msg(format!(
                "--draft-param {} names no --serve-param: add --serve-param {}=1,2,3 (the draft \
                 lengths), or name the one that is with --draft-param",
                a.draft_param, a.draft_param
            ))
        })?;
    if let Some(v) = draft
        .values
        .iter()
        .find(|v| !v.parse::<u32>().is_ok_and(|k| k >= 1))
    {
        return err(format!(
            "--serve-param {}: {v:?} is not a draft length (a whole number >= 1)",
            a.draft_param
        ));
    }
    if let Some(p) = params
        .iter()
        .find(|p| p.name != a.draft_param && p.values.len() > 1)
    {
        return err(format!(
            "--serve-param {} has {} values, but the curve has one value per draft length: \
             collect one curve per value of {}",
            p.name,
            p.values.len(),
            p.name
        ));
    }
    Ok(draft)
}

/// `--thinking-modes`, each once, in the order given.
fn thinking_modes(a: &CollectArgs) -> Result<Vec<ThinkingMode>, ConfigError> {
    let mut modes: Vec<ThinkingMode> = Vec::new();
    for m in &a.thinking_modes {
        let t = match m {
            CollectMode::On => ThinkingMode::On,
            CollectMode::Off => ThinkingMode::Off,
        };
        if !modes.contains(&t) {
            modes.push(t);
        }
    }
    if modes.is_empty() {
        return err("--thinking-modes needs at least one of off, on");
    }
    Ok(modes)
}

/// Who renders the prompts: the server's chat template for chat requests, else a client
/// renderer the gate can repeat (`--encoder`).
fn renderer(a: &CollectArgs) -> Result<Renderer, ConfigError> {
    Ok(match (a.endpoint_type, a.encoder.as_str()) {
        (crate::render::EndpointType::Chat, "none") => Renderer::ServerTemplate,
        (crate::render::EndpointType::Chat, e) => {
            return err(format!(
                "--encoder {e} renders completions prompts; chat requests are rendered by the \
                 server (drop --encoder, or add --endpoint-type completions)"
            ))
        }
        (_, "dsv4" | "deepseek_v4") => Renderer::DeepseekV4,
        (_, "dsv41" | "deepseek_v41") => Renderer::DeepseekV41,
        (_, e) => match e.strip_prefix("template:") {
            Some(f) if Path::new(f).is_file() => Renderer::Template(
                std::fs::canonicalize(f).map_or_else(|_| f.to_owned(), |p| p.display().to_string()),
            ),
            _ => {
                return err(format!(
                    "--endpoint-type completions needs a client renderer the gate can repeat: \
                     --encoder dsv4, dsv41 or template:FILE (an existing file), not {e:?}"
                ))
            }
        },
    })
}

/// The prompts of the category the cells replay (`r`: a mode's replay flags), read before any
/// server is up; `--num-prompts`, when given, must be that count (the gate replays them all).
fn prompt_count(a: &CollectArgs, r: &ReplayArgs) -> Result<u32, ConfigError> {
    let mut probe = r.clone();
    probe.url_bound_later = probe.url.is_none();
    probe.serve = Default::default();
    let rc = RunConfig::from_args(&probe)?;
    let n = crate::engine::collection_samples(&rc)
        .map_err(|e| ConfigError::msg(format!("--input-file: {e}")))?
        .len() as u32;
    if let Some(want) = a.num_prompts.filter(|w| *w != n) {
        return err(format!(
            "--num-prompts {want}: category {} of {} has {n} prompts, and the gate replays every \
             one of them; drop --num-prompts (or prepare a file with {want})",
            a.category,
            a.input_file.display()
        ));
    }
    Ok(n)
}

impl CollectPlan {
    /// Records the command line in every cell's artifacts.
    pub fn set_cli_command(&mut self, command: String) {
        for (_, c) in &mut self.modes {
            c.set_cli_command(command.clone());
        }
    }

    /// The console's progress style and interval.
    pub fn progress(&self) -> (crate::cli::Ui, Option<std::time::Duration>) {
        self.modes
            .first()
            .map_or((crate::cli::Ui::Simple, None), |(_, c)| {
                (c.ui, c.progress_interval)
            })
    }
}

/// Runs every mode's cells, then writes the YAML (unless a signal stopped the collection) and
/// `collect.json`.
pub async fn run_collect(
    plan: CollectPlan,
    stop: Stopper,
    progress: watch::Sender<Progress>,
    mut on_event: impl FnMut(CollectEvent<'_>),
) -> Result<CollectOutcome, crate::sweep::SweepError> {
    let mut results = Vec::new();
    let mut code = crate::exit::OK;
    let mut indexes = BTreeMap::new();
    for (mode, cfg) in plan.modes {
        if stop.reason().is_some() {
            break;
        }
        on_event(CollectEvent::Mode(mode.as_str()));
        let out = crate::sweep::run_cells(cfg, stop.clone(), progress.clone(), |ev| {
            on_event(CollectEvent::Cell(ev))
        })
        .await?;
        code = code.max(out.exit_code);
        indexes.insert(mode, out);
    }
    for mode in ThinkingMode::ALL {
        let Some(out) = indexes.get(&mode) else {
            continue;
        };
        for entry in &out.index.cells {
            let k = entry
                .values
                .get(&plan.draft_param)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            results.push(cell_result(mode, k, entry, &out.dir));
        }
    }
    // Any cell without a value makes the exit 1 (its YAML entry is N/A).
    if results.iter().any(|c| c.acceptance_length.is_none()) {
        code = code.max(crate::exit::FAILED);
    }
    let stopped = stop.reason();
    let code = crate::exit::of_many(stopped, code);
    let dir_err = |source| crate::sweep::SweepError::Dir {
        path: plan.dir.display().to_string(),
        source,
    };
    let record = CollectRecord {
        cells: results,
        model_key: plan.model_key.clone(),
        output: plan.output.clone(),
        schema: COLLECT_SCHEMA.into(),
        serve_cmd: plan.serve_cmd.clone(),
        specperf_version: env!("CARGO_PKG_VERSION").into(),
        stopped_by: stopped,
    };
    crate::fsutil::ensure_writable_dir(&plan.dir).map_err(dir_err)?;
    crate::sweep::write_index(&plan.dir, &record).map_err(|e| {
        let (path, source) = e.into_parts();
        crate::sweep::SweepError::Dir { path, source }
    })?;
    let results = record.cells;
    let output = if stopped.is_none() {
        let text = yaml::golden_yaml(
            &plan.model_key,
            plan.note.as_deref(),
            &plan.collection,
            &results,
        );
        let write = || -> std::io::Result<()> {
            if let Some(p) = plan.output.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(p)?;
            }
            std::fs::write(&plan.output, text)
        };
        write().map_err(|source| crate::sweep::SweepError::Dir {
            path: plan.output.display().to_string(),
            source,
        })?;
        Some(plan.output.clone())
    } else {
        None
    };
    Ok(CollectOutcome {
        cells: results,
        output,
        dir: plan.dir,
        exit_code: code,
    })
}

/// One cell's figures, read back from its run's `summary.json` (a resumed cell's too).
fn cell_result(
    mode: ThinkingMode,
    k: u32,
    entry: &crate::sweep::CellEntry,
    dir: &Path,
) -> CellResult {
    let cell_dir = dir.join(&entry.name);
    let mut r = CellResult {
        thinking: mode,
        k,
        status: CellState::Failed,
        acceptance_length: None,
        standard_error: None,
        per_request_source: None,
        requests: None,
        per_request_al: None,
        error: entry.error.clone(),
        log_tail: entry.log_tail.clone(),
        dir: cell_dir.clone(),
    };
    if entry.status != CellStatus::Done {
        if entry.status == CellStatus::Stopped {
            r.status = CellState::NotRun;
        }
        return r;
    }
    let summary = match SummaryView::read(&cell_dir.join("summary.json")) {
        Ok(v) => v,
        Err(e) => {
            r.error = Some(format!("no readable summary: {e}"));
            return r;
        }
    };
    let counts = summary.counts;
    r.requests = Some(counts.success);
    let failed = counts.failed + counts.cancelled;
    let acc = summary
        .acceptance
        .as_ref()
        .and_then(|a| a.acceptance.clone())
        .unwrap_or_default();
    if failed > 0 {
        r.error = Some(format!(
            "{failed} request(s) failed or were cancelled: a golden value is measured on every \
             prompt (see {})",
            cell_dir.join("records.jsonl").display()
        ));
        return r;
    }
    match (acc.status.as_deref(), acc.acceptance_length) {
        (Some("ok"), Some(al)) => {
            r.status = CellState::Done;
            r.acceptance_length = Some(al);
        }
        (status, _) => {
            r.error = Some(format!(
                "no acceptance length from the counters ({}: {})",
                status.unwrap_or("no metrics scraped"),
                acc.reason.as_deref().unwrap_or("no reason given")
            ));
            return r;
        }
    }
    let spec = summary.spec_decode.unwrap_or_default();
    let with_error =
        |t: Option<SpecTotalsView>| t.filter(|t| t.token_weighted_standard_error.is_some());
    let figures = with_error(spec.reported)
        .map(|t| (PerRequestSource::Reported, t))
        .or_else(|| {
            with_error(spec.stream_estimate).map(|t| (PerRequestSource::StreamEstimate, t))
        });
    if let Some((source, t)) = figures {
        r.per_request_source = Some(source);
        r.standard_error = t.token_weighted_standard_error;
        r.per_request_al = Some(t.acceptance_length.unwrap_or(Value::Null));
    }
    r
}

impl CollectOutcome {
    /// The console's table: a row per cell.
    pub fn table(&self) -> String {
        let mut out = String::from("mode          k      AL       SE  requests  status\n");
        for c in &self.cells {
            let f = |v: Option<f64>, d: usize| v.map_or("-".to_owned(), |v| format!("{v:.d$}"));
            out.push_str(&format!(
                "{:<12} {:>2} {:>7} {:>8} {:>9}  {}{}\n",
                c.thinking.as_str(),
                c.k,
                f(c.acceptance_length, 2),
                f(c.standard_error, 3),
                c.requests.map_or("-".to_owned(), |n| n.to_string()),
                c.status.as_str(),
                c.error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": {e}"))
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_json_reads_back_as_written_with_its_keys_in_the_files_order() {
        let record = CollectRecord {
            cells: vec![CellResult {
                thinking: ThinkingMode::Off,
                k: 3,
                status: CellState::Done,
                acceptance_length: Some(2.5),
                standard_error: Some(0.01),
                per_request_source: Some(PerRequestSource::StreamEstimate),
                requests: Some(40),
                per_request_al: Some(serde_json::json!({"count": 40, "avg": 2.5})),
                error: None,
                log_tail: Vec::new(),
                dir: PathBuf::from("thinking_off/k_3"),
            }],
            model_key: "m".into(),
            output: PathBuf::from("golden.yaml"),
            schema: COLLECT_SCHEMA.into(),
            serve_cmd: "serve --k {k}".into(),
            specperf_version: "0".into(),
            stopped_by: Some(StopReason::Interrupted),
        };
        let tmp = tempfile::tempdir().unwrap();
        crate::sweep::write_index(tmp.path(), &record).unwrap();
        let text = std::fs::read_to_string(tmp.path().join("collect.json")).unwrap();
        let keys: Vec<usize> = [
            "\"cells\"",
            "\"model_key\"",
            "\"output\"",
            "\"schema\"",
            "\"serve_cmd\"",
            "\"specperf_version\"",
            "\"stopped_by\"",
        ]
        .iter()
        .map(|k| {
            text.find(&format!("\n  {k}:"))
                .unwrap_or_else(|| panic!("{k}"))
        })
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
        let back = CollectRecord::read(tmp.path()).unwrap();
        assert_eq!(back, record);
    }
}
