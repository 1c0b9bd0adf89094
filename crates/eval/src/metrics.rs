//! The metrics of one trace (one scenario in one mode), and [`evaluate`], which checks the
//! trace's references and computes them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::TraceError;
use crate::trace::{
    CallRole, Confirmation, ContributionRecord, EventKind, InputKind, LedgerEntry, Mode,
    ObjectiveStatus, OperationRecord, Trace,
};
use crate::truth::{GroundTruth, Truth};

/// What the evaluator measured in one trace. Every count rests on records of the durable
/// trace; [`Evidence`] names the records each count is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    /// The scenario.
    pub scenario: String,
    /// The mode.
    pub mode: Mode,
    /// The objectives the scenario asks for (the ground truth's), the denominator of
    /// completion.
    pub objectives_total: u32,
    /// Of those, how many the run completed: some objective of the run with that key ended
    /// `completed` (its last status in the trace).
    pub objectives_completed: u32,
    /// Of the completed ones, how many the run completed while the ground truth says a
    /// criterion is unmet: the owner was told "done" and it is not (whatever a reviewer said).
    pub false_completions: u32,
    /// Owner corrections: persisted `owner_correction` events (O14: only the owner's
    /// corrections are stored as such).
    pub owner_corrections: u32,
    /// Operator interventions: decisions of the inputs [`InputKind::is_intervention`] names
    /// (pause, resume, cancel, late-result decisions, limit raises, overrun
    /// acknowledgements, message retries, memory corrections and retractions), plus each
    /// operator resolution of an uncertain or dead-lettered operation (D2).
    pub operator_interventions: u32,
    /// Repeated work attempts: specialist operations that did work the run had already done
    /// or was doing. An operation `o` with work key `w` ([`OperationRecord::work`]) is one
    /// when an operation `p` of the same work key was dispatched before it (earlier
    /// `dispatched_ms`, or the same and earlier in the trace) and, at `o`'s dispatch, either
    ///
    /// - `p`'s contribution had completed its task (`completed_ms` ≤ `o`'s dispatch) and no
    ///   owner correction of `o`'s objective was persisted after that completion and at or
    ///   before `o`'s dispatch (a correction is a new reason to redo work, R6); or
    /// - `p` was still running: it had not ended (`ended_ms` is none or after `o`'s dispatch).
    ///
    /// A retry after a failed, refused, released, discarded or uncertain call is not one: at
    /// its dispatch nothing showed the work done (D2 keeps an uncertain call from being
    /// replayed; what a retry of it may duplicate is counted by
    /// [`Metrics::duplicate_confirmed_effects`]). Unchanged completed work reused by a new plan
    /// version (O3) dispatches nothing, so it is never counted; changed work has another key.
    pub repeated_work_attempts: u32,
    /// Duplicate confirmed effects: for each effect (the ground truth's groups of same effect
    /// ids), the number of receipts confirming it beyond the first. A receipt — the runner's,
    /// written once (D2), or a reconciler's confirmation — confirms the effect ids it lists,
    /// each once.
    pub duplicate_confirmed_effects: u32,
    /// Wall latency: from the first persisted owner message to the last objective status
    /// change of the trace; none when the trace has no owner message or no status change.
    pub wall_latency_ms: Option<i64>,
    /// In-model latency: the sum, over the runner's receipts, of the time from the call's
    /// dispatch to its receipt (the durable trace keeps no finer clock; a reconciler's
    /// confirmation is left out, its time is the recovery's, not the call's).
    pub in_model_latency_ms: i64,
    /// Total cost: the sum of the ledger's charges — each settlement's charge, and the whole
    /// reservation of a refused settlement (B3, B5).
    pub cost_micros: i64,
    /// Reservations still held when the trace was taken (uncertain or running calls, B3): not
    /// spent, not available either.
    pub held_micros: i64,
    /// The records each count is made of.
    pub evidence: Evidence,
}

impl Metrics {
    /// Owner corrections and operator interventions together: every time a person had to step
    /// in.
    pub fn human_corrections(&self) -> u32 {
        self.owner_corrections
            .saturating_add(self.operator_interventions)
    }

    /// Completed objectives over the scenario's objectives; none when it asks for none.
    pub fn completion(&self) -> Option<f64> {
        (self.objectives_total > 0)
            .then(|| f64::from(self.objectives_completed) / f64::from(self.objectives_total))
    }
}

