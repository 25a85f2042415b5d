//! A byte-level BPE encoder and decoder for the common `tokenizer.json` shape (GPT-2 style byte
//! alphabet, regex `Split` pre-tokenizers, plain added tokens), with the same ids and text as the
//! `tokenizers` crate but none of its per-piece bookkeeping (offsets, alignments, one `String`
//! per token). Building tens of thousands of random prompts is otherwise dominated by that
//! bookkeeping.
//!
//! It is only ever built for a file whose every stage it reproduces exactly ([`ByteLevelBpe::new`]
//! returns `None` otherwise, and the caller keeps `tokenizers`); the rules it follows are those of
//! `tokenizers` 0.22:
//!
//! ```text
//! text ─► added tokens not normalized (leftmost-longest) ─► added tokens normalized (same)
//!      ─► each Split regex in turn, matches and gaps kept apart ─► bytes ─► BPE merges
//! ```
//!
//! BPE: start from one symbol per byte and merge, while any adjacent pair has a merge, the pair
//! of lowest rank, leftmost among equals (what `tokenizers`' heap of merges pops).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex_automata::{hybrid, Anchored, Input};
use serde_json::Value;

/// GPT-2's pre-tokenizer regex, applied by a `ByteLevel` pre-tokenizer with `use_regex`.
const GPT2_SPLIT: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// The byte-level alphabet: printable bytes stand for themselves, the others for 256 + n.
fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, 33..=126 | 161..=172 | 174..=255);
        out[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("256..=323 are chars")
        };
    }
    out
}

/// Added tokens of one kind (normalized or not), matched leftmost-longest.
#[derive(Debug)]
struct Added {
    matcher: AhoCorasick,
    ids: Vec<u32>,
    /// The longest token's length in bytes: whether a token starts at `q` depends on the bytes
    /// `q..q + longest` alone.
    longest: usize,
}

impl Added {
    fn new(tokens: Vec<(String, u32)>) -> Option<Added> {
        let (contents, ids): (Vec<String>, Vec<u32>) = tokens.into_iter().unzip();
        let longest = contents.iter().map(String::len).max().unwrap_or(0);
        let matcher = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&contents)
            .ok()?;
        Some(Added {
            matcher,
            ids,
            longest,
        })
    }
}

/// The merges: `(left, right)` ─► rank, in one open-addressed table of packed words, and the id
/// each rank makes. Random prompts are mostly pieces never seen before, so BPE looks a pair up
/// several times per byte of text, nearly always in a part of the table no recent lookup
/// touched: 8 bytes a slot (a general map's entry was 16, plus its control bytes) halve what
/// those lookups pull in.
#[derive(Debug)]
struct Merges {
    /// `left << 42 | right << 21 | rank` per slot, [`Merges::EMPTY`] where none.
    slots: Box<[u64]>,
    /// `made[rank]`: the id that merge makes.
    made: Vec<u32>,
    /// Slot of a key: the top bits of its product with an odd constant.
    shift: u32,
}

impl Merges {
    /// Ids and ranks are below `1 << BITS` (a vocabulary of 2M tokens), or the file is left to
    /// `tokenizers`.
    const BITS: u32 = 21;
    const FIELD: u64 = (1 << Self::BITS) - 1;
    const EMPTY: u64 = u64::MAX;

    /// A table for `n` merges, at most half full.
    fn with_capacity(n: usize) -> Option<Merges> {
        let slots = (2 * n).max(16).checked_next_power_of_two()?;
        Some(Merges {
            slots: vec![Self::EMPTY; slots].into_boxed_slice(),
            made: Vec::with_capacity(n),
            shift: 64 - slots.trailing_zeros(),
        })
    }

    fn key(a: u32, b: u32) -> Option<u64> {
        let (a, b) = (u64::from(a), u64::from(b));
        (a <= Self::FIELD && b <= Self::FIELD).then_some(a << Self::BITS | b)
    }

    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Adds the merge of rank `rank` (each rank once, in order); a later duplicate of a pair
    /// replaces the earlier one, as `tokenizers`' map does.
    fn insert(&mut self, a: u32, b: u32, rank: u32, made: u32) -> Option<()> {
        let key = Self::key(a, b)?;
        if u64::from(rank) > Self::FIELD || rank as usize != self.made.len() {
            return None;
        }
        self.made.push(made);
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = &mut self.slots[i];
            if *slot == Self::EMPTY || *slot >> Self::BITS == key {
                *slot = key << Self::BITS | u64::from(rank);
                return Some(());
            }
            i = (i + 1) & mask;
        }
    }

    /// The rank of merging `a` and `b`, `u32::MAX` when they do not merge.
    fn rank(&self, a: u32, b: u32) -> u32 {
        let Some(key) = Self::key(a, b) else {
            return u32::MAX;
        };
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = self.slots[i];
            if slot == Self::EMPTY {
                return u32::MAX;
            }
            if slot >> Self::BITS == key {
                return (slot & Self::FIELD) as u32;
            }
            i = (i + 1) & mask;
        }
    }
}

/// A need no text meets: not a point to resume from.
const NEVER: usize = usize::MAX;

/// A point a later encode can resume from: the pieces before byte `at` gave the first `ids` ids,
/// and any text whose first `need` bytes are this text's splits the same way before `at`, and
/// continues after it as a text of its own that starts at `at` would. So the ids of such a text
/// are `ids[..mark.ids]` and those of its rest from `at`, encoded afresh.
///
/// `need` is the furthest any search that decided a piece before `at` read: each stage's
/// searches before `at` in the stretch of text holding `at`, at every level. A search that read
/// to the end of its stretch gives [`NEVER`]: the end of a stretch is where the next one (or the
/// text) starts, which a longer text moves. A point inside a match of any split is never one: a
/// fresh split from there would match differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) at: usize,
    pub(crate) ids: usize,
    pub(crate) need: usize,
}

/// What an encode writes to.
struct Cx<'a> {
    out: &'a mut Vec<u32>,
    words: &'a mut Words,
    marks: Option<&'a mut Vec<Mark>>,
}

