//! The debug channel: with `-v` (or `--log-level debug`) each lifecycle step (a connection
//! opened, a `/metrics` scrape, a GPU telemetry read, a server started, ready or stopped, a
//! drain poll) is one line on stderr with the time since the process started and the step's own
//! duration:
//!
//! ```text
//! [   0.412s] debug: connect 127.0.0.1:8000: open in 0.3 ms
//! ```
//!
//! Off by default. [`step!`] checks one relaxed atomic before it formats anything, so a run
//! without `-v` pays a load and a branch per step and prints nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();

/// Turns the channel on for the rest of the process (the binary's `-v`).
pub fn enable() {
    START.get_or_init(Instant::now);
    ON.store(true, Ordering::Relaxed);
}

/// Whether the channel is on.
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Writes one line (use [`step!`], which skips the formatting when the channel is off).
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("[{t:>10.3}s] debug: {args}");
}

/// A duration as a debug line shows it: milliseconds with one decimal below 10 s.
pub(crate) fn ms(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

/// The process's resident memory now and at its highest so far, as a debug line shows it
/// ("RSS 212 MiB, peak 240 MiB"), from `/proc/self/status`; "RSS unknown" where there is none.
pub(crate) fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    match (kib("VmRSS:"), kib("VmHWM:")) {
        (Some(now), Some(peak)) => format!("RSS {} MiB, peak {} MiB", now / 1024, peak / 1024),
        _ => "RSS unknown".to_owned(),
    }
}

/// `step!("scrape {url}: {status} in {}", debug::ms(t))`: one debug line when `-v` is on.
macro_rules! step {
    ($($arg:tt)*) => {
        if $crate::debug::on() {
            $crate::debug::line(format_args!($($arg)*));
        }
    };
}
pub(crate) use step;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_the_resident_set_and_its_peak() {
        let m = memory();
        if cfg!(target_os = "linux") {
            let n: Vec<u64> = m
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            assert!(m.starts_with("RSS ") && n.len() == 2 && n[0] <= n[1], "{m}");
        } else {
            assert_eq!(m, "RSS unknown");
        }
    }

    #[test]
    fn durations_read_in_milliseconds_then_seconds() {
        assert_eq!(ms(Duration::from_micros(345)), "0.3 ms");
        assert_eq!(ms(Duration::from_millis(2500)), "2500.0 ms");
        assert_eq!(ms(Duration::from_secs(12)), "12.00 s");
    }
}
