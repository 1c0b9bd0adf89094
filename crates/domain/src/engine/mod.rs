//! `decide`: the whole input catalogue, the effects it emits and the decision log.
//!
//! Each rule is decided in exactly one place; the submodules group them:
//! - `events`: accepting events (T1, O6, O9, O12, O13, O14);
//! - `admission`: reasoner outcomes and whole-plan admission (O1, O2, O3, O4, O7, O8, O10,
//!   O11, T4, and R3's "add production work");
//! - `calls`: reservations, dispatch, settlement, uncertainty and reconciliation (B1's
//!   reservation before every call, B3, D2; T3 at the dispatch sink);
//! - `results`: specialist outcomes and late results (T2, D4, O5);
//! - `reviews`: reports and reviews (R1, R2, R3, R4, R5, R6);
//! - `control`: pause, resume, cancel, limit raises and memberships (D3, B4, T6);
//! - `memory`: the Room's memory entries, added, corrected and retracted (M1);
//! - `redaction`: an artifact's content or a memory entry redacted by the owner (M1, T2).
//!
//! The arithmetic of B2, B4 and B5 (available balance, no renewal, raises, overrun stops) is
//! the ledger's ([`crate::ledger`]); permissions (T3) are checked by one function,
//! `Ctx::authorized`, against the access policy.

mod admission;
mod calls;
mod control;
mod events;
mod memory;
mod modes;
mod outcome;
mod redaction;
mod results;
mod reviews;

pub use outcome::{CallEvent, CallFailure, FailureKind};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::archive::{Archive, ObjectiveRecord, RecordKey};
use crate::artifact::ContentDigest;
use crate::catalog::CapabilityCatalog;
use crate::event::Event;
use crate::ids::{
    ContributionId, CriterionId, EventId, IdSource, MemoryEntryId, NotificationId, ObjectiveId,
    OperationId, PoolId, PrincipalId, RoomId, TaskIdentity, TaskKey, Timestamp,
};
use crate::ledger::{BudgetLedger, LedgerEntry};
use crate::memory::Provenance;
use crate::money::UsdMicros;
use crate::objective::{Criterion, Objective, ObjectiveStatus, ObservedRevisions};
use crate::plan::{Column, TaskKind};
use crate::policy::AccessPolicy;
use crate::redaction::RedactionTarget;
use crate::review::{Contents, ContributionDraft, ReportRef, ReviewSubmission, Source};
use crate::room::{Permission, Role};
use crate::rules::Rule;
use crate::state::{CallRole, Operation, RoomState, Served};

/// What the engine needs from outside: the time, fresh ids and the capability catalog.
pub struct Env<'a> {
    /// Now, as the host's clock says.
    pub now: Timestamp,
    /// Fresh ids; derived from the persisted input in production.
    pub ids: &'a mut dyn IdSource,
    /// The capability catalog (implemented by `crates/capabilities`).
    pub catalog: &'a dyn CapabilityCatalog,
    /// The Room's content the host read for this decision (R7 checks a review's quotes
    /// against it); [`NoContents`](crate::review::NoContents) when the input needs none.
    pub contents: &'a dyn Contents,
    /// The models the host serves each role with (B6): a call whose Room quote is below its
    /// model's is not admitted. `None`: the host did not say (scripted agents, tests).
    pub served: Option<&'a Served>,
    /// The ledger of the pool the Room draws on (B8), as the host read it for this decision;
    /// `None` when the Room draws on none, or the host could not read it (then the Room
    /// admits no reservation). The store checks the pool again when it commits.
    pub pool: Option<&'a BudgetLedger>,
    /// What the host read about closed objectives for this decision (a memory entry's
    /// provenance, the content a redaction names); [`NoArchive`](crate::archive::NoArchive)
    /// when the input names nothing that left the live state.
    pub archive: &'a dyn Archive,
}

/// What a call cost, as the provider reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "charge", content = "micros")]
pub enum Charge {
    /// The actual cost from the response's usage.
    Actual(UsdMicros),
    /// The response had no usage: the whole reservation is charged (B3).
    NoUsage,
}