/// The records behind the counts of [`Metrics`], sorted, so a report can show them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Evidence {
    /// The keys of the completed objectives.
    pub completed: Vec<String>,
    /// The false completions.
    pub false_completions: Vec<FalseCompletion>,
    /// The human corrections.
    pub corrections: Vec<Correction>,
    /// The repeated work attempts.
    pub repeated_attempts: Vec<RepeatedAttempt>,
    /// The effects confirmed more than once.
    pub duplicate_effects: Vec<DuplicateEffect>,
}

/// An objective completed while a criterion is truly unmet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FalseCompletion {
    /// The scenario's key.
    pub key: String,
    /// The run's objective.
    pub objective: String,
    /// The criteria the ground truth says are unmet.
    pub unmet: Vec<String>,
}

/// A person stepping in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Correction {
    /// An owner correction event.
    Owner {
        /// The event.
        event: String,
    },
    /// An operator's input, by the revision that decided it.
    Operator {
        /// The revision.
        revision: i64,
        /// The input.
        input: InputKind,
    },
    /// An operator's resolution of an operation (D2).
    Resolution {
        /// The operation.
        op: String,
    },
}

/// Why an operation is a repeated work attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repeat {
    /// The earlier operation's contribution had completed the work.
    AfterCompletion,
    /// The earlier operation was still running.
    WhileRunning,
}

/// A repeated work attempt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RepeatedAttempt {
    /// The repeating operation.
    pub op: String,
    /// The work key.
    pub work: String,
    /// The earlier operation of the same work.
    pub earlier: String,
    /// Why it counts.
    pub why: Repeat,
}

/// An effect confirmed by more than one receipt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DuplicateEffect {
    /// The effect's key (the first id of its group in the ground truth, or its only id).
    pub effect: String,
    /// The operations whose receipts confirm it, in trace order.
    pub ops: Vec<String>,
}

/// Evaluates one trace against its scenario's ground truth.
///
/// Reads nothing but `trace` and `truth`. Checks first that the trace's records fit
/// together — unique ids; every objective, operation and reservation a record names exists;
/// at most one receipt per operation (D2); no receipt, end or charge without a dispatched,
/// reserved operation (B1, B3); statuses in time order — and refuses a malformed trace with a
/// [`TraceError`]; then computes [`Metrics`].
pub fn evaluate(trace: &Trace, truth: &GroundTruth) -> Result<Metrics, TraceError> {
    truth.check().map_err(|source| TraceError::Truth {
        scenario: truth.scenario.clone(),
        source,
    })?;
    if trace.scenario != truth.scenario {
        return Err(TraceError::ScenarioMismatch {
            trace: trace.scenario.clone(),
            truth: truth.scenario.clone(),
        });
    }
    let index = Index::build(trace, truth)?;
    let (cost_micros, held_micros) = ledger_totals(trace, &index)?;
    let finals = final_statuses(trace)?;
    let mut evidence = Evidence::default();

    // Completion and false completion, per objective of the scenario.
    let mut objectives_completed = 0u32;
    let mut false_completions = 0u32;
    for objective in &truth.objectives {
        let mut completed = false;
        let mut falsely = Vec::new();
        for record in trace.objectives.iter().filter(|o| o.key == objective.key) {
            let Some(&(ObjectiveStatus::Completed, completed_ms)) = finals.get(record.id.as_str())
            else {
                continue;
            };
            completed = true;
            let unmet: Vec<String> = objective
                .criteria
                .iter()
                .filter(|c| !truly_met(&c.truth, &record.id, completed_ms, trace))
                .map(|c| c.criterion.clone())
                .collect();
            if !unmet.is_empty() {
                falsely.push(FalseCompletion {
                    key: objective.key.clone(),
                    objective: record.id.clone(),
                    unmet,
                });
            }
        }
        if completed {
            objectives_completed = objectives_completed.saturating_add(1);
            evidence.completed.push(objective.key.clone());
        }
        if !falsely.is_empty() {
            false_completions = false_completions.saturating_add(1);
            evidence.false_completions.extend(falsely);
        }
    }

    // Human corrections.
    let mut owner_corrections = 0u32;
    let mut operator_interventions = 0u32;
    for event in trace
        .events
        .iter()
        .filter(|e| e.kind == EventKind::OwnerCorrection)
    {
        owner_corrections = owner_corrections.saturating_add(1);
        evidence.corrections.push(Correction::Owner {
            event: event.id.clone(),
        });
    }
    for decision in trace.decisions.iter().filter(|d| d.input.is_intervention()) {
        operator_interventions = operator_interventions.saturating_add(1);
        evidence.corrections.push(Correction::Operator {
            revision: decision.revision,
            input: decision.input,
        });
    }
    for op in trace.operations.iter().filter(|o| o.resolution.is_some()) {
        operator_interventions = operator_interventions.saturating_add(1);
        evidence
            .corrections
            .push(Correction::Resolution { op: op.id.clone() });
    }

    evidence.repeated_attempts = repeated_attempts(trace);
    evidence.duplicate_effects = duplicate_effects(trace, truth)?;
    let duplicate_confirmed_effects = evidence
        .duplicate_effects
        .iter()
        .map(|d| d.ops.len().saturating_sub(1))
        .fold(0usize, usize::saturating_add);

    let wall_latency_ms = wall_latency(trace)?;
    let mut in_model_latency_ms = 0i64;
    for receipt in trace
        .receipts
        .iter()
        .filter(|r| r.confirmed_by == Confirmation::Runner)
    {
        // The index checked that the operation exists and the receipt follows its dispatch.
        let dispatched = index
            .operations
            .get(receipt.op.as_str())
            .map_or(receipt.at_ms, |o| o.dispatched_ms);
        in_model_latency_ms = receipt
            .at_ms
            .checked_sub(dispatched)
            .and_then(|d| in_model_latency_ms.checked_add(d))
            .ok_or(TraceError::Overflow {
                what: "in-model latency",
            })?;
    }

    evidence.false_completions.sort();
    evidence.corrections.sort();
    evidence.repeated_attempts.sort();
    evidence.duplicate_effects.sort();
    Ok(Metrics {
        scenario: trace.scenario.clone(),
        mode: trace.mode,
        objectives_total: count(truth.objectives.len()),
        objectives_completed,
        false_completions,
        owner_corrections,
        operator_interventions,
        repeated_work_attempts: count(evidence.repeated_attempts.len()),
        duplicate_confirmed_effects: count(duplicate_confirmed_effects),
        wall_latency_ms,
        in_model_latency_ms,
        cost_micros,
        held_micros,
        evidence,
    })
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The trace's records by id, built once its references are checked.
struct Index<'t> {
    operations: BTreeMap<&'t str, &'t OperationRecord>,
}

