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
    fn durations_read_in_milliseconds_then_seconds() {
        assert_eq!(ms(Duration::from_micros(345)), "0.3 ms");
        assert_eq!(ms(Duration::from_millis(2500)), "2500.0 ms");
        assert_eq!(ms(Duration::from_secs(12)), "12.00 s");
    }
}
