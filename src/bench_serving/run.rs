//! One bench-serving run in its phases, each printing upstream's lines as upstream does:
//!
//! ```text
//! prepare (tokenizer, prompts, bodies, arrivals, client) ─► before_main (warmups or the initial
//!   test, profiler, traffic lines) ─► main_phase (slow-down, server metrics, the measured
//!   requests, profiler stop) ─► report (outcomes, metrics, console block, result file) ─► Finished
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokenizer_encoders::Tokenizer;

use super::args::{Api, Args};
use super::artifacts::{self, ArtifactDir, Gpu};
use super::load::{self, Load, Phase};
use super::result::{self, py_float, Goodput, Header, Selection};
use super::side::{profiler, spec_decode_keys, MeasurementWindow, SlowDown};
use super::{
    build_client, cpu_count, length_statistics, result_path, template, tokenizer, uri, BodySpec,
    Fail, Finished,
};
use crate::client::Clock;
use crate::dataset::bench_serving::{random_dataset, Flavor, Prompts, RandomSettings};
use crate::scrape::{ScrapeSettings, Scraper};
use crate::side_task::{self, SideTask, SideTaskFailed};
use crate::stop::{StopReason, Stopper};

/// Everything the requests need, built before the first one.
pub(super) struct Prepared {
    /// sa-bench's, for the responses sent without usage (InferenceX's flavor drops it after the
    /// prompts).
    tok: Option<Tokenizer>,
    spec: BodySpec,
    prompts: Arc<Prompts>,
    load: Load,
    /// `--base-url` (or host:port), the profiler's root.
    base: String,
    /// `--artifact-dir`, ready.
    artifacts: Option<ArtifactDir>,
    /// `--gpu-telemetry`'s source, opened; taken by the measured phase.
    pub(super) gpu: Option<Gpu>,
}

impl Prepared {
    /// sa-bench's count of a response text sent without usage (its tokenizer's ids; 0 without
    /// the tokenizer or if it cannot).
    fn sa_tokens(&self, text: &str) -> u64 {
        self.tok
            .as_ref()
            .and_then(|t| t.ids(text).ok())
            .map_or(0, |ids| ids.len() as u64)
    }
}

