//! The durable trace of one run, as the evaluator reads it: plain, serde-friendly records of
//! what the stores keep (events, the decision log of `room_history`, operations and their
//! receipts, the ledger rows, contributions, reviews, objective statuses over time).
//!
//! Ids are the stores' texts (UUIDs, task identities, principals), times are milliseconds
//! since the Unix epoch (the `at_ms` columns), money is `i64` USD micros (B-rules). Nothing here
//! is checked when it is built or deserialized; [`crate::evaluate`] checks a trace's
//! references and refuses a malformed one with a [`crate::TraceError`].
//!
//! # Where a loader finds each record (through the public ports, either store)
//!
//! | record | source |
//! | --- | --- |
//! | [`DecisionRecord`] | `RoomStore::history`: revision, input kind, event, log, `at` |
//! | [`EventRecord`] | `RoomStore::event` for each event a history row accepted; its time is that row's (the ports expose no persistence time) |
//! | [`ObjectiveRecord`], [`StatusChange`], [`ContributionRecord`], [`ReviewRecord`] | `RoomStore::state_at` at each revision: an objective's status, a task completed by a contribution (its `completed_ms`), reviews; a contribution's text from the `ArtifactStore`; the objective's key from the scenario message whose event is its origin |
//! | [`OperationRecord`] | `WorkflowStore::room_operations`: the request (role, principal, objective, reservation; a specialist's `TaskBrief` gives task identity, key and spec for the work key); dispatched at the revision that reserved it, ended at the one that decided its outcome; the operator's resolution |
//! | [`ReceiptRecord`] | a receipt on the operation (runner), or a `reconciled` decision (reconciler); the effect ids from the result |
//! | [`LedgerEntry`] | `RoomStore::ledger`, in order |

// The domain's own enums, as its serde names them: a trace records what the stores keep.
pub use agentroom_ports::domain::engine::Verdict as LogVerdict;
pub use agentroom_ports::domain::event::EventKind;
pub use agentroom_ports::domain::objective::ObjectiveStatus;
pub use agentroom_ports::domain::review::Verdict;
pub use agentroom_ports::domain::state::CallRole;
use serde::{Deserialize, Serialize};

/// The coordination mode a run used (issue 19): the same agents, permissions and budget in
/// each, so the metrics compare like with like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Legacy sessions: every agent session sees the owner's message and works alone; the run
    /// ends when an agent declares the work done.
    Sessions,
    /// Selective routing: the message goes to the one specialist bound to the capability it
    /// needs; no plan versions, no review gate.
    Routing,
    /// agentroom as it is: versioned plans, budgeted calls and the review gate.
    Planner,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 3] = [Mode::Sessions, Mode::Routing, Mode::Planner];

    /// What the mode is, as the report defines it: each baseline as a competent team would
    /// build it, on the same store, ledger, runner, agents, permissions and budget.
    pub const fn definition(self) -> &'static str {
        match self {
            Mode::Sessions => {
                "legacy sessions. No planner: every specialist's session gets the owner's \
                 message as its task, on the capability it is bound to, and works alone with \
                 what the message says. The objective completes when the first session declares \
                 its work done; the others are asked to stop. A failed session leaves the \
                 others working. No review gate; budget reservations, pauses, late-result holds \
                 and crash recovery as in the planner."
            }
            Mode::Routing => {
                "selective routing. The reasoner reads the message and the capabilities (as in \
                 the planner) and the message goes to the one specialist bound to the \
                 capability that produces the answer (the plan's report task, without \
                 dependencies). Its answer completes the objective. No plan versions after the \
                 first, no repair plan (a failure stops for attention), no review gate; budget, \
                 pauses, late-result holds and crash recovery as in the planner."
            }
            Mode::Planner => {
                "agentroom as it is: the reasoner proposes a versioned plan admitted whole \
                 (O7), specialists work in dependency order, every call reserves budget first \
                 (B2), failures and unmet reviews trigger repair or corrective plans (R3), and \
                 the objective completes only when a reviewer distinct from every author finds \
                 every criterion met on a source-bound report (R1, R2)."
            }
        }
    }

    /// The mode's name on the command line and in reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Sessions => "sessions",
            Mode::Routing => "routing",
            Mode::Planner => "planner",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the evaluator reads about one run of one scenario in one mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The scenario's name (its ground truth carries the same name).
    pub scenario: String,
    /// The mode it ran in.
    pub mode: Mode,
    /// The persisted events (`room_events`), in the order they were persisted.
    #[serde(default)]
    pub events: Vec<EventRecord>,
    /// The decisions (`room_history`: input kind, event, decision log), in revision order.
    #[serde(default)]
    pub decisions: Vec<DecisionRecord>,
    /// The objectives the run created, each with the scenario's key for it.
    #[serde(default)]
    pub objectives: Vec<ObjectiveRecord>,
    /// Each objective's status over time, in the order the decisions set them.
    #[serde(default)]
    pub statuses: Vec<StatusChange>,
    /// The durable operations (`operations`), one per reserved provider call (B1).
    #[serde(default)]
    pub operations: Vec<OperationRecord>,
    /// The confirmed outcomes of operations: receipts the runner wrote, and outcomes a
    /// reconciler or an operator confirmed for an uncertain call (D2).
    #[serde(default)]
    pub receipts: Vec<ReceiptRecord>,
    /// The budget ledger's entries (`ledger_entries`, `RoomStore::ledger`), in order.
    #[serde(default)]
    pub ledger: Vec<LedgerEntry>,
    /// The contributions specialists made (T2).
    #[serde(default)]
    pub contributions: Vec<ContributionRecord>,
    /// The reviews recorded (R1, R2).
    #[serde(default)]
    pub reviews: Vec<ReviewRecord>,
}

