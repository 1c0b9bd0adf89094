//! `agentroom demo --scenario supervised|budget|replanning|shared`: the in-memory demos, a
//! scripted supervised Room driven through `decide` (no database), printed as a
//! readable timeline, the final board and the ledger. Scripted agents answer every call the
//! engine emits; the engine decides everything else.

use std::collections::VecDeque;
use std::fmt::Write as _;

use agentroom_domain::catalog::MemoryCatalog;
use agentroom_domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, Decision, Effect, Input, MembershipChange,
    PlanProposal, Proposal, ProposalKind, ProposedTask, ReasonerResult, ReviewerResult,
    SpecialistResult, Verdict as LogVerdict,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{
    ContributionId, CriterionId, EventId, PrincipalId, RoomId, TaskKey, Timestamp,
};
use agentroom_domain::ledger::LedgerEntry;
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::Criterion;
use agentroom_domain::plan::{DEFAULT_COLUMNS, TaskKind};
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::review::{
    Body, ContributionDraft, CriterionVerdict, ReviewSubmission, Source, SourceDraft, Verdict,
};
use agentroom_domain::room::Role;
use agentroom_domain::sim::Simulation;
use agentroom_domain::state::{CallRole, Quotes, RoomSetup, RoomState};
use anyhow::{Context, anyhow};
use uuid::Uuid;

/// A built-in scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scenario {
    /// A plan, specialist work, an unmet criterion, a corrective plan, a new report version
    /// and an approving review by a reviewer who authored nothing.
    Supervised,
    /// The budget runs out mid-objective: admissions stop until an operator raises the limit.
    Budget,
    /// A specialist keeps failing: the third replan without progress stops for attention (O8).
    Replanning,
    /// Two objectives share one Room budget (O1).
    Shared,
}

/// The scripted agents' behaviour in a scenario.
struct Script {
    /// Verdicts for `covers-2026`, one per review, in order.
    reviews: VecDeque<Verdict>,
    /// Whether the specialist fails every `gather` task.
    gather_fails: bool,
}

fn principal(id: &str) -> anyhow::Result<PrincipalId> {
    PrincipalId::parse(id).with_context(|| format!("principal {id}"))
}

fn key(k: &str) -> anyhow::Result<TaskKey> {
    TaskKey::parse(k).with_context(|| format!("task key {k}"))
}

/// Runs `scenario` and returns what it prints.
pub(crate) fn run(scenario: Scenario) -> anyhow::Result<String> {
    let limit = match scenario {
        Scenario::Budget => 4_000,
        _ => 1_000_000,
    };
    let state = RoomState::new(RoomSetup {
        room: RoomId::parse("local")?,
        owner: principal("olive")?,
        policy: RoomPolicy::default(),
        access: AccessPolicy::default(),
        quotes: Quotes {
            reasoner: UsdMicros::new(1_500),
            specialist: UsdMicros::new(2_500),
            reviewer: UsdMicros::new(800),
        },
        limit: UsdMicros::new(limit),
    })?;
    let catalog = MemoryCatalog::new()
        .bind("research", &principal("sam")?)
        .bind("writing", &principal("sue")?);
    let mut demo = Demo {
        sim: Simulation::new(state, catalog, Timestamp::from_millis(0)),
        script: Script {
            reviews: match scenario {
                Scenario::Supervised => [Verdict::Unmet, Verdict::Met].into(),
                _ => [Verdict::Met, Verdict::Met].into(),
            },
            gather_fails: scenario == Scenario::Replanning,
        },
        queue: VecDeque::new(),
        out: String::new(),
        events: 0,
        contributions: 0,
    };
    writeln!(demo.out, "agentroom demo: scenario {scenario:?}")?;
    writeln!(demo.out, "\n== timeline")?;
    for (who, role) in [
        ("oscar", Role::Operator),
        ("sam", Role::Specialist),
        ("sue", Role::Specialist),
        ("rita", Role::Reviewer),
    ] {
        demo.apply(Input::ChangeMembership {
            by: principal("olive")?,
            principal: principal(who)?,
            role,
            change: MembershipChange::Grant,
        })?;
    }
    demo.owner_says("Summarize the state of the art in durable agent workflows")?;
    if scenario == Scenario::Shared {
        demo.owner_says("Draft a one-page brief on budget controls for agents")?;
    }
    demo.drain()?;
    if scenario == Scenario::Budget {
        writeln!(demo.out, "-- the operator raises the limit by $0.010000")?;
        demo.apply(Input::RaiseLimit {
            by: principal("oscar")?,
            amount: UsdMicros::new(10_000),
        })?;
        demo.drain()?;
    }
    demo.print_boards()?;
    demo.print_ledger()?;
    Ok(demo.out)
}

