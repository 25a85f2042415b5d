//! The random datasets of InferenceX's `benchmark_serving.py` (IX) and srt-slurm's sa-bench (SA),
//! bit for bit (shared/spec/bench-serving.md §4, §5): the same argv, seed and tokenizer give the
//! same prompt strings, `max_tokens` and `input_lens`, in the same order.
//!
//! ```text
//! seed ─► numpy global RandomState ─► lengths, offsets, prefix (each flavor's own draw order)
//!                 │ IX: the first four state words seed the padding generator(s)
//!                 ▼
//!     token ids ─► decode ─► (IX: re-encode, pad or cut, up to 10 passes) ─► template ─► prompt
//! ```
//!
//! The global generator is handed back after the draws: the arrival gaps come from the same
//! stream. IX's worker processes are emulated, never spawned: what they change is which padding
//! stream each prompt draws from, so any thread layout that keeps those streams is correct. Here
//! the tokenizer's work runs on every core and the padding draws in prompt order.

use std::borrow::Cow;

use serde_json::{json, Map};
use tokenizer_encoders::deepseek::{
    encode_messages, DeepSeekVersion, EncodeOptions, ReasoningEffort, ThinkingMode,
};
use tokenizer_encoders::{ChatTemplate, Decoder, EncodeError, Encoding, TokenizeError, Tokenizer};

use super::numpy_random::RandomState;

/// Which upstream script's dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// InferenceX's `utils/bench_serving/benchmark_serving.py`.
    InferenceX,
    /// srt-slurm's sa-bench copy.
    SaBench,
}

/// How a drawn text becomes the prompt that is sent (`template(text)` of spec §3).
#[derive(Clone, Debug)]
pub(crate) enum PromptTemplate {
    /// No chat template: the text as drawn.
    None,
    /// The tokenizer config's Jinja chat template, one user message, generation prompt on.
    Jinja(ChatTemplate),
    /// The DeepSeek-V4 encoder, one user message, thinking mode (IX `--dsv4`, SA's vLLM adapter).
    Dsv4Thinking,
    /// SA's SGLang DeepSeek-V4 adapter: an empty system message first, then the user message.
    SglangDsv4 {
        /// Thinking (`<think>`) rather than chat (`</think>`).
        thinking: bool,
        /// `max` or `high`, from the SGLang environment.
        reasoning_effort: Option<String>,
    },
}

impl PromptTemplate {
    /// Whether prompts go through a chat template (the flavors draw differently then).
    fn is_chat(&self) -> bool {
        !matches!(self, PromptTemplate::None)
    }

    /// `template(text)`.
    pub(crate) fn apply(&self, text: &str) -> Result<String, EncodeError> {
        let user = json!({"role": "user", "content": text});
        match self {
            PromptTemplate::None => Ok(text.to_owned()),
            PromptTemplate::Jinja(t) => t.render(&[user], &Map::new(), None),
            PromptTemplate::Dsv4Thinking => encode_messages(
                DeepSeekVersion::V4,
                &[user],
                &EncodeOptions::new(ThinkingMode::Thinking),
            ),
            PromptTemplate::SglangDsv4 {
                thinking,
                reasoning_effort,
            } => {
                let mode = if *thinking {
                    ThinkingMode::Thinking
                } else {
                    ThinkingMode::Chat
                };
                let mut opts = EncodeOptions::new(mode);
                opts.reasoning_effort = reasoning_effort.clone().map(ReasoningEffort::Named);
                let system = json!({"role": "system", "content": ""});
                encode_messages(DeepSeekVersion::V4, &[system, user], &opts)
            }
        }
    }
}

/// The `--random-*` settings of one run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RandomSettings {
    /// `--seed` (upstream refuses seeds outside u32).
    pub(crate) seed: u32,
    /// `--random-input-len`.
    pub(crate) input_len: u32,
    /// `--random-output-len`.
    pub(crate) output_len: u32,
    /// `--random-range-ratio`.
    pub(crate) range_ratio: f64,
    /// `--random-prefix-len`.
    pub(crate) prefix_len: u32,
    /// `--num-prompts`.
    pub(crate) num_prompts: usize,
    /// IX: the worker count W of spec §4.2 (`--random-num-workers`, or `min(cpu_count, 8)`);
    /// it decides which padding stream each prompt draws from. SA: no effect.
    pub(crate) workers: usize,
}

