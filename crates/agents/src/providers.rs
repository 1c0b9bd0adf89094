//! Which model serves each role, on which OpenAI-compatible endpoint (issue 16): the providers
//! configuration ([`ProvidersConfig`], TOML), the [`Agents`] built from it ([`Providers`]),
//! and the description of what is served ([`Served`]), which `serve` prints at start and
//! against which a Room's quotes can be checked.
//!
//! ```toml
//! [endpoints.local]                  # any number of named endpoints
//! base_url = "http://127.0.0.1:8081/v1"
//! api_key_env = "LOCAL_KEY"          # optional
//! connect_timeout_ms = 5000          # optional
//! request_timeout_ms = 120000        # optional
//!
//! [models]
//! default = { endpoint = "local", model = "qwen2.5-7b" }    # required unless every role is given
//! reasoner = { endpoint = "openai", model = "gpt-4o" }       # optional
//! reviewer = { endpoint = "openai", model = "gpt-4o-mini" }  # optional
//!
//! [models.specialists]                                       # optional, by principal id
//! analyst = { endpoint = "local", model = "llama-3.1-8b" }
//! ```
//!
//! The reasoner is `models.reasoner`, else `models.default`; every reviewer is
//! `models.reviewer`, else `models.default`; a specialist is its entry under
//! `models.specialists`, else `models.default` (without a default, a specialist that has no
//! entry is served by nobody: its calls are refused, nothing is sent). Each distinct
//! (endpoint, model) pair is one [`OpenAi`] adapter, and the models of one endpoint share its
//! HTTP client. Every model must be priced in `prices.toml`; the key variables of the
//! endpoints in use must be set (an endpoint no model uses is checked for its URL and
//! timeouts only, so a file may keep alternatives).
//!
//! The single-model form of [`OpenAiConfig`] (`base_url`, `model`, `api_key_env`, timeouts at
//! the top level) is still read: one endpoint, named `default`, serving one model for every
//! role.
//!
//! Building checks everything before anything is sent; each problem names its field.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use agentroom_ports::domain::ids::PrincipalId;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::{CallRole, Quotes};
use serde::Deserialize;

use crate::Agents;
use crate::openai::{ConfigError, Endpoint, EndpointConfig, OpenAi, OpenAiConfig};
use crate::prices::{PriceTable, PriceTableError};

/// The endpoint name of the single-model form.
pub const SINGLE_ENDPOINT: &str = "default";

/// Why a providers configuration was refused; every variant names the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvidersError {
    /// Not TOML, or not the shape of a providers configuration (the message names line,
    /// column and field, e.g. an unknown key).
    #[error("providers configuration: {0}")]
    Parse(String),
    /// The single-model form (`base_url`, `model` at the top level) was refused.
    #[error(transparent)]
    Single(ConfigError),
    /// An endpoint that cannot be used: a bad URL, a key variable not set, a zero timeout.
    #[error("{field}: {source}")]
    Endpoint {
        /// The field, e.g. `endpoints.local.base_url`.
        field: String,
        /// What is wrong with it.
        source: ConfigError,
    },
    /// A model names an endpoint that is not defined.
    #[error("{field}: no endpoint `{endpoint}` is defined (endpoints: {known})")]
    UnknownEndpoint {
        /// The field, e.g. `models.reviewer.endpoint`.
        field: String,
        /// The endpoint named.
        endpoint: String,
        /// The endpoints defined, comma-separated.
        known: String,
    },
    /// A model that is not priced (or whose reservations overflow).
    #[error("{field}: {source}")]
    Price {
        /// The field, e.g. `models.specialists.analyst.model`.
        field: String,
        /// The price table's refusal.
        source: PriceTableError,
    },
    /// A role that no model serves.
    #[error(
        "{field} is required unless every role is given: nothing serves {role} (set {field} or {instead})"
    )]
    Missing {
        /// The field that would serve it: `models.default`.
        field: &'static str,
        /// The role left without a model, as people say it.
        role: &'static str,
        /// The role's own field.
        instead: &'static str,
    },
    /// A specialist entry whose key is not a principal id.
    #[error("models.specialists.\"{key}\": {problem}")]
    BadPrincipal {
        /// The key.
        key: String,
        /// Why it is not a principal id.
        problem: String,
    },
}

