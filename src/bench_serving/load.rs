//! The load of one bench-serving run (shared/spec/bench-serving.md §6.2, §7, §8.1): the
//! warmups or the initial test, the releases at upstream's arrival times, the
//! `--max-concurrency` slots, one [`Client`] request per release, and each request's record
//! turned into upstream's per-request figures.
//!
//! ```text
//! bodies (dataset order) ─► releases at a_k ─► slot (semaphore) ─► Client::execute ─► Outcome
//!                                  │ Stopper: the unreleased and the in-flight end as failures
//! ```
//!
//! Each request's clock starts when it holds its slot (`sent_ns`), as upstream's does; the times
//! are the client's, one stamp per SSE event, so a busy client does not stretch them.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, Uri};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::args::Api;
use super::result::{Itl, Outcome, Window};
use crate::client::{Client, Clock, Payload, Prepared};
use crate::record::RequestRecord;
use crate::stop::Stopper;

/// Builds request `i`'s body; called when the request's connection is ready, and the body is
/// dropped once written, so that only the requests being written hold a body (16,384 slots of
/// 8k-token prompts would otherwise keep every body of the run in memory beside its prompt).
pub(crate) type BodyOf = Arc<dyn Fn(usize) -> Bytes + Send + Sync>;

/// What the run sends and how.
pub(crate) struct Load {
    pub(crate) client: Client,
    pub(crate) url: Uri,
    /// Requests in dataset order.
    pub(crate) n: usize,
    pub(crate) body_of: BodyOf,
    /// Gaps after each release, seconds (empty: `--request-rate inf`).
    pub(crate) gaps: Vec<f64>,
    pub(crate) max_concurrency: Option<usize>,
    /// Whose reading of a body counts (`--backend`).
    pub(crate) api: Api,
    /// Keep the generated text (`--save-detailed`, sa-bench always).
    pub(crate) capture_text: bool,
    /// Progress on stderr (not with `--disable-tqdm`).
    pub(crate) progress: bool,
}

/// One request's record and when it was released (seconds after the window opened).
pub(crate) struct Sent {
    pub(crate) record: RequestRecord,
    /// Monotonic ns of the run's clock when it took its slot.
    pub(crate) start_ns: u64,
}

/// What a request's record becomes as it ends: its outcome from its index and record (`None`:
/// never released, the run stopped first).
pub(crate) type OutcomeOf<'a> = &'a (dyn Fn(usize, Option<&Sent>) -> Outcome + Sync);

