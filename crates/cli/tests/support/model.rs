//! The processes of the tests that run agentroom with a model: `agentroom-testmodel` (the
//! deterministic OpenAI-compatible server, built beside `agentroom`), README's "Run with a
//! model" steps on a [`ModelSite`] (its configuration, `room create --model testmodel`, the
//! owner's message, `serve --openai`), and the REST calls and waits the tests make on the
//! running host.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::{Database, Running, migrate_up};

/// How long a test waits for the processes to get somewhere before it fails.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// The test model's binary, built beside `agentroom` (once per test process: cargo builds
/// only the packages under test, and a stale model would answer from old code).
pub fn testmodel() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let agentroom = PathBuf::from(env!("CARGO_BIN_EXE_agentroom"));
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut build = Command::new(cargo);
            build
                .args(["build", "--quiet", "-p", "agentroom-testmodel"])
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if agentroom
                .parent()
                .is_some_and(|dir| dir.ends_with("release"))
            {
                build.arg("--release");
            }
            assert!(
                build.status().unwrap().success(),
                "building agentroom-testmodel failed"
            );
            agentroom.with_file_name("agentroom-testmodel")
        })
        .clone()
}

/// Starts `command` with stdout piped and returns it with the address it printed after
/// `prefix`.
pub fn listening(mut command: Command, prefix: &str) -> (Running, String) {
    command.stdout(Stdio::piped()).stdin(Stdio::null());
    let mut child = Running(command.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(child.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("did not listen: {line}"))
        .to_owned();
    (child, address)
}

/// What a test reads of a site's store: its Rooms and their content.
pub trait RoomsAndContents: agentroom_ports::RoomStore + agentroom_ports::ArtifactStore {}
impl<T: agentroom_ports::RoomStore + agentroom_ports::ArtifactStore> RoomsAndContents for T {}

/// Where the Room lives: the embedded SQLite file under a root, or a PostgreSQL database.
pub enum Store {
    Sqlite,
    Postgres(Database),
}

/// A Room served with a model: its store and a folder for the model's configuration, record
/// and journal.
pub struct ModelSite {
    store: Store,
    dir: TempDir,
}

/// The processes [`ModelSite::start_with`] started and what a test needs to talk to them.
pub struct Started {
    /// The test model.
    pub model: Running,
    /// `agentroom serve --openai`.
    pub serve: Running,
    /// The host's `ADDR` (no scheme).
    pub address: String,
    /// The model's `ADDR` (no scheme).
    pub model_address: String,
    /// The owner's (olive's) bearer token.
    pub owner: String,
    /// The first operator's (oscar's) bearer token.
    pub operator: String,
}

impl ModelSite {
    pub fn sqlite() -> ModelSite {
        ModelSite {
            store: Store::Sqlite,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn postgres() -> ModelSite {
        let db = Database::create();
        migrate_up(&db.url());
        ModelSite {
            store: Store::Postgres(db),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn store_args(&self) -> Vec<String> {
        match &self.store {
            Store::Sqlite => vec![
                "--root".to_owned(),
                self.dir.path().join("data").display().to_string(),
            ],
            Store::Postgres(db) => vec!["--database-url".to_owned(), db.url()],
        }
    }

    /// `agentroom ARGS` on this site's store, run from the site's folder (the shipped
    /// policies are the binary's built-in defaults), with none of the environment a developer
    /// may set.
    pub fn agentroom(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(args)
            .args(self.store_args())
            .current_dir(self.dir.path())
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .env_remove("AGENTROOM_TOKEN");
        command
    }

    /// `agentroom ARGS`, which must succeed.
    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.agentroom(args).output().unwrap();
        assert!(
            out.status.success(),
            "agentroom {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The site's store, opened in this process beside the running host (to read its rows
    /// and rebuild its history).
    pub async fn open(&self) -> Box<dyn RoomsAndContents> {
        match &self.store {
            Store::Sqlite => Box::new(
                agentroom_store_sqlite::SqliteRooms::open(
                    &self.dir.path().join("data").join("planning.db"),
                    agentroom_store_sqlite::Durability::ProcessCrash,
                )
                .unwrap(),
            ),
            Store::Postgres(db) => Box::new(
                agentroom_store_postgres::PgRooms::connect(&db.url())
                    .await
                    .unwrap(),
            ),
        }
    }

    /// The site's folder.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Creates Room `room` quoted for `model`, with README's members; returns the owner's
    /// and the first operator's tokens.
    pub fn create_room(&self, room: &str, model: &str) -> (String, String) {
        let created = self.run(&[
            "room",
            "create",
            "--room",
            room,
            "--owner",
            "olive",
            "--member",
            "oscar=operator",
            "--member",
            "sam=specialist",
            "--member",
            "sue=specialist",
            "--member",
            "rita=reviewer",
            "--model",
            model,
            "--limit-micros",
            "5000000",
        ]);
        let printed = String::from_utf8(created.stdout).unwrap();
        let token = |who: &str| {
            printed
                .lines()
                .find_map(|l| l.strip_prefix(who))
                .unwrap_or_else(|| panic!("no {who}: {printed}"))
                .trim()
                .to_owned()
        };
        (
            token("owner token (olive): "),
            token("operator token (oscar): "),
        )
    }

    /// The model's `--record` file.
    pub fn record(&self) -> PathBuf {
        self.dir.path().join("requests.jsonl")
    }

    /// Where a test may ask the model to keep its `--journal`.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.path().join("journal.jsonl")
    }

    /// README's steps: the test model, its configuration, the Room, the owner's message,
    /// `serve --openai`. Returns the processes, the host's address and the owner's token.
    pub fn start(&self, message: &str) -> (Running, Running, String, String) {
        let started = self.start_with(message, &[]);
        (started.model, started.serve, started.address, started.owner)
    }

    /// [`ModelSite::start`], the model started with `model_args` as well (`--fault`,
    /// `--journal`).
    pub fn start_with(&self, message: &str, model_args: &[&str]) -> Started {
        let mut model = Command::new(testmodel());
        model
            .args(["--listen", "127.0.0.1:0", "--record"])
            .arg(self.record())
            .args(model_args);
        let (model, model_address) = listening(model, "listening on http://");
        let config = self.dir.path().join("model.toml");
        std::fs::write(
            &config,
            format!("base_url = \"http://{model_address}/v1\"\nmodel = \"testmodel\"\n"),
        )
        .unwrap();
        let (owner, operator) = self.create_room("lab", "testmodel");
        self.run(&["event", "post", "--room", "lab", "--as", "olive", message]);
        let mut serve = self.agentroom(&["serve", "--room", "lab", "--listen", "127.0.0.1:0"]);
        serve.arg("--openai").arg(&config).stderr(Stdio::inherit());
        let (serve, address) = listening(serve, "agentroom listening on http://");
        Started {
            model,
            serve,
            address,
            model_address,
            owner,
            operator,
        }
    }

    /// Every request the model received, as JSON.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The lines of the model's journal, as JSON.
    pub fn journal(&self) -> Vec<Value> {
        json_lines(&self.journal_path())
    }
}

/// The JSON lines of `path`; none when it does not exist yet.
pub fn json_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One HTTP/1.1 request to `address` (`Connection: close`): the status and the body.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let content = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n{content}\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: not HTTP: {head}"));
    (status, body.to_owned())
}

/// `GET path`, which must answer 200 with JSON.
pub fn get(address: &str, path: &str, token: &str) -> Value {
    let (status, body) = request(address, "GET", path, token, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `POST path` with `body`, which must answer 200 with JSON.
pub fn post(address: &str, path: &str, token: &str, body: &Value) -> Value {
    let (status, answer) = request(address, "POST", path, token, Some(body));
    assert_eq!(status, 200, "POST {path} {body}: {answer}");
    serde_json::from_str(&answer).unwrap()
}

/// Polls `probe` until it gives something; fails after [`PATIENCE`], saying `what` it waited
/// for and what the last probe saw.
pub fn wait_until<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match probe() {
            Ok(found) => return found,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "still waiting for {what}: {seen}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the Room's only objective satisfies `done`; returns it.
pub fn wait_for(address: &str, owner: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let list = get(address, "/v1/rooms/lab/objectives", owner);
        if let Some(id) = list["items"][0]["id"].as_str() {
            let objective = get(address, &format!("/v1/rooms/lab/objectives/{id}"), owner);
            if done(&objective) {
                return objective;
            }
            assert!(Instant::now() < deadline, "still: {objective}");
        } else {
            assert!(Instant::now() < deadline, "no objective: {list}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The user message of each request whose system prompt starts with `role`.
pub fn prompts(requests: &[Value], role: &str) -> Vec<String> {
    requests
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(role))
        })
        .map(|r| r["messages"][1]["content"].as_str().unwrap().to_owned())
        .collect()
}

/// README's owner message: what to do, the criteria and the corpus its specialist uses.
pub const README_MESSAGE: &str = "Summarize how the Hamlin runtime recovers after a crash
Criteria:
- recovery-figure: states the 2026 recovery figure \"recovered 4,000 in-flight calls in 1.2 s\"
- cites-sources: every claim cites a source
Corpus:
[s1] https://example.org/hamlin-2026 | Hamlin 2026 benchmark | In 2026 the Hamlin runtime recovered 4,000 in-flight calls in 1.2 s after a SIGKILL.
[s2] https://example.org/leases | Leases in practice | Hamlin fences stale writers with leases that carry a generation.";

/// `agentroom ARGS` against the host at `address` (Room `lab`), as the bearer of `token`.
pub fn operator(address: &str, token: &str, args: &[&str]) -> Output {
    let url = format!("http://{address}");
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .args(["--host", &url, "--room", "lab"])
        .env("AGENTROOM_TOKEN", token)
        .env_remove("AGENTROOM_HOST")
        .env_remove("AGENTROOM_ROOM")
        .env_remove("AGENTROOM_LOG")
        .output()
        .unwrap()
}

/// The owner posts `text` to Room `lab` over REST (202).
pub fn ask(address: &str, owner: &str, text: &str) {
    let (status, answer) = request(
        address,
        "POST",
        "/v1/rooms/lab/events",
        owner,
        Some(&serde_json::json!({"kind": "owner_message", "text": text})),
    );
    assert_eq!(status, 202, "{answer}");
}

/// The reasoner prompt that carries `text` (the owner message posted to ask for it).
pub fn reasoner_prompt_with(site: &ModelSite, text: &str) -> String {
    wait_until(&format!("a reasoner prompt with {text:?}"), || {
        prompts(&site.requests(), "You are the reasoner")
            .into_iter()
            .find(|p| p.contains(text))
            .ok_or_else(|| "none yet".to_owned())
    })
}

/// `agentroom ARGS` with no host, Room or token in the environment (usage and help checks).
pub fn bare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .env_remove("AGENTROOM_HOST")
        .env_remove("AGENTROOM_ROOM")
        .env_remove("AGENTROOM_TOKEN")
        .output()
        .unwrap()
}
