//! Prompt synthesis for AgentX turns (spec §2.6–§2.7): deterministic block content per
//! (seed, trace, hash id), the segment algorithm with pre-canned assistant turns, and the
//! per-tree cache-bust marker.
//!
//! The traces hold no text, only token counts and KV block ids, so prompts are structurally
//! identical to AIPerf's (same blocks, same sharing between turns, subagents and trees, same
//! token counts), cut from our own corpus (`datasets/agentx-corpus.txt`).
//!
//! **Token pool.** [`PromptSynth::new`] keeps the corpus words (`" "` + ASCII letters) that the
//! model tokenizer encodes as one token which decodes back to the word. The tokenizer's
//! pre-tokenizer splits text before every such word (GPT-style byte-level BPE: DeepSeek, Qwen,
//! GLM, Kimi, MiniMax), so *any* concatenation of pool tokens re-tokenizes to exactly that many
//! tokens; construction checks this on a shuffled concatenation of every kept word and fails
//! with a [`PromptError`] otherwise. A block's text is then a concatenation of precomputed
//! token strings: no tokenizer call at request time.
//!
//! **Blocks.** Hash id `h` of trace `T` is `block_size` consecutive pool tokens from an offset
//! drawn from SHA-256 of `"{seed}:{T}:{h}"` (wrapping), so a block is byte-identical wherever it
//! appears. Tails (the `in mod block_size` tokens, plus blocks the recording did not hash) come
//! from an offset drawn from `"{seed}:{session_id}:turn_{k}:partial_tail"`.
//!
//! **Segments** (AIPerf's `weka_synth_buf.py`). Turn 0: a `system` segment of
//! `min(ceil((tool + system) / bs), covered)` blocks when the declared prefix is non-empty, then
//! `user`. Turn k: truncate to the hash-id common prefix (stripping the previous tail), then the
//! new blocks go to `assistant` (`ceil(prev out / bs)`, capped by a two-pass plan so a later
//! block-aligned pull-back lands on a user block, minus one block handed back when it would
//! take the whole region with no tail) and the rest, tail included, to `user`. Adjacent
//! segments of one role stay separate messages, as AIPerf sends them. One deliberate
//! difference: the truncation point is also bounded by the blocks the buffer holds and the
//! blocks the current turn covers, so a hashed partial last block (`hash_ids` longer than
//! `in / bs`) still gives exactly `in` tokens (AIPerf's reconstructor over- or under-shoots
//! there).
//!
//! **Marker.** [`cache_bust_marker`] and [`apply_marker`]: one `[rid:…]` prefix per tree on the
//! first user message (spec §2.7).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use ring::digest::{digest, SHA256};
use tokenizer_encoders::Tokenizer;

pub(crate) use super::text::Chunk;
pub use super::text::Text;

use super::{hash64, Conversation, Trace};

/// A chat role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The declared tools + system prefix of turn 0.
    System,
    /// User (or tool-result) input.
    User,
    /// A pre-canned assistant reply.
    Assistant,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Its role.
    pub role: Role,
    /// Its text, escaped for the wire and held as slices of the corpus pool.
    pub content: Text,
}

/// Which conversation of a trace: the root, or `Trace::children[i]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvRef {
    /// The root conversation.
    Root,
    /// A child conversation (index into `Trace::children`).
    Child(usize),
}

