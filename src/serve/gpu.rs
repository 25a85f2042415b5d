//! The wait for GPU memory after a server stops: a stopped vLLM's memory is released by the
//! driver a moment after its processes exit, and the next server started before that finds the
//! GPUs full and fails (or, worse, starts with a smaller KV cache). With `nvidia-smi` on PATH,
//! memory used per GPU is read once before the first server (the baseline) and polled after each
//! stop until every GPU is back within a margin of it; without `nvidia-smi` nothing is waited
//! for. The wait is bounded: at the bound the caller warns and goes on.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::stop::Stopper;

/// Memory used per GPU index, MiB, as `nvidia-smi` reports it.
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
    /// Reads of `nvidia-smi` made.
    pub polls: u32,
    /// The baseline, MiB per GPU.
    pub baseline_mib: GpuMemory,
    /// The last reading, MiB per GPU.
    pub last_mib: GpuMemory,
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
                "GPU memory released after {:.1} s ({} nvidia-smi reads)",
                self.waited_s, self.polls
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

/// Parses `nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`.
fn parse(text: &str) -> Option<GpuMemory> {
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (i, used) = line.split_once(',')?;
        m.insert(i.trim().parse().ok()?, used.trim().parse().ok()?);
    }
    (!m.is_empty()).then_some(GpuMemory(m))
}

impl GpuMemory {
    /// Reads memory used per GPU; `None` when `nvidia-smi` is not on PATH, fails, hangs for 30 s,
    /// or prints something else.
    pub async fn read() -> Option<GpuMemory> {
        let run = tokio::task::spawn_blocking(|| {
            std::process::Command::new("nvidia-smi")
                .args([
                    "--query-gpu=index,memory.used",
                    "--format=csv,noheader,nounits",
                ])
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
        });
        let out = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .ok()?
            .ok()?
            .ok()?;
        if !out.status.success() {
            return None;
        }
        parse(&String::from_utf8_lossy(&out.stdout))
    }

    /// Every GPU of the baseline uses at most its baseline plus [`MARGIN_MIB`].
    fn within(&self, baseline: &GpuMemory) -> bool {
        baseline.0.iter().all(|(i, &base)| {
            self.0
                .get(i)
                .is_none_or(|&used| used <= base.saturating_add(MARGIN_MIB))
        })
    }
}

/// Polls memory every `poll` until it is back within the margin of `baseline`, `bound` passes,
/// `nvidia-smi` stops answering, or `stop` fires.
pub async fn wait_for_release(
    baseline: &GpuMemory,
    bound: Duration,
    poll: Duration,
    stop: &Stopper,
) -> GpuWait {
    let t0 = Instant::now();
    let mut polls = 0;
    let mut last = GpuMemory::default();
    let released = loop {
        let Some(now) = GpuMemory::read().await else {
            break false;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_parse_and_compare_with_a_margin() {
        let base = parse("0, 500\n1, 0\n").unwrap();
        assert_eq!(base.0, BTreeMap::from([(0, 500), (1, 0)]));
        assert!(parse("0, 1500\n1, 1024\n").unwrap().within(&base));
        assert!(!parse("0, 1525\n1, 0\n").unwrap().within(&base));
        assert!(parse("No devices were found").is_none());
        assert!(parse("").is_none());
    }
}
