//! An OpenAI-compatible chat-completions adapter for all three roles: [`OpenAi`] implements
//! [`Reasoner`], [`Specialist`] and [`Reviewer`] over `POST {base_url}/chat/completions`.
//!
//! - **Requests**: the role's system prompt (the JSON envelope the domain needs) and the call's
//!   brief as JSON; `response_format: {"type": "json_object"}`; `max_tokens` = the role's output
//!   bound; `Idempotency-Key: <operation id>`; `Authorization: Bearer` from the environment
//!   variable the configuration names. A request above the role's bounds, or whose reservation
//!   is below the role's quote, is refused before anything is sent (B6).
//! - **Charges** (B3): from `usage.prompt_tokens` and `usage.completion_tokens` at the model's
//!   price, each component rounded up; no usage, or zero prompt tokens (what a proxy reports
//!   when its upstream gave none), is [`Charge::NoUsage`] (the whole reservation).
//! - **Failures** (money-safe, the table in `wire::meaning`): nothing sent (connect refused,
//!   DNS, TLS, connect timeout) or not taken (429) → not sent, which the runner retries with
//!   backoff (this adapter sends each request once); refused by the server (other 3xx/4xx) →
//!   refused, not retried; a timeout after sending, a connection dropped mid-response, 408,
//!   409 or any 5xx (a proxy answers 408/502/503/504 when its upstream failed, after the work
//!   may have run) → uncertain, never sent again blindly (D2). A reply that is not the envelope is a format
//!   error (reasoner, reviewer: O11 and repair) or the task's failure (specialist), charged.
//! - **Endpoints** ([`Endpoint`]): the URL, key and HTTP client of one API, shared by every
//!   model it serves ([`OpenAi::on`]); `crate::providers` wires a model per role from them.
//! - **Checks** ([`OpenAi::check`]): one tiny completion through the same request, response,
//!   classification and charge code, for `agentroom providers check`.

mod prompt;
mod wire;

use std::time::Duration;

use agentroom_ports::domain::engine::{Charge, ReasonerResult, ReviewerResult, SpecialistResult};
use agentroom_ports::domain::ids::OperationId;
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::price::TokenUsage;
use agentroom_ports::domain::state::CallRole;
use agentroom_ports::{
    AgentOutcome, Reasoner, ReasonerCall, Reviewer, ReviewerCall, Specialist, SpecialistCall,
};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

use crate::prices::{PriceTable, PriceTableError};

/// The largest response body read; a larger one is unreadable (and charged in full).
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// The largest error body read for its message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where and how to call the model. Unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1`; requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model, as the API names it; it must be priced in `prices.toml`.
    pub model: String,
    /// The environment variable that holds the API key, e.g. `OPENAI_API_KEY`; omit it for a
    /// server that needs no key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// How long connecting may take, in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long one whole request may take, in milliseconds; a call that takes longer is
    /// uncertain.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
}

/// Where and how to reach one OpenAI-compatible API, whatever model it serves: the part of a
/// configuration an `[endpoints.NAME]` table of a providers file holds. Unknown keys are
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// The API's base URL, e.g. `https://api.openai.com/v1`; requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// The environment variable that holds the API key; omit it for a server that needs none.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// How long connecting may take, in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long one whole request may take, in milliseconds; a call that takes longer is
    /// uncertain.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
}

impl EndpointConfig {
    /// An endpoint with the default timeouts and no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key_env: None,
            connect_timeout_ms: default_connect_timeout_ms(),
            request_timeout_ms: default_request_timeout_ms(),
        }
    }
}

const fn default_connect_timeout_ms() -> u64 {
    5_000
}

const fn default_request_timeout_ms() -> u64 {
    120_000
}

