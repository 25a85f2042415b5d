//! The metrics side task: scrapes every worker's `/metrics` beside the engine and turns counter
//! increases into acceptance length.
//!
//! A baseline scrape before the first request, one scrape per interval while the run goes (the
//! live AL, and the only poller of TensorRT-LLM's draining JSON queue), and a final scrape after
//! the last response plus a settle wait, because engines export their counters asynchronously.
//! It runs under the run's cancellation token: a stopped run skips the settle wait but still takes
//! its final scrape, so what was measured is kept.

pub mod acceptance;
mod drain;
mod error;
pub(crate) mod families;
pub mod prom;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Uri;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::client::{BodyCap, Client, Fetched};
use crate::debug::{self, step};
use crate::progress::Progress;
use crate::side_task::{self, SideTask, SideTaskFailed};
use acceptance::{
    evaluate, Acceptance, AcceptanceOptions, AcceptanceStatus, EndpointWindow, IterationTotals,
    Snapshot, SpecEngine,
};
pub use drain::{
    wait_for_drain, DrainError, DrainOutcome, DrainPoll, DrainReason, DrainSettings,
    EndpointReading, QueueGauge, POLL_TIMEOUT,
};
pub use error::{ScrapeError, ScrapeStatus};
use families::Collected;
use prom::Format;

/// The one `Accept` header we send: never ask for OpenMetrics (prometheus_client then escapes
/// colons in names unless told otherwise).
pub const ACCEPT: &str = "text/plain;version=0.0.4";

/// Largest metrics page accepted (after gzip), bytes.
pub const MAX_PAGE_BYTES: usize = 64 << 20;

/// The most the baseline scrape waits for an endpoint (less when `--metrics-timeout-seconds` is
/// less): it runs before the first request, and before any load a live engine answers in
/// milliseconds, so a hung metrics endpoint must not hold the start for the full timeout.
pub const BASELINE_TIMEOUT: Duration = Duration::from_secs(3);

/// Least time between the two scrapes that must agree for "stable" counters: the collection
/// cadence (0.333 s by default) is too short to show an engine's asynchronous export catching up.
const STABLE_GAP: Duration = Duration::from_secs(1);

const PAGE_CAP: BodyCap = BodyCap {
    bytes: MAX_PAGE_BYTES,
    name: "metrics page size cap",
};

/// How the side task scrapes.
#[derive(Clone, Debug)]
pub(crate) struct ScrapeSettings {
    /// Normalised endpoint URLs.
    pub(crate) endpoints: Vec<String>,
    /// Time between scrapes during the run (also the TensorRT-LLM JSON poll period).
    pub(crate) interval: Duration,
    /// Per-scrape timeout.
    pub(crate) timeout: Duration,
    /// Wait after the last response before the final scrape.
    pub(crate) settle: Duration,
    /// Take the baseline and final scrapes only once two consecutive scrapes one interval apart
    /// show identical counters (at most `stable_max`), as the AL gate does.
    pub(crate) require_stable: bool,
    /// Upper bound on waiting for stable counters.
    pub(crate) stable_max: Duration,
    /// Engine and k.
    pub(crate) acceptance: AcceptanceOptions,
    /// Where raw pages are saved (`endpoint<i>_before.txt` / `_after.txt`), if anywhere.
    pub(crate) save_dir: Option<PathBuf>,
    /// Timeslice length of the server-metrics export (`--slice-duration`).
    pub(crate) slice: Duration,
}

/// One point of the AL timeline (baseline to that scrape).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct AlPoint {
    /// Seconds since the baseline scrape.
    pub t_s: f64,
    /// AL over baseline..now (`None` while no drafts).
    pub acceptance_length: Option<f64>,
    /// Δdrafts over baseline..now.
    pub drafts: f64,
}

/// How one endpoint's scrapes went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointStatus {
    /// The endpoint.
    pub url: String,
    /// `ok`, or the error of the baseline scrape.
    pub before: ScrapeStatus,
    /// `ok`, or the error of the final scrape.
    pub after: ScrapeStatus,
    /// `prometheus`, `openmetrics` or `trtllm-json` (from the content type).
    pub format: Option<PageFormat>,
    /// Scrapes that failed during the run (live display only).
    pub failed_live_scrapes: u64,
}