struct Demo {
    sim: Simulation<MemoryCatalog>,
    script: Script,
    queue: VecDeque<CallRequest>,
    out: String,
    events: u128,
    contributions: u128,
}

impl Demo {
    fn apply(&mut self, input: Input) -> anyhow::Result<Decision> {
        let decision = self.sim.apply(input)?;
        for entry in &decision.log {
            let rule = entry.rule.map(|r| format!("[{r}] ")).unwrap_or_default();
            let mark = match entry.verdict {
                LogVerdict::Accepted => "  ",
                LogVerdict::Rejected => "✗ ",
            };
            writeln!(
                self.out,
                "t+{:>3}s {mark}{rule}{}",
                entry.at.as_millis() / 1_000,
                shorten_ids(&entry.message)
            )?;
        }
        for effect in &decision.effects {
            match effect {
                Effect::ReserveAndCall(call) => self.queue.push_back(call.clone()),
                Effect::Notify(n) => writeln!(
                    self.out,
                    "        ✉ {:?}: {}",
                    n.audience,
                    shorten_ids(&n.text)
                )?,
                Effect::CancelCall { op } => {
                    writeln!(
                        self.out,
                        "        ⨯ cancel {}",
                        shorten_ids(&op.to_string())
                    )?;
                }
                Effect::StopForAttention { rule, .. } => {
                    writeln!(self.out, "        ⚠ stopped for attention ({rule})")?;
                }
            }
        }
        Ok(decision)
    }

    fn owner_says(&mut self, text: &str) -> anyhow::Result<()> {
        self.events += 1;
        writeln!(self.out, "-- olive (owner): {text}")?;
        self.apply(Input::EventAccepted(Event {
            id: EventId::from_uuid(demo_uuid("event", self.events)),
            room: RoomId::parse("local")?,
            author: principal("olive")?,
            body: EventBody::OwnerMessage {
                text: text.to_owned(),
            },
        }))?;
        Ok(())
    }

    /// Answers every queued call with the scripted agents until none is left.
    fn drain(&mut self) -> anyhow::Result<()> {
        let mut answered = 0;
        while let Some(call) = self.queue.pop_front() {
            answered += 1;
            if answered > 200 {
                return Err(anyhow!("the scenario did not settle after 200 calls"));
            }
            let input = self.answer(&call)?;
            self.apply(input)?;
        }
        Ok(())
    }