/// A task as the reasoner proposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposedTask {
    /// Its stable key.
    pub key: TaskKey,
    /// Its title.
    pub title: String,
    /// The capability it requires.
    pub capability: String,
    /// Its inputs.
    #[serde(default)]
    pub inputs: Map<String, Value>,
    /// Keys it depends on.
    #[serde(default)]
    pub deps: Vec<TaskKey>,
    /// Production or report.
    pub kind: TaskKind,
    /// A claim to reuse a completed, unchanged task's identity (O3).
    #[serde(default)]
    pub reuse: Option<TaskIdentity>,
}

/// A whole plan as the reasoner proposes it (O7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanProposal {
    /// Criteria: required with the first plan; afterwards they must equal the frozen ones.
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    /// The tasks.
    pub tasks: Vec<ProposedTask>,
    /// Why this plan.
    #[serde(default)]
    pub explanation: String,
}

/// What the reasoner proposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ProposalKind {
    /// An ordinary answer: no plan (O6).
    Answer {
        /// The answer.
        text: String,
    },
    /// A plan.
    Plan(PlanProposal),
    /// A question back to the owner.
    Challenge {
        /// The question.
        question: String,
    },
}

/// A reasoner proposal, bound to the revisions it observed (O10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The revisions the reasoner observed.
    pub observed: ObservedRevisions,
    /// What it proposes.
    pub kind: ProposalKind,
}

/// A reasoner call's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum ReasonerResult {
    /// A well-formed proposal.
    Proposal(Proposal),
    /// Output that could not be read as a proposal (O11).
    FormatError {
        /// What was wrong.
        detail: String,
    },
}

/// A specialist call's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum SpecialistResult {
    /// A persisted contribution (T2).
    Contribution(ContributionDraft),
    /// The specialist could not do the task.
    Failure {
        /// Why.
        reason: String,
    },
}

/// A model reviewer call's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum ReviewerResult {
    /// A review.
    Review(ReviewSubmission),
    /// Output that could not be read as a review.
    FormatError {
        /// What was wrong.
        detail: String,
    },
}

/// A call's result, of the port the operation called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "role", content = "value")]
pub enum CallResult {
    /// From the reasoner.
    Reasoner(ReasonerResult),
    /// From a specialist.
    Specialist(SpecialistResult),
    /// From a model reviewer.
    Reviewer(ReviewerResult),
}

impl CallResult {
    fn role(&self) -> CallRole {
        match self {
            CallResult::Reasoner(_) => CallRole::Reasoner,
            CallResult::Specialist(_) => CallRole::Specialist,
            CallResult::Reviewer(_) => CallRole::Reviewer,
        }
    }
}

impl Input {
    /// The contribution this input carries, if it applies a specialist's result: its content
    /// is what the host stores (within the Room's bounds) before the decision names it.
    pub fn contribution_draft(&self) -> Option<&ContributionDraft> {
        match self {
            Input::CallReturned {
                result: CallResult::Specialist(SpecialistResult::Contribution(draft)),
                ..
            }
            | Input::Reconciled {
                outcome:
                    Reconciliation::Executed {
                        result: CallResult::Specialist(SpecialistResult::Contribution(draft)),
                        ..
                    },
                ..
            } => Some(draft),
            _ => None,
        }
    }

    /// The content this input's decision reads from the Room (R7): for a review, the
    /// awaited report's body, its sources' excerpts and the bodies of the contributions it
    /// cites. The host reads them from its artifact store into [`Env::contents`].
    pub fn content_needed(&self, state: &RoomState) -> Vec<ContentDigest> {
        let reviewed = match self {
            Input::RecordReview { objective, .. } => Some(*objective),
            Input::CallReturned {
                op,
                result: CallResult::Reviewer(_),
                ..
            }
            | Input::Reconciled {
                op,
                outcome:
                    Reconciliation::Executed {
                        result: CallResult::Reviewer(_),
                        ..
                    },
            } => state.operation(*op).and_then(|o| o.objective),
            _ => None,
        };
        let Some(report) = reviewed
            .and_then(|id| state.objective(id))
            .and_then(|o| o.awaiting_review())
            .and_then(|r| state.contributions().get(&r.report.contribution))
        else {
            return Vec::new();
        };
        let mut needed: Vec<ContentDigest> = report.digests().into_iter().cloned().collect();
        for source in report.sources() {
            if let Source::Contribution { id } = source
                && let Some(cited) = state.contributions().get(id)
            {
                needed.extend(cited.body().map(|b| b.digest.clone()));
            }
        }
        needed.sort();
        needed.dedup();
        needed
    }
}

