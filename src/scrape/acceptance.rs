//! Speculative-decoding counters -> acceptance length over a window.
//!
//! Pure functions: a parsed page becomes a [`Snapshot`] of the counters that matter (per engine
//! family, series keyed by name and sorted labels); two snapshots per endpoint become per-series
//! increases with Prometheus `increase()` reset semantics (never extrapolated); increases are
//! summed over every series of every endpoint first, then divided (`speculative-metrics.md` §1,
//! §3, §4). The formulas per engine are those of §2.7; validation is §5.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::prom::{Page, Sample};

/// Which engine's counters to read; `auto` detects it from the page.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SpecEngine {
    /// Detect from the metric families present.
    #[default]
    Auto,
    /// vLLM v1 (also Dynamo vLLM workers and llm-d pods).
    Vllm,
    /// SGLang (also Dynamo SGLang workers).
    Sglang,
    /// TensorRT-LLM (`/prometheus/metrics` counters or `/metrics` JSON iteration stats).
    Trtllm,
    /// ATOM (ROCm).
    Atom,
}

impl SpecEngine {
    fn name(self) -> &'static str {
        match self {
            SpecEngine::Auto => "auto",
            SpecEngine::Vllm => "vllm",
            SpecEngine::Sglang => "sglang",
            SpecEngine::Trtllm => "trtllm",
            SpecEngine::Atom => "atom",
        }
    }
}

/// The counters and gauges acceptance is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Metric {
    VllmDrafts,
    VllmDraftTokens,
    VllmAccepted,
    VllmAcceptedPerPos,
    SglGeneration,
    SglVerify,
    SglRequests,
    SglAlGauge,
    TrtDraftTokens,
    TrtAccepted,
    TrtDraftedPerPos,
    TrtAcceptedPerPos,
    TrtAlGauge,
    AtomDraftTokens,
    AtomAccepted,
    AtomSteps,
}

impl Metric {
    fn engine(self) -> SpecEngine {
        use Metric::*;
        match self {
            VllmDrafts | VllmDraftTokens | VllmAccepted | VllmAcceptedPerPos => SpecEngine::Vllm,
            SglGeneration | SglVerify | SglRequests | SglAlGauge => SpecEngine::Sglang,
            TrtDraftTokens | TrtAccepted | TrtDraftedPerPos | TrtAcceptedPerPos | TrtAlGauge => {
                SpecEngine::Trtllm
            }
            AtomDraftTokens | AtomAccepted | AtomSteps => SpecEngine::Atom,
        }
    }

    fn is_gauge(self) -> bool {
        matches!(self, Metric::SglAlGauge | Metric::TrtAlGauge)
    }

    /// Counters that only make sense with an engine's spec decoding on (SGLang's generation and
    /// request counters exist without it, so they do not identify a speculative server).
    fn marks_spec(self) -> bool {
        !matches!(self, Metric::SglGeneration | Metric::SglRequests)
    }

    /// The label that splits a counter by draft position, if any.
    fn position_label(self) -> Option<&'static str> {
        match self {
            Metric::VllmAcceptedPerPos => Some("position"),
            Metric::TrtDraftedPerPos | Metric::TrtAcceptedPerPos => Some("token_position"),
            Metric::AtomSteps => Some("accepted_tokens"),
            _ => None,
        }
    }
}

/// Sample names per metric. TensorRT-LLM is seen with `trtllm_`, `trtllm:` (older Dynamo docs)
/// and no prefix (1.1.0rc5); each counter in 0.0.4 and OpenMetrics carries `_total`.
const NAMES: &[(&str, Metric)] = &[
    ("vllm:spec_decode_num_drafts_total", Metric::VllmDrafts),
    (
        "vllm:spec_decode_num_draft_tokens_total",
        Metric::VllmDraftTokens,
    ),
    (
        "vllm:spec_decode_num_accepted_tokens_total",
        Metric::VllmAccepted,
    ),
    (
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        Metric::VllmAcceptedPerPos,
    ),
    ("sglang:generation_tokens_total", Metric::SglGeneration),
    ("sglang:spec_verify_calls_total", Metric::SglVerify),
    ("sglang:num_requests_total", Metric::SglRequests),
    ("sglang:spec_accept_length", Metric::SglAlGauge),
    (
        "trtllm_spec_decode_num_draft_tokens_total",
        Metric::TrtDraftTokens,
    ),
    (
        "trtllm_spec_decode_num_accepted_tokens_total",
        Metric::TrtAccepted,
    ),
    (
        "trtllm_spec_decode_drafted_tokens_total",
        Metric::TrtDraftedPerPos,
    ),
    (
        "trtllm_spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("trtllm_spec_decode_acceptance_length", Metric::TrtAlGauge),
    (
        "trtllm:spec_decode_num_draft_tokens_total",
        Metric::TrtDraftTokens,
    ),
    (
        "trtllm:spec_decode_num_accepted_tokens_total",
        Metric::TrtAccepted,
    ),
    (
        "trtllm:spec_decode_drafted_tokens_total",
        Metric::TrtDraftedPerPos,
    ),
    (
        "trtllm:spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("trtllm:spec_decode_acceptance_length", Metric::TrtAlGauge),
    ("spec_decode_num_draft_tokens_total", Metric::TrtDraftTokens),
    ("spec_decode_num_accepted_tokens_total", Metric::TrtAccepted),
    ("spec_decode_drafted_tokens_total", Metric::TrtDraftedPerPos),
    (
        "spec_decode_accepted_tokens_total",
        Metric::TrtAcceptedPerPos,
    ),
    ("spec_decode_acceptance_length", Metric::TrtAlGauge),
    ("atom:mtp_draft_tokens_total", Metric::AtomDraftTokens),
    ("atom:mtp_accepted_tokens_total", Metric::AtomAccepted),
    ("atom:mtp_decode_steps_total", Metric::AtomSteps),
];

/// What a sample name means to us.
#[derive(Clone, Copy)]
enum Role {
    Value(Metric),
    Created(Metric),
}

struct NameTables {
    exact: HashMap<&'static str, Role>,
    /// Same with `:` written as `_` (prometheus_client's default OpenMetrics escaping).
    normalised: HashMap<String, Role>,
}

fn tables() -> &'static NameTables {
    static T: OnceLock<NameTables> = OnceLock::new();
    T.get_or_init(|| {
        let mut exact = HashMap::new();
        let mut normalised = HashMap::new();
        for &(name, m) in NAMES {
            exact.insert(name, Role::Value(m));
            normalised.insert(name.replace(':', "_"), Role::Value(m));
            if let Some(base) = name.strip_suffix("_total") {
                let created: &'static str = Box::leak(format!("{base}_created").into_boxed_str());
                exact.insert(created, Role::Created(m));
                normalised.insert(created.replace(':', "_"), Role::Created(m));
            }
        }
        NameTables { exact, normalised }
    })
}

/// One series: which metric, and its labels (sorted).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SeriesKey {
    pub(crate) metric: Metric,
    pub(crate) labels: Vec<(String, String)>,
}