    fn answer(&mut self, call: &CallRequest) -> anyhow::Result<Input> {
        let half = |c: &CallRequest| Charge::Actual(UsdMicros::new(c.reservation.micros() / 2));
        let result = match (&call.role, &call.brief) {
            (CallRole::Reasoner, CallBrief::Interpret { unmet, .. }) => {
                CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                    observed: call.observed,
                    kind: ProposalKind::Plan(self.plan(!unmet.is_empty())?),
                }))
            }
            (CallRole::Specialist, CallBrief::Execute(task)) => {
                if self.script.gather_fails && task.key.as_str() == "gather" {
                    CallResult::Specialist(SpecialistResult::Failure {
                        reason: "the archive is offline".into(),
                    })
                } else {
                    self.contributions += 1;
                    CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
                        id: ContributionId::from_uuid(demo_uuid(
                            "contribution",
                            self.contributions,
                        )),
                        artifacts: Vec::new(),
                        body: Some(Body {
                            media_type: "text/markdown".into(),
                            text: format!("{} (by {:?})", task.title, call.principal),
                        }),
                        sources: task
                            .dep_contributions
                            .iter()
                            .map(|id| SourceDraft::Contribution { id: *id })
                            .collect(),
                        outputs: serde_json::Map::new(),
                    }))
                }
            }
            (CallRole::Reviewer, CallBrief::Review { report, criteria }) => {
                let recency = self.script.reviews.pop_front().unwrap_or(Verdict::Met);
                // R7: a `met` cites the report's first source and quotes the report.
                let written = self.sim.state().contributions().get(&report.contribution);
                let first = written
                    .and_then(|c| c.sources().iter().find_map(Source::id))
                    .unwrap_or_default();
                let quote = written
                    .and_then(|c| c.body())
                    .and_then(|b| self.sim.content(&b.digest))
                    .unwrap_or_default()
                    .to_owned();
                CallResult::Reviewer(ReviewerResult::Review(ReviewSubmission {
                    model: None,
                    report: report.clone(),
                    observed: call.observed,
                    verdicts: criteria
                        .iter()
                        .map(|c| {
                            let verdict = if c.id.as_str() == "covers-2026" {
                                recency
                            } else {
                                Verdict::Met
                            };
                            let given = CriterionVerdict::new(
                                c.id.clone(),
                                verdict,
                                format!("checked against report v{}", report.version),
                            );
                            if verdict == Verdict::Met {
                                given.citing(&[first.as_str()], &quote)
                            } else {
                                given
                            }
                        })
                        .collect(),
                }))
            }
            _ => return Err(anyhow!("call {} has a brief of another role", call.op)),
        };
        Ok(Input::CallReturned {
            op: call.op,
            charge: half(call),
            result,
        })
    }

    fn plan(&self, corrective: bool) -> anyhow::Result<PlanProposal> {
        let task = |k: &str, title: &str, capability: &str, deps: &[&str], kind| {
            Ok::<_, anyhow::Error>(ProposedTask {
                key: key(k)?,
                title: title.into(),
                capability: capability.into(),
                inputs: serde_json::Map::new(),
                deps: deps.iter().map(|d| key(d)).collect::<Result<_, _>>()?,
                kind,
                reuse: None,
            })
        };
        let mut tasks = vec![task(
            "gather",
            "Gather sources",
            "research",
            &[],
            TaskKind::Production,
        )?];
        let mut report_deps = vec!["gather"];
        if corrective {
            tasks.push(task(
                "gather-2026",
                "Gather 2026 sources",
                "research",
                &[],
                TaskKind::Production,
            )?);
            report_deps.push("gather-2026");
        }
        tasks.push(task(
            "write",
            "Write the report",
            "writing",
            &report_deps,
            TaskKind::Report,
        )?);
        Ok(PlanProposal {
            criteria: vec![
                Criterion {
                    id: CriterionId::parse("cites-sources")?,
                    text: "every claim cites a source".into(),
                },
                Criterion {
                    id: CriterionId::parse("covers-2026")?,
                    text: "covers work published in 2026".into(),
                },
            ],
            tasks,
            explanation: if corrective {
                "add 2026 sources and rewrite".into()
            } else {
                "gather, then write".into()
            },
        })
    }

    fn print_boards(&mut self) -> anyhow::Result<()> {
        let state = self.sim.state();
        for objective in state.objectives() {
            writeln!(
                self.out,
                "\n== board: {} ({}, revision {})",
                objective.title(),
                objective.status(),
                objective.revision()
            )?;
            let Some(plan) = objective.current_plan() else {
                continue;
            };
            writeln!(
                self.out,
                "plan v{} of {}",
                plan.number(),
                objective.plans().len()
            )?;
            for column in DEFAULT_COLUMNS {
                let titles: Vec<String> = plan
                    .tasks()
                    .iter()
                    .filter(|t| plan.column_of(t).as_str() == column)
                    .map(|t| format!("{} [{}]", t.spec().title, t.assignee()))
                    .collect();
                writeln!(self.out, "  {column:<12} {}", titles.join(", "))?;
            }
            for review in objective.reviews() {
                let verdicts: Vec<String> = review
                    .verdicts()
                    .iter()
                    .map(|v| format!("{}={:?}", v.criterion, v.verdict))
                    .collect();
                writeln!(
                    self.out,
                    "  review of report v{} by {}: {}",
                    review.report().version,
                    review.reviewer(),
                    verdicts.join(" ")
                )?;
            }
        }
        Ok(())
    }

    fn print_ledger(&mut self) -> anyhow::Result<()> {
        let state = self.sim.state();
        let b = state.ledger().balances();
        writeln!(self.out, "\n== ledger")?;
        writeln!(
            self.out,
            "limit {}  reserved {}  uncertain {}  spent {}  available {}",
            b.limit, b.reserved, b.uncertain, b.spent, b.available
        )?;
        let mut charged = 0i64;
        // Operations in the order their reservations entered the ledger.
        let order = self.sim.ledger().iter().filter_map(|e| match e {
            LedgerEntry::Reserved { op, .. } => self.sim.operation(*op),
            _ => None,
        });
        for op in order {
            let amount = op.charged().map_or(0, UsdMicros::micros);
            charged += amount;
            writeln!(
                self.out,
                "  {} {:<10} reserved {} charged {} ({:?})",
                shorten_ids(&op.id().to_string()),
                op.role().as_str(),
                op.reservation(),
                UsdMicros::new(amount),
                op.state()
            )?;
        }
        let adds_up = charged == b.spent.micros();
        writeln!(
            self.out,
            "sum of charges {} {} spent",
            UsdMicros::new(charged),
            if adds_up { "=" } else { "≠" }
        )?;
        if !adds_up {
            return Err(anyhow!("the ledger does not add up"));
        }
        Ok(())
    }
}

