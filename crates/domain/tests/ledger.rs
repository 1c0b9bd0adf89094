//! The Room budget ledger through its public API: unit tests named after the budget rules
//! (B2–B5, and B7 as far as the domain decides it), and property tests that drive random
//! operation sequences against a small reference model kept in this file.

use std::collections::BTreeMap;

use agentroom_domain::ids::OperationId;
use agentroom_domain::ledger::{Balances, BudgetLedger, LedgerEntry, LedgerError, Overrun};
use agentroom_domain::money::UsdMicros;
use expect_test::expect;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use uuid::Uuid;

fn usd(micros: i64) -> UsdMicros {
    UsdMicros::new(micros)
}

/// A stable operation id: `00000000-0000-0000-0000-0000000000nn` for `n + 1`.
fn op(n: u8) -> OperationId {
    OperationId::from_uuid(Uuid::from_u128(u128::from(n) + 1))
}

#[allow(
    clippy::unwrap_used,
    reason = "a test helper: a failed unwrap is a failed test"
)]
fn opened(limit: i64) -> BudgetLedger {
    BudgetLedger::open(usd(limit)).unwrap()
}

fn balances(limit: i64, reserved: i64, uncertain: i64, spent: i64, available: i64) -> Balances {
    Balances {
        limit: usd(limit),
        reserved: usd(reserved),
        uncertain: usd(uncertain),
        spent: usd(spent),
        available: usd(available),
    }
}

/// A ledger that went through every kind of entry, with one hold still open.
#[allow(
    clippy::unwrap_used,
    reason = "a test helper: a failed unwrap is a failed test"
)]
fn eventful() -> BudgetLedger {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(300)).unwrap();
    ledger.reserve(op(1), usd(200)).unwrap();
    ledger.reserve(op(2), usd(100)).unwrap();
    ledger.mark_uncertain(op(1)).unwrap();
    ledger.settle(op(0), usd(120)).unwrap();
    ledger.release(op(2)).unwrap();
    ledger.reserve(op(3), usd(50)).unwrap();
    ledger.settle(op(3), usd(80)).unwrap();
    ledger.acknowledge_overrun().unwrap();
    ledger.raise_limit(usd(500)).unwrap();
    ledger
}

// ---------------------------------------------------------------------------------------
// B2: available = limit − spent − reserved; no automatic renewal.
// ---------------------------------------------------------------------------------------

#[test]
fn b2_available_is_limit_minus_spent_minus_reserved() {
    let mut ledger = opened(1_000);
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 0, 1_000));
    ledger.reserve(op(0), usd(300)).unwrap();
    ledger.reserve(op(1), usd(200)).unwrap();
    assert_eq!(ledger.available(), usd(500));
    ledger.settle(op(0), usd(250)).unwrap();
    assert_eq!(ledger.balances(), balances(1_000, 200, 0, 250, 550));
    assert_eq!(ledger.available(), usd(1_000 - 250 - 200));
    assert_eq!(ledger.held_by(op(0)), None);
    assert_eq!(ledger.held_by(op(1)), Some(usd(200)));
}

#[test]
fn b2_a_reservation_above_the_available_balance_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(600)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(1), usd(401)),
        Err(LedgerError::InsufficientBudget {
            requested: usd(401),
            available: usd(400),
        })
    );
    assert_eq!(ledger, before);
    // Exactly the available balance is admitted.
    ledger.reserve(op(1), usd(400)).unwrap();
    assert_eq!(ledger.available(), UsdMicros::ZERO);
}

#[test]
fn b2_a_spent_budget_is_never_renewed() {
    let mut ledger = opened(100);
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.settle(op(0), usd(100)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(1), usd(1)),
        Err(LedgerError::InsufficientBudget {
            requested: usd(1),
            available: UsdMicros::ZERO,
        })
    );
    assert_eq!(ledger, before);
    assert_eq!(ledger.balances(), balances(100, 0, 0, 100, 0));
}

#[test]
fn b2_a_zero_opening_limit_admits_nothing() {
    let mut ledger = opened(0);
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(0), usd(1)),
        Err(LedgerError::InsufficientBudget {
            requested: usd(1),
            available: UsdMicros::ZERO,
        })
    );
    assert_eq!(ledger, before);
}

// ---------------------------------------------------------------------------------------
// B3: actual usage is charged and the rest released; an uncertain call keeps its whole
// reservation.
// ---------------------------------------------------------------------------------------

#[test]
fn b3_actual_usage_is_charged_and_the_rest_released() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    assert_eq!(ledger.settle(op(0), usd(120)), Ok(usd(380)));
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 120, 880));
    assert_eq!(ledger.held_by(op(0)), None);
    assert_eq!(ledger.overrun(), None);
}

#[test]
fn b3_an_actual_equal_to_the_reservation_releases_nothing_and_is_no_overrun() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    assert_eq!(ledger.settle(op(0), usd(500)), Ok(UsdMicros::ZERO));
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 500, 500));
    assert_eq!(ledger.overrun(), None);
}

#[test]
fn b3_a_zero_charge_releases_the_whole_reservation() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    assert_eq!(ledger.settle(op(0), UsdMicros::ZERO), Ok(usd(500)));
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 0, 1_000));
}

#[test]
fn b3_an_uncertain_call_keeps_its_whole_reservation() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    ledger.mark_uncertain(op(0)).unwrap();
    assert_eq!(ledger.balances(), balances(1_000, 500, 500, 0, 500));
    assert_eq!(ledger.held_by(op(0)), Some(usd(500)));
    assert_eq!(
        ledger.journal().last(),
        Some(&LedgerEntry::MarkedUncertain { op: op(0) })
    );
}

