//! What the binary writes to standard output goes through here. `print!` panics when the
//! reader has gone (`agentroom token issue … | head -c1`: a closed pipe, EPIPE, since Rust
//! ignores SIGPIPE); here a closed pipe ends the output quietly, as it ends `cat`'s, and any
//! other failure to write is an error that says so. `print!` and `println!` are denied in
//! this crate (`clippy::print_stdout`) so that nothing bypasses it.

use std::io::{self, Write};

use anyhow::Context;

/// Writes `text` to standard output and flushes it. A reader that closed the pipe took what
/// it wanted: that is not a failure, and nothing more is written.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

/// [`print`] with a newline after `line`.
pub(crate) fn print_line(line: &str) -> anyhow::Result<()> {
    print(&format!("{line}\n"))
}
