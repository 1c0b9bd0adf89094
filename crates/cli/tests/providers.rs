//! A model per role (issue 16), end to end with the real binaries: `agentroom providers check`
//! and `agentroom serve --openai` against `agentroom-testmodel` (a separate OpenAI-compatible
//! HTTP server process that records every request body it gets), with a providers file whose
//! reasoner, specialists and reviewer use three different models on two named endpoints.
//!
//! - `providers check` sends one tiny request per distinct role, endpoint and model and
//!   prints its latency, usage and charge (B3 at the policy folder's prices, each component
//!   rounded up, B6); a failure prints its class and the command exits non-zero.
//! - `serve` says at start which endpoint and model serve each role and their quotes, and
//!   every request of a role carries that role's model while an objective runs to an
//!   approving review.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::Running;
use support::model::{listening, testmodel, wait_for};
use tempfile::TempDir;

/// The test's models and their prices in micros per million tokens (input, output): each
/// component has a fraction of a micro per token, so rounding up shows. `tm-reasoner` is the
/// priciest in both, so a Room created with it covers every role's model.
const MODELS: [(&str, u64, u64); 3] = [
    ("tm-reasoner", 3_500_000, 5_500_000),
    ("tm-specialist", 1_500_000, 2_500_000),
    ("tm-reviewer", 2_000_000, 3_500_000),
];

/// The owner's message (the test model's conventions: first line, criteria, corpus).
const MESSAGE: &str = "Summarize how the Hamlin runtime recovers after a crash
Criteria:
- recovery-figure: states the 2026 recovery figure \"recovered 4,000 in-flight calls in 1.2 s\"
- cites-sources: every claim cites a source
Corpus:
[s1] https://example.org/hamlin-2026 | Hamlin 2026 benchmark | In 2026 the Hamlin runtime recovered 4,000 in-flight calls in 1.2 s after a SIGKILL.
[s2] https://example.org/leases | Leases in practice | Hamlin fences stale writers with leases that carry a generation.";

/// A temporary folder with a policy folder whose prices add the test's models, and the test
/// model running with `--record`.
struct Site {
    dir: TempDir,
    /// Killed when the site is dropped.
    _model: Running,
    model_address: String,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("policies");
        std::fs::create_dir(&policies).unwrap();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
        for entry in std::fs::read_dir(&shipped).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                std::fs::copy(&path, policies.join(path.file_name().unwrap())).unwrap();
            }
        }
        let mut prices = std::fs::OpenOptions::new()
            .append(true)
            .open(policies.join("prices.toml"))
            .unwrap();
        for (model, input, output) in MODELS {
            writeln!(
                prices,
                "\n[models.{model}]\ninput_micros_per_mtok = {input}\noutput_micros_per_mtok = {output}"
            )
            .unwrap();
        }
        let mut model = Command::new(testmodel());
        model
            .args(["--listen", "127.0.0.1:0", "--record"])
            .arg(dir.path().join("requests.jsonl"));
        let (model, model_address) = listening(model, "listening on http://");
        Site {
            dir,
            _model: model,
            model_address,
        }
    }

    fn policies(&self) -> PathBuf {
        self.dir.path().join("policies")
    }

    /// Writes a providers file named `name` and returns its path.
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The per-role configuration: two endpoint names for the one test model, the reasoner
    /// and the default specialist on `local`, specialist `sam` and the reviewer on `proxy`.
    fn per_role(&self) -> PathBuf {
        let base = format!("http://{}/v1", self.model_address);
        self.config(
            "providers.toml",
            &format!(
                "[endpoints.local]\nbase_url = \"{base}\"\n\
                 [endpoints.proxy]\nbase_url = \"{base}\"\napi_key_env = \"AGENTROOM_TEST_PROXY_KEY\"\n\
                 [models]\n\
                 default = {{ endpoint = \"local\", model = \"tm-specialist\" }}\n\
                 reasoner = {{ endpoint = \"local\", model = \"tm-reasoner\" }}\n\
                 reviewer = {{ endpoint = \"proxy\", model = \"tm-reviewer\" }}\n\
                 [models.specialists]\n\
                 sam = {{ endpoint = \"proxy\", model = \"tm-specialist\" }}\n"
            ),
        )
    }

    /// `agentroom ARGS` run from the site's folder, with none of the environment a developer
    /// may set, and the proxy's key.
    fn agentroom(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("AGENTROOM_CRASH_AT")
            .env_remove("AGENTROOM_DATABASE_URL")
            .env_remove("AGENTROOM_LOG")
            .env_remove("AGENTROOM_LOG_FORMAT")
            .env_remove("AGENTROOM_TOKEN")
            .env("AGENTROOM_TEST_PROXY_KEY", "sk-test-proxy");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.agentroom(args).output().unwrap();
        assert!(
            out.status.success(),
            "agentroom {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `agentroom providers check CONFIG --policies DIR`.
    fn check(&self, config: &Path) -> Output {
        self.agentroom(&["providers", "check"])
            .arg(config)
            .arg("--policies")
            .arg(self.policies())
            .output()
            .unwrap()
    }

    /// Every request the model received, as JSON.
    fn requests(&self) -> Vec<Value> {
        match std::fs::read_to_string(self.dir.path().join("requests.jsonl")) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{e}"),
        }
    }
}

