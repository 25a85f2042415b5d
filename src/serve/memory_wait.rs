//! The wait for GPU memory after a server stops: a stopped vLLM's memory is released by the
//! driver a moment after its processes exit, and the next server started before that finds the
//! GPUs full and fails (or, worse, starts with a smaller KV cache). Memory used per GPU is read
//! once before the first server (the baseline) and polled after each stop until every GPU is
//! back within a margin of it. The reads are the caller's (`telemetry`'s nvidia-smi or amd-smi,
//! each killed at its timeout); a read that fails ends the wait with its reason. The wait is
//! bounded: at the bound the caller warns and goes on.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::stop::Stopper;

/// Memory used per GPU index, MiB, as `nvidia-smi` or `amd-smi` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuMemory(pub BTreeMap<u32, u64>);

/// MiB over the baseline still counted as released (the driver's and other tenants' noise).
pub const MARGIN_MIB: u64 = 1024;

/// How the wait after a stop went (in `cells.json`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuWait {
    /// Every GPU came back within the margin of the baseline.
    pub released: bool,
    /// Seconds waited.
    pub waited_s: f64,
    /// Reads made.
    pub polls: u32,
    /// The baseline, MiB per GPU.
    pub baseline_mib: GpuMemory,
    /// The last reading, MiB per GPU.
    pub last_mib: GpuMemory,
    /// Why memory could not be read (the wait ended there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

impl GpuWait {
    /// One line for the console.
    pub fn summary_line(&self) -> String {
        let over: Vec<String> = self
            .last_mib
            .0
            .iter()
            .filter(|(i, &used)| {
                used > self.baseline_mib.0.get(i).copied().unwrap_or(0) + MARGIN_MIB
            })
            .map(|(i, used)| {
                format!(
                    "GPU {i} {used} MiB (was {} MiB)",
                    self.baseline_mib.0.get(i).copied().unwrap_or(0)
                )
            })
            .collect();
        if self.released {
            format!(
                "GPU memory released after {:.1} s ({} reads)",
                self.waited_s, self.polls
            )
        } else if let Some(why) = &self.unreadable {
            format!(
                "GPU memory could not be read after {:.1} s ({why}); starting the next server \
                 without knowing whether it was released",
                self.waited_s
            )
        } else {
            format!(
                "GPU memory still held after {:.1} s: {}; starting the next server anyway",
                self.waited_s,
                over.join(", ")
            )
        }
    }
}

impl GpuMemory {
    /// Every GPU of the baseline uses at most its baseline plus [`MARGIN_MIB`].
    fn within(&self, baseline: &GpuMemory) -> bool {
        baseline.0.iter().all(|(i, &base)| {
            self.0
                .get(i)
                .is_none_or(|&used| used <= base.saturating_add(MARGIN_MIB))
        })
    }
}

/// Polls memory with `read` every `poll` until it is back within the margin of `baseline`,
/// `bound` passes, a read fails (its reason is kept), or `stop` fires.
pub async fn wait_for_release<F, R>(
    baseline: &GpuMemory,
    bound: Duration,
    poll: Duration,
    stop: &Stopper,
    mut read: F,
) -> GpuWait
where
    F: FnMut() -> R,
    R: Future<Output = Result<GpuMemory, String>>,
{
    let t0 = Instant::now();
    let mut polls = 0;
    let mut last = GpuMemory::default();
    let mut unreadable = None;
    let released = loop {
        let now = match read().await {
            Ok(m) => m,
            Err(why) => {
                unreadable = Some(why);
                break false;
            }
        };
        polls += 1;
        let ok = now.within(baseline);
        last = now;
        if ok {
            break true;
        }
        if t0.elapsed() >= bound || stop.reason().is_some() {
            break false;
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = stop.token().cancelled() => {}
        }
    };
    GpuWait {
        released,
        waited_s: t0.elapsed().as_secs_f64(),
        polls,
        baseline_mib: baseline.clone(),
        last_mib: last,
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(pairs: &[(u32, u64)]) -> GpuMemory {
        GpuMemory(pairs.iter().copied().collect())
    }

    #[test]
    fn readings_compare_with_a_margin() {
        let base = mem(&[(0, 500), (1, 0)]);
        assert!(mem(&[(0, 1500), (1, 1024)]).within(&base));
        assert!(!mem(&[(0, 1525), (1, 0)]).within(&base));
        // A GPU the reading lacks is not held.
        assert!(mem(&[(0, 500)]).within(&base));
    }

    #[tokio::test]
    async fn the_wait_ends_when_memory_is_back_and_keeps_why_a_read_failed() {
        let base = mem(&[(0, 500)]);
        let stop = Stopper::new();
        let mut reads = vec![Ok(mem(&[(0, 900)])), Ok(mem(&[(0, 9000)]))];
        let w = wait_for_release(&base, Duration::from_secs(5), Duration::ZERO, &stop, || {
            std::future::ready(reads.pop().unwrap())
        })
        .await;
        assert!(w.released, "{w:?}");
        assert_eq!((w.polls, w.unreadable.as_deref()), (2, None));
        assert_eq!(w.last_mib, mem(&[(0, 900)]));

        let mut reads = vec![
            Err("nvidia-smi failed: timed out after 30s".to_owned()),
            Ok(mem(&[(0, 9000)])),
        ];
        let w = wait_for_release(&base, Duration::from_secs(5), Duration::ZERO, &stop, || {
            std::future::ready(reads.pop().unwrap())
        })
        .await;
        assert!(!w.released);
        assert_eq!(w.polls, 1);
        assert_eq!(w.last_mib, mem(&[(0, 9000)]));
        let line = w.summary_line();
        assert!(
            line.contains("could not be read") && line.contains("timed out after 30s"),
            "{line}"
        );
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["unreadable"], "nvidia-smi failed: timed out after 30s");
    }
}
