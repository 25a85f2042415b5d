//! The drain wait: polls every engine's (and a frontend's) `/metrics` page until no request is
//! running or queued anywhere, so the next measurement does not start behind the last one's
//! backlog. `specperf drain` runs it on its own; a sweep runs it between points.
//!
//! Each poll fetches every endpoint with the scraper's bounded GET and reads the queue gauges of
//! the engines we know (table [`QueueGauge`]), summed over every label set (engines, models). The
//! servers count as drained after `idle_polls` consecutive polls in which every endpoint was read,
//! showed at least one queue gauge and summed to zero. A failed read resets the count (an engine
//! that does not answer is not known to be idle). An endpoint whose page carries none of the
//! gauges is never taken as idle: when it is the only thing keeping the count from advancing for
//! as many polls as would declare the servers drained, the wait ends with
//! [`DrainReason::NoQueueGauges`] rather than waiting out `max_wait` or (as a missing metric
//! counted as zero would) reporting a backlog it cannot see as gone.
//!
//! It stops through the run's one cancellation path (the [`Stopper`]): SIGINT or SIGTERM ends the
//! wait at once with [`DrainReason::Cancelled`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::HeaderMap;
use serde::{Deserialize, Serialize};

use super::prom::Page;
use super::{scrape_one, ScrapeError, Scraped};
use crate::client::{Client, ClientError, ClientOptions, ConnectionReuse, HttpVersion, Timeouts};
use crate::debug::step;
use crate::stop::{StopReason, Stopper};

/// The most one poll waits for an endpoint (less when the wait's deadline is nearer), as
/// InferenceX's loop does: a hung endpoint costs one poll, not the whole wait.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(10);

/// Floor of a poll's timeout near the deadline, so the last poll can still be answered.
const MIN_POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// How the wait polls. [`Default`] gives InferenceX's values: every 10 s, 3 idle polls, 1800 s.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainSettings {
    /// Metrics URLs, normalised (`http://host:port/metrics`): the frontend's and every worker's.
    pub endpoints: Vec<String>,
    /// Time between the starts of two polls.
    pub poll_interval: Duration,
    /// Consecutive idle polls that make the servers drained (at least 1).
    pub idle_polls: u32,
    /// Longest the wait lasts; the last poll is taken at this deadline.
    pub max_wait: Duration,
}

impl Default for DrainSettings {
    fn default() -> Self {
        DrainSettings {
            endpoints: Vec::new(),
            poll_interval: Duration::from_secs(10),
            idle_polls: 3,
            max_wait: Duration::from_secs(1800),
        }
    }
}

/// Whether a gauge counts requests being processed or requests waiting for a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Running,
    Waiting,
}

/// A queue gauge of one engine, serialised as its metric name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QueueGauge {
    /// vLLM: requests in model execution batches.
    #[serde(rename = "vllm:num_requests_running")]
    VllmRunning,
    /// vLLM: requests waiting to be processed.
    #[serde(rename = "vllm:num_requests_waiting")]
    VllmWaiting,
    /// SGLang (`--enable-metrics`): running requests.
    #[serde(rename = "sglang:num_running_reqs")]
    SglangRunning,
    /// SGLang: requests in the waiting queue.
    #[serde(rename = "sglang:num_queue_reqs")]
    SglangQueued,
    /// TensorRT-LLM (`/prometheus/metrics`): active requests.
    #[serde(rename = "trtllm_num_requests_running")]
    TrtllmRunning,
    /// TensorRT-LLM: queued requests.
    #[serde(rename = "trtllm_num_requests_waiting")]
    TrtllmWaiting,
    /// Dynamo frontend: requests from HTTP handler entry to response completion.
    #[serde(rename = "dynamo_frontend_active_requests")]
    DynamoActive,
    /// Dynamo frontend, older releases: requests going to the engine. Read only when the page
    /// has no `dynamo_frontend_active_requests`, which names the same count more clearly.
    #[serde(rename = "dynamo_frontend_inflight_requests")]
    DynamoInflight,
    /// Dynamo frontend: requests waiting in the HTTP queue before their first response (they may
    /// be inside the active count too: the sum can overstate, never hide, a backlog).
    #[serde(rename = "dynamo_frontend_queued_requests")]
    DynamoQueued,
    /// Dynamo worker (each worker's system `/metrics`, prefill and decode alike): requests its
    /// endpoints are handling. A prefill worker and a decode worker that has served nothing yet
    /// carry no engine gauge, only this one.
    #[serde(rename = "dynamo_component_inflight_requests")]
    DynamoWorkerInflight,
    /// llama.cpp (`--metrics`): slots processing a request.
    #[serde(rename = "llamacpp:requests_processing")]
    LlamacppProcessing,
    /// llama.cpp: requests deferred for lack of a free slot.
    #[serde(rename = "llamacpp:requests_deferred")]
    LlamacppDeferred,
}

