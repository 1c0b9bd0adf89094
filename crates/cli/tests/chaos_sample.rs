//! The bounded CI sample of the chaos harness (issue 17, item 5): `agentroom_bench::chaos::run`,
//! the very code path of `agentroom-bench chaos`, against this package's `agentroom` binary
//! with three SIGKILLs of `serve` per store (at random moments of three objectives) on an
//! embedded SQLite file and on a fresh PostgreSQL database (where backends are terminated at
//! random moments too). Every invariant must hold: no task executed twice (D2), every accepted
//! revision and owner message present (D1, T1), the ledger replaying to its balances (B1..B3),
//! every call closed with its ledger row or open with its reservation, every objective
//! completed. The hundreds of kills run in the harness itself (`agentroom-bench chaos
//! --kills 100`).
//!
//! The seed comes from the clock unless `CHAOS_SEED` is set; it is printed, and a failure names
//! it. The second test shows the checks are not vacuous: a run whose journal gets one execution
//! replayed before the checks fails with exactly that duplicate.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::print_stderr,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::PathBuf;
use std::time::Duration;

use agentroom_bench::chaos::{self, Config, StoreKind};

fn config(kills: u32, stores: Vec<StoreKind>) -> Config {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(chaos::fresh_seed);
    let mut config = Config::new(
        PathBuf::from(env!("CARGO_BIN_EXE_agentroom")),
        kills,
        stores,
        seed,
    );
    if let Ok(url) = std::env::var("DATABASE_URL") {
        config.database_url = url;
    }
    config.objectives = Some(3);
    config.max_gap_ms = 800;
    config.patience = Duration::from_secs(60);
    config
}

#[test]
fn d2_d1_b3_three_sigkills_per_store_leave_no_duplicate_execution_no_lost_revision_and_an_exact_ledger()
 {
    let report = chaos::run(&config(3, vec![StoreKind::Sqlite, StoreKind::Postgres])).unwrap();
    eprintln!("{}", report.json());
    for store in &report.stores {
        let name = store.store.name();
        let f = &store.findings;
        assert!(
            f.violations.is_empty(),
            "{name}, seed {}: {:#?}",
            report.seed,
            f.violations
        );
        assert_eq!(store.kills, 3, "{name}");
        assert_eq!(store.messages_accepted, 3, "{name}");
        assert_eq!(
            f.objectives.get("completed"),
            Some(&3),
            "{name}, seed {}: every objective completes: {:?}",
            report.seed,
            f.objectives
        );
        // Each objective: one plan, two tasks, one review, each executed once.
        assert!(f.executions >= 12, "{name}: {} executions", f.executions);
        assert!(store.quiet_after.is_some(), "{name}");
    }
    assert_eq!(report.violations(), 0);
}

#[test]
fn d2_a_replayed_execution_is_reported_as_a_duplicate_and_fails_the_run() {
    let mut config = config(1, vec![StoreKind::Sqlite]);
    config.objectives = Some(1);
    config.replay_one_execution = true;
    let report = chaos::run(&config).unwrap();
    let store = &report.stores[0];
    assert_eq!(store.findings.duplicate_executions, 1, "{}", report.json());
    assert_eq!(report.violations(), 1, "{}", report.json());
    assert!(
        store.findings.violations[0].contains("was executed 2 times"),
        "{:?}",
        store.findings.violations
    );
}
