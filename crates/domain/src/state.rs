//! `RoomState`: everything one Room knows, as the engine reads and returns it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::archive::ObjectiveRecord;
use crate::artifact::ContentDigest;
use crate::ids::{
    ContributionId, EventId, ObjectiveId, OperationId, PoolId, PrincipalId, RoomId, TaskIdentity,
    Timestamp,
};
use crate::ledger::{BudgetLedger, LedgerError};
use crate::memory::Memory;
use crate::money::UsdMicros;
use crate::objective::{Interpretation, Objective, ObservedRevisions};
use crate::policy::{AccessPolicy, RoomPolicy};
use crate::redaction::Redactions;
use crate::review::{Contribution, ReportRef};
use crate::room::{Members, Role};

/// The reservation per call of each role, computed by the host at start from `prices.toml`
/// and the configured token bounds (B6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quotes {
    /// One reasoner call.
    pub reasoner: UsdMicros,
    /// One specialist call.
    pub specialist: UsdMicros,
    /// One model review call.
    pub reviewer: UsdMicros,
}

impl Quotes {
    /// The quote for a call of `role`.
    pub fn for_role(&self, role: CallRole) -> UsdMicros {
        match role {
            CallRole::Reasoner => self.reasoner,
            CallRole::Specialist => self.specialist,
            CallRole::Reviewer => self.reviewer,
        }
    }
}

/// What a host serves one role with: the model, and what one call to it within the role's
/// bounds may cost (its quote, B6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedModel {
    /// The model, as its endpoint names it.
    pub model: String,
    /// What one call may cost: the least quote a Room needs for the role.
    pub quote: UsdMicros,
}

/// The models a host serves, per role (for a role several models serve, the priciest): what
/// a Room's quotes must cover for its calls to be admitted (B6). Passed in through `Env`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// The reasoner's model.
    pub reasoner: Option<ServedModel>,
    /// The priciest specialist model.
    pub specialist: Option<ServedModel>,
    /// The priciest reviewer model.
    pub reviewer: Option<ServedModel>,
}

impl Served {
    /// What serves `role`, if anything is known.
    pub fn for_role(&self, role: CallRole) -> Option<&ServedModel> {
        match role {
            CallRole::Reasoner => self.reasoner.as_ref(),
            CallRole::Specialist => self.specialist.as_ref(),
            CallRole::Reviewer => self.reviewer.as_ref(),
        }
    }

    /// The roles whose quote in `quotes` is below what serves them: (role, model, the Room's
    /// quote, the model's quote).
    pub fn shortfalls(&self, quotes: &Quotes) -> Vec<(CallRole, &ServedModel, UsdMicros)> {
        [CallRole::Reasoner, CallRole::Specialist, CallRole::Reviewer]
            .into_iter()
            .filter_map(|role| {
                let served = self.for_role(role)?;
                let quote = quotes.for_role(role);
                (quote < served.quote).then_some((role, served, quote))
            })
            .collect()
    }

    /// The quotes that cover every served model: per role, `current`'s or the model's,
    /// whichever is higher (a quote is never lowered by this act).
    pub fn quotes(&self, current: &Quotes) -> Quotes {
        let or = |role: CallRole| {
            let now = current.for_role(role);
            self.for_role(role).map_or(now, |s| s.quote.max(now))
        };
        Quotes {
            reasoner: or(CallRole::Reasoner),
            specialist: or(CallRole::Specialist),
            reviewer: or(CallRole::Reviewer),
        }
    }
}

/// Which port a call goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallRole {
    /// The reasoner: interprets events and proposes plans.
    Reasoner,
    /// A specialist: executes a task.
    Specialist,
    /// A model reviewer: reviews a report.
    Reviewer,
}

impl CallRole {
    /// The role's wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            CallRole::Reasoner => "reasoner",
            CallRole::Specialist => "specialist",
            CallRole::Reviewer => "reviewer",
        }
    }
}