impl<'t> Index<'t> {
    fn build(trace: &'t Trace, truth: &GroundTruth) -> Result<Self, TraceError> {
        let mut objectives = BTreeSet::new();
        for o in &trace.objectives {
            if !objectives.insert(o.id.as_str()) {
                return Err(duplicate("objective", &o.id));
            }
            if truth.objective(&o.key).is_none() {
                return Err(TraceError::UnknownObjectiveKey {
                    objective: o.id.clone(),
                    key: o.key.clone(),
                });
            }
        }
        let known = |what: String, objective: &str| {
            if objectives.contains(objective) {
                Ok(())
            } else {
                Err(TraceError::UnknownObjective {
                    what,
                    objective: objective.to_owned(),
                })
            }
        };

        let mut events = BTreeSet::new();
        for e in &trace.events {
            if !events.insert(e.id.as_str()) {
                return Err(duplicate("event", &e.id));
            }
            if let Some(objective) = &e.objective {
                known(format!("event {}", e.id), objective)?;
            }
        }
        for s in &trace.statuses {
            known(format!("a status change to {:?}", s.status), &s.objective)?;
        }

        let mut operations = BTreeMap::new();
        for o in &trace.operations {
            if operations.insert(o.id.as_str(), o).is_some() {
                return Err(duplicate("operation", &o.id));
            }
            if let Some(objective) = &o.objective {
                known(format!("operation {}", o.id), objective)?;
            }
            if let Some(ended_ms) = o.ended_ms
                && ended_ms < o.dispatched_ms
            {
                return Err(TraceError::EndedBeforeDispatch {
                    op: o.id.clone(),
                    dispatched_ms: o.dispatched_ms,
                    ended_ms,
                });
            }
        }

        let mut receipted = BTreeSet::new();
        for r in &trace.receipts {
            let Some(op) = operations.get(r.op.as_str()) else {
                return Err(TraceError::ReceiptForUnknownOperation { op: r.op.clone() });
            };
            if !receipted.insert(r.op.as_str()) {
                return Err(TraceError::DuplicateReceipt { op: r.op.clone() });
            }
            if r.at_ms < op.dispatched_ms {
                return Err(TraceError::ReceiptBeforeDispatch {
                    op: r.op.clone(),
                    dispatched_ms: op.dispatched_ms,
                    receipt_ms: r.at_ms,
                });
            }
        }

        let mut contributions = BTreeSet::new();
        for c in &trace.contributions {
            if !contributions.insert(c.id.as_str()) {
                return Err(duplicate("contribution", &c.id));
            }
            known(format!("contribution {}", c.id), &c.objective)?;
            if operations
                .get(c.op.as_str())
                .is_none_or(|o| o.role != CallRole::Specialist)
            {
                return Err(TraceError::ContributionOfUnknownOperation {
                    contribution: c.id.clone(),
                    op: c.op.clone(),
                });
            }
        }

        let mut reviews = BTreeSet::new();
        for r in &trace.reviews {
            if !reviews.insert(r.id.as_str()) {
                return Err(duplicate("review", &r.id));
            }
            known(format!("review {}", r.id), &r.objective)?;
        }
        Ok(Self { operations })
    }
}