impl Input {
    /// The objective this input names, if it names one: a control, a review, a task update,
    /// or an accepted event about an objective.
    pub fn objective_named(&self) -> Option<ObjectiveId> {
        match self {
            Input::Control { objective, .. }
            | Input::RecordReview { objective, .. }
            | Input::UpdateTask { objective, .. } => Some(*objective),
            Input::EventAccepted(event) => event.body.objective(),
            _ => None,
        }
    }

    /// What this input's decision asks about closed objectives that left the live state: a
    /// memory entry's provenance (M1) or the content a redaction names, when the live state
    /// does not hold it; the objective an input names, or the late result it decides, when
    /// it is not live. The host reads the records found by these keys into
    /// [`Env::archive`].
    pub fn archive_needed(&self, state: &RoomState) -> Vec<RecordKey> {
        match self {
            Input::Memory {
                change: MemoryChange::Add { provenance, .. },
                ..
            } => match provenance {
                Provenance::Contribution { id } if !state.contributions().contains_key(id) => {
                    vec![RecordKey::Contribution(*id)]
                }
                Provenance::OwnerMessage { event } if !state.has_owner_message(*event) => {
                    vec![RecordKey::OwnerMessage(*event)]
                }
                _ => Vec::new(),
            },
            Input::Redact {
                target: RedactionTarget::Artifact { digest },
                ..
            } if !state.names_content(digest) => {
                vec![RecordKey::Content(digest.clone())]
            }
            // D4: a late result that is not live may be one a closed objective kept.
            Input::DecideLateResult { op, .. } if !state.held_results().contains_key(op) => {
                vec![RecordKey::Held(*op)]
            }
            // An objective named that is not live may have closed (D3, O6, O13, O14, R2, T2:
            // its record answers; an assignee confirming its task done proves it there).
            _ => self
                .objective_named()
                .filter(|id| state.objective(*id).is_none())
                .map(|id| vec![RecordKey::Objective(id)])
                .unwrap_or_default(),
        }
    }
}

/// What a reconciler confirmed about an uncertain call (D2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "confirmed")]
pub enum Reconciliation {
    /// The call never ran: the reservation is released.
    NotExecuted,
    /// The call ran, with this charge and result.
    Executed {
        /// What it cost.
        charge: Charge,
        /// What it returned.
        result: CallResult,
    },
    /// The call ran and its result is lost: it is charged and treated as failed.
    ExecutedWithoutResult {
        /// What it cost.
        charge: Charge,
    },
}

/// A control action on an objective (D3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlAction {
    /// Stop dispatching and abort running calls.
    Pause,
    /// Continue where it was.
    Resume,
    /// End it.
    Cancel,
}

/// What to do with a result held for readmission (D4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LateDecision {
    /// Use it: the task completes with it.
    Readmit,
    /// Drop it: the task stays open.
    Discard,
}

/// A membership change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MembershipChange {
    /// Grant the role.
    Grant,
    /// Revoke the role.
    Revoke,
}

/// A change to one principal's membership while the Room runs (owners, `membership.manage`),
/// decided as one input with its own revision (T6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum MemberChange {
    /// Admit a principal that is not a member, with these roles.
    Add {
        /// Its roles (at least one).
        roles: Vec<Role>,
    },
    /// A member's roles become exactly these: one decision, never a revoke then a grant.
    SetRoles {
        /// Its roles from now on (at least one).
        roles: Vec<Role>,
    },
    /// The member leaves the Room: every role it holds is revoked at once.
    Revoke,
}

