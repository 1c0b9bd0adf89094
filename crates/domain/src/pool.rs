//! Budget pools (B8): an owner- or campaign-wide limit with its own ledger, which Rooms draw
//! on. A pool is a [`BudgetLedger`] and follows B2–B5 exactly as a Room's does; what this
//! module decides is how a Room's decision moves its pool: the pool *follows* the Room's
//! ledger entries, so the pool holds what every Room drawing on it holds, and charges what
//! they charge. The stores apply [`follow`] in the transaction that commits the Room's
//! decision (B8 is guaranteed by stores), and the engine checks the pool it was given before
//! it admits a reservation, so that a refusal is a decision with its rule, not a failed
//! commit.
//!
//! What stays Room-local: a Room's opening, limit raises and overrun acknowledgements. A pool
//! has its own, decided by the host's administrator.

use crate::ledger::{BudgetLedger, LedgerEntry, LedgerError};

/// B8: applies a Room's ledger `entries` (what one of its decisions appended) to the ledger of
/// the pool it draws on. A reservation the pool cannot hold (B2, or admissions stopped by
/// the pool's overrun, B5) is refused and the pool is left as it was; settlements follow B3
/// (a usage the pool cannot take is charged as the whole reservation, with an overrun).
/// Entries of operations the pool does not hold are the Room's alone (reserved before the
/// Room drew on the pool) and leave the pool unchanged. The pool's own entries are in its
/// journal.
pub fn follow(pool: &mut BudgetLedger, entries: &[LedgerEntry]) -> Result<(), LedgerError> {
    let mut next = pool.clone();
    for entry in entries {
        match *entry {
            LedgerEntry::Reserved { op, amount } => next.reserve(op, amount)?,
            LedgerEntry::MarkedUncertain { op } if next.held_by(op).is_some() => {
                next.mark_uncertain(op)?;
            }
            LedgerEntry::Settled { op, charged, .. } if next.held_by(op).is_some() => {
                // The Room settled it; the pool settles it the same, or, when its balances
                // cannot take the charge, charges the whole reservation with an overrun.
                let mut trial = next.clone();
                match trial.settle(op, charged) {
                    Ok(_) => next = trial,
                    Err(_) => next.settle_refused(op, charged)?,
                }
            }
            LedgerEntry::SettlementRefused { op, reported, .. } if next.held_by(op).is_some() => {
                next.settle_refused(op, reported)?;
            }
            LedgerEntry::Released { op, .. } if next.held_by(op).is_some() => {
                next.release(op)?;
            }
            LedgerEntry::Opened { .. }
            | LedgerEntry::MarkedUncertain { .. }
            | LedgerEntry::Settled { .. }
            | LedgerEntry::SettlementRefused { .. }
            | LedgerEntry::Released { .. }
            | LedgerEntry::LimitRaised { .. }
            | LedgerEntry::OverrunAcknowledged => {}
        }
    }
    *pool = next;
    Ok(())
}

/// Whether any of `entries` moves a pool (a reservation, an uncertainty, a settlement or a
/// release): a commit with none of them leaves the pool unread.
pub fn moves_pool(entries: &[LedgerEntry]) -> bool {
    entries.iter().any(|entry| {
        !matches!(
            entry,
            LedgerEntry::Opened { .. }
                | LedgerEntry::LimitRaised { .. }
                | LedgerEntry::OverrunAcknowledged
        )
    })
}