/// A model on a named endpoint: `{ endpoint = "local", model = "qwen2.5-7b" }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRef {
    /// The endpoint's name, a key of `[endpoints]`.
    pub endpoint: String,
    /// The model, as that endpoint names it; it must be priced in `prices.toml`.
    pub model: String,
}

/// The per-role form as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProvidersFile {
    endpoints: BTreeMap<String, EndpointConfig>,
    models: ModelsFile,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    default: Option<ModelRef>,
    #[serde(default)]
    reasoner: Option<ModelRef>,
    #[serde(default)]
    reviewer: Option<ModelRef>,
    #[serde(default)]
    specialists: BTreeMap<String, ModelRef>,
}

/// Which form a configuration was written in: it decides how errors name their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `base_url` and `model` at the top level.
    Single,
    /// `[endpoints]` and `[models]`.
    PerRole,
}

/// A providers configuration, read but not yet checked against prices and the environment
/// (see [`ProvidersConfig::build`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvidersConfig {
    form: Form,
    endpoints: BTreeMap<String, EndpointConfig>,
    models: ModelsFile,
}

/// The keys of the single-model form.
const SINGLE_KEYS: [&str; 5] = [
    "base_url",
    "model",
    "api_key_env",
    "connect_timeout_ms",
    "request_timeout_ms",
];

