//! Synthetic prompts of exact input token lengths (`--synthetic --isl N --tokenizer PATH`).
//!
//! Text comes from a corpus (the bundled collection's prompts) tokenized once; each prompt is a
//! window of its token ids starting at a seeded offset, decoded and re-counted, and the window is
//! adjusted until the decoded text counts exactly the target (decoding can merge or split tokens
//! at the edges). Same seed, same tokenizer: same prompts.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use tokenizer_encoders::Tokenizer;

use super::Sample;

/// `--synthetic` settings, validated by `config` (which re-uses this type: the dataset stage owns
/// what it generates, the configuration only fills it in).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyntheticSpec {
    /// Mean prompt length, tokens.
    pub(crate) isl: u32,
    /// Standard deviation of the prompt length (0: every prompt exactly `isl`).
    pub(crate) isl_stddev: f64,
    /// Mean output length asked of each request (`None`: the row asks for nothing).
    pub(crate) osl: Option<u32>,
    /// Standard deviation of the output length.
    pub(crate) osl_stddev: f64,
    /// How many prompts to make.
    pub(crate) entries: usize,
    /// Seed of the length draws and window offsets.
    pub(crate) seed: u64,
}

/// Why synthetic prompts could not be made (the engine prefixes `--synthetic: `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyntheticError {
    /// The tokenizer failed on the corpus.
    #[error(transparent)]
    Tokenizer(#[from] tokenizer_encoders::TokenizeError),
    /// The corpus is too short to cut windows from.
    #[error("the synthetic corpus tokenizes to almost nothing")]
    CorpusTooShort,
    /// No window of the corpus decodes to exactly the drawn length.
    #[error("could not build a prompt of exactly {target} tokens")]
    NoExactWindow {
        /// The drawn length, tokens.
        target: usize,
    },
}

/// Draws a length around `mean` (never below 1).
fn length(rng: &mut ChaCha8Rng, mean: f64, sd: f64) -> usize {
    if sd <= 0.0 {
        return mean.round().max(1.0) as usize;
    }
    let n = Normal::new(mean, sd).expect("finite mean and non-negative sd");
    n.sample(rng).round().max(1.0) as usize
}

/// Generates `spec.entries` prompts from `corpus`.
pub(crate) fn generate(
    spec: &SyntheticSpec,
    tok: &Tokenizer,
    corpus: &str,
) -> Result<Vec<Sample>, SyntheticError> {
    let ids = tok.ids(corpus)?;
    if ids.len() < 16 {
        return Err(SyntheticError::CorpusTooShort);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut out = Vec::with_capacity(spec.entries);
    for i in 0..spec.entries {
        let target = length(&mut rng, f64::from(spec.isl), spec.isl_stddev);
        let max_tokens = spec
            .osl
            .map(|o| length(&mut rng, f64::from(o), spec.osl_stddev) as u32);
        let text =
            exact(tok, &ids, target, &mut rng).ok_or(SyntheticError::NoExactWindow { target })?;
        out.push(Sample {
            id: format!("synthetic-{i}"),
            prompt: text,
            max_tokens,
            timestamp_ms: None,
            turns: Vec::new(),
            group: None,
        });
    }
    Ok(out)
}

/// A text of exactly `target` tokens: windows of the corpus ids, corrected by the miscount.
fn exact(tok: &Tokenizer, ids: &[u32], target: usize, rng: &mut ChaCha8Rng) -> Option<String> {
    for _attempt in 0..8 {
        let start = rng.random_range(0..ids.len());
        let mut take = target;
        for _ in 0..12 {
            let window: Vec<u32> = ids.iter().cycle().skip(start).take(take).copied().collect();
            let text = tok.decode(&window).ok()?;
            let n = tok.count(&text).ok()?;
            if n == target {
                return Some(text);
            }
            // Move the window's length by the miscount; stop when it cannot move.
            let next = (take as i64 + target as i64 - n as i64).max(1) as usize;
            if next == take {
                break;
            }
            take = next;
        }
    }
    None
}