/// A change to the Room's memory (M1), by an explicit act of the owner or an operator
/// (`memory.manage`), decided as one input with its own revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum MemoryChange {
    /// Keep a new entry, with what it came from.
    Add {
        /// What it says.
        text: String,
        /// What it came from: an owner message or a contribution the Room has, or an
        /// external source.
        provenance: Provenance,
    },
    /// A new version of an entry's text; the earlier ones stay in its history.
    Correct {
        /// The entry.
        entry: MemoryEntryId,
        /// Its text from now on.
        text: String,
    },
    /// The entry no longer reaches any model; it stays, with who retracted it, when and why.
    Retract {
        /// The entry.
        entry: MemoryEntryId,
        /// Why.
        why: String,
    },
}

/// Everything the engine decides on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "input")]
pub enum Input {
    /// A persisted event, resolved by its id (T1).
    EventAccepted(Event),
    /// A call returned a result with its usage.
    CallReturned {
        /// The operation.
        op: OperationId,
        /// What it cost.
        charge: Charge,
        /// What it returned.
        result: CallResult,
    },
    /// A call ended without a result (aborted after a control change, or failed after its
    /// request was known to be sent and answered): settled with its charge.
    CallSettled {
        /// The operation.
        op: OperationId,
        /// What it cost.
        charge: Charge,
    },
    /// A call's outcome is unknown: no receipt (D2).
    CallUncertain {
        /// The operation.
        op: OperationId,
        /// Why, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// A call has not reached its provider yet and is retried with backoff, its reservation
    /// held under the same id: the Room shows it waits, and why.
    CallWaiting {
        /// The operation.
        op: OperationId,
        /// What the provider (or the lack of one) said.
        cause: String,
    },
    /// A call never ran (unreachable for the whole window, refused before running, refused
    /// at the sink): settled at zero, with its cause.
    CallFailed {
        /// The operation.
        op: OperationId,
        /// Why.
        failure: CallFailure,
    },
    /// A reconciler confirmed an uncertain call's outcome (D2).
    Reconciled {
        /// The operation.
        op: OperationId,
        /// What was confirmed.
        outcome: Reconciliation,
    },
    /// Bring the Room's per-role quotes up to what the host serves (operators, B6): an
    /// explicit act, recorded with the models; calls that waited for it are admitted.
    UpdateQuotes {
        /// Who asks.
        by: PrincipalId,
        /// What the host serves each role with.
        served: Served,
    },
    /// Retry a pending owner message whose interpretation a provider failed (owners and
    /// operators): its interpretation is issued again.
    RetryMessage {
        /// Who asks.
        by: PrincipalId,
        /// The message.
        event: EventId,
    },
    /// Pause, resume or cancel an objective.
    Control {
        /// Who asks.
        by: PrincipalId,
        /// The objective.
        objective: ObjectiveId,
        /// What to do.
        action: ControlAction,
    },
    /// Readmit or discard a late result.
    DecideLateResult {
        /// Who decides.
        by: PrincipalId,
        /// The operation whose result is held.
        op: OperationId,
        /// The decision.
        decision: LateDecision,
    },
    /// Raise the budget limit (B4).
    RaiseLimit {
        /// Who raises.
        by: PrincipalId,
        /// By how much.
        amount: UsdMicros,
    },
    /// Acknowledge an overrun (B5).
    AcknowledgeOverrun {
        /// Who acknowledges.
        by: PrincipalId,
    },
    /// A human reviewer records a review.
    RecordReview {
        /// The reviewer, from the session.
        by: PrincipalId,
        /// The objective.
        objective: ObjectiveId,
        /// The review.
        review: ReviewSubmission,
    },
    /// An agent updates a task through the planning messages.
    UpdateTask {
        /// The agent, from the session.
        by: PrincipalId,
        /// The objective (the planning plan id).
        objective: ObjectiveId,
        /// The task.
        task: TaskIdentity,
        /// The column it asks for.
        status: Column,
        /// The contribution it claims completes the task, if any (T2).
        contribution: Option<ContributionId>,
    },
    /// Grant or revoke a role.
    ChangeMembership {
        /// Who changes it.
        by: PrincipalId,
        /// Whose membership.
        principal: PrincipalId,
        /// Which role.
        role: Role,
        /// Grant or revoke.
        change: MembershipChange,
    },
    /// Add a member, change a member's roles, or revoke a member, while the Room runs (T6).
    ChangeMember {
        /// Who changes it.
        by: PrincipalId,
        /// Whose membership.
        principal: PrincipalId,
        /// What changes.
        change: MemberChange,
    },
    /// Add, correct or retract a memory entry (M1).
    Memory {
        /// Who changes it.
        by: PrincipalId,
        /// What changes.
        change: MemoryChange,
    },
    /// The host's administrator makes the Room draw on a pool, or on none (B8): refused
    /// while the Room has open calls, so every reservation a pool holds settles under it.
    AttachPool {
        /// The pool, or `None` to stop drawing on one.
        pool: Option<PoolId>,
    },
    /// The pool the Room draws on was raised or its overrun acknowledged (B4, B5, B8): work
    /// waiting for budget may go ahead.
    PoolChanged,
    /// The host's administrator replaces the Room's stored access policy (T3): e.g. a Room
    /// created before a permission existed is granted it from the host's `access.toml`.
    ReplaceAccess {
        /// The new policy.
        access: AccessPolicy,
    },
    /// Redact an artifact's content or a memory entry (`content.redact`): its content is
    /// removed from the store and a redaction record takes its place.
    Redact {
        /// Who redacts.
        by: PrincipalId,
        /// What.
        target: RedactionTarget,
        /// Why.
        reason: String,
    },
}

/// Who a notification is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "audience", content = "principal")]
pub enum Audience {
    /// The Room's owners.
    Owners,
    /// The Room's operators.
    Operators,
    /// The Room's reviewers.
    Reviewers,
    /// One principal.
    Principal(PrincipalId),
}

/// A notification with a stable id (T5); delivered through the outbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notification {
    /// Stable id: receivers deduplicate on it.
    pub id: NotificationId,
    /// Who it is for; authorization is checked again at delivery (T3).
    pub audience: Audience,
    /// The objective it concerns.
    pub objective: Option<ObjectiveId>,
    /// What it says.
    pub text: String,
}

