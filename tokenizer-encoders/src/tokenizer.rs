//! Token counting with a local `tokenizer.json` (ISL counts, synthetic prompts of exact length).
//!
//! Byte-level BPE files (GPT-2, Llama 3, Qwen, DeepSeek) go through `bytelevel.rs`, which gives
//! the `tokenizers` crate's ids and text without its per-piece bookkeeping (bench-serving builds
//! tens of thousands of prompts by decode/re-encode rounds); every other file through the
//! `tokenizers` crate, without C dependencies (fancy-regex, no onig) and without the hub client:
//! a tokenizer is always a file the user has. Never on the request hot path: counts on the wire
//! come from the server's `usage`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bytelevel::{ByteLevelBpe, DecodeTable, Mark};
use crate::LoadError;

/// A tokenizer loaded from a `tokenizer.json`.
///
/// Encoding and decoding go through [`ByteLevelBpe`] where the file has the shape it reproduces
/// (byte-level BPE: GPT-2, Llama 3, Qwen, DeepSeek), else through the `tokenizers` crate.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    engine: Engine,
}

#[derive(Clone, Debug)]
enum Engine {
    ByteLevel {
        bpe: Arc<ByteLevelBpe>,
        /// `tokenizers`' vocabulary size without the added tokens.
        base_vocab: usize,
    },
    Tokenizers(Box<tokenizers::Tokenizer>),
}

/// A byte-level tokenizer's decode alone ([`Tokenizer::decoder`]): the same text as
/// [`Tokenizer::decode`], holding only each id's bytes. For a caller that keeps token ids and
/// decodes them late, after the encoder's much larger tables are dropped.
#[derive(Clone, Debug)]
pub struct Decoder(Arc<DecodeTable>);

impl Decoder {
    /// Text of `ids`, special tokens included: [`Tokenizer::decode`]'s text.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.0.decode(ids)
    }
}

/// The ids of a text and the points a later encode of a similar text can resume from (see
/// [`Tokenizer::reencode`]).
#[derive(Clone, Debug, Default)]
pub struct Encoding {
    ids: Vec<u32>,
    marks: Vec<Mark>,
    /// Ids a re-encode took from the encoding before.
    reused: usize,
}

impl Encoding {
    /// The ids.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Forgets all but the last `n` points to resume from: enough for a text that is this one
    /// extended (a re-encode resumes near the end), at a bounded size while it waits.
    pub fn keep_last_marks(&mut self, n: usize) {
        let drop = self.marks.len().saturating_sub(n);
        self.marks.drain(..drop);
    }

    /// How many of the ids [`Tokenizer::reencode`] took from the encoding it was given.
    pub fn reused(&self) -> usize {
        self.reused
    }
}

/// Tokenizing a text failed (e.g. the pre-tokenizer's regex gave up on a pathological input).
#[derive(Debug, thiserror::Error)]
#[error("tokenizer: {0}")]
pub struct TokenizeError(String);

impl Tokenizer {
    /// Loads `path`, a `tokenizer.json` or a model directory holding one. Truncation and padding
    /// configured in the file are switched off so counts are of the whole text. From a
    /// directory, the tokens its `tokenizer_config.json` names and the file lacks are added, as
    /// `transformers` adds them.
    pub fn from_path(path: &Path) -> Result<Self, LoadError> {
        Self::load(path, true)
    }

    /// [`Tokenizer::from_path`] through the `tokenizers` crate only (tests compare the paths).
    #[doc(hidden)]
    pub fn from_path_without_byte_level(path: &Path) -> Result<Self, LoadError> {
        Self::load(path, false)
    }