impl SeriesKey {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn position(&self) -> Option<u32> {
        self.metric
            .position_label()
            .and_then(|l| self.label(l))
            .and_then(|v| v.parse().ok())
    }

    /// The data-parallel engine a series belongs to, for the per-engine breakdown.
    fn engine_label(&self) -> Option<&str> {
        self.label("engine").or_else(|| self.label("dp_rank"))
    }

    fn describe(&self) -> String {
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{:?}{{{}}}", self.metric, labels.join(","))
    }
}

/// The acceptance-relevant content of one page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub(crate) values: BTreeMap<SeriesKey, f64>,
    pub(crate) created: BTreeMap<SeriesKey, f64>,
    pub(crate) process_start: Option<f64>,
    /// Names matched only after writing `:` as `_`.
    pub(crate) name_normalised: bool,
}

impl Snapshot {
    /// Keeps the spec-decoding series of a parsed page.
    pub fn from_page(page: &Page) -> Snapshot {
        let t = tables();
        let mut snap = Snapshot::default();
        let mut any_exact = false;
        for s in &page.samples {
            if s.name == "process_start_time_seconds" {
                snap.process_start = Some(s.value);
            } else if let Some(&role) = t.exact.get(s.name.as_str()) {
                any_exact = true;
                snap.insert(role, s);
            }
        }
        if !any_exact {
            // Only when no colon name is present at all: a page never mixes the two spellings.
            for s in &page.samples {
                if let Some(&role) = t.normalised.get(s.name.as_str()) {
                    snap.name_normalised = true;
                    snap.insert(role, s);
                }
            }
        }
        snap
    }

    fn insert(&mut self, role: Role, s: &Sample) {
        let (map, metric) = match role {
            Role::Value(m) => (&mut self.values, m),
            Role::Created(m) => (&mut self.created, m),
        };
        map.insert(
            SeriesKey {
                metric,
                labels: s.labels.clone(),
            },
            s.value,
        );
    }

    /// Engine families with speculative counters on this page.
    fn engines(&self) -> BTreeSet<SpecEngine> {
        self.values
            .keys()
            .filter(|k| k.metric.marks_spec())
            .map(|k| k.metric.engine())
            .collect()
    }

    /// Spec counters only (no gauges), for "have the counters settled" comparisons.
    pub(crate) fn counters_equal(&self, other: &Snapshot) -> bool {
        let c = |s: &Snapshot| -> Vec<(SeriesKey, u64)> {
            s.values
                .iter()
                .filter(|(k, _)| !k.metric.is_gauge())
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect()
        };
        c(self) == c(other)
    }
}

/// TensorRT-LLM JSON iteration stats summed over the polls of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IterationTotals {
    /// Entries with draft tokens that were summed.
    pub entries: u64,
    /// Σ `numAcceptedTokens`.
    pub accepted: f64,
    /// Σ `numRequestsWithDraftTokens` (verification steps).
    pub requests_with_draft: f64,
    /// Σ `numDraftTokens`.
    pub draft_tokens: f64,
}

impl IterationTotals {
    /// Adds one `/metrics` JSON answer (an array of iteration entries). Entries may be objects
    /// or JSON-encoded strings; `specDecodingStats` may be null, absent or snake_case.
    pub fn add_page(&mut self, body: &[u8]) -> Result<usize, String> {
        let v: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| format!("iteration stats are not JSON: {e}"))?;
        let serde_json::Value::Array(entries) = v else {
            return Err("iteration stats must be a JSON array".into());
        };
        let n = entries.len();
        for e in entries {
            let e = match e {
                serde_json::Value::String(s) => serde_json::from_str(&s)
                    .map_err(|err| format!("iteration entry string is not JSON: {err}"))?,
                other => other,
            };
            let stats = e
                .get("specDecodingStats")
                .or_else(|| e.get("spec_decoding_stats"));
            let Some(stats) = stats.filter(|s| s.is_object()) else {
                continue;
            };
            let num = |camel: &str, snake: &str| -> Result<f64, String> {
                match stats.get(camel).or_else(|| stats.get(snake)) {
                    None | Some(serde_json::Value::Null) => Ok(0.0),
                    Some(v) => v
                        .as_f64()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| format!("{camel} is not a non-negative number: {v}")),
                }
            };
            let draft = num("numDraftTokens", "num_draft_tokens")?;
            if draft <= 0.0 {
                continue;
            }
            self.entries += 1;
            self.draft_tokens += draft;
            self.accepted += num("numAcceptedTokens", "num_accepted_tokens")?;
            self.requests_with_draft += num(
                "numRequestsWithDraftTokens",
                "num_requests_with_draft_tokens",
            )?;
        }
        Ok(n)
    }

    pub(crate) fn add(&mut self, o: &IterationTotals) {
        self.entries += o.entries;
        self.accepted += o.accepted;
        self.requests_with_draft += o.requests_with_draft;
        self.draft_tokens += o.draft_tokens;
    }
}

/// One endpoint's view of a window.
#[derive(Clone, Debug)]
pub struct EndpointWindow {
    /// Normalised endpoint URL (part of every series key: two servers both have `engine="0"`).
    pub url: String,
    /// The page at the window's start, or why it could not be had.
    pub before: Result<Snapshot, String>,
    /// The page at the window's end, or why it could not be had.
    pub after: Result<Snapshot, String>,
    /// TensorRT-LLM JSON iteration stats polled during the window (JSON endpoints only).
    pub iterations: Option<IterationTotals>,
}

