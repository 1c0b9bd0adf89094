//! The durable call (DESIGN.md "A durable call, step by step", steps 1–4), generic over the
//! ports: transaction 1 commits the decision with its operations, reservations and this
//! runner's lease (B1); the provider is called under heartbeats; transaction 2 commits the
//! receipt fenced on the generation together with the settled state (B3), reloading and
//! deciding again on a conflict. If transaction 2 cannot commit, the receipt is recorded alone
//! so recovery hands it to the owner (D2).

use std::borrow::Cow;

use agentroom_ports::domain::engine::{Charge, Decision, Effect, Input, InputError};
use agentroom_ports::domain::money::UsdMicros;
use agentroom_ports::domain::state::RoomState;
use agentroom_ports::{
    Clock, Commit, CommitError, OperationStatus, Receipt, ReceiptWrite, RoomStore, StoredRoom,
    WorkflowStore,
};

use agentroom_ports::domain::ids::OperationId;

use crate::config::RunnerConfig;
use crate::crash::{self, crash_point};
use crate::error::WorkflowError;
use crate::lease::{self, Execution};
use crate::provider::Provider;
use crate::runner::Leased;

/// Decides an input against a Room's state: the caller's `decide` with its own `Env` (clock,
/// ids derived from the input, capability catalog). Workflows never decide by themselves.
pub trait Decider: Send + Sync {
    /// `decide(state, input, env)`.
    fn decide(&self, state: &RoomState, input: Input) -> Result<Decision, InputError>;
}

/// The ports one durable call uses.
pub struct DurableCall<'a, S: ?Sized, P: ?Sized, D: ?Sized> {
    store: &'a S,
    provider: &'a P,
    decider: &'a D,
    clock: &'a dyn Clock,
    config: &'a RunnerConfig,
}

/// Transaction 1 committed: the Room after it and the calls leased to this runner.
#[derive(Debug, Clone)]
pub struct Reserved {
    /// The Room as committed.
    pub room: StoredRoom,
    /// The calls to run, leased at generation 1.
    pub calls: Vec<Leased>,
}

/// How one call of a durable call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallEnd {
    /// Transaction 2 committed the receipt and the settled state: actual charged, the rest
    /// released (B3).
    Applied,
    /// No receipt: marked uncertain, reservation held, never replayed (D2).
    Uncertain {
        /// Why.
        reason: String,
    },
    /// Nothing reached the provider after bounded retries: settled at zero.
    NotSent {
        /// Why.
        reason: String,
    },
    /// Another runner holds the operation: the result was dropped.
    Fenced,
    /// Transaction 2 could not commit: the receipt is recorded alone, for recovery to hand to
    /// the owner.
    ReceiptedOnly {
        /// Why transaction 2 gave up.
        why: String,
    },
    /// Transaction 2 could not commit and there is no receipt to record: recovery finds the
    /// operation (uncertain, or in flight until its lease expires).
    Unsettled {
        /// Why.
        why: String,
    },
}

/// One call's end, with the Room after transaction 2 when it committed.
#[derive(Debug, Clone)]
pub struct Completed {
    /// The operation.
    pub op: OperationId,
    /// How it ended.
    pub end: CallEnd,
    /// The Room after transaction 2, if it committed.
    pub room: Option<StoredRoom>,
    /// The decision transaction 2 committed, if it did (its effects beyond the settlement:
    /// notifications are in the outbox; new calls are in `next`).
    pub decision: Option<Decision>,
    /// Calls transaction 2's decision created, leased to this runner at generation 1; run
    /// them (e.g. with [`crate::Runner::run`]) or their leases expire and recovery marks
    /// them uncertain.
    pub next: Vec<Leased>,
}

/// Whether `decision` leaves operation `op` settled in the Room (no longer holding its
/// reservation): only then may a commit mark the operation applied.
pub fn settled_by(decision: &Decision, op: OperationId) -> bool {
    decision
        .state
        .operation(op)
        .is_none_or(|operation| !operation.state().is_open())
}

/// A whole durable call.
#[derive(Debug, Clone)]
pub struct DurableOutcome {
    /// Transaction 1.
    pub reserved: Reserved,
    /// Each call's end, in the decision's order.
    pub calls: Vec<Completed>,
}

enum Settle {
    Committed(Box<(StoredRoom, Decision)>),
    Fenced,
    GaveUp(String),
}