/// Why a prompt could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The tokenizer failed.
    #[error("AgentX prompts: the tokenizer failed: {0}")]
    Tokenizer(#[from] tokenizer_encoders::TokenizeError),
    /// Too few corpus words are single tokens of this tokenizer.
    #[error(
        "AgentX prompts: only {kept} of the bundled corpus's {words} words are single tokens of \
         this tokenizer (need at least {MIN_POOL_TOKENS}); AgentX prompts need a byte-level BPE \
         tokenizer whose vocabulary holds space-prefixed English words (DeepSeek, Qwen, GLM, Kimi \
         and MiniMax tokenizers do): pass the served model's tokenizer with --tokenizer"
    )]
    PoolTooSmall {
        /// Words kept.
        kept: usize,
        /// Words in the corpus.
        words: usize,
    },
    /// The tokenizer merges tokens across word boundaries, so lengths cannot be exact.
    #[error(
        "AgentX prompts: {words} single-token words, concatenated, re-tokenize to {tokens} tokens \
         with this tokenizer (its pre-tokenizer does not split before each space-prefixed word), \
         so prompts of exact token counts cannot be made: pass a byte-level BPE tokenizer \
         (DeepSeek, Qwen, GLM, Kimi, MiniMax) with --tokenizer"
    )]
    NotConcatenable {
        /// Words concatenated.
        words: usize,
        /// Tokens counted.
        tokens: usize,
    },
    /// Turn 0's declared tools + system prefix needs more blocks than the turn recorded.
    #[error(
        "AgentX trace {trace}: session {session} turn 0 declares tool_tokens {tool} + \
         system_tokens {system} = {blocks} blocks of {block_size}, but its hash_ids has only \
         {recorded}; the system prefix must come from recorded blocks (fix or drop the trace)"
    )]
    SystemPrefix {
        /// Trace id.
        trace: String,
        /// Session id.
        session: String,
        /// `tool_tokens`.
        tool: u64,
        /// `system_tokens`.
        system: u64,
        /// Blocks the prefix needs.
        blocks: u64,
        /// Blocks recorded.
        recorded: usize,
        /// `block_size`.
        block_size: u64,
    },
    /// A turn was asked after a later one.
    #[error(
        "AgentX prompts: session {session}: turn {asked} asked after turn {current}; ask turns in \
         increasing order (a new stream starts over)"
    )]
    TurnOrder {
        /// Session id.
        session: String,
        /// The turn asked.
        asked: usize,
        /// The turn the stream is at.
        current: usize,
    },
    /// No such turn.
    #[error("AgentX prompts: session {session} has {turns} turns; turn {asked} does not exist")]
    NoTurn {
        /// Session id.
        session: String,
        /// The turn asked.
        asked: usize,
        /// Turns in the conversation.
        turns: usize,
    },
}

/// The corpus prompt blocks are cut from (ours: `scripts/gen-agentx-corpus.py`).
const CORPUS: &str = include_str!("../../datasets/agentx-corpus.txt");

/// Fewer distinct block offsets than this and blocks would overlap too much to be realistic.
const MIN_POOL_TOKENS: usize = 4096;

/// Tokens whose text round-trips alone and in any concatenation, in corpus order.
struct Pool {
    /// Every token's text, concatenated: `" "` and ASCII letters only, so it is its own JSON
    /// escaping, and prompts are slices of it.
    text: Bytes,
    /// Token `i` is `text[bounds[i]..bounds[i + 1]]`.
    bounds: Vec<u32>,
}

impl Pool {
    /// Keeps the corpus words the tokenizer encodes as one token that decodes back to the word,
    /// then checks that a shuffled concatenation of every kept word counts one token per word.
    fn build(tokenizer: &Tokenizer) -> Result<Pool, PromptError> {
        let words = corpus_words(CORPUS);
        let mut single: HashMap<&str, bool> = HashMap::new();
        for w in &words {
            if single.contains_key(w) {
                continue;
            }
            let ids = tokenizer.ids(w)?;
            let ok = ids.len() == 1 && tokenizer.decode(&ids)? == *w;
            single.insert(w, ok);
        }
        let mut text = String::with_capacity(CORPUS.len());
        let mut bounds = vec![0u32];
        for w in words.iter().filter(|w| single[*w]) {
            text.push_str(w);
            bounds.push(u32::try_from(text.len()).expect("the bundled corpus is small"));
        }
        let kept = bounds.len() - 1;
        if kept < MIN_POOL_TOKENS {
            return Err(PromptError::PoolTooSmall {
                kept,
                words: words.len(),
            });
        }
        // Every distinct word next to random neighbours, twice over: a tokenizer that merges
        // across the space (or normalizes the text) shows here, not in a server's usage counts.
        let mut distinct: Vec<&str> = single
            .iter()
            .filter(|(_, ok)| **ok)
            .map(|(w, _)| *w)
            .collect();
        distinct.sort_unstable();
        let mut rng = ChaCha8Rng::seed_from_u64(0x5EC9);
        let mut probe = String::new();
        for _ in 0..2 {
            distinct.shuffle(&mut rng);
            distinct.iter().for_each(|w| probe.push_str(w));
        }
        let tokens = tokenizer.count(&probe)?;
        if tokens != 2 * distinct.len() {
            return Err(PromptError::NotConcatenable {
                words: 2 * distinct.len(),
                tokens,
            });
        }
        Ok(Pool {
            text: Bytes::from(text),
            bounds,
        })
    }

    fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Appends the slices of `n` tokens from `start`, wrapping around the pool, to `out` (a
    /// text of [`Self::text`]).
    fn push(&self, out: &mut Text, start: usize, mut n: usize) {
        let mut at = start % self.len();
        while n > 0 {
            let take = n.min(self.len() - at);
            out.push_base(self.bounds[at] as usize, self.bounds[at + take] as usize);
            n -= take;
            at = 0;
        }
    }
}

/// Candidate tokens: each maximal run of ASCII letters that follows a space, with that space
/// (`" word"`), in corpus order. Byte-level BPE pre-tokenizers cut text at these boundaries.
fn corpus_words(corpus: &str) -> Vec<&str> {
    let b = corpus.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b' ' && b[i + 1].is_ascii_alphabetic() {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_alphabetic() {
                j += 1;
            }
            out.push(&corpus[i..j]);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Cuts prompt text for every trace; shared by every lane.
pub struct PromptSynth {
    pool: Pool,
    seed: u64,
}

impl PromptSynth {
    /// Tokenizes the bundled corpus once with `tokenizer`; `seed` is `--random-seed`.
    ///
    /// Costs one tokenizer call per distinct corpus word plus one on a ~10 KB probe; the
    /// tokenizer is not kept.
    pub fn new(tokenizer: Arc<Tokenizer>, seed: u64) -> Result<PromptSynth, PromptError> {
        Ok(PromptSynth {
            pool: Pool::build(&tokenizer)?,
            seed,
        })
    }

    /// The prompts of one conversation, turn by turn.
    ///
    /// Plans the assistant caps of the whole conversation up front (integer work, linear in
    /// its hash ids); no text is made until [`StreamPrompts::turn`].
    pub fn stream(self: &Arc<Self>, trace: Arc<Trace>, conv: ConvRef) -> StreamPrompts {
        let caps = asst_caps(trace.conversation(conv), trace.block_size);
        StreamPrompts {
            synth: self.clone(),
            trace,
            conv,
            caps,
            segs: Vec::new(),
            at: None,
            emitted: 0,
            disturbed: None,
            offsets: Vec::new(),
            last_reset: false,
        }
    }

    /// Checks what [`StreamPrompts::turn`] would otherwise fail on mid-replay: every
    /// conversation's turn-0 system prefix must fit in its recorded blocks.
    pub fn check(trace: &Trace) -> Result<(), PromptError> {
        let bs = trace.block_size;
        for conv in std::iter::once(&trace.root).chain(&trace.children) {
            if let Some(t0) = conv.turns.first() {
                prefix_blocks(&trace.id, conv, t0, bs)?;
            }
        }
        Ok(())
    }

    /// Pool offset of hash id `h` of trace `trace_id`.
    fn block_offset(&self, trace_id: &str, h: u32) -> usize {
        (hash64(&format!("{}:{trace_id}:{h}", self.seed)) % self.pool.len() as u64) as usize
    }

    /// Pool offset of turn `k`'s tail in session `session`.
    fn tail_offset(&self, session: &str, k: usize) -> usize {
        let key = format!("{}:{session}:turn_{k}:partial_tail", self.seed);
        (hash64(&key) % self.pool.len() as u64) as usize
    }
}

// One synthesizer is shared by every lane, and streams move between tasks.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<PromptSynth>();
    shared::<StreamPrompts>();
};

/// Synthesized tokens after a segment's blocks: the tail of turn `turn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tail {
    tokens: usize,
    turn: usize,
}

/// A run of buffer blocks with one role; only a turn's last user segment carries a tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seg {
    role: Role,
    block_start: usize,
    block_count: usize,
    tail: Option<Tail>,
}

/// How turn k relates to the buffer left by turn k − 1 (one function for the plan and the
/// replay, so they cannot drift).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    /// Blocks kept: the hash-id common prefix, bounded by the blocks the buffer holds and the
    /// blocks this turn covers.
    keep: usize,
    /// Full blocks appended after `keep`.
    new_blocks: usize,
    /// Synthesized tokens at the end (partial block + blocks the recording did not hash).
    tail: usize,
}

