//! `agentroom eval` end to end (issue 19): the real binary plays scenarios of the corpus in
//! each mode on a real store, a restarting scenario across a SIGKILL, and a campaign of two
//! `eval` processes shares one budget pool on PostgreSQL without passing its ceiling (B8).
//! CI runs one scenario in each mode; the whole corpus runs outside CI (README).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::path::{Path, PathBuf};

use agentroom_ports::PoolStore;
use agentroom_ports::domain::ids::PoolId;
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_store_postgres::PgRooms;
use support::{Database, agentroom, migrate_up, ok};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/eval")
}

fn corpus_file(name: &str) -> PathBuf {
    corpus().join(name)
}

fn eval(root: &Path, extra: &[&str]) -> std::process::Command {
    let corpus = corpus();
    let mut command = agentroom(&["eval", "--scenarios"]);
    command.arg(&corpus).arg("--out").arg(root.join("report"));
    command.args(extra);
    command
}

#[test]
fn eval_plays_one_scenario_in_each_mode_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let out = eval(dir.path(), &["--only", "01-honest", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let stdout = ok(&out);
    for mode in ["sessions", "routing", "planner"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("| {mode} | 1/1 |"))),
            "{mode} missing:\n{stdout}"
        );
    }
    assert!(root.join("planning.db").exists());
    // The report, read back: the trace of each mode evaluated against the ground truth.
    let report = dir.path().join("report");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    let run = |mode: &str| {
        json["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metrics"]["mode"] == mode)
            .unwrap_or_else(|| panic!("no {mode} run"))["metrics"]
            .clone()
    };
    let planner = run("planner");
    assert_eq!(planner["objectives_completed"], 1);
    assert_eq!(planner["false_completions"], 0, "{planner}");
    assert_eq!(planner["duplicate_confirmed_effects"], 0);
    // The baselines let one agent answer alone: the gathered source never reaches the answer.
    for mode in ["sessions", "routing"] {
        let m = run(mode);
        assert_eq!(m["false_completions"], 1, "{mode}: {m}");
        assert!(m["cost_micros"].as_i64().unwrap() < planner["cost_micros"].as_i64().unwrap());
    }
    let markdown = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        markdown.contains("## Where the planner costs more"),
        "{markdown}"
    );
    let svg = std::fs::read_to_string(report.join("report.svg")).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
}

#[test]
fn eval_refuses_to_report_a_holdout_whose_corpus_changed_after_freezing() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::copy(
        corpus_file("16-single-writer.toml"),
        corpus.join("16-single-writer.toml"),
    )
    .unwrap();
    let manifest = dir.path().join("holdout.json");
    let frozen = agentroom(&["eval", "--scenarios"])
        .arg(&corpus)
        .arg("--freeze")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(ok(&frozen).contains("froze"));
    // Unchanged: the holdout runs and reports with its hashes.
    let run = |out: &str| {
        agentroom(&["eval", "--modes", "routing", "--scenarios"])
            .arg(&corpus)
            .arg("--holdout")
            .arg(&manifest)
            .arg("--root")
            .arg(dir.path().join(out).join("data"))
            .arg("--out")
            .arg(dir.path().join(out).join("report"))
            .output()
            .unwrap()
    };
    ok(&run("first"));
    let md = std::fs::read_to_string(dir.path().join("first/report/report.md")).unwrap();
    assert!(md.contains("- holdout: "), "{md}");
    // A tuned scenario: refused, naming it, and nothing reported.
    let path = corpus.join("16-single-writer.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("charge_micros = 600", "charge_micros = 500"),
    )
    .unwrap();
    let out = run("second");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("corpus/16-single-writer.toml changed"),
        "{stderr}"
    );
    assert!(!dir.path().join("second/report").exists());
}

#[test]
fn eval_restarting_scenario_recovers_after_sigkill_without_repeating_the_call_d2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let out = eval(
        dir.path(),
        &["--only", "07-crash-restart", "--modes", "planner", "--root"],
    )
    .arg(&root)
    .output()
    .unwrap();
    let stdout = ok(&out);
    // Completed, no false completion, no duplicate effect.
    assert!(
        stdout.contains("| planner | 1/1 | 0 | 0 | 0 | 0 |"),
        "{stdout}"
    );
    // The journal holds each operation once: the killed process's call was reconciled from
    // it, never run again.
    let journal = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("journal-"))
        .expect("the run's journal");
    let text = std::fs::read_to_string(journal).unwrap();
    let gathers = text
        .lines()
        .filter(|l| l.contains("\"role\":\"specialist\"") && l.contains("/gather\""))
        .count();
    assert_eq!(gathers, 1, "the research ran once:\n{text}");
}