impl Cx<'_> {
    /// A piece starts at `at`: a mark there, if marks are kept and `need` can be met (walked
    /// only then: plain encodes skip it).
    fn mark(&mut self, at: usize, need: &Need<'_>) {
        if let Some(marks) = self.marks.as_deref_mut() {
            let need = need.at(at);
            if need != NEVER {
                marks.push(Mark {
                    at,
                    ids: self.out.len(),
                    need,
                });
            }
        }
    }
}

/// What a restart at `b` inside one stretch of text needs: the stage's own reads and those of
/// the stages around it (`outer`).
struct Need<'a> {
    outer: Option<&'a Need<'a>>,
    /// Where the stretch starts: no search of this stage came before it.
    start: usize,
    /// The need at `start` (the reads of the stage that cut the stretch there).
    at_start: usize,
    /// The need past `start`.
    inside: Inside,
}

#[derive(Clone, Copy)]
enum Inside {
    /// Inside a match: never.
    Never,
    /// The same for every point (the furthest read of the searches around the stretch).
    Const(usize),
    /// `b + plus`, or never when that passes `until` (the search window reached the end).
    Window { plus: usize, until: usize },
}

impl Need<'_> {
    fn at(&self, b: usize) -> usize {
        let own = if b == self.start {
            self.at_start
        } else {
            match self.inside {
                Inside::Never => NEVER,
                Inside::Const(n) => n,
                Inside::Window { plus, until } => match b.checked_add(plus) {
                    Some(n) if n <= until => n,
                    _ => NEVER,
                },
            }
        };
        own.max(self.outer.map_or(0, |o| o.at(b)))
    }
}

/// One match of a split, with the furthest read (relative to the split's text, [`NEVER`] past
/// its end) of the searches before it (`before`) and up to and with it (`through`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Found {
    start: usize,
    end: usize,
    before: usize,
    through: usize,
}

/// What a restart inside a gap between a split's matches needs of that split.
#[derive(Clone, Copy, Debug)]
enum Gaps {
    /// `b + plus` (a class run: the character at `b` decides).
    Window(usize),
    /// The furthest read of the searches up to the next match (each [`Found::before`]), `tail`
    /// after the last one.
    Read { tail: usize },
}

/// Distinguishes tables in the per-thread scratch.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The state of the last tables this thread encoded with.
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Drops this thread's working state (its piece cache, up to ~10 MB, and its regex caches);
/// the next encode on it starts afresh.
pub(crate) fn release_thread_state() {
    SCRATCH.with_borrow_mut(|slot| *slot = None);
}

/// One thread's working state for one [`ByteLevelBpe`]: its own copy of the regexes (a regex
/// shared between threads hands its search state out under a lock) and the merge buffers.
struct Scratch {
    owner: u64,
    splits: Vec<Splitter>,
    words: Words,
}

/// The BPE side of [`Scratch`].
#[derive(Default)]
struct Words {
    symbols: Vec<u32>,
    ranks: Vec<u32>,
    /// Pieces already merged by this thread: piece bytes ─► `ids[start..end]`. A text sharing
    /// words with another is mostly hits (the random datasets' runs of consecutive ids overlap
    /// from prompt to prompt); BPE of a piece depends on nothing else, so a hit is exact.
    seen: ahash::AHashMap<Box<[u8]>, (u32, u32)>,
    ids: Vec<u32>,
    /// The matches of the splits in progress, the outermost first (see `split`).
    stack: Vec<Found>,
}

impl Words {
    /// Pieces longer than this are merged every time (rare, and they would crowd the cache).
    const LONGEST: usize = 64;
    /// Past this many ids held the cache starts over, which bounds a thread's cache to ~10 MB.
    /// (With 1 << 16 it started over every ~250 prompts of bench-serving's C 512 point.)
    const HELD: usize = 1 << 18;
}

impl Scratch {
    fn new(bpe: &ByteLevelBpe) -> Scratch {
        Scratch {
            owner: bpe.id,
            splits: bpe.splits.clone(),
            words: Words::default(),
        }
    }
}

/// The encoder and decoder tables of one tokenizer (see the module docs).
#[derive(Debug)]
pub(crate) struct ByteLevelBpe {
    id: u64,
    raw_added: Added,
    normalized_added: Added,
    splits: Vec<Splitter>,
    /// Every split reports how far each of its searches read, and none looks behind where it
    /// starts: an encode can leave [`Mark`]s to resume from.
    resumable: bool,
    byte_ids: [u32; 256],
    merges: Merges,
    /// `ignore_merges`: a whole piece found here is one token.
    whole: Option<ahash::AHashMap<Vec<u8>, u32>>,
    /// Each id's text, shared with the [`Decoder`]s handed out.
    decode: Arc<DecodeTable>,
}

/// The decoded bytes of every id: all a decode reads (~1.5 MB for a 129k vocabulary, a fraction
/// of the encoder's tables), so a caller that only decodes can drop the rest.
#[derive(Debug)]
pub(crate) struct DecodeTable {
    /// Decoded bytes of id `i`: `decoded[starts[i]..starts[i + 1]]`; `present[i]` false for ids
    /// neither in the vocabulary nor added (decode skips them).
    decoded: Vec<u8>,
    starts: Vec<u32>,
    present: Vec<bool>,
}

impl DecodeTable {
    /// The text of `ids`, special tokens included; ids outside the vocabulary are skipped.
    pub(crate) fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for id in ids {
            let i = *id as usize;
            if self.present.get(i).copied().unwrap_or(false) {
                bytes.extend_from_slice(
                    &self.decoded[self.starts[i] as usize..self.starts[i + 1] as usize],
                );
            }
        }
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }
}