/// One prompt as upstream builds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RandomPrompt {
    /// The prompt string sent (after the template): where [`Prompts`] holds it.
    held: Held,
    /// `input_lens[i]`: IX measures it (the templated prompt re-encoded), SA states the target.
    pub(crate) prompt_len: usize,
    /// `max_tokens`.
    pub(crate) output_len: u32,
    /// IX's target length before the template (`prefix + in_len`), for `avg_token_mismatch`.
    /// Negative where a ratio of 1 draws an input length below zero (an input length shorter
    /// than the chat template): upstream then cuts that many tokens off the end each round.
    pub(crate) target_len: i64,
}

/// A prompt string as it is built: most are the decode of their last ids, and those ids take a
/// third of the text's bytes (17 bits a token against ~6 bytes of text for a 129k vocabulary).
#[derive(Clone, Debug, PartialEq, Eq)]
enum PromptText {
    /// The string itself (a chat template's output, or a tokenizer without its own decoder).
    Text(Box<str>),
    /// `Decoder::decode` of these ids is the string.
    Ids(PackedIds),
}

/// Where a prompt's string sits in [`Prompts`]' bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// UTF-8 at `start..end`.
    Text { start: usize, end: usize },
    /// [`PackedIds`] bits at `start..end`.
    Ids {
        start: usize,
        end: usize,
        width: u8,
        len: u32,
    },
}

/// Token ids bit-packed at the width of the largest.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PackedIds {
    width: u8,
    len: u32,
    bits: Box<[u8]>,
}

impl PackedIds {
    fn new(ids: &[u32]) -> PackedIds {
        let width = ids
            .iter()
            .map(|&id| 32 - id.leading_zeros())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut bits = Vec::with_capacity((ids.len() * width as usize).div_ceil(8));
        let (mut acc, mut held) = (0u64, 0u32);
        for &id in ids {
            acc |= u64::from(id) << held;
            held += width;
            while held >= 8 {
                bits.push(acc as u8);
                acc >>= 8;
                held -= 8;
            }
        }
        if held > 0 {
            bits.push(acc as u8);
        }
        PackedIds {
            width: width as u8,
            // A prompt's ids are far fewer than 2^32.
            len: ids.len() as u32,
            bits: bits.into_boxed_slice(),
        }
    }

    fn unpack(&self) -> Vec<u32> {
        unpack(&self.bits, self.width, self.len)
    }
}

/// `len` ids of `width` bits from `bits` (see [`PackedIds::new`]).
fn unpack(bits: &[u8], width: u8, len: u32) -> Vec<u32> {
    let width = u32::from(width);
    let mask = (1u64 << width) - 1;
    let mut out = Vec::with_capacity(len as usize);
    let (mut acc, mut held) = (0u64, 0u32);
    let mut bytes = bits.iter();
    while out.len() < len as usize {
        while held < width {
            acc |= u64::from(*bytes.next().unwrap_or(&0)) << held;
            held += 8;
        }
        out.push((acc & mask) as u32);
        acc >>= width;
        held -= width;
    }
    out
}

/// A dataset's prompts in dataset order, their strings back to back in one buffer (built on
/// the prompt threads, each string alone would sit among their freed temporaries), with what
/// turns held ids back into their strings.
#[derive(Clone, Debug, Default)]
pub(crate) struct Prompts {
    items: Vec<RandomPrompt>,
    bytes: Vec<u8>,
    decoder: Option<Decoder>,
}

impl Prompts {
    /// `built` (string, `prompt_len`, `output_len`, `target_len`) into one buffer.
    fn new(built: Vec<Built>, decoder: Option<Decoder>) -> Prompts {
        let size = built
            .iter()
            .map(|(t, ..)| match t {
                PromptText::Text(t) => t.len(),
                PromptText::Ids(ids) => ids.bits.len(),
            })
            .sum();
        let mut bytes = Vec::with_capacity(size);
        let items = built
            .into_iter()
            .map(|(text, prompt_len, output_len, target_len)| {
                let start = bytes.len();
                let held = match text {
                    PromptText::Text(t) => {
                        bytes.extend_from_slice(t.as_bytes());
                        Held::Text {
                            start,
                            end: bytes.len(),
                        }
                    }
                    PromptText::Ids(ids) => {
                        bytes.extend_from_slice(&ids.bits);
                        Held::Ids {
                            start,
                            end: bytes.len(),
                            width: ids.width,
                            len: ids.len,
                        }
                    }
                };
                RandomPrompt {
                    held,
                    prompt_len,
                    output_len,
                    target_len,
                }
            })
            .collect();
        Prompts {
            items,
            bytes,
            decoder,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, RandomPrompt> {
        self.items.iter()
    }

    /// Prompt `i`'s string, as upstream sends it.
    pub(crate) fn text(&self, i: usize) -> Cow<'_, str> {
        match self.items[i].held {
            Held::Text { start, end } => Cow::Borrowed(
                std::str::from_utf8(&self.bytes[start..end]).expect("held as a string"),
            ),
            Held::Ids {
                start,
                end,
                width,
                len,
            } => Cow::Owned(
                self.decoder
                    .as_ref()
                    .expect("ids are held only with a decoder")
                    .decode(&unpack(&self.bytes[start..end], width, len)),
            ),
        }
    }

    /// How a prompt whose string is `tok.decode(ids)` is built.
    fn held(
        decoder: Option<&Decoder>,
        tok: &Tokenizer,
        ids: &[u32],
    ) -> Result<PromptText, TokenizeError> {
        Ok(match decoder {
            Some(_) => PromptText::Ids(PackedIds::new(ids)),
            None => PromptText::Text(tok.decode(ids)?.into()),
        })
    }
}

impl std::ops::Index<usize> for Prompts {
    type Output = RandomPrompt;