impl OpenAiConfig {
    /// A configuration with the default timeouts and no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            connect_timeout_ms: default_connect_timeout_ms(),
            request_timeout_ms: default_request_timeout_ms(),
        }
    }

    /// Reads a configuration from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// The endpoint part: where and how to call, without the model.
    pub fn endpoint(&self) -> EndpointConfig {
        EndpointConfig {
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            connect_timeout_ms: self.connect_timeout_ms,
            request_timeout_ms: self.request_timeout_ms,
        }
    }
}

/// Why an adapter could not be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, or not the shape of the configuration.
    #[error("agents configuration: {0}")]
    Parse(String),
    /// The base URL cannot be used.
    #[error("base_url `{url}` {problem}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The key's variable is not set.
    #[error("the API key variable `{var}` (api_key_env) is not set")]
    MissingKey {
        /// The variable.
        var: String,
    },
    /// The key's variable is set but cannot be sent as a header.
    #[error("the API key variable `{var}` {problem}")]
    BadKey {
        /// The variable.
        var: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A timeout of zero.
    #[error("{field} must be positive")]
    ZeroTimeout {
        /// The field.
        field: &'static str,
    },
    /// The model is not priced (or its reservations overflow).
    #[error(transparent)]
    Prices(#[from] PriceTableError),
    /// The HTTP client could not be built.
    #[error("the HTTP client cannot be built: {0}")]
    Client(String),
}

/// The API key: never printed.
#[derive(Clone)]
struct ApiKey(HeaderValue);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(..)")
    }
}

/// One OpenAI-compatible API, checked and ready to call: the URL requests go to, the key (read
/// once, never printed) and an HTTP client with the endpoint's timeouts, which sends each
/// request once and follows no redirect. Cloning it shares the client (and its connections):
/// every model served by one endpoint goes through one client.
#[derive(Debug, Clone)]
pub struct Endpoint {
    client: reqwest::Client,
    url: Url,
    key: Option<ApiKey>,
}

impl Endpoint {
    /// Builds the endpoint, reading the key from the process environment.
    pub fn from_env(config: &EndpointConfig) -> Result<Self, ConfigError> {
        Self::new(config, |var| std::env::var(var).ok())
    }

    /// Builds the endpoint, reading the key through `env` (the variable name in, its value
    /// out). Checks the URL, the timeouts and the key.
    pub fn new(
        config: &EndpointConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let url = endpoint(&config.base_url)?;
        for (field, value) in [
            ("connect_timeout_ms", config.connect_timeout_ms),
            ("request_timeout_ms", config.request_timeout_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroTimeout { field });
            }
        }
        let key = match &config.api_key_env {
            None => None,
            Some(var) => {
                let value = env(var).ok_or_else(|| ConfigError::MissingKey { var: var.clone() })?;
                let value = value.trim();
                if value.is_empty() {
                    return Err(ConfigError::BadKey {
                        var: var.clone(),
                        problem: "is empty",
                    });
                }
                let mut header =
                    HeaderValue::from_str(&format!("Bearer {value}")).map_err(|_| {
                        ConfigError::BadKey {
                            var: var.clone(),
                            problem: "holds characters an HTTP header cannot carry",
                        }
                    })?;
                header.set_sensitive(true);
                Some(ApiKey(header))
            }
        };
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .timeout(Duration::from_millis(config.request_timeout_ms))
            // A redirected POST may be sent again; the configured URL must be the real one.
            .redirect(reqwest::redirect::Policy::none())
            // Each request is sent once: whether to send it again is the runner's decision.
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| ConfigError::Client(e.to_string()))?;
        Ok(Self { client, url, key })
    }

    /// The URL requests go to: `{base_url}/chat/completions`.
    pub fn url(&self) -> &Url {
        &self.url
    }
}

/// The chat-completions adapter: one model on one endpoint, for every role it is wired as,
/// priced by the table it was built with.
#[derive(Debug, Clone)]
pub struct OpenAi {
    client: reqwest::Client,
    endpoint: Url,
    model: String,
    key: Option<ApiKey>,
    prices: PriceTable,
    prompts: Prompts,
}