/// The main phase's results.
pub(crate) struct Phase {
    /// Per request, dataset order.
    pub(crate) outcomes: Vec<Outcome>,
    /// Per request, dataset order, when the run asked to keep the records (`None` for a request
    /// never released); else empty. A record is ~1.5 KB with its chunk gaps, its outcome a
    /// tenth of that: at 10 prompts per slot the records were the largest thing a run held.
    pub(crate) sent: Vec<Option<Sent>>,
    pub(crate) window: Window,
    /// When the last response ended (the server-metrics window closes there).
    pub(crate) last_response: Option<Instant>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Load {
    fn prepared(&self, body: Bytes) -> Prepared {
        Prepared {
            uri: self.url.clone(),
            body: body.into(),
            streaming: true,
            lines: Some(self.api),
            capture_text: self.capture_text,
            headers: HeaderMap::new(),
        }
    }

    /// Sends `body` once, outside the measured phase (warmups, the initial test).
    pub(crate) async fn once(&self, body: &Bytes, clock: &Clock, stop: &Stopper) -> RequestRecord {
        let rec = RequestRecord::started(0, 0, 0, 0);
        self.client
            .execute(self.prepared(body.clone()), rec, clock, stop.token())
            .await
    }

    /// IX's warmup: `n` copies of request 0, `--max-concurrency` at a time, all awaited; the
    /// results are dropped.
    pub(crate) async fn warmup(&self, n: usize, clock: &Clock, stop: &Stopper) {
        let slots = Arc::new(Semaphore::new(self.max_concurrency.unwrap_or(n.max(1))));
        let mut tasks = Tasks::default();
        let first = (self.body_of)(0);
        let token = stop.token();
        for _ in 0..n {
            // A task per request holding its slot, so only the requests in flight are tasks.
            let slot = tokio::select! {
                biased;
                _ = token.cancelled() => break,
                p = slots.clone().acquire_owned() => p.ok(),
            };
            let (client, req, clock, token) = (
                self.client.clone(),
                self.prepared(first.clone()),
                *clock,
                token.clone(),
            );
            tasks.spawn(async move {
                let _slot = slot;
                let rec = RequestRecord::started(0, 0, 0, 0);
                client.execute(req, rec, &clock, &token).await;
            });
        }
        tasks.join_all().await;
    }

    /// The measured phase: every request released at its arrival time, through the slots.
    /// `on_open` hears the window's wall-clock start, before the first release. Each record
    /// becomes its outcome as it comes in, and is kept beside it only with `keep_records`.
    pub(crate) async fn run(
        &self,
        clock: &Clock,
        stop: &Stopper,
        on_open: &dyn Fn(f64),
        outcome_of: OutcomeOf<'_>,
        keep_records: bool,
    ) -> Phase {
        let n = self.n;
        let slots = self.max_concurrency.map(|c| Arc::new(Semaphore::new(c)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Sent)>();
        let token: CancellationToken = stop.token().clone();
        let start_unix = unix_now();
        on_open(start_unix);
        let start = Instant::now();
        let mut got = Collected::new(n, keep_records, self.progress, start);
        let mut tasks = Tasks::default();
        let mut at = 0.0f64;
        for i in 0..n {
            // What came in while this request waited: a record waiting in the channel until
            // the last release would hold every record of the run.
            while let Ok((k, s)) = rx.try_recv() {
                got.take(k, s, outcome_of);
            }
            if i > 0 && !self.gaps.is_empty() {
                at += self.gaps[i - 1];
                let when = start + Duration::from_secs_f64(at);
                tokio::select! {
                    biased;
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep_until(when.into()) => {}
                }
            }
            if token.is_cancelled() {
                break;
            }
            // The slot is taken here, in release order: first released, first served, as
            // upstream's asyncio tasks queue on its semaphore. A released request waiting for a
            // slot holds up the later releases, which would queue behind it anyway.
            let slot = match &slots {
                Some(s) => tokio::select! {
                    biased;
                    _ = token.cancelled() => break,
                    p = s.clone().acquire_owned() => p.ok(),
                },
                None => None,
            };
            let body_of = self.body_of.clone();
            let (client, req, clock, token, tx) = (
                self.client.clone(),
                Prepared {
                    // Made when its connection is ready, dropped once written.
                    body: Payload::Deferred(Arc::new(move || body_of(i).into())),
                    ..self.prepared(Bytes::new())
                },
                *clock,
                token.clone(),
                tx.clone(),
            );
            tasks.spawn(async move {
                let _slot = slot;
                let start_ns = clock.now_ns();
                let rec = RequestRecord::started(i as u64, i, start_ns, start_ns);
                let record = client.execute(req, rec, &clock, &token).await;
                let _ = tx.send((i, Sent { record, start_ns }));
            });
        }
        drop(tx);
        // Upstream sleeps the gap drawn after the last release before it awaits the replies.
        if let Some(last) = self.gaps.last() {
            let when = start + Duration::from_secs_f64(at + last);
            tokio::select! {
                _ = token.cancelled() => {}
                _ = tokio::time::sleep_until(when.into()) => {}
            }
        }
        while let Some((i, s)) = rx.recv().await {
            tasks.reap();
            got.take(i, s, outcome_of);
        }
        tasks.join_all().await;
        let duration = start.elapsed().as_secs_f64();
        let Collected {
            outcomes,
            sent,
            last_response,
            ..
        } = got;
        let outcomes = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, o)| o.unwrap_or_else(|| outcome_of(i, None)))
            .collect();
        Phase {
            outcomes,
            sent,
            window: Window {
                duration,
                start_unix,
                end_unix: unix_now(),
            },
            last_response,
        }
    }
}

/// The measured phase's requests as they end: outcomes (and records, when kept) in dataset
/// order, and the progress line.
struct Collected {
    outcomes: Vec<Option<Outcome>>,
    /// Empty unless the records are kept.
    sent: Vec<Option<Sent>>,
    keep_records: bool,
    done: usize,
    progress: bool,
    start: Instant,
    last_print: Instant,
    last_response: Option<Instant>,
}

impl Collected {
    fn new(n: usize, keep_records: bool, progress: bool, start: Instant) -> Collected {
        Collected {
            outcomes: (0..n).map(|_| None).collect(),
            sent: if keep_records {
                (0..n).map(|_| None).collect()
            } else {
                Vec::new()
            },
            keep_records,
            done: 0,
            progress,
            start,
            last_print: start,
            last_response: None,
        }
    }