/// Full blocks turn `t` covers with recorded hash ids, and its tail length.
fn coverage(t: &super::Turn, bs: usize) -> (usize, usize) {
    let full = t.input_tokens as usize / bs;
    let covered = full.min(t.hash_ids.len());
    let tail = t.input_tokens as usize % bs + (full - covered) * bs;
    (covered, tail)
}

fn step(prev: &super::BlockIds, cur: &super::Turn, buffer_blocks: usize, bs: usize) -> Step {
    let lcp = prev.common_prefix(&cur.hash_ids);
    let (covered, tail) = coverage(cur, bs);
    let keep = lcp.min(buffer_blocks).min(covered);
    Step {
        keep,
        new_blocks: covered - keep,
        tail,
    }
}

/// The two-pass plan (AIPerf's `compute_asst_block_caps`): upper bounds on each turn's
/// assistant blocks so that a later turn which only pulls back (no new blocks, no tail) ends on
/// a block of a user segment rather than an assistant one.
fn asst_caps(conv: &Conversation, bs: u64) -> Vec<Option<usize>> {
    let bs = bs as usize;
    let mut caps = vec![None; conv.turns.len()];
    // Which turn appended each buffer block, and each turn's kept prefix.
    let mut owner: Vec<usize> = Vec::new();
    let mut keep_at = vec![0usize; conv.turns.len()];
    for (k, t) in conv.turns.iter().enumerate() {
        if k == 0 {
            owner = vec![0; coverage(t, bs).0];
            continue;
        }
        let s = step(&conv.turns[k - 1].hash_ids, t, owner.len(), bs);
        keep_at[k] = s.keep;
        if s.new_blocks == 0 && s.tail == 0 && s.keep >= 1 {
            let j = owner[s.keep - 1];
            // Turn 0 has no assistant; a bound below the owner's kept prefix cannot apply.
            if j != 0 {
                if let Some(bound) = (s.keep - 1).checked_sub(keep_at[j]) {
                    caps[j] = Some(caps[j].map_or(bound, |c: usize| c.min(bound)));
                }
            }
        }
        owner.truncate(s.keep);
        owner.resize(s.keep + s.new_blocks, k);
    }
    caps
}

/// The segment state of one conversation, advanced turn by turn.
pub struct StreamPrompts {
    synth: Arc<PromptSynth>,
    trace: Arc<Trace>,
    conv: ConvRef,
    caps: Vec<Option<usize>>,
    segs: Vec<Seg>,
    /// The last turn processed.
    at: Option<usize>,
    /// Segments already sent (AIPerf's delta bookkeeping, for `reset_context`).
    emitted: usize,
    /// Earliest segment the last truncation touched.
    disturbed: Option<usize>,
    /// Pool offsets of the leading buffer blocks, kept across turns (a prefix stays valid);
    /// `u32`: the pool is far smaller, and a 990k-token context holds 15k blocks per stream.
    offsets: Vec<u32>,
    /// `reset_context` of the last turn processed (for a repeated ask).
    last_reset: bool,
}

/// The wire messages of one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnPrompt {
    /// Every message sent for this turn (history included), in order.
    pub messages: Vec<Message>,
    /// Tokens of the message contents (equals the turn's `in`).
    pub content_tokens: u64,
    /// The history was rewritten (a pull-back or a stripped tail), not only appended to.
    pub reset_context: bool,
}

impl StreamPrompts {
    /// The full `messages` for turn `k`. Turns must be asked in increasing order; turns skipped
    /// are advanced through (a t* snapshot starts mid-conversation). Asking the last turn again
    /// gives the same prompt.
    ///
    /// Cost: integer work per skipped turn (linear in its hash ids); for turn `k`, one SHA-256
    /// per block not seen by this stream before and a reference to the pool per block (no text
    /// is copied).
    pub fn turn(&mut self, k: usize) -> Result<TurnPrompt, PromptError> {
        let conv = self.trace.conversation(self.conv);
        if k >= conv.turns.len() {
            return Err(PromptError::NoTurn {
                session: conv.session_id.clone(),
                asked: k,
                turns: conv.turns.len(),
            });
        }
        let reset = match self.at {
            Some(at) if at > k => {
                return Err(PromptError::TurnOrder {
                    session: conv.session_id.clone(),
                    asked: k,
                    current: at,
                })
            }
            Some(at) if at == k => self.last_reset,
            _ => {
                let mut reset = false;
                let from = self.at.map_or(0, |a| a + 1);
                for j in from..=k {
                    if j == 0 {
                        self.first_turn()?;
                    } else {
                        self.advance(j);
                    }
                    reset = self.delta();
                }
                self.at = Some(k);
                reset
            }
        };
        Ok(self.materialize(k, reset))
    }