impl Trace {
    /// An empty trace of `scenario` run in `mode`.
    pub fn new(scenario: impl Into<String>, mode: Mode) -> Self {
        Self {
            scenario: scenario.into(),
            mode,
            events: Vec::new(),
            decisions: Vec::new(),
            objectives: Vec::new(),
            statuses: Vec::new(),
            operations: Vec::new(),
            receipts: Vec::new(),
            ledger: Vec::new(),
            contributions: Vec::new(),
            reviews: Vec::new(),
        }
    }
}

/// A persisted event (T1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRecord {
    /// Its id.
    pub id: String,
    /// Its kind.
    pub kind: EventKind,
    /// Its authenticated author.
    pub author: String,
    /// The objective it names, if any.
    #[serde(default)]
    pub objective: Option<String>,
    /// When it was persisted.
    pub at_ms: i64,
}

/// The kind of input a decision decided, as `room_history.input` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// The Room's creation (revision 1).
    Create,
    /// A persisted event accepted (T1).
    EventAccepted,
    /// A call returned with its usage.
    CallReturned,
    /// A call ended without a result, settled with its charge.
    CallSettled,
    /// A call without a receipt (D2).
    CallUncertain,
    /// A call that has not reached its provider yet.
    CallWaiting,
    /// A call that never ran.
    CallFailed,
    /// An owner message whose interpretation failed, retried by a person.
    RetryMessage,
    /// The per-role quotes brought up to what the host serves (B6).
    UpdateQuotes,
    /// An uncertain call's outcome confirmed (D2).
    Reconciled,
    /// Pause, resume or cancel (D3).
    Control,
    /// A held result readmitted or discarded (D4).
    DecideLateResult,
    /// The budget limit raised (B4).
    RaiseLimit,
    /// An overrun acknowledged (B5).
    AcknowledgeOverrun,
    /// A human review recorded (R1, R2).
    RecordReview,
    /// An agent's planning task update (T2).
    UpdateTask,
    /// A role granted or revoked.
    ChangeMembership,
    /// A memory entry added (M1).
    AddMemory,
    /// A memory entry corrected (M1).
    CorrectMemory,
    /// A memory entry retracted (M1).
    RetractMemory,
    /// The Room attached to a budget pool, or detached (B8).
    AttachPool,
    /// The pool the Room draws on changed (B8).
    PoolChanged,
    /// The Room's access policy replaced (T3).
    ReplaceAccess,
    /// An artifact's content redacted.
    RedactArtifact,
    /// A memory entry redacted.
    RedactMemory,
    /// A member added (T6).
    AddMember,
    /// A member's roles changed (T6).
    ChangeMemberRoles,
    /// A member revoked (T6).
    RevokeMember,
}

