//! Sweeps that own the server (`replay --serve-cmd`, vLLM's `bench sweep serve`): for each cell
//! of the `--serve-param` grid, the server is started ([`crate::serve::Server`]), the replay runs
//! against it (one run, or the whole sweep of points the other flags ask for) into
//! `<artifact-dir>/<cell>/`, the server's process group is stopped, GPU memory is waited for,
//! and `cells.json` is rewritten.
//!
//! ```text
//!  flags ──> CellsConfig (template; per cell a CellPlan: its run, sweep or categories,
//!            validated once, before any server) ──> for each cell:
//!     [GPU memory wait] ──> Server::start (log <cell>/server.log) ──> CellPlan::bind (the
//!     server's URL: its free port is known only now) ──> engine::replay, run_sweep or
//!     run_categories ──> Server::exited? ──> Server::stop ──> cells.json (after every step)
//! ```
//!
//! Decisions: a server that fails to start (exits, never ready) or dies during its cell makes
//! that cell `failed`, with its log's tail in `cells.json` and on the console, and the sweep goes
//! on. A signal ends the run in flight as it ends any run (artifacts written), then the server
//! group is stopped before this returns, so `main` never exits with a server behind it; the cell
//! is `stopped`. `--resume` skips `done` cells and resumes a cell's own sweep where it has a
//! `sweep.json`. The exit code is a signal's, else the highest of the cells' (a failed cell: 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::config::{check_single, wanted, SweepConfig};
use super::journal::{move_aside, IndexError, IndexStatus, Journal, SweepError};
use super::run::{run_sweep, Event, SweepOutcome};
use crate::cli::{ReplayArgs, Ui};
use crate::config::{ConfigError, RunConfig};
use crate::debug::step;
use crate::engine::{EngineError, RunOutcome};
use crate::exit;
use crate::progress::Progress;
use crate::serve::{self, Cell, GpuMemory, GpuWait, Server, Template};
use crate::stop::{StopReason, Stopper};
use crate::telemetry::TelemetryError;

/// `schema` of `cells.json`.
pub const CELLS_SCHEMA: &str = "specperf.cells.v1";

/// Default `--serve-ready-timeout`, seconds: loading a large model (weights, CUDA graphs,
/// torch.compile) takes many minutes.
const READY_TIMEOUT_S: f64 = 1200.0;
/// Default `--serve-stop-grace`, seconds.
const STOP_GRACE_S: f64 = 30.0;
/// Default `--serve-gpu-release-timeout`, seconds.
const GPU_RELEASE_S: f64 = 300.0;
/// Period of the GPU memory polls.
const GPU_POLL: Duration = Duration::from_millis(500);
/// At most this long for one nvidia-smi or amd-smi read of the GPUs' memory (killed then).
const SMI_TIMEOUT: Duration = Duration::from_secs(30);

/// `--serve-cmd` is given: the replay runs once per server cell.
pub fn serve_wanted(a: &ReplayArgs) -> bool {
    a.serve.serve_cmd.is_some()
}

/// A cell's state.
pub type CellStatus = super::journal::ItemStatus;

/// What each cell runs (`runs` in `cells.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellWork {
    /// One replay.
    Run,
    /// A sweep of points (`sweep.json` in the cell's directory).
    Sweep,
    /// One replay per SPEED-Bench category (`category_<name>/` in the cell's directory).
    Categories,
}

/// One `--serve-param` as `cells.json` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamEntry {
    /// The placeholder's name.
    pub name: String,
    /// Its values, in order.
    pub values: Vec<String>,
}

/// One cell of `cells.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellEntry {
    /// `k_2__tp_4`: also its directory, relative to the artifact directory.
    pub name: String,
    /// The parameters' values.
    pub values: BTreeMap<String, String>,
    /// The command as run (`sh -c`).
    pub command: String,
    /// The base URL the replay targeted.
    pub url: String,
    /// Where it stands.
    pub status: CellStatus,
    /// What the cell's replay (or sweep) exited with, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The server log, relative to the artifact directory.
    pub log: PathBuf,
    /// The log's last lines, for a failed cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
    /// When the server was started (RFC 3339).
    pub started_at: String,
    /// When it answered ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    /// When its group was gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// Seconds from start to ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
    /// Seconds from SIGTERM until the group was gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// The group outlived `--serve-stop-grace` and was killed.
    #[serde(default)]
    pub killed: bool,
    /// The wait for GPU memory before this cell's server started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_wait_before: Option<GpuWait>,
}

