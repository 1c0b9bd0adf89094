//! The scenario file (TOML): a Room to set up, what its owner says, and the replies the
//! scripted reasoner, specialists and reviewers give, each with its charge.
//!
//! ```toml
//! description = "one objective, reviewed once"
//!
//! [room]                      # optional: who is in the Room and who provides what
//! owner = "olive"
//! limit_micros = 1_000_000
//! members = { sam = ["specialist"], rita = ["reviewer"] }
//! bindings = { research = "sam" }
//!
//! [[owner]]                   # what the owner says, in order
//! text = "Summarize the state of the art"
//!
//! [[reasoner]]                # replies to reasoner calls, in order
//! charge_micros = 900         # omitted: the reply reports no usage (B3: the whole reservation)
//! [reasoner.reply]            # the domain's ProposalKind: answer | plan | challenge
//! kind = "answer"
//! text = "UTC"
//!
//! [[specialist]]              # replies per task key, in order
//! task = "gather"
//! artifacts = [{ name = "notes", content = "..." }]
//!
//! [[reviewer]]                # replies per report version (or any), in order
//! verdicts = [{ criterion = "cites-sources", verdict = "met", evidence = "..." }]
//! ```
//!
//! Each call takes the first reply of its role that matches it and is not used up; a reply
//! with `repeat = true` is never used up (it answers every later matching call). Misbehaving
//! agents are written as data: a reasoner reply that repeats (replans forever), `stale_by`
//! (binds an objective revision older than the one it was shown), a plan whose criteria differ
//! from the frozen ones (weakens a criterion), `artifacts = []` (claims done without a
//! contribution), verdicts that leave a criterion out, a reviewer `principal` who authored the
//! work, `lose_reply = true` (the specialist ran and recorded it, but the reply is lost).
//! A slow specialist is `reply_after_ms = N`: it runs and records the task at once, and its
//! reply comes back N milliseconds later (a call a graceful stop may have to give up on).

use std::collections::BTreeMap;
use std::path::Path;

use agentroom_ports::domain::engine::{Charge, ProposalKind};
use agentroom_ports::domain::ids::{PrincipalId, TaskKey};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::review::{Artifact, CriterionVerdict, Source};
use agentroom_ports::domain::room::Role;
use serde::Deserialize;

