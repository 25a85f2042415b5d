//! Sweeps, repeated runs and SLA search: many replays against one server, in one process.
//!
//! ```text
//!  flags ──> plan (points: grid or zip of the comma lists, or a search) ──> for each point:
//!     drain wait (scrape::drain) ──> N runs (engine::replay, a child Stopper each) ──> run values
//!     ──> aggregate (stats: t-interval, convergence) ──> index (sweep.json, after every point)
//!     ──> AIPerf's confidence aggregate of the runs (aiperf: profile_export_aiperf_aggregate.json)
//!  index ──> table (console, sweep.json, sweep.csv) and the Pareto page (report::pareto)
//! ```
//!
//! With `--serve-cmd` (`cells`), all of that runs once per server cell: the server started,
//! the replay or sweep run against it, the server's process group stopped (`serve`), `cells.json`.
//!
//! Sits above `engine`, `config`, `scrape`, `serve` and `report`, as `gate` does; nothing below
//! imports it. One [`Stopper`](crate::Stopper) for the whole sweep (signals), a child of it for each run
//! (a run's deadline or stall ends that run only).

mod aiperf;
mod categories;
mod cells;
mod config;
mod index;
mod journal;
mod plan;
mod report;
mod run;
mod search;
mod stats;
mod values;

pub use categories::{
    categories_wanted, run_categories, CategoriesOutcome, CategoryEvent, CategoryPlan,
    CategoryResult,
};
pub use cells::{
    cells_console, run_cells, serve_wanted, CellEntry, CellEvent, CellStatus, CellWork,
    CellsConfig, CellsIndex, CellsOutcome, ParamEntry, CELLS_SCHEMA,
};
pub use config::{check_single, wanted, wanted_profile, SweepConfig};
pub use index::{PointEntry, PointStatus, RunEntry, SweepIndex, SWEEP_SCHEMA};
pub(crate) use journal::{read as read_index, write as write_index, IndexFile};
pub use journal::{IndexError, IndexStatus, ItemStatus, SweepError};
pub use plan::{Param, Point};
pub use report::{console, overlay, OverlayError};
pub use run::{run_sweep, Event, SweepOutcome};
pub use search::{Probe, Search};
pub use stats::{Check as ConvergenceCheck, Interval};
pub use values::{Check, Objective, Values, Verdict};
