//! A consumer of agentroom's public API (issue 19, the consumer boundary). Everything is in
//! `tests/consumer.rs`: it uses only what the published crates export, as a downstream
//! service embedding agentroom would.