/// What an operation is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "purpose")]
pub enum Purpose {
    /// Interpret an owner message (no objective yet) or a trigger of an objective.
    Interpret {
        /// The owner message, when it has no objective yet.
        intake: Option<EventId>,
    },
    /// Execute a task.
    Execute {
        /// The task identity.
        task: TaskIdentity,
    },
    /// Review a report.
    Review {
        /// The report.
        report: ReportRef,
    },
}

/// Where an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    /// Reserved and dispatched.
    InFlight,
    /// A control change asked it to abort (D3); its result, if any, is late (D4).
    CancelRequested,
    /// No receipt: the outcome is unknown and the reservation held (D2).
    Uncertain,
    /// Settled: charged, the rest released (B3).
    Settled,
    /// Released without charge: known never to have run.
    Released,
}

impl OperationState {
    /// Whether the operation still holds its reservation.
    pub const fn is_open(self) -> bool {
        matches!(
            self,
            OperationState::InFlight | OperationState::CancelRequested | OperationState::Uncertain
        )
    }
}

/// A reserved provider call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub(crate) id: OperationId,
    pub(crate) role: CallRole,
    pub(crate) principal: Option<PrincipalId>,
    pub(crate) objective: Option<ObjectiveId>,
    pub(crate) purpose: Purpose,
    pub(crate) observed: ObservedRevisions,
    pub(crate) reservation: UsdMicros,
    pub(crate) charged: Option<UsdMicros>,
    pub(crate) state: OperationState,
    /// Why it is where it is, when that is not plain: in flight, waiting for the provider
    /// (nothing reached it yet, retried with backoff); uncertain, why no receipt exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cause: Option<CallCause>,
    /// T6: a membership change took the role it was called in from its principal while it
    /// was open; it was asked to abort, and what it still returns is charged and held (a
    /// contribution) or not used (a review), never applied as it is. Absent in states written
    /// before memberships changed in operation: such an operation was not fenced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) fenced: bool,
}

/// Why a call waits for its provider or is uncertain, and since when: what the board, the
/// API and the decision log show people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCause {
    /// What the provider (or the lack of one) said: a status, a message, a rule.
    pub cause: String,
    /// When it was recorded.
    pub since: Timestamp,
}

impl Operation {
    /// Its id.
    pub fn id(&self) -> OperationId {
        self.id
    }
    /// Which port it calls.
    pub fn role(&self) -> CallRole {
        self.role
    }
    /// The specialist or reviewer it was dispatched to.
    pub fn principal(&self) -> Option<&PrincipalId> {
        self.principal.as_ref()
    }
    /// The objective it serves.
    pub fn objective(&self) -> Option<ObjectiveId> {
        self.objective
    }
    /// What it is for.
    pub fn purpose(&self) -> &Purpose {
        &self.purpose
    }
    /// The revisions it observed when dispatched.
    pub fn observed(&self) -> ObservedRevisions {
        self.observed
    }
    /// Its reservation.
    pub fn reservation(&self) -> UsdMicros {
        self.reservation
    }
    /// What it was charged, once settled.
    pub fn charged(&self) -> Option<UsdMicros> {
        self.charged
    }
    /// Where it is.
    pub fn state(&self) -> OperationState {
        self.state
    }
    /// Why it waits for its provider (in flight) or is uncertain, when known.
    pub fn cause(&self) -> Option<&CallCause> {
        self.cause.as_ref()
    }
    /// Whether a membership change fenced it (T6): its result is never applied as it is.
    pub fn fenced(&self) -> bool {
        self.fenced
    }
    /// Whether it is in flight but has not reached its provider yet: retried with backoff,
    /// its reservation held under the same id.
    pub fn waiting_for_provider(&self) -> bool {
        self.state == OperationState::InFlight && self.cause.is_some()
    }
}

/// A specialist result that landed after a control change and waits for readmission (D4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldResult {
    pub(crate) op: OperationId,
    pub(crate) objective: ObjectiveId,
    pub(crate) task: TaskIdentity,
    pub(crate) contribution: ContributionId,
}