/// Status of an acceptance measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptanceStatus {
    /// AL measured (see `partial`, `approximate` and `resets`).
    Ok,
    /// The counters did not move: no drafts in the window.
    NoData,
    /// The pages carry no speculative-decoding counters.
    NoCounters,
    /// The deltas break an invariant (`reason` says which).
    Invalid,
    /// No endpoint could be read at both ends of the window.
    Unavailable,
}

/// A counter reset seen in the window (treated as `increase()` does).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResetNote {
    /// The endpoint.
    pub endpoint: String,
    /// The series, e.g. `VllmDrafts{engine="1",model_name="m"}`.
    pub series: String,
    /// `decreased`, `created_changed`, `appeared`, `vanished` or `process_restarted`.
    #[serde(deserialize_with = "reset_kind")]
    pub kind: crate::merge::StaticName,
}

fn reset_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    crate::merge::one_of(
        d,
        &[
            "decreased",
            "created_changed",
            "appeared",
            "vanished",
            "process_restarted",
        ],
    )
}

fn k_source<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    crate::merge::one_of_opt(d, &["flag", "positions"])
}

/// The numbers for one group of series (everything, one endpoint, or one engine).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// `1 + Δaccepted / Δdrafts`, or `None` with no drafts.
    pub acceptance_length: Option<f64>,
    /// `Δaccepted / Δdraft_tokens`, when draft tokens are known.
    pub acceptance_rate: Option<f64>,
    /// Δ verification steps with at least one draft token.
    pub drafts: f64,
    /// Δ accepted draft tokens (bonus token excluded).
    pub accepted_tokens: f64,
    /// Δ draft tokens proposed, when known.
    pub draft_tokens: Option<f64>,
    /// Unconditional acceptance rate per draft position, `Δaccepted_pos[i] / Δdrafts`.
    pub per_position_acceptance: Vec<f64>,
}

/// Acceptance breakdown for one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EndpointAcceptance {
    /// The endpoint.
    pub url: String,
    /// Why it is missing from the total, if it is.
    pub error: Option<String>,
    /// Its numbers (absent when `error` is set).
    #[serde(flatten)]
    pub numbers: Option<Numbers>,
}

/// Acceptance breakdown for one data-parallel engine of one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineAcceptance {
    /// The endpoint.
    pub url: String,
    /// The `engine` (vLLM) or `dp_rank` label.
    pub engine: String,
    /// Its numbers.
    #[serde(flatten)]
    pub numbers: Numbers,
}

/// Acceptance over one window, summed over every endpoint that answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Acceptance {
    /// See [`AcceptanceStatus`].
    pub status: AcceptanceStatus,
    /// Why the status is not `ok`.
    pub reason: Option<String>,
    /// The engine whose counters were read.
    pub engine: SpecEngine,
    /// Where the numbers came from, e.g. `vllm-prometheus-counters-endpoints2`.
    pub metric_source: String,
    /// The totals.
    #[serde(flatten)]
    pub numbers: Numbers,
    /// `p_i / p_(i-1)` per position (`c_0 = p_0`).
    pub conditional_acceptance: Vec<f64>,
    /// k used for validation, and where it came from.
    pub num_speculative_tokens: Option<u32>,
    /// `flag`, `positions`, or `null` when unknown.
    #[serde(deserialize_with = "k_source")]
    pub num_speculative_tokens_from: Option<crate::merge::StaticName>,
    /// Some endpoints failed: the numbers cover only the others.
    pub partial: bool,
    /// From a gauge (last-window values), not from counters: display only.
    pub approximate: bool,
    /// Metric names matched only after writing `:` as `_`.
    pub name_normalised: bool,
    /// Counter resets in the window (the deltas used `increase()` semantics).
    pub resets: Vec<ResetNote>,
    /// Checks that failed without invalidating the AL (per-position sums, non-integral counts).
    pub warnings: Vec<String>,
    /// Per-endpoint breakdown.
    pub endpoints: Vec<EndpointAcceptance>,
    /// Per-engine breakdown (data-parallel ranks), where the series carry an engine label.
    pub engines: Vec<EngineAcceptance>,
}

/// How to read the counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct AcceptanceOptions {
    /// Engine to read, or auto-detect.
    pub engine: SpecEngine,
    /// Speculative tokens per draft (k), when known.
    pub num_spec_tokens: Option<u32>,
}

/// Per-series increases of one endpoint.
struct EndpointDeltas {
    deltas: BTreeMap<SeriesKey, f64>,
    gauges: Vec<f64>,
}

fn increases(
    url: &str,
    before: &Snapshot,
    after: &Snapshot,
    resets: &mut Vec<ResetNote>,
) -> EndpointDeltas {
    let restarted = matches!((before.process_start, after.process_start),
        (Some(a), Some(b)) if a != b);
    let mut deltas = BTreeMap::new();
    let mut gauges = Vec::new();
    let mut note = |key: &SeriesKey, kind: &'static str| {
        resets.push(ResetNote {
            endpoint: url.to_owned(),
            series: key.describe(),
            kind,
        })
    };
    for (key, &new) in &after.values {
        if key.metric.is_gauge() {
            if !new.is_nan() {
                gauges.push(new);
            }
            continue;
        }
        if new.is_nan() {
            continue;
        }
        let delta = match before.values.get(key) {
            None => {
                note(key, "appeared");
                new
            }
            Some(old) if old.is_nan() => continue,
            Some(&old) => {
                if restarted {
                    note(key, "process_restarted");
                    new
                } else if new < old {
                    note(key, "decreased");
                    new
                } else if before.created.get(key) != after.created.get(key)
                    && before.created.contains_key(key)
                    && after.created.contains_key(key)
                {
                    note(key, "created_changed");
                    new
                } else {
                    new - old
                }
            }
        };
        deltas.insert(key.clone(), delta);
    }
    for key in before.values.keys() {
        if !key.metric.is_gauge() && !after.values.contains_key(key) {
            note(key, "vanished");
        }
    }
    EndpointDeltas { deltas, gauges }
}

/// Sums per metric (and per position) over a set of series.
#[derive(Default)]
struct Sums {
    by_metric: BTreeMap<Metric, f64>,
    by_position: BTreeMap<(Metric, u32), f64>,
    present: BTreeSet<Metric>,
}

