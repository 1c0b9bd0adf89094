//! Rule ids (DESIGN.md "Rules"), named by every decision-log entry that a rule decided.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A rule of DESIGN.md.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Rule {
    O1,
    O2,
    O3,
    O4,
    O5,
    O6,
    O7,
    O8,
    O9,
    O10,
    O11,
    O12,
    O13,
    O14,
    B1,
    B2,
    B3,
    B4,
    B5,
    B6,
    B7,
    B8,
    D1,
    D2,
    D3,
    D4,
    D5,
    D6,
    T1,
    T2,
    T3,
    T4,
    T5,
    T6,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    C1,
    M1,
}

impl Rule {
    /// Whether the rule is one of the budget's (B1–B8): its decision-log entries speak of
    /// money (reservations, charges, limits, quotes), which only `budget.read` may read.
    pub const fn is_budget(self) -> bool {
        matches!(
            self,
            Rule::B1 | Rule::B2 | Rule::B3 | Rule::B4 | Rule::B5 | Rule::B6 | Rule::B7 | Rule::B8
        )
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