impl ByteLevelBpe {
    /// The tables of `file` (a `tokenizer.json`) and its base vocabulary's size (without the
    /// added tokens); `None` unless every stage is one this module reproduces.
    pub(crate) fn new(file: &[u8]) -> Option<(ByteLevelBpe, usize)> {
        let file: File = serde_json::from_slice(file).ok()?;
        supported_normalizer(&file.normalizer)?;
        let splits = splits(&file.pre_tokenizer)?;
        supported_decoder(&file.decoder)?;
        let model = file.model;
        if model.kind.as_deref() != Some("BPE")
            || model.dropout.is_some_and(|d| d != 0.0)
            || [&model.continuing_subword_prefix, &model.end_of_word_suffix]
                .iter()
                .any(|a| a.as_deref().is_some_and(|a| !a.is_empty()))
        {
            return None;
        }
        let vocab = &model.vocab;
        let added = added_ids(&file.added_tokens, vocab)?;

        let chars = byte_chars();
        let mut byte_ids = [0u32; 256];
        let mut buf = [0u8; 4];
        for (b, c) in chars.iter().enumerate() {
            // Every byte has its symbol, so no piece ever needs an unknown token or a fallback.
            byte_ids[b] = *vocab.get(&*c.encode_utf8(&mut buf))?;
        }
        // The alphabet's chars are all below U+0144: a table, not a map.
        let mut char_byte = vec![None; chars.iter().map(|c| *c as usize + 1).max().unwrap_or(0)];
        for (b, c) in chars.iter().enumerate() {
            char_byte[*c as usize] = Some(b as u8);
        }
        let byte_of = |c: char| char_byte.get(c as usize).copied().flatten();

        let mut merges = Merges::with_capacity(model.merges.len())?;
        let mut joined = String::new();
        for (rank, m) in model.merges.iter().enumerate() {
            let (a, b) = match m {
                Merge::Legacy(s) => {
                    let mut parts = s.split(' ');
                    let (a, b) = (parts.next()?, parts.next()?);
                    if parts.next().is_some() {
                        return None;
                    }
                    (a, b)
                }
                Merge::Pair(a, b) => (&**a, &**b),
            };
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let (a, b, new) = (vocab.get(a)?, vocab.get(b)?, vocab.get(joined.as_str())?);
            merges.insert(*a, *b, u32::try_from(rank).ok()?, *new)?;
        }

        // ByteLevel's decoder: a token all of whose chars are in the alphabet is those bytes,
        // any other token (an added one, typically) its own UTF-8.
        let to_bytes = |s: &str| -> Vec<u8> {
            s.chars()
                .map(byte_of)
                .collect::<Option<Vec<u8>>>()
                .unwrap_or_else(|| s.as_bytes().to_vec())
        };
        // ignore_merges looks the piece's byte-level string up: only keys written entirely in
        // the alphabet can equal one.
        let whole = model.ignore_merges.then(|| {
            vocab
                .iter()
                .filter_map(|(k, id)| {
                    let bytes = k.chars().map(byte_of);
                    Some((bytes.collect::<Option<Vec<u8>>>()?, *id))
                })
                .collect::<ahash::AHashMap<_, _>>()
        });
        let top = vocab
            .values()
            .copied()
            .chain(added.iter().map(|a| a.0))
            .max()
            .unwrap_or(0) as usize;
        let mut text: Vec<Option<&str>> = vec![None; top + 1];
        for (k, id) in vocab {
            text[*id as usize] = Some(k);
        }
        for (id, content, _) in &added {
            text[*id as usize] = Some(content);
        }
        let mut decoded = Vec::new();
        let mut starts = Vec::with_capacity(top + 2);
        let mut present = Vec::with_capacity(top + 1);
        for t in &text {
            starts.push(u32::try_from(decoded.len()).ok()?);
            present.push(t.is_some());
            if let Some(t) = t {
                decoded.extend(to_bytes(t));
            }
        }
        starts.push(u32::try_from(decoded.len()).ok()?);

        let kind = |normalized: bool| {
            added
                .iter()
                .filter(|a| a.2 == normalized)
                .map(|a| (a.1.to_owned(), a.0))
                .collect::<Vec<_>>()
        };
        let bpe = ByteLevelBpe {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            raw_added: Added::new(kind(false))?,
            normalized_added: Added::new(kind(true))?,
            resumable: splits.iter().all(Splitter::resumable),
            splits,
            byte_ids,
            merges,
            whole,
            decode: Arc::new(DecodeTable {
                decoded,
                starts,
                present,
            }),
        };
        Some((bpe, vocab.len()))
    }