impl HeldResult {
    /// The operation that produced it.
    pub fn op(&self) -> OperationId {
        self.op
    }
    /// The objective.
    pub fn objective(&self) -> ObjectiveId {
        self.objective
    }
    /// The task it was produced for.
    pub fn task(&self) -> &TaskIdentity {
        &self.task
    }
    /// The contribution held.
    pub fn contribution(&self) -> ContributionId {
        self.contribution
    }
}

/// What a new Room starts with.
#[derive(Debug, Clone)]
pub struct RoomSetup {
    /// The Room's id.
    pub room: RoomId,
    /// Its first owner.
    pub owner: PrincipalId,
    /// The Room policy.
    pub policy: RoomPolicy,
    /// The access policy.
    pub access: AccessPolicy,
    /// Per-role reservations (B6).
    pub quotes: Quotes,
    /// The opening budget limit (B2).
    pub limit: UsdMicros,
}

/// Why a Room cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The opening limit is refused by the ledger.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A quote is zero or negative: every call needs a reservation (B1).
    #[error("the {role} quote must be positive, got {amount}")]
    QuoteNotPositive {
        /// The role.
        role: &'static str,
        /// The quote.
        amount: UsdMicros,
    },
}

/// Everything one Room knows. Nothing crosses Rooms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomState {
    pub(crate) room: RoomId,
    pub(crate) policy: RoomPolicy,
    pub(crate) access: AccessPolicy,
    pub(crate) quotes: Quotes,
    pub(crate) members: Members,
    pub(crate) ledger: BudgetLedger,
    pub(crate) objectives: Vec<Objective>,
    pub(crate) intake: BTreeMap<EventId, Interpretation>,
    pub(crate) operations: BTreeMap<OperationId, Operation>,
    pub(crate) contributions: BTreeMap<ContributionId, Contribution>,
    pub(crate) held: BTreeMap<OperationId, HeldResult>,
    /// The Room's memory (M1). Absent in states written before the Room kept one: empty.
    #[serde(default)]
    pub(crate) memory: Memory,
    /// The budget pool the Room draws on (B8), if any; set by the host's administrator.
    /// Absent in states written before pools: none.
    #[serde(default)]
    pub(crate) pool: Option<PoolId>,
    /// The Room's redaction records. Absent in states without any (written before
    /// redactions existed, or never redacted): such states serialize as they did.
    #[serde(default, skip_serializing_if = "Redactions::is_empty")]
    pub(crate) redactions: Redactions,
}

/// The names of a [`RoomState`]'s top-level sections: the members of its JSON document, in
/// the order it serializes them.
pub const STATE_SECTIONS: [&str; 14] = [
    "room",
    "policy",
    "access",
    "quotes",
    "members",
    "ledger",
    "objectives",
    "intake",
    "operations",
    "contributions",
    "held",
    "memory",
    "pool",
    "redactions",
];