impl QueueGauge {
    /// Every known gauge, in the order pages are searched.
    pub const ALL: [QueueGauge; 12] = [
        QueueGauge::VllmRunning,
        QueueGauge::VllmWaiting,
        QueueGauge::SglangRunning,
        QueueGauge::SglangQueued,
        QueueGauge::TrtllmRunning,
        QueueGauge::TrtllmWaiting,
        QueueGauge::DynamoActive,
        QueueGauge::DynamoInflight,
        QueueGauge::DynamoQueued,
        QueueGauge::DynamoWorkerInflight,
        QueueGauge::LlamacppProcessing,
        QueueGauge::LlamacppDeferred,
    ];

    /// The metric name as the engine exports it.
    pub fn name(self) -> &'static str {
        match self {
            QueueGauge::VllmRunning => "vllm:num_requests_running",
            QueueGauge::VllmWaiting => "vllm:num_requests_waiting",
            QueueGauge::SglangRunning => "sglang:num_running_reqs",
            QueueGauge::SglangQueued => "sglang:num_queue_reqs",
            QueueGauge::TrtllmRunning => "trtllm_num_requests_running",
            QueueGauge::TrtllmWaiting => "trtllm_num_requests_waiting",
            QueueGauge::DynamoActive => "dynamo_frontend_active_requests",
            QueueGauge::DynamoInflight => "dynamo_frontend_inflight_requests",
            QueueGauge::DynamoQueued => "dynamo_frontend_queued_requests",
            QueueGauge::DynamoWorkerInflight => "dynamo_component_inflight_requests",
            QueueGauge::LlamacppProcessing => "llamacpp:requests_processing",
            QueueGauge::LlamacppDeferred => "llamacpp:requests_deferred",
        }
    }

    fn role(self) -> Role {
        match self {
            QueueGauge::VllmRunning
            | QueueGauge::SglangRunning
            | QueueGauge::TrtllmRunning
            | QueueGauge::DynamoActive
            | QueueGauge::DynamoInflight
            | QueueGauge::DynamoWorkerInflight
            | QueueGauge::LlamacppProcessing => Role::Running,
            QueueGauge::VllmWaiting
            | QueueGauge::SglangQueued
            | QueueGauge::TrtllmWaiting
            | QueueGauge::DynamoQueued
            | QueueGauge::LlamacppDeferred => Role::Waiting,
        }
    }

    /// The gauge that replaces this one when both are on a page.
    fn superseded_by(self) -> Option<QueueGauge> {
        match self {
            QueueGauge::DynamoInflight => Some(QueueGauge::DynamoActive),
            _ => None,
        }
    }

    fn from_name(name: &str) -> Option<QueueGauge> {
        QueueGauge::ALL.into_iter().find(|g| g.name() == name)
    }
}

impl fmt::Display for QueueGauge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one endpoint gave no reading in a poll.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Scrape(#[from] ScrapeError),
    /// A negative, NaN or infinite queue gauge: not a count, so not taken as zero.
    #[error("{gauge} has the value {value}, which is not a request count")]
    NotACount { gauge: QueueGauge, value: f64 },
}

