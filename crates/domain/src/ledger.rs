//! The Room budget ledger: limit, reserved, spent and uncertain balances, kept by an
//! append-only entry log that replays to the same balances.
//!
//! Rules decided here: B2 (available = limit − spent − reserved; no renewal), B3 (actual usage
//! is charged and the rest released; an uncertain call keeps its whole reservation), B4 (a
//! limit raise adds balance and never touches spent), B5 (an overrun stops admissions until
//! an operator raises the limit or acknowledges it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::OperationId;
use crate::money::{MoneyError, UsdMicros};

/// Why an operation on the ledger was refused. The ledger is unchanged after any error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// B2: the reservation is above the available balance.
    #[error("reservation of {requested} exceeds the available balance of {available}")]
    InsufficientBudget {
        /// What was asked for.
        requested: UsdMicros,
        /// Limit − spent − reserved.
        available: UsdMicros,
    },
    /// B5: an overrun stopped admissions.
    #[error(
        "admissions are stopped by an overrun ({0}); an operator must raise the limit or acknowledge it"
    )]
    AdmissionsStopped(Overrun),
    /// An amount that must be positive was not.
    #[error("{what} must be positive, got {amount}")]
    NotPositive {
        /// What the amount is.
        what: &'static str,
        /// The amount given.
        amount: UsdMicros,
    },
    /// An amount that must not be negative was.
    #[error("{what} must not be negative, got {amount}")]
    Negative {
        /// What the amount is.
        what: &'static str,
        /// The amount given.
        amount: UsdMicros,
    },
    /// The operation already holds a reservation.
    #[error("operation {0} already holds a reservation")]
    DuplicateReservation(OperationId),
    /// The operation holds no open reservation.
    #[error("operation {0} holds no open reservation")]
    UnknownReservation(OperationId),
    /// The reservation is already marked uncertain.
    #[error("the reservation of operation {0} is already uncertain")]
    AlreadyUncertain(OperationId),
    /// There is no overrun to acknowledge.
    #[error("there is no overrun to acknowledge")]
    NoOverrun,
    /// A balance would overflow i64 micros.
    #[error("a balance would overflow i64 micros")]
    Overflow,
    /// A replayed log does not start with the opening limit.
    #[error("a ledger log must start with its opening limit")]
    MissingOpening,
    /// A replayed entry records an amount that disagrees with the reservation it closes.
    #[error("the log records {recorded} for operation {op}, but its reservation holds {held}")]
    LogMismatch {
        /// The operation.
        op: OperationId,
        /// What the entry records.
        recorded: UsdMicros,
        /// What the reservation held.
        held: UsdMicros,
    },
}

impl From<MoneyError> for LedgerError {
    fn from(_: MoneyError) -> Self {
        LedgerError::Overflow
    }
}

/// Why admissions stopped (B5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Overrun {
    /// A call was charged more than its reservation.
    ActualAboveReservation {
        /// The operation that overran.
        op: OperationId,
        /// Its reservation.
        reserved: UsdMicros,
        /// What it was charged.
        charged: UsdMicros,
    },
    /// B3, B5: a call reported usage the ledger cannot take (above
    /// [`UsdMicros::MAX_CHARGE`], or more than its balances can hold); it was charged its whole
    /// reservation instead and the settlement was decided once.
    ChargeRefused {
        /// The operation.
        op: OperationId,
        /// Its reservation, which was charged.
        reserved: UsdMicros,
        /// The usage it reported.
        reported: UsdMicros,
    },
    /// Spent passed the limit.
    SpentAboveLimit {
        /// Spent at the time.
        spent: UsdMicros,
        /// The limit at the time.
        limit: UsdMicros,
    },
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Overrun::ActualAboveReservation {
                op,
                reserved,
                charged,
            } => write!(
                f,
                "operation {op} was charged {charged} against a reservation of {reserved}"
            ),
            Overrun::ChargeRefused {
                op,
                reserved,
                reported,
            } => write!(
                f,
                "operation {op} reported usage of {reported}, which the ledger cannot take: \
                 charged its whole reservation of {reserved}"
            ),
            Overrun::SpentAboveLimit { spent, limit } => {
                write!(f, "spent {spent} is above the limit {limit}")
            }
        }
    }
}

