//! The telemetry side task: opens the source the flags ask for, reads it every interval from
//! before the warmup to after the last response, and takes an extra read the moment the
//! profiling window opens ([`TelemetryTask::mark`]) and closes ([`TelemetryTask::finish`]), so
//! the counters at the window's edges are read milliseconds from them.
//!
//! Each frame goes through one [`Recorder`], which keeps a series per GPU and turns what changed
//! (a field, a GPU, a failed or recovered source, a counter that went down) into events.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::{
    dcgm, nvml, smi, unix_ns, Event, EventKind, Field, Frame, GpuId, GpuSeries, Reading,
    SourceKind, TelemetryError, TelemetryRun,
};
use crate::client::Client;
use crate::debug::{self, step};
use crate::side_task::{self, SideTask, SideTaskFailed};

/// What `--gpu-telemetry` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// No source named: AIPerf's DCGM endpoints, else NVML, else nvidia-smi / amd-smi.
    Auto,
    /// These DCGM exporter pages (normalised URLs).
    Dcgm(Vec<String>),
    /// NVML on this node.
    Nvml,
    /// `nvidia-smi` or `amd-smi`.
    Smi(SourceKind),
}

/// An opened source.
pub(crate) enum Source {
    Dcgm {
        client: Box<Client>,
        urls: Vec<String>,
    },
    Nvml(Arc<nvml::Nvml>),
    Smi(smi::Smi),
}

impl Source {
    fn kind(&self) -> SourceKind {
        match self {
            Source::Dcgm { .. } => SourceKind::Dcgm,
            Source::Nvml(_) => SourceKind::Nvml,
            Source::Smi(s) => s.kind(),
        }
    }

    fn names(&self) -> Vec<String> {
        match self {
            Source::Dcgm { urls, .. } => urls.clone(),
            Source::Nvml(_) => vec![nvml::SOURCE.to_owned()],
            Source::Smi(s) => vec![s.source().to_owned()],
        }
    }

    async fn read(&self, timeout: Duration) -> Vec<Frame> {
        let t0 = std::time::Instant::now();
        let frames = self.read_frames(timeout).await;
        step!(
            "telemetry read ({}): {} frame(s), {} GPU(s) in {}",
            self.kind().as_str(),
            frames.len(),
            frames
                .iter()
                .map(|f| f.gpus.as_ref().map_or(0, Vec::len))
                .sum::<usize>(),
            debug::ms(t0.elapsed())
        );
        frames
    }

    async fn read_frames(&self, timeout: Duration) -> Vec<Frame> {
        match self {
            Source::Dcgm { client, urls } => dcgm::read(client, urls, timeout).await,
            Source::Nvml(n) => {
                let n = n.clone();
                let t0 = unix_ns();
                let gpus = tokio::task::spawn_blocking(move || n.read())
                    .await
                    .unwrap_or_else(|e| {
                        Err(TelemetryError::NvmlCall {
                            call: "read",
                            error: e.to_string(),
                        })
                    });
                vec![Frame {
                    source: nvml::SOURCE.to_owned(),
                    t_ns: t0 + unix_ns().saturating_sub(t0) / 2,
                    gpus,
                }]
            }
            Source::Smi(s) => {
                let t0 = unix_ns();
                let gpus = s.read(timeout).await;
                vec![Frame {
                    source: s.source().to_owned(),
                    t_ns: t0 + unix_ns().saturating_sub(t0) / 2,
                    gpus,
                }]
            }
        }
    }
}

/// No source could be opened: every attempt and why it failed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpenError {
    /// `(source, why)` in the order tried.
    pub(crate) attempts: Vec<(String, TelemetryError)>,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no GPU telemetry source answered:")?;
        for (s, e) in &self.attempts {
            write!(f, " {s}: {e};")?;
        }
        write!(
            f,
            " name a DCGM exporter (--gpu-telemetry http://HOST:9400/metrics, one per node), \
             --gpu-telemetry nvml or --gpu-telemetry nvidia-smi"
        )
    }
}

