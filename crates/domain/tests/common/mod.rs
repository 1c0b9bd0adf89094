//! A small Room for rule and scenario tests: every state is reached through `decide`.
// Test helpers: a failed unwrap here is a failed test, which is what a test wants.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use agentroom_domain::catalog::{CapabilityEffect, MemoryCatalog, MemoryEntry};
use agentroom_domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, ControlAction, Decision, Effect, Input,
    LateDecision, MemberChange, MembershipChange, PlanProposal, Proposal, ProposalKind,
    ProposedTask, ReasonerResult, ReviewerResult, SpecialistResult, Verdict as LogVerdict,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{
    ContributionId, CriterionId, EventId, ObjectiveId, PrincipalId, RoomId, TaskKey, Timestamp,
};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::{Criterion, Objective, ObservedRevisions};
use agentroom_domain::plan::TaskKind;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::review::{
    Artifact, Body, ContributionDraft, CriterionVerdict, ReportRef, ReviewSubmission, Source,
    SourceDraft, Verdict,
};
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use agentroom_domain::sim::Simulation;
use agentroom_domain::state::{CallRole, Quotes, RoomSetup, RoomState};
use serde_json::Map;
use uuid::Uuid;

pub const REASONER: i64 = 1_000;
pub const SPECIALIST: i64 = 2_000;
pub const REVIEWER: i64 = 500;

pub fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

pub fn key(k: &str) -> TaskKey {
    TaskKey::parse(k).unwrap()
}

pub fn micros(m: i64) -> UsdMicros {
    UsdMicros::new(m)
}

/// owner `olive`, operator `oscar`, specialists `sam` (research) and `sue` (writing),
/// reviewers `rita` and `ray`, agent host `hal`.
pub struct Room {
    pub sim: Simulation<MemoryCatalog>,
    events: u128,
    contributions: u128,
}

pub fn catalog() -> MemoryCatalog {
    MemoryCatalog::new()
        .bind("research", &p("sam"))
        .bind("writing", &p("sue"))
        .with(
            "publish",
            MemoryEntry {
                provider: Some(p("sam")),
                available: true,
                effect: CapabilityEffect::ExternalWrite,
                required_inputs: vec![],
                defaults: Map::new(),
                replacement: None,
                ..MemoryEntry::default()
            },
        )
        .with(
            "offline",
            MemoryEntry {
                provider: Some(p("sam")),
                available: false,
                effect: CapabilityEffect::ReadOrDraft,
                required_inputs: vec![],
                defaults: Map::new(),
                replacement: None,
                ..MemoryEntry::default()
            },
        )
        .with(
            "orphan",
            MemoryEntry {
                provider: None,
                available: true,
                effect: CapabilityEffect::ReadOrDraft,
                required_inputs: vec![],
                defaults: Map::new(),
                replacement: None,
                ..MemoryEntry::default()
            },
        )
        .with(
            "old-research",
            MemoryEntry {
                provider: None,
                available: true,
                effect: CapabilityEffect::ReadOrDraft,
                required_inputs: vec![],
                defaults: Map::new(),
                replacement: Some("research".into()),
                ..MemoryEntry::default()
            },
        )
}

impl Room {
    pub fn new() -> Self {
        Self::with_policy(RoomPolicy::default(), 1_000_000)
    }

    pub fn with_limit(limit: i64) -> Self {
        Self::with_policy(RoomPolicy::default(), limit)
    }

    pub fn with_policy(policy: RoomPolicy, limit: i64) -> Self {
        Self::with_catalog(policy, limit, catalog())
    }

    pub fn with_catalog(policy: RoomPolicy, limit: i64, catalog: MemoryCatalog) -> Self {
        Self::build(policy, limit, catalog, AccessPolicy::default())
    }

    /// A Room whose roles hold what `access` grants (e.g. a policy written before a
    /// permission existed).
    pub fn with_access(access: AccessPolicy) -> Self {
        Self::build(RoomPolicy::default(), 1_000_000, catalog(), access)
    }