    fn index(&self, i: usize) -> &RandomPrompt {
        &self.items[i]
    }
}

/// A prompt as a prompt thread builds it: string, `prompt_len`, `output_len`, `target_len`.
type Built = (PromptText, usize, u32, i64);

/// The dataset and the global generator after it (the arrival gaps draw from the same stream).
pub(crate) struct RandomDataset {
    /// In dataset order.
    pub(crate) prompts: Prompts,
    /// IX: how many padding chunks ("worker processes") the prompts were split into; 0 serial.
    pub(crate) chunks: usize,
    /// `np.random`'s global state after the dataset's draws.
    pub(crate) global: RandomState,
}

/// Why a random dataset cannot be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DatasetError {
    /// numpy's `randint` would raise `low >= high` (a range ratio over 1, or an input length
    /// shorter than the chat template: IX with a ratio under 1, SA with any).
    #[error(
        "empty length range for --random-{which}-len: {len} (after the chat template's {template} \
         tokens) with --random-range-ratio {ratio} draws from {low} to {len}; use a ratio in \
         [0, 1], or a longer --random-{which}-len"
    )]
    EmptyRange {
        /// `input` or `output`.
        which: &'static str,
        /// The length drawn up to (inclusive).
        len: i64,
        /// Tokens the template takes from the input length.
        template: i64,
        /// `--random-range-ratio`.
        ratio: f64,
        /// The lower end.
        low: i64,
    },
    /// The tokenizer failed on a drawn text.
    #[error(transparent)]
    Tokenize(#[from] TokenizeError),
    /// The chat template failed.
    #[error("chat template: {0}")]
    Template(#[from] EncodeError),
}

/// `int(x * r)` as Python computes it: the f64 product truncated toward zero.
fn int_times(x: i64, r: f64) -> i64 {
    (x as f64 * r) as i64
}

/// `randint(low, high + 1, size=n)` after checking the range as numpy would.
fn lengths(
    rs: &mut RandomState,
    which: &'static str,
    (low, len, template): (i64, i64, i64),
    ratio: f64,
    n: usize,
) -> Result<Vec<i64>, DatasetError> {
    if low > len {
        return Err(DatasetError::EmptyRange {
            which,
            len,
            template,
            ratio,
            low,
        });
    }
    Ok(rs.randint_n(low, len + 1, n))
}

/// Tokens the template adds: `len(encode(template("a"))) - 1` ("a" is one token).
fn template_tokens(tok: &Tokenizer, template: &PromptTemplate) -> Result<i64, DatasetError> {
    if !template.is_chat() {
        return Ok(0);
    }
    Ok(tok.ids(&template.apply("a")?)?.len() as i64 - 1)
}

fn ids_from(offset: i64, i: usize, n: usize, vocab: i64) -> impl Iterator<Item = u32> {
    // Values are in 0..vocab, which is a u32 token-id range.
    (0..n).map(move |j| ((offset + i as i64 + j as i64).rem_euclid(vocab)) as u32)
}

/// Builds the dataset of `flavor` exactly as upstream does.
pub(crate) fn random_dataset(
    flavor: Flavor,
    tok: &Tokenizer,
    template: &PromptTemplate,
    s: &RandomSettings,
) -> Result<RandomDataset, DatasetError> {
    let d = match flavor {
        Flavor::InferenceX => inferencex(tok, template, s),
        Flavor::SaBench => sa_bench(tok, template, s),
    };
    // IX's padding pass encodes on this thread, which may outlive the dataset (a blocking-pool
    // thread): its piece cache would stay for the run.
    Tokenizer::release_thread_state();
    d
}

/// IX (spec §4): prefix first, lengths, offsets; padding from generators seeded off the global
/// state; every prompt re-measured.
fn inferencex(
    tok: &Tokenizer,
    template: &PromptTemplate,
    s: &RandomSettings,
) -> Result<RandomDataset, DatasetError> {
    let vocab = tok.base_vocab_size() as i64;
    let n = s.num_prompts;
    let p = s.prefix_len as usize;
    let mut global = RandomState::from_u32_seed(s.seed);
    let prefix: Vec<u32> = ids(global.randint_n(0, vocab, p));
    let t = template_tokens(tok, template)?;
    let isl = i64::from(s.input_len) - t;
    let osl = i64::from(s.output_len);
    let in_lens = lengths(
        &mut global,
        "input",
        (int_times(isl, s.range_ratio), isl, t),
        s.range_ratio,
        n,
    )?;
    let out_lens = lengths(
        &mut global,
        "output",
        (int_times(osl, s.range_ratio), osl, 0),
        s.range_ratio,
        n,
    )?;
    let offsets = global.randint_n(0, vocab, n);
    let mut local = RandomState::from_key(&global.state_words()[..4]);

    // The padding stream of each prompt: serial, `local` for all; else one generator per chunk,
    // seeded from `local` in chunk order before any prompt is built.
    let (chunk_size, chunks) = if s.workers <= 1 {
        (n.max(1), 0)
    } else {
        let cs = n.div_ceil(s.workers);
        (cs.max(1), n.div_ceil(cs.max(1)))
    };
    let mut streams: Vec<RandomState> = if chunks == 0 {
        Vec::new()
    } else {
        (0..chunks)
            .map(|_| RandomState::from_u32_seed(local.randint(0, 1 << 31) as u32))
            .collect()
    };

    // Three passes, the same result as upstream's one loop: every prompt's encode/cut rounds up
    // to the first padding (no random draw) on all cores; the padding rounds in prompt order
    // (each chunk's stream is drawn in its own prompt order, which prompt order keeps); the
    // template and the final count on all cores again.
    let states = par_map((0..n).collect(), |i| {
        // Below zero only with a ratio of 1 and an input length under the template's: no ids
        // after the prefix (Python's `range` of a negative count), and a negative target.
        let target = p as i64 + in_lens[i];
        let mut token_ids: Vec<u32> = prefix.clone();
        token_ids.extend(ids_from(offsets[i], i, in_lens[i].max(0) as usize, vocab));
        Padding::start(tok, token_ids, target)
    });
    let mut states = states.into_iter().collect::<Result<Vec<_>, _>>()?;
    for (i, st) in states.iter_mut().enumerate() {
        let pad = if chunks == 0 {
            &mut local
        } else {
            &mut streams[i / chunk_size]
        };
        st.finish(tok, pad, vocab)?;
    }
    let decoder = tok.decoder();
    let prompts = par_map(
        states.into_iter().enumerate().collect(),
        |(i, st): (usize, Padding)| -> Result<Built, DatasetError> {
            let ids = st.ids.unpack();
            let (text, prompt_len) = match (template.is_chat(), st.counted) {
                // Unchanged by a template and last encoded at exactly the target: that is its
                // count.
                (false, Some(len)) => (Prompts::held(decoder.as_ref(), tok, &ids)?, len),
                (false, None) => {
                    let len = tok.ids(&tok.decode(&ids)?)?.len();
                    (Prompts::held(decoder.as_ref(), tok, &ids)?, len)
                }
                (true, _) => {
                    let text = template.apply(&tok.decode(&ids)?)?;
                    let len = tok.ids(&text)?.len();
                    (PromptText::Text(text.into()), len)
                }
            };
            Ok((text, prompt_len, out_lens[i] as u32, st.target))
        },
    );
    Ok(RandomDataset {
        prompts: Prompts::new(prompts.into_iter().collect::<Result<_, _>>()?, decoder),
        chunks,
        global,
    })
}

/// One IX prompt in upstream's padding loop (spec §4.3): up to 10 rounds of encode, then pad
/// (drawing from the prompt's stream) or cut, then decode. Each round's text is the last one
/// cut or extended by a few tokens, so each encode after the first resumes from the one before
/// ([`Tokenizer::reencode`], the same ids as a whole encode).
struct Padding {
    /// The ids the text is the decode of: held packed while the prompt waits, the text decoded
    /// again when a round reads it.
    ids: PackedIds,
    /// `prefix + in_len`; below zero, each round cuts that many ids off the end (Python's
    /// `ids[:target]`).
    target: i64,
    /// Rounds done.
    rounds: usize,
    /// Stopped short of the target at the start of a round: the encoding of `text`, to pad next.
    short: Option<Encoding>,
    /// The loop ended on a round whose encode of `text` had exactly `target` tokens.
    counted: Option<usize>,
}

impl Padding {
    const ROUNDS: usize = 10;
    /// Marks a prompt waiting for padding keeps (see [`Encoding::keep_last_marks`]).
    const MARKS_KEPT: usize = 64;

    /// Runs the rounds that need no random draw: until the text has the target length, a
    /// round needs padding, or the rounds run out.
    fn start(tok: &Tokenizer, ids: Vec<u32>, target: i64) -> Result<Padding, DatasetError> {
        let text = tok.decode(&ids)?;
        let mut st = Padding {
            ids: PackedIds::new(&ids),
            target,
            rounds: 0,
            short: None,
            counted: None,
        };
        st.run(tok, None, 0, text)?;
        Ok(st)
    }

    /// Finishes the loop, drawing padding from `pad`.
    fn finish(
        &mut self,
        tok: &Tokenizer,
        pad: &mut RandomState,
        vocab: i64,
    ) -> Result<(), DatasetError> {
        if self.rounds >= Self::ROUNDS || self.counted.is_some() {
            return Ok(());
        }
        let text = tok.decode(&self.ids.unpack())?;
        self.run(tok, Some(pad), vocab, text)
    }

    /// The rounds from `text`, the decode of `self.ids`.
    fn run(
        &mut self,
        tok: &Tokenizer,
        mut pad: Option<&mut RandomState>,
        vocab: i64,
        mut text: String,
    ) -> Result<(), DatasetError> {
        // The text of the round before and its encoding.
        let mut before: Option<(String, Encoding)> = None;
        while self.rounds < Self::ROUNDS && self.counted.is_none() {
            let now = match (self.short.take(), before.take()) {
                (Some(now), _) => now,
                (None, Some((last, enc))) => tok.reencode(&last, &enc, &text)?,
                (None, None) => tok.encode_resumable(&text)?,
            };
            let len = now.ids().len();
            let next: Vec<u32> = match (len as i64).cmp(&self.target) {
                std::cmp::Ordering::Less => {
                    let Some(rs) = pad.as_deref_mut() else {
                        // Padding extends the text: only the marks near its end can serve, and
                        // this state waits for the padding pass (an 8k prompt has ~5,000).
                        let mut now = now;
                        now.keep_last_marks(Self::MARKS_KEPT);
                        self.short = Some(now);
                        return Ok(());
                    };
                    let mut next = now.ids().to_vec();
                    // The target is above `len`, so positive.
                    next.extend(ids(rs.randint_n(0, vocab, self.target as usize - len)));
                    next
                }
                std::cmp::Ordering::Greater => now.ids()[..python_cut(len, self.target)].to_vec(),
                std::cmp::Ordering::Equal => {
                    self.counted = Some(len);
                    break;
                }
            };
            let next_text = tok.decode(&next)?;
            self.ids = PackedIds::new(&next);
            before = Some((std::mem::replace(&mut text, next_text), now));
            self.rounds += 1;
        }
        Ok(())
    }
}

/// How many of `len` ids Python's `ids[:target]` keeps, for a `target` under `len`: a negative
/// one counts from the end, and keeps none once it passes the start.
fn python_cut(len: usize, target: i64) -> usize {
    if target >= 0 {
        target as usize
    } else {
        (len as i64 + target).max(0) as usize
    }
}

/// `f` over `items` on every core, in order (prompt building is CPU-bound and per prompt
/// independent; upstream spreads it over worker processes too).
fn par_map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads <= 1 || items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::new();
    let mut it = items.into_iter();
    loop {
        let c: Vec<T> = it.by_ref().take(per).collect();
        if c.is_empty() {
            break;
        }
        chunks.push(c);
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| scope.spawn(move || c.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a prompt-building thread panicked"))
            .collect()
    })
}