impl Sums {
    fn add(&mut self, key: &SeriesKey, v: f64) {
        *self.by_metric.entry(key.metric).or_default() += v;
        self.present.insert(key.metric);
        if let Some(p) = key.position() {
            *self.by_position.entry((key.metric, p)).or_default() += v;
        }
    }

    fn get(&self, m: Metric) -> f64 {
        self.by_metric.get(&m).copied().unwrap_or(0.0)
    }

    fn has(&self, m: Metric) -> bool {
        self.present.contains(&m)
    }

    fn positions(&self, m: Metric) -> Vec<f64> {
        let max = self
            .by_position
            .keys()
            .filter(|(mm, _)| *mm == m)
            .map(|(_, p)| *p)
            .max();
        match max {
            None => Vec::new(),
            Some(max) => (0..=max)
                .map(|p| self.by_position.get(&(m, p)).copied().unwrap_or(0.0))
                .collect(),
        }
    }
}

/// Which formula produced the numbers (becomes the `metric_source` suffix).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Formula {
    Counters,
    FixedK,
    SglExact,
    SglUncorrected,
    TrtPerPosition,
    TrtJson,
    Gauge,
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

/// Applies the engine's formula to summed increases.
fn numbers(
    engine: SpecEngine,
    s: &Sums,
    iterations: Option<&IterationTotals>,
    k: Option<u32>,
) -> Result<(Numbers, Formula), String> {
    let kf = k.map(f64::from);
    let with = |drafts: f64, accepted: f64, draft_tokens: Option<f64>, per_pos: Vec<f64>| Numbers {
        acceptance_length: ratio(accepted, drafts).map(|r| 1.0 + r),
        acceptance_rate: draft_tokens.and_then(|d| ratio(accepted, d)),
        drafts,
        accepted_tokens: accepted,
        draft_tokens,
        per_position_acceptance: per_pos.iter().filter_map(|p| ratio(*p, drafts)).collect(),
    };
    match engine {
        SpecEngine::Vllm => {
            let accepted = s.get(Metric::VllmAccepted);
            let tokens = s
                .has(Metric::VllmDraftTokens)
                .then(|| s.get(Metric::VllmDraftTokens));
            if s.has(Metric::VllmDrafts) {
                let per_pos = s.positions(Metric::VllmAcceptedPerPos);
                Ok((
                    with(s.get(Metric::VllmDrafts), accepted, tokens, per_pos),
                    Formula::Counters,
                ))
            } else {
                // Early v1 builds have no drafts counter: with a fixed k, drafts = tokens / k.
                let (Some(k), Some(t)) = (kf, tokens) else {
                    return Err(
                        "vLLM page has no spec_decode_num_drafts counter; the fixed-k \
                         fallback needs --num-spec-tokens"
                            .into(),
                    );
                };
                Ok((with(t / k, accepted, tokens, Vec::new()), Formula::FixedK))
            }
        }
        SpecEngine::Sglang => {
            if !s.has(Metric::SglVerify) || !s.has(Metric::SglGeneration) {
                return Err("SGLang page lacks sglang:spec_verify_calls_total or \
                     sglang:generation_tokens_total"
                    .into());
            }
            let gen = s.get(Metric::SglGeneration);
            let verify = s.get(Metric::SglVerify);
            // Each request's first token comes from prefill, not from a verify step.
            let (first_tokens, formula) = if s.has(Metric::SglRequests) {
                (s.get(Metric::SglRequests), Formula::SglExact)
            } else {
                (0.0, Formula::SglUncorrected)
            };
            let accepted = gen - first_tokens - verify;
            Ok((
                with(verify, accepted, kf.map(|k| k * verify), Vec::new()),
                formula,
            ))
        }
        SpecEngine::Trtllm => {
            let tokens = s
                .has(Metric::TrtDraftTokens)
                .then(|| s.get(Metric::TrtDraftTokens));
            if s.has(Metric::TrtAcceptedPerPos) && s.has(Metric::TrtDraftedPerPos) {
                let drafted = s.positions(Metric::TrtDraftedPerPos);
                let drafts = drafted.first().copied().unwrap_or(0.0);
                let per_pos = s.positions(Metric::TrtAcceptedPerPos);
                let accepted = per_pos.iter().sum();
                let mut n = with(drafts, accepted, tokens, per_pos);
                n.acceptance_rate = tokens.and_then(|t| ratio(s.get(Metric::TrtAccepted), t));
                return Ok((n, Formula::TrtPerPosition));
            }
            if let Some(it) = iterations.filter(|it| it.entries > 0) {
                let drafts = it.requests_with_draft;
                return Ok((
                    with(drafts, it.accepted, Some(it.draft_tokens), Vec::new()),
                    Formula::TrtJson,
                ));
            }
            match (kf, tokens) {
                (Some(k), Some(t)) if s.has(Metric::TrtAccepted) => Ok((
                    with(t / k, s.get(Metric::TrtAccepted), tokens, Vec::new()),
                    Formula::FixedK,
                )),
                _ if iterations.is_some() => Err(
                    "TensorRT-LLM iteration stats had no entries with draft tokens (is \
                     enable_iter_perf_stats on, and is specperf the only poller?)"
                        .into(),
                ),
                _ => Err(
                    "TensorRT-LLM page has no per-position counters; the fixed-k \
                     fallback needs --num-spec-tokens"
                        .into(),
                ),
            }
        }
        SpecEngine::Atom => {
            let buckets = s.positions(Metric::AtomSteps);
            let steps: f64 = buckets.iter().sum();
            let accepted = s.get(Metric::AtomAccepted);
            let weighted: f64 = buckets.iter().enumerate().map(|(n, c)| n as f64 * c).sum();
            if (weighted - accepted).abs() > 0.5 {
                return Err(format!(
                    "invalid deltas: Σ n·Δsteps{{accepted_tokens=n}} = {weighted} but \
                     Δaccepted = {accepted}"
                ));
            }
            // p_i = share of steps that accepted more than i tokens.
            let kk = buckets.len().saturating_sub(1);
            let per_pos = (0..kk).map(|i| buckets[i + 1..].iter().sum()).collect();
            let tokens = s
                .has(Metric::AtomDraftTokens)
                .then(|| s.get(Metric::AtomDraftTokens));
            Ok((with(steps, accepted, tokens, per_pos), Formula::Counters))
        }
        SpecEngine::Auto => Err("engine not resolved".into()),
    }
}

