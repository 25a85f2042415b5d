//! The run's one cancellation path: a [`Stopper`] shared by the engine, the scrape side task, the
//! simulator and the gate. Deadline, stall watchdog, SIGINT and SIGTERM all stop through it; the
//! first reason given wins. It sits below every stage so that each can hold it without importing
//! the engine that wires them.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Why a run stopped before finishing its requests (`meta.stopped_by` in the summary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The whole-run deadline (`--timeout-seconds`) passed.
    Deadline,
    /// No request finished for `--stall-timeout-seconds`.
    Stalled,
    /// SIGINT / Ctrl-C.
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// AgentX: a root warmup request (primer or warmup-per-lane) failed or was cancelled; the
    /// trees cannot be positioned at their t*, so the run is not a valid measurement.
    WarmupFailed,
    /// AgentX: the live `--failed-request-threshold` was crossed (failed profiling records over
    /// the threshold, armed at `max(concurrency, 10)` records).
    FailedThreshold,
}

impl StopReason {
    /// The name written in the summary (`meta.stopped_by`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Deadline => "deadline",
            StopReason::Stalled => "stalled",
            StopReason::Interrupted => "interrupted",
            StopReason::Terminated => "terminated",
            StopReason::WarmupFailed => "warmup_failed",
            StopReason::FailedThreshold => "failed_threshold",
        }
    }
}

/// The run's one cancellation path. The first reason given wins.
#[derive(Clone, Debug, Default)]
pub struct Stopper {
    token: CancellationToken,
    reason: Arc<Mutex<Option<StopReason>>>,
    /// The stopper this one was made from ([`Stopper::child`]): stopping it stops this one.
    parent: Option<Arc<Stopper>>,
}

impl Stopper {
    /// A fresh, untriggered stopper.
    pub fn new() -> Self {
        Stopper::default()
    }

    /// Stops the run for `reason` (ignored if already stopped).
    pub fn stop(&self, reason: StopReason) {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(reason);
        self.token.cancel();
    }

    /// Why the run was stopped, if it was (its own reason first, else its parent's).
    pub fn reason(&self) -> Option<StopReason> {
        let own = *self.reason.lock().unwrap_or_else(|e| e.into_inner());
        own.or_else(|| self.parent.as_ref().and_then(|p| p.reason()))
    }

    /// A stopper for one part of the work (one run of a sweep): stopped with this one (a signal),
    /// while stopping it (that run's deadline) leaves this one running.
    pub fn child(&self) -> Stopper {
        Stopper {
            token: self.token.child_token(),
            reason: Arc::default(),
            parent: Some(Arc::new(self.clone())),
        }
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_stops_with_its_parent_but_not_the_other_way() {
        let parent = Stopper::new();
        let child = parent.child();
        child.stop(StopReason::Deadline);
        assert!(child.token().is_cancelled() && !parent.token().is_cancelled());
        assert_eq!(parent.reason(), None);
        let second = parent.child();
        parent.stop(StopReason::Terminated);
        assert!(second.token().is_cancelled());
        assert_eq!(second.reason(), Some(StopReason::Terminated));
        assert_eq!(
            child.reason(),
            Some(StopReason::Deadline),
            "the first reason stays"
        );
    }
}