/// Why a scenario was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("scenario {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Not TOML, or not the shape of a scenario (the message names line and column).
    #[error("scenario: {0}")]
    Parse(String),
    /// An entry that cannot be played.
    #[error("scenario: {entry}: {problem}")]
    Invalid {
        /// The entry, e.g. `reasoner[2]`.
        entry: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The Room a scenario runs in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomSpec {
    /// The owner.
    pub owner: PrincipalId,
    /// The budget limit in micros.
    #[serde(default = "default_limit_micros")]
    pub limit_micros: i64,
    /// The other members and their roles.
    #[serde(default)]
    pub members: BTreeMap<PrincipalId, Vec<Role>>,
    /// Which principal provides each capability.
    #[serde(default)]
    pub bindings: BTreeMap<String, PrincipalId>,
    /// The Room policy, as the text of a `room.toml` (the shipped defaults when omitted).
    #[serde(default)]
    pub policy: Option<String>,
}

const fn default_limit_micros() -> i64 {
    10_000_000
}

/// One thing the owner says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnerMessage {
    /// The message.
    pub text: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    room: Option<RoomSpec>,
    #[serde(default)]
    owner: Vec<OwnerMessage>,
    #[serde(default)]
    reasoner: Vec<ReasonerFile>,
    #[serde(default)]
    specialist: Vec<SpecialistFile>,
    #[serde(default)]
    reviewer: Vec<ReviewerFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonerFile {
    #[serde(default)]
    reply: Option<ProposalKind>,
    #[serde(default)]
    format_error: Option<String>,
    #[serde(default)]
    charge_micros: Option<i64>,
    #[serde(default)]
    stale_by: u64,
    #[serde(default)]
    repeat: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecialistFile {
    task: TaskKey,
    #[serde(default)]
    principal: Option<PrincipalId>,
    #[serde(default)]
    artifacts: Option<Vec<Artifact>>,
    #[serde(default)]
    sources: Vec<Source>,
    #[serde(default = "yes")]
    cite_deps: bool,
    #[serde(default)]
    failure: Option<String>,
    #[serde(default)]
    charge_micros: Option<i64>,
    #[serde(default)]
    lose_reply: bool,
    #[serde(default)]
    reply_after_ms: u64,
    #[serde(default)]
    repeat: bool,
}

const fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewerFile {
    #[serde(default)]
    report_version: Option<u32>,
    #[serde(default)]
    principal: Option<PrincipalId>,
    #[serde(default)]
    verdicts: Option<Vec<CriterionVerdict>>,
    #[serde(default)]
    format_error: Option<String>,
    #[serde(default)]
    charge_micros: Option<i64>,
    #[serde(default)]
    repeat: bool,
}

/// What a scripted reasoner reply says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReasonerSays {
    Proposal(ProposalKind),
    FormatError(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReasonerEntry {
    pub(crate) says: ReasonerSays,
    pub(crate) charge: Charge,
    pub(crate) stale_by: u64,
    pub(crate) repeat: bool,
}

/// What a scripted specialist reply says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SpecialistSays {
    Contribution {
        artifacts: Vec<Artifact>,
        sources: Vec<Source>,
        cite_deps: bool,
    },
    Failure(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpecialistEntry {
    pub(crate) task: TaskKey,
    pub(crate) principal: Option<PrincipalId>,
    pub(crate) says: SpecialistSays,
    pub(crate) charge: Charge,
    pub(crate) lose_reply: bool,
    /// How long after running and recording the task the reply comes back (a slow call).
    pub(crate) reply_after: std::time::Duration,
    pub(crate) repeat: bool,
}

/// What a scripted reviewer reply says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReviewerSays {
    Verdicts(Vec<CriterionVerdict>),
    FormatError(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReviewerEntry {
    pub(crate) report_version: Option<u32>,
    pub(crate) principal: Option<PrincipalId>,
    pub(crate) says: ReviewerSays,
    pub(crate) charge: Charge,
    pub(crate) repeat: bool,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    description: String,
    room: Option<RoomSpec>,
    owner: Vec<OwnerMessage>,
    pub(crate) reasoner: Vec<ReasonerEntry>,
    pub(crate) specialist: Vec<SpecialistEntry>,
    pub(crate) reviewer: Vec<ReviewerEntry>,
}

fn invalid(entry: String, problem: &str) -> ScenarioError {
    ScenarioError::Invalid {
        entry,
        problem: problem.to_owned(),
    }
}

fn charge(entry: &str, micros: Option<i64>) -> Result<Charge, ScenarioError> {
    match micros {
        None => Ok(Charge::NoUsage),
        Some(m) if m < 0 => Err(invalid(
            entry.to_owned(),
            "charge_micros must not be negative",
        )),
        Some(m) => Ok(Charge::Actual(UsdMicros::new(m))),
    }
}

impl Scenario {
    /// Parses and validates a scenario: every reply says exactly one thing, charges are not
    /// negative, unknown keys are refused.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let file: ScenarioFile =
            toml::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        if let Some(room) = &file.room
            && room.limit_micros < 0
        {
            return Err(invalid("room".into(), "limit_micros must not be negative"));
        }
        let reasoner = file
            .reasoner
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let entry = format!("reasoner[{i}]");
                let says = match (r.reply, r.format_error) {
                    (Some(reply), None) => ReasonerSays::Proposal(reply),
                    (None, Some(detail)) => ReasonerSays::FormatError(detail),
                    _ => return Err(invalid(entry, "give exactly one of reply or format_error")),
                };
                Ok(ReasonerEntry {
                    says,
                    charge: charge(&entry, r.charge_micros)?,
                    stale_by: r.stale_by,
                    repeat: r.repeat,
                })
            })
            .collect::<Result<_, _>>()?;
        let specialist = file
            .specialist
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let entry = format!("specialist[{i}] (task {})", s.task);
                let says = match (s.artifacts, s.failure) {
                    (Some(artifacts), None) => SpecialistSays::Contribution {
                        artifacts,
                        sources: s.sources,
                        cite_deps: s.cite_deps,
                    },
                    (None, Some(reason)) => SpecialistSays::Failure(reason),
                    _ => return Err(invalid(entry, "give exactly one of artifacts or failure")),
                };
                Ok(SpecialistEntry {
                    charge: charge(&entry, s.charge_micros)?,
                    task: s.task,
                    principal: s.principal,
                    says,
                    lose_reply: s.lose_reply,
                    reply_after: std::time::Duration::from_millis(s.reply_after_ms),
                    repeat: s.repeat,
                })
            })
            .collect::<Result<_, _>>()?;
        let reviewer = file
            .reviewer
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let entry = format!("reviewer[{i}]");
                let says = match (r.verdicts, r.format_error) {
                    (Some(verdicts), None) => ReviewerSays::Verdicts(verdicts),
                    (None, Some(detail)) => ReviewerSays::FormatError(detail),
                    _ => {
                        return Err(invalid(
                            entry,
                            "give exactly one of verdicts or format_error",
                        ));
                    }
                };
                Ok(ReviewerEntry {
                    charge: charge(&entry, r.charge_micros)?,
                    report_version: r.report_version,
                    principal: r.principal,
                    says,
                    repeat: r.repeat,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            description: file.description,
            room: file.room,
            owner: file.owner,
            reasoner,
            specialist,
            reviewer,
        })
    }

    /// Reads and parses the scenario file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// What the scenario shows.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The Room it runs in, when it says.
    pub fn room(&self) -> Option<&RoomSpec> {
        self.room.as_ref()
    }

    /// What the owner says, in order.
    pub fn owner_messages(&self) -> &[OwnerMessage] {
        &self.owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_says_exactly_one_thing() {
        let err = Scenario::parse("[[reasoner]]\ncharge_micros = 1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "scenario: reasoner[0]: give exactly one of reply or format_error"
        );
        let err = Scenario::parse(
            "[[specialist]]\ntask = \"gather\"\nartifacts = []\nfailure = \"offline\"\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "scenario: specialist[0] (task gather): give exactly one of artifacts or failure"
        );
        let err = Scenario::parse("[[reviewer]]\nformat_error = \"x\"\ncharge_micros = -1\n")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "scenario: reviewer[0]: charge_micros must not be negative"
        );
    }

    #[test]
    fn unknown_keys_and_bad_slugs_are_refused() {
        let err =
            Scenario::parse("[[reasoner]]\nformat_error = \"x\"\nrepeats = true\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `repeats`"), "{err}");
        let err =
            Scenario::parse("[[specialist]]\ntask = \"Gather!\"\nfailure = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("task key"), "{err}");
    }

    #[test]
    fn a_reply_without_a_charge_reports_no_usage() {
        let scenario = Scenario::parse(
            "[[reasoner]]\n[reasoner.reply]\nkind = \"answer\"\ntext = \"UTC\"\n\
             [[reasoner]]\ncharge_micros = 7\nformat_error = \"prose\"\n",
        )
        .unwrap();
        assert_eq!(scenario.reasoner[0].charge, Charge::NoUsage);
        assert_eq!(
            scenario.reasoner[1].charge,
            Charge::Actual(UsdMicros::new(7))
        );
    }
}