fn duplicate(kind: &'static str, id: &str) -> TraceError {
    TraceError::DuplicateId {
        kind,
        id: id.to_owned(),
    }
}

/// Total charges and the reservations still held, replaying the ledger's rows with the rules
/// that wrote them: a reservation per dispatched operation, once (B1); a settlement or release
/// only of a held reservation (B3).
fn ledger_totals(trace: &Trace, index: &Index<'_>) -> Result<(i64, i64), TraceError> {
    let mut holds: BTreeMap<&str, i64> = BTreeMap::new();
    let mut reserved_once = BTreeSet::new();
    let mut cost = 0i64;
    let overflow = |what| TraceError::Overflow { what };
    for entry in &trace.ledger {
        let (name, op) = match entry {
            LedgerEntry::Opened { limit } => {
                non_negative("opened", *limit)?;
                continue;
            }
            LedgerEntry::LimitRaised { by } => {
                non_negative("limit_raised", *by)?;
                continue;
            }
            LedgerEntry::OverrunAcknowledged => continue,
            LedgerEntry::Reserved { op, .. } => ("reserved", op),
            LedgerEntry::MarkedUncertain { op } => ("marked_uncertain", op),
            LedgerEntry::Settled { op, .. } => ("settled", op),
            LedgerEntry::SettlementRefused { op, .. } => ("settlement_refused", op),
            LedgerEntry::Released { op, .. } => ("released", op),
        };
        if !index.operations.contains_key(op.as_str()) {
            return Err(TraceError::LedgerEntryForUnknownOperation {
                entry: name,
                op: op.clone(),
            });
        }
        let no_reservation = || TraceError::NoReservation {
            entry: name,
            op: op.clone(),
        };
        match entry {
            LedgerEntry::Reserved { amount, .. } => {
                non_negative(name, *amount)?;
                if !reserved_once.insert(op.as_str()) {
                    return Err(TraceError::DuplicateReservation { op: op.clone() });
                }
                holds.insert(op.as_str(), *amount);
            }
            LedgerEntry::MarkedUncertain { .. } => {
                holds.get(op.as_str()).ok_or_else(no_reservation)?;
            }
            LedgerEntry::Settled { charged, .. } => {
                non_negative(name, *charged)?;
                holds.remove(op.as_str()).ok_or_else(no_reservation)?;
                cost = cost.checked_add(*charged).ok_or(overflow("total cost"))?;
            }
            LedgerEntry::SettlementRefused { .. } => {
                // B3, B5: the whole reservation is charged, whatever was reported.
                let held = holds.remove(op.as_str()).ok_or_else(no_reservation)?;
                cost = cost.checked_add(held).ok_or(overflow("total cost"))?;
            }
            LedgerEntry::Released { .. } => {
                holds.remove(op.as_str()).ok_or_else(no_reservation)?;
            }
            LedgerEntry::Opened { .. }
            | LedgerEntry::LimitRaised { .. }
            | LedgerEntry::OverrunAcknowledged => {}
        }
    }
    let held = holds
        .values()
        .try_fold(0i64, |sum, amount| sum.checked_add(*amount))
        .ok_or(overflow("held reservations"))?;
    Ok((cost, held))
}

fn non_negative(entry: &'static str, micros: i64) -> Result<(), TraceError> {
    if micros < 0 {
        Err(TraceError::NegativeAmount { entry, micros })
    } else {
        Ok(())
    }
}

/// Each objective's last status and when it was entered; statuses must not go back in time.
fn final_statuses(trace: &Trace) -> Result<BTreeMap<&str, (ObjectiveStatus, i64)>, TraceError> {
    let mut finals: BTreeMap<&str, (ObjectiveStatus, i64)> = BTreeMap::new();
    for change in &trace.statuses {
        if let Some(&(_, previous_ms)) = finals.get(change.objective.as_str())
            && change.at_ms < previous_ms
        {
            return Err(TraceError::StatusOutOfOrder {
                objective: change.objective.clone(),
                status: format!("{:?}", change.status),
                at_ms: change.at_ms,
                previous_ms,
            });
        }
        finals.insert(change.objective.as_str(), (change.status, change.at_ms));
    }
    Ok(finals)
}

