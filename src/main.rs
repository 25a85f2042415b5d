//! The `specperf` binary: flags -> validated config -> runtime -> run -> exit code.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use specperf::{exit, Cli, Command, ExitStatus, Progress, StopReason, Stopper, Ui};
use tokio::sync::watch;

fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED as u8);
        }
    };
    let code = rt.block_on(async {
        match cli.command {
            Command::Replay(args) if specperf::sweep::serve_wanted(&args) => {
                cells(specperf::sweep::CellsConfig::from_replay(&args)).await
            }
            Command::Replay(args) if specperf::sweep::categories_wanted(&args) => {
                categories(&args).await
            }
            Command::Replay(args) if specperf::sweep::wanted(&args) => {
                sweep(specperf::sweep::SweepConfig::from_replay(&args)).await
            }
            Command::Replay(args) => {
                let cfg = specperf::sweep::check_single(&args.sweep).and_then(|w| {
                    let mut c = specperf::RunConfig::from_args(&args)?;
                    c.warnings.extend(w);
                    Ok(c)
                });
                replay(cfg).await
            }
            Command::Profile(args) if specperf::sweep::wanted_profile(&args) => {
                sweep(specperf::sweep::SweepConfig::from_profile(&args)).await
            }
            Command::Profile(args) => {
                let cfg = specperf::sweep::check_single(&args.sweep).and_then(|w| {
                    let mut c = specperf::RunConfig::from_profile(&args)?;
                    c.warnings.extend(w);
                    Ok(c)
                });
                replay(cfg).await
            }
            Command::Sim(args) => sim(&args).await,
            Command::Inject(args) => inject(&args),
            Command::Render(args) => {
                let sub = matches.subcommand_matches("render");
                render(&args, sub.map(specperf::render_ignored).unwrap_or_default())
            }
            Command::Gate(args) => gate(&args).await,
            Command::GateSummary(args) => gate_summary(&args),
            Command::Collect(args) => collect(&args).await,
            Command::Merge(args) => merge(&args),
            Command::Plot(args) => plot(&args),
            Command::SpeedBenchReport(args) => speed_bench_report(&args),
            Command::Completions(a) => {
                use std::io::Write;
                // A closed pipe (`| head`) is the reader's choice, not a failure.
                let _ = std::io::stdout().write_all(&specperf::completions(a.shell));
                exit::OK
            }
            Command::Man(a) => match specperf::write_man_pages(&a.dir) {
                Ok(paths) => {
                    for p in paths {
                        println!("{}", p.display());
                    }
                    exit::OK
                }
                Err(e) => {
                    eprintln!("error: cannot write man pages in {}: {e}", a.dir.display());
                    exit::FAILED
                }
            },
            Command::Drain(args) => drain(&args).await,
        }
    });
    // Everything that matters is written by now. Tasks still running (requests cancelled by a
    // signal, a name lookup stuck in the system resolver on a blocking thread that cannot be
    // cancelled) must not hold the exit up: the gate owes its result within a second.
    rt.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(code as u8)
}