/// The role a request was made for, by its system prompt's first words.
fn role_of(request: &Value) -> &'static str {
    let system = request["messages"][0]["content"].as_str().unwrap();
    [
        ("You are the reasoner", "reasoner"),
        ("You are a specialist", "specialist"),
        ("You are a reviewer", "reviewer"),
    ]
    .into_iter()
    .find_map(|(words, role)| system.starts_with(words).then_some(role))
    .unwrap_or_else(|| panic!("no role: {system}"))
}

/// What `tokens` cost at `micros_per_mtok`, rounded up (B6), computed here on its own.
fn cost(tokens: u64, micros_per_mtok: u64) -> u64 {
    (tokens * micros_per_mtok).div_ceil(1_000_000)
}

fn price_of(model: &str) -> (u64, u64) {
    MODELS
        .iter()
        .find(|(m, ..)| *m == model)
        .map(|&(_, input, output)| (input, output))
        .unwrap()
}

/// Reads `N prompt + M completion tokens, charged $X (C micros)` from an `ok` line.
fn usage_and_charge(line: &str) -> (u64, u64, u64) {
    let number_before = |marker: &str| -> u64 {
        let at = line
            .find(marker)
            .unwrap_or_else(|| panic!("no `{marker}`: {line}"));
        line[..at]
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|e| panic!("{marker}: {e}: {line}"))
    };
    (
        number_before(" prompt + "),
        number_before(" completion tokens"),
        number_before(" micros)"),
    )
}

#[test]
fn b6_providers_check_sends_one_tiny_call_per_role_endpoint_and_model_and_prices_its_usage() {
    let site = Site::new();
    let config = site.per_role();
    let out = site.check(&config);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("sk-test-proxy") && !stderr.contains("sk-test-proxy"));

    let url = format!("http://{}/v1/chat/completions", site.model_address);
    let lines: Vec<&str> = stdout.lines().collect();
    let expected = [
        ("reasoner", "local", "tm-reasoner"),
        ("specialist sam", "proxy", "tm-specialist"),
        ("specialist (default)", "local", "tm-specialist"),
        ("reviewer", "proxy", "tm-reviewer"),
    ];
    assert_eq!(lines.len(), expected.len() + 1, "{stdout}");
    assert_eq!(lines[4], "4 provider checks: all ok");
    let requests = site.requests();
    assert_eq!(requests.len(), 4, "one request per check: {requests:?}");
    for ((who, endpoint, model), (line, request)) in
        expected.iter().zip(lines.iter().zip(&requests))
    {
        let head = format!("{who}: endpoint {endpoint} ({url}), model {model}: ok in ");
        assert!(line.starts_with(&head), "{line}\nexpected {head}");
        assert!(line.contains(" ms, "), "{line}");
        // The request: that model, in that role's words, asking for little.
        assert_eq!(request["model"], *model, "{request}");
        assert_eq!(role_of(request), who.split(' ').next().unwrap());
        assert!(request["max_tokens"].as_u64().unwrap() <= 16, "{request}");
        // The usage is the test model's (bytes / 4, rounded up) and its charge is B3's.
        let (prompt, completion, charged) = usage_and_charge(line);
        let bytes: usize = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().len())
            .sum();
        assert_eq!(prompt, bytes.div_ceil(4) as u64, "{line}");
        let (input, output) = price_of(model);
        assert_eq!(
            charged,
            cost(prompt, input) + cost(completion, output),
            "{line}"
        );
    }
}

