//! The sweep flags -> a validated [`SweepConfig`]: the points (or the search), runs per point,
//! convergence, SLA objectives, the drain wait and the directories. Every point's run
//! configuration is validated here too, before the first request, so a bad value in the third
//! point of a list is an error at once, not after two points have run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{self, num, Param, Point};
use super::stats::{default_threshold, Mode};
use super::values::{self, Objective};
use crate::cli::{
    DrainArgs, List, ParameterSweepMode, ProfileArgs, ReplayArgs, SearchParameter, SearchRecipe,
    SearchStyle, SweepArgs, SweepType,
};
use crate::config::{
    bind_frontend, drain_config, drain_config_bound_later, ConfigError, RunConfig,
};
use crate::scrape::DrainSettings;

/// Where a point's flags come from: `replay`'s or `profile`'s (the AgentX replay).
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// `specperf replay`.
    Replay(Box<ReplayArgs>),
    /// `specperf profile`.
    Profile(Box<ProfileArgs>),
}

/// What the points are.
#[derive(Clone, Debug)]
pub(crate) enum Points {
    /// Fixed values (grid or zip).
    Fixed(Vec<Point>),
    /// Found by the SLA search.
    Search(SearchSpec),
}

/// A validated SLA search.
#[derive(Clone, Debug)]
pub(crate) struct SearchSpec {
    pub(crate) recipe: SearchRecipe,
    pub(crate) param: Param,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) tolerance: f64,
    pub(crate) objectives: Vec<Objective>,
}

/// Repeated runs stop once this converges.
#[derive(Clone, Debug)]
pub(crate) struct ConvergenceSpec {
    /// `--convergence-metric` as given (the AIPerf tag).
    pub(crate) tag: String,
    /// The [`values::Values`] key compared.
    pub(crate) key: String,
    pub(crate) mode: Mode,
    pub(crate) threshold: f64,
}

/// A validated sweep.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    pub(crate) source: Source,
    pub(crate) points: Points,
    pub(crate) sweep_type: SweepType,
    pub(crate) runs: u32,
    pub(crate) confidence: f64,
    pub(crate) convergence: Option<ConvergenceSpec>,
    pub(crate) run_cooldown: Duration,
    pub(crate) point_cooldown: Duration,
    /// `None`: no wait between points (`--no-drain`, or the embedded simulator).
    pub(crate) drain: Option<DrainSettings>,
    pub(crate) gpus: Option<u32>,
    /// `--search-recipe pareto-sweep`: AIPerf's `sweep_aggregate/pareto_sweep.json` is written.
    pub(crate) pareto_export: bool,
    /// The sweep's directory (each point's below it).
    pub dir: PathBuf,
    pub(crate) resume: bool,
    /// `--result-filename` without `.json`: each run's raw JSON is `<stem><suffix>.json`.
    pub(crate) result_stem: Option<String>,
    pub(crate) command: String,
    /// Settings worth a word before the sweep starts (the first point's run warnings included).
    pub warnings: Vec<String>,
    /// The live display (the runs').
    pub ui: crate::cli::Ui,
    /// Progress line period of the runs (None: none).
    pub progress_interval: Option<Duration>,
}

/// The sweep flags of a single run: objectives without a search, or convergence without
/// repeated runs, are refused rather than ignored; flags that only shape a sweep are named in a
/// warning (returned). `telemetry`: the run reads GPU telemetry, which checks `--gpus`.
pub fn check_single(s: &SweepArgs, telemetry: bool) -> Result<Vec<String>, ConfigError> {
    check_pairs_unused(s)?;
    search(s, None, None)?;
    convergence(s)?;
    let unused: Vec<&str> = [
        ("--gpus", s.gpus.is_some() && !telemetry),
        ("--no-drain", s.no_drain),
        ("--sweep-type zip", s.sweep_type == SweepType::Zip),
        (
            "--parameter-sweep-mode repeated",
            s.parameter_sweep_mode == ParameterSweepMode::Repeated,
        ),
    ]
    .into_iter()
    .filter_map(|(f, given)| given.then_some(f))
    .collect();
    Ok(if unused.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "ignored: {} only apply to a sweep (comma lists, --num-profile-runs or \
             --search-recipe), and this is a single run",
            unused.join(", ")
        )]
    })
}

