//! `agentroom serve` binds its listener before it opens the store and recovers its Rooms
//! (issue 21): while recovery cannot go on (here: a transaction of the test holds the
//! operations table of the real PostgreSQL database locked), `/health` answers `starting` and
//! a Room's route answers `503 unavailable` with `Retry-After` and changes nothing; once the
//! lock is released, recovery completes, the host prints the line it is found by and serves
//! everything.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Database, Running, migrate_up};

const PATIENCE: Duration = Duration::from_secs(60);

/// One HTTP/1.1 GET: the status, the `Retry-After` header and the body; `None` while nothing
/// accepts connections yet.
fn get(address: &str, path: &str, token: &str) -> Option<(u16, Option<String>, String)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let retry_after = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("retry-after")
            .then(|| value.trim().to_owned())
    });
    Some((status, retry_after, body.to_owned()))
}

/// `BEGIN; LOCK TABLE operations …` in a `psql` session the test holds open; `COMMIT` on its
/// stdin releases it.
struct Lock(std::process::Child);

impl Lock {
    fn operations(url: &str) -> Lock {
        let mut psql = Command::new("psql")
            .args([url, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = psql.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "BEGIN; LOCK TABLE operations IN ACCESS EXCLUSIVE MODE; SELECT 'locked';"
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        BufReader::new(psql.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "locked", "psql did not lock: {line}");
        Lock(psql)
    }

    fn release(mut self) {
        let mut stdin = self.0.stdin.take().unwrap();
        writeln!(stdin, "COMMIT;").unwrap();
        drop(stdin);
        assert!(self.0.wait().unwrap().success());
    }
}

/// A Room `lab` on a fresh PostgreSQL database; its URL, the owner's token and a free
/// address on loopback.
fn site() -> (Database, String, String) {
    let db = Database::create();
    migrate_up(&db.url());
    let created = support::agentroom(&[
        "room",
        "create",
        "--database-url",
        &db.url(),
        "--room",
        "lab",
        "--owner",
        "olive",
        "--limit-micros",
        "1000000",
    ])
    .output()
    .unwrap();
    let printed = support::ok(&created);
    let owner = printed
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token: {printed}"))
        .trim()
        .to_owned();
    (db, owner, format!("127.0.0.1:{}", support::free_port()))
}

/// `serve` on `db` at `address`, its stdout piped.
fn serve(db: &Database, address: &str) -> Running {
    Running(
        support::agentroom(&["serve", "--listen", address, "--database-url", &db.url()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

/// `/health` once something answers it.
fn health(address: &str, token: &str) -> (u16, Option<String>, String) {
    let started = Instant::now();
    loop {
        if let Some(answer) = get(address, "/health", token) {
            return answer;
        }
        assert!(started.elapsed() < PATIENCE, "serve never answered /health");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn d5_serve_answers_health_while_it_recovers_and_a_room_route_503_with_retry_after() {
    let (db, owner, address) = site();
    let lock = Lock::operations(&db.url());
    let mut serve = serve(&db, &address);
    // Alive while it cannot recover: health says so, the API asks to come back.
    let health = health(&address, &owner);
    assert_eq!(health.0, 200, "{health:?}");
    assert!(health.2.contains("starting"), "{health:?}");
    let room = get(&address, "/v1/rooms/lab", &owner).unwrap();
    assert_eq!(room.0, 503, "{room:?}");
    assert_eq!(room.1.as_deref(), Some("1"), "{room:?}");
    assert!(room.2.contains("\"unavailable\""), "{room:?}");
    assert!(serve.0.try_wait().unwrap().is_none(), "serve exited");

    // Recovery goes on once the lock is released: the line, then everything.
    lock.release();
    let mut line = String::new();
    BufReader::new(serve.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("agentroom listening on http://{address}")
    );
    let health = get(&address, "/health", &owner).unwrap();
    assert!(health.2.contains("\"ok\""), "{health:?}");
    let room = get(&address, "/v1/rooms/lab", &owner).unwrap();
    assert_eq!(room.0, 200, "{room:?}");
}

#[test]
fn d5_a_stop_while_starting_ends_the_host_without_serving_or_saying_it_listens() {
    let (db, owner, address) = site();
    let lock = Lock::operations(&db.url());
    let mut serve = serve(&db, &address);
    assert!(health(&address, &owner).2.contains("starting"));
    let pid = serve.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The listener stops at once; the start finishes once recovery can, and stops there.
    let started = Instant::now();
    while get(&address, "/health", &owner).is_some() {
        assert!(started.elapsed() < PATIENCE, "the listener did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    lock.release();
    let status = loop {
        if let Some(status) = serve.0.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < PATIENCE, "serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let mut printed = String::new();
    serve
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut printed)
        .unwrap();
    assert!(!printed.contains("listening"), "{printed}");
}
