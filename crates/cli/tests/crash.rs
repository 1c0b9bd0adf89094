//! Crash tests (issue 4, D2, D6): the real `agentroom` binary runs durable calls through the
//! coordinator with `agentroom drill durable-call`, dies at a named crash point
//! (`AGENTROOM_CRASH_AT`, SIGKILL) or by a SIGKILL from the test while a call is in flight, or
//! stops gracefully while one runs, and a new process recovers. The database and the
//! provider's own execution log must then show: no operation created twice, no call executed
//! twice, nothing left in flight, every call without a receipt marked uncertain and reconciled
//! from the provider's record (charged if it ran, released if not), every receipt applied, and
//! a ledger that replays to the stored balances with nothing held.
//!
//! The whole matrix runs on both stores: `sqlite::*` on the embedded file, `postgres::*` on a
//! fresh database of the shared server (`DATABASE_URL`) per test, dropped afterwards. The
//! assertions are `support`'s, the same for both, and add a history that rebuilds every
//! revision (D1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

/// The crash-point matrix and the mid-call SIGKILL, on the site `$site` makes (written once,
/// expanded once per store).
/// The lease of the drills whose call (300 ms) outlasts the default 200 ms lease: longer than
/// the call, so no heartbeat must land in time.
const SLOW_CALL_LEASE_MS: &str = "2000";

