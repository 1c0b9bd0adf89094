//! The loader: a run's [`Trace`] read back from the stores through their public ports only —
//! the Room's history (`RoomStore::history`), its events, its state at each revision
//! (`RoomStore::state_at`) and the records of its closed objectives, its operations
//! (`WorkflowStore::room_operations`), its ledger rows and the contents contributions name
//! (`ArtifactStore`), as the table in [`crate::trace`] says. It reads no process output and no
//! in-memory state: what it returns is what the stores kept.

use std::collections::{BTreeMap, BTreeSet};

use agentroom_ports::domain::engine::{
    CallBrief, CallResult, ReasonerResult, ReviewerResult, SpecialistResult,
};
use agentroom_ports::domain::event::{Event, EventBody, EventKind};
use agentroom_ports::domain::ids::{EventId, ObjectiveId, OperationId, RoomId};
use agentroom_ports::domain::ledger::LedgerEntry as DomainEntry;
use agentroom_ports::domain::objective::{Objective, ObjectiveStatus};
use agentroom_ports::domain::plan::TaskState;
use agentroom_ports::domain::review::Contribution;
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::{
    ArtifactStore, HistoryEntry, OperationRecord as StoredOperation, Revision, RoomStore,
    StoreError, WorkflowStore,
};

use crate::trace::{
    Confirmation, ContributionRecord, CriterionVerdict, DecisionRecord, EventRecord, InputKind,
    LedgerEntry, LogLine, Mode, ObjectiveRecord, OperationRecord, ReceiptRecord, ResolutionOutcome,
    ResolutionRecord, ResultKind, ReviewRecord, StatusChange, Trace,
};

/// Why a run's trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A store failed.
    #[error("reading the trace of room {room}: {source}")]
    Store {
        /// The Room.
        room: RoomId,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// The Room is not in the store.
    #[error("room {0} is not in the store")]
    NoRoom(RoomId),
    /// A history row names an input kind this loader does not know.
    #[error("room {room}: revision {revision} decided an unknown input kind `{input}`")]
    UnknownInput {
        /// The Room.
        room: RoomId,
        /// The revision.
        revision: i64,
        /// The kind as stored.
        input: String,
    },
    /// A history row accepted an event the store does not hold.
    #[error("room {room}: revision {revision} accepted event {event}, which is not stored")]
    MissingEvent {
        /// The Room.
        room: RoomId,
        /// The revision.
        revision: i64,
        /// The event.
        event: EventId,
    },
    /// A contribution's body is not stored (it cannot be judged by its text).
    #[error("room {room}: the body of contribution {contribution} is not stored")]
    MissingContent {
        /// The Room.
        room: RoomId,
        /// The contribution.
        contribution: String,
    },
}

/// How many history rows one read asks for.
const PAGE: usize = 512;