    fn take(&mut self, i: usize, s: Sent, outcome_of: OutcomeOf<'_>) {
        self.outcomes[i] = Some(outcome_of(i, Some(&s)));
        if self.keep_records {
            self.sent[i] = Some(s);
        }
        self.last_response = Some(Instant::now());
        self.done += 1;
        if self.progress && self.last_print.elapsed() >= Duration::from_secs(5) {
            self.last_print = Instant::now();
            eprintln!(
                "bench-serving: {}/{} requests done, {:.1} s",
                self.done,
                self.outcomes.len(),
                self.start.elapsed().as_secs_f64()
            );
        }
    }
}

/// The request tasks of a phase. Finished ones are reaped as the run goes: a finished task's
/// memory is held until it is joined, and at 10 prompts per slot that was a third of the peak
/// (5,120 tasks of ~4 KB at concurrency 512). A task that panicked is said on stderr; its
/// request has no record and counts as not sent.
#[derive(Default)]
struct Tasks {
    set: tokio::task::JoinSet<()>,
    panicked: usize,
}

impl Tasks {
    fn spawn(&mut self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        self.set.spawn(f);
        self.reap();
    }

    /// Joins the tasks that have finished.
    fn reap(&mut self) {
        while let Some(r) = self.set.try_join_next() {
            self.count(r);
        }
    }

    async fn join_all(&mut self) {
        while let Some(r) = self.set.join_next().await {
            self.count(r);
        }
        if self.panicked > 0 {
            eprintln!(
                "WARNING: {} request task(s) panicked; their requests have no record",
                self.panicked
            );
            self.panicked = 0;
        }
    }

    fn count(&mut self, r: Result<(), tokio::task::JoinError>) {
        if r.as_ref().is_err_and(tokio::task::JoinError::is_panic) {
            self.panicked += 1;
        }
    }
}

/// The arrival gaps of `n` requests at `rate` per second with gamma shape `burstiness`, drawn
/// from the global stream after the dataset (N draws; `inf` draws none).
pub(crate) fn gaps(
    global: &mut crate::dataset::numpy_random::RandomState,
    n: usize,
    rate: f64,
    burstiness: f64,
) -> Vec<f64> {
    if rate.is_infinite() {
        return Vec::new();
    }
    let theta = 1.0 / (rate * burstiness);
    (0..n).map(|_| global.gamma(burstiness, theta)).collect()
}

/// How a request ended, in upstream's terms; `count` counts the tokens of a text (sa-bench's
/// fallback when the server sent no usage).
pub(crate) fn outcome(
    prompt_len: usize,
    sent: Option<&Sent>,
    sa_count: Option<&dyn Fn(&str) -> u64>,
) -> Outcome {
    let Some(Sent {
        record: r,
        start_ns,
    }) = sent
    else {
        return Outcome {
            prompt_len,
            error: "not sent: the run was stopped first".to_owned(),
            ..Outcome::default()
        };
    };
    let secs = |ns: u64| ns.saturating_sub(*start_ns) as f64 / 1e9;
    // The client read the body as upstream does (`Prepared::lines`): its success is upstream's.
    if !r.outcome.is_success() {
        let error = match &r.error {
            Some(e) if !e.is_empty() => e.clone(),
            _ => format!("{:?}", r.outcome),
        };
        return Outcome {
            prompt_len,
            error,
            ..Outcome::default()
        };
    }
    let text = r.response_text.clone().unwrap_or_default();
    let output_len = match (r.completion_tokens, sa_count) {
        (Some(t), _) => t,
        (None, Some(count)) => count(&text),
        (None, None) => 0,
    };
    Outcome {
        success: true,
        prompt_len,
        output_len,
        ttft: r.first_token_ns.map_or(0.0, secs),
        itl: Itl::from_ns(r.chunk_gaps.iter().map(|g| g.gap_ns)),
        // A chat body without a line ends where it started, as upstream's does.
        latency: r.last_token_ns.map_or(0.0, secs),
        generated_text: text,
        error: String::new(),
    }
}