impl ProvidersConfig {
    /// Reads a configuration from TOML text: the per-role form (`[endpoints]` and `[models]`)
    /// or the single-model form (`base_url`, `model`, …). Unknown keys are refused.
    pub fn from_toml(text: &str) -> Result<Self, ProvidersError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| ProvidersError::Parse(e.to_string()))?;
        let per_role = table.contains_key("endpoints") || table.contains_key("models");
        let single: Vec<&str> = SINGLE_KEYS
            .into_iter()
            .filter(|key| table.contains_key(*key))
            .collect();
        match (per_role, single.is_empty()) {
            (true, false) => Err(ProvidersError::Parse(format!(
                "`{}` belongs to the single-model form and cannot be mixed with [endpoints] and \
                 [models]: move it into an [endpoints.NAME] table (base_url, api_key_env, \
                 timeouts) or a [models] entry (model)",
                single.join("`, `")
            ))),
            (true, true) => {
                let file: ProvidersFile =
                    toml::from_str(text).map_err(|e| ProvidersError::Parse(e.to_string()))?;
                Ok(Self {
                    form: Form::PerRole,
                    endpoints: file.endpoints,
                    models: file.models,
                })
            }
            (false, false) => OpenAiConfig::from_toml(text)
                .map(Self::single)
                .map_err(ProvidersError::Single),
            (false, true) => Err(ProvidersError::Parse(
                "expected [endpoints] and [models] (or the single-model `base_url` and `model`)"
                    .to_owned(),
            )),
        }
    }

    /// The single-model form: one endpoint, named [`SINGLE_ENDPOINT`], serving `config.model`
    /// for every role.
    pub fn single(config: OpenAiConfig) -> Self {
        let model = ModelRef {
            endpoint: SINGLE_ENDPOINT.to_owned(),
            model: config.model.clone(),
        };
        Self {
            form: Form::Single,
            endpoints: BTreeMap::from([(SINGLE_ENDPOINT.to_owned(), config.endpoint())]),
            models: ModelsFile {
                default: Some(model),
                reasoner: None,
                reviewer: None,
                specialists: BTreeMap::new(),
            },
        }
    }

    /// Builds the adapters and wires them by role, reading the keys from the process
    /// environment.
    pub fn build_from_env(&self, prices: &PriceTable) -> Result<Providers, ProvidersError> {
        self.build(prices, |var| std::env::var(var).ok())
    }

    /// Builds the adapters and wires them by role, reading the keys through `env` (the
    /// variable name in, its value out). Checks that every role has a model, every model an
    /// endpoint that is defined and a price, every endpoint in use a usable URL, timeouts and
    /// key, and every other endpoint its URL and timeouts.
    pub fn build(
        &self,
        prices: &PriceTable,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Providers, ProvidersError> {
        let models = &self.models;
        let reasoner = pick(&models.reasoner, "models.reasoner", &models.default).ok_or(
            ProvidersError::Missing {
                field: "models.default",
                role: "the reasoner",
                instead: "models.reasoner",
            },
        )?;
        let reviewer = pick(&models.reviewer, "models.reviewer", &models.default).ok_or(
            ProvidersError::Missing {
                field: "models.default",
                role: "the reviewers",
                instead: "models.reviewer",
            },
        )?;
        if models.default.is_none() && models.specialists.is_empty() {
            return Err(ProvidersError::Missing {
                field: "models.default",
                role: "the specialists",
                instead: "models.specialists.<principal>",
            });
        }
        let mut specialists = Vec::new();
        for (key, model) in &models.specialists {
            let principal = PrincipalId::parse(key).map_err(|e| ProvidersError::BadPrincipal {
                key: key.clone(),
                problem: e.to_string(),
            })?;
            specialists.push((principal, format!("models.specialists.{key}"), model));
        }

        let mut wiring = Wiring {
            config: self,
            prices,
            env: &env,
            endpoints: BTreeMap::new(),
            adapters: BTreeMap::new(),
            served: Vec::new(),
            handles: Vec::new(),
        };
        let reasoner = wiring.serve(CallRole::Reasoner, None, reasoner)?;
        let mut agents = Agents::new().with_reasoner(reasoner);
        for (principal, field, model) in specialists {
            let adapter = wiring.serve(
                CallRole::Specialist,
                Some(principal.clone()),
                (field.as_str(), model),
            )?;
            agents = agents.with_specialist(principal, adapter);
        }
        if let Some(default) = &models.default {
            let adapter = wiring.serve(CallRole::Specialist, None, ("models.default", default))?;
            agents = agents.with_any_specialist(adapter);
        }
        let reviewer = wiring.serve(CallRole::Reviewer, None, reviewer)?;
        agents = agents.with_any_reviewer(reviewer);
        // The endpoints no model uses: their shape only (no key is read).
        for (name, config) in &self.endpoints {
            if !wiring.endpoints.contains_key(name) {
                let mut shape = config.clone();
                shape.api_key_env = None;
                Endpoint::new(&shape, |_| None).map_err(|e| self.endpoint_error(name, e))?;
            }
        }
        Ok(Providers {
            agents,
            served: wiring.served,
            adapters: wiring.handles,
        })
    }

    /// `source` as the error of endpoint `name`, naming its field.
    fn endpoint_error(&self, name: &str, source: ConfigError) -> ProvidersError {
        let key = match &source {
            ConfigError::BadUrl { .. } => "base_url",
            ConfigError::MissingKey { .. } | ConfigError::BadKey { .. } => "api_key_env",
            ConfigError::ZeroTimeout { field } => field,
            ConfigError::Parse(_) | ConfigError::Prices(_) | ConfigError::Client(_) => "",
        };
        match self.form {
            Form::Single => ProvidersError::Single(source),
            Form::PerRole if key.is_empty() => ProvidersError::Endpoint {
                field: format!("endpoints.{name}"),
                source,
            },
            Form::PerRole => ProvidersError::Endpoint {
                field: format!("endpoints.{name}.{key}"),
                source,
            },
        }
    }
}

/// The role's own entry, else the default, with the field it came from.
fn pick<'a>(
    own: &'a Option<ModelRef>,
    field: &'static str,
    default: &'a Option<ModelRef>,
) -> Option<(&'static str, &'a ModelRef)> {
    own.as_ref()
        .map(|m| (field, m))
        .or_else(|| default.as_ref().map(|m| ("models.default", m)))
}