/// The URL, the tokenizer and template, the prompts (IX's statistics printed), the bodies, the
/// arrival gaps and the client.
pub(super) async fn prepare(a: &Args) -> Result<Prepared, Fail> {
    let api_url = format!("{}{}", a.base(), a.endpoint);
    let ok_endpoint = match a.api {
        Api::Chat => api_url.ends_with("chat/completions"),
        _ => api_url.ends_with("completions") || api_url.ends_with("profile"),
    };
    if !ok_endpoint {
        let need = if a.api == Api::Chat {
            "'chat/completions'"
        } else {
            "'completions' or 'profile'"
        };
        return Err(Fail::Usage(format!(
            "--endpoint {}: the {} backend's URL must end with {need} (got {api_url})",
            a.endpoint, a.backend
        )));
    }
    let url = uri(&api_url, "--base-url/--endpoint")?;
    if a.num_prompts == 0 {
        return Err(Fail::Usage(
            "--num-prompts 0: give at least one prompt".into(),
        ));
    }
    let (tok, dir) = tokenizer(a)?;
    let template = template(a, &dir)?;
    if std::env::var_os("SAVE_TO_PYTORCH_BENCHMARK_FORMAT").is_some() {
        eprintln!(
            "WARNING: SAVE_TO_PYTORCH_BENCHMARK_FORMAT is set; the drop-in writes no .pytorch.json"
        );
    }
    let settings = RandomSettings {
        seed: a.seed,
        input_len: a.random_input_len,
        output_len: a.random_output_len,
        range_ratio: a.random_range_ratio,
        prefix_len: a.random_prefix_len,
        num_prompts: a.num_prompts,
        workers: match (a.flavor, a.random_num_workers) {
            (Flavor::InferenceX, 0) => cpu_count().min(8),
            (_, w) => w,
        },
    };
    let started = Instant::now();
    let mut dataset = {
        let (flavor, tok) = (a.flavor, tok.clone());
        tokio::task::spawn_blocking(move || random_dataset(flavor, &tok, &template, &settings))
            .await
            .map_err(|e| Fail::Run(format!("prompt generation: {e}")))?
            .map_err(|e| Fail::Usage(e.to_string()))?
    };
    if a.flavor == Flavor::InferenceX {
        if dataset.chunks > 0 {
            println!(
                "Generating {} prompts using {} worker processes...",
                a.num_prompts, dataset.chunks
            );
            println!(
                "Prompt generation completed in {:.1}s",
                started.elapsed().as_secs_f64()
            );
        }
        print!("{}", length_statistics(&dataset));
    }
    let spec = BodySpec::new(a);
    let prompts = Arc::new(std::mem::take(&mut dataset.prompts));
    // The tokenizer's load and the prompt workers' buffers are free now; sa-bench keeps the
    // tokenizer (it counts the tokens of responses sent without usage), InferenceX's flavor
    // needs it no more.
    let tok = (a.flavor == Flavor::SaBench).then_some(tok);
    crate::heap::trim();
    let body_of: load::BodyOf = {
        let (spec, prompts) = (spec.clone(), prompts.clone());
        Arc::new(move |i| spec.body(&prompts.text(i), prompts[i].output_len, &[]))
    };
    let gaps = load::gaps(
        &mut dataset.global,
        a.num_prompts,
        a.request_rate,
        a.burstiness,
    );
    let in_flight = a.max_concurrency.unwrap_or(a.num_prompts) as u64;
    crate::fdlimit::ensure(Some(in_flight), 1).map_err(|e| Fail::Run(e.to_string()))?;
    let client = build_client(a)?;
    let artifacts = ArtifactDir::open(a).map_err(Fail::Usage)?;
    let gpu = Gpu::open(a, &client).await.map_err(Fail::Usage)?;
    let load = Load {
        client,
        url,
        n: prompts.len(),
        body_of,
        gaps,
        max_concurrency: a.max_concurrency,
        api: a.api,
        capture_text: a.save_detailed || a.flavor == Flavor::SaBench,
        progress: !a.disable_tqdm,
    };
    Ok(Prepared {
        tok,
        spec,
        prompts,
        load,
        base: a.base().replace("://0.0.0.0", "://127.0.0.1"),
        artifacts,
        gpu,
    })
}

/// IX's warmups or SA's initial test (a failure ends the run as upstream's does), the profiler,
/// and the traffic lines.
pub(super) async fn before_main(
    a: &Args,
    p: &Prepared,
    clock: &Clock,
    stop: &Stopper,
) -> Result<(), Fail> {
    println!("Starting initial single prompt test run...");
    match a.flavor {
        Flavor::InferenceX if a.num_warmups > 0 => {
            println!("Warming up with {} requests...", a.num_warmups);
            p.load.warmup(a.num_warmups, clock, stop).await;
            println!("Warmup completed.");
        }
        Flavor::InferenceX => {}
        Flavor::SaBench => {
            let rec = p.load.once(&(p.load.body_of)(0), clock, stop).await;
            let sent = load::Sent {
                start_ns: rec.sent_ns,
                record: rec,
            };
            let o = load::outcome(0, Some(&sent), None);
            if !o.success {
                return Err(Fail::Run(format!(
                    "Initial test run failed - Please make sure benchmark arguments are \
                     correctly specified. Error: {}",
                    o.error
                )));
            }
            println!("Initial test run completed. Starting main benchmark run...");
        }
    }
    if a.profile {
        println!("Starting profiler...");
        let extra: Vec<(&str, Value)> = match a.flavor {
            Flavor::InferenceX => vec![
                ("num_steps", json!(1)),
                ("merge_profiles", json!(true)),
                ("profile_by_stage", json!(true)),
            ],
            Flavor::SaBench => Vec::new(),
        };
        let b = p
            .spec
            .body(&p.prompts.text(0), p.prompts[0].output_len, &extra);
        if profiler(&p.load, &p.base, "/start_profile", b, clock, stop).await {
            println!("Profiler started");
        }
    }
    let distribution = if a.burstiness == 1.0 {
        "Poisson process"
    } else {
        "Gamma distribution"
    };
    println!("Traffic request rate: {}", py_float(a.request_rate));
    println!(
        "Burstiness factor: {} ({distribution})",
        py_float(a.burstiness)
    );
    match a.max_concurrency {
        Some(c) => println!("Maximum request concurrency: {c}"),
        None => println!("Maximum request concurrency: None"),
    }
    Ok(())
}