    fn build(policy: RoomPolicy, limit: i64, catalog: MemoryCatalog, access: AccessPolicy) -> Self {
        let state = RoomState::new(RoomSetup {
            room: RoomId::parse("local").unwrap(),
            owner: p("olive"),
            policy,
            access,
            quotes: Quotes {
                reasoner: micros(REASONER),
                specialist: micros(SPECIALIST),
                reviewer: micros(REVIEWER),
            },
            limit: micros(limit),
        })
        .unwrap();
        let mut room = Self {
            sim: Simulation::new(state, catalog, Timestamp::from_millis(1_700_000_000_000)),
            events: 0,
            contributions: 0,
        };
        for (who, role) in [
            ("oscar", Role::Operator),
            ("sam", Role::Specialist),
            ("sue", Role::Specialist),
            ("rita", Role::Reviewer),
            ("ray", Role::Reviewer),
            ("hal", Role::AgentHost),
        ] {
            room.grant(who, role);
        }
        room
    }

    pub fn state(&self) -> &RoomState {
        self.sim.state()
    }

    pub fn apply(&mut self, input: Input) -> Decision {
        self.sim.apply(input).unwrap()
    }

    /// Decides `input`, which may be refused as input (nothing committed).
    pub fn sim_apply(&mut self, input: Input) -> Result<Decision, agentroom_domain::sim::SimError> {
        self.sim.apply(input)
    }

    pub fn grant(&mut self, who: &str, role: Role) -> Decision {
        self.apply(Input::ChangeMembership {
            by: p("olive"),
            principal: p(who),
            role,
            change: MembershipChange::Grant,
        })
    }

    pub fn revoke(&mut self, who: &str, role: Role) -> Decision {
        self.apply(Input::ChangeMembership {
            by: p("olive"),
            principal: p(who),
            role,
            change: MembershipChange::Revoke,
        })
    }

    /// `by` adds, changes or revokes `who`'s membership (T6).
    pub fn member(&mut self, by: &str, who: &str, change: MemberChange) -> Decision {
        self.apply(Input::ChangeMember {
            by: p(by),
            principal: p(who),
            change,
        })
    }

    pub fn next_event_id(&mut self) -> EventId {
        self.events += 1;
        EventId::from_uuid(Uuid::from_u128(0xE000_0000 + self.events))
    }

    pub fn post(&mut self, author: &str, body: EventBody) -> Decision {
        let id = self.next_event_id();
        self.apply(Input::EventAccepted(Event {
            id,
            room: RoomId::parse("local").unwrap(),
            author: p(author),
            body,
        }))
    }

    pub fn say(&mut self, text: &str) -> Decision {
        self.post(
            "olive",
            EventBody::OwnerMessage {
                text: text.to_owned(),
            },
        )
    }

    pub fn objective(&self) -> &Objective {
        self.state().objectives().last().expect("an objective")
    }

    pub fn objective_id(&self) -> ObjectiveId {
        self.objective().id()
    }

    pub fn propose(&mut self, call: &CallRequest, kind: ProposalKind) -> Decision {
        self.propose_observed(call, call.observed, kind)
    }