/// A stable id for the `n`-th demo thing of `kind`, as a host would persist it.
fn demo_uuid(kind: &str, n: u128) -> Uuid {
    Uuid::new_v5(
        &Uuid::NAMESPACE_OID,
        format!("agentroom-demo/{kind}/{n}").as_bytes(),
    )
}

/// Shortens every hyphenated UUID in `text` to its first eight hex digits, for reading.
pub(crate) fn shorten_ids(text: &str) -> String {
    const UUID_LEN: usize = 36;
    let bytes = text.as_bytes();
    let is_uuid = |at: usize| {
        bytes.get(at..at + UUID_LEN).is_some_and(|w| {
            w.iter().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => *b == b'-',
                _ => b.is_ascii_hexdigit(),
            })
        })
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        if text.is_char_boundary(at) && is_uuid(at) {
            out.push_str(&text[at..at + 8]);
            at += UUID_LEN;
            continue;
        }
        let ch = text[at..].chars().next().unwrap_or(' ');
        out.push(ch);
        at += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_runs_and_its_ledger_adds_up() {
        for scenario in [
            Scenario::Supervised,
            Scenario::Budget,
            Scenario::Replanning,
            Scenario::Shared,
        ] {
            let out = run(scenario).unwrap();
            assert!(out.contains("= spent"), "{scenario:?}:\n{out}");
        }
    }

    #[test]
    fn the_supervised_scenario_completes_after_a_corrective_plan() {
        let out = run(Scenario::Supervised).unwrap();
        assert!(out.contains("report v1 by rita: cites-sources=Met covers-2026=Unmet"));
        assert!(out.contains("report v2 by rita: cites-sources=Met covers-2026=Met"));
        assert!(out.contains("(completed, revision 2)"));
    }

    #[test]
    fn the_budget_scenario_stops_admissions_until_the_limit_is_raised() {
        let out = run(Scenario::Budget).unwrap();
        assert!(out.contains("[B2] specialist call not admitted"));
        assert!(out.contains("(completed, revision 1)"));
    }

    #[test]
    fn the_replanning_scenario_stops_for_attention() {
        let out = run(Scenario::Replanning).unwrap();
        assert!(out.contains("stopped for attention (O8)"));
    }

    #[test]
    fn ids_are_shortened_for_reading() {
        assert_eq!(
            shorten_ids("op 7ee5acea-d3b0-5d44-8ca5-db34365c9940 ✓ done"),
            "op 7ee5acea ✓ done"
        );
    }
}
