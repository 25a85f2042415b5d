//! When each request should start: the scheduler hands out [`Ticket`]s.
//!
//! Closed loop: a fixed number of workers each take the next ticket the moment their previous
//! request ends, so the intended start is "now" and the request count is exact however the
//! workers interleave. Open-loop and trace schedules plug in here.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One request to make: its dispatch number and which sample it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) id: u64,
    pub(crate) sample: usize,
}

/// Hands out exactly `count` tickets, cycling through `samples` in order.
#[derive(Debug)]
pub(crate) struct ClosedLoop {
    next: AtomicU64,
    count: u64,
    samples: usize,
}

impl ClosedLoop {
    pub(crate) fn new(count: u64, samples: usize) -> Self {
        assert!(samples > 0, "a schedule needs at least one sample");
        ClosedLoop {
            next: AtomicU64::new(0),
            count,
            samples,
        }
    }

    /// The next ticket, or `None` once `count` were handed out.
    pub(crate) fn next(&self) -> Option<Ticket> {
        let id = self.next.fetch_add(1, Relaxed);
        (id < self.count).then(|| Ticket {
            id,
            sample: (id % self.samples as u64) as usize,
        })
    }

    /// Tickets handed out so far (≤ count).
    pub(crate) fn issued(&self) -> u64 {
        self.next.load(Relaxed).min(self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_exactly_count_tickets_cycling_samples_across_threads() {
        let s = std::sync::Arc::new(ClosedLoop::new(1000, 7));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || std::iter::from_fn(|| s.next()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<Ticket> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_by_key(|t| t.id);
        assert_eq!(all.len(), 1000);
        for (i, t) in all.iter().enumerate() {
            assert_eq!(
                *t,
                Ticket {
                    id: i as u64,
                    sample: i % 7
                }
            );
        }
        assert_eq!(s.issued(), 1000);
    }
}