impl RoomState {
    /// The change from `previous` to this state, written against the stored document of
    /// `previous`, whose top-level members `stored` gives (D1; issue 21): the sections that
    /// differ, each down to what changed in it (an objective's plan versions and tasks, a map
    /// section's entries), serialized alone. It is the change [`crate::delta::Delta::between`]
    /// gives from that document to this state's sections; a section the document lacks (written
    /// before the section existed) is set whole. Sections are never removed.
    pub fn delta_from<'d>(
        &self,
        previous: &RoomState,
        stored: impl Fn(&str) -> Option<&'d serde_json::Value>,
    ) -> crate::delta::DiffResult {
        use crate::delta::{Delta, indexed, keyed, to_value, whole};
        // Destructured so that a new field cannot be forgotten here.
        let RoomState {
            room,
            policy,
            access,
            quotes,
            members,
            ledger,
            objectives,
            intake,
            operations,
            contributions,
            held,
            memory,
            pool,
            redactions,
        } = self;
        let mut set = serde_json::Map::new();
        let mut section =
            |name: &str,
             change: &dyn Fn(Option<&serde_json::Value>) -> crate::delta::DiffResult|
             -> Result<(), serde_json::Error> {
                let change = change(stored(name))?;
                if change != Delta::Same {
                    set.insert(name.to_owned(), to_value(&change));
                }
                Ok(())
            };
        section("room", &|s| whole(&previous.room, room, s))?;
        section("policy", &|s| whole(&previous.policy, policy, s))?;
        section("access", &|s| whole(&previous.access, access, s))?;
        section("quotes", &|s| whole(&previous.quotes, quotes, s))?;
        section("members", &|s| whole(&previous.members, members, s))?;
        section("ledger", &|s| whole(&previous.ledger, ledger, s))?;
        section("objectives", &|s| {
            indexed(&previous.objectives, objectives, s, Objective::delta)
        })?;
        section("intake", &|s| keyed(&previous.intake, intake, s, whole))?;
        section("operations", &|s| {
            keyed(&previous.operations, operations, s, whole)
        })?;
        section("contributions", &|s| {
            keyed(&previous.contributions, contributions, s, whole)
        })?;
        section("held", &|s| keyed(&previous.held, held, s, whole))?;
        section("memory", &|s| whole(&previous.memory, memory, s))?;
        section("pool", &|s| whole(&previous.pool, pool, s))?;
        section("redactions", &|s| {
            whole(&previous.redactions, redactions, s)
        })?;
        Ok(if set.is_empty() {
            Delta::Same
        } else {
            Delta::Object {
                set,
                remove: Vec::new(),
            }
        })
    }

    /// A new Room with its owner as the only member.
    pub fn new(setup: RoomSetup) -> Result<Self, SetupError> {
        for (role, amount) in [
            ("reasoner", setup.quotes.reasoner),
            ("specialist", setup.quotes.specialist),
            ("reviewer", setup.quotes.reviewer),
        ] {
            if !amount.is_positive() {
                return Err(SetupError::QuoteNotPositive { role, amount });
            }
        }
        let mut members = Members::default();
        members.grant(setup.owner, Role::Owner);
        Ok(Self {
            room: setup.room,
            policy: setup.policy,
            access: setup.access,
            quotes: setup.quotes,
            members,
            ledger: BudgetLedger::open(setup.limit)?,
            objectives: Vec::new(),
            intake: BTreeMap::new(),
            operations: BTreeMap::new(),
            contributions: BTreeMap::new(),
            held: BTreeMap::new(),
            memory: Memory::default(),
            pool: None,
            redactions: Redactions::default(),
        })
    }

    /// The Room's id.
    pub fn room(&self) -> &RoomId {
        &self.room
    }
    /// The Room policy.
    pub fn policy(&self) -> &RoomPolicy {
        &self.policy
    }
    /// The access policy.
    pub fn access(&self) -> &AccessPolicy {
        &self.access
    }
    /// Per-role reservations.
    pub fn quotes(&self) -> Quotes {
        self.quotes
    }
    /// Current memberships.
    pub fn members(&self) -> &Members {
        &self.members
    }
    /// The budget ledger.
    pub fn ledger(&self) -> &BudgetLedger {
        &self.ledger
    }
    /// The objectives in the live state, in creation order: every open one, and closed ones
    /// whose last calls have not settled yet.
    pub fn objectives(&self) -> &[Objective] {
        &self.objectives
    }
    /// The objective of this id, while it is in the live state.
    pub fn objective(&self, id: ObjectiveId) -> Option<&Objective> {
        self.objectives.iter().find(|o| o.id == id)
    }
    /// Whether `event` is an owner message the live state holds: pending interpretation, or
    /// the origin or a correction of an objective in it.
    pub fn has_owner_message(&self, event: EventId) -> bool {
        self.intake.contains_key(&event)
            || self
                .objectives
                .iter()
                .any(|o| o.origin == event || o.corrections.contains(&event))
    }

    /// Whether a contribution in the live state names content `digest`.
    pub fn names_content(&self, digest: &ContentDigest) -> bool {
        self.contributions
            .values()
            .any(|c| c.digests().contains(&digest))
    }

    /// Moves every objective that has ended and holds nothing open out of the live state:
    /// completed or canceled, no call of it still holding a reservation (they settle as
    /// usual, B3, and a result that returns late may still become a held contribution, D4),
    /// no owner message interpreted for it. Each is returned as its record, with its contributions and the late results of it still held
    /// (a closed objective readmits none, D4: they stay evidence), which leave the live state
    /// too, in creation order.
    pub(crate) fn archive_closed(&mut self) -> Vec<ObjectiveRecord> {
        let settled = |state: &RoomState, o: &Objective| {
            o.status.is_terminal()
                && o.interpretation.is_none()
                && !state
                    .operations
                    .values()
                    .any(|op| op.objective == Some(o.id) || o.intake_calls.contains(&op.id))
        };
        if !self.objectives.iter().any(|o| settled(self, o)) {
            return Vec::new();
        }
        let (closing, open): (Vec<Objective>, Vec<Objective>) =
            std::mem::take(&mut self.objectives)
                .into_iter()
                .partition(|o| settled(self, o));
        self.objectives = open;
        closing
            .into_iter()
            .map(|objective| {
                let ids: BTreeSet<ContributionId> = self
                    .contributions
                    .values()
                    .filter(|c| c.objective == objective.id)
                    .map(|c| c.id)
                    .collect();
                let contributions = ids
                    .iter()
                    .filter_map(|id| self.contributions.remove(id))
                    .collect();
                let held_ops: Vec<OperationId> = self
                    .held
                    .values()
                    .filter(|h| h.objective == objective.id)
                    .map(|h| h.op)
                    .collect();
                let held = held_ops
                    .iter()
                    .filter_map(|op| self.held.remove(op))
                    .collect();
                ObjectiveRecord {
                    objective,
                    contributions,
                    held,
                }
            })
            .collect()
    }
    /// A read view of the Room with `records` of closed objectives put back (issue 21): each
    /// whose objective left the live state is among the objectives again, ahead of the live
    /// ones and in the records' order, with its contributions and the late results it held.
    /// A record of an objective the state holds live (one read after this state was loaded,
    /// or given twice) is skipped. What people and agents are
    /// shown of a Room's past reads from such a view ("readable as today"); it is never
    /// decided on nor committed: decisions read the live state, and ask for records through
    /// [`Archive`](crate::archive::Archive).
    #[must_use]
    pub fn with_records(mut self, records: impl IntoIterator<Item = ObjectiveRecord>) -> Self {
        let mut restored = Vec::new();
        for record in records {
            let id = record.objective.id;
            if self.objective(id).is_some() || restored.iter().any(|o: &Objective| o.id == id) {
                continue;
            }
            for contribution in record.contributions {
                self.contributions.insert(contribution.id, contribution);
            }
            for held in record.held {
                self.held.insert(held.op, held);
            }
            restored.push(record.objective);
        }
        if !restored.is_empty() {
            restored.append(&mut self.objectives);
            self.objectives = restored;
        }
        self
    }

    /// Owner messages being interpreted that have no objective yet.
    pub fn intake(&self) -> &BTreeMap<EventId, Interpretation> {
        &self.intake
    }
    /// The open operations (closed ones leave with the decision that closed them).
    pub fn operations(&self) -> &BTreeMap<OperationId, Operation> {
        &self.operations
    }
    /// The operation of this id.
    pub fn operation(&self, id: OperationId) -> Option<&Operation> {
        self.operations.get(&id)
    }
    /// Every contribution, superseded ones included.
    pub fn contributions(&self) -> &BTreeMap<ContributionId, Contribution> {
        &self.contributions
    }
    /// The Room's memory, retracted entries included (M1).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }
    /// The budget pool the Room draws on (B8), if any.
    pub fn pool(&self) -> Option<&PoolId> {
        self.pool.as_ref()
    }
    /// The Room's redaction records, oldest first.
    pub fn redactions(&self) -> &Redactions {
        &self.redactions
    }
    /// Results held for readmission (D4).
    pub fn held_results(&self) -> &BTreeMap<OperationId, HeldResult> {
        &self.held
    }
}