/// Opens what `ask` names and takes the first read. DCGM pages that answer nothing at all are
/// errors only when none answers; an explicit source that fails is an error.
pub(crate) async fn open(
    ask: &Ask,
    client: &Client,
    timeout: Duration,
) -> Result<(Source, Vec<Frame>), OpenError> {
    let mut attempts = Vec::new();
    let dcgm_urls: Vec<String> = match ask {
        Ask::Auto => dcgm::DEFAULT_ENDPOINTS
            .iter()
            .map(|s| s.to_string())
            .collect(),
        Ask::Dcgm(u) => u.clone(),
        _ => Vec::new(),
    };
    if !dcgm_urls.is_empty() {
        let frames = dcgm::read(client, &dcgm_urls, timeout).await;
        let answered: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].gpus.is_ok())
            .collect();
        if !answered.is_empty() {
            // Asked-for pages stay even when they failed now (their gap is recorded); AIPerf's
            // defaults that did not answer are dropped.
            let keep: Vec<usize> = match ask {
                Ask::Auto => answered,
                _ => (0..frames.len()).collect(),
            };
            let urls = keep.iter().map(|&i| dcgm_urls[i].clone()).collect();
            let frames = keep.iter().map(|&i| frames[i].clone()).collect();
            return Ok((
                Source::Dcgm {
                    client: Box::new(client.clone()),
                    urls,
                },
                frames,
            ));
        }
        for f in frames {
            attempts.push((f.source, f.gpus.err().unwrap_or(TelemetryError::NoGpus)));
        }
        if !matches!(ask, Ask::Auto) {
            return Err(OpenError { attempts });
        }
    }
    if matches!(ask, Ask::Auto | Ask::Nvml) {
        match nvml::Nvml::open() {
            Ok(n) => {
                let s = Source::Nvml(Arc::new(n));
                let frames = s.read(timeout).await;
                if frames.iter().any(|f| f.gpus.is_ok()) {
                    return Ok((s, frames));
                }
                for f in frames {
                    attempts.push((f.source, f.gpus.err().unwrap_or(TelemetryError::NoGpus)));
                }
            }
            Err(e) => attempts.push((nvml::SOURCE.to_owned(), e)),
        }
        if matches!(ask, Ask::Nvml) {
            return Err(OpenError { attempts });
        }
    }
    let want = match ask {
        Ask::Smi(k) => Some(*k),
        _ => None,
    };
    match smi::Smi::detect(want) {
        Ok(s) => {
            let s = Source::Smi(s);
            let frames = s.read(timeout).await;
            if frames.iter().any(|f| f.gpus.is_ok()) {
                return Ok((s, frames));
            }
            for f in frames {
                attempts.push((f.source, f.gpus.err().unwrap_or(TelemetryError::NoGpus)));
            }
        }
        Err(e) => attempts.push((
            match want {
                Some(SourceKind::AmdSmi) => "amd-smi",
                Some(_) => "nvidia-smi",
                None => "nvidia-smi / amd-smi",
            }
            .to_owned(),
            e,
        )),
    }
    Err(OpenError { attempts })
}

/// Keeps the series and turns changes into events.
pub(crate) struct Recorder {
    series: Vec<GpuSeries>,
    index: HashMap<GpuId, usize>,
    /// Per series: the fields of its last read and whether it is present now.
    fields: Vec<BTreeSet<Field>>,
    present: Vec<bool>,
    /// Sources whose last read failed.
    failing: BTreeSet<String>,
    /// Sources read at least once successfully.
    seen: BTreeSet<String>,
    events: Vec<Event>,
}

impl Recorder {
    pub(crate) fn new() -> Recorder {
        Recorder {
            series: Vec::new(),
            index: HashMap::new(),
            fields: Vec::new(),
            present: Vec::new(),
            failing: BTreeSet::new(),
            seen: BTreeSet::new(),
            events: Vec::new(),
        }
    }

