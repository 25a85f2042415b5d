//! The simulator's lifecycle, at the top of its files: binding its listeners (one per server, each
//! owning a range of engines), building the state every connection shares (`state`: counters,
//! timer, lateness histogram, simulated GPUs), serving in-process or on a thread of its own (each
//! listener's connections handed to `http`, the GPUs ticked by a task of their own), and the
//! handle tests and benches hold.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::Quota;
use hdrhistogram::Histogram;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::gpu_fleet::{now_ns, unix_s_to_ns, GpuFleet};
use super::http::accept_loop;
use super::kv::KvPool;
use super::model::{EngineCounters, GroupCounters};
use super::sched::EngineSched;
use super::state::{lateness_stats, Admission, LatenessStats, ServerCtx, Shared};
use super::timer::PreciseTimer;
use super::{SimConfig, SimError};

/// Connections the kernel holds for the accept loop. `TcpListener::bind`'s 128 overflowed when a
/// client opened thousands of streams at once (bench-serving at concurrency 16,384): the kernel
/// dropped the handshakes past it, and the clients' retransmissions, backing off to minutes, were
/// measured as TTFT. Serving engines take more (uvicorn's default is 2048); the kernel caps it at
/// `net.core.somaxconn`.
const BACKLOG: u32 = 65_535;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// A bound (not yet serving) simulator.
pub struct Simulator {
    shared: Arc<Shared>,
    listeners: Vec<(TcpListener, Range<usize>)>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Simulator {
    /// Validates `cfg` and binds every listener.
    pub async fn bind(cfg: SimConfig) -> Result<Simulator, SimError> {
        cfg.validate()?;
        // Each client connection is a descriptor here: take what the hard limit allows, so
        // thousands of streams do not fail to accept at the usual soft limit of 1024.
        let _ = crate::fdlimit::ensure(None, 1);
        let tls = cfg.tls.as_ref().map(tls_acceptor).transpose()?;
        let timer = PreciseTimer::start().map_err(SimError::Start)?;
        let total = (cfg.servers * cfg.engines) as usize;
        let group_slots = match cfg.acceptance_groups.len() {
            0 => 0,
            rules => rules + 1,
        };
        let engines = (0..total as u32)
            .map(|r| EngineCounters::new(r, cfg.k, group_slots))
            .collect();
        let sched = (0..total)
            .map(|_| {
                EngineSched::new(
                    KvPool::new(cfg.kv_blocks, cfg.kv_block_tokens),
                    cfg.max_running,
                )
            })
            .collect();
        let mut listeners = Vec::new();
        for i in 0..cfg.servers {
            let port = if cfg.port == 0 {
                0
            } else {
                cfg.port + i as u16
            };
            let addr = SocketAddr::new(cfg.host, port);
            let l = listen(addr).map_err(|source| SimError::Bind {
                addr: addr.to_string(),
                source,
            })?;
            let first = (i * cfg.engines) as usize;
            listeners.push((l, first..first + cfg.engines as usize));
        }
        // One start instant for the `_created` series and the GPUs' energy counters.
        let start_ns = now_ns();
        let created = start_ns as f64 / 1e9;
        let gpus = cfg
            .gpus
            .clone()
            .map(|g| GpuFleet::new(g, total, cfg.seed, start_ns));
        let hist = Histogram::new_with_bounds(1, 600_000_000_000, 3)
            .map_err(|e| SimError::Config(e.to_string()))?;
        let limiter = cfg.rate_limit.map(|l| {
            // `validate` keeps the rate within (0, 1e6]: the period is at least a microsecond.
            let period = Duration::from_secs_f64(1.0 / l.per_second);
            let burst = NonZeroU32::new(l.burst).unwrap_or(NonZeroU32::MIN);
            let quota = Quota::with_period(period)
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                .allow_burst(burst);
            governor::RateLimiter::direct(quota)
        });
        let shared = Arc::new(Shared {
            p: cfg.acceptance.probability(cfg.k),
            model_json: serde_json::to_string(&cfg.model).unwrap_or_else(|_| "\"\"".into()),
            cfg,
            timer,
            engines,
            sched,
            admissions: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            lateness: Mutex::new((hist, 0)),
            created,
            http2_requests: AtomicU64::new(0),
            received: AtomicU64::new(0),
            started: std::time::Instant::now(),
            requests: Mutex::new(Vec::new()),
            limiter,
            rate_limited: AtomicU64::new(0),
            gpus,
        });
        Ok(Simulator {
            shared,
            listeners,
            tls,
        })
    }

    /// Server `i`'s context, as its connections see it (tests of the pages).
    #[cfg(test)]
    pub(super) fn server_ctx(&self, i: usize) -> ServerCtx {
        ServerCtx {
            shared: self.shared.clone(),
            engines: self.listeners[i].1.clone(),
            rr: AtomicU64::new(0),
        }
    }

    /// The bound addresses, one per server.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|(l, _)| l.local_addr().ok())
            .collect()
    }

