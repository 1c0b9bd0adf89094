//! Plays one scenario in one mode: a Room configured for the mode on the evaluation's store,
//! the scenario's scripted agents behind the coordinator (the same runner, ledger and
//! reservations in every mode), and the people's steps in order. A `restart` step is played
//! across processes: the process that ran the first steps is killed with SIGKILL while its
//! calls run, and the one that plays the rest recovers the Room first.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentroom_agents::PriceTable;
use agentroom_coordinator::{Coordinator, ErrorClass, HumanReview, InputId, OperatorInput};
use agentroom_domain::engine::{ControlAction, LateDecision, MembershipChange};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{EventId, ObjectiveId, PoolId, PrincipalId, RoomId};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, Coordination, RoomPolicy};
use agentroom_domain::review::{CriterionVerdict, ReviewSubmission, Verdict};
use agentroom_domain::room::Role;
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_eval::Mode;
use anyhow::{Context, anyhow, bail};
use uuid::Uuid;

use super::corpus::{EvalScenario, Step};

/// The lease of the evaluation's calls: short, so a run recovers quickly after its process
/// was killed (heartbeats keep a running call's lease alive).
pub(crate) const LEASE: Duration = Duration::from_millis(1_000);

/// How long one step may wait for the Room to be quiet before the run is declared stuck.
const QUIET_WITHIN: Duration = Duration::from_secs(120);

/// The model whose shipped prices give the scripted agents' quotes (as in the demo).
const SCRIPTED_MODEL: &str = "scripted";

/// The Room's coordination for a mode of the evaluation.
pub(crate) fn coordination(mode: Mode) -> Coordination {
    match mode {
        Mode::Planner => Coordination::Planner,
        Mode::Routing => Coordination::Routing,
        Mode::Sessions => Coordination::Sessions,
    }
}

/// One scenario in one mode on the evaluation's store.
pub(crate) struct Run<'a> {
    pub(crate) scenario: &'a EvalScenario,
    pub(crate) mode: Mode,
    pub(crate) room: RoomId,
    /// The scripted agents' journal (what they ran), read by the reconciler after a crash.
    pub(crate) journal: PathBuf,
    /// The pool the Room draws on (`--campaign`).
    pub(crate) pool: Option<PoolId>,
    /// The Room's quotes when models serve it (`--openai`); the scripted model's otherwise.
    pub(crate) quotes: Option<agentroom_domain::state::Quotes>,
}

/// What the people did that the Room refused (a refusal is part of the run: e.g. a pause of
/// an objective that already completed).
#[derive(Debug, Default)]
pub(crate) struct Played {
    pub(crate) refused: Vec<String>,
}