fn gauge_numbers(gauges: &[f64]) -> Option<Numbers> {
    if gauges.is_empty() {
        return None;
    }
    Some(Numbers {
        acceptance_length: Some(gauges.iter().sum::<f64>() / gauges.len() as f64),
        ..Numbers::default()
    })
}

fn source(engine: SpecEngine, formula: Formula, endpoints: usize) -> String {
    let e = engine.name();
    match formula {
        Formula::Counters | Formula::TrtPerPosition => {
            format!("{e}-prometheus-counters-endpoints{endpoints}")
        }
        Formula::FixedK => format!("{e}-prometheus-counters-endpoints{endpoints}-fixed-k"),
        Formula::SglExact => format!(
            "sglang-prometheus-generation-counter+verify-counter+requests-counter-endpoints{endpoints}"
        ),
        Formula::SglUncorrected => format!(
            "sglang-prometheus-generation-counter+verify-counter-endpoints{endpoints}-uncorrected"
        ),
        Formula::TrtJson => format!("trtllm-json-iteration-stats-endpoints{endpoints}"),
        Formula::Gauge => format!("{e}-prometheus-gauge-endpoints{endpoints}-approximate"),
    }
}

/// Computes acceptance over a window from every endpoint's two snapshots.
pub fn evaluate(windows: &[EndpointWindow], opts: AcceptanceOptions) -> Acceptance {
    let mut resets = Vec::new();
    let mut endpoints = Vec::new();
    let mut usable: Vec<(usize, EndpointDeltas)> = Vec::new();
    let mut name_normalised = false;
    let mut present = BTreeSet::new();
    let mut iterations: Option<IterationTotals> = None;
    for (i, w) in windows.iter().enumerate() {
        match (&w.before, &w.after) {
            (Ok(b), Ok(a)) => {
                name_normalised |= a.name_normalised || b.name_normalised;
                present.extend(a.engines());
                if let Some(it) = &w.iterations {
                    iterations
                        .get_or_insert_with(IterationTotals::default)
                        .add(it);
                    if it.entries > 0 {
                        present.insert(SpecEngine::Trtllm);
                    }
                }
                usable.push((i, increases(&w.url, b, a, &mut resets)));
            }
            (Err(e), _) | (_, Err(e)) => endpoints.push(EndpointAcceptance {
                url: w.url.clone(),
                error: Some(e.clone()),
                numbers: None,
            }),
        }
    }
    let partial = !endpoints.is_empty() && !usable.is_empty();
    let mut out = Acceptance {
        status: AcceptanceStatus::Ok,
        reason: None,
        engine: opts.engine,
        metric_source: String::new(),
        numbers: Numbers::default(),
        conditional_acceptance: Vec::new(),
        num_speculative_tokens: opts.num_spec_tokens,
        num_speculative_tokens_from: opts.num_spec_tokens.map(|_| "flag"),
        partial,
        approximate: false,
        name_normalised,
        resets,
        warnings: Vec::new(),
        endpoints,
        engines: Vec::new(),
    };
    if usable.is_empty() {
        out.status = AcceptanceStatus::Unavailable;
        out.reason = Some(if windows.is_empty() {
            "no metrics endpoints configured".into()
        } else {
            "no metrics endpoint could be read at both ends of the window".into()
        });
        return out;
    }
    let engine = match opts.engine {
        SpecEngine::Auto => match present.len() {
            1 => *present.iter().next().unwrap_or(&SpecEngine::Vllm),
            0 => {
                out.status = AcceptanceStatus::NoCounters;
                out.reason = Some(
                    "no speculative-decoding counters on the metrics pages (is speculative \
                         decoding on, and are these the decode workers' endpoints?)"
                        .into(),
                );
                out.endpoints
                    .extend(usable.iter().map(|(i, _)| EndpointAcceptance {
                        url: windows[*i].url.clone(),
                        error: None,
                        numbers: None,
                    }));
                return out;
            }
            _ => {
                let names: Vec<&str> = present.iter().map(|e| e.name()).collect();
                out.status = AcceptanceStatus::Invalid;
                out.reason = Some(format!(
                    "metrics pages mix engines ({}); pass --spec-engine to choose one",
                    names.join(", ")
                ));
                return out;
            }
        },
        e => e,
    };
    out.engine = engine;

    // k: the flag, else the number of draft positions the engine exports.
    let mut total = Sums::default();
    let mut gauges = Vec::new();
    for (_, d) in &usable {
        for (k, v) in &d.deltas {
            if k.metric.engine() == engine {
                total.add(k, *v);
            }
        }
        gauges.extend(d.gauges.iter().copied());
    }
    if out.num_speculative_tokens.is_none() {
        let inferred = match engine {
            SpecEngine::Vllm => total.positions(Metric::VllmAcceptedPerPos).len(),
            SpecEngine::Trtllm => total.positions(Metric::TrtDraftedPerPos).len(),
            SpecEngine::Atom => total.positions(Metric::AtomSteps).len().saturating_sub(1),
            _ => 0,
        };
        if inferred > 0 {
            out.num_speculative_tokens = Some(inferred as u32);
            out.num_speculative_tokens_from = Some("positions");
        }
    }
    let k = out.num_speculative_tokens;

    let (nums, formula) = match numbers(engine, &total, iterations.as_ref(), k) {
        Ok(x) => x,
        Err(reason) => {
            if let Some(g) = gauge_numbers(&gauges) {
                // Gauges are last-window values: shown, flagged, never validated as counters.
                out.approximate = true;
                out.numbers = g;
                out.metric_source = source(engine, Formula::Gauge, usable.len());
                out.warnings
                    .push(format!("counters unusable ({reason}); AL from a gauge"));
                return out;
            }
            out.status = if total.by_metric.is_empty() {
                AcceptanceStatus::NoCounters
            } else {
                AcceptanceStatus::Invalid
            };
            out.reason = Some(reason);
            return out;
        }
    };
    out.metric_source = source(engine, formula, usable.len());
    out.conditional_acceptance = conditional(&nums.per_position_acceptance);
    out.numbers = nums;

    // Breakdown per endpoint and per engine label.
    for (i, d) in &usable {
        let mut sums = Sums::default();
        let mut by_engine: BTreeMap<String, Sums> = BTreeMap::new();
        for (key, v) in &d.deltas {
            if key.metric.engine() != engine {
                continue;
            }
            sums.add(key, *v);
            if let Some(e) = key.engine_label() {
                by_engine.entry(e.to_owned()).or_default().add(key, *v);
            }
        }
        let url = &windows[*i].url;
        let own_iterations = windows[*i].iterations.as_ref();
        let numbers_or_err = numbers(engine, &sums, own_iterations, k);
        out.endpoints.push(match numbers_or_err {
            Ok((n, _)) => EndpointAcceptance {
                url: url.clone(),
                error: None,
                numbers: Some(n),
            },
            Err(e) => EndpointAcceptance {
                url: url.clone(),
                error: Some(e),
                numbers: None,
            },
        });
        for (label, s) in by_engine {
            if let Ok((n, _)) = numbers(engine, &s, None, k) {
                out.engines.push(EngineAcceptance {
                    url: url.clone(),
                    engine: label,
                    numbers: n,
                });
            }
        }
    }
    validate(&mut out);
    out
}