    /// Appends the ids of `text` (no special tokens added) to `out`, and to `marks`, when given
    /// and this tokenizer's splits allow it, the points a later encode can resume from (see
    /// [`Mark`]), in order.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>, marks: Option<&mut Vec<Mark>>) {
        SCRATCH.with_borrow_mut(|slot| {
            let scratch = match slot {
                Some(s) if s.owner == self.id => s,
                _ => slot.insert(Scratch::new(self)),
            };
            let Scratch { splits, words, .. } = scratch;
            let mut cx = Cx {
                out,
                words,
                marks: marks.filter(|_| self.resumable),
            };
            let whole = Need {
                outer: None,
                start: 0,
                at_start: 0,
                inside: Inside::Const(0),
            };
            self.added(false, splits, text, 0, &whole, &mut cx);
        });
    }

    /// The tokens of one kind of added token (`normalized` or raw) in `text` (at `base` in the
    /// whole text), each an id, and the stretches between them to the next stage.
    ///
    /// A token is matched leftmost-longest, so whether one starts at `q` is decided by the bytes
    /// `q..q + longest` of `text` (its end included, when that window reaches it): a restart at
    /// `b` needs the bytes up to `b - 1 + longest`, and none when the window reached the end.
    fn added(
        &self,
        normalized: bool,
        splits: &mut [Splitter],
        text: &str,
        base: usize,
        outer: &Need<'_>,
        cx: &mut Cx<'_>,
    ) {
        let added = if normalized {
            &self.normalized_added
        } else {
            &self.raw_added
        };
        let end = base + text.len();
        let inside = match added.longest {
            0 => Inside::Const(0),
            n => Inside::Window {
                plus: n - 1,
                until: end,
            },
        };
        let own = Need {
            outer: Some(outer),
            start: base,
            at_start: 0,
            inside,
        };
        let mut prev = 0;
        let mut stretch = |cx: &mut Cx<'_>, from: usize, to: usize| {
            if normalized {
                self.split(splits, &text[from..to], base + from, &own, cx);
            } else {
                self.added(true, splits, &text[from..to], base + from, &own, cx);
            }
        };
        for m in added.matcher.find_iter(text) {
            if prev < m.start() {
                stretch(cx, prev, m.start());
            }
            let b = base + m.start();
            cx.mark(b, &own);
            cx.out.push(added.ids[m.pattern().as_usize()]);
            prev = m.end();
        }
        if prev < text.len() {
            stretch(cx, prev, text.len());
        }
    }

    /// The pieces of `text` (at `base` in the whole text) under the first of `splits` and the
    /// ones after it, each encoded; `need` says what a restart inside `text` needs of the
    /// stages above.
    fn split(
        &self,
        splits: &mut [Splitter],
        text: &str,
        base: usize,
        need: &Need<'_>,
        cx: &mut Cx<'_>,
    ) {
        let Some((re, rest)) = splits.split_first_mut() else {
            cx.mark(base, need);
            self.word(text.as_bytes(), cx.out, cx.words);
            return;
        };
        // The matches go on one stack shared by every depth: this depth's are
        // `stack[bottom..top]`, the deeper calls push theirs above and take them off again.
        let bottom = cx.words.stack.len();
        let gaps = re.matches(text, &mut cx.words.stack);
        let top = cx.words.stack.len();
        // Reads are relative to `text`; `NEVER` stays `NEVER`.
        let abs = |read: usize| if read == NEVER { NEVER } else { base + read };
        let gap = |from: usize, at_start: usize, next: usize| Need {
            outer: Some(need),
            start: base + from,
            at_start: abs(at_start),
            inside: match gaps {
                Gaps::Window(plus) => Inside::Window { plus, until: NEVER },
                Gaps::Read { .. } => Inside::Const(abs(next)),
            },
        };
        let (mut prev, mut prev_read) = (0, 0);
        for i in bottom..top {
            let f = cx.words.stack[i];
            if prev != f.start {
                self.split(
                    rest,
                    &text[prev..f.start],
                    base + prev,
                    &gap(prev, prev_read, f.before),
                    cx,
                );
            }
            if f.start != f.end {
                let inner = Need {
                    outer: Some(need),
                    start: base + f.start,
                    at_start: abs(f.before),
                    inside: Inside::Never,
                };
                self.split(rest, &text[f.start..f.end], base + f.start, &inner, cx);
            }
            (prev, prev_read) = (f.end, f.through);
        }
        if prev != text.len() {
            let tail = match gaps {
                Gaps::Window(_) => 0,
                Gaps::Read { tail } => tail,
            };
            self.split(
                rest,
                &text[prev..],
                base + prev,
                &gap(prev, prev_read, tail),
                cx,
            );
        }
        cx.words.stack.truncate(bottom);
    }

    /// BPE of one pre-tokenized piece.
    fn word(&self, bytes: &[u8], out: &mut Vec<u32>, words: &mut Words) {
        if bytes.is_empty() {
            return;
        }
        if let Some(id) = self.whole.as_ref().and_then(|w| w.get(bytes)) {
            out.push(*id);
            return;
        }
        let cacheable = bytes.len() <= Words::LONGEST;
        if cacheable {
            if let Some(&(start, end)) = words.seen.get(bytes) {
                out.extend_from_slice(&words.ids[start as usize..end as usize]);
                return;
            }
        }
        let Words {
            symbols,
            ranks,
            seen,
            ids,
            ..
        } = words;
        symbols.clear();
        symbols.extend(bytes.iter().map(|b| self.byte_ids[*b as usize]));
        // ranks[i]: the rank of merging symbols i and i + 1 (u32::MAX: no merge), so a pair
        // is looked up once.
        let rank = |a: u32, b: u32| self.merges.rank(a, b);
        ranks.clear();
        ranks.extend(symbols.windows(2).map(|w| rank(w[0], w[1])));
        loop {
            let mut best = u32::MAX;
            let mut at = 0;
            for (i, r) in ranks.iter().enumerate() {
                if *r < best {
                    best = *r;
                    at = i;
                }
            }
            if best == u32::MAX {
                break;
            }
            let merged = self.merges.made[best as usize];
            symbols[at] = merged;
            symbols.remove(at + 1);
            ranks.remove(at);
            if at > 0 {
                ranks[at - 1] = rank(symbols[at - 1], merged);
            }
            if at < ranks.len() {
                ranks[at] = rank(merged, symbols[at + 1]);
            }
        }
        out.extend_from_slice(symbols);
        if cacheable {
            if ids.len() + symbols.len() > Words::HELD {
                seen.clear();
                ids.clear();
            }
            let start = ids.len() as u32;
            ids.extend_from_slice(symbols);
            seen.insert(bytes.into(), (start, ids.len() as u32));
        }
    }

    /// The text of `ids`, special tokens included; ids outside the vocabulary are skipped.
    pub(crate) fn decode(&self, ids: &[u32]) -> String {
        self.decode.decode(ids)
    }

    /// The decode table alone.
    pub(crate) fn decode_table(&self) -> Arc<DecodeTable> {
        self.decode.clone()
    }
}

type Vocab<'a> = HashMap<Cow<'a, str>, u32, ahash::RandomState>;

/// The parts of a `tokenizer.json` the byte-level path reads.
#[derive(serde::Deserialize)]
struct File<'a> {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    decoder: Value,
    #[serde(borrow)]
    model: Model<'a>,
}

#[derive(serde::Deserialize)]
struct Model<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    dropout: Option<f64>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    ignore_merges: bool,
    /// ahash: the load hashes every key once and looks each merge's three strings up.
    #[serde(borrow)]
    vocab: Vocab<'a>,
    #[serde(borrow)]
    merges: Vec<Merge<'a>>,
}

/// An entry of `added_tokens` (its `id` is not used: `tokenizers` assigns ids afresh); also
/// what a `tokenizer_config.json` adds (`config_tokens`).
#[derive(Debug, PartialEq, serde::Deserialize, serde::Serialize)]
pub(crate) struct AddedToken {
    pub(crate) content: String,
    pub(crate) single_word: bool,
    pub(crate) lstrip: bool,
    pub(crate) rstrip: bool,
    pub(crate) normalized: bool,
    pub(crate) special: bool,
}