    fn event(&mut self, t_ns: u64, source: &str, gpu: Option<GpuId>, kind: EventKind) {
        self.events.push(Event {
            t_ns,
            source: source.to_owned(),
            gpu,
            kind,
        });
    }

    pub(crate) fn add(&mut self, frame: Frame) {
        let Frame { source, t_ns, gpus } = frame;
        let gpus = match gpus {
            Err(e) => {
                if self.failing.insert(source.clone()) {
                    self.event(
                        t_ns,
                        &source,
                        None,
                        EventKind::SourceFailed {
                            error: e.to_string(),
                        },
                    );
                }
                return;
            }
            Ok(g) => g,
        };
        if self.failing.remove(&source) {
            self.event(t_ns, &source, None, EventKind::SourceRecovered);
        }
        let first = self.seen.insert(source.clone());
        let mut here = BTreeSet::new();
        for (id, values) in gpus {
            let i = match self.index.get(&id) {
                Some(&i) => i,
                None => {
                    let i = self.series.len();
                    self.index.insert(id.clone(), i);
                    self.series.push(GpuSeries {
                        id: id.clone(),
                        readings: Vec::new(),
                    });
                    self.fields.push(values.keys().copied().collect());
                    self.present.push(false);
                    if !first {
                        self.event(t_ns, &source, Some(id.clone()), EventKind::GpuAppeared);
                    }
                    i
                }
            };
            here.insert(i);
            if !self.present[i] && !self.series[i].readings.is_empty() {
                self.event(t_ns, &source, Some(id.clone()), EventKind::GpuAppeared);
            }
            self.present[i] = true;
            let now: BTreeSet<Field> = values.keys().copied().collect();
            let before = std::mem::replace(&mut self.fields[i], now.clone());
            for &f in now.difference(&before) {
                self.event(
                    t_ns,
                    &source,
                    Some(id.clone()),
                    EventKind::FieldAppeared { field: f },
                );
            }
            for &f in before.difference(&now) {
                self.event(
                    t_ns,
                    &source,
                    Some(id.clone()),
                    EventKind::FieldDisappeared { field: f },
                );
            }
            if let Some(last) = self.series[i].readings.last() {
                let resets: Vec<Field> = values
                    .iter()
                    .filter(|(f, v)| f.is_counter() && last.values.get(f).is_some_and(|l| **v < *l))
                    .map(|(f, _)| *f)
                    .collect();
                for f in resets {
                    self.event(
                        t_ns,
                        &source,
                        Some(id.clone()),
                        EventKind::CounterReset { field: f },
                    );
                }
            }
            self.series[i].readings.push(Reading { t_ns, values });
        }
        let gone: Vec<usize> = (0..self.series.len())
            .filter(|i| {
                self.present[*i] && self.series[*i].id.source == source && !here.contains(i)
            })
            .collect();
        for i in gone {
            self.present[i] = false;
            let id = self.series[i].id.clone();
            self.event(t_ns, &source, Some(id), EventKind::GpuVanished);
        }
    }

    pub(crate) fn finish(
        self,
        source: SourceKind,
        sources: Vec<String>,
        interval: Duration,
    ) -> TelemetryRun {
        TelemetryRun {
            source,
            sources,
            interval_s: interval.as_secs_f64(),
            series: self.series,
            events: self.events,
        }
    }
}

enum Cmd {
    /// Read now and answer when done.
    Mark(oneshot::Sender<()>),
    /// Read once more and end.
    Finish,
}

/// The running task.
pub(crate) struct TelemetryTask {
    cmd: mpsc::Sender<Cmd>,
    handle: tokio::task::JoinHandle<TelemetryRun>,
}