/// A task as a specialist call sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskBrief {
    /// The identity.
    pub identity: TaskIdentity,
    /// The key.
    pub key: TaskKey,
    /// The title.
    pub title: String,
    /// The capability, after replacements.
    pub capability: String,
    /// The inputs, defaults applied.
    pub inputs: Map<String, Value>,
    /// Production or report.
    pub kind: TaskKind,
    /// Contributions of its completed deps, which it may cite.
    pub dep_contributions: Vec<ContributionId>,
}

/// A task's progress as the reasoner sees it (engine-owned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskProgress {
    /// The key.
    pub key: TaskKey,
    /// The identity.
    pub identity: TaskIdentity,
    /// The title.
    pub title: String,
    /// The column it is in.
    pub column: Column,
}

/// What one call may see: only what the engine decided it may.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "brief")]
pub enum CallBrief {
    /// For the reasoner.
    Interpret {
        /// What to interpret.
        text: String,
        /// The objective's title, when there is one.
        objective: Option<String>,
        /// The frozen criteria.
        criteria: Vec<Criterion>,
        /// Engine-owned progress of the current plan.
        progress: Vec<TaskProgress>,
        /// Evidence of unmet criteria to correct (R3).
        unmet: Vec<(CriterionId, String)>,
        /// Feedback from refused attempts (O7, O11).
        feedback: Vec<String>,
        /// Which attempt this is (O11).
        attempt: u32,
    },
    /// For a specialist.
    Execute(TaskBrief),
    /// For a model reviewer.
    Review {
        /// The report to review.
        report: ReportRef,
        /// Every criterion, each to get exactly one verdict.
        criteria: Vec<Criterion>,
    },
}

/// A reserved call to dispatch (B1: the operation and reservation are committed first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRequest {
    /// The deterministic operation id.
    pub op: OperationId,
    /// Which port.
    pub role: CallRole,
    /// The specialist or reviewer it goes to.
    pub principal: Option<PrincipalId>,
    /// The objective it serves.
    pub objective: Option<ObjectiveId>,
    /// The revisions it observed.
    pub observed: ObservedRevisions,
    /// Its reservation.
    pub reservation: UsdMicros,
    /// What it may see.
    pub brief: CallBrief,
}

