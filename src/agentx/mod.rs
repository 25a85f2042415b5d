//! AgentX traces (InferenceX's agentic coding-agent sessions, the Weka trace format of
//! `--public-dataset semianalysis_cc_traces_weka_*`) -> reconstructed session trees.
//!
//! This is the loader the AgentX replay builds on; it sits beside `dataset` at the head of the
//! pipeline and uses nothing above it. What it does now ([`load`]):
//!
//! * reads a `traces.jsonl` (one trace per line, the Hugging Face repos' layout) or a directory
//!   of `*.json` traces (one per file, sorted by file name);
//! * validates every trace (`n`/`s` requests and `subagent` entries); a bad value is an
//!   [`AgentxError`] naming the file, the trace id, the request index and the field. Unknown keys
//!   do not fail the load (AIPerf's models forbid them; Hugging Face `datasets` may add keys):
//!   they are collected into one warning, [`Corpus::warning`];
//! * applies filter-then-cap ([`LoadOptions`]: `--max-context-length`, `--num-dataset-entries`);
//! * rebuilds each trace as a root conversation and one child conversation per subagent entry
//!   (`<trace>::sa:<agent_id>`), with the spawn/join topology (tiered joins, background
//!   branches, orphans dropped), end-to-start delays, `max_tokens`, the theoretical prefix-cache
//!   hit/total blocks counted in global time order, peak context, time bounds and the t* window.
//!
//! * splits flattened agents as AIPerf 0.13 does by default ([`SplitOptions`], `chains`): top-level
//!   requests that do not continue the main chain become children `<trace>::fa:NNN` /
//!   `::wg:G_M` / `::aux:NNN` spawned off the root, and a subagent entry's further chains become
//!   siblings `<trace>::sa:<agent_id>:fa:NNN` (...) in the subagent's branch ([`ConvKind`]).
//!
//! * fills each turn's cross-stream replay dependencies ([`Turn::after`]) inside its replay scope.
//!
//! Later slices add prompt synthesis, the lane scheduler and the `specperf profile` entry point.

mod after;
mod blocks;
mod build;
mod chains;
mod default_rng;
mod json;
mod parse;
pub mod prompt;
pub mod snapshot;
mod text;