/// `--isl-osl-pairs` without `--search-recipe pareto-sweep` is refused, not ignored.
fn check_pairs_unused(s: &SweepArgs) -> Result<(), ConfigError> {
    if s.isl_osl_pairs.is_some() {
        return err(
            "--isl-osl-pairs gives the shapes of --search-recipe pareto-sweep: add it (or pair \
             --isl and --osl lists with --sweep-type zip)",
        );
    }
    Ok(())
}

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::msg(m))
}

/// True when these flags ask for more than one run: a comma list, repeated runs, a search, or a
/// resumed sweep.
pub fn wanted(a: &ReplayArgs) -> bool {
    plan::has_lists(a) || asks(&a.sweep)
}

/// `profile`'s flags ask for a sweep.
pub fn wanted_profile(p: &ProfileArgs) -> bool {
    p.concurrency.as_ref().is_some_and(|l| l.0.len() > 1) || asks(&p.sweep)
}

fn asks(s: &SweepArgs) -> bool {
    s.num_profile_runs > 1 || s.search_recipe.is_some() || s.resume
}

impl SweepConfig {
    /// Validates a `replay` sweep.
    pub fn from_replay(a: &ReplayArgs) -> Result<SweepConfig, ConfigError> {
        let s = &a.sweep;
        let pareto = s.search_recipe == Some(SearchRecipe::ParetoSweep);
        if !pareto {
            check_pairs_unused(s)?;
        }
        let search = search(s, a.concurrency.as_ref(), a.load.request_rate.as_ref())?;
        if search.is_some() && plan::has_lists(a) {
            return err(
                "--search-recipe moves one load; the other comma lists would need one search \
                 each: run one search per value",
            );
        }
        let points = match (search, &s.isl_osl_pairs) {
            (Some(spec), _) => Points::Search(spec),
            (None, Some(pairs)) if pareto => {
                if !a.streaming {
                    return err(
                        "--search-recipe pareto-sweep charts TTFT, which a non-streaming run does \
                         not measure: drop --streaming false",
                    );
                }
                Points::Fixed(plan::pareto_points(a, &pairs.0).map_err(ConfigError::msg)?)
            }
            (None, None) if pareto => {
                return err(
                    "--search-recipe pareto-sweep needs the shapes: --isl-osl-pairs \
                     128/128,1024/1024 (input/output tokens)",
                )
            }
            (None, _) => Points::Fixed(plan::points(a, s.sweep_type).map_err(ConfigError::msg)?),
        };
        if let Points::Fixed(p) = &points {
            let isl = p.iter().find_map(|p| p.get(Param::Isl));
            if let (Some(isl), false) = (isl, a.synthetic) {
                return err(format!(
                    "this sweep sets the input length (--isl {}{}), which only synthetic \
                     prompts have: add --synthetic --tokenizer PATH (a collection's prompts keep \
                     their own lengths)",
                    num(isl),
                    if pareto {
                        ", from --isl-osl-pairs"
                    } else {
                        ", ..."
                    }
                ));
            }
        }
        let result_stem = a
            .result_filename
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(|n| n.strip_suffix(".json").unwrap_or(n).to_string());
        assemble(
            Source::Replay(Box::new(a.clone())),
            points,
            s,
            Where {
                artifact_dir: a.artifact_dir.as_deref(),
                model: a.model.as_deref(),
                url: a.url.as_deref(),
                url_bound_later: a.url_bound_later,
                server_metrics: &a.scrape.server_metrics,
                result_stem,
                sweep_type: s.sweep_type,
                ui: a.ui,
            },
        )
    }

