//! The library half of `agentroom-bench`: the chaos harness ([`chaos`]), so the CLI's CI
//! sample (`crates/cli/tests/chaos_sample.rs`) runs the very code path of `agentroom-bench
//! chaos`, not a copy of it; the raw commit floor ([`floor`]) and `/proc` readings
//! ([`procfs`]) every figure is printed beside; and the Room's path through a real `serve`
//! ([`path`]: `aging` and `room`), which starts its processes with the chaos harness's helpers.

pub mod chaos;
pub mod floor;
pub mod path;
pub mod procfs;
