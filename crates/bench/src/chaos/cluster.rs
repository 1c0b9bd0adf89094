//! A private PostgreSQL cluster the harness may restart and crash (`--cluster`): made with
//! `initdb` in a temporary directory and run with `pg_ctl` on a free port of 127.0.0.1, never
//! the shared server, as `crates/cli/tests/support/cluster.rs` does for `pg_restart.rs`. As
//! root every command runs as the `postgres` user (initdb refuses root). Stopped when dropped.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, anyhow, bail};
use tempfile::TempDir;

/// Where Debian keeps each PostgreSQL version's server binaries.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";
/// The unprivileged user the cluster runs as when the harness runs as root.
const OS_USER: &str = "postgres";

/// A running private cluster; stopped (and its directory deleted) when dropped.
pub(crate) struct Cluster {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
    as_root: bool,
}

/// The newest `/usr/lib/postgresql/<version>/bin` with `initdb` and `pg_ctl`.
fn binaries() -> Option<PathBuf> {
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

impl Cluster {
    /// Makes and starts a cluster.
    pub(crate) fn start() -> anyhow::Result<Cluster> {
        let bin = binaries().ok_or_else(|| {
            anyhow!("--cluster needs initdb and pg_ctl under {DEBIAN_LIB}/*/bin (the postgresql package)")
        })?;
        let dir = tempfile::Builder::new()
            .prefix("agentroom-chaos-pg-")
            .tempdir()
            .context("a directory for the cluster")?;
        let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        if as_root {
            let out = Command::new("chown")
                .arg(format!("{OS_USER}:"))
                .arg(dir.path())
                .output()
                .context("chown")?;
            if !out.status.success() {
                bail!("chown {OS_USER}: {out:?}");
            }
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("a free port")?
            .port();
        let cluster = Cluster {
            bin,
            dir,
            port,
            as_root,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        cluster.pg_ctl(&["start"])?;
        Ok(cluster)
    }

    /// The URL of its `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: sessions ended, a clean shutdown, started again.
    pub(crate) fn restart_fast(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["-m", "fast", "restart"])
    }

    /// `pg_ctl stop -m immediate` (a crash: no shutdown checkpoint), then started again
    /// (WAL replayed).
    pub(crate) fn crash_and_start(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["-m", "immediate", "stop"])?;
        self.pg_ctl(&["start"])
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn pg_ctl(&self, action: &[&str]) -> anyhow::Result<()> {
        // fsync=off: the harness crashes the server, never the machine.
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=60 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let (data, log) = (self.data(), self.log().display().to_string());
        let mut args = vec!["-D", &data, "-l", &log, "-o", &options, "-w", "-t", "60"];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args)
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

    fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let out = self
            .command(program, args)
            .output()
            .with_context(|| format!("running {program}"))?;
        if !out.status.success() {
            bail!(
                "{program} {args:?} failed: {}{}\nserver log:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.log()).unwrap_or_default()
            );
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
