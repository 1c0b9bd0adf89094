//! `agentroom serve`'s connection hygiene and listener flags as a real process (issue 17):
//! `/health` answers with 1,000 idle connections held against a host limited to 256 open
//! files; `--anonymous-planning` is refused off loopback before anything starts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "tests: a failed unwrap is a failed test; the measured latency is printed"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `serve`, killed when the test ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Serve {
    /// The address it printed it listens on.
    fn address(&mut self) -> String {
        let mut line = String::new();
        BufReader::new(self.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.trim()
            .strip_prefix("agentroom listening on http://")
            .unwrap_or_else(|| panic!("serve printed {line:?}"))
            .to_owned()
    }
}

/// `GET path` on a fresh connection: the status and how long the answer took.
fn get(address: &str, path: &str) -> (u16, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(10))
        .expect("no connection to serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("no answer to GET {path} in 10 s: {e}"));
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {response:?}"));
    (status, started.elapsed())
}

/// The acceptance test of issue 17: 1,000 idle TCP connections (no token, nothing sent) held
/// against `serve` started with a limit of 256 open files, and `GET /health` still answers.
#[test]
fn health_answers_with_1000_idle_connections_under_a_256_descriptor_limit() {
    let root = tempfile::tempdir().unwrap();
    let mut serve = Serve(
        Command::new("sh")
            .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_agentroom"))
            .args(["serve", "--listen", "127.0.0.1:0", "--root"])
            .arg(root.path())
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .env_remove("AGENTROOM_CRASH_AT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let address = serve.address();
    // The limit is the process's own (`exec` kept the pid).
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.0.id())).unwrap();
    let files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert!(files.split_whitespace().nth(3) == Some("256"), "{files}");
    let (status, before) = get(&address, "/health");
    assert_eq!(status, 200);

    let mut idle = Vec::new();
    let started = Instant::now();
    for _ in 0..1_000 {
        if let Ok(stream) =
            TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(3))
        {
            idle.push(stream);
        }
    }
    let opened = started.elapsed();
    assert!(
        idle.len() >= 900,
        "only {} of 1,000 connections were made",
        idle.len()
    );
    let mut latencies = Vec::new();
    for _ in 0..5 {
        let (status, latency) = get(&address, "/health");
        assert_eq!(status, 200, "/health under 1,000 idle connections");
        latencies.push(latency);
    }
    latencies.sort();
    println!(
        "/health with {} idle connections held (opened in {opened:?}) under a 256 open-file \
         limit: median {:?}, worst {:?} of {} (unloaded: {before:?})",
        idle.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
        latencies.len()
    );
    assert!(
        latencies[latencies.len() - 1] < Duration::from_secs(5),
        "{latencies:?}"
    );
    // The process is still serving and still alive.
    assert!(serve.0.try_wait().unwrap().is_none(), "serve died");
    drop(idle);
}

/// `--anonymous-planning` serves owner-level planning without a token: refused (exit
/// non-zero, naming the fix) on any address but loopback, before a database is made.
#[test]
fn anonymous_planning_is_refused_off_loopback() {
    for listen in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8080"] {
        let root = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args([
                "serve",
                "--anonymous-planning",
                "--listen",
                listen,
                "--root",
            ])
            .arg(root.path())
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{listen}: {out:?}");
        assert!(
            stderr.contains("--anonymous-planning") && stderr.contains("loopback"),
            "{listen}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{listen}: it listened");
        assert_eq!(
            std::fs::read_dir(root.path()).unwrap().count(),
            0,
            "{listen}: something was made before the refusal"
        );
    }
    // On loopback it serves.
    let root = tempfile::tempdir().unwrap();
    let mut serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_agentroom"))
            .args([
                "serve",
                "--anonymous-planning",
                "--listen",
                "127.0.0.1:0",
                "--root",
            ])
            .arg(root.path())
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let address = serve.address();
    assert_eq!(get(&address, "/health").0, 200);
}