fn calls_of(room: &agentroom_ports::domain::ids::RoomId, decision: &Decision) -> Vec<Leased> {
    decision
        .effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::ReserveAndCall(request) => Some(Leased::created(room.clone(), request.clone())),
            _ => None,
        })
        .collect()
}

impl<'a, S, P, D> DurableCall<'a, S, P, D>
where
    S: RoomStore + WorkflowStore + ?Sized,
    P: Provider + ?Sized,
    D: Decider + ?Sized,
{
    /// The ports and settings of durable calls.
    pub fn new(
        store: &'a S,
        provider: &'a P,
        decider: &'a D,
        clock: &'a dyn Clock,
        config: &'a RunnerConfig,
    ) -> Self {
        Self {
            store,
            provider,
            decider,
            clock,
            config,
        }
    }

    /// Steps 1–4: commits `decision` (decided against `room`) as transaction 1, runs each of
    /// its calls concurrently, each settled by its own transaction 2. A conflict in
    /// transaction 1 is [`WorkflowError::Conflict`]: reload and decide the input again.
    #[tracing::instrument(skip_all, fields(room = %room.state.room(), revision = %room.revision))]
    pub async fn run(
        &self,
        room: &StoredRoom,
        decision: &Decision,
        input: &str,
    ) -> Result<DurableOutcome, WorkflowError> {
        let reserved = self.reserve(room, decision, input).await?;
        let calls = futures_util::future::join_all(
            reserved
                .calls
                .iter()
                .map(|call| self.complete(call, &reserved.room)),
        )
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        Ok(DurableOutcome { reserved, calls })
    }

    /// Transaction 1: the decision's state, operation rows, reservations and this runner's
    /// lease, in one commit (B1).
    pub async fn reserve(
        &self,
        room: &StoredRoom,
        decision: &Decision,
        input: &str,
    ) -> Result<Reserved, WorkflowError> {
        let id = room.state.room().clone();
        let grant = self.config.lease_grant();
        let commit = Commit::decided(
            &id,
            &room.state,
            decision,
            self.clock.now(),
            input,
            Some(&grant),
        );
        let revision = self.store.commit(&id, room.revision, commit).await?;
        crash_point(crash::AFTER_RESERVE);
        Ok(Reserved {
            room: StoredRoom {
                state: decision.state.clone(),
                revision,
            },
            calls: calls_of(&id, decision),
        })
    }

    /// Steps 3–4 for one call leased in transaction 1; `after` is the Room as transaction 1
    /// left it (a conflict reloads it).
    #[tracing::instrument(skip_all, fields(op = %call.op(), generation = call.generation))]
    pub async fn complete(
        &self,
        call: &Leased,
        after: &StoredRoom,
    ) -> Result<Completed, WorkflowError> {
        let op = call.op();
        let execution = lease::execute(
            self.store,
            self.provider,
            self.config,
            call.generation,
            &call.request,
        )
        .await;
        let (input, kind, receipt, applied, end) = match execution {
            Execution::Returned(receipt) => {
                crash_point(crash::AFTER_CALL);
                let input = Input::CallReturned {
                    op,
                    charge: receipt.charge,
                    result: receipt.result.clone(),
                };
                (
                    input,
                    "call_returned",
                    Some(receipt),
                    true,
                    CallEnd::Applied,
                )
            }
            Execution::Fenced => {
                tracing::warn!("fenced: another runner holds the operation; result dropped");
                return Ok(completed(op, CallEnd::Fenced));
            }
            Execution::Uncertain(reason) => {
                tracing::warn!(
                    reason,
                    "the call is uncertain: reservation held, never replayed"
                );
                if !lease::mark_uncertain(self.store, self.config, op, call.generation).await? {
                    return Ok(completed(op, CallEnd::Fenced));
                }
                crash_point(crash::AFTER_UNCERTAIN);
                let input = Input::CallUncertain { op };
                (
                    input,
                    "call_uncertain",
                    None,
                    false,
                    CallEnd::Uncertain { reason },
                )
            }
            Execution::NotSent(reason) => {
                tracing::warn!(reason, "nothing reached the provider: settling at zero");
                let input = Input::CallSettled {
                    op,
                    charge: Charge::Actual(UsdMicros::ZERO),
                };
                (
                    input,
                    "call_settled",
                    None,
                    true,
                    CallEnd::NotSent { reason },
                )
            }
        };
        match self
            .settle(call, after, input, kind, receipt.as_ref(), applied)
            .await?
        {
            Settle::Committed(committed) => {
                let (room, decision) = *committed;
                crash_point(crash::AFTER_SETTLE);
                let next = calls_of(room.state.room(), &decision);
                Ok(Completed {
                    op,
                    end,
                    room: Some(room),
                    decision: Some(decision),
                    next,
                })
            }
            Settle::Fenced => {
                tracing::warn!("transaction 2 fenced: result dropped");
                Ok(completed(op, CallEnd::Fenced))
            }
            Settle::GaveUp(why) => match receipt {
                Some(receipt) => self.receipt_alone(call, &receipt, why).await,
                None => {
                    tracing::warn!(why, "transaction 2 gave up; recovery will find the call");
                    Ok(completed(op, CallEnd::Unsettled { why }))
                }
            },
        }
    }

    /// Transaction 2, reloading and deciding again on a conflict (bounded).
    async fn settle(
        &self,
        call: &Leased,
        after: &StoredRoom,
        input: Input,
        kind: &str,
        receipt: Option<&Receipt>,
        applied: bool,
    ) -> Result<Settle, WorkflowError> {
        let op = call.op();
        let id = &call.room;
        let grant = self.config.lease_grant();
        // The Room as transaction 1 left it, until a conflict makes this call reload it.
        let mut current = Cow::Borrowed(after);
        for attempt in 0..=self.config.conflict_retries() {
            let decision = match self.decider.decide(&current.state, input.clone()) {
                Ok(decision) => decision,
                Err(err) => return Ok(Settle::GaveUp(format!("deciding it failed: {err}"))),
            };
            let mut commit = Commit::decided(
                id,
                &current.state,
                &decision,
                self.clock.now(),
                kind,
                Some(&grant),
            );
            if let Some(receipt) = receipt {
                commit.receipts.push((op, call.generation, receipt.clone()));
            }
            // Marked applied only when the decision really settled it: the domain may refuse
            // (e.g. a charge it cannot add) and then the receipt waits for recovery.
            if applied && settled_by(&decision, op) {
                commit.applied.push(op);
            }
            match self.store.commit(id, current.revision, commit).await {
                Ok(revision) => {
                    let room = StoredRoom {
                        state: decision.state.clone(),
                        revision,
                    };
                    return Ok(Settle::Committed(Box::new((room, decision))));
                }
                Err(CommitError::Conflict { actual, .. }) => {
                    tracing::info!(attempt, %actual, "transaction 2 conflicted: reloading");
                    current = Cow::Owned(
                        lease::retrying(self.config, "load", || self.store.load(id))
                            .await?
                            .ok_or_else(|| WorkflowError::UnknownRoom(id.clone()))?,
                    );
                }
                Err(CommitError::Fenced { .. }) => return Ok(Settle::Fenced),
                Err(err) => return Ok(Settle::GaveUp(err.to_string())),
            }
        }
        Ok(Settle::GaveUp(format!(
            "still conflicting after {} reloads",
            self.config.conflict_retries()
        )))
    }

    /// Transaction 2 gave up: the receipt alone, fenced on the generation.
    async fn receipt_alone(
        &self,
        call: &Leased,
        receipt: &Receipt,
        why: String,
    ) -> Result<Completed, WorkflowError> {
        let op = call.op();
        tracing::warn!(why, "transaction 2 gave up: recording the receipt alone");
        let written =
            lease::write_receipt(self.store, self.config, op, call.generation, receipt).await?;
        if written == ReceiptWrite::Recorded {
            crash_point(crash::AFTER_RECEIPT);
            return Ok(completed(op, CallEnd::ReceiptedOnly { why }));
        }
        // A failed commit may have gone through after all: then it is applied.
        let record = self.store.operation(op).await?;
        let end = match record {
            Some(record)
                if record.status == OperationStatus::Applied
                    && record.generation == call.generation
                    && record.receipt.as_ref() == Some(receipt) =>
            {
                CallEnd::Applied
            }
            _ => CallEnd::Fenced,
        };
        Ok(completed(op, end))
    }
}

fn completed(op: OperationId, end: CallEnd) -> Completed {
    Completed {
        op,
        end,
        room: None,
        decision: None,
        next: Vec::new(),
    }
}
