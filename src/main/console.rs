//! The console of the `specperf` binary: the live progress (bar, periodic lines, stats), the
//! tables and lines each multi-run command prints as its events arrive, and the signal handlers
//! that stop a run. Printing only: the library returns values and events, this file says them.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use specperf::{Progress, StopReason, Stopper, Ui};
use tokio::sync::watch;

/// A finished run: its warnings, the console table, where its artifacts are, and why requests
/// failed.
pub(crate) fn print_run(outcome: &specperf::RunOutcome) {
    for w in &outcome.run_warnings {
        eprintln!("WARNING: {w}");
    }
    print!("{}", specperf::console_table(&outcome.summary));
    println!("Artifacts: {}", outcome.artifact_dir.display());
    if let Some(e) = &outcome.artifact_error {
        eprintln!("error: artifacts incomplete: {e}");
    }
    if let Some(e) = &outcome.failed_requirement {
        eprintln!("error: {e}");
    }
    if let Some(why) = specperf::failure_report(&outcome.summary) {
        eprint!("{why}");
    }
}

/// The live display: a bar on a terminal, plain lines every `every` otherwise, or nothing.
pub(crate) fn start_printer(
    ui: Ui,
    terminal: bool,
    every: Option<Duration>,
    rx: watch::Receiver<Progress>,
) -> Option<tokio::task::JoinHandle<()>> {
    match (ui, terminal, every) {
        (Ui::None, _, _) => None,
        (Ui::Simple, true, _) => Some(tokio::spawn(draw_bar(rx))),
        (Ui::Simple, false, Some(every)) => Some(tokio::spawn(print_progress(rx, every))),
        (Ui::Simple, false, None) => None,
    }
}

/// The console of a command that runs many replays: its warnings said once, a stopper with the
/// signal handlers, the live progress printer, and the line clearer each event starts with.
pub(crate) struct Live {
    printer: Option<tokio::task::JoinHandle<()>>,
    terminal: bool,
}

impl Live {
    pub(crate) fn start(
        ui: Ui,
        every: Option<Duration>,
        warnings: &[String],
    ) -> (Live, Stopper, watch::Sender<Progress>) {
        for w in warnings {
            eprintln!("WARNING: {w}");
        }
        let stop = Stopper::new();
        spawn_signal_handlers(&stop);
        let (ptx, prx) = watch::channel(Progress::default());
        let terminal = std::io::stderr().is_terminal();
        let printer = start_printer(ui, terminal, every, prx);
        (Live { printer, terminal }, stop, ptx)
    }

    /// Clears the progress line before an event's own line.
    pub(crate) fn clearer(&self) -> impl Fn() + Copy {
        let terminal = self.terminal;
        move || {
            if terminal {
                eprint!("\r\x1b[2K");
            }
        }
    }

    /// Stops the progress printer and leaves a clean line for the final table.
    pub(crate) fn end(self) {
        let clear = self.clearer();
        if let Some(p) = self.printer {
            p.abort();
            clear();
        }
    }
}

/// One event of a sweep on the console: run starts, skips, drain waits, each run's table,
/// failures, convergence and search verdicts.
pub(crate) fn print_sweep_event(ev: specperf::sweep::Event<'_>) {
    use specperf::sweep::Event;
    match ev {
        Event::RunStart {
            point,
            index,
            total,
            run,
            runs,
        } => {
            let of = total.map_or(String::new(), |t| format!("/{t}"));
            let name = if point.is_empty() { "run" } else { point };
            let run = if runs > 1 {
                format!(", run {run}/{runs}")
            } else {
                String::new()
            };
            eprintln!("=== point {index}{of}: {name}{run} ===");
        }
        Event::Skipped { point } => {
            eprintln!("point {point}: finished in the earlier sweep, kept (--resume)")
        }
        Event::DrainPoll(p) => eprintln!("{p}"),
        Event::Drained(o) => eprintln!("{}", o.summary_line()),
        Event::RunDone { outcome, .. } => print_run(outcome),
        Event::RunFailed { point, error } => {
            eprintln!("error: point {point}: {error:#}; the sweep goes on")
        }
        Event::Convergence { point, explain, .. } => eprintln!("point {point}: {explain}"),
        Event::Probe { point, pass } => eprintln!(
            "point {point}: {}",
            if pass {
                "meets the objectives"
            } else {
                "misses the objectives"
            }
        ),
        Event::Warning(w) => eprintln!("WARNING: {w}"),
    }
}

