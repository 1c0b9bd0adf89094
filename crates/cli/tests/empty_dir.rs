//! An installed `agentroom` works from any directory: the shipped policies are built into the
//! binary and a `./policies` folder (or `--policies DIR`) overrides them file by file. Run as
//! the real binary from an empty working directory (issue 14).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn agentroom(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .current_dir(cwd)
        .env_remove("AGENTROOM_DATABASE_URL")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `serve` killed when the test ends, whatever happened.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr`: the status line and the body.
fn get(addr: &str, path: &str, token: Option<&str>) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let auth = token.map_or_else(String::new, |t| format!("authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn demo_runs_from_an_empty_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let out = agentroom(cwd.path(), &["demo"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("(completed, revision 2)"), "{stdout}");
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}

#[test]
fn room_create_and_serve_run_from_an_empty_directory_on_the_built_in_policies() {
    let cwd = tempfile::tempdir().unwrap();
    let check = agentroom(cwd.path(), &["policies", "check"]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert!(
        text(&check.stdout).contains("the built-in policies"),
        "{}",
        text(&check.stdout)
    );
    let created = agentroom(
        cwd.path(),
        &[
            "room",
            "create",
            "--room",
            "local",
            "--owner",
            "olive",
            "--member",
            "sam=specialist",
            "--member",
            "sue=specialist",
            "--member",
            "rita=reviewer",
            "--limit-micros",
            "1000000",
        ],
    );
    let printed = text(&created.stdout);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let token = printed
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token in {printed}"))
        .to_owned();

    let mut child = Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .current_dir(cwd.path())
        .env_remove("AGENTROOM_DATABASE_URL")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let serve = Serve(child);
    let addr = line
        .trim()
        .strip_prefix("agentroom listening on http://")
        .unwrap_or_else(|| panic!("serve did not listen: {line:?}"))
        .to_owned();
    let (status, _) = get(&addr, "/health", None);
    assert!(status.contains(" 200 "), "{status}");
    // The Room made on the built-in policies is served, under its owner's token.
    let (status, body) = get(&addr, "/v1/rooms/local", Some(&token));
    assert!(status.contains(" 200 "), "{status}: {body}");
    drop(serve);
}

#[test]
fn a_policy_folder_overrides_the_built_in_files_it_holds_and_a_missing_one_is_refused() {
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().join("mine");
    std::fs::create_dir(&dir).unwrap();
    // Only access.toml is overridden, and badly: the error names the folder's file.
    std::fs::write(
        dir.join("access.toml"),
        "[roles.janitor]\npermissions = []\n",
    )
    .unwrap();
    let out = agentroom(
        cwd.path(),
        &["policies", "check", "--dir", dir.to_str().unwrap()],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "accepted: {out:?}");
    assert!(stderr.contains("mine/access.toml"), "{stderr}");

    let out = agentroom(cwd.path(), &["policies", "check", "--dir", "nowhere"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "accepted: {out:?}");
    assert!(stderr.contains("nowhere: no such folder"), "{stderr}");
}