pub use blocks::BlockIds;
pub use chains::SplitOptions;
pub use prompt::ConvRef;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a trace came from: the file, and the line for `traces.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file read.
    pub path: PathBuf,
    /// 1-based line, for one-trace-per-line files.
    pub line: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{} line {l}", self.path.display()),
            None => write!(f, "{}", self.path.display()),
        }
    }
}

/// Why a trace set does not load.
#[derive(Debug, thiserror::Error)]
pub enum AgentxError {
    /// The file or directory could not be read.
    #[error("cannot read AgentX traces {}: {source} (give a traces.jsonl or a directory of *.json traces)", path.display())]
    Io {
        /// What was read.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A trace is not JSON.
    #[error("{origin}: not a JSON trace object: {source}")]
    Json {
        /// Where.
        origin: Origin,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A field is missing or has a bad value.
    #[error("{origin}: trace {}: `{field}` {problem}", trace.as_deref().unwrap_or("(no id)"))]
    Invalid {
        /// Where.
        origin: Origin,
        /// The trace id, when the trace has a readable one.
        trace: Option<String>,
        /// The field, with its request indices: `requests[3].out`,
        /// `requests[2].requests[0].t`.
        field: String,
        /// What is wrong and what is expected.
        problem: String,
    },
    /// Two traces share an id (session ids would collide).
    #[error("{second}: trace id `{id}` was already used by {first}; trace ids must be unique")]
    DuplicateId {
        /// The id.
        id: String,
        /// Its first use.
        first: Origin,
        /// The repeat.
        second: Origin,
    },
    /// Nothing to replay.
    #[error("{}: no AgentX trace to replay ({why})", path.display())]
    Empty {
        /// The input.
        path: PathBuf,
        /// Why: no rows, or every trace over `--max-context-length`.
        why: String,
    },
    /// An `AIPERF_DATASET_WEKA_*` environment variable AIPerf would reject.
    #[error(
        "environment variable {var}={value:?}: expected {expected} (unset it for AIPerf's default)"
    )]
    Env {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What it takes.
        expected: String,
    },
    /// A trace whose reconstruction AIPerf 0.13 refuses to replay too (its loader fails).
    #[error("{origin}: trace {trace}: {why}")]
    Unreplayable {
        /// Where.
        origin: Origin,
        /// The trace id.
        trace: String,
        /// What is wrong, and what to do about it.
        why: String,
    },
    /// Trajectory start ratios out of order or range.
    #[error("trajectory start ratios {min} / {max}: need 0 <= min <= max <= 1 (InferenceX uses 0.25 / 0.75)")]
    Ratios {
        /// `--trajectory-start-min-ratio`.
        min: f64,
        /// `--trajectory-start-max-ratio`.
        max: f64,
    },
}

/// Filter-then-cap, output caps and chain splitting applied while loading (AIPerf's flags and
/// environment variables of the same names); `Default` is AIPerf's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadOptions {
    /// `--num-dataset-entries`: keep the first N eligible traces.
    pub num_dataset_entries: Option<usize>,
    /// `--max-context-length`: drop traces whose peak context exceeds it.
    pub max_context_length: Option<u64>,
    /// `--synthesis-max-osl`: caps a root turn's `max_tokens` (subagent turns are never capped).
    pub synthesis_max_osl: Option<u64>,
    /// Flattened-agent chain splitting (`AIPERF_DATASET_WEKA_*`, [`SplitOptions::from_env`]).
    pub split: SplitOptions,
}

/// `--trajectory-start-min-ratio` / `--trajectory-start-max-ratio`, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartRatios {
    min: f64,
    max: f64,
}

impl StartRatios {
    /// `--trajectory-start-min-ratio`.
    pub fn min(&self) -> f64 {
        self.min
    }

    /// `--trajectory-start-max-ratio`.
    pub fn max(&self) -> f64 {
        self.max
    }

    /// Checks `0 <= min <= max <= 1`.
    pub fn new(min: f64, max: f64) -> Result<Self, AgentxError> {
        if (0.0..=1.0).contains(&min) && (0.0..=1.0).contains(&max) && min <= max {
            Ok(StartRatios { min, max })
        } else {
            Err(AgentxError::Ratios { min, max })
        }
    }
}

/// How a request was recorded (it is replayed the same way either way; `--streaming` decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `"n"`.
    Normal,
    /// `"s"` (carries `ttft`).
    Streaming,
}

/// What the turn's new input is, for the prompt segments of a later slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A user message.
    User,
    /// A tool result (`"tool_result"` in `input_types`, or, with no types, the previous turn
    /// stopped on `tool_use`).
    ToolResult,
}

/// One request of a conversation, in replay terms.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// Recorded start, ms from the conversation start (subagent inner times made absolute).
    pub timestamp_ms: f64,
    /// End-to-start delay after the previous turn's response, ms: `max(0, (t_k - t_{k-1}) -
    /// api_time_{k-1})`; `None` for the first turn.
    pub delay_ms: Option<f64>,
    /// Recorded server time, ms.
    pub api_time_ms: Option<f64>,
    /// Recorded input tokens (`in`).
    pub input_tokens: u64,
    /// Recorded output tokens (`out`).
    pub output_tokens: u64,
    /// Sent as `max_completion_tokens`: `max(1, out)`, root turns also capped by
    /// `--synthesis-max-osl`.
    pub max_tokens: u64,
    /// KV block ids (local to the trace), stored against the conversation's other turns.
    pub hash_ids: BlockIds,
    /// Recorded model (mapped to `--model` later).
    pub model: String,
    /// Recorded transport.
    pub transport: Transport,
    /// User or tool-result input.
    pub input_kind: InputKind,
    /// Recorded stop reason (`""`, `tool_use`, `end_turn`).
    pub stop: String,
    /// Index of this request (root, flat chain) or of its subagent entry (subagent chains) in
    /// the trace's `requests`.
    pub source_outer_idx: usize,
    /// Index inside the subagent entry's `requests`, for child turns.
    pub source_inner_idx: Option<usize>,
    /// Leading `hash_ids` already seen earlier in the trace (global time order).
    pub cache_hit_blocks: u64,
    /// `hash_ids.len()`.
    pub cache_total_blocks: u64,
    /// Branches spawned when this turn returns (indices into [`Trace::branches`]).
    pub spawns: Vec<usize>,
    /// Branches that must finish before this turn is sent (indices into [`Trace::branches`]).
    pub joins: Vec<usize>,
    /// Cross-stream replay dependencies (spec §2.5): turns of other conversations of the same
    /// replay scope that must have completed before this turn is sent.
    /// One per other stream of the scope at most (the latest request that had ended by this
    /// one's recorded start), in (session id, turn) order; empty for unsplit traces.
    pub after: Vec<After>,
}