/// `cells.json`: rewritten atomically after every step of every cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellsIndex {
    /// [`CELLS_SCHEMA`].
    pub schema: String,
    /// The binary that wrote it.
    pub specperf_version: String,
    /// The command line.
    pub command: String,
    /// `--serve-cmd` as given.
    pub serve_cmd: String,
    /// `--serve-param`s, in order.
    pub params: Vec<ParamEntry>,
    /// What each cell runs.
    pub runs: CellWork,
    /// `running`, then `complete`, `partial` (a cell failed) or `stopped` (a signal).
    pub status: IndexStatus,
    /// The signal that stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
    /// The cells, in the grid's order.
    pub cells: Vec<CellEntry>,
}

super::journal::journal_index!(
    CellsIndex,
    "cells.json",
    CELLS_SCHEMA,
    "an earlier --serve-cmd sweep",
    cells: CellEntry
);

impl CellsIndex {
    /// Reads `<dir>/cells.json`.
    pub fn read(dir: &Path) -> Result<CellsIndex, IndexError> {
        super::journal::read(dir)
    }
}

/// What one cell runs, validated before the first server starts. Its server's URL is bound
/// once the server is up ([`CellPlan::bind`]): with `{port}` it is not known before.
#[derive(Debug)]
enum CellPlan {
    /// One replay, and the warnings about sweep flags it ignores (said before the cells).
    Run(Box<RunConfig>, Vec<String>),
    /// A sweep of points.
    Sweep(Box<SweepConfig>),
    /// One replay per SPEED-Bench category.
    Categories(Box<super::CategoryPlan>),
}

impl CellPlan {
    /// Validates a cell's replay flags as `work` runs them.
    fn new(work: CellWork, args: &ReplayArgs) -> Result<CellPlan, ConfigError> {
        Ok(match work {
            CellWork::Categories => {
                CellPlan::Categories(Box::new(super::CategoryPlan::from_replay(args)?))
            }
            CellWork::Sweep => CellPlan::Sweep(Box::new(SweepConfig::from_replay(args)?)),
            CellWork::Run => {
                let telemetry = args.telemetry.gpu_telemetry.is_some();
                let ignored = check_single(&args.sweep, telemetry)?;
                CellPlan::Run(Box::new(RunConfig::from_args(args)?), ignored)
            }
        })
    }

    /// The warnings, the live display and the progress period it runs with.
    fn settings(&self) -> (Vec<String>, Ui, Option<Duration>) {
        match self {
            CellPlan::Categories(c) => {
                let (ui, every) = c.progress();
                (c.warnings.clone(), ui, every)
            }
            CellPlan::Sweep(c) => (c.warnings.clone(), c.ui, c.progress_interval),
            CellPlan::Run(c, ignored) => {
                let w = ignored.iter().chain(&c.warnings).cloned().collect();
                (w, c.ui, c.progress_interval)
            }
        }
    }

    /// It continues a sweep recorded in the cell's directory (`--resume`).
    fn resumes(&self) -> bool {
        matches!(self, CellPlan::Sweep(c) if c.resume)
    }

    /// Points it at the cell's server, up at `url`, and records the command line.
    fn bind(&mut self, url: &str, command: &str) -> Result<(), ConfigError> {
        match self {
            CellPlan::Categories(c) => {
                if !command.is_empty() {
                    c.set_cli_command(command.to_owned());
                }
                c.bind(url)
            }
            CellPlan::Sweep(c) => {
                c.set_cli_command(command.to_owned());
                c.bind(url)
            }
            CellPlan::Run(c, _) => {
                if !command.is_empty() {
                    c.set_cli_command(command.to_owned());
                }
                c.bind(url)
            }
        }
    }
}