/// What a connection check ([`OpenAi::check`]) got back: the usage the response reported,
/// what a call with that usage is charged (B3, from the same price table and code as every
/// call), and the reply (or why there is none: cut at `max_tokens`, refused, unreadable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReply {
    /// The usage as reported; `None` when the response reported none (or zero prompt
    /// tokens), which a real call is charged its whole reservation for.
    pub usage: Option<TokenUsage>,
    /// What a call that used this much is charged.
    pub charge: Charge,
    /// The reply's text, or why it has none.
    pub reply: Result<String, String>,
}

/// The largest reply a connection check asks for (its `max_tokens`, within the role's bound).
pub const CHECK_MAX_TOKENS: u64 = 16;

#[derive(Debug, Clone)]
struct Prompts {
    reasoner: String,
    specialist: String,
    reviewer: String,
}

/// Makes ring the process's rustls crypto provider unless one is installed: reqwest is built
/// without a provider of its own (so aws-lc-rs stays out of the build) and takes the process
/// default. Idempotent.
fn install_crypto_provider() {
    // `Err` means a provider is installed already, which is all this needs.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn endpoint(base_url: &str) -> Result<Url, ConfigError> {
    let bad = |problem: &str| ConfigError::BadUrl {
        url: base_url.to_owned(),
        problem: problem.to_owned(),
    };
    let mut url = Url::parse(base_url).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must have no query or fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "must not carry credentials (the key comes from api_key_env)",
        ));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    url.join("chat/completions")
        .map_err(|e| bad(&format!("cannot be joined with chat/completions: {e}")))
}

impl OpenAi {
    /// Builds the adapter, reading the key from the process environment.
    pub fn from_env(config: &OpenAiConfig, prices: PriceTable) -> Result<Self, ConfigError> {
        Self::new(config, prices, |var| std::env::var(var).ok())
    }

    /// Builds the adapter, reading the key through `env` (the variable name in, its value
    /// out). Checks the URL, the timeouts, the key, and that the model is priced.
    pub fn new(
        config: &OpenAiConfig,
        prices: PriceTable,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let endpoint = Endpoint::new(&config.endpoint(), env)?;
        Self::on(&endpoint, &config.model, prices)
    }

    /// The adapter calling `model` on `endpoint` (sharing its client). Checks that the model
    /// is priced, for every role.
    pub fn on(endpoint: &Endpoint, model: &str, prices: PriceTable) -> Result<Self, ConfigError> {
        prices.quotes(model)?;
        Ok(Self {
            client: endpoint.client.clone(),
            endpoint: endpoint.url.clone(),
            model: model.to_owned(),
            key: endpoint.key.clone(),
            prices,
            prompts: Prompts {
                reasoner: prompt::reasoner_system(),
                specialist: prompt::specialist_system(),
                reviewer: prompt::reviewer_system(),
            },
        })
    }

    /// The model this adapter calls.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// What one `role` call reserves (B6).
    pub fn reservation(&self, role: CallRole) -> Result<UsdMicros, PriceTableError> {
        self.prices.reservation(role, &self.model)
    }

    /// The bytes a `role` call's context may take, rendered: the role's input bound less the
    /// overhead of its two messages, its system prompt, its brief and the separator (B6: what
    /// is sent stays within what the reservation prices).
    fn context_budget(&self, role: CallRole, system: &str, brief: &str) -> usize {
        let bounds = self.prices.bounds(role);
        let fixed = (system.len() + brief.len() + prompt::DATA_SEPARATOR.len()) as u64
            + 2 * bounds.per_message_overhead;
        usize::try_from(bounds.max_input_tokens.saturating_sub(fixed)).unwrap_or(usize::MAX)
    }

