//! Why `specperf inject` failed: one error type whose messages name the file, the line, the bad
//! value and the fix, and which separates usage errors (exit 2) from recipe and curve failures
//! (exit 1).

use std::path::PathBuf;

use crate::golden::GoldenError;
use crate::yaml::YamlError;

/// Why `inject` failed. [`InjectError::is_usage`] separates bad flags and environment (exit 2)
/// from recipe and curve failures (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// `SYNTHETIC_ACCEPTANCE` is not `true`/`false`.
    #[error("SYNTHETIC_ACCEPTANCE={value:?} is neither true nor false (case-insensitive); set one of them or unset it")]
    OptIn {
        /// The value given.
        value: String,
    },
    /// `SYNTHETIC_ACCEPTANCE_LENGTH` is not a finite number.
    #[error("SYNTHETIC_ACCEPTANCE_LENGTH={value:?} is not a finite number; set a number like 2.49 or unset it to use the golden curve")]
    AlValue {
        /// The value given.
        value: String,
    },
    /// `THINKING_MODE` is invalid.
    #[error(transparent)]
    ThinkingMode(GoldenError),
    /// A setting the golden lookup needs is missing.
    #[error("{what} is not set; the golden lookup needs it ({fix})")]
    Missing {
        /// The setting.
        what: &'static str,
        /// How to fix it.
        fix: &'static str,
    },
    /// The recipe could not be read or parsed.
    #[error("recipe {}: {source}", file.display())]
    Recipe {
        /// The recipe.
        file: PathBuf,
        /// What went wrong (unparseable, too large, too deep, ...).
        source: YamlError,
    },
    /// The rewritten recipe could not be written.
    #[error("cannot write {}: {source}", file.display())]
    Write {
        /// The target.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A framework name nobody knows.
    #[error("unknown framework {name:?} (from {from}); known: {known}")]
    UnknownFramework {
        /// The name.
        name: String,
        /// Where it came from.
        from: &'static str,
        /// The names the backends answer to.
        known: String,
    },
    /// A known framework without an injection backend.
    #[error("no synthetic-acceptance backend for framework {name:?} (supported: {known}); run it without SYNTHETIC_ACCEPTANCE=true")]
    NoBackend {
        /// The framework.
        name: String,
        /// The names the backends answer to.
        known: String,
    },
    /// Neither an argument, `FRAMEWORK`, nor the recipe names the framework.
    #[error("no framework for {}: pass it as the second argument or set FRAMEWORK (the recipe has no backend.type)", file.display())]
    NoFramework {
        /// The recipe.
        file: PathBuf,
    },
    /// The framework given and the recipe's, or two engines in one recipe, disagree.
    #[error("mixed frameworks in {}: {detail}", file.display())]
    MixedFrameworks {
        /// The recipe.
        file: PathBuf,
        /// Which ones.
        detail: String,
    },
    /// No speculative entry to rewrite.
    #[error("no speculative entry in {}: {backend} backend found no {keys} (is speculative decoding configured in this recipe?)", file.display())]
    NoEntry {
        /// The recipe.
        file: PathBuf,
        /// Backend name.
        backend: &'static str,
        /// What it looked for.
        keys: &'static str,
    },
    /// A speculative entry that cannot be read or rewritten.
    #[error("{}:{line}: {what}", file.display())]
    BadEntry {
        /// The recipe.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and how to fix it.
        what: String,
    },
    /// No usable golden value for an entry.
    #[error("{at}: {source}")]
    Golden {
        /// `recipe:line (backend role)` or `--golden`.
        at: String,
        /// The curve error.
        source: GoldenError,
    },
    /// The AL is outside `1 ≤ AL ≤ k + 1` for an entry. One explicit AL applies to every role,
    /// so the message names the role it does not fit and points at the per-role golden lookup.
    #[error("{}:{line}: acceptance length {al} is outside [1, {}] for the {role} role's {k} speculative tokens (AL from {al_source}); {}",
        file.display(), k + 1,
        if *explicit {
            "SYNTHETIC_ACCEPTANCE_LENGTH applies to every role: unset SYNTHETIC_ACCEPTANCE_LENGTH to look each role up in the golden curve at its own k (--golden, MODEL_PREFIX, THINKING_MODE), or set a value within every role's range"
        } else {
            "the golden curve's value does not fit this k; fix the curve or the role's speculative tokens"
        })]
    AlOutOfRange {
        /// The recipe.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// Role.
        role: String,
        /// The AL.
        al: f64,
        /// Where the AL came from (`SYNTHETIC_ACCEPTANCE_LENGTH` or `golden <curve>/<mode>/<k>`).
        al_source: String,
        /// Whether it came from `SYNTHETIC_ACCEPTANCE_LENGTH`.
        explicit: bool,
        /// Speculative tokens of the entry.
        k: u32,
    },
    /// A key given twice where the rewrite reads or edits (PyYAML would keep the last, but which
    /// one the author meant decides the edit).
    #[error("{}:{line}: duplicate key {path} (first at line {first}) makes the edit ambiguous: {why}; keep one of them", file.display())]
    AmbiguousDuplicate {
        /// The recipe.
        file: PathBuf,
        /// 1-based line of the later key.
        line: usize,
        /// 1-based line of the first.
        first: usize,
        /// The key with the keys above it, dotted.
        path: String,
        /// Why it matters.
        why: String,
    },
    /// A recipe form the rewriter does not handle, found where a speculative entry was sought.
    #[error("{}:{line}: {what}", file.display())]
    Unsupported {
        /// The recipe.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// The form and what to do instead.
        what: String,
    },
    /// `SYNTHETIC_ACCEPTANCE_LENGTH` contradicts the committed curve.
    #[error("{at}: SYNTHETIC_ACCEPTANCE_LENGTH={explicit} disagrees with golden {golden} ({curve}); unset SYNTHETIC_ACCEPTANCE_LENGTH to use the curve")]
    AlDisagrees {
        /// Where.
        at: String,
        /// The explicit AL.
        explicit: f64,
        /// The golden AL.
        golden: f64,
        /// `curve/mode/k`.
        curve: String,
    },
    /// The rewrite did not produce what was intended (a bug; nothing was written).
    #[error("internal error rewriting {}: {what}; recipe left untouched", file.display())]
    Internal {
        /// The recipe.
        file: PathBuf,
        /// What failed.
        what: String,
    },
}

impl InjectError {
    /// True for bad flags or environment values (exit 2), false for recipe/curve failures (exit 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            InjectError::OptIn { .. }
                | InjectError::AlValue { .. }
                | InjectError::ThinkingMode(_)
                | InjectError::Missing { .. }
        )
    }
}