/// SA (spec §5): lengths and offsets first, the prefix after them (none with a chat template);
/// one decode/encode/cut per prompt, no padding, `prompt_len` the target.
fn sa_bench(
    tok: &Tokenizer,
    template: &PromptTemplate,
    s: &RandomSettings,
) -> Result<RandomDataset, DatasetError> {
    let vocab = tok.base_vocab_size() as i64;
    let n = s.num_prompts;
    let p = s.prefix_len as usize;
    let mut global = RandomState::from_u32_seed(s.seed);
    let t = template_tokens(tok, template)?;
    let isl = i64::from(s.input_len) - t;
    let osl = i64::from(s.output_len);
    let low = |len: i64| {
        if len > 1 {
            int_times(len, s.range_ratio)
        } else {
            1
        }
    };
    let in_lens = lengths(&mut global, "input", (low(isl), isl, t), s.range_ratio, n)?;
    let out_lens = lengths(&mut global, "output", (low(osl), osl, 0), s.range_ratio, n)?;
    let offsets = global.randint_n(0, vocab, n);
    let chat = template.is_chat();
    let prefix: Vec<u32> = if chat {
        Vec::new()
    } else {
        ids(global.randint_n(0, vocab, p))
    };
    let decoder = tok.decoder();

    // No draw after the lengths: every prompt is independent, built on all cores.
    let prompts = par_map((0..n).collect(), |i| -> Result<Built, DatasetError> {
        let in_len = in_lens[i] as usize;
        let (text, prompt_len) = if chat {
            let drawn = int_times(in_len as i64, 1.5) as usize;
            let origin = tok.decode(&ids_from(offsets[i], i, drawn, vocab).collect::<Vec<_>>())?;
            let mut cut = tok.ids(&origin)?;
            cut.truncate(in_len);
            let text = template.apply(&tok.decode(&cut)?)?;
            (PromptText::Text(text.into()), in_len + t as usize)
        } else {
            let mut token_ids = prefix.clone();
            token_ids.extend(ids_from(offsets[i], i, in_len, vocab));
            let mut cut = tok.ids(&tok.decode(&token_ids)?)?;
            cut.truncate(p + in_len);
            (Prompts::held(decoder.as_ref(), tok, &cut)?, p + in_len)
        };
        Ok((text, prompt_len, out_lens[i] as u32, prompt_len as i64))
    });
    Ok(RandomDataset {
        prompts: Prompts::new(prompts.into_iter().collect::<Result<_, _>>()?, decoder),
        chunks: 0,
        global,
    })
}