    /// Sends one chat completion and reads its content and charge.
    async fn complete(
        &self,
        role: CallRole,
        op: OperationId,
        reservation: UsdMicros,
        system: &str,
        user: &str,
    ) -> AgentOutcome<Completion> {
        let bounds = self.prices.bounds(role);
        // B6: a true upper bound, or nothing is sent.
        match self.reservation(role) {
            Ok(quote) if quote <= reservation => {}
            Ok(quote) => {
                return AgentOutcome::Refused {
                    reason: format!(
                        "the {} call reserved {reservation} but a call to {} within its bounds \
                         may cost {quote}: the Room's quotes are older than prices.toml, or \
                         were made for a cheaper model",
                        role.as_str(),
                        self.model
                    ),
                };
            }
            Err(err) => {
                return AgentOutcome::Refused {
                    reason: err.to_string(),
                };
            }
        }
        self.exchange(role, op, system, user, bounds.max_output_tokens)
            .await
    }

    /// A connection check of this adapter as `role`: one tiny chat completion (a system
    /// prompt in the role's words asking for `{}` as JSON, `max_tokens` at most
    /// [`CHECK_MAX_TOKENS`]) sent with `op` as its `Idempotency-Key`, through the same
    /// request, response, classification and charge code as every call. No reservation is
    /// involved: it is for `agentroom providers check`, outside any Room.
    pub async fn check(&self, role: CallRole, op: OperationId) -> AgentOutcome<CheckReply> {
        let max_tokens = CHECK_MAX_TOKENS.min(self.prices.bounds(role).max_output_tokens);
        self.exchange(
            role,
            op,
            &prompt::check_system(role),
            prompt::CHECK_USER,
            max_tokens,
        )
        .await
        .map(|completion| CheckReply {
            usage: completion.usage,
            charge: completion.charge,
            reply: completion.content,
        })
    }

