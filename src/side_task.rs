//! The tasks that run beside the requests (the `/metrics` scrape, GPU telemetry, the one
//! aggregator): joining one says what became of it, never a silent `None`.
//!
//! A side task that panics loses its figures, but the run goes on and writes what it has; the
//! reader must learn which figures are missing and why. [`join`] turns a task's end into its
//! value or a [`SideTaskFailed`] naming the task and the panic's own message, which the run
//! puts in its warnings (console and `summary.json`) or, where those figures are the point
//! (`--require-gpu-telemetry`, the gate's counters), turns into a failed run.
//!
//! The tests need a side task that panics on demand: with `SPECPERF_PANIC_IN` set to a
//! comma-separated list of [`SideTask::name`]s, [`panic_if_asked`] panics in those tasks. The
//! variable is read once; unset, each call is one relaxed atomic load.

use std::fmt;
use std::sync::OnceLock;

use tokio::task::JoinHandle;

/// A task that runs beside the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SideTask {
    /// The `/metrics` scrape (acceptance length and server metrics).
    Scrape,
    /// GPU telemetry (power, energy, memory).
    Telemetry,
    /// The one aggregator every request record goes to.
    Aggregator,
}

impl SideTask {
    const ALL: [SideTask; 3] = [SideTask::Scrape, SideTask::Telemetry, SideTask::Aggregator];

    /// Its name in `SPECPERF_PANIC_IN`.
    pub fn name(self) -> &'static str {
        match self {
            SideTask::Scrape => "scrape",
            SideTask::Telemetry => "telemetry",
            SideTask::Aggregator => "aggregator",
        }
    }

    /// What the run lacks when it failed.
    fn loss(self) -> &'static str {
        match self {
            SideTask::Scrape => "this run has no server metrics and no acceptance length",
            SideTask::Telemetry => "this run has no GPU telemetry and no energy",
            SideTask::Aggregator => "no request's figures were aggregated",
        }
    }

    fn bit(self) -> u8 {
        match self {
            SideTask::Scrape => 1,
            SideTask::Telemetry => 2,
            SideTask::Aggregator => 4,
        }
    }
}

impl fmt::Display for SideTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SideTask::Scrape => "the /metrics scrape task",
            SideTask::Telemetry => "the GPU telemetry task",
            SideTask::Aggregator => "the aggregator task",
        })
    }
}

/// A side task ended without its value.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{task} {cause}; {loss} (a specperf bug: please report it with this line)", loss = task.loss())]
pub struct SideTaskFailed {
    /// Which task.
    pub task: SideTask,
    /// "panicked: <its message>" or "was cancelled".
    pub cause: String,
}

/// Waits for `handle`, the task `task`, and returns its value or why there is none.
pub async fn join<T>(task: SideTask, handle: JoinHandle<T>) -> Result<T, SideTaskFailed> {
    handle.await.map_err(|e| {
        let cause = if e.is_cancelled() {
            "was cancelled".to_owned()
        } else {
            let payload = e.into_panic();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            format!("panicked: {msg}")
        };
        SideTaskFailed { task, cause }
    })
}

/// The value of a joined side task, or `None` with the failure added to `failures`.
pub(crate) fn keep<T>(
    joined: Result<T, SideTaskFailed>,
    failures: &mut Vec<SideTaskFailed>,
) -> Option<T> {
    joined.map_err(|e| failures.push(e)).ok()
}

/// Panics when `SPECPERF_PANIC_IN` names `task` (the tests' way to make a side task fail).
pub fn panic_if_asked(task: SideTask) {
    static ASKED: OnceLock<u8> = OnceLock::new();
    let asked = *ASKED.get_or_init(|| {
        std::env::var("SPECPERF_PANIC_IN")
            .map(|v| {
                v.split(',')
                    .filter_map(|n| SideTask::ALL.into_iter().find(|t| t.name() == n.trim()))
                    .fold(0, |bits, t| bits | t.bit())
            })
            .unwrap_or(0)
    });
    if asked & task.bit() != 0 {
        panic!("SPECPERF_PANIC_IN={} asked {task} to panic", task.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_named_with_its_message_and_what_is_lost() {
        let h = tokio::spawn(async {
            if std::hint::black_box(true) {
                panic!("frame 3 has no GPU");
            }
            1
        });
        let e = join(SideTask::Telemetry, h).await.unwrap_err();
        assert_eq!(e.task, SideTask::Telemetry);
        let s = e.to_string();
        assert!(s.starts_with("the GPU telemetry task panicked: frame 3 has no GPU; this run has no GPU telemetry and no energy"), "{s}");
        let h = tokio::spawn(async { panic!("{} of {}", 1, 2) });
        let e = join::<()>(SideTask::Scrape, h).await.unwrap_err();
        assert_eq!(e.cause, "panicked: 1 of 2");
    }

    #[tokio::test]
    async fn a_cancelled_task_says_so_and_a_finished_one_gives_its_value() {
        let h = tokio::spawn(std::future::pending::<()>());
        h.abort();
        let e = join(SideTask::Aggregator, h).await.unwrap_err();
        assert_eq!(e.cause, "was cancelled");
        assert_eq!(
            join(SideTask::Scrape, tokio::spawn(async { 7 }))
                .await
                .unwrap(),
            7
        );
    }
}
