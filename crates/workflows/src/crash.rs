//! Named crash points for crash tests: when `AGENTROOM_CRASH_AT` names a point, the process
//! sends itself SIGKILL there (no unwinding, no cleanup, no handler can run: the kernel ends
//! it as an operator's `kill -9` or the OOM killer would). Tests run the real binary with the
//! variable set and restart it. Only with the `crash-points` feature, which the crash tests
//! enable (the cli's dev-dependencies) and production builds leave out: without it,
//! [`crash_point`] does nothing.

use std::sync::OnceLock;

/// The environment variable naming the point to crash at.
pub const ENV: &str = "AGENTROOM_CRASH_AT";

/// After transaction 1: operation, reservation and lease committed; nothing called.
pub const AFTER_RESERVE: &str = "after_reserve";
/// Before a group of decisions is committed (issue 21): nothing of it is written.
pub const BEFORE_GROUP: &str = "before_group";
/// Inside a group's transaction, its first member written (issue 21): rolled back.
pub const INSIDE_GROUP: &str = "inside_group";
/// After a group of decisions is committed, before any call it reserved is sent (issue 21).
pub const AFTER_GROUP: &str = "after_group";
/// After the provider returned; nothing recorded.
pub const AFTER_CALL: &str = "after_call";
/// After the receipt is recorded alone; the owner has not applied it.
pub const AFTER_RECEIPT: &str = "after_receipt";
/// After transaction 2: receipt and settled state committed.
pub const AFTER_SETTLE: &str = "after_settle";
/// After the operation was marked uncertain; the owner has not decided it.
pub const AFTER_UNCERTAIN: &str = "after_uncertain";
/// After recovery's one write that claimed a batch of expired operations and marked them
/// uncertain; no Room has decided them.
pub const AFTER_CLAIM: &str = "after_claim";

/// Every named point, in the order a call passes them.
pub const POINTS: &[&str] = &[
    BEFORE_GROUP,
    INSIDE_GROUP,
    AFTER_GROUP,
    AFTER_RESERVE,
    AFTER_CALL,
    AFTER_RECEIPT,
    AFTER_SETTLE,
    AFTER_UNCERTAIN,
    AFTER_CLAIM,
];

/// The point this process crashes at, read once.
pub fn configured() -> Option<&'static str> {
    static AT: OnceLock<Option<String>> = OnceLock::new();
    AT.get_or_init(|| std::env::var(ENV).ok().filter(|v| !v.is_empty()))
        .as_deref()
}

/// Whether a process configured with `configured` crashes at `point`.
pub fn crashes_at(configured: Option<&str>, point: &str) -> bool {
    configured == Some(point)
}

/// Kills the process with SIGKILL if `AGENTROOM_CRASH_AT` names `point` (feature
/// `crash-points`; a no-op without it).
#[cfg(not(feature = "crash-points"))]
pub fn crash_point(point: &'static str) {
    let _ = point;
}

/// Kills the process with SIGKILL if `AGENTROOM_CRASH_AT` names `point`.
#[cfg(feature = "crash-points")]
pub fn crash_point(point: &'static str) {
    if crashes_at(configured(), point) {
        tracing::error!(
            point,
            "crash point reached: killing the process with SIGKILL"
        );
        // SIGKILL cannot be caught, so `raise` does not return once it succeeds; if it could
        // not be sent, the process still ends here without unwinding.
        if let Err(error) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL) {
            tracing::error!(%error, "SIGKILL could not be raised: aborting instead");
        }
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_point_crashes() {
        assert!(crashes_at(Some("after_call"), AFTER_CALL));
        assert!(!crashes_at(Some("after_call"), AFTER_RECEIPT));
        assert!(!crashes_at(None, AFTER_CALL));
        let mut names = POINTS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), POINTS.len(), "point names are distinct");
    }
}