/// The adapters built so far, shared by (endpoint, model), and what each role is served.
struct Wiring<'a, E: Fn(&str) -> Option<String>> {
    config: &'a ProvidersConfig,
    prices: &'a PriceTable,
    env: &'a E,
    endpoints: BTreeMap<String, Endpoint>,
    adapters: BTreeMap<(String, String), Arc<OpenAi>>,
    served: Vec<Served>,
    handles: Vec<Arc<OpenAi>>,
}

impl<E: Fn(&str) -> Option<String>> Wiring<'_, E> {
    /// The adapter of `model` (built once per endpoint and model), recorded as serving `role`
    /// (and `principal`).
    fn serve(
        &mut self,
        role: CallRole,
        principal: Option<PrincipalId>,
        (field, model): (&str, &ModelRef),
    ) -> Result<Arc<OpenAi>, ProvidersError> {
        let config = self.config;
        let endpoint = match self.endpoints.get(&model.endpoint) {
            Some(endpoint) => endpoint.clone(),
            None => {
                let endpoint_config = config.endpoints.get(&model.endpoint).ok_or_else(|| {
                    ProvidersError::UnknownEndpoint {
                        field: format!("{field}.endpoint"),
                        endpoint: model.endpoint.clone(),
                        known: config
                            .endpoints
                            .keys()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", "),
                    }
                })?;
                let endpoint = Endpoint::new(endpoint_config, self.env)
                    .map_err(|e| config.endpoint_error(&model.endpoint, e))?;
                self.endpoints
                    .insert(model.endpoint.clone(), endpoint.clone());
                endpoint
            }
        };
        let price_error = |source: PriceTableError| match config.form {
            Form::Single => ProvidersError::Single(ConfigError::Prices(source)),
            Form::PerRole => ProvidersError::Price {
                field: format!("{field}.model"),
                source,
            },
        };
        let key = (model.endpoint.clone(), model.model.clone());
        let adapter = match self.adapters.get(&key) {
            Some(adapter) => Arc::clone(adapter),
            None => {
                let adapter = OpenAi::on(&endpoint, &model.model, self.prices.clone()).map_err(
                    |e| match e {
                        ConfigError::Prices(source) => price_error(source),
                        other => config.endpoint_error(&model.endpoint, other),
                    },
                )?;
                let adapter = Arc::new(adapter);
                self.adapters.insert(key, Arc::clone(&adapter));
                adapter
            }
        };
        let quote = self
            .prices
            .reservation(role, &model.model)
            .map_err(price_error)?;
        self.served.push(Served {
            role,
            principal,
            endpoint: model.endpoint.clone(),
            url: endpoint.url().to_string(),
            model: model.model.clone(),
            quote,
        });
        self.handles.push(Arc::clone(&adapter));
        Ok(adapter)
    }
}

/// One role (or one specialist) as served: which endpoint, which URL, which model, and what
/// one of its calls reserves. It holds no key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// The role.
    pub role: CallRole,
    /// The specialist served by a model of its own (`models.specialists.<principal>`);
    /// `None` for the reasoner, for every reviewer, and for every specialist without an entry
    /// of its own (`models.default`).
    pub principal: Option<PrincipalId>,
    /// The endpoint's name in the configuration ([`SINGLE_ENDPOINT`] in the single-model
    /// form).
    pub endpoint: String,
    /// The URL requests go to: `{base_url}/chat/completions`.
    pub url: String,
    /// The model, as the endpoint names it.
    pub model: String,
    /// B6: what one call of this role to this model reserves,
    /// [`PriceTable::reservation`]`(role, model)`. A Room whose quote for the role is below
    /// it has the call refused before anything is sent.
    pub quote: UsdMicros,
}

