//! The sweep loop: for each point, the drain wait, the cooldown, then its runs (each a whole
//! `engine::replay` with a child [`Stopper`]), its aggregate, and `sweep.json` rewritten. A point
//! whose run cannot start is recorded as failed and the sweep goes on; a signal ends the run in
//! flight (its artifacts are written as for any stopped run), marks that point stopped, and
//! ends the sweep with every finished point on record.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;

use super::config::{Points, SweepConfig};
use super::index::{PointEntry, PointStatus, RunEntry, SearchEntry, SweepIndex, SWEEP_SCHEMA};
use super::journal::{IndexStatus, Journal, SweepError};
use super::plan::{Param, Point};
use super::search::Search;
use super::stats::{check, interval};
use super::values::{self, judge, Values};
use crate::engine::{EngineError, RunOutcome};
use crate::exit;
use crate::progress::Progress;
use crate::scrape::{wait_for_drain, DrainOutcome, DrainPoll, DrainReason};
use crate::stop::{StopReason, Stopper};

/// What the sweep tells the caller as it goes (the binary prints it).
pub enum Event<'a> {
    /// A run of a point starts.
    RunStart {
        /// The point's name (empty when nothing varies).
        point: &'a str,
        /// 1-based position of the point.
        index: usize,
        /// Points in all (`None` for a search, which decides as it goes).
        total: Option<usize>,
        /// 1-based run.
        run: u32,
        /// Most runs of the point.
        runs: u32,
    },
    /// `--resume`: a point finished earlier, not run again.
    Skipped {
        /// Its name.
        point: &'a str,
    },
    /// A poll of the drain wait before a point.
    DrainPoll(&'a DrainPoll),
    /// The drain wait ended.
    Drained(&'a DrainOutcome),
    /// A run ended.
    RunDone {
        /// The point.
        point: &'a str,
        /// The outcome (summary, artifacts).
        outcome: &'a RunOutcome,
        /// What `replay` would exit with.
        exit_code: i32,
    },
    /// A run could not start: the point is recorded as failed.
    RunFailed {
        /// The point.
        point: &'a str,
        /// Why.
        error: &'a EngineError,
    },
    /// The convergence test after a run.
    Convergence {
        /// The point.
        point: &'a str,
        /// Converged: no more runs of this point.
        converged: bool,
        /// The verdict in a sentence.
        explain: &'a str,
    },
    /// A search probe was judged.
    Probe {
        /// The point.
        point: &'a str,
        /// Met the objectives.
        pass: bool,
    },
    /// Something worth a warning (a report that could not be written).
    Warning(String),
}

/// What the sweep hands back.
pub struct SweepOutcome {
    /// The index as written.
    pub index: SweepIndex,
    /// The sweep's directory.
    pub dir: std::path::PathBuf,
    /// The exit code: a signal's, else the worst run's (1 when a point failed to start).
    pub exit_code: i32,
}

/// Runs the sweep. `progress` carries each run's live progress in turn; `on_event` hears the
/// rest.
pub async fn run_sweep(
    cfg: SweepConfig,
    stop: Stopper,
    progress: watch::Sender<Progress>,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<SweepOutcome, SweepError> {
    let dir = cfg.dir.clone();
    let (journal, aside) = Journal::open(&dir, cfg.resume, &cfg.command, || new_index(&cfg))?;
    if let Some(aside) = aside {
        on_event(Event::Warning(journal.moved_aside(&aside)));
    }

    let mut sweep = Sweeper {
        cfg: &cfg,
        stop: &stop,
        progress: &progress,
        journal,
        exit_code: exit::OK,
        // A resumed sweep may follow one stopped mid-point: wait for that backlog too.
        ran_any: cfg.resume,
    };
    match &cfg.points {
        Points::Fixed(points) => {
            for (i, p) in points.iter().enumerate() {
                if stop.reason().is_some() {
                    break;
                }
                if let Some(e) = sweep.journal.done(&p.name()) {
                    let name = e.name.clone();
                    on_event(Event::Skipped { point: &name });
                    // Keep the index in the order of the points.
                    sweep.journal.move_to_end(&name);
                    continue;
                }
                sweep
                    .point(p, i + 1, Some(points.len()), &mut on_event)
                    .await;
            }
        }
        Points::Search(spec) => {
            let mut search = match sweep.journal.index_mut().search.take() {
                Some(s) if cfg.resume => s.state,
                _ => Search::new(
                    spec.min,
                    spec.max,
                    spec.param == Param::Concurrency,
                    spec.tolerance,
                ),
            };
            // A resumed search replays its recorded probes first (each point's verdict stands).
            let mut i = search.history.len();
            while let Some((value, step)) = search.next() {
                if stop.reason().is_some() {
                    break;
                }
                let p = Point([(spec.param, value)].into_iter().collect());
                i += 1;
                let entry = match sweep.journal.done(&p.name()).cloned() {
                    Some(e) if e.sla.is_some() => {
                        on_event(Event::Skipped { point: &e.name });
                        e
                    }
                    _ => match sweep.point(&p, i, None, &mut on_event).await {
                        Some(e) => e,
                        None => break,
                    },
                };
                if entry.status != PointStatus::Done {
                    // Stopped by a signal, or the run could not start: nothing to judge.
                    break;
                }
                let pass = entry.sla.as_ref().is_some_and(|v| v.pass);
                on_event(Event::Probe {
                    point: &entry.name,
                    pass,
                });
                search.record(value, pass, step);
                sweep.journal.index_mut().search = Some(search_entry(spec, &search));
                sweep.save(&mut on_event);
            }
            sweep.journal.index_mut().search = Some(search_entry(spec, &search));
        }
    }
    let stopped = stop.reason();
    let expected = match &cfg.points {
        Points::Fixed(points) => points.len(),
        Points::Search(_) => 0,
    };
    sweep.journal.finish(stopped, expected);
    let code = exit::of_many(stopped, sweep.exit_code);
    sweep.save(&mut on_event);
    Ok(SweepOutcome {
        index: sweep.journal.into_index(),
        dir,
        exit_code: code,
    })
}

/// The search as `sweep.json` records it.
fn search_entry(spec: &super::config::SearchSpec, search: &Search) -> SearchEntry {
    SearchEntry {
        recipe: recipe_name(spec.recipe).into(),
        parameter: spec.param,
        objectives: spec.objectives.clone(),
        best: search.best(),
        first_failure: search.first_failure(),
        state: search.clone(),
    }
}

/// AIPerf's name of a recipe.
pub(crate) fn recipe_name(r: crate::cli::SearchRecipe) -> &'static str {
    match r {
        crate::cli::SearchRecipe::MaxConcurrencyUnderSla => "max-concurrency-under-sla",
        crate::cli::SearchRecipe::MaxGoodputUnderSlo => "max-goodput-under-slo",
        crate::cli::SearchRecipe::ParetoSweep => "pareto-sweep",
    }
}

fn new_index(cfg: &SweepConfig) -> SweepIndex {
    let (sweep_type, parameters) = match &cfg.points {
        Points::Fixed(p) => (
            match cfg.sweep_type {
                _ if cfg.pareto_export => "pareto-sweep",
                crate::cli::SweepType::Grid => "grid",
                crate::cli::SweepType::Zip => "zip",
            },
            p.first()
                .map(|p| p.0.keys().copied().collect())
                .unwrap_or_default(),
        ),
        Points::Search(s) => ("search", vec![s.param]),
    };
    SweepIndex {
        schema: SWEEP_SCHEMA.into(),
        specperf_version: env!("CARGO_PKG_VERSION").into(),
        command: cfg.command.clone(),
        sweep_type: sweep_type.into(),
        parameters,
        num_profile_runs: cfg.runs,
        confidence_level: cfg.confidence,
        convergence_metric: cfg.convergence.as_ref().map(|c| c.key.clone()),
        gpus: cfg.gpus,
        status: IndexStatus::Running,
        stopped_by: None,
        points: Vec::new(),
        search: None,
        pareto_optimal: Vec::new(),
    }
}

/// The loop's state.
struct Sweeper<'a> {
    cfg: &'a SweepConfig,
    stop: &'a Stopper,
    progress: &'a watch::Sender<Progress>,
    journal: Journal<SweepIndex>,
    exit_code: i32,
    /// A point has run in this process (the next one waits for the drain).
    ran_any: bool,
}