/// One entry of the append-only ledger log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "entry")]
pub enum LedgerEntry {
    /// The opening limit.
    Opened {
        /// The limit.
        limit: UsdMicros,
    },
    /// A reservation was admitted.
    Reserved {
        /// The operation.
        op: OperationId,
        /// The amount held.
        amount: UsdMicros,
    },
    /// A reservation was marked uncertain: it stays held (B3).
    MarkedUncertain {
        /// The operation.
        op: OperationId,
    },
    /// A reservation was settled: `charged` spent, the rest of `reserved` released.
    Settled {
        /// The operation.
        op: OperationId,
        /// What the reservation held.
        reserved: UsdMicros,
        /// What was charged.
        charged: UsdMicros,
    },
    /// A settlement the ledger could not take (B3, B5): the whole reservation was charged in
    /// place of the `reported` usage, and an overrun stops admissions.
    SettlementRefused {
        /// The operation.
        op: OperationId,
        /// What the reservation held, all of it charged.
        reserved: UsdMicros,
        /// The usage the call reported.
        reported: UsdMicros,
    },
    /// A reservation was released without charge (the call never ran).
    Released {
        /// The operation.
        op: OperationId,
        /// The amount released.
        amount: UsdMicros,
    },
    /// The limit was raised (B4).
    LimitRaised {
        /// By how much.
        by: UsdMicros,
    },
    /// An operator acknowledged an overrun (B5).
    OverrunAcknowledged,
}

/// The ledger's balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balances {
    /// The total limit (no automatic renewal, B2).
    pub limit: UsdMicros,
    /// Held by open reservations, uncertain ones included.
    pub reserved: UsdMicros,
    /// The part of `reserved` held by uncertain calls.
    pub uncertain: UsdMicros,
    /// Charged so far.
    pub spent: UsdMicros,
    /// Limit − spent − reserved; negative after an overrun.
    pub available: UsdMicros,
}

/// An open reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Hold {
    amount: UsdMicros,
    uncertain: bool,
}

/// The Room's budget ledger. Every change goes through a method that keeps the invariants
/// and appends its entry to the journal; [`BudgetLedger::replay`] rebuilds the same ledger
/// from the entries.
///
/// The ledger is its balances and open holds: it stays as small as the open work, however
/// long the Room lives. The entries are the record; they leave through the journal (each
/// decision takes the entries it appended, and the stores keep them as rows), and are never
/// part of the serialized state. Two ledgers are equal when their balances, holds and
/// overrun are, whatever their journals hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BudgetLedger {
    limit: UsdMicros,
    spent: UsdMicros,
    reserved: UsdMicros,
    uncertain: UsdMicros,
    overrun: Option<Overrun>,
    holds: BTreeMap<OperationId, Hold>,
    /// Entries appended since the ledger was opened, replayed, deserialized or its journal
    /// taken.
    #[serde(skip)]
    journal: Vec<LedgerEntry>,
}

impl PartialEq for BudgetLedger {
    fn eq(&self, other: &Self) -> bool {
        let Self {
            limit,
            spent,
            reserved,
            uncertain,
            overrun,
            holds,
            journal: _,
        } = self;
        *limit == other.limit
            && *spent == other.spent
            && *reserved == other.reserved
            && *uncertain == other.uncertain
            && *overrun == other.overrun
            && *holds == other.holds
    }
}

impl Eq for BudgetLedger {}

impl BudgetLedger {
    /// A ledger with an opening `limit` (zero or more).
    pub fn open(limit: UsdMicros) -> Result<Self, LedgerError> {
        if limit.is_negative() {
            return Err(LedgerError::Negative {
                what: "limit",
                amount: limit,
            });
        }
        Ok(Self {
            limit,
            spent: UsdMicros::ZERO,
            reserved: UsdMicros::ZERO,
            uncertain: UsdMicros::ZERO,
            overrun: None,
            holds: BTreeMap::new(),
            journal: vec![LedgerEntry::Opened { limit }],
        })
    }

    /// Rebuilds a ledger from its log, applying each entry through the same checks that
    /// admitted it: a log the ledger would not have written is refused.
    pub fn replay(entries: &[LedgerEntry]) -> Result<Self, LedgerError> {
        let Some((LedgerEntry::Opened { limit }, rest)) = entries.split_first() else {
            return Err(LedgerError::MissingOpening);
        };
        let mut ledger = Self::open(*limit)?;
        for entry in rest {
            ledger.apply(entry)?;
        }
        Ok(ledger)
    }