/// "Wait until turn `turn` of conversation `conv` has completed."
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct After {
    /// The conversation.
    pub conv: prompt::ConvRef,
    /// Its turn.
    pub turn: usize,
}

/// A child conversation's place: what spawns it and when its first turn goes. Every child
/// has one (subagent chains and top-level flat chains alike).
#[derive(Clone, Debug, PartialEq)]
pub struct Subagent {
    /// The subagent entry's `agent_id` (empty for a top-level flat chain).
    pub agent_id: String,
    /// `subagent_type` (empty for a top-level flat chain).
    pub subagent_type: String,
    /// Spawn time, ms: the subagent entry's `t`; a flat chain's first request.
    pub spawn_ms: f64,
    /// Recorded end, ms. A subagent (all its chains): spawn + `duration_ms`, else the last inner
    /// response, else the spawn. A flat chain: its last response end.
    pub end_ms: f64,
    /// The branch it belongs to (index into [`Trace::branches`]).
    pub branch: usize,
    /// Delay from the branch's spawn (its `start_ms`) to this child's first turn, ms:
    /// `max(0, first turn - branch start)`.
    pub first_turn_offset_ms: f64,
}

/// How an extra chain split off a request list is classified (spec §2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKind {
    /// A solo agent: `fa:NNN`.
    Agent,
    /// A member of a parallel fan-out off one request: `wg:GGG_MMM`.
    WorkerGroup {
        /// The fan-out, by earliest start.
        group: usize,
        /// The member, by start.
        member: usize,
    },
    /// A one-shot sidecar (cross-model, small fresh context, or a reduction): `aux:NNN`.
    Aux,
}

/// What a conversation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// The root: `<trace>`.
    Root,
    /// A subagent entry's main chain: `<trace>::sa:<agent_id>`.
    Subagent,
    /// A further chain of a subagent entry: `<trace>::sa:<agent_id>:fa:NNN` (etc.), in the
    /// subagent's branch.
    SubagentChain(ChainKind),
    /// A chain split off the top-level requests: `<trace>::fa:NNN` (etc.), spawned off the root.
    Flat(ChainKind),
}

impl ConvKind {
    /// AIPerf's record `source_kind`: `weka_main`, `weka_subagent` or `weka_flat`.
    pub fn source_kind(self) -> &'static str {
        match self {
            ConvKind::Root => "weka_main",
            ConvKind::Subagent | ConvKind::SubagentChain(_) => "weka_subagent",
            ConvKind::Flat(_) => "weka_flat",
        }
    }

    /// AIPerf's `agent_depth`: 0 for the root, 1 for every child (flat chains included).
    pub fn agent_depth(self) -> u32 {
        match self {
            ConvKind::Root => 0,
            _ => 1,
        }
    }
}

/// A root or child conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// `<trace>` for the root, `<trace>::sa:<agent_id>` for a subagent, with a chain suffix
    /// (`::fa:000`, `:aux:001`, ...) for a split chain ([`ConvKind`]).
    pub session_id: String,
    /// What it is.
    pub kind: ConvKind,
    /// `Some` for a child conversation.
    pub subagent: Option<Subagent>,
    /// Declared tool prefix tokens (trace-level for the root, entry-level for a subagent; a
    /// split chain has them only when its first request starts with the same declared-prefix
    /// blocks as its main chain, else 0).
    pub tool_tokens: u64,
    /// Declared system prefix tokens (same levels).
    pub system_tokens: u64,
    /// The turns, in order (never empty).
    pub turns: Vec<Turn>,
}