    fn load(path: &Path, byte_level: bool) -> Result<Self, LoadError> {
        let file: PathBuf = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_owned()
        };
        let mut bytes = std::fs::read(&file).map_err(|source| LoadError::Io {
            path: file.clone(),
            source,
        })?;
        if path.is_dir() {
            let config = path.join("tokenizer_config.json");
            if let Some(more) = crate::config_tokens::with_config_tokens(&bytes, &config)? {
                bytes = more;
            }
        }
        if byte_level {
            if let Some((bpe, base_vocab)) = ByteLevelBpe::new(&bytes) {
                #[cfg(debug_assertions)]
                probe(&file, &bytes, &bpe);
                return Ok(Tokenizer {
                    engine: Engine::ByteLevel {
                        bpe: Arc::new(bpe),
                        base_vocab,
                    },
                });
            }
        }
        Ok(Tokenizer {
            engine: Engine::Tokenizers(Box::new(hf(&file, &bytes)?)),
        })
    }

    /// Whether this tokenizer encodes through [`ByteLevelBpe`].
    #[doc(hidden)]
    pub fn is_byte_level(&self) -> bool {
        matches!(self.engine, Engine::ByteLevel { .. })
    }

    /// Token ids of `text`, without special tokens added: rendered prompts already hold theirs
    /// (`add_special_tokens=False`, as the servers encode them).
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        match &self.engine {
            Engine::ByteLevel { bpe, .. } => {
                let mut out = Vec::with_capacity(text.len() / 3);
                bpe.encode(text, &mut out, None);
                Ok(out)
            }
            Engine::Tokenizers(t) => {
                let enc = t
                    .encode_fast(text, false)
                    .map_err(|e| TokenizeError(e.to_string()))?;
                Ok(enc.get_ids().to_vec())
            }
        }
    }

    /// [`Tokenizer::ids`] of `text`, with what lets [`Tokenizer::reencode`] reuse them for a text
    /// that shares a beginning with this one.
    pub fn encode_resumable(&self, text: &str) -> Result<Encoding, TokenizeError> {
        match &self.engine {
            Engine::ByteLevel { bpe, .. } => {
                let mut ids = Vec::with_capacity(text.len() / 3);
                let mut marks = Vec::new();
                bpe.encode(text, &mut ids, Some(&mut marks));
                Ok(Encoding {
                    ids,
                    marks,
                    reused: 0,
                })
            }
            Engine::Tokenizers(_) => Ok(Encoding {
                ids: self.ids(text)?,
                marks: Vec::new(),
                reused: 0,
            }),
        }
    }

    /// The ids of `text`, exactly [`Tokenizer::ids`], given `before`, the encoding of
    /// `before_text`: the pieces before the last point that the bytes the two texts share
    /// decide are taken from `before`, and only the rest of `text` is encoded. (The random
    /// datasets cut or extend a text by a few tokens and encode it again, up to ten times.)
    pub fn reencode(
        &self,
        before_text: &str,
        before: &Encoding,
        text: &str,
    ) -> Result<Encoding, TokenizeError> {
        let Engine::ByteLevel { bpe, .. } = &self.engine else {
            return self.encode_resumable(text);
        };
        let shared = before_text
            .bytes()
            .zip(text.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(before_text.len().min(text.len()));
        let Some(k) = before
            .marks
            .iter()
            .rposition(|m| m.need <= shared && m.at <= shared && text.is_char_boundary(m.at))
        else {
            return self.encode_resumable(text);
        };
        let from = before.marks[k];
        let mut ids = Vec::with_capacity(text.len() / 3);
        ids.extend_from_slice(&before.ids[..from.ids]);
        let mut marks = before.marks[..k].to_vec();
        let kept = marks.len();
        bpe.encode(&text[from.at..], &mut ids, Some(&mut marks));
        // The rest's marks count ids from the start (they were appended to `ids`), but bytes
        // from `from.at`, and know nothing of the reads before it.
        for m in &mut marks[kept..] {
            m.at += from.at;
            m.need = m.need.saturating_add(from.at).max(from.need);
        }
        #[cfg(debug_assertions)]
        assert_eq!(
            ids,
            self.ids(text)?,
            "a re-encode differs from the encode (resumed at {from:?}; {} bytes before, {} now)",
            before_text.len(),
            text.len()
        );
        Ok(Encoding {
            ids,
            marks,
            reused: from.ids,
        })
    }

    /// Number of tokens in `text` (see [`Tokenizer::ids`]).
    pub fn count(&self, text: &str) -> Result<usize, TokenizeError> {
        self.ids(text).map(|ids| ids.len())
    }

    /// The base vocabulary's size, without the added tokens (transformers' `vocab_size`: the
    /// range benchmark_serving.py draws random token ids from; DeepSeek-V4: 128000 of 129280).
    pub fn base_vocab_size(&self) -> usize {
        match &self.engine {
            Engine::ByteLevel { base_vocab, .. } => *base_vocab,
            Engine::Tokenizers(t) => t.get_vocab_size(false),
        }
    }

    /// Drops the calling thread's encode state (a piece cache of up to ~10 MB, regex caches),
    /// which otherwise lives as long as the thread: for a long-lived thread (a runtime's
    /// blocking pool) done encoding.
    pub fn release_thread_state() {
        crate::bytelevel::release_thread_state();
    }

    /// This tokenizer's decode without its encoder, where it has one of its own (byte-level
    /// files); `None` for files the `tokenizers` crate decodes.
    pub fn decoder(&self) -> Option<Decoder> {
        match &self.engine {
            Engine::ByteLevel { bpe, .. } => Some(Decoder(bpe.decode_table())),
            Engine::Tokenizers(_) => None,
        }
    }

    /// Text of `ids`, special tokens included (to cut a text at an exact token length).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizeError> {
        match &self.engine {
            Engine::ByteLevel { bpe, .. } => Ok(bpe.decode(ids)),
            Engine::Tokenizers(t) => t
                .decode(ids, false)
                .map_err(|e| TokenizeError(e.to_string())),
        }
    }
}