/// The queue gauges of one page, summed over every label set.
#[derive(Clone, Debug, Default, PartialEq)]
struct QueueReading {
    running: u64,
    waiting: u64,
    gauges: Vec<QueueGauge>,
}

/// Reads the known queue gauges off a page. Fractional sums are rounded up: a gauge above zero
/// is a request somewhere.
fn read_queue(page: &Page) -> Result<QueueReading, ReadError> {
    let mut sums: BTreeMap<QueueGauge, f64> = BTreeMap::new();
    for s in &page.samples {
        let Some(gauge) = QueueGauge::from_name(&s.name) else {
            continue;
        };
        if !(s.value.is_finite() && s.value >= 0.0) {
            return Err(ReadError::NotACount {
                gauge,
                value: s.value,
            });
        }
        *sums.entry(gauge).or_default() += s.value;
    }
    let present: Vec<QueueGauge> = sums.keys().copied().collect();
    sums.retain(|g, _| !g.superseded_by().is_some_and(|o| present.contains(&o)));
    let mut r = QueueReading::default();
    for (g, v) in sums {
        // Sums of counts below 2^53 are exact; the cast saturates past u64::MAX.
        let n = v.ceil() as u64;
        match g.role() {
            Role::Running => r.running = r.running.saturating_add(n),
            Role::Waiting => r.waiting = r.waiting.saturating_add(n),
        }
        r.gauges.push(g);
    }
    Ok(r)
}

/// What one endpoint showed at its last poll.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointReading {
    /// The metrics URL.
    pub url: String,
    /// Requests being processed (sum of the running gauges); `None` when the page could not be
    /// read or carries no queue gauge.
    pub running: Option<u64>,
    /// Requests queued (sum of the waiting gauges); `None` as for `running`.
    pub waiting: Option<u64>,
    /// The known queue gauges the page carries (empty: none of them, or not read).
    pub gauges: Vec<QueueGauge>,
    /// Why the page could not be read, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl EndpointReading {
    fn unread(url: &str) -> EndpointReading {
        EndpointReading {
            url: url.to_owned(),
            running: None,
            waiting: None,
            gauges: Vec::new(),
            error: Some("not polled".into()),
        }
    }

    fn of(url: &str, r: Result<QueueReading, ReadError>) -> EndpointReading {
        match r {
            Ok(q) if q.gauges.is_empty() => EndpointReading {
                url: url.to_owned(),
                running: None,
                waiting: None,
                gauges: Vec::new(),
                error: None,
            },
            Ok(q) => EndpointReading {
                url: url.to_owned(),
                running: Some(q.running),
                waiting: Some(q.waiting),
                gauges: q.gauges,
                error: None,
            },
            Err(e) => EndpointReading {
                url: url.to_owned(),
                running: None,
                waiting: None,
                gauges: Vec::new(),
                error: Some(e.to_string()),
            },
        }
    }

    /// Read, but none of the known queue gauges on the page.
    fn blind(&self) -> bool {
        self.error.is_none() && self.gauges.is_empty()
    }
}

/// Why the wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainReason {
    /// Every endpoint showed zero running and zero waiting for the required consecutive polls.
    Drained,
    /// `max_wait` passed first.
    Timeout,
    /// An endpoint's page was read but carries none of the known queue gauges, and nothing else
    /// stood in the way of counting the servers idle: it cannot be told to be idle.
    NoQueueGauges,
    /// Stopped through the cancellation path (SIGINT, SIGTERM, the caller's deadline).
    Cancelled,
}