/// `(id, content, normalized)` of each added token, in the order `tokenizers` builds its
/// matchers (special tokens first), with the ids it assigns: the base vocabulary's id when the
/// content is in it, else the next id from the base vocabulary's size on. `None` for what the
/// byte-level path does not reproduce: a token matched only as a single word or taking spaces
/// beside it, or one content listed twice.
fn added_ids<'t>(tokens: &'t [AddedToken], vocab: &Vocab<'_>) -> Option<Vec<(u32, &'t str, bool)>> {
    let mut seen = std::collections::HashSet::new();
    let mut next = u32::try_from(vocab.len()).ok()?;
    let mut ids = Vec::new();
    for t in tokens {
        if t.single_word || t.lstrip || t.rstrip || !seen.insert(t.content.as_str()) {
            return None;
        }
        if t.content.is_empty() {
            continue;
        }
        let id = vocab.get(t.content.as_str()).copied().unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        ids.push((id, t.content.as_str(), t.normalized, t.special));
    }
    let (special, plain): (Vec<_>, Vec<_>) = ids.into_iter().partition(|t| t.3);
    Some(
        special
            .into_iter()
            .chain(plain)
            .map(|(id, content, normalized, _)| (id, content, normalized))
            .collect(),
    )
}

/// A merge as `"a b"` (older files) or `["a", "b"]`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Merge<'a> {
    Legacy(#[serde(borrow)] Cow<'a, str>),
    Pair(#[serde(borrow)] Cow<'a, str>, #[serde(borrow)] Cow<'a, str>),
}

fn supported_normalizer(n: &Value) -> Option<()> {
    match n {
        Value::Null => Some(()),
        v if v.get("type")?.as_str()? == "Sequence" => v
            .get("normalizers")?
            .as_array()?
            .iter()
            .try_for_each(supported_normalizer),
        _ => None,
    }
}

fn supported_decoder(d: &Value) -> Option<()> {
    match d.get("type")?.as_str()? {
        "ByteLevel" => Some(()),
        "Sequence" => {
            let all = d.get("decoders")?.as_array()?;
            (all.len() == 1).then_some(())?;
            supported_decoder(&all[0])
        }
        _ => None,
    }
}

/// The Split regexes of a pre-tokenizer that ends in a plain `ByteLevel` (no prefix space).
fn splits(p: &Value) -> Option<Vec<Splitter>> {
    let stages = match p.get("type")?.as_str()? {
        "Sequence" => p.get("pretokenizers")?.as_array()?.iter().collect(),
        _ => vec![p],
    };
    let (last, rest) = stages.split_last()?;
    if last.get("type")?.as_str()? != "ByteLevel"
        || last.get("add_prefix_space").and_then(Value::as_bool) != Some(false)
    {
        return None;
    }
    let mut out = Vec::new();
    for s in rest {
        if s.get("type")?.as_str()? != "Split"
            || s.get("behavior")?.as_str()? != "Isolated"
            || s.get("invert").and_then(Value::as_bool) != Some(false)
        {
            return None;
        }
        let pattern = s.get("pattern")?;
        let re = if let Some(r) = pattern.get("Regex") {
            r.as_str()?.to_owned()
        } else {
            regex::escape(pattern.get("String")?.as_str()?)
        };
        out.push(Splitter::new(&re)?);
    }
    if last
        .get("use_regex")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
        out.push(Splitter::new(GPT2_SPLIT)?);
    }
    Some(out)
}

/// One Split regex, matched as fancy-regex matches it for `tokenizers`.
///
/// A pattern without look-around runs in the regex crate's own automata ([`Automaton`]), which
/// is what fancy-regex delegates it to, minus the wrapper. Most byte-level patterns end their
/// whitespace handling in `…|\s+(?!\S)|\s+`, and that one lookahead sends every search through
/// fancy-regex's backtracking VM. Such a pattern also gets a form without the lookahead branch,
/// and the lookahead's effect is applied to its matches: a run of whitespace that none of the
/// branches before the lookahead matches at its start, and that a non-space follows, gives up its
/// last character when it has more than one (`\s+(?!\S)` backtracks by one; a single space is
/// `\s+`'s).
///
/// A pattern that is one character class repeated (`\p{N}{1,3}`, `[一-龥…]+`) needs no automaton
/// at all: its matches are the class's runs, cut every `max` characters ([`ClassRun`]).
#[derive(Clone, Debug)]
struct Splitter {
    exact: fancy_regex::Regex,
    fast: Option<Fast>,
}

/// A form of a [`Splitter`]'s pattern that answers faster than fancy-regex, used only once it
/// has split [`SPLIT_PROBES`] exactly as the pattern does.
#[derive(Clone, Debug)]
enum Fast {
    Run(ClassRun),
    Plain(Plain),
}

/// A pattern that is a greedy repetition of one Unicode class, `C{min,max}` with `min >= 1`
/// (`C+` is `C{1,}`). Its leftmost-first matches are the runs of `C`'s characters, each cut into
/// pieces of `max` characters, and of those the pieces of at least `min`.
#[derive(Clone, Debug)]
struct ClassRun {
    /// Bit `c` is set when code point `c` (below U+10000) is in the class.
    bmp: Box<[u64; 1024]>,
    /// The class's ranges of code points, sorted and disjoint (regex-syntax's form), for the
    /// code points past the BMP.
    ranges: Box<[(u32, u32)]>,
    min: u32,
    max: u32,
}

impl ClassRun {
    /// What a restart at `b` needs: the character at `b`, up to 4 bytes.
    const READ: usize = 4;

