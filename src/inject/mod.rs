//! Synthetic-acceptance injection: rewrites an inference-server recipe (srt-slurm YAML) so the
//! engine fakes the golden acceptance length instead of running real verification, for
//! throughput runs (InferenceX contract §10; engine knobs in `speculative-metrics.md`).
//!
//! ```text
//!  InjectConfig ──> recipe YAML ──yaml::parse──> tree (validate, locate)
//!       │                                  │
//!       │            backend (registry by framework) ──entries──> Entry { role, k, method, state }
//!       │                                  │
//!       └─ AL: SYNTHETIC_ACCEPTANCE_LENGTH or golden::select(MODEL_PREFIX, method, k, THINKING_MODE)
//!                                          │
//!                    backend.edits ──> edit::apply (only the touched lines change) ──> verify ──> atomic write
//! ```
//!
//! Fail loud: once opted in, anything that would leave a run silently drafting for real (no
//! backend, no entry, no golden value, bad YAML, AL out of range, mixed frameworks) is an error
//! and the recipe is left untouched. Opted out, nothing is read or written.

mod atom;
mod edit;
mod env;
mod sglang;
mod trtllm;
mod vllm;

use crate::fsutil::write_atomic;
use std::fs;
use std::path::{Path, PathBuf};

use edit::Edit;
pub use edit::LineChange;

use crate::cli::InjectArgs;
use crate::golden::{CurveQuery, Framework, GoldenError, GoldenSource, ThinkingMode};
use crate::yaml::{self, Doc, Node, Scalar, YamlError};

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
    #[error(
        "unknown framework {name:?} (from {from}); known: {}",
        known_frameworks()
    )]
    UnknownFramework {
        /// The name.
        name: String,
        /// Where it came from.
        from: &'static str,
    },
    /// A known framework without an injection backend.
    #[error("no synthetic-acceptance backend for framework {name:?} (supported: {}); run it without SYNTHETIC_ACCEPTANCE=true", known_frameworks())]
    NoBackend {
        /// The framework.
        name: String,
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
    /// The AL is outside `1 ≤ AL ≤ k + 1` for an entry.
    #[error("{}:{line} ({role}): acceptance length {al} is outside [1, {}] for {k} speculative tokens", file.display(), k + 1)]
    AlOutOfRange {
        /// The recipe.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// Role.
        role: String,
        /// The AL.
        al: f64,
        /// Speculative tokens of the entry.
        k: u32,
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

    /// The process exit code for this error (see `specperf inject --help`).
    pub fn exit_code(&self) -> i32 {
        if self.is_usage() {
            crate::exit::USAGE
        } else {
            crate::exit::FAILED
        }
    }
}

/// A backend's complaint about one entry, before the file name is attached.
#[derive(Debug)]
pub(crate) struct Bad {
    pub(crate) line: usize,
    pub(crate) what: String,
}

pub(crate) fn bad<T>(line: usize, what: impl Into<String>) -> Result<T, Bad> {
    Err(Bad {
        line,
        what: what.into(),
    })
}

/// Whether an entry drafts for real or fakes acceptance.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryState {
    /// Real verification.
    Real,
    /// Synthetic acceptance at this AL.
    Synthetic {
        /// The AL the engine is told to fake.
        al: f64,
    },
    /// Synthetic knobs present but inconsistent or invalid.
    Broken {
        /// What is wrong.
        why: String,
    },
}

/// One speculative entry of the recipe as found by a backend.
pub(crate) struct Entry<'a> {
    pub(crate) role: String,
    /// Line of the entry's key (e.g. `speculative-config:`), 1-based.
    pub(crate) line: usize,
    pub(crate) k: u32,
    pub(crate) method: Option<String>,
    pub(crate) draft_model: Option<String>,
    pub(crate) draft_sample_method: Option<String>,
    pub(crate) state: EntryState,
    /// The node the backend edits (the spec value, or the role mapping).
    pub(crate) node: &'a Node,
}

/// A role mapping of the engine section (`prefill`, `decode`, `aggregated`, ...).
pub(crate) struct Role<'a> {
    pub(crate) name: String,
    pub(crate) map: &'a Node,
}

