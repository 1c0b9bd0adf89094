//! Plan admission through the domain's `decide` (driven by `Simulation`) with the real catalog
//! built from YAML: tasks go to the provider their binding names, deprecations are followed to
//! their replacements and logged, and unavailable, unbound, unknown, external-write (T4) and
//! ill-fed capabilities are refused with their reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentroom_capabilities::Catalog;
use agentroom_domain::engine::{
    CallBrief, CallRequest, CallResult, Charge, Decision, Effect, Input, MembershipChange,
    PlanProposal, Proposal, ProposalKind, ProposedTask, ReasonerResult,
};
use agentroom_domain::event::{Event, EventBody};
use agentroom_domain::ids::{
    CriterionId, EventId, ObjectiveId, PrincipalId, RoomId, TaskKey, Timestamp,
};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::objective::Criterion;
use agentroom_domain::plan::{Task, TaskKind};
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::rules::Rule;
use agentroom_domain::sim::Simulation;
use agentroom_domain::state::{CallRole, Quotes, RoomSetup, RoomState};
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// Capabilities of the test Room: `research` (with inputs), `writing`, a deprecated chain
/// `old-research` -> `research-v2` -> `research`, `offline` (Unavailable), `orphan` (no
/// binding), `publish` (external-write), and `digest`, which requires `publish`.
const CAPABILITIES: &str = r#"
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: research, namespace: default}
spec:
  description: Find and read sources
  inputs:
    - name: topic
      type: string
      required: true
    - name: depth
      type: string
      enum: [shallow, deep]
      default: shallow
    - name: since
      type: string
      format: date-time
    - name: maxSources
      type: integer
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: writing, namespace: default}
spec: {description: Write a report}
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: old-research, namespace: default}
spec: {description: The first research capability}
status:
  phase: Deprecated
  replacement: {name: research-v2}
  deprecationMessage: use research-v2
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: research-v2, namespace: default}
spec: {description: The second research capability}
status:
  phase: Deprecated
  replacement: {name: research}
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: offline, namespace: default}
spec: {description: Down for maintenance}
status: {phase: Unavailable}
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: orphan, namespace: default}
spec: {description: Nobody provides this}
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata:
  name: publish
  namespace: default
  annotations:
    agentroom.io/effect: external-write
spec: {description: Post to the public site}
---
apiVersion: planspec.io/v1alpha1
kind: Capability
metadata: {name: digest, namespace: default}
spec:
  description: Summarise and post
  requirements:
    - capability: publish
"#;

const BINDINGS: &str = r#"
apiVersion: planspec.io/v1alpha1
kind: Binding
metadata: {name: room, namespace: default}
spec:
  rules:
    - selector: {capabilityRef: {name: research}}
      target: {provider: sam}
    - selector: {capabilityRef: {name: writing}}
      target: {provider: sue}
    - selector: {capabilityRef: {name: offline}}
      target: {provider: sam}
    - selector: {capabilityRef: {name: publish}}
      target: {provider: sam}
    - selector: {capabilityRef: {name: digest}}
      target: {provider: sue}
"#;

fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

fn key(k: &str) -> TaskKey {
    TaskKey::parse(k).unwrap()
}