/// One event of a `--serve-cmd` sweep (or of `collect`'s cells) on the console: a line per
/// cell start, ready and stop (the log's tail for a failed cell), each cell's run or sweep.
pub(crate) fn print_cell_event(ev: specperf::sweep::CellEvent<'_>) {
    use specperf::sweep::CellEvent;
    match ev {
        CellEvent::Start {
            cell,
            index,
            total,
            command,
            log,
        } => {
            eprintln!("=== cell {index}/{total}: {cell} ===");
            eprintln!("cell {cell}: starting `{command}` (log {})", log.display());
        }
        CellEvent::Ready { cell, seconds, url } => {
            eprintln!("cell {cell}: server ready at {url} after {seconds:.1} s")
        }
        CellEvent::ServerStopped { cell, stopped } => eprintln!(
            "cell {cell}: server stopped in {:.1} s{}",
            stopped.seconds,
            if stopped.killed {
                " (killed after the grace)"
            } else {
                ""
            }
        ),
        CellEvent::Failed { cell, error, tail } => {
            eprintln!("error: cell {cell} failed: {error}; the sweep goes on");
            if !tail.is_empty() {
                eprintln!("cell {cell}: the server log ends:");
                for l in tail {
                    eprintln!("  | {l}");
                }
            }
        }
        CellEvent::Skipped { cell } => {
            eprintln!("cell {cell}: finished in the earlier sweep, kept (--resume)")
        }
        CellEvent::GpuWait(w) => eprintln!("{}", w.summary_line()),
        CellEvent::RunDone { outcome, .. } => print_run(outcome),
        CellEvent::RunFailed { cell, error } => {
            eprintln!("error: cell {cell}: {error:#}")
        }
        CellEvent::Sweep(ev) => print_sweep_event(ev),
        CellEvent::SweepDone { outcome, .. } => {
            print!("{}", specperf::sweep::console(&outcome.index));
            println!("Sweep: {}", outcome.dir.display());
        }
        CellEvent::Category(ev) => print_category_event(ev),
        CellEvent::CategoriesDone { outcome, .. } => {
            print!("{}", outcome.table());
            println!("Categories: {}", outcome.dir.display());
        }
        CellEvent::Warning(w) => eprintln!("WARNING: {w}"),
    }
}

/// One event of the per-category runs on the console.
pub(crate) fn print_category_event(ev: specperf::sweep::CategoryEvent<'_>) {
    use specperf::sweep::CategoryEvent;
    match ev {
        CategoryEvent::Start {
            category,
            index,
            total,
        } => eprintln!("=== category {index}/{total}: {category} ==="),
        CategoryEvent::DrainPoll(p) => eprintln!("{p}"),
        CategoryEvent::Drained(o) => eprintln!("{}", o.summary_line()),
        CategoryEvent::Done(o) => print_run(o),
        CategoryEvent::Failed { category, error } => {
            eprintln!("error: category {category}: {error:#}; the next one goes on")
        }
        CategoryEvent::Warning(w) => eprintln!("WARNING: {w}"),
    }
}

/// Periodic plain progress lines (stderr is a file or pipe).
pub(crate) async fn print_progress(mut rx: watch::Receiver<Progress>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let p = *rx.borrow_and_update();
        eprintln!("{}", specperf::progress_line(&p, Instant::now(), false, 0));
    }
}

/// The AgentX realtime stats block on stderr every `every` (`--stats-interval`), from the
/// start of profiling; each block's throughputs cover the interval since the previous one.
pub(crate) async fn print_stats(mut rx: watch::Receiver<Progress>, every: Duration) {
    while rx.borrow_and_update().profiling_started.is_none() {
        if rx.changed().await.is_err() {
            return;
        }
    }
    let mut prev = Progress::default();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let p = *rx.borrow();
        eprint!(
            "{}",
            specperf::stats_block(&p, &prev, every.as_secs_f64(), Instant::now())
        );
        prev = p;
    }
}

/// The gate's replay on stderr as plain lines (the gate runs unattended, into a log): one when it
/// starts, then one every `every`; `gate` prints the last.
pub(crate) async fn print_gate_progress(mut rx: watch::Receiver<Progress>, every: Duration) {
    while rx.borrow_and_update().profiling_started.is_none() {
        if rx.changed().await.is_err() {
            return;
        }
    }
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let p = *rx.borrow();
        eprintln!(
            "AL gate replay: {}",
            specperf::progress_line(&p, Instant::now(), false, 0)
        );
    }
}

/// A progress bar redrawn in place on stderr (a terminal), four times a second.
pub(crate) async fn draw_bar(rx: watch::Receiver<Progress>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100usize);
    loop {
        tick.tick().await;
        let p = *rx.borrow();
        if p.profiling_started.is_none() && p.starting.is_none() {
            continue;
        }
        let line = specperf::progress_line(&p, Instant::now(), true, width);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }
}

/// Routes SIGINT and SIGTERM to the stopper. The handlers are registered before this returns,
/// so a signal that arrives right after (a fast supervisor) is not lost to the default action.
pub(crate) fn spawn_signal_handlers(stop: &Stopper) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        for (kind, reason) in [
            (SignalKind::interrupt(), StopReason::Interrupted),
            (SignalKind::terminate(), StopReason::Terminated),
        ] {
            if let Ok(mut sig) = signal(kind) {
                let s = stop.clone();
                tokio::spawn(async move {
                    if sig.recv().await.is_some() {
                        s.stop(reason);
                    }
                });
            }
        }
    }
    #[cfg(not(unix))]
    {
        let s = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                s.stop(StopReason::Interrupted);
            }
        });
    }
}
