//! The descriptor limit of `rookery serve`: at start the soft `RLIMIT_NOFILE` is raised to the
//! hard limit, and a warning says when even that cannot hold `--max-sessions`.
//!
//! It only adjusts and reports the process limit; the session cap itself is in `state.rs`.

/// Descriptors a served session may hold (its trace and an event-stream connection).
pub const FDS_PER_SESSION: u64 = 2;
/// Descriptors kept for the runtime, the listener and ordinary requests.
pub const FDS_RESERVED: u64 = 256;

/// Raises the soft limit to the hard one; returns the limit now in force, if it can be read.
pub fn raise_nofile_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; no other memory is touched.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        } else {
            tracing::debug!(
                "cannot raise the descriptor limit: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
    Some(lim.rlim_cur as u64)
}

/// Descriptors `max_sessions` sessions may need.
pub fn needed(max_sessions: usize) -> u64 {
    (max_sessions as u64)
        .saturating_mul(FDS_PER_SESSION)
        .saturating_add(FDS_RESERVED)
}

/// Raises the limit and warns when it is too low for `max_sessions`.
pub fn check(max_sessions: usize) {
    match raise_nofile_limit() {
        Some(limit) if limit < needed(max_sessions) => tracing::warn!(
            "the descriptor limit ({limit}) cannot hold --max-sessions {max_sessions} (about {} needed); \
             sessions beyond it will fail to start with 503: raise `ulimit -n` or lower --max-sessions",
            needed(max_sessions)
        ),
        Some(_) => {}
        None => tracing::warn!(
            "cannot read the descriptor limit: {}",
            std::io::Error::last_os_error()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_reaches_the_hard_one() {
        let limit = raise_nofile_limit().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable `rlimit` that outlives the call.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(
            lim.rlim_cur, lim.rlim_max,
            "soft limit raised to the hard one"
        );
        assert!(limit > 0);
        assert_eq!(needed(1000), 2256);
    }
}