/// Reads the trace of `scenario` run in `mode` in `room`. `keys` names the scenario's key of
/// each owner message that may open an objective; an objective whose origin is not in it is
/// keyed `unkeyed:<event id>` (it counts against no ground truth, but its cost does).
pub async fn load_trace<S>(
    store: &S,
    room: &RoomId,
    scenario: &str,
    mode: Mode,
    keys: &BTreeMap<EventId, String>,
) -> Result<Trace, LoadError>
where
    S: RoomStore + WorkflowStore + ArtifactStore + ?Sized,
{
    let failed = |source: StoreError| LoadError::Store {
        room: room.clone(),
        source,
    };
    let mut trace = Trace::new(scenario, mode);

    // The history: every decision, in revision order.
    let mut history: Vec<HistoryEntry> = Vec::new();
    let mut after = Revision(0);
    loop {
        let page = store.history(room, after, PAGE).await.map_err(failed)?;
        let full = page.len() == PAGE;
        if let Some(last) = page.last() {
            after = last.revision;
        }
        history.extend(page);
        if !full {
            break;
        }
    }
    if history.is_empty() {
        return Err(LoadError::NoRoom(room.clone()));
    }
    let at_of: BTreeMap<i64, i64> = history
        .iter()
        .map(|h| (h.revision.0, h.at.as_millis()))
        .collect();
    let mut inputs: BTreeMap<i64, InputKind> = BTreeMap::new();
    for h in &history {
        let input = input_kind(&h.input).ok_or_else(|| LoadError::UnknownInput {
            room: room.clone(),
            revision: h.revision.0,
            input: h.input.clone(),
        })?;
        inputs.insert(h.revision.0, input);
        trace.decisions.push(DecisionRecord {
            revision: h.revision.0,
            input,
            event: h.event.map(|e| e.to_string()),
            at_ms: h.at.as_millis(),
            log: h
                .log
                .iter()
                .map(|l| LogLine {
                    objective: l.objective.map(|o| o.to_string()),
                    verdict: l.verdict,
                    rule: l.rule.map(|r| r.to_string()),
                    message: l.message.clone(),
                })
                .collect(),
        });
        // The events it accepted, at the time of the row that accepted them.
        if let Some(id) = h.event {
            let event =
                store
                    .event(room, id)
                    .await
                    .map_err(failed)?
                    .ok_or(LoadError::MissingEvent {
                        room: room.clone(),
                        revision: h.revision.0,
                        event: id,
                    })?;
            trace.events.push(event_record(&event, h.at.as_millis()));
        }
    }

    // The state at each revision: statuses, dispatches and ends of calls, completions.
    let mut walk = Walk::default();
    let mut last_state: Option<RoomState> = None;
    for h in &history {
        let state = store
            .state_at(room, h.revision)
            .await
            .map_err(failed)?
            .ok_or_else(|| LoadError::NoRoom(room.clone()))?;
        walk.observe(&state, h.revision.0, h.at.as_millis());
        last_state = Some(state);
    }
    // Objectives that left the live state: their records hold how they ended.
    let records = store.all_objective_records(room).await.map_err(failed)?;
    let mut contributions: BTreeMap<String, Contribution> = BTreeMap::new();
    let mut objectives: BTreeMap<ObjectiveId, Objective> = BTreeMap::new();
    if let Some(state) = &last_state {
        for o in state.objectives() {
            objectives.insert(o.id(), o.clone());
        }
        for (id, c) in state.contributions() {
            contributions.insert(id.to_string(), c.clone());
        }
    }
    for record in &records {
        let id = record.id();
        // It left the live state at the first revision after its last one live.
        let left = walk
            .last_live
            .get(&id)
            .and_then(|r| at_of.range(r + 1..).next())
            .map(|(r, at)| (*r, *at));
        if let Some((revision, at)) = left {
            walk.record_final(&record.objective, revision, at);
            for c in &record.contributions {
                walk.completions_in(&record.objective, c.id().to_string(), at);
            }
        }
        for c in &record.contributions {
            contributions.insert(c.id().to_string(), c.clone());
        }
        objectives.insert(id, record.objective.clone());
    }

    for (id, objective) in &objectives {
        let origin = objective.origin();
        let key = keys
            .get(&origin)
            .cloned()
            .unwrap_or_else(|| format!("unkeyed:{origin}"));
        trace.objectives.push(ObjectiveRecord {
            id: id.to_string(),
            key,
        });
        for review in objective.reviews() {
            trace.reviews.push(ReviewRecord {
                id: review.id().to_string(),
                objective: id.to_string(),
                reviewer: review.reviewer().to_string(),
                report_version: review.report().version,
                verdicts: review
                    .verdicts()
                    .iter()
                    .map(|v| CriterionVerdict {
                        criterion: v.criterion.to_string(),
                        verdict: v.verdict,
                    })
                    .collect(),
                at_ms: walk
                    .reviews
                    .get(&review.id().to_string())
                    .copied()
                    .unwrap_or_default(),
            });
        }
    }
    trace.statuses = walk.statuses.clone();
    trace.statuses.sort_by_key(|s| s.at_ms);

    // Contributions, with their text as stored.
    for (id, c) in &contributions {
        let text = contribution_text(store, room, c).await?;
        trace.contributions.push(ContributionRecord {
            id: id.clone(),
            objective: c.objective().to_string(),
            task: c.task().to_string(),
            op: c.op().to_string(),
            author: c.author().to_string(),
            text,
            completed_ms: walk.completed.get(id).copied(),
        });
    }

    // The ledger, in order; the operations it charged (B3) are those that ran.
    let rows = store.ledger(room).await.map_err(failed)?;
    trace.ledger = rows.iter().map(ledger_entry).collect();
    let charged: BTreeSet<OperationId> = rows
        .iter()
        .filter_map(|row| match row {
            DomainEntry::Settled { op, .. } | DomainEntry::SettlementRefused { op, .. } => {
                Some(*op)
            }
            _ => None,
        })
        .collect();

    // Operations, their receipts and resolutions.
    let operations = store.room_operations(room, None).await.map_err(failed)?;
    let key_of: BTreeMap<String, String> = trace
        .objectives
        .iter()
        .map(|o| (o.id.clone(), o.key.clone()))
        .collect();
    let contribution_ops: BTreeMap<String, &Contribution> = contributions
        .values()
        .map(|c| (c.op().to_string(), c))
        .collect();
    for stored in &operations {
        let op = stored.op();
        let id = op.to_string();
        let objective = stored.request.objective.map(|o| o.to_string());
        let (task, work) = match &stored.request.brief {
            CallBrief::Execute(brief) => {
                let spec = serde_json::json!({
                    "title": brief.title,
                    "capability": brief.capability,
                    "inputs": brief.inputs,
                    "kind": brief.kind,
                });
                let scenario_key = objective
                    .as_ref()
                    .and_then(|o| key_of.get(o))
                    .cloned()
                    .unwrap_or_default();
                (
                    Some(brief.identity.to_string()),
                    Some(format!("{scenario_key}/{}/{spec}", brief.key)),
                )
            }
            _ => (None, None),
        };
        let dispatched = walk.dispatched.get(&op).copied();
        let ended = walk.ended.get(&op).copied();
        trace.operations.push(OperationRecord {
            id: id.clone(),
            role: stored.request.role,
            objective,
            principal: stored.request.principal.as_ref().map(|p| p.to_string()),
            task,
            work,
            reservation_micros: stored.request.reservation.micros(),
            dispatched_ms: dispatched.map(|(_, at)| at).unwrap_or_default(),
            ended_ms: ended.map(|(_, at)| at),
            resolution: stored.resolution.as_ref().map(|r| ResolutionRecord {
                outcome: match r.outcome {
                    agentroom_ports::ResolutionOutcome::Succeeded => ResolutionOutcome::Succeeded,
                    agentroom_ports::ResolutionOutcome::Failed => ResolutionOutcome::Failed,
                },
                operator: r.operator.clone(),
                at_ms: r.at.as_millis(),
            }),
        });
        if let Some(receipt) = receipt_of(stored, ended, &inputs, &charged, &contribution_ops) {
            trace.receipts.push(receipt);
        }
    }
    Ok(trace)
}

