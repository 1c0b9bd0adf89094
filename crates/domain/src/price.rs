//! B6 price arithmetic: reservations that are true upper bounds of what a call can cost.
//!
//! Prices are decimal USD per million tokens, which is numerically micros per token. The cost
//! of a call is `⌈input tokens × input price⌉ + ⌈output tokens × output price⌉ + connector`:
//! each component is rounded up once, never summed as a float. Input tokens are bounded
//! without the provider's tokenizer: UTF-8 bytes of the prompt plus a per-message overhead is
//! a safe bound (no tokenizer emits more tokens than bytes). The output bound is what the
//! request sends as `max_tokens`.

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde::{Deserialize, Serialize};

use crate::money::{MoneyError, UsdMicros};

/// An error in price arithmetic or request bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// A price below zero.
    #[error("{component} price {price} is negative")]
    NegativePrice {
        /// `input`, `output` or `connector`.
        component: &'static str,
        /// The price as configured.
        price: String,
    },
    /// The cost does not fit in i64 micros.
    #[error("cost overflows i64 micros")]
    Overflow,
    /// The request's input bound is above the configured bound (B6: refused, never truncated).
    #[error("request input bound {bound} tokens exceeds the configured maximum {max}")]
    InputAboveBound {
        /// The computed bound of the request.
        bound: u64,
        /// The configured maximum.
        max: u64,
    },
    /// The request asks for more output tokens than configured.
    #[error("request max_tokens {asked} exceeds the configured maximum {max}")]
    OutputAboveBound {
        /// What the request asked for.
        asked: u64,
        /// The configured maximum.
        max: u64,
    },
}

impl From<MoneyError> for PriceError {
    fn from(_: MoneyError) -> Self {
        PriceError::Overflow
    }
}

/// Token counts of one call, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// A model's price: decimal USD per million tokens for input and output, and a per-call
/// connector cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    input_per_mtok: Decimal,
    output_per_mtok: Decimal,
    connector: UsdMicros,
}

impl Price {
    /// A price; negative components are refused.
    pub fn new(
        input_per_mtok: Decimal,
        output_per_mtok: Decimal,
        connector: UsdMicros,
    ) -> Result<Self, PriceError> {
        for (component, price) in [("input", input_per_mtok), ("output", output_per_mtok)] {
            if price.is_sign_negative() && !price.is_zero() {
                return Err(PriceError::NegativePrice {
                    component,
                    price: price.to_string(),
                });
            }
        }
        if connector.is_negative() {
            return Err(PriceError::NegativePrice {
                component: "connector",
                price: connector.to_string(),
            });
        }
        Ok(Self {
            input_per_mtok,
            output_per_mtok,
            connector,
        })
    }

    /// The cost of a call that used `usage`: each component rounded up once, plus the
    /// connector cost.
    pub fn cost(&self, usage: TokenUsage) -> Result<UsdMicros, PriceError> {
        let input = component_micros(usage.input_tokens, self.input_per_mtok)?;
        let output = component_micros(usage.output_tokens, self.output_per_mtok)?;
        Ok(input.checked_add(output)?.checked_add(self.connector)?)
    }

    /// The reservation for a call within `bounds`: the cost at the bounds, a true upper bound.
    pub fn quote(&self, bounds: &TokenBounds) -> Result<UsdMicros, PriceError> {
        self.cost(TokenUsage {
            input_tokens: bounds.max_input_tokens,
            output_tokens: bounds.max_output_tokens,
        })
    }
}

/// `⌈tokens × micros per token⌉`.
fn component_micros(tokens: u64, micros_per_token: Decimal) -> Result<UsdMicros, PriceError> {
    let exact = Decimal::from(tokens)
        .checked_mul(micros_per_token)
        .ok_or(PriceError::Overflow)?;
    exact
        .ceil()
        .to_i64()
        .map(UsdMicros::new)
        .ok_or(PriceError::Overflow)
}

/// The configured bounds of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenBounds {
    /// The largest input bound (bytes plus overhead) a request may have.
    pub max_input_tokens: u64,
    /// The largest `max_tokens` a request may send.
    pub max_output_tokens: u64,
    /// Tokens added per message for role markers and framing.
    pub per_message_overhead: u64,
}

/// A request admitted within the bounds: what it may cost at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmittedRequest {
    /// The safe bound of the request's input tokens.
    pub input_bound: u64,
    /// The `max_tokens` the request sends.
    pub max_tokens: u64,
}