    fn apply(&mut self, entry: &LedgerEntry) -> Result<(), LedgerError> {
        match *entry {
            LedgerEntry::Opened { .. } => Err(LedgerError::MissingOpening),
            LedgerEntry::Reserved { op, amount } => self.reserve(op, amount),
            LedgerEntry::MarkedUncertain { op } => self.mark_uncertain(op),
            LedgerEntry::Settled {
                op,
                reserved,
                charged,
            } => {
                self.check_hold(op, reserved)?;
                self.settle(op, charged).map(|_| ())
            }
            LedgerEntry::SettlementRefused {
                op,
                reserved,
                reported,
            } => {
                self.check_hold(op, reserved)?;
                self.settle_refused(op, reported)
            }
            LedgerEntry::Released { op, amount } => {
                self.check_hold(op, amount)?;
                self.release(op).map(|_| ())
            }
            LedgerEntry::LimitRaised { by } => self.raise_limit(by),
            LedgerEntry::OverrunAcknowledged => self.acknowledge_overrun(),
        }
    }

    fn check_hold(&self, op: OperationId, recorded: UsdMicros) -> Result<(), LedgerError> {
        let held = self
            .holds
            .get(&op)
            .ok_or(LedgerError::UnknownReservation(op))?
            .amount;
        if held == recorded {
            Ok(())
        } else {
            Err(LedgerError::LogMismatch { op, recorded, held })
        }
    }

    /// The current balances.
    pub fn balances(&self) -> Balances {
        Balances {
            limit: self.limit,
            reserved: self.reserved,
            uncertain: self.uncertain,
            spent: self.spent,
            available: self.available(),
        }
    }

    /// Limit − spent − reserved (B2). Saturates only at i64's bounds, which the checked
    /// updates never let the balances reach.
    pub fn available(&self) -> UsdMicros {
        UsdMicros::new(
            self.limit
                .micros()
                .saturating_sub(self.spent.micros())
                .saturating_sub(self.reserved.micros()),
        )
    }

    /// The overrun that stopped admissions, if any (B5).
    pub fn overrun(&self) -> Option<Overrun> {
        self.overrun
    }

    /// The entries appended since this ledger was opened, replayed, deserialized or its
    /// journal last taken: in a decision, what the decision appended to the log.
    pub fn journal(&self) -> &[LedgerEntry] {
        &self.journal
    }

    /// Takes the journal, leaving it empty.
    pub fn take_journal(&mut self) -> Vec<LedgerEntry> {
        std::mem::take(&mut self.journal)
    }

    /// The log a new Room's ledger starts with: its opening at the current limit, when nothing
    /// was reserved, charged or stopped yet (it replays to this ledger); `None` otherwise.
    pub fn opening(&self) -> Option<LedgerEntry> {
        let untouched = self.holds.is_empty()
            && self.spent == UsdMicros::ZERO
            && self.reserved == UsdMicros::ZERO
            && self.overrun.is_none();
        untouched.then_some(LedgerEntry::Opened { limit: self.limit })
    }

    /// The number of open reservations.
    pub fn open_holds(&self) -> usize {
        self.holds.len()
    }

    /// The amount `op` holds, if it holds a reservation.
    pub fn held_by(&self, op: OperationId) -> Option<UsdMicros> {
        self.holds.get(&op).map(|h| h.amount)
    }

    /// Admits a reservation of `amount` for `op` (B1, B2, B5): refused when admissions are
    /// stopped or the amount is above the available balance.
    pub fn reserve(&mut self, op: OperationId, amount: UsdMicros) -> Result<(), LedgerError> {
        if let Some(overrun) = self.overrun {
            return Err(LedgerError::AdmissionsStopped(overrun));
        }
        if !amount.is_positive() {
            return Err(LedgerError::NotPositive {
                what: "reservation",
                amount,
            });
        }
        let available = self.available();
        if amount > available {
            return Err(LedgerError::InsufficientBudget {
                requested: amount,
                available,
            });
        }
        if self.holds.contains_key(&op) {
            return Err(LedgerError::DuplicateReservation(op));
        }
        let reserved = self.reserved.checked_add(amount)?;
        self.reserved = reserved;
        self.holds.insert(
            op,
            Hold {
                amount,
                uncertain: false,
            },
        );
        self.journal.push(LedgerEntry::Reserved { op, amount });
        Ok(())
    }