/// What the IO crates execute after committing a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "effect")]
pub enum Effect {
    /// Persist the operation with its reservation, then call (B1).
    ReserveAndCall(CallRequest),
    /// Ask a running call to abort cooperatively (D3).
    CancelCall {
        /// The operation.
        op: OperationId,
    },
    /// Deliver a notification through the outbox (T5).
    Notify(Notification),
    /// An objective stopped for attention.
    StopForAttention {
        /// The objective.
        objective: ObjectiveId,
        /// The rule that stopped it.
        rule: Rule,
    },
}

/// Whether a log entry records something accepted or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Accepted and applied.
    Accepted,
    /// Refused by the named rule.
    Rejected,
}

/// One decision-log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// When.
    pub at: Timestamp,
    /// The objective it concerns.
    pub objective: Option<ObjectiveId>,
    /// Accepted or rejected.
    pub verdict: Verdict,
    /// The rule that decided, when one did.
    pub rule: Option<Rule>,
    /// What happened, for people.
    pub message: String,
}

impl LogEntry {
    /// C1: what the prompt of call `op` left out to fit its input bound, each named by kind,
    /// id and digest (the host records it with the decision that settles the call).
    pub fn context_omitted(
        at: Timestamp,
        objective: Option<ObjectiveId>,
        op: OperationId,
        omitted: &[String],
    ) -> Self {
        Self {
            at,
            objective,
            verdict: Verdict::Accepted,
            rule: Some(Rule::C1),
            message: format!(
                "{op}: its prompt left out, to fit its input bound: {}",
                omitted.join("; ")
            ),
        }
    }
}

/// The result of deciding one input: the new state, its effects and its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The state to commit with compare-and-swap (D1). It holds open work only.
    pub state: RoomState,
    /// The persisted event this decision accepted (T1): the store commits each event's
    /// acceptance once per Room.
    pub event: Option<EventId>,
    /// The ledger entries this decision appended, in order (B7: the store keeps them as the
    /// Room's ledger rows, which replay to the state's balances).
    pub ledger: Vec<LedgerEntry>,
    /// The operations this decision settled or released, with their final state and charge;
    /// they are no longer in `state`.
    pub closed: Vec<Operation>,
    /// The objectives this decision moved out of the live state, closed and settled, as
    /// their records: the store keeps them in the commit that removes them from `state`.
    pub archived: Vec<ObjectiveRecord>,
    /// What to execute after the commit.
    pub effects: Vec<Effect>,
    /// Why.
    pub log: Vec<LogEntry>,
}

impl Decision {
    /// The rules that rejected something in this decision.
    pub fn rejections(&self) -> impl Iterator<Item = Rule> + '_ {
        self.log
            .iter()
            .filter(|l| l.verdict == Verdict::Rejected)
            .filter_map(|l| l.rule)
    }

    /// Whether `rule` rejected something in this decision.
    pub fn rejected_by(&self, rule: Rule) -> bool {
        self.rejections().any(|r| r == rule)
    }
}

/// Input that cannot concern this Room at all; nothing changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The event belongs to another Room.
    #[error("event {event} belongs to room {event_room}, not {room}")]
    WrongRoom {
        /// The event.
        event: EventId,
        /// Its Room.
        event_room: RoomId,
        /// This Room.
        room: RoomId,
    },
    /// No such objective in this Room.
    #[error("no objective {0} in this room")]
    UnknownObjective(ObjectiveId),
    /// No owner message of this id waits for an interpretation in this Room.
    #[error("no owner message {0} is pending in this room")]
    NotPending(EventId),
    /// No open operation of this id: unknown in this Room, or already settled or released
    /// (a closed operation leaves the live state; its row and ledger entries are its record).
    #[error("operation {0} holds no open reservation in this room (unknown, or already settled)")]
    NotOpen(OperationId),
    /// The operation is already uncertain.
    #[error("operation {0} is already uncertain")]
    AlreadyUncertain(OperationId),
    /// The result is not of the port the operation called.
    #[error("operation {op} called the {expected} but the result came from the {got}")]
    WrongPort {
        /// The operation.
        op: OperationId,
        /// The port it called.
        expected: &'static str,
        /// The port the result claims.
        got: &'static str,
    },
    /// No result is held for this operation.
    #[error("no result of operation {0} is held for readmission")]
    NothingHeld(OperationId),
    /// The event cannot be decided as it is (a blank owner message).
    #[error(transparent)]
    Event(#[from] crate::event::EventError),
}