/// `replay` and `profile` (the AgentX replay under AIPerf's flags): one run from a validated
/// configuration.
async fn replay(cfg: Result<specperf::RunConfig, specperf::ConfigError>) -> i32 {
    let mut cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    cfg.set_cli_command(command_line());
    for w in &cfg.warnings {
        eprintln!("WARNING: {w}");
    }
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    let (ptx, prx) = watch::channel(Progress::default());
    let stats = cfg
        .stats_interval()
        .map(|every| tokio::spawn(print_stats(prx.clone(), every)));
    let terminal = std::io::stderr().is_terminal();
    let printer = start_printer(cfg.ui, terminal, cfg.progress_interval, prx);
    let threshold = cfg.failed_request_threshold;
    let ui = cfg.ui;
    let result = specperf::replay(cfg, stop, ptx).await;
    if let Some(s) = stats {
        s.abort();
    }
    if let Some(p) = printer {
        p.abort();
        if terminal && ui == Ui::Simple {
            // Leave the terminal on a clean line before the final table.
            eprint!("\r\x1b[2K");
        }
    }
    match result {
        Ok(outcome) => {
            print_run(&outcome);
            specperf::exit_code(&outcome, threshold)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    }
}

/// A finished run: its warnings, the console table, where its artifacts are, and why requests
/// failed.
fn print_run(outcome: &specperf::RunOutcome) {
    for w in &outcome.run_warnings {
        eprintln!("WARNING: {w}");
    }
    print!("{}", specperf::console_table(&outcome.summary));
    println!("Artifacts: {}", outcome.artifact_dir.display());
    if let Some(e) = &outcome.artifact_error {
        eprintln!("error: artifacts incomplete: {e}");
    }
    if let Some(why) = specperf::failure_report(&outcome.summary) {
        eprint!("{why}");
    }
}

/// The live display: a bar on a terminal, plain lines every `every` otherwise, or nothing.
fn start_printer(
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
struct Live {
    printer: Option<tokio::task::JoinHandle<()>>,
    terminal: bool,
}

impl Live {
    fn start(
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
    fn clearer(&self) -> impl Fn() + Copy {
        let terminal = self.terminal;
        move || {
            if terminal {
                eprint!("\r\x1b[2K");
            }
        }
    }

    /// Stops the progress printer and leaves a clean line for the final table.
    fn end(self) {
        let clear = self.clearer();
        if let Some(p) = self.printer {
            p.abort();
            clear();
        }
    }
}

/// A sweep (comma lists, repeated runs or an SLA search): each run's table as it ends, drain
/// waits and search verdicts on stderr, then the sweep table.
async fn sweep(cfg: Result<specperf::sweep::SweepConfig, specperf::ConfigError>) -> i32 {
    let mut cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    cfg.set_cli_command(command_line());
    let (live, stop, ptx) = Live::start(cfg.ui, cfg.progress_interval, &cfg.warnings);
    let clear = live.clearer();
    let result = specperf::sweep::run_sweep(cfg, stop, ptx, |ev| {
        clear();
        print_sweep_event(ev);
    })
    .await;
    live.end();
    match result {
        Ok(o) => {
            print!("{}", specperf::sweep::console(&o.index));
            println!("Sweep: {}", o.dir.display());
            o.exit_code
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    }
}

/// One event of a sweep on the console: run starts, skips, drain waits, each run's table,
/// failures, convergence and search verdicts.
fn print_sweep_event(ev: specperf::sweep::Event<'_>) {
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

/// `replay --serve-cmd`: a line per cell start, ready and stop (the log's tail for a failed
/// cell), each cell's runs as a run or a sweep prints them, then the table of cells.
async fn cells(cfg: Result<specperf::sweep::CellsConfig, specperf::ConfigError>) -> i32 {
    let mut cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    cfg.set_cli_command(command_line());
    let (live, stop, ptx) = Live::start(cfg.ui, cfg.progress_interval, &cfg.warnings);
    let clear = live.clearer();
    let result = specperf::sweep::run_cells(cfg, stop, ptx, |ev| {
        clear();
        print_cell_event(ev);
    })
    .await;
    live.end();
    match result {
        Ok(o) => {
            print!("{}", specperf::sweep::cells_console(&o.index));
            println!("Cells: {}", o.dir.join("cells.json").display());
            o.exit_code
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    }
}

/// One event of a `--serve-cmd` sweep (or of `collect`'s cells) on the console: a line per
/// cell start, ready and stop (the log's tail for a failed cell), each cell's run or sweep.
fn print_cell_event(ev: specperf::sweep::CellEvent<'_>) {
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

/// `collect`: the cells of every thinking mode, then the curve's table and the YAML's path.
async fn collect(args: &specperf::CollectArgs) -> i32 {
    let mut plan = match specperf::collect::CollectPlan::from_args(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    plan.set_cli_command(command_line());
    let (ui, every) = plan.progress();
    let (live, stop, ptx) = Live::start(ui, every, &plan.warnings);
    let clear = live.clearer();
    use specperf::collect::CollectEvent;
    let result = specperf::collect::run_collect(plan, stop, ptx, |ev| {
        clear();
        match ev {
            CollectEvent::Mode(m) => eprintln!("=== {m} ==="),
            CollectEvent::Cell(ev) => print_cell_event(ev),
        }
    })
    .await;
    live.end();
    match result {
        Ok(o) => {
            print!("{}", o.table());
            match &o.output {
                Some(p) => println!("Golden curve: {}", p.display()),
                None => println!(
                    "Stopped: no curve written; the cells done are in {} (--resume continues)",
                    o.dir.display()
                ),
            }
            o.exit_code
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            e.exit_code()
        }
    }
}

/// One event of the per-category runs on the console.
fn print_category_event(ev: specperf::sweep::CategoryEvent<'_>) {
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

/// `replay --category a,b` or `all`: one run per category, the drain wait between, then the
/// matrix.
async fn categories(args: &specperf::ReplayArgs) -> i32 {
    let mut plan = match specperf::sweep::CategoryPlan::from_replay(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    plan.set_cli_command(command_line());
    let (ui, every) = plan.progress();
    let (live, stop, ptx) = Live::start(ui, every, &plan.warnings);
    let clear = live.clearer();
    let outcome = specperf::sweep::run_categories(plan, stop, ptx, |ev| {
        clear();
        print_category_event(ev);
    })
    .await;
    live.end();
    print!("{}", outcome.table());
    println!("Categories: {}", outcome.dir.display());
    outcome.exit_code(args.failed_request_threshold)
}

/// The gate is report-only: its outcome is the result file and the console line; exit 0 unless
/// --strict (then 1 for anything but pass).
async fn gate(args: &specperf::GateArgs) -> i32 {
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    let (ptx, prx) = watch::channel(Progress::default());
    let printer = tokio::spawn(print_gate_progress(prx.clone(), Duration::from_secs(5)));
    let r = specperf::gate::run_gate(args, stop, ptx).await;
    printer.abort();
    let last = *prx.borrow();
    if last.profiling_started.is_some() {
        eprintln!(
            "AL gate replay: {}",
            specperf::progress_line(&last, Instant::now(), false, 0)
        );
    }
    println!("{}", r.console_line());
    match &r.written {
        Ok(p) => println!("AL gate result: {}", p.display()),
        Err(e) => eprintln!("error: the gate result could not be written: {e}"),
    }
    if args.strict && r.verdict != specperf::gate::Verdict::Pass {
        exit::FAILED
    } else {
        exit::OK
    }
}

fn gate_summary(args: &specperf::GateSummaryArgs) -> i32 {
    match specperf::gate::summarize(&args.paths) {
        Ok(s) => {
            print!("{}", s.markdown);
            if let Some(p) = &args.json {
                let text = serde_json::to_string_pretty(&s.json).unwrap_or_default() + "\n";
                if let Err(e) = std::fs::write(p, text) {
                    eprintln!("error: cannot write {}: {e}", p.display());
                    return exit::FAILED;
                }
            }
            for e in &s.unreadable {
                eprintln!("warning: unreadable, left out: {e}");
            }
            if args.strict && !s.unreadable.is_empty() {
                exit::FAILED
            } else {
                exit::OK
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::USAGE
        }
    }
}

fn render(args: &specperf::RenderArgs, ignored: Vec<String>) -> i32 {
    if !ignored.is_empty() {
        eprintln!(
            "warning: render only prints bodies and ignores {} (they matter to a run against a \
             server)",
            ignored.join(", ")
        );
    }
    if let Some(path) = &args.check_vectors {
        return match tokenizer_encoders::check_vector_file(path) {
            Ok(report) => {
                println!("{}", report.to_string().trim_end());
                if report.failed() == 0 {
                    exit::OK
                } else {
                    exit::FAILED
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                exit::USAGE
            }
        };
    }
    let cfg = match specperf::RunConfig::from_args(&args.replay) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    let count = match args.count() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    match specperf::render_requests(&cfg, count) {
        Ok(bodies) => {
            for b in bodies {
                println!("{}", serde_json::to_string_pretty(&b).unwrap_or_default());
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::USAGE
        }
    }
}

/// The command line as typed (quoted where a shell would need it), for the AIPerf summary.
fn command_line() -> String {
    redact_args(std::env::args())
        .into_iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The arguments with credentials replaced: `--api-key` values and the values of headers whose
/// name suggests a secret (the command line is written into artifacts).
fn redact_args(args: impl Iterator<Item = String>) -> Vec<String> {
    const SECRET_NAMES: [&str; 5] = ["auth", "key", "token", "cookie", "secret"];
    let secret_header = |v: &str| {
        let name = v.split(':').next().unwrap_or("").to_ascii_lowercase();
        // A JSON object of headers may name anything: redact it whole.
        v.trim_start().starts_with('{') || SECRET_NAMES.iter().any(|s| name.contains(s))
    };
    let mut out: Vec<String> = Vec::new();
    let mut after_header = false;
    let mut after_key = false;
    for a in args {
        let redacted = if after_key {
            "[redacted]".to_owned()
        } else if after_header && secret_header(&a) {
            match a.split_once(':') {
                Some((n, _)) if !a.trim_start().starts_with('{') => format!("{n}:[redacted]"),
                _ => "[redacted]".to_owned(),
            }
        } else if a.starts_with("--api-key=") {
            "--api-key=[redacted]".to_owned()
        } else if let Some(v) = a.strip_prefix("--header=").filter(|v| secret_header(v)) {
            let n = v.split(':').next().unwrap_or("");
            format!("--header={n}:[redacted]")
        } else {
            a.clone()
        };
        after_key = a == "--api-key";
        // `-H` takes one or more values: stay in header mode until the next flag.
        after_header = if a == "-H" || a == "--header" {
            true
        } else {
            after_header && !a.starts_with('-')
        };
        out.push(redacted);
    }
    out
}

/// Periodic plain progress lines (stderr is a file or pipe).
async fn print_progress(mut rx: watch::Receiver<Progress>, every: Duration) {
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
async fn print_stats(mut rx: watch::Receiver<Progress>, every: Duration) {
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
async fn print_gate_progress(mut rx: watch::Receiver<Progress>, every: Duration) {
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
async fn draw_bar(rx: watch::Receiver<Progress>) {
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

/// `specperf drain`: one progress line per poll and a final line on stderr; the outcome file
/// (`--output`) is written whatever the reason the wait ended.
async fn drain(args: &specperf::DrainArgs) -> i32 {
    let cfg = match specperf::drain_config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    let outcome = specperf::scrape::wait_for_drain(&cfg.settings, &stop, |p| eprintln!("{p}"));
    match outcome.await {
        Ok(o) => {
            eprintln!("{}", o.summary_line());
            if let Some(path) = &cfg.output {
                if let Err(e) = o.write_json(path) {
                    eprintln!("error: {e}");
                    return e.exit_code();
                }
            }
            o.exit_code()
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// `specperf plot DIR`.
fn plot(args: &specperf::PlotArgs) -> i32 {
    if let Some(g) = args.golden_al {
        if !(g.is_finite() && g >= 1.0) {
            eprintln!("error: --golden-al {g} must be a number of at least 1 (tokens per step)");
            return exit::USAGE;
        }
    }
    let sweeps = args.dirs.len() > 1 || args.dirs[0].join("sweep.json").is_file();
    if sweeps {
        let out = args
            .output
            .clone()
            .unwrap_or_else(|| args.dirs[0].join("compare"));
        return match specperf::sweep::overlay(&args.dirs, &out) {
            Ok(page) => {
                println!("Sweeps compared: {}", page.display());
                exit::OK
            }
            Err(e) => {
                eprintln!("error: {e}");
                match e {
                    specperf::sweep::OverlayError::Index(_) => exit::USAGE,
                    _ => exit::FAILED,
                }
            }
        };
    }
    let dir = &args.dirs[0];
    if !dir.join("records.jsonl").is_file() {
        eprintln!(
            "error: {} is not a replay's artifact directory (it has no records.jsonl): pass the \
             directory a replay wrote (its --artifact-dir, printed as `Artifacts:`)",
            dir.display()
        );
        return exit::USAGE;
    }
    let out = args.output.clone().unwrap_or_else(|| dir.join("plots"));
    if out.exists() && !out.is_dir() {
        eprintln!(
            "error: --output {} exists and is not a directory: pass a directory for the charts \
             (created when missing)",
            out.display()
        );
        return exit::USAGE;
    }
    match specperf::plot(dir, &out, args.golden_al, args.png) {
        Ok(o) => {
            for f in &o.files {
                println!("{}", f.display());
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::FAILED
        }
    }
}

/// `specperf speed-bench-report PATH...`: AIPerf's lines (the run count, warnings as they come,
/// the table, where the CSV went) and its `Error: ...` with exit 1.
fn speed_bench_report(args: &specperf::SpeedBenchReportArgs) -> i32 {
    let result = specperf::speed_bench_report(args, &mut |n| match n {
        specperf::Note::Found(n) => println!("Found {n} run directories."),
        specperf::Note::Warning(w) => eprintln!("Warning: {w}"),
    });
    match result {
        Ok(o) => {
            print!("{}", o.tables);
            for w in &o.written {
                println!("{} written to {}", w.what, w.path.display());
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("Error: {e}.");
            exit::FAILED
        }
    }
}

/// Routes SIGINT and SIGTERM to the stopper. The handlers are registered before this returns,
/// so a signal that arrives right after (a fast supervisor) is not lost to the default action.
fn spawn_signal_handlers(stop: &Stopper) {
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

/// `specperf inject`: prints each changed line and a line per entry; errors as one `ERROR:` line.
fn inject(args: &specperf::InjectArgs) -> i32 {
    let result = specperf::InjectConfig::from_args(args).and_then(|c| specperf::inject(&c));
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ERROR: {e}");
            return e.exit_code();
        }
    };
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    print!("{}", report.console_text());
    report.exit_code()
}

/// `specperf merge`: prints the merged console table, like `replay` does.
fn merge(args: &specperf::MergeArgs) -> i32 {
    match specperf::merge(&args.dirs, args.output.as_deref()) {
        Ok(m) => {
            print!("{}", specperf::console_table(&m.summary));
            println!("Artifacts: {}", m.output.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

async fn sim(args: &specperf::SimArgs) -> i32 {
    let cfg = match specperf::sim_config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    if !cfg.host.is_loopback() {
        // Loud on purpose: the simulator answers anyone who can reach this address.
        eprintln!(
            "warning: the simulator listens on {} and is reachable from the network, not only \
             from this machine",
            cfg.host
        );
    }
    let sim = match specperf::sim::Simulator::bind(cfg).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::FAILED;
        }
    };
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    for a in sim.addrs() {
        println!("specperf sim listening on http://{a} (metrics at http://{a}/metrics)");
    }
    sim.run_until(&stop).await;
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::redact_args;

    #[test]
    fn credentials_are_redacted_from_the_recorded_command_line() {
        let args = [
            "specperf",
            "replay",
            "--api-key",
            "sk-1",
            "-H",
            "Authorization: Bearer x",
            "X-Trace:1",
            "--api-key=sk-2",
            "--header=x-api-key:sk-3",
            "--header",
            r#"{"a":"b"}"#,
            "--url",
            "u",
        ]
        .map(String::from);
        let out = redact_args(args.into_iter()).join(" ");
        for secret in ["sk-1", "Bearer x", "sk-2", "sk-3", r#""b""#] {
            assert!(!out.contains(secret), "{out}");
        }
        assert!(
            out.contains("X-Trace:1") && out.contains("--url u"),
            "{out}"
        );
    }
}
