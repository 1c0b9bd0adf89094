//! The real processes of a chaos run: `agentroom` commands (room create, migrate), `agentroom
//! serve` started, SIGKILLed and stopped, and a minimal HTTP/1.1 client of its REST API (one
//! request per connection, `Connection: close`), so the harness talks to the host exactly as
//! any client does.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

/// How long a request may take before the harness calls it failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `serve` may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a run keeps its data: the embedded file under `root`, or a PostgreSQL database.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// `--root DIR`.
    Sqlite(PathBuf),
    /// `--database-url URL`.
    Postgres(String),
}

impl Place {
    fn args(&self, command: &mut Command) {
        match self {
            Place::Sqlite(root) => command.arg("--root").arg(root),
            Place::Postgres(url) => command.args(["--database-url", url]),
        };
    }
}

/// The `agentroom` binary with none of the environment a developer may have set.
pub(crate) fn agentroom(binary: &Path) -> Command {
    let mut command = Command::new(binary);
    for var in [
        "AGENTROOM_HOST",
        "AGENTROOM_ROOM",
        "AGENTROOM_TOKEN",
        "AGENTROOM_DATABASE_URL",
        "AGENTROOM_CRASH_AT",
        "AGENTROOM_LOG",
    ] {
        command.env_remove(var);
    }
    command.stdin(Stdio::null());
    command
}

/// Runs `agentroom ARGS` on `place` to its end; its stdout, or an error naming what it said.
pub(crate) fn run(binary: &Path, place: Option<&Place>, args: &[&str]) -> anyhow::Result<String> {
    let mut command = agentroom(binary);
    command.args(args);
    if let Some(place) = place {
        place.args(&mut command);
    }
    let out = command
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    if !out.status.success() {
        bail!(
            "agentroom {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How `serve` is started each time.
#[derive(Debug, Clone)]
pub(crate) struct ServeSpec {
    pub(crate) binary: PathBuf,
    pub(crate) place: Place,
    /// `--room`: the one Room it coordinates; `None`: every Room on the store, including
    /// those created while it runs.
    pub(crate) room: Option<String>,
    pub(crate) policies: PathBuf,
    pub(crate) scenario: PathBuf,
    pub(crate) journal: PathBuf,
    /// Whether the scripted agents sync their journal before each call returns (survives
    /// power loss) or only write it (`--journal-unsynced`: survives SIGKILL). The path
    /// figures leave the agents' own fsync out of the Room's path they measure.
    pub(crate) journal_synced: bool,
    /// Every process's stderr, appended.
    pub(crate) log: PathBuf,
    pub(crate) lease_ms: u64,
    /// `--poll-ms`: time between two passes over the store.
    pub(crate) poll_ms: u64,
    /// `--recover-every`: recovery runs again every this many passes.
    pub(crate) recover_every: u32,
}

/// A running `serve`; SIGKILLed when dropped.
pub(crate) struct Serve {
    child: Child,
    pub(crate) address: SocketAddr,
}

impl ServeSpec {
    /// Starts `serve` and waits for its address; an error when it exits or says nothing in
    /// time (it is killed then).
    pub(crate) fn start(&self) -> anyhow::Result<Serve> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let mut command = agentroom(&self.binary);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .arg("--policies")
            .arg(&self.policies)
            .arg("--agents")
            .arg(&self.scenario)
            .arg("--journal")
            .arg(&self.journal)
            .args(["--lease-ms", &self.lease_ms.to_string()])
            .args(["--poll-ms", &self.poll_ms.to_string()])
            .args(["--recover-every", &self.recover_every.to_string()])
            .env("AGENTROOM_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(log);
        if let Some(room) = &self.room {
            command.args(["--room", room]);
        }
        if !self.journal_synced {
            command.arg("--journal-unsynced");
        }
        self.place.args(&mut command);
        let mut child = command.spawn().context("spawning agentroom serve")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("serve has no stdout"))?;
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let read = reader.read_line(&mut line).map(|_| line);
            let _ = sender.send(read);
            // Keep draining, so serve never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let mut serve = Serve {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let line = match receiver.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(err)) => return Err(anyhow!("reading serve's stdout: {err}")),
            Err(_) => bail!("serve printed no address within {START_TIMEOUT:?}"),
        };
        let address = line
            .trim()
            .strip_prefix("agentroom listening on http://")
            .ok_or_else(|| anyhow!("serve did not listen (it printed {line:?})"))?;
        serve.address = address
            .parse()
            .with_context(|| format!("serve's address {address:?}"))?;
        Ok(serve)
    }
}

impl Serve {
    /// SIGKILL, and waits for the process to be gone.
    pub(crate) fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().context("SIGKILL of serve")?;
        self.child.wait().context("waiting for serve")?;
        Ok(())
    }

    /// SIGTERM (a graceful stop), waited for up to `patience`, SIGKILL after it.
    pub(crate) fn stop(mut self, patience: Duration) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .context("kill -TERM")?;
        if !sent.success() {
            bail!("kill -TERM {pid} failed");
        }
        let deadline = std::time::Instant::now() + patience;
        while std::time::Instant::now() < deadline {
            if self
                .child
                .try_wait()
                .context("waiting for serve")?
                .is_some()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill().context("SIGKILL of serve")?;
        self.child.wait().context("waiting for serve")?;
        Ok(())
    }

    /// Its process id (for `/proc/<pid>/…`).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited on its own.
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request; the status and body, or an IO error (refused, reset, timed out).
pub(crate) fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP response");
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(invalid)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid)?;
    Ok((status, body.to_owned()))
}