/// A validated `--serve-cmd` sweep.
#[derive(Debug)]
pub struct CellsConfig {
    template: Template,
    /// Each cell of the template's grid with what it runs, in order.
    cells: Vec<(Cell, CellPlan)>,
    /// `--url`, when the template has no `{port}`.
    fixed_url: Option<String>,
    /// The artifact directory (each cell's below it).
    pub dir: PathBuf,
    ready_timeout: Duration,
    stop_grace: Duration,
    gpu_release: Duration,
    resume: bool,
    /// What each cell runs.
    work: CellWork,
    command: String,
    /// Settings worth a word before the first cell (the first cell's run warnings included).
    pub warnings: Vec<String>,
    /// The live display.
    pub ui: Ui,
    /// Progress line period (None: none).
    pub progress_interval: Option<Duration>,
}

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::msg(m))
}

fn seconds(flag: &str, v: Option<f64>, default: f64) -> Result<Duration, ConfigError> {
    let v = v.unwrap_or(default);
    if !(v.is_finite() && v > 0.0) {
        return err(format!(
            "--{flag} must be a positive number of seconds, got {v}"
        ));
    }
    Duration::try_from_secs_f64(v)
        .map_err(|_| ConfigError::msg(format!("--{flag} {v} is too large")))
}

impl CellsConfig {
    /// Validates `replay --serve-cmd`: the template and parameters, where the replay points,
    /// the timeouts, and every cell's replay (or sweep) flags.
    pub fn from_replay(a: &ReplayArgs) -> Result<CellsConfig, ConfigError> {
        let s = &a.serve;
        let Some(text) = s.serve_cmd.as_deref() else {
            return err("--serve-cmd is missing");
        };
        let template = Template::new(text, s.serve_params.clone())
            .map_err(|e| ConfigError::msg(e.to_string()))?;
        let fixed_url =
            match (template.uses_port(), a.url.as_deref()) {
                (true, Some(url)) => {
                    return err(format!(
                "--url {url} and {{port}} in the --serve-cmd template both say where the server \
                     listens: with {{port}}, specperf picks a free port and targets \
                     http://127.0.0.1:PORT. Drop --url, or write the port into the template and \
                     keep --url"
            ))
                }
                (true, None) => None,
                (false, None) => return err(
                    "the --serve-cmd template has no {port}: give --url, the address its server \
                     listens at (e.g. --url http://127.0.0.1:8000 for `vllm serve ... --port \
                     8000`), or put {port} in the template for a port specperf picks",
                ),
                (false, Some(url)) => {
                    let url = if url.contains("://") {
                        url.to_string()
                    } else {
                        format!("http://{url}")
                    };
                    if !url.starts_with("http://") {
                        return err(format!(
                            "--url {url}: a server started by --serve-cmd is probed for readiness \
                         over plain HTTP; give an http:// URL"
                        ));
                    }
                    Some(url)
                }
            };
        let resume = a.sweep.resume;
        let dir =
            match &a.artifact_dir {
                Some(d) => d.clone(),
                None if resume => return err(
                    "--resume continues the cells in --artifact-dir: name the directory of the \
                     sweep to continue",
                ),
                None => default_dir(a.model.as_deref(), &template),
            };
        if resume && !dir.join("cells.json").is_file() {
            return err(format!(
                "--resume: {} holds no cells.json (no --serve-cmd sweep ran there); drop --resume \
                 to start one",
                dir.display()
            ));
        }
        let mut base = a.clone();
        base.serve = Default::default();
        base.sweep.resume = false;
        let work = if super::categories_wanted(&base) {
            CellWork::Categories
        } else if wanted(&base) {
            CellWork::Sweep
        } else {
            CellWork::Run
        };
        // Every cell must make a valid replay before the first server starts.
        let mut cells = Vec::new();
        for cell in template.cells() {
            let args = cell_args(&base, &dir, resume, work, &cell, fixed_url.as_deref());
            let plan = CellPlan::new(work, &args)
                .map_err(|e| ConfigError::msg(format!("cell {}: {e}", cell.name())))?;
            cells.push((cell, plan));
        }
        let (warnings, ui, progress_interval) = cells
            .first()
            .map(|(_, p)| p.settings())
            .unwrap_or((Vec::new(), a.ui, None));
        Ok(CellsConfig {
            work,
            template,
            cells,
            fixed_url,
            dir,
            ready_timeout: seconds(
                "serve-ready-timeout",
                s.serve_ready_timeout,
                READY_TIMEOUT_S,
            )?,
            stop_grace: seconds("serve-stop-grace", s.serve_stop_grace, STOP_GRACE_S)?,
            gpu_release: seconds(
                "serve-gpu-release-timeout",
                s.serve_gpu_release_timeout,
                GPU_RELEASE_S,
            )?,
            command: String::new(),
            resume,
            warnings,
            ui,
            progress_interval,
        })
    }

