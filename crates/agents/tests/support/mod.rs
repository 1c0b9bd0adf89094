//! Test support: a Room set up from a scenario's `[room]` and driven through the domain's
//! `decide` (`Simulation`), with every reserved call run through the agents' `Provider`; and
//! calls of each port built by hand for the HTTP tests.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a failed unwrap here is a failed test"
)]

use std::collections::VecDeque;
use std::path::Path;

use agentroom_agents::scripted::{RoomSpec, Scenario};
use agentroom_agents::{Agents, PriceTable};
use agentroom_ports::domain::catalog::MemoryCatalog;
use agentroom_ports::domain::engine::CallBrief;
use agentroom_ports::domain::engine::{
    CallRequest, Charge, Decision, Effect, Input, MembershipChange, Reconciliation,
};
use agentroom_ports::domain::event::{Event, EventBody};
use agentroom_ports::domain::ids::{
    EventId, ObjectiveId, OperationId, PrincipalId, RoomId, Timestamp,
};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::objective::Objective;
use agentroom_ports::domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_ports::domain::review::{Contribution, ReportRef, Source};
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::domain::sim::Simulation;
use agentroom_ports::domain::state::{RoomSetup, RoomState};
use agentroom_ports::{CallContext, ContextItem, OperationRecord, OperationStatus, Reconciler};
use agentroom_workflows::{Abort, CallOutcome, Provider};

pub fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

pub fn op(n: u128) -> OperationId {
    format!("00000000-0000-0000-0000-{n:012x}").parse().unwrap()
}

/// The scenario file `name` under the repository's `scenarios/`.
pub fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    Scenario::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// How a call the drive ran ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Returned,
    NotSent,
    Refused,
    Uncertain,
    Aborted,
}

/// A Room driven input by input; every reserved call is run through `agents`.
pub struct Drive {
    pub sim: Simulation<MemoryCatalog>,
    pub owner: PrincipalId,
    pub decisions: Vec<Decision>,
    pub ended: Vec<(CallRequest, Ended)>,
    pending: VecDeque<CallRequest>,
    events: u128,
}

impl Drive {
    /// The Room of `spec`: its owner and limit, the scripted model's quotes from the shipped
    /// price table, its bindings as the catalog, and its members granted through `decide`.
    pub fn new(spec: &RoomSpec) -> Self {
        let quotes = PriceTable::shipped().unwrap().quotes("scripted").unwrap();
        let policy = match &spec.policy {
            Some(text) => RoomPolicy::from_toml(text).unwrap(),
            None => RoomPolicy::default(),
        };
        let state = RoomState::new(RoomSetup {
            room: RoomId::parse("local").unwrap(),
            owner: spec.owner.clone(),
            policy,
            access: AccessPolicy::default(),
            quotes,
            limit: UsdMicros::new(spec.limit_micros),
        })
        .unwrap();
        let catalog = spec
            .bindings
            .iter()
            .fold(MemoryCatalog::new(), |c, (capability, provider)| {
                c.bind(capability, provider)
            });
        let mut drive = Self {
            sim: Simulation::new(state, catalog, Timestamp::from_millis(1_700_000_000_000)),
            owner: spec.owner.clone(),
            decisions: Vec::new(),
            ended: Vec::new(),
            pending: VecDeque::new(),
            events: 0,
        };
        for (principal, roles) in &spec.members {
            for role in roles {
                drive.apply(Input::ChangeMembership {
                    by: spec.owner.clone(),
                    principal: principal.clone(),
                    role: *role,
                    change: MembershipChange::Grant,
                });
            }
        }
        drive
    }

    /// Decides `input`, keeps the decision, queues the calls it reserves and drops the ones it
    /// cancels.
    pub fn apply(&mut self, input: Input) -> Decision {
        let decision = self.sim.apply(input).unwrap();
        for effect in &decision.effects {
            match effect {
                Effect::ReserveAndCall(call) => self.pending.push_back(call.clone()),
                Effect::CancelCall { op } => self.pending.retain(|c| c.op != *op),
                _ => {}
            }
        }
        self.decisions.push(decision.clone());
        decision
    }

    pub fn post(&mut self, author: &PrincipalId, body: EventBody) -> Decision {
        self.events += 1;
        self.apply(Input::EventAccepted(Event {
            id: event_id(0xE000_0000 + self.events),
            room: RoomId::parse("local").unwrap(),
            author: author.clone(),
            body,
        }))
    }

    pub fn say(&mut self, text: &str) -> Decision {
        let owner = self.owner.clone();
        self.post(
            &owner,
            EventBody::OwnerMessage {
                text: text.to_owned(),
            },
        )
    }

    /// What the coordinator's assembler would give a review call (C1): the report's text and
    /// its sources' texts, read from the simulation's content; nothing for other calls.
    pub fn context_for(&self, call: &CallRequest) -> CallContext {
        match &call.brief {
            CallBrief::Review { report, .. } => self.review_context(report),
            _ => CallContext::default(),
        }
    }