    /// Sends one chat completion of `system` and `user` asking for at most `max_tokens`, within
    /// `role`'s bounds (refused before anything is sent otherwise, B6), and reads its content,
    /// usage and charge; every failure classified money-safe (`wire::meaning`).
    async fn exchange(
        &self,
        role: CallRole,
        op: OperationId,
        system: &str,
        user: &str,
        max_tokens: u64,
    ) -> AgentOutcome<Completion> {
        let bounds = self.prices.bounds(role);
        if let Err(err) = bounds.admit(&[system, user], max_tokens) {
            return AgentOutcome::Refused {
                reason: format!("the {} request is above its bounds: {err}", role.as_str()),
            };
        }
        let body = wire::ChatRequest {
            model: &self.model,
            messages: [
                wire::Message {
                    role: "system",
                    content: system,
                },
                wire::Message {
                    role: "user",
                    content: user,
                },
            ],
            max_tokens,
            response_format: wire::ResponseFormat {
                kind: "json_object",
            },
        };
        let body = match serde_json::to_vec(&body) {
            Ok(body) => body,
            Err(err) => {
                return AgentOutcome::Refused {
                    reason: format!("the request cannot be encoded: {err}"),
                };
            }
        };
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("Idempotency-Key", op.to_string())
            .body(body);
        if let Some(ApiKey(key)) = &self.key {
            request = request.header(reqwest::header::AUTHORIZATION, key.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => return send_failed(&err),
        };
        let status = response.status();
        if !status.is_success() {
            return self.unsuccessful(status, response).await;
        }
        let body = match read_body(response, MAX_BODY_BYTES).await {
            Ok(Body::Whole(body)) => body,
            Ok(Body::TooLarge) => {
                return AgentOutcome::Returned {
                    result: Completion::unreadable(format!(
                        "the response is larger than {MAX_BODY_BYTES} bytes"
                    )),
                    charge: Charge::NoUsage,
                };
            }
            Err(err) => {
                return AgentOutcome::Uncertain {
                    reason: format!(
                        "{status} from {}, then the response broke off: {}",
                        self.endpoint,
                        describe(&err)
                    ),
                };
            }
        };
        let completion = self.read_completion(&body);
        AgentOutcome::Returned {
            charge: completion.charge,
            result: completion,
        }
    }

    /// Reads a whole 2xx body: its content, or why it has none, and its charge.
    fn read_completion(&self, body: &[u8]) -> Completion {
        let response = match serde_json::from_slice::<wire::ChatResponse>(body) {
            Ok(response) => response,
            Err(err) => {
                return Completion::unreadable(format!(
                    "the response is not a chat completion: {err}; it began: {}",
                    wire::clip(&String::from_utf8_lossy(body))
                ));
            }
        };
        let (usage, charge) = self.charge(response.usage);
        let Some(choice) = response.choices.into_iter().next() else {
            return Completion {
                content: Err("the response has no choices".to_owned()),
                usage,
                charge,
            };
        };
        let truncated = choice.finish_reason.as_deref() == Some("length");
        let content = match (choice.message.content, choice.message.refusal) {
            (_, Some(refusal)) => Err(format!("the model refused: {}", wire::clip(&refusal))),
            (Some(content), None) if truncated => Err(format!(
                "the reply was cut at max_tokens; it began: {}",
                wire::clip(&content)
            )),
            (Some(content), None) => Ok(content),
            (None, None) => Err("the reply has no content".to_owned()),
        };
        Completion {
            content,
            usage,
            charge,
        }
    }

    /// B3: the usage read (when usable) and its cost at the model's price; no usage, usage of
    /// zero prompt tokens (every prompt here holds a system message: a proxy that got no usage
    /// from its upstream reports zeros), or usage this adapter cannot price is charged the
    /// whole reservation.
    fn charge(&self, usage: Option<wire::Usage>) -> (Option<TokenUsage>, Charge) {
        let Some(wire::Usage {
            prompt_tokens: Some(input_tokens),
            completion_tokens: Some(output_tokens),
        }) = usage
        else {
            return (None, Charge::NoUsage);
        };
        if input_tokens == 0 {
            tracing::warn!(
                output_tokens,
                "B3: the response reports zero prompt tokens for a non-empty prompt: charged the whole reservation"
            );
            return (None, Charge::NoUsage);
        }
        let usage = TokenUsage {
            input_tokens,
            output_tokens,
        };
        match self.prices.cost(&self.model, usage) {
            Some(cost) => (Some(usage), Charge::Actual(cost)),
            None => (Some(usage), Charge::NoUsage),
        }
    }

    async fn unsuccessful(
        &self,
        status: StatusCode,
        response: reqwest::Response,
    ) -> AgentOutcome<Completion> {
        let meaning = wire::meaning(status, response.headers());
        let location = location(response.headers());
        let message = match read_body(response, MAX_ERROR_BODY_BYTES).await {
            Ok(Body::Whole(body)) => wire::error_message(&body),
            Ok(Body::TooLarge) | Err(_) => String::new(),
        };
        let said = if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        };
        let endpoint = &self.endpoint;
        match meaning {
            wire::StatusMeaning::NotTaken { retry_after } => AgentOutcome::NotSent {
                retry_after,
                reason: format!("{status} from {endpoint}: not taken{said}"),
            },
            wire::StatusMeaning::Unknown => AgentOutcome::Uncertain {
                reason: format!("{status} from {endpoint}: it may have run{said}"),
            },
            wire::StatusMeaning::Refused => AgentOutcome::Refused {
                reason: format!(
                    "{status} from {endpoint}: refused, nothing ran{said}{}",
                    advice(status, location.as_deref())
                ),
            },
        }
    }
}

/// What to fix, for the statuses that have one answer.
fn advice(status: StatusCode, location: Option<&str>) -> String {
    match status {
        StatusCode::UNAUTHORIZED => " (check the key in api_key_env)".to_owned(),
        StatusCode::FORBIDDEN => " (the key may not use this model)".to_owned(),
        StatusCode::NOT_FOUND => " (check base_url and model)".to_owned(),
        s if s.is_redirection() => match location {
            Some(to) => format!(" (redirected to {to}: set base_url to where it points)"),
            None => " (redirected: set base_url to the final address)".to_owned(),
        },
        _ => String::new(),
    }
}

