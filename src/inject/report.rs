//! What `specperf inject` reports: the outcome, one line per speculative entry, the changed
//! lines, and the console text and exit code made from them.

use std::path::PathBuf;

use super::backend::{fmt_num, same_num, EntryState};
use super::edit::LineChange;

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
    /// Things accepted but worth a look (duplicate keys), for stderr.
    pub warnings: Vec<String>,
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
}