#[test]
fn b3_settling_an_uncertain_call_clears_the_uncertain_balance() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    ledger.reserve(op(1), usd(100)).unwrap();
    ledger.mark_uncertain(op(0)).unwrap();
    ledger.mark_uncertain(op(1)).unwrap();
    assert_eq!(ledger.settle(op(0), usd(200)), Ok(usd(300)));
    assert_eq!(ledger.balances(), balances(1_000, 100, 100, 200, 700));
}

#[test]
fn b3_releasing_an_uncertain_call_clears_both_held_balances_without_charge() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(500)).unwrap();
    ledger.mark_uncertain(op(0)).unwrap();
    assert_eq!(ledger.release(op(0)), Ok(usd(500)));
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 0, 1_000));
    assert_eq!(
        ledger.journal().last(),
        Some(&LedgerEntry::Released {
            op: op(0),
            amount: usd(500),
        })
    );
}

// ---------------------------------------------------------------------------------------
// B4: a limit raise adds balance and never resets historical spend.
// ---------------------------------------------------------------------------------------

#[test]
fn b4_raising_the_limit_keeps_historical_spend() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(400)).unwrap();
    ledger.settle(op(0), usd(300)).unwrap();
    ledger.reserve(op(1), usd(100)).unwrap();
    ledger.raise_limit(usd(500)).unwrap();
    assert_eq!(ledger.balances(), balances(1_500, 100, 0, 300, 1_100));
    assert_eq!(
        ledger.journal().last(),
        Some(&LedgerEntry::LimitRaised { by: usd(500) })
    );
}

#[test]
fn b4_a_zero_or_negative_raise_is_refused() {
    let mut ledger = eventful();
    let before = ledger.clone();
    for by in [0, -1, -1_000] {
        assert_eq!(
            ledger.raise_limit(usd(by)),
            Err(LedgerError::NotPositive {
                what: "limit raise",
                amount: usd(by),
            })
        );
        assert_eq!(ledger, before);
    }
}

#[test]
fn b4_a_raise_that_would_overflow_is_refused_and_changes_nothing() {
    let mut ledger = opened(1);
    let before = ledger.clone();
    assert_eq!(
        ledger.raise_limit(usd(i64::MAX)),
        Err(LedgerError::Overflow)
    );
    assert_eq!(ledger, before);
}

// ---------------------------------------------------------------------------------------
// B5: an overrun stops all new admissions until an operator raises the limit or
// acknowledges it.
// ---------------------------------------------------------------------------------------

#[test]
fn b5_an_actual_above_its_reservation_stops_admissions_until_acknowledged() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    assert_eq!(ledger.settle(op(0), usd(150)), Ok(UsdMicros::ZERO));
    let overrun = Overrun::ActualAboveReservation {
        op: op(0),
        reserved: usd(100),
        charged: usd(150),
    };
    assert_eq!(ledger.overrun(), Some(overrun));
    // Spent is still far below the limit: the stop is the overrun's, not B2's.
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 150, 850));
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(1), usd(1)),
        Err(LedgerError::AdmissionsStopped(overrun))
    );
    assert_eq!(ledger, before);

    ledger.acknowledge_overrun().unwrap();
    assert_eq!(ledger.overrun(), None);
    assert_eq!(
        ledger.journal().last(),
        Some(&LedgerEntry::OverrunAcknowledged)
    );
    ledger.reserve(op(1), usd(1)).unwrap();
}

#[test]
fn b5_spent_above_the_limit_stops_admissions() {
    let mut ledger = opened(100);
    ledger.reserve(op(0), usd(60)).unwrap();
    ledger.reserve(op(1), usd(40)).unwrap();
    ledger.settle(op(0), usd(90)).unwrap();
    ledger.acknowledge_overrun().unwrap();
    // A call that stays within its reservation still pushes spent past the limit.
    assert_eq!(ledger.settle(op(1), usd(40)), Ok(UsdMicros::ZERO));
    let overrun = Overrun::SpentAboveLimit {
        spent: usd(130),
        limit: usd(100),
    };
    assert_eq!(ledger.overrun(), Some(overrun));
    assert_eq!(ledger.balances(), balances(100, 0, 0, 130, -30));
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(2), usd(1)),
        Err(LedgerError::AdmissionsStopped(overrun))
    );
    assert_eq!(ledger, before);
}

#[test]
fn b5_a_limit_raise_lifts_the_stop() {
    let mut ledger = opened(100);
    ledger.reserve(op(0), usd(50)).unwrap();
    ledger.settle(op(0), usd(70)).unwrap();
    assert!(ledger.overrun().is_some());
    ledger.raise_limit(usd(100)).unwrap();
    assert_eq!(ledger.overrun(), None);
    assert_eq!(ledger.balances(), balances(200, 0, 0, 70, 130));
    ledger.reserve(op(1), usd(130)).unwrap();
}

#[test]
fn b5_acknowledging_without_an_overrun_is_refused() {
    for mut ledger in [opened(0), eventful()] {
        let before = ledger.clone();
        assert_eq!(ledger.acknowledge_overrun(), Err(LedgerError::NoOverrun));
        assert_eq!(ledger, before);
    }
}

#[test]
fn b5_acknowledging_a_spent_above_limit_overrun_still_leaves_b2_refusing_admissions() {
    let mut ledger = opened(100);
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.settle(op(0), usd(130)).unwrap();
    ledger.acknowledge_overrun().unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(1), usd(1)),
        Err(LedgerError::InsufficientBudget {
            requested: usd(1),
            available: usd(-30),
        })
    );
    assert_eq!(ledger, before);
}