/// Decides one input against the Room's state. Rejections by a rule are decisions too: they
/// are logged with the rule and may change counters, so they are committed like any other.
pub fn decide(state: &RoomState, input: Input, env: &mut Env<'_>) -> Result<Decision, InputError> {
    let mut next = state.clone();
    // The journal of the state decided from is not this decision's.
    next.ledger.take_journal();
    let mut ctx = Ctx {
        state: next,
        env,
        effects: Vec::new(),
        log: Vec::new(),
        event: None,
        closed: Vec::new(),
    };
    match input {
        Input::EventAccepted(event) => ctx.accept_event(event)?,
        Input::CallReturned { op, charge, result } => ctx.call_returned(op, charge, result)?,
        Input::CallSettled { op, charge } => ctx.call_settled(op, charge)?,
        Input::CallUncertain { op, cause } => ctx.call_uncertain(op, cause)?,
        Input::CallWaiting { op, cause } => ctx.call_waiting(op, cause)?,
        Input::CallFailed { op, failure } => ctx.call_failed(op, failure)?,
        Input::Reconciled { op, outcome } => ctx.reconciled(op, outcome)?,
        Input::Control {
            by,
            objective,
            action,
        } => ctx.control(&by, objective, action)?,
        Input::RetryMessage { by, event } => ctx.retry_message(&by, event)?,
        Input::UpdateQuotes { by, served } => ctx.update_quotes(&by, &served),
        Input::DecideLateResult { by, op, decision } => ctx.decide_late(&by, op, decision)?,
        Input::RaiseLimit { by, amount } => ctx.raise_limit(&by, amount),
        Input::AcknowledgeOverrun { by } => ctx.acknowledge_overrun(&by),
        Input::RecordReview {
            by,
            objective,
            review,
        } => ctx.record_human_review(&by, objective, review)?,
        Input::UpdateTask {
            by,
            objective,
            task,
            status,
            contribution,
        } => ctx.update_task(&by, objective, &task, status, contribution)?,
        Input::ChangeMembership {
            by,
            principal,
            role,
            change,
        } => ctx.change_membership(&by, principal, role, change),
        Input::ChangeMember {
            by,
            principal,
            change,
        } => ctx.change_member(&by, principal, change),
        Input::Memory { by, change } => ctx.change_memory(&by, change),
        Input::AttachPool { pool } => ctx.attach_pool(pool),
        Input::PoolChanged => ctx.advance_all(),
        Input::ReplaceAccess { access } => ctx.replace_access(access),
        Input::Redact { by, target, reason } => ctx.redact(&by, target, reason),
    }
    let ledger = ctx.state.ledger.take_journal();
    Ok(Decision {
        state: ctx.state,
        event: ctx.event,
        ledger,
        closed: ctx.closed,
        archived: Vec::new(),
        effects: ctx.effects,
        log: ctx.log,
    })
}

/// Moves the objectives `decision` leaves closed and settled out of its state, into
/// `decision.archived` (issue 21): completed or canceled, no call of theirs open, no
/// interpretation in flight; their late results still held go with them (a closed objective
/// readmits none, D4). What the rules still consult stays behind
/// ([`ClosedObjective`](crate::archive::ClosedObjective)); the store keeps each record in the
/// decision's commit. A host that keeps closed objectives' records calls it before committing.
pub fn close_out(decision: &mut Decision) {
    let archived = decision.state.archive_closed();
    decision.archived.extend(archived);
}

/// Why something was refused: the rule and the feedback, for the log and the next attempt.
pub(super) struct Refused {
    rule: Rule,
    message: String,
}