impl TokenBounds {
    /// The safe input bound of `messages`: their UTF-8 bytes plus the per-message overhead.
    pub fn input_bound(&self, messages: &[&str]) -> Result<u64, PriceError> {
        messages.iter().try_fold(0u64, |sum, m| {
            let bytes = u64::try_from(m.len()).map_err(|_| PriceError::Overflow)?;
            sum.checked_add(bytes)
                .and_then(|s| s.checked_add(self.per_message_overhead))
                .ok_or(PriceError::Overflow)
        })
    }

    /// Admits a request of `messages` asking for `max_tokens`, or refuses it when it is above
    /// the bounds (B6: never truncated silently).
    pub fn admit(&self, messages: &[&str], max_tokens: u64) -> Result<AdmittedRequest, PriceError> {
        let input_bound = self.input_bound(messages)?;
        if input_bound > self.max_input_tokens {
            return Err(PriceError::InputAboveBound {
                bound: input_bound,
                max: self.max_input_tokens,
            });
        }
        if max_tokens > self.max_output_tokens {
            return Err(PriceError::OutputAboveBound {
                asked: max_tokens,
                max: self.max_output_tokens,
            });
        }
        Ok(AdmittedRequest {
            input_bound,
            max_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn b6_each_component_rounds_up_once() {
        // 3 tokens at 0.15 micros = 0.45 -> 1; 7 tokens at 0.6 = 4.2 -> 5; connector 10.
        let price = Price::new(dec("0.15"), dec("0.6"), UsdMicros::new(10)).unwrap();
        let cost = price
            .cost(TokenUsage {
                input_tokens: 3,
                output_tokens: 7,
            })
            .unwrap();
        assert_eq!(cost, UsdMicros::new(16));
        // Rounding the sum instead would give ceil(4.65) + 10 = 15: an undercount.
    }

    #[test]
    fn b6_quote_is_an_upper_bound_of_any_usage_within_bounds() {
        let price = Price::new(dec("2.5"), dec("10"), UsdMicros::new(100)).unwrap();
        let bounds = TokenBounds {
            max_input_tokens: 8_000,
            max_output_tokens: 1_000,
            per_message_overhead: 8,
        };
        let quote = price.quote(&bounds).unwrap();
        assert_eq!(quote, UsdMicros::new(20_000 + 10_000 + 100));
        for (i, o) in [(0, 0), (8_000, 1_000), (7_999, 999), (1, 1)] {
            let cost = price
                .cost(TokenUsage {
                    input_tokens: i,
                    output_tokens: o,
                })
                .unwrap();
            assert!(cost <= quote);
        }
    }

    #[test]
    fn b6_overflow_is_an_error() {
        let price = Price::new(dec("1000000000"), dec("0"), UsdMicros::ZERO).unwrap();
        let err = price.cost(TokenUsage {
            input_tokens: u64::MAX,
            output_tokens: 0,
        });
        assert_eq!(err, Err(PriceError::Overflow));
    }

    #[test]
    fn b6_negative_prices_are_refused() {
        assert!(matches!(
            Price::new(dec("-1"), dec("0"), UsdMicros::ZERO),
            Err(PriceError::NegativePrice {
                component: "input",
                ..
            })
        ));
        assert!(matches!(
            Price::new(dec("0"), dec("0"), UsdMicros::new(-1)),
            Err(PriceError::NegativePrice {
                component: "connector",
                ..
            })
        ));
    }

    #[test]
    fn b6_a_request_above_the_bounds_is_refused_not_truncated() {
        let bounds = TokenBounds {
            max_input_tokens: 20,
            max_output_tokens: 100,
            per_message_overhead: 4,
        };
        // "héllo" is 6 bytes; two messages: 6 + 4 + 5 + 4 = 19.
        let ok = bounds.admit(&["héllo", "world"], 100).unwrap();
        assert_eq!(ok.input_bound, 19);
        assert_eq!(
            bounds.admit(&["héllo", "world!!"], 100),
            Err(PriceError::InputAboveBound { bound: 21, max: 20 })
        );
        assert_eq!(
            bounds.admit(&["hi"], 101),
            Err(PriceError::OutputAboveBound {
                asked: 101,
                max: 100
            })
        );
    }
}