impl Run<'_> {
    /// The owner message event of each `say` step, by the scenario's key: derived from the
    /// Room and the step, so every process of the run agrees.
    pub(crate) fn keys(&self) -> BTreeMap<EventId, String> {
        self.scenario
            .steps
            .iter()
            .enumerate()
            .filter_map(|(n, step)| match step {
                Step::Say { key, .. } => Some((self.event_id(n), key.clone())),
                _ => None,
            })
            .collect()
    }

    fn event_id(&self, step: usize) -> EventId {
        EventId::from_uuid(Uuid::new_v5(
            &Uuid::NAMESPACE_OID,
            format!("agentroom-eval/{}/{step}", self.room).as_bytes(),
        ))
    }

    fn input(&self, step: usize, what: &str) -> InputId {
        InputId::named(&format!("agentroom-eval/{}/{step}/{what}", self.room))
    }

    fn owner(&self) -> anyhow::Result<PrincipalId> {
        Ok(self
            .scenario
            .agents
            .room()
            .ok_or_else(|| anyhow!("{}: no [room]", self.scenario.name))?
            .owner
            .clone())
    }

    fn operator(&self) -> anyhow::Result<PrincipalId> {
        let spec = self
            .scenario
            .agents
            .room()
            .ok_or_else(|| anyhow!("{}: no [room]", self.scenario.name))?;
        spec.members
            .iter()
            .find(|(_, roles)| roles.contains(&Role::Operator))
            .map(|(p, _)| p.clone())
            .ok_or_else(|| anyhow!("{}: a `raise` needs an operator", self.scenario.name))
    }

    /// Creates the Room for the mode: the scenario's policy with the mode's coordination, the
    /// scripted quotes, its members, and the campaign's pool.
    pub(crate) async fn create_room(&self, coordinator: &Coordinator) -> anyhow::Result<()> {
        let spec = self
            .scenario
            .agents
            .room()
            .ok_or_else(|| anyhow!("{}: no [room]", self.scenario.name))?;
        let policy = match &spec.policy {
            Some(text) => RoomPolicy::from_toml(text)
                .with_context(|| format!("{}: [room] policy", self.scenario.name))?,
            None => RoomPolicy::default(),
        };
        let state = RoomState::new(RoomSetup {
            room: self.room.clone(),
            owner: spec.owner.clone(),
            policy: policy.with_coordination(coordination(self.mode)),
            access: AccessPolicy::default(),
            quotes: match self.quotes {
                Some(quotes) => quotes,
                None => PriceTable::shipped()?.quotes(SCRIPTED_MODEL)?,
            },
            limit: UsdMicros::new(spec.limit_micros),
        })?;
        coordinator.create_room(&state).await?;
        for (principal, roles) in &spec.members {
            for role in roles {
                coordinator
                    .change_membership(
                        &self.room,
                        self.input(0, &format!("grant {principal} {role:?}")),
                        spec.owner.clone(),
                        principal.clone(),
                        *role,
                        MembershipChange::Grant,
                    )
                    .await?;
            }
        }
        if let Some(pool) = &self.pool {
            coordinator
                .attach_pool(&self.room, self.input(0, "attach"), Some(pool.clone()))
                .await?;
        }
        coordinator.accept_pending(&self.room).await?;
        Ok(())
    }

    /// Plays `steps` of the scenario with `coordinator`.
    pub(crate) async fn play(
        &self,
        coordinator: &Coordinator,
        steps: Range<usize>,
        played: &mut Played,
    ) -> anyhow::Result<()> {
        let owner = self.owner()?;
        for n in steps {
            let Some(step) = self.scenario.steps.get(n) else {
                break;
            };
            let mut wait = true;
            let result = match step {
                Step::Say { text, wait: w, .. } => {
                    wait = *w;
                    let event = Event {
                        id: self.event_id(n),
                        room: self.room.clone(),
                        author: owner.clone(),
                        body: EventBody::OwnerMessage { text: text.clone() },
                    };
                    coordinator.post(&event).await.map(drop)
                }
                Step::Correct { key, text } => {
                    let Some(objective) = self.objective(coordinator, key).await? else {
                        played
                            .refused
                            .push(format!("step {}: `{key}` opened no objective", n + 1));
                        continue;
                    };
                    let event = Event {
                        id: self.event_id(n),
                        room: self.room.clone(),
                        author: owner.clone(),
                        body: EventBody::OwnerCorrection {
                            objective,
                            text: text.clone(),
                            criteria: None,
                        },
                    };
                    coordinator.post(&event).await.map(drop)
                }
                Step::Raise { micros } => coordinator
                    .raise_limit(
                        &self.room,
                        self.input(n, "raise"),
                        self.operator()?,
                        UsdMicros::new(*micros),
                    )
                    .await
                    .map(drop),
                Step::Pause { key } | Step::Resume { key } => {
                    let action = if matches!(step, Step::Pause { .. }) {
                        ControlAction::Pause
                    } else {
                        ControlAction::Resume
                    };
                    let Some(objective) = self.objective(coordinator, key).await? else {
                        played
                            .refused
                            .push(format!("step {}: `{key}` opened no objective", n + 1));
                        continue;
                    };
                    coordinator
                        .control(
                            &self.room,
                            self.input(n, "control"),
                            owner.clone(),
                            objective,
                            action,
                        )
                        .await
                        .map(drop)
                }
                Step::Readmit { key } | Step::Discard { key } => {
                    let decision = if matches!(step, Step::Readmit { .. }) {
                        LateDecision::Readmit
                    } else {
                        LateDecision::Discard
                    };
                    let Some(objective) = self.objective(coordinator, key).await? else {
                        played
                            .refused
                            .push(format!("step {}: `{key}` opened no objective", n + 1));
                        continue;
                    };
                    let held: Vec<_> = coordinator
                        .room(&self.room)
                        .await?
                        .state
                        .held_results()
                        .values()
                        .filter(|h| h.objective() == objective)
                        .map(|h| h.op())
                        .collect();
                    if held.is_empty() {
                        played
                            .refused
                            .push(format!("step {}: no result is held for `{key}`", n + 1));
                    }
                    let mut result = Ok(());
                    for op in held {
                        result = coordinator
                            .decide_late_result(
                                &self.room,
                                self.input(n, &op.to_string()),
                                owner.clone(),
                                op,
                                decision,
                            )
                            .await
                            .map(drop);
                        if result.is_err() {
                            break;
                        }
                    }
                    result
                }
                Step::Review { key, by, verdict } => {
                    let Some(objective) = self.objective(coordinator, key).await? else {
                        played
                            .refused
                            .push(format!("step {}: `{key}` opened no objective", n + 1));
                        continue;
                    };
                    match review(coordinator, &self.room, objective, *verdict).await? {
                        None => {
                            played.refused.push(format!(
                                "step {}: no report of `{key}` awaits a review",
                                n + 1
                            ));
                            Ok(())
                        }
                        Some(review) => coordinator
                            .submit(
                                &self.room,
                                self.input(n, "review"),
                                OperatorInput::RecordReview {
                                    by: by.clone(),
                                    objective,
                                    review,
                                },
                            )
                            .await
                            .map(drop),
                    }
                }
                Step::Sleep { ms } => {
                    tokio::time::sleep(Duration::from_millis(*ms)).await;
                    wait = false;
                    Ok(())
                }
                Step::Restart => bail!("step {}: a restart is played by the runner", n + 1),
            };
            if let Err(error) = result {
                match error.classify() {
                    class @ (ErrorClass::Internal(_) | ErrorClass::Unavailable(_)) => {
                        bail!("{}: step {}: {class:?}", self.scenario.name, n + 1)
                    }
                    refusal => played.refused.push(format!("step {}: {refusal:?}", n + 1)),
                }
            }
            if wait {
                self.quiet(coordinator).await?;
            }
        }
        Ok(())
    }

    /// Runs the host's recovery passes (as `serve` does on its schedule) until no call of
    /// this Room is left uncertain that a pass could confirm, then waits for quiet.
    pub(crate) async fn settle(&self, coordinator: &Coordinator) -> anyhow::Result<()> {
        self.quiet(coordinator).await?;
        for _ in 0..3 {
            let uncertain = coordinator
                .room_operations(
                    &self.room,
                    Some(agentroom_ports::OperationStatus::Uncertain),
                )
                .await?;
            if uncertain.is_empty() {
                break;
            }
            coordinator.recover().await?;
            self.quiet(coordinator).await?;
        }
        Ok(())
    }

    /// Waits until no call of this process runs.
    pub(crate) async fn quiet(&self, coordinator: &Coordinator) -> anyhow::Result<()> {
        tokio::time::timeout(QUIET_WITHIN, coordinator.wait_idle())
            .await
            .map_err(|_| {
                anyhow!(
                    "{} ({}): calls still running after {} s",
                    self.scenario.name,
                    self.mode,
                    QUIET_WITHIN.as_secs()
                )
            })
    }

    /// The objective the scenario's `key` opened.
    async fn objective(
        &self,
        coordinator: &Coordinator,
        key: &str,
    ) -> anyhow::Result<Option<ObjectiveId>> {
        let event = self
            .keys()
            .into_iter()
            .find(|(_, k)| k == key)
            .map(|(e, _)| e)
            .ok_or_else(|| anyhow!("no `say` opens `{key}`"))?;
        let stored = coordinator.room_with_history(&self.room).await?;
        Ok(stored
            .state
            .objectives()
            .iter()
            .find(|o| o.origin() == event)
            .map(|o| o.id()))
    }
}