fn catalog(extra_bindings: &str) -> Catalog {
    Catalog::parse([
        ("capabilities.yaml", CAPABILITIES),
        ("bindings.yaml", BINDINGS),
        ("more-bindings.yaml", extra_bindings),
    ])
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A Room with owner `olive`, specialists `sam` and `sue`, reviewer `rita`.
struct Room {
    sim: Simulation<Catalog>,
    events: u128,
}

impl Room {
    fn new(catalog: Catalog) -> Self {
        let state = RoomState::new(RoomSetup {
            room: RoomId::parse("local").unwrap(),
            owner: p("olive"),
            policy: RoomPolicy::default(),
            access: AccessPolicy::default(),
            quotes: Quotes {
                reasoner: UsdMicros::new(1_000),
                specialist: UsdMicros::new(2_000),
                reviewer: UsdMicros::new(500),
            },
            limit: UsdMicros::new(1_000_000),
        })
        .unwrap();
        let mut room = Self {
            sim: Simulation::new(state, catalog, Timestamp::from_millis(1_700_000_000_000)),
            events: 0,
        };
        for (who, role) in [
            ("sam", Role::Specialist),
            ("sue", Role::Specialist),
            ("rita", Role::Reviewer),
        ] {
            room.apply(Input::ChangeMembership {
                by: p("olive"),
                principal: p(who),
                role,
                change: MembershipChange::Grant,
            });
        }
        room
    }

    fn apply(&mut self, input: Input) -> Decision {
        self.sim.apply(input).unwrap()
    }

    /// The owner asks for something; the reasoner answers with `tasks` as the plan.
    fn propose(&mut self, tasks: Vec<ProposedTask>) -> Decision {
        self.events += 1;
        let d = self.apply(Input::EventAccepted(Event {
            id: EventId::from_uuid(Uuid::from_u128(0xE000_0000 + self.events)),
            room: RoomId::parse("local").unwrap(),
            author: p("olive"),
            body: EventBody::OwnerMessage {
                text: "Summarize the state of the art".into(),
            },
        }));
        let call = calls(&d, CallRole::Reasoner).remove(0);
        self.apply(Input::CallReturned {
            op: call.op,
            charge: Charge::Actual(UsdMicros::new(500)),
            result: CallResult::Reasoner(ReasonerResult::Proposal(Proposal {
                observed: call.observed,
                kind: ProposalKind::Plan(PlanProposal {
                    criteria: vec![Criterion {
                        id: CriterionId::parse("cites-sources").unwrap(),
                        text: "every claim cites a source".into(),
                    }],
                    tasks,
                    explanation: "gather, then write".into(),
                }),
            })),
        })
    }

    fn objective_id(&self) -> Option<ObjectiveId> {
        self.sim.state().objectives().last().map(|o| o.id())
    }

    fn task(&self, k: &str) -> Task {
        self.sim
            .state()
            .objectives()
            .last()
            .expect("an objective")
            .current_plan()
            .expect("a plan")
            .task_by_key(&key(k))
            .expect("the task")
            .clone()
    }
}

fn task(k: &str, capability: &str, inputs: Value) -> ProposedTask {
    let Value::Object(inputs) = inputs else {
        panic!("inputs must be an object")
    };
    ProposedTask {
        key: key(k),
        title: format!("{k} task"),
        capability: capability.into(),
        inputs,
        deps: Vec::new(),
        kind: TaskKind::Production,
        reuse: None,
    }
}

fn plan(first: ProposedTask) -> Vec<ProposedTask> {
    let gather = first.key.clone();
    vec![
        first,
        ProposedTask {
            deps: vec![gather],
            kind: TaskKind::Report,
            ..task("write", "writing", json!({}))
        },
    ]
}

fn calls(d: &Decision, role: CallRole) -> Vec<CallRequest> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::ReserveAndCall(c) if c.role == role => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn log(d: &Decision) -> String {
    d.log
        .iter()
        .map(|l| format!("{:?} {:?} {}\n", l.verdict, l.rule, l.message))
        .collect()
}

fn refused_with(d: &Decision, rule: Rule, reason: &str) {
    assert!(
        d.rejected_by(rule),
        "expected a {rule} rejection:\n{}",
        log(d)
    );
    assert!(
        d.log.iter().any(|l| l.message.contains(reason)),
        "expected `{reason}` in:\n{}",
        log(d)
    );
}

#[test]
fn a_task_is_routed_to_the_provider_its_binding_names() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("gather", "research", json!({"topic": "agents"}))));
    assert!(!d.rejected_by(Rule::O7), "{}", log(&d));
    assert_eq!(room.task("gather").assignee(), &p("sam"));
    assert_eq!(room.task("write").assignee(), &p("sue"));
    let dispatched = calls(&d, CallRole::Specialist);
    assert_eq!(dispatched.len(), 1, "{}", log(&d));
    assert_eq!(dispatched[0].principal, Some(p("sam")));
}

#[test]
fn task_inputs_are_validated_and_take_their_defaults() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task(
        "gather",
        "research",
        json!({"topic": "agents", "since": "2026-01-01T00:00:00Z", "maxSources": 5}),
    )));
    let mut expected = Map::new();
    expected.insert("topic".into(), json!("agents"));
    expected.insert("depth".into(), json!("shallow"));
    expected.insert("since".into(), json!("2026-01-01T00:00:00Z"));
    expected.insert("maxSources".into(), json!(5));
    assert_eq!(room.task("gather").inputs(), &expected);
    let brief = &calls(&d, CallRole::Specialist)[0].brief;
    let CallBrief::Execute(brief) = brief else {
        panic!("{brief:?}")
    };
    assert_eq!(brief.inputs["depth"], json!("shallow"));
}