/// How the wait ended (written as JSON by `specperf drain --output`, and later beside a sweep's
/// points).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DrainOutcome {
    /// True only for [`DrainReason::Drained`].
    pub drained: bool,
    /// Why the wait ended.
    pub reason: DrainReason,
    /// Seconds from the first poll's start to the end of the wait.
    pub waited_s: f64,
    /// Polls taken.
    pub polls: u64,
    /// Consecutive idle polls required.
    pub idle_polls_required: u32,
    /// Seconds between polls.
    pub poll_interval_s: f64,
    /// The longest the wait could last, seconds.
    pub max_wait_s: f64,
    /// The most requests seen at once (running + waiting over every endpoint, one poll).
    pub max_queue: u64,
    /// Each endpoint at the last poll.
    pub endpoints: Vec<EndpointReading>,
    /// What stopped a cancelled wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
}

impl DrainOutcome {
    /// Running and waiting summed over the endpoints read at the last poll.
    fn totals(&self) -> (u64, u64) {
        totals(&self.endpoints)
    }

    /// The line printed when the wait ends.
    pub fn summary_line(&self) -> String {
        let (running, waiting) = self.totals();
        match self.reason {
            DrainReason::Drained => format!(
                "drain: drained after {:.1} s ({} polls, the last {} idle; at most {} requests \
                 running or waiting at once)",
                self.waited_s, self.polls, self.idle_polls_required, self.max_queue
            ),
            DrainReason::Timeout => {
                let mut line = format!(
                    "drain: not drained within {} s (--max-wait-seconds): running {running}, \
                     waiting {waiting} at the last poll",
                    self.max_wait_s
                );
                for e in &self.endpoints {
                    if let Some(err) = &e.error {
                        line.push_str(&format!("; {}: {err}", e.url));
                    }
                }
                line
            }
            DrainReason::NoQueueGauges => {
                let urls: Vec<&str> = self
                    .endpoints
                    .iter()
                    .filter(|e| e.blind())
                    .map(|e| e.url.as_str())
                    .collect();
                format!(
                    "drain: {} carries none of the known queue gauges (vLLM, SGLang, TensorRT-LLM, \
                     Dynamo frontend, llama.cpp), so it cannot be seen to be idle: point --url or \
                     --server-metrics at the engine's Prometheus page (TensorRT-LLM serves it at \
                     /prometheus/metrics; SGLang needs --enable-metrics, llama-server --metrics)",
                    urls.join(", ")
                )
            }
            DrainReason::Cancelled => format!(
                "drain: stopped ({}) after {:.1} s and {} polls: running {running}, waiting \
                 {waiting} at the last poll",
                self.stopped_by.map_or("cancelled", StopReason::as_str),
                self.waited_s,
                self.polls
            ),
        }
    }

    /// Writes the outcome as pretty JSON to `path`, atomically.
    pub fn write_json(&self, path: &Path) -> Result<(), DrainError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|e| DrainError::Write {
            path: path.to_owned(),
            source: std::io::Error::other(e),
        })?;
        text.push('\n');
        crate::fsutil::write_atomic(path, text.as_bytes()).map_err(|source| DrainError::Write {
            path: path.to_owned(),
            source,
        })
    }
}

/// One poll, as the caller's progress callback sees it.
#[derive(Clone, Debug)]
pub struct DrainPoll {
    /// 1-based poll number.
    pub poll: u64,
    /// Seconds since the wait began.
    pub waited_s: f64,
    /// Consecutive idle polls so far, this one included.
    pub idle_polls: u32,
    /// Consecutive idle polls required.
    pub idle_polls_required: u32,
    /// Each endpoint at this poll.
    pub endpoints: Vec<EndpointReading>,
}

impl fmt::Display for DrainPoll {
    /// `drain: poll 4, running 3, waiting 12 (2 endpoints), idle 0/3, 30.0 s`, then each
    /// endpoint that could not be read or has no queue gauge.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (running, waiting) = totals(&self.endpoints);
        let n = self.endpoints.len();
        write!(
            f,
            "drain: poll {}, running {running}, waiting {waiting} ({n} endpoint{}), idle {}/{}, \
             {:.1} s",
            self.poll,
            if n == 1 { "" } else { "s" },
            self.idle_polls,
            self.idle_polls_required,
            self.waited_s
        )?;
        for e in &self.endpoints {
            if let Some(err) = &e.error {
                write!(f, "; {}: {err} (idle count reset)", e.url)?;
            } else if e.blind() {
                write!(f, "; {}: no queue gauge on the page", e.url)?;
            }
        }
        Ok(())
    }
}