fn conditional(p: &[f64]) -> Vec<f64> {
    p.iter()
        .enumerate()
        .map(|(i, &pi)| {
            if i == 0 {
                pi
            } else if p[i - 1] > 0.0 {
                pi / p[i - 1]
            } else {
                0.0
            }
        })
        .collect()
}

/// `speculative-metrics.md` §5: invariants that make a window invalid, and softer warnings.
fn validate(out: &mut Acceptance) {
    let n = &out.numbers;
    let mut values = vec![n.drafts, n.accepted_tokens];
    values.extend(n.draft_tokens);
    if values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return invalid(
            out,
            format!(
                "counter increases must be finite and non-negative (drafts {}, accepted {}, draft \
             tokens {:?})",
                n.drafts, n.accepted_tokens, n.draft_tokens
            ),
        );
    }
    if n.drafts <= 0.0 {
        out.status = AcceptanceStatus::NoData;
        out.reason = Some("no drafts in the window: speculative decoding inactive".into());
        return;
    }
    if let Some(k) = out.num_speculative_tokens.map(f64::from) {
        if n.accepted_tokens > k * n.drafts {
            return invalid(
                out,
                format!(
                    "accepted tokens {} exceed k × drafts = {k} × {}",
                    n.accepted_tokens, n.drafts
                ),
            );
        }
        if let Some(t) = n.draft_tokens {
            if t > k * n.drafts + 0.5 {
                return invalid(
                    out,
                    format!("draft tokens {t} exceed k × drafts = {k} × {}", n.drafts),
                );
            }
        }
    }
    if let Some(t) = n.draft_tokens {
        if n.accepted_tokens > t {
            return invalid(
                out,
                format!(
                    "accepted tokens {} exceed draft tokens {t}",
                    n.accepted_tokens
                ),
            );
        }
    }
    if let (Some(al), Some(k)) = (n.acceptance_length, out.num_speculative_tokens) {
        if !(1.0..=f64::from(k) + 1.0).contains(&al) {
            return invalid(out, format!("AL {al} outside 1..={}", k + 1));
        }
    }
    let p = &n.per_position_acceptance;
    if !p.is_empty() {
        let sum: f64 = p.iter().sum::<f64>() * n.drafts;
        if (sum - n.accepted_tokens).abs() > 0.5 {
            out.warnings.push(format!(
                "per-position accepted tokens sum to {sum}, not Δaccepted {}",
                n.accepted_tokens
            ));
        }
        if p.windows(2).any(|w| w[1] > w[0] + 1e-12) {
            out.warnings
                .push("per-position acceptance increases with position".into());
        }
    }
    if [n.drafts, n.accepted_tokens]
        .iter()
        .chain(n.draft_tokens.iter())
        .any(|v| v.fract() != 0.0)
    {
        out.warnings
            .push("counter increases are not integers".into());
    }
}

fn invalid(out: &mut Acceptance, reason: String) {
    out.status = AcceptanceStatus::Invalid;
    out.reason = Some(format!("invalid deltas: {reason}"));
}

#[cfg(test)]
mod tests {
    use super::super::prom::{parse, Format};
    use super::*;

    fn fixture(name: &str) -> String {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/prometheus");
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    fn snap_text(text: &str) -> Snapshot {
        let format = if text.contains("# EOF") {
            Format::OpenMetrics
        } else {
            Format::Text
        };
        Snapshot::from_page(&parse(text, format).unwrap())
    }

    fn snap(name: &str) -> Snapshot {
        snap_text(&fixture(name))
    }

    fn window(url: &str, before: Snapshot, after: Snapshot) -> EndpointWindow {
        EndpointWindow {
            url: url.into(),
            before: Ok(before),
            after: Ok(after),
            iterations: None,
        }
    }

    fn eval(windows: &[EndpointWindow], k: Option<u32>) -> Acceptance {
        evaluate(
            windows,
            AcceptanceOptions {
                engine: SpecEngine::Auto,
                num_spec_tokens: k,
            },
        )
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn vllm_pair_sums_series_then_divides() {
        let a = eval(
            &[window(
                "http://h:8000/metrics",
                snap("vllm_2engines_before.prom"),
                snap("vllm_2engines_after.prom"),
            )],
            None,
        );
        assert_eq!(a.status, AcceptanceStatus::Ok, "{:?}", a.reason);
        assert_eq!(a.engine, SpecEngine::Vllm);
        assert_eq!(a.metric_source, "vllm-prometheus-counters-endpoints1");
        let n = &a.numbers;
        assert_eq!((n.drafts, n.accepted_tokens), (93_600.0, 139_464.0));
        assert_eq!(n.draft_tokens, Some(280_800.0));
        assert!(close(n.acceptance_length.unwrap(), 2.49, 1e-12));
        assert!(close(
            n.acceptance_rate.unwrap(),
            139_464.0 / 280_800.0,
            1e-12
        ));
        let want = [0.735363, 0.481624, 0.273013];
        for (p, w) in n.per_position_acceptance.iter().zip(want) {
            assert!(close(*p, w, 5e-7), "{p} vs {w}");
        }
        assert_eq!(a.num_speculative_tokens, Some(3));
        assert_eq!(a.num_speculative_tokens_from, Some("positions"));
        assert!(a.resets.is_empty() && a.warnings.is_empty() && !a.partial);
        let per_engine: Vec<f64> = a
            .engines
            .iter()
            .map(|e| e.numbers.acceptance_length.unwrap())
            .collect();
        assert!(close(per_engine[0], 2.492083, 5e-7) && close(per_engine[1], 2.487807, 5e-7));
        assert_eq!(a.endpoints.len(), 1);
        assert!(close(
            a.conditional_acceptance[1],
            0.481624 / 0.735363,
            1e-5
        ));
    }

    #[test]
    fn after_page_alone_is_not_the_window() {
        let a = eval(
            &[window(
                "u",
                Snapshot::default(),
                snap("vllm_2engines_after.prom"),
            )],
            None,
        );
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.488015, 5e-7));
        assert!(a.resets.iter().all(|r| r.kind == "appeared") && !a.resets.is_empty());
    }