/// Drawn values as token ids (they are in `0..vocab`).
fn ids(v: Vec<i64>) -> Vec<u32> {
    v.into_iter().map(|x| x as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsv4() -> Tokenizer {
        Tokenizer::from_path(&crate::test_tools::Tool::Dsv4Tokenizer.path()).unwrap()
    }

    /// The first 16 hex digits of the prompt's sha256, as the spec's fixtures give them.
    fn sha16(text: &str) -> String {
        let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn settings(
        seed: u32,
        isl: u32,
        osl: u32,
        ratio: f64,
        n: usize,
        workers: usize,
    ) -> RandomSettings {
        RandomSettings {
            seed,
            input_len: isl,
            output_len: osl,
            range_ratio: ratio,
            prefix_len: 0,
            num_prompts: n,
            workers,
        }
    }

    fn shas(d: &RandomDataset) -> Vec<String> {
        (0..d.prompts.len())
            .map(|i| sha16(&d.prompts.text(i)))
            .collect()
    }

    fn lens(d: &RandomDataset) -> (Vec<usize>, Vec<u32>) {
        (
            d.prompts.iter().map(|p| p.prompt_len).collect(),
            d.prompts.iter().map(|p| p.output_len).collect(),
        )
    }

    #[test]
    fn packed_ids_read_back_as_written() {
        let cases: [&[u32]; 6] = [
            &[],
            &[0],
            &[0, 0, 1],
            &[127_999, 5, 129_279, 0, 64_000],
            &[u32::MAX, 1, u32::MAX - 1],
            &[3; 33],
        ];
        for ids in cases {
            let p = PackedIds::new(ids);
            assert_eq!(p.unpack(), ids);
            let width = ids
                .iter()
                .map(|&id| 32 - id.leading_zeros())
                .max()
                .unwrap_or(1);
            assert_eq!(
                p.bits.len(),
                (ids.len() * width.max(1) as usize).div_ceil(8)
            );
        }
    }

    #[test]
    fn the_vocabulary_drawn_from_is_the_base_one() {
        assert_eq!(dsv4().base_vocab_size(), 128_000);
    }

    /// F8, the first case: seed 0, ISL 32, OSL 8, r 0.8, N 4, serial.
    #[test]
    fn f8_inferencex_prompts_without_a_template() {
        let tok = dsv4();
        let d = random_dataset(
            Flavor::InferenceX,
            &tok,
            &PromptTemplate::None,
            &settings(0, 32, 8, 0.8, 4, 1),
        )
        .unwrap();
        assert_eq!(lens(&d), (vec![29, 32, 30, 25], vec![7, 7, 8, 6]));
        assert_eq!(
            shas(&d),
            [
                "02389a36983b85ef",
                "cfba63e0fa325460",
                "0cf35aa925cba68a",
                "42cacc45c47eb6e9"
            ]
        );
        assert!(d.prompts.text(0).starts_with("elvesosus活动和 mechanic"));
        assert_eq!(d.chunks, 0);
    }

    /// F8 with `--use-chat-template --dsv4`.
    #[test]
    fn f8_inferencex_prompts_with_the_dsv4_template() {
        let tok = dsv4();
        let d = random_dataset(
            Flavor::InferenceX,
            &tok,
            &PromptTemplate::Dsv4Thinking,
            &settings(0, 32, 8, 0.8, 4, 1),
        )
        .unwrap();
        assert_eq!(lens(&d).0, [30, 31, 26, 29]);
        assert_eq!(
            shas(&d),
            [
                "ed71ec95fdab379b",
                "9779d991d236014e",
                "73b7151f0b564065",
                "52e1bfe29df01ccd"
            ]
        );
    }

    /// An input length under the template's with a ratio of 1: numpy draws the negative length
    /// (`randint(L, L + 1)` is no empty range), and upstream builds the prefix alone, cut to the
    /// target (`ids[:target]`, from the end when negative) until nothing is left. Values from
    /// InferenceX's `sample_random_requests` itself (DSV4, `--dsv4`, 4 template tokens).
    #[test]
    fn a_length_under_the_template_with_ratio_1_builds_what_upstream_builds() {
        let tok = dsv4();
        // The template around an empty prompt.
        let empty = "eaffc7e581b3bd49";
        // (seed, --random-input-len, --random-prefix-len, prompts, prompt_len, target, sha)
        for (seed, isl, prefix, n, len, target, sha) in [
            (9, 1, 3, 4, 4, 0, empty),   // target 0: the prefix cut to nothing
            (12, 0, 2, 3, 4, -2, empty), // negative: cut from the end
            (10, 2, 20, 3, 22, 18, "dc756efdda799f59"), // the prefix cut to 18
        ] {
            let s = RandomSettings {
                prefix_len: prefix,
                ..settings(seed, isl, 2, 1.0, n, 1)
            };
            let d = random_dataset(Flavor::InferenceX, &tok, &PromptTemplate::Dsv4Thinking, &s)
                .unwrap();
            assert_eq!(lens(&d), (vec![len; n], vec![2; n]), "seed {seed}");
            assert_eq!(shas(&d), vec![sha; n], "seed {seed}");
            assert!(
                d.prompts.iter().all(|p| p.target_len == target),
                "seed {seed}"
            );
        }
    }

    /// F8: seed 22, N 8; prompt 1 pads, so its text depends on the worker count; the others do
    /// not.
    #[test]
    fn f8_the_worker_count_changes_only_the_padded_prompt() {
        let tok = dsv4();
        let mut others = None;
        for (workers, want) in [
            (1, "7e2226323e823483"),
            (2, "7a50b6b0dc91f2c7"),
            (8, "c612dc4966929ef5"),
        ] {
            let d = random_dataset(
                Flavor::InferenceX,
                &tok,
                &PromptTemplate::None,
                &settings(22, 32, 8, 0.8, 8, workers),
            )
            .unwrap();
            let s = shas(&d);
            assert_eq!(s[1], want, "W {workers}");
            assert_eq!(s[0], "8a0efb5b49f5cc76");
            assert_eq!(lens(&d).0, [30, 29, 29, 25, 29, 31, 31, 28], "W {workers}");
            let mut rest = s.clone();
            rest.remove(1);
            assert_eq!(*others.get_or_insert(rest.clone()), rest, "W {workers}");
            assert_eq!(d.chunks, if workers == 1 { 0 } else { workers });
        }
    }

    /// F8: seed 3, ISL 24, r 1.0, N 2, P 4: the prefix leads every prompt.
    #[test]
    fn f8_a_prefix_leads_every_prompt() {
        let tok = dsv4();
        let s = RandomSettings {
            prefix_len: 4,
            ..settings(3, 24, 8, 1.0, 2, 1)
        };
        let d = random_dataset(Flavor::InferenceX, &tok, &PromptTemplate::None, &s).unwrap();
        assert_eq!(lens(&d).0, [28, 28]);
        assert_eq!(shas(&d), ["d29e981371b6eeec", "66cd3442a24e620e"]);
        for i in 0..d.prompts.len() {
            let text = d.prompts.text(i);
            assert_eq!(tok.ids(&text).unwrap()[..4], [71530, 67224, 77049, 59011]);
        }
    }

    /// F9: sa-bench without a template gives F8's first four prompts; with the SGLang
    /// DeepSeek-V4 adapter its own.
    #[test]
    fn f9_sa_bench_prompts() {
        let tok = dsv4();
        let s = settings(0, 32, 8, 0.8, 4, 8);
        let plain = random_dataset(Flavor::SaBench, &tok, &PromptTemplate::None, &s).unwrap();
        assert_eq!(
            shas(&plain),
            [
                "02389a36983b85ef",
                "cfba63e0fa325460",
                "0cf35aa925cba68a",
                "42cacc45c47eb6e9"
            ]
        );
        let sglang = PromptTemplate::SglangDsv4 {
            thinking: false,
            reasoning_effort: None,
        };
        let chat = random_dataset(Flavor::SaBench, &tok, &sglang, &s).unwrap();
        assert_eq!(lens(&chat).0, [30, 31, 26, 29]);
        assert_eq!(
            shas(&chat),
            [
                "5b27335be4e36d52",
                "7af0eef775615a65",
                "34abe00e53710a59",
                "6527b2359d0560ce"
            ]
        );
        assert!(chat.prompts.text(0).ends_with("<｜Assistant｜></think>"));
    }

    /// The global generator after the IX draws is F3's (seed 0, ISL 1024, OSL 128, r 0.8, N 8):
    /// the arrival gaps that follow are F7's.
    #[test]
    fn the_arrival_gaps_draw_from_the_global_stream_after_the_dataset() {
        let tok = dsv4();
        let mut d = random_dataset(
            Flavor::InferenceX,
            &tok,
            &PromptTemplate::None,
            &settings(0, 1024, 128, 0.8, 8, 8),
        )
        .unwrap();
        assert_eq!(d.global.pos(), 25);
        assert_eq!(
            d.prompts.iter().map(|p| p.output_len).collect::<Vec<_>>(),
            [121, 123, 120, 106, 125, 108, 126, 126]
        );
        let gaps: Vec<f64> = (0..4).map(|_| d.global.gamma(1.0, 1.0 / 20.0)).collect();
        assert_eq!(
            gaps,
            [
                0.02494360069272808,
                0.09041846159970766,
                0.020578899720561497,
                0.052230624775038786
            ]
        );
    }

    /// A Jinja chat template: the input length gives up the template's tokens, and IX measures
    /// the templated prompt.
    #[test]
    fn a_jinja_template_wraps_each_prompt_and_shortens_the_drawn_length() {
        let tok = dsv4();
        let t = ChatTemplate::from_source(
            "{{ bos_token }}{% for m in messages %}<｜User｜>{{ m.content }}{% endfor %}<｜Assistant｜>",
            Some("<｜begin▁of▁sentence｜>".to_owned()),
            None,
        )
        .unwrap();
        let template = PromptTemplate::Jinja(t);
        assert_eq!(template_tokens(&tok, &template).unwrap(), 3);
        let d = random_dataset(
            Flavor::InferenceX,
            &tok,
            &template,
            &settings(0, 32, 8, 1.0, 3, 1),
        )
        .unwrap();
        for (i, p) in d.prompts.iter().enumerate() {
            let text = d.prompts.text(i);
            assert!(
                text.starts_with("<｜begin▁of▁sentence｜><｜User｜>"),
                "{text}"
            );
            assert_eq!(p.target_len, 29);
            assert_eq!(p.prompt_len, tok.ids(&text).unwrap().len());
        }
    }

    /// A range ratio over 1 is numpy's `low >= high`: a usage error naming the flags.
    #[test]
    fn an_empty_length_range_names_the_flags() {
        let tok = dsv4();
        let err = random_dataset(
            Flavor::InferenceX,
            &tok,
            &PromptTemplate::None,
            &settings(0, 32, 8, 1.5, 4, 1),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("--random-input-len") && err.contains("--random-range-ratio 1.5"));
    }
}