fn totals(endpoints: &[EndpointReading]) -> (u64, u64) {
    endpoints.iter().fold((0, 0), |(r, w), e| {
        (
            r.saturating_add(e.running.unwrap_or(0)),
            w.saturating_add(e.waiting.unwrap_or(0)),
        )
    })
}

/// Why the wait could not run.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    /// Nothing to poll.
    #[error(
        "no endpoint to poll: give the frontend (--url) and/or each worker's metrics page \
         (--server-metrics)"
    )]
    NoEndpoints,
    /// `idle_polls` is 0: the servers would count as drained without being looked at.
    #[error("the number of consecutive idle polls must be at least 1")]
    NoIdlePolls,
    /// A zero poll interval would poll the servers in a busy loop.
    #[error("the poll interval must be longer than zero")]
    ZeroInterval,
    /// The HTTP client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(#[from] ClientError),
    /// The outcome file could not be written.
    #[error("cannot write the drain outcome to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl DrainError {
    /// True for settings that can never work (no endpoint, zero idle polls or interval).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DrainError::NoEndpoints | DrainError::NoIdlePolls | DrainError::ZeroInterval
        )
    }
}

/// What one poll says about the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PollState {
    /// Every endpoint read and carrying gauges, all zero.
    Idle,
    /// Some request running or waiting.
    Busy,
    /// An endpoint could not be read (nothing else busy).
    Failed,
    /// All read, nothing busy, but some endpoint without queue gauges.
    Blind,
}

fn classify(readings: &[EndpointReading]) -> PollState {
    let (running, waiting) = totals(readings);
    if running > 0 || waiting > 0 {
        PollState::Busy
    } else if readings.iter().any(|e| e.error.is_some()) {
        PollState::Failed
    } else if readings.iter().any(EndpointReading::blind) {
        PollState::Blind
    } else {
        PollState::Idle
    }
}

/// Consecutive-poll counting: idle polls to drained, blind polls to "no queue gauges".
#[derive(Clone, Copy, Debug)]
struct Counter {
    required: u32,
    idle: u32,
    blind: u32,
}

impl Counter {
    fn new(required: u32) -> Counter {
        Counter {
            required,
            idle: 0,
            blind: 0,
        }
    }

    /// Counts one poll; the reason to stop, once there is one.
    fn observe(&mut self, s: PollState) -> Option<DrainReason> {
        match s {
            PollState::Idle => {
                self.idle += 1;
                self.blind = 0;
            }
            PollState::Blind => {
                self.blind += 1;
                self.idle = 0;
            }
            PollState::Busy | PollState::Failed => {
                self.idle = 0;
                self.blind = 0;
            }
        }
        if self.idle >= self.required {
            Some(DrainReason::Drained)
        } else if self.blind >= self.required {
            Some(DrainReason::NoQueueGauges)
        } else {
            None
        }
    }
}

/// The client the standalone wait polls with: no headers (a metrics page needs no API key),
/// every limit at [`POLL_TIMEOUT`].
fn client_options() -> ClientOptions {
    ClientOptions {
        http: HttpVersion::Auto,
        reuse: ConnectionReuse::Pooled,
        rate_limit_retries: 0,
        timeouts: Timeouts {
            connect: POLL_TIMEOUT,
            first_token: POLL_TIMEOUT,
            idle: POLL_TIMEOUT,
            total: POLL_TIMEOUT,
        },
        headers: HeaderMap::new(),
        origin: None,
        insecure: false,
        ca_file: None,
        max_event_bytes: 1 << 20,
        max_body_bytes: 1 << 20,
    }
}

