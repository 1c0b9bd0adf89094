//! `UsdMicros`: money as integer USD micros (1 USD = 1,000,000), with checked arithmetic.

use std::fmt;
use std::str::FromStr;

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

    /// The largest usage one call may be charged: USD 1,000,000,000. A provider or agent host
    /// reporting more reports nothing a real call costs; the edges refuse it with a clear
    /// error, and a settlement above it is refused by the engine (B3, B5: the whole
    /// reservation is charged and an overrun flagged). At this bound the ledger's i64 micros
    /// still hold more than 9,000 such charges.
    pub const MAX_CHARGE: UsdMicros = UsdMicros(1_000_000_000_000_000);

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

/// Text that is not an amount in dollars ([`UsdMicros`]'s `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseMoneyError {
    /// Not digits with at most one decimal point (and an optional `-` and `$`).
    #[error("`{0}` is not an amount in dollars such as 2.50")]
    NotAnAmount(String),
    /// More than six decimals: a micro is the smallest amount.
    #[error("`{0}` has more than six decimals; a micro ($0.000001) is the smallest amount")]
    TooPrecise(String),
    /// It does not fit in an `i64` of micros.
    #[error("`{0}` is too large an amount")]
    Overflow(String),
}

impl FromStr for UsdMicros {
    type Err = ParseMoneyError;

    /// Dollars with at most six decimals, exactly (never through a float): `2.50`, `$2.50`,
    /// `3`, `.5`, `-$0.000001`. The one parse of money; [`fmt::Display`] is its format and
    /// parses back to the same amount.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let not_an_amount = || ParseMoneyError::NotAnAmount(text.to_owned());
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let digits = rest.strip_prefix('$').unwrap_or(rest);
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let is_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && fraction.is_empty()) || !is_digits(whole) || !is_digits(fraction) {
            return Err(not_an_amount());
        }
        if fraction.len() > 6 {
            return Err(ParseMoneyError::TooPrecise(text.to_owned()));
        }
        let overflow = || ParseMoneyError::Overflow(text.to_owned());
        // Digits only, checked above: a parse can fail only by overflowing.
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| overflow())?
        };
        let fraction: i64 = format!("{fraction:0<6}").parse().map_err(|_| overflow())?;
        // Negative amounts are built downwards, so the most negative one fits too.
        let whole = whole.checked_mul(1_000_000);
        let micros = if negative {
            whole
                .and_then(|m| 0_i64.checked_sub(m))
                .and_then(|m| m.checked_sub(fraction))
        } else {
            whole.and_then(|m| m.checked_add(fraction))
        };
        micros.map(Self).ok_or_else(overflow)
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
    fn dollars_parse_to_micros_exactly_and_display_parses_back() {
        let parse = |text: &str| text.parse::<UsdMicros>();
        assert_eq!(parse("2.50"), Ok(UsdMicros::new(2_500_000)));
        assert_eq!(parse("$0.000001"), Ok(UsdMicros::new(1)));
        assert_eq!(parse("3"), Ok(UsdMicros::new(3_000_000)));
        assert_eq!(parse(".5"), Ok(UsdMicros::new(500_000)));
        assert_eq!(parse("-$2.500001"), Ok(UsdMicros::new(-2_500_001)));
        for micros in [0, 1, 9_500, 1_000_000, -2_500_001, i64::MAX, i64::MIN] {
            let amount = UsdMicros::new(micros);
            assert_eq!(parse(&amount.to_string()), Ok(amount), "{amount}");
        }
        for bad in [
            "", ".", "-", "$", "1e3", "abc", "1.2.3", "+1", " 1", "1,5", "$-1",
        ] {
            assert_eq!(
                parse(bad),
                Err(ParseMoneyError::NotAnAmount(bad.to_owned())),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse("1.0000001"),
            Err(ParseMoneyError::TooPrecise("1.0000001".to_owned()))
        );
        for huge in ["99999999999999", "9223372036855", "99999999999999999999"] {
            assert_eq!(
                parse(huge),
                Err(ParseMoneyError::Overflow(huge.to_owned())),
                "{huge}"
            );
        }
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
