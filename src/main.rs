//! The `specperf` binary: flags -> validated config -> runtime -> run -> exit code.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use specperf::{exit, Cli, Command, Progress, StopReason, Stopper};
use tokio::sync::watch;

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            Command::Replay(args) => replay(&args).await,
            Command::Sim(args) => sim(&args).await,
            Command::Inject(args) => inject(&args),
        }
    });
    // A name lookup stuck in the system resolver runs on a blocking thread that cannot be
    // cancelled, and dropping the runtime would wait for it (10 s and more with a resolver that
    // drops bursts). Everything the run owes is written by now, so waiting is bounded.
    rt.shutdown_timeout(Duration::from_secs(1));
    ExitCode::from(code as u8)
}

async fn replay(args: &specperf::ReplayArgs) -> i32 {
    let cfg = match specperf::RunConfig::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    for w in &cfg.warnings {
        eprintln!("WARNING: {w}");
    }
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    let (ptx, prx) = watch::channel(Progress::default());
    let printer = cfg
        .progress_interval
        .map(|every| tokio::spawn(print_progress(prx, every)));
    let threshold = cfg.failed_request_threshold;
    let result = specperf::replay(cfg, stop, ptx).await;
    if let Some(p) = printer {
        p.abort();
    }
    match result {
        Ok(outcome) => {
            print!("{}", specperf::console_table(&outcome.summary));
            println!("Artifacts: {}", outcome.artifact_dir.display());
            if let Some(e) = &outcome.artifact_error {
                eprintln!("error: artifacts incomplete: {e}");
            }
            specperf::exit_code(&outcome, threshold)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            match e {
                e if e.is_not_ready() => exit::NOT_READY,
                specperf::EngineError::Dataset(_)
                | specperf::EngineError::Load(_)
                | specperf::EngineError::NoModel(_)
                | specperf::EngineError::Url { .. } => exit::USAGE,
                _ => exit::FAILED,
            }
        }
    }
}

async fn print_progress(mut rx: watch::Receiver<Progress>, every: Duration) {
    let start = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let p = *rx.borrow_and_update();
        let t = start.elapsed().as_secs_f64();
        let al = p
            .acceptance_length
            .map(|a| format!(" | AL {a:.3}"))
            .unwrap_or_default();
        eprintln!(
            "[{t:7.1}s] done {} (ok {}, failed {}, cancelled {}) | {:.1} req/s | {:.0} output tok/s{al}",
            p.done,
            p.ok,
            p.failed,
            p.cancelled,
            p.ok as f64 / t,
            p.output_tokens as f64 / t
        );
    }
}

fn spawn_signal_handlers(stop: &Stopper) {
    let s = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            s.stop(StopReason::Interrupted);
        }
    });
    #[cfg(unix)]
    {
        let s = stop.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                term.recv().await;
                s.stop(StopReason::Terminated);
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
    print!("{}", report.console_text());
    report.exit_code()
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
    for a in sim.addrs() {
        println!("specperf sim listening on http://{a} (metrics at http://{a}/metrics)");
    }
    let stop = Stopper::new();
    spawn_signal_handlers(&stop);
    sim.run_until(&stop).await;
    exit::OK
}