/// Waits until the servers behind `settings.endpoints` are drained (see the module docs), calling
/// `on_poll` after every poll. Ends early, with [`DrainReason::Cancelled`], when `stop` is
/// triggered.
pub async fn wait_for_drain(
    settings: &DrainSettings,
    stop: &Stopper,
    on_poll: impl FnMut(&DrainPoll),
) -> Result<DrainOutcome, DrainError> {
    let client = Client::new(client_options())?;
    wait_with(&client, settings, stop, on_poll).await
}

/// [`wait_for_drain`] with the caller's client (a sweep polls with the run's).
pub(crate) async fn wait_with(
    client: &Client,
    settings: &DrainSettings,
    stop: &Stopper,
    mut on_poll: impl FnMut(&DrainPoll),
) -> Result<DrainOutcome, DrainError> {
    if settings.endpoints.is_empty() {
        return Err(DrainError::NoEndpoints);
    }
    if settings.idle_polls == 0 {
        return Err(DrainError::NoIdlePolls);
    }
    if settings.poll_interval.is_zero() {
        return Err(DrainError::ZeroInterval);
    }
    let cancel = stop.token();
    let started = Instant::now();
    let deadline = started + settings.max_wait;
    let mut out = DrainOutcome {
        drained: false,
        reason: DrainReason::Cancelled,
        waited_s: 0.0,
        polls: 0,
        idle_polls_required: settings.idle_polls,
        poll_interval_s: settings.poll_interval.as_secs_f64(),
        max_wait_s: settings.max_wait.as_secs_f64(),
        max_queue: 0,
        endpoints: settings
            .endpoints
            .iter()
            .map(|u| EndpointReading::unread(u))
            .collect(),
        stopped_by: None,
    };
    let mut counter = Counter::new(settings.idle_polls);
    let reason = loop {
        let timeout = POLL_TIMEOUT
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(MIN_POLL_TIMEOUT);
        let readings = tokio::select! {
            r = poll_all(client, &settings.endpoints, timeout) => r,
            _ = cancel.cancelled() => break DrainReason::Cancelled,
        };
        out.polls += 1;
        let (running, waiting) = totals(&readings);
        step!(
            "drain poll {}: {running} running, {waiting} waiting over {} endpoint(s), {} s waited",
            out.polls,
            readings.len(),
            started.elapsed().as_secs()
        );
        out.max_queue = out.max_queue.max(running.saturating_add(waiting));
        let verdict = counter.observe(classify(&readings));
        out.endpoints = readings;
        on_poll(&DrainPoll {
            poll: out.polls,
            waited_s: started.elapsed().as_secs_f64(),
            idle_polls: counter.idle,
            idle_polls_required: settings.idle_polls,
            endpoints: out.endpoints.clone(),
        });
        if let Some(r) = verdict {
            break r;
        }
        let now = Instant::now();
        if now >= deadline {
            break DrainReason::Timeout;
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.poll_interval.min(deadline - now)) => {}
            _ = cancel.cancelled() => break DrainReason::Cancelled,
        }
    };
    out.reason = reason;
    out.drained = reason == DrainReason::Drained;
    out.waited_s = started.elapsed().as_secs_f64();
    if reason == DrainReason::Cancelled {
        out.stopped_by = stop.reason();
    }
    Ok(out)
}