#[test]
fn eval_refuses_bad_input_with_a_clear_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--modes", "swarm"], "unknown mode `swarm`"),
        (&["--only", "99-nope"], "no scenario named 99-nope"),
        (&["--campaign", "Not A Pool"], "pool id"),
    ];
    for (args, expected) in cases {
        let root = dir.path().join("data");
        let out = eval(dir.path(), args)
            .arg("--root")
            .arg(&root)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !dir.path().join("report").exists(),
            "{args:?} wrote a report"
        );
    }
    let out = agentroom(&["eval", "--scenarios"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing"),
        "{out:?}"
    );
}

/// `--openai`: the deterministic OpenAI-compatible test model, which answers only from what
/// it is sent, serves every role in place of the scripted agents; the runs, their trace and
/// the report are the same machinery.
#[test]
fn eval_with_a_model_serves_every_role_over_http_and_reports() {
    use support::model::{listening, testmodel};
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("requests.jsonl");
    let mut model = std::process::Command::new(testmodel());
    model
        .args(["--listen", "127.0.0.1:0", "--record"])
        .arg(&record);
    let (_model, address) = listening(model, "listening on http://");
    let config = dir.path().join("model.toml");
    std::fs::write(
        &config,
        format!("base_url = \"http://{address}/v1\"\nmodel = \"testmodel\"\n"),
    )
    .unwrap();
    let out = eval(
        dir.path(),
        &[
            "--only",
            "16-single-writer",
            "--modes",
            "routing,planner",
            "--openai",
        ],
    )
    .arg(&config)
    .arg("--root")
    .arg(dir.path().join("data"))
    .output()
    .unwrap();
    ok(&out);
    let requests = std::fs::read_to_string(&record).unwrap();
    assert!(
        requests.lines().count() >= 2,
        "the model was called: {requests}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("report/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 2);
    let agents = json["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[0] == "agents")
        .unwrap()
        .clone();
    assert!(
        agents[1].as_str().unwrap().contains("OpenAI-compatible"),
        "{agents}"
    );
    for run in json["runs"].as_array().unwrap() {
        assert!(run["calls"]["reasoner"].as_u64().unwrap() >= 1, "{run}");
        assert!(run["metrics"]["cost_micros"].as_i64().unwrap() > 0, "{run}");
    }
}

/// B8 across processes: two `eval` processes of one campaign draw on one pool whose ceiling
/// is below what both would spend; together they never pass it, and its log replays.
#[test]
fn eval_campaign_of_two_processes_never_exceeds_its_pool_ceiling_b8() {
    let database = Database::create();
    let url = database.url();
    migrate_up(&url);
    let limit: i64 = 60_000;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let children: Vec<_> = dirs
        .iter()
        .zip(["camp-a", "camp-b"])
        .map(|(dir, run)| {
            eval(
                dir.path(),
                &[
                    "--only",
                    "01-honest,12-two-objectives",
                    "--campaign",
                    "campaign",
                    "--campaign-limit-micros",
                    &limit.to_string(),
                    "--run-id",
                    run,
                    "--database-url",
                    &url,
                ],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for child in children {
        ok(&child.wait_with_output().unwrap());
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = PgRooms::connect(&url).await.unwrap();
        let pool_id = PoolId::parse("campaign").unwrap();
        let pool = store.load_pool(&pool_id).await.unwrap().unwrap().ledger;
        let b = pool.balances();
        assert_eq!(b.limit.micros(), limit);
        assert!(b.available.micros() >= 0, "pool overspent: {b:?}");
        assert!(b.spent.micros() + b.reserved.micros() <= limit, "{b:?}");
        assert_eq!(pool.overrun(), None, "{b:?}");
        assert!(
            b.spent.micros() > limit / 2,
            "both processes spent from it: {b:?}"
        );
        let log = store.pool_log(&pool_id).await.unwrap();
        let entries: Vec<LedgerEntry> = log.iter().map(|row| row.entry.clone()).collect();
        assert_eq!(BudgetLedger::replay(&entries).unwrap(), pool);
    });
}