    fn new(pattern: &str) -> Option<ClassRun> {
        use regex_syntax::hir::{Class, HirKind};
        let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
        let HirKind::Repetition(rep) = hir.kind() else {
            return None;
        };
        let HirKind::Class(Class::Unicode(class)) = rep.sub.kind() else {
            return None;
        };
        if !rep.greedy || rep.min == 0 || rep.max.is_some_and(|m| m < rep.min) {
            return None;
        }
        let ranges: Box<[(u32, u32)]> = class
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect();
        let mut bmp = Box::new([0u64; 1024]);
        for &(lo, hi) in &*ranges {
            for c in lo..=hi.min(0xFFFF) {
                bmp[c as usize / 64] |= 1 << (c % 64);
            }
        }
        Some(ClassRun {
            bmp,
            ranges,
            min: rep.min,
            max: rep.max.unwrap_or(u32::MAX),
        })
    }

    fn contains(&self, c: char) -> bool {
        let c = u32::from(c);
        match self.bmp.get(c as usize / 64) {
            Some(bits) => bits & (1 << (c % 64)) != 0,
            None => in_ranges(&self.ranges, c),
        }
    }

    /// Appends the runs. With `min` 1, whether a piece starts or ends at `b` is decided by the
    /// characters before `b` and the one at `b`: a restart needs `b + READ` ([`Gaps::Window`]).
    /// With a larger `min` a short run's fate waits for its end: no restarts.
    fn matches(&self, text: &str, out: &mut Vec<Found>) -> Gaps {
        let windowed = self.min == 1;
        let mut found = |start: usize, end: usize| {
            let (before, through) = match (windowed, end == text.len()) {
                (true, false) => (start + Self::READ, end + Self::READ),
                (true, true) => (start + Self::READ, NEVER),
                (false, _) => (if start == 0 { 0 } else { NEVER }, NEVER),
            };
            out.push(Found {
                start,
                end,
                before,
                through,
            });
        };
        // The current run: where it started and how many of its characters are held.
        let mut run: Option<(usize, u32)> = None;
        for (i, c) in text.char_indices() {
            if !self.contains(c) {
                if let Some((start, n)) = run.take() {
                    if n >= self.min {
                        found(start, i);
                    }
                }
                continue;
            }
            let (start, n) = run.get_or_insert((i, 0));
            *n += 1;
            if *n == self.max {
                found(*start, i + c.len_utf8());
                run = None;
            }
        }
        if let Some((start, n)) = run {
            if n >= self.min {
                found(start, text.len());
            }
        }
        if windowed {
            Gaps::Window(Self::READ)
        } else {
            Gaps::Read { tail: NEVER }
        }
    }
}

/// Whether `c` is in one of `ranges` (sorted, disjoint, inclusive).
fn in_ranges(ranges: &[(u32, u32)], c: u32) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The lookahead-free form of a [`Splitter`].
#[derive(Clone, Debug)]
struct Plain {
    /// The pattern, without its `\s+(?!\S)` branch when `trimmed`.
    re: Automaton,
    /// The `\s+(?!\S)` branch was taken out: its effect is applied to the matches.
    trimmed: bool,
    /// The branches before that one, if any.
    before: Option<Automaton>,
}

/// A pattern in the regex crate's automata. Nearly every piece starts where the previous one
/// ended, so each search is first tried anchored, where it costs one forward scan (an unanchored
/// search also scans back for the start). A pattern that looks at nothing around it (no `^`,
/// `$`, `\b`) is stepped through its lazy DFA by hand ([`Stepper`]), which also tells how far
/// each search read; any other, and any search the DFA gives up on, goes to the meta engine.
#[derive(Clone, Debug)]
struct Automaton {
    meta: regex_automata::meta::Regex,
    /// Boxed: a lazy DFA and its cache are a few KiB of fields.
    stepper: Option<Box<Stepper>>,
}

/// Anchored searches in a look-free pattern's lazy DFA, with this thread's transition cache.
#[derive(Clone, Debug)]
struct Stepper {
    dfa: hybrid::dfa::DFA,
    cache: hybrid::dfa::Cache,
}

/// One anchored search: the end of the leftmost-first match, if any, and the exclusive end of the
/// bytes it read ([`NEVER`] when it read to the end of the text).
type Attempt = (Option<usize>, usize);

impl Stepper {
    fn new(pattern: &str) -> Option<Stepper> {
        let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let dfa = hybrid::dfa::DFA::builder()
            .configure(hybrid::dfa::DFA::config().cache_capacity(Automaton::CACHE))
            .build(pattern)
            .ok()?;
        let cache = dfa.create_cache();
        Some(Stepper { dfa, cache })
    }

    /// The anchored search at `pos` (a character boundary) of `hay`; with `earliest`, it stops
    /// at the first match state. `None` when the DFA gives up (the caller asks the meta engine).
    fn attempt(&mut self, hay: &[u8], pos: usize, earliest: bool) -> Option<Attempt> {
        let Stepper { dfa, cache } = self;
        let input = Input::new(hay).range(pos..).anchored(Anchored::Yes);
        let mut sid = dfa.start_state_forward(cache, &input).ok()?;
        let mut end = None;
        // Match states come one byte late: the state after byte `at` says whether a match
        // ends at `at`.
        for (at, &byte) in hay.iter().enumerate().skip(pos) {
            sid = dfa.next_state(cache, sid, byte).ok()?;
            if sid.is_tagged() {
                if sid.is_match() {
                    end = Some(at);
                    if earliest {
                        return Some((end, at + 1));
                    }
                } else if sid.is_dead() {
                    return Some((end, at + 1));
                } else if sid.is_quit() {
                    return None;
                }
            }
        }
        sid = dfa.next_eoi_state(cache, sid).ok()?;
        if sid.is_match() {
            end = Some(hay.len());
        }
        Some((end, NEVER))
    }
}

impl Automaton {
    /// The lazy DFA's transition cache per thread. The default 2 MiB starts over often on
    /// random multilingual text (every script adds states); this is a few MiB per thread.
    const CACHE: usize = 8 << 20;
    /// Anchored searches at each character of a gap go on while the bytes they read stay
    /// under `SPEND` per byte of the gap, plus `SPEND_FIRST`; past that (a pattern whose failed
    /// searches read far) one unanchored search takes over.
    const SPEND: usize = 8;
    const SPEND_FIRST: usize = 64;