macro_rules! crash_matrix {
    ($site:expr) => {
        use std::os::unix::process::ExitStatusExt;
        use std::process::Stdio;
        use std::time::{Duration, Instant};

        use agentroom_ports::domain::money::UsdMicros;
        use agentroom_ports::{OperationFilter, OperationStatus};

        use crate::SLOW_CALL_LEASE_MS;
        use crate::support::{Running, SIGKILL, Site, ops, the_recovered};

        fn site() -> Site {
            $site
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_killed_after_reserve_the_call_never_ran_and_is_released_not_replayed() {
            let site = site();
            site.restart(&["--calls", "2"]);
            site.crash_at("after_reserve", &["--calls", "2"]);
            let summary = site.restart(&["--calls", "1"]);
            let op = the_recovered(&summary);
            let facts = site.invariants().await;
            assert!(
                !facts.executed.contains(&op),
                "the reserved call was called"
            );
            assert!(facts.record(op).receipt.is_none());
            assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_killed_after_the_call_it_is_uncertain_then_charged_from_the_providers_record() {
            let site = site();
            site.crash_at("after_call", &["--calls", "2"]);
            let summary = site.restart(&["--calls", "1"]);
            let op = the_recovered(&summary);
            let facts = site.invariants().await;
            assert!(facts.executed.contains(&op), "it ran before the crash");
            assert!(facts.record(op).receipt.is_none(), "its result was lost");
            assert_eq!(facts.charged(op), Some(UsdMicros::new(1_000)));
            assert_eq!(facts.record(op).recovery_attempts, 1);
        }

        /// A receipt is recorded alone only when the call returns while the host is stopping
        /// (the gate refuses the decision that would settle it): killed right there.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_killed_after_the_receipt_recovery_hands_it_to_the_owner() {
            let site = site();
            // A lease longer than the call: what is tested is the stop, not heartbeats keeping
            // a 200 ms lease alive on a loaded machine (a late one made the call uncertain).
            site.crash_at(
                "after_receipt",
                &[
                    "--calls",
                    "1",
                    "--call-ms",
                    "300",
                    "--stop-during-call",
                    "--lease-ms",
                    SLOW_CALL_LEASE_MS,
                ],
            );
            let summary = site.restart(&["--calls", "1"]);
            let delivered = ops(&summary, "delivered");
            assert_eq!(delivered.len(), 1, "{summary}");
            assert!(ops(&summary, "claimed").is_empty(), "{summary}");
            let facts = site.invariants().await;
            let op = delivered[0];
            assert!(facts.executed.contains(&op));
            assert!(facts.record(op).receipt.is_some());
            assert_eq!(facts.charged(op), Some(UsdMicros::new(400)));
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_d6_a_graceful_stop_during_a_call_records_its_receipt_for_the_next_recovery() {
            let site = site();
            let stopped = site.restart(&[
                "--calls",
                "1",
                "--call-ms",
                "300",
                "--stop-during-call",
                "--lease-ms",
                SLOW_CALL_LEASE_MS,
            ]);
            // The call finished within the grace and its receipt is durable, but the stopping
            // host decided nothing: the Room still holds the reservation.
            assert_eq!(stopped["stop"]["drained"], true, "{stopped}");
            assert_eq!(
                stopped["stop"]["released"],
                serde_json::json!([]),
                "{stopped}"
            );
            assert_eq!(stopped["operations"]["receipted"], 1, "{stopped}");
            assert_eq!(stopped["operations"]["applied"], 0, "{stopped}");
            assert_eq!(stopped["balances"]["reserved"], 1_000, "{stopped}");
            assert_eq!(stopped["balances"]["spent"], 0, "{stopped}");
            assert!(stopped["calls"].get("applied").is_none(), "{stopped}");
            let store = site.open().await;
            let receipted = store
                .operations(OperationFilter::Status(OperationStatus::Receipted))
                .await
                .unwrap();
            assert_eq!(receipted.len(), 1);
            let op = receipted[0].op();
            assert!(receipted[0].receipt.is_some());
            drop(store);

            // The next run's recovery hands the receipt to the Room, which applies it; the
            // call is not run again (D6).
            let summary = site.restart(&["--calls", "0"]);
            assert_eq!(ops(&summary, "delivered"), vec![op], "{summary}");
            assert!(ops(&summary, "claimed").is_empty(), "{summary}");
            let facts = site.invariants().await;
            assert_eq!(facts.executed.len(), 1);
            assert!(facts.executed.contains(&op));
            assert_eq!(facts.charged(op), Some(UsdMicros::new(400)));
        }

        /// Issue 21 (group decisions): messages posted together are decided as a group and
        /// committed in one transaction; killed before it, or inside it (its first member
        /// written, the transaction open), nothing of the group is durable: every message
        /// accepted has its one reservation (T1, B1), no call ran twice, and the next run
        /// recovers and goes on.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn issue21_killed_before_or_inside_a_group_commit_nothing_of_it_is_written() {
            for point in ["before_group", "inside_group"] {
                let site = site();
                site.crash_at(point, &["--calls", "2", "--together", "8"]);
                // As the crash left it: each accepted message with its one reservation, made
                // in the commit that accepted it, and not the group that was killed.
                let accepted = site.accepted_messages().await;
                let store = site.open().await;
                let reserved = crate::support::all_operations(&*store).await.len();
                assert_eq!(reserved, accepted, "{point}: a commit was split");
                assert!(accepted < 16, "{point}: the killed group was written");
                let summary = site.restart(&["--calls", "1", "--together", "8"]);
                let facts = site.invariants().await;
                assert_eq!(
                    site.accepted_messages().await,
                    accepted + 8,
                    "{point}: the restart's messages, each once: {summary}"
                );
                assert!(facts.records.len() >= accepted + 8, "{summary}");
            }
        }

        /// Issue 21, B1: killed right after a group's commit, before any call it reserved was
        /// sent: the reservations are durable and the calls never ran; recovery releases them
        /// uncharged and sends none of them again.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn issue21_b1_killed_after_a_group_commit_its_calls_were_never_sent() {
            let site = site();
            site.crash_at("after_group", &["--calls", "2", "--together", "8"]);
            let summary = site.restart(&["--calls", "0"]);
            let facts = site.invariants().await;
            let never_ran: Vec<_> = facts
                .records
                .keys()
                .filter(|op| !facts.executed.contains(op))
                .collect();
            assert!(
                !never_ran.is_empty(),
                "the group's reservations, never sent: {summary}"
            );
            for op in never_ran {
                assert_eq!(facts.charged(*op), Some(UsdMicros::ZERO), "{op}");
            }
            assert!(facts.records.len() >= site.accepted_messages().await);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d6_killed_after_settle_recovery_finds_nothing_and_repeats_nothing() {
            let site = site();
            site.crash_at("after_settle", &["--calls", "2"]);
            let before = site.invariants().await;
            assert_eq!(
                before.records.len(),
                1,
                "it died after the first call settled"
            );
            let summary = site.restart(&["--calls", "1"]);
            for field in ["delivered", "claimed", "reconciled", "uncertain", "live"] {
                assert!(ops(&summary, field).is_empty(), "{field}: {summary}");
            }
            let facts = site.invariants().await;
            assert_eq!(facts.records.len(), 2);
            assert_eq!(facts.executed.len(), 2);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_killed_during_recovery_after_the_claim_the_next_recovery_finishes_it() {
            let site = site();
            site.crash_at("after_call", &["--calls", "1"]);
            // The claim and the uncertain mark are one write (issue 21): the next recovery
            // finds the call uncertain, claims nothing and reconciles it.
            site.crash_at("after_claim", &["--calls", "1"]);
            let summary = site.restart(&["--calls", "0"]);
            assert!(ops(&summary, "claimed").is_empty(), "{summary}");
            let reconciled = ops(&summary, "reconciled");
            assert_eq!(reconciled.len(), 1, "{summary}");
            let op = reconciled[0];
            let facts = site.invariants().await;
            assert!(facts.executed.contains(&op));
            assert_eq!(facts.charged(op), Some(UsdMicros::new(1_000)));
            assert_eq!(facts.record(op).recovery_attempts, 2, "both claims counted");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_killed_during_recovery_after_marking_uncertain_the_next_recovery_reconciles() {
            let site = site();
            site.crash_at("after_reserve", &["--calls", "1"]);
            site.crash_at("after_uncertain", &["--calls", "1"]);
            let summary = site.restart(&["--calls", "0"]);
            let reconciled = ops(&summary, "reconciled");
            assert_eq!(reconciled.len(), 1, "{summary}");
            assert!(
                ops(&summary, "claimed").is_empty(),
                "claimed before the crash"
            );
            let op = reconciled[0];
            let facts = site.invariants().await;
            assert!(
                !facts.executed.contains(&op),
                "an uncertain call was replayed"
            );
            assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
            assert_eq!(facts.record(op).recovery_attempts, 2);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn d2_a_sigkill_while_a_slow_call_is_in_flight_leaves_it_uncertain_then_released() {
            let site = site();
            site.restart(&["--calls", "1"]);
            let mut child = Running(
                // A lease long enough that a loaded machine (CI runs the crash tests two at
                // a time on two cores) cannot lose it between heartbeats.
                site.drill(
                    None,
                    &["--calls", "1", "--call-ms", "20000", "--lease-ms", "2000"],
                )
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
            );
            let store = site.open().await;
            let deadline = Instant::now() + Duration::from_secs(20);
            let op = loop {
                let in_flight = store
                    .operations(OperationFilter::Status(OperationStatus::InFlight))
                    .await
                    .unwrap();
                if let Some(record) = in_flight.first() {
                    break record.op();
                }
                assert!(Instant::now() < deadline, "no call went in flight");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            // Let it heartbeat past its first lease, so only the kill ends it.
            tokio::time::sleep(Duration::from_millis(2_300)).await;
            let record = store.operation(op).await.unwrap().unwrap();
            assert_eq!(record.status, OperationStatus::InFlight);
            assert!(
                !record.lease_expired,
                "the heartbeat keeps the lease: {record:?}"
            );
            child.0.kill().unwrap();
            let status = child.0.wait().unwrap();
            assert_eq!(status.signal(), Some(SIGKILL), "{status:?}");
            drop(store);

            let summary = site.restart(&["--calls", "1"]);
            assert_eq!(the_recovered(&summary), op);
            let facts = site.invariants().await;
            assert!(
                !facts.executed.contains(&op),
                "the killed call was called again"
            );
            assert_eq!(facts.charged(op), Some(UsdMicros::ZERO));
        }
    };
}

mod sqlite {
    crash_matrix!(Site::sqlite());
}

mod postgres {
    crash_matrix!(Site::postgres());
}
