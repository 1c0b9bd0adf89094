//! `UsdMicros`: money as integer USD micros (1 USD = 1,000,000), with checked arithmetic.

use std::fmt;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};

/// An arithmetic error on money; never a silent wrap or saturation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// The result does not fit in an `i64` of micros.
    #[error("amount overflows i64 micros")]
    Overflow,
    /// A decimal USD amount that is negative where only non-negative amounts make sense.
    #[error("amount {0} USD is negative")]
    Negative(Decimal),
}

/// How to round a decimal USD amount to whole micros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// Towards positive infinity: for reservations and charges, which must never undercount.
    Up,
    /// Towards negative infinity.
    Down,
}

/// An amount of money in integer USD micros. Never a float.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct UsdMicros(i64);

impl UsdMicros {
    /// Zero micros.
    pub const ZERO: UsdMicros = UsdMicros(0);

    /// An amount of `micros` micros.
    pub const fn new(micros: i64) -> Self {
        Self(micros)
    }

    /// An amount of whole US dollars; an error when it overflows.
    pub fn from_usd(usd: i64) -> Result<Self, MoneyError> {
        usd.checked_mul(1_000_000)
            .map(Self)
            .ok_or(MoneyError::Overflow)
    }

    /// Parses a decimal USD amount, rounding to whole micros as asked.
    pub fn from_usd_decimal(usd: &Decimal, rounding: Rounding) -> Result<Self, MoneyError> {
        let micros = usd
            .checked_mul(Decimal::from(1_000_000))
            .ok_or(MoneyError::Overflow)?;
        let whole = match rounding {
            Rounding::Up => micros.ceil(),
            Rounding::Down => micros.floor(),
        };
        whole.to_i64().map(Self).ok_or(MoneyError::Overflow)
    }

    /// The amount in micros.
    pub const fn micros(self) -> i64 {
        self.0
    }

    /// Whether the amount is below zero.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// Whether the amount is above zero.
    pub const fn is_positive(self) -> bool {
        self.0 > 0
    }

    /// `self + other`, or an overflow error.
    pub fn checked_add(self, other: UsdMicros) -> Result<UsdMicros, MoneyError> {
        self.0
            .checked_add(other.0)
            .map(Self)
            .ok_or(MoneyError::Overflow)
    }

    /// `self - other`, or an overflow error.
    pub fn checked_sub(self, other: UsdMicros) -> Result<UsdMicros, MoneyError> {
        self.0
            .checked_sub(other.0)
            .map(Self)
            .ok_or(MoneyError::Overflow)
    }
}

impl fmt::Display for UsdMicros {
    /// `$1.234567`, or `-$0.000001`: exact, never rounded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        write!(f, "{sign}${}.{:06}", abs / 1_000_000, abs % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn checked_arithmetic_reports_overflow() {
        assert_eq!(
            UsdMicros::new(i64::MAX).checked_add(UsdMicros::new(1)),
            Err(MoneyError::Overflow)
        );
        assert_eq!(
            UsdMicros::new(i64::MIN).checked_sub(UsdMicros::new(1)),
            Err(MoneyError::Overflow)
        );
        assert_eq!(
            UsdMicros::new(2).checked_sub(UsdMicros::new(5)),
            Ok(UsdMicros::new(-3))
        );
        assert_eq!(UsdMicros::from_usd(i64::MAX), Err(MoneyError::Overflow));
    }

    #[test]
    fn decimal_usd_rounds_as_asked() {
        let d = Decimal::from_str("0.0000011").unwrap();
        assert_eq!(
            UsdMicros::from_usd_decimal(&d, Rounding::Up),
            Ok(UsdMicros::new(2))
        );
        assert_eq!(
            UsdMicros::from_usd_decimal(&d, Rounding::Down),
            Ok(UsdMicros::new(1))
        );
        let huge = Decimal::from_str("99999999999999999999").unwrap();
        assert_eq!(
            UsdMicros::from_usd_decimal(&huge, Rounding::Up),
            Err(MoneyError::Overflow)
        );
    }

    #[test]
    fn display_is_exact() {
        assert_eq!(UsdMicros::new(1_234_567).to_string(), "$1.234567");
        assert_eq!(UsdMicros::new(-1).to_string(), "-$0.000001");
        assert_eq!(
            UsdMicros::new(i64::MIN).to_string(),
            "-$9223372036854.775808"
        );
    }
}