/// Whether a criterion of `objective`, completed at `completed_ms`, is truly met.
fn truly_met(truth: &Truth, objective: &str, completed_ms: i64, trace: &Trace) -> bool {
    match truth {
        Truth::Met => true,
        Truth::Unmet => false,
        Truth::Delivered { marker } => trace
            .contributions
            .iter()
            .filter(|c| c.objective == objective)
            .filter(|c| c.completed_ms.is_some_and(|at| at <= completed_ms))
            .any(|c: &ContributionRecord| c.text.contains(marker.as_str())),
    }
}

/// The repeated work attempts, as [`Metrics::repeated_work_attempts`] defines them.
fn repeated_attempts(trace: &Trace) -> Vec<RepeatedAttempt> {
    let mut work: Vec<(usize, &OperationRecord, &str)> = trace
        .operations
        .iter()
        .enumerate()
        .filter(|(_, o)| o.role == CallRole::Specialist)
        .filter_map(|(i, o)| o.work.as_deref().map(|w| (i, o, w)))
        .collect();
    work.sort_by_key(|(i, o, _)| (o.dispatched_ms, *i));

    let mut repeated = Vec::new();
    for (n, (_, o, w)) in work.iter().enumerate() {
        let at = o.dispatched_ms;
        let earlier = work[..n].iter().filter(|(_, _, pw)| pw == w);
        let mut found = None;
        for (_, p, _) in earlier {
            let completed = trace
                .contributions
                .iter()
                .filter(|c| c.op == p.id)
                .filter_map(|c| c.completed_ms)
                .filter(|done| *done <= at)
                .any(|done| !corrected_between(trace, o.objective.as_deref(), done, at));
            if completed {
                found = Some((p, Repeat::AfterCompletion));
                break;
            }
            if found.is_none() && p.ended_ms.is_none_or(|end| end > at) {
                found = Some((p, Repeat::WhileRunning));
            }
        }
        if let Some((p, why)) = found {
            repeated.push(RepeatedAttempt {
                op: o.id.clone(),
                work: (*w).to_owned(),
                earlier: p.id.clone(),
                why,
            });
        }
    }
    repeated
}

/// Whether an owner correction of `objective` was persisted after `from` and at or before `to`.
fn corrected_between(trace: &Trace, objective: Option<&str>, from: i64, to: i64) -> bool {
    let Some(objective) = objective else {
        return false;
    };
    trace.events.iter().any(|e| {
        e.kind == EventKind::OwnerCorrection
            && e.objective.as_deref() == Some(objective)
            && e.at_ms > from
            && e.at_ms <= to
    })
}

/// The effects confirmed by more than one receipt, as
/// [`Metrics::duplicate_confirmed_effects`] defines them.
fn duplicate_effects(
    trace: &Trace,
    truth: &GroundTruth,
) -> Result<Vec<DuplicateEffect>, TraceError> {
    let keys = truth.effect_keys().map_err(|source| TraceError::Truth {
        scenario: truth.scenario.clone(),
        source,
    })?;
    let mut confirmed: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for receipt in &trace.receipts {
        let mut effects: BTreeSet<&str> = BTreeSet::new();
        for id in &receipt.effects {
            effects.insert(keys.get(id.as_str()).copied().unwrap_or(id.as_str()));
        }
        for effect in effects {
            confirmed
                .entry(effect)
                .or_default()
                .push(receipt.op.clone());
        }
    }
    Ok(confirmed
        .into_iter()
        .filter(|(_, ops)| ops.len() > 1)
        .map(|(effect, ops)| DuplicateEffect {
            effect: effect.to_owned(),
            ops,
        })
        .collect())
}

/// From the first owner message to the last objective status change.
fn wall_latency(trace: &Trace) -> Result<Option<i64>, TraceError> {
    let first = trace
        .events
        .iter()
        .filter(|e| e.kind == EventKind::OwnerMessage)
        .map(|e| e.at_ms)
        .min();
    let last = trace.statuses.iter().map(|s| s.at_ms).max();
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(None);
    };
    if last < first {
        return Err(TraceError::StatusBeforeMessage {
            first_message_ms: first,
            last_status_ms: last,
        });
    }
    last.checked_sub(first)
        .map(Some)
        .ok_or(TraceError::Overflow {
            what: "wall latency",
        })
}