/// Text that exercises every stage: added tokens, digits, CJK, punctuation runs, whitespace and
/// line breaks, bytes outside the printable range, letters with marks.
#[cfg(debug_assertions)]
const PROBE: &str = "Hello, world!  It's 2026-12-03: 12345678 tokens\r\n\n\t  end.\u{0}\u{7f} \
    caf\u{e9} na\u{ef}ve \u{4e2d}\u{6587}\u{65e5}\u{672c}\u{3072}\u{3089}\u{30ab}\u{30bf} \u{1f600}!!! \
    a\u{301}b  \u{a0}x <|endoftext|><\u{ff5c}begin\u{2581}of\u{2581}sentence\u{ff5c}><think>";

/// `path`'s tokenizer in the `tokenizers` crate, truncation and padding off.
fn hf(path: &Path, bytes: &[u8]) -> Result<tokenizers::Tokenizer, LoadError> {
    let invalid = |what: String| LoadError::Invalid {
        path: path.to_owned(),
        what,
    };
    let mut inner = tokenizers::Tokenizer::from_bytes(bytes)
        .map_err(|e| invalid(format!("not a tokenizer.json: {e}")))?;
    inner
        .with_truncation(None)
        .map_err(|e| invalid(e.to_string()))?;
    inner.with_padding(None);
    Ok(inner)
}

/// Debug builds (every test) check the byte-level path against `tokenizers` on a probe text at
/// each load, so a tokenizer.json whose shape it takes but does not reproduce fails loudly.
#[cfg(debug_assertions)]
fn probe(path: &Path, bytes: &[u8], bpe: &ByteLevelBpe) {
    let inner = hf(path, bytes).expect("the byte-level path loaded a file tokenizers rejects");
    let want = inner
        .encode_fast(PROBE, false)
        .expect("tokenizers encodes the probe");
    let mut got = Vec::new();
    bpe.encode(PROBE, &mut got, None);
    assert_eq!(
        got,
        want.get_ids(),
        "{}: byte-level ids differ",
        path.display()
    );
    let text = inner
        .decode(want.get_ids(), false)
        .expect("tokenizers decodes");
    assert_eq!(
        bpe.decode(&got),
        text,
        "{}: byte-level text differs",
        path.display()
    );
}
