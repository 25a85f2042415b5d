//! Token counting with a local `tokenizer.json` (ISL counts, synthetic prompts of exact length).
//!
//! Built on the `tokenizers` crate without C dependencies (fancy-regex, no onig) and without the
//! hub client: a tokenizer is always a file the user has. Never on the request hot path: counts
//! on the wire come from the server's `usage`.

use std::path::{Path, PathBuf};

use crate::LoadError;

/// A tokenizer loaded from a `tokenizer.json`.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

/// Tokenizing a text failed (e.g. the pre-tokenizer's regex gave up on a pathological input).
#[derive(Debug, thiserror::Error)]
#[error("tokenizer: {0}")]
pub struct TokenizeError(String);

impl Tokenizer {
    /// Loads `path`, a `tokenizer.json` or a model directory holding one. Truncation and padding
    /// configured in the file are switched off so counts are of the whole text.
    pub fn from_path(path: &Path) -> Result<Self, LoadError> {
        let file: PathBuf = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_owned()
        };
        let bytes = std::fs::read(&file).map_err(|source| LoadError::Io {
            path: file.clone(),
            source,
        })?;
        let mut inner =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| LoadError::Invalid {
                path: file.clone(),
                what: format!("not a tokenizer.json: {e}"),
            })?;
        inner
            .with_truncation(None)
            .map_err(|e| LoadError::Invalid {
                path: file,
                what: e.to_string(),
            })?;
        inner.with_padding(None);
        Ok(Tokenizer { inner })
    }

    /// Token ids of `text`, without special tokens added: rendered prompts already hold theirs
    /// (`add_special_tokens=False`, as the servers encode them).
    pub fn ids(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| TokenizeError(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Number of tokens in `text` (see [`Tokenizer::ids`]).
    pub fn count(&self, text: &str) -> Result<usize, TokenizeError> {
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| TokenizeError(e.to_string()))?;
        Ok(enc.len())
    }

    /// The base vocabulary's size, without the added tokens (transformers' `vocab_size`: the
    /// range benchmark_serving.py draws random token ids from; DeepSeek-V4: 128000 of 129280).
    pub fn base_vocab_size(&self) -> usize {
        self.inner.get_vocab_size(false)
    }

    /// Text of `ids`, special tokens included (to cut a text at an exact token length).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizeError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| TokenizeError(e.to_string()))
    }
}
