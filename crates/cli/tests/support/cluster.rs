//! A private PostgreSQL cluster for fault tests that restart or crash the server: made with
//! `initdb` in a temporary directory, started with `pg_ctl` on a free port of 127.0.0.1, never
//! the shared server. The binaries come from `/usr/lib/postgresql/<version>/bin` (Debian's
//! place; the newest version wins). initdb refuses to run as root, so as root every command
//! runs as the `postgres` user, which owns the directory. The cluster is stopped and its
//! directory deleted when the guard drops, even while a failed test unwinds.
#![allow(clippy::print_stderr, reason = "a skipped test says why on stderr")]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// Where Debian keeps each PostgreSQL version's server binaries.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";
/// The unprivileged user the cluster runs as when the tests run as root.
const OS_USER: &str = "postgres";

/// The newest `/usr/lib/postgresql/<version>/bin` that has `initdb` and `pg_ctl`.
pub fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(DEBIAN_LIB)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .next()?
                .parse()
                .ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Whether this runs on CI (`CI` set to anything but empty, `0` or `false`), where a missing
/// PostgreSQL installation fails the test instead of skipping it.
pub fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn running_as_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A running private cluster; stopped and deleted on drop.
pub struct Cluster {
    bin: PathBuf,
    /// Owned by the cluster's user: `data/`, the socket and `server.log`.
    dir: TempDir,
    port: u16,
    as_root: bool,
}

impl Cluster {
    /// Makes and starts a cluster, or `None` (saying why) when PostgreSQL's server binaries
    /// are not installed and this is not CI. On CI their absence fails the test.
    pub fn start() -> Option<Cluster> {
        let Some(bin) = binaries() else {
            assert!(
                !on_ci(),
                "CI is set but no initdb/pg_ctl under {DEBIAN_LIB}/*/bin: install the \
                 postgresql package (.ci/run does)"
            );
            eprintln!(
                "SKIPPED: no initdb/pg_ctl under {DEBIAN_LIB}/*/bin; install the postgresql \
                 package to run the private-cluster tests (on CI they fail instead)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("agentroom-pg-")
            .tempdir()
            .unwrap();
        let as_root = running_as_root();
        if as_root {
            let out = Command::new("chown")
                .arg(format!("{OS_USER}:"))
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "chown {OS_USER}: {out:?}");
        }
        let cluster = Cluster {
            bin,
            dir,
            port: super::free_port(),
            as_root,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        cluster.pg_ctl(&["start"]);
        Some(cluster)
    }

    /// A URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: sessions are ended, the server shuts down cleanly and starts.
    pub fn restart_fast(&self) {
        self.pg_ctl(&["-m", "fast", "restart"]);
    }

    /// `pg_ctl stop -m immediate`: the server dies without a shutdown checkpoint, as in a
    /// crash; the next start replays its WAL.
    pub fn stop_immediate(&self) {
        self.pg_ctl(&["-m", "immediate", "stop"]);
    }

    /// Starts a stopped cluster again.
    pub fn start_again(&self) {
        self.pg_ctl(&["start"]);
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The server's options: this port, its socket in the cluster's directory, TCP on the
    /// loopback only. `fsync=off`: the tests crash the server, never the machine, so what
    /// it wrote survives in the page cache; with fsync on, every start after a crash first
    /// flushes the whole data directory (about 3 s here).
    fn server_options(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=40 -c fsync=off",
            self.port,
            self.dir.path().display()
        )
    }

    fn pg_ctl(&self, action: &[&str]) {
        let (data, log, options) = (
            self.data(),
            self.log().display().to_string(),
            self.server_options(),
        );
        let mut args = vec!["-D", &data, "-l", &log, "-o", &options, "-w", "-t", "30"];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args);
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", OS_USER, "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out: Output = self.command(program, args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.log()).unwrap_or_default()
        );
    }

    /// Where the cluster lives (for messages).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Never panics: it may run while a failed test unwinds. The directory goes with the
        // TempDir after this.
        let data = self.data();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
