//! The evaluation corpus (`scenarios/eval/*.toml`): one file per scenario, holding the
//! scripted agents' behaviour (the format of `agentroom_agents::scripted::Scenario`: the Room,
//! the reasoner's, specialists' and reviewers' replies) and an `[eval]` table with what the
//! people do, step by step, and the ground truth of every criterion, written from what the
//! agents really deliver, never from a reviewer's verdict.
//!
//! ```toml
//! [eval]
//! same_effects = [["op-a", "op-b"]]     # effect ids that name one effect (optional)
//! [[eval.step]]
//! do = "say"                            # say | correct | raise | pause | resume | readmit
//! key = "summary"                       #   | discard | review | sleep | restart
//! text = "Summarize ..."
//! [[eval.truth]]
//! key = "summary"
//! criteria = [{ criterion = "cites-sources", truth = { delivered = { marker = "source:" } } }]
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentroom_agents::scripted::Scenario;
use agentroom_domain::ids::PrincipalId;
use agentroom_domain::review::Verdict;
use agentroom_eval::{GroundTruth, ObjectiveTruth};
use serde::Deserialize;

/// Why a corpus or one of its scenarios cannot be played.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CorpusError {
    /// The folder or a file could not be read.
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or not the shape of an evaluation scenario.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A step or a truth that cannot be played or judged.
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// `--only` named scenarios the corpus does not have.
    #[error("no scenario named {0} in the corpus")]
    Unknown(String),
    /// Nothing to run.
    #[error("{0} holds no scenario (*.toml)")]
    Empty(PathBuf),
}

/// What a person does at one step of a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Step {
    /// The owner says `text`; the objective it opens is the scenario's `key`. With
    /// `wait = false` the next step comes at once, while calls still run.
    Say {
        key: String,
        text: String,
        #[serde(default = "yes")]
        wait: bool,
    },
    /// The owner corrects the objective `key` (O14).
    Correct { key: String, text: String },
    /// The operator raises the Room's limit by `micros` (B4).
    Raise { micros: i64 },
    /// The owner pauses the objective `key` (D3).
    Pause { key: String },
    /// The owner resumes it.
    Resume { key: String },
    /// The operator readmits every result held for the objective `key` (D4).
    Readmit { key: String },
    /// The operator discards them.
    Discard { key: String },
    /// `by` reviews the latest report of the objective `key` as a person (a Room whose
    /// policy has human reviews), giving every criterion `verdict`, a `met` citing the
    /// report's first source and quoting its first line (R7).
    Review {
        key: String,
        by: PrincipalId,
        verdict: Verdict,
    },
    /// Nothing happens for `ms` milliseconds (calls keep running).
    Sleep { ms: u64 },
    /// The process running the Room is killed with SIGKILL here; a new one recovers it and
    /// plays the rest.
    Restart,
}

const fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalTable {
    #[serde(default)]
    same_effects: Vec<Vec<String>>,
    #[serde(default)]
    step: Vec<Step>,
    #[serde(default)]
    truth: Vec<ObjectiveTruth>,
}

/// One scenario of the corpus.
#[derive(Debug, Clone)]
pub(crate) struct EvalScenario {
    /// Its name: the file's stem.
    pub(crate) name: String,
    /// The scripted agents and the Room.
    pub(crate) agents: Scenario,
    /// What the people do, in order.
    pub(crate) steps: Vec<Step>,
    /// What is true of each criterion.
    pub(crate) truth: GroundTruth,
}

impl EvalScenario {
    /// Reads and checks one scenario file.
    pub(crate) fn read(path: &Path) -> Result<Self, CorpusError> {
        let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks a scenario's text (`path` names it in errors and gives its name).
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, CorpusError> {
        let parse = |message: String| CorpusError::Parse {
            path: path.to_owned(),
            message,
        };
        let invalid = |message: String| CorpusError::Invalid {
            path: path.to_owned(),
            message,
        };
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| invalid("the file name is not UTF-8".to_owned()))?
            .to_owned();
        let mut table: toml::Table = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
        let eval = table.remove("eval").ok_or_else(|| {
            invalid("no [eval] table: steps and ground truth are required".into())
        })?;
        let eval: EvalTable = eval
            .try_into()
            .map_err(|e: toml::de::Error| parse(format!("[eval]: {}", e.message())))?;
        let agents_text = toml::to_string(&table).map_err(|e| parse(e.to_string()))?;
        let agents = Scenario::parse(&agents_text).map_err(|e| parse(e.to_string()))?;
        if agents.room().is_none() {
            return Err(invalid(
                "no [room]: the scenario must set its Room up".into(),
            ));
        }
        if !agents.owner_messages().is_empty() {
            return Err(invalid(
                "[[owner]] is not played by eval: write the owner's messages as `say` steps".into(),
            ));
        }
        let truth = GroundTruth {
            scenario: name.clone(),
            objectives: eval.truth,
            same_effects: eval.same_effects,
        };
        truth
            .check()
            .map_err(|e| invalid(format!("[[eval.truth]]: {e}")))?;
        let said = check_steps(&eval.step).map_err(invalid)?;
        for objective in &truth.objectives {
            if !said.contains(objective.key.as_str()) {
                return Err(invalid(format!(
                    "truth for `{}`, which no `say` step opens",
                    objective.key
                )));
            }
        }
        Ok(Self {
            name,
            agents,
            steps: eval.step,
            truth,
        })
    }