    /// Turn 0: the declared tools + system prefix as one `system` segment, then `user`.
    fn first_turn(&mut self) -> Result<(), PromptError> {
        let bs = self.trace.block_size;
        let conv = self.trace.conversation(self.conv);
        let t0 = &conv.turns[0];
        let (covered, tail) = coverage(t0, bs as usize);
        let mut segs = Vec::new();
        let mut cursor = 0;
        let blocks = prefix_blocks(&self.trace.id, conv, t0, bs)?;
        if blocks > 0 {
            // More declared prefix than the prompt holds: the excess folds into the tail.
            let blocks = (blocks as usize).min(covered);
            if blocks > 0 {
                segs.push(Seg {
                    role: Role::System,
                    block_start: 0,
                    block_count: blocks,
                    tail: None,
                });
                cursor = blocks;
            }
        }
        let user_blocks = covered - cursor;
        if user_blocks > 0 || tail > 0 || segs.is_empty() {
            segs.push(Seg {
                role: Role::User,
                block_start: cursor,
                block_count: user_blocks,
                tail: (tail > 0).then_some(Tail {
                    tokens: tail,
                    turn: 0,
                }),
            });
        }
        self.segs = segs;
        self.emitted = 0;
        self.disturbed = None;
        self.offsets.clear();
        Ok(())
    }

    /// Turn `k` > 0: truncate to the kept prefix, then split the new region between a
    /// pre-canned assistant reply and the user input.
    fn advance(&mut self, k: usize) {
        let trace = self.trace.clone();
        let bs = trace.block_size as usize;
        let conv = trace.conversation(self.conv);
        let (prev, cur) = (&conv.turns[k - 1], &conv.turns[k]);
        let buffer_blocks: usize = self.segs.iter().map(|s| s.block_count).sum();
        let s = step(&prev.hash_ids, cur, buffer_blocks, bs);
        self.disturbed = truncate(&mut self.segs, s.keep);
        self.offsets.truncate(s.keep);

        let mut asst = (prev.output_tokens as usize).div_ceil(bs);
        if !self.segs.iter().any(|g| g.role == Role::User) {
            // No user input survived: the conversation resumes with the user.
            asst = 0;
        }
        asst = asst.min(s.new_blocks);
        if let Some(cap) = self.caps[k] {
            asst = asst.min(cap);
        }
        if s.tail == 0 && asst == s.new_blocks && asst > 0 {
            // A request cannot end on an assistant message: hand the last block to the user.
            asst -= 1;
        }
        if asst > 0 {
            self.segs.push(Seg {
                role: Role::Assistant,
                block_start: s.keep,
                block_count: asst,
                tail: None,
            });
        }
        let user_blocks = s.new_blocks - asst;
        if user_blocks > 0 || s.tail > 0 {
            self.segs.push(Seg {
                role: Role::User,
                block_start: s.keep + asst,
                block_count: user_blocks,
                tail: (s.tail > 0).then_some(Tail {
                    tokens: s.tail,
                    turn: k,
                }),
            });
        }
    }

    /// AIPerf's delta bookkeeping: a turn whose truncation touched a segment already sent
    /// re-sends everything (`reset_context`); otherwise it only appends.
    fn delta(&mut self) -> bool {
        let reset = self.emitted != 0 && self.disturbed.is_some_and(|d| d < self.emitted);
        self.emitted = self.segs.len();
        self.disturbed = None;
        self.last_reset = reset;
        reset
    }

