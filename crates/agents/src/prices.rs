//! The price table (`policies/prices.toml`): what each model costs, how large each role's calls
//! may be, and so what each call reserves (B6) and what a response's usage costs (B3).
//!
//! Prices are whole USD micros per million tokens in the file; they become the domain's
//! [`Price`] (decimal micros per token, exact: `n / 10^6`), so the arithmetic — each component
//! rounded up once, checked, never a float — is the domain's, in one place.

use std::collections::BTreeMap;

use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::price::{Price, PriceError, TokenBounds, TokenUsage};
use agentroom_ports::domain::state::{CallRole, Quotes};
use rust_decimal::Decimal;
use serde::Deserialize;

/// The price table as shipped, for defaults and tests.
pub const SHIPPED_PRICES: &str = include_str!("../../../policies/prices.toml");

/// Why a price table was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceTableError {
    /// Not TOML, or not the shape of a price table (the message names line and column).
    #[error("prices.toml: {0}")]
    Parse(String),
    /// A value the table cannot hold.
    #[error("prices.toml: `{field}` {problem}")]
    Invalid {
        /// The dotted field, e.g. `models."gpt-4o".input_micros_per_mtok`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The model is not in the table.
    #[error("model `{model}` has no price in prices.toml (priced: {known})")]
    UnknownModel {
        /// The model asked for.
        model: String,
        /// The models the table prices, comma-separated.
        known: String,
    },
    /// The reservation does not fit in i64 micros.
    #[error("the {role} reservation for model `{model}` overflows: {source}")]
    Overflow {
        /// The role.
        role: &'static str,
        /// The model.
        model: String,
        /// The arithmetic error.
        source: PriceError,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricesFile {
    #[serde(default)]
    models: BTreeMap<String, ModelFile>,
    bounds: BoundsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    input_micros_per_mtok: i64,
    output_micros_per_mtok: i64,
    #[serde(default)]
    connector_micros: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundsFile {
    reasoner: RoleBoundsFile,
    specialist: RoleBoundsFile,
    reviewer: RoleBoundsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleBoundsFile {
    max_input_tokens: u64,
    max_output_tokens: u64,
    per_message_overhead: u64,
}

/// Prices per model and token bounds per role, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceTable {
    models: BTreeMap<String, Price>,
    reasoner: TokenBounds,
    specialist: TokenBounds,
    reviewer: TokenBounds,
}

/// Micros per million tokens as the domain's decimal micros per token (exact).
fn per_token(micros_per_mtok: i64) -> Decimal {
    Decimal::new(micros_per_mtok, 6)
}

impl PriceTable {
    /// Parses and validates `text`: every price a whole, non-negative number of micros, every
    /// bound positive, every reservation within i64 micros. Unknown keys are refused.
    pub fn parse(text: &str) -> Result<Self, PriceTableError> {
        let file: PricesFile =
            toml::from_str(text).map_err(|e| PriceTableError::Parse(e.to_string()))?;
        let invalid = |field: String, problem: &str| PriceTableError::Invalid {
            field,
            problem: problem.to_owned(),
        };
        let mut models = BTreeMap::new();
        for (name, model) in file.models {
            for (key, value) in [
                ("input_micros_per_mtok", model.input_micros_per_mtok),
                ("output_micros_per_mtok", model.output_micros_per_mtok),
                ("connector_micros", model.connector_micros),
            ] {
                if value < 0 {
                    return Err(invalid(
                        format!("models.\"{name}\".{key}"),
                        "must not be negative",
                    ));
                }
            }
            let price = Price::new(
                per_token(model.input_micros_per_mtok),
                per_token(model.output_micros_per_mtok),
                UsdMicros::new(model.connector_micros),
            )
            .map_err(|e| invalid(format!("models.\"{name}\""), &e.to_string()))?;
            models.insert(name, price);
        }
        let bounds = |role: &str, b: RoleBoundsFile| -> Result<TokenBounds, PriceTableError> {
            for (key, value) in [
                ("max_input_tokens", b.max_input_tokens),
                ("max_output_tokens", b.max_output_tokens),
            ] {
                if value == 0 {
                    return Err(invalid(format!("bounds.{role}.{key}"), "must be positive"));
                }
            }
            Ok(TokenBounds {
                max_input_tokens: b.max_input_tokens,
                max_output_tokens: b.max_output_tokens,
                per_message_overhead: b.per_message_overhead,
            })
        };
        let table = Self {
            models,
            reasoner: bounds("reasoner", file.bounds.reasoner)?,
            specialist: bounds("specialist", file.bounds.specialist)?,
            reviewer: bounds("reviewer", file.bounds.reviewer)?,
        };
        for model in table.models.keys() {
            table.quotes(model)?;
        }
        Ok(table)
    }

    /// The shipped `policies/prices.toml`.
    pub fn shipped() -> Result<Self, PriceTableError> {
        Self::parse(SHIPPED_PRICES)
    }

    /// The token bounds of `role`'s calls.
    pub fn bounds(&self, role: CallRole) -> &TokenBounds {
        match role {
            CallRole::Reasoner => &self.reasoner,
            CallRole::Specialist => &self.specialist,
            CallRole::Reviewer => &self.reviewer,
        }
    }

    /// The price of `model`.
    pub fn price(&self, model: &str) -> Result<&Price, PriceTableError> {
        self.models
            .get(model)
            .ok_or_else(|| PriceTableError::UnknownModel {
                model: model.to_owned(),
                known: self
                    .models
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The models the table prices.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// B6: what one `role` call to `model` reserves — its cost at the role's token bounds,
    /// each component rounded up once.
    pub fn reservation(&self, role: CallRole, model: &str) -> Result<UsdMicros, PriceTableError> {
        self.price(model)?
            .quote(self.bounds(role))
            .map_err(|source| PriceTableError::Overflow {
                role: role.as_str(),
                model: model.to_owned(),
                source,
            })
    }

    /// The Room's per-role quotes when every role calls `model`.
    pub fn quotes(&self, model: &str) -> Result<Quotes, PriceTableError> {
        Ok(Quotes {
            reasoner: self.reservation(CallRole::Reasoner, model)?,
            specialist: self.reservation(CallRole::Specialist, model)?,
            reviewer: self.reservation(CallRole::Reviewer, model)?,
        })
    }

    /// B3: what a call to `model` that used `usage` costs; `None` when it does not fit in
    /// i64 micros (the caller then charges the whole reservation).
    pub fn cost(&self, model: &str, usage: TokenUsage) -> Option<UsdMicros> {
        self.models.get(model)?.cost(usage).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(models: &str) -> Result<PriceTable, PriceTableError> {
        PriceTable::parse(&format!(
            "{models}\n\
             [bounds.reasoner]\nmax_input_tokens = 1000\nmax_output_tokens = 100\nper_message_overhead = 4\n\
             [bounds.specialist]\nmax_input_tokens = 3\nmax_output_tokens = 7\nper_message_overhead = 0\n\
             [bounds.reviewer]\nmax_input_tokens = 10\nmax_output_tokens = 10\nper_message_overhead = 0\n"
        ))
    }

    #[test]
    fn the_shipped_table_prices_every_role_of_every_model() {
        let table = PriceTable::shipped().unwrap();
        for model in table.models() {
            let quotes = table.quotes(model).unwrap();
            assert!(quotes.reasoner.is_positive(), "{model}");
        }
        // gpt-4o-mini reasoner: 32,000 × 0.15 + 4,000 × 0.6 = 4,800 + 2,400.
        assert_eq!(
            table.reservation(CallRole::Reasoner, "gpt-4o-mini"),
            Ok(UsdMicros::new(7_200))
        );
    }

    #[test]
    fn b6_a_reservation_is_the_cost_at_the_bounds_rounded_up_per_component() {
        // 0.15 and 0.6 micros per token, connector 10: specialist bounds 3 in, 7 out:
        // ⌈0.45⌉ + ⌈4.2⌉ + 10 = 1 + 5 + 10.
        let table = table(
            "[models.m]\ninput_micros_per_mtok = 150_000\noutput_micros_per_mtok = 600_000\nconnector_micros = 10\n",
        )
        .unwrap();
        assert_eq!(
            table.reservation(CallRole::Specialist, "m"),
            Ok(UsdMicros::new(16))
        );
        assert_eq!(
            table.cost(
                "m",
                TokenUsage {
                    input_tokens: 3,
                    output_tokens: 7
                }
            ),
            Some(UsdMicros::new(16))
        );
    }

    #[test]
    fn an_unknown_model_names_the_priced_ones() {
        let table = table(
            "[models.a]\ninput_micros_per_mtok = 1\noutput_micros_per_mtok = 1\n\
             [models.b]\ninput_micros_per_mtok = 1\noutput_micros_per_mtok = 1\n",
        )
        .unwrap();
        let err = table.reservation(CallRole::Reviewer, "c").unwrap_err();
        assert_eq!(
            err.to_string(),
            "model `c` has no price in prices.toml (priced: a, b)"
        );
    }

    #[test]
    fn bad_tables_are_refused_with_the_field_at_fault() {
        let negative =
            table("[models.m]\ninput_micros_per_mtok = -1\noutput_micros_per_mtok = 1\n");
        assert_eq!(
            negative.unwrap_err().to_string(),
            "prices.toml: `models.\"m\".input_micros_per_mtok` must not be negative"
        );
        let unknown = table("[models.m]\ninput_usd = 1\n");
        assert!(
            matches!(&unknown, Err(PriceTableError::Parse(m)) if m.contains("unknown field")),
            "{unknown:?}"
        );
        let decimal =
            table("[models.m]\ninput_micros_per_mtok = 0.15\noutput_micros_per_mtok = 1\n");
        assert!(
            matches!(decimal, Err(PriceTableError::Parse(_))),
            "{decimal:?}"
        );
        let overflow = PriceTable::parse(&format!(
            "[models.m]\ninput_micros_per_mtok = {}\noutput_micros_per_mtok = 1\n\
             [bounds.reasoner]\nmax_input_tokens = 10_000_000\nmax_output_tokens = 1\nper_message_overhead = 0\n\
             [bounds.specialist]\nmax_input_tokens = 1\nmax_output_tokens = 1\nper_message_overhead = 0\n\
             [bounds.reviewer]\nmax_input_tokens = 1\nmax_output_tokens = 1\nper_message_overhead = 0\n",
            i64::MAX
        ));
        assert!(
            matches!(overflow, Err(PriceTableError::Overflow { .. })),
            "{overflow:?}"
        );
        let zero = PriceTable::parse(
            "[bounds.reasoner]\nmax_input_tokens = 0\nmax_output_tokens = 1\nper_message_overhead = 0\n\
             [bounds.specialist]\nmax_input_tokens = 1\nmax_output_tokens = 1\nper_message_overhead = 0\n\
             [bounds.reviewer]\nmax_input_tokens = 1\nmax_output_tokens = 1\nper_message_overhead = 0\n",
        );
        assert_eq!(
            zero.unwrap_err().to_string(),
            "prices.toml: `bounds.reasoner.max_input_tokens` must be positive"
        );
    }
}