/// The side task's result (read back from a shard's summary by `specperf merge`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScrapeReport {
    /// Acceptance over baseline..final.
    pub acceptance: Acceptance,
    /// Per-endpoint scrape outcomes.
    pub endpoints: Vec<EndpointStatus>,
    /// AL after each live scrape.
    pub timeline: Vec<AlPoint>,
    /// Seconds waited after the last response before the final scrape.
    pub settle_s: f64,
    /// Seconds from the baseline scrape to the final scrape.
    pub window_s: f64,
    /// False when stable counters were required and two identical consecutive scrapes did not
    /// come within the limit (the gate's `counters_not_settled`).
    pub counters_settled: bool,
    /// Every family of every endpoint over the window, for `server_metrics_export.{json,csv}`
    /// (not in `summary.json`: a merged run has none).
    #[serde(skip)]
    pub(crate) collected: Option<Collected>,
}

/// What an endpoint served, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PageFormat {
    /// Prometheus text format 0.0.4.
    #[serde(rename = "prometheus")]
    Prometheus,
    /// OpenMetrics 1.0 text.
    #[serde(rename = "openmetrics")]
    OpenMetrics,
    /// TensorRT-LLM's JSON iteration stats.
    #[serde(rename = "trtllm-json")]
    TrtllmJson,
}

impl PageFormat {
    /// The name as written in `summary.json` and `server_metrics_export.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            PageFormat::Prometheus => "prometheus",
            PageFormat::OpenMetrics => "openmetrics",
            PageFormat::TrtllmJson => "trtllm-json",
        }
    }
}

/// What one scrape of one endpoint produced.
enum Scraped {
    Page(Snapshot, PageFormat, prom::Page),
    Iterations(IterationTotals),
}

async fn scrape_one(
    client: &Client,
    url: &str,
    timeout: Duration,
) -> Result<(Scraped, String), ScrapeError> {
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| ScrapeError::Url(e.to_string()))?;
    let t0 = Instant::now();
    let fetched = client.get(uri, timeout, ACCEPT, PAGE_CAP).await;
    match &fetched {
        Ok(f) => step!(
            "scrape {url}: HTTP {}, {} bytes in {}",
            f.status,
            f.body.len(),
            debug::ms(t0.elapsed())
        ),
        Err(e) => step!("scrape {url}: {e} after {}", debug::ms(t0.elapsed())),
    }
    let fetched = fetched.map_err(|e| ScrapeError::Fetch(e.to_string()))?;
    // A page of a few hundred KB takes a millisecond or more to parse: off the runtime's threads,
    // so that no request's events wait behind it (bench-serving runs its requests on one).
    match tokio::task::spawn_blocking(move || interpret(fetched)).await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(ScrapeError::TaskFailed),
    }
}