/// Subagents spawned by one parent turn that join on the same later turn (or none).
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    /// `<trace>:spawn:<first agent_id>` for subagents, `<trace>:flatspawn:<first chain's NNN>`
    /// for top-level flat chains.
    pub id: String,
    /// Root turn whose return spawns it (subagents: the last root turn listed before the entry;
    /// flat chains: the last root turn listed before the chain's first request, else turn 0).
    pub spawn_turn: usize,
    /// Root turn that waits for it; `None` for a background branch.
    pub join_turn: Option<usize>,
    /// Its children (indices into [`Trace::children`]).
    pub children: Vec<usize>,
    /// Earliest spawn time of its subagents (first request of its flat chains), ms; each
    /// child's first turn goes `first_turn_offset_ms` after the branch is spawned.
    pub start_ms: f64,
}

impl Branch {
    /// No later root turn waits for it; the lane stays busy until it drains.
    pub fn is_background(&self) -> bool {
        self.join_turn.is_none()
    }
}

/// Why a subagent entry is not replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Listed before any root request: nothing spawns it.
    NoPrecedingTurn,
    /// It has no requests.
    NoRequests,
}

/// A subagent entry left out of the replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Dropped {
    /// `agent_id`.
    pub agent_id: String,
    /// Index in the trace's `requests`.
    pub source_outer_idx: usize,
    /// Why.
    pub reason: DropReason,
}

/// One trace, reconstructed.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Trace id (the root session id).
    pub id: String,
    /// Where it was read.
    pub origin: Origin,
    /// `models` (informational).
    pub models: Vec<String>,
    /// Tokens per hash block.
    pub block_size: u64,
    /// The root conversation (empty turns when the trace has only subagents).
    pub root: Conversation,
    /// Child conversations: each replayed subagent entry's chains (its main chain, then its
    /// split chains) in `requests` order, then the top-level flat chains (AIPerf's order).
    pub children: Vec<Conversation>,
    /// Spawn/join groups, in order of first subagent.
    pub branches: Vec<Branch>,
    /// Subagent entries not replayed.
    pub dropped: Vec<Dropped>,
    /// Largest `in + max(1, out)` over the trace's requests as recorded (AIPerf's keep/drop
    /// test for `--max-context-length`): top-level requests with `out` capped by
    /// `--synthesis-max-osl`, every subagent request (replayed or not) uncapped.
    pub peak_context_tokens: u64,
    /// Earliest and latest turn start over the root and replayed children, ms.
    pub time_bounds_ms: (f64, f64),
}

impl Trace {
    /// The child conversation of subagent `agent_id` (`<trace>::sa:<agent_id>`).
    pub fn subagent(&self, agent_id: &str) -> Option<prompt::ConvRef> {
        let session = format!("{}::sa:{agent_id}", self.id);
        self.children
            .iter()
            .position(|c| c.session_id == session)
            .map(prompt::ConvRef::Child)
    }

    /// The root or a child conversation.
    pub fn conversation(&self, c: prompt::ConvRef) -> &Conversation {
        match c {
            prompt::ConvRef::Root => &self.root,
            prompt::ConvRef::Child(i) => &self.children[i],
        }
    }

    /// Σ hit blocks and Σ total blocks over every replayed turn (AIPerf's
    /// `theoretical_prefix_cache_hit` sum and count).
    pub fn cache_blocks(&self) -> (u64, u64) {
        std::iter::once(&self.root)
            .chain(&self.children)
            .flat_map(|c| &c.turns)
            .fold((0, 0), |(h, t), turn| {
                (h + turn.cache_hit_blocks, t + turn.cache_total_blocks)
            })
    }

