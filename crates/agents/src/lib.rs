//! agentroom-agents: the adapters behind the `Reasoner`, `Specialist` and `Reviewer` ports,
//! and the router that lets the workflow runner call them.
//!
//! - [`Agents`] implements the runner's `Provider`: it cuts each reserved call to its port's
//!   view, routes it by role (and principal) and honours the call's abort.
//! - [`openai::OpenAi`]: an OpenAI-compatible chat-completions adapter for all three roles
//!   (reqwest with rustls, JSON object mode, `Idempotency-Key`), the only place that speaks
//!   that wire JSON.
//! - [`providers`]: which model serves each role on which endpoint ([`ProvidersConfig`]), the
//!   [`Agents`] wired from it and the description of what is served ([`Served`]).
//! - [`PriceTable`]: `policies/prices.toml`, the B6 reservations and the B3 charges.
//! - [`hosted`]: specialists whose work an agent host executes over the REST API, waiting
//!   for its submission, with the journal and reconciler that make it durable (D2).
//! - [`scripted`]: deterministic agents from a scenario file, with a durable journal of what
//!   they executed and the reconciler that reads it (D2).
//!
//! Adapters report what happened and what it cost; they never decide whether a call may
//! happen or what its result means (the domain does).

pub mod hosted;
pub mod openai;
pub mod prices;
pub mod providers;
mod router;
pub mod scripted;

pub use prices::{PriceTable, PriceTableError, SHIPPED_PRICES};
pub use providers::{Providers, ProvidersConfig, ProvidersError, Served};
pub use router::{Agents, call_outcome};

pub use agentroom_ports::desk::contribution_id;