impl Served {
    /// Who is served, as people say it: `reasoner`, `specialist analyst` (a specialist with a
    /// model of its own), `specialist (default)` (every other specialist), `reviewer`.
    pub fn who(&self) -> String {
        match (&self.principal, self.role) {
            (Some(principal), role) => format!("{} {principal}", role.as_str()),
            (None, CallRole::Specialist) => "specialist (default)".to_owned(),
            (None, role) => role.as_str().to_owned(),
        }
    }
}

impl fmt::Display for Served {
    /// `reasoner: model gpt-4o on endpoint openai (https://…/chat/completions), quote
    /// $0.120000 (120000 micros) a call` — never a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: model {} on endpoint {} ({}), quote {} ({} micros) a call",
            self.who(),
            self.model,
            self.endpoint,
            self.url,
            self.quote,
            self.quote.micros()
        )
    }
}

/// The adapters built from a [`ProvidersConfig`], wired by role into [`Agents`], and the
/// description of what they serve.
#[derive(Debug, Clone)]
pub struct Providers {
    agents: Agents,
    served: Vec<Served>,
    /// The adapter of each entry of `served`, in the same order.
    adapters: Vec<Arc<OpenAi>>,
}

impl Providers {
    /// The agents, wired: the reasoner, the specialists with a model of their own, the
    /// default as every other specialist, and the reviewer (or the default) as every
    /// reviewer.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    /// What is served, in order: the reasoner, each specialist with a model of its own (by
    /// principal), every other specialist (when there is a default), every reviewer.
    pub fn served(&self) -> &[Served] {
        &self.served
    }

    /// Each entry of [`Providers::served`] with the adapter that serves it (one adapter may
    /// serve several).
    pub fn adapters(&self) -> impl Iterator<Item = (&Served, &OpenAi)> {
        self.served
            .iter()
            .zip(self.adapters.iter().map(|a| a.as_ref()))
    }

    /// The least per-role quotes a Room needs for every call it may make here
    /// ([`quotes_needed`] of [`Providers::served`]).
    pub fn quotes_needed(&self) -> Quotes {
        quotes_needed(&self.served)
    }
}