    /// Marks `op`'s reservation uncertain: the whole amount stays held (B3, D2).
    pub fn mark_uncertain(&mut self, op: OperationId) -> Result<(), LedgerError> {
        let hold = self
            .holds
            .get(&op)
            .copied()
            .ok_or(LedgerError::UnknownReservation(op))?;
        if hold.uncertain {
            return Err(LedgerError::AlreadyUncertain(op));
        }
        let uncertain = self.uncertain.checked_add(hold.amount)?;
        self.uncertain = uncertain;
        self.holds.insert(
            op,
            Hold {
                amount: hold.amount,
                uncertain: true,
            },
        );
        self.journal.push(LedgerEntry::MarkedUncertain { op });
        Ok(())
    }

    /// Settles `op`: charges `actual` and releases the rest of its reservation (B3). An
    /// actual above the reservation, or spent above the limit, stops admissions (B5).
    /// Returns what was released.
    pub fn settle(&mut self, op: OperationId, actual: UsdMicros) -> Result<UsdMicros, LedgerError> {
        if actual.is_negative() {
            return Err(LedgerError::Negative {
                what: "charge",
                amount: actual,
            });
        }
        if !self.holds.contains_key(&op) {
            return Err(LedgerError::UnknownReservation(op));
        }
        let spent = self.spent.checked_add(actual)?;
        let hold = self.take_hold(op)?;
        self.spent = spent;
        if actual > hold.amount {
            self.overrun = Some(Overrun::ActualAboveReservation {
                op,
                reserved: hold.amount,
                charged: actual,
            });
        } else if self.spent > self.limit {
            self.overrun = Some(Overrun::SpentAboveLimit {
                spent: self.spent,
                limit: self.limit,
            });
        }
        self.journal.push(LedgerEntry::Settled {
            op,
            reserved: hold.amount,
            charged: actual,
        });
        Ok(UsdMicros::new(
            hold.amount.micros().saturating_sub(actual.micros()).max(0),
        ))
    }

    /// Settles `op` whose reported usage the ledger cannot take (B3, B5): `reported` is above
    /// [`UsdMicros::MAX_CHARGE`] or [`BudgetLedger::settle`] refused it. The whole reservation
    /// is charged (spent saturates rather than fail, so the settlement is always decided
    /// once), and an overrun stops admissions until an operator acts.
    pub fn settle_refused(
        &mut self,
        op: OperationId,
        reported: UsdMicros,
    ) -> Result<(), LedgerError> {
        let hold = self.take_hold(op)?;
        self.spent = UsdMicros::new(self.spent.micros().saturating_add(hold.amount.micros()));
        self.overrun = Some(Overrun::ChargeRefused {
            op,
            reserved: hold.amount,
            reported,
        });
        self.journal.push(LedgerEntry::SettlementRefused {
            op,
            reserved: hold.amount,
            reported,
        });
        Ok(())
    }

    /// Releases `op`'s whole reservation without charge: the call is known never to have run.
    pub fn release(&mut self, op: OperationId) -> Result<UsdMicros, LedgerError> {
        let hold = self.take_hold(op)?;
        self.journal.push(LedgerEntry::Released {
            op,
            amount: hold.amount,
        });
        Ok(hold.amount)
    }

    /// Takes `op`'s hold off the reserved (and uncertain) balances and returns it; what it
    /// charges is its caller's to decide. Nothing changes when it fails.
    fn take_hold(&mut self, op: OperationId) -> Result<Hold, LedgerError> {
        let hold = self
            .holds
            .get(&op)
            .copied()
            .ok_or(LedgerError::UnknownReservation(op))?;
        let reserved = self.reserved.checked_sub(hold.amount)?;
        let uncertain = if hold.uncertain {
            self.uncertain.checked_sub(hold.amount)?
        } else {
            self.uncertain
        };
        self.reserved = reserved;
        self.uncertain = uncertain;
        self.holds.remove(&op);
        Ok(hold)
    }

    /// Raises the limit by `by` (B4): adds balance, never resets spent, and lifts a stop
    /// caused by an overrun (B5).
    pub fn raise_limit(&mut self, by: UsdMicros) -> Result<(), LedgerError> {
        if !by.is_positive() {
            return Err(LedgerError::NotPositive {
                what: "limit raise",
                amount: by,
            });
        }
        self.limit = self.limit.checked_add(by)?;
        self.overrun = None;
        self.journal.push(LedgerEntry::LimitRaised { by });
        Ok(())
    }

    /// Acknowledges the overrun that stopped admissions (B5).
    pub fn acknowledge_overrun(&mut self) -> Result<(), LedgerError> {
        if self.overrun.is_none() {
            return Err(LedgerError::NoOverrun);
        }
        self.overrun = None;
        self.journal.push(LedgerEntry::OverrunAcknowledged);
        Ok(())
    }
}