    /// Validates a `profile` sweep (the AgentX replay: `--concurrency` lists and searches over
    /// concurrency, repeated runs).
    pub fn from_profile(p: &ProfileArgs) -> Result<SweepConfig, ConfigError> {
        let s = &p.sweep;
        if s.search_parameter == SearchParameter::RequestRate && s.search_recipe.is_some() {
            return err(
                "the AgentX replay's load is its --concurrency (lanes of session trees): use \
                 --search-parameter concurrency",
            );
        }
        if s.search_recipe == Some(SearchRecipe::ParetoSweep) || s.isl_osl_pairs.is_some() {
            return err(
                "pareto-sweep varies input and output lengths, which the AgentX replay takes from \
                 its traces: sweep --concurrency, or use --search-recipe max-concurrency-under-sla",
            );
        }
        if s.search_recipe == Some(SearchRecipe::MaxGoodputUnderSlo) {
            return err(
                "max-goodput-under-slo judges every request against the objectives, which the \
                 AgentX replay does not do: use --search-recipe max-concurrency-under-sla",
            );
        }
        let points = match search(s, p.concurrency.as_ref(), None)? {
            Some(spec) => Points::Search(spec),
            None => Points::Fixed(match &p.concurrency {
                Some(l) if l.0.len() > 1 => {
                    plan::one_list(Param::Concurrency, &l.0).map_err(ConfigError::msg)?
                }
                _ => vec![Point(Default::default())],
            }),
        };
        assemble(
            Source::Profile(Box::new(p.clone())),
            points,
            s,
            Where {
                artifact_dir: p.output_artifact_dir.as_deref(),
                model: p.model.as_deref(),
                url: p.url.as_deref(),
                url_bound_later: false,
                server_metrics: &p.server_metrics,
                result_stem: None,
                sweep_type: SweepType::Grid,
                ui: crate::cli::Ui::Simple,
            },
        )
    }

    /// The checks common to both sources, then every fixed point's run configuration.
    fn finish(mut self, s: &SweepArgs, dir_given: bool) -> Result<SweepConfig, ConfigError> {
        if s.num_profile_runs == 0 {
            return err("--num-profile-runs must be at least 1");
        }
        if !(s.confidence_level > 0.0 && s.confidence_level < 1.0) {
            return err(format!(
                "--confidence-level {} must be within (0, 1), e.g. 0.95",
                s.confidence_level
            ));
        }
        if s.parameter_sweep_mode == ParameterSweepMode::Repeated {
            return err(
                "--parameter-sweep-mode repeated (trials outside, points inside) is not run by \
                 specperf: the drain wait, convergence stopping and the search judge each point on \
                 its runs together. Use --parameter-sweep-mode independent (the default here; \
                 the same runs, AIPerf's layout <point>/profile_runs/trial_NNNN)",
            );
        }
        self.runs = s.num_profile_runs;
        self.confidence = s.confidence_level;
        self.convergence = convergence(s)?;
        self.run_cooldown = cooldown(
            "profile-run-cooldown-seconds",
            s.profile_run_cooldown_seconds,
        )?;
        self.point_cooldown = cooldown(
            "parameter-sweep-cooldown-seconds",
            s.parameter_sweep_cooldown_seconds,
        )?;
        if s.gpus == Some(0) {
            return err("--gpus must be at least 1");
        }
        if s.resume {
            if !dir_given {
                return err(
                    "--resume continues the sweep in --artifact-dir: name the directory of the \
                     sweep to continue",
                );
            }
            if !self.dir.join("sweep.json").is_file() {
                return err(format!(
                    "--resume: {} holds no sweep.json (no sweep ran there); drop --resume to \
                     start one",
                    self.dir.display()
                ));
            }
        }
        if self.drain.is_none() && !s.no_drain {
            self.warnings.push(
                "no drain wait between points: the embedded simulator starts afresh for every \
                 run"
                .into(),
            );
        }
        // Every fixed point must make a valid run; the first one's warnings are the sweep's.
        if let Points::Fixed(points) = &self.points {
            for (i, p) in points.iter().enumerate() {
                let cfg = self
                    .run_config(p, &self.dir.join("check"), 1)
                    .map_err(|e| ConfigError::msg(format!("point {}: {e}", display(p))))?;
                if i == 0 {
                    self.progress_interval = cfg.progress_interval;
                    self.ui = cfg.ui;
                    self.warnings.extend(cfg.warnings);
                }
            }
        } else if let Points::Search(spec) = &self.points {
            let p = Point([(spec.param, spec.min)].into_iter().collect());
            let cfg = self.run_config(&p, &self.dir.join("check"), 1)?;
            self.progress_interval = cfg.progress_interval;
            self.ui = cfg.ui;
            self.warnings.extend(cfg.warnings);
        }
        Ok(self)
    }

