//! Whole numbers in request bodies, as the document declares them.
//!
//! The schemas say `type: integer`, and JSON Schema's `integer` is any number without a
//! fractional part: `4755.0` and `4.755e3` are the integer 4755 to a client that generates or
//! checks bodies from the document (schemathesis found the API refusing them). serde reads
//! such a number as a float, so these fields accept a float when it is whole and small enough
//! to be exact (|x| ≤ 2^53); `1.5`, `1e300` or a string are refused with a clear error, and a
//! number beyond the field's range is refused as before. Money stays integer micros: nothing
//! here rounds.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// The largest magnitude a double holds exactly with every integer below it.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// A JSON number without a fractional part.
struct Whole(i128);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let number = serde_json::Number::deserialize(deserializer)?;
        if let Some(value) = number.as_i64() {
            return Ok(Whole(value.into()));
        }
        if let Some(value) = number.as_u64() {
            return Ok(Whole(value.into()));
        }
        match number.as_f64() {
            // Exact: whole and within ±2^53, so the cast neither rounds nor saturates.
            #[allow(clippy::cast_possible_truncation)]
            Some(value) if value.fract() == 0.0 && value.abs() <= EXACT => Ok(Whole(value as i128)),
            _ => Err(D::Error::custom(format!(
                "{number} is not a whole number that can be read exactly"
            ))),
        }
    }
}

fn narrow<T: TryFrom<i128>, E: serde::de::Error>(whole: Whole) -> Result<T, E> {
    T::try_from(whole.0).map_err(|_| {
        E::custom(format!(
            "{} is out of range for {}",
            whole.0,
            std::any::type_name::<T>()
        ))
    })
}

/// An `i64` field (`#[serde(deserialize_with = "whole::i64")]`).
pub(crate) fn i64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    narrow(Whole::deserialize(deserializer)?)
}

/// A `u64` field.
pub(crate) fn u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    narrow(Whole::deserialize(deserializer)?)
}

/// A `u32` field.
pub(crate) fn u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    narrow(Whole::deserialize(deserializer)?)
}

/// An optional `i64` field (`null` or absent with `#[serde(default)]`: `None`).
pub(crate) fn option_i64<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i64>, D::Error> {
    Option::<Whole>::deserialize(deserializer)?
        .map(narrow)
        .transpose()
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(deserialize_with = "super::i64")]
        micros: i64,
        #[serde(default, deserialize_with = "super::option_i64")]
        usage: Option<i64>,
        #[serde(default, deserialize_with = "super::u32")]
        version: u32,
    }

    fn read(json: &str) -> Result<Body, String> {
        serde_json::from_str(json).map_err(|error| error.to_string())
    }

    #[test]
    fn a_whole_number_written_as_a_float_is_the_integer() {
        let body = read(r#"{"micros": 4755.0, "usage": 4.755e3, "version": 7.0}"#).unwrap();
        assert_eq!(
            (body.micros, body.usage, body.version),
            (4755, Some(4755), 7)
        );
        let body = read(r#"{"micros": -12, "usage": null}"#).unwrap();
        assert_eq!((body.micros, body.usage, body.version), (-12, None, 0));
        assert_eq!(
            read(r#"{"micros": 9007199254740992.0}"#).unwrap().micros,
            1 << 53
        );
        assert_eq!(
            read(r#"{"micros": 9223372036854775807}"#).unwrap().micros,
            i64::MAX
        );
    }

    #[test]
    fn a_fraction_an_inexact_float_a_string_or_an_out_of_range_number_is_refused() {
        for (json, says) in [
            (r#"{"micros": 1.5}"#, "1.5 is not a whole number"),
            (
                r#"{"micros": 9007199254740994.0}"#,
                "not a whole number that can be read exactly",
            ),
            (r#"{"micros": 1e300}"#, "not a whole number"),
            (r#"{"micros": "12"}"#, "invalid type: string"),
            (r#"{"micros": 9223372036854775808}"#, "out of range for i64"),
            (r#"{"micros": 1, "version": -1}"#, "out of range for u32"),
            (
                r#"{"micros": 1, "version": 4294967296}"#,
                "out of range for u32",
            ),
        ] {
            let error = read(json).unwrap_err();
            assert!(error.contains(says), "{json}: {error}");
        }
    }
}