    /// The window t* is drawn from, ms: `lo + min·(hi − lo)` to `lo + max·(hi − lo)`.
    pub fn t_star_window_ms(&self, ratios: StartRatios) -> (f64, f64) {
        let (lo, hi) = self.time_bounds_ms;
        let span = hi - lo;
        (lo + ratios.min * span, lo + ratios.max * span)
    }
}

/// A key the trace format does not define, ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey {
    /// Where it sits: `trace`, `request`, `subagent` or `subagent request`.
    pub level: &'static str,
    /// The key.
    pub key: String,
    /// The first trace it was seen in.
    pub first_trace: String,
    /// How many objects carry it.
    pub count: usize,
}

/// The loaded traces.
#[derive(Clone, Debug, PartialEq)]
pub struct Corpus {
    /// The traces kept, in input order.
    pub traces: Vec<Trace>,
    /// Ids dropped because their peak context exceeds `--max-context-length`.
    pub over_context: Vec<String>,
    /// Eligible traces left out by `--num-dataset-entries`.
    pub beyond_cap: usize,
    /// Keys the format does not define (ignored), sorted by level and key.
    pub unknown_keys: Vec<UnknownKey>,
}

impl Corpus {
    /// The one warning about unknown keys, if any.
    pub fn warning(&self) -> Option<String> {
        if self.unknown_keys.is_empty() {
            return None;
        }
        let keys: Vec<String> = self
            .unknown_keys
            .iter()
            .map(|k| {
                format!(
                    "{} `{}` ({}x, first in trace {})",
                    k.level, k.key, k.count, k.first_trace
                )
            })
            .collect();
        Some(format!(
            "AgentX traces: ignored keys the Weka trace format does not define: {}",
            keys.join(", ")
        ))
    }
}

/// Reads `path` (a `traces.jsonl` or a directory of `*.json` traces), validates and rebuilds
/// every trace, then applies `opts`.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Corpus, AgentxError> {
    // Read in batches of about 64 MiB of text, each parsed and rebuilt on every core: a
    // ~100k-request `traces.jsonl` (~0.5 GB) never sits in memory whole, and loads in seconds.
    let mut batches = Batches::open(path)?;
    let mut unknown = parse::Unknown::default();
    let mut seen: HashMap<String, Origin> = HashMap::new();
    let mut all = Vec::new();
    while let Some(batch) = batches.next_batch()? {
        for item in parse_batch(batch, opts) {
            let (trace, keys) = item?;
            unknown.absorb(keys);
            if let Some(first) = seen.get(&trace.id) {
                return Err(AgentxError::DuplicateId {
                    id: trace.id,
                    first: first.clone(),
                    second: trace.origin,
                });
            }
            seen.insert(trace.id.clone(), trace.origin.clone());
            all.push(trace);
        }
    }
    if all.is_empty() {
        return Err(AgentxError::Empty {
            path: path.to_path_buf(),
            why: "no traces in it".into(),
        });
    }

    let mut corpus = Corpus {
        traces: Vec::new(),
        over_context: Vec::new(),
        beyond_cap: 0,
        unknown_keys: unknown.into_keys(),
    };
    let cap = opts.num_dataset_entries.unwrap_or(usize::MAX);
    for t in all {
        if opts
            .max_context_length
            .is_some_and(|m| t.peak_context_tokens > m)
        {
            corpus.over_context.push(t.id);
        } else if corpus.traces.len() < cap {
            corpus.traces.push(t);
        } else {
            corpus.beyond_cap += 1;
        }
    }
    if corpus.traces.is_empty() {
        let why = match opts.max_context_length {
            Some(m) if !corpus.over_context.is_empty() => format!(
                "all {} traces have a peak context over --max-context-length {m}; raise it or leave it unset",
                corpus.over_context.len()
            ),
            _ => "--num-dataset-entries is 0; give at least 1".into(),
        };
        return Err(AgentxError::Empty {
            path: path.to_path_buf(),
            why,
        });
    }
    Ok(corpus)
}

/// Text to parse: the files of a directory, or the lines of a `traces.jsonl`, in batches.
enum Batches {
    Files(std::vec::IntoIter<PathBuf>),
    Lines {
        path: PathBuf,
        reader: std::io::BufReader<std::fs::File>,
        line: usize,
    },
}