/// Whether any of `entries` reserves (what a pool that cannot be read must refuse; a Room's
/// settlements and releases need no pool).
pub fn reserves(entries: &[LedgerEntry]) -> bool {
    entries
        .iter()
        .any(|entry| matches!(entry, LedgerEntry::Reserved { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::OperationId;
    use crate::ledger::Overrun;
    use crate::money::UsdMicros;

    fn op(n: u128) -> OperationId {
        OperationId::from_uuid(uuid::Uuid::from_u128(n))
    }

    fn usd(micros: i64) -> UsdMicros {
        UsdMicros::new(micros)
    }

    fn pool(limit: i64) -> BudgetLedger {
        let mut pool = BudgetLedger::open(usd(limit)).expect("a limit");
        pool.take_journal();
        pool
    }

    #[test]
    fn b8_pool_holds_charges_and_releases_what_its_rooms_do() {
        let mut pool = pool(1_000);
        let entries = [
            LedgerEntry::Reserved {
                op: op(1),
                amount: usd(300),
            },
            LedgerEntry::Reserved {
                op: op(2),
                amount: usd(200),
            },
        ];
        follow(&mut pool, &entries).expect("within the pool");
        assert_eq!(pool.balances().reserved, usd(500));
        let entries = [
            LedgerEntry::Settled {
                op: op(1),
                reserved: usd(300),
                charged: usd(120),
            },
            LedgerEntry::Released {
                op: op(2),
                amount: usd(200),
            },
        ];
        follow(&mut pool, &entries).expect("settles");
        let b = pool.balances();
        assert_eq!(
            (b.reserved, b.spent, b.available),
            (usd(0), usd(120), usd(880))
        );
        let journal = pool.take_journal();
        assert_eq!(journal.len(), 4, "{journal:?}");
    }

    #[test]
    fn b8_pool_refuses_a_reservation_above_its_balance_and_changes_nothing() {
        let mut pool = pool(500);
        follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(1),
                amount: usd(400),
            }],
        )
        .expect("fits");
        let before = pool.clone();
        let entries = [
            LedgerEntry::Settled {
                op: op(1),
                reserved: usd(400),
                charged: usd(400),
            },
            LedgerEntry::Reserved {
                op: op(2),
                amount: usd(200),
            },
        ];
        let err = follow(&mut pool, &entries).expect_err("above the pool's balance");
        assert!(
            matches!(err, LedgerError::InsufficientBudget { .. }),
            "{err}"
        );
        assert_eq!(pool, before, "a refused decision leaves the pool as it was");
        assert_eq!(pool.journal().len(), before.journal().len());
    }

    #[test]
    fn b8_b5_an_overrun_at_the_pool_stops_every_room_until_the_host_acts() {
        let mut pool = pool(1_000);
        follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(1),
                amount: usd(100),
            }],
        )
        .expect("fits");
        follow(
            &mut pool,
            &[LedgerEntry::Settled {
                op: op(1),
                reserved: usd(100),
                charged: usd(150),
            }],
        )
        .expect("charged above its reservation");
        assert!(matches!(
            pool.overrun(),
            Some(Overrun::ActualAboveReservation { .. })
        ));
        let err = follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(2),
                amount: usd(1),
            }],
        )
        .expect_err("stopped");
        assert!(matches!(err, LedgerError::AdmissionsStopped(_)), "{err}");
        pool.acknowledge_overrun().expect("the host acknowledges");
        follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(2),
                amount: usd(1),
            }],
        )
        .expect("admitted again");
    }

    #[test]
    fn b8_room_local_entries_and_operations_the_pool_never_held_leave_it_unchanged() {
        let mut pool = pool(1_000);
        let before = pool.clone();
        let entries = [
            LedgerEntry::LimitRaised { by: usd(5) },
            LedgerEntry::OverrunAcknowledged,
            LedgerEntry::Settled {
                op: op(9),
                reserved: usd(10),
                charged: usd(10),
            },
            LedgerEntry::Released {
                op: op(8),
                amount: usd(10),
            },
            LedgerEntry::MarkedUncertain { op: op(7) },
        ];
        follow(&mut pool, &entries).expect("nothing to follow");
        assert_eq!(pool, before);
        assert!(pool.journal().is_empty());
        assert!(!moves_pool(&entries[..2]));
        assert!(moves_pool(&entries));
    }

    #[test]
    fn b8_b3_a_charge_the_pool_cannot_take_is_its_whole_reservation_with_an_overrun() {
        let mut pool = pool(i64::MAX);
        follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(1),
                amount: usd(10),
            }],
        )
        .expect("fits");
        follow(
            &mut pool,
            &[LedgerEntry::Settled {
                op: op(1),
                reserved: usd(10),
                charged: usd(i64::MAX - 5),
            }],
        )
        .expect("charged above its reservation");
        pool.acknowledge_overrun().expect("the host acknowledges");
        follow(
            &mut pool,
            &[LedgerEntry::Reserved {
                op: op(2),
                amount: usd(5),
            }],
        )
        .expect("fits");
        // Spent cannot take 10 more micros: the pool charges the whole reservation instead.
        follow(
            &mut pool,
            &[LedgerEntry::Settled {
                op: op(2),
                reserved: usd(5),
                charged: usd(10),
            }],
        )
        .expect("decided once");
        let b = pool.balances();
        assert_eq!((b.spent, b.reserved), (usd(i64::MAX), usd(0)));
        assert!(matches!(
            pool.overrun(),
            Some(Overrun::ChargeRefused { .. })
        ));
        let replayed = BudgetLedger::replay(
            &[
                vec![LedgerEntry::Opened {
                    limit: usd(i64::MAX),
                }],
                pool.take_journal(),
            ]
            .concat(),
        )
        .expect("the pool's log replays");
        assert_eq!(replayed, pool);
    }
}