    /// Where the scenario restarts, if it does.
    pub(crate) fn restart_at(&self) -> Option<usize> {
        self.steps.iter().position(|s| *s == Step::Restart)
    }
}

/// Every key a step names is opened by an earlier `say`; keys are said once; at most one
/// restart. Returns the keys said.
fn check_steps(steps: &[Step]) -> Result<BTreeSet<&str>, String> {
    if steps.is_empty() {
        return Err("no [[eval.step]]: nothing happens".to_owned());
    }
    let mut said = BTreeSet::new();
    let mut restarts = 0;
    for (n, step) in steps.iter().enumerate() {
        let named = match step {
            Step::Say { key, text, .. } => {
                if text.trim().is_empty() {
                    return Err(format!("step {}: `say` with no text", n + 1));
                }
                if !said.insert(key.as_str()) {
                    return Err(format!("step {}: key `{key}` is said twice", n + 1));
                }
                None
            }
            Step::Correct { key, .. }
            | Step::Pause { key }
            | Step::Resume { key }
            | Step::Readmit { key }
            | Step::Discard { key }
            | Step::Review { key, .. } => Some(key),
            Step::Raise { micros } => {
                if *micros <= 0 {
                    return Err(format!("step {}: raise by a positive amount", n + 1));
                }
                None
            }
            Step::Sleep { .. } => None,
            Step::Restart => {
                restarts += 1;
                if restarts > 1 {
                    return Err(format!("step {}: a scenario restarts at most once", n + 1));
                }
                None
            }
        };
        if let Some(key) = named
            && !said.contains(key.as_str())
        {
            return Err(format!(
                "step {}: `{key}` is not opened by an earlier `say`",
                n + 1
            ));
        }
    }
    Ok(said)
}

/// The shipped corpus (`scenarios/eval`), compiled in: what `eval` runs without
/// `--scenarios`, so an installed binary runs it from any directory.
const BUILT_IN: &[(&str, &str)] = &[
    (
        "01-honest",
        include_str!("../../../../scenarios/eval/01-honest.toml"),
    ),
    (
        "02-early-claim",
        include_str!("../../../../scenarios/eval/02-early-claim.toml"),
    ),
    (
        "03-loops",
        include_str!("../../../../scenarios/eval/03-loops.toml"),
    ),
    (
        "04-self-approval",
        include_str!("../../../../scenarios/eval/04-self-approval.toml"),
    ),
    (
        "05-wrong-capability",
        include_str!("../../../../scenarios/eval/05-wrong-capability.toml"),
    ),
    (
        "06-budget-raise",
        include_str!("../../../../scenarios/eval/06-budget-raise.toml"),
    ),
    (
        "07-crash-restart",
        include_str!("../../../../scenarios/eval/07-crash-restart.toml"),
    ),
    (
        "08-lost-reply",
        include_str!("../../../../scenarios/eval/08-lost-reply.toml"),
    ),
    (
        "09-result-after-pause",
        include_str!("../../../../scenarios/eval/09-result-after-pause.toml"),
    ),
    (
        "10-unknown-verdict",
        include_str!("../../../../scenarios/eval/10-unknown-verdict.toml"),
    ),
    (
        "11-owner-correction",
        include_str!("../../../../scenarios/eval/11-owner-correction.toml"),
    ),
    (
        "12-two-objectives",
        include_str!("../../../../scenarios/eval/12-two-objectives.toml"),
    ),
    (
        "13-missing-fact",
        include_str!("../../../../scenarios/eval/13-missing-fact.toml"),
    ),
    (
        "14-repair-after-failure",
        include_str!("../../../../scenarios/eval/14-repair-after-failure.toml"),
    ),
    (
        "15-format-error",
        include_str!("../../../../scenarios/eval/15-format-error.toml"),
    ),
    (
        "16-single-writer",
        include_str!("../../../../scenarios/eval/16-single-writer.toml"),
    ),
];

