//! The trace evaluator of agentroom's comparative evaluation (issue 19, seed 001's
//! qualification): it measures what one run of one scenario in one mode (legacy sessions,
//! selective routing, the planner) did, from the run's **durable trace only**.
//!
//! # What it measures
//!
//! Per trace, [`evaluate`] computes [`Metrics`]: completion (objectives completed over the
//! objectives the scenario asks for), false completion (completed while the scenario's
//! [`GroundTruth`] says a criterion is unmet), human corrections (owner corrections and
//! operator interventions), repeated work attempts, duplicate confirmed effects, latency (wall,
//! and in-model from dispatch to receipt) and total cost in USD micros (the ledger's charges,
//! B3). [`summarize`] sums the metrics of many scenarios up per mode, with medians where one
//! slow or costly scenario would distort a mean. Each metric's exact definition is on its
//! field of [`Metrics`].
//!
//! # Evidence boundary
//!
//! The evaluator reads a [`Trace`] — what agentroom's stores keep durably: persisted events,
//! the decision log of the Room's history, objective statuses over time, operations with their
//! receipts and resolutions, the ledger rows, contributions and reviews — and the scenario's
//! ground truth, written by the scenario's author from what the agents really deliver. It reads
//! no process output, no logs, no model transcript, no in-memory state and no reviewer verdict
//! as proof that a criterion holds: a completion is judged by the ground truth, never by the
//! review that let it through. What the durable trace does not record (a provider's own
//! timing, a call that left no operation) it cannot measure; what a scripted run shows about
//! coordination it does not show about model judgment.
//!
//! A trace whose records do not fit together (a receipt or charge for an operation the trace
//! does not have, two receipts for one operation, a settlement without a reservation, …) is
//! refused with a typed [`TraceError`]: no metric is drawn from it.
//!
//! The [`Trace`] is a plain serde type of its own (ids as texts, times in milliseconds, money
//! in `i64` micros), so a loader can fill it from either store and tests can write one by hand.

mod error;
pub mod holdout;
pub mod load;
mod metrics;
pub mod report;
mod summary;
pub mod trace;
mod truth;

pub use error::{TraceError, TruthError};
pub use holdout::{Change, HoldoutError, Manifest};
pub use load::{LoadError, load_trace};
pub use metrics::{
    Correction, DuplicateEffect, Evidence, FalseCompletion, Metrics, Repeat, RepeatedAttempt,
    evaluate,
};
pub use report::{Rendered, Report, ReportError, RunFigures};
pub use summary::{ModeSummary, SummaryError, median, summarize};
pub use trace::{Mode, Trace};
pub use truth::{CriterionTruth, GroundTruth, ObjectiveTruth, Truth};