/// sa-bench's peak output rate: each token chunk's tokens (its text tokenized, or the output
/// split evenly over the chunks) in 1 s buckets from the first start, then the largest 10 s
/// moving average (numpy `convolve(..., "valid")`, which swaps the operands when there are fewer
/// than 10 buckets).
pub(crate) fn peak_output_tokens_per_s(
    outcomes: &[Outcome],
    sent: &[Option<Sent>],
    count: &dyn Fn(&str) -> u64,
) -> f64 {
    const SMOOTH: usize = 10;
    let ok: Vec<(&Outcome, &Sent)> = outcomes
        .iter()
        .zip(sent)
        .filter_map(|(o, s)| Some((o, s.as_ref()?)))
        .filter(|(o, _)| o.success)
        .collect();
    if ok.is_empty() {
        return 0.0;
    }
    let start = |s: &Sent| s.start_ns as f64 / 1e9;
    let t0 = ok
        .iter()
        .map(|(_, s)| start(s))
        .fold(f64::INFINITY, f64::min);
    let t1 = ok
        .iter()
        .map(|(o, s)| start(s) + o.latency)
        .fold(f64::NEG_INFINITY, f64::max);
    let buckets_n = (t1 - t0).ceil() as usize + 1;
    let mut buckets = vec![0.0f64; buckets_n];
    for (o, s) in &ok {
        let mut times = vec![start(s) + o.ttft];
        for gap in o.itl.secs() {
            times.push(times[times.len() - 1] + gap);
        }
        let text = s.record.response_text.as_deref().unwrap_or("");
        let ends = &s.record.chunk_text_ends;
        let chunks = times.len() as u64;
        let total = if o.output_len > 0 {
            o.output_len
        } else {
            chunks
        };
        for (i, t) in times.iter().enumerate() {
            let piece = ends.get(i).and_then(|&end| {
                let begin = if i == 0 { 0 } else { ends[i - 1] as usize };
                text.get(begin..end as usize).filter(|p| !p.is_empty())
            });
            let tokens = match piece {
                Some(p) => count(p),
                None => total / chunks + u64::from((i as u64) < total % chunks),
            };
            let b = (t - t0).floor();
            if b >= 0.0 && (b as usize) < buckets_n {
                buckets[b as usize] += tokens as f64;
            }
        }
    }
    moving_average_peak(&buckets, SMOOTH)
}

/// `max(np.convolve(buckets, np.ones(w)/w, "valid"))`.
fn moving_average_peak(buckets: &[f64], w: usize) -> f64 {
    let weight = 1.0 / w as f64;
    let (long, short) = if buckets.len() >= w {
        (buckets.to_vec(), vec![weight; w])
    } else {
        (vec![weight; w], buckets.to_vec())
    };
    let windows = long.len() - short.len() + 1;
    (0..windows)
        .map(|k| {
            // numpy's correlate of the reversed kernel: sum over the overlap.
            short
                .iter()
                .rev()
                .enumerate()
                .map(|(j, s)| s * long[k + j])
                .sum::<f64>()
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FailureKind, Outcome as RecordOutcome};

    /// The client's reading decides success; the output length is the usage's, else sa-bench's
    /// count of the text, else 0 (InferenceX).
    #[test]
    fn a_record_becomes_upstreams_outcome() {
        let answer = |edit: &dyn Fn(&mut RequestRecord)| {
            let mut r = RequestRecord::started(0, 0, 0, 1_000);
            r.outcome = RecordOutcome::Success;
            r.http_status = Some(200);
            r.completion_tokens = Some(3);
            r.first_token_ns = Some(5_000);
            r.last_token_ns = Some(8_000);
            r.end_ns = 9_000;
            r.response_text = Some("abcd".into());
            edit(&mut r);
            let sent = Sent {
                record: r,
                start_ns: 1_000,
            };
            let count = |t: &str| t.len() as u64;
            let sa = outcome(7, Some(&sent), Some(&count));
            let ix = outcome(7, Some(&sent), None);
            (sa, ix)
        };
        let (o, _) = answer(&|_| {});
        assert!(o.success, "{}", o.error);
        assert_eq!((o.output_len, o.ttft, o.latency), (3, 4e-6, 7e-6));
        let (sa, ix) = answer(&|r| r.completion_tokens = None);
        assert_eq!((sa.output_len, ix.output_len), (4, 0));
        // A chat body without a line: no TTFT, no latency.
        let (o, _) = answer(&|r| {
            r.first_token_ns = None;
            r.last_token_ns = None;
        });
        assert!(o.success);
        assert_eq!((o.ttft, o.latency), (0.0, 0.0));
        let (o, _) = answer(&|r| {
            r.outcome = RecordOutcome::Failed(FailureKind::NoOutput);
            r.error = Some("Never received a valid chunk".into());
        });
        assert!(!o.success);
        assert_eq!(
            (o.error.as_str(), o.prompt_len),
            ("Never received a valid chunk", 7)
        );
    }

    #[test]
    fn the_moving_average_is_numpys_valid_convolution_both_ways_round() {
        let b: Vec<f64> = (1..=12).map(f64::from).collect();
        // Windows of 10: (1..10)/10 = 5.5, (2..11)/10 = 6.5, (3..12)/10 = 7.5.
        assert!((moving_average_peak(&b, 10) - 7.5).abs() < 1e-12);
        // Fewer than 10 buckets: one window, the total over 10.
        assert!((moving_average_peak(&[3.0, 4.0], 10) - 0.7).abs() < 1e-12);
    }
}