impl TelemetryTask {
    /// Starts reading every `interval` (the first frames are the open's).
    pub(crate) fn spawn(
        source: Source,
        first: Vec<Frame>,
        interval: Duration,
        timeout: Duration,
    ) -> TelemetryTask {
        let (tx, mut rx) = mpsc::channel::<Cmd>(4);
        let handle = tokio::spawn(async move {
            side_task::panic_if_asked(SideTask::Telemetry);
            let mut rec = Recorder::new();
            for f in first {
                rec.add(f);
            }
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    c = rx.recv() => {
                        for f in source.read(timeout).await {
                            rec.add(f);
                        }
                        match c {
                            Some(Cmd::Mark(done)) => {
                                let _ = done.send(());
                                tick.reset();
                            }
                            Some(Cmd::Finish) | None => break,
                        }
                    }
                    _ = tick.tick() => {
                        for f in source.read(timeout).await {
                            rec.add(f);
                        }
                    }
                }
            }
            rec.finish(source.kind(), source.names(), interval)
        });
        TelemetryTask { cmd: tx, handle }
    }

    /// Reads now (the profiling window opens) and returns when the read is in.
    pub(crate) async fn mark(&self) {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Mark(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Reads once more (the window has closed) and returns everything recorded, or why the
    /// task ended without it.
    pub(crate) async fn finish(self) -> Result<TelemetryRun, SideTaskFailed> {
        let _ = self.cmd.send(Cmd::Finish).await;
        side_task::join(SideTask::Telemetry, self.handle).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::Values;
    use super::*;

    fn id(i: u32) -> GpuId {
        GpuId {
            source: "s".into(),
            hostname: "h".into(),
            index: i,
            uuid: String::new(),
            model: String::new(),
        }
    }

    fn frame(t: u64, gpus: &[(u32, &[(Field, f64)])]) -> Frame {
        Frame {
            source: "s".into(),
            t_ns: t,
            gpus: Ok(gpus
                .iter()
                .map(|(i, v)| (id(*i), v.iter().copied().collect::<Values>()))
                .collect()),
        }
    }

    #[test]
    fn fields_gpus_sources_and_resets_that_change_are_events_and_nothing_is_dropped() {
        let mut r = Recorder::new();
        let p = Field::Power;
        let e = Field::Energy;
        r.add(frame(1, &[(0, &[(p, 1.0), (e, 10.0)]), (1, &[(p, 1.0)])]));
        r.add(frame(
            2,
            &[
                (0, &[(p, 1.0), (e, 11.0), (Field::XidErrors, 0.0)]),
                (1, &[(p, 1.0)]),
            ],
        ));
        r.add(Frame {
            source: "s".into(),
            t_ns: 3,
            gpus: Err(TelemetryError::Status(500)),
        });
        r.add(frame(4, &[(0, &[(p, 1.0), (e, 2.0)])]));
        r.add(frame(
            5,
            &[
                (0, &[(p, 1.0), (e, 3.0)]),
                (1, &[(p, 1.0)]),
                (2, &[(p, 1.0)]),
            ],
        ));
        let run = r.finish(
            SourceKind::Dcgm,
            vec!["s".into()],
            Duration::from_millis(100),
        );
        let kinds: Vec<(u64, Option<u32>, EventKind)> = run
            .events
            .iter()
            .map(|e| (e.t_ns, e.gpu.as_ref().map(|g| g.index), e.kind.clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (
                    2,
                    Some(0),
                    EventKind::FieldAppeared {
                        field: Field::XidErrors
                    }
                ),
                (
                    3,
                    None,
                    EventKind::SourceFailed {
                        error: "HTTP 500".into()
                    }
                ),
                (4, None, EventKind::SourceRecovered),
                (
                    4,
                    Some(0),
                    EventKind::FieldDisappeared {
                        field: Field::XidErrors
                    }
                ),
                (
                    4,
                    Some(0),
                    EventKind::CounterReset {
                        field: Field::Energy
                    }
                ),
                (4, Some(1), EventKind::GpuVanished),
                (5, Some(1), EventKind::GpuAppeared),
                (5, Some(2), EventKind::GpuAppeared),
            ]
        );
        assert_eq!(run.series.len(), 3);
        assert_eq!(run.series[0].readings.len(), 4);
        assert_eq!(run.series[1].readings.len(), 3);
    }
}