    /// The `--model` the runs name, when given.
    pub(crate) fn model(&self) -> Option<&str> {
        match &self.source {
            Source::Replay(a) => a.model.as_deref(),
            Source::Profile(p) => p.model.as_deref(),
        }
    }

    /// Records the command line (in `sweep.json` and every run's summary).
    pub fn set_cli_command(&mut self, command: String) {
        self.command = command;
    }

    /// Points every run and the drain wait at `url`: a `--serve-cmd` cell's server, once it is
    /// up (the sweep was validated without one).
    pub fn bind(&mut self, url: &str) -> Result<(), ConfigError> {
        if let Source::Replay(a) = &mut self.source {
            a.url = Some(url.to_owned());
            a.url_bound_later = false;
        }
        bind_drain(&mut self.drain, url)
    }

    /// The directory of run `run` of point `p`, relative to the sweep's, as AIPerf 0.13 lays them
    /// out (its `aiperf plot` and dashboards find runs by these names): the point's name for a
    /// single run (`run` when nothing varies); for repeated runs `profile_runs/run_NNNN` when
    /// nothing varies, else `<point>/profile_runs/trial_NNNN`, AIPerf's layout for a sweep whose
    /// trials of one point run together (`--parameter-sweep-mode independent`), which is how
    /// this sweep runs them: the drain wait and convergence are per point.
    pub(crate) fn run_dir(&self, p: &Point, run: u32) -> PathBuf {
        let name = p.name();
        match (self.runs, name.is_empty()) {
            // Never the sweep directory itself (it holds sweep.json).
            (1, true) => PathBuf::from("run"),
            (1, false) => PathBuf::from(name),
            (_, true) => Path::new("profile_runs").join(format!("run_{run:04}")),
            (_, false) => Path::new(&name)
                .join("profile_runs")
                .join(format!("trial_{run:04}")),
        }
    }

    /// Where a point's confidence aggregate over its repeated runs goes, relative to the sweep's
    /// directory (AIPerf's `aggregate/`, or `<point>/aggregate/` in a sweep).
    pub(crate) fn aggregate_dir(&self, p: &Point) -> PathBuf {
        let name = p.name();
        if name.is_empty() {
            PathBuf::from("aggregate")
        } else {
            Path::new(&name).join("aggregate")
        }
    }

    /// The validated run configuration of run `run` of point `p`, writing in `dir`.
    pub(crate) fn run_config(
        &self,
        p: &Point,
        dir: &Path,
        run: u32,
    ) -> Result<RunConfig, ConfigError> {
        let mut cfg = match &self.source {
            Source::Replay(a) => {
                let mut a = p.apply(a);
                a.artifact_dir = Some(dir.to_path_buf());
                if let Some(stem) = &self.result_stem {
                    let trial = if self.runs > 1 {
                        format!("_trial{run:04}")
                    } else {
                        String::new()
                    };
                    a.result_filename = Some(format!("{stem}{}{trial}", p.file_suffix()));
                }
                if let Points::Search(spec) = &self.points {
                    if spec.recipe == SearchRecipe::MaxGoodputUnderSlo {
                        a.goodput = goodput_objectives(&a.sweep);
                    }
                }
                RunConfig::from_args(&a)?
            }
            Source::Profile(pa) => {
                let mut pa = pa.clone();
                if let Some(c) = p.get(Param::Concurrency) {
                    pa.concurrency = Some(List::one(c as usize));
                }
                pa.output_artifact_dir = Some(dir.to_path_buf());
                RunConfig::from_profile(&pa)?
            }
        };
        if !self.command.is_empty() {
            cfg.set_cli_command(self.command.clone());
        }
        Ok(cfg)
    }
}