/// The least per-role quotes a Room needs for every call it may make to the models `served`:
/// per role, the highest quote of the models serving it (zero for a role none serves). A
/// call whose reservation is below its model's quote is refused before anything is sent; a
/// Room created with `--model M` has M's quotes for every role, which cover these when M is
/// priced at least as high as each role's model.
pub fn quotes_needed(served: &[Served]) -> Quotes {
    let most = |role: CallRole| {
        served
            .iter()
            .filter(|s| s.role == role)
            .map(|s| s.quote)
            .max()
            .unwrap_or(UsdMicros::ZERO)
    };
    Quotes {
        reasoner: most(CallRole::Reasoner),
        specialist: most(CallRole::Specialist),
        reviewer: most(CallRole::Reviewer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two models: `big` and `small`, and a third, `mid`.
    const PRICES: &str = r#"
[models.big]
input_micros_per_mtok = 3_000_000
output_micros_per_mtok = 5_000_000
[models.mid]
input_micros_per_mtok = 2_000_000
output_micros_per_mtok = 4_000_000
[models.small]
input_micros_per_mtok = 1_000_000
output_micros_per_mtok = 2_000_000
[bounds.reasoner]
max_input_tokens = 1_000
max_output_tokens = 100
per_message_overhead = 0
[bounds.specialist]
max_input_tokens = 1_000
max_output_tokens = 200
per_message_overhead = 0
[bounds.reviewer]
max_input_tokens = 1_000
max_output_tokens = 50
per_message_overhead = 0
"#;

    fn prices() -> PriceTable {
        PriceTable::parse(PRICES).unwrap()
    }

    fn keys(var: &str) -> Option<String> {
        matches!(var, "OPENAI_API_KEY" | "LITELLM_API_KEY" | "LOCAL_KEY").then(|| "sk-x".to_owned())
    }

    fn built(text: &str) -> Result<Providers, ProvidersError> {
        ProvidersConfig::from_toml(text)?.build(&prices(), keys)
    }

    fn refused(text: &str) -> String {
        built(text).unwrap_err().to_string()
    }

    const PER_ROLE: &str = r#"
[endpoints.local]
base_url = "http://127.0.0.1:8081/v1"
[endpoints.openai]
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"
request_timeout_ms = 60000

[models]
default = { endpoint = "local", model = "small" }
reasoner = { endpoint = "openai", model = "big" }
reviewer = { endpoint = "openai", model = "mid" }

[models.specialists]
analyst = { endpoint = "openai", model = "big" }
"#;

    fn line(served: &Served) -> String {
        format!(
            "{} {} {} {} {}",
            served.who(),
            served.endpoint,
            served.url,
            served.model,
            served.quote.micros()
        )
    }

    #[test]
    fn each_role_is_served_by_its_model_on_its_endpoint_with_its_quote() {
        let providers = built(PER_ROLE).unwrap();
        let lines: Vec<String> = providers.served().iter().map(line).collect();
        // Quotes at the bounds: reasoner 1,000 × 3 + 100 × 5; specialist 1,000 × 3 + 200 × 5
        // and 1,000 × 1 + 200 × 2; reviewer 1,000 × 2 + 50 × 4.
        assert_eq!(
            lines,
            [
                "reasoner openai https://api.openai.com/v1/chat/completions big 3500",
                "specialist analyst openai https://api.openai.com/v1/chat/completions big 4000",
                "specialist (default) local http://127.0.0.1:8081/v1/chat/completions small 1400",
                "reviewer openai https://api.openai.com/v1/chat/completions mid 2200",
            ]
        );
        assert_eq!(
            providers.quotes_needed(),
            Quotes {
                reasoner: UsdMicros::new(3_500),
                specialist: UsdMicros::new(4_000),
                reviewer: UsdMicros::new(2_200),
            }
        );
        // One adapter per (endpoint, model): the reasoner's serves the analyst too.
        let adapters: Vec<(&Served, &OpenAi)> = providers.adapters().collect();
        assert!(std::ptr::eq(adapters[0].1, adapters[1].1));
        assert!(!std::ptr::eq(adapters[0].1, adapters[3].1));
        assert_eq!(adapters[2].1.model(), "small");
        assert_eq!(
            providers.served()[0].to_string(),
            "reasoner: model big on endpoint openai (https://api.openai.com/v1/chat/completions), \
             quote $0.003500 (3500 micros) a call"
        );
        assert!(!format!("{providers:?}").contains("sk-x"), "no key printed");
    }

    #[test]
    fn the_single_model_form_is_one_endpoint_serving_every_role() {
        let providers = built(
            "base_url = \"http://127.0.0.1:8090/v1\"\nmodel = \"mid\"\napi_key_env = \"LOCAL_KEY\"\n",
        )
        .unwrap();
        let lines: Vec<String> = providers.served().iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "reasoner default http://127.0.0.1:8090/v1/chat/completions mid 2400",
                "specialist (default) default http://127.0.0.1:8090/v1/chat/completions mid 2800",
                "reviewer default http://127.0.0.1:8090/v1/chat/completions mid 2200",
            ]
        );
        let adapters: Vec<(&Served, &OpenAi)> = providers.adapters().collect();
        assert!(std::ptr::eq(adapters[0].1, adapters[2].1), "one adapter");
        // Its errors read as they always did.
        assert_eq!(
            refused("base_url = \"ftp://example.org\"\nmodel = \"mid\"\n"),
            "base_url `ftp://example.org` must be http or https"
        );
        assert!(
            refused("base_url = \"http://example.org\"\nmodel = \"gpt-9\"\n")
                .starts_with("model `gpt-9` has no price in prices.toml (priced: big, mid, small)"),
        );
        assert!(
            refused("base_url = \"http://example.org\"\nmodle = \"mid\"\n")
                .contains("unknown field `modle`")
        );
    }

    #[test]
    fn without_a_default_every_role_must_be_given() {
        let providers = built(
            r#"
[endpoints.a]
base_url = "http://127.0.0.1:1/v1"
[models]
reasoner = { endpoint = "a", model = "big" }
reviewer = { endpoint = "a", model = "small" }
[models.specialists]
sam = { endpoint = "a", model = "mid" }
"#,
        )
        .unwrap();
        let who: Vec<String> = providers.served().iter().map(Served::who).collect();
        assert_eq!(who, ["reasoner", "specialist sam", "reviewer"]);

        let without = |left_out: &str| {
            let text = [
                "[endpoints.a]\nbase_url = \"http://127.0.0.1:1/v1\"\n[models]\n",
                "reasoner = { endpoint = \"a\", model = \"big\" }\n",
                "reviewer = { endpoint = \"a\", model = \"big\" }\n",
                "[models.specialists]\nsam = { endpoint = \"a\", model = \"big\" }\n",
            ]
            .into_iter()
            .filter(|part| !part.starts_with(left_out))
            .collect::<String>();
            refused(&text)
        };
        assert_eq!(
            without("reasoner"),
            "models.default is required unless every role is given: nothing serves the reasoner \
             (set models.default or models.reasoner)"
        );
        assert_eq!(
            without("reviewer"),
            "models.default is required unless every role is given: nothing serves the reviewers \
             (set models.default or models.reviewer)"
        );
        assert_eq!(
            without("[models.specialists]"),
            "models.default is required unless every role is given: nothing serves the \
             specialists (set models.default or models.specialists.<principal>)"
        );
    }

    #[test]
    fn each_bad_input_is_refused_naming_its_field() {
        let with_models =
            |endpoints: &str, models: &str| format!("{endpoints}\n[models]\n{models}");
        let local = "[endpoints.local]\nbase_url = \"http://127.0.0.1:8081/v1\"\n";

        // An unknown endpoint name.
        assert_eq!(
            refused(&with_models(
                local,
                "default = { endpoint = \"local\", model = \"small\" }\n\
                 reviewer = { endpoint = \"openai\", model = \"mid\" }\n"
            )),
            "models.reviewer.endpoint: no endpoint `openai` is defined (endpoints: local)"
        );
        // A model without a price.
        assert_eq!(
            refused(&with_models(
                local,
                "default = { endpoint = \"local\", model = \"small\" }\n\
                 [models.specialists]\nanalyst = { endpoint = \"local\", model = \"llama-3.1-8b\" }\n"
            )),
            "models.specialists.analyst.model: model `llama-3.1-8b` has no price in prices.toml \
             (priced: big, mid, small)"
        );
        // A bad URL.
        assert_eq!(
            refused(&with_models(
                "[endpoints.local]\nbase_url = \"ftp://127.0.0.1/v1\"\n",
                "default = { endpoint = \"local\", model = \"small\" }\n"
            )),
            "endpoints.local.base_url: base_url `ftp://127.0.0.1/v1` must be http or https"
        );
        // A key variable that is not set.
        assert_eq!(
            refused(&with_models(
                "[endpoints.vendor]\nbase_url = \"https://api.example.org/v1\"\napi_key_env = \"VENDOR_KEY\"\n",
                "default = { endpoint = \"vendor\", model = \"small\" }\n"
            )),
            "endpoints.vendor.api_key_env: the API key variable `VENDOR_KEY` (api_key_env) is not set"
        );
        // A zero timeout.
        assert_eq!(
            refused(&with_models(
                "[endpoints.local]\nbase_url = \"http://127.0.0.1:8081/v1\"\nconnect_timeout_ms = 0\n",
                "default = { endpoint = \"local\", model = \"small\" }\n"
            )),
            "endpoints.local.connect_timeout_ms: connect_timeout_ms must be positive"
        );
        // A specialist key that is not a principal id.
        assert!(
            refused(&with_models(
                local,
                "default = { endpoint = \"local\", model = \"small\" }\n\
                 [models.specialists]\nAnalyst = { endpoint = \"local\", model = \"small\" }\n"
            ))
            .starts_with("models.specialists.\"Analyst\": principal id `Analyst`"),
        );
        // Unknown keys, anywhere.
        for (text, field) in [
            (
                with_models(
                    "[endpoints.local]\nbase_url = \"http://127.0.0.1:8081/v1\"\napi_key = \"sk\"\n",
                    "default = { endpoint = \"local\", model = \"small\" }\n",
                ),
                "api_key",
            ),
            (
                with_models(
                    local,
                    "default = { endpoint = \"local\", model = \"small\", temperature = 0 }\n",
                ),
                "temperature",
            ),
            (
                with_models(
                    local,
                    "default = { endpoint = \"local\", model = \"small\" }\nspecialist = { endpoint = \"local\", model = \"small\" }\n",
                ),
                "specialist",
            ),
            (
                format!(
                    "{}[pricing]\n",
                    with_models(
                        local,
                        "default = { endpoint = \"local\", model = \"small\" }\n"
                    )
                ),
                "pricing",
            ),
        ] {
            let err = refused(&text);
            assert!(
                err.starts_with("providers configuration: ")
                    && err.contains(&format!("unknown field `{field}`")),
                "{err}"
            );
        }
        // The two forms mixed, or neither.
        assert!(
            refused(&format!(
                "model = \"small\"\n{}",
                with_models(
                    local,
                    "default = { endpoint = \"local\", model = \"small\" }\n"
                )
            ))
            .contains("`model` belongs to the single-model form"),
        );
        assert_eq!(
            refused("# nothing\n"),
            "providers configuration: expected [endpoints] and [models] (or the single-model \
             `base_url` and `model`)"
        );
        assert!(refused("[models\n").starts_with("providers configuration: TOML parse error"));
    }

    #[test]
    fn an_endpoint_no_model_uses_needs_no_key_but_a_good_url() {
        let spare = "[endpoints.local]\nbase_url = \"http://127.0.0.1:8081/v1\"\n\
                     [endpoints.spare]\nbase_url = \"https://api.example.org/v1\"\napi_key_env = \"SPARE_KEY\"\n\
                     [models]\ndefault = { endpoint = \"local\", model = \"small\" }\n";
        assert!(built(spare).is_ok());
        assert_eq!(
            refused(&spare.replace("https://api.example.org", "https://u:p@api.example.org")),
            "endpoints.spare.base_url: base_url `https://u:p@api.example.org/v1` must not carry \
             credentials (the key comes from api_key_env)"
        );
    }

    #[test]
    fn the_example_file_parses_and_serves_every_role() {
        let example = include_str!("../../../policies/providers.example.toml");
        let mut prices = crate::SHIPPED_PRICES.to_owned();
        // A local model has no list price: the example says to price it; the test does.
        prices.push_str(
            "\n[models.\"qwen2.5-7b-instruct\"]\ninput_micros_per_mtok = 10_000\noutput_micros_per_mtok = 10_000\n",
        );
        let prices = PriceTable::parse(&prices).unwrap();
        let providers = ProvidersConfig::from_toml(example)
            .unwrap()
            .build(&prices, keys)
            .unwrap();
        let served: Vec<(String, &str, &str)> = providers
            .served()
            .iter()
            .map(|s| (s.who(), s.endpoint.as_str(), s.model.as_str()))
            .collect();
        assert_eq!(
            served,
            [
                ("reasoner".to_owned(), "openai", "gpt-4o"),
                ("specialist analyst".to_owned(), "openai", "gpt-4o-mini"),
                (
                    "specialist (default)".to_owned(),
                    "local",
                    "qwen2.5-7b-instruct"
                ),
                ("reviewer".to_owned(), "litellm", "gpt-4.1-mini"),
            ]
        );
        // Without its keys it says which one is missing.
        let err = ProvidersConfig::from_toml(example)
            .unwrap()
            .build(&prices, |_| None)
            .unwrap_err();
        assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    }
}