/// What the walk over the states found, by revision time.
#[derive(Default)]
struct Walk {
    /// Each objective's status when it last changed.
    current: BTreeMap<ObjectiveId, ObjectiveStatus>,
    statuses: Vec<StatusChange>,
    /// The last revision each objective was in the live state.
    last_live: BTreeMap<ObjectiveId, i64>,
    /// When each operation was first in the state (reserved), and when it left it.
    dispatched: BTreeMap<OperationId, (i64, i64)>,
    ended: BTreeMap<OperationId, (i64, i64)>,
    live_ops: BTreeSet<OperationId>,
    /// When each contribution first completed a task.
    completed: BTreeMap<String, i64>,
    /// When each review was first recorded.
    reviews: BTreeMap<String, i64>,
}

impl Walk {
    fn observe(&mut self, state: &RoomState, revision: i64, at: i64) {
        for o in state.objectives() {
            self.last_live.insert(o.id(), revision);
            self.status(o.id(), o.status(), at);
            for c in completed_contributions(o) {
                self.completed.entry(c).or_insert(at);
            }
            for r in o.reviews() {
                self.reviews.entry(r.id().to_string()).or_insert(at);
            }
        }
        let now: BTreeSet<OperationId> = state.operations().keys().copied().collect();
        for op in &now {
            self.dispatched.entry(*op).or_insert((revision, at));
        }
        for op in self.live_ops.difference(&now) {
            self.ended.entry(*op).or_insert((revision, at));
        }
        self.live_ops = now;
    }