#[test]
fn b5_calls_in_flight_still_settle_while_admissions_are_stopped() {
    let mut ledger = opened(1_000);
    for n in 0..4 {
        ledger.reserve(op(n), usd(100)).unwrap();
    }
    ledger.settle(op(0), usd(101)).unwrap();
    assert!(ledger.overrun().is_some());
    ledger.mark_uncertain(op(1)).unwrap();
    assert_eq!(ledger.settle(op(1), usd(10)), Ok(usd(90)));
    assert_eq!(ledger.release(op(2)), Ok(usd(100)));
    assert_eq!(ledger.settle(op(3), usd(100)), Ok(UsdMicros::ZERO));
    assert_eq!(ledger.balances(), balances(1_000, 0, 0, 211, 789));
    assert!(
        ledger.overrun().is_some(),
        "settling does not lift the stop"
    );
}

// ---------------------------------------------------------------------------------------
// Refusals: the exact error, and the ledger unchanged.
// ---------------------------------------------------------------------------------------

#[test]
fn a_duplicate_reservation_id_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(0), usd(100)),
        Err(LedgerError::DuplicateReservation(op(0)))
    );
    assert_eq!(ledger, before);
    // Also while it is uncertain.
    ledger.mark_uncertain(op(0)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.reserve(op(0), usd(1)),
        Err(LedgerError::DuplicateReservation(op(0)))
    );
    assert_eq!(ledger, before);
}

#[test]
fn a_settled_or_released_id_may_reserve_again() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.settle(op(0), usd(10)).unwrap();
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.release(op(0)).unwrap();
    ledger.reserve(op(0), usd(100)).unwrap();
    assert_eq!(ledger.balances(), balances(1_000, 100, 0, 10, 890));
}

#[test]
fn settling_an_unknown_operation_is_refused_and_changes_nothing() {
    let mut ledger = eventful();
    let before = ledger.clone();
    // Never reserved, already settled, already released.
    for n in [9, 0, 2] {
        assert_eq!(
            ledger.settle(op(n), usd(1)),
            Err(LedgerError::UnknownReservation(op(n)))
        );
        assert_eq!(ledger, before);
    }
}

#[test]
fn releasing_an_unknown_operation_is_refused_and_changes_nothing() {
    let mut ledger = eventful();
    let before = ledger.clone();
    for n in [9, 0, 2] {
        assert_eq!(
            ledger.release(op(n)),
            Err(LedgerError::UnknownReservation(op(n)))
        );
        assert_eq!(ledger, before);
    }
}

#[test]
fn marking_an_unknown_operation_uncertain_is_refused_and_changes_nothing() {
    let mut ledger = eventful();
    let before = ledger.clone();
    for n in [9, 0, 2] {
        assert_eq!(
            ledger.mark_uncertain(op(n)),
            Err(LedgerError::UnknownReservation(op(n)))
        );
        assert_eq!(ledger, before);
    }
}

#[test]
fn marking_uncertain_twice_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.mark_uncertain(op(0)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.mark_uncertain(op(0)),
        Err(LedgerError::AlreadyUncertain(op(0)))
    );
    assert_eq!(ledger, before);
    assert_eq!(ledger.balances().uncertain, usd(100));
}

#[test]
fn a_negative_charge_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.settle(op(0), usd(-1)),
        Err(LedgerError::Negative {
            what: "charge",
            amount: usd(-1),
        })
    );
    assert_eq!(ledger, before);
}

#[test]
fn a_charge_that_would_overflow_spent_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    ledger.reserve(op(0), usd(100)).unwrap();
    ledger.reserve(op(1), usd(100)).unwrap();
    ledger.settle(op(0), usd(10)).unwrap();
    let before = ledger.clone();
    assert_eq!(
        ledger.settle(op(1), usd(i64::MAX)),
        Err(LedgerError::Overflow)
    );
    assert_eq!(ledger, before);
}

#[test]
fn a_negative_opening_limit_is_refused() {
    assert_eq!(
        BudgetLedger::open(usd(-1)),
        Err(LedgerError::Negative {
            what: "limit",
            amount: usd(-1),
        })
    );
    assert_eq!(opened(0).balances(), balances(0, 0, 0, 0, 0));
    assert_eq!(
        opened(0).journal(),
        &[LedgerEntry::Opened {
            limit: UsdMicros::ZERO
        }]
    );
}

#[test]
fn a_zero_or_negative_reservation_is_refused_and_changes_nothing() {
    let mut ledger = opened(1_000);
    let before = ledger.clone();
    for amount in [0, -1, -500] {
        assert_eq!(
            ledger.reserve(op(0), usd(amount)),
            Err(LedgerError::NotPositive {
                what: "reservation",
                amount: usd(amount),
            })
        );
        assert_eq!(ledger, before);
    }
}

#[test]
fn a_replay_of_a_log_that_does_not_start_with_opened_is_refused() {
    let ledger = eventful();
    let before = ledger.clone();
    let entries = ledger.journal();
    assert_eq!(BudgetLedger::replay(&[]), Err(LedgerError::MissingOpening));
    assert_eq!(
        BudgetLedger::replay(&entries[1..]),
        Err(LedgerError::MissingOpening)
    );
    // A second opening in the middle of a log is refused too.
    let mut twice = entries.to_vec();
    twice.insert(2, entries[0].clone());
    assert_eq!(
        BudgetLedger::replay(&twice),
        Err(LedgerError::MissingOpening)
    );
    assert_eq!(ledger, before);
}

// ---------------------------------------------------------------------------------------
// The log.
// ---------------------------------------------------------------------------------------