    /// Records the command line (in `cells.json` and every run's summary).
    pub fn set_cli_command(&mut self, command: String) {
        self.command = command;
    }
}

/// The replay flags of `cell`: `base` writing into the cell's directory below `dir`, against
/// `url`, else against the cell's server bound later.
fn cell_args(
    base: &ReplayArgs,
    dir: &Path,
    resume: bool,
    work: CellWork,
    cell: &Cell,
    url: Option<&str>,
) -> ReplayArgs {
    let mut a = base.clone();
    a.url = url.map(str::to_owned);
    a.url_bound_later = url.is_none();
    let dir = dir.join(cell.name());
    a.sweep.resume = resume && work == CellWork::Sweep && dir.join("sweep.json").is_file();
    a.artifact_dir = Some(dir);
    if let (Some(stem), Some(_)) = (&a.result_filename, &a.result_dir) {
        // One --result-dir for every cell: each cell's raw JSON gets its own name.
        let stem = stem.strip_suffix(".json").unwrap_or(stem);
        a.result_filename = Some(format!("{stem}_{}", cell.name()));
    }
    a
}

/// `artifacts/<model>-serve-<params>`.
fn default_dir(model: Option<&str>, t: &Template) -> PathBuf {
    let mut name = format!(
        "{}-serve",
        crate::fsutil::safe_name(model.unwrap_or("specperf"))
    );
    for p in t.params() {
        name.push('-');
        name.push_str(&p.name);
    }
    Path::new("artifacts").join(name)
}