fn location(headers: &HeaderMap) -> Option<String> {
    headers
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(wire::clip)
}

/// A failure of `send`, before any response: nothing was sent when it failed while connecting;
/// otherwise the request may have reached the server.
fn send_failed<T>(err: &reqwest::Error) -> AgentOutcome<T> {
    if err.is_connect() || err.is_builder() {
        AgentOutcome::NotSent {
            retry_after: None,
            reason: format!("nothing was sent: {}", describe(err)),
        }
    } else {
        AgentOutcome::Uncertain {
            reason: format!("sent, and then: {}", describe(err)),
        }
    }
}

/// An error with its causes, on one line.
fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if err.is_timeout() && !text.contains("timed out") {
        text.push_str(" (timed out)");
    }
    text
}

enum Body {
    Whole(Vec<u8>),
    TooLarge,
}

async fn read_body(mut response: reqwest::Response, max: usize) -> Result<Body, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            return Ok(Body::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Body::Whole(body))
}

/// A 2xx response read: the reply's content (or why there is none), the usage it reported
/// (when usable) and its charge.
#[derive(Debug)]
struct Completion {
    content: Result<String, String>,
    usage: Option<TokenUsage>,
    charge: Charge,
}

impl Completion {
    fn unreadable(why: String) -> Self {
        Self {
            content: Err(why),
            usage: None,
            charge: Charge::NoUsage,
        }
    }
}

#[async_trait]
impl Reasoner for OpenAi {
    fn model_name(&self) -> Option<String> {
        Some(self.model.clone())
    }

    fn context_budget(&self, call: &ReasonerCall) -> Option<usize> {
        Some(self.context_budget(
            CallRole::Reasoner,
            &self.prompts.reasoner,
            &prompt::reasoner_user(call),
        ))
    }

    #[tracing::instrument(skip_all, fields(op = %call.op, model = %self.model))]
    async fn interpret(&self, call: &ReasonerCall) -> AgentOutcome<ReasonerResult> {
        let user = prompt::with_context(&prompt::reasoner_user(call), &call.context);
        self.complete(
            CallRole::Reasoner,
            call.op,
            call.reservation,
            &self.prompts.reasoner,
            &user,
        )
        .await
        .map(|completion| match completion.content {
            Ok(content) => prompt::parse_reasoner(call, &content),
            Err(detail) => ReasonerResult::FormatError { detail },
        })
    }
}

#[async_trait]
impl Specialist for OpenAi {
    fn model_name(&self) -> Option<String> {
        Some(self.model.clone())
    }

    fn context_budget(&self, call: &SpecialistCall) -> Option<usize> {
        Some(self.context_budget(
            CallRole::Specialist,
            &self.prompts.specialist,
            &prompt::specialist_user(call),
        ))
    }

    #[tracing::instrument(skip_all, fields(op = %call.op, model = %self.model, principal = %call.principal))]
    async fn execute(&self, call: &SpecialistCall) -> AgentOutcome<SpecialistResult> {
        let user = prompt::with_context(&prompt::specialist_user(call), &call.context);
        self.complete(
            CallRole::Specialist,
            call.op,
            call.reservation,
            &self.prompts.specialist,
            &user,
        )
        .await
        .map(|completion| match completion.content {
            Ok(content) => prompt::parse_specialist(call, &content),
            Err(reason) => SpecialistResult::Failure { reason },
        })
    }
}

#[async_trait]
impl Reviewer for OpenAi {
    fn model_name(&self) -> Option<String> {
        Some(self.model.clone())
    }

    fn context_budget(&self, call: &ReviewerCall) -> Option<usize> {
        Some(self.context_budget(
            CallRole::Reviewer,
            &self.prompts.reviewer,
            &prompt::reviewer_user(call),
        ))
    }

