//! Rebuilds the crate when a migration changes: `sqlx::migrate!` embeds
//! `migrations/postgres` at compile time, and cargo does not see those files otherwise.
#![allow(
    clippy::print_stdout,
    reason = "a build script talks to cargo through stdout"
)]

fn main() {
    println!("cargo::rerun-if-changed=../../migrations/postgres");
}