    pub fn propose_observed(
        &mut self,
        call: &CallRequest,
        observed: ObservedRevisions,
        kind: ProposalKind,
    ) -> Decision {
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(REASONER / 2)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal { observed, kind })),
        })
    }

    pub fn plan(&mut self, call: &CallRequest, plan: PlanProposal) -> Decision {
        self.propose(call, ProposalKind::Plan(plan))
    }

    pub fn format_error(&mut self, call: &CallRequest) -> Decision {
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(REASONER / 2)),
            result: CallResult::Reasoner(ReasonerResult::FormatError {
                detail: "not JSON".into(),
            }),
        })
    }

    pub fn next_contribution_id(&mut self) -> ContributionId {
        self.contributions += 1;
        ContributionId::from_uuid(Uuid::from_u128(0xC000_0000 + self.contributions))
    }

    /// The specialist answers `call` with a contribution citing its deps' contributions.
    pub fn contribute(&mut self, call: &CallRequest, content: &str) -> Decision {
        let sources = match &call.brief {
            CallBrief::Execute(t) => t
                .dep_contributions
                .iter()
                .map(|id| Source::Contribution { id: *id })
                .collect(),
            _ => panic!("not a specialist call"),
        };
        self.contribute_with(call, content, sources)
    }

    pub fn contribute_with(
        &mut self,
        call: &CallRequest,
        content: &str,
        sources: Vec<Source>,
    ) -> Decision {
        let id = self.next_contribution_id();
        let sources = sources.into_iter().map(SourceDraft::from).collect();
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(SPECIALIST / 2)),
            result: CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
                id,
                artifacts: vec![Artifact {
                    name: "body".into(),
                    content: content.into(),
                }],
                sources,
                body: None,
                outputs: Map::new(),
            })),
        })
    }

    /// The specialist answers `call` with a Markdown `body` citing `sources`.
    pub fn contribute_body(
        &mut self,
        call: &CallRequest,
        body: &str,
        sources: Vec<SourceDraft>,
    ) -> Decision {
        let id = self.next_contribution_id();
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(SPECIALIST / 2)),
            result: CallResult::Specialist(SpecialistResult::Contribution(ContributionDraft {
                id,
                artifacts: Vec::new(),
                body: Some(Body {
                    media_type: "text/markdown".into(),
                    text: body.into(),
                }),
                sources,
                outputs: Map::new(),
            })),
        })
    }

    pub fn fail(&mut self, call: &CallRequest) -> Decision {
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(SPECIALIST / 4)),
            result: CallResult::Specialist(SpecialistResult::Failure {
                reason: "source offline".into(),
            }),
        })
    }

    /// The model reviewer answers `call` with one verdict per criterion.
    pub fn review(&mut self, call: &CallRequest, verdicts: &[(&str, Verdict)]) -> Decision {
        let submission = self.submission(call, verdicts);
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(micros(REVIEWER / 2)),
            result: CallResult::Reviewer(ReviewerResult::Review(submission)),
        })
    }

    pub fn submission(&self, call: &CallRequest, verdicts: &[(&str, Verdict)]) -> ReviewSubmission {
        let CallBrief::Review { report, .. } = &call.brief else {
            panic!("not a review call");
        };
        ReviewSubmission {
            model: None,
            report: report.clone(),
            observed: call.observed,
            verdicts: self.verdicts(report, verdicts),
        }
    }

    /// One verdict per criterion; each `met` cites the report's first source and quotes the
    /// report's body, as R7 asks.
    pub fn verdicts(
        &self,
        report: &ReportRef,
        verdicts: &[(&str, Verdict)],
    ) -> Vec<CriterionVerdict> {
        let contribution = self.sim.state().contributions().get(&report.contribution);
        let quote = contribution
            .and_then(|c| c.body())
            .and_then(|b| self.sim.content(&b.digest))
            .unwrap_or_default()
            .to_owned();
        let first = contribution
            .and_then(|c| c.sources().iter().find_map(Source::id))
            .unwrap_or_default();
        verdicts
            .iter()
            .map(|(c, v)| {
                let verdict = CriterionVerdict::new(
                    CriterionId::parse(c).unwrap(),
                    *v,
                    format!("{c} checked"),
                );
                if *v == Verdict::Met {
                    verdict.citing(&[first.as_str()], &quote)
                } else {
                    verdict
                }
            })
            .collect()
    }

    pub fn control(&mut self, by: &str, action: ControlAction) -> Decision {
        let objective = self.objective_id();
        self.apply(Input::Control {
            by: p(by),
            objective,
            action,
        })
    }

    pub fn late(&mut self, by: &str, call: &CallRequest, decision: LateDecision) -> Decision {
        self.apply(Input::DecideLateResult {
            by: p(by),
            op: call.op,
            decision,
        })
    }

    /// Runs an owner message through a plan of `gather` (research) then `write` (report).
    pub fn start_objective(&mut self) -> Decision {
        let d = self.say("Summarize the state of the art");
        let call = reasoner_call(&d);
        self.plan(&call, two_step_plan())
    }
}