fn refused(rule: Rule, message: impl Into<String>) -> Refused {
    Refused {
        rule,
        message: message.into(),
    }
}

/// The working context of one decision.
struct Ctx<'e, 'a> {
    state: RoomState,
    env: &'e mut Env<'a>,
    effects: Vec<Effect>,
    log: Vec<LogEntry>,
    event: Option<EventId>,
    closed: Vec<Operation>,
}

impl Ctx<'_, '_> {
    fn accept(&mut self, objective: Option<ObjectiveId>, rule: Option<Rule>, message: String) {
        self.log.push(LogEntry {
            at: self.env.now,
            objective,
            verdict: Verdict::Accepted,
            rule,
            message,
        });
    }

    fn reject(&mut self, objective: Option<ObjectiveId>, rule: Rule, message: String) {
        self.log.push(LogEntry {
            at: self.env.now,
            objective,
            verdict: Verdict::Rejected,
            rule: Some(rule),
            message,
        });
    }

    fn notify(&mut self, audience: Audience, objective: Option<ObjectiveId>, text: String) {
        let id = NotificationId::from_uuid(self.env.ids.next_uuid());
        self.effects.push(Effect::Notify(Notification {
            id,
            audience,
            objective,
            text,
        }));
    }

    /// The index of live objective `id`; for a closed one that left the live state, the
    /// refusal `why` gives by `rule` is logged (when `by` holds `permission`, T3) and there is
    /// nothing more to decide (`None`); an unknown one is an input error.
    fn live_objective(
        &mut self,
        by: &PrincipalId,
        permission: Permission,
        id: ObjectiveId,
        rule: Rule,
        why: impl FnOnce(ObjectiveStatus) -> String,
    ) -> Result<Option<usize>, InputError> {
        let unknown = match self.objective_index(id) {
            Ok(idx) => return Ok(Some(idx)),
            Err(unknown) => unknown,
        };
        let Some(status) = self.env.archive.record(id).map(ObjectiveRecord::status) else {
            return Err(unknown);
        };
        if self.authorized(by, permission, Some(id)) {
            self.reject(Some(id), rule, why(status));
        }
        Ok(None)
    }

    fn objective_index(&self, id: ObjectiveId) -> Result<usize, InputError> {
        self.state
            .objectives
            .iter()
            .position(|o| o.id == id)
            .ok_or(InputError::UnknownObjective(id))
    }

    fn objective(&self, idx: usize) -> &Objective {
        &self.state.objectives[idx]
    }

    fn objective_mut(&mut self, idx: usize) -> &mut Objective {
        &mut self.state.objectives[idx]
    }

    /// T3: whether `principal` currently holds a role that grants `permission`; logs the
    /// refusal otherwise.
    fn authorized(
        &mut self,
        principal: &PrincipalId,
        permission: Permission,
        objective: Option<ObjectiveId>,
    ) -> bool {
        let allowed = self.state.may(principal, permission);
        if !allowed {
            self.reject(
                objective,
                Rule::T3,
                format!("{principal} lacks the permission {permission}"),
            );
        }
        allowed
    }

    /// Records a new status. Nothing is planned for an objective that waits for a person or
    /// has ended: an interpretation in progress is dropped and its call asked to abort.
    fn set_status(&mut self, idx: usize, status: ObjectiveStatus) {
        self.objective_mut(idx).status = status;
        if matches!(
            status,
            ObjectiveStatus::WaitingForOwner
                | ObjectiveStatus::StoppedForAttention
                | ObjectiveStatus::Completed
                | ObjectiveStatus::Canceled
        ) && let Some(op) = self
            .objective_mut(idx)
            .interpretation
            .take()
            .and_then(|i| i.op)
        {
            self.cancel_call(op);
        }
        // A completed objective keeps no call open (B2, B3): work still running for it (a
        // task waiting outside, O12, or production the report did not need) is asked to abort
        // as under D3; what it returns is charged, its reservation never held for good.
        if status == ObjectiveStatus::Completed {
            self.cancel_calls(idx);
        }
    }
}