/// What a backend is, as data: its names and where it looks.
pub(crate) struct Meta {
    /// Short name, e.g. `vllm`.
    pub(crate) name: &'static str,
    /// The framework family it serves: its `FRAMEWORK` values are the family's aliases.
    pub(crate) family: Framework,
    /// `backend.type` values of its recipes.
    pub(crate) recipe_types: &'static [&'static str],
    /// Its role section under `backend`, e.g. `vllm_config`.
    pub(crate) section: &'static str,
    /// What it looks for, for messages.
    pub(crate) keys: &'static str,
}

/// One framework backend: finds speculative entries and writes the synthetic knobs. A backend
/// says what one role's entry is; the walk over the roles is shared.
pub(crate) trait Backend: Sync {
    /// Its names and places.
    fn meta(&self) -> &'static Meta;
    /// The speculative entry of one role, or `None` when the role does not draft.
    fn entry<'a>(&self, doc: &'a Doc, role: &Role<'a>) -> Result<Option<Entry<'a>>, Bad>;
    /// The entries of the recipe, in role order; the first bad role fails the recipe.
    fn entries<'a>(&self, doc: &'a Doc, roles: &[Role<'a>]) -> Result<Vec<Entry<'a>>, Bad> {
        roles
            .iter()
            .filter_map(|role| self.entry(doc, role).transpose())
            .collect()
    }
    /// The edits that make every planned entry synthetic at its AL.
    fn edits(&self, doc: &Doc, plan: &[(&Entry<'_>, f64)]) -> Result<Vec<Edit>, Bad>;
}

/// The registry: one backend per engine family.
static BACKENDS: [&dyn Backend; 4] = [&vllm::Vllm, &sglang::Sglang, &trtllm::Trtllm, &atom::Atom];

fn known_frameworks() -> String {
    BACKENDS
        .iter()
        .flat_map(|b| b.meta().family.aliases())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Formats a number like Python's `repr(float)` for the values written here: shortest
/// round-trip text with at least one decimal (`3.0`, `2.49`), after rounding away float noise
/// (`2.49 - 1` is written `1.49`, not `1.4900000000000002`).
pub(crate) fn fmt_num(x: f64) -> String {
    let r = (x * 1e10).round() / 1e10;
    format!("{r:?}")
}

/// Numbers equal as written (to 10 decimals).
pub(crate) fn same_num(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The first of `keys` present in mapping `map` (spellings of one flag), with its key node.
pub(crate) fn get_any<'a>(map: &'a Node, keys: &[&str]) -> Option<&'a (Node, Node)> {
    keys.iter().find_map(|k| map.get_entry(k))
}

/// A positive integer written plainly (`3`) or as a digit string (`"3"`, recipe values are CLI
/// arguments); bools, floats and zero are refused.
pub(crate) fn positive_int(n: &Node) -> Option<u32> {
    match n.scalar()? {
        Scalar::Int(i) if i >= 1 => u32::try_from(i).ok(),
        Scalar::Str(s) => crate::golden::parse_draft_len(s).ok(),
        _ => None,
    }
}

/// A number written plainly or as a string (environment values are strings).
pub(crate) fn number(n: &Node) -> Option<f64> {
    match n.scalar()? {
        Scalar::Int(i) => Some(i as f64),
        Scalar::Float(f) => Some(f),
        Scalar::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A validated `inject` configuration.
#[derive(Clone, Debug)]
pub struct InjectConfig {
    recipe: PathBuf,
    output: Option<PathBuf>,
    check: bool,
    opt_in: bool,
    framework: Option<(String, &'static str)>,
    explicit_al: Option<f64>,
    golden: Option<PathBuf>,
    model_prefix: Option<String>,
    thinking: Option<ThinkingMode>,
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl InjectConfig {
    /// Validates the flags and environment values. `SYNTHETIC_ACCEPTANCE` must be `true`,
    /// `false` (any case) or unset/empty; the other values are checked only when they matter.
    pub fn from_args(a: &InjectArgs) -> Result<Self, InjectError> {
        let opt_in = match non_empty(&a.synthetic_acceptance) {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(InjectError::OptIn {
                    value: v.to_owned(),
                })
            }
        };
        let active = opt_in || a.check;
        let explicit_al = match non_empty(&a.synthetic_acceptance_length) {
            Some(v) if active => match v.parse::<f64>() {
                Ok(al) if al.is_finite() => Some(al),
                _ => {
                    return Err(InjectError::AlValue {
                        value: v.to_owned(),
                    })
                }
            },
            _ => None,
        };
        let thinking = match non_empty(&a.thinking_mode) {
            Some(v) if active => Some(v.parse().map_err(InjectError::ThinkingMode)?),
            _ => None,
        };
        let framework = non_empty(&a.framework).map(|f| (f.to_ascii_lowercase(), "FRAMEWORK"));
        Ok(InjectConfig {
            recipe: a.recipe.clone(),
            output: a.output.clone(),
            check: a.check,
            opt_in,
            framework,
            explicit_al,
            golden: a.golden.clone(),
            model_prefix: non_empty(&a.model_prefix).map(str::to_owned),
            thinking,
        })
    }
}

/// What `inject` did.
#[derive(Clone, Debug, PartialEq)]
pub enum InjectOutcome {
    /// `SYNTHETIC_ACCEPTANCE` unset or false: nothing read or written (an `--output` got a copy).
    OptedOut,
    /// Entries rewritten.
    Injected,
    /// Every entry was already synthetic at its AL: nothing changed.
    Unchanged,
    /// `--check`: entries reported, nothing written.
    Checked,
}

/// One entry in the report.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryReport {
    /// Backend name.
    pub backend: &'static str,
    /// Role (`prefill`, `decode`, ...).
    pub role: String,
    /// 1-based line of the entry.
    pub line: usize,
    /// Speculative tokens.
    pub k: u32,
    /// Speculative method, when configured.
    pub method: Option<String>,
    /// State before the run.
    pub state: EntryState,
    /// AL written (not for `--check`).
    pub al: Option<f64>,
    /// Where the AL came from: `SYNTHETIC_ACCEPTANCE_LENGTH` or `golden <curve>/<mode>/<k>`.
    pub al_source: Option<String>,
}

/// The result of `inject`.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectReport {
    /// The recipe.
    pub recipe: PathBuf,
    /// What happened.
    pub outcome: InjectOutcome,
    /// Framework as resolved (argument, `FRAMEWORK`, or the recipe's `backend.type`).
    pub framework: Option<String>,
    /// Every speculative entry.
    pub entries: Vec<EntryReport>,
    /// Every changed place, before and after.
    pub changes: Vec<LineChange>,
    /// The file written, if any.
    pub written: Option<PathBuf>,
}

impl InjectReport {
    /// The console text: each changed place (`- before`, `+ after`), one line per entry, and a
    /// closing line saying what was written.
    pub fn console_text(&self) -> String {
        use std::fmt::Write as _;
        let file = self.recipe.display();
        let mut s = String::new();
        if self.outcome == InjectOutcome::OptedOut {
            let _ = writeln!(
                s,
                "synthetic acceptance off (SYNTHETIC_ACCEPTANCE not true): {file} untouched"
            );
            return s;
        }
        for c in &self.changes {
            if c.inserted {
                let _ = writeln!(s, "{file}: after line {}", c.line);
            } else {
                let _ = writeln!(s, "{file}:{}", c.line);
            }
            c.before.iter().for_each(|l| {
                let _ = writeln!(s, "- {l}");
            });
            c.after.iter().for_each(|l| {
                let _ = writeln!(s, "+ {l}");
            });
        }
        for e in &self.entries {
            let state = match &e.state {
                EntryState::Real => "real".to_owned(),
                EntryState::Synthetic { al } => format!("synthetic AL {}", fmt_num(*al)),
                EntryState::Broken { why } => format!("BROKEN ({why})"),
            };
            let head = format!(
                "{file}:{} {} {}: {} k={}",
                e.line,
                e.backend,
                e.role,
                e.method.as_deref().unwrap_or("?"),
                e.k
            );
            let _ = match (e.al, &e.al_source) {
                (Some(al), Some(src)) if matches!(e.state, EntryState::Synthetic { al: was } if same_num(was, al)) =>
                {
                    writeln!(s, "{head}: synthetic AL {} ({src}), unchanged", fmt_num(al))
                }
                (Some(al), Some(src)) => {
                    writeln!(s, "{head}: {state} -> synthetic AL {} ({src})", fmt_num(al))
                }
                _ => writeln!(s, "{head}: {state}"),
            };
        }
        let fw = self.framework.as_deref().unwrap_or("?");
        let _ = match (&self.outcome, &self.written) {
            (InjectOutcome::Checked, _) if self.entries.is_empty() => {
                writeln!(s, "{file}: no speculative entries ({fw})")
            }
            (InjectOutcome::Checked, _) => Ok(()),
            (_, Some(w)) => writeln!(s, "synthetic acceptance ({fw}): wrote {}", w.display()),
            (_, None) => writeln!(s, "synthetic acceptance ({fw}): {file} unchanged"),
        };
        s
    }

    /// Exit code: 0, except `--check` with a broken entry (1).
    pub fn exit_code(&self) -> i32 {
        let broken = self
            .entries
            .iter()
            .any(|e| matches!(e.state, EntryState::Broken { .. }));
        if broken {
            crate::exit::FAILED
        } else {
            crate::exit::OK
        }
    }
}

/// Runs `inject` as configured: opt-out, `--check`, or the rewrite.
pub fn inject(cfg: &InjectConfig) -> Result<InjectReport, InjectError> {
    let file = cfg.recipe.clone();
    let mut report = InjectReport {
        recipe: file.clone(),
        outcome: InjectOutcome::OptedOut,
        framework: cfg.framework.as_ref().map(|(f, _)| f.clone()),
        entries: Vec::new(),
        changes: Vec::new(),
        written: None,
    };
    if !cfg.opt_in && !cfg.check {
        if let Some(out) = &cfg.output {
            let bytes = fs::read(&file).map_err(|e| InjectError::Recipe {
                file: file.clone(),
                source: YamlError::Io(e),
            })?;
            write_atomic(out, &bytes).map_err(|source| InjectError::Write {
                file: out.clone(),
                source,
            })?;
            report.written = Some(out.clone());
        }
        return Ok(report);
    }
    let recipe_err = |source| InjectError::Recipe {
        file: file.clone(),
        source,
    };
    let doc = yaml::load(&file).map_err(recipe_err)?;
    let (backend, framework) = resolve_backend(cfg, &doc, &file)?;
    report.framework = Some(framework);
    let entries = find_entries(backend, &doc, &file)?;
    if entries.is_empty() && !cfg.check {
        return Err(InjectError::NoEntry {
            file,
            backend: backend.meta().name,
            keys: backend.meta().keys,
        });
    }
    report.entries = entries
        .iter()
        .map(|e| EntryReport {
            backend: backend.meta().name,
            role: e.role.clone(),
            line: e.line,
            k: e.k,
            method: e.method.clone(),
            state: e.state.clone(),
            al: None,
            al_source: None,
        })
        .collect();
    if cfg.check {
        report.outcome = InjectOutcome::Checked;
        return Ok(report);
    }

    let golden = match (&cfg.golden, cfg.explicit_al) {
        (Some(p), _) => Some(GoldenSource::open(p).map_err(|source| InjectError::Golden {
            at: "--golden".into(),
            source,
        })?),
        (None, Some(_)) => None,
        (None, None) => {
            return Err(InjectError::Missing {
                what: "--golden",
                fix: "pass --golden with the golden_al_distribution directory, or set SYNTHETIC_ACCEPTANCE_LENGTH",
            })
        }
    };
    let mut plan = Vec::with_capacity(entries.len());
    for (e, r) in entries.iter().zip(report.entries.iter_mut()) {
        let (al, source) = entry_al(cfg, golden.as_ref(), backend, e, &file)?;
        if !(al.is_finite() && al >= 1.0 && al <= f64::from(e.k) + 1.0) {
            return Err(InjectError::AlOutOfRange {
                file,
                line: e.line,
                role: e.role.clone(),
                al,
                k: e.k,
            });
        }
        r.al = Some(al);
        r.al_source = Some(source);
        plan.push((e, al));
    }
    let (new_text, changes) = rewrite(backend, &doc, &plan, &file)?;
    report.outcome = if changes.is_empty() {
        InjectOutcome::Unchanged
    } else {
        InjectOutcome::Injected
    };
    report.changes = changes;
    let target = match &cfg.output {
        Some(out) => Some(out.clone()),
        None if report.outcome == InjectOutcome::Injected => {
            // Write through a symlink to the real file, so the link survives.
            Some(fs::canonicalize(&file).unwrap_or_else(|_| file.clone()))
        }
        None => None,
    };
    if let Some(t) = target {
        write_atomic(&t, new_text.as_bytes()).map_err(|source| InjectError::Write {
            file: t.clone(),
            source,
        })?;
        report.written = Some(cfg.output.clone().unwrap_or(file));
    }
    Ok(report)
}

/// The rewritten text and its changed lines: the backend's edits applied to the original text,
/// re-read and checked.
fn rewrite(
    backend: &dyn Backend,
    doc: &Doc,
    plan: &[(&Entry<'_>, f64)],
    file: &Path,
) -> Result<(String, Vec<LineChange>), InjectError> {
    let edits = backend
        .edits(doc, plan)
        .map_err(|b| InjectError::BadEntry {
            file: file.to_owned(),
            line: b.line,
            what: b.what,
        })?;
    let internal = |what: String| InjectError::Internal {
        file: file.to_owned(),
        what,
    };
    let (new_text, changes) = edit::apply(&doc.src, edits).map_err(internal)?;
    if new_text != doc.src.text() {
        verify(backend, &new_text, plan, file)?;
    }
    Ok((new_text, changes))
}

/// Fuzz and property harness (see `crate::fuzzing`): rewrites `text` under the recipe's own
/// framework and under each framework by name, at an AL inside every entry's range. Panics when
/// the rewriter reports an internal error, touches a line it does not list, or changes anything
/// on a second run.
#[cfg(any(test, fuzzing))]
pub(crate) fn fuzz_rewrite(text: String) {
    let file = Path::new("fuzz.yaml");
    let Ok(doc) = yaml::parse(text) else {
        return;
    };
    let al = |k: u32| 1.0 + f64::from(k) / 2.0;
    for framework in [
        None,
        Some("vllm"),
        Some("sglang"),
        Some("trtllm"),
        Some("atom"),
    ] {
        let cfg = InjectConfig {
            recipe: file.to_owned(),
            output: None,
            check: false,
            opt_in: true,
            framework: framework.map(|f| (f.to_owned(), "FRAMEWORK")),
            explicit_al: None,
            golden: None,
            model_prefix: None,
            thinking: None,
        };
        let Ok((backend, _)) = resolve_backend(&cfg, &doc, file) else {
            continue;
        };
        let Ok(entries) = find_entries(backend, &doc, file) else {
            continue;
        };
        let plan: Vec<(&Entry<'_>, f64)> = entries.iter().map(|e| (e, al(e.k))).collect();
        let (new_text, changes) = match rewrite(backend, &doc, &plan, file) {
            Err(InjectError::Internal { what, .. }) => {
                panic!("{}: internal error: {what}", backend.meta().name)
            }
            Err(_) => continue,
            Ok(r) => r,
        };
        check_untouched(doc.src.text(), &new_text, &changes);
        let again = yaml::parse(new_text.clone()).expect("a verified rewrite parses");
        let entries = find_entries(backend, &again, file).expect("a verified rewrite has entries");
        let plan: Vec<(&Entry<'_>, f64)> = entries.iter().map(|e| (e, al(e.k))).collect();
        match rewrite(backend, &again, &plan, file) {
            Ok((newer, changes)) => {
                assert!(
                    changes.is_empty(),
                    "{}: second run changed {changes:?}",
                    backend.meta().name
                );
                assert_eq!(newer, new_text);
            }
            Err(e) => panic!("{}: second run failed: {e}", backend.meta().name),
        }
    }
}

/// Asserts that `new` is `old` with exactly the listed changes: every other line byte-identical,
/// terminator included (the last line may gain one when lines are inserted after it).
#[cfg(any(test, fuzzing))]
pub(crate) fn check_untouched(old: &str, new: &str, changes: &[LineChange]) {
    enum Want<'a> {
        Same(&'a str),
        Changed(&'a str),
    }
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let strip = |l: &str| -> String {
        l.strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .unwrap_or(l)
            .to_owned()
    };
    fn push_inserts<'a>(changes: &'a [LineChange], n: usize, want: &mut Vec<Want<'a>>) {
        for c in changes.iter().filter(|c| c.inserted && c.line == n) {
            want.extend(c.after.iter().map(|l| Want::Changed(l.as_str())));
        }
    }
    let mut want = Vec::new();
    push_inserts(changes, 0, &mut want);
    let mut n = 1;
    while n <= old_lines.len() {
        let mut last = n;
        match changes.iter().find(|c| !c.inserted && c.line == n) {
            Some(c) => {
                for (i, b) in c.before.iter().enumerate() {
                    assert_eq!(
                        &strip(old_lines[n - 1 + i]),
                        b,
                        "change at line {n} lists its old line"
                    );
                }
                want.extend(c.after.iter().map(|l| Want::Changed(l.as_str())));
                last = n + c.before.len().max(1) - 1;
            }
            None => want.push(Want::Same(old_lines[n - 1])),
        }
        push_inserts(changes, last, &mut want);
        n = last + 1;
    }
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    assert_eq!(new_lines.len(), want.len(), "line count of the rewrite");
    for (i, (got, w)) in new_lines.iter().zip(&want).enumerate() {
        match w {
            Want::Same(s) if s.ends_with('\n') => {
                assert_eq!(got, s, "untouched line {} changed", i + 1)
            }
            Want::Same(s) => assert_eq!(strip(got), *s, "untouched last line {} changed", i + 1),
            Want::Changed(c) => assert_eq!(strip(got), *c, "changed line {} differs", i + 1),
        }
    }
}

/// Re-reads the rewritten text and checks every planned entry now fakes its AL.
fn verify(
    backend: &dyn Backend,
    text: &str,
    plan: &[(&Entry<'_>, f64)],
    file: &Path,
) -> Result<(), InjectError> {
    let internal = |what: String| InjectError::Internal {
        file: file.to_owned(),
        what,
    };
    let doc = yaml::parse(text.to_owned())
        .map_err(|e| internal(format!("rewritten YAML does not parse: {e}")))?;
    let after = find_entries(backend, &doc, file)?;
    if after.len() != plan.len() {
        return Err(internal(format!(
            "{} entries before, {} after",
            plan.len(),
            after.len()
        )));
    }
    for ((before, al), now) in plan.iter().zip(&after) {
        match &now.state {
            EntryState::Synthetic { al: got } if same_num(*got, *al) && now.k == before.k => {}
            other => {
                return Err(internal(format!(
                "{} entry of line {} reads {other:?} after the rewrite, expected synthetic AL {al}",
                before.role, before.line
            )))
            }
        }
    }
    Ok(())
}

fn entry_al(
    cfg: &InjectConfig,
    golden: Option<&GoldenSource>,
    backend: &dyn Backend,
    e: &Entry<'_>,
    file: &Path,
) -> Result<(f64, String), InjectError> {
    let at = format!(
        "{}:{} ({} {})",
        file.display(),
        e.line,
        backend.meta().name,
        e.role
    );
    let lookup = |g: &GoldenSource, prefix: &str, thinking: ThinkingMode, method: &str| {
        let q = CurveQuery {
            model_prefix: prefix,
            method,
            draft_model: e.draft_model.as_deref(),
            draft_sample_method: e.draft_sample_method.as_deref(),
        };
        g.select(&q, thinking, e.k)
    };
    if let Some(al) = cfg.explicit_al {
        // The committed curve wins over a caller's number: refuse a contradicting one.
        if let (Some(g), Some(prefix), Some(thinking), Some(method)) = (
            golden,
            cfg.model_prefix.as_deref(),
            cfg.thinking,
            e.method.as_deref(),
        ) {
            match lookup(g, prefix, thinking, method) {
                Ok(v) if !same_num(v.al, al) => {
                    return Err(InjectError::AlDisagrees {
                        at,
                        explicit: al,
                        golden: v.al,
                        curve: format!("{}/{}/{}", v.curve.name, thinking, e.k),
                    })
                }
                Ok(_) => {}
                Err(err) if err.is_missing() => {}
                Err(source) => return Err(InjectError::Golden { at, source }),
            }
        }
        return Ok((al, "SYNTHETIC_ACCEPTANCE_LENGTH".into()));
    }
    let g = golden.expect("golden source checked by the caller");
    let prefix = cfg.model_prefix.as_deref().ok_or(InjectError::Missing {
        what: "MODEL_PREFIX",
        fix: "set MODEL_PREFIX (e.g. dsv4), or set SYNTHETIC_ACCEPTANCE_LENGTH",
    })?;
    let thinking = cfg.thinking.ok_or(InjectError::Missing {
        what: "THINKING_MODE",
        fix: "set THINKING_MODE to thinking_on or thinking_off; it is never inferred from the recipe",
    })?;
    let Some(method) = e.method.as_deref() else {
        return Err(InjectError::BadEntry {
            file: file.to_owned(),
            line: e.line,
            what: format!(
                "{} entry has no speculative method, which the golden lookup needs; set it in the recipe or set SYNTHETIC_ACCEPTANCE_LENGTH",
                e.role
            ),
        });
    };
    let v =
        lookup(g, prefix, thinking, method).map_err(|source| InjectError::Golden { at, source })?;
    Ok((
        v.al,
        format!("golden {}/{}/{}", v.curve.name, thinking, e.k),
    ))
}

fn find_entries<'a>(
    backend: &dyn Backend,
    doc: &'a Doc,
    file: &Path,
) -> Result<Vec<Entry<'a>>, InjectError> {
    let roles = roles(doc, backend.meta().section);
    let mut entries = backend
        .entries(doc, &roles)
        .map_err(|b| InjectError::BadEntry {
            file: file.to_owned(),
            line: b.line,
            what: b.what,
        })?;
    // A role that aliases another shares its node: one entry, edited once.
    let mut seen = Vec::new();
    entries.retain(|e| {
        let key = (e.node.start, e.node.end);
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    for e in &mut entries {
        if let EntryState::Synthetic { al } = e.state {
            if !(al.is_finite() && al >= 1.0 && al <= f64::from(e.k) + 1.0) {
                e.state = EntryState::Broken {
                    why: format!(
                        "synthetic AL {al} is outside [1, {}] for {} speculative tokens",
                        e.k + 1,
                        e.k
                    ),
                };
            }
        }
    }
    Ok(entries)
}

/// The role mappings of `backend.<section>`; a recipe without `backend` is one flat role.
fn roles<'a>(doc: &'a Doc, section: &str) -> Vec<Role<'a>> {
    let root = &doc.root;
    let Some(backend) = root.get("backend") else {
        return vec![Role {
            name: "top-level".into(),
            map: root,
        }];
    };
    let Some(entries) = backend
        .get(section)
        .map(|s| doc.resolve(s))
        .and_then(Node::entries)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            let v = doc.resolve(v);
            Some(Role {
                name: k.as_str()?.to_owned(),
                map: v.is_map().then_some(v)?,
            })
        })
        .collect()
}

fn backend_for_framework(
    name: &str,
    from: &'static str,
) -> Result<&'static dyn Backend, InjectError> {
    let family = Framework::from_alias(name);
    if let Some(b) = BACKENDS.iter().find(|b| Some(b.meta().family) == family) {
        return Ok(*b);
    }
    if family == Some(Framework::Tilert) {
        // Known to InferenceX, but without a synthetic-acceptance knob.
        return Err(InjectError::NoBackend {
            name: name.to_owned(),
        });
    }
    Err(InjectError::UnknownFramework {
        name: name.to_owned(),
        from,
    })
}

/// Picks the backend from the argument/`FRAMEWORK`, `backend.type` and the engine section,
/// which must all agree.
fn resolve_backend(
    cfg: &InjectConfig,
    doc: &Doc,
    file: &Path,
) -> Result<(&'static dyn Backend, String), InjectError> {
    let mixed = |detail: String| InjectError::MixedFrameworks {
        file: file.to_owned(),
        detail,
    };
    let backend_node = doc.root.get("backend");
    let sections: Vec<&'static dyn Backend> = BACKENDS
        .iter()
        .copied()
        .filter(|b| backend_node.and_then(|n| n.get(b.meta().section)).is_some())
        .collect();
    if sections.len() > 1 {
        let names: Vec<_> = sections.iter().map(|b| b.meta().section).collect();
        return Err(mixed(format!(
            "the backend has {}; keep one engine per recipe",
            names.join(" and ")
        )));
    }
    let by_section = sections.first().copied();
    let recipe_type = backend_node
        .and_then(|n| n.get("type"))
        .and_then(Node::as_str)
        .map(|t| t.trim().to_ascii_lowercase());
    let by_type = match &recipe_type {
        Some(t) => match BACKENDS
            .iter()
            .find(|b| b.meta().recipe_types.contains(&t.as_str()))
        {
            Some(b) => Some(*b),
            None if cfg.framework.is_none() => {
                return Err(InjectError::UnknownFramework {
                    name: t.clone(),
                    from: "the recipe's backend.type",
                })
            }
            None => {
                return Err(mixed(format!(
                    "{} is {} but the recipe's backend.type is {t}",
                    cfg.framework.as_ref().map_or("", |f| f.1),
                    cfg.framework.as_ref().map_or("", |f| f.0.as_str()),
                )))
            }
        },
        None => None,
    };
    let by_arg = match &cfg.framework {
        Some((name, from)) => Some((backend_for_framework(name, from)?, name.clone(), *from)),
        None => None,
    };
    if let (Some(t), Some(s)) = (by_type, by_section) {
        if t.meta().name != s.meta().name {
            return Err(mixed(format!(
                "backend.type is {} but the recipe configures {}",
                recipe_type.unwrap_or_default(),
                s.meta().section
            )));
        }
    }
    let recipe_backend = by_type.or(by_section);
    match (by_arg, recipe_backend) {
        (Some((a, name, from)), Some(r)) if a.meta().name != r.meta().name => Err(mixed(format!(
            "{from} is {name} ({} backend) but the recipe is {} (backend.type / {})",
            a.meta().name,
            r.meta().name,
            r.meta().section
        ))),
        (Some((a, name, _)), _) => Ok((a, name)),
        (None, Some(r)) => Ok((r, recipe_type.unwrap_or_else(|| r.meta().name.to_owned()))),
        (None, None) => Err(InjectError::NoFramework {
            file: file.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fixture recipe, under its own framework at an AL inside each entry's range: changed
    /// lines are listed, and every other line is byte-identical.
    #[test]
    fn fixture_rewrites_list_their_lines_and_touch_nothing_else() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recipes");
        let mut n = 0;
        for entry in fs::read_dir(&dir).unwrap() {
            let file = entry.unwrap().path();
            let text = fs::read_to_string(&file).unwrap();
            let doc = yaml::parse(text.clone()).unwrap();
            let cfg = InjectConfig {
                recipe: file.clone(),
                output: None,
                check: false,
                opt_in: true,
                framework: None,
                explicit_al: None,
                golden: None,
                model_prefix: None,
                thinking: None,
            };
            let (backend, _) = resolve_backend(&cfg, &doc, &file).unwrap();
            let entries = find_entries(backend, &doc, &file).unwrap();
            assert!(!entries.is_empty(), "{}", file.display());
            let plan: Vec<(&Entry<'_>, f64)> = entries
                .iter()
                .map(|e| (e, 1.0 + f64::from(e.k) / 2.0))
                .collect();
            let (new, changes) = rewrite(backend, &doc, &plan, &file).unwrap();
            assert!(!changes.is_empty(), "{}", file.display());
            check_untouched(&text, &new, &changes);
            n += 1;
        }
        assert!(n >= 4);
    }

    #[test]
    #[should_panic(expected = "untouched line 2 changed")]
    fn the_untouched_lines_oracle_catches_an_unlisted_edit() {
        check_untouched("a\nb\nc\n", "a\nB\nc\n", &[]);
    }

    #[test]
    fn numbers_are_written_like_python_floats() {
        assert_eq!(fmt_num(2.49), "2.49");
        assert_eq!(fmt_num(2.49 - 1.0), "1.49");
        assert_eq!(fmt_num(3.0), "3.0");
        assert_eq!(fmt_num(3.51 - 1.0), "2.51");
    }

    #[test]
    fn framework_names_map_to_backends() {
        for (fw, b) in [
            ("vllm", "vllm"),
            ("dynamo-vllm", "vllm"),
            ("sglang", "sglang"),
            ("dynamo-sglang", "sglang"),
            ("trt", "trtllm"),
            ("dynamo-trt", "trtllm"),
            ("tensorrt-llm", "trtllm"),
            ("atom", "atom"),
        ] {
            assert_eq!(
                backend_for_framework(fw, "FRAMEWORK").unwrap().meta().name,
                b
            );
        }
        assert!(matches!(
            backend_for_framework("tilert", "FRAMEWORK"),
            Err(InjectError::NoBackend { .. })
        ));
        assert!(matches!(
            backend_for_framework("mlc", "FRAMEWORK"),
            Err(InjectError::UnknownFramework { .. })
        ));
    }
}
