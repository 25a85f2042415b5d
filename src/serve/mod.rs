//! Owns an inference server's process lifecycle for sweeps that restart it (`replay
//! --serve-cmd`) and for golden collection: the `--serve-cmd` template and its grid of cells
//! (`template`), one server's process group from start to stop (`server`), and the wait for GPU
//! memory between servers (`memory_wait`).
//!
//! ```text
//!  --serve-cmd TEMPLATE + --serve-param NAME=v1,v2 ──> Template ──> cells (product, last fastest)
//!  per cell: Server::start (sh -c, own process group, log file, /health or /v1/models = 200)
//!      ──> the caller runs its load ──> Server::exited? ──> Server::stop (SIGTERM, grace, SIGKILL)
//!      ──> memory_wait::wait_for_release (the caller's reads, back to the baseline) ──> next cell
//! ```
//!
//! Sits below `sweep` and anything else that runs cells (which decide what a cell runs and
//! write `cells.json`); it uses only `stop` (the one cancellation path: a signal ends a
//! readiness wait, and the caller then stops the group), `timefmt`, `fsutil` and the foundation
//! (`process`, `debug`). GPU memory is read by `telemetry`, the one place that runs nvidia-smi or
//! amd-smi: the caller hands its reads to the wait. Nothing here
//! prints or exits. A [`Server`] dropped without [`Server::stop`] kills its group, so a panic
//! leaves no server behind.

mod memory_wait;
mod server;
mod template;

pub use crate::process::describe;
pub use memory_wait::{wait_for_release, GpuMemory, GpuWait, MARGIN_MIB};
pub use server::{log_tail, ServeError, Server, Stopped, TAIL_LINES};
pub use template::{parse_param, Cell, ServeParam, Template, TemplateError, PORT};

/// A free TCP port on 127.0.0.1 (bound, read, released): the `{port}` of a cell. Another process
/// may take it before the server binds it; the server then fails to start and the cell says so.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