impl Sweeper<'_> {
    /// Writes `sweep.json` and the reports; a failure is a warning (the runs are on disk).
    fn save(&mut self, on_event: &mut impl FnMut(Event<'_>)) {
        super::report::mark_pareto(self.journal.index_mut());
        if let Err(e) = self.journal.save() {
            on_event(Event::Warning(e.to_string()));
        }
        let index = self.journal.index();
        if self.cfg.pareto_export {
            if let Err(e) = super::aiperf::write_pareto_sweep(&self.cfg.dir, index) {
                on_event(Event::Warning(format!(
                    "cannot write {}: {e}",
                    self.cfg
                        .dir
                        .join(super::aiperf::PARETO_SWEEP_JSON)
                        .display()
                )));
            }
        }
        if let Err(e) = super::report::write(&self.cfg.dir, index) {
            on_event(Event::Warning(format!(
                "the sweep report in {} is incomplete: {e}",
                self.cfg.dir.display()
            )));
        }
    }

    /// Runs one point (drain, cooldown, runs, aggregate) and records it. `None` when a signal
    /// stopped the sweep before the point began.
    async fn point(
        &mut self,
        p: &Point,
        index: usize,
        total: Option<usize>,
        on_event: &mut impl FnMut(Event<'_>),
    ) -> Option<PointEntry> {
        let cfg = self.cfg;
        let name = p.name();
        let mut entry = PointEntry::starting(p);
        if self.ran_any {
            self.settle_before(&mut entry, on_event).await;
        }
        if self.stop.reason().is_some() {
            return None;
        }
        self.ran_any = true;
        let undrained = entry
            .drain_before
            .as_ref()
            .filter(|_| entry.started_undrained)
            .map(DrainOutcome::summary_line);
        for run in 1..=cfg.runs {
            if run > 1 && !cfg.run_cooldown.is_zero() {
                sleep_or_stop(cfg.run_cooldown, self.stop).await;
            }
            if self.stop.reason().is_some() {
                break;
            }
            on_event(Event::RunStart {
                point: &name,
                index,
                total,
                run,
                runs: cfg.runs,
            });
            let rel = cfg.run_dir(p, run);
            let mut rc = match cfg.run_config(p, &cfg.dir.join(&rel), run) {
                Ok(c) => c,
                Err(e) => {
                    // Checked before the sweep began; only a search's later value can land here.
                    entry.status = PointStatus::Failed;
                    entry.error = Some(e.to_string());
                    self.exit_code = self.exit_code.max(exit::FAILED);
                    break;
                }
            };
            if let Some(d) = &undrained {
                rc.warnings.push(format!(
                    "this point started on servers that had not drained: {d}"
                ));
            }
            let result_file = rc.result_file.as_ref().map(|(d, stem)| {
                d.clone()
                    .unwrap_or_else(|| cfg.dir.join(&rel))
                    .join(format!("{stem}.json"))
            });
            let threshold = rc.failed_request_threshold;
            let (tx, rx) = watch::channel(Progress::default());
            let forward = forward_progress(rx, self.progress.clone());
            let child = self.stop.child();
            let result = crate::engine::replay(rc, child, tx).await;
            forward.abort();
            match result {
                Ok(outcome) => {
                    let code = exit::exit_code(&outcome, threshold);
                    on_event(Event::RunDone {
                        point: &name,
                        outcome: &outcome,
                        exit_code: code,
                    });
                    if code != exit::OK && self.exit_code == exit::OK {
                        self.exit_code = code;
                    }
                    entry.runs.push(RunEntry {
                        run,
                        dir: rel.clone(),
                        exit_code: code,
                        stopped_by: outcome.stopped_by,
                        values: values::of(&outcome.summary, cfg.gpus),
                        result_file: result_file.filter(|f| f.is_file()),
                    });
                }
                Err(e) => {
                    on_event(Event::RunFailed {
                        point: &name,
                        error: &e,
                    });
                    entry.status = PointStatus::Failed;
                    entry.error = Some(e.to_string());
                    if self.exit_code == exit::OK {
                        self.exit_code = crate::exit::ExitStatus::exit_code(&e).max(exit::FAILED);
                    }
                    break;
                }
            }
            if matches!(
                self.stop.reason(),
                Some(StopReason::Interrupted | StopReason::Terminated)
            ) {
                break;
            }
            entry.aggregate = aggregate(&entry.runs, cfg.confidence);
            if self.converged(&mut entry, on_event) {
                break;
            }
            // Progress on disk after every run: a crash loses at most the run in flight.
            self.journal.upsert(entry.clone());
            self.save(on_event);
        }
        let signalled = matches!(
            self.stop.reason(),
            Some(StopReason::Interrupted | StopReason::Terminated)
        );
        if entry.status != PointStatus::Failed {
            entry.status = if signalled {
                PointStatus::Stopped
            } else {
                PointStatus::Done
            };
        }
        entry.aggregate = aggregate(&entry.runs, cfg.confidence);
        if cfg.runs > 1 && !entry.runs.is_empty() {
            self.write_aiperf_aggregate(p, &entry, on_event);
        }
        if let Points::Search(spec) = &cfg.points {
            if entry.status == PointStatus::Done {
                let means: Values = entry
                    .aggregate
                    .iter()
                    .map(|(k, i)| (k.clone(), i.mean))
                    .collect();
                entry.sla = Some(judge(&means, &spec.objectives));
            }
        }
        self.journal.upsert(entry.clone());
        self.save(on_event);
        Some(entry)
    }

    /// Before a point (not the first): the wait for the servers to drain, then the cooldown.
    async fn settle_before(&self, entry: &mut PointEntry, on_event: &mut impl FnMut(Event<'_>)) {
        if let Some(settings) = &self.cfg.drain {
            let outcome =
                wait_for_drain(settings, self.stop, |poll| on_event(Event::DrainPoll(poll))).await;
            match outcome {
                Ok(o) => {
                    on_event(Event::Drained(&o));
                    entry.started_undrained = o.reason == DrainReason::Timeout;
                    entry.drain_before = Some(o);
                }
                Err(e) => on_event(Event::Warning(format!(
                    "drain wait before {}: {e}",
                    entry.name
                ))),
            }
        }
        if !self.cfg.point_cooldown.is_zero() {
            sleep_or_stop(self.cfg.point_cooldown, self.stop).await;
        }
    }

    /// The convergence test after the point's latest run (with `--convergence-metric`),
    /// recorded in `entry`: true when no more runs are needed.
    fn converged(&self, entry: &mut PointEntry, on_event: &mut impl FnMut(Event<'_>)) -> bool {
        let (Some(conv), Some((latest, before))) = (&self.cfg.convergence, entry.runs.split_last())
        else {
            return false;
        };
        let run_values: Vec<f64> = entry
            .runs
            .iter()
            .filter_map(|r| r.values.get(&conv.key).copied())
            .collect();
        let per_request = |r: &RunEntry| values::per_request(&self.cfg.dir.join(&r.dir), &conv.tag);
        let (newest, earlier) = match conv.mode {
            super::stats::Mode::Distribution => (
                per_request(latest),
                before.iter().flat_map(per_request).collect(),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let Some(c) = check(
            conv.mode,
            conv.threshold,
            self.cfg.confidence,
            &run_values,
            &newest,
            &earlier,
        ) else {
            return false;
        };
        on_event(Event::Convergence {
            point: &entry.name,
            converged: c.converged,
            explain: &c.explain,
        });
        let done = c.converged;
        entry.convergence = Some(c);
        done
    }

    /// AIPerf's confidence aggregate of the point's runs, in its `aggregate/` directory; a
    /// failure is a warning (the runs and `sweep.json` hold the same numbers).
    fn write_aiperf_aggregate(
        &self,
        p: &Point,
        entry: &PointEntry,
        on_event: &mut impl FnMut(Event<'_>),
    ) {
        let cfg = self.cfg;
        let (kept, cut): (Vec<&RunEntry>, Vec<&RunEntry>) =
            entry.runs.iter().partition(|r| !signalled(r));
        let meta = super::aiperf::PointMeta {
            label: p.name(),
            values: p
                .0
                .iter()
                .map(|(k, &v)| {
                    let v = if v.fract() == 0.0 && v.abs() < 1e15 {
                        serde_json::json!(v as i64)
                    } else {
                        serde_json::json!(v)
                    };
                    (k.name().to_string(), v)
                })
                .collect(),
            runs: entry.runs.len(),
            run_dirs: kept.iter().map(|r| r.dir.clone()).collect(),
            failed: cut
                .iter()
                .map(|r| {
                    (
                        super::aiperf::label(&r.dir),
                        "stopped by a signal before it ended".to_string(),
                    )
                })
                .collect(),
            confidence: cfg.confidence,
            cooldown_s: cfg.run_cooldown.as_secs_f64(),
            model: cfg.model(),
        };
        if let Err(e) = super::aiperf::write(&cfg.dir, &cfg.aggregate_dir(p), &meta) {
            on_event(Event::Warning(format!(
                "AIPerf's aggregate of {} was not written: {e}",
                super::config::display(p)
            )));
        }
    }
}

/// A run cut by SIGINT or SIGTERM: kept on record, never averaged.
fn signalled(r: &RunEntry) -> bool {
    matches!(
        r.stopped_by,
        Some(StopReason::Interrupted | StopReason::Terminated)
    )
}

/// Mean and interval of every value over the runs that ended on their own (a run cut by a
/// signal is kept on record but not averaged).
fn aggregate(runs: &[RunEntry], confidence: f64) -> BTreeMap<String, super::stats::Interval> {
    let mut by_key: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in runs.iter().filter(|r| !signalled(r)) {
        for (k, v) in &r.values {
            by_key.entry(k).or_default().push(*v);
        }
    }
    by_key
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), interval(&v, confidence)?)))
        .collect()
}

/// Copies one run's progress into the sweep's channel until aborted.
fn forward_progress(
    mut rx: watch::Receiver<Progress>,
    to: watch::Sender<Progress>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        to.send_replace(*rx.borrow_and_update());
        while rx.changed().await.is_ok() {
            to.send_replace(*rx.borrow_and_update());
        }
    })
}

async fn sleep_or_stop(d: Duration, stop: &Stopper) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.token().cancelled() => {}
    }
}