/// Where a sweep's runs go and whom its drain wait polls.
struct Where<'a> {
    artifact_dir: Option<&'a Path>,
    model: Option<&'a str>,
    url: Option<&'a str>,
    url_bound_later: bool,
    server_metrics: &'a [String],
    result_stem: Option<String>,
    sweep_type: SweepType,
    ui: crate::cli::Ui,
}

/// The sweep of `points` from `source`, validated.
fn assemble(
    source: Source,
    points: Points,
    s: &SweepArgs,
    w: Where<'_>,
) -> Result<SweepConfig, ConfigError> {
    let dir = w
        .artifact_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_dir(w.model, &points));
    let cfg = SweepConfig {
        source,
        sweep_type: w.sweep_type,
        runs: 1,
        confidence: 0.95,
        convergence: None,
        run_cooldown: Duration::ZERO,
        point_cooldown: Duration::ZERO,
        drain: drain(s, w.url, w.url_bound_later, w.server_metrics)?,
        gpus: s.gpus,
        pareto_export: s.search_recipe == Some(SearchRecipe::ParetoSweep),
        dir,
        resume: s.resume,
        result_stem: w.result_stem,
        command: String::new(),
        warnings: Vec::new(),
        ui: w.ui,
        progress_interval: None,
        points,
    };
    cfg.finish(s, w.artifact_dir.is_some())
}

/// A point for messages: its name, or "the run" when nothing varies.
pub(crate) fn display(p: &Point) -> String {
    let n = p.name();
    if n.is_empty() {
        "the run".into()
    } else {
        n
    }
}

/// `artifacts/<model>-sweep-<parameters>` (`sweep` alone when nothing varies).
fn default_dir(model: Option<&str>, points: &Points) -> PathBuf {
    let params: Vec<&str> = match points {
        Points::Fixed(p) => p
            .first()
            .map(|p| p.0.keys().map(|k| k.name()).collect())
            .unwrap_or_default(),
        Points::Search(s) => vec![s.param.name(), "search"],
    };
    let model = crate::fsutil::safe_name(model.unwrap_or("specperf"));
    let mut name = format!("{model}-sweep");
    for p in params {
        name.push('-');
        name.push_str(p);
    }
    Path::new("artifacts").join(name)
}

fn cooldown(flag: &str, v: f64) -> Result<Duration, ConfigError> {
    if !v.is_finite() || v < 0.0 {
        return err(format!(
            "--{flag} must be a number of seconds >= 0, got {v}"
        ));
    }
    Duration::try_from_secs_f64(v)
        .map_err(|_| ConfigError::msg(format!("--{flag} {v} is too large")))
}

/// The drain wait between points: the `--url`'s `/metrics` and every `--server-metrics`
/// endpoint (the environment as for replay), polled as `specperf drain` polls them.
/// With `url_bound_later` (a `--serve-cmd` cell) the frontend's page is added by [`bind_drain`].
pub(super) fn drain(
    s: &SweepArgs,
    url: Option<&str>,
    url_bound_later: bool,
    server_metrics: &[String],
) -> Result<Option<DrainSettings>, ConfigError> {
    if s.no_drain || (url.is_none() && !url_bound_later) {
        return Ok(None);
    }
    let d = DrainArgs {
        url: url.map(str::to_string),
        server_metrics: server_metrics.to_vec(),
        poll_interval_seconds: s.drain_poll_interval_seconds,
        idle_polls: s.drain_idle_polls,
        max_wait_seconds: s.drain_max_wait_seconds,
        output: None,
    };
    let checked = if url.is_none() {
        drain_config_bound_later(&d)
    } else {
        drain_config(&d)
    };
    checked.map(|c| Some(c.settings)).map_err(|e| {
        // The drain command's flag names, said as the sweep's.
        let m = e
            .to_string()
            .replace("--poll-interval-seconds", "--drain-poll-interval-seconds")
            .replace("--idle-polls", "--drain-idle-polls")
            .replace("--max-wait-seconds", "--drain-max-wait-seconds");
        ConfigError::msg(m)
    })
}