    #[test]
    fn openmetrics_pages_and_underscored_names_give_the_same_al() {
        let before = snap("vllm_2engines_before.openmetrics.txt");
        let a = eval(
            &[window(
                "u",
                before.clone(),
                snap("vllm_2engines_after.openmetrics.txt"),
            )],
            None,
        );
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert!(!a.name_normalised);
        let b = eval(
            &[window(
                "u",
                before,
                snap("vllm_2engines_after.openmetrics-underscores.txt"),
            )],
            None,
        );
        assert!(close(b.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert!(b.name_normalised && b.resets.is_empty());
    }

    #[test]
    fn restart_mid_window_uses_increase_semantics_and_is_flagged() {
        let a = eval(
            &[window(
                "u",
                snap("vllm_2engines_before.prom"),
                snap("vllm_2engines_after_restart.prom"),
            )],
            None,
        );
        assert_eq!(a.status, AcceptanceStatus::Ok);
        assert_eq!(a.numbers.drafts, 48_900.0);
        assert_eq!(a.numbers.accepted_tokens, 72_880.0);
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.490389, 5e-7));
        assert!(a.resets.iter().any(|r| r.kind == "decreased"));
        assert!(a.resets.iter().all(|r| r.series.contains("engine=\"1\"")));
    }

    #[test]
    fn created_change_alone_is_a_reset() {
        let before = "# TYPE vllm:spec_decode_num_drafts counter\n\
            vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n\
            vllm:spec_decode_num_drafts_created{engine=\"0\"} 1.0e9\n\
            vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 10\n";
        let after = "vllm:spec_decode_num_drafts_total{engine=\"0\"} 30\n\
            vllm:spec_decode_num_drafts_created{engine=\"0\"} 2.0e9\n\
            vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 40\n";
        let a = eval(&[window("u", snap_text(before), snap_text(after))], None);
        assert_eq!(a.resets.len(), 1);
        assert_eq!(a.resets[0].kind, "created_changed");
        // drafts restart from 0 -> 30; accepted 10 -> 40 is a plain increase of 30.
        assert_eq!((a.numbers.drafts, a.numbers.accepted_tokens), (30.0, 30.0));
    }