    #[tracing::instrument(skip_all, fields(op = %call.op, model = %self.model, principal = %call.principal))]
    async fn review(&self, call: &ReviewerCall) -> AgentOutcome<ReviewerResult> {
        let user = prompt::with_context(&prompt::reviewer_user(call), &call.context);
        self.complete(
            CallRole::Reviewer,
            call.op,
            call.reservation,
            &self.prompts.reviewer,
            &user,
        )
        .await
        .map(|completion| match completion.content {
            Ok(content) => prompt::parse_reviewer(call, &content),
            Err(detail) => ReviewerResult::FormatError { detail },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> PriceTable {
        PriceTable::shipped().unwrap()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_endpoint_is_the_base_url_joined_with_chat_completions() {
        for base in ["https://api.openai.com/v1", "https://api.openai.com/v1/"] {
            assert_eq!(
                endpoint(base).unwrap().as_str(),
                "https://api.openai.com/v1/chat/completions"
            );
        }
        assert_eq!(
            endpoint("http://127.0.0.1:8080").unwrap().as_str(),
            "http://127.0.0.1:8080/chat/completions"
        );
    }

    #[test]
    fn a_bad_configuration_is_refused_with_what_is_wrong() {
        let refused = |config: &OpenAiConfig| {
            OpenAi::new(config, prices(), |_| Some("sk-test".to_owned()))
                .unwrap_err()
                .to_string()
        };
        let config = OpenAiConfig::new("ftp://example.org", "gpt-4o-mini");
        assert_eq!(
            refused(&config),
            "base_url `ftp://example.org` must be http or https"
        );
        let config = OpenAiConfig::new("not a url", "gpt-4o-mini");
        assert!(refused(&config).contains("is not a URL"));
        let config = OpenAiConfig::new("https://u:p@example.org/v1", "gpt-4o-mini");
        assert!(refused(&config).contains("must not carry credentials"));
        let config = OpenAiConfig::new("https://example.org/v1", "gpt-9");
        assert!(
            refused(&config).starts_with("model `gpt-9` has no price in prices.toml (priced: "),
            "{}",
            refused(&config)
        );
        let mut config = OpenAiConfig::new("https://example.org/v1", "gpt-4o-mini");
        config.request_timeout_ms = 0;
        assert_eq!(refused(&config), "request_timeout_ms must be positive");

        let mut config = OpenAiConfig::new("https://example.org/v1", "gpt-4o-mini");
        config.api_key_env = Some("AGENTROOM_TEST_KEY".to_owned());
        assert_eq!(
            OpenAi::new(&config, prices(), no_env)
                .unwrap_err()
                .to_string(),
            "the API key variable `AGENTROOM_TEST_KEY` (api_key_env) is not set"
        );
        assert_eq!(
            OpenAi::new(&config, prices(), |_| Some("  ".to_owned()))
                .unwrap_err()
                .to_string(),
            "the API key variable `AGENTROOM_TEST_KEY` is empty"
        );
        assert!(
            OpenAi::new(&config, prices(), |_| Some("sk-\n".to_owned() + "x"))
                .unwrap_err()
                .to_string()
                .contains("cannot carry")
        );
    }

    #[test]
    fn the_configuration_refuses_unknown_keys() {
        let err = OpenAiConfig::from_toml(
            "base_url = \"https://example.org/v1\"\nmodel = \"gpt-4o-mini\"\nmodle = \"x\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let config = OpenAiConfig::from_toml(
            "base_url = \"https://example.org/v1\"\nmodel = \"gpt-4o-mini\"\napi_key_env = \"OPENAI_API_KEY\"\n",
        )
        .unwrap();
        assert_eq!(config.request_timeout_ms, 120_000);
        assert_eq!(config.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    }

    #[test]
    fn the_key_is_never_printed() {
        let mut config = OpenAiConfig::new("https://example.org/v1", "gpt-4o-mini");
        config.api_key_env = Some("KEY".to_owned());
        let adapter = OpenAi::new(&config, prices(), |_| Some("sk-secret".to_owned())).unwrap();
        assert!(!format!("{adapter:?}").contains("sk-secret"));
    }
}
