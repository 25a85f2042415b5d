//! The `specperf` binary: flags -> validated config -> runtime -> run -> exit code.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use specperf::{exit, Cli, Command, ExitStatus, Progress, Stopper, Ui};
use tokio::sync::watch;

#[path = "main/console.rs"]
mod console;

use console::{
    print_category_event, print_cell_event, print_gate_progress, print_run, print_stats,
    print_sweep_event, spawn_signal_handlers, start_printer, Live,
};

fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if cli.debug() {
        specperf::debug::enable();
    }
    // bench-serving's requests all run on this thread: per SSE event a thread of ours costs a
    // few microseconds, far under what the Python client it replaces can take, and a second
    // worker only adds the wake-ups of work stealing (18 % more CPU at its C 512 point, in
    // benches/README.md). Prompts are built on threads of their own either way.
    let mut builder = match cli.command {
        Command::BenchServing(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = match builder.enable_all().build() {
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
                let telemetry = args.telemetry.gpu_telemetry.is_some();
                let cfg = specperf::sweep::check_single(&args.sweep, telemetry).and_then(|w| {
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
                let telemetry = args.telemetry.gpu_telemetry.is_some();
                let cfg = specperf::sweep::check_single(&args.sweep, telemetry).and_then(|w| {
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
            Command::BenchServing(args) => {
                let stop = Stopper::new();
                spawn_signal_handlers(&stop);
                specperf::bench_serving(&args.argv, stop).await.exit_code()
            }
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
    let dcgm = cfg.gpus.is_some();
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
        if dcgm {
            println!(
                "specperf sim listening on http://{a} (metrics at http://{a}/metrics, DCGM at \
                 http://{a}/dcgm/metrics)"
            );
        } else {
            println!("specperf sim listening on http://{a} (metrics at http://{a}/metrics)");
        }
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