#[test]
fn replay_rebuilds_the_same_ledger() {
    let ledger = eventful();
    assert_eq!(ledger.balances(), balances(1_500, 200, 200, 200, 1_100));
    assert_eq!(BudgetLedger::replay(ledger.journal()), Ok(ledger.clone()));
    // Through the log's JSON form too, as a store would keep it.
    let json = serde_json::to_string(ledger.journal()).unwrap();
    let entries: Vec<LedgerEntry> = serde_json::from_str(&json).unwrap();
    assert_eq!(BudgetLedger::replay(&entries), Ok(ledger.clone()));
    // Every prefix of the log replays too.
    for end in 1..=ledger.journal().len() {
        assert!(BudgetLedger::replay(&ledger.journal()[..end]).is_ok());
    }
}

#[test]
fn every_change_appends_exactly_one_entry_in_this_wire_form() {
    let ledger = eventful();
    let lines: Vec<String> = ledger
        .journal()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    expect![[r#"
        {"entry":"opened","limit":1000}
        {"entry":"reserved","op":"00000000-0000-0000-0000-000000000001","amount":300}
        {"entry":"reserved","op":"00000000-0000-0000-0000-000000000002","amount":200}
        {"entry":"reserved","op":"00000000-0000-0000-0000-000000000003","amount":100}
        {"entry":"marked_uncertain","op":"00000000-0000-0000-0000-000000000002"}
        {"entry":"settled","op":"00000000-0000-0000-0000-000000000001","reserved":300,"charged":120}
        {"entry":"released","op":"00000000-0000-0000-0000-000000000003","amount":100}
        {"entry":"reserved","op":"00000000-0000-0000-0000-000000000004","amount":50}
        {"entry":"settled","op":"00000000-0000-0000-0000-000000000004","reserved":50,"charged":80}
        {"entry":"overrun_acknowledged"}
        {"entry":"limit_raised","by":500}"#]]
    .assert_eq(&lines.join("\n"));
}

/// A `Reserved` entry replays through the same admission checks (B2, B5): a log the ledger
/// could never have written must not rebuild a ledger that breaks its own invariants (a
/// negative `reserved`, an available balance above limit − spent, a hold admitted while
/// admissions were stopped).
#[test]
fn replay_refuses_a_reserved_entry_the_ledger_would_not_have_admitted() {
    let reserved = |n: u8, amount: i64| LedgerEntry::Reserved {
        op: op(n),
        amount: usd(amount),
    };
    let cases = [
        (
            vec![LedgerEntry::Opened { limit: usd(10) }, reserved(0, -5)],
            LedgerError::NotPositive {
                what: "reservation",
                amount: usd(-5),
            },
        ),
        (
            vec![LedgerEntry::Opened { limit: usd(10) }, reserved(0, 0)],
            LedgerError::NotPositive {
                what: "reservation",
                amount: UsdMicros::ZERO,
            },
        ),
        (
            vec![LedgerEntry::Opened { limit: usd(10) }, reserved(0, 11)],
            LedgerError::InsufficientBudget {
                requested: usd(11),
                available: usd(10),
            },
        ),
        (
            vec![
                LedgerEntry::Opened { limit: usd(100) },
                reserved(0, 10),
                LedgerEntry::Settled {
                    op: op(0),
                    reserved: usd(10),
                    charged: usd(20),
                },
                reserved(1, 10),
            ],
            LedgerError::AdmissionsStopped(Overrun::ActualAboveReservation {
                op: op(0),
                reserved: usd(10),
                charged: usd(20),
            }),
        ),
        (
            vec![
                LedgerEntry::Opened { limit: usd(100) },
                reserved(0, 10),
                reserved(0, 10),
            ],
            LedgerError::DuplicateReservation(op(0)),
        ),
    ];
    for (log, error) in cases {
        assert_eq!(BudgetLedger::replay(&log), Err(error), "{log:?}");
    }
}

/// `Settled { reserved }` and `Released { amount }` are checked against the open hold on
/// replay: an inconsistent log is refused, never accepted and silently rewritten.
#[test]
fn replay_refuses_recorded_amounts_that_disagree_with_the_open_hold() {
    let opening = [
        LedgerEntry::Opened { limit: usd(100) },
        LedgerEntry::Reserved {
            op: op(0),
            amount: usd(50),
        },
    ];
    let mismatch = LedgerError::LogMismatch {
        op: op(0),
        recorded: usd(7),
        held: usd(50),
    };
    let cases = [
        (
            LedgerEntry::Settled {
                op: op(0),
                reserved: usd(7),
                charged: usd(5),
            },
            mismatch.clone(),
        ),
        (
            LedgerEntry::Released {
                op: op(0),
                amount: usd(7),
            },
            mismatch,
        ),
        (
            LedgerEntry::Settled {
                op: op(1),
                reserved: usd(50),
                charged: usd(5),
            },
            LedgerError::UnknownReservation(op(1)),
        ),
        (
            LedgerEntry::Released {
                op: op(1),
                amount: usd(50),
            },
            LedgerError::UnknownReservation(op(1)),
        ),
        (
            LedgerEntry::MarkedUncertain { op: op(1) },
            LedgerError::UnknownReservation(op(1)),
        ),
        (LedgerEntry::OverrunAcknowledged, LedgerError::NoOverrun),
        (
            LedgerEntry::LimitRaised {
                by: UsdMicros::ZERO,
            },
            LedgerError::NotPositive {
                what: "limit raise",
                amount: UsdMicros::ZERO,
            },
        ),
    ];
    for (tail, error) in cases {
        let mut log = opening.to_vec();
        log.push(tail);
        assert_eq!(BudgetLedger::replay(&log), Err(error), "{log:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Properties over random operation sequences, against a reference model.
// ---------------------------------------------------------------------------------------

/// How a settlement's actual relates to the hold (0 for an op without one).
#[derive(Debug, Clone, Copy)]
enum Actual {
    Zero,
    /// `hold × permille / 1000`, strictly below a positive hold.
    Below(u16),
    At,
    Above(i64),
    Negative(i64),
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Reserve { op: u8, amount: i64 },
    Settle { op: u8, actual: Actual },
    MarkUncertain { op: u8 },
    Release { op: u8 },
    RaiseLimit { by: i64 },
    AcknowledgeOverrun,
}

/// Operation ids are drawn from a small pool so that duplicates and unknown ids are common.
const POOL: u8 = 6;

fn amount_strategy() -> impl Strategy<Value = i64> {
    prop_oneof![
        1 => Just(0i64),
        1 => -1_000i64..0,
        6 => 1i64..=500,
        3 => 500i64..=3_000,
        1 => 3_000i64..=60_000,
    ]
}

fn actual_strategy() -> impl Strategy<Value = Actual> {
    prop_oneof![
        1 => Just(Actual::Zero),
        3 => (0u16..1_000).prop_map(Actual::Below),
        2 => Just(Actual::At),
        1 => Just(Actual::Above(1)),
        2 => (1i64..=5_000).prop_map(Actual::Above),
        1 => (1i64..=1_000).prop_map(Actual::Negative),
    ]
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..POOL, amount_strategy()).prop_map(|(op, amount)| Step::Reserve { op, amount }),
        4 => (0..POOL, actual_strategy()).prop_map(|(op, actual)| Step::Settle { op, actual }),
        1 => (0..POOL).prop_map(|op| Step::MarkUncertain { op }),
        1 => (0..POOL).prop_map(|op| Step::Release { op }),
        1 => prop_oneof![1 => Just(0i64), 1 => -1_000i64..0, 4 => 1i64..=20_000]
            .prop_map(|by| Step::RaiseLimit { by }),
        1 => Just(Step::AcknowledgeOverrun),
    ]
}

/// A step, and for a settle, mark or release: `Some(k)` to aim it at the k-th open hold
/// (modulo their number) when there is one, so that most of them meet a reservation.
type Move = (Step, Option<u8>);

fn scenario_strategy() -> impl Strategy<Value = (i64, Vec<Move>)> {
    (
        prop_oneof![1 => Just(0i64), 4 => 1i64..=10_000, 1 => 10_000i64..=200_000],
        prop::collection::vec(
            (step_strategy(), prop::option::weighted(0.75, any::<u8>())),
            0..48,
        ),
    )
}

/// Aims `step` at the k-th open hold of `model` when asked and there is one.
fn aim(model: &Model, (step, pick): Move) -> Step {
    let open: Vec<u8> = model.holds.keys().copied().collect();
    let Some(k) = pick.filter(|_| !open.is_empty()) else {
        return step;
    };
    let n = open[usize::from(k) % open.len()];
    match step {
        Step::Settle { actual, .. } => Step::Settle { op: n, actual },
        Step::MarkUncertain { .. } => Step::MarkUncertain { op: n },
        Step::Release { .. } => Step::Release { op: n },
        other => other,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct ModelHold {
    amount: i64,
    uncertain: bool,
}

/// The reference model: plain sums over what the ledger reported as done.
#[derive(Debug, Clone, PartialEq)]
struct Model {
    opening: i64,
    /// Sum of the successful raises.
    raised: i64,
    /// Sum of the charges of the successful settlements.
    charged: i64,
    holds: BTreeMap<u8, ModelHold>,
    /// The B5 stop in force.
    stop: Option<Overrun>,
    /// Some settlement charged more than its reservation.
    overran: bool,
}

impl Model {
    fn new(opening: i64) -> Self {
        Self {
            opening,
            raised: 0,
            charged: 0,
            holds: BTreeMap::new(),
            stop: None,
            overran: false,
        }
    }

    fn limit(&self) -> i64 {
        self.opening + self.raised
    }

    fn reserved(&self) -> i64 {
        self.holds.values().map(|h| h.amount).sum()
    }

    fn uncertain(&self) -> i64 {
        self.holds
            .values()
            .filter(|h| h.uncertain)
            .map(|h| h.amount)
            .sum()
    }

    fn available(&self) -> i64 {
        self.limit() - self.charged - self.reserved()
    }

    fn balances(&self) -> Balances {
        balances(
            self.limit(),
            self.reserved(),
            self.uncertain(),
            self.charged,
            self.available(),
        )
    }

    fn held(&self, n: u8) -> Option<i64> {
        self.holds.get(&n).map(|h| h.amount)
    }

    /// The concrete charge a settle step asks for.
    fn actual(&self, n: u8, actual: Actual) -> i64 {
        let held = self.held(n).unwrap_or(0);
        match actual {
            Actual::Zero => 0,
            Actual::Below(permille) => held * i64::from(permille) / 1_000,
            Actual::At => held,
            Actual::Above(extra) => held + extra,
            Actual::Negative(n) => -n,
        }
    }

    /// What the rules say the ledger answers to `step` (amounts in micros).
    fn predict(&self, step: Step) -> Result<Option<i64>, LedgerError> {
        let unknown = |n: u8| LedgerError::UnknownReservation(op(n));
        match step {
            Step::Reserve { op: n, amount } => {
                if let Some(overrun) = self.stop {
                    return Err(LedgerError::AdmissionsStopped(overrun));
                }
                if amount <= 0 {
                    return Err(LedgerError::NotPositive {
                        what: "reservation",
                        amount: usd(amount),
                    });
                }
                if amount > self.available() {
                    return Err(LedgerError::InsufficientBudget {
                        requested: usd(amount),
                        available: usd(self.available()),
                    });
                }
                if self.holds.contains_key(&n) {
                    return Err(LedgerError::DuplicateReservation(op(n)));
                }
                Ok(None)
            }
            Step::Settle { op: n, actual } => {
                let actual = self.actual(n, actual);
                if actual < 0 {
                    return Err(LedgerError::Negative {
                        what: "charge",
                        amount: usd(actual),
                    });
                }
                let held = self.held(n).ok_or_else(|| unknown(n))?;
                Ok(Some((held - actual).max(0)))
            }
            Step::MarkUncertain { op: n } => match self.holds.get(&n) {
                None => Err(unknown(n)),
                Some(h) if h.uncertain => Err(LedgerError::AlreadyUncertain(op(n))),
                Some(_) => Ok(None),
            },
            Step::Release { op: n } => self.held(n).map(Some).ok_or_else(|| unknown(n)),
            Step::RaiseLimit { by } if by <= 0 => Err(LedgerError::NotPositive {
                what: "limit raise",
                amount: usd(by),
            }),
            Step::RaiseLimit { .. } => Ok(None),
            Step::AcknowledgeOverrun => match self.stop {
                None => Err(LedgerError::NoOverrun),
                Some(_) => Ok(None),
            },
        }
    }

    /// Applies a step the ledger reported as done.
    fn apply(&mut self, step: Step) {
        match step {
            Step::Reserve { op: n, amount } => {
                self.holds.insert(
                    n,
                    ModelHold {
                        amount,
                        uncertain: false,
                    },
                );
            }
            Step::Settle { op: n, actual } => {
                let actual = self.actual(n, actual);
                let held = self.held(n).unwrap_or(0);
                self.holds.remove(&n);
                self.charged += actual;
                if actual > held {
                    self.overran = true;
                    self.stop = Some(Overrun::ActualAboveReservation {
                        op: op(n),
                        reserved: usd(held),
                        charged: usd(actual),
                    });
                } else if self.charged > self.limit() {
                    self.stop = Some(Overrun::SpentAboveLimit {
                        spent: usd(self.charged),
                        limit: usd(self.limit()),
                    });
                }
            }
            Step::MarkUncertain { op: n } => {
                if let Some(h) = self.holds.get_mut(&n) {
                    h.uncertain = true;
                }
            }
            Step::Release { op: n } => {
                self.holds.remove(&n);
            }
            Step::RaiseLimit { by } => {
                self.raised += by;
                self.stop = None;
            }
            Step::AcknowledgeOverrun => self.stop = None,
        }
    }
}

/// One step of a run: the ledger and the model before and after, and what the ledger said.
#[derive(Debug)]
struct Record {
    index: usize,
    step: Step,
    /// The charge a settle step asked for.
    actual: Option<i64>,
    before: BudgetLedger,
    after: BudgetLedger,
    result: Result<Option<UsdMicros>, LedgerError>,
    model_before: Model,
    model_after: Model,
}

/// Drives a fresh ledger through `steps`; the model follows what the ledger reports as done.
fn run(opening: i64, moves: &[Move]) -> Result<Vec<Record>, TestCaseError> {
    let mut ledger = BudgetLedger::open(usd(opening))
        .map_err(|e| TestCaseError::fail(format!("open({opening}) refused: {e}")))?;
    let mut model = Model::new(opening);
    let mut records = Vec::with_capacity(moves.len());
    for (index, &m) in moves.iter().enumerate() {
        let step = aim(&model, m);
        let before = ledger.clone();
        let model_before = model.clone();
        let mut actual = None;
        let result = match step {
            Step::Reserve { op: n, amount } => ledger.reserve(op(n), usd(amount)).map(|()| None),
            Step::Settle { op: n, actual: a } => {
                let charge = model.actual(n, a);
                actual = Some(charge);
                ledger.settle(op(n), usd(charge)).map(Some)
            }
            Step::MarkUncertain { op: n } => ledger.mark_uncertain(op(n)).map(|()| None),
            Step::Release { op: n } => ledger.release(op(n)).map(Some),
            Step::RaiseLimit { by } => ledger.raise_limit(usd(by)).map(|()| None),
            Step::AcknowledgeOverrun => ledger.acknowledge_overrun().map(|()| None),
        };
        if result.is_ok() {
            model.apply(step);
        }
        records.push(Record {
            index,
            step,
            actual,
            before,
            after: ledger.clone(),
            result,
            model_before,
            model_after: model.clone(),
        });
    }
    Ok(records)
}

fn check_admission(r: &Record) -> Result<(), TestCaseError> {
    if let (Step::Reserve { amount, .. }, Ok(_)) = (r.step, &r.result) {
        prop_assert!(
            amount > 0,
            "step {} admitted a non-positive amount: {:?}",
            r.index,
            r.step
        );
        prop_assert!(
            usd(amount) <= r.before.available(),
            "step {} admitted {amount} above the available {}",
            r.index,
            r.before.available()
        );
        prop_assert!(
            r.before.overrun().is_none(),
            "step {} admitted {amount} while stopped by {:?}",
            r.index,
            r.before.overrun()
        );
        prop_assert!(
            r.model_before.stop.is_none(),
            "step {} admitted while the model says B5 stops admissions",
            r.index
        );
        let b = r.after.balances();
        prop_assert!(
            b.reserved.micros() <= b.limit.micros() - b.spent.micros(),
            "step {}: reserved {} exceeds limit − spent after admission: {b:?}",
            r.index,
            b.reserved
        );
        prop_assert_eq!(r.after.held_by(op_of(r.step)), Some(usd(amount)));
    }
    Ok(())
}

fn op_of(step: Step) -> OperationId {
    match step {
        Step::Reserve { op: n, .. }
        | Step::Settle { op: n, .. }
        | Step::MarkUncertain { op: n }
        | Step::Release { op: n } => op(n),
        Step::RaiseLimit { .. } | Step::AcknowledgeOverrun => op(u8::MAX),
    }
}

fn check_conservation(r: &Record) -> Result<(), TestCaseError> {
    let b = r.after.balances();
    let m = &r.model_after;
    prop_assert_eq!(
        b.spent.micros(),
        m.charged,
        "step {}: spent vs charges",
        r.index
    );
    prop_assert_eq!(
        b.reserved.micros(),
        m.reserved(),
        "step {}: reserved vs holds",
        r.index
    );
    prop_assert_eq!(
        b.uncertain.micros(),
        m.uncertain(),
        "step {}: uncertain",
        r.index
    );
    prop_assert_eq!(
        b.limit.micros(),
        m.opening + m.raised,
        "step {}: limit vs opening + raises",
        r.index
    );
    prop_assert_eq!(
        b.available.micros(),
        b.limit.micros() - b.spent.micros() - b.reserved.micros(),
        "step {}: available",
        r.index
    );
    prop_assert_eq!(r.after.available(), b.available);
    prop_assert!(b.uncertain <= b.reserved && !b.uncertain.is_negative());
    for n in 0..POOL {
        prop_assert_eq!(
            r.after.held_by(op(n)),
            m.held(n).map(usd),
            "step {}: hold {}",
            r.index,
            n
        );
    }
    // The released part plus the charge is the hold, for every settlement within it.
    match (r.step, &r.result, r.actual) {
        (Step::Settle { op: n, .. }, Ok(Some(released)), Some(actual)) => {
            let held = r.model_before.held(n).unwrap_or(0);
            prop_assert_eq!(released.micros(), (held - actual).max(0));
            prop_assert_eq!(
                b.reserved.micros() + b.spent.micros(),
                r.before.balances().reserved.micros() + r.before.balances().spent.micros() - held
                    + actual
            );
        }
        (Step::Release { op: n }, Ok(Some(released)), _) => {
            prop_assert_eq!(Some(released.micros()), r.model_before.held(n));
            prop_assert_eq!(b.spent, r.before.balances().spent);
        }
        _ => {}
    }
    // The log adds up to the same balances.
    let (mut spent, mut reserved, mut limit) = (0i64, 0i64, 0i64);
    for entry in r.after.journal() {
        match entry {
            LedgerEntry::Opened { limit: l } => limit += l.micros(),
            LedgerEntry::Reserved { amount, .. } => reserved += amount.micros(),
            LedgerEntry::Settled {
                reserved: held,
                charged,
                ..
            } => {
                reserved -= held.micros();
                spent += charged.micros();
            }
            LedgerEntry::SettlementRefused { reserved: held, .. } => {
                reserved -= held.micros();
                spent += held.micros();
            }
            LedgerEntry::Released { amount, .. } => reserved -= amount.micros(),
            LedgerEntry::LimitRaised { by } => limit += by.micros(),
            LedgerEntry::MarkedUncertain { .. } | LedgerEntry::OverrunAcknowledged => {}
        }
    }
    prop_assert_eq!(
        (spent, reserved, limit),
        (b.spent.micros(), b.reserved.micros(), b.limit.micros())
    );
    Ok(())
}

fn check_raise(r: &Record) -> Result<(), TestCaseError> {
    if let Step::RaiseLimit { by } = r.step {
        let (before, after) = (r.before.balances(), r.after.balances());
        prop_assert_eq!(
            after.spent,
            before.spent,
            "step {}: a raise changed spent",
            r.index
        );
        prop_assert_eq!(after.reserved, before.reserved);
        prop_assert_eq!(after.uncertain, before.uncertain);
        if r.result.is_ok() {
            prop_assert_eq!(after.limit.micros(), before.limit.micros() + by);
            prop_assert_eq!(after.available.micros(), before.available.micros() + by);
            prop_assert_eq!(
                r.after.overrun(),
                None,
                "step {}: a raise lifts the stop",
                r.index
            );
        }
    }
    Ok(())
}

fn check_replay(r: &Record) -> Result<(), TestCaseError> {
    let replayed = BudgetLedger::replay(r.after.journal());
    prop_assert_eq!(
        replayed.as_ref(),
        Ok(&r.after),
        "step {}: replay differs",
        r.index
    );
    let json =
        serde_json::to_string(r.after.journal()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let entries: Vec<LedgerEntry> =
        serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(BudgetLedger::replay(&entries), Ok(r.after.clone()));
    Ok(())
}

fn check_overrun(r: &Record) -> Result<(), TestCaseError> {
    let (before, after) = (r.before.balances(), r.after.balances());
    if after.spent > after.limit {
        prop_assert!(
            r.model_after.overran,
            "step {}: spent {} passed the limit {} without any actual above its reservation",
            r.index,
            after.spent,
            after.limit
        );
    }
    if let (Step::Settle { op: n, .. }, Ok(_), Some(actual)) = (r.step, &r.result, r.actual) {
        let held = r.model_before.held(n).unwrap_or(0);
        if actual > held || after.spent > after.limit {
            prop_assert!(
                r.after.overrun().is_some(),
                "step {}: an overrun (actual {actual} > held {held}, or spent {} > limit {}) did not stop admissions",
                r.index,
                after.spent,
                after.limit
            );
        }
    }
    if let Step::Reserve { .. } = r.step {
        if r.model_before.stop.is_some() {
            prop_assert!(
                matches!(r.result, Err(LedgerError::AdmissionsStopped(_))),
                "step {}: admissions were not stopped: {:?}",
                r.index,
                r.result
            );
        }
        if before.spent > before.limit {
            prop_assert!(
                r.result.is_err(),
                "step {}: admitted while spent > limit",
                r.index
            );
        }
    }
    prop_assert_eq!(
        r.after.overrun().is_some(),
        r.model_after.stop.is_some(),
        "step {}: the stop lasts until a raise or an acknowledgement",
        r.index
    );
    Ok(())
}

fn check_prediction(r: &Record) -> Result<(), TestCaseError> {
    let predicted = r.model_before.predict(r.step).map(|o| o.map(usd));
    prop_assert_eq!(&r.result, &predicted, "step {}: {:?}", r.index, r.step);
    prop_assert_eq!(r.after.balances(), r.model_after.balances());
    prop_assert_eq!(r.after.overrun(), r.model_after.stop);
    if r.result.is_err() {
        prop_assert_eq!(
            &r.after,
            &r.before,
            "step {}: a refusal changed the ledger",
            r.index
        );
    } else {
        prop_assert_eq!(r.after.journal().len(), r.before.journal().len() + 1);
        prop_assert_eq!(
            &r.after.journal()[..r.before.journal().len()],
            r.before.journal()
        );
    }
    Ok(())
}

fn check_all(
    (opening, moves): &(i64, Vec<Move>),
    check: fn(&Record) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    for record in run(*opening, moves)? {
        check(&record)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn b2_b7_no_sequence_admits_a_reservation_beyond_the_available_balance(
        scenario in scenario_strategy()
    ) {
        check_all(&scenario, check_admission)?;
    }

    #[test]
    fn no_micro_is_lost_or_created(scenario in scenario_strategy()) {
        check_all(&scenario, check_conservation)?;
    }

    #[test]
    fn b4_a_limit_raise_never_changes_spent(scenario in scenario_strategy()) {
        check_all(&scenario, check_raise)?;
    }

    #[test]
    fn replay_of_the_log_gives_the_same_balances(scenario in scenario_strategy()) {
        check_all(&scenario, check_replay)?;
    }

    #[test]
    fn spent_passes_the_limit_only_through_an_actual_above_its_reservation(
        scenario in scenario_strategy()
    ) {
        check_all(&scenario, check_overrun)?;
    }

    #[test]
    fn every_operation_is_accepted_or_refused_as_the_rules_say(
        scenario in scenario_strategy()
    ) {
        check_all(&scenario, check_prediction)?;
    }
}

/// Issue 17 (B3, B5): a settlement the ledger cannot take charges the whole reservation,
/// uncertain or not, flags an overrun naming what was reported, and replays to the same
/// ledger; spent saturates instead of failing, so the settlement is always decided once.
#[test]
fn b3_b5_a_refused_settlement_charges_the_reservation_and_replays() {
    let mut ledger = BudgetLedger::open(usd(100)).unwrap();
    ledger.reserve(op(0), usd(10)).unwrap();
    ledger.reserve(op(1), usd(20)).unwrap();
    ledger.mark_uncertain(op(1)).unwrap();
    let reported = UsdMicros::new(i64::MAX);
    ledger.settle_refused(op(1), reported).unwrap();
    let b = ledger.balances();
    assert_eq!(b.spent, usd(20));
    assert_eq!(b.reserved, usd(10));
    assert_eq!(b.uncertain, UsdMicros::ZERO);
    assert_eq!(
        ledger.overrun(),
        Some(Overrun::ChargeRefused {
            op: op(1),
            reserved: usd(20),
            reported,
        })
    );
    assert_eq!(
        ledger.reserve(op(2), usd(1)),
        Err(LedgerError::AdmissionsStopped(Overrun::ChargeRefused {
            op: op(1),
            reserved: usd(20),
            reported,
        })),
        "B5: admissions stop"
    );
    assert_eq!(
        ledger.settle_refused(op(1), reported),
        Err(LedgerError::UnknownReservation(op(1))),
        "once"
    );
    assert_eq!(BudgetLedger::replay(ledger.journal()).unwrap(), ledger);
    // Raising the limit lifts the stop (B4, B5).
    ledger.raise_limit(usd(1)).unwrap();
    ledger.reserve(op(2), usd(1)).unwrap();
    assert_eq!(BudgetLedger::replay(ledger.journal()).unwrap(), ledger);
    // Spent saturates rather than fail: the settlement is decided whatever spent holds.
    let mut full = BudgetLedger::open(UsdMicros::new(i64::MAX)).unwrap();
    full.reserve(op(0), UsdMicros::new(i64::MAX - 5)).unwrap();
    full.settle(op(0), UsdMicros::new(i64::MAX - 5)).unwrap();
    full.raise_limit(UsdMicros::ZERO).unwrap_err();
    assert_eq!(full.balances().available, UsdMicros::new(5));
    full.reserve(op(1), UsdMicros::new(5)).unwrap();
    full.settle_refused(op(1), reported).unwrap();
    assert_eq!(full.balances().spent, UsdMicros::new(i64::MAX));
    assert_eq!(BudgetLedger::replay(full.journal()).unwrap(), full);
}