/// Puts a `--serve-cmd` cell's server, at `url`, first among the drain wait's endpoints.
pub(super) fn bind_drain(drain: &mut Option<DrainSettings>, url: &str) -> Result<(), ConfigError> {
    match drain {
        Some(d) => bind_frontend(d, url),
        None => Ok(()),
    }
}

fn convergence(s: &SweepArgs) -> Result<Option<ConvergenceSpec>, ConfigError> {
    let Some(tag) = s.convergence_metric.as_deref() else {
        return Ok(None);
    };
    if s.num_profile_runs < 2 {
        return err(
            "--convergence-metric stops repeated runs early: give the most runs with \
             --num-profile-runs N (at least 2; 5 to 10 is typical)",
        );
    }
    let mode = Mode::from(s.convergence_mode);
    let key = values::convergence_key(tag, &s.convergence_stat).map_err(ConfigError::msg)?;
    if mode == Mode::Distribution && !values::LATENCIES.iter().any(|(t, _)| *t == tag) {
        return err(format!(
            "--convergence-mode distribution compares per-request values, and {tag} has one \
             value per run: use a per-request metric ({}) or --convergence-mode ci-width",
            values::LATENCIES.map(|(t, _)| t).join(", ")
        ));
    }
    let threshold = s.convergence_threshold.unwrap_or(default_threshold(mode));
    let ok = match mode {
        Mode::Distribution => threshold > 0.0 && threshold < 1.0,
        _ => threshold > 0.0 && threshold.is_finite(),
    };
    if !ok {
        return err(format!(
            "--convergence-threshold {threshold} must be positive (a p-value within (0, 1) for \
             distribution)"
        ));
    }
    Ok(Some(ConvergenceSpec {
        tag: tag.to_string(),
        key,
        mode,
        threshold,
    }))
}