/// One concurrent read of every endpoint, in the given order.
async fn poll_all(client: &Client, urls: &[String], timeout: Duration) -> Vec<EndpointReading> {
    let mut set = tokio::task::JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (client, url) = (client.clone(), url.clone());
        set.spawn(async move {
            let r = match scrape_one(&client, &url, timeout).await {
                Ok((Scraped::Page(_, _, page), _)) => read_queue(&page),
                // TensorRT-LLM's JSON iteration stats: not a gauge page (its Prometheus page is).
                Ok((Scraped::Iterations(_), _)) => Ok(QueueReading::default()),
                Err(e) => Err(ReadError::Scrape(e)),
            };
            (i, EndpointReading::of(&url, r))
        });
    }
    let mut out: Vec<EndpointReading> = urls
        .iter()
        .map(|u| EndpointReading::of(u, Err(ReadError::Scrape(ScrapeError::TaskFailed))))
        .collect();
    while let Some(joined) = set.join_next().await {
        if let Ok((i, r)) = joined {
            out[i] = r;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::prom::{parse, Format};

    fn read(text: &str) -> QueueReading {
        read_queue(&parse(text, Format::Text).unwrap()).unwrap()
    }

    #[test]
    fn each_engines_gauges_are_summed_over_every_label_set() {
        let vllm = "# TYPE vllm:num_requests_running gauge\n\
            vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n\
            vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 1.0\n\
            vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 5.0\n\
            vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 0.0\n\
            vllm:num_requests_running_other 9\n";
        let r = read(vllm);
        assert_eq!((r.running, r.waiting), (3, 5));
        assert_eq!(r.gauges, [QueueGauge::VllmRunning, QueueGauge::VllmWaiting]);
        let cases = [
            (
                "sglang:num_running_reqs{engine_type=\"unified\",tp_rank=\"0\"} 4\n\
                 sglang:num_queue_reqs{engine_type=\"unified\",tp_rank=\"0\"} 7\n\
                 sglang:num_grammar_queue_reqs{tp_rank=\"0\"} 3\n",
                (4, 7),
            ),
            (
                "trtllm_num_requests_running{model_name=\"a\"} 1\n\
                 trtllm_num_requests_waiting{model_name=\"a\"} 2\n",
                (1, 2),
            ),
            (
                "llamacpp:requests_processing 1\nllamacpp:requests_deferred 6\n",
                (1, 6),
            ),
            (
                "dynamo_frontend_active_requests{model=\"m\"} 3\n\
                 dynamo_frontend_inflight_requests{model=\"m\"} 3\n\
                 dynamo_frontend_queued_requests{model=\"m\"} 1\n",
                (3, 1),
            ),
            (
                "dynamo_frontend_inflight_requests{model=\"m\"} 2\n\
                 dynamo_frontend_queued_requests{model=\"m\"} 0\n",
                (2, 0),
            ),
            // A Dynamo prefill worker's own page (1.6.1): no engine gauge, only the
            // component's in-flight count per endpoint.
            (
                "dynamo_component_inflight_requests{dynamo_component=\"prefill\",\
                 dynamo_endpoint=\"generate\",dynamo_namespace=\"dynamo\"} 1\n\
                 dynamo_component_inflight_requests{dynamo_component=\"prefill\",\
                 dynamo_endpoint=\"clear_kv_blocks\",dynamo_namespace=\"dynamo\"} 0\n",
                (1, 0),
            ),
        ];
        for (page, want) in cases {
            let r = read(page);
            assert_eq!((r.running, r.waiting), want, "{page}");
        }
        // The newer Dynamo name wins over the older one: the count is not doubled.
        let r = read(cases[3].0);
        assert_eq!(
            r.gauges,
            [QueueGauge::DynamoActive, QueueGauge::DynamoQueued]
        );
    }

    #[test]
    fn a_fraction_counts_as_a_request_and_a_nan_is_not_zero() {
        assert_eq!(read("vllm:num_requests_waiting 0.25\n").waiting, 1);
        let e = read_queue(&parse("sglang:num_queue_reqs NaN\n", Format::Text).unwrap());
        assert!(
            matches!(
                e,
                Err(ReadError::NotACount {
                    gauge: QueueGauge::SglangQueued,
                    ..
                })
            ),
            "{e:?}"
        );
        assert!(read_queue(&parse("sglang:num_queue_reqs -1\n", Format::Text).unwrap()).is_err());
    }

    #[test]
    fn a_page_without_queue_gauges_reads_as_blind_not_idle() {
        let r = read("vllm:spec_decode_num_drafts_total 10\nprocess_cpu_seconds_total 1\n");
        assert!(r.gauges.is_empty());
        let e = EndpointReading::of("u", Ok(r));
        assert!(e.blind());
        assert_eq!(e.running, None);
        assert_eq!(classify(&[e]), PollState::Blind);
    }

    fn reading(running: u64, waiting: u64) -> EndpointReading {
        EndpointReading::of(
            "u",
            Ok(QueueReading {
                running,
                waiting,
                gauges: vec![QueueGauge::VllmRunning, QueueGauge::VllmWaiting],
            }),
        )
    }

    fn failed() -> EndpointReading {
        EndpointReading::of("u", Err(ReadError::Scrape(ScrapeError::Status(503))))
    }

    fn blind() -> EndpointReading {
        EndpointReading::of("u", Ok(QueueReading::default()))
    }

    #[test]
    fn polls_are_classified_busy_before_failed_before_blind() {
        assert_eq!(classify(&[reading(0, 0), reading(0, 0)]), PollState::Idle);
        assert_eq!(classify(&[reading(0, 1), failed()]), PollState::Busy);
        assert_eq!(classify(&[reading(1, 0), blind()]), PollState::Busy);
        assert_eq!(classify(&[reading(0, 0), failed()]), PollState::Failed);
        assert_eq!(classify(&[failed(), blind()]), PollState::Failed);
        assert_eq!(classify(&[reading(0, 0), blind()]), PollState::Blind);
    }

    #[test]
    fn idle_polls_must_be_consecutive_and_an_error_resets_the_count() {
        use PollState::*;
        let mut c = Counter::new(3);
        for s in [Idle, Idle, Failed, Idle, Idle, Busy, Idle, Idle] {
            assert_eq!(c.observe(s), None, "{s:?} after {c:?}");
        }
        assert_eq!(c.observe(Idle), Some(DrainReason::Drained));
        let mut once = Counter::new(1);
        assert_eq!(once.observe(Busy), None);
        assert_eq!(once.observe(Idle), Some(DrainReason::Drained));
    }

    #[test]
    fn an_endpoint_without_gauges_ends_the_wait_as_no_queue_gauges_not_drained() {
        use PollState::*;
        let mut c = Counter::new(3);
        // Busy elsewhere: keep waiting; once the rest is idle, blind polls count.
        for s in [Busy, Blind, Blind, Busy, Blind, Blind] {
            assert_eq!(c.observe(s), None, "{s:?} after {c:?}");
        }
        assert_eq!(c.observe(Blind), Some(DrainReason::NoQueueGauges));
    }

    #[test]
    fn the_outcome_serialises_with_metric_names_and_snake_case_reasons() {
        let o = DrainOutcome {
            drained: false,
            reason: DrainReason::NoQueueGauges,
            waited_s: 0.5,
            polls: 3,
            idle_polls_required: 3,
            poll_interval_s: 0.1,
            max_wait_s: 10.0,
            max_queue: 0,
            endpoints: vec![reading(0, 0), blind(), failed()],
            stopped_by: None,
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["reason"], "no_queue_gauges");
        assert_eq!(
            v["endpoints"][0]["gauges"],
            serde_json::json!(["vllm:num_requests_running", "vllm:num_requests_waiting"])
        );
        assert_eq!(v["endpoints"][2]["error"], "HTTP 503");
        assert!(v.get("stopped_by").is_none());
        let back: DrainOutcome = serde_json::from_value(v).unwrap();
        assert_eq!(back, o);
        assert!(
            o.summary_line().contains("--server-metrics"),
            "{}",
            o.summary_line()
        );
    }

    #[test]
    fn the_progress_line_names_totals_and_what_is_wrong() {
        let p = DrainPoll {
            poll: 4,
            waited_s: 30.0,
            idle_polls: 0,
            idle_polls_required: 3,
            endpoints: vec![reading(3, 12), failed()],
        };
        assert_eq!(
            p.to_string(),
            "drain: poll 4, running 3, waiting 12 (2 endpoints), idle 0/3, 30.0 s; u: HTTP 503 \
             (idle count reset)"
        );
    }
}