/// What the cells tell the caller as they go (the binary prints it).
pub enum CellEvent<'a> {
    /// A cell's server is being started.
    Start {
        /// The cell.
        cell: &'a str,
        /// 1-based.
        index: usize,
        /// Cells in all.
        total: usize,
        /// The command as run.
        command: &'a str,
        /// Its log.
        log: &'a Path,
    },
    /// It answered ready.
    Ready {
        /// The cell.
        cell: &'a str,
        /// Seconds since start.
        seconds: f64,
        /// The base URL the replay targets.
        url: &'a str,
    },
    /// Its server's group was stopped.
    ServerStopped {
        /// The cell.
        cell: &'a str,
        /// How.
        stopped: serve::Stopped,
    },
    /// The cell failed (the server, or the runs could not start).
    Failed {
        /// The cell.
        cell: &'a str,
        /// Why.
        error: &'a str,
        /// The server log's last lines.
        tail: &'a [String],
    },
    /// `--resume`: a cell done earlier, not run again.
    Skipped {
        /// The cell.
        cell: &'a str,
    },
    /// The GPU memory wait before a start ended.
    GpuWait(&'a GpuWait),
    /// A cell's single run ended.
    RunDone {
        /// The cell.
        cell: &'a str,
        /// The outcome.
        outcome: &'a RunOutcome,
        /// What `replay` would exit with.
        exit_code: i32,
    },
    /// A cell's single run could not start.
    RunFailed {
        /// The cell.
        cell: &'a str,
        /// Why.
        error: &'a EngineError,
    },
    /// An event of a cell's sweep.
    Sweep(Event<'a>),
    /// An event of a cell's per-category runs (`--category a,b` / `all`).
    Category(super::CategoryEvent<'a>),
    /// A cell's per-category runs ended.
    CategoriesDone {
        /// The cell.
        cell: &'a str,
        /// Their outcome (the matrix).
        outcome: &'a super::CategoriesOutcome,
    },
    /// A cell's sweep ended.
    SweepDone {
        /// The cell.
        cell: &'a str,
        /// Its outcome (index, directory, exit code).
        outcome: &'a SweepOutcome,
    },
    /// Something worth a warning.
    Warning(String),
}

/// What the cells hand back.
pub struct CellsOutcome {
    /// `cells.json` as written.
    pub index: CellsIndex,
    /// The artifact directory.
    pub dir: PathBuf,
    /// A signal's exit code, else the highest of the cells' (1 for a failed cell).
    pub exit_code: i32,
}

/// Runs every cell. `progress` carries each run's live progress; `on_event` hears the rest.
/// Returns only once no server of it is running.
pub async fn run_cells(
    mut cfg: CellsConfig,
    stop: Stopper,
    progress: watch::Sender<Progress>,
    mut on_event: impl FnMut(CellEvent<'_>),
) -> Result<CellsOutcome, SweepError> {
    let dir = cfg.dir.clone();
    let fresh = || fresh_index(&cfg);
    let (mut index, aside) = Journal::open(&dir, cfg.resume, &cfg.command, fresh)?;
    if let Some(aside) = aside {
        on_event(CellEvent::Warning(index.moved_aside(&aside)));
    }
    let save = |index: &Journal<CellsIndex>, on_event: &mut dyn FnMut(CellEvent<'_>)| {
        if let Err(e) = index.save() {
            on_event(CellEvent::Warning(e.to_string()));
        }
    };

    let baseline = gpu_baseline(&mut on_event).await;
    let read_memory = || async {
        crate::telemetry::memory_used(SMI_TIMEOUT)
            .await
            .map_err(|e| e.to_string())
    };
    let cells = std::mem::take(&mut cfg.cells);
    let total = cells.len();
    let mut ran_any = false;
    let mut code = exit::OK;
    for (i, (cell, plan)) in cells.into_iter().enumerate() {
        let name = cell.name();
        if stop.reason().is_some() {
            break;
        }
        if index.done(&name).is_some() {
            on_event(CellEvent::Skipped { cell: &name });
            // Keep the index in the grid's order.
            index.move_to_end(&name);
            continue;
        }
        let gpu_wait = match (&baseline, ran_any) {
            (Some(base), true) => {
                let w =
                    serve::wait_for_release(base, cfg.gpu_release, GPU_POLL, &stop, read_memory)
                        .await;
                on_event(CellEvent::GpuWait(&w));
                Some(w)
            }
            _ => None,
        };
        if stop.reason().is_some() {
            break;
        }
        let port = if cfg.template.uses_port() {
            match serve::free_port() {
                Ok(p) => Some(p),
                Err(e) => {
                    on_event(CellEvent::Warning(format!(
                        "cell {name}: no free loopback port: {e}"
                    )));
                    code = code.max(exit::FAILED);
                    continue;
                }
            }
        } else {
            None
        };
        let url = match (&cfg.fixed_url, port) {
            (Some(u), _) => u.clone(),
            (None, p) => format!("http://127.0.0.1:{}", p.unwrap_or(0)),
        };
        let command = cfg.template.command(&cell, port);
        if !plan.resumes() {
            move_earlier_attempt_aside(&dir, &name, &mut on_event);
        }
        let log_rel = Path::new(&name).join("server.log");
        let log = dir.join(&log_rel);
        let mut entry = CellEntry::starting(&cell, &command, &url, log_rel, gpu_wait);
        index.upsert(entry.clone());
        save(&index, &mut on_event);
        on_event(CellEvent::Start {
            cell: &name,
            index: i + 1,
            total,
            command: &command,
            log: &log,
        });
        ran_any = true;
        let t0 = Instant::now();
        let started = Server::start(
            &command,
            &log,
            &url,
            cfg.ready_timeout,
            cfg.stop_grace,
            &stop,
        )
        .await;
        let mut server = match started {
            Ok(s) => s,
            Err(e) => {
                entry.stopped_at = Some(crate::timefmt::rfc3339_now());
                entry.error = Some(e.to_string());
                if e.is_stopped() {
                    index.upsert(entry);
                    break;
                }
                entry.status = CellStatus::Failed;
                entry.log_tail = e.tail().to_vec();
                on_event(CellEvent::Failed {
                    cell: &name,
                    error: &e.to_string(),
                    tail: e.tail(),
                });
                code = code.max(exit::FAILED);
                index.upsert(entry);
                save(&index, &mut on_event);
                continue;
            }
        };
        entry.ready_s = Some(t0.elapsed().as_secs_f64());
        entry.ready_at = Some(crate::timefmt::rfc3339_now());
        index.upsert(entry.clone());
        save(&index, &mut on_event);
        on_event(CellEvent::Ready {
            cell: &name,
            seconds: t0.elapsed().as_secs_f64(),
            url: &url,
        });

        let ran = run_cell(&cfg, &name, plan, &url, &stop, &progress, &mut on_event).await;
        let died = server.exited();
        let stopped = server.stop(cfg.stop_grace).await;
        on_event(CellEvent::ServerStopped {
            cell: &name,
            stopped,
        });
        entry.stopped_at = Some(crate::timefmt::rfc3339_now());
        entry.stop_s = Some(stopped.seconds);
        entry.killed = stopped.killed;
        let signalled = matches!(
            stop.reason(),
            Some(StopReason::Interrupted | StopReason::Terminated)
        );
        let cell_code = settle(&mut entry, &ran, died, signalled, &log);
        if entry.status == CellStatus::Failed {
            entry.log_tail = serve::log_tail(&log, serve::TAIL_LINES);
            on_event(CellEvent::Failed {
                cell: &name,
                error: entry.error.as_deref().unwrap_or_default(),
                tail: &entry.log_tail,
            });
            code = code.max(cell_code).max(exit::FAILED);
        } else if entry.status == CellStatus::Done {
            code = code.max(cell_code);
        }
        index.upsert(entry);
        save(&index, &mut on_event);
    }
    let stopped = stop.reason();
    index.finish(stopped, total);
    let code = exit::of_many(stopped, code);
    save(&index, &mut on_event);
    Ok(CellsOutcome {
        index: index.into_index(),
        dir: dir.clone(),
        exit_code: code,
    })
}

impl CellEntry {
    /// The entry of `cell` as its server starts: `stopped` until it ends otherwise (a crash
    /// leaves it so, and `--resume` runs it again).
    fn starting(
        cell: &Cell,
        command: &str,
        url: &str,
        log: PathBuf,
        gpu_wait_before: Option<GpuWait>,
    ) -> CellEntry {
        CellEntry {
            name: cell.name(),
            values: cell.values.iter().cloned().collect(),
            command: command.to_owned(),
            url: url.to_owned(),
            status: CellStatus::Stopped,
            exit_code: None,
            error: None,
            log,
            log_tail: Vec::new(),
            started_at: crate::timefmt::rfc3339_now(),
            ready_at: None,
            stopped_at: None,
            ready_s: None,
            stop_s: None,
            killed: false,
            gpu_wait_before,
        }
    }
}

/// A new `cells.json` for `cfg`.
fn fresh_index(cfg: &CellsConfig) -> CellsIndex {
    CellsIndex {
        schema: CELLS_SCHEMA.into(),
        specperf_version: env!("CARGO_PKG_VERSION").into(),
        command: cfg.command.clone(),
        serve_cmd: cfg.template.text().to_string(),
        params: cfg
            .template
            .params()
            .iter()
            .map(|p| ParamEntry {
                name: p.name.clone(),
                values: p.values.clone(),
            })
            .collect(),
        runs: cfg.work,
        status: IndexStatus::Running,
        stopped_by: None,
        cells: Vec::new(),
    }
}

/// What the GPUs held before any server of ours: the level each stop waits to get back to.
/// `None` (no wait between servers) without nvidia-smi or amd-smi, or when they cannot be read.
async fn gpu_baseline(on_event: &mut impl FnMut(CellEvent<'_>)) -> Option<GpuMemory> {
    match crate::telemetry::memory_used(SMI_TIMEOUT).await {
        Ok(m) => Some(m),
        Err(TelemetryError::SmiMissing(_)) => {
            step!("GPU memory: neither nvidia-smi nor amd-smi on PATH, no wait between servers");
            None
        }
        Err(e) => {
            on_event(CellEvent::Warning(format!(
                "GPU memory could not be read before the first server ({e}); the cells will not \
                 wait for the GPUs' memory between servers"
            )));
            None
        }
    }
}

/// An earlier attempt of cell `name` in `dir`: its run would be moved aside by the replay,
/// taking the new server's open log with it, so the whole cell is moved now.
fn move_earlier_attempt_aside(dir: &Path, name: &str, on_event: &mut impl FnMut(CellEvent<'_>)) {
    let cell_dir = dir.join(name);
    if !has_files(&cell_dir) {
        return;
    }
    on_event(CellEvent::Warning(match move_aside(&cell_dir) {
        Ok(aside) => format!(
            "cell {name}: the earlier attempt was moved to {}",
            aside.display()
        ),
        Err(e) => format!("cell {name}: cannot move the earlier attempt aside: {e}"),
    }));
}

/// A cell's state once its server is stopped: failed when the server `died` during it or its
/// runs could not be made, stopped by a signal, else done. Returns the exit code it makes.
fn settle(
    entry: &mut CellEntry,
    ran: &Result<i32, CellRunError>,
    died: Option<std::process::ExitStatus>,
    signalled: bool,
    log: &Path,
) -> i32 {
    match (ran, died) {
        (_, Some(status)) => {
            entry.status = CellStatus::Failed;
            entry.error = Some(format!(
                "the server exited during the cell ({}); its log is {}",
                serve::describe(status),
                log.display()
            ));
        }
        (Err(e), None) => {
            entry.status = CellStatus::Failed;
            entry.error = Some(e.to_string());
        }
        (Ok(_), None) if signalled => entry.status = CellStatus::Stopped,
        (Ok(_), None) => entry.status = CellStatus::Done,
    }
    entry.exit_code = ran.as_ref().ok().copied();
    match ran {
        Ok(c) => *c,
        Err(_) => exit::FAILED,
    }
}

/// `dir` exists and holds something.
fn has_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// Why a cell's runs could not be made against its server.
#[derive(Debug, thiserror::Error)]
enum CellRunError {
    /// Its flags with the server's URL made no valid run.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Its sweep could not run.
    #[error(transparent)]
    Sweep(#[from] SweepError),
    /// Its run could not start.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
}

/// Runs one cell's replay, sweep or categories against its server, up at `url`: its exit code,
/// or why it could not run.
async fn run_cell(
    cfg: &CellsConfig,
    name: &str,
    mut plan: CellPlan,
    url: &str,
    stop: &Stopper,
    progress: &watch::Sender<Progress>,
    on_event: &mut impl FnMut(CellEvent<'_>),
) -> Result<i32, CellRunError> {
    plan.bind(url, &cfg.command)?;
    match plan {
        CellPlan::Categories(plan) => {
            let threshold = plan.failed_request_threshold();
            let outcome = super::run_categories(*plan, stop.child(), progress.clone(), |ev| {
                on_event(CellEvent::Category(ev))
            })
            .await;
            on_event(CellEvent::CategoriesDone {
                cell: name,
                outcome: &outcome,
            });
            Ok(outcome.exit_code(threshold))
        }
        CellPlan::Sweep(sc) => {
            let outcome = run_sweep(*sc, stop.child(), progress.clone(), |ev| {
                on_event(CellEvent::Sweep(ev))
            })
            .await?;
            on_event(CellEvent::SweepDone {
                cell: name,
                outcome: &outcome,
            });
            Ok(outcome.exit_code)
        }
        CellPlan::Run(rc, _) => {
            let threshold = rc.failed_request_threshold;
            match crate::engine::replay(*rc, stop.child(), progress.clone()).await {
                Ok(outcome) => {
                    let code = exit::exit_code(&outcome, threshold);
                    on_event(CellEvent::RunDone {
                        cell: name,
                        outcome: &outcome,
                        exit_code: code,
                    });
                    Ok(code)
                }
                Err(e) => {
                    on_event(CellEvent::RunFailed {
                        cell: name,
                        error: &e,
                    });
                    Err(e.into())
                }
            }
        }
    }
}

/// The cells as a small table: name, status, exit code, seconds to ready, and why a cell failed.
pub fn cells_console(idx: &CellsIndex) -> String {
    let w = idx
        .cells
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<w$}  {:<7}  {:>4}  {:>8}  note\n",
        "cell", "status", "exit", "ready_s"
    );
    for c in &idx.cells {
        let status = match c.status {
            CellStatus::Done => "done",
            CellStatus::Failed => "failed",
            CellStatus::Stopped => "stopped",
        };
        let exit = c.exit_code.map_or("-".into(), |e| e.to_string());
        let ready = c.ready_s.map_or("-".into(), |s| format!("{s:.1}"));
        let note = c
            .error
            .as_deref()
            .map(|e| e.chars().take(100).collect::<String>())
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<w$}  {status:<7}  {exit:>4}  {ready:>8}  {note}\n",
            c.name
        ));
    }
    out
}