    /// Serves until `cancel` fires; open connections are dropped then.
    pub async fn run(self, cancel: CancellationToken) {
        let mut tasks = tokio::task::JoinSet::new();
        for (listener, engines) in self.listeners {
            let ctx = Arc::new(ServerCtx {
                shared: self.shared.clone(),
                engines,
                rr: AtomicU64::new(0),
            });
            tasks.spawn(accept_loop(listener, ctx, self.tls.clone(), cancel.clone()));
        }
        tasks.spawn(gpu_ticks(self.shared.clone(), cancel.clone()));
        cancel.cancelled().await;
        tasks.shutdown().await;
    }

    /// Serves until `stop` fires (used by `specperf sim`).
    pub async fn run_until(self, stop: &crate::stop::Stopper) {
        self.run(stop.token().clone()).await
    }

    /// Binds and serves on a dedicated thread with its own runtime, so its timing does not depend
    /// on the caller's runtime. Stops when the handle is dropped.
    pub fn spawn(cfg: SimConfig) -> Result<SimHandle, SimError> {
        type Ready = Result<(Vec<SocketAddr>, Arc<Shared>, &'static str), SimError>;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Ready>();
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        // Binding happens on the simulator's own thread: the caller may itself be inside a runtime.
        let thread = std::thread::Builder::new()
            .name("specperf-sim-main".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("specperf-sim")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(SimError::Start(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Simulator::bind(cfg).await {
                        Ok(sim) => {
                            let scheme = if sim.tls.is_some() { "https" } else { "http" };
                            let _ = ready_tx.send(Ok((sim.addrs(), sim.shared.clone(), scheme)));
                            sim.run(c).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(SimError::Start)?;
        let (addrs, shared, scheme) = ready_rx.recv().map_err(|_| {
            SimError::Start(std::io::Error::other(
                "simulator thread exited during start",
            ))
        })??;
        Ok(SimHandle {
            addrs,
            scheme,
            shared,
            cancel,
            thread: Some(thread),
        })
    }
}

/// Redraws the simulated GPUs' power from the engines' load every `GpuSim::tick` until `cancel`
/// fires (at once without GPUs). Late ticks are delayed, not bunched: the energy integrates over
/// the real time between ticks whatever it was.
async fn gpu_ticks(shared: Arc<Shared>, cancel: CancellationToken) {
    let Some(fleet) = shared.gpus.as_ref() else {
        return;
    };
    let mut every = tokio::time::interval(fleet.cfg.tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = every.tick() => fleet.tick(&shared.running_per_engine()),
        }
    }
}

/// A simulator running on its own thread.
pub struct SimHandle {
    addrs: Vec<SocketAddr>,
    scheme: &'static str,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimHandle {
    /// Base URL of server 0, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        self.urls().remove(0)
    }

    /// Base URLs of every server.
    pub fn urls(&self) -> Vec<String> {
        self.addrs
            .iter()
            .map(|a| format!("{}://{a}", self.scheme))
            .collect()
    }

    /// The served model name.
    pub fn model(&self) -> &str {
        &self.shared.cfg.model
    }

    /// Totals over every engine: (drafts, draft tokens, accepted, generation tokens).
    pub fn totals(&self) -> SimTotals {
        let sum = |f: fn(&EngineCounters) -> &AtomicU64| {
            self.shared.engines.iter().map(|e| f(e).load(Relaxed)).sum()
        };
        SimTotals {
            drafts: sum(|e| &e.drafts),
            draft_tokens: sum(|e| &e.draft_tokens),
            accepted: sum(|e| &e.accepted),
            generation_tokens: sum(|e| &e.generation_tokens),
            prompt_tokens: sum(|e| &e.prompt_tokens),
            requests_success: sum(|e| &e.requests_success),
            prefix_cache_queries: sum(|e| &e.prefix_cache_queries),
            prefix_cache_hits: sum(|e| &e.prefix_cache_hits),
            running: sum(|e| &e.running),
            waiting: self.shared.sched.iter().map(|s| s.waiting() as u64).sum(),
        }
    }

    /// The truth per `--acceptance-group` rule, summed over every engine: one entry per rule in
    /// the rules' order, then the requests matching none under the group `""`. Counted from the
    /// same emissions as [`SimHandle::totals`], so the entries add up to its speculative counts.
    /// Empty without rules.
    pub fn group_totals(&self) -> Vec<GroupTotals> {
        let rules = &self.shared.cfg.acceptance_groups;
        let names = rules.iter().map(|g| g.text.as_str()).chain([""]);
        let slots = self.shared.engines.first().map_or(0, |e| e.groups.len());
        names
            .take(slots)
            .enumerate()
            .map(|(i, group)| {
                let sum = |f: fn(&GroupCounters) -> &AtomicU64| -> u64 {
                    self.shared
                        .engines
                        .iter()
                        .map(|e| f(&e.groups[i]).load(Relaxed))
                        .sum()
                };
                GroupTotals {
                    group: group.to_owned(),
                    drafts: sum(|g| &g.drafts),
                    draft_tokens: sum(|g| &g.draft_tokens),
                    accepted: sum(|g| &g.accepted),
                }
            })
            .collect()
    }

    /// How the first `record_requests` requests were admitted, in admission order.
    pub fn admissions(&self) -> Vec<Admission> {
        self.shared
            .admissions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The request bodies kept (`SimConfig::record_requests`), in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Completion requests that arrived over HTTP/2.
    pub fn http2_requests(&self) -> u64 {
        self.shared.http2_requests.load(Relaxed)
    }

    /// Completion requests refused 429 by the admission limit (`SimConfig::rate_limit`).
    pub fn rate_limited(&self) -> u64 {
        self.shared.rate_limited.load(Relaxed)
    }

    /// Emission lateness so far.
    pub fn lateness(&self) -> LatenessStats {
        lateness_stats(&self.shared)
    }

    /// Server 0's DCGM exporter page, `http://…/dcgm/metrics`; `None` without `SimConfig::gpus`.
    pub fn dcgm_url(&self) -> Option<String> {
        self.shared
            .gpus
            .as_ref()
            .map(|_| format!("{}/dcgm/metrics", self.url()))
    }

    /// Simulated GPUs, dropped ones included (indices stay); 0 without `SimConfig::gpus`.
    pub fn gpu_count(&self) -> u32 {
        self.shared.gpus.as_ref().map_or(0, |f| f.cfg.count)
    }

    /// The energy GPU `gpu` drew between two instants (Unix seconds, the wall clock the client
    /// stamps with), J: the exact integral of its simulated power, interpolated within ticks, the
    /// same function its page's `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` samples at each scrape.
    /// Nothing before the start; nothing after a dropped GPU's drop. `None` without GPUs, for no
    /// such GPU, `from > to`, a `to` still in the future (a dropped GPU's is known), or a `from`
    /// before the hour of history kept.
    pub fn gpu_energy_j(&self, gpu: u32, from_unix_s: f64, to_unix_s: f64) -> Option<f64> {
        if from_unix_s.is_nan() || to_unix_s.is_nan() || from_unix_s > to_unix_s {
            return None;
        }
        let fleet = self.shared.gpus.as_ref()?;
        let to = fleet.energy_at(gpu, unix_s_to_ns(to_unix_s))?;
        let from = fleet.energy_at(gpu, unix_s_to_ns(from_unix_s))?;
        Some(to - from)
    }

    /// GPU `gpu`'s simulated power at an instant (Unix seconds), W: the value held since the tick
    /// before it, as the page showed then. `None` without GPUs, for no such GPU, an instant in
    /// the future, before the start or the history kept, or from the GPU's drop on.
    pub fn gpu_power_w(&self, gpu: u32, unix_s: f64) -> Option<f64> {
        if unix_s.is_nan() {
            return None;
        }
        self.shared
            .gpus
            .as_ref()?
            .power_at(gpu, unix_s_to_ns(unix_s))
    }
}

/// Counter totals across every engine of a simulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimTotals {
    /// `vllm:spec_decode_num_drafts_total`.
    pub drafts: u64,
    /// `vllm:spec_decode_num_draft_tokens_total`.
    pub draft_tokens: u64,
    /// `vllm:spec_decode_num_accepted_tokens_total`.
    pub accepted: u64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: u64,
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: u64,
    /// `vllm:request_success_total`.
    pub requests_success: u64,
    /// `vllm:prefix_cache_queries_total`.
    pub prefix_cache_queries: u64,
    /// `vllm:prefix_cache_hits_total`.
    pub prefix_cache_hits: u64,
    /// `vllm:num_requests_running`, now.
    pub running: u64,
    /// `vllm:num_requests_waiting`, now.
    pub waiting: u64,
}

/// One acceptance group's truth (`specperf_sim:group_spec_decode_*` on the vLLM page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupTotals {
    /// The rule's text, or `""` for the requests matching no rule.
    pub group: String,
    /// Verify steps (`vllm:spec_decode_num_drafts_total`'s share).
    pub drafts: u64,
    /// Draft tokens proposed.
    pub draft_tokens: u64,
    /// Draft tokens accepted (bonus excluded).
    pub accepted: u64,
}

impl GroupTotals {
    /// Mean acceptance length, `1 + accepted / drafts`; `None` before any step.
    pub fn acceptance_length(&self) -> Option<f64> {
        (self.drafts > 0).then(|| 1.0 + self.accepted as f64 / self.drafts as f64)
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tls_acceptor(files: &super::TlsFiles) -> Result<tokio_rustls::TlsAcceptor, SimError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| SimError::Tls(format!("{}: {e}", files.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| SimError::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The kernel completes the handshakes of a burst past `TcpListener::bind`'s 128 while
    /// nothing accepts: the burst waits in the queue, not in the clients' SYN retransmissions.
    #[tokio::test]
    async fn a_burst_of_connections_past_128_is_queued_while_nothing_accepts() {
        const BURST: usize = 300;
        let cap = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        if let Some(cap) = cap.filter(|c| *c <= BURST) {
            eprintln!("skipped: net.core.somaxconn is {cap}, which caps any backlog under {BURST}");
            return;
        }
        let listener = super::listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::with_capacity(BURST);
        for i in 0..BURST {
            let connect = tokio::net::TcpStream::connect(addr);
            match tokio::time::timeout(Duration::from_secs(3), connect).await {
                Ok(Ok(stream)) => held.push(stream),
                other => panic!("connection {i} of {BURST} did not complete: {other:?}"),
            }
        }
    }
}