/// What the measured phase leaves for the report.
pub(super) struct Measured {
    phase: Phase,
    /// `--server-metrics`' keys, appended to the result.
    extras: Vec<(String, Value)>,
    /// `--server-metrics`' report (for `--artifact-dir`).
    scrape: Option<crate::scrape::ScrapeReport>,
    /// `--gpu-telemetry`'s reads over the window.
    telemetry: Option<crate::telemetry::TelemetryRun>,
    window_file: Option<MeasurementWindow>,
    /// The side tasks that ended without their figures (said on stderr as they are joined).
    side_failures: Vec<SideTaskFailed>,
}

/// The measured requests, with sa-bench's slow-down around them, the server-metrics window
/// over them and the measurement window file opened at their start; then the profiler's stop.
pub(super) async fn main_phase(
    a: &Args,
    p: &Prepared,
    gpu: Option<Gpu>,
    clock: &Clock,
    stop: &Stopper,
) -> Measured {
    let load = &p.load;
    let slow = SlowDown::new(a);
    if let Some(sd) = &slow {
        let listed: Vec<String> = sd
            .servers
            .iter()
            .map(|b| format!("{b}/slow_down"))
            .collect();
        println!(
            "Enabling slow_down (forward_sleep_time={}s) on {}; will auto-disable after {}s.",
            py_float(a.slow_down_sleep_time),
            listed.join(", "),
            py_float(a.slow_down_wait_time)
        );
        sd.post(load, Some(a.slow_down_sleep_time), clock, stop)
            .await;
    }
    if a.flavor == Flavor::InferenceX {
        println!("Starting main benchmark run...");
    }
    let scraper = if a.server_metrics.is_empty() {
        None
    } else {
        let settings = ScrapeSettings {
            endpoints: a.server_metrics.clone(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            settle: Duration::from_secs_f64(a.server_metrics_settle),
            require_stable: false,
            stable_max: Duration::from_secs(30),
            acceptance: Default::default(),
            save_dir: None,
            slice: Duration::from_secs(1),
        };
        let s = Scraper::baseline(load.client.clone(), settings, stop.token()).await;
        Some(s.spawn(stop.token().clone(), None))
    };
    // The records are kept beside their outcomes only where something reads them after the run
    // (the artifacts and energy summary, sa-bench's peak throughput).
    let keep_records = p.artifacts.is_some() || gpu.is_some() || a.flavor == Flavor::SaBench;
    let sa_count = |text: &str| p.sa_tokens(text);
    let outcome_of = |i: usize, s: Option<&load::Sent>| {
        let count: Option<&dyn Fn(&str) -> u64> = match a.flavor {
            Flavor::SaBench => Some(&sa_count),
            Flavor::InferenceX => None,
        };
        load::outcome(p.prompts[i].prompt_len, s, count)
    };
    let gpu = gpu.map(|g| g.spawn(a));
    if let Some(g) = &gpu {
        // The window opens with a read.
        g.mark().await;
    }
    let window_file = MeasurementWindow::create(a);
    let on_open = |start: f64| {
        if let Some(w) = &window_file {
            w.write("running", start, None, None, None);
        }
    };
    // The slow-down is lifted after --slow-down-wait-time while the requests run, or at the end.
    let lift = async {
        if let Some(sd) = &slow {
            tokio::time::sleep(Duration::from_secs_f64(a.slow_down_wait_time.max(0.0))).await;
            println!(
                "slow_down auto-disabled after {}s ({} server(s)).",
                py_float(a.slow_down_wait_time),
                sd.servers.len()
            );
            sd.post(load, None, clock, stop).await;
        }
    };
    let (phase, lifted) = {
        let main = load.run(clock, stop, &on_open, &outcome_of, keep_records);
        tokio::pin!(main);
        tokio::pin!(lift);
        let mut lifted = false;
        loop {
            tokio::select! {
                p = &mut main => break (p, lifted),
                () = &mut lift, if !lifted => lifted = true,
            }
        }
    };
    // The last response is in: the window's closing read, before anything else waits.
    let mut side_failures = Vec::new();
    let telemetry = match gpu {
        Some(g) => side_task::keep(g.finish().await, &mut side_failures),
        None => None,
    };
    if let Some(sd) = &slow {
        if !lifted {
            sd.post(load, None, clock, stop).await;
        }
    }
    if a.profile {
        println!("Stopping profiler...");
        // Upstream's stop request: `model` is --model, and no ignore_eos.
        let stop_spec = BodySpec {
            model: a.model.clone(),
            ignore_eos: false,
            // The parts are the measured bodies', with their model.
            parts: None,
            ..p.spec.clone()
        };
        let b = stop_spec.body(&p.prompts.text(0), p.prompts[0].output_len, &[]);
        if profiler(load, &p.base, "/stop_profile", b, clock, stop).await {
            println!("Profiler stopped");
        }
    }
    let scrape = match scraper {
        Some(task) => {
            let last = phase.last_response.unwrap_or_else(Instant::now);
            side_task::keep(task.finish(last).await, &mut side_failures)
        }
        None => None,
    };
    for f in &side_failures {
        eprintln!("WARNING: {f}");
    }
    Measured {
        phase,
        extras: scrape.as_ref().map(spec_decode_keys).unwrap_or_default(),
        scrape,
        telemetry,
        window_file,
        side_failures,
    }
}

/// Upstream's figures from the measured requests: the console block (and the acceptance line
/// with `--server-metrics`), the result file and sa-bench's window, and what decides the exit.
pub(super) fn report(
    a: &Args,
    argv: &[String],
    p: &Prepared,
    m: Measured,
    epoch_ns: u64,
    stop: &Stopper,
) -> Finished {
    let Measured {
        mut phase,
        extras,
        scrape,
        telemetry,
        window_file,
        side_failures,
    } = m;
    let outcomes = std::mem::take(&mut phase.outcomes);
    let sa_count = |text: &str| p.sa_tokens(text);
    let selection = Selection::parse(&a.percentile_metrics, &a.metric_percentiles);
    let goodput = (!a.goodput.is_empty()).then(|| {
        let get = |k: &str| a.goodput.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        Goodput {
            ttft_ms: get("ttft"),
            tpot_ms: get("tpot"),
            e2el_ms: get("e2el"),
        }
    });
    let w = phase.window;
    let mut metrics = result::calculate(&outcomes, w.duration, &selection, goodput.as_ref());
    if a.flavor == Flavor::SaBench {
        metrics.peak_output_tokens_per_s = Some(load::peak_output_tokens_per_s(
            &outcomes,
            &phase.sent,
            &sa_count,
        ));
    }
    print!("{}", result::console_block(a.flavor, w.duration, &metrics));
    if !a.server_metrics.is_empty() {
        let al = extras
            .iter()
            .find(|(k, _)| k == "spec_decode_acceptance_length")
            .and_then(|(_, v)| v.as_f64());
        match al {
            Some(al) => println!("Acceptance length (server counters): {al:.4}"),
            None => println!(
                "Acceptance length (server counters): n/a (no speculative counters moved in the \
                 window)"
            ),
        }
    }
    let mut finished = Finished {
        flavor: a.flavor,
        stopped_by: stop.reason(),
        completed: metrics.completed,
        num_prompts: a.num_prompts,
        result_unwritten: false,
        zero_tpot: false,
        artifacts_unwritten: false,
        required_telemetry_lost: a.telemetry.require
            && side_failures.iter().any(|f| f.task == SideTask::Telemetry),
    };
    if finished.required_telemetry_lost {
        eprintln!(
            "specperf bench-serving: error: --require-gpu-telemetry, and the GPU telemetry task \
             ended without its reads"
        );
    }
    if p.artifacts.is_some() || telemetry.is_some() {
        let inputs = artifacts::Inputs {
            argv,
            phase: &phase,
            body_of: &p.load.body_of,
            epoch_ns,
            scrape,
            telemetry,
            stopped_by: finished.stopped_by,
            side_failures: &side_failures,
        };
        let summary = artifacts::summarize(a, &inputs);
        if let Some(e) = &summary.summary.energy {
            print!("{}", crate::report::energy_text(e));
        }
        if let Some(dir) = &p.artifacts {
            match artifacts::write(dir, &inputs, summary) {
                Ok(()) => eprintln!(
                    "specperf bench-serving: artifacts in {}",
                    dir.path().display()
                ),
                Err(e) => {
                    eprintln!("specperf bench-serving: error: --artifact-dir {e}");
                    finished.artifacts_unwritten = true;
                }
            }
        }
    }
    if a.save_result {
        let header = Header {
            date: crate::timefmt::local_compact_now(),
            backend: a.backend.clone(),
            model_id: a.model.clone(),
            tokenizer_id: a.tokenizer_id().to_owned(),
            best_of: a.best_of,
            num_prompts: a.num_prompts,
            metadata: a.metadata.clone(),
            request_rate: a.request_rate,
            burstiness: a.burstiness,
            max_concurrency: a.max_concurrency,
            reuse_http_connections: a.reuse_http_connections,
        };
        let text = result::result_json(
            a.flavor,
            &header,
            &w,
            &metrics,
            &outcomes,
            a.save_detailed,
            &extras,
        );
        let path = result_path(a, &header.date);
        let written = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| crate::fsutil::write_atomic(&path, text.as_bytes()));
        let (status, reason) = match written {
            Ok(()) => ("completed", None),
            Err(e) => {
                let reason = format!("cannot write the result {}: {e}", path.display());
                eprintln!("specperf bench-serving: error: {reason}");
                finished.result_unwritten = true;
                ("failed", Some(reason))
            }
        };
        if let Some(f) = &window_file {
            let end = (Some(w.end_unix), Some(w.duration));
            f.write(status, w.start_unix, end.0, end.1, reason.as_deref());
        }
        let tpot = metrics
            .stats
            .iter()
            .find(|(m, _)| *m == result::Metric::Tpot);
        if let (Some((_, s)), false, true) =
            (tpot, finished.result_unwritten, metrics.completed > 0)
        {
            if s.mean == 0.0 || s.median == 0.0 || s.percentiles.iter().any(|&(_, v)| v == 0.0) {
                eprintln!(
                    "specperf bench-serving: error: a TPOT statistic of 0 was written to {} (no \
                     request produced more than one token); InferenceX's process_result.py \
                     divides by it",
                    path.display()
                );
                finished.zero_tpot = true;
            }
        }
    }
    if let Some(reason) = finished.stopped_by {
        eprintln!(
            "specperf bench-serving: stopped ({}); the result covers the requests that ended",
            reason.as_str()
        );
    } else if finished.over_failure_threshold() && !finished.result_unwritten {
        eprintln!(
            "FAIL: request failure rate {:.1}% exceeds 5% threshold ({}/{} completed)",
            finished.failure_rate() * 100.0,
            finished.completed,
            finished.num_prompts
        );
    }
    finished
}

/// The run's deadline (`--timeout-seconds`), through the one stopper.
pub(super) fn arm_deadline(a: &Args, stop: &Stopper) {
    if let Some(secs) = a.deadline {
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            s.stop(StopReason::Deadline);
        });
    }
}
