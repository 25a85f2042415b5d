//! The AL gate: golden curve + a replay of its collection on the eval's own server -> verdict.
//!
//! ```text
//!  flags/env ─> settings ─> plan: curve (golden::select) ─> collection block ─> prompts
//!            ─> ReplayArgs ─> RunConfig ─> run: metrics preflight ─> engine::replay (stable
//!               before/after scrapes, settle) ─> acceptance ─> verdict
//!            ─> record: al_gate_<RESULT_FILENAME>.json (atomic) + console line
//!  summary: many result files ─> markdown table + JSON roll-up (`specperf gate-summary`)
//! ```
//!
//! Report-only and bounded: every path ends in a [`GateResult`] (pass, below, above, skipped with
//! a reason, error with a reason), the whole gate is bounded by `AL_GATE_TIMEOUT_S`, and a signal
//! becomes an `error`/`terminated` result at once (`inferencex-contract.md` §5, §6).

mod plan;
mod record;
mod run;
mod settings;
mod summary;

pub(crate) use plan::collection_replay;
pub use record::{GateResult, Verdict, WriteError};
pub use run::run_gate;
pub use summary::{summarize, GateSummary, SummaryError};