    #[test]
    fn sglang_exact_uncorrected_and_gauge_only() {
        let (b, af) = (fixture("sglang_before.prom"), fixture("sglang_after.prom"));
        let a = eval(&[window("u", snap_text(&b), snap_text(&af))], Some(3));
        assert_eq!(a.engine, SpecEngine::Sglang);
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert_eq!(a.numbers.accepted_tokens, 77_480.0);
        assert_eq!(a.numbers.draft_tokens, Some(156_000.0));
        assert!(close(a.numbers.acceptance_rate.unwrap(), 0.496667, 5e-7));
        assert_eq!(
            a.metric_source,
            "sglang-prometheus-generation-counter+verify-counter+requests-counter-endpoints1"
        );
        let drop = |t: &str, name: &str| -> String {
            t.lines()
                .filter(|l| !l.starts_with(name))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let m1 = eval(
            &[window(
                "u",
                snap_text(&drop(&b, "sglang:num_requests_total")),
                snap_text(&drop(&af, "sglang:num_requests_total")),
            )],
            Some(3),
        );
        assert!(close(m1.numbers.acceptance_length.unwrap(), 2.491538, 5e-7));
        assert!(m1.metric_source.ends_with("-uncorrected"));
        let gauges = eval(
            &[window(
                "u",
                snap_text(&drop(&b, "sglang:spec_verify_calls_total")),
                snap_text(&drop(&af, "sglang:spec_verify_calls_total")),
            )],
            None,
        );
        assert!(gauges.approximate);
        assert!(close(
            gauges.numbers.acceptance_length.unwrap(),
            2.49,
            1e-12
        ));
        // Without speculative counters or gauges, SGLang's generation counter alone is no AL.
        let plain = drop(
            &drop(&af, "sglang:spec_verify_calls_total"),
            "sglang:spec_accept",
        );
        let none = eval(&[window("u", snap_text(&plain), snap_text(&plain))], None);
        assert_eq!(none.status, AcceptanceStatus::NoCounters);
    }

    #[test]
    fn trtllm_prometheus_per_position_then_fixed_k_never_the_gauge() {
        let page = fixture("trtllm_prometheus.prom");
        let a = eval(&[window("u", Snapshot::default(), snap_text(&page))], None);
        assert_eq!(a.engine, SpecEngine::Trtllm);
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert!(close(a.numbers.acceptance_rate.unwrap(), 0.496667, 5e-7));
        assert!(!a.approximate);
        let no_pos: String = page
            .lines()
            .filter(|l| !l.contains("token_position"))
            .map(|l| format!("{l}\n"))
            .collect();
        let fixed = eval(
            &[window("u", Snapshot::default(), snap_text(&no_pos))],
            Some(3),
        );
        assert!(close(fixed.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert!(fixed.metric_source.ends_with("-fixed-k"));
        // Without k the counters cannot give an AL; the last-iteration gauge is shown, flagged.
        let gauge = eval(
            &[window("u", Snapshot::default(), snap_text(&no_pos))],
            None,
        );
        assert!(gauge.approximate);
        assert_eq!(gauge.numbers.acceptance_length, Some(2.25));
    }

    #[test]
    fn trtllm_json_iteration_stats_weight_by_requests() {
        let mut it = IterationTotals::default();
        let n = it
            .add_page(fixture("trtllm_iteration_stats.json").as_bytes())
            .unwrap();
        assert_eq!(n, 6);
        assert_eq!(it.entries, 4);
        assert_eq!(
            (it.accepted, it.requests_with_draft, it.draft_tokens),
            (52.0, 31.0, 93.0)
        );
        let w = EndpointWindow {
            url: "http://t:8000/metrics".into(),
            before: Ok(Snapshot::default()),
            after: Ok(Snapshot::default()),
            iterations: Some(it),
        };
        let a = eval(&[w], Some(3));
        assert_eq!(a.engine, SpecEngine::Trtllm);
        assert!(close(
            a.numbers.acceptance_length.unwrap(),
            83.0 / 31.0,
            1e-12
        ));
        assert!(close(
            a.numbers.acceptance_rate.unwrap(),
            52.0 / 93.0,
            1e-12
        ));
        assert_eq!(a.metric_source, "trtllm-json-iteration-stats-endpoints1");
        // Entries as JSON strings, snake_case and null stats are tolerated.
        let mut s = IterationTotals::default();
        s.add_page(
            br#"["{\"spec_decoding_stats\":{\"num_draft_tokens\":6,\"num_accepted_tokens\":4,\"num_requests_with_draft_tokens\":2}}", {"specDecodingStats": null}]"#,
        )
        .unwrap();
        assert_eq!((s.entries, s.accepted), (1, 4.0));
        assert!(s.add_page(b"{}").is_err());
    }

    #[test]
    fn dynamo_worker_page_mixed_formatting() {
        let a = eval(
            &[window(
                "u",
                Snapshot::default(),
                snap("dynamo_vllm_decode_worker.prom"),
            )],
            None,
        );
        assert!(close(a.numbers.acceptance_length.unwrap(), 2.27, 1e-12));
        assert!(close(a.numbers.acceptance_rate.unwrap(), 0.635, 1e-12));
        assert_eq!(a.num_speculative_tokens, Some(2));
        let p = &a.numbers.per_position_acceptance;
        assert!(close(p[0], 0.74, 1e-12) && close(p[1], 0.53, 1e-12));
    }

    #[test]
    fn atom_steps_histogram() {
        let before = "atom:mtp_accepted_tokens_total 0\natom:mtp_draft_tokens_total 0\n\
            atom:mtp_decode_steps_total{accepted_tokens=\"2\"} 0\n\
            atom:mtp_decode_steps_total{accepted_tokens=\"3\"} 0\n";
        let after = format!(
            "atom:mtp_accepted_tokens_total {}\natom:mtp_draft_tokens_total 600000\n\
             atom:mtp_decode_steps_total{{accepted_tokens=\"2\"}} 46020\n\
             atom:mtp_decode_steps_total{{accepted_tokens=\"3\"}} 153980\n",
            2 * 46020 + 3 * 153980
        );
        let a = eval(&[window("u", snap_text(before), snap_text(&after))], None);
        assert_eq!(a.engine, SpecEngine::Atom);
        assert!(close(a.numbers.acceptance_length.unwrap(), 3.7699, 5e-5));
        let bad = after.replace(&format!("total {}", 2 * 46020 + 3 * 153980), "total 1");
        let e = eval(&[window("u", snap_text(before), snap_text(&bad))], None);
        assert_eq!(e.status, AcceptanceStatus::Invalid);
    }

    #[test]
    fn endpoints_sum_by_url_and_a_failed_one_makes_the_total_partial() {
        let (b, a) = (
            snap("vllm_2engines_before.prom"),
            snap("vllm_2engines_after.prom"),
        );
        let two = eval(
            &[
                window("http://a/metrics", b.clone(), a.clone()),
                window("http://b/metrics", b.clone(), a.clone()),
            ],
            None,
        );
        // Same labels on two servers are two series: the drafts double, the AL does not move.
        assert_eq!(two.numbers.drafts, 2.0 * 93_600.0);
        assert!(close(two.numbers.acceptance_length.unwrap(), 2.49, 1e-12));
        assert_eq!(two.metric_source, "vllm-prometheus-counters-endpoints2");
        assert_eq!(two.engines.len(), 4);
        let down = EndpointWindow {
            url: "http://c/metrics".into(),
            before: Ok(b.clone()),
            after: Err("no answer within 10s".into()),
            iterations: None,
        };
        let p = eval(&[window("http://a/metrics", b, a), down], None);
        assert!(p.partial);
        assert_eq!(p.numbers.drafts, 93_600.0);
        assert_eq!(p.endpoints.iter().filter(|e| e.error.is_some()).count(), 1);
        let none = eval(
            &[EndpointWindow {
                url: "x".into(),
                before: Err("refused".into()),
                after: Err("refused".into()),
                iterations: None,
            }],
            None,
        );
        assert_eq!(none.status, AcceptanceStatus::Unavailable);
    }

    #[test]
    fn validation_rejects_impossible_deltas_and_idle_windows() {
        let page = |d: u64, a: u64, t: u64| {
            snap_text(&format!(
                "vllm:spec_decode_num_drafts_total {d}\n\
                 vllm:spec_decode_num_accepted_tokens_total {a}\n\
                 vllm:spec_decode_num_draft_tokens_total {t}\n"
            ))
        };
        let zero = page(0, 0, 0);
        let idle = eval(&[window("u", zero.clone(), page(5, 5, 15))], Some(3));
        assert_eq!(idle.status, AcceptanceStatus::Ok);
        let same = eval(&[window("u", page(5, 5, 15), page(5, 5, 15))], Some(3));
        assert_eq!(same.status, AcceptanceStatus::NoData);
        let over_k = eval(&[window("u", zero.clone(), page(10, 40, 30))], Some(3));
        assert_eq!(over_k.status, AcceptanceStatus::Invalid);
        assert!(over_k.reason.unwrap().contains("exceed k"));
        let over_tokens = eval(&[window("u", zero.clone(), page(10, 25, 20))], Some(3));
        assert!(over_tokens.reason.unwrap().contains("exceed draft tokens"));
        let mixed = eval(
            &[window(
                "u",
                zero,
                snap_text(
                    "vllm:spec_decode_num_drafts_total 1\nsglang:spec_verify_calls_total 1\n",
                ),
            )],
            None,
        );
        assert!(mixed.reason.unwrap().contains("mix engines"));
    }
}