    fn status(&mut self, objective: ObjectiveId, status: ObjectiveStatus, at: i64) {
        if self.current.get(&objective) != Some(&status) {
            self.current.insert(objective, status);
            self.statuses.push(StatusChange {
                objective: objective.to_string(),
                status,
                at_ms: at,
            });
        }
    }

    /// A closed objective's record: its final status, reviews and completions at the
    /// revision it left the live state.
    fn record_final(&mut self, objective: &Objective, _revision: i64, at: i64) {
        self.status(objective.id(), objective.status(), at);
        for r in objective.reviews() {
            self.reviews.entry(r.id().to_string()).or_insert(at);
        }
    }

    fn completions_in(&mut self, objective: &Objective, contribution: String, at: i64) {
        if completed_contributions(objective).contains(&contribution) {
            self.completed.entry(contribution).or_insert(at);
        }
    }
}

/// The contributions that complete a task of any plan version of `objective`.
fn completed_contributions(objective: &Objective) -> BTreeSet<String> {
    objective
        .plans()
        .iter()
        .flat_map(|p| p.tasks())
        .filter_map(|t| match t.state() {
            TaskState::Completed { contribution } => Some(contribution.to_string()),
            _ => None,
        })
        .collect()
}

/// The receipt the trace shows for `stored`: the runner's (its receipt, applied by a
/// `call_returned` decision) or a reconciler's confirmation (a `reconciled` decision after
/// which the ledger charged it: confirmed executed, B3; one confirmed never executed is
/// released instead).
fn receipt_of(
    stored: &StoredOperation,
    ended: Option<(i64, i64)>,
    inputs: &BTreeMap<i64, InputKind>,
    charged: &BTreeSet<OperationId>,
    contributions: &BTreeMap<String, &Contribution>,
) -> Option<ReceiptRecord> {
    let id = stored.op().to_string();
    let (revision, at) = ended?;
    let input = inputs.get(&revision).copied()?;
    let contribution = contributions.get(&id);
    let effects = |c: Option<&&Contribution>| -> Vec<String> {
        c.map(|c| {
            c.artifacts()
                .iter()
                .map(|a| format!("{}:{}", task_key(c), a.name))
                .collect()
        })
        .unwrap_or_default()
    };
    match input {
        InputKind::Reconciled => charged.contains(&stored.op()).then(|| ReceiptRecord {
            op: id.clone(),
            confirmed_by: Confirmation::Reconciler,
            result: match (&stored.receipt, contribution) {
                (Some(r), _) => result_kind(&r.result),
                (None, Some(_)) => ResultKind::Contribution,
                (None, None) => ResultKind::NoResult,
            },
            effects: effects(contribution),
            at_ms: at,
        }),
        _ => stored.receipt.as_ref().map(|r| ReceiptRecord {
            op: id.clone(),
            confirmed_by: Confirmation::Runner,
            result: result_kind(&r.result),
            effects: effects(contribution),
            at_ms: at,
        }),
    }
}

/// A contribution's task key: the part of its task identity after the plan or prefix.
fn task_key(c: &Contribution) -> String {
    let identity = c.task().to_string();
    match identity.rsplit_once('/') {
        Some((_, key)) => key.to_owned(),
        None => identity,
    }
}