    fn new(pattern: &str) -> Option<Automaton> {
        let meta = regex_automata::meta::Regex::builder()
            .configure(regex_automata::meta::Config::new().hybrid_cache_capacity(Self::CACHE))
            .build(pattern)
            .ok()?;
        Some(Automaton {
            meta,
            stepper: Stepper::new(pattern).map(Box::new),
        })
    }

    /// The leftmost-first match at or after `pos` (fancy-regex's `find_from_pos`) in `input`'s
    /// haystack, with the furthest read of its own search; the furthest read of the searches
    /// that found nothing before it is folded into `read`. One `Input` serves a whole text:
    /// building one per search costs more than a short anchored search.
    fn find_from(
        &mut self,
        input: &mut Input<'_>,
        mut pos: usize,
        read: &mut usize,
    ) -> Option<(usize, usize, usize)> {
        // A match that starts at `pos` is the leftmost one, so the anchored answer at the first
        // position that has one is the unanchored answer.
        if let Some(stepper) = &mut self.stepper {
            let hay = input.haystack();
            let (from, mut spent) = (pos, 0);
            while spent <= Self::SPEND * (pos - from) + Self::SPEND_FIRST {
                match stepper.attempt(hay, pos, false) {
                    Some((Some(end), r)) => return Some((pos, end, r)),
                    Some((None, r)) => {
                        *read = (*read).max(r);
                        spent += r.min(hay.len()) - pos;
                        pos += utf8_len(hay[pos]);
                        if pos >= hay.len() {
                            return None;
                        }
                    }
                    None => break,
                }
            }
        }
        input.set_start(pos);
        input.set_anchored(Anchored::Yes);
        if let Some(m) = self.meta.search(input) {
            return Some((m.start(), m.end(), NEVER));
        }
        *read = NEVER;
        input.set_anchored(Anchored::No);
        self.meta.search(input).map(|m| (m.start(), m.end(), NEVER))
    }

    /// Whether a match starts exactly at `pos` in `input`'s haystack, and how far that read.
    fn starts_at(&mut self, input: &mut Input<'_>, pos: usize) -> (bool, usize) {
        if let Some(stepper) = &mut self.stepper {
            if let Some((end, read)) = stepper.attempt(input.haystack(), pos, true) {
                return (end.is_some(), read);
            }
        }
        input.set_start(pos);
        input.set_anchored(Anchored::Yes);
        (self.meta.search_half(input).is_some(), NEVER)
    }
}

/// The length of the UTF-8 sequence that `lead` starts.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0..=0x7f => 1,
        0x80..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Texts on which a lookahead-free form must split as the pattern does before it is used.
const SPLIT_PROBES: [&str; 6] = [
    "a  b   c\t\td \n\ne\r\n  f  ",
    "  x",
    " \u{a0} y\u{3000}\u{3000}z ",
    "Hello, world!  It's 12345 tokens\n\n\t  end.   ",
    "\u{4e2d}\u{6587}  \u{65e5}\u{672c} \u{3072}\u{3089}!!  ??\n  \n",
    "e\u{301}  n\u{303} \u{1f600}  \u{0}\u{7f}  'll  've  ",
];

impl Splitter {
    fn new(pattern: &str) -> Option<Splitter> {
        let exact = fancy_regex::Regex::new(pattern).ok()?;
        let fast = match ClassRun::new(pattern) {
            Some(run) => Some(Fast::Run(run)),
            None => Plain::new(pattern).map(Fast::Plain),
        };
        let mut splitter = Splitter { exact, fast };
        let agrees = SPLIT_PROBES
            .iter()
            .all(|t| splitter.spans(t) == Splitter::exact_matches(&splitter.exact, t));
        if !agrees {
            splitter.fast = None;
        }
        Some(splitter)
    }

    /// Whether every search of this split can say how far it read and none looks behind its
    /// start (see [`Mark`]).
    fn resumable(&self) -> bool {
        match &self.fast {
            Some(Fast::Run(_)) => true,
            Some(Fast::Plain(p)) => {
                p.re.stepper.is_some() && p.before.as_ref().is_none_or(|b| b.stepper.is_some())
            }
            None => false,
        }
    }

    /// Each match in `text`, as `tokenizers` iterates them (fancy-regex's `find_iter`,
    /// stopping at the first error), appended to `out`, with how far the searches read.
    fn matches(&mut self, text: &str, out: &mut Vec<Found>) -> Gaps {
        let base = out.len();
        let answered = match &mut self.fast {
            Some(Fast::Run(run)) => Some(run.matches(text, out)),
            Some(Fast::Plain(plain)) => plain.matches(text, out),
            None => None,
        };
        answered.unwrap_or_else(|| {
            // fancy-regex says nothing of its reads: no restart past the text's start.
            out.truncate(base);
            out.extend(Splitter::exact_matches(&self.exact, text).into_iter().map(
                |(start, end)| Found {
                    start,
                    end,
                    before: if start == 0 { 0 } else { NEVER },
                    through: NEVER,
                },
            ));
            Gaps::Read { tail: NEVER }
        })
    }

    /// The `(start, end)` of each match in `text`.
    fn spans(&mut self, text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        self.matches(text, &mut found);
        found.iter().map(|f| (f.start, f.end)).collect()
    }

    fn exact_matches(re: &fancy_regex::Regex, text: &str) -> Vec<(usize, usize)> {
        re.find_iter(text)
            .map_while(Result::ok)
            .map(|m| (m.start(), m.end()))
            .collect()
    }
}

impl Plain {
    /// The pattern whole when it has no look-around; else, when its top-level branches hold
    /// `\s+(?!\S)` followed by `\s+`, the pattern without the first of those.
    fn new(pattern: &str) -> Option<Plain> {
        if let Some(re) = Automaton::new(pattern) {
            return Some(Plain {
                re,
                trimmed: false,
                before: None,
            });
        }
        let branches = top_level_branches(pattern)?;
        let at = branches
            .windows(2)
            .position(|w| w[0] == r"\s+(?!\S)" && w[1] == r"\s+")?;
        let mut rest = branches.clone();
        rest.remove(at);
        let re = Automaton::new(&rest.join("|"))?;
        let before = match at {
            0 => None,
            _ => Some(Automaton::new(&format!(
                "(?:{})",
                branches[..at].join("|")
            ))?),
        };
        Some(Plain {
            re,
            trimmed: true,
            before,
        })
    }