/// About this much text per batch.
const BATCH_BYTES: usize = 64 << 20;

impl Batches {
    fn open(path: &Path) -> Result<Batches, AgentxError> {
        let io = |source| AgentxError::Io {
            path: path.to_path_buf(),
            source,
        };
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(io)?
                .map(|e| e.map(|e| e.path()))
                .collect::<Result<_, _>>()
                .map_err(io)?;
            files.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"));
            files.sort();
            Ok(Batches::Files(files.into_iter()))
        } else {
            let file = std::fs::File::open(path).map_err(io)?;
            Ok(Batches::Lines {
                path: path.to_path_buf(),
                reader: std::io::BufReader::with_capacity(1 << 20, file),
                line: 0,
            })
        }
    }

    /// The next batch of (where, text); `None` at the end.
    fn next_batch(&mut self) -> Result<Option<Vec<(Origin, String)>>, AgentxError> {
        use std::io::BufRead;
        let mut batch = Vec::new();
        let mut bytes = 0;
        while bytes < BATCH_BYTES {
            match self {
                Batches::Files(files) => {
                    let Some(f) = files.next() else { break };
                    let text = std::fs::read_to_string(&f).map_err(|source| AgentxError::Io {
                        path: f.clone(),
                        source,
                    })?;
                    bytes += text.len();
                    batch.push((
                        Origin {
                            path: f,
                            line: None,
                        },
                        text,
                    ));
                }
                Batches::Lines { path, reader, line } => {
                    let mut text = String::new();
                    let n = reader
                        .read_line(&mut text)
                        .map_err(|source| AgentxError::Io {
                            path: path.clone(),
                            source,
                        })?;
                    if n == 0 {
                        break;
                    }
                    *line += 1;
                    if text.trim().is_empty() {
                        continue;
                    }
                    bytes += n;
                    batch.push((
                        Origin {
                            path: path.clone(),
                            line: Some(*line),
                        },
                        text,
                    ));
                }
            }
        }
        Ok((!batch.is_empty()).then_some(batch))
    }
}

/// Parses, checks and rebuilds one batch on every core; results in input order.
fn parse_batch(
    batch: Vec<(Origin, String)>,
    opts: &LoadOptions,
) -> Vec<Result<(Trace, parse::Unknown), AgentxError>> {
    let one = |(origin, text): (Origin, String)| {
        let value: json::Json =
            serde_json::from_str(&text).map_err(|source| AgentxError::Json {
                origin: origin.clone(),
                source,
            })?;
        drop(text);
        let mut unknown = parse::Unknown::default();
        let raw = parse::trace(&value, &origin, &mut unknown)?;
        drop(value);
        Ok((build::trace(raw, origin, opts)?, unknown))
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(batch.len());
    if threads <= 1 {
        return batch.into_iter().map(one).collect();
    }
    let per = batch.len().div_ceil(threads);
    let mut parts: Vec<Vec<(Origin, String)>> = Vec::with_capacity(threads);
    let mut it = batch.into_iter();
    loop {
        let part: Vec<_> = it.by_ref().take(per).collect();
        if part.is_empty() {
            break;
        }
        parts.push(part);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| s.spawn(move || part.into_iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// The first 8 bytes of SHA-256 of `key`, big-endian: how AIPerf turns a seed string into a
/// number (t* draws, prompt block offsets).
pub(crate) fn hash64(key: &str) -> u64 {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d.as_ref()[..8]);
    u64::from_be_bytes(b)
}

/// A boolean as pydantic reads one from the environment (`1/0`, `true/false`, `t/f`, `yes/no`,
/// `y/n`, `on/off`, any case); `None` for anything else.
pub(crate) fn pydantic_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" | "on" => Some(true),
        "0" | "false" | "f" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}

/// Unknown keys collected across the load, grouped by (level, key).
type UnknownMap = BTreeMap<(&'static str, String), (String, usize)>;

#[cfg(test)]
mod tests;