fn result_kind(result: &CallResult) -> ResultKind {
    match result {
        CallResult::Reasoner(ReasonerResult::Proposal(_)) => ResultKind::Proposal,
        CallResult::Reasoner(ReasonerResult::FormatError { .. })
        | CallResult::Reviewer(ReviewerResult::FormatError { .. }) => ResultKind::FormatError,
        CallResult::Specialist(SpecialistResult::Contribution(_)) => ResultKind::Contribution,
        CallResult::Specialist(SpecialistResult::Failure { .. }) => ResultKind::Failure,
        CallResult::Reviewer(ReviewerResult::Review(_)) => ResultKind::Review,
    }
}

/// A contribution's text as stored: its body, then its artifacts as Markdown sections.
async fn contribution_text<S>(
    store: &S,
    room: &RoomId,
    c: &Contribution,
) -> Result<String, LoadError>
where
    S: ArtifactStore + ?Sized,
{
    let mut text = String::new();
    if let Some(body) = c.body() {
        let content = store
            .content(room, &body.digest)
            .await
            .map_err(|source| LoadError::Store {
                room: room.clone(),
                source,
            })?
            .ok_or_else(|| LoadError::MissingContent {
                room: room.clone(),
                contribution: c.id().to_string(),
            })?;
        text.push_str(&String::from_utf8_lossy(&content.bytes));
        text.push('\n');
    }
    for a in c.artifacts() {
        text.push_str(&format!("## {}\n{}\n", a.name, a.content));
    }
    Ok(text)
}

fn event_record(event: &Event, at_ms: i64) -> EventRecord {
    let (kind, objective) = match &event.body {
        EventBody::OwnerMessage { .. } => (EventKind::OwnerMessage, None),
        EventBody::OwnerCorrection { objective, .. } => {
            (EventKind::OwnerCorrection, Some(*objective))
        }
        EventBody::ExplicitReference { objective, .. } => {
            (EventKind::ExplicitReference, Some(*objective))
        }
        EventBody::InternalReceipt { objective, .. } => (EventKind::InternalReceipt, *objective),
        EventBody::WaitAck { objective, .. } => (EventKind::WaitAck, Some(*objective)),
    };
    EventRecord {
        id: event.id.to_string(),
        kind,
        author: event.author.to_string(),
        objective: objective.map(|o| o.to_string()),
        at_ms,
    }
}

/// The trace's input kind of a history row's `input` text (its serde name).
fn input_kind(input: &str) -> Option<InputKind> {
    serde_json::from_value(serde_json::Value::String(input.to_owned())).ok()
}

fn ledger_entry(entry: &DomainEntry) -> LedgerEntry {
    match entry {
        DomainEntry::Opened { limit } => LedgerEntry::Opened {
            limit: limit.micros(),
        },
        DomainEntry::Reserved { op, amount } => LedgerEntry::Reserved {
            op: op.to_string(),
            amount: amount.micros(),
        },
        DomainEntry::MarkedUncertain { op } => LedgerEntry::MarkedUncertain { op: op.to_string() },
        DomainEntry::Settled {
            op,
            reserved,
            charged,
        } => LedgerEntry::Settled {
            op: op.to_string(),
            reserved: reserved.micros(),
            charged: charged.micros(),
        },
        DomainEntry::SettlementRefused {
            op,
            reserved,
            reported,
        } => LedgerEntry::SettlementRefused {
            op: op.to_string(),
            reserved: reserved.micros(),
            reported: reported.micros(),
        },
        DomainEntry::Released { op, amount } => LedgerEntry::Released {
            op: op.to_string(),
            amount: amount.micros(),
        },
        DomainEntry::LimitRaised { by } => LedgerEntry::LimitRaised { by: by.micros() },
        DomainEntry::OverrunAcknowledged => LedgerEntry::OverrunAcknowledged,
    }
}
