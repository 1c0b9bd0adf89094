//! agentroom-domain: the pure, synchronous rules engine of agentroom.
//!
//! Everything a Room decides is decided here, by [`engine::decide`], with no IO: no clock, no
//! randomness, no network, no database. Time, fresh ids and the capability catalog come in
//! through [`engine::Env`]. The IO crates load state, call `decide`, commit the returned
//! [`engine::Decision`] and execute its effects; rule ids (O1..R6, see `DESIGN.md`) name
//! every rejection in the decision log.

pub mod archive;
pub mod artifact;
pub mod authority;
pub mod catalog;
pub mod delta;
pub mod engine;
pub mod event;
pub mod ids;
pub mod ledger;
pub mod memory;
pub mod money;
pub mod objective;
pub mod plan;
pub mod policy;
pub mod pool;
pub mod price;
pub mod redaction;
pub mod review;
pub mod room;
pub mod rules;
pub mod sim;
pub mod state;