#[test]
fn invalid_task_inputs_are_refused_naming_the_input() {
    for (inputs, reason) in [
        (
            json!({}),
            "`topic`: expected a string (it is required), found nothing",
        ),
        (
            json!({"topic": 7}),
            "`topic`: expected a string, found the number 7",
        ),
        (
            json!({"topic": "a", "depth": "medium"}),
            "`depth`: expected one of \"shallow\", \"deep\"",
        ),
        (
            json!({"topic": "a", "since": "yesterday"}),
            "`since`: expected an RFC 3339 date-time",
        ),
        (
            json!({"topic": "a", "maxSources": 2.5}),
            "`maxSources`: expected an integer",
        ),
        (
            json!({"topic": "a", "colour": "red"}),
            "`colour`: expected one of the defined names",
        ),
    ] {
        let mut room = Room::new(catalog(""));
        let d = room.propose(plan(task("gather", "research", inputs)));
        refused_with(&d, Rule::O7, "invalid inputs");
        refused_with(&d, Rule::O7, reason);
        assert!(room.objective_id().is_none());
    }
}

#[test]
fn t4_a_deprecated_capability_is_followed_to_its_replacement_and_logged() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("gather", "old-research", json!({"topic": "a"}))));
    let messages: Vec<&str> = d
        .log
        .iter()
        .map(|l| l.message.as_str())
        .filter(|m| m.contains("deprecated"))
        .collect();
    assert_eq!(
        messages,
        [
            "task `gather`: deprecated capability `old-research` replaced by `research-v2`",
            "task `gather`: deprecated capability `research-v2` replaced by `research`",
        ]
    );
    let gather = room.task("gather");
    assert_eq!(gather.capability(), "research");
    assert_eq!(gather.assignee(), &p("sam"));
    // The replacement's input definitions apply.
    assert_eq!(gather.inputs()["depth"], json!("shallow"));
}

#[test]
fn t4_an_unavailable_capability_is_refused_with_its_reason() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("gather", "offline", json!({}))));
    refused_with(
        &d,
        Rule::O7,
        "needs `offline`: the capability is unavailable",
    );
    assert!(room.objective_id().is_none());
}

#[test]
fn t4_an_unbound_capability_is_refused_with_its_reason() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("gather", "orphan", json!({}))));
    refused_with(&d, Rule::O7, "needs `orphan`: no binding names a provider");
}

#[test]
fn t4_an_unknown_capability_is_refused_with_its_reason() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("gather", "telepathy", json!({}))));
    refused_with(&d, Rule::O7, "needs `telepathy`: no such capability");
}

#[test]
fn t4_an_external_write_capability_is_refused_at_admission() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("post", "publish", json!({}))));
    refused_with(&d, Rule::T4, "writes outside the room");
    assert!(room.objective_id().is_none());
}

#[test]
fn t4_a_capability_requiring_an_external_write_is_refused_too() {
    let mut room = Room::new(catalog(""));
    let d = room.propose(plan(task("post", "digest", json!({}))));
    refused_with(
        &d,
        Rule::T4,
        "needs `digest`, which writes outside the room",
    );
}

#[test]
fn a_node_rule_wins_over_the_capability_rule() {
    // Ids derive from the inputs, so the same inputs give the same objective id: learn it
    // from a first run, then bind that plan's `gather` node to `sue`.
    let mut first = Room::new(catalog(""));
    first.propose(plan(task("gather", "research", json!({"topic": "a"}))));
    let objective = first.objective_id().unwrap();
    assert_eq!(first.task("gather").assignee(), &p("sam"));

    let node_rule = format!(
        "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {{name: this-plan, namespace: default}}\nspec:\n  rules:\n    - selector:\n        planRef: {{name: {objective}}}\n        nodeId: gather\n      target: {{provider: sue}}\n"
    );
    let mut room = Room::new(catalog(&node_rule));
    let d = room.propose(plan(task("gather", "research", json!({"topic": "a"}))));
    assert_eq!(room.objective_id(), Some(objective));
    assert_eq!(room.task("gather").assignee(), &p("sue"));
    assert_eq!(calls(&d, CallRole::Specialist)[0].principal, Some(p("sue")));
}

#[test]
fn a_provider_that_is_not_a_specialist_of_the_room_is_refused() {
    let rule = "apiVersion: planspec.io/v1alpha1\nkind: Binding\nmetadata: {name: extra, namespace: default}\nspec:\n  rules:\n    - capabilityRef: orphan\n      target: {provider: stranger}\n";
    let mut room = Room::new(catalog(rule));
    let d = room.propose(plan(task("gather", "orphan", json!({}))));
    refused_with(
        &d,
        Rule::O7,
        "provider stranger is not a specialist of this room",
    );
}