/// What a fetched page holds.
fn interpret(fetched: Fetched) -> Result<(Scraped, String), ScrapeError> {
    let Fetched {
        status,
        content_type,
        body,
    } = fetched;
    if status != 200 {
        return Err(ScrapeError::Status(status));
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let ct = content_type.unwrap_or_default();
    let format = if ct.starts_with("application/json") {
        let mut it = IterationTotals::default();
        it.add_page(&body)?;
        return Ok((Scraped::Iterations(it), text));
    } else if ct.starts_with("application/openmetrics-text") {
        Format::OpenMetrics
    } else if ct.starts_with("text/plain") || ct.is_empty() {
        Format::Text
    } else {
        return Err(ScrapeError::ContentType(ct));
    };
    let page = prom::parse(&text, format).map_err(ScrapeError::Malformed)?;
    let name = match format {
        Format::Text => PageFormat::Prometheus,
        Format::OpenMetrics => PageFormat::OpenMetrics,
    };
    Ok((Scraped::Page(Snapshot::from_page(&page), name, page), text))
}

/// One scrape of each endpoint before a run: `Ok` with the engine families whose speculative
/// counters it carries (TensorRT-LLM for a JSON iteration-stats endpoint; empty when it parsed
/// without any), `Err` with the cause when it could not be read. Never drains a JSON queue into a
/// window (the baseline drains again).
pub(crate) async fn probe(
    client: &Client,
    urls: &[String],
    timeout: Duration,
) -> Vec<Result<BTreeSet<SpecEngine>, ScrapeError>> {
    let mut out = Vec::with_capacity(urls.len());
    for u in urls {
        out.push(scrape_one(client, u, timeout).await.map(|(s, _)| match s {
            Scraped::Page(snap, _, _) => snap.engines(),
            Scraped::Iterations(_) => BTreeSet::from([SpecEngine::Trtllm]),
        }));
    }
    out
}

/// Per-endpoint state kept by the task.
struct Endpoint {
    url: String,
    baseline: Result<Snapshot, ScrapeError>,
    last: Result<Snapshot, ScrapeError>,
    /// JSON iteration stats summed since the baseline poll (which is drained and discarded).
    iterations: Option<IterationTotals>,
    format: Option<PageFormat>,
    failed_live: u64,
    /// The baseline failed: not scraped again (see [`ScrapeError::BaselineFailed`]).
    skip: bool,
}

impl Endpoint {
    fn window(&self) -> EndpointWindow {
        EndpointWindow {
            url: self.url.clone(),
            before: self.baseline.clone(),
            after: self.last.clone(),
            iterations: self.iterations,
        }
    }
}

/// The running side task.
pub(crate) struct Scraper {
    settings: ScrapeSettings,
    client: Client,
    endpoints: Vec<Endpoint>,
    started: Instant,
    timeline: Vec<AlPoint>,
    last_texts: Vec<Option<String>>,
    unsettled: bool,
    /// The live AL is absent only because no request has finished yet (llama.cpp).
    live_waiting: bool,
    collected: Collected,
}

/// Handle on the spawned task: [`ScrapeTask::finish`] says the last response is in.
pub(crate) struct ScrapeTask {
    finish: oneshot::Sender<Instant>,
    handle: tokio::task::JoinHandle<ScrapeReport>,
}

impl ScrapeTask {
    /// Signals that the last response completed at `last_response` and waits for the report,
    /// or for why the task ended without one.
    pub(crate) async fn finish(
        self,
        last_response: Instant,
    ) -> Result<ScrapeReport, SideTaskFailed> {
        let _ = self.finish.send(last_response);
        side_task::join(SideTask::Scrape, self.handle).await
    }
}

impl Scraper {
    /// Takes the baseline scrape of every endpoint (stable if required).
    pub(crate) async fn baseline(
        client: Client,
        settings: ScrapeSettings,
        cancel: &CancellationToken,
    ) -> Scraper {
        let collected = Collected::new(
            &settings.endpoints,
            u64::try_from(settings.slice.as_nanos()).unwrap_or(u64::MAX),
        );
        let mut s = Scraper {
            endpoints: settings
                .endpoints
                .iter()
                .map(|u| Endpoint {
                    url: u.clone(),
                    baseline: Err(ScrapeError::NotScraped),
                    last: Err(ScrapeError::NotScraped),
                    iterations: None,
                    format: None,
                    failed_live: 0,
                    skip: false,
                })
                .collect(),
            settings,
            client,
            started: Instant::now(),
            timeline: Vec::new(),
            last_texts: Vec::new(),
            unsettled: false,
            live_waiting: false,
            collected,
        };
        let stable = s.settings.require_stable;
        let timeout = s.settings.timeout.min(BASELINE_TIMEOUT);
        let pages = s.scrape_all(stable, true, timeout, cancel).await;
        for (ep, r) in s.endpoints.iter_mut().zip(pages) {
            ep.skip = r.is_err();
            ep.baseline = r.clone();
            ep.last = r;
        }
        s.save_pages("before");
        s.started = Instant::now();
        s.collected.start(unix_ns());
        s
    }

    /// Whether any endpoint showed speculative counters at the baseline (a settle wait is
    /// pointless otherwise).
    fn has_counters(&self) -> bool {
        self.endpoints.iter().any(|e| {
            e.iterations.is_some() || e.baseline.as_ref().is_ok_and(|b| !b.values.is_empty())
        })
    }

    /// Runs the live loop until `finish`, then settles and takes the final scrape.
    pub(crate) fn spawn(
        mut self,
        cancel: CancellationToken,
        progress: Option<Arc<watch::Sender<Progress>>>,
    ) -> ScrapeTask {
        let (tx, mut rx) = oneshot::channel::<Instant>();
        let handle = tokio::spawn(async move {
            side_task::panic_if_asked(SideTask::Scrape);
            let mut tick = tokio::time::interval(self.settings.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            let last_response = loop {
                tokio::select! {
                    r = &mut rx => break r.unwrap_or_else(|_| Instant::now()),
                    _ = tick.tick() => {
                        self.live_scrape(&cancel).await;
                        if let Some(p) = &progress {
                            let al = self.timeline.last().and_then(|t| t.acceptance_length);
                            let waiting = self.live_waiting;
                            p.send_modify(|p| {
                                p.acceptance_length = al;
                                p.acceptance_waiting = waiting;
                            });
                        }
                    }
                }
            };
            // Settle: keep polling (TensorRT-LLM's queue drains) until the wait is over.
            let settle_until = last_response + self.settings.settle;
            let settle = !cancel.is_cancelled() && self.has_counters();
            if settle {
                while Instant::now() < settle_until && !cancel.is_cancelled() {
                    let wait = self.settings.interval.min(settle_until - Instant::now());
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => {}
                    }
                    if self.iterations_polled() {
                        self.live_scrape(&cancel).await;
                    }
                }
            }
            let settle_s = if settle {
                last_response.elapsed().as_secs_f64()
            } else {
                0.0
            };
            self.final_report(&cancel, settle_s).await
        });
        ScrapeTask { finish: tx, handle }
    }

    fn iterations_polled(&self) -> bool {
        self.endpoints.iter().any(|e| e.iterations.is_some())
    }

    async fn live_scrape(&mut self, cancel: &CancellationToken) {
        let timeout = self.settings.timeout;
        let pages = self.scrape_all(false, false, timeout, cancel).await;
        for (ep, r) in self.endpoints.iter_mut().zip(pages) {
            match r {
                Ok(s) => ep.last = Ok(s),
                Err(_) if ep.skip => {}
                Err(_) => ep.failed_live += 1,
            }
        }
        let a = self.evaluate();
        // llama.cpp adds to its counters only when a request finishes: no drafts yet is expected.
        self.live_waiting =
            a.status == AcceptanceStatus::NoData && a.engine == SpecEngine::Llamacpp;
        self.timeline.push(AlPoint {
            t_s: self.started.elapsed().as_secs_f64(),
            acceptance_length: a
                .numbers
                .acceptance_length
                .filter(|_| a.status == AcceptanceStatus::Ok),
            drafts: a.numbers.drafts,
        });
    }

    fn evaluate(&self) -> Acceptance {
        let windows: Vec<EndpointWindow> = self.endpoints.iter().map(Endpoint::window).collect();
        evaluate(&windows, self.settings.acceptance)
    }

    async fn final_report(mut self, cancel: &CancellationToken, settle_s: f64) -> ScrapeReport {
        // A stopped run takes one quick final scrape; a finished one may wait for stability.
        let stable = self.settings.require_stable && !cancel.is_cancelled();
        let never = CancellationToken::new();
        let timeout = self.settings.timeout;
        let pages = self
            .scrape_all(stable, false, timeout, if stable { cancel } else { &never })
            .await;
        for (ep, r) in self.endpoints.iter_mut().zip(pages) {
            ep.last = r;
        }
        self.save_pages("after");
        self.collected.end(unix_ns());
        let acceptance = self.evaluate();
        let endpoints = self
            .endpoints
            .iter()
            .map(|e| EndpointStatus {
                url: e.url.clone(),
                before: ScrapeStatus::of(&e.baseline),
                after: ScrapeStatus::of(&e.last),
                format: e.format,
                failed_live_scrapes: e.failed_live,
            })
            .collect();
        ScrapeReport {
            acceptance,
            endpoints,
            timeline: self.timeline,
            settle_s,
            window_s: self.started.elapsed().as_secs_f64(),
            counters_settled: !self.unsettled,
            collected: Some(self.collected),
        }
    }

    /// Scrapes every endpoint, repeating (with `stable`) until two consecutive rounds one
    /// interval apart agree on the counters, for at most `stable_max`. JSON endpoints add what
    /// they drained to the window's totals, except with `discard_json` (the baseline). Each
    /// scrape waits at most `timeout`.
    async fn scrape_all(
        &mut self,
        stable: bool,
        discard_json: bool,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Vec<Result<Snapshot, ScrapeError>> {
        let deadline = Instant::now() + self.settings.stable_max;
        let mut previous: Option<Vec<Result<Snapshot, ScrapeError>>> = None;
        loop {
            let snaps = self.round(discard_json, timeout).await;
            if !stable {
                return snaps;
            }
            if let Some(prev) = &previous {
                let same = prev.iter().zip(&snaps).all(|(a, b)| match (a, b) {
                    (Ok(a), Ok(b)) => a.counters_equal(b),
                    (Err(_), Err(_)) => true,
                    _ => false,
                });
                if same || Instant::now() >= deadline || cancel.is_cancelled() {
                    self.unsettled |= !same;
                    return snaps;
                }
            }
            previous = Some(snaps);
            tokio::select! {
                _ = tokio::time::sleep(self.settings.interval.max(STABLE_GAP)) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }

    /// One concurrent scrape of every endpoint whose baseline was read; keeps the raw texts for
    /// saving.
    async fn round(
        &mut self,
        discard_json: bool,
        timeout: Duration,
    ) -> Vec<Result<Snapshot, ScrapeError>> {
        let mut set = tokio::task::JoinSet::new();
        let mut out: Vec<Result<Snapshot, ScrapeError>> =
            vec![Err(ScrapeError::TaskFailed); self.endpoints.len()];
        for (i, ep) in self.endpoints.iter().enumerate() {
            if ep.skip {
                out[i] = Err(ScrapeError::BaselineFailed);
                continue;
            }
            let (client, url) = (self.client.clone(), ep.url.clone());
            set.spawn(async move {
                let (at, t0) = (unix_ns(), Instant::now());
                let r = scrape_one(&client, &url, timeout).await;
                (i, at, t0.elapsed(), r)
            });
        }
        self.last_texts = vec![None; self.endpoints.len()];
        while let Some(joined) = set.join_next().await {
            let Ok((i, at, took, result)) = joined else {
                continue;
            };
            let ep = &mut self.endpoints[i];
            out[i] = match result {
                Err(e) => {
                    self.collected.failed(i);
                    Err(e)
                }
                Ok((Scraped::Page(snap, format, page), text)) => {
                    ep.format = Some(format);
                    let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                    self.collected.page(i, at, took, &text, &page);
                    self.last_texts[i] = Some(text);
                    Ok(snap)
                }
                Ok((Scraped::Iterations(it), text)) => {
                    ep.format = Some(PageFormat::TrtllmJson);
                    let totals = ep.iterations.get_or_insert_with(IterationTotals::default);
                    if !discard_json {
                        totals.add(&it);
                    }
                    self.last_texts[i] = Some(text);
                    Ok(Snapshot::default())
                }
            };
        }
        out
    }

    /// Saves the last round's raw pages as `server_metrics/endpoint<i>_<when>.txt`.
    fn save_pages(&self, when: &str) {
        let Some(dir) = &self.settings.save_dir else {
            return;
        };
        let sub = dir.join("server_metrics");
        for (i, text) in self.last_texts.iter().enumerate() {
            if let Some(text) = text {
                // Raw pages are a convenience; a failed write never costs the measurement.
                let _ = std::fs::create_dir_all(&sub).and_then(|()| {
                    std::fs::write(sub.join(format!("endpoint{i}_{when}.txt")), text)
                });
            }
        }
    }
}

/// Wall-clock nanoseconds since the Unix epoch (the export's `*_ns` fields; the telemetry's
/// read stamps).
pub(crate) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