pub fn criteria() -> Vec<Criterion> {
    vec![
        Criterion {
            id: CriterionId::parse("cites-sources").unwrap(),
            text: "every claim cites a source".into(),
        },
        Criterion {
            id: CriterionId::parse("covers-2026").unwrap(),
            text: "covers work from 2026".into(),
        },
    ]
}

pub fn task(k: &str, capability: &str, deps: &[&str]) -> ProposedTask {
    ProposedTask {
        key: key(k),
        title: format!("{k} task"),
        capability: capability.into(),
        inputs: Map::new(),
        deps: deps.iter().map(|d| key(d)).collect(),
        kind: TaskKind::Production,
        reuse: None,
    }
}

pub fn report(k: &str, deps: &[&str]) -> ProposedTask {
    ProposedTask {
        kind: TaskKind::Report,
        ..task(k, "writing", deps)
    }
}

pub fn plan_of(tasks: Vec<ProposedTask>) -> PlanProposal {
    PlanProposal {
        criteria: criteria(),
        tasks,
        explanation: "gather, then write".into(),
    }
}

pub fn two_step_plan() -> PlanProposal {
    plan_of(vec![
        task("gather", "research", &[]),
        report("write", &["gather"]),
    ])
}

pub fn all_met() -> Vec<(&'static str, Verdict)> {
    vec![
        ("cites-sources", Verdict::Met),
        ("covers-2026", Verdict::Met),
    ]
}

pub fn one_unmet() -> Vec<(&'static str, Verdict)> {
    vec![
        ("cites-sources", Verdict::Met),
        ("covers-2026", Verdict::Unmet),
    ]
}

pub fn calls(d: &Decision) -> Vec<CallRequest> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::ReserveAndCall(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

pub fn calls_of(d: &Decision, role: CallRole) -> Vec<CallRequest> {
    calls(d).into_iter().filter(|c| c.role == role).collect()
}

pub fn reasoner_call(d: &Decision) -> CallRequest {
    let mut c = calls_of(d, CallRole::Reasoner);
    assert_eq!(c.len(), 1, "expected one reasoner call in {:#?}", d.log);
    c.remove(0)
}

pub fn specialist_call(d: &Decision) -> CallRequest {
    let mut c = calls_of(d, CallRole::Specialist);
    assert_eq!(c.len(), 1, "expected one specialist call in {:#?}", d.log);
    c.remove(0)
}

pub fn review_call(d: &Decision) -> CallRequest {
    let mut c = calls_of(d, CallRole::Reviewer);
    assert_eq!(c.len(), 1, "expected one review call in {:#?}", d.log);
    c.remove(0)
}

pub fn cancels(d: &Decision) -> Vec<agentroom_domain::ids::OperationId> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::CancelCall { op } => Some(*op),
            _ => None,
        })
        .collect()
}

pub fn notifications(d: &Decision) -> Vec<String> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Notify(n) => Some(n.text.clone()),
            _ => None,
        })
        .collect()
}

pub fn stopped_by(d: &Decision) -> Option<Rule> {
    d.effects.iter().find_map(|e| match e {
        Effect::StopForAttention { rule, .. } => Some(*rule),
        _ => None,
    })
}

pub fn assert_rejected(d: &Decision, rule: Rule) {
    assert!(
        d.rejected_by(rule),
        "expected a rejection by {rule}, log: {:#?}",
        d.log
    );
}

pub fn accepted_by(d: &Decision, rule: Rule) -> bool {
    d.log
        .iter()
        .any(|l| l.verdict == LogVerdict::Accepted && l.rule == Some(rule))
}

/// The log as one readable line per entry, for expect-tests.
pub fn timeline(log: &[agentroom_domain::engine::LogEntry]) -> String {
    log.iter()
        .map(|l| {
            let rule = l.rule.map(|r| format!("[{r}] ")).unwrap_or_default();
            let verdict = match l.verdict {
                LogVerdict::Accepted => "ok ",
                LogVerdict::Rejected => "NO ",
            };
            format!("{verdict}{rule}{}\n", l.message)
        })
        .collect()
}
