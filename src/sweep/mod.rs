//! Sweeps, repeated runs and SLA search: many replays against one server, in one process.
//!
//! ```text
//!  flags ──> plan (points: grid or zip of the comma lists, or a search) ──> for each point:
//!     drain wait (scrape::drain) ──> N runs (engine::replay, a child Stopper each) ──> run values
//!     ──> aggregate (stats: t-interval, convergence) ──> index (sweep.json, after every point)
//!  index ──> table (console, sweep.json, sweep.csv) and the Pareto page (report::pareto)
//! ```
//!
//! Sits above `engine`, `config`, `scrape` and `report`, as `gate` does; nothing below imports
//! it. One [`Stopper`](crate::Stopper) for the whole sweep (signals), a child of it for each run
//! (a run's deadline or stall ends that run only).

mod stats;