impl InputKind {
    /// Whether a person decided this input to steer or repair the run — an operator's (or
    /// the owner's) intervention, as opposed to the run's own inputs (events, call outcomes)
    /// and to administration that does not concern the work:
    ///
    /// - `control` (pause, resume, cancel, D3), `decide_late_result` (D4), `raise_limit` (B4),
    ///   `acknowledge_overrun` (B5), `retry_message` (a failed interpretation retried),
    ///   `correct_memory` and `retract_memory` (M1) are interventions;
    /// - `record_review` is not: a human review is the review gate doing its job (R1, R2), not
    ///   a correction of the run; nor are memberships, quotes, pools, access, redactions or a
    ///   new memory entry, which configure the Room rather than repair the work.
    pub const fn is_intervention(self) -> bool {
        matches!(
            self,
            InputKind::Control
                | InputKind::DecideLateResult
                | InputKind::RaiseLimit
                | InputKind::AcknowledgeOverrun
                | InputKind::RetryMessage
                | InputKind::CorrectMemory
                | InputKind::RetractMemory
        )
    }
}

/// One decision-log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogLine {
    /// The objective it concerns.
    #[serde(default)]
    pub objective: Option<String>,
    /// Accepted or rejected.
    pub verdict: LogVerdict,
    /// The rule id that decided (`O8`, `R3`, …), when one did.
    #[serde(default)]
    pub rule: Option<String>,
    /// What happened, for people.
    pub message: String,
}

/// One committed decision (a `room_history` row without its delta).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    /// The revision its commit made.
    pub revision: i64,
    /// The kind of input decided.
    pub input: InputKind,
    /// The persisted event it accepted, if any.
    #[serde(default)]
    pub event: Option<String>,
    /// When it was decided.
    pub at_ms: i64,
    /// Its decision log.
    #[serde(default)]
    pub log: Vec<LogLine>,
}

/// An objective of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveRecord {
    /// Its id.
    pub id: String,
    /// The scenario's key for the objective (the owner message that created it, as the
    /// scenario names it): what its ground truth is keyed by. Several objectives of a run may
    /// share a key (a baseline may open one per agent session).
    pub key: String,
}

/// An objective entered a status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusChange {
    /// The objective.
    pub objective: String,
    /// The status it entered.
    pub status: ObjectiveStatus,
    /// When (the deciding commit's time).
    pub at_ms: i64,
}

/// What an operator confirmed about an uncertain or dead-lettered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionOutcome {
    /// It ran.
    Succeeded,
    /// It did not run, or failed.
    Failed,
}

/// An operator's resolution of an operation (D2), with who and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolutionRecord {
    /// What they confirmed.
    pub outcome: ResolutionOutcome,
    /// Who.
    pub operator: String,
    /// When.
    pub at_ms: i64,
}

/// One durable operation: a reserved provider call (B1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationRecord {
    /// Its id (also the provider's idempotency key).
    pub id: String,
    /// Which port.
    pub role: CallRole,
    /// The objective it served, if any (an intake interpretation has none yet).
    #[serde(default)]
    pub objective: Option<String>,
    /// The specialist or reviewer it went to.
    #[serde(default)]
    pub principal: Option<String>,
    /// The task identity it executed (specialist calls).
    #[serde(default)]
    pub task: Option<String>,
    /// The unit of work it executed (specialist calls): the objective's scenario key, the
    /// task key and a digest of its spec (title, capability, inputs, deps) — what O3 calls
    /// "unchanged". Two calls with the same work key do the same work, whatever identity or
    /// plan version they ran under. See [`crate::Metrics::repeated_work_attempts`].
    #[serde(default)]
    pub work: Option<String>,
    /// Its reservation (B1, B6).
    pub reservation_micros: i64,
    /// When it was dispatched: the commit that created it with its reservation.
    pub dispatched_ms: i64,
    /// When the Room learned that the call ended: its receipt, settlement or failure, or its
    /// marking uncertain (D2); `None` while it still ran when the trace was taken.
    #[serde(default)]
    pub ended_ms: Option<i64>,
    /// An operator's resolution, if one was recorded.
    #[serde(default)]
    pub resolution: Option<ResolutionRecord>,
}