    /// Appends the matches to `out`; `None` where this form cannot answer (an empty match): the
    /// caller then asks the exact pattern.
    fn matches(&mut self, text: &str, out: &mut Vec<Found>) -> Option<Gaps> {
        let mut input = Input::new(text);
        let mut pos = 0;
        // The furthest read so far.
        let mut read = 0;
        while pos < text.len() {
            let Some((start, mut end, own)) = self.re.find_from(&mut input, pos, &mut read) else {
                break;
            };
            if start == end {
                return None;
            }
            let before = read;
            read = read.max(own);
            let s = &text[start..end];
            if self.trimmed
                && end < text.len()
                && s.chars().all(char::is_whitespace)
                && s.chars().nth(1).is_some()
            {
                let kept = match &mut self.before {
                    Some(b) => {
                        let (hit, r) = b.starts_at(&mut input, start);
                        read = read.max(r);
                        hit
                    }
                    None => false,
                };
                if !kept {
                    end -= s.chars().next_back().map_or(0, char::len_utf8);
                }
            }
            out.push(Found {
                start,
                end,
                before,
                through: read,
            });
            pos = end;
        }
        Some(Gaps::Read { tail: read })
    }
}

/// The top-level alternatives of a regex (`|` outside groups and classes), or `None` when the
/// brackets do not balance.
fn top_level_branches(pattern: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let (mut groups, mut classes, mut start) = (0i32, 0i32, 0);
    let mut chars = pattern.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' => {
                classes += 1;
                // A `]` first in a class (after an optional `^`) is a literal.
                chars.next_if(|(_, c)| *c == '^');
                chars.next_if(|(_, c)| *c == ']');
            }
            ']' if classes > 0 => classes -= 1,
            '(' if classes == 0 => groups += 1,
            ')' if classes == 0 => groups -= 1,
            '|' if classes == 0 && groups == 0 => {
                out.push(&pattern[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if groups < 0 {
            return None;
        }
    }
    out.push(&pattern[start..]);
    (groups == 0 && classes == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek-V4's three splits, Llama 3's and Qwen 2's patterns, and GPT-2's.
    const PATTERNS: [&str; 6] = [
        r"\p{N}{1,3}",
        "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
        r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        GPT2_SPLIT,
    ];

    /// More one-class repetitions: each must split as fancy-regex does.
    const RUNS: [&str; 5] = [
        r"\p{N}{2,3}",
        r"\p{L}+",
        r"[\s\p{P}]{1,2}",
        r"(?i:[a-c]){1,4}",
        r"[^\p{L}\p{N}]{3}",
    ];

    #[test]
    fn branches_split_at_top_level_bars_only() {
        assert_eq!(
            top_level_branches(PATTERNS[2]).unwrap().len(),
            6,
            "the | inside the class and the groups are not branch bars"
        );
        assert_eq!(
            top_level_branches(r"(a|b)|[|]|\||c").unwrap(),
            [r"(a|b)", "[|]", r"\|", "c"]
        );
        assert_eq!(top_level_branches(r"[]|]|x").unwrap(), ["[]|]", "x"]);
        assert!(top_level_branches("(a|b").is_none());
    }

    #[test]
    fn the_lookahead_free_form_splits_as_the_pattern_does() {
        let atoms = [
            " ", "  ", "\t", "\n", "\r\n", "\u{a0}", "\u{3000}", "a", "Word", "42", "12345", "'s",
            "'LL", "!", "...", "é", "e\u{301}", "快速", "ひら", "🍕", "\u{0}", "-x", "_", "$",
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut below = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for pattern in PATTERNS.iter().chain(&RUNS) {
            let mut s = Splitter::new(pattern).unwrap();
            assert!(s.fast.is_some(), "no fast form: {pattern}");
            for _ in 0..3000 {
                let text: String = (0..1 + below(24))
                    .map(|_| atoms[below(atoms.len())])
                    .collect();
                assert_eq!(
                    s.spans(&text),
                    Splitter::exact_matches(&s.exact, &text),
                    "{pattern} on {text:?}"
                );
            }
        }
    }

    #[test]
    fn only_look_around_outside_the_idiom_keeps_a_pattern_in_fancy_regex() {
        let whole = Plain::new(r"\p{N}|\s+").unwrap();
        assert!(!whole.trimmed, "no look-around: the pattern is used whole");
        assert!(Splitter::new(r"\s+(?!\S)").unwrap().fast.is_none());
        assert!(Splitter::new(r"(?<=a)b|\s+").unwrap().fast.is_none());
    }

    #[test]
    fn one_repeated_class_is_matched_as_runs() {
        for pattern in PATTERNS[..2].iter().chain(&RUNS) {
            let s = Splitter::new(pattern).unwrap();
            assert!(matches!(s.fast, Some(Fast::Run(_))), "{pattern}");
        }
        // Not one greedy class with a minimum: an automaton or fancy-regex answers.
        for pattern in [
            r"\p{N}*",
            r"\p{N}+?",
            r"a+",
            r"(?:\p{N}\p{L})+",
            r"\p{N}{1,3}|x",
        ] {
            let s = Splitter::new(pattern).unwrap();
            assert!(!matches!(s.fast, Some(Fast::Run(_))), "{pattern}");
        }
        let run = ClassRun::new(r"\p{N}{2,3}").unwrap();
        let mut got = Vec::new();
        // Runs of 1, 5 (3 + 2), 4 (3 + a remainder of 1, too short) and 2 digits.
        run.matches("1 12345 ab 1234 \u{663}\u{664}", &mut got);
        let spans: Vec<_> = got.iter().map(|f| (f.start, f.end)).collect();
        assert_eq!(spans, [(2, 5), (5, 7), (11, 14), (16, 20)]);
    }
}