#[test]
fn providers_check_names_the_class_of_each_failure_and_exits_non_zero() {
    let site = Site::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = closed.local_addr().unwrap();
    drop(closed);
    let config = site.config(
        "failing.toml",
        &format!(
            "[endpoints.good]\nbase_url = \"http://{model}/v1\"\n\
             [endpoints.wrong-path]\nbase_url = \"http://{model}/v2\"\n\
             [endpoints.down]\nbase_url = \"http://{nobody}/v1\"\n\
             [models]\n\
             reasoner = {{ endpoint = \"good\", model = \"tm-reasoner\" }}\n\
             default = {{ endpoint = \"wrong-path\", model = \"tm-specialist\" }}\n\
             reviewer = {{ endpoint = \"down\", model = \"tm-reviewer\" }}\n",
            model = site.model_address
        ),
    );
    let out = site.check(&config);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].starts_with("reasoner: endpoint good ") && lines[0].contains(": ok in "));
    assert!(
        lines[1].starts_with("specialist (default): endpoint wrong-path ")
            && lines[1].contains(": refused in ")
            && lines[1].contains("404"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("reviewer: endpoint down ")
            && lines[2].contains(": not sent in ")
            && lines[2].contains("nothing was sent"),
        "{}",
        lines[2]
    );
    assert!(stderr.contains("2 of 3 provider checks failed"), "{stderr}");

    // A configuration that cannot be built sends nothing and names the field.
    let before = site.requests().len();
    let unpriced = site.config(
        "unpriced.toml",
        &format!(
            "[endpoints.good]\nbase_url = \"http://{}/v1\"\n\
             [models]\ndefault = {{ endpoint = \"good\", model = \"tm-reasoner\" }}\n\
             reviewer = {{ endpoint = \"good\", model = \"tm-unpriced\" }}\n",
            site.model_address
        ),
    );
    let out = site.check(&unpriced);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr.contains("models.reviewer.model: model `tm-unpriced` has no price in prices.toml"),
        "{stderr}"
    );
    assert_eq!(site.requests().len(), before, "nothing was sent");
}

#[test]
fn b6_serve_calls_each_roles_own_model_and_says_which_at_start() {
    let site = Site::new();
    let config = site.per_role();
    let policies = site.policies();
    let policies = policies.to_str().unwrap();
    let root = site.dir.path().join("data");
    let root = root.to_str().unwrap();
    // The Room's quotes must cover the priciest model of each role: tm-reasoner's do.
    let created = site.run(&[
        "room",
        "create",
        "--root",
        root,
        "--policies",
        policies,
        "--room",
        "lab",
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
        "tm-reasoner",
        "--limit-micros",
        "5000000",
    ]);
    let printed = String::from_utf8(created.stdout).unwrap();
    let owner = printed
        .lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token: {printed}"))
        .trim()
        .to_owned();
    site.run(&[
        "event", "post", "--root", root, "--room", "lab", "--as", "olive", MESSAGE,
    ]);
    let stderr_file = site.dir.path().join("serve.stderr");
    let mut serve = site.agentroom(&[
        "serve",
        "--root",
        root,
        "--policies",
        policies,
        "--room",
        "lab",
        "--listen",
        "127.0.0.1:0",
        "--openai",
    ]);
    serve
        .arg(&config)
        .stderr(std::fs::File::create(&stderr_file).unwrap());
    let (_serve, address) = listening(serve, "agentroom listening on http://");

    let objective = wait_for(&address, &owner, |o| {
        ["completed", "waiting_for_owner", "stopped_for_attention"]
            .contains(&o["status"].as_str().unwrap_or_default())
    });
    assert_eq!(objective["status"], "completed", "{objective}");

    // Every request of a role carried that role's model.
    let requests = site.requests();
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for request in &requests {
        let role = role_of(request);
        let model = match role {
            "reasoner" => "tm-reasoner",
            "specialist" => "tm-specialist",
            _ => "tm-reviewer",
        };
        assert_eq!(request["model"], model, "a {role} request: {request}");
        *seen.entry(role).or_default() += 1;
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        ["reasoner", "reviewer", "specialist"],
        "every role was called: {seen:?}"
    );

    // What `serve` said at start: each role's endpoint, URL, model and quote (at the copied
    // bounds: 32,000 tokens in; 4,000, 8,000 and 2,000 out), and no key.
    let said = std::fs::read_to_string(&stderr_file).unwrap();
    let url = format!("http://{}/v1/chat/completions", site.model_address);
    for line in [
        // ⌈32,000 × 3.5⌉ + ⌈4,000 × 5.5⌉ = 112,000 + 22,000.
        format!(
            "agentroom serves reasoner: model tm-reasoner on endpoint local ({url}), quote $0.134000 (134000 micros) a call"
        ),
        // 32,000 × 1.5 + 8,000 × 2.5 = 48,000 + 20,000.
        format!(
            "agentroom serves specialist sam: model tm-specialist on endpoint proxy ({url}), quote $0.068000 (68000 micros) a call"
        ),
        format!(
            "agentroom serves specialist (default): model tm-specialist on endpoint local ({url}), quote $0.068000 (68000 micros) a call"
        ),
        // 32,000 × 2 + 2,000 × 3.5 = 64,000 + 7,000.
        format!(
            "agentroom serves reviewer: model tm-reviewer on endpoint proxy ({url}), quote $0.071000 (71000 micros) a call"
        ),
    ] {
        assert!(said.lines().any(|l| l == line), "missing {line}\n{said}");
    }
    assert!(
        said.contains(
            "a Room's quotes must be at least: reasoner $0.134000, specialist $0.068000, reviewer $0.071000"
        ),
        "{said}"
    );
    assert!(!said.contains("sk-test-proxy"), "{said}");
}