/// Who confirmed a call's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmation {
    /// The runner's receipt, written once and fenced on the lease generation (D2, D3).
    Runner,
    /// A reconciler confirmed it from the provider's record or external state (D2).
    Reconciler,
}

/// What a confirmed call returned, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    /// A specialist's contribution (T2).
    Contribution,
    /// A specialist's failure.
    Failure,
    /// A reasoner's proposal.
    Proposal,
    /// A model reviewer's review.
    Review,
    /// Output that could not be read (O11).
    FormatError,
    /// It ran and its result is lost (a reconciler's `executed_without_result`).
    NoResult,
}

/// A confirmed outcome of an operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptRecord {
    /// The operation.
    pub op: String,
    /// Who confirmed it.
    pub confirmed_by: Confirmation,
    /// What it returned.
    pub result: ResultKind,
    /// The effects the call reports it carried out (ids named in its result, e.g. the
    /// outputs of a contribution); the ground truth says which ids are the same effect.
    #[serde(default)]
    pub effects: Vec<String>,
    /// When it was written (or the confirmation recorded).
    pub at_ms: i64,
}

/// A ledger entry, as `ledger_entries.entry` holds it (money in micros).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "entry", deny_unknown_fields)]
pub enum LedgerEntry {
    /// The opening limit.
    Opened {
        /// The limit.
        limit: i64,
    },
    /// A reservation was admitted (B1).
    Reserved {
        /// The operation.
        op: String,
        /// The amount held.
        amount: i64,
    },
    /// A reservation was marked uncertain: it stays held (B3).
    MarkedUncertain {
        /// The operation.
        op: String,
    },
    /// Settled: `charged` spent, the rest released (B3).
    Settled {
        /// The operation.
        op: String,
        /// What the reservation held.
        reserved: i64,
        /// What was charged.
        charged: i64,
    },
    /// A settlement the ledger could not take: the whole reservation charged (B3, B5).
    SettlementRefused {
        /// The operation.
        op: String,
        /// What the reservation held, all of it charged.
        reserved: i64,
        /// The usage the call reported.
        reported: i64,
    },
    /// Released without charge: the call never ran.
    Released {
        /// The operation.
        op: String,
        /// The amount released.
        amount: i64,
    },
    /// The limit was raised (B4).
    LimitRaised {
        /// By how much.
        by: i64,
    },
    /// An operator acknowledged an overrun (B5).
    OverrunAcknowledged,
}

/// A specialist's persisted contribution (T2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContributionRecord {
    /// Its id.
    pub id: String,
    /// The objective.
    pub objective: String,
    /// The task identity it was made for.
    pub task: String,
    /// The operation that returned it.
    pub op: String,
    /// Its author.
    pub author: String,
    /// Its text as stored (body, or its artifacts as Markdown): what the ground truth's
    /// markers are looked for in.
    #[serde(default)]
    pub text: String,
    /// When it completed its task: when its result was applied, or readmitted (D4); `None`
    /// when it never did (held and discarded, superseded, O5, or refused, T2).
    #[serde(default)]
    pub completed_ms: Option<i64>,
}

/// One criterion's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriterionVerdict {
    /// The criterion id.
    pub criterion: String,
    /// The verdict.
    pub verdict: Verdict,
}

/// An accepted review (R2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRecord {
    /// Its id.
    pub id: String,
    /// The objective.
    pub objective: String,
    /// Who reviewed.
    pub reviewer: String,
    /// The report version it bound.
    pub report_version: u32,
    /// One verdict per criterion.
    pub verdicts: Vec<CriterionVerdict>,
    /// When it was recorded.
    pub at_ms: i64,
}