/// The SLA search, when `--search-recipe` is given; the objectives are refused without it.
fn search(
    s: &SweepArgs,
    concurrency: Option<&List<usize>>,
    rate: Option<&List<f64>>,
) -> Result<Option<SearchSpec>, ConfigError> {
    let slas = [
        (
            "--ttft-sla-ms",
            s.ttft_sla_ms,
            "time_to_first_token_p95",
            "ttft",
        ),
        (
            "--itl-sla-ms",
            s.itl_sla_ms,
            "inter_token_latency_p95",
            "inter_token_latency",
        ),
        (
            "--tpot-sla-ms",
            s.tpot_sla_ms,
            "time_per_output_token_p95",
            "tpot",
        ),
        ("--e2e-sla-ms", s.e2e_sla_ms, "request_latency_p99", "e2el"),
    ];
    match (s.search_style, s.search_recipe) {
        (None | Some(SearchStyle::Monotonic), Some(r)) if r != SearchRecipe::ParetoSweep => {}
        (None, _) => {}
        (Some(_), None | Some(SearchRecipe::ParetoSweep)) => {
            return err("--search-style shapes an SLA search: add --search-recipe \
                 max-concurrency-under-sla, or drop --search-style")
        }
        (Some(style), Some(_)) => {
            let name = clap::ValueEnum::to_possible_value(&style)
                .map_or_else(String::new, |v| v.get_name().to_string());
            return err(format!(
                "--search-style {name} is AIPerf's model-based search, which specperf does not \
                 run: its search is monotonic (doubling until a load fails, then bisection, exact \
                 for concurrency). Drop --search-style or give --search-style monotonic"
            ));
        }
    }
    let recipe = match s.search_recipe {
        Some(SearchRecipe::ParetoSweep) => {
            // Fixed points, no search: an objective would be judged by nothing.
            let given = slas.iter().find(|x| x.1.is_some()).map(|x| x.0);
            let given = given.or(s.error_rate_sla.map(|_| "--error-rate-sla"));
            if let Some(flag) = given {
                return err(format!(
                    "{flag} is an objective of an SLA search, and pareto-sweep judges none: drop \
                     it, or use --search-recipe max-concurrency-under-sla"
                ));
            }
            return Ok(None);
        }
        r => r,
    };
    let Some(recipe) = recipe else {
        if let Some((flag, ..)) = slas.iter().find(|x| x.1.is_some()) {
            return err(format!(
                "{flag} is an objective of the SLA search: add --search-recipe \
                 max-concurrency-under-sla (or use --goodput for a plain run)"
            ));
        }
        if s.error_rate_sla.is_some() {
            return err("--error-rate-sla is an objective of the SLA search: add --search-recipe");
        }
        return Ok(None);
    };
    let mut objectives = Vec::new();
    for (flag, v, key, _) in slas {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0) {
                return err(format!("{flag} must be a positive number of ms, got {v}"));
            }
            objectives.push(Objective {
                flag: flag.into(),
                key: key.into(),
                limit: v,
                at_least: false,
            });
        }
    }
    if let Some(v) = s.error_rate_sla {
        if !(0.0..=1.0).contains(&v) {
            return err(format!(
                "--error-rate-sla {v} must be a fraction within [0, 1]"
            ));
        }
    }
    if objectives.is_empty() {
        return err(
            "--search-recipe needs at least one objective: --ttft-sla-ms, --itl-sla-ms, \
             --tpot-sla-ms or --e2e-sla-ms",
        );
    }
    if recipe == SearchRecipe::MaxGoodputUnderSlo {
        let f = s.slo_attainment_fraction;
        if !(f > 0.0 && f <= 1.0) {
            return err(format!(
                "--slo-attainment-fraction {f} must be within (0, 1]"
            ));
        }
        // Judged per request by the run's goodput (the same objectives as --goodput), then the
        // fraction of good requests against the attainment target.
        objectives = vec![Objective {
            flag: "--slo-attainment-fraction".into(),
            key: "good_request_fraction".into(),
            limit: f,
            at_least: true,
        }];
    }
    if let Some(v) = s.error_rate_sla {
        objectives.push(Objective {
            flag: "--error-rate-sla".into(),
            key: "error_rate".into(),
            limit: v,
            at_least: false,
        });
    }
    let param = match s.search_parameter {
        SearchParameter::Concurrency => Param::Concurrency,
        SearchParameter::RequestRate => Param::RequestRate,
    };
    let given = match param {
        Param::Concurrency => concurrency.is_some(),
        _ => rate.is_some(),
    };
    if given {
        return err(format!(
            "the search sets {} itself: drop {} (bound the search with --search-min and \
             --search-max)",
            param.flag(),
            param.flag()
        ));
    }
    let min = s.search_min.unwrap_or(1.0);
    let max = s.search_max.unwrap_or(1000.0);
    let integer = param == Param::Concurrency;
    if !(min.is_finite() && min > 0.0 && max.is_finite() && max >= min)
        || (integer && (min.fract() != 0.0 || max.fract() != 0.0))
    {
        return err(format!(
            "--search-min {} and --search-max {} must be positive{}, min <= max",
            num(min),
            num(max),
            if integer { " integers" } else { "" }
        ));
    }
    if !(s.search_tolerance > 0.0 && s.search_tolerance < 1.0) {
        return err(format!(
            "--search-tolerance {} must be within (0, 1), e.g. 0.05",
            s.search_tolerance
        ));
    }
    Ok(Some(SearchSpec {
        recipe,
        param,
        min,
        max,
        tolerance: s.search_tolerance,
        objectives,
    }))
}

/// The per-request objectives a goodput search sends as `--goodput` (vLLM's tags).
pub(crate) fn goodput_objectives(s: &SweepArgs) -> Vec<String> {
    // AIPerf's per-request ITL is vLLM's TPOT: the tighter of the two limits judges it.
    let itl = match (s.itl_sla_ms, s.tpot_sla_ms) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    [
        ("ttft", s.ttft_sla_ms),
        ("inter_token_latency", itl),
        ("e2el", s.e2e_sla_ms),
    ]
    .into_iter()
    .filter_map(|(t, v)| v.map(|v| format!("{t}:{v}")))
    .collect()
}