    /// The context of a review of `report`: its text and its sources' texts.
    pub fn review_context(&self, report: &ReportRef) -> CallContext {
        let state = self.sim.state();
        let text = |c: &Contribution| {
            c.body()
                .and_then(|b| self.sim.content(&b.digest))
                .unwrap_or_default()
                .to_owned()
        };
        let Some(written) = state.contributions().get(&report.contribution) else {
            return CallContext::default();
        };
        let mut items =
            vec![ContextItem::new("report", written.id().to_string(), text(written)).required()];
        for source in written.sources() {
            match source {
                Source::Contribution { id } => {
                    if let Some(cited) = state.contributions().get(id) {
                        items.push(ContextItem::new("source", id.to_string(), text(cited)));
                    }
                }
                Source::Document(d) => items.push(ContextItem::new(
                    "source",
                    d.id.clone(),
                    self.sim.content(&d.excerpt).unwrap_or_default(),
                )),
                Source::External { .. } => {}
            }
        }
        CallContext::new(items)
    }

    /// Runs queued calls (and the calls their outcomes reserve) through `agents` until none
    /// is left, at most `max` of them.
    pub async fn run(&mut self, agents: &Agents, max: usize) {
        for _ in 0..max {
            let Some(call) = self.pending.pop_front() else {
                return;
            };
            let context = self.context_for(&call);
            let outcome = agents.call(&call, &context, Abort::never()).await;
            let (input, ended) = match outcome {
                CallOutcome::Returned(receipt) => (
                    Input::CallReturned {
                        op: call.op,
                        charge: receipt.charge,
                        result: receipt.result,
                    },
                    Ended::Returned,
                ),
                CallOutcome::NotSent { .. } => (settled(call.op), Ended::NotSent),
                CallOutcome::Refused { .. } => (settled(call.op), Ended::Refused),
                CallOutcome::Uncertain { .. } => (
                    Input::CallUncertain {
                        op: call.op,
                        cause: None,
                    },
                    Ended::Uncertain,
                ),
                CallOutcome::Aborted => (
                    Input::CallUncertain {
                        op: call.op,
                        cause: None,
                    },
                    Ended::Aborted,
                ),
            };
            self.ended.push((call, ended));
            self.apply(input);
        }
        panic!("still calling after {max} calls: {:#?}", self.pending);
    }

    /// Plays `scenario`: each owner message, then every call until none is left.
    pub async fn play(scenario: &Scenario, agents: &Agents) -> Self {
        let mut drive = Self::new(scenario.room().expect("the scenario names its room"));
        for message in scenario.owner_messages() {
            drive.say(&message.text);
            drive.run(agents, 100).await;
        }
        drive
    }

    /// Asks `reconciler` about the uncertain operation `call` and decides what it confirms.
    pub async fn reconcile(
        &mut self,
        reconciler: &dyn Reconciler,
        call: &CallRequest,
    ) -> Option<Reconciliation> {
        let record = record(call);
        let outcome = reconciler.reconcile(&record).await.unwrap()?;
        self.apply(Input::Reconciled {
            op: call.op,
            outcome: outcome.clone(),
        });
        Some(outcome)
    }

    pub fn state(&self) -> &RoomState {
        self.sim.state()
    }

    pub fn objective(&self) -> &Objective {
        self.state().objectives().last().expect("an objective")
    }

    pub fn objective_id(&self) -> ObjectiveId {
        self.objective().id()
    }

    /// Whether `rule` rejected something in any decision so far.
    pub fn rejected_by(&self, rule: Rule) -> bool {
        self.decisions.iter().any(|d| d.rejected_by(rule))
    }

    /// The rule that stopped an objective for attention, if one did.
    pub fn stopped_by(&self) -> Option<Rule> {
        self.decisions
            .iter()
            .flat_map(|d| &d.effects)
            .find_map(|e| match e {
                Effect::StopForAttention { rule, .. } => Some(*rule),
                _ => None,
            })
    }

    /// The decision log, one line per entry, for failure messages and comparisons.
    pub fn timeline(&self) -> String {
        self.sim
            .log()
            .iter()
            .map(|l| {
                let rule = l.rule.map(|r| format!("[{r}] ")).unwrap_or_default();
                format!("{:?} {rule}{}\n", l.verdict, l.message)
            })
            .collect()
    }
}

/// The stored record of `call` after it ended uncertain, as recovery hands it to a reconciler.
pub fn record(call: &CallRequest) -> OperationRecord {
    OperationRecord {
        room: RoomId::parse("local").unwrap(),
        request: call.clone(),
        status: OperationStatus::Uncertain,
        generation: 1,
        lease_owner: None,
        lease_expired: true,
        cancel_requested: false,
        receipt: None,
        recovery_attempts: 1,
        dead_letter_reason: None,
        resolution: None,
    }
}

fn settled(op: OperationId) -> Input {
    Input::CallSettled {
        op,
        charge: Charge::Actual(UsdMicros::ZERO),
    }
}

fn event_id(n: u128) -> EventId {
    format!("00000000-0000-0000-0000-{n:012x}").parse().unwrap()
}