/// A person's review of the latest report of `objective`, every criterion `verdict`: a
/// `met` cites the report's first source and quotes its first line (R7). `None` when the
/// objective has no report.
async fn review(
    coordinator: &Coordinator,
    room: &RoomId,
    objective: ObjectiveId,
    verdict: Verdict,
) -> anyhow::Result<Option<ReviewSubmission>> {
    let state = coordinator.room(room).await?.state;
    let Some(found) = state.objective(objective) else {
        return Ok(None);
    };
    let Some(report) = found.reports().last().cloned() else {
        return Ok(None);
    };
    let Some(contribution) = state.contributions().get(&report.contribution) else {
        return Ok(None);
    };
    let content = coordinator.report_content(&state, contribution).await?;
    let text = content
        .body
        .clone()
        .or_else(|| content.artifacts.first().map(|a| a.content.clone()))
        .unwrap_or_default();
    let quote = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned);
    let source = content.sources.iter().find_map(|s| s.id.clone());
    let met = verdict == Verdict::Met;
    let verdicts = found
        .criteria()
        .iter()
        .map(|c| CriterionVerdict {
            criterion: c.id.clone(),
            verdict,
            evidence: format!("{verdict:?} on reading report v{}", report.version),
            sources: if met {
                source.iter().cloned().collect()
            } else {
                Vec::new()
            },
            quote: if met { quote.clone() } else { None },
        })
        .collect();
    let review = HumanReview {
        report_version: report.version,
        observed: found.observed(),
        verdicts,
    };
    Ok(Some(review.bind(&state, objective)?))
}

/// The journal of a run under `root`.
pub(crate) fn journal_path(root: &Path, room: &RoomId) -> PathBuf {
    root.join(format!("journal-{room}.jsonl"))
}
