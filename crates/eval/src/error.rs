//! Why a trace or a ground truth cannot be evaluated: each names what is malformed and the
//! rule the durable trace would have kept, had it been written by agentroom's stores.

/// A ground truth that cannot judge anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TruthError {
    /// Two objectives share a key.
    #[error("the ground truth lists objective `{0}` twice")]
    DuplicateObjective(String),
    /// An objective with no criterion: nothing could make its completion false.
    #[error("objective `{0}` of the ground truth has no criterion")]
    NoCriteria(String),
    /// A criterion listed twice for one objective.
    #[error("objective `{objective}` of the ground truth lists criterion `{criterion}` twice")]
    DuplicateCriterion {
        /// The objective.
        objective: String,
        /// The criterion.
        criterion: String,
    },
    /// A `delivered` truth whose marker is blank would be found in every text.
    #[error("criterion `{criterion}` of objective `{objective}` has a blank marker")]
    BlankMarker {
        /// The objective.
        objective: String,
        /// The criterion.
        criterion: String,
    },
    /// An empty group of same effects.
    #[error("the ground truth has an empty group of same effects")]
    EmptyEffectGroup,
    /// An effect id in two groups would make two effects one.
    #[error("effect `{0}` is in two groups of same effects")]
    EffectInTwoGroups(String),
}

/// A trace the evaluator refuses: its records do not fit together, so any metric drawn from
/// it would be wrong. Nothing is measured from a malformed trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The ground truth is malformed.
    #[error("ground truth of scenario `{scenario}`: {source}")]
    Truth {
        /// The scenario.
        scenario: String,
        /// What is wrong with it.
        #[source]
        source: TruthError,
    },
    /// The trace is of another scenario than the ground truth.
    #[error("the trace is of scenario `{trace}`, the ground truth of `{truth}`")]
    ScenarioMismatch {
        /// The trace's scenario.
        trace: String,
        /// The ground truth's scenario.
        truth: String,
    },
    /// Two records of one kind share an id.
    #[error("the trace has two {kind} records with id `{id}`")]
    DuplicateId {
        /// Which kind of record.
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// An objective the ground truth does not know: its completion cannot be judged.
    #[error("objective {objective} has key `{key}`, which the ground truth does not list")]
    UnknownObjectiveKey {
        /// The objective.
        objective: String,
        /// Its key.
        key: String,
    },
    /// A record names an objective the trace does not have.
    #[error("{what} names objective {objective}, which the trace does not have")]
    UnknownObjective {
        /// The record that names it.
        what: String,
        /// The objective.
        objective: String,
    },
    /// A receipt for an operation the trace does not have (B1: no operation, no call).
    #[error("a receipt names operation {op}, which the trace does not have (B1)")]
    ReceiptForUnknownOperation {
        /// The operation.
        op: String,
    },
    /// A second receipt for one operation (D2: a receipt is written once, fenced on the lease
    /// generation).
    #[error("operation {op} has more than one receipt (D2: a receipt is written once)")]
    DuplicateReceipt {
        /// The operation.
        op: String,
    },
    /// A receipt written before its operation was dispatched (B1).
    #[error(
        "the receipt of operation {op} at {receipt_ms} ms precedes its dispatch at {dispatched_ms} ms (B1)"
    )]
    ReceiptBeforeDispatch {
        /// The operation.
        op: String,
        /// When it was dispatched.
        dispatched_ms: i64,
        /// When the receipt was written.
        receipt_ms: i64,
    },
    /// A ledger entry for an operation the trace does not have (B1).
    #[error("a ledger entry ({entry}) names operation {op}, which the trace does not have (B1)")]
    LedgerEntryForUnknownOperation {
        /// The entry's kind.
        entry: &'static str,
        /// The operation.
        op: String,
    },
    /// A charge or release of an operation that holds no reservation (B1, B3).
    #[error("a ledger entry ({entry}) settles operation {op}, which holds no reservation (B1, B3)")]
    NoReservation {
        /// The entry's kind.
        entry: &'static str,
        /// The operation.
        op: String,
    },
    /// A second reservation for one operation (B1: the operation and its reservation are
    /// persisted once, together).
    #[error("operation {op} is reserved twice (B1)")]
    DuplicateReservation {
        /// The operation.
        op: String,
    },
    /// A ledger amount below zero.
    #[error("a ledger entry ({entry}) has a negative amount {micros} micros")]
    NegativeAmount {
        /// The entry's kind.
        entry: &'static str,
        /// The amount.
        micros: i64,
    },
    /// A sum of micros beyond `i64`.
    #[error("the {what} overflows i64 micros")]
    Overflow {
        /// What was summed.
        what: &'static str,
    },
    /// A contribution returned by an operation the trace does not have, or by one that is not a
    /// specialist call (T2).
    #[error(
        "contribution {contribution} names operation {op}, which is not a specialist call of the trace (T2)"
    )]
    ContributionOfUnknownOperation {
        /// The contribution.
        contribution: String,
        /// The operation.
        op: String,
    },
    /// An objective's statuses go back in time.
    #[error(
        "objective {objective} enters {status} at {at_ms} ms, before its previous status at {previous_ms} ms"
    )]
    StatusOutOfOrder {
        /// The objective.
        objective: String,
        /// The status.
        status: String,
        /// When.
        at_ms: i64,
        /// When its previous status was set.
        previous_ms: i64,
    },
    /// An operation that ended before it was dispatched.
    #[error("operation {op} ends at {ended_ms} ms, before its dispatch at {dispatched_ms} ms")]
    EndedBeforeDispatch {
        /// The operation.
        op: String,
        /// When it was dispatched.
        dispatched_ms: i64,
        /// When it ended.
        ended_ms: i64,
    },
    /// The last objective status precedes the first owner message.
    #[error(
        "the last objective status at {last_status_ms} ms precedes the first owner message at {first_message_ms} ms"
    )]
    StatusBeforeMessage {
        /// The first owner message.
        first_message_ms: i64,
        /// The last status.
        last_status_ms: i64,
    },
}
