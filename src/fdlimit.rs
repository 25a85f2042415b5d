//! The open-file limit, checked before a run opens its connections.
//!
//! Every in-flight stream holds one socket (two with the embedded simulator, whose server ends
//! live in this process), so 10,000 streams need about 10,000 descriptors, where the usual soft
//! limit is 1024. The soft limit may be raised up to the hard one without privilege, so a run does
//! that when it needs more; when even the hard limit is short it stops before the first request
//! with the numbers and the fix, instead of failing thousands of connects with `EMFILE`.

/// Descriptors beyond the streams: stdio, the runtime's epoll and wake-up descriptors, the
/// artifact files, metrics scrapes, the simulator's listeners.
pub(crate) const SLACK: u64 = 128;

/// The open-file limit cannot cover the requests in flight.
#[derive(Debug, thiserror::Error)]
#[error(
    "{in_flight} requests in flight need about {need} open files, but the limit is {soft} (hard \
     limit {hard}); raise it (`ulimit -n {need}`; above the hard limit: `ulimit -Hn` as root, \
     `LimitNOFILE=` in a systemd unit, `--ulimit nofile=` for docker) or lower --concurrency, or \
     split the run with --shard"
)]
pub struct FdLimitError {
    /// Requests this process keeps in flight.
    pub in_flight: u64,
    /// Descriptors they need, with slack.
    pub need: u64,
    /// The soft limit after trying to raise it.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// The soft limit to ask for: `None` when the current one will do. Unknown need (an open loop
/// without a cap) takes whatever the hard limit allows.
fn target(soft: u64, hard: u64, need: Option<u64>) -> Option<u64> {
    match need {
        Some(n) if soft >= n => None,
        _ if soft >= hard => None,
        Some(n) if hard == u64::MAX => Some(n),
        // An unlimited hard limit is still capped by the kernel (`fs.nr_open`): ask for a lot.
        None if hard == u64::MAX => Some(soft.max(1 << 20)),
        _ => Some(hard),
    }
}

/// Makes room for `in_flight` requests (`None`: unbounded) of `sockets_each` descriptors each.
pub(crate) fn ensure(in_flight: Option<u64>, sockets_each: u64) -> Result<(), FdLimitError> {
    let need = in_flight.map(|n| n.saturating_mul(sockets_each).saturating_add(SLACK));
    let Some((soft, hard)) = get() else {
        return Ok(());
    };
    if let Some(t) = target(soft, hard, need) {
        // Best effort: what counts is the limit read back below.
        set(t, hard);
    }
    let Some((soft, hard)) = get() else {
        return Ok(());
    };
    match (in_flight, need) {
        (Some(in_flight), Some(need)) if soft < need => Err(FdLimitError {
            in_flight,
            need,
            soft,
            hard,
        }),
        _ => Ok(()),
    }
}

#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is u64 on 64-bit Linux and macOS, narrower elsewhere
fn to_u64(v: libc::rlim_t) -> u64 {
    if v == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        v as u64
    }
}

/// `(soft, hard)` of RLIMIT_NOFILE, `u64::MAX` for unlimited.
#[cfg(unix)]
#[allow(unsafe_code)]
fn get() -> Option<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we pass.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    (rc == 0).then(|| (to_u64(r.rlim_cur), to_u64(r.rlim_max)))
}

#[cfg(unix)]
#[allow(unsafe_code, clippy::unnecessary_cast)]
fn set(soft: u64, hard: u64) {
    let lim = |v: u64| {
        if v == u64::MAX {
            libc::RLIM_INFINITY
        } else {
            v as libc::rlim_t
        }
    };
    let r = libc::rlimit {
        rlim_cur: lim(soft.min(hard)),
        rlim_max: lim(hard),
    };
    // SAFETY: setrlimit only reads the struct we pass; a refusal leaves the limit as it was.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
}

#[cfg(not(unix))]
fn get() -> Option<(u64, u64)> {
    None
}

#[cfg(not(unix))]
fn set(_: u64, _: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raises_to_the_hard_limit_only_when_short() {
        assert_eq!(target(1024, 4096, Some(500)), None);
        assert_eq!(target(1024, 4096, Some(2000)), Some(4096));
        // Short even at the hard limit: still raise, the caller then reports the shortfall.
        assert_eq!(target(1024, 4096, Some(20_000)), Some(4096));
        assert_eq!(target(1024, 4096, None), Some(4096));
        assert_eq!(target(4096, 4096, None), None);
        assert_eq!(target(1024, u64::MAX, Some(20_128)), Some(20_128));
        assert_eq!(target(1024, u64::MAX, None), Some(1 << 20));
    }

    #[test]
    fn a_shortfall_names_the_numbers_and_the_fix() {
        let Some((_, hard)) = get() else { return };
        if hard == u64::MAX {
            return;
        }
        // More streams than the hard limit allows: refused, whatever this machine's limits are.
        let e = ensure(Some(hard), 1).unwrap_err();
        assert_eq!((e.in_flight, e.need), (hard, hard + SLACK));
        assert!(e.soft <= hard);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("need about {}", hard + SLACK)) && msg.contains("ulimit -n"),
            "{msg}"
        );
        // A handful of streams always fits.
        ensure(Some(8), 2).unwrap();
    }
}