/// The shipped corpus; `only` keeps the named ones.
pub(crate) fn built_in(only: &[String]) -> Result<Vec<EvalScenario>, CorpusError> {
    let mut scenarios = Vec::new();
    for (name, text) in BUILT_IN {
        let path = PathBuf::from(format!("scenarios/eval/{name}.toml"));
        scenarios.push(EvalScenario::parse(&path, text)?);
    }
    keep(scenarios, only)
}

fn keep(
    mut scenarios: Vec<EvalScenario>,
    only: &[String],
) -> Result<Vec<EvalScenario>, CorpusError> {
    for name in only {
        if !scenarios.iter().any(|s| &s.name == name) {
            return Err(CorpusError::Unknown(name.clone()));
        }
    }
    if !only.is_empty() {
        scenarios.retain(|s| only.contains(&s.name));
    }
    Ok(scenarios)
}

/// Reads every `*.toml` of `dir`, sorted by name; `only` keeps the named ones.
pub(crate) fn read_corpus(dir: &Path, only: &[String]) -> Result<Vec<EvalScenario>, CorpusError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CorpusError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CorpusError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(CorpusError::Empty(dir.to_owned()));
    }
    let mut scenarios = Vec::new();
    for path in paths {
        scenarios.push(EvalScenario::read(&path)?);
    }
    keep(scenarios, only)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const ROOM: &str = r#"
[room]
owner = "olive"
members = { sam = ["specialist"] }
bindings = { research = "sam" }
"#;

    fn parse(eval: &str) -> Result<EvalScenario, CorpusError> {
        EvalScenario::parse(
            Path::new("scenarios/eval/01-x.toml"),
            &format!("{ROOM}{eval}"),
        )
    }

    #[test]
    fn a_scenario_reads_its_steps_and_truth() {
        let s = parse(
            r#"
[eval]
[[eval.step]]
do = "say"
key = "main"
text = "hello"
[[eval.step]]
do = "pause"
key = "main"
[[eval.truth]]
key = "main"
criteria = [{ criterion = "c", truth = "met" }]
"#,
        )
        .unwrap();
        assert_eq!(s.name, "01-x");
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.truth.objectives[0].key, "main");
        assert_eq!(s.restart_at(), None);
    }

    #[test]
    fn a_step_naming_an_unsaid_key_is_refused() {
        let e = parse(
            r#"
[eval]
[[eval.step]]
do = "pause"
key = "main"
"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("not opened by an earlier `say`"),
            "{e}"
        );
    }

    #[test]
    fn a_truth_without_its_say_is_refused() {
        let e = parse(
            r#"
[eval]
[[eval.step]]
do = "say"
key = "a"
text = "hello"
[[eval.truth]]
key = "b"
criteria = [{ criterion = "c", truth = "met" }]
"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("which no `say` step opens"), "{e}");
    }

    #[test]
    fn an_unknown_step_or_field_is_refused_naming_it() {
        let e = parse("[eval]\n[[eval.step]]\ndo = \"dance\"\n").unwrap_err();
        assert!(e.to_string().contains("dance"), "{e}");
        let e = parse("[eval]\n[[eval.step]]\ndo = \"sleep\"\nms = 1\nextra = 2\n").unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
    }

    #[test]
    fn missing_eval_table_and_owner_messages_are_refused() {
        let e = parse("").unwrap_err();
        assert!(e.to_string().contains("no [eval] table"), "{e}");
        let e = parse("[[owner]]\ntext = \"x\"\n[eval]\n[[eval.step]]\ndo = \"restart\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("`say` steps"), "{e}");
    }

    #[test]
    fn the_shipped_corpus_reads_whole() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/eval");
        let corpus = read_corpus(&dir, &[]).unwrap();
        assert!(
            corpus.len() >= 16,
            "issue 19 asks for at least 16 scenarios"
        );
        let e = read_corpus(&dir, &["nope".to_owned()]).unwrap_err();
        assert!(matches!(e, CorpusError::Unknown(_)), "{e}");
        // The compiled-in corpus is the shipped folder, file for file.
        let built_in = built_in(&[]).unwrap();
        assert_eq!(
            built_in.iter().map(|s| &s.name).collect::<Vec<_>>(),
            corpus.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }
}