    /// The text of the current segments; block positions are turn `k`'s hash ids.
    fn materialize(&mut self, k: usize, reset_context: bool) -> TurnPrompt {
        let trace = self.trace.clone();
        let synth = self.synth.clone();
        let conv = trace.conversation(self.conv);
        let hash_ids = &conv.turns[k].hash_ids;
        let bs = trace.block_size as usize;
        let blocks: usize = self.segs.iter().map(|s| s.block_count).sum();
        for h in hash_ids.range(self.offsets.len(), blocks) {
            self.offsets.push(synth.block_offset(&trace.id, h) as u32);
        }
        let mut tokens = 0;
        let messages = self
            .segs
            .iter()
            .map(|s| {
                let tail = s.tail.map_or(0, |t| t.tokens);
                let n = s.block_count * bs + tail;
                tokens += n;
                let mut parts = Text::of_base(&synth.pool.text, s.block_count + 2);
                for &off in &self.offsets[s.block_start..s.block_start + s.block_count] {
                    synth.pool.push(&mut parts, off as usize, bs);
                }
                if let Some(t) = s.tail {
                    let off = synth.tail_offset(&conv.session_id, t.turn);
                    synth.pool.push(&mut parts, off, t.tokens);
                }
                Message {
                    role: s.role,
                    content: parts,
                }
            })
            .collect();
        TurnPrompt {
            messages,
            content_tokens: tokens as u64,
            reset_context,
        }
    }
}

/// Truncates `segs` to `target` blocks, dropping any tail at the cut (AIPerf's
/// `truncate_synth_buf_at_block`). Returns the earliest segment changed or removed.
fn truncate(segs: &mut Vec<Seg>, target: usize) -> Option<usize> {
    if target == 0 {
        let had = !segs.is_empty();
        segs.clear();
        return had.then_some(0);
    }
    let mut cursor = 0;
    for i in 0..segs.len() {
        let end = cursor + segs[i].block_count;
        if end < target {
            cursor = end;
            continue;
        }
        if end == target {
            // Cut at this segment's end: its tail goes, and every later segment.
            let stripped = segs[i].tail.take().is_some();
            let dropped = i + 1 < segs.len();
            segs.truncate(i + 1);
            return if stripped {
                Some(i)
            } else if dropped {
                Some(i + 1)
            } else {
                None
            };
        }
        if cursor == target {
            segs.truncate(i);
            return Some(i);
        }
        // Inside the segment: keep its leading blocks.
        segs[i].block_count = target - cursor;
        segs[i].tail = None;
        segs.truncate(i + 1);
        return Some(i);
    }
    None
}

/// Blocks of a conversation's declared tools + system prefix (`ceil((tool + system) / bs)`); an
/// error when its first turn recorded fewer blocks (the prefix must come from recorded blocks,
/// as AIPerf requires: synthesizing it would fake the cache structure).
fn prefix_blocks(
    trace_id: &str,
    conv: &super::Conversation,
    t0: &super::Turn,
    bs: u64,
) -> Result<u64, PromptError> {
    let blocks = (conv.tool_tokens + conv.system_tokens).div_ceil(bs);
    if blocks as usize > t0.hash_ids.len() {
        return Err(PromptError::SystemPrefix {
            trace: trace_id.to_owned(),
            session: conv.session_id.clone(),
            tool: conv.tool_tokens,
            system: conv.system_tokens,
            blocks,
            recorded: t0.hash_ids.len(),
            block_size: bs,
        });
    }
    Ok(blocks)
}

/// The per-tree cache-bust marker: `"[rid:" + sha256("{benchmark_id}:{pass}:{lane}:{base}")[:12] + "]\n\n"`.
pub fn cache_bust_marker(
    benchmark_id: &str,
    pass: u64,
    lane: usize,
    base_trace_id: &str,
) -> String {
    let d = digest(
        &SHA256,
        format!("{benchmark_id}:{pass}:{lane}:{base_trace_id}").as_bytes(),
    );
    let mut marker = String::from("[rid:");
    for b in &d.as_ref()[..6] {
        let _ = write!(marker, "{b:02x}");
    }
    marker.push_str("]\n\n");
    marker
}

/// Prepends `marker` to the first user message, once (idempotent).
pub fn apply_marker(messages: &mut [Message], marker: &str) {
    if let Some(m) = messages.iter_mut().find(|m| m.role == Role::User) {
        if !m.content.starts_with(marker) {
            m.content.prepend(Text::from(marker));
        }
    }
}

#[cfg(test)]
mod tests;
